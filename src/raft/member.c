/* raft/member.c: membership operations (docs/design.md §4), one at a time, on
 * the ready leader, each step a proposal of its own in the pipeline.
 *
 *   add:      what raft_add would refuse is refused before anything is
 *             proposed (add_check_new) -> SetMember(spare) in the directory
 *             (refused for a retired id, atomically at apply) -> raft_add
 *             (spare) -> raft_assign(standby: it now gets the log, by
 *             snapshot if needed) -> wait until it has caught up and a
 *             majority of voters is healthy -> raft_assign(voter) (raft's
 *             own catch-up rounds) -> SetMember(final role).
 *   remove:   RetireMember (directory + retired ids, so the node learns it
 *             was removed while it still gets the log) -> raft_remove. A dead
 *             node may always be removed. Removing the leader itself
 *             transfers leadership first and answers "not leader": the
 *             caller repeats the removal on the new leader.
 *   assign:   raft_assign -> SetMember(role).
 *   transfer: raft_transfer; success iff this node is no longer leader.
 *
 * Losing leadership fails the operation in progress with "not leader"; the
 * steps already committed stay (a retired id stays retired), and repeating
 * the operation on the new leader continues from there. */
#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "raft/replica_int.h"

/* A new voter must be this close to the leader's last index (entries). */
#define CATCH_UP_LAG 64

enum {
    STEP_DIR = 1,        /* directory command proposed, waiting */
    STEP_ADD,            /* raft_add next */
    STEP_STANDBY,        /* raft_assign(standby) next */
    STEP_CATCH_UP,       /* waiting for catch-up, then raft_assign(voter) */
    STEP_DIR_FINAL,      /* SetMember(final role) next */
    STEP_RETIRE_BARRIER, /* barrier after RetireMember, then STEP_REMOVE */
    STEP_REMOVE,         /* raft_remove next (once the node has the barrier) */
    STEP_ASSIGN,         /* raft_assign(role) next */
    STEP_TRANSFER,       /* raft_transfer next */
    STEP_WAIT,           /* a raft call is in flight */
    STEP_DONE,
};

static void done(struct replica *rep, int status, const char *msg)
{
    struct replica_member_req *m = rep->member;

    ONCE_ASSERT(m != NULL && m->cb != NULL, "done with no operation running");
    rep->member = NULL;
    m->cb(m, status, msg);
}

static void internal_cb(struct replica_member_req *m,
                        int status,
                        const char *msg)
{
    struct replica *rep = m->rep;

    if (status != 0) {
        replica_logf(rep, "warn", "%s of %016llx failed: %s (%s)",
                     m->op == REPLICA_MEMBER_REMOVE ? "removal" : "refresh",
                     (unsigned long long)m->id, replica_strerror(status),
                     msg != NULL ? msg : "");
    }
}

void member_fail(struct replica *rep, int status, const char *msg)
{
    /* A directory command in flight answers through its own callback, and a
     * raft call in flight through raft's. */
    struct replica_member_req *m = rep->member;

    if (m != NULL && !m->busy) {
        /* Between steps: earlier steps committed, so the operation as a
         * whole is unknown unless none had. Repeating it on the new leader
         * continues from what committed. */
        done(rep, m->progressed ? REPLICA_E_UNKNOWN : status, msg);
    }
}

static const struct raft_server *config_server(const struct raft *r, raft_id id)
{
    for (unsigned i = 0; i < r->configuration.n; i++) {
        if (r->configuration.servers[i].id == id) {
            return &r->configuration.servers[i];
        }
    }
    return NULL;
}

static int raft_role_of(enum fsm_role role)
{
    switch (role) {
        case FSM_ROLE_VOTER:
            return RAFT_VOTER;
        case FSM_ROLE_STANDBY:
            return RAFT_STANDBY;
        default:
            return RAFT_SPARE;
    }
}

static int translate(int rv)
{
    switch (rv) {
        case 0:
            return 0;
        case RAFT_NOTLEADER:
            return REPLICA_E_NOTLEADER;
        case RAFT_LEADERSHIPLOST:
            return REPLICA_E_UNKNOWN; /* the change may still commit */
        case RAFT_CANTCHANGE:
            return REPLICA_E_BUSY;
        case RAFT_DUPLICATEID:
        case RAFT_DUPLICATEADDRESS:
        case RAFT_BADID:
        case RAFT_BADROLE:
            return REPLICA_E_PRECONDITION;
        case RAFT_NOMEM:
            return REPLICA_E_NOMEM;
        default:
            return REPLICA_E_UNKNOWN;
    }
}

/* A raft call refused before it started (its return value, not its
 * callback): nothing of it happened, so a code translate() cannot place is
 * a refusal, never "unknown" (raft 0.15 answers e.g. RAFT_NOTFOUND, which
 * its strerror has no text for). Earlier steps of the operation are the
 * callers' `progressed` rule, not this. */
static int translate_refused(int rv)
{
    int st = translate(rv);

    return st == REPLICA_E_UNKNOWN ? REPLICA_E_PRECONDITION : st;
}

/* --- directory commands through the pipeline --------------------------- */

static void dir_done(struct replica_req *req,
                     int status,
                     const struct fsm_result *res)
{
    struct replica_member_req *m = req->data;
    struct replica *rep = m->rep;

    if (rep->member != m) {
        return;
    }
    m->busy = false;
    if (status != 0) {
        /* Past the first step, earlier steps committed: the operation as a
         * whole is not "not applied". */
        done(rep, m->progressed ? REPLICA_E_UNKNOWN : status,
             "directory update failed");
        return;
    }
    m->progressed = true;
    if (res->outcome != FSM_OK) {
        snprintf(m->msg, sizeof m->msg, "%s",
                 res->reason != NULL ? res->reason : "refused");
        done(rep, REPLICA_E_PRECONDITION, m->msg);
        return;
    }
    m->step = m->after_dir;
    if (m->step == STEP_DONE) {
        done(rep, 0, NULL);
    }
    /* Otherwise replica_poll() takes the next step. */
}

/* Propose the directory command; when it applied, @next is the step. */
static int propose_dir(struct replica *rep,
                       struct replica_member_req *m,
                       bool retire,
                       enum fsm_role role,
                       int next)
{
    struct fsm_cmd cmd;
    int rv;

    memset(&cmd, 0, sizeof cmd);
    if (retire) {
        cmd.type = FSM_CMD_RETIRE_MEMBER;
        cmd.u.retire_id = m->id;
    } else {
        cmd.type = FSM_CMD_SET_MEMBER;
        cmd.u.member.id = m->id;
        snprintf(cmd.u.member.raft_addr, sizeof cmd.u.member.raft_addr, "%s",
                 m->raft_addr);
        snprintf(cmd.u.member.client_addr, sizeof cmd.u.member.client_addr,
                 "%s", m->client_addr);
        cmd.u.member.role = role;
    }
    ONCE_ASSERT(rep->member == m && !m->busy,
                "a directory command for the running operation, one at a "
                "time");
    m->pl.data = m;
    m->step = STEP_DIR;
    m->after_dir = next;
    rv = replica_submit(rep, &m->pl, &cmd, dir_done);
    if (rv == 0) {
        m->busy = true;
    }
    return rv;
}

/* --- raft calls ----------------------------------------------------------- */

static void change_cb(struct raft_change *c, int status)
{
    struct replica_member_req *m = c->data;
    struct replica *rep = m->rep;

    ONCE_ASSERT(rep->inflight == INFLIGHT_CHANGE,
                "raft answers the change in flight");
    rep->cb_depth++;
    rep->inflight = INFLIGHT_NONE;
    if (rep->member == m) {
        m->busy = false;
        if (status != 0) {
            int rv = translate(status);

            snprintf(m->msg, sizeof m->msg, "%s", raft_strerror(status));
            done(rep, m->progressed && rv != 0 ? REPLICA_E_UNKNOWN : rv,
                 m->msg);
        } else {
            m->progressed = true;
            if (m->step == STEP_DONE) {
                done(rep, 0, NULL);
            }
        }
        /* else replica_poll() takes m->step */
    }
    rep->cb_depth--;
}

static void transfer_cb(struct raft_transfer *t)
{
    struct replica_member_req *m = t->data;
    struct replica *rep = m->rep;
    struct raft *r = rep->raft;

    ONCE_ASSERT(rep->inflight == INFLIGHT_TRANSFER,
                "raft answers the transfer in flight");
    rep->cb_depth++;
    rep->inflight = INFLIGHT_NONE;
    if (rep->member == m) {
        if (r->state != RAFT_LEADER) {
            /* Removing the leader: the removal itself is for the new
             * leader, so the caller repeats it there. */
            done(rep, m->op == REPLICA_MEMBER_REMOVE ? REPLICA_E_NOTLEADER : 0,
                 m->op == REPLICA_MEMBER_REMOVE
                     ? "leadership transferred; repeat the removal on the "
                       "new leader"
                     : NULL);
        } else {
            done(rep, REPLICA_E_BUSY, "leadership transfer did not happen");
        }
    }
    rep->cb_depth--;
}

/* --- driving the steps --------------------------------------------------- */

/* Voters other than the promotee that heard from us recently, plus us. */
static bool majority_healthy(const struct replica *rep, raft_id except)
{
    const struct raft *r = rep->raft;
    unsigned voters = 0, healthy = 0;

    for (unsigned i = 0; i < r->configuration.n; i++) {
        const struct raft_server *s = &r->configuration.servers[i];

        if (s->role != RAFT_VOTER || s->id == except) {
            continue;
        }
        voters++;
        if (s->id == r->id || r->leader_state.progress[i].recent_recv) {
            healthy++;
        }
    }
    return healthy > voters / 2;
}

static raft_index match_of(const struct replica *rep, raft_id id)
{
    const struct raft *r = rep->raft;

    for (unsigned i = 0; i < r->configuration.n; i++) {
        if (r->configuration.servers[i].id == id) {
            return r->leader_state.progress[i].match_index;
        }
    }
    return 0;
}

static void member_barrier_cb(struct raft_barrier *b, int status)
{
    struct replica_member_req *m = b->data;
    struct replica *rep = m->rep;

    ONCE_ASSERT(rep->inflight == INFLIGHT_CHANGE,
                "raft answers the retirement barrier in flight");
    rep->cb_depth++;
    rep->inflight = INFLIGHT_NONE;
    if (rep->member == m) {
        m->busy = false;
        m->wait_start = rep->raft->io->time(rep->raft->io);
        if (status != 0) {
            snprintf(m->msg, sizeof m->msg, "%s", raft_strerror(status));
            done(rep, translate(status), m->msg);
        }
    }
    rep->cb_depth--;
}

static bool caught_up(const struct replica *rep, raft_id id)
{
    const struct raft *r = rep->raft;

    for (unsigned i = 0; i < r->configuration.n; i++) {
        if (r->configuration.servers[i].id == id) {
            return r->leader_state.progress[i].match_index + CATCH_UP_LAG >=
                   raft_last_index((struct raft *)r);
        }
    }
    return false;
}

static int call_change(struct replica *rep,
                       struct replica_member_req *m,
                       int raft_call,
                       int role,
                       int next)
{
    struct raft *r = rep->raft;
    int rv;

    ONCE_ASSERT(rep->inflight == INFLIGHT_NONE && !m->busy,
                "one proposal in flight");
    m->change.data = m;
    switch (raft_call) {
        case 0:
            rv = raft_add(r, &m->change, m->id, m->raft_addr, change_cb);
            break;
        case 1:
            rv = raft_assign(r, &m->change, m->id, role, change_cb);
            break;
        default:
            rv = raft_remove(r, &m->change, m->id, change_cb);
            break;
    }
    if (rv != 0) {
        snprintf(m->msg, sizeof m->msg, "%s", raft_strerror(rv));
        done(rep, translate_refused(rv), m->msg);
        return translate_refused(rv);
    }
    m->busy = true;
    m->step = next;
    rep->inflight = INFLIGHT_CHANGE;
    return 0;
}

/* The leader's own work when no operation runs:
 *  - a configuration member whose id is retired is what an interrupted
 *    removal leaves (RetireMember committed, raft_remove not): remove it;
 *  - G6 keeps the committed configuration entry in the log; when it falls
 *    far behind, add and remove a spare that is never contacted, so the
 *    committed configuration is recent again and the log can be compacted. */
static void start_internal(struct replica *rep)
{
    struct raft *r = rep->raft;
    struct replica_member_req *m = &rep->internal;
    raft_index limit;

    if (config_server(r, REPLICA_REFRESH_ID) != NULL) {
        memset(m, 0, sizeof *m);
        m->id = REPLICA_REFRESH_ID;
        m->op = REPLICA_MEMBER_REMOVE;
        m->step = STEP_REMOVE;
        goto start;
    }
    for (unsigned i = 0; i < r->configuration.n; i++) {
        raft_id id = r->configuration.servers[i].id;

        if (id != r->id && fsm_is_retired(rep->fsm, id)) {
            memset(m, 0, sizeof *m);
            m->id = id;
            m->op = REPLICA_MEMBER_REMOVE;
            m->step = STEP_RETIRE_BARRIER;
            rep->reconcile_removals++;
            replica_logf(rep, "info",
                         "finishing the removal of retired %016llx",
                         (unsigned long long)id);
            goto start;
        }
    }
    limit = (raft_index)rep->config.snapshot_threshold * 4 +
            rep->config.snapshot_trailing;
    if (r->configuration_uncommitted_index == 0 &&
        r->last_applied > r->configuration_index + limit) {
        memset(m, 0, sizeof *m);
        m->id = REPLICA_REFRESH_ID;
        snprintf(m->raft_addr, sizeof m->raft_addr, "%s", REPLICA_REFRESH_ADDR);
        m->op = REPLICA_MEMBER_ADD;
        m->step = STEP_ADD;
        m->final_role = FSM_ROLE_SPARE;
        rep->config_refreshes++;
        goto start;
    }
    return;
start:
    ONCE_ASSERT(rep->member == NULL, "one membership operation at a time");
    m->rep = rep;
    m->cb = internal_cb;
    rep->member = m;
}

/* Called from the pipeline when nothing is in flight on a ready leader. */
void member_poll(struct replica *rep)
{
    struct replica_member_req *m;
    struct raft *r = rep->raft;
    raft_time now;
    int rv;

    ONCE_ASSERT(rep->inflight == INFLIGHT_NONE && rep->cb_depth == 0,
                "called from dispatch, with nothing in flight");
    if (rep->member == NULL) {
        start_internal(rep);
    }
    m = rep->member;
    if (m == NULL || m->busy) {
        return;
    }
    switch (m->step) {
        case STEP_ADD:
            /* The refresh spare goes straight back out. */
            call_change(
                rep, m, 0, 0,
                m->id == REPLICA_REFRESH_ID ? STEP_REMOVE : STEP_STANDBY);
            break;
        case STEP_STANDBY:
            /* Before the call: on failure it completes @m, which the
             * caller may free in its callback. */
            m->wait_start = r->io->time(r->io);
            call_change(rep, m, 1, RAFT_STANDBY, STEP_CATCH_UP);
            break;
        case STEP_CATCH_UP:
            if (m->final_role != FSM_ROLE_VOTER) {
                m->step = STEP_DIR_FINAL;
                member_poll(rep);
                break;
            }
            now = r->io->time(r->io);
            if (caught_up(rep, m->id) && majority_healthy(rep, m->id)) {
                call_change(rep, m, 1, RAFT_VOTER, STEP_DIR_FINAL);
            } else if (now - m->wait_start >
                       (raft_time)rep->config.max_catch_up_rounds *
                           rep->config.max_catch_up_round_ms) {
                done(rep, REPLICA_E_BUSY,
                     "the new node did not catch up (or no healthy majority); "
                     "it stays standby");
            }
            break;
        case STEP_DIR_FINAL:
            rv = propose_dir(rep, m, false, m->final_role, STEP_DONE);
            if (rv != 0) {
                done(rep, m->progressed ? REPLICA_E_UNKNOWN : rv,
                     "directory update failed");
            }
            break;
        case STEP_RETIRE_BARRIER:
            /* The barrier is appended after RetireMember committed, so any
             * AppendEntries that carries it also carries a commit index
             * covering the retirement: once the node stored the barrier it
             * applies its retirement. */
            if (config_server(r, m->id) == NULL) {
                done(rep, 0, NULL);
                break;
            }
            m->barrier.data = m;
            rv = raft_barrier(r, &m->barrier, member_barrier_cb);
            if (rv != 0) {
                snprintf(m->msg, sizeof m->msg, "%s", raft_strerror(rv));
                done(rep, translate_refused(rv), m->msg);
                break;
            }
            m->busy = true;
            m->retire_wait = true;
            m->wait_index = m->barrier.index;
            m->step = STEP_REMOVE;
            rep->inflight = INFLIGHT_CHANGE;
            break;
        case STEP_REMOVE:
            /* Wait, at most an election timeout, until the node stored the
             * barrier: then it applies its own retirement (tombstone, stop)
             * instead of lingering as a candidate. Bounded by time only, not
             * skipped for a node not heard from lately: a leader that just
             * took over (removing the old leader, after a transfer) has not
             * heard from anyone yet. A dead node costs the timeout, and may
             * always be removed. */
            if (m->retire_wait && config_server(r, m->id) != NULL &&
                match_of(rep, m->id) < m->wait_index &&
                r->io->time(r->io) - m->wait_start <
                    (raft_time)rep->config.election_ms) {
                break; /* polled again at the next tick */
            }
            if (config_server(r, m->id) == NULL) {
                done(rep, 0, NULL); /* retired and already gone */
            } else {
                call_change(rep, m, 2, 0, STEP_DONE);
            }
            break;
        case STEP_ASSIGN:
            m->final_role = m->role; /* before: a failure completes @m */
            call_change(rep, m, 1, raft_role_of(m->role), STEP_DIR_FINAL);
            break;
        case STEP_TRANSFER:
            m->transfer.data = m;
            rv = raft_transfer(r, &m->transfer,
                               m->op == REPLICA_MEMBER_REMOVE ? 0 : m->id,
                               transfer_cb);
            if (rv != 0) {
                snprintf(m->msg, sizeof m->msg, "%s",
                         rv == RAFT_NOTFOUND
                             ? "no other voter to transfer leadership to"
                             : raft_strerror(rv));
                done(rep, translate_refused(rv), m->msg);
            } else {
                m->busy = true;
                rep->inflight = INFLIGHT_TRANSFER;
            }
            break;
        default:
            break;
    }
}

static bool valid_addr(const char *a)
{
    size_t n = strlen(a);
    return n > 0 && n <= FSM_ADDR_MAX;
}

/* An add of @m, whose id the configuration does not hold, decided before
 * anything is proposed: its first step commits SetMember(spare) in the
 * directory, and a refusal of raft_add after that would leave a stray
 * directory entry (there is no command that takes one back without retiring
 * the id for ever). So what raft_add would refuse is refused here: an
 * address the configuration holds (RAFT_DUPLICATEADDRESS), or a
 * configuration change in flight (RAFT_CANTCHANGE). The directory's
 * addresses too: two ids at one Raft address is a pairing the member
 * binding refuses (server/access.h, access_member_claim). The refresh
 * spare's id and address are the leader's own (start_internal): an add
 * holding either would make every later refresh fail. 0, or
 * REPLICA_E_PRECONDITION / REPLICA_E_BUSY with @m->msg. */
static int add_check_new(const struct replica *rep,
                         struct replica_member_req *m)
{
    const struct raft *r = rep->raft;

    if (m->id == REPLICA_REFRESH_ID ||
        strcmp(m->raft_addr, REPLICA_REFRESH_ADDR) == 0) {
        snprintf(m->msg, sizeof m->msg,
                 "id %016llx and Raft address %s are reserved for the "
                 "leader's configuration refresh",
                 (unsigned long long)REPLICA_REFRESH_ID, REPLICA_REFRESH_ADDR);
        return REPLICA_E_PRECONDITION;
    }
    for (unsigned i = 0; i < r->configuration.n; i++) {
        const struct raft_server *s = &r->configuration.servers[i];

        if (strcmp(s->address, m->raft_addr) == 0) {
            snprintf(m->msg, sizeof m->msg,
                     "Raft address %s is already member %016llx's",
                     m->raft_addr, (unsigned long long)s->id);
            return REPLICA_E_PRECONDITION;
        }
    }
    for (size_t i = 0; i < fsm_n_members(rep->fsm); i++) {
        const struct fsm_member *fm = fsm_member(rep->fsm, i);

        if (fm->id != m->id && strcmp(fm->raft_addr, m->raft_addr) == 0) {
            snprintf(m->msg, sizeof m->msg,
                     "Raft address %s is member %016llx's in the directory "
                     "(an add cut short: finish or remove it first)",
                     m->raft_addr, (unsigned long long)fm->id);
            return REPLICA_E_PRECONDITION;
        }
    }
    if (r->configuration_uncommitted_index != 0 ||
        r->leader_state.promotee_id != 0) {
        snprintf(m->msg, sizeof m->msg,
                 "a configuration change is still in flight");
        return REPLICA_E_BUSY;
    }
    return 0;
}

int replica_member(struct replica *rep,
                   struct replica_member_req *m,
                   replica_member_cb cb)
{
    struct raft *r = rep->raft;
    const struct raft_server *s;
    int rv = 0;

    if (rep->closing) {
        return REPLICA_E_SHUTDOWN;
    }
    if (!replica_ready(rep)) {
        return REPLICA_E_NOTLEADER;
    }
    if (rep->member != NULL || rep->snap_cb != NULL) {
        return REPLICA_E_BUSY;
    }
    ONCE_ASSERT(cb != NULL, "every operation ends in its callback");
    m->rep = rep;
    m->cb = cb;
    m->busy = false;
    m->progressed = false;
    m->msg[0] = '\0';
    m->final_role = 0;
    s = m->id != 0 ? config_server(r, m->id) : NULL;
    switch (m->op) {
        case REPLICA_MEMBER_ADD:
            if (m->id == 0 || !valid_addr(m->raft_addr) ||
                !valid_addr(m->client_addr) ||
                (m->role != FSM_ROLE_VOTER && m->role != FSM_ROLE_STANDBY)) {
                return REPLICA_E_INVALID;
            }
            if (fsm_is_retired(rep->fsm, m->id)) {
                return REPLICA_E_PRECONDITION;
            }
            if (s != NULL) {
                /* Already in the configuration (an add that was cut short,
                 * e.g. it did not catch up in time): continue from its
                 * role, if this is the same node and no demotion. */
                if (strcmp(s->address, m->raft_addr) != 0 ||
                    (s->role == RAFT_VOTER && m->role != FSM_ROLE_VOTER)) {
                    return REPLICA_E_PRECONDITION;
                }
                rep->member = m;
                m->final_role = m->role;
                m->step = s->role == RAFT_SPARE     ? STEP_STANDBY
                          : s->role == RAFT_STANDBY ? STEP_CATCH_UP
                                                    : STEP_DIR_FINAL;
                m->wait_start = r->io->time(r->io);
                break;
            }
            rv = add_check_new(rep, m);
            if (rv != 0) {
                return rv;
            }
            rep->member = m;
            rv = propose_dir(rep, m, false, FSM_ROLE_SPARE, STEP_ADD);
            m->final_role = m->role;
            break;
        case REPLICA_MEMBER_REMOVE:
            if (m->id == 0) {
                return REPLICA_E_INVALID;
            }
            rep->member = m;
            if (m->id == r->id) {
                m->step = STEP_TRANSFER; /* to any up-to-date voter */
            } else {
                /* Then let the node apply its own retirement before raft
                 * stops sending to it (STEP_RETIRE_BARRIER), so it writes
                 * its tombstone instead of lingering. */
                rv = propose_dir(rep, m, true, 0, STEP_RETIRE_BARRIER);
            }
            break;
        case REPLICA_MEMBER_ASSIGN:
            if (s == NULL) {
                return REPLICA_E_PRECONDITION;
            }
            if (m->role < FSM_ROLE_VOTER || m->role > FSM_ROLE_SPARE) {
                return REPLICA_E_INVALID;
            }
            if (raft_role_of(m->role) == s->role ||
                (m->id == r->id && m->role != FSM_ROLE_VOTER)) {
                /* Same role: raft says BADROLE. Demoting the leader: it
                 * would step down before the directory follows; transfer
                 * leadership first. */
                return REPLICA_E_PRECONDITION;
            }
            for (size_t i = 0; i < fsm_n_members(rep->fsm); i++) {
                const struct fsm_member *fm = fsm_member(rep->fsm, i);
                if (fm->id == m->id) {
                    snprintf(m->raft_addr, sizeof m->raft_addr, "%s",
                             fm->raft_addr);
                    snprintf(m->client_addr, sizeof m->client_addr, "%s",
                             fm->client_addr);
                }
            }
            if (m->raft_addr[0] == '\0') {
                snprintf(m->raft_addr, sizeof m->raft_addr, "%s", s->address);
            }
            if (m->client_addr[0] == '\0') {
                snprintf(m->client_addr, sizeof m->client_addr, "%s",
                         m->raft_addr);
            }
            rep->member = m;
            m->step = STEP_ASSIGN;
            break;
        case REPLICA_MEMBER_TRANSFER:
            rep->member = m;
            m->step = STEP_TRANSFER;
            break;
        default:
            return REPLICA_E_INVALID;
    }
    if (rv != 0) {
        rep->member = NULL;
        return rv;
    }
    replica_poll(rep);
    return 0;
}
