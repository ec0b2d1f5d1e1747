/* The claim state machine: apply, pruning and the replicated cluster state.
 * docs/state-machine.md is the rulebook this file implements.
 *
 * Layout: records are slab objects (fsm_int.h) indexed per virtual partition
 * by an ordered Robin Hood table (table.c) and chained, by expiry tick, into
 * a two-level timer wheel. Applying a batch first advances log time, then
 * frees the records of every wheel tick that has fully passed, then applies
 * the commands in order.
 *
 * The wheel: level 0 has one list per 1.024 s tick of the current block of
 * 65536 ticks (~18.6 h); level 1 has one list per block, 4096 blocks ahead.
 * Entering a block moves (cascades) its level-1 list into level 0, so each
 * record is touched at most twice before it expires: pruning costs what
 * expires, never a scan. Lists are singly linked through rec.next and are
 * never searched: a record that must leave early (Forget, or an expired
 * record replaced by a new claim) is marked DETACHED, removed from its table,
 * and freed when the wheel reaches it; a record whose expiry moved later (an
 * IDEMPOTENT takeover) is simply placed again when its old tick comes. */
#include "fsm/fsm.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm_int.h"

#define L0_MASK (WHEEL_L0_SIZE - 1)
#define L1_MASK (WHEEL_L1_SIZE - 1)

/* ------------------------------------------------------------------------
 * Names and settings
 * ---------------------------------------------------------------------- */

const char *fsm_outcome_name(enum fsm_outcome o)
{
    switch (o) {
        case FSM_ACCEPTED:
            return "ACCEPTED";
        case FSM_REPLAYED:
            return "REPLAYED";
        case FSM_DUPLICATE:
            return "DUPLICATE";
        case FSM_IN_PROGRESS:
            return "IN_PROGRESS";
        case FSM_CONFLICT:
            return "CONFLICT";
        case FSM_STALE:
            return "STALE";
        case FSM_FUTURE:
            return "FUTURE";
        case FSM_FAILED:
            return "FAILED";
        case FSM_NOT_OWNER:
            return "NOT_OWNER";
        case FSM_NOT_FOUND:
            return "NOT_FOUND";
        case FSM_COMPLETED:
            return "COMPLETED";
        case FSM_RELEASED:
            return "RELEASED";
        case FSM_RESOURCE_EXHAUSTED:
            return "RESOURCE_EXHAUSTED";
        case FSM_INVALID_ARGUMENT:
            return "INVALID_ARGUMENT";
        case FSM_FOUND:
            return "FOUND";
        case FSM_FORGOTTEN:
            return "FORGOTTEN";
        case FSM_OK:
            return "OK";
        case FSM_FAILED_PRECONDITION:
            return "FAILED_PRECONDITION";
    }
    return "UNKNOWN";
}

const char *fsm_state_name(enum fsm_state s)
{
    switch (s) {
        case FSM_STATE_SEEN:
            return "SEEN";
        case FSM_STATE_PENDING:
            return "PENDING";
        case FSM_STATE_COMPLETED:
            return "COMPLETED";
        case FSM_STATE_RELEASED:
            return "RELEASED";
        case FSM_STATE_FAILED:
            return "FAILED";
    }
    return "UNKNOWN";
}

const char *fsm_strerror(int rv)
{
    switch (rv) {
        case 0:
            return "success";
        case FSM_E_MALFORMED:
            return "malformed batch or snapshot";
        case FSM_E_SCHEMA:
            return "newer schema version than this node knows";
        case FSM_E_CHECKSUM:
            return "snapshot checksum mismatch";
        case FSM_E_TOOBIG:
            return "over a size limit";
        default:
            return "unknown error";
    }
}

void fsm_settings_default(struct fsm_settings *s)
{
    s->max_window_ms = 5 * 60 * 1000;
    s->max_skew_ms = 30 * 1000;
    s->max_ttl_ms = 7ull * 86400 * 1000;
    s->max_lease_ms = 3600ull * 1000;
    s->max_records = 20000000;
    s->max_bytes = 4ull << 30;
}

const char *fsm_settings_check(const struct fsm_settings *s)
{
    if (s->max_window_ms < 1 || s->max_window_ms > FSM_MAX_WINDOW_CEIL) {
        return "max_window must be 1 ms..7 days";
    }
    if (s->max_skew_ms < 1 || s->max_skew_ms > FSM_MAX_SKEW_CEIL) {
        return "max_skew must be 1 ms..1 hour";
    }
    if (s->max_ttl_ms < 1 || s->max_ttl_ms > FSM_MAX_TTL_CEIL) {
        return "max_ttl must be 1 ms..30 days";
    }
    if (s->max_lease_ms < 1 || s->max_lease_ms > FSM_MAX_LEASE_CEIL) {
        return "max_lease must be 1 ms..1 day";
    }
    /* The slab addresses 32 GiB; these ceilings keep the counted bytes at
     * half of that, leaving room for size-class fragmentation. */
    if (s->max_records < 1 || s->max_records > (1ull << 28)) {
        return "max_records must be 1..268435456";
    }
    if (s->max_bytes < 4096 || s->max_bytes > (16ull << 30)) {
        return "max_bytes must be 4 KiB..16 GiB";
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Life cycle
 * ---------------------------------------------------------------------- */

_Noreturn void fsm_panic(const char *what)
{
    /* Only reachable on memory exhaustion: continuing would leave a
     * half-applied batch that raft would apply again. Stop; the node
     * restarts from its snapshot and log. */
    fprintf(stderr, "once fsm: fatal: %s\n", what);
    abort();
}

struct fsm *fsm_new(void)
{
    struct fsm *f = calloc(1, sizeof *f);

    if (f == NULL) {
        return NULL;
    }
    slab_init(&f->slab);
    for (size_t i = 0; i < FSM_N_VPS; i++) {
        table_init(&f->vps[i]);
    }
    command_decoder_init(&f->dec);
    fsm_settings_default(&f->settings);
    return f;
}

/* Release every record and ext (not the struct). */
static void clear_records(struct fsm *f)
{
    /* Free every result/error buffer by walking the wheel: every record,
     * detached or not, is on exactly one list. */
    for (int level = 0; level < 2; level++) {
        uint32_t *heads = level == 0 ? f->wheel.l0 : f->wheel.l1;
        size_t n = level == 0 ? WHEEL_L0_SIZE : WHEEL_L1_SIZE;
        for (size_t i = 0; i < n; i++) {
            for (uint32_t h = heads[i]; h != 0;) {
                struct rec *r = slab_ptr(&f->slab, h);
                if (r->ext != 0) {
                    struct rec_ext *e = slab_ptr(&f->slab, r->ext);
                    free(e->stored);
                }
                h = r->next;
            }
            heads[i] = 0;
        }
    }
    for (size_t i = 0; i < FSM_N_VPS; i++) {
        table_close(&f->vps[i]);
    }
    slab_close(&f->slab);
    f->wheel.n_l0 = 0;
    f->wheel.n_l1 = 0;
    f->n_records = 0;
    f->bytes = 0;
    f->snap_rec_bytes = 0;
}

void fsm_free(struct fsm *f)
{
    if (f == NULL) {
        return;
    }
    clear_records(f);
    if (f->hash_ready) {
        hash_keyed_close(&f->hash);
    }
    command_decoder_close(&f->dec);
    free(f->retired);
    free(f->cmds);
    free(f->hashes);
    free(f->hashed);
    free(f);
}

/* ------------------------------------------------------------------------
 * Records
 * ---------------------------------------------------------------------- */

uint64_t fsm_hash(struct fsm *f,
                  const uint8_t *scope,
                  size_t scope_len,
                  const uint8_t *key,
                  size_t key_len)
{
    uint8_t prefix[1 + FSM_SCOPE_MAX];

    /* len(scope) || scope || key: unambiguous, so (a, bc) != (ab, c). */
    prefix[0] = (uint8_t)scope_len;
    memcpy(prefix + 1, scope, scope_len);
    return hash_keyed2(&f->hash, prefix, 1 + scope_len, key, key_len);
}

static inline uint32_t vp_of(uint64_t hash)
{
    return (uint32_t)(hash >> (64 - FSM_VP_BITS));
}

static inline struct rec *rec_at(const struct fsm *f, uint32_t h)
{
    return slab_ptr(&f->slab, h);
}

static inline struct rec_ext *ext_of(const struct fsm *f, const struct rec *r)
{
    return r->ext != 0 ? slab_ptr(&f->slab, r->ext) : NULL;
}

uint64_t fsm_rec_expires(const struct fsm *f, const struct rec *r)
{
    if (r->flags & REC_F_IDEMPOTENT) {
        /* An IDEMPOTENT record always has its ext. */
        const struct rec_ext *e = slab_ptr(&f->slab, r->ext);
        return e->expires_ms;
    }
    return get48(r->first_time) + r->life_ms;
}

size_t fsm_ext_bytes(const struct rec_ext *e)
{
    return slab_size(sizeof *e) + e->stored_len;
}

static size_t attempt_size(const struct rec_attempt *a)
{
    return ATTEMPT_HDR_SIZE + a->execution_id_len;
}

/* Free the ext and everything hanging off it; returns the bytes it had
 * counted. */
static uint64_t free_ext(struct fsm *f, struct rec *r)
{
    struct rec_ext *e = ext_of(f, r);
    uint64_t bytes;

    if (e == NULL) {
        return 0;
    }
    bytes = fsm_ext_bytes(e);
    for (size_t i = 0; i < ext_n_attempts(e); i++) {
        uint32_t h = ext_attempt(e, i);
        struct rec_attempt *a = slab_ptr(&f->slab, h);
        bytes += slab_size(attempt_size(a));
        slab_free(&f->slab, h, attempt_size(a));
    }
    free(e->stored);
    slab_free(&f->slab, r->ext, sizeof *e);
    r->ext = 0;
    return bytes;
}

/* Final release of a record the wheel has reached. */
static void free_rec(struct fsm *f, uint32_t h)
{
    struct rec *r = rec_at(f, h);
    size_t size = rec_size(r->scope_len, r->key_len);

    (void)free_ext(f, r);
    slab_free(&f->slab, h, size);
}

/* What the record costs in a snapshot (snapshot.c's layout). */
static uint64_t rec_snap_size(const struct fsm *f, const struct rec *r)
{
    uint64_t n = SNAP_REC_FIXED + (uint64_t)r->scope_len + r->key_len;
    const struct rec_ext *e = ext_of(f, r);

    if (e == NULL) {
        return n;
    }
    n += SNAP_EXT_FIXED + e->payload_hash_len + e->stored_len;
    for (size_t i = 0; i < ext_n_attempts(e); i++) {
        const struct rec_attempt *a = slab_ptr(&f->slab, ext_attempt(e, i));
        n += SNAP_ATT_FIXED + a->execution_id_len;
    }
    return n;
}

/* Would storing @n more bytes stay within max_bytes? Every growth of the
 * stored state (records, results, errors, attempts) asks this. */
static bool bytes_fit(const struct fsm *f, uint64_t n)
{
    return f->bytes + n <= f->settings.max_bytes;
}

/* Take a live record out of its table; the wheel frees it later. */
static void detach(struct fsm *f, uint64_t hash, uint32_t h)
{
    struct rec *r = rec_at(f, h);
    bool found;

    found = table_remove(&f->vps[vp_of(hash)], &f->slab, (uint32_t)hash, h);
    assert(found);
    (void)found;
    f->snap_rec_bytes -= rec_snap_size(f, r);
    f->bytes -= slab_size(rec_size(r->scope_len, r->key_len));
    f->bytes -= free_ext(f, r);
    f->n_records--;
    r->flags |= REC_F_DETACHED;
}

static struct rec_ext *ensure_ext(struct fsm *f, struct rec *r)
{
    struct rec_ext *e;

    if (r->ext != 0) {
        return slab_ptr(&f->slab, r->ext);
    }
    r->ext = slab_alloc(&f->slab, sizeof *e);
    if (r->ext == 0) {
        fsm_panic("out of memory (record ext)");
    }
    e = slab_ptr(&f->slab, r->ext);
    memset(e, 0, sizeof *e);
    f->bytes += fsm_ext_bytes(e);
    f->snap_rec_bytes += SNAP_EXT_FIXED;
    return e;
}

static void add_attempt(struct fsm *f,
                        struct rec *r,
                        const struct fsm_claim *c,
                        uint64_t index,
                        enum fsm_outcome outcome,
                        bool retry)
{
    size_t size = ATTEMPT_HDR_SIZE + c->execution_id_len;
    size_t need = slab_size(size);
    struct rec_ext *e;
    struct rec_attempt *a;
    uint32_t h;

    if (r->ext == 0) {
        need += slab_size(sizeof *e);
    }
    if (!bytes_fit(f, need)) {
        /* Past max_bytes replays still answer, but their evidence is only
         * counted (where the record already has attempt storage): memory
         * stays bounded under a replay flood. */
        if (r->ext != 0) {
            e = slab_ptr(&f->slab, r->ext);
            if (e->attempts_total < UINT32_MAX) {
                e->attempts_total++;
            }
        }
        return;
    }
    e = ensure_ext(f, r);
    h = slab_alloc(&f->slab, size);
    if (h == 0) {
        fsm_panic("out of memory (attempt)");
    }
    a = slab_ptr(&f->slab, h);
    memcpy(a->request_id, c->request_id, FSM_REQUEST_ID_LEN);
    a->index = index;
    a->time_ms = f->now;
    a->outcome = (uint8_t)outcome;
    a->retry = retry;
    a->execution_id_len = (uint8_t)c->execution_id_len;
    if (c->execution_id_len > 0) {
        memcpy(a->execution_id, c->execution_id, c->execution_id_len);
    }
    f->bytes += slab_size(size);
    f->snap_rec_bytes += SNAP_ATT_FIXED + c->execution_id_len;
    if (e->attempts_total < UINT32_MAX) {
        e->attempts_total++;
    }
    if (e->att_first == 0) {
        e->att_first = h;
    } else if (e->att_n_last < FSM_ATTEMPTS_LAST) {
        e->att_last[(e->att_head + e->att_n_last) % FSM_ATTEMPTS_LAST] = h;
        e->att_n_last++;
    } else {
        uint32_t old = e->att_last[e->att_head];
        struct rec_attempt *o = slab_ptr(&f->slab, old);
        f->bytes -= slab_size(attempt_size(o));
        f->snap_rec_bytes -= SNAP_ATT_FIXED + o->execution_id_len;
        slab_free(&f->slab, old, attempt_size(o));
        e->att_last[e->att_head] = h;
        e->att_head = (uint8_t)((e->att_head + 1) % FSM_ATTEMPTS_LAST);
    }
}

static void copy_attempt(struct fsm_attempt *out, const struct rec_attempt *a)
{
    memcpy(out->request_id, a->request_id, FSM_REQUEST_ID_LEN);
    out->index = a->index;
    out->time_ms = a->time_ms;
    out->outcome = (enum fsm_outcome)a->outcome;
    out->retry = a->retry != 0;
    out->execution_id_len = a->execution_id_len;
    memcpy(out->execution_id, a->execution_id, a->execution_id_len);
}

/* Fill the record facts of @res from @r (borrowed pointers into @f). */
static void fill_record(struct fsm *f,
                        const struct rec *r,
                        struct fsm_result *res,
                        bool with_attempts)
{
    const struct rec_ext *e = ext_of(f, r);

    res->has_record = true;
    res->kind = rec_kind(r);
    res->state = rec_state(r);
    memcpy(res->first_request_id, r->request_id, FSM_REQUEST_ID_LEN);
    res->first_index = get48(r->first_index);
    res->first_time_ms = get48(r->first_time);
    res->expires_ms = fsm_rec_expires(f, r);
    res->attempts = e != NULL ? e->attempts_total : 0;
    if (r->flags & REC_F_IDEMPOTENT) {
        res->has_owner_token = true; /* scrubbed later unless the owner's */
        res->owner_token.group_id = e->owner_group;
        res->owner_token.index = e->owner_index;
        res->owner_token.slot = e->owner_slot;
        res->owner_attempt = e->owner_attempt;
        res->lease_expires_ms = e->lease_expires_ms;
        if (e->stored_kind == 1) {
            res->result = e->stored != NULL ? e->stored : (const uint8_t *)"";
            res->result_len = e->stored_len;
        } else if (e->stored_kind == 2) {
            res->stored_error =
                e->stored != NULL ? e->stored : (const uint8_t *)"";
            res->stored_error_len = e->stored_len;
        }
    }
    if (with_attempts && e != NULL) {
        size_t n = ext_n_attempts(e);
        for (size_t i = 0; i < n; i++) {
            copy_attempt(&f->att_out[i], slab_ptr(&f->slab, ext_attempt(e, i)));
            res->attempt_list[i] = &f->att_out[i];
        }
        res->n_attempt_list = n;
    }
}

/* ------------------------------------------------------------------------
 * Timer wheel
 * ---------------------------------------------------------------------- */

void fsm_wheel_place(struct fsm *f, uint32_t h)
{
    struct wheel *w = &f->wheel;
    struct rec *r = rec_at(f, h);
    uint64_t t = fsm_rec_expires(f, r) >> WHEEL_TICK_SHIFT;
    uint64_t cur_block = w->cur >> WHEEL_L0_BITS;
    uint64_t block;

    if (t < w->cur) {
        t = w->cur; /* already due: the next processed tick frees it */
    }
    block = t >> WHEEL_L0_BITS;
    if (block == cur_block) {
        r->next = w->l0[t & L0_MASK];
        w->l0[t & L0_MASK] = h;
        w->n_l0++;
        return;
    }
    if (block - cur_block >= WHEEL_L1_SIZE) {
        /* Beyond the horizon (only after a huge time jump): park it in the
         * farthest block; its cascade places it again. */
        block = cur_block + WHEEL_L1_SIZE - 1;
    }
    r->next = w->l1[block & L1_MASK];
    w->l1[block & L1_MASK] = h;
    w->n_l1++;
}

/* Free @h if it is detached or expired, else place it again. */
static void wheel_visit(struct fsm *f, uint32_t h)
{
    struct rec *r = rec_at(f, h);

    if (r->flags & REC_F_DETACHED) {
        free_rec(f, h);
        return;
    }
    /* Free by tick, never by millisecond: a record whose expiry moved
     * (takeover) sits in an earlier tick than on a replica that restored it
     * from a snapshot, and both must drop it while processing the same tick
     * or their counts (and max_records answers) would differ. The tick being
     * processed has ended, so such a record has expired. */
    if ((fsm_rec_expires(f, r) >> WHEEL_TICK_SHIFT) <= f->wheel.cur) {
        uint64_t hash =
            fsm_hash(f, r->id, r->scope_len, r->id + r->scope_len, r->key_len);
        detach(f, hash, h);
        free_rec(f, h);
        return;
    }
    fsm_wheel_place(f, h);
}

static void wheel_take(struct fsm *f, uint32_t *head, uint64_t *count)
{
    uint32_t h = *head;

    *head = 0;
    while (h != 0) {
        uint32_t next = rec_at(f, h)->next;
        (*count)--;
        wheel_visit(f, h);
        h = next;
    }
}

/* Process every tick that ended at or before fsm_now. */
static void wheel_advance(struct fsm *f)
{
    struct wheel *w = &f->wheel;
    uint64_t target = f->now >> WHEEL_TICK_SHIFT;

    while (w->cur < target) {
        if (w->n_l0 == 0 && w->n_l1 == 0) {
            w->cur = target;
            break;
        }
        if ((w->cur & L0_MASK) == 0) {
            wheel_take(f, &w->l1[(w->cur >> WHEEL_L0_BITS) & L1_MASK],
                       &w->n_l1);
        }
        if (w->n_l0 == 0) {
            /* Nothing in this block: jump to the next block's start. */
            uint64_t next = ((w->cur >> WHEEL_L0_BITS) + 1) << WHEEL_L0_BITS;
            w->cur = next < target ? next : target;
            continue;
        }
        wheel_take(f, &w->l0[w->cur & L0_MASK], &w->n_l0);
        w->cur++;
    }
}

/* ------------------------------------------------------------------------
 * Claims
 * ---------------------------------------------------------------------- */

const char *fsm_check_ident(size_t scope_len, size_t key_len)
{
    if (scope_len < 1 || scope_len > FSM_SCOPE_MAX) {
        return "scope must be 1..128 bytes";
    }
    if (key_len < 1 || key_len > FSM_KEY_MAX) {
        return "key must be 1..256 bytes";
    }
    return NULL;
}

static const char *check_claim(const struct fsm *f,
                               const struct fsm_claim *c,
                               uint64_t *lease)
{
    const struct fsm_settings *s = &f->settings;
    const char *why = fsm_check_ident(c->scope_len, c->key_len);

    if (why != NULL) {
        return why;
    }
    if (c->execution_id_len > FSM_EXECUTION_ID_MAX) {
        return "execution id must be at most 128 bytes";
    }
    if (c->kind != FSM_KIND_NONCE && c->kind != FSM_KIND_IDEMPOTENT) {
        return "kind must be NONCE or IDEMPOTENT";
    }
    if (c->ttl_ms == 0 && !c->has_ts) {
        return "a claim needs a ttl or a timestamp and window";
    }
    if (c->ttl_ms > s->max_ttl_ms) {
        return "ttl is above the cluster's max_ttl";
    }
    if (c->has_ts && (c->window_ms < 1 || c->window_ms > s->max_window_ms)) {
        return "window must be 1 ms..max_window";
    }
    if (c->kind == FSM_KIND_NONCE) {
        if (c->payload_hash_len != 0 || c->lease_ms != 0) {
            return "a NONCE claim takes no payload hash and no lease";
        }
        return NULL;
    }
    if (c->payload_hash_len > FSM_PAYLOAD_HASH_MAX) {
        return "payload hash must be at most 64 bytes";
    }
    if (c->lease_ms > s->max_lease_ms) {
        return "lease is above the cluster's max_lease";
    }
    *lease = c->lease_ms != 0                         ? c->lease_ms
             : s->max_lease_ms < FSM_DEFAULT_LEASE_MS ? s->max_lease_ms
                                                      : FSM_DEFAULT_LEASE_MS;
    return NULL;
}

/* STALE or FUTURE with the reason in @res, or 0 (inside the window). */
static enum fsm_outcome window_check(const struct fsm *f,
                                     const struct fsm_claim *c,
                                     struct fsm_result *res)
{
    uint64_t w = c->window_ms;

    if (!c->has_ts) {
        return 0;
    }
    if (f->fence_active && c->ts_ms <= f->fence_ts &&
        f->fence_prev_window < w) {
        w = f->fence_prev_window;
    }
    if (c->ts_ms > f->now + f->settings.max_skew_ms) {
        res->reason = "timestamp is beyond the max skew";
        return FSM_FUTURE;
    }
    if (f->now > w && c->ts_ms < f->now - w) {
        res->reason = "timestamp is older than the window";
        return FSM_STALE;
    }
    return 0;
}

/* Retention of a new acceptance (docs: the latest of ttl, window rule and
 * lease). Inputs are bounded by the settings' ceilings, so nothing here
 * overflows and a NONCE's lifetime fits 32 bits. */
static uint64_t retention(const struct fsm *f,
                          const struct fsm_claim *c,
                          uint64_t lease_expires)
{
    uint64_t e = lease_expires;

    if (c->ttl_ms != 0 && f->now + c->ttl_ms > e) {
        e = f->now + c->ttl_ms;
    }
    if (c->has_ts) {
        uint64_t t =
            c->ts_ms + f->settings.max_window_ms + f->settings.max_skew_ms;
        if (t > e) {
            e = t;
        }
    }
    if (e <= f->now) {
        e = f->now + 1;
    }
    return e;
}

static bool payload_equal(const struct rec_ext *e, const struct fsm_claim *c)
{
    return e->payload_hash_len == c->payload_hash_len &&
           (c->payload_hash_len == 0 ||
            memcmp(e->payload_hash, c->payload_hash, c->payload_hash_len) == 0);
}

static bool over_capacity(const struct fsm *f, size_t new_bytes)
{
    return f->n_records + 1 > f->settings.max_records ||
           !bytes_fit(f, new_bytes);
}

/* Remember the largest signed timestamp ever accepted: a later max_window
 * raise must fence every ts a stored record may carry, including ones
 * accepted under a larger max_skew than today's. */
static void note_ts(struct fsm *f, const struct fsm_claim *c)
{
    if (c->has_ts && c->ts_ms > f->ts_hwm) {
        f->ts_hwm = c->ts_ms;
    }
}

static void accept_new(struct fsm *f,
                       uint64_t index,
                       uint32_t slot,
                       const struct fsm_claim *c,
                       uint64_t hash,
                       uint64_t lease,
                       struct fsm_result *res)
{
    size_t size = rec_size(c->scope_len, c->key_len);
    size_t need = slab_size(size);
    uint64_t lease_expires = 0;
    struct rec *r;
    uint32_t h;

    if (c->kind == FSM_KIND_IDEMPOTENT) {
        need += slab_size(sizeof(struct rec_ext));
        lease_expires = f->now + lease;
    }
    if (over_capacity(f, need)) {
        res->outcome = FSM_RESOURCE_EXHAUSTED;
        res->reason = "the cluster's max_records or max_bytes is reached";
        return;
    }
    h = slab_alloc(&f->slab, size);
    if (h == 0) {
        fsm_panic("out of memory (record)");
    }
    r = rec_at(f, h);
    r->next = 0;
    r->ext = 0;
    r->flags = 0;
    r->scope_len = (uint8_t)c->scope_len;
    r->key_len = (uint16_t)c->key_len;
    put48(r->first_index, index);
    put48(r->first_time, f->now);
    memcpy(r->request_id, c->request_id, FSM_REQUEST_ID_LEN);
    memcpy(r->id, c->scope, c->scope_len);
    memcpy(r->id + c->scope_len, c->key, c->key_len);
    f->bytes += slab_size(size);
    f->snap_rec_bytes += SNAP_REC_FIXED + c->scope_len + c->key_len;
    if (c->kind == FSM_KIND_NONCE) {
        r->life_ms = (uint32_t)(retention(f, c, 0) - f->now);
        rec_set_state(r, FSM_STATE_SEEN);
    } else {
        struct rec_ext *e = ensure_ext(f, r);
        r->flags |= REC_F_IDEMPOTENT;
        r->life_ms = 0;
        rec_set_state(r, FSM_STATE_PENDING);
        e->expires_ms = retention(f, c, lease_expires);
        e->lease_expires_ms = lease_expires;
        e->owner_group = f->group_id;
        e->owner_index = index;
        e->owner_slot = slot;
        e->owner_attempt = 1;
        memcpy(e->owner_request_id, c->request_id, FSM_REQUEST_ID_LEN);
        e->payload_hash_len = (uint8_t)c->payload_hash_len;
        f->snap_rec_bytes += c->payload_hash_len;
        if (c->payload_hash_len > 0) {
            memcpy(e->payload_hash, c->payload_hash, c->payload_hash_len);
        }
    }
    if (table_insert(&f->vps[vp_of(hash)], &f->slab, (uint32_t)hash, h) != 0) {
        fsm_panic("out of memory (table)");
    }
    f->n_records++;
    fsm_wheel_place(f, h);
    note_ts(f, c);
    res->outcome = FSM_ACCEPTED;
    fill_record(f, r, res, false);
}

static void takeover(struct fsm *f,
                     uint64_t index,
                     uint32_t slot,
                     struct rec *r,
                     const struct fsm_claim *c,
                     uint64_t lease)
{
    struct rec_ext *e = ext_of(f, r);
    uint64_t lease_expires = f->now + lease;
    uint64_t expires = retention(f, c, lease_expires);

    rec_set_state(r, FSM_STATE_PENDING);
    e->lease_expires_ms = lease_expires;
    if (expires > e->expires_ms) {
        e->expires_ms = expires; /* the wheel re-places it lazily */
    }
    e->owner_group = f->group_id;
    e->owner_index = index;
    e->owner_slot = slot;
    e->owner_attempt++;
    memcpy(e->owner_request_id, c->request_id, FSM_REQUEST_ID_LEN);
    note_ts(f, c);
}

/* Outcome of a claim on a live record; may take it over. */
static enum fsm_outcome claim_live(struct fsm *f,
                                   uint64_t index,
                                   uint32_t slot,
                                   struct rec *r,
                                   const struct fsm_claim *c,
                                   uint64_t lease,
                                   struct fsm_result *res)
{
    struct rec_ext *e = ext_of(f, r);
    enum fsm_outcome o;

    if (rec_kind(r) != c->kind) {
        res->reason = "the key holds a record of the other kind";
        return FSM_CONFLICT;
    }
    if (c->kind == FSM_KIND_NONCE) {
        if (memcmp(r->request_id, c->request_id, FSM_REQUEST_ID_LEN) == 0) {
            res->retry = true;
            return FSM_ACCEPTED;
        }
        return FSM_REPLAYED;
    }
    if (!payload_equal(e, c)) {
        res->reason = "the key was claimed with a different payload hash";
        return FSM_CONFLICT;
    }
    switch (rec_state(r)) {
        case FSM_STATE_PENDING:
            if (memcmp(e->owner_request_id, c->request_id,
                       FSM_REQUEST_ID_LEN) == 0) {
                res->retry = true;
                return FSM_ACCEPTED;
            }
            if (e->lease_expires_ms > f->now) {
                res->retry_after_ms = e->lease_expires_ms - f->now;
                return FSM_IN_PROGRESS;
            }
            break; /* lease expired: take over */
        case FSM_STATE_RELEASED:
            break;
        case FSM_STATE_COMPLETED:
            return FSM_DUPLICATE;
        case FSM_STATE_FAILED:
            return FSM_FAILED;
        case FSM_STATE_SEEN:
            assert(0); /* NONCE handled above */
            return FSM_CONFLICT;
    }
    o = window_check(f, c, res);
    if (o != 0) {
        return o; /* a signed request outside its window never takes over */
    }
    takeover(f, index, slot, r, c, lease);
    return FSM_ACCEPTED;
}

static void do_claim(struct fsm *f,
                     uint64_t index,
                     uint32_t slot,
                     const struct fsm_claim *c,
                     const uint64_t *pre,
                     struct fsm_result *res)
{
    uint64_t lease = 0, hash;
    struct table_key k;
    enum fsm_outcome o;
    const char *why;
    uint32_t h;

    why = check_claim(f, c, &lease);
    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    hash = pre != NULL
               ? *pre
               : fsm_hash(f, c->scope, c->scope_len, c->key, c->key_len);
    k = (struct table_key){(uint32_t)hash, c->scope, c->scope_len, c->key,
                           c->key_len};
    h = table_find(&f->vps[vp_of(hash)], &f->slab, &k);
    if (h != 0 && fsm_rec_expires(f, rec_at(f, h)) <= f->now) {
        detach(f, hash, h); /* expired, not yet pruned: as if absent */
        h = 0;
    }
    if (h != 0) {
        struct rec *r = rec_at(f, h);
        o = claim_live(f, index, slot, r, c, lease, res);
        res->outcome = o;
        add_attempt(f, r, c, index, o, res->retry);
        fill_record(f, r, res, false);
        return;
    }
    o = window_check(f, c, res);
    if (o != 0) {
        res->outcome = o;
        return;
    }
    accept_new(f, index, slot, c, hash, lease, res);
}

/* Find the live record of an identity, or 0. */
static uint32_t find_live(struct fsm *f,
                          const uint8_t *scope,
                          size_t scope_len,
                          const uint8_t *key,
                          size_t key_len,
                          const uint64_t *pre,
                          uint64_t *hash_out)
{
    uint64_t hash =
        pre != NULL ? *pre : fsm_hash(f, scope, scope_len, key, key_len);
    struct table_key k = {(uint32_t)hash, scope, scope_len, key, key_len};
    uint32_t h = table_find(&f->vps[vp_of(hash)], &f->slab, &k);

    if (hash_out != NULL) {
        *hash_out = hash;
    }
    if (h != 0 && fsm_rec_expires(f, rec_at(f, h)) <= f->now) {
        return 0;
    }
    return h;
}

static bool token_is_owner(const struct rec_ext *e, const struct fsm_token *t)
{
    return e->owner_group == t->group_id && e->owner_index == t->index &&
           e->owner_slot == t->slot;
}

static void store_bytes(struct fsm *f,
                        struct rec_ext *e,
                        uint8_t kind,
                        const uint8_t *p,
                        size_t len)
{
    uint8_t *copy = NULL;

    if (len > 0) {
        copy = malloc(len);
        if (copy == NULL) {
            fsm_panic("out of memory (result)");
        }
        memcpy(copy, p, len);
    }
    f->bytes -= e->stored_len;
    f->snap_rec_bytes -= e->stored_len;
    free(e->stored);
    e->stored = copy;
    e->stored_len = (uint32_t)len;
    e->stored_kind = kind;
    f->bytes += len;
    f->snap_rec_bytes += len;
}

/* Common checks of Complete and Release: NULL if the record is owned by
 * @token and the caller may act on it; otherwise the outcome is set. */
static struct rec *owned_record(struct fsm *f,
                                const uint8_t *scope,
                                size_t scope_len,
                                const uint8_t *key,
                                size_t key_len,
                                const struct fsm_token *token,
                                const uint64_t *pre,
                                struct fsm_result *res)
{
    const char *why = fsm_check_ident(scope_len, key_len);
    struct rec *r;
    uint32_t h;

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return NULL;
    }
    h = find_live(f, scope, scope_len, key, key_len, pre, NULL);
    if (h == 0) {
        res->outcome = FSM_NOT_FOUND;
        return NULL;
    }
    r = rec_at(f, h);
    if (rec_kind(r) != FSM_KIND_IDEMPOTENT) {
        res->outcome = FSM_CONFLICT;
        res->reason = "a NONCE record has no owner";
        fill_record(f, r, res, false);
        return NULL;
    }
    if (!token_is_owner(slab_ptr(&f->slab, r->ext), token)) {
        res->outcome = FSM_NOT_OWNER;
        res->reason = "the owner token is not the current one";
        fill_record(f, r, res, false);
        return NULL;
    }
    return r;
}

static void do_complete(struct fsm *f,
                        const struct fsm_complete *c,
                        const uint64_t *pre,
                        struct fsm_result *res)
{
    struct rec *r;

    if (c->result_len > FSM_RESULT_MAX) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = "result must be at most 64 KiB";
        return;
    }
    r = owned_record(f, c->scope, c->scope_len, c->key, c->key_len,
                     &c->owner_token, pre, res);
    if (r == NULL) {
        return;
    }
    switch (rec_state(r)) {
        case FSM_STATE_PENDING:
            if (!bytes_fit(f, c->result_len)) {
                /* The record stays PENDING: the owner can retry with a
                 * smaller result, or release, once space is free. */
                res->outcome = FSM_RESOURCE_EXHAUSTED;
                res->reason = "the cluster's max_bytes is reached";
                break;
            }
            store_bytes(f, ext_of(f, r), 1, c->result, c->result_len);
            rec_set_state(r, FSM_STATE_COMPLETED);
            res->outcome = FSM_COMPLETED;
            break;
        case FSM_STATE_COMPLETED:
            res->outcome = FSM_COMPLETED;
            res->retry = true;
            break;
        default:
            res->outcome = FSM_CONFLICT;
            res->reason = "the owner already released the record";
            break;
    }
    fill_record(f, r, res, false);
}

static void do_release(struct fsm *f,
                       const struct fsm_release *c,
                       const uint64_t *pre,
                       struct fsm_result *res)
{
    struct rec *r;

    if (c->error_len > FSM_ERROR_MAX) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = "error must be at most 1 KiB";
        return;
    }
    r = owned_record(f, c->scope, c->scope_len, c->key, c->key_len,
                     &c->owner_token, pre, res);
    if (r == NULL) {
        return;
    }
    switch (rec_state(r)) {
        case FSM_STATE_PENDING:
        case FSM_STATE_RELEASED:
            if (c->terminal && !bytes_fit(f, c->error_len)) {
                res->outcome = FSM_RESOURCE_EXHAUSTED;
                res->reason = "the cluster's max_bytes is reached";
            } else if (c->terminal) {
                store_bytes(f, ext_of(f, r), 2, c->error, c->error_len);
                rec_set_state(r, FSM_STATE_FAILED);
                res->outcome = FSM_FAILED;
            } else {
                res->retry = rec_state(r) == FSM_STATE_RELEASED;
                rec_set_state(r, FSM_STATE_RELEASED);
                res->outcome = FSM_RELEASED;
            }
            break;
        case FSM_STATE_FAILED:
            res->outcome = FSM_FAILED;
            res->retry = true;
            break;
        default:
            res->outcome = FSM_CONFLICT;
            res->reason = "a completed record cannot be released";
            break;
    }
    fill_record(f, r, res, false);
}

static void do_lookup(struct fsm *f,
                      const struct fsm_ident *id,
                      const uint64_t *pre,
                      struct fsm_result *res)
{
    const char *why;
    uint32_t h;

    memset(res, 0, sizeof *res);
    res->cmd = FSM_CMD_LOOKUP;
    if (!f->bootstrapped) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the cluster is not bootstrapped";
        return;
    }
    why = fsm_check_ident(id->scope_len, id->key_len);
    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    h = find_live(f, id->scope, id->scope_len, id->key, id->key_len, pre, NULL);
    if (h == 0) {
        res->outcome = FSM_NOT_FOUND;
        return;
    }
    res->outcome = FSM_FOUND;
    fill_record(f, rec_at(f, h), res, true);
}

void fsm_lookup(struct fsm *f,
                const struct fsm_ident *id,
                struct fsm_result *res)
{
    do_lookup(f, id, NULL, res);
}

static void do_forget(struct fsm *f,
                      const struct fsm_ident *id,
                      const uint64_t *pre,
                      struct fsm_result *res)
{
    const char *why = fsm_check_ident(id->scope_len, id->key_len);
    uint64_t hash;
    uint32_t h;

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    h = find_live(f, id->scope, id->scope_len, id->key, id->key_len, pre,
                  &hash);
    if (h == 0) {
        res->outcome = FSM_NOT_FOUND;
        return;
    }
    fill_record(f, rec_at(f, h), res, false);
    res->result = NULL; /* the ext is freed below */
    res->result_len = 0;
    res->stored_error = NULL;
    res->stored_error_len = 0;
    detach(f, hash, h);
    res->outcome = FSM_FORGOTTEN;
}

/* ------------------------------------------------------------------------
 * Configuration
 * ---------------------------------------------------------------------- */

const char *fsm_check_member(const struct fsm_member *m)
{
    size_t rl = strnlen(m->raft_addr, sizeof m->raft_addr);
    size_t cl = strnlen(m->client_addr, sizeof m->client_addr);

    if (m->id == 0) {
        return "member id must not be 0";
    }
    if (rl < 1 || rl > FSM_ADDR_MAX || cl < 1 || cl > FSM_ADDR_MAX) {
        return "member addresses must be 1..64 bytes";
    }
    if (m->role != FSM_ROLE_VOTER && m->role != FSM_ROLE_STANDBY &&
        m->role != FSM_ROLE_SPARE) {
        return "member role must be voter, standby or spare";
    }
    return NULL;
}

static size_t retired_pos(const struct fsm *f, uint64_t id)
{
    size_t lo = 0, hi = f->n_retired;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->retired[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

bool fsm_is_retired(const struct fsm *f, uint64_t id)
{
    size_t pos = retired_pos(f, id);
    return pos < f->n_retired && f->retired[pos] == id;
}

static void set_hash_key(struct fsm *f, const uint8_t key[FSM_HASH_KEY_LEN])
{
    int rv;

    memcpy(f->hash_key, key, FSM_HASH_KEY_LEN);
    if (f->hash_ready) {
        rv = hash_keyed_rekey(&f->hash, key);
    } else {
        rv = hash_keyed_init(&f->hash, key);
        f->hash_ready = rv == 0;
    }
    if (rv != 0) {
        fsm_panic("cannot initialise SipHash (OpenSSL)");
    }
}

static void do_bootstrap(struct fsm *f,
                         const struct fsm_bootstrap *b,
                         uint32_t schema_version,
                         struct fsm_result *res)
{
    static const uint8_t zero[FSM_CLUSTER_ID_LEN];
    struct fsm_settings s = b->settings;
    struct fsm_settings d;
    const char *why;

    if (f->bootstrapped) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the cluster is already bootstrapped";
        return;
    }
    res->outcome = FSM_INVALID_ARGUMENT;
    if (memcmp(b->cluster_id, zero, sizeof zero) == 0) {
        res->reason = "cluster id must not be zero";
        return;
    }
    if (b->group_id == 0) {
        res->reason = "group id must not be 0";
        return;
    }
    fsm_settings_default(&d);
    s.max_window_ms = s.max_window_ms ? s.max_window_ms : d.max_window_ms;
    s.max_skew_ms = s.max_skew_ms ? s.max_skew_ms : d.max_skew_ms;
    s.max_ttl_ms = s.max_ttl_ms ? s.max_ttl_ms : d.max_ttl_ms;
    s.max_lease_ms = s.max_lease_ms ? s.max_lease_ms : d.max_lease_ms;
    s.max_records = s.max_records ? s.max_records : d.max_records;
    s.max_bytes = s.max_bytes ? s.max_bytes : d.max_bytes;
    why = fsm_settings_check(&s);
    if (why != NULL) {
        res->reason = why;
        return;
    }
    if (b->n_members > FSM_MEMBERS_MAX) {
        res->reason = "at most 64 members";
        return;
    }
    for (size_t i = 0; i < b->n_members; i++) {
        why = fsm_check_member(&b->members[i]);
        if (why != NULL) {
            res->reason = why;
            return;
        }
        for (size_t j = 0; j < i; j++) {
            if (b->members[j].id == b->members[i].id) {
                res->reason = "member ids must be unique";
                return;
            }
        }
    }
    set_hash_key(f, b->hash_key);
    memcpy(f->cluster_id, b->cluster_id, FSM_CLUSTER_ID_LEN);
    f->group_id = b->group_id;
    f->settings = s;
    f->schema_version = schema_version;
    f->n_members = b->n_members;
    memcpy(f->members, b->members, b->n_members * sizeof b->members[0]);
    f->bootstrapped = true;
    res->outcome = FSM_OK;
    res->reason = NULL;
}

static void do_set_settings(struct fsm *f,
                            const struct fsm_settings *s,
                            struct fsm_result *res)
{
    const char *why = fsm_settings_check(s);

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    if (s->max_window_ms > f->settings.max_window_ms) {
        if (f->fence_active) {
            res->outcome = FSM_FAILED_PRECONDITION;
            res->reason = "a max_window raise is still settling";
            return;
        }
        /* Records accepted so far kept ts + old window + skew. Claims with
         * a ts they could have carried keep the old window until no such
         * ts can be inside any window (docs/state-machine.md). */
        f->fence_active = true;
        f->fence_ts = f->now + f->settings.max_skew_ms;
        if (f->ts_hwm > f->fence_ts) {
            /* A ts accepted under an earlier, larger max_skew. */
            f->fence_ts = f->ts_hwm;
        }
        f->fence_prev_window = f->settings.max_window_ms;
        f->fence_until = f->fence_ts + s->max_window_ms;
    }
    f->settings = *s;
    res->outcome = FSM_OK;
}

static void do_set_member(struct fsm *f,
                          const struct fsm_member *m,
                          struct fsm_result *res)
{
    const char *why = fsm_check_member(m);

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    if (fsm_is_retired(f, m->id)) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "this id was retired and can never be added again";
        return;
    }
    for (size_t i = 0; i < f->n_members; i++) {
        if (f->members[i].id == m->id) {
            f->members[i] = *m;
            res->outcome = FSM_OK;
            return;
        }
    }
    if (f->n_members == FSM_MEMBERS_MAX) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the member directory is full (64)";
        return;
    }
    f->members[f->n_members++] = *m;
    res->outcome = FSM_OK;
}

static void do_retire(struct fsm *f, uint64_t id, struct fsm_result *res)
{
    size_t pos;

    if (id == 0) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = "member id must not be 0";
        return;
    }
    if (fsm_is_retired(f, id)) {
        res->outcome = FSM_OK;
        res->retry = true;
        return;
    }
    if (f->n_retired == FSM_RETIRED_MAX) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the retired id list is full";
        return;
    }
    if (f->n_retired == f->cap_retired) {
        size_t cap = f->cap_retired == 0 ? 16 : f->cap_retired * 2;
        uint64_t *p = realloc(f->retired, cap * sizeof *p);
        if (p == NULL) {
            fsm_panic("out of memory (retired ids)");
        }
        f->retired = p;
        f->cap_retired = cap;
    }
    pos = retired_pos(f, id);
    memmove(f->retired + pos + 1, f->retired + pos,
            (f->n_retired - pos) * sizeof *f->retired);
    f->retired[pos] = id;
    f->n_retired++;
    for (size_t i = 0; i < f->n_members; i++) {
        if (f->members[i].id == id) {
            memmove(f->members + i, f->members + i + 1,
                    (f->n_members - i - 1) * sizeof f->members[0]);
            f->n_members--;
            break;
        }
    }
    res->outcome = FSM_OK;
}

/* ------------------------------------------------------------------------
 * Apply
 * ---------------------------------------------------------------------- */

static int apply_begin(struct fsm *f,
                       uint64_t index,
                       uint32_t schema_version,
                       uint64_t leader_time_ms)
{
    if (schema_version == 0) {
        return FSM_E_MALFORMED;
    }
    if (schema_version > FSM_SCHEMA_VERSION) {
        return FSM_E_SCHEMA;
    }
    if (leader_time_ms > FSM_TIME_MAX) {
        /* Records keep times in 48 bits (year 10889). A larger stamp can
         * only come from a broken clock; clamping is deterministic. */
        leader_time_ms = FSM_TIME_MAX;
    }
    if (leader_time_ms > f->now) {
        f->now = leader_time_ms;
    }
    if (f->fence_active && f->now > f->fence_until) {
        /* Forget the fence entirely: equal states must encode equally. */
        f->fence_active = false;
        f->fence_ts = 0;
        f->fence_prev_window = 0;
        f->fence_until = 0;
    }
    wheel_advance(f);
    f->last_index = index;
    return 0;
}

/* Keep the owner token only in answers to its owner (and Lookup). */
static void scrub_token(struct fsm_result *res)
{
    bool owner;

    switch (res->cmd) {
        case FSM_CMD_CLAIM:
            owner = res->outcome == FSM_ACCEPTED;
            break;
        case FSM_CMD_COMPLETE:
            owner = res->outcome == FSM_COMPLETED;
            break;
        case FSM_CMD_RELEASE:
            owner = res->outcome == FSM_RELEASED || res->outcome == FSM_FAILED;
            break;
        case FSM_CMD_LOOKUP:
            owner = true;
            break;
        default:
            owner = false;
            break;
    }
    if (!owner) {
        res->has_owner_token = false;
        memset(&res->owner_token, 0, sizeof res->owner_token);
    }
}

static int apply_one(struct fsm *f,
                     uint64_t index,
                     uint32_t slot,
                     uint32_t schema_version,
                     const struct fsm_cmd *cmd,
                     const uint64_t *pre,
                     struct fsm_result *res)
{
    memset(res, 0, sizeof *res);
    res->cmd = cmd->type;
    if (cmd->type == FSM_CMD_INVALID) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = cmd->invalid_reason != NULL ? cmd->invalid_reason
                                                  : "undecodable command";
        return 0;
    }
    if (cmd->type == FSM_CMD_BOOTSTRAP) {
        do_bootstrap(f, cmd->u.bootstrap, schema_version, res);
        return 0;
    }
    if (!f->bootstrapped) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the cluster is not bootstrapped";
        return 0;
    }
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            do_claim(f, index, slot, &cmd->u.claim, pre, res);
            break;
        case FSM_CMD_COMPLETE:
            do_complete(f, &cmd->u.complete, pre, res);
            break;
        case FSM_CMD_RELEASE:
            do_release(f, &cmd->u.release, pre, res);
            break;
        case FSM_CMD_LOOKUP:
            do_lookup(f, &cmd->u.ident, pre, res);
            break;
        case FSM_CMD_FORGET:
            do_forget(f, &cmd->u.ident, pre, res);
            break;
        case FSM_CMD_SET_SETTINGS:
            do_set_settings(f, &cmd->u.settings, res);
            break;
        case FSM_CMD_SET_MEMBER:
            do_set_member(f, &cmd->u.member, res);
            break;
        case FSM_CMD_RETIRE_MEMBER:
            do_retire(f, cmd->u.retire_id, res);
            break;
        case FSM_CMD_SET_SCHEMA:
            if (cmd->u.schema_version > FSM_SCHEMA_VERSION) {
                return FSM_E_SCHEMA;
            }
            if (cmd->u.schema_version < f->schema_version) {
                res->outcome = FSM_INVALID_ARGUMENT;
                res->reason = "the schema version never goes down";
            } else {
                f->schema_version = cmd->u.schema_version;
                res->outcome = FSM_OK;
            }
            break;
        default:
            res->outcome = FSM_INVALID_ARGUMENT;
            res->reason = "unknown command";
            break;
    }
    scrub_token(res);
    return 0;
}

static int grow_scratch(struct fsm *f, size_t n)
{
    size_t cap = f->cap_cmds == 0 ? 256 : f->cap_cmds;
    struct fsm_cmd *cmds;
    uint64_t *hashes;
    bool *hashed;

    if (n <= f->cap_cmds) {
        return 0;
    }
    while (cap < n) {
        cap *= 2;
    }
    cmds = realloc(f->cmds, cap * sizeof *cmds);
    if (cmds == NULL) {
        fsm_panic("out of memory (batch)");
    }
    f->cmds = cmds;
    hashes = realloc(f->hashes, cap * sizeof *hashes);
    if (hashes == NULL) {
        fsm_panic("out of memory (batch)");
    }
    f->hashes = hashes;
    hashed = realloc(f->hashed, cap * sizeof *hashed);
    if (hashed == NULL) {
        fsm_panic("out of memory (batch)");
    }
    f->hashed = hashed;
    f->cap_cmds = cap;
    return 0;
}

/* The identity a command names, if it names a valid one. */
static const struct fsm_ident *cmd_ident(const struct fsm_cmd *cmd,
                                         struct fsm_ident *tmp)
{
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            *tmp =
                (struct fsm_ident){cmd->u.claim.scope, cmd->u.claim.scope_len,
                                   cmd->u.claim.key, cmd->u.claim.key_len};
            break;
        case FSM_CMD_COMPLETE:
            *tmp = (struct fsm_ident){
                cmd->u.complete.scope, cmd->u.complete.scope_len,
                cmd->u.complete.key, cmd->u.complete.key_len};
            break;
        case FSM_CMD_RELEASE:
            *tmp = (struct fsm_ident){
                cmd->u.release.scope, cmd->u.release.scope_len,
                cmd->u.release.key, cmd->u.release.key_len};
            break;
        case FSM_CMD_LOOKUP:
        case FSM_CMD_FORGET:
            *tmp = cmd->u.ident;
            break;
        default:
            return NULL;
    }
    if (fsm_check_ident(tmp->scope_len, tmp->key_len) != NULL) {
        return NULL;
    }
    return tmp;
}

/* Apply decoded commands. Hashing every identity first and prefetching its
 * table slot overlaps the cache misses of a whole batch instead of paying
 * them one command at a time. The hash key only changes at bootstrap, so
 * hashes computed before the batch stay right for all of it. */
static int apply_batch(struct fsm *f,
                       uint64_t index,
                       uint32_t schema_version,
                       uint64_t leader_time_ms,
                       const struct fsm_cmd *cmds,
                       size_t n,
                       fsm_emit_cb emit,
                       void *arg)
{
    struct fsm_result res;
    struct fsm_ident tmp;
    bool pre = f->bootstrapped;
    int rv;

    rv = apply_begin(f, index, schema_version, leader_time_ms);
    if (rv != 0) {
        return rv;
    }
    if (pre) {
        grow_scratch(f, n);
        for (size_t i = 0; i < n; i++) {
            const struct fsm_ident *id = cmd_ident(&cmds[i], &tmp);
            f->hashed[i] = id != NULL;
            if (id != NULL) {
                uint64_t h =
                    fsm_hash(f, id->scope, id->scope_len, id->key, id->key_len);
                f->hashes[i] = h;
                table_prefetch(&f->vps[vp_of(h)], (uint32_t)h);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t *h = pre && f->hashed[i] ? &f->hashes[i] : NULL;
        rv =
            apply_one(f, index, (uint32_t)i, schema_version, &cmds[i], h, &res);
        if (rv != 0) {
            return rv;
        }
        if (emit != NULL) {
            emit(arg, i, &res);
        }
    }
    return 0;
}

int fsm_apply_cmds(struct fsm *f,
                   uint64_t index,
                   uint32_t schema_version,
                   uint64_t leader_time_ms,
                   const struct fsm_cmd *cmds,
                   size_t n_cmds,
                   fsm_emit_cb emit,
                   void *arg)
{
    if (n_cmds > FSM_BATCH_COMMANDS_MAX) {
        return FSM_E_TOOBIG;
    }
    return apply_batch(f, index, schema_version, leader_time_ms, cmds, n_cmds,
                       emit, arg);
}

int fsm_apply(struct fsm *f,
              uint64_t index,
              const uint8_t *buf,
              size_t len,
              fsm_emit_cb emit,
              void *arg)
{
    struct command_batch batch;
    int rv;

    rv = command_decode_batch(&f->dec, buf, len, &batch);
    if (rv == -ENOMEM) {
        fsm_panic("out of memory (batch)");
    }
    if (rv != 0) {
        return FSM_E_MALFORMED;
    }
    if (batch.schema_version == 0) {
        return FSM_E_MALFORMED;
    }
    if (batch.schema_version > FSM_SCHEMA_VERSION) {
        return FSM_E_SCHEMA; /* before decoding what we cannot know */
    }
    grow_scratch(f, batch.n_commands);
    command_decoder_reset(&f->dec);
    for (size_t i = 0; i < batch.n_commands; i++) {
        command_decode(&f->dec, batch.commands[i], batch.command_lens[i],
                       &f->cmds[i]);
    }
    return apply_batch(f, index, batch.schema_version, batch.leader_time_ms,
                       f->cmds, batch.n_commands, emit, arg);
}

/* ------------------------------------------------------------------------
 * Observers
 * ---------------------------------------------------------------------- */

uint64_t fsm_now(const struct fsm *f)
{
    return f->now;
}

uint64_t fsm_last_index(const struct fsm *f)
{
    return f->last_index;
}

bool fsm_bootstrapped(const struct fsm *f)
{
    return f->bootstrapped;
}

const uint8_t *fsm_cluster_id(const struct fsm *f)
{
    return f->cluster_id;
}

uint32_t fsm_group_id(const struct fsm *f)
{
    return f->group_id;
}

uint32_t fsm_schema_version(const struct fsm *f)
{
    return f->schema_version;
}

const struct fsm_settings *fsm_settings(const struct fsm *f)
{
    return &f->settings;
}

size_t fsm_n_members(const struct fsm *f)
{
    return f->n_members;
}

const struct fsm_member *fsm_member(const struct fsm *f, size_t i)
{
    return i < f->n_members ? &f->members[i] : NULL;
}

size_t fsm_n_retired(const struct fsm *f)
{
    return f->n_retired;
}

uint64_t fsm_n_records(const struct fsm *f)
{
    return f->n_records;
}

uint64_t fsm_bytes(const struct fsm *f)
{
    return f->bytes;
}

uint64_t fsm_memory(const struct fsm *f)
{
    uint64_t m = slab_memory(&f->slab);

    for (size_t i = 0; i < FSM_N_VPS; i++) {
        m += table_memory(&f->vps[i]);
    }
    return m;
}
