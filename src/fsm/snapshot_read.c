/* fsm/snapshot_read.c: restore, the reading side of the snapshot
 * encoding (snapshot.c writes it and has the layout).
 *
 * Every byte comes from a file or a peer, so each field is checked against
 * its bounds and the format's rules (set_err names the offset); a
 * snapshot that breaks one is refused whole.
 *
 * Restore parses into a fresh instance and swaps it in only when every byte
 * checked out, so a bad snapshot leaves the running state untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/crc32c.h"
#include "common/sim_mutation.h"
#include "fsm/fsm_int.h"

#define REC_FIXED  SNAP_REC_FIXED
#define HEAD_FIXED SNAP_HEAD_FIXED

struct rbuf
{
    const uint8_t *p;
    const uint8_t *end;
    bool bad;
};

static bool r_need(struct rbuf *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return false;
    }
    ONCE_ASSERT(r->p != NULL, "an rbuf reads a buffer read_all checked");
    return true;
}

static const uint8_t *r_bytes(struct rbuf *r, size_t n)
{
    const uint8_t *p = r->p;

    if (!r_need(r, n)) {
        return NULL;
    }
    r->p += n;
    return p;
}

static uint8_t r_u8(struct rbuf *r)
{
    return r_need(r, 1) ? *r->p++ : 0;
}

static uint16_t r_u16(struct rbuf *r)
{
    uint16_t v;

    if (!r_need(r, 2)) {
        return 0;
    }
    v = (uint16_t)(r->p[0] | (r->p[1] << 8));
    r->p += 2;
    return v;
}

static uint32_t r_u32(struct rbuf *r)
{
    uint32_t v = 0;

    if (!r_need(r, 4)) {
        return 0;
    }
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | r->p[i];
    }
    r->p += 4;
    return v;
}

static uint64_t r_u64(struct rbuf *r)
{
    uint64_t v = 0;

    if (!r_need(r, 8)) {
        return 0;
    }
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | r->p[i];
    }
    r->p += 8;
    return v;
}

static void set_err(char *errmsg, const char *what, size_t off)
{
    err_printf(errmsg, "snapshot: %s at offset %zu", what, off);
}

#define BAD(why)                                        \
    do {                                                \
        set_err(errmsg, (why), (size_t)(rb->p - base)); \
        return FSM_E_MALFORMED;                         \
    } while (0)

static int read_ext(struct fsm *g,
                    struct rbuf *rb,
                    const uint8_t *base,
                    uint32_t v,
                    struct rec *r,
                    char *errmsg)
{
    struct rec_ext *e;
    size_t n_att;
    const uint8_t *p;

    r->ext = slab_alloc(&g->slab, sizeof *e);
    if (r->ext == 0) {
        fsm_panic("out of memory (restore)");
    }
    e = slab_mut(&g->slab, r->ext);
    memset(e, 0, sizeof *e);
    e->lease_expires_ms = r_u64(rb);
    e->owner_group = r_u32(rb);
    e->owner_index = r_u64(rb);
    e->owner_slot = r_u32(rb);
    e->owner_attempt = r_u32(rb);
    p = r_bytes(rb, FSM_REQUEST_ID_LEN);
    if (p != NULL) {
        memcpy(e->owner_request_id, p, FSM_REQUEST_ID_LEN);
    }
    e->payload_hash_len = r_u8(rb);
    if (e->payload_hash_len > FSM_PAYLOAD_HASH_MAX) {
        BAD("payload hash too long");
    }
    p = r_bytes(rb, e->payload_hash_len);
    if (p != NULL) {
        memcpy(e->payload_hash, p, e->payload_hash_len);
    }
    e->stored_kind = r_u8(rb);
    e->stored_len = r_u32(rb);
    if (e->stored_kind > 2 || (e->stored_kind == 0 && e->stored_len != 0) ||
        (e->stored_kind == 1 && e->stored_len > FSM_RESULT_MAX) ||
        (e->stored_kind == 2 && e->stored_len > FSM_ERROR_MAX)) {
        BAD("bad stored result or error");
    }
    p = r_bytes(rb, e->stored_len);
    if (p == NULL) {
        BAD("truncated");
    }
    if (e->stored_len > 0) {
        uint8_t *copy = malloc(e->stored_len);
        if (copy == NULL) {
            fsm_panic("out of memory (restore)");
        }
        memcpy(copy, p, e->stored_len);
        fsm_stored_set(g, r->ext, e, copy);
    }
    fsm_bytes_move(g, v, (int64_t)fsm_ext_bytes(e));
    e->attempts_total = r_u32(rb);
    n_att = r_u8(rb);
    if (n_att > 1 + FSM_ATTEMPTS_LAST || n_att > e->attempts_total) {
        BAD("bad attempt count");
    }
    for (size_t i = 0; i < n_att; i++) {
        struct rec_attempt *a;
        uint8_t req[FSM_REQUEST_ID_LEN];
        uint64_t index, time;
        uint8_t outcome, retry, len;
        uint32_t h;

        p = r_bytes(rb, FSM_REQUEST_ID_LEN);
        if (p != NULL) {
            memcpy(req, p, sizeof req);
        }
        index = r_u64(rb);
        time = r_u64(rb);
        outcome = r_u8(rb);
        retry = r_u8(rb);
        len = r_u8(rb);
        if (rb->bad || outcome < FSM_ACCEPTED ||
            outcome > FSM_FAILED_PRECONDITION || retry > 1 ||
            len > FSM_EXECUTION_ID_MAX) {
            BAD("bad attempt");
        }
        p = r_bytes(rb, len);
        if (p == NULL) {
            BAD("truncated");
        }
        h = slab_alloc(&g->slab, ATTEMPT_HDR_SIZE + len);
        if (h == 0) {
            fsm_panic("out of memory (restore)");
        }
        a = slab_mut(&g->slab, h);
        memcpy(a->request_id, req, sizeof req);
        a->index = index;
        a->time_ms = time;
        a->outcome = outcome;
        a->retry = retry;
        a->execution_id_len = len;
        memcpy(a->execution_id, p, len);
        fsm_bytes_move(g, v, (int64_t)slab_size(ATTEMPT_HDR_SIZE + len));
        if (i == 0) {
            e->att_first = h;
        } else {
            e->att_last[i - 1] = h;
            e->att_n_last++;
        }
    }
    if (SIM_MUTANT(SIM_MUT_FORGET_ATTEMPTS)) {
        /* Seeded bug: the ledger's total forgotten on restore, only the
         * kept attempts counted. */
        e->attempts_total = (uint32_t)n_att;
    }
    return rb->bad ? FSM_E_MALFORMED : 0;
}

/* No two of the @n request ids at @ids (16 bytes each) and @first are
 * equal: a log keeps one per accepted use. */
static bool uses_distinct(const uint8_t *first, const uint8_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *a = ids + i * FSM_REQUEST_ID_LEN;
        if (memcmp(a, first, FSM_REQUEST_ID_LEN) == 0) {
            return false;
        }
        for (size_t j = 0; j < i; j++) {
            if (memcmp(a, ids + j * FSM_REQUEST_ID_LEN, FSM_REQUEST_ID_LEN) ==
                0) {
                return false;
            }
        }
    }
    return true;
}

/* Give N-use record @r (its ext read) its uses object, allocated in full
 * as at its first claim, holding the @n_uses - 1 ids at @ids. */
static void read_uses(struct fsm *g,
                      uint32_t v,
                      struct rec *r,
                      uint16_t max_uses,
                      uint16_t n_uses,
                      const uint8_t *ids)
{
    size_t size = (size_t)FSM_REQUEST_ID_LEN * (max_uses - 1u);
    uint32_t u = slab_alloc(&g->slab, size);
    struct rec_ext *e;

    if (u == 0) {
        fsm_panic("out of memory (restore)");
    }
    memcpy(slab_mut(&g->slab, u), ids,
           (size_t)FSM_REQUEST_ID_LEN * (n_uses - 1u));
    e = slab_mut(&g->slab, r->ext);
    e->uses_h = u;
    e->max_uses = max_uses;
    e->n_uses = n_uses;
    fsm_bytes_move(g, v, (int64_t)slab_size(size));
}

/* Read one record of vp @v into @g; @prev is the previous record of the vp
 * (0 if none) for the order check. */
static int read_record(struct fsm *g,
                       struct rbuf *rb,
                       const uint8_t *base,
                       uint32_t v,
                       uint32_t prev,
                       uint32_t *prev_hash,
                       uint32_t *out,
                       char *errmsg)
{
    uint8_t flags = r_u8(rb);
    uint8_t scope_len = r_u8(rb);
    uint16_t key_len = r_u16(rb);
    uint64_t first_index = r_u64(rb);
    uint64_t first_time = r_u64(rb);
    uint64_t expires = r_u64(rb);
    const uint8_t *req = r_bytes(rb, FSM_REQUEST_ID_LEN);
    const uint8_t *id;
    enum fsm_state st = (enum fsm_state)((flags & REC_F_STATE_MASK) >> 1);
    bool idem = (flags & REC_F_IDEMPOTENT) != 0;
    const uint8_t *uses = NULL;
    uint16_t max_uses = 0, n_uses = 0;
    uint32_t ttl = 0;
    uint64_t hash;
    uint8_t has_ext;
    struct rec *r;
    uint32_t h;
    int rv;

    if (rb->bad) {
        BAD("truncated");
    }
    if ((flags & ~REC_F_SNAP_MASK) != 0 || (!idem && st != FSM_STATE_SEEN) ||
        (idem && (st < FSM_STATE_PENDING || st > FSM_STATE_FAILED)) ||
        ((flags & (REC_F_MULTI | REC_F_SLIDING)) != 0 &&
         g->schema_version < FSM_SCHEMA_NUSE) ||
        (idem && (flags & REC_F_MULTI)) || (!idem && (flags & REC_F_SLIDING))) {
        BAD("bad record kind or state");
    }
    if (scope_len < 1 || scope_len > FSM_SCOPE_MAX || key_len < 1 ||
        key_len > FSM_KEY_MAX) {
        BAD("bad identity length");
    }
    if (first_index >> 48 != 0 || first_time >> 48 != 0 ||
        expires <= first_time || (!idem && expires - first_time > UINT32_MAX)) {
        BAD("bad record times");
    }
    id = r_bytes(rb, (size_t)scope_len + key_len);
    if (flags & REC_F_MULTI) {
        max_uses = r_u16(rb);
        n_uses = r_u16(rb);
        if (rb->bad || max_uses < 2 || max_uses > FSM_MAX_USES || n_uses < 1 ||
            n_uses > max_uses) {
            BAD("bad use count");
        }
        uses = r_bytes(rb, (size_t)FSM_REQUEST_ID_LEN * (n_uses - 1u));
        if (uses == NULL || !uses_distinct(req, uses, n_uses - 1u)) {
            BAD("bad uses");
        }
    }
    if (flags & REC_F_SLIDING) {
        ttl = r_u32(rb);
        if (rb->bad || ttl == 0 || ttl > FSM_MAX_TTL_CEIL) {
            BAD("bad sliding ttl");
        }
    }
    has_ext = r_u8(rb);
    if (rb->bad || has_ext > 1 || (idem && !has_ext) ||
        ((flags & REC_F_MULTI) && !has_ext)) {
        BAD("bad record");
    }
    hash = fsm_hash(g, id, scope_len, id + scope_len, key_len);
    if ((uint32_t)(hash >> (64 - FSM_VP_BITS)) != v) {
        BAD("record in the wrong partition");
    }
    h = slab_alloc(&g->slab, rec_size(scope_len, key_len));
    if (h == 0) {
        fsm_panic("out of memory (restore)");
    }
    r = slab_mut(&g->slab, h);
    memset(r, 0, REC_HDR_SIZE);
    r->flags = flags;
    r->scope_len = scope_len;
    r->key_len = key_len;
    put48(r->first_index, first_index);
    put48(r->first_time, first_time);
    r->life_ms = idem ? ttl : (uint32_t)(expires - first_time);
    memcpy(r->request_id, req, FSM_REQUEST_ID_LEN);
    memcpy(r->id, id, (size_t)scope_len + key_len);
    fsm_bytes_move(g, v, (int64_t)slab_size(rec_size(scope_len, key_len)));
    /* From here the record is linked into the wheel so that a failure
     * below frees it with the rest of @g. */
    if (has_ext) {
        rv = read_ext(g, rb, base, v, r, errmsg);
        if (idem && rv == 0) {
            ((struct rec_ext *)slab_mut(&g->slab, r->ext))->expires_ms =
                expires;
        }
        if (max_uses != 0 && rv == 0) {
            read_uses(g, v, r, max_uses, n_uses, uses);
        }
    } else {
        rv = 0;
    }
    fsm_wheel_place(g, h);
    if (rv != 0) {
        return rv;
    }
    if (first_time > g->now) {
        BAD("record from the future");
    }
    if (expires >> WHEEL_TICK_SHIFT < g->wheel.passed) {
        BAD("record past its expiry tick"); /* a writer skips those */
    }
    if (has_ext) {
        const struct rec_ext *e = slab_ptr(&g->slab, r->ext);
        /* Only states a log can produce: a NONCE ext holds attempts only;
         * an IDEMPOTENT state matches what it stores; retention covers the
         * lease; there is an owner. */
        if (!idem && (e->lease_expires_ms | e->owner_group | e->owner_index |
                      e->owner_slot | e->owner_attempt | e->payload_hash_len |
                      e->stored_kind) != 0) {
            BAD("NONCE record with owner fields");
        }
        if (idem && (e->owner_attempt == 0 || expires < e->lease_expires_ms ||
                     (st == FSM_STATE_COMPLETED) != (e->stored_kind == 1) ||
                     (st == FSM_STATE_FAILED) != (e->stored_kind == 2))) {
            BAD("IDEMPOTENT record in an impossible state");
        }
    }
    if (prev != 0 && ((uint32_t)hash < *prev_hash ||
                      ((uint32_t)hash == *prev_hash &&
                       rec_id_cmp(slab_ptr(&g->slab, prev), r) >= 0))) {
        BAD("records out of canonical order");
    }
    *prev_hash = (uint32_t)hash;
    fsm_acct_in(g, r);
    fsm_pending_in(g, r);
    *out = h;
    return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* The restore fence of format 2 (or 3 with its flag set), its flag @on
 * already read: present, consistent, not yet due to lift. */
static int read_restore_fence(struct fsm *g,
                              struct rbuf *rb,
                              const uint8_t *base,
                              uint8_t on,
                              char *errmsg)
{
    const uint8_t *p = r_bytes(rb, FSM_CLUSTER_ID_LEN);

    if (p != NULL) {
        memcpy(g->restore_source, p, FSM_CLUSTER_ID_LEN);
    }
    g->restore_source_index = r_u64(rb);
    g->restore_time = r_u64(rb);
    g->restore_ts = r_u64(rb);
    g->restore_until = r_u64(rb);
    g->restore_lift = r_u64(rb);
    if (rb->bad || on != 1 || g->restore_time > g->now ||
        g->restore_ts < g->restore_time ||
        (g->restore_until != 0 && g->restore_until < g->restore_time) ||
        g->restore_lift < g->restore_ts || g->restore_lift < g->restore_until ||
        g->now > g->restore_lift ||
        g->restore_lift > FSM_TIME_MAX + FSM_MAX_TTL_CEIL) {
        BAD("bad restore fence");
    }
    g->restore_fence = true;
    return 0;
}

/* Format 3's quotas: 1..64 valid patterns in strictly ascending order,
 * limits not both 0, in a state whose schema applies QuotaSet. Their usage
 * is charged as the records are read. */
static int read_quotas(struct fsm *g,
                       struct rbuf *rb,
                       const uint8_t *base,
                       char *errmsg)
{
    uint32_t n = r_u32(rb);

    if (rb->bad || n < 1 || n > FSM_QUOTAS_MAX ||
        g->schema_version < FSM_SCHEMA_QUOTAS) {
        BAD("bad quota list");
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t len = r_u8(rb);
        const uint8_t *p = r_bytes(rb, len);
        uint64_t max_records = r_u64(rb), max_bytes = r_u64(rb);

        if (rb->bad || p == NULL || fsm_pattern_check(p, len) != NULL ||
            (max_records == 0 && max_bytes == 0) ||
            fsm_quota_append(g, p, len, max_records, max_bytes) != 0) {
            BAD("bad quota");
        }
    }
    return 0;
}

/* The fixed fields: format, schema, indexes, cluster identity, settings,
 * fence, quotas. Keys the hash when the state is bootstrapped. */
static int read_fixed(struct fsm *g,
                      struct rbuf *rb,
                      const uint8_t *base,
                      char *errmsg)
{
    const uint8_t *p;
    uint32_t format;
    uint8_t boot, fence;

    p = r_bytes(rb, 8);
    if (p == NULL || memcmp(p, SNAP_MAGIC, 8) != 0) {
        BAD("bad magic");
    }
    format = r_u32(rb);
    g->schema_version = r_u32(rb);
    if (format > SNAP_FORMAT || g->schema_version > FSM_SCHEMA_VERSION) {
        set_err(errmsg, "newer format or schema than this node knows", 8);
        return FSM_E_SCHEMA;
    }
    if (format == 0) {
        BAD("bad format version");
    }
    g->last_index = r_u64(rb);
    g->now = r_u64(rb);
    boot = r_u8(rb);
    p = r_bytes(rb, FSM_CLUSTER_ID_LEN);
    if (p != NULL) {
        memcpy(g->cluster_id, p, FSM_CLUSTER_ID_LEN);
    }
    p = r_bytes(rb, FSM_HASH_KEY_LEN);
    if (p != NULL) {
        memcpy(g->hash_key, p, FSM_HASH_KEY_LEN);
    }
    g->group_id = r_u32(rb);
    g->settings.max_window_ms = r_u64(rb);
    g->settings.max_skew_ms = r_u64(rb);
    g->settings.max_ttl_ms = r_u64(rb);
    g->settings.max_lease_ms = r_u64(rb);
    g->settings.max_records = r_u64(rb);
    g->settings.max_bytes = r_u64(rb);
    fence = r_u8(rb);
    g->fence_active = fence == 1;
    g->fence_ts = r_u64(rb);
    g->fence_prev_window = r_u64(rb);
    g->fence_until = r_u64(rb);
    g->ts_hwm = r_u64(rb);
    if (rb->bad || boot > 1 || fence > 1 || g->now > FSM_TIME_MAX ||
        (fence == 0 && (g->fence_ts | g->fence_prev_window | g->fence_until)) ||
        fsm_settings_check(&g->settings) != NULL) {
        BAD("bad header");
    }
    if (g->fence_active && g->now > g->fence_until) {
        BAD("a fence that should have lifted");
    }
    if (format >= 2) {
        uint8_t on = r_u8(rb);
        int rv = format == 2 || on != 0
                     ? read_restore_fence(g, rb, base, on, errmsg)
                     : 0;
        if (rv == 0 && format == 3) {
            rv = read_quotas(g, rb, base, errmsg);
        }
        if (rv != 0) {
            return rv;
        }
    }
    if (!boot &&
        (g->restore_fence || g->schema_version != 0 || g->group_id != 0 ||
         !all_zero(g->cluster_id, FSM_CLUSTER_ID_LEN) ||
         !all_zero(g->hash_key, FSM_HASH_KEY_LEN))) {
        BAD("unbootstrapped state with cluster fields");
    }
    if (boot) {
        if (g->schema_version == 0 || g->group_id == 0 ||
            all_zero(g->cluster_id, FSM_CLUSTER_ID_LEN)) {
            BAD("bootstrapped state without cluster id, group or schema");
        }
    }
    g->bootstrapped = boot;
    if (boot) {
        g->hash_ready = hash_keyed_init(&g->hash, g->hash_key) == 0;
        if (!g->hash_ready) {
            fsm_panic("cannot initialise SipHash");
        }
    }
    return 0;
}

/* The member directory: canonical bytes only. */
static int read_members(struct fsm *g,
                        struct rbuf *rb,
                        const uint8_t *base,
                        char *errmsg)
{
    uint32_t n;

    n = r_u32(rb);
    if (n > FSM_MEMBERS_MAX) {
        BAD("too many members");
    }
    for (uint32_t i = 0; i < n; i++) {
        struct fsm_member *m = &g->members[i];
        uint8_t rl, cl;
        const uint8_t *rp, *cp;

        memset(m, 0, sizeof *m);
        m->id = r_u64(rb);
        m->role = (enum fsm_role)r_u8(rb);
        rl = r_u8(rb);
        rp = r_bytes(rb, rl);
        cl = r_u8(rb);
        cp = r_bytes(rb, cl);
        /* No NUL inside an address, or the state would re-encode
         * differently: restore accepts only canonical bytes. */
        if (rp == NULL || cp == NULL || rl > FSM_ADDR_MAX ||
            cl > FSM_ADDR_MAX || memchr(rp, 0, rl) != NULL ||
            memchr(cp, 0, cl) != NULL) {
            BAD("bad member");
        }
        memcpy(m->raft_addr, rp, rl);
        memcpy(m->client_addr, cp, cl);
        if (fsm_check_member(m) != NULL) {
            BAD("bad member");
        }
    }
    g->n_members = n;
    return 0;
}

/* The retired ids, strictly ascending. */
static int read_retired(struct fsm *g,
                        struct rbuf *rb,
                        const uint8_t *base,
                        char *errmsg)
{
    uint32_t n;

    n = r_u32(rb);
    if (n > FSM_RETIRED_MAX || !r_need(rb, (size_t)n * 8)) {
        BAD("bad retired id list");
    }
    g->retired = malloc((n > 0 ? n : 1) * sizeof *g->retired);
    if (g->retired == NULL) {
        fsm_panic("out of memory (restore)");
    }
    g->cap_retired = n > 0 ? n : 1;
    for (uint32_t i = 0; i < n; i++) {
        g->retired[i] = r_u64(rb);
        if (i > 0 && g->retired[i] <= g->retired[i - 1]) {
            BAD("retired ids out of order");
        }
    }
    g->n_retired = n;
    return 0;
}

static int read_head(struct fsm *g,
                     struct rbuf *rb,
                     const uint8_t *base,
                     char *errmsg,
                     uint64_t *n_records)
{
    bool boot;
    int rv;

    rv = read_fixed(g, rb, base, errmsg);
    if (rv == 0) {
        rv = read_members(g, rb, base, errmsg);
    }
    if (rv == 0) {
        rv = read_retired(g, rb, base, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    boot = g->bootstrapped;
    for (size_t i = 0; i < g->n_members; i++) {
        for (size_t j = 0; j < i; j++) {
            if (g->members[j].id == g->members[i].id) {
                BAD("duplicate member id");
            }
        }
        if (fsm_is_retired(g, g->members[i].id)) {
            BAD("a retired id is in the member directory");
        }
    }
    *n_records = r_u64(rb);
    if (rb->bad || (!boot && (*n_records != 0 || g->n_members != 0 ||
                              g->n_retired != 0 || g->ts_hwm != 0))) {
        BAD("bad record count, or members before bootstrap");
    }
    return 0;
}

static int read_all(struct fsm *g, const uint8_t *buf, size_t len, char *errmsg)
{
    struct rbuf rbs = {buf, buf + len - 4, false};
    struct rbuf *rb = &rbs;
    const uint8_t *base = buf;
    uint64_t n_records, seen = 0;
    uint32_t *handles = NULL, *hashes = NULL;
    size_t cap = 0;
    int rv;

    rv = read_head(g, rb, base, errmsg, &n_records);
    if (rv != 0) {
        return rv;
    }
    g->wheel.cur = g->now >> WHEEL_TICK_SHIFT;
    g->wheel.passed = g->wheel.cur;
    for (uint32_t v = 0; v < FSM_N_VPS; v++) {
        uint32_t n = r_u32(rb), prev = 0, prev_hash = 0;
        if (rb->bad || n > n_records - seen ||
            !r_need(rb, (size_t)n * REC_FIXED)) {
            free(handles);
            free(hashes);
            BAD("bad partition record count");
        }
        if (n > cap) {
            uint32_t *p = realloc(handles, n * sizeof *p);
            uint32_t *q = p != NULL ? realloc(hashes, n * sizeof *q) : NULL;
            if (q == NULL) {
                fsm_panic("out of memory (restore)");
            }
            handles = p;
            hashes = q;
            cap = n;
        }
        for (uint32_t i = 0; i < n; i++) {
            const uint8_t *rec_start = rb->p;
            rv = read_record(g, rb, base, v, prev, &prev_hash, &handles[i],
                             errmsg);
            g->snap_rec_bytes += (uint64_t)(rb->p - rec_start);
            if (rv != 0) {
                free(handles);
                free(hashes);
                return rv;
            }
            hashes[i] = prev_hash;
            prev = handles[i];
        }
        /* Size the table once: records come in (hash, bytes) order, so
         * each lands at the end of its cluster without displacing any. */
        if (table_reserve(&g->vps[v], &g->slab, n) != 0) {
            fsm_panic("out of memory (restore)");
        }
        for (uint32_t i = 0; i < n; i++) {
            if (table_insert(&g->vps[v], &g->slab, hashes[i], handles[i]) !=
                0) {
                fsm_panic("out of memory (restore)");
            }
        }
        seen += n;
        g->n_records += n;
    }
    free(handles);
    free(hashes);
    if (seen != n_records) {
        BAD("record count mismatch");
    }
    if (rb->p != rb->end) {
        BAD("trailing bytes");
    }
    return 0;
}

int fsm_restore_build(const uint8_t *buf,
                      size_t len,
                      struct fsm **out,
                      char *errmsg)
{
    struct fsm *g;
    uint32_t want;
    int rv;

    *out = NULL;
    if (len < HEAD_FIXED + 4) {
        set_err(errmsg, "too short", len);
        return FSM_E_MALFORMED;
    }
    want = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
           (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24;
    if (crc32c(0, buf, len - 4) != want) {
        /* A newer format may checksum differently: report the version
         * first when the header says so. */
        if (memcmp(buf, SNAP_MAGIC, 8) == 0) {
            struct rbuf rb = {buf + 8, buf + len, false};
            uint32_t format = r_u32(&rb), schema = r_u32(&rb);
            if (format > SNAP_FORMAT || schema > FSM_SCHEMA_VERSION) {
                set_err(errmsg, "newer format or schema than this node knows",
                        8);
                return FSM_E_SCHEMA;
            }
        }
        set_err(errmsg, "checksum mismatch", len - 4);
        return FSM_E_CHECKSUM;
    }
    g = fsm_new();
    if (g == NULL) {
        fsm_panic("out of memory (restore)");
    }
    rv = read_all(g, buf, len, errmsg);
    if (rv != 0) {
        fsm_free(g);
        return rv;
    }
    *out = g;
    return 0;
}

int fsm_restore_commit(struct fsm *f, struct fsm *fresh)
{
    struct fsm *old;
    struct command_decoder dec;

    if (f->frozen != NULL) {
        return FSM_E_BUSY;
    }
    /* Swap the state in; each instance keeps its own decoder (its arenas
     * point at themselves) and its batch scratch, which holds no state.
     * The snapshot carries every replicated field, so nothing of the old
     * state is kept. */
    ONCE_ASSERT(fresh != f && fresh->frozen == NULL,
                "a built state is fresh: no view, not f itself");
    old = malloc(sizeof *old);
    if (old == NULL) {
        fsm_panic("out of memory (restore)");
    }
    memcpy(old, f, sizeof *f);
    memcpy(f, fresh, sizeof *f);
    dec = f->dec;
    f->dec = old->dec;
    old->dec = dec;
    arena_rebind(&f->dec.batch_arena);
    arena_rebind(&f->dec.cmd_arena);
    arena_rebind(&old->dec.batch_arena);
    arena_rebind(&old->dec.cmd_arena);
    free(fresh);
    fsm_free(old);
    return 0;
}

int fsm_restore(struct fsm *f, const uint8_t *buf, size_t len, char *errmsg)
{
    struct fsm *g;
    int rv;

    if (f->frozen != NULL) {
        err_printf(errmsg, "snapshot: not while a frozen view is live");
        return FSM_E_BUSY;
    }
    rv = fsm_restore_build(buf, len, &g, errmsg);
    if (rv != 0) {
        return rv;
    }
    return fsm_restore_commit(f, g);
}
