/* conn_helpers.h: the fixture of the unit-conn tests (test_conn*.c):
 * one uv loop per test, an rpc_server with a scripted handler, an
 * rpc_channel with recorded answers (conn_helpers.c), and raw TCP peers and
 * a raw listener that see and send exact bytes (conn_raw.c).
 *
 * Every test runs in its own process (Check forks) on its own ports of
 * 127.0.0.1:7601..7699, starts with fx_init and ends with fx_close, which
 * closes everything and fails the test if a handle was left open. Every
 * wait goes through RUN_UNTIL, which arms a watchdog: a wait that never
 * ends fails its test instead of hanging the suite. */
#ifndef ONCE_TESTS_UNIT_CONN_HELPERS_H_
#define ONCE_TESTS_UNIT_CONN_HELPERS_H_

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rpc/conn.h"
#include "rpc/frame.h"

#define PORT_NONE  7699 /* nothing ever listens here */
#define WAIT_MS    3000 /* default bound of one RUN_UNTIL */
#define HELD_MAX   2048
#define SEEN_MAX   256
#define RAW_MAX    8
#define RAW_IN_MAX (4u << 20)
#define ANS_MAX    2048

/* One call the handler kept to answer later. */
struct held
{
    struct rpc_call *call;
    uint8_t *body;
    size_t len;
};

/* What the handler saw of one call. */
struct seen
{
    uint64_t call_id;
    enum rpc_method method;
    uint32_t group_id;
    uint64_t deadline_ms;
    uint64_t received_mono_ms;
    uint64_t now;
    bool forwarded;
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    size_t body_len;
};

/* A raw TCP peer (client, or a connection accepted by the raw listener). */
struct raw
{
    uv_tcp_t tcp;
    uv_connect_t creq;
    bool used;
    bool connect_done;
    bool connected;
    bool eof;
    bool closing;
    bool closed;
    int connect_status;
    int read_err; /* 0 for a clean EOF */
    int write_err;
    uint64_t connected_at;
    uint64_t eof_at;
    uint64_t data_at; /* uv_now() of the last bytes received */
    uint8_t *in;
    size_t in_len;
    size_t in_cap;
    size_t pos; /* bytes already taken as frames */
    struct envelope_view v;
    int mode; /* accepted connections: what the raw listener does */
    bool listener_side;
    /* Take every OK answer as it arrives (for long streams). */
    bool count_only;
    unsigned nframes;
    uint64_t last_call_id;
};

enum lis_mode {
    LIS_CLOSE,    /* close once a whole request frame arrived */
    LIS_SILENT,   /* read and never answer */
    LIS_ECHO,     /* answer OK with the request's body */
    LIS_GARBAGE,  /* answer with a frame that does not decode */
    LIS_ERRFRAME, /* answer with a connection-level error frame */
    LIS_BIG,      /* answer OK with a 4096-byte body */
    LIS_REQUEST,  /* "answer" with a request-direction frame */
};

struct fx
{
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool timed_out;
    struct rpc_server *srv;
    struct rpc_channel *ch;
    struct rpc_channel *ch_closing; /* being closed (for callbacks) */
    bool srv_closed;
    unsigned srv_close_calls;
    struct rpc_ids ids;
    char srv_addr[32];
    char ch_addr[32];
    /* Handler. */
    unsigned nserved;
    struct seen seen[SEEN_MAX];
    struct held held[HELD_MAX];
    unsigned nheld;   /* held so far (released ones included) */
    size_t big_reply; /* body length of the "big" reply */
    unsigned nlog;
    char last_log[256];
    /* Answers (registered so the teardown frees their bodies). */
    int seq;
    struct ans *answers[ANS_MAX];
    unsigned nanswers;
    /* Raw peers and the raw listener. */
    struct raw raws[RAW_MAX];
    uv_tcp_t lis;
    bool lis_open;
    enum lis_mode lis_mode;
    unsigned accepts;
    unsigned lis_frames;
    uint64_t lis_last_call_id;
    uint64_t lis_last_deadline;
};

/* One answer as the channel delivered it. */
struct ans
{
    int n; /* times the callback ran: must end at exactly 1 */
    int rv;
    bool sent;
    int seq; /* order among all answers of the test */
    uint64_t at;
    uint64_t call_id;
    enum rpc_method method;
    enum rpc_direction direction;
    enum rpc_status status;
    enum rpc_applied applied;
    char error[RPC_ERROR_MAX + 1];
    size_t error_len;
    char hint[RPC_ADDR_MAX + 1];
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    uint64_t node_id;
    bool has_boot_id;
    uint8_t boot_id[RPC_ID_LEN];
    uint32_t group_id;
    uint8_t *body;
    size_t body_len;
    /* Run from inside the callback (after recording). */
    void (*then)(struct ans *a);
    int chain_left;
};

/* The fixture of the running test (each test is its own process). */
extern struct fx F;

/* The watchdog of RUN_UNTIL_MS: sets F.timed_out. */
void watchdog_cb(uv_timer_t *t);

/* Run the loop until @cond holds; fail after @ms. */
#define RUN_UNTIL_MS(cond, ms)                             \
    do {                                                   \
        F.timed_out = false;                               \
        uv_update_time(&F.loop);                           \
        uv_timer_start(&F.watchdog, watchdog_cb, (ms), 0); \
        while (!(cond)) {                                  \
            ck_assert_msg(!F.timed_out,                    \
                          "timed out after %u ms waiting " \
                          "for: %s",                       \
                          (unsigned)(ms), #cond);          \
            uv_run(&F.loop, UV_RUN_ONCE);                  \
        }                                                  \
        uv_timer_stop(&F.watchdog);                        \
    } while (0)
#define RUN_UNTIL(cond) RUN_UNTIL_MS(cond, WAIT_MS)

/* Let the loop run for @ms (whatever happens meanwhile). */
void run_for(unsigned ms);
uint64_t now_ms(void);

void fx_init(void);
/* Close everything, check nothing was left open, free the loop. */
void fx_close(void);

/* ---- Server side (conn_helpers.c) ---------------------------------------
 * serve_cb answers as the request body starts (see there): "hold" and
 * "mark" keep the call for release(); the others answer at once. */
void serve_cb(void *arg, struct rpc_call *call, struct envelope_view *req);
void srv_close_cb(void *arg);
/* Answer the @i-th held call OK with its own body; all of them. */
void release(unsigned i);
void release_all(void);
unsigned held_open(void);
/* Start F.srv on 127.0.0.1:@port (@lim NULL: the defaults). */
void srv_start_lim(unsigned port, const struct rpc_limits *lim);
void srv_start(unsigned port);
struct rpc_server_stats stats(void);
uint64_t stat_conns_open(void);

/* ---- Client side (conn_helpers.c) ---------------------------------------
 * F.ch to 127.0.0.1:@port; answers land in a struct ans (answer_cb). */
void ch_open_lim(unsigned port, const struct rpc_limits *lim);
void ch_open(unsigned port);
void answer_cb(void *arg, int rv, bool sent, struct envelope_view *ans);
int call_full(struct ans *a,
              enum rpc_method m,
              const void *body,
              size_t len,
              uint64_t deadline_ms,
              uint64_t timeout_ms,
              bool forwarded,
              uint32_t group_id);
/* A STATUS call pinned to cluster @pin (NULL: not pinned). */
void call_pinned(struct ans *a, const char *body, const uint8_t *pin);
/* A STATUS call with a text body; the callback never runs from inside. */
void call_text(struct ans *a, const char *body, uint64_t timeout_ms);
unsigned n_answered(const struct ans *a, unsigned n);
void assert_ok(const struct ans *a, const char *body);
void assert_failed(const struct ans *a, int rv, bool sent);
/* An answer made by the layer (or a replaced reply): exact status and
 * applied, some error text, no body. */
void assert_status(const struct ans *a,
                   enum rpc_status st,
                   enum rpc_applied ap);

/* ---- Raw peers and the raw listener (conn_raw.c) ----------------------- */
void raw_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void raw_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
struct raw *raw_connect_async(unsigned port);
struct raw *raw_connect(unsigned port);
void raw_send(struct raw *r, const void *data, size_t len);
void raw_close(struct raw *r);
/* Whether a whole frame is buffered and not taken yet. */
bool raw_has_frame(const struct raw *r);
/* Take the next whole frame into r->v (it must decode). */
void raw_take(struct raw *r);
void raw_send_env(struct raw *r, const struct envelope_view *e);
/* A whole request frame (malloc'd) for a raw client. */
uint8_t *req_frame(uint64_t call_id,
                   const void *body,
                   size_t body_len,
                   uint64_t deadline_ms,
                   size_t *out_len);
void raw_send_req(struct raw *r,
                  uint64_t call_id,
                  const char *body,
                  uint64_t deadline_ms);
/* The next frame is the OK answer to @call_id with @body. */
void raw_expect_ok(struct raw *r, uint64_t call_id, const char *body);
/* The connection got exactly one connection-level error frame (call id 0,
 * method UNSPECIFIED, @st, applied FALSE, some text) and was closed. */
void raw_expect_error_then_close(struct raw *r, enum rpc_status st);
/* A raw listener on 127.0.0.1:@port answering as @mode says. */
void lis_start(unsigned port, enum lis_mode mode);

/* The suites of unit-conn. */
Suite *conn_suite(void);
Suite *conn_server_suite(void);
Suite *conn_channel_suite(void);
Suite *deadlines_suite(void); /* test_deadlines.c: no fixture */

#endif /* ONCE_TESTS_UNIT_CONN_HELPERS_H_ */
