/* tests/integration/raftnode_cmd.c: the commands of raftnode's line
 * protocol (raftnode.h; the protocol is in raftnode.c). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "fsm/fsm.h"
#include "raft/identity.h"
#include "raft/replica.h"
#include "raft/uvio.h"
#include "raftnode.h"
#include "store/store.h"

/* --- client commands -------------------------------------------------- */

static const char *rv_name(int rv)
{
    switch (rv) {
        case REPLICA_E_NOTLEADER:
            return "NOTLEADER";
        case REPLICA_E_BUSY:
            return "BUSY";
        case REPLICA_E_UNKNOWN:
            return "UNKNOWN";
        case REPLICA_E_SHUTDOWN:
            return "SHUTDOWN";
        case REPLICA_E_TOOBIG:
            return "TOOBIG";
        case REPLICA_E_INVALID:
            return "INVALID";
        case REPLICA_E_NOMEM:
            return "NOMEM";
        case REPLICA_E_PRECONDITION:
            return "PRECONDITION";
        case REPLICA_E_INTERNAL:
            return "INTERNAL";
        default:
            return "INTERNAL";
    }
}

raft_id leader_id(void)
{
    uint64_t id = 0;
    const char *addr = NULL;

    if (g.raft_closed) {
        return 0;
    }
    replica_leader(&g.rep, &id, &addr);
    return id;
}

static void answer_error(struct creq *q, int rv)
{
    char idb[24];

    if (rv == REPLICA_E_NOTLEADER) {
        creq_answer(q, "ERR NOTLEADER %s", fmt_id(leader_id(), idb));
    } else {
        creq_answer(q, "ERR %s", rv_name(rv));
    }
}

static void claim_cb(struct replica_req *req,
                     int status,
                     const struct fsm_result *res)
{
    struct creq *q = req->data;
    struct conn *c = q->c;

    c->inflight--;
    if (status == 0 && res != NULL) {
        creq_answer(q, "OK %s %d", fsm_outcome_name(res->outcome),
                    res->retry ? 1 : 0);
    } else {
        answer_error(q, status != 0 ? status : REPLICA_E_INTERNAL);
    }
    if (c->closing) {
        conn_maybe_free(c);
        return;
    }
    conn_flush(c);
}

static bool valid_key(const char *k)
{
    size_t n = strlen(k);

    return n >= 1 && n <= FSM_KEY_MAX;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

static bool parse_rid(const char *s, uint8_t out[FSM_REQUEST_ID_LEN])
{
    size_t i;

    if (strlen(s) != 2 * FSM_REQUEST_ID_LEN) {
        return false;
    }
    for (i = 0; i < FSM_REQUEST_ID_LEN; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

const char *state_name(int st)
{
    switch (st) {
        case RAFT_LEADER:
            return "leader";
        case RAFT_FOLLOWER:
            return "follower";
        case RAFT_CANDIDATE:
            return "candidate";
        default:
            return "unavailable";
    }
}

static void do_status(struct creq *q)
{
    struct raft *r = g.rep.raft;
    char idb[24], lidb[24];
    unsigned voters = 0, i;

    for (i = 0; i < r->configuration.n; i++) {
        if (r->configuration.servers[i].role == RAFT_VOTER) {
            voters++;
        }
    }
    creq_answer(q,
                "STATUS id=%s state=%s term=%llu applied=%llu last=%llu "
                "digest=%016" PRIx64
                " leader=%s ready=%d fsm_boot=%d snap=%llu "
                "snaps=%llu restored=%llu voters=%u servers=%u retired=%d "
                "log_first=%llu members=%zu",
                fmt_id(g.id, idb), state_name(raft_state(r)),
                (unsigned long long)r->current_term,
                (unsigned long long)raft_last_applied(r),
                (unsigned long long)raft_last_index(r), g.rep.digest,
                fmt_id(leader_id(), lidb), replica_ready(&g.rep) ? 1 : 0,
                fsm_bootstrapped(g.rep.fsm) ? 1 : 0,
                (unsigned long long)r->log.snapshot.last_index,
                (unsigned long long)g.rep.stats.snapshots_taken,
                (unsigned long long)g.rep.stats.snapshots_restored, voters,
                r->configuration.n, g.rep.retired ? 1 : 0,
                (unsigned long long)r->log.offset + 1,
                fsm_n_members(g.rep.fsm));
}

/* --- admin commands ------------------------------------------------------- */

struct admin
{
    struct replica_member_req m; /* m.data = this */
    struct creq *q;
};

/* The answer to a failed admin command: NOTLEADER carries the leader. */
static void answer_admin_error(struct creq *q, int rv, const char *msg)
{
    char idb[24];

    if (msg == NULL || msg[0] == '\0') {
        msg = replica_strerror(rv);
    }
    if (rv == REPLICA_E_NOTLEADER) {
        creq_answer(q, "ERR NOTLEADER %s %s", fmt_id(leader_id(), idb), msg);
    } else {
        creq_answer(q, "ERR %s %s", rv_name(rv), msg);
    }
}

static void admin_finish(struct creq *q)
{
    struct conn *c = q->c;

    c->inflight--;
    if (c->closing) {
        conn_maybe_free(c);
        return;
    }
    conn_flush(c);
}

static void member_cb(struct replica_member_req *m, int status, const char *msg)
{
    struct admin *a = m->data;
    struct creq *q = a->q;
    char idb[24];

    logf_(status == 0 ? "info" : "warn", "member op %d of %s: %s%s%s", m->op,
          fmt_id(m->id, idb), replica_strerror(status), msg != NULL ? ": " : "",
          msg != NULL ? msg : "");
    if (status == 0) {
        creq_answer(q, "OK");
    } else {
        answer_admin_error(q, status, msg);
    }
    free(a);
    admin_finish(q);
}

static void snapshot_cb(struct replica *rep, int status)
{
    struct creq *q = g.snap_q;

    g.snap_q = NULL;
    if (q == NULL) {
        return;
    }
    if (status == 0) {
        creq_answer(q, "OK %llu",
                    (unsigned long long)rep->raft->log.snapshot.last_index);
    } else {
        answer_admin_error(q, status,
                           status == REPLICA_E_BUSY
                               ? "no snapshot taken (configuration change "
                                 "uncommitted, or one running)"
                               : NULL);
    }
    admin_finish(q);
}

/* ADD, REMOVE, TRANSFER: @w[0] is the command, @n the number of words. */
static void do_member(struct creq *q, char **w, int n)
{
    struct admin *a;
    uint64_t id = 0;
    int rv;

    a = calloc(1, sizeof *a);
    if (a == NULL) {
        creq_answer(q, "ERR NOMEM out of memory");
        return;
    }
    a->q = q;
    a->m.data = a;
    if (strcmp(w[0], "ADD") == 0 && (n == 4 || n == 5)) {
        a->m.op = REPLICA_MEMBER_ADD;
        a->m.role = FSM_ROLE_VOTER;
        if (n == 5 && strcmp(w[4], "standby") == 0) {
            a->m.role = FSM_ROLE_STANDBY;
        } else if (n == 5 && strcmp(w[4], "voter") != 0) {
            goto invalid;
        }
        if (strlen(w[2]) > FSM_ADDR_MAX || strlen(w[3]) > FSM_ADDR_MAX) {
            goto invalid;
        }
        snprintf(a->m.raft_addr, sizeof a->m.raft_addr, "%s", w[2]);
        snprintf(a->m.client_addr, sizeof a->m.client_addr, "%s", w[3]);
    } else if (strcmp(w[0], "REMOVE") == 0 && n == 2) {
        a->m.op = REPLICA_MEMBER_REMOVE;
    } else if (strcmp(w[0], "TRANSFER") == 0 && (n == 1 || n == 2)) {
        a->m.op = REPLICA_MEMBER_TRANSFER;
    } else {
        goto invalid;
    }
    if (n >= 2 && (identity_parse(w[1], &id) != 0 || id == 0)) {
        goto invalid;
    }
    a->m.id = id;
    rv = replica_member(&g.rep, &a->m, member_cb);
    if (rv != 0) {
        if (rv == REPLICA_E_PRECONDITION && a->m.op == REPLICA_MEMBER_ADD) {
            answer_admin_error(q, rv,
                               a->m.msg[0] != '\0' ? a->m.msg
                               : fsm_is_retired(g.rep.fsm, id)
                                   ? "the id is retired"
                                   : "the id is already a member");
        } else {
            answer_admin_error(q, rv, a->m.msg);
        }
        free(a);
        return;
    }
    q->c->inflight++;
    return;
invalid:
    free(a);
    creq_answer(q, "ERR INVALID");
}

static void do_snapshot(struct creq *q)
{
    int rv;

    if (g.snap_q != NULL) {
        answer_admin_error(q, REPLICA_E_BUSY, "a snapshot is running");
        return;
    }
    g.snap_q = q;
    q->c->inflight++;
    rv = replica_snapshot(&g.rep, snapshot_cb);
    if (rv != 0) {
        g.snap_q = NULL;
        q->c->inflight--;
        answer_admin_error(q, rv, NULL);
    }
}

/* Split @line in place into at most WORDS_MAX space-separated words. */
static int split(char *line, char *w[WORDS_MAX])
{
    int n = 0;
    char *p = line;

    while (*p != '\0') {
        while (*p == ' ') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        if (n == WORDS_MAX) {
            return WORDS_MAX + 1; /* too many */
        }
        w[n++] = p;
        while (*p != '\0' && *p != ' ') {
            p++;
        }
        if (*p == ' ') {
            *p++ = '\0';
        }
    }
    return n;
}

void handle_line(struct conn *c, char *line)
{
    struct creq *q = creq_new(c);
    char *w[WORDS_MAX];
    int n, rv;
    size_t i;

    if (q == NULL) {
        conn_close(c);
        return;
    }
    for (i = 0; line[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch < 0x20 || ch >= 0x7f) {
            creq_answer(q, "ERR INVALID");
            return;
        }
    }
    n = split(line, w);
    if (g.stopping) {
        creq_answer(q, "ERR SHUTDOWN");
    } else if (n == 1 && strcmp(w[0], "STATUS") == 0) {
        do_status(q);
    } else if (n == 1 && strcmp(w[0], "ID") == 0) {
        char idb[IDENTITY_HEX_LEN + 1];
        creq_answer(q, "ID %s", identity_format(g.id, idb));
    } else if (n == 1 && strcmp(w[0], "SNAPSHOT") == 0) {
        do_snapshot(q);
    } else if (n >= 1 && n <= WORDS_MAX &&
               (strcmp(w[0], "ADD") == 0 || strcmp(w[0], "REMOVE") == 0 ||
                strcmp(w[0], "TRANSFER") == 0)) {
        do_member(q, w, n);
    } else if (n == 2 && strcmp(w[0], "LOCAL") == 0 && valid_key(w[1])) {
        struct fsm_ident id = {(const uint8_t *)SCOPE, strlen(SCOPE),
                               (const uint8_t *)w[1], strlen(w[1])};
        struct fsm_result res;

        memset(&res, 0, sizeof res);
        fsm_lookup(g.rep.fsm, &id, &res);
        creq_answer(q, "OK %s", fsm_outcome_name(res.outcome));
    } else if (n == 3 && strcmp(w[0], "CLAIM") == 0 && valid_key(w[1])) {
        struct fsm_cmd cmd;

        memset(&cmd, 0, sizeof cmd);
        cmd.type = FSM_CMD_CLAIM;
        if (!parse_rid(w[2], cmd.u.claim.request_id)) {
            creq_answer(q, "ERR INVALID");
            return;
        }
        cmd.u.claim.scope = (const uint8_t *)SCOPE;
        cmd.u.claim.scope_len = strlen(SCOPE);
        cmd.u.claim.key = (const uint8_t *)w[1];
        cmd.u.claim.key_len = strlen(w[1]);
        cmd.u.claim.kind = FSM_KIND_NONCE;
        cmd.u.claim.ttl_ms = CLAIM_TTL_MS;
        rv = replica_submit(&g.rep, &q->req, &cmd, claim_cb);
        if (rv != 0) {
            answer_error(q, rv);
        } else {
            c->inflight++;
        }
    } else {
        creq_answer(q, "ERR INVALID");
    }
}
