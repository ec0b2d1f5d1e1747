/* fsm/snapshot.c: the snapshot encoding of the whole state machine (the
 * writing side; snapshot_read.c reads it back: restore).
 *
 * Canonical: the same state gives the same bytes whatever history led to it.
 * Records are written vp by vp, each vp in (hash, bytes) order, which is the
 * order its ordered Robin Hood table already holds them in (table.c), so no
 * sort is needed. Attempts are written oldest first.
 *
 * Layout, little-endian, no padding:
 *   "ONCESNAP" u32 format u32 schema u64 last_index u64 now u8 bootstrapped
 *   cluster_id[16] hash_key[16] u32 group_id settings(6 x u64)
 *   u8 fence_active u64 fence_ts u64 fence_prev_window u64 fence_until
 *   u64 ts_hwm
 *   [format 2: u8 1 source_cluster_id[16] u64 source_index
 *    u64 restore_time u64 restore_ts u64 restore_until u64 restore_lift]
 *   [format 3: u8 fence (0 or 1) [the fence's fields as in format 2]
 *    u32 n_quotas { u8 len pattern u64 max_records u64 max_bytes }
 *    (1..64 quotas, strictly ascending by pattern bytes)]
 *   u32 n_members { u64 id u8 role u8 len raft_addr u8 len client_addr }
 *   u32 n_retired { u64 id } (ascending)
 *   u64 n_records
 *   4096 x { u32 n { record } }
 *   u32 crc32c of everything before it
 * record: u8 flags(kind | state << 1 | 0x20 N-use | 0x40 sliding)
 *   u8 scope_len u16 key_len
 *   u64 first_index u64 first_time u64 expires req[16] scope key
 *   [0x20: u16 max_uses u16 n_uses { req[16] } x (n_uses - 1)]
 *   [0x40: u32 ttl]
 *   u8 has_ext
 *   [ext: u64 lease_expires u32 owner_group u64 owner_index u32 owner_slot
 *    u32 owner_attempt owner_req[16] u8 hash_len hash u8 stored_kind
 *    u32 stored_len stored u32 attempts_total u8 n_att
 *    { req[16] u64 index u64 time u8 outcome u8 retry u8 len exec } ]
 *
 * Format 3 is written exactly when the state has quotas (fsm_quota.c),
 * else format 2 exactly when it carries a restore fence (fsm_fence.c),
 * format 1 otherwise: the format is a function of the state, so the
 * encoding stays canonical, and a node of a previous version keeps reading
 * every snapshot of a cluster that uses neither (it refuses the others:
 * FSM_E_SCHEMA, so it can never drop a fence or a quota). Quota usage is
 * not written: restore charges each record as it reads it.
 *
 * The flag bits 0x20 and 0x40 (N-use, sliding) appear only in states of
 * schema 3 (FSM_SCHEMA_NUSE) and later, which the header's schema field
 * says: a node of an older schema refuses the snapshot for that field
 * (FSM_E_SCHEMA) before it reads a record, so they need no format of
 * their own, and a record without them encodes as before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/crc32c.h"
#include "fsm/fsm_int.h"

#define FENCE_FIXED  (1 + FSM_CLUSTER_ID_LEN + 5 * 8)
#define SNAP_HDR_MIN 8

/* ------------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------- */

struct wbuf
{
    uint8_t *p;
    uint8_t *end; /* buf + fsm_snapshot_size */
};

/* fsm_snapshot_size computed the length: writing past it is a bug in one
 * of the two, caught before it overruns the caller's buffer. */
static inline void w_room(const struct wbuf *w, size_t n)
{
    ONCE_ASSERTF(n <= (size_t)(w->end - w->p),
                 "snapshot write of %zu bytes with %zu left", n,
                 (size_t)(w->end - w->p));
}

static inline void w_bytes(struct wbuf *w, const void *src, size_t n)
{
    w_room(w, n);
    memcpy(w->p, src, n);
    w->p += n;
}

static inline void w_u8(struct wbuf *w, uint8_t v)
{
    w_room(w, 1);
    *w->p++ = v;
}

static inline void w_u16(struct wbuf *w, uint16_t v)
{
    w_room(w, 2);
    w->p[0] = (uint8_t)v;
    w->p[1] = (uint8_t)(v >> 8);
    w->p += 2;
}

static inline void w_u32(struct wbuf *w, uint32_t v)
{
    w_room(w, 4);
    for (int i = 0; i < 4; i++) {
        *w->p++ = (uint8_t)(v >> (8 * i));
    }
}

static inline void w_u64(struct wbuf *w, uint64_t v)
{
    w_room(w, 8);
    for (int i = 0; i < 8; i++) {
        *w->p++ = (uint8_t)(v >> (8 * i));
    }
}

#define REC_FIXED     SNAP_REC_FIXED
#define EXT_FIXED     SNAP_EXT_FIXED
#define ATT_FIXED     SNAP_ATT_FIXED
#define SNAP_PREFETCH 16
#define HEAD_FIXED    SNAP_HEAD_FIXED

/* The format of @f's snapshot: a function of the state (see above). */
static uint32_t snap_format(const struct fsm *f)
{
    return f->n_quotas > 0 ? 3u : f->restore_fence ? 2u : 1u;
}

size_t fsm_snapshot_size(const struct fsm *f)
{
    size_t n = HEAD_FIXED + (f->restore_fence ? FENCE_FIXED : 0);

    if (f->n_quotas > 0) {
        n += (f->restore_fence ? 0 : 1) + 4;
        for (size_t i = 0; i < f->n_quotas; i++) {
            n += 1 + f->quotas[i].len + 8 + 8;
        }
    }
    for (size_t i = 0; i < f->n_members; i++) {
        n += 8 + 1 + 1 + strlen(f->members[i].raft_addr) + 1 +
             strlen(f->members[i].client_addr);
    }
    n += 4 + 8 * f->n_retired + 8;
    n += 4 * (size_t)FSM_N_VPS + fsm_live_snap(f);
    return n + 4;
}

static void write_record(const struct fsm *f,
                         struct wbuf *w,
                         const struct rec *r)
{
    const struct rec_ext *e;

    w_u8(w, (uint8_t)(r->flags & REC_F_SNAP_MASK));
    w_u8(w, r->scope_len);
    w_u16(w, r->key_len);
    w_u64(w, get48(r->first_index));
    w_u64(w, get48(r->first_time));
    w_u64(w, fsm_rec_expires(f, r));
    w_bytes(w, r->request_id, FSM_REQUEST_ID_LEN);
    w_bytes(w, r->id, (size_t)r->scope_len + r->key_len);
    e = ext_of(f, r);
    if (r->flags & REC_F_MULTI) {
        w_u16(w, e->max_uses);
        w_u16(w, e->n_uses);
        w_bytes(w, slab_ptr(&f->slab, e->uses_h),
                (size_t)FSM_REQUEST_ID_LEN * (e->n_uses - 1u));
    }
    if (r->flags & REC_F_SLIDING) {
        w_u32(w, r->life_ms);
    }
    w_u8(w, r->ext != 0);
    if (r->ext == 0) {
        return;
    }
    w_u64(w, e->lease_expires_ms);
    w_u32(w, e->owner_group);
    w_u64(w, e->owner_index);
    w_u32(w, e->owner_slot);
    w_u32(w, e->owner_attempt);
    w_bytes(w, e->owner_request_id, FSM_REQUEST_ID_LEN);
    w_u8(w, e->payload_hash_len);
    w_bytes(w, e->payload_hash, e->payload_hash_len);
    w_u8(w, e->stored_kind);
    w_u32(w, e->stored_len);
    if (e->stored_len > 0) {
        w_bytes(w, e->stored, e->stored_len);
    }
    w_u32(w, e->attempts_total);
    w_u8(w, (uint8_t)ext_n_attempts(e));
    for (size_t i = 0; i < ext_n_attempts(e); i++) {
        const struct rec_attempt *a = slab_ptr(&f->slab, ext_attempt(e, i));
        w_bytes(w, a->request_id, FSM_REQUEST_ID_LEN);
        w_u64(w, a->index);
        w_u64(w, a->time_ms);
        w_u8(w, a->outcome);
        w_u8(w, a->retry);
        w_u8(w, a->execution_id_len);
        w_bytes(w, a->execution_id, a->execution_id_len);
    }
}

static void write_quotas(const struct fsm *f, struct wbuf *w)
{
    w_u32(w, (uint32_t)f->n_quotas);
    for (size_t i = 0; i < f->n_quotas; i++) {
        const struct quota *q = &f->quotas[i];
        w_u8(w, q->len);
        w_bytes(w, q->pattern, q->len);
        w_u64(w, q->max_records);
        w_u64(w, q->max_bytes);
    }
}

void fsm_snapshot_write(const struct fsm *f, uint8_t *buf, size_t len)
{
    struct wbuf w = {buf, buf + len};
    const struct fsm_settings *s = &f->settings;
    uint32_t *order = NULL;
    size_t order_cap = 0;

    w_bytes(&w, SNAP_MAGIC, 8);
    w_u32(&w, snap_format(f));
    w_u32(&w, f->schema_version);
    w_u64(&w, f->last_index);
    w_u64(&w, f->now);
    w_u8(&w, f->bootstrapped);
    w_bytes(&w, f->cluster_id, FSM_CLUSTER_ID_LEN);
    w_bytes(&w, f->hash_key, FSM_HASH_KEY_LEN);
    w_u32(&w, f->group_id);
    w_u64(&w, s->max_window_ms);
    w_u64(&w, s->max_skew_ms);
    w_u64(&w, s->max_ttl_ms);
    w_u64(&w, s->max_lease_ms);
    w_u64(&w, s->max_records);
    w_u64(&w, s->max_bytes);
    w_u8(&w, f->fence_active);
    w_u64(&w, f->fence_ts);
    w_u64(&w, f->fence_prev_window);
    w_u64(&w, f->fence_until);
    w_u64(&w, f->ts_hwm);
    if (f->restore_fence) {
        w_u8(&w, 1);
        w_bytes(&w, f->restore_source, FSM_CLUSTER_ID_LEN);
        w_u64(&w, f->restore_source_index);
        w_u64(&w, f->restore_time);
        w_u64(&w, f->restore_ts);
        w_u64(&w, f->restore_until);
        w_u64(&w, f->restore_lift);
    } else if (f->n_quotas > 0) {
        w_u8(&w, 0); /* format 3: no fence */
    }
    if (f->n_quotas > 0) {
        write_quotas(f, &w);
    }
    w_u32(&w, (uint32_t)f->n_members);
    for (size_t i = 0; i < f->n_members; i++) {
        const struct fsm_member *m = &f->members[i];
        size_t rl = strlen(m->raft_addr), cl = strlen(m->client_addr);
        w_u64(&w, m->id);
        w_u8(&w, (uint8_t)m->role);
        w_u8(&w, (uint8_t)rl);
        w_bytes(&w, m->raft_addr, rl);
        w_u8(&w, (uint8_t)cl);
        w_bytes(&w, m->client_addr, cl);
    }
    w_u32(&w, (uint32_t)f->n_retired);
    for (size_t i = 0; i < f->n_retired; i++) {
        w_u64(&w, f->retired[i]);
    }
    w_u64(&w, fsm_live_n(f));
    for (size_t v = 0; v < FSM_N_VPS; v++) {
        const struct table *t = &f->vps[v];
        const struct rec *r;
        uint8_t *count_at;
        uint32_t n = 0;

        if (t->n > order_cap) {
            uint32_t *p = realloc(order, t->n * sizeof *p);
            if (p == NULL) {
                fsm_panic("out of memory (snapshot)");
            }
            order = p;
            order_cap = t->n;
        }
        table_walk_sorted(t, order);
        count_at = w.p; /* patched below: backlog records are skipped */
        w_u32(&w, 0);
        ONCE_ASSERT(order != NULL || t->n == 0, "order holds t->n handles");
        /* Records sit in allocation order, the walk is in hash order: every
         * record is a cache miss unless it is fetched ahead. */
        for (uint32_t i = 0; i < t->n && i < SNAP_PREFETCH; i++) {
            __builtin_prefetch(slab_ptr(&f->slab, order[i]));
        }
        for (uint32_t i = 0; i < t->n; i++) {
            if (i + SNAP_PREFETCH < t->n) {
                __builtin_prefetch(
                    slab_ptr(&f->slab, order[i + SNAP_PREFETCH]));
            }
            r = slab_ptr(&f->slab, order[i]);
            if (!fsm_rec_gone(f, r)) {
                write_record(f, &w, r);
                n++;
            }
        }
        count_at[0] = (uint8_t)n;
        count_at[1] = (uint8_t)(n >> 8);
        count_at[2] = (uint8_t)(n >> 16);
        count_at[3] = (uint8_t)(n >> 24);
    }
    free(order);
    w_u32(&w, crc32c(0, buf, (size_t)(w.p - buf)));
    if ((size_t)(w.p - buf) != len) {
        fsm_panic("snapshot size mismatch");
    }
}
