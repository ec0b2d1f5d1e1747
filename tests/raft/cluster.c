/* tests/raft/cluster.c: see cluster.h. */
#include "cluster.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "fsm_helpers.h"
#include "raft/guard.h"

#define TERMS_MAX 4096
static struct
{
    raft_term term;
    raft_id id;
} terms[TERMS_MAX];
static size_t n_terms;

static struct cluster *cur; /* the fixture hook has no user argument */
static struct cl_backend backend;

static uint64_t wall_ms(void *arg)
{
    struct cl_server *s = arg;
    struct cluster *c = cur;
    return (uint64_t)((int64_t)(raft_fixture_time(&c->f) + CL_WALL0) +
                      s->wall_offset_ms);
}

static uint64_t mono_ms(void *arg)
{
    (void)arg;
    return raft_fixture_time(&cur->f);
}

static void hook_fatal(void *arg, const char *what, int status, const char *msg)
{
    struct cl_server *s = arg;
    (void)status;
    s->fatal_hits++;
    snprintf(s->fatal_what, sizeof s->fatal_what, "%s", what);
    snprintf(s->fatal_msg, sizeof s->fatal_msg, "%s", msg);
}

static void hook_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    if (!cur->quiet && getenv("CL_VERBOSE") != NULL) {
        fprintf(stderr, "[%llu] %s %s\n",
                (unsigned long long)raft_fixture_time(&cur->f), level, msg);
    }
}

static void hook_retired(void *arg)
{
    struct cl_server *s = arg;
    s->retired_hook = true;
}

static void hook_applied(void *arg,
                         raft_index index,
                         const void *buf,
                         size_t len)
{
    struct cl_server *s = arg;
    uint32_t crc = crc32c(0, buf, len) | 1u; /* never 0 */

    ck_assert_uint_lt(index, CL_APPLY_MAX);
    s->applied[index] = crc;
    if (len > s->max_entry_len) {
        s->max_entry_len = len;
    }
    if (index > s->applied_max) {
        s->applied_max = index;
    }
}

static void violation(struct cluster *c,
                      const char *fmt,
                      unsigned long long a,
                      unsigned long long b,
                      unsigned long long d)
    __attribute__((format(printf, 2, 0)));
static void violation(struct cluster *c,
                      const char *fmt,
                      unsigned long long a,
                      unsigned long long b,
                      unsigned long long d)
{
    if (!c->violation) {
        c->violation = true;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(c->violation_msg, sizeof c->violation_msg, fmt, a, b, d);
#pragma GCC diagnostic pop
    }
}

static void fixture_hook(struct raft_fixture *f, struct raft_fixture_event *e)
{
    struct cluster *c = cur;
    unsigned i;

    (void)e;
    if (backend.step != NULL) {
        backend.step(backend.arg); /* its own completions due by now */
    }
    for (i = 0; i < f->n; i++) {
        struct raft *r = &f->servers[i].raft;
        struct cl_server *s = &c->s[i];
        size_t k;

        /* Same entry applied at the same index: compare terms, which every
         * entry has (two different entries of one term at one index are
         * impossible in Raft's log matching, so this is the check for
         * barriers and configuration changes). */
        for (raft_index a = s->applied_seen + 1;
             c->applied_term != NULL && a <= r->last_applied &&
             a < CL_APPLY_MAX;
             a++) {
            raft_term t = guard_term_of(r, a);

            if (t == 0) {
                continue; /* restored from a snapshot: not seen */
            }
            if (c->applied_term[a] == 0) {
                c->applied_term[a] = t;
            } else if (c->applied_term[a] != t) {
                violation(c,
                          "entries of terms %llu and %llu applied at index "
                          "%llu",
                          c->applied_term[a], t, a);
            }
        }
        if (r->last_applied > s->applied_seen) {
            s->applied_seen = r->last_applied;
        }

        if (c->s[i].fatal_hits > 0 && f->servers[i].alive) {
            raft_fixture_kill(f, i); /* fail-stop */
        }
        if (r->state != RAFT_LEADER) {
            continue;
        }
        for (k = 0; k < n_terms; k++) {
            if (terms[k].term == r->current_term) {
                break;
            }
        }
        if (k == n_terms && n_terms < TERMS_MAX) {
            terms[n_terms].term = r->current_term;
            terms[n_terms].id = r->id;
            n_terms++;
        } else if (k < n_terms && terms[k].id != r->id) {
            violation(c, "two leaders in term %llu: %llu and %llu",
                      r->current_term, terms[k].id, r->id);
        }
    }
}

static void server_prepare(struct cluster *c, unsigned i)
{
    struct cl_server *s = &c->s[i];
    struct replica_clock clock = {s, wall_ms, mono_ms};
    struct replica_hooks hooks = {s, hook_fatal, hook_log, hook_retired,
                                  hook_applied};
    struct fsm *f = fsm_new();

    ck_assert_ptr_nonnull(f);
    memset(s, 0, sizeof *s);
    s->used = true;
    s->applied = calloc(CL_APPLY_MAX, sizeof *s->applied);
    ck_assert_ptr_nonnull(s->applied);
    replica_prepare(&s->rep, f, &clock, &hooks);
}

static bool sync_snapshots;

void cl_set_backend(const struct cl_backend *b)
{
    if (b != NULL) {
        backend = *b;
    } else {
        memset(&backend, 0, sizeof backend);
    }
}

void cl_set_sync_snapshots(bool on)
{
    sync_snapshots = on;
}

static void server_adopt(struct cluster *c,
                         unsigned i,
                         unsigned threshold,
                         unsigned trailing)
{
    struct cl_server *s = &c->s[i];
    struct raft *r = raft_fixture_get(&c->f, i);
    struct replica_config cfg = {
        .election_ms = 1000,
        .heartbeat_ms = 100,
        .snapshot_threshold = threshold,
        .snapshot_trailing = trailing,
        .max_catch_up_rounds = 10,
        .max_catch_up_round_ms = 5000,
        .install_snapshot_timeout_ms = 5000,
    };
    char errmsg[256];
    struct store *store = NULL;

    if (backend.adopt != NULL) {
        store = backend.adopt(backend.arg, i, r);
    }
    if (store == NULL) {
        fixture_store_init(&s->store, r->io);
        store = &s->store.store;
    }
    replica_adopt(&s->rep, r, store);
    if (sync_snapshots) {
        adapter_set_async(&s->rep, false);
    }
    ck_assert_int_eq(replica_configure(&s->rep, &cfg, errmsg), 0);
}

static unsigned snap_threshold = 1024, snap_trailing = 2048;

void cl_set_snapshot(struct cluster *c, unsigned threshold, unsigned trailing)
{
    (void)c;
    snap_threshold = threshold;
    snap_trailing = trailing;
}

static void server_start(struct cluster *c, unsigned i)
{
    char errmsg[256];
    int rv = replica_start(&c->s[i].rep, errmsg);

    ck_assert_msg(rv == 0, "start %u: %s", i, errmsg);
    c->s[i].started = true;
}

void cl_init(struct cluster *c, unsigned n_voters, unsigned n_servers)
{
    struct raft_configuration conf;
    struct fsm_bootstrap *b;
    struct fsm_cmd cmd;
    struct cl_op op;
    unsigned i;
    int rv, l;

    memset(c, 0, sizeof *c);
    cur = c;
    n_terms = 0;
    /* 0.15: raft_fixture_initialize does not zero f->n. */
    c->applied_term = calloc(CL_APPLY_MAX, sizeof *c->applied_term);
    ck_assert_ptr_nonnull(c->applied_term);
    rv = raft_fixture_initialize(&c->f);
    ck_assert_int_eq(rv, 0);
    for (i = 0; i < n_servers; i++) {
        server_prepare(c, i);
        rv = raft_fixture_grow(&c->f, &c->s[i].rep.raft_fsm);
        ck_assert_int_eq(rv, 0);
        server_adopt(c, i, snap_threshold, snap_trailing);
    }
    c->n = n_servers;
    rv = raft_fixture_configuration(&c->f, n_voters, &conf);
    ck_assert_int_eq(rv, 0);
    /* Only the voters are bootstrapped; the others start empty. */
    for (i = 0; i < n_servers; i++) {
        if (i < n_voters) {
            rv = raft_bootstrap(raft_fixture_get(&c->f, i), &conf);
            ck_assert_int_eq(rv, 0);
        }
    }
    raft_configuration_close(&conf);
    for (i = 0; i < n_servers; i++) {
        server_start(c, i);
    }
    raft_fixture_hook(&c->f, fixture_hook);

    l = cl_wait_ready(c, 20000);
    ck_assert_int_ge(l, 0);
    b = calloc(1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    cmd = cl_bootstrap_cmd(b, n_voters);
    rv = cl_submit(c, (unsigned)l, &op, &cmd);
    ck_assert_int_eq(rv, 0);
    free(b);
    ck_assert(cl_wait_op(c, &op, 10000));
    ck_assert_int_eq(op.status, 0);
    ck_assert_int_eq(op.outcome, FSM_OK);
}

unsigned cl_grow(struct cluster *c)
{
    unsigned i = c->n;
    int rv;

    ck_assert_uint_lt(i, CL_MAX);
    server_prepare(c, i);
    rv = raft_fixture_grow(&c->f, &c->s[i].rep.raft_fsm);
    ck_assert_int_eq(rv, 0);
    server_adopt(c, i, snap_threshold, snap_trailing);
    c->n++;
    server_start(c, i);
    return i;
}

void cl_close(struct cluster *c)
{
    unsigned i;

    for (i = 0; i < c->n; i++) {
        replica_shutdown(&c->s[i].rep);
    }
    raft_fixture_close(&c->f);
    for (i = 0; i < c->n; i++) {
        replica_close(&c->s[i].rep);
        free(c->s[i].applied);
    }
    free(c->applied_term);
    c->applied_term = NULL;
    cur = NULL;
}

bool cl_step_until(struct cluster *c,
                   bool (*cond)(struct cluster *c, void *arg),
                   void *arg,
                   unsigned ms)
{
    raft_time end = raft_fixture_time(&c->f) + ms;

    while (!cond(c, arg)) {
        if (raft_fixture_time(&c->f) >= end) {
            return false;
        }
        raft_fixture_step(&c->f);
    }
    return true;
}

void cl_step_ms(struct cluster *c, unsigned ms)
{
    raft_fixture_step_until_elapsed(&c->f, ms);
}

int cl_leader(struct cluster *c)
{
    for (unsigned i = 0; i < c->n; i++) {
        if (c->f.servers[i].alive &&
            raft_state(raft_fixture_get(&c->f, i)) == RAFT_LEADER) {
            return (int)i;
        }
    }
    return -1;
}

static bool ready_cond(struct cluster *c, void *arg)
{
    int *out = arg;
    for (unsigned i = 0; i < c->n; i++) {
        if (c->f.servers[i].alive && c->s[i].started &&
            replica_ready(&c->s[i].rep)) {
            *out = (int)i;
            return true;
        }
    }
    return false;
}

int cl_wait_ready(struct cluster *c, unsigned ms)
{
    int l = -1;
    return cl_step_until(c, ready_cond, &l, ms) ? l : -1;
}

static bool no_leader_cond(struct cluster *c, void *arg)
{
    (void)arg;
    return cl_leader(c) < 0;
}

bool cl_wait_no_leader(struct cluster *c, unsigned ms)
{
    return cl_step_until(c, no_leader_cond, NULL, ms);
}

struct elect_arg
{
    unsigned i;
};

static bool elect_cond(struct cluster *c, void *arg)
{
    struct elect_arg *a = arg;
    return replica_ready(&c->s[a->i].rep);
}

bool cl_elect(struct cluster *c, unsigned i, unsigned ms)
{
    struct elect_arg a = {i};
    bool ok;

    raft_fixture_set_randomized_election_timeout(&c->f, i, 300);
    ok = cl_step_until(c, elect_cond, &a, ms);
    raft_fixture_set_randomized_election_timeout(&c->f, i, 1000 + 100 * i);
    return ok;
}

static void op_cb(struct replica_req *req,
                  int status,
                  const struct fsm_result *res)
{
    struct cl_op *op = req->data;

    op->done = true;
    op->status = status;
    op->t_done = raft_fixture_time(&op->c->f);
    if (res != NULL) {
        op->outcome = res->outcome;
        op->retry = res->retry;
        op->first_index = res->first_index;
    }
}

struct fsm_cmd cl_bootstrap_cmd(struct fsm_bootstrap *b, unsigned n_voters)
{
    struct fsm_settings st;

    memset(b, 0, sizeof *b);
    fh_settings(&st);
    fh_bootstrap_cmd(b, &st);
    for (unsigned i = 0; i < n_voters && i < FSM_MEMBERS_MAX; i++) {
        b->members[i].id = i + 1;
        snprintf(b->members[i].raft_addr, sizeof b->members[i].raft_addr, "%u",
                 i + 1);
        snprintf(b->members[i].client_addr, sizeof b->members[i].client_addr,
                 "c%u", i + 1);
        b->members[i].role = FSM_ROLE_VOTER;
    }
    b->n_members = n_voters < FSM_MEMBERS_MAX ? n_voters : FSM_MEMBERS_MAX;
    return fh_cmd_bootstrap(b);
}

struct fsm_cmd cl_claim_cmd(struct fsm_claim *cl, const char *key, uint64_t rid)
{
    fh_claim(cl, FSM_KIND_NONCE, CL_SCOPE, key, rid);
    cl->ttl_ms = 3600 * 1000;
    return fh_cmd_claim(cl);
}

int cl_submit(struct cluster *c,
              unsigned i,
              struct cl_op *op,
              const struct fsm_cmd *cmd)
{
    memset(op, 0, sizeof *op);
    op->c = c;
    op->req.data = op;
    op->t_invoke = raft_fixture_time(&c->f);
    return replica_submit(&c->s[i].rep, &op->req, cmd, op_cb);
}

int cl_claim(struct cluster *c,
             unsigned i,
             struct cl_op *op,
             const char *key,
             uint64_t rid)
{
    struct fsm_claim cl;
    struct fsm_cmd cmd = cl_claim_cmd(&cl, key, rid);

    return cl_submit(c, i, op, &cmd);
}

int cl_lookup(struct cluster *c, unsigned i, struct cl_op *op, const char *key)
{
    struct fsm_ident id = {(const uint8_t *)CL_SCOPE, strlen(CL_SCOPE),
                           (const uint8_t *)key, strlen(key)};

    memset(op, 0, sizeof *op);
    op->c = c;
    op->req.data = op;
    op->t_invoke = raft_fixture_time(&c->f);
    return replica_lookup(&c->s[i].rep, &op->req, &id, op_cb);
}

static bool op_cond(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct cl_op *)arg)->done;
}

bool cl_wait_op(struct cluster *c, struct cl_op *op, unsigned ms)
{
    return cl_step_until(c, op_cond, op, ms);
}

bool cl_same_applied(struct cluster *c)
{
    for (unsigned i = 0; i < c->n; i++) {
        for (unsigned j = i + 1; j < c->n; j++) {
            raft_index m = c->s[i].applied_max < c->s[j].applied_max
                               ? c->s[i].applied_max
                               : c->s[j].applied_max;
            for (raft_index k = 1; k <= m; k++) {
                uint32_t a = c->s[i].applied[k], b = c->s[j].applied[k];
                if (a != 0 && b != 0 && a != b) {
                    violation(c,
                              "servers %llu and %llu applied different "
                              "entries at index %llu",
                              i + 1, j + 1, k);
                    return false;
                }
            }
        }
    }
    return true;
}

struct applied_arg
{
    raft_index index;
};

static bool applied_cond(struct cluster *c, void *arg)
{
    struct applied_arg *a = arg;
    for (unsigned i = 0; i < c->n; i++) {
        if (c->f.servers[i].alive && c->s[i].started &&
            raft_last_applied(raft_fixture_get(&c->f, i)) < a->index) {
            return false;
        }
    }
    return true;
}

bool cl_wait_applied(struct cluster *c, raft_index index, unsigned ms)
{
    struct applied_arg a = {index};
    return cl_step_until(c, applied_cond, &a, ms);
}

enum fsm_outcome cl_local_lookup(struct cluster *c, unsigned i, const char *key)
{
    struct fsm_ident id = {(const uint8_t *)CL_SCOPE, strlen(CL_SCOPE),
                           (const uint8_t *)key, strlen(key)};
    struct fsm_result res;

    fsm_lookup(c->s[i].rep.fsm, &id, &res);
    return res.outcome;
}

struct raft *cl_raft(struct cluster *c, unsigned i)
{
    return raft_fixture_get(&c->f, i);
}

void cl_disconnect_all(struct cluster *c, unsigned i)
{
    for (unsigned j = 0; j < c->n; j++) {
        if (j != i) {
            raft_fixture_disconnect(&c->f, i, j);
            raft_fixture_disconnect(&c->f, j, i);
        }
    }
}

void cl_reconnect_all(struct cluster *c, unsigned i)
{
    for (unsigned j = 0; j < c->n; j++) {
        if (j != i) {
            raft_fixture_reconnect(&c->f, i, j);
            raft_fixture_reconnect(&c->f, j, i);
        }
    }
}

/* --- crash and restart (cluster.h) ---------------------------------------- */

static bool crash_close_ran;

static void crash_closed(struct raft *r)
{
    (void)r;
    crash_close_ran = true; /* the fixture's io closes synchronously */
}

void cl_crash(struct cluster *c,
              unsigned i,
              void (*before_close)(void *arg, unsigned i),
              void *arg)
{
    struct cl_server *s = &c->s[i];
    struct raft *r = raft_fixture_get(&c->f, i);
    struct raft_io *inner = s->rep.rio.inner;
    raft_index applied_seen = s->applied_seen, applied_max = s->applied_max;
    uint32_t *applied = s->applied;
    size_t max_entry_len = s->max_entry_len;
    struct replica_clock clock = {s, wall_ms, mono_ms};
    struct replica_hooks hooks = {s, hook_fatal, hook_log, hook_retired,
                                  hook_applied};
    char addr[16];
    int rv;

    ck_assert(backend.adopt != NULL);
    raft_fixture_kill(&c->f, i);
    replica_shutdown(&s->rep);
    if (before_close != NULL) {
        before_close(arg, i);
    }
    crash_close_ran = false;
    raft_close(r, crash_closed);
    ck_assert_msg(crash_close_ran, "server %u: raft closed asynchronously",
                  i + 1);
    replica_close(&s->rep);

    /* The process is gone; a new one is set up, not started: raft_init on
     * the same slot and io, the same store (it holds the disk). */
    snprintf(addr, sizeof addr, "%u", i + 1);
    memset(s, 0, sizeof *s);
    s->used = true;
    s->applied = applied;
    s->applied_seen = applied_seen;
    s->applied_max = applied_max;
    s->max_entry_len = max_entry_len;
    replica_prepare(&s->rep, fsm_new(), &clock, &hooks);
    ck_assert_ptr_nonnull(s->rep.fsm);
    rv = raft_init(r, inner, &s->rep.raft_fsm, i + 1, addr);
    ck_assert_int_eq(rv, 0);
    server_adopt(c, i, snap_threshold, snap_trailing);
}

int cl_restart(struct cluster *c, unsigned i, char *errmsg)
{
    int rv = replica_start(&c->s[i].rep, errmsg);

    if (rv == 0) {
        c->s[i].started = true;
    }
    return rv;
}
