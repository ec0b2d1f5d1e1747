/* Record storage of the state machine: the out-of-line ext, kept attempts,
 * taking a record out of its table, and copying a record's facts into a
 * result. Every change keeps the fsm's byte counters (bytes against
 * max_bytes, snap_rec_bytes for fsm_snapshot_size) exact. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

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

    ONCE_ASSERTF(scope_len <= FSM_SCOPE_MAX,
                 "scope of %zu bytes: callers check identities first",
                 scope_len);
    /* len(scope) || scope || key: unambiguous, so (a, bc) != (ab, c). */
    prefix[0] = (uint8_t)scope_len;
    memcpy(prefix + 1, scope, scope_len);
    return hash_keyed2(&f->hash, prefix, 1 + scope_len, key, key_len);
}

uint64_t fsm_rec_expires(const struct fsm *f, const struct rec *r)
{
    if (r->flags & REC_F_IDEMPOTENT) {
        const struct rec_ext *e;

        ONCE_ASSERT(r->ext != 0, "an IDEMPOTENT record always has its ext");
        e = slab_ptr(&f->slab, r->ext);
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
    struct rec_ext *e = ext_mut(f, r);
    uint64_t bytes;

    if (e == NULL) {
        return 0;
    }
    bytes = fsm_ext_bytes(e);
    if ((r->flags & REC_F_MULTI) && e->uses_h != 0) {
        size_t size = rec_uses_size(r, e);
        bytes += slab_size(size);
        slab_free(&f->slab, e->uses_h, size);
        e->uses_h = 0;
    }
    for (size_t i = 0; i < ext_n_attempts(e); i++) {
        uint32_t h = ext_attempt(e, i);
        const struct rec_attempt *a = slab_ptr(&f->slab, h);
        size_t size = attempt_size(a);
        bytes += slab_size(size);
        slab_free(&f->slab, h, size);
    }
    fsm_stored_set(f, r->ext, e, NULL);
    slab_free(&f->slab, r->ext, sizeof *e);
    r->ext = 0;
    return bytes;
}

/* Final release of a record the wheel has reached. */
void fsm_rec_free(struct fsm *f, uint32_t h)
{
    struct rec *r = rec_mut(f, h);
    size_t size = rec_size(r->scope_len, r->key_len);

    (void)free_ext(f, r);
    slab_free(&f->slab, h, size);
}

/* What the record costs in a snapshot (snapshot.c's layout). */
uint64_t fsm_rec_snap_size(const struct fsm *f, const struct rec *r)
{
    uint64_t n = SNAP_REC_FIXED + (uint64_t)r->scope_len + r->key_len;
    const struct rec_ext *e = ext_of(f, r);

    if (r->flags & REC_F_SLIDING) {
        n += SNAP_SLIDING_FIXED;
    }
    if (e == NULL) {
        return n;
    }
    if ((r->flags & REC_F_MULTI) && e->n_uses > 0) {
        n += SNAP_MULTI_FIXED + (uint64_t)FSM_REQUEST_ID_LEN * (e->n_uses - 1u);
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
bool fsm_bytes_fit(const struct fsm *f, uint64_t n)
{
    return fsm_live_bytes(f) + n <= f->settings.max_bytes;
}

/* Take a live record out of its table; the wheel frees it later. */
void fsm_detach(struct fsm *f, uint64_t hash, uint32_t h)
{
    struct rec *r = rec_mut(f, h);
    bool found;

    found =
        table_remove(fsm_vp_mut(f, vp_of(hash)), &f->slab, (uint32_t)hash, h);
    ONCE_ASSERT(found, "a live record is in its table");
    (void)found;
    ONCE_ASSERT(!(r->flags & REC_F_DETACHED), "detaching a record twice");
    ONCE_ASSERT(f->n_records > 0, "record count underflow");
    fsm_acct_out(f, r);
    fsm_pending_out(f, r);
    f->snap_rec_bytes -= fsm_rec_snap_size(f, r);
    fsm_bytes_move(f, vp_of(hash),
                   -(int64_t)slab_size(rec_size(r->scope_len, r->key_len)));
    fsm_bytes_move(f, vp_of(hash), -(int64_t)free_ext(f, r));
    f->n_records--;
    r->flags |= REC_F_DETACHED;
}

struct rec_ext *fsm_ensure_ext(struct fsm *f, uint32_t v, struct rec *r)
{
    struct rec_ext *e;

    if (r->ext != 0) {
        return slab_mut(&f->slab, r->ext);
    }
    r->ext = slab_alloc(&f->slab, sizeof *e);
    if (r->ext == 0) {
        fsm_panic("out of memory (record ext)");
    }
    e = slab_mut(&f->slab, r->ext);
    memset(e, 0, sizeof *e);
    fsm_bytes_move(f, v, (int64_t)fsm_ext_bytes(e));
    f->snap_rec_bytes += SNAP_EXT_FIXED;
    return e;
}

void fsm_stored_set(struct fsm *f, uint32_t eh, struct rec_ext *e, uint8_t *p)
{
    if (e->stored != NULL) {
        struct stored_ref last = f->stored[--f->n_stored];
        /* The list names this buffer at its slot (last: just popped). */
        ONCE_ASSERTF(e->stored_slot <= f->n_stored &&
                         (e->stored_slot == f->n_stored
                              ? last.p == e->stored
                              : f->stored[e->stored_slot].p == e->stored),
                     "stored slot %u of %zu", e->stored_slot, f->n_stored + 1);
        if (e->stored_slot != f->n_stored) {
            struct rec_ext *moved = slab_mut(&f->slab, last.ext);
            f->stored[e->stored_slot] = last;
            moved->stored_slot = e->stored_slot;
        }
        fsm_free_stored(f, e->stored, e->stored_len);
    }
    e->stored = p;
    if (p == NULL) {
        return;
    }
    if (f->n_stored == f->cap_stored) {
        size_t cap = f->cap_stored == 0 ? 64 : 2 * f->cap_stored;
        struct stored_ref *s = realloc(f->stored, cap * sizeof *s);
        if (s == NULL) {
            fsm_panic("out of memory (result list)");
        }
        f->stored = s;
        f->cap_stored = cap;
    }
    e->stored_slot = (uint32_t)f->n_stored;
    f->stored[f->n_stored++] = (struct stored_ref){p, eh};
}

void fsm_add_attempt(struct fsm *f,
                     uint32_t v,
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
    if (!fsm_bytes_fit(f, need) || !fsm_quota_rec_fits(f, r, need)) {
        /* Past max_bytes (the cluster's or the scope's quota's) replays
         * still answer, but their evidence is only counted (where the
         * record already has attempt storage): memory stays bounded under
         * a replay flood. */
        if (r->ext != 0) {
            e = slab_mut(&f->slab, r->ext);
            if (e->attempts_total < UINT32_MAX) {
                e->attempts_total++;
            }
        }
        return;
    }
    e = fsm_ensure_ext(f, v, r);
    h = slab_alloc(&f->slab, size);
    if (h == 0) {
        fsm_panic("out of memory (attempt)");
    }
    a = slab_mut(&f->slab, h);
    ONCE_ASSERTF(c->execution_id_len <= FSM_EXECUTION_ID_MAX,
                 "execution id of %zu bytes (fsm_claim checked it)",
                 (size_t)c->execution_id_len);
    memcpy(a->request_id, c->request_id, FSM_REQUEST_ID_LEN);
    a->index = index;
    a->time_ms = f->now;
    a->outcome = (uint8_t)outcome;
    a->retry = retry;
    a->execution_id_len = (uint8_t)c->execution_id_len;
    if (c->execution_id_len > 0) {
        memcpy(a->execution_id, c->execution_id, c->execution_id_len);
    }
    fsm_bytes_move(f, v, (int64_t)slab_size(size));
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
        uint32_t old;
        const struct rec_attempt *o;
        size_t osize;

        ONCE_ASSERT(e->att_head < FSM_ATTEMPTS_LAST,
                    "ring head inside the ring");
        old = e->att_last[e->att_head];
        o = slab_ptr(&f->slab, old);
        osize = attempt_size(o);
        fsm_bytes_move(f, v, -(int64_t)slab_size(osize));
        f->snap_rec_bytes -= SNAP_ATT_FIXED + o->execution_id_len;
        slab_free(&f->slab, old, osize);
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
void fsm_fill_record(struct fsm *f,
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
    if (!(r->flags & REC_F_IDEMPOTENT)) {
        bool multi = (r->flags & REC_F_MULTI) != 0;
        ONCE_ASSERT(!multi || e != NULL, "an N-use record always has its ext");
        res->max_uses = multi ? e->max_uses : 1;
        res->uses = multi ? e->n_uses : 1;
    }
    res->sliding = (r->flags & REC_F_SLIDING) != 0;
    if (r->flags & REC_F_IDEMPOTENT) {
        ONCE_ASSERT(e != NULL, "an IDEMPOTENT record always has its ext");
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

        ONCE_ASSERT(n <= 1 + FSM_ATTEMPTS_LAST,
                    "more attempts kept than att_out holds");
        for (size_t i = 0; i < n; i++) {
            copy_attempt(&f->att_out[i], slab_ptr(&f->slab, ext_attempt(e, i)));
            res->attempt_list[i] = &f->att_out[i];
        }
        res->n_attempt_list = n;
    }
}
