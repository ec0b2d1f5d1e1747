/* fsm/fsm_int.h: the state machine's private layout and internal functions,
 * shared by the fsm*.c files (see fsm.c for which does what), snapshot.c
 * and snapshot_read.c (encode, restore) and table.c (identity comparison). */
#ifndef ONCE_FSM_FSM_INT_H_
#define ONCE_FSM_FSM_INT_H_

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/hash.h"
#include "fsm/command.h"
#include "fsm/fsm.h"
#include "fsm/slab.h"
#include "fsm/table.h"

/* A record: one slab object, header + scope + key. 44 bytes of header keep a
 * NONCE record with a 32-byte key inside 80 bytes; the 48-bit index and time
 * fields last 8900 years of milliseconds and 2.8e14 log entries.
 * Everything IDEMPOTENT, and attempts, live in the out-of-line ext. */
struct rec
{
    uint32_t next;     /* timer wheel chain (handle) */
    uint32_t ext;      /* struct rec_ext handle, 0 if none */
    uint32_t life_ms;  /* NONCE: expires - first_time; IDEMPOTENT: the
                        * ttl a sliding record renews (REC_F_SLIDING), or 0 */
    uint8_t flags;     /* REC_F_* */
    uint8_t scope_len; /* 1..128 */
    uint16_t key_len;  /* 1..256 */
    uint8_t first_index[6];
    uint8_t first_time[6];
    uint8_t request_id[FSM_REQUEST_ID_LEN]; /* the first accepted one */
    uint8_t id[];                           /* scope then key */
};

#define REC_HDR_SIZE 44
_Static_assert(sizeof(struct rec) == REC_HDR_SIZE, "record header layout");

#define REC_F_IDEMPOTENT 0x01u /* kind; clear = NONCE */
#define REC_F_STATE_MASK 0x0eu /* enum fsm_state << 1 */
#define REC_F_DETACHED   0x10u /* out of the table, freed by the wheel */
/* Schema 3 (FSM_SCHEMA_NUSE) on. A NONCE record of max_uses > 1: it has an
 * ext whose uses_h, max_uses, n_uses say its uses. */
#define REC_F_MULTI 0x20u
/* An IDEMPOTENT record whose expiry slides (life_ms is its ttl). */
#define REC_F_SLIDING 0x40u
/* The flags a snapshot carries. */
#define REC_F_SNAP_MASK \
    (REC_F_IDEMPOTENT | REC_F_STATE_MASK | REC_F_MULTI | REC_F_SLIDING)

/* Out-of-line part: IDEMPOTENT facts and attempts. */
struct rec_ext
{
    /* The first 8 bytes by kind: a NONCE record's expiry is in the record
     * (life_ms), so this room serves its uses when it is N-use. */
    union {
        uint64_t expires_ms; /* IDEMPOTENT: absolute expiry */
        struct
        {
            /* NONCE with REC_F_MULTI: slab object of 16 * (max_uses - 1)
             * bytes, the request ids of uses 2..n_uses in order (use 1's
             * is the record's request_id); 2 <= max_uses <= FSM_MAX_USES,
             * 1 <= n_uses <= max_uses. */
            uint32_t uses_h;
            uint16_t max_uses;
            uint16_t n_uses;
        };
    };
    uint64_t lease_expires_ms;
    uint64_t owner_index;
    uint32_t owner_group;
    uint32_t owner_slot;
    uint32_t owner_attempt;
    uint32_t attempts_total;
    uint8_t owner_request_id[FSM_REQUEST_ID_LEN];
    uint32_t att_first;                   /* attempt handle */
    uint32_t att_last[FSM_ATTEMPTS_LAST]; /* ring */
    uint8_t att_n_last;
    uint8_t att_head;    /* index of the oldest in the ring */
    uint8_t stored_kind; /* 0 none, 1 result, 2 error */
    uint8_t payload_hash_len;
    uint32_t stored_len;
    uint32_t stored_slot; /* position in fsm.stored when stored != NULL */
    uint8_t *stored;      /* malloc'd result or error */
    uint8_t payload_hash[FSM_PAYLOAD_HASH_MAX];
};

/* The slot sits in what was padding: an ext's size, which max_bytes
 * counts, is unchanged. */
_Static_assert(sizeof(struct rec_ext) == 160, "ext layout");

/* Every result/error buffer, listed so freeing the state does not walk the
 * records (fsm_restore_commit frees the old state on the loop). */
struct stored_ref
{
    uint8_t *p;
    uint32_t ext; /* handle of the ext holding it */
};

/* An attempt as stored: fixed part + execution id bytes. */
struct rec_attempt
{
    uint8_t request_id[FSM_REQUEST_ID_LEN];
    uint64_t index;
    uint64_t time_ms;
    uint8_t outcome;
    uint8_t retry;
    uint8_t execution_id_len;
    uint8_t execution_id[];
};

#define ATTEMPT_HDR_SIZE offsetof(struct rec_attempt, execution_id)

/* The kept attempts of @e, oldest first: the first one, then the ring. */
static inline size_t ext_n_attempts(const struct rec_ext *e)
{
    return (e->att_first != 0 ? 1u : 0u) + e->att_n_last;
}

/* Handle of kept attempt @i (0 <= i < ext_n_attempts(e)). */
static inline uint32_t ext_attempt(const struct rec_ext *e, size_t i)
{
    if (i == 0) {
        return e->att_first;
    }
    return e->att_last[(e->att_head + i - 1) % FSM_ATTEMPTS_LAST];
}

/* Bytes of @r's uses object (0 unless N-use): allocated in full at the
 * first claim, so a later use never needs room. */
static inline size_t rec_uses_size(const struct rec *r, const struct rec_ext *e)
{
    return (r->flags & REC_F_MULTI) && e != NULL && e->uses_h != 0
               ? (size_t)FSM_REQUEST_ID_LEN * (e->max_uses - 1u)
               : 0;
}

static inline uint64_t get48(const uint8_t b[6])
{
    uint64_t v = 0;
    for (int i = 5; i >= 0; i--) {
        v = (v << 8) | b[i];
    }
    return v;
}

static inline void put48(uint8_t b[6], uint64_t v)
{
    for (int i = 0; i < 6; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
}

static inline size_t rec_size(size_t scope_len, size_t key_len)
{
    return REC_HDR_SIZE + scope_len + key_len;
}

static inline enum fsm_state rec_state(const struct rec *r)
{
    return (enum fsm_state)((r->flags & REC_F_STATE_MASK) >> 1);
}

static inline void rec_set_state(struct rec *r, enum fsm_state st)
{
    r->flags = (uint8_t)((r->flags & ~REC_F_STATE_MASK) | ((unsigned)st << 1));
}

static inline enum fsm_kind rec_kind(const struct rec *r)
{
    return (r->flags & REC_F_IDEMPOTENT) ? FSM_KIND_IDEMPOTENT : FSM_KIND_NONCE;
}

/* Canonical total order on identities with equal hash: scope length, key
 * length, then bytes. */
static inline int rec_id_cmp(const struct rec *a, const struct rec *b)
{
    if (a->scope_len != b->scope_len) {
        return a->scope_len < b->scope_len ? -1 : 1;
    }
    if (a->key_len != b->key_len) {
        return a->key_len < b->key_len ? -1 : 1;
    }
    return memcmp(a->id, b->id, (size_t)a->scope_len + a->key_len);
}

/* Two-level timer wheel over 1.024 s ticks (see fsm.c). */
#define WHEEL_TICK_SHIFT 10
#define WHEEL_L0_BITS    16
#define WHEEL_L0_SIZE    (1u << WHEEL_L0_BITS)
#define WHEEL_L1_BITS    12
#define WHEEL_L1_SIZE    (1u << WHEEL_L1_BITS)

/* The counters' share of some records (fsm_acct.c). */
struct tick_cost
{
    uint64_t tick;
    uint64_t n;
    uint64_t bytes;
    uint64_t snap;
    uint64_t n_res; /* of the n, those holding a result reservation */
};

struct tick_map
{
    struct tick_cost *e; /* n == 0: empty slot */
    uint32_t cap;
    uint32_t n;
};

/* Pruning is budgeted (FSM_PRUNE_BUDGET visits per batch), so the wheel's
 * physical position cur may lag behind log time; passed is where log time
 * is, and decides what is counted (fsm_acct.c). cur <= passed. */
struct wheel
{
    uint64_t cur;    /* next tick to process; ticks before it are done */
    uint64_t passed; /* fsm_now's tick: records of earlier ticks are gone */
    uint64_t n_l0;
    uint64_t n_l1;
    uint32_t l0[WHEEL_L0_SIZE];
    uint32_t l1[WHEEL_L1_SIZE];
};

/* A quota (fsm_quota.c): the replicated pattern and limits, and the
 * derived usage of the records charged to it, counted like the cluster's
 * figures (fsm_acct.c): a record counts while its tick has not passed, and
 * ticks[] holds the counted cost by expiry tick so passing a tick uncounts
 * it in O(1). Usage is rebuilt from the records at restore and whenever
 * the set of quotas changes. */
struct quota
{
    char pattern[FSM_PATTERN_MAX + 1]; /* NUL-terminated */
    uint8_t len;                       /* strlen(pattern) */
    bool prefix;                       /* pattern ends in '*' */
    uint64_t max_records;              /* 0: no limit */
    uint64_t max_bytes;                /* 0: no limit */
    uint64_t n;                        /* counted records */
    uint64_t bytes;                    /* their bytes */
    struct tick_map ticks;
};

struct fsm
{
    struct slab slab;
    struct table vps[FSM_N_VPS];
    struct wheel wheel;
    struct hash_keyed hash;
    bool hash_ready;
    struct command_decoder dec;

    uint64_t now;
    uint64_t last_index;
    bool bootstrapped;
    uint8_t cluster_id[FSM_CLUSTER_ID_LEN];
    uint8_t hash_key[FSM_HASH_KEY_LEN];
    uint32_t group_id;
    uint32_t schema_version;
    struct fsm_settings settings;

    /* max_window raise fence (docs/state-machine.md, SetSettings). */
    bool fence_active;
    uint64_t fence_ts;          /* claims with ts <= this use prev window */
    uint64_t fence_prev_window; /* max_window before the raise */
    uint64_t fence_until;       /* fence lifts when now > this */
    uint64_t ts_hwm;            /* largest ts ever accepted */

    /* Restore fence (fsm_fence.c; docs/state-machine.md, "Restored
     * clusters"): set once, by fsm_rebase, in the state a restored cluster
     * starts from; dropped entirely at the first batch past restore_lift,
     * so equal states encode equally. */
    bool restore_fence;
    uint8_t restore_source[FSM_CLUSTER_ID_LEN]; /* the backup's cluster */
    uint64_t restore_source_index; /* the backup's last applied index */
    uint64_t restore_time;         /* log time of the restore */
    uint64_t restore_ts;           /* claims with ts <= this: STALE */
    uint64_t restore_until; /* TTL-only/IDEMPOTENT refused while now <= this;
                             * 0 when the operator accepted the window */
    uint64_t restore_lift;  /* the fence is dropped when now > this */
    char reason_buf[96];    /* the fence's refusal text (results borrow it) */

    /* Quotas, sorted by pattern bytes (the snapshot's canonical order);
     * quota_reason holds the refusal text results borrow. */
    size_t n_quotas;
    struct quota quotas[FSM_QUOTAS_MAX];
    char quota_reason[FSM_PATTERN_MAX + 64];

    size_t n_members;
    struct fsm_member members[FSM_MEMBERS_MAX];
    size_t n_retired;
    uint64_t *retired; /* sorted ascending */
    size_t cap_retired;

    /* Records in the tables and their bytes (as counted against max_bytes)
     * and snapshot encoding size, kept up to date by every mutation so no
     * figure needs a walk. These include the backlog: records whose tick
     * has passed, not yet freed; the counted figures are these minus
     * backlog (fsm_live_*). */
    uint64_t n_records;
    uint64_t bytes;
    uint64_t snap_rec_bytes;
    /* bytes split by vp (the same physical measure of storage, backlog
     * included, reservations not): the sum over vps is f->bytes. Changed
     * only by fsm_bytes_move. */
    uint64_t vp_bytes[FSM_N_VPS];
    struct tick_cost backlog;
    struct tick_map ticks; /* counted records' costs by expiry tick */

    /* PENDING records (in the tables, the pruning backlog included) by
     * the tick of their first claim (fsm_pending.c): n_pending of them;
     * pending_min is at most the oldest tick, exact unless pending_dirty.
     * Derived: not in snapshots, never read by apply. n_reserved counts
     * the records holding a result reservation (rec_reserves), exactly,
     * the backlog included: apply reads it (fsm_live_bytes). */
    struct tick_map pending;
    uint64_t n_pending;
    uint64_t n_reserved;
    uint64_t pending_min;
    bool pending_dirty;

    /* The live frozen view (fsm_frozen.c), NULL if none. While it lives,
     * vp_frozen[v] says vp v still shares its slot array with the view, and
     * frees of result/error buffers wait in deferred until fsm_release. */
    struct fsm_frozen *frozen;
    bool vp_frozen[FSM_N_VPS];
    uint64_t frozen_vp_bytes; /* slot arrays copied for the view */
    void **deferred;
    size_t n_deferred;
    size_t cap_deferred;
    uint64_t deferred_bytes;

    struct stored_ref *stored;
    size_t n_stored;
    size_t cap_stored;

    /* Scratch for results: attempts copied out for Lookup. */
    struct fsm_attempt att_out[1 + FSM_ATTEMPTS_LAST];

    /* Scratch for a batch: decoded commands and their identities' hashes,
     * computed up front so the table slots can be prefetched. */
    struct fsm_cmd *cmds;
    uint64_t *hashes;
    bool *hashed; /* hashes[i] is valid */
    size_t cap_cmds;
};

/* Snapshot encoding: its magic, its newest format (1 and 2 are still read
 * and written) and sizes (snapshot.c has the layout; snapshot_read.c reads
 * it). */
#define SNAP_MAGIC  "ONCESNAP"
#define SNAP_FORMAT 3u
#define SNAP_HEAD_FIXED \
    (8 + 4 + 4 + 8 + 8 + 1 + 16 + 16 + 4 + 48 + 1 + 24 + 8 + 4)
#define SNAP_REC_FIXED (1 + 1 + 2 + 8 + 8 + 8 + FSM_REQUEST_ID_LEN + 1)
#define SNAP_EXT_FIXED \
    (8 + 4 + 8 + 4 + 4 + FSM_REQUEST_ID_LEN + 1 + 1 + 4 + 4 + 1)
#define SNAP_ATT_FIXED (FSM_REQUEST_ID_LEN + 8 + 8 + 1 + 1 + 1)
/* Schema 3 record extensions (flag bits in the record's u8 flags): N-use
 * u16 max_uses u16 n_uses then n_uses - 1 request ids; sliding u32 ttl. */
#define SNAP_MULTI_FIXED   (2 + 2)
#define SNAP_SLIDING_FIXED 4

static inline uint32_t vp_of(uint64_t hash)
{
    return (uint32_t)(hash >> (64 - FSM_VP_BITS));
}

/* Readers and writers of records (slab.h: a reader's pointer is never
 * written through, and a writer copies a page a live view still reads). */
static inline const struct rec *rec_at(const struct fsm *f, uint32_t h)
{
    return slab_ptr(&f->slab, h);
}

static inline struct rec *rec_mut(struct fsm *f, uint32_t h)
{
    return slab_mut(&f->slab, h);
}

static inline const struct rec_ext *ext_of(const struct fsm *f,
                                           const struct rec *r)
{
    return r->ext != 0 ? slab_ptr(&f->slab, r->ext) : NULL;
}

static inline struct rec_ext *ext_mut(struct fsm *f, const struct rec *r)
{
    return r->ext != 0 ? slab_mut(&f->slab, r->ext) : NULL;
}

/* fsm_frozen.c: copy-on-write of what a live view shares. */
/* Give vp @v its own slot array (the view keeps the original). */
void fsm_vp_thaw(struct fsm *f, uint32_t v);
/* Free a result/error buffer now, or at fsm_release while a view lives. */
void fsm_free_stored(struct fsm *f, uint8_t *p, size_t len);

/* Every change to a vp's table goes through this. */
static inline struct table *fsm_vp_mut(struct fsm *f, uint32_t v)
{
    if (__builtin_expect(f->vp_frozen[v], 0)) {
        fsm_vp_thaw(f, v);
    }
    return &f->vps[v];
}

/* The one place the record bytes change: add @delta (negative: remove)
 * to f->bytes and to vp @v's share, so that the shares always sum to
 * f->bytes. Every allocation or free of record storage calls it with the
 * record's vp. */
static inline void fsm_bytes_move(struct fsm *f, uint32_t v, int64_t delta)
{
    f->bytes += (uint64_t)delta;
    f->vp_bytes[v] += (uint64_t)delta;
}

/* Counted figures: what answers and snapshots see. */
static inline uint64_t fsm_live_n(const struct fsm *f)
{
    return f->n_records - f->backlog.n;
}

/* What a PENDING or RELEASED IDEMPOTENT record holds of max_bytes (and of
 * its quota's) beyond its storage: room for the largest result or error,
 * so that a Complete or terminal Release is never refused for space
 * (docs/state-machine.md, "Memory"); a RELEASED record keeps it, since its
 * owner may still fail it and a takeover may complete it. Part of the
 * record's counted cost (fsm_rec_cost) while it holds it; never allocated. */
#define REC_RESERVE ((uint64_t)FSM_RESULT_MAX)

static inline bool rec_reserves(const struct rec *r)
{
    enum fsm_state st = rec_state(r);

    return st == FSM_STATE_PENDING || st == FSM_STATE_RELEASED;
}

/* Result reservations count against max_bytes from log schema 2 on
 * (FSM_SCHEMA_QUOTAS); under schema 1 apply decides as a schema-1 binary
 * does, without them, so that the replicas of a cluster in a rolling
 * upgrade never decide a claim, a Complete or a Release differently. The
 * counters always include them (so SetSchema changes no stored sum, only
 * this rule): fsm_live_bytes subtracts them under schema 1. */
static inline bool fsm_reserves(const struct fsm *f)
{
    return f->schema_version >= FSM_SCHEMA_QUOTAS;
}

/* Counted bytes: storage plus the reservations (n_reserved is exact, the
 * backlog included), minus the backlog's share of both; under schema 1
 * without the counted records' reservations. */
static inline uint64_t fsm_live_bytes(const struct fsm *f)
{
    uint64_t b = f->bytes + f->n_reserved * REC_RESERVE - f->backlog.bytes;

    if (!fsm_reserves(f)) {
        b -= (f->n_reserved - f->backlog.n_res) * REC_RESERVE;
    }
    return b;
}

static inline uint64_t fsm_live_snap(const struct fsm *f)
{
    return f->snap_rec_bytes - f->backlog.snap;
}

/* fsm_acct.c: the counters by expiry tick. Take a record's share out
 * before changing it (or its expiry) and put it back after; a new record
 * goes in once complete, a removed one comes out before it goes. */
void fsm_acct_in(struct fsm *f, const struct rec *r);
void fsm_acct_out(struct fsm *f, const struct rec *r);
/* Log time reached tick @to: uncount the records of every earlier tick. */
void fsm_acct_pass(struct fsm *f, uint64_t to);
/* The tick maps themselves (also fsm_pending.c's): add @sign (+1 or -1)
 * times @c to @tick's entry (an entry whose n reaches 0 goes); the entry
 * of @tick, or NULL. */
void fsm_ticks_add(struct tick_map *m,
                   uint64_t tick,
                   const struct tick_cost *c,
                   int sign);
const struct tick_cost *fsm_ticks_get(const struct tick_map *m, uint64_t tick);
void fsm_ticks_close(struct tick_map *m);
/* Take every entry of a tick before @to out of @m (whose entries are all
 * at or after @from), adding their sum to *@taken. */
void fsm_ticks_pass(struct tick_map *m,
                    uint64_t from,
                    uint64_t to,
                    struct tick_cost *taken);
/* What record @r costs in the counters, and its expiry tick. */
void fsm_rec_cost(const struct fsm *f,
                  const struct rec *r,
                  struct tick_cost *c);

/* fsm_quota.c: quotas. */
/* The quota @r's scope is charged to, or NULL. */
struct quota *fsm_quota_of(struct fsm *f,
                           const uint8_t *scope,
                           size_t scope_len);
/* Add @sign (+1 or -1) times the counted cost @c of a record of @q. */
void fsm_quota_charge(struct quota *q, const struct tick_cost *c, int sign);
/* A new record of @scope needing @need bytes: false, or true with the
 * RESOURCE_EXHAUSTED outcome and a reason naming the quota in @res. */
bool fsm_quota_refuses(struct fsm *f,
                       const uint8_t *scope,
                       size_t scope_len,
                       uint64_t need,
                       struct fsm_result *res);
/* Would @n more bytes of record @r stay within its quota? For a record
 * whose share is out of the counters (between fsm_acct_out and _in, where
 * every caller is): its own current cost is added to the quota's usage. */
bool fsm_quota_rec_fits(struct fsm *f, const struct rec *r, uint64_t n);
/* Log time reached tick @to (from @from): uncount every quota's records
 * of the ticks passed. */
void fsm_quota_pass(struct fsm *f, uint64_t from, uint64_t to);
/* Insert a validated quota in pattern order (restore): 0, FSM_E_TOOBIG if
 * there are FSM_QUOTAS_MAX already, FSM_E_MALFORMED if @p is not after the
 * last one. */
int fsm_quota_append(struct fsm *f,
                     const uint8_t *p,
                     size_t len,
                     uint64_t max_records,
                     uint64_t max_bytes);
/* Free the quotas' tick maps and drop them (clear). */
void fsm_quota_clear(struct fsm *f);
void fsm_do_quota_set(struct fsm *f,
                      const struct fsm_quota_set *q,
                      struct fsm_result *res);

/* fsm_pending.c: the PENDING idempotent records by the tick of their first
 * claim, for the pending count and the oldest one's age (observers only:
 * apply never reads it, snapshots do not carry it, restore rebuilds it).
 * Every state change of a record goes through fsm_set_state; a record
 * leaving the tables through fsm_pending_out; a restored one comes in with
 * fsm_pending_in. */
void fsm_set_state(struct fsm *f, struct rec *r, enum fsm_state st);
void fsm_pending_in(struct fsm *f, const struct rec *r);
void fsm_pending_out(struct fsm *f, const struct rec *r);

/* fsm.c */
_Noreturn void fsm_panic(const char *what);

/* fsm_record.c: record storage. */
uint64_t fsm_hash(struct fsm *f,
                  const uint8_t *scope,
                  size_t scope_len,
                  const uint8_t *key,
                  size_t key_len);
uint64_t fsm_rec_expires(const struct fsm *f, const struct rec *r);
/* What the record costs in a snapshot (snapshot.c's layout). */
uint64_t fsm_rec_snap_size(const struct fsm *f, const struct rec *r);

/* Is @r past its tick (uncounted, not in snapshots, waiting to be freed)? */
static inline bool fsm_rec_gone(const struct fsm *f, const struct rec *r)
{
    return (fsm_rec_expires(f, r) >> WHEEL_TICK_SHIFT) < f->wheel.passed;
}
size_t fsm_ext_bytes(const struct rec_ext *e);
/* Final release of a record the wheel has reached. */
void fsm_rec_free(struct fsm *f, uint32_t h);
/* Would storing @n more bytes stay within max_bytes? */
bool fsm_bytes_fit(const struct fsm *f, uint64_t n);
/* Take a live record out of its table; the wheel frees it later. */
void fsm_detach(struct fsm *f, uint64_t hash, uint32_t h);
/* The ext of @r (in vp @v), allocated if it has none. */
struct rec_ext *fsm_ensure_ext(struct fsm *f, uint32_t v, struct rec *r);
/* Give ext @e (handle @eh) the result/error buffer @p (malloc'd, now the
 * fsm's; NULL: none), freeing the one it had. */
void fsm_stored_set(struct fsm *f, uint32_t eh, struct rec_ext *e, uint8_t *p);
/* Keep a later claim of @r (in vp @v) as evidence (bounded by max_bytes). */
void fsm_add_attempt(struct fsm *f,
                     uint32_t v,
                     struct rec *r,
                     const struct fsm_claim *c,
                     uint64_t index,
                     enum fsm_outcome outcome,
                     bool retry);
/* Fill the record facts of @res from @r (borrowed pointers into @f). */
void fsm_fill_record(struct fsm *f,
                     const struct rec *r,
                     struct fsm_result *res,
                     bool with_attempts);

/* fsm_wheel.c */
/* Put a record into the wheel for its current expiry. */
void fsm_wheel_place(struct fsm *f, uint32_t h);
/* Process every tick that ended at or before fsm_now. */
void fsm_wheel_advance(struct fsm *f);

/* fsm_claim.c: the record commands. @pre is the identity's hash when the
 * batch computed it, else NULL. */
void fsm_do_claim(struct fsm *f,
                  uint64_t index,
                  uint32_t slot,
                  const struct fsm_claim *c,
                  const uint64_t *pre,
                  struct fsm_result *res);
void fsm_do_complete(struct fsm *f,
                     const struct fsm_complete *c,
                     const uint64_t *pre,
                     struct fsm_result *res);
void fsm_do_release(struct fsm *f,
                    const struct fsm_release *c,
                    const uint64_t *pre,
                    struct fsm_result *res);
void fsm_do_lookup(struct fsm *f,
                   const struct fsm_ident *id,
                   const uint64_t *pre,
                   struct fsm_result *res);
void fsm_do_forget(struct fsm *f,
                   const struct fsm_ident *id,
                   const uint64_t *pre,
                   struct fsm_result *res);

/* fsm_fence.c: the restore fence. */
/* Drop the fence once log time passed restore_lift (apply_begin). */
void fsm_fence_expire(struct fsm *f);
/* A claim that would take a new acceptance (an absent key, or a takeover)
 * on a fenced restored cluster: its refusal (STALE or FAILED_PRECONDITION,
 * reason in @res), or 0 when the fence lets it through. */
enum fsm_outcome fsm_fence_check(struct fsm *f,
                                 const struct fsm_claim *c,
                                 struct fsm_result *res);

/* fsm_config.c: the configuration commands. */
/* NULL if @m is a valid member directory entry, else why not. */
const char *fsm_check_member(const struct fsm_member *m);
void fsm_do_bootstrap(struct fsm *f,
                      const struct fsm_bootstrap *b,
                      uint32_t schema_version,
                      struct fsm_result *res);
void fsm_do_set_settings(struct fsm *f,
                         const struct fsm_settings *s,
                         struct fsm_result *res);
void fsm_do_set_member(struct fsm *f,
                       const struct fsm_member *m,
                       struct fsm_result *res);
void fsm_do_retire(struct fsm *f, uint64_t id, struct fsm_result *res);

#endif /* ONCE_FSM_FSM_INT_H_ */
