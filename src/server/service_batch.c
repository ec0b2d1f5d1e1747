/* server/service_batch.c: the ClaimBatch method on the ready leader
 * (service_batch.h).
 *
 * A batch is its items, each served as a Claim alone would be, in order:
 *   1. its conversion and bounds (convert_claim_in), its settings
 *      (convert_check_claim_settings): a refusal is that item's
 *      INVALID_ARGUMENT, applied FALSE;
 *   2. the caller's right to claim in its scope (authz_check with the
 *      Claim right): a refusal is that item's PERMISSION_DENIED;
 *   3. replica_submit as an ordinary Claim command: the items that pass go
 *      into the proposal queue one after the other in one loop turn, held
 *      (replica_submit_hold) so that none is proposed before the last is
 *      queued, so they are consecutive commands of the log (one entry, or
 *      the next entries, with nothing between them: the queue is FIFO and
 *      this turn adds nothing else), applied in order and answered only
 *      from apply, after the majority fsync. Quotas are the state machine's,
 * per command, at apply. Each item's answer is packed as soon as it is known
 * (the fsm's result is borrowed for its callback only), by batch_pack.h's
 * direct encoder into one buffer of the batch's; the call is answered
 * when the last one is. The answer's items are concatenated in the request's
 * order: the encoding of a repeated message field is its elements one after the
 * other, each with its field head, which is packed with the item. So when
 * the items were answered in the request's order (every item applied, in
 * the log's order: the common case), the buffer is the ClaimBatchResponse
 * and is sent as it is; otherwise its items are copied once, in order.
 * An item whose answer would take the answer past RPC_CLAIM_BATCH_BYTES_MAX
 * (large stored results) is answered UNKNOWN instead: retried alone with
 * its request id it gets its answer, and the frame stays bounded. */
#include "server/service_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/log.h"
#include "common/pbwire.h"
#include "rpc/status.h"
#include "server/authz.h"
#include "server/batch_pack.h"
#include "server/convert.h"
#include "server/leader.h"
#include "server/reply.h"
#include "server/server.h"

struct batch;

/* One item's request in the Raft layer. */
struct batch_item
{
    struct batch *b;
    uint32_t i;
    enum fsm_kind kind;
    uint8_t request_id[FSM_REQUEST_ID_LEN];
    struct replica_req req; /* req.data = this */
};

/* off[i] of an item not answered yet, and of one whose answer could not be
 * encoded (out of memory: answered UNKNOWN at the end). */
#define SLOT_WAITING SIZE_MAX
#define SLOT_EMPTY   (SIZE_MAX - 1)

struct batch
{
    struct server *s;
    struct rpc_call *call;
    size_t n;
    size_t left;     /* items not answered yet */
    bool submitting; /* inside serve: the answer waits for its end */
    /* Every item's packed ClaimBatchItem with its field head (the
     * ClaimBatchResponse's items field), in the order they were answered
     * (not the request's: refusals come before results), in one buffer:
     * no allocation per item. Item i is out[off[i]..+len[i]). When they
     * were answered in the request's order, out is the answer itself. */
    uint8_t *out;
    size_t out_len, out_cap;
    size_t *off; /* [n] */
    size_t *len; /* [n] */
    struct batch_item items[];
};

static void batch_free(struct batch *b)
{
    free(b->out);
    free(b->off);
    free(b->len);
    free(b);
}

/* Room for @more bytes at b->out + b->out_len. */
static bool out_reserve(struct batch *b, size_t more)
{
    size_t cap = b->out_cap;
    uint8_t *p;

    if (b->out_len + more <= cap) {
        return true;
    }
    /* A first guess that holds the common answer (an ACCEPTED result is
     * ~70 bytes), then doubling: O(1) reallocations per batch. */
    if (cap == 0) {
        cap = b->n * 96;
    }
    while (cap < b->out_len + more) {
        cap *= 2;
    }
    p = realloc(b->out, cap);
    if (p == NULL) {
        return false;
    }
    b->out = p;
    b->out_cap = cap;
    return true;
}

/* ClaimBatchResponse.items (once_rpc.proto). */
#define ANSWER_ITEMS 1u

/* Item @i's answer: @res (status OK), or the error. Out of memory leaves
 * the slot empty: answered UNKNOWN at the end (it may have applied). */
static void put(struct batch *b,
                size_t i,
                enum rpc_status status,
                enum rpc_applied applied,
                const char *error,
                const Once__Rpc__Result *res)
{
    Once__Rpc__ClaimBatchItem it = ONCE__RPC__CLAIM_BATCH_ITEM__INIT;
    struct batch_item_plan plan;
    size_t len, need;

    ONCE_ASSERT(i < b->n && b->off[i] == SLOT_WAITING && b->left > 0,
                "each item is answered once");
    it.status = (Once__Rpc__Status)status;
    it.applied = (Once__Rpc__Applied)applied;
    if (error != NULL) {
        size_t n = strnlen(error, RPC_ERROR_MAX);

        it.error.data = (uint8_t *)(uintptr_t)error;
        it.error.len = n;
    }
    it.result = (Once__Rpc__Result *)(uintptr_t)res;
    len = batch_item_size(&it, &plan);
    need = pbw_size_len_req(ANSWER_ITEMS, len);
    if (out_reserve(b, need)) {
        uint8_t *p = pbw_put_len_head(b->out + b->out_len, ANSWER_ITEMS, len);
        size_t packed = batch_item_pack(&it, &plan, p);

        ONCE_ASSERT(packed == len, "packed as sized");
        b->off[i] = b->out_len;
        b->len[i] = need;
        b->out_len += need;
    } else {
        b->off[i] = SLOT_EMPTY;
        b->len[i] = 0;
    }
    b->left--;
}

static void put_replica_error(struct batch *b, size_t i, int rv)
{
    char text[RPC_ERROR_MAX + 1];
    enum rpc_applied applied;
    enum rpc_status status = rpc_status_of(rv, true, &applied);

    snprintf(text, sizeof text, "%s", replica_strerror(rv));
    put(b, i, status, applied, text, NULL);
}

/* Item @i, packed as an UNKNOWN that a retry of it alone resolves. */
static void put_unknown(struct batch *b, size_t i, const char *why)
{
    /* Its earlier bytes, if any, stay unused in b->out. */
    b->off[i] = SLOT_WAITING;
    b->left++; /* put() counts it answered again */
    put(b, i, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN, why, NULL);
}

/* Every item answered: the ClaimBatchResponse, items in order. */
static void answer(struct batch *b)
{
    struct rpc_reply r;
    size_t total = 0, o = 0;
    uint8_t *body;
    bool in_order = true;

    for (size_t i = 0; i < b->n; i++) {
        if (b->off[i] == SLOT_EMPTY) {
            put_unknown(b, i, "out of memory encoding this item's answer");
        }
        if (total + b->len[i] > RPC_CLAIM_BATCH_BYTES_MAX) {
            put_unknown(b, i,
                        "the batch's answer is full (large results): retry "
                        "this item with its request id");
        }
        /* UNTESTED: out of memory again, the item is empty (a head of
         * length 0 below): the client refuses the answer as malformed,
         * which is "outcome unknown" for every item, retried with their
         * request ids. */
        in_order = in_order && b->off[i] == total && b->len[i] > 0;
        total += b->len[i] > 0 ? b->len[i] : pbw_size_len_req(ANSWER_ITEMS, 0);
    }
    if (in_order) {
        /* The common case: out holds the answer already (the items were
         * applied in order and none was refused before the proposal). */
        body = NULL;
    } else if ((body = malloc(total)) == NULL) {
        reply_error(b->call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                    "out of memory encoding the answer", NULL);
        batch_free(b);
        return;
    } else {
        for (size_t i = 0; i < b->n; i++) {
            if (b->len[i] == 0) {
                o = (size_t)(pbw_put_len_head(body + o, ANSWER_ITEMS, 0) -
                             body);
                continue;
            }
            memcpy(body + o, b->out + b->off[i], b->len[i]);
            o += b->len[i];
        }
        ONCE_ASSERT(o == total, "the answer is the items' encodings");
    }
    memset(&r, 0, sizeof r);
    r.status = RPC_STATUS_OK;
    r.applied = RPC_APPLIED_UNSPECIFIED;
    r.body = body != NULL ? body : b->out;
    r.body_len = total;
    rpc_call_reply(b->call, &r);
    free(body);
    batch_free(b);
}

static void maybe_answer(struct batch *b)
{
    if (b->left == 0 && !b->submitting) {
        answer(b);
    }
}

static void item_cb(struct replica_req *req,
                    int status,
                    const struct fsm_result *res)
{
    struct batch_item *it = req->data;
    struct batch *b = it->b;
    struct convert_result_buf rb;

    if (status != 0 || res == NULL) {
        put_replica_error(b, it->i, status != 0 ? status : REPLICA_E_INTERNAL);
    } else {
        metrics_result(&b->s->metrics, RPC_METHOD_CLAIM, it->kind, res);
        convert_result_out(res, it->request_id, &rb);
        put(b, it->i, RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED, NULL, &rb.res);
    }
    maybe_answer(b);
}

int service_check_claim_batch(const ProtobufCMessage *msg,
                              struct service_in *in,
                              char *why)
{
    (void)in;
    return convert_claim_batch_check((const void *)msg, why);
}

/* Item @i up to its submission; false: answered already. */
static bool item_submit(struct batch *b,
                        size_t i,
                        const Once__Rpc__ClaimRequest *item,
                        const struct authz_caller *who)
{
    struct server *s = b->s;
    struct batch_item *it = &b->items[i];
    struct authz_req ar;
    struct fsm_cmd cmd;
    struct fsm_result refused;
    struct convert_result_buf rb;
    char why[CONVERT_WHY_SIZE];
    int rv;

    if (convert_claim_in(item, &cmd, why) != 0 ||
        convert_check_claim_settings(&cmd.u.claim, fsm_settings(s->rep.fsm),
                                     why) != 0) {
        put(b, i, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE, why, NULL);
        return false;
    }
    /* max_uses/sliding before the schema that applies them: the refusal a
     * single Claim would get (an upgraded node must not drop them). */
    if (convert_check_claim_schema(&cmd.u.claim, fsm_schema_version(s->rep.fsm),
                                   &refused) != 0) {
        convert_result_out(&refused, item->request_id.data, &rb);
        put(b, i, RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED, NULL, &rb.res);
        return false;
    }
    memset(&ar, 0, sizeof ar);
    ar.method = RPC_METHOD_CLAIM; /* an item has exactly a claim's rights */
    ar.scope = cmd.u.claim.scope;
    ar.scope_len = cmd.u.claim.scope_len;
    if (authz_check(who, &ar, why) != 0) {
        /* Counted and logged as a refused call is: a tenant probing other
         * scopes through batches shows in the same metric. */
        metrics_item_denied(&s->metrics);
        if (log_enabled(LOG_DEBUG)) {
            log_kv(LOG_DEBUG, "permission denied",
                   "method=%s item=%zu "
                   "reason=%s",
                   rpc_method_name(RPC_METHOD_CLAIM_BATCH), i,
                   log_quote(why, (char[300]){0}, 300));
        }
        put(b, i, RPC_STATUS_PERMISSION_DENIED, RPC_APPLIED_FALSE, why, NULL);
        return false;
    }
    it->b = b;
    it->i = (uint32_t)i;
    it->kind = cmd.u.claim.kind;
    memcpy(it->request_id, item->request_id.data, FSM_REQUEST_ID_LEN);
    it->req.data = it;
    rv = replica_submit(&s->rep, &it->req, &cmd, item_cb);
    if (rv != 0) {
        put_replica_error(b, i, rv);
        return false;
    }
    return true;
}

void service_serve_claim_batch(struct server *s,
                               struct rpc_call *call,
                               const ProtobufCMessage *msg,
                               const struct service_in *in)
{
    const Once__Rpc__ClaimBatchRequest *r = (const void *)msg;
    size_t n = r->n_items;
    /* Not calloc: an item's replica_req is ~1.3 KiB (a lookup's identity)
     * that only its own fields' writers read, and zeroing 256 of them was
     * ~500 instructions per item (callgrind). Each item is set up by
     * item_submit before it is used. */
    struct batch *b = malloc(sizeof *b + n * sizeof b->items[0]);

    ONCE_ASSERT(n >= 1 && n <= RPC_CLAIM_BATCH_MAX, "checked by the check");
    if (b != NULL) {
        memset(b, 0, sizeof *b);
        b->off = malloc(n * sizeof *b->off);
        b->len = calloc(n, sizeof *b->len);
    }
    if (b == NULL || b->off == NULL || b->len == NULL) {
        if (b != NULL) {
            batch_free(b);
        }
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        b->off[i] = SLOT_WAITING;
    }
    b->s = s;
    b->call = call;
    b->n = n;
    b->left = n;
    b->submitting = true;
    /* From here a passed deadline is "outcome unknown". */
    rpc_call_mark_sent(call);
    /* One group: the items share the next proposal instead of the first
     * going alone (replica_submit_hold). */
    replica_submit_hold(&s->rep);
    for (size_t i = 0; i < n; i++) {
        (void)item_submit(b, i, r->items[i], &in->who);
    }
    replica_submit_release(&s->rep);
    b->submitting = false;
    maybe_answer(b);
}
