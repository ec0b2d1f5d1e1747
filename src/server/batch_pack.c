/* server/batch_pack.c: one ClaimBatchItem's wire encoding (batch_pack.h).
 *
 * Each message is written by one function that either counts (w->p NULL)
 * or writes; a submessage's length prefix comes from a counting pass of
 * it (the Result's, the big one, is counted once, by batch_item_size). The
 * rules are protobuf-c's for proto3 fields without presence: a scalar, enum or
 * bool equal to 0, a string NULL or empty, and bytes of length 0 are left out;
 * a submessage is written when its pointer is not NULL, even empty; fields go
 * in number order (the .proto declares them so, and protobuf-c packs in
 * declaration order). */
#include "server/batch_pack.h"

#include <string.h>

#include "common/assert.h"

struct w
{
    uint8_t *p; /* NULL: count only */
    size_t n;   /* bytes written (or counted) so far */
};

static inline void varint(struct w *w, uint64_t v)
{
    if (w->p == NULL) {
        /* 7 bits a byte: 1 + (index of the highest bit set) / 7. */
        w->n += 1 + (size_t)((63 - __builtin_clzll(v | 1)) / 7);
        return;
    }
    while (v >= 0x80) {
        w->p[w->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->p[w->n++] = (uint8_t)v;
}

static inline void tag(struct w *w, unsigned field, unsigned wire)
{
    varint(w, ((uint64_t)field << 3) | wire);
}

static void f_u64(struct w *w, unsigned field, uint64_t v)
{
    if (v != 0) {
        tag(w, field, 0);
        varint(w, v);
    }
}

/* An enum or int32: negative values are 10-byte varints, as protobuf's. */
static void f_enum(struct w *w, unsigned field, int v)
{
    if (v != 0) {
        tag(w, field, 0);
        varint(w, (uint64_t)(int64_t)v);
    }
}

static void f_bool(struct w *w, unsigned field, protobuf_c_boolean v)
{
    if (v) {
        tag(w, field, 0);
        varint(w, 1);
    }
}

static void f_bytes(struct w *w, unsigned field, const uint8_t *d, size_t len)
{
    if (len == 0) {
        return;
    }
    tag(w, field, 2);
    varint(w, len);
    if (w->p != NULL) {
        memcpy(w->p + w->n, d, len);
    }
    w->n += len;
}

static void f_string(struct w *w, unsigned field, const char *s)
{
    if (s != NULL && s[0] != '\0') {
        f_bytes(w, field, (const uint8_t *)s, strlen(s));
    }
}

typedef void (*body_fn)(struct w *w, const void *msg);

/* A submessage: its tag, its length (a counting pass), its body. */
static void f_msg(struct w *w, unsigned field, const void *msg, body_fn body)
{
    struct w c = {NULL, 0};

    if (msg == NULL) {
        return;
    }
    body(&c, msg);
    tag(w, field, 2);
    varint(w, c.n);
    if (w->p == NULL) {
        w->n += c.n;
        return;
    }
    c.p = w->p + w->n;
    c.n = 0;
    body(&c, msg);
    w->n += c.n;
}

static void token_body(struct w *w, const void *msg)
{
    const Once__Rpc__OwnerToken *t = msg;

    f_u64(w, 1, t->group_id);
    f_u64(w, 2, t->index);
    f_u64(w, 3, t->slot);
}

static void attempt_body(struct w *w, const void *msg)
{
    const Once__Rpc__Attempt *a = msg;

    f_bytes(w, 1, a->request_id.data, a->request_id.len);
    f_bytes(w, 2, a->execution_id.data, a->execution_id.len);
    f_u64(w, 3, a->index);
    f_u64(w, 4, a->time_ms);
    f_enum(w, 5, (int)a->outcome);
    f_bool(w, 6, a->retry);
}

static void result_body(struct w *w, const void *msg)
{
    const Once__Rpc__Result *r = msg;

    f_enum(w, 1, (int)r->outcome);
    f_bool(w, 2, r->retry);
    f_bytes(w, 3, r->request_id.data, r->request_id.len);
    f_bytes(w, 4, r->first_request_id.data, r->first_request_id.len);
    f_u64(w, 5, r->first_index);
    f_u64(w, 6, r->first_time_ms);
    f_u64(w, 7, r->attempts_total);
    for (size_t i = 0; i < r->n_attempts; i++) {
        ONCE_ASSERT(r->attempts[i] != NULL, "repeated elements are set");
        f_msg(w, 8, r->attempts[i], attempt_body);
    }
    f_bool(w, 9, r->has_owner_token);
    f_msg(w, 10, r->owner_token, token_body);
    f_bytes(w, 11, r->result.data, r->result.len);
    f_bytes(w, 12, r->stored_error.data, r->stored_error.len);
    f_u64(w, 13, r->retry_after_ms);
    f_string(w, 14, r->reason);
    f_enum(w, 15, (int)r->kind);
    f_enum(w, 16, (int)r->state);
    f_u64(w, 17, r->expires_ms);
    f_u64(w, 18, r->lease_expires_ms);
    f_u64(w, 19, r->owner_attempt);
    f_u64(w, 20, r->log_time_ms);
    f_u64(w, 21, r->max_uses);
    f_u64(w, 22, r->uses);
    f_u64(w, 23, r->uses_left);
    f_bool(w, 24, r->sliding);
}

/* @result_len: the Result's encoded size (a counting pass of it, made
 * once by batch_item_size). */
static void item_body(struct w *w,
                      const Once__Rpc__ClaimBatchItem *it,
                      size_t result_len)
{
    f_enum(w, 1, (int)it->status);
    f_enum(w, 2, (int)it->applied);
    f_bytes(w, 3, it->error.data, it->error.len);
    if (it->result == NULL) {
        return;
    }
    tag(w, 4, 2);
    varint(w, result_len);
    if (w->p == NULL) {
        w->n += result_len;
        return;
    }
    {
        struct w r = {w->p + w->n, 0};

        result_body(&r, it->result);
        ONCE_ASSERT(r.n == result_len, "the Result written as counted");
        w->n += r.n;
    }
}

size_t batch_item_size(const Once__Rpc__ClaimBatchItem *msg, size_t *result_len)
{
    struct w w = {NULL, 0};

    *result_len = 0;
    if (msg->result != NULL) {
        result_body(&w, msg->result);
        *result_len = w.n;
        w.n = 0;
    }
    item_body(&w, msg, *result_len);
    return w.n;
}

size_t batch_item_pack(const Once__Rpc__ClaimBatchItem *msg,
                       size_t result_len,
                       uint8_t *out)
{
    struct w w = {out, 0};

    ONCE_ASSERT(out != NULL, "a buffer of batch_item_size bytes");
    item_body(&w, msg, result_len);
    return w.n;
}

/* protobuf-c's size of an unknown field kept from a decode: its tag's
 * varint (field number and wire type) and its bytes (get_tag_size and
 * unknown_field_get_packed_size in protobuf-c.c). */
static size_t unknown_size(const ProtobufCMessage *m)
{
    size_t n = 0;

    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        struct w w = {NULL, 0};

        varint(&w, (uint64_t)u->tag << 3);
        n += w.n + u->len;
    }
    return n;
}

static void request_body(struct w *w, const Once__Rpc__ClaimRequest *c)
{
    f_bytes(w, 1, c->scope.data, c->scope.len);
    f_bytes(w, 2, c->key.data, c->key.len);
    f_bytes(w, 3, c->request_id.data, c->request_id.len);
    f_bytes(w, 4, c->execution_id.data, c->execution_id.len);
    f_enum(w, 5, (int)c->kind);
    f_u64(w, 6, c->ttl_ms);
    f_bool(w, 7, c->has_ts);
    f_u64(w, 8, c->ts_ms);
    f_u64(w, 9, c->window_ms);
    f_bytes(w, 10, c->payload_hash.data, c->payload_hash.len);
    f_u64(w, 11, c->lease_ms);
    f_u64(w, 12, c->max_uses);
    f_bool(w, 13, c->sliding);
    w->n += unknown_size(&c->base);
}

size_t batch_request_size(const Once__Rpc__ClaimBatchRequest *msg)
{
    struct w w = {NULL, 0};

    for (size_t i = 0; i < msg->n_items; i++) {
        struct w c = {NULL, 0};

        ONCE_ASSERT(msg->items[i] != NULL, "repeated elements are set");
        request_body(&c, msg->items[i]);
        tag(&w, 1, 2);
        varint(&w, c.n);
        w.n += c.n;
    }
    return w.n + unknown_size(&msg->base);
}
