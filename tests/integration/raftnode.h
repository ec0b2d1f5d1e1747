/* tests/integration/raftnode.h: what the parts of the raftnode driver share
 * (raftnode.c has the protocol):
 *
 *   raftnode.c       the node: arguments, the replica over raft_uv, hooks,
 *                    the FSM bootstrap, the monitor, the stop, main();
 *   raftnode_conn.c  the client connections: reading lines, the in-order
 *                    answer FIFO, writing;
 *   raftnode_cmd.c   the commands: CLAIM, LOCAL, STATUS and the admin
 *                    commands.
 *
 * One node per process: its state is the global g. Loop thread only. */
#ifndef ONCE_TESTS_INTEGRATION_RAFTNODE_H_
#define ONCE_TESTS_INTEGRATION_RAFTNODE_H_

#include <stdbool.h>
#include <stddef.h>

#include <raft.h>
#include <uv.h>

#include "fsm/fsm.h"
#include "raft/replica.h"
#include "raft/uvio.h"

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

struct raftnode
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
};

extern struct raftnode g;

/* raftnode.c */
const char *fmt_id(raft_id id, char buf[24]);
void logf_(const char *level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* raftnode_conn.c */
void conn_close(struct conn *c);
void conn_flush(struct conn *c);
void conn_maybe_free(struct conn *c);
void creq_answer(struct creq *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
struct creq *creq_new(struct conn *c);
void on_connection(uv_stream_t *server, int status);

/* raftnode_cmd.c */
void handle_line(struct conn *c, char *line);
raft_id leader_id(void);
const char *state_name(int st);

#endif /* ONCE_TESTS_INTEGRATION_RAFTNODE_H_ */
