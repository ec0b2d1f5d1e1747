/* raft/replica.c: composition, settings, lifecycle (see replica.h). */
#include "raft/replica.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/err.h"
#include "raft/guard.h"
#include "raft/replica_int.h"

const char *replica_strerror(int rv)
{
    /* "ok", not err_str's "success": log lines and the test node's answers
     * print it for a member change that went through. */
    return rv == 0 ? "ok" : err_str(rv);
}

const char *replica_status_applied(int rv)
{
    if (rv == 0) {
        return NULL;
    }
    return rv == REPLICA_E_UNKNOWN ? "unknown" : "false";
}

void replica_logf(struct replica *rep, const char *level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rep->hooks.log != NULL) {
        rep->hooks.log(rep->hooks.arg, level, msg);
    } else {
        fprintf(stderr, "level=%s id=%llx msg=\"%s\"\n", level,
                (unsigned long long)rep->id, msg);
    }
}

void replica_fatal(struct replica *rep,
                   const char *what,
                   int status,
                   const char *msg)
{
    if (rep->hooks.fatal != NULL) {
        rep->hooks.fatal(rep->hooks.arg, what, status, msg);
        return;
    }
    fprintf(stderr,
            "level=fatal id=%llx msg=\"stopping: %s failed\" status=\"%s\" "
            "detail=\"%s\"\n",
            (unsigned long long)rep->id, what, raft_strerror(status), msg);
    abort();
}

static void rio_event(void *arg)
{
    replica_poll(arg);
}

static void rio_fatal(void *arg, const char *what, int status, const char *msg)
{
    replica_fatal(arg, what, status, msg);
}

static void base_init(struct replica *rep,
                      struct fsm *fsm,
                      const struct replica_clock *clock,
                      const struct replica_hooks *hooks)
{
    memset(rep, 0, sizeof *rep);
    rep->fsm = fsm;
    rep->clock = *clock;
    if (hooks != NULL) {
        rep->hooks = *hooks;
    }
    rep->config.election_ms = 1000;
    rep->config.heartbeat_ms = 100;
    rep->config.snapshot_threshold = 1024;
    rep->config.snapshot_trailing = 2048;
    snap_policy_init(&rep->snap.policy, 0, 1024, 2048);
    rep->config.max_catch_up_rounds = 10;
    rep->config.max_catch_up_round_ms = 5000;
    ltime_init(&rep->ltime);
    adapter_setup(rep);
}

/* raft_init's or raft_start's code as this layer's (common/err.h): the
 * message names raft's own code. */
static int replica_of_raft_start(int rv)
{
    return rv == RAFT_NOMEM ? REPLICA_E_NOMEM : REPLICA_E_START;
}

int replica_init(struct replica *rep,
                 struct raft_io *inner,
                 struct store *store,
                 struct fsm *fsm,
                 raft_id id,
                 const char *address,
                 const struct replica_clock *clock,
                 const struct replica_hooks *hooks,
                 char *errmsg)
{
    struct rio_hooks rh;
    int rv;

    base_init(rep, fsm, clock, hooks);
    rep->store = store;
    rep->id = id;
    rh.arg = rep;
    rh.event = rio_event;
    rh.fatal = rio_fatal;
    rh.install_work = adapter_install_work;
    rh.install_ready = replica_digest_idle;
    rio_init(&rep->rio, inner, store, &rh);
    rep->raft = &rep->own_raft;
    rv = raft_init(rep->raft, &rep->rio.io, &rep->raft_fsm, id, address);
    if (rv != 0) {
        err_printf(errmsg, "raft_init: %s", raft_errmsg(rep->raft));
        return replica_of_raft_start(rv);
    }
    return 0;
}

void replica_prepare(struct replica *rep,
                     struct fsm *fsm,
                     const struct replica_clock *clock,
                     const struct replica_hooks *hooks)
{
    base_init(rep, fsm, clock, hooks);
    adapter_set_async(rep, false); /* until replica_adopt */
}

void replica_adopt(struct replica *rep, struct raft *r, struct store *store)
{
    struct rio_hooks rh;

    adapter_set_async(rep, true);
    rep->raft = r;
    rep->id = r->id;
    rep->store = store;
    rh.arg = rep;
    rh.event = rio_event;
    rh.fatal = rio_fatal;
    rh.install_work = adapter_install_work;
    rh.install_ready = replica_digest_idle;
    rio_adopt(&rep->rio, r, store, &rh);
}

int replica_configure(struct replica *rep,
                      const struct replica_config *c,
                      char *errmsg)
{
    struct raft *r = rep->raft;

    /* raft_start asserts this, but Debian's build has no asserts. */
    if (c->heartbeat_ms == 0 || c->heartbeat_ms >= c->election_ms) {
        err_printf(errmsg,
                   "heartbeat timeout (%u ms) must be below the election "
                   "timeout (%u ms)",
                   c->heartbeat_ms, c->election_ms);
        return REPLICA_E_INVALID;
    }
    if (c->max_catch_up_rounds == 0 || c->max_catch_up_round_ms == 0) {
        err_printf(errmsg, "catch-up rounds must be positive");
        return REPLICA_E_INVALID;
    }
    rep->config = *c;
    raft_set_election_timeout(r, c->election_ms);
    raft_set_heartbeat_timeout(r, c->heartbeat_ms);
    /* 0: by bytes (snap_policy.h); the first decision is for an empty
     * snapshot, the next ones follow each snapshot taken or restored. */
    snap_policy_init(&rep->snap.policy, rep->id, c->snapshot_threshold,
                     c->snapshot_trailing);
    adapter_policy_apply(rep);
    raft_set_max_catch_up_rounds(r, c->max_catch_up_rounds);
    raft_set_max_catch_up_round_duration(r, c->max_catch_up_round_ms);
    if (c->install_snapshot_timeout_ms != 0) {
        raft_set_install_snapshot_timeout(r, c->install_snapshot_timeout_ms);
    }
    raft_set_pre_vote(r, true);
    return 0;
}

int replica_start(struct replica *rep, char *errmsg)
{
    struct raft *r = rep->raft;
    int rv;

    /* 0.15's raft_start neither clears raft_errmsg (a failed
     * raft_bootstrap's "metadata contains term 1" stayed there) nor copies
     * io->start's message into it (raft address in use gave "raft_start: "):
     * start from empty messages, fall back to the io's, name the code. */
    ONCE_ASSERT(!rep->started && !rep->closing, "a replica starts once");
    r->errmsg[0] = '\0';
    r->io->errmsg[0] = '\0';
    if (rep->rio.inner != NULL) {
        rep->rio.inner->errmsg[0] = '\0'; /* rio copies it on failure */
    }
    rv = raft_start(r);
    if (rv != 0) {
        const char *msg = raft_errmsg(r);
        if (msg == NULL || msg[0] == '\0') {
            msg = r->io->errmsg;
        }
        err_printf(errmsg, "raft_start: %s (%s)", msg, raft_strerror(rv));
        return replica_of_raft_start(rv);
    }
    /* Entries up to here were loaded, not received: applying them says
     * nothing about their log time (ltime.h). */
    rep->live_from = raft_last_index(r);
    rep->started = true;
    replica_poll(rep);
    return 0;
}

void replica_shutdown(struct replica *rep)
{
    rep->closing = true;
    pipeline_fail_all(rep, REPLICA_E_SHUTDOWN);
    replica_digest_fail_all(rep);
}

static void on_raft_closed(struct raft *r)
{
    struct replica *rep = r->data;

    if (rep->stop_cb != NULL) {
        rep->stop_cb(rep->stop_arg);
    }
}

void replica_stop(struct replica *rep, void (*cb)(void *arg), void *arg)
{
    replica_shutdown(rep);
    rep->stop_cb = cb;
    rep->stop_arg = arg;
    rep->raft->data = rep; /* free in a node: nothing else sets it */
    raft_close(rep->raft, on_raft_closed);
}

void replica_close(struct replica *rep)
{
    replica_shutdown(rep); /* if the caller did not */
    ONCE_ASSERT(rep->q_n == 0 && rep->digest_n == 0,
                "shutdown failed every waiting request");
    /* raft_close failed what raft held; what waited between steps ends
     * here. */
    if (rep->member != NULL) {
        member_fail(rep, REPLICA_E_SHUTDOWN, "shutting down");
    }
    if (rep->snap_cb != NULL) {
        void (*cb)(struct replica *, int) = rep->snap_cb;

        rep->snap_cb = NULL;
        cb(rep, REPLICA_E_SHUTDOWN);
    }
    free(rep->fl_reqs);
    free(rep->fl_cmds);
    free(rep->fl_lens);
    rep->fl_reqs = NULL;
    rep->fl_cmds = NULL;
    rep->fl_lens = NULL;
    adapter_close(rep);
    fsm_free(rep->fsm);
    rep->fsm = NULL;
}

void replica_ltime_seed(struct replica *rep, uint64_t log_ms, uint64_t mono_ms)
{
    if (!rep->ltime.have_last) {
        ltime_applied(&rep->ltime, log_ms, mono_ms);
    }
}

bool replica_ltime_last(const struct replica *rep,
                        uint64_t *log_ms,
                        uint64_t *mono_ms)
{
    *log_ms = rep->ltime.last_log_ms;
    *mono_ms = rep->ltime.last_mono_ms;
    return rep->ltime.have_last;
}

bool replica_is_leader(const struct replica *rep)
{
    return rep->raft->state == RAFT_LEADER;
}

bool replica_ready(const struct replica *rep)
{
    return rep->leader && rep->ready && rep->raft->state == RAFT_LEADER &&
           rep->raft->current_term == rep->term;
}

void replica_leader(const struct replica *rep, uint64_t *id, const char **addr)
{
    raft_id rid = 0;

    raft_leader((struct raft *)rep->raft, &rid, addr);
    *id = rid;
}

/* --- bootstrap ------------------------------------------------------------ */

int replica_bootstrap(struct replica *rep, bool *existed, char *errmsg)
{
    struct raft_configuration conf;
    int rv;

    *existed = false;
    raft_configuration_init(&conf);
    rv = raft_configuration_add(&conf, rep->id, rep->raft->address, RAFT_VOTER);
    if (rv == 0) {
        rv = raft_bootstrap(rep->raft, &conf);
    }
    raft_configuration_close(&conf);
    if (rv == RAFT_CANTBOOTSTRAP) {
        *existed = true;
        return 0;
    }
    if (rv != 0) {
        err_printf(errmsg, "%s", raft_errmsg(rep->raft));
        return REPLICA_E_START;
    }
    return 0;
}

/* --- observers ----------------------------------------------------------- */

bool replica_has_raft(const struct replica *rep)
{
    return rep->raft != NULL;
}

enum replica_role replica_role(const struct replica *rep)
{
    if (rep->raft == NULL) {
        return REPLICA_ROLE_UNAVAILABLE;
    }
    switch (raft_state(rep->raft)) {
        case RAFT_FOLLOWER:
            return REPLICA_ROLE_FOLLOWER;
        case RAFT_CANDIDATE:
            return REPLICA_ROLE_CANDIDATE;
        case RAFT_LEADER:
            return REPLICA_ROLE_LEADER;
        default:
            return REPLICA_ROLE_UNAVAILABLE;
    }
}

uint64_t replica_term(const struct replica *rep)
{
    return rep->raft != NULL ? rep->raft->current_term : 0;
}

uint64_t replica_commit_index(const struct replica *rep)
{
    return rep->raft != NULL ? rep->raft->commit_index : 0;
}

uint64_t replica_last_applied(const struct replica *rep)
{
    return rep->raft != NULL ? raft_last_applied(rep->raft) : 0;
}

uint64_t replica_last_index(const struct replica *rep)
{
    return rep->raft != NULL ? raft_last_index(rep->raft) : 0;
}

uint64_t replica_time_ms(const struct replica *rep)
{
    struct raft_io *io = rep->raft != NULL ? rep->raft->io : NULL;

    return io != NULL ? io->time(io) : 0;
}

const char *replica_errmsg(const struct replica *rep)
{
    return rep->raft != NULL ? raft_errmsg(rep->raft) : "";
}

const char *replica_io_strerror(int status)
{
    return raft_strerror(status);
}

static enum fsm_role role_of_raft(int role)
{
    switch (role) {
        case RAFT_VOTER:
            return FSM_ROLE_VOTER;
        case RAFT_STANDBY:
            return FSM_ROLE_STANDBY;
        default:
            return FSM_ROLE_SPARE;
    }
}

unsigned replica_conf_n(const struct replica *rep)
{
    return rep->raft != NULL ? rep->raft->configuration.n : 0;
}

void replica_conf_server(const struct replica *rep,
                         unsigned i,
                         struct replica_server *out)
{
    const struct raft_server *sv = &rep->raft->configuration.servers[i];

    out->id = sv->id;
    out->address = sv->address;
    out->role = role_of_raft(sv->role);
}

uint64_t replica_conf_index(const struct replica *rep)
{
    return rep->raft != NULL ? rep->raft->configuration_index : 0;
}

uint64_t replica_conf_latest_index(const struct replica *rep)
{
    const struct raft *r = rep->raft;

    if (r == NULL) {
        return 0;
    }
    return r->configuration_uncommitted_index != 0
               ? r->configuration_uncommitted_index
               : r->configuration_index;
}

bool replica_progress_known(const struct replica *rep)
{
    return rep->raft != NULL && raft_state(rep->raft) == RAFT_LEADER &&
           rep->raft->leader_state.progress != NULL;
}

bool replica_progress_recent(const struct replica *rep, unsigned i)
{
    return replica_progress_known(rep) &&
           rep->raft->leader_state.progress[i].recent_recv;
}

uint64_t replica_snapshot_index(const struct replica *rep)
{
    const struct raft *r = rep->raft;
    uint64_t index;

    if (r == NULL) {
        return 0;
    }
    index = r->log.snapshot.last_index;
    if (r->snapshot.pending.term != 0 && r->snapshot.pending.index > index) {
        index = r->snapshot.pending.index;
    }
    return index;
}
