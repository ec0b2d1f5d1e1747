/* The record commands: Claim, Complete, Release, Lookup and Forget
 * (docs/state-machine.md has their rules). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/sim_mutation.h"
#include "fsm/fsm_int.h"

/* The time a record's expiry is compared with: fsm now, except under the
 * simulator's seeded bug "expire-early" (common/sim_mutation.h), where a
 * record is gone 1 ms before its expires_ms. */
static inline uint64_t sim_expiry_now(const struct fsm *f)
{
    return f->now + (SIM_MUTANT(SIM_MUT_EXPIRE_EARLY) ? 1u : 0u);
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
    if (c->max_uses > FSM_MAX_USES) {
        return "max_uses must be 1..64";
    }
    if (c->kind == FSM_KIND_NONCE) {
        if (c->payload_hash_len != 0 || c->lease_ms != 0) {
            return "a NONCE claim takes no payload hash and no lease";
        }
        if (c->sliding) {
            /* A replayed signed request must not extend the life of its
             * own nonce past the window's bound (docs/state-machine.md). */
            return "a NONCE claim cannot slide";
        }
        return NULL;
    }
    if (c->max_uses > 1) {
        return "max_uses applies to NONCE claims only";
    }
    if (c->sliding && c->ttl_ms == 0) {
        return "a sliding claim needs a ttl";
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
    return fsm_live_n(f) + 1 > f->settings.max_records ||
           !fsm_bytes_fit(f, new_bytes);
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

/* Make the new NONCE record @r (in vp @v) N-use: its ext and its uses
 * object of @uses_size bytes, one use counted (the record's request id). */
static void new_uses(struct fsm *f,
                     uint32_t v,
                     struct rec *r,
                     uint32_t max_uses,
                     size_t uses_size)
{
    struct rec_ext *e = fsm_ensure_ext(f, v, r);
    uint32_t u;

    ONCE_ASSERTF(
        max_uses >= 2 && max_uses <= FSM_MAX_USES && uses_size <= SLAB_OBJ_MAX,
        "max_uses %u passed check_claim", (unsigned)max_uses);
    u = slab_alloc(&f->slab, uses_size);
    if (u == 0) {
        fsm_panic("out of memory (uses)");
    }
    r->flags |= REC_F_MULTI;
    e->uses_h = u;
    e->max_uses = (uint16_t)max_uses;
    e->n_uses = 1;
    fsm_bytes_move(f, v, (int64_t)slab_size(uses_size));
    f->snap_rec_bytes += SNAP_MULTI_FIXED;
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
    size_t uses_size = 0;
    uint64_t lease_expires = 0;
    struct rec *r;
    uint32_t h;

    if (c->kind == FSM_KIND_IDEMPOTENT) {
        need += slab_size(sizeof(struct rec_ext)) +
                (fsm_reserves(f) ? REC_RESERVE : 0);
        lease_expires = f->now + lease;
    } else if (c->max_uses > 1) {
        /* Every use's request id is room taken now, so a later use is
         * never refused for space. */
        uses_size = (size_t)FSM_REQUEST_ID_LEN * (c->max_uses - 1u);
        need += slab_size(sizeof(struct rec_ext)) + slab_size(uses_size);
    }
    if (over_capacity(f, need)) {
        res->outcome = FSM_RESOURCE_EXHAUSTED;
        res->reason = "the cluster's max_records or max_bytes is reached";
        return;
    }
    if (fsm_quota_refuses(f, c->scope, c->scope_len, need, res)) {
        return; /* the scope's quota is full; other scopes are not */
    }
    h = slab_alloc(&f->slab, size);
    if (h == 0) {
        fsm_panic("out of memory (record)");
    }
    r = rec_mut(f, h);
    ONCE_ASSERTF(c->scope_len >= 1 && c->scope_len <= FSM_SCOPE_MAX &&
                     c->key_len >= 1 && c->key_len <= FSM_KEY_MAX &&
                     c->payload_hash_len <= FSM_PAYLOAD_HASH_MAX,
                 "scope %zu, key %zu, hash %zu bytes passed claim_invalid",
                 (size_t)c->scope_len, (size_t)c->key_len,
                 (size_t)c->payload_hash_len);
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
    fsm_bytes_move(f, vp_of(hash), (int64_t)slab_size(size));
    f->snap_rec_bytes += SNAP_REC_FIXED + c->scope_len + c->key_len;
    if (c->kind == FSM_KIND_NONCE) {
        r->life_ms = (uint32_t)(retention(f, c, 0) - f->now);
        fsm_set_state(f, r, FSM_STATE_SEEN);
        if (uses_size > 0) {
            new_uses(f, vp_of(hash), r, c->max_uses, uses_size);
        }
    } else {
        struct rec_ext *e = fsm_ensure_ext(f, vp_of(hash), r);
        r->flags |= REC_F_IDEMPOTENT;
        r->life_ms = 0;
        fsm_set_state(f, r, FSM_STATE_PENDING);
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
        if (c->sliding) {
            /* check_claim bounded ttl by max_ttl (<= 30 days): 32 bits */
            r->flags |= REC_F_SLIDING;
            r->life_ms = (uint32_t)c->ttl_ms;
            f->snap_rec_bytes += SNAP_SLIDING_FIXED;
        }
    }
    if (table_insert(fsm_vp_mut(f, vp_of(hash)), &f->slab, (uint32_t)hash, h) !=
        0) {
        fsm_panic("out of memory (table)");
    }
    f->n_records++;
    fsm_acct_in(f, r);
    fsm_wheel_place(f, h);
    note_ts(f, c);
    res->outcome = FSM_ACCEPTED;
    fsm_fill_record(f, r, res, false);
}

static void takeover(struct fsm *f,
                     uint64_t index,
                     uint32_t slot,
                     struct rec *r,
                     const struct fsm_claim *c,
                     uint64_t lease)
{
    struct rec_ext *e = ext_mut(f, r);
    uint64_t lease_expires = f->now + lease;
    uint64_t expires = retention(f, c, lease_expires);

    ONCE_ASSERT(e != NULL, "an IDEMPOTENT record always has its ext");
    fsm_set_state(f, r, FSM_STATE_PENDING);
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

static enum fsm_outcome claim_idem(struct fsm *f,
                                   uint64_t index,
                                   uint32_t slot,
                                   struct rec *r,
                                   const struct fsm_claim *c,
                                   uint64_t lease,
                                   struct fsm_result *res);

/* A claim answered DUPLICATE, IN_PROGRESS or FAILED renews sliding record
 * @r: expiry at log time + its ttl, never past max_ttl from its first
 * claim, never earlier than it was (a lease or a window rule may hold it
 * longer). Log time only: every replica moves it at the same index. */
static void slide(struct fsm *f, struct rec *r)
{
    struct rec_ext *e = ext_mut(f, r);
    uint64_t cap = get48(r->first_time) + f->settings.max_ttl_ms;
    uint64_t t = f->now + r->life_ms;

    if (t > cap) {
        t = cap;
    }
    if (t > e->expires_ms) {
        e->expires_ms = t; /* the wheel re-places it lazily */
    }
}

/* A NONCE claim with another request id on live record @r when either
 * side is N-use: CONFLICT if max_uses differs from the first claim's, an
 * exact retry of an accepted use, REPLAYED once every use is taken, else a
 * new use (a new acceptance: its window and the restore fence apply, and
 * the record lives at least as long as this use's own retention). */
static enum fsm_outcome claim_uses(struct fsm *f,
                                   struct rec *r,
                                   const struct fsm_claim *c,
                                   struct fsm_result *res)
{
    uint32_t want = c->max_uses > 1 ? c->max_uses : 1;
    const struct rec_ext *e = ext_of(f, r);
    const uint8_t *ids;
    uint64_t first = get48(r->first_time), until;
    enum fsm_outcome o;
    struct rec_ext *m;

    if (r->flags & REC_F_MULTI) {
        /* A retry of any use is recognised before max_uses is compared,
         * as the first use's is (claim_live). */
        ONCE_ASSERTF(e->n_uses >= 1 && e->n_uses <= e->max_uses,
                     "%u uses of %u", (unsigned)e->n_uses,
                     (unsigned)e->max_uses);
        ids = slab_ptr(&f->slab, e->uses_h);
        for (uint32_t i = 0; i + 1u < e->n_uses; i++) {
            if (memcmp(ids + (size_t)i * FSM_REQUEST_ID_LEN, c->request_id,
                       FSM_REQUEST_ID_LEN) == 0) {
                res->retry = true;
                return FSM_ACCEPTED;
            }
        }
    }
    if (!(r->flags & REC_F_MULTI) || e->max_uses != want) {
        res->reason = "the key was claimed with another max_uses";
        return FSM_CONFLICT;
    }
    if (e->n_uses >= e->max_uses) {
        return FSM_REPLAYED;
    }
    o = window_check(f, c, res);
    if (o == 0) {
        o = fsm_fence_check(f, c, res);
    }
    if (o != 0) {
        return o;
    }
    until = retention(f, c, 0);
    if (until - first > UINT32_MAX) {
        res->reason = "an N-use record lives at most 49 days";
        return FSM_FAILED_PRECONDITION;
    }
    if (until > first + r->life_ms) {
        r->life_ms = (uint32_t)(until - first); /* re-placed lazily */
    }
    m = ext_mut(f, r);
    memcpy((uint8_t *)slab_mut(&f->slab, m->uses_h) +
               (size_t)(m->n_uses - 1u) * FSM_REQUEST_ID_LEN,
           c->request_id, FSM_REQUEST_ID_LEN);
    m->n_uses++;
    f->snap_rec_bytes += FSM_REQUEST_ID_LEN;
    note_ts(f, c);
    return FSM_ACCEPTED;
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
        if (__builtin_expect(c->max_uses > 1 || (r->flags & REC_F_MULTI), 0)) {
            return claim_uses(f, r, c, res);
        }
        return FSM_REPLAYED;
    }
    o = claim_idem(f, index, slot, r, c, lease, res);
    if ((r->flags & REC_F_SLIDING) &&
        (o == FSM_DUPLICATE || o == FSM_IN_PROGRESS || o == FSM_FAILED)) {
        slide(f, r);
    }
    return o;
}

/* Outcome of an IDEMPOTENT claim on a live record; may take it over. */
static enum fsm_outcome claim_idem(struct fsm *f,
                                   uint64_t index,
                                   uint32_t slot,
                                   struct rec *r,
                                   const struct fsm_claim *c,
                                   uint64_t lease,
                                   struct fsm_result *res)
{
    const struct rec_ext *e = ext_of(f, r);
    enum fsm_outcome o;

    ONCE_ASSERT(e != NULL, "an IDEMPOTENT record always has its ext");
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
            /* Unreachable: the NONCE branch above returned. */
            ONCE_ASSERT(rec_kind(r) == FSM_KIND_NONCE,
                        "an IDEMPOTENT record is never SEEN");
            return FSM_CONFLICT;
    }
    o = window_check(f, c, res);
    if (o == 0) {
        o = fsm_fence_check(f, c, res);
    }
    if (o != 0) {
        return o; /* a signed request outside its window never takes over */
    }
    takeover(f, index, slot, r, c, lease);
    return FSM_ACCEPTED;
}

void fsm_do_claim(struct fsm *f,
                  uint64_t index,
                  uint32_t slot,
                  const struct fsm_claim *c,
                  const uint64_t *pre,
                  struct fsm_result *res)
{
    uint64_t lease = 0, hash;
    struct fsm_claim old;
    struct table_key k;
    enum fsm_outcome o;
    const char *why;
    uint32_t h;

    if (__builtin_expect(c->max_uses != 0 || c->sliding, 0) &&
        f->schema_version < FSM_SCHEMA_NUSE) {
        /* As a binary of that schema decodes it: without either field. */
        old = *c;
        old.max_uses = 0;
        old.sliding = false;
        c = &old;
    }
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
    if (h != 0 && fsm_rec_expires(f, rec_at(f, h)) <= sim_expiry_now(f)) {
        fsm_detach(f, hash, h); /* expired, not yet pruned: as if absent */
        h = 0;
    }
    if (h != 0) {
        struct rec *r = rec_mut(f, h);
        fsm_acct_out(f, r); /* its expiry and size may change */
        o = claim_live(f, index, slot, r, c, lease, res);
        res->outcome = o;
        fsm_add_attempt(f, vp_of(hash), r, c, index, o, res->retry);
        fsm_acct_in(f, r);
        fsm_fill_record(f, r, res, false);
        return;
    }
    o = window_check(f, c, res);
    if (o == 0) {
        o = fsm_fence_check(f, c, res);
    }
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
    if (h != 0 && fsm_rec_expires(f, rec_at(f, h)) <= sim_expiry_now(f)) {
        return 0;
    }
    return h;
}

static bool token_is_owner(const struct rec_ext *e, const struct fsm_token *t)
{
    if (SIM_MUTANT(SIM_MUT_STALE_OWNER)) {
        /* Seeded bug: any owner of this record so far, not only the
         * current one, may complete or release it. */
        return e->owner_group == t->group_id && t->index <= e->owner_index;
    }
    return e->owner_group == t->group_id && e->owner_index == t->index &&
           e->owner_slot == t->slot;
}

/* Store @r's result or error; the caller has taken @r's share out of the
 * counters (fsm_acct_out) and puts it back after. */
static void store_bytes(struct fsm *f,
                        uint32_t v,
                        struct rec *r,
                        uint8_t kind,
                        const uint8_t *p,
                        size_t len)
{
    struct rec_ext *e = ext_mut(f, r);
    uint8_t *copy = NULL;

    ONCE_ASSERT(e != NULL, "only an IDEMPOTENT record stores bytes");
    if (len > 0) {
        copy = malloc(len);
        if (copy == NULL) {
            fsm_panic("out of memory (result)");
        }
        memcpy(copy, p, len);
    }
    fsm_bytes_move(f, v, -(int64_t)e->stored_len);
    f->snap_rec_bytes -= e->stored_len;
    fsm_stored_set(f, r->ext, e, copy);
    e->stored_len = (uint32_t)len;
    e->stored_kind = kind;
    fsm_bytes_move(f, v, (int64_t)len);
    f->snap_rec_bytes += len;
}

/* Common checks of Complete and Release: NULL if the record is owned by
 * @token and the caller may act on it (*@vp is its vp); otherwise the
 * outcome is set. */
static struct rec *owned_record(struct fsm *f,
                                const uint8_t *scope,
                                size_t scope_len,
                                const uint8_t *key,
                                size_t key_len,
                                const struct fsm_token *token,
                                const uint64_t *pre,
                                uint32_t *vp,
                                struct fsm_result *res)
{
    const char *why = fsm_check_ident(scope_len, key_len);
    const struct rec *r;
    uint64_t hash;
    uint32_t h;

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return NULL;
    }
    h = find_live(f, scope, scope_len, key, key_len, pre, &hash);
    if (h == 0) {
        res->outcome = FSM_NOT_FOUND;
        return NULL;
    }
    *vp = vp_of(hash);
    r = rec_at(f, h);
    if (rec_kind(r) != FSM_KIND_IDEMPOTENT) {
        res->outcome = FSM_CONFLICT;
        res->reason = "a NONCE record has no owner";
        fsm_fill_record(f, r, res, false);
        return NULL;
    }
    if (!token_is_owner(slab_ptr(&f->slab, r->ext), token)) {
        res->outcome = FSM_NOT_OWNER;
        res->reason = "the owner token is not the current one";
        fsm_fill_record(f, r, res, false);
        return NULL;
    }
    return rec_mut(f, h); /* the caller changes it */
}

void fsm_do_complete(struct fsm *f,
                     const struct fsm_complete *c,
                     const uint64_t *pre,
                     struct fsm_result *res)
{
    struct rec *r;
    uint32_t v;

    if (c->result_len > FSM_RESULT_MAX) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = "result must be at most 64 KiB";
        return;
    }
    r = owned_record(f, c->scope, c->scope_len, c->key, c->key_len,
                     &c->owner_token, pre, &v, res);
    if (r == NULL) {
        return;
    }
    fsm_acct_out(f, r); /* its state and size may change */
    switch (rec_state(r)) {
        case FSM_STATE_PENDING:
            /* From schema 2 never refused for space: the claim reserved
             * room for the largest result (REC_RESERVE), which the result
             * now takes (docs/state-machine.md, "Memory"). Schema 1 keeps
             * its refusal: the record stays PENDING. */
            if (!fsm_reserves(f) && !fsm_bytes_fit(f, c->result_len)) {
                res->outcome = FSM_RESOURCE_EXHAUSTED;
                res->reason = "the cluster's max_bytes is reached";
                break;
            }
            store_bytes(f, v, r, 1, c->result, c->result_len);
            fsm_set_state(f, r, FSM_STATE_COMPLETED);
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
    fsm_acct_in(f, r);
    fsm_fill_record(f, r, res, false);
}

void fsm_do_release(struct fsm *f,
                    const struct fsm_release *c,
                    const uint64_t *pre,
                    struct fsm_result *res)
{
    struct rec *r;
    uint32_t v;

    if (c->error_len > FSM_ERROR_MAX) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = "error must be at most 1 KiB";
        return;
    }
    r = owned_record(f, c->scope, c->scope_len, c->key, c->key_len,
                     &c->owner_token, pre, &v, res);
    if (r == NULL) {
        return;
    }
    fsm_acct_out(f, r); /* its state and size may change */
    switch (rec_state(r)) {
        case FSM_STATE_PENDING:
        case FSM_STATE_RELEASED:
            if (c->terminal && !fsm_reserves(f) &&
                !fsm_bytes_fit(f, c->error_len)) {
                res->outcome = FSM_RESOURCE_EXHAUSTED; /* schema 1 only */
                res->reason = "the cluster's max_bytes is reached";
            } else if (c->terminal) { /* never refused for space, as Complete */
                store_bytes(f, v, r, 2, c->error, c->error_len);
                fsm_set_state(f, r, FSM_STATE_FAILED);
                res->outcome = FSM_FAILED;
            } else {
                res->retry = rec_state(r) == FSM_STATE_RELEASED;
                fsm_set_state(f, r, FSM_STATE_RELEASED);
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
    fsm_acct_in(f, r);
    fsm_fill_record(f, r, res, false);
}

void fsm_do_lookup(struct fsm *f,
                   const struct fsm_ident *id,
                   const uint64_t *pre,
                   struct fsm_result *res)
{
    const char *why;
    uint32_t h;

    memset(res, 0, sizeof *res);
    res->cmd = FSM_CMD_LOOKUP;
    res->log_time_ms = f->now;
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
    fsm_fill_record(f, rec_at(f, h), res, true);
}

void fsm_lookup(struct fsm *f,
                const struct fsm_ident *id,
                struct fsm_result *res)
{
    fsm_do_lookup(f, id, NULL, res);
}

void fsm_do_forget(struct fsm *f,
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
    fsm_fill_record(f, rec_at(f, h), res, false);
    res->result = NULL; /* the ext is freed below */
    res->result_len = 0;
    res->stored_error = NULL;
    res->stored_error_len = 0;
    fsm_detach(f, hash, h);
    res->outcome = FSM_FORGOTTEN;
}
