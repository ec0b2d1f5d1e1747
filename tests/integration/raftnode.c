/* tests/integration/raftnode.c: a minimal node driver for process-level
 * tests, until the real onced exists.
 *
 *   raftnode --dir D --id N|auto --raft-addr 127.0.0.1:P --client-port Q
 *            [--peers 1@127.0.0.1:P1,2@127.0.0.1:P2,3@127.0.0.1:P3 |
 *             --bootstrap-self]
 *            [--snapshot-threshold T] [--snapshot-trailing R]
 *
 * --id auto takes the id from D/node-id (identity.h: random, persisted on
 * the first start); ids are then printed as 16 hex digits everywhere
 * (STATUS, ERR NOTLEADER, ID, logs). A directory with D/tombstone (a
 * removed node) is refused with exit code 3, with either form of --id.
 * Configuration of a pristine D: --peers bootstraps those voters,
 * --bootstrap-self a one-voter configuration of this node only; with
 * neither the node starts empty and waits to be added (ADD on the leader).
 *
 * One replica (src/raft/replica.h) over raft_uv with the raft_uv_tcp
 * transport, backend "uv" (the inner raft_uv serves network and storage, D
 * is its directory), auto-recovery off, election 1000 ms, heartbeat 100 ms,
 * small snapshot threshold so snapshots happen during tests. A pristine D is
 * bootstrapped with the --peers configuration (all voters); on restart
 * raft_bootstrap says RAFT_CANTBOOTSTRAP, which is normal. The first ready
 * leader that finds the FSM unbootstrapped submits its Bootstrap command.
 *
 * Client protocol: line-based TCP on 127.0.0.1:Q only. Requests on one
 * connection are answered in order (pipelining is fine):
 *   CLAIM <key> <rid-hex32>  -> OK <OUTCOME> <retry 0|1>
 *                               | ERR NOTLEADER <leader-id> | ERR UNKNOWN
 *                               | ERR <NAME>   (NAME: BUSY, SHUTDOWN, ...)
 *       a NONCE claim of (scope "raftnode", key), ttl 1 h;
 *   LOCAL <key>              -> OK FOUND | OK NOT_FOUND (fsm_lookup of the
 *                               local state, no barrier: tests only);
 *   STATUS                   -> STATUS id=<n> state=<...> term=<t>
 *                               applied=<idx> last=<idx> digest=<hex16>
 *                               leader=<id> [more key=value fields, among
 *                               them voters=<n> (raft configuration),
 *                               retired=<0|1>, log_first=<idx>]
 * Admin commands (membership runs on the ready leader only; ERR NOTLEADER
 * <leader-id> when refused before starting; otherwise the answer comes when
 * the operation finished: OK, or ERR <NAME> <message>; NAME as for CLAIM):
 *   ID                       -> ID <id>
 *   ADD <id> <raft_addr> <client_addr> [voter|standby]   (default voter)
 *   REMOVE <id>              (of the leader itself: ERR NOTLEADER <id>
 *                             <message> after the transfer: repeat it on
 *                             the new leader)
 *   TRANSFER [<id>]          (no id: any up-to-date voter)
 *   SNAPSHOT                 -> OK <snapshot-index> | ERR <NAME> <message>
 * Ids in admin commands are 16 hex digits (identity_parse).
 * Anything else, and lines over LINE_MAX bytes, get "ERR INVALID".
 * Ids are decimal unless --id auto is used, because the crash test passes
 * small ids.
 *
 * SIGTERM/SIGINT: stop cleanly (raft_close, then the uv io and transport,
 * then replica_close) and exit 0. Logs go to stderr. */
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
#include "store/store.h"

#define LINE_MAX_LEN    1024 /* longest request line, '\n' excluded */
#define CONNS_MAX       1024
#define PENDING_HIGH    4096 /* stop reading a connection above this */
#define PENDING_LOW     1024 /* and resume below this */
#define WRITE_QUEUE_MAX (16u << 20)
#define SCOPE           "raftnode"
#define CLAIM_TTL_MS    (3600u * 1000)
#define MONITOR_MS      50
#define PEERS_MAX       16
#define WORDS_MAX       6 /* longest command: ADD with its role */
#define EXIT_TOMBSTONE  3 /* the data directory belongs to a removed node */

/* --- state ---------------------------------------------------------------- */

struct conn;

/* One request of a connection: answered in order of arrival. */
struct creq
{
    struct replica_req req; /* req.data = this */
    struct conn *c;
    struct creq *next;
    bool done;
    size_t outlen;
    char out[256];
};

struct conn
{
    uv_tcp_t tcp;
    struct conn *next_conn, *prev_conn;
    char in[LINE_MAX_LEN + 1];
    size_t inlen;
    bool discarding; /* the current line is too long: skip to '\n' */
    struct creq *head, *tail;
    size_t queued;   /* creqs in the FIFO */
    size_t inflight; /* creqs waiting for a replica callback */
    size_t writes;   /* uv_write requests outstanding */
    bool reading;
    bool closing;
    bool handle_closed;
};

struct wreq
{
    uv_write_t w;
    struct conn *c;
    char *buf;
};

struct peer
{
    raft_id id;
    char addr[FSM_ADDR_MAX + 1];
};

static struct
{
    const char *dir;
    raft_id id;
    bool id_auto;        /* --id auto: from DIR/node-id; ids in hex */
    bool bootstrap_self; /* --bootstrap-self */
    const char *raft_addr;
    int client_port;
    struct peer peers[PEERS_MAX];
    unsigned n_peers;
    unsigned snap_threshold;
    unsigned snap_trailing;

    uv_loop_t loop;
    struct uvio uvio; /* raft_uv + TCP_NODELAY transport + uv store */
    struct replica rep;
    uv_tcp_t server;
    uv_signal_t sigterm, sigint;
    uv_timer_t monitor;

    struct conn *conns;
    size_t n_conns;
    bool stopping;
    bool raft_closed;
    bool boot_inflight;
    struct replica_req boot_req;
    int last_state;
    raft_term last_term;
    bool retire_pending; /* retired: stop from the monitor, not apply */
    struct creq *snap_q; /* the SNAPSHOT request being answered */
} g;

/* An id as this driver prints it (see the header comment). */
static const char *fmt_id(raft_id id, char buf[24])
{
    if (g.id_auto) {
        return identity_format(id, buf);
    }
    snprintf(buf, 24, "%llu", (unsigned long long)id);
    return buf;
}

static void logf_(const char *level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void logf_(const char *level, const char *fmt, ...)
{
    char msg[600];
    char idb[24];
    struct timespec ts;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "%lld.%03ld raftnode id=%s level=%s %s\n",
            (long long)ts.tv_sec, ts.tv_nsec / 1000000, fmt_id(g.id, idb),
            level, msg);
}

/* --- clocks and hooks ----------------------------------------------------- */

static uint64_t clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t wall_ms(void *arg)
{
    (void)arg;
    return clock_ms(CLOCK_REALTIME);
}

static uint64_t mono_ms(void *arg)
{
    (void)arg;
    return clock_ms(CLOCK_MONOTONIC);
}

static void hook_fatal(void *arg, const char *what, int status, const char *msg)
{
    (void)arg;
    logf_("fatal", "stopping: %s failed: %s (%s)", what, raft_strerror(status),
          msg != NULL ? msg : "");
    abort();
}

static void hook_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    logf_(level, "%s", msg);
}

static void shutdown_node(const char *why);

static void hook_retired(void *arg)
{
    char errmsg[IDENTITY_ERRMSG_SIZE];

    (void)arg;
    /* Removed: leave a tombstone so this directory never starts again.
     * Written at once (durably); the stop itself is deferred to the
     * monitor timer, because this hook runs inside raft's apply callback
     * and raft_close from there would change raft's state in the middle of
     * its apply loop. */
    if (identity_tombstone(g.dir, "removed from the cluster (id retired)",
                           errmsg) != 0) {
        logf_("error", "%s", errmsg);
    }
    g.retire_pending = true;
}

/* --- connections ---------------------------------------------------------- */

static void conn_maybe_free(struct conn *c)
{
    struct creq *q, *next;

    if (!c->handle_closed || c->inflight > 0 || c->writes > 0) {
        return;
    }
    for (q = c->head; q != NULL; q = next) {
        next = q->next;
        free(q);
    }
    free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    c->handle_closed = true;
    conn_maybe_free(c);
}

static void conn_close(struct conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    if (c->prev_conn != NULL) {
        c->prev_conn->next_conn = c->next_conn;
    } else {
        g.conns = c->next_conn;
    }
    if (c->next_conn != NULL) {
        c->next_conn->prev_conn = c->prev_conn;
    }
    g.n_conns--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_write(uv_write_t *w, int status)
{
    struct wreq *wr = w->data;
    struct conn *c = wr->c;

    free(wr->buf);
    free(wr);
    c->writes--;
    if (status != 0 && !c->closing) {
        conn_close(c);
    }
    conn_maybe_free(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Write out every answered request at the head of the FIFO. */
static void conn_flush(struct conn *c)
{
    struct creq *q;
    struct wreq *wr;
    size_t len = 0, off = 0;
    uv_buf_t b;

    if (c->closing) {
        return;
    }
    for (q = c->head; q != NULL && q->done; q = q->next) {
        len += q->outlen;
    }
    if (len == 0) {
        return;
    }
    wr = malloc(sizeof *wr);
    if (wr == NULL || (wr->buf = malloc(len)) == NULL) {
        free(wr);
        conn_close(c);
        return;
    }
    while (c->head != NULL && c->head->done) {
        q = c->head;
        memcpy(wr->buf + off, q->out, q->outlen);
        off += q->outlen;
        c->head = q->next;
        if (c->head == NULL) {
            c->tail = NULL;
        }
        c->queued--;
        free(q);
    }
    wr->c = c;
    wr->w.data = wr;
    b = uv_buf_init(wr->buf, (unsigned)len);
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        free(wr->buf);
        free(wr);
        conn_close(c);
        return;
    }
    c->writes++;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) >
        WRITE_QUEUE_MAX) {
        logf_("warn", "client does not read its answers: closing");
        conn_close(c);
        return;
    }
    if (!c->reading && c->queued < PENDING_LOW) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) {
            c->reading = true;
        }
    }
}

static struct creq *creq_new(struct conn *c)
{
    struct creq *q = calloc(1, sizeof *q);

    if (q == NULL) {
        return NULL;
    }
    q->c = c;
    q->req.data = q;
    if (c->tail != NULL) {
        c->tail->next = q;
    } else {
        c->head = q;
    }
    c->tail = q;
    c->queued++;
    return q;
}

static void creq_answer(struct creq *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void creq_answer(struct creq *q, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(q->out, sizeof q->out - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    }
    if ((size_t)n > sizeof q->out - 2) {
        n = (int)sizeof q->out - 2;
    }
    q->out[n] = '\n';
    q->outlen = (size_t)n + 1;
    q->done = true;
}

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

static raft_id leader_id(void)
{
    raft_id id = 0;
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

static const char *state_name(int st)
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
                               fsm_is_retired(g.rep.fsm, id)
                                   ? "the id is retired"
                                   : "the id is already a member");
        } else {
            answer_admin_error(q, rv, NULL);
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

static void handle_line(struct conn *c, char *line)
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

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = malloc(65536);
    buf->len = buf->base != NULL ? 65536 : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    ssize_t i;

    if (nread < 0) {
        free(buf->base);
        conn_close(c);
        return;
    }
    for (i = 0; i < nread && !c->closing; i++) {
        char ch = buf->base[i];

        if (ch == '\n') {
            if (c->discarding) {
                c->discarding = false;
            } else {
                if (c->inlen > 0 && c->in[c->inlen - 1] == '\r') {
                    c->inlen--;
                }
                c->in[c->inlen] = '\0';
                handle_line(c, c->in);
            }
            c->inlen = 0;
        } else if (c->discarding) {
            continue;
        } else if (c->inlen == LINE_MAX_LEN) {
            struct creq *q = creq_new(c);
            if (q == NULL) {
                conn_close(c);
                break;
            }
            creq_answer(q, "ERR INVALID");
            c->discarding = true;
            c->inlen = 0;
        } else {
            c->in[c->inlen++] = ch;
        }
    }
    free(buf->base);
    if (c->closing) {
        return;
    }
    if (c->queued >= PENDING_HIGH && c->reading) {
        uv_read_stop(s);
        c->reading = false;
    }
    conn_flush(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct conn *c;

    if (status != 0) {
        logf_("warn", "accept: %s", uv_strerror(status));
        return;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return; /* the connection stays in the backlog */
    }
    uv_tcp_init(&g.loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || g.stopping ||
        g.n_conns >= CONNS_MAX) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        return;
    }
    c->next_conn = g.conns;
    if (g.conns != NULL) {
        g.conns->prev_conn = c;
    }
    g.conns = c;
    g.n_conns++;
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    c->reading = true;
}

/* --- FSM bootstrap and monitoring ----------------------------------------- */

static void boot_cb(struct replica_req *req,
                    int status,
                    const struct fsm_result *res)
{
    (void)req;
    g.boot_inflight = false;
    if (status == 0 && res != NULL) {
        logf_("info", "fsm bootstrap: %s%s%s", fsm_outcome_name(res->outcome),
              res->reason != NULL ? ": " : "",
              res->reason != NULL ? res->reason : "");
    } else {
        logf_("warn", "fsm bootstrap: %s (will retry)",
              replica_strerror(status));
    }
}

static void submit_bootstrap(void)
{
    struct fsm_bootstrap *b = calloc(1, sizeof *b);
    struct fsm_cmd cmd;
    unsigned i;
    int rv;

    if (b == NULL) {
        return;
    }
    if (getrandom(b->cluster_id, sizeof b->cluster_id, 0) !=
            (ssize_t)sizeof b->cluster_id ||
        getrandom(b->hash_key, sizeof b->hash_key, 0) !=
            (ssize_t)sizeof b->hash_key) {
        logf_("warn", "getrandom failed: %s", strerror(errno));
        free(b);
        return;
    }
    b->group_id = 1;
    fsm_settings_default(&b->settings);
    for (i = 0; i < g.n_peers && i < FSM_MEMBERS_MAX; i++) {
        b->members[i].id = g.peers[i].id;
        snprintf(b->members[i].raft_addr, sizeof b->members[i].raft_addr, "%s",
                 g.peers[i].addr);
        /* Client addresses of peers are not known to this driver (but our
         * own is, the only member with --bootstrap-self). */
        if (g.peers[i].id == g.id) {
            snprintf(b->members[i].client_addr,
                     sizeof b->members[i].client_addr, "127.0.0.1:%d",
                     g.client_port);
        } else {
            snprintf(b->members[i].client_addr,
                     sizeof b->members[i].client_addr, "%s", g.peers[i].addr);
        }
        b->members[i].role = FSM_ROLE_VOTER;
    }
    b->n_members = i;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_BOOTSTRAP;
    cmd.u.bootstrap = b;
    memset(&g.boot_req, 0, sizeof g.boot_req);
    rv = replica_submit(&g.rep, &g.boot_req, &cmd, boot_cb);
    free(b);
    if (rv == 0) {
        g.boot_inflight = true;
        logf_("info", "submitted fsm bootstrap");
    } else {
        logf_("warn", "fsm bootstrap submit: %s", replica_strerror(rv));
    }
}

static void on_monitor(uv_timer_t *t)
{
    struct raft *r = g.rep.raft;
    int st;

    (void)t;
    if (g.stopping) {
        return;
    }
    if (g.retire_pending) {
        shutdown_node("this node's id was retired");
        return;
    }
    st = raft_state(r);
    if (st != g.last_state || r->current_term != g.last_term) {
        logf_("info", "state=%s term=%llu applied=%llu last=%llu leader=%llu",
              state_name(st), (unsigned long long)r->current_term,
              (unsigned long long)raft_last_applied(r),
              (unsigned long long)raft_last_index(r),
              (unsigned long long)leader_id());
        g.last_state = st;
        g.last_term = r->current_term;
    }
    if (replica_ready(&g.rep) && !fsm_bootstrapped(g.rep.fsm) &&
        !g.boot_inflight) {
        submit_bootstrap();
    }
}

/* --- shutdown ------------------------------------------------------------- */

static void on_raft_closed(struct raft *r)
{
    (void)r;
    g.raft_closed = true;
    logf_("info", "raft closed");
    uv_close((uv_handle_t *)&g.sigterm, NULL);
    uv_close((uv_handle_t *)&g.sigint, NULL);
}

static void shutdown_node(const char *why)
{
    if (g.stopping) {
        return;
    }
    g.stopping = true;
    logf_("info", "stopping: %s", why);
    uv_timer_stop(&g.monitor);
    uv_close((uv_handle_t *)&g.monitor, NULL);
    uv_close((uv_handle_t *)&g.server, NULL);
    while (g.conns != NULL) {
        conn_close(g.conns);
    }
    replica_shutdown(&g.rep);
    raft_close(g.rep.raft, on_raft_closed);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    shutdown_node(signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* --- arguments ------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: raftnode --dir D --id N|auto --raft-addr 127.0.0.1:P "
            "--client-port Q [--peers 1@127.0.0.1:P1,2@127.0.0.1:P2,... | "
            "--bootstrap-self] "
            "[--snapshot-threshold T] [--snapshot-trailing R]\n");
}

static bool parse_u64(const char *s, unsigned long long max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_peers(char *s)
{
    char *save = NULL, *tok;
    uint64_t id;

    for (tok = strtok_r(s, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *at = strchr(tok, '@');
        if (at == NULL || g.n_peers == PEERS_MAX) {
            return false;
        }
        *at = '\0';
        if (!parse_u64(tok, UINT64_MAX, &id) || id == 0 || strlen(at + 1) < 1 ||
            strlen(at + 1) > FSM_ADDR_MAX) {
            return false;
        }
        g.peers[g.n_peers].id = id;
        snprintf(g.peers[g.n_peers].addr, sizeof g.peers[g.n_peers].addr, "%s",
                 at + 1);
        g.n_peers++;
    }
    return g.n_peers > 0;
}

static bool parse_args(int argc, char **argv)
{
    uint64_t v;
    int i;

    g.snap_threshold = 64;
    g.snap_trailing = 128;
    for (i = 1; i < argc; i += 2) {
        const char *k = argv[i];
        const char *val;

        if (strcmp(k, "--bootstrap-self") == 0) {
            g.bootstrap_self = true;
            i--; /* no value */
            continue;
        }
        if (i + 1 >= argc) {
            return false;
        }
        val = argv[i + 1];
        if (strcmp(k, "--dir") == 0) {
            g.dir = val;
        } else if (strcmp(k, "--id") == 0 && strcmp(val, "auto") == 0) {
            g.id_auto = true;
        } else if (strcmp(k, "--id") == 0) {
            if (!parse_u64(val, UINT64_MAX, &v) || v == 0) {
                return false;
            }
            g.id = v;
        } else if (strcmp(k, "--raft-addr") == 0) {
            g.raft_addr = val;
        } else if (strcmp(k, "--client-port") == 0) {
            if (!parse_u64(val, 65535, &v) || v == 0) {
                return false;
            }
            g.client_port = (int)v;
        } else if (strcmp(k, "--peers") == 0) {
            /* Parse a copy: strtok_r would mangle what ps shows. */
            char copy[PEERS_MAX * (FSM_ADDR_MAX + 24)];
            if (strlen(val) >= sizeof copy) {
                return false;
            }
            memcpy(copy, val, strlen(val) + 1);
            if (!parse_peers(copy)) {
                return false;
            }
        } else if (strcmp(k, "--snapshot-threshold") == 0) {
            if (!parse_u64(val, 1u << 30, &v) || v == 0) {
                return false;
            }
            g.snap_threshold = (unsigned)v;
        } else if (strcmp(k, "--snapshot-trailing") == 0) {
            if (!parse_u64(val, 1u << 30, &v)) {
                return false;
            }
            g.snap_trailing = (unsigned)v;
        } else {
            return false;
        }
    }
    return i == argc && g.dir != NULL && (g.id != 0 || g.id_auto) &&
           !(g.id != 0 && g.id_auto) && g.raft_addr != NULL &&
           strlen(g.raft_addr) <= FSM_ADDR_MAX && g.client_port != 0 &&
           !(g.n_peers > 0 && g.bootstrap_self);
}

/* --- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct raft_configuration conf;
    struct replica_config rc;
    struct replica_clock clock = {NULL, wall_ms, mono_ms};
    struct replica_hooks hooks;
    struct sockaddr_in sa;
    struct fsm *fsm;
    char errmsg[256];
    unsigned i;
    int rv;

    signal(SIGPIPE, SIG_IGN);
    if (!parse_args(argc, argv)) {
        usage();
        return 2;
    }
    if (mkdir(g.dir, 0755) != 0 && errno != EEXIST) {
        logf_("error", "mkdir %s: %s", g.dir, strerror(errno));
        return 1;
    }
    g.last_state = -1;
    uv_loop_init(&g.loop);
    /* A removed node's directory never starts again (docs/design.md §4). */
    if (g.id_auto) {
        uint64_t id = 0;
        rv = identity_open(g.dir, &id, errmsg);
        if (rv == 0) {
            g.id = id;
        }
    } else {
        rv = identity_check_tombstone(g.dir, errmsg);
    }
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return rv == IDENTITY_E_TOMBSTONE ? EXIT_TOMBSTONE : 1;
    }
    if (g.bootstrap_self) {
        /* The one voter of the new cluster is this node; the FSM bootstrap
         * (submit_bootstrap) lists it with its client address. */
        g.peers[0].id = g.id;
        snprintf(g.peers[0].addr, sizeof g.peers[0].addr, "%s", g.raft_addr);
        g.n_peers = 1;
    }
    rv = uvio_init(&g.uvio, &g.loop, g.dir, errmsg);
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return 1;
    }
    fsm = fsm_new();
    if (fsm == NULL) {
        logf_("error", "out of memory");
        return 1;
    }
    memset(&hooks, 0, sizeof hooks);
    hooks.fatal = hook_fatal;
    hooks.log = hook_log;
    hooks.retired = hook_retired;
    rv = replica_init(&g.rep, &g.uvio.io, &g.uvio.store, fsm, g.id, g.raft_addr,
                      &clock, &hooks, errmsg);
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return 1;
    }
    memset(&rc, 0, sizeof rc);
    rc.election_ms = 1000;
    rc.heartbeat_ms = 100;
    rc.snapshot_threshold = g.snap_threshold;
    rc.snapshot_trailing = g.snap_trailing;
    rc.max_catch_up_rounds = 10;
    rc.max_catch_up_round_ms = 5000;
    rv = replica_configure(&g.rep, &rc, errmsg);
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return 1;
    }
    raft_configuration_init(&conf);
    for (i = 0; i < g.n_peers; i++) {
        rv = raft_configuration_add(&conf, g.peers[i].id, g.peers[i].addr,
                                    RAFT_VOTER);
        if (rv != 0) {
            logf_("error", "bad --peers: %s", raft_strerror(rv));
            return 1;
        }
    }
    /* Without a configuration the node starts empty: it waits to be added
     * by a leader (raft_add, then the log or a snapshot arrives). */
    rv = g.n_peers > 0 ? raft_bootstrap(g.rep.raft, &conf) : RAFT_CANTBOOTSTRAP;
    raft_configuration_close(&conf);
    if (rv == 0) {
        logf_("info", "bootstrapped %u voters in %s", g.n_peers, g.dir);
    } else if (rv != RAFT_CANTBOOTSTRAP) {
        logf_("error", "raft_bootstrap: %s", raft_errmsg(g.rep.raft));
        return 1;
    }
    rv = replica_start(&g.rep, errmsg);
    if (rv != 0) {
        /* raft_uv does not pass the transport's message on (listen). */
        logf_("error", "%s (raft address %s)%s%s", errmsg, g.raft_addr,
              g.uvio.tcp.errmsg[0] ? ": " : "", g.uvio.tcp.errmsg);
        return 1;
    }
    logf_("info", "started: raft=%s last=%llu applied=%llu", g.raft_addr,
          (unsigned long long)raft_last_index(g.rep.raft),
          (unsigned long long)raft_last_applied(g.rep.raft));

    uv_tcp_init(&g.loop, &g.server);
    uv_ip4_addr("127.0.0.1", g.client_port, &sa);
    rv = uv_tcp_bind(&g.server, (const struct sockaddr *)&sa, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&g.server, 128, on_connection);
    }
    if (rv != 0) {
        logf_("error", "client port 127.0.0.1:%d: %s", g.client_port,
              uv_strerror(rv));
        /* Stop through the normal path so raft closes its files. */
        uv_signal_init(&g.loop, &g.sigterm);
        uv_signal_init(&g.loop, &g.sigint);
        uv_timer_init(&g.loop, &g.monitor);
        shutdown_node("cannot listen");
        uv_run(&g.loop, UV_RUN_DEFAULT);
        uvio_close(&g.uvio);
        replica_close(&g.rep);
        uv_loop_close(&g.loop);
        return 1;
    }
    uv_signal_init(&g.loop, &g.sigterm);
    uv_signal_start(&g.sigterm, on_signal, SIGTERM);
    uv_signal_init(&g.loop, &g.sigint);
    uv_signal_start(&g.sigint, on_signal, SIGINT);
    uv_timer_init(&g.loop, &g.monitor);
    uv_timer_start(&g.monitor, on_monitor, MONITOR_MS, MONITOR_MS);

    uv_run(&g.loop, UV_RUN_DEFAULT);

    /* raft_close's callback has run and every handle is closed. */
    uvio_close(&g.uvio);
    replica_close(&g.rep);
    rv = uv_loop_close(&g.loop);
    if (rv != 0) {
        logf_("warn", "uv_loop_close: %s", uv_strerror(rv));
    }
    logf_("info", "stopped");
    return 0;
}
