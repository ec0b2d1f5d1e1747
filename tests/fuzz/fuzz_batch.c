/* fuzz_batch: libFuzzer target for "decode a batch and apply it".
 *
 * Input: one flag byte, then a sequence of batches, each a little-endian u16
 * length followed by that many bytes (a short last chunk is taken as it
 * is). tests/fuzz/make_corpus.c writes seeds in this format.
 *
 *   flags bit 0: 1 = bootstrap first (at index 1), 0 = start unbootstrapped
 *   flags bits 1-2: settings (0 small max_records, 1 small max_bytes,
 *                   2 tiny windows and leases, 3 defaults)
 *   flags bits 3-7: after which batch (0..31) the second instance is
 *                   restored from the first's snapshot
 *
 * Batches are applied with fsm_apply at indexes 2, 3, ... to two instances;
 * the second is restored from the first's snapshot once in the middle (see
 * the flags) and once at the end (a restore per batch would cost most of
 * the run: each builds a whole instance). Checked, besides "no crash, no
 * leak, no UB":
 *   - both instances return the same code and the same result for every
 *     command (determinism, and a restored instance behaves the same);
 *   - snapshot -> restore -> snapshot gives identical bytes;
 *   - both instances' snapshots are identical after every batch;
 *   - a command that adds a record never takes fsm_n_records over
 *     max_records, and no command takes fsm_bytes up past max_bytes;
 *   - no command but QuotaSet takes a quota's usage up past its limits;
 *   - results are well-formed (enums in range, lengths within limits).
 * A batch that returns FSM_E_SCHEMA stops the input (the node would stop).
 *
 * Run: ./tests/fuzz/fuzz_batch -dict=tests/fuzz/batch.dict -max_total_time=60
 * WORKDIR tests/fuzz/corpus/batch (seeds: tests/fuzz/make_corpus.c). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BATCHES 64
#define T0          1700000000000ull

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_batch: %s:%d: check failed: %s\n", __FILE__, \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

struct sink
{
    const struct fsm *f;
    uint64_t n_records; /* last seen */
    uint64_t bytes;     /* last seen */
    uint64_t digest;
    size_t n;
    size_t n_quotas;                         /* last seen */
    struct fsm_quota_info q[FSM_QUOTAS_MAX]; /* last seen usage */
};

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const uint8_t *b = p;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_u(uint64_t h, uint64_t v)
{
    return fnv(h, &v, sizeof v);
}

static void check_result(const struct fsm_result *r)
{
    CHECK(r->cmd >= FSM_CMD_INVALID && r->cmd <= FSM_CMD_QUOTA_SET);
    CHECK(r->outcome >= FSM_ACCEPTED && r->outcome <= FSM_FAILED_PRECONDITION);
    if (r->outcome == FSM_INVALID_ARGUMENT) {
        CHECK(r->reason != NULL);
    }
    /* The owner token goes to its owner and to Lookup only. */
    if (r->has_owner_token) {
        CHECK(r->has_record && r->kind == FSM_KIND_IDEMPOTENT);
        CHECK((r->cmd == FSM_CMD_CLAIM && r->outcome == FSM_ACCEPTED) ||
              (r->cmd == FSM_CMD_COMPLETE && r->outcome == FSM_COMPLETED) ||
              (r->cmd == FSM_CMD_RELEASE &&
               (r->outcome == FSM_RELEASED || r->outcome == FSM_FAILED)) ||
              (r->cmd == FSM_CMD_LOOKUP && r->outcome == FSM_FOUND));
    } else {
        CHECK(r->owner_token.group_id == 0 && r->owner_token.index == 0 &&
              r->owner_token.slot == 0);
    }
    if (!r->has_record) {
        return;
    }
    CHECK(r->kind == FSM_KIND_NONCE || r->kind == FSM_KIND_IDEMPOTENT);
    if (r->kind == FSM_KIND_NONCE) {
        CHECK(r->state == FSM_STATE_SEEN);
    } else {
        CHECK(r->state >= FSM_STATE_PENDING && r->state <= FSM_STATE_FAILED);
        CHECK(r->owner_attempt >= 1);
    }
    CHECK(r->expires_ms > r->first_time_ms);
    CHECK(r->result_len <= FSM_RESULT_MAX);
    CHECK(r->stored_error_len <= FSM_ERROR_MAX);
    CHECK(r->result_len == 0 || r->result != NULL);
    CHECK(r->stored_error_len == 0 || r->stored_error != NULL);
    CHECK(r->n_attempt_list <= 1 + FSM_ATTEMPTS_LAST);
    CHECK(r->n_attempt_list <= r->attempts);
    for (size_t i = 0; i < r->n_attempt_list; i++) {
        CHECK(r->attempt_list[i] != NULL);
        CHECK(r->attempt_list[i]->execution_id_len <= FSM_EXECUTION_ID_MAX);
    }
}

static uint64_t digest(uint64_t h, const struct fsm_result *r)
{
    h = fnv_u(h, r->cmd);
    h = fnv_u(h, r->outcome);
    h = fnv_u(h, r->retry);
    h = fnv_u(h, r->has_record);
    if (r->reason != NULL) {
        h = fnv(h, r->reason, strlen(r->reason));
    }
    if (!r->has_record) {
        return h;
    }
    h = fnv_u(h, r->kind);
    h = fnv_u(h, r->state);
    h = fnv(h, r->first_request_id, FSM_REQUEST_ID_LEN);
    h = fnv_u(h, r->first_index);
    h = fnv_u(h, r->first_time_ms);
    h = fnv_u(h, r->expires_ms);
    h = fnv_u(h, r->attempts);
    h = fnv_u(h, r->has_owner_token);
    h = fnv_u(h, r->owner_token.group_id);
    h = fnv_u(h, r->owner_token.index);
    h = fnv_u(h, r->owner_token.slot);
    h = fnv_u(h, r->owner_attempt);
    h = fnv_u(h, r->lease_expires_ms);
    h = fnv_u(h, r->retry_after_ms);
    h = fnv_u(h, r->result_len);
    if (r->result_len > 0) {
        h = fnv(h, r->result, r->result_len);
    }
    h = fnv_u(h, r->stored_error_len);
    if (r->stored_error_len > 0) {
        h = fnv(h, r->stored_error, r->stored_error_len);
    }
    h = fnv_u(h, r->n_attempt_list);
    for (size_t i = 0; i < r->n_attempt_list; i++) {
        const struct fsm_attempt *a = r->attempt_list[i];

        h = fnv(h, a->request_id, FSM_REQUEST_ID_LEN);
        h = fnv_u(h, a->index);
        h = fnv_u(h, a->time_ms);
        h = fnv_u(h, a->outcome);
        h = fnv_u(h, a->retry);
        h = fnv(h, a->execution_id, a->execution_id_len);
    }
    return h;
}

/* Usage grows past a quota's limit only when the quotas themselves change
 * (a new pattern charges what its scopes already hold). */
static void check_quotas(struct sink *s, const struct fsm_result *r)
{
    size_t n = fsm_n_quotas(s->f);

    CHECK(n <= FSM_QUOTAS_MAX);
    for (size_t i = 0; i < n; i++) {
        struct fsm_quota_info q;

        CHECK(fsm_quota(s->f, i, &q));
        if (r->cmd != FSM_CMD_QUOTA_SET && n == s->n_quotas) {
            if (q.records > s->q[i].records && q.max_records != 0) {
                CHECK(q.records <= q.max_records);
            }
            if (q.bytes > s->q[i].bytes && q.max_bytes != 0) {
                CHECK(q.bytes <= q.max_bytes);
            }
        }
        s->q[i] = q;
    }
    s->n_quotas = n;
}

static void emit_cb(void *arg, size_t i, const struct fsm_result *r)
{
    struct sink *s = arg;
    const struct fsm_settings *st = fsm_settings(s->f);
    uint64_t n = fsm_n_records(s->f);
    uint64_t bytes = fsm_bytes(s->f);

    CHECK(i == s->n);
    s->n++;
    check_result(r);
    /* Only a claim adds a record, and only below the limits in force. */
    if (n > s->n_records) {
        CHECK(r->cmd == FSM_CMD_CLAIM && r->outcome == FSM_ACCEPTED);
        CHECK(n == s->n_records + 1);
        CHECK(n <= st->max_records);
        CHECK(bytes <= st->max_bytes);
    }
    /* Bytes grow only within max_bytes: a Complete or terminal Release
     * stores into the room its claim reserved, never past the limit. */
    if (bytes > s->bytes) {
        CHECK(bytes <= st->max_bytes);
    }
    check_quotas(s, r);
    s->n_records = n;
    s->bytes = bytes;
    s->digest = digest(s->digest, r);
}

static uint8_t *snap(const struct fsm *f, size_t *len)
{
    uint8_t *buf;

    *len = fsm_snapshot_size(f);
    buf = malloc(*len);
    CHECK(buf != NULL);
    fsm_snapshot_write(f, buf, *len);
    return buf;
}

static void bootstrap(struct fsm *f, unsigned variant)
{
    static struct fsm_bootstrap b;
    struct fsm_cmd c;
    struct sink s = {.f = f};

    memset(&b, 0, sizeof b);
    for (int i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        b.cluster_id[i] = (uint8_t)(i + 1);
        b.hash_key[i] = (uint8_t)(0x5a ^ i);
    }
    b.group_id = 1;
    switch (variant) {
        case 0:
            b.settings.max_records = 16;
            break;
        case 1:
            b.settings.max_bytes = 4096;
            break;
        case 2:
            b.settings.max_window_ms = 10;
            b.settings.max_skew_ms = 5;
            b.settings.max_ttl_ms = 2000;
            b.settings.max_lease_ms = 100;
            b.settings.max_records = 64;
            break;
        default:
            break; /* zero: defaults */
    }
    b.n_members = 2;
    for (size_t i = 0; i < 2; i++) {
        b.members[i].id = i + 1;
        snprintf(b.members[i].raft_addr, sizeof b.members[i].raft_addr,
                 "127.0.0.1:%zu", 7000 + i);
        snprintf(b.members[i].client_addr, sizeof b.members[i].client_addr,
                 "127.0.0.1:%zu", 8000 + i);
        b.members[i].role = FSM_ROLE_VOTER;
    }
    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_BOOTSTRAP;
    c.u.bootstrap = &b;
    CHECK(fsm_apply_cmds(f, 1, FSM_SCHEMA_VERSION, T0, &c, 1, emit_cb, &s) ==
          0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fsm *f, *g;
    uint8_t flags;
    int restore_after;
    uint64_t index = 2;
    size_t pos = 1;

    if (size < 1) {
        return 0;
    }
    flags = data[0];
    restore_after = flags >> 3;
    f = fsm_new();
    g = fsm_new();
    CHECK(f != NULL && g != NULL);
    if (flags & 1) {
        bootstrap(f, (flags >> 1) & 3);
        bootstrap(g, (flags >> 1) & 3);
    }
    for (int b = 0; b < MAX_BATCHES && pos < size; b++, index++) {
        size_t len = size - pos;
        const uint8_t *batch;
        uint8_t *copy, *s1, *s2;
        size_t l1, l2;
        struct sink sf = {.f = f}, sg = {.f = g};
        char errmsg[256];
        int rv1, rv2;

        if (len >= 2) {
            size_t want = (size_t)data[pos] | (size_t)data[pos + 1] << 8;

            pos += 2;
            len = size - pos;
            if (want < len) {
                len = want;
            }
        } else {
            pos = size;
            len = 0;
        }
        batch = data + pos;
        pos += len;
        /* An exact-size copy: reads past the batch are caught. */
        copy = malloc(len ? len : 1);
        CHECK(copy != NULL);
        if (len > 0) {
            memcpy(copy, batch, len);
        }
        sf.n_records = fsm_n_records(f);
        sf.bytes = fsm_bytes(f);
        sg.n_records = fsm_n_records(g);
        sg.bytes = fsm_bytes(g);
        rv1 = fsm_apply(f, index, copy, len, emit_cb, &sf);
        rv2 = fsm_apply(g, index, copy, len, emit_cb, &sg);
        free(copy);
        CHECK(rv1 == 0 || rv1 == FSM_E_MALFORMED || rv1 == FSM_E_SCHEMA);
        CHECK(rv1 == rv2);
        CHECK(sf.n == sg.n);
        CHECK(sf.digest == sg.digest);
        if (rv1 == FSM_E_SCHEMA) {
            break; /* the node stops here */
        }
        s1 = snap(f, &l1);
        s2 = snap(g, &l2);
        CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0);
        free(s2);
        if (b == restore_after || pos >= size || b + 1 == MAX_BATCHES) {
            /* Restore the second instance from the first: round trip. */
            CHECK(fsm_restore(g, s1, l1, errmsg) == 0);
            s2 = snap(g, &l2);
            CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0);
            CHECK(fsm_n_records(f) == fsm_n_records(g));
            CHECK(fsm_bytes(f) == fsm_bytes(g));
            CHECK(fsm_now(f) == fsm_now(g));
            CHECK(fsm_last_index(f) == fsm_last_index(g));
            free(s2);
        }
        free(s1);
    }
    fsm_free(f);
    fsm_free(g);
    return 0;
}
