/* ingress/ingress.h: once-ingress, a webhook receiver that cannot be
 * replayed (docs/ingress.md).
 *
 * For each POST: receive (bounded) -> verify the signature -> claim the
 * message id IDEMPOTENT (payload hash, signed timestamp and window,
 * lease) -> forward to the upstream -> complete or release -> answer.
 * Nothing reaches the upstream without an ACCEPTED claim, and every
 * answer but 200 tells the sender whether to retry.
 *
 * Pieces:
 *   config.c   flags and secrets (pure but for reading the secret file);
 *   decide.c   the mapping from outcomes to HTTP answers, and the stored
 *              result's encoding (pure);
 *   upstream.c one POST to the upstream (libcurl);
 *   pipeline.c one webhook through verify, claim, forward, complete;
 *   server.c   libmicrohttpd: bodies, routes, per-thread resources;
 *   metrics.c  counters and their Prometheus text;
 *   keyring.c  the secrets in force, swapped whole on reload;
 *   main.c     main(): flags, signals (SIGHUP reloads the secrets).
 *   idem_*.c   --mode idempotency-key, the Idempotency-Key proxy
 *              (idem.h): its flags, request parser, stored responses,
 *              pipeline and HTTP side; it shares config.c, metrics.c,
 *              upstream.c and server.c with the webhook mode.
 *
 * Threads: libmicrohttpd's pool threads run the pipeline; each owns its
 * once_client and curl handle (libonce clients are single-threaded). The
 * verifier is shared read-only and swapped whole on reload (keyring). */
#ifndef ONCE_INGRESS_INGRESS_H_
#define ONCE_INGRESS_INGRESS_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingress/idem.h"
#include "once.h"
#include "once_verify.h"

enum { ERR_INGRESS_CODES(ERR_ENUM) }; /* common/err.h */

/* ------------------------------------------------------------------------
 * Configuration (config.c)
 * ---------------------------------------------------------------------- */

#define INGRESS_URL_MAX         2048
#define INGRESS_PATH_MAX        4096
#define INGRESS_SECRET_FILE_MAX 65536 /* bytes of one secret file */
#define INGRESS_BODY_MAX_DEF    (1u << 20)
#define INGRESS_BODY_MAX_MAX    ONCE_VERIFY_BODY_MAX

struct ingress_config
{
    char listen[ONCE_ADDR_MAX + 1];
    char http_addr[ONCE_ADDR_MAX + 1]; /* "" : ops routes on listen */
    char cluster_text[1024];
    const char *cluster[ONCE_ADDRS_MAX]; /* into cluster_text */
    size_t n_cluster;
    char upstream[INGRESS_URL_MAX + 1];
    enum once_scheme scheme;
    char secret_file[INGRESS_PATH_MAX + 1]; /* "" : none */
    char secret_env[128];                   /* "" : none */
    char scope[ONCE_SCOPE_MAX + 1];
    uint64_t tolerance_ms;
    uint64_t lease_ms;
    uint32_t max_attempts;
    uint64_t upstream_timeout_ms;
    uint64_t retry_after_ms;
    uint32_t timeout_ms; /* per cluster call */
    size_t max_body;
    unsigned threads;
    unsigned max_connections;
    int log_level;           /* enum log_level */
    enum ingress_mode mode;  /* --mode: webhook (default) */
    struct idem_config idem; /* --mode idempotency-key's flags */
    bool idem_flags;         /* one of them was given */
};

/* Defaults, then argv. 0, 1 for --help (text on stdout), or
 * INGRESS_E_CONFIG with a message naming the flag. */
int ingress_config_parse(struct ingress_config *c,
                         int argc,
                         char **argv,
                         char *msg);
const char *ingress_usage(void);

/* A verifier with the secrets of @c's file and/or environment variable
 * (one secret per line or per whitespace-separated word; '#' lines are
 * comments). 0 or INGRESS_E_SECRETS with a message that names the file
 * and line, never the secret. */
int ingress_load_secrets(const struct ingress_config *c,
                         once_verifier **out,
                         char *msg);
/* The same from text (what the file held), for tests. */
int ingress_parse_secrets(enum once_scheme scheme,
                          const char *text,
                          size_t len,
                          const char *origin,
                          once_verifier *v,
                          char *msg);

/* ------------------------------------------------------------------------
 * Decisions (decide.c): pure
 * ---------------------------------------------------------------------- */

/* What the upstream did with one delivery. */
enum upstream_class {
    UPSTREAM_OK = 1,        /* 2xx */
    UPSTREAM_TERMINAL = 2,  /* 4xx but 408 and 429: this message is refused */
    UPSTREAM_RETRYABLE = 3, /* 5xx, 408, 429, any other code, no answer */
};
enum upstream_class ingress_upstream_class(long http_status);

/* The stored result of a completed message: the upstream's status,
 * content type and body (cut to fit ONCE_RESULT_MAX). */
#define INGRESS_CTYPE_MAX 128
size_t ingress_result_encode(long status,
                             const char *ctype,
                             const uint8_t *body,
                             size_t body_len,
                             uint8_t *out,
                             size_t cap);
/* false if @in is not such an encoding. The outputs point into @in
 * (@ctype is copied). */
bool ingress_result_decode(const uint8_t *in,
                           size_t len,
                           long *status,
                           char ctype[INGRESS_CTYPE_MAX + 1],
                           const uint8_t **body,
                           size_t *body_len);

/* The answer to a sender. */
struct ingress_answer
{
    unsigned http;        /* 200, 400, 401, 409, 422, 500, 503 */
    const char *outcome;  /* Once-Outcome header: "accepted", ... */
    uint64_t retry_after; /* seconds; 0: no Retry-After */
};

/* The answer to an outcome that needs no upstream call (every outcome
 * but ACCEPTED); @retry_after_ms from the claim (IN_PROGRESS). */
struct ingress_answer ingress_answer_for(enum once_vc_outcome o,
                                         uint64_t retry_after_ms,
                                         uint64_t unavailable_ms);

/* ------------------------------------------------------------------------
 * Upstream (upstream.c): one POST, blocking, on the calling thread's curl
 * handle.
 * ---------------------------------------------------------------------- */

#define INGRESS_UPSTREAM_BODY_MAX (ONCE_RESULT_MAX - 256)

struct upstream_reply
{
    long status; /* 0: no HTTP answer */
    char ctype[INGRESS_CTYPE_MAX + 1];
    uint8_t *body; /* malloc'd, at most INGRESS_UPSTREAM_BODY_MAX kept */
    size_t body_len;
    bool truncated;
    char error[256]; /* when status is 0 */
    /* ingress_upstream_call only: */
    size_t cap;         /* bytes of body kept (0: INGRESS_UPSTREAM_BODY_MAX) */
    char *headers;      /* malloc'd "Name: value\n" lines, or NULL */
    size_t headers_len; /* at most 16 KiB kept */
    bool headers_over;  /* more were sent than kept */
};

struct upstream_request
{
    const char *url;
    const uint8_t *body;
    size_t body_len;
    const char *const *headers; /* "Name: value" lines, NULL-ended */
    uint64_t timeout_ms;
};

void *ingress_upstream_new(void);
void ingress_upstream_free(void *h);
/* 0 (an HTTP answer, any status) or INGRESS_E_UPSTREAM (reply->error). */
int ingress_upstream_post(void *h,
                          const struct upstream_request *rq,
                          struct upstream_reply *reply);
void ingress_upstream_reply_clear(struct upstream_reply *r);

/* ------------------------------------------------------------------------
 * Metrics (metrics.c): lock-free counters, any thread.
 * ---------------------------------------------------------------------- */

#define INGRESS_LAT_BUCKETS 12

struct ingress_metrics
{
    atomic_uint_fast64_t outcome[ONCE_VC_REFUSED + 1];
    atomic_uint_fast64_t http[6]; /* 2xx .. 5xx, by class; [0]: other */
    atomic_uint_fast64_t upstream_ok, upstream_terminal, upstream_retryable;
    atomic_uint_fast64_t completes_failed, releases_failed;
    atomic_uint_fast64_t too_large, reloads_ok, reloads_failed;
    atomic_uint_fast64_t lat_bucket[INGRESS_LAT_BUCKETS + 1];
    atomic_uint_fast64_t lat_sum_us, lat_count;
    atomic_uint_fast64_t secrets;
    /* --mode idempotency-key */
    atomic_uint_fast64_t idem_forwarded, idem_replays, idem_conflicts;
    atomic_uint_fast64_t idem_in_flight, idem_waits, idem_upstream_failures;
    atomic_uint_fast64_t idem_stored_bytes, idem_stored, idem_not_stored;
    atomic_uint_fast64_t idem_not_recorded, idem_pass_through;
    atomic_uint_fast64_t idem_bad_request, idem_unavailable;
};

void ingress_metrics_answer(struct ingress_metrics *m,
                            unsigned http,
                            uint64_t elapsed_us);
/* The Prometheus text exposition of @m into @buf; returns its length
 * (cut at @cap). */
size_t ingress_metrics_text(struct ingress_metrics *m, char *buf, size_t cap);

/* ------------------------------------------------------------------------
 * The keyring: the verifier in force, swapped whole on reload.
 * ---------------------------------------------------------------------- */

struct keyset
{
    once_verifier *v; /* owned */
    uint64_t refs;    /* the ring's own, and each reader's */
};

struct keyring
{
    pthread_mutex_t mu;
    struct keyset *cur;
};

/* ------------------------------------------------------------------------
 * The pipeline (pipeline.c) and the server (server.c)
 * ---------------------------------------------------------------------- */

struct ingress
{
    struct ingress_config cfg;
    struct keyring keys;
    struct ingress_metrics metrics;
    char execution_id[ONCE_EXECUTION_ID_MAX + 1];
    void *http_main; /* struct MHD_Daemon * */
    void *http_ops;  /* on --http-addr, or NULL */
    pthread_key_t worker_key;
    char *tls_pem[3]; /* --mode idempotency-key: cert, key, client CA */
};

/* One thread's resources: its cluster client and its upstream handle. */
struct ingress_worker
{
    once_client *client;
    void *upstream;
};

/* One received POST, borrowed for the call. */
struct ingress_request
{
    struct once_webhook w;
    const char *ctype; /* Content-Type, or NULL */
};

/* The answer; body malloc'd or NULL. */
struct ingress_response
{
    struct ingress_answer a;
    long upstream_status; /* 0: none */
    char ctype[INGRESS_CTYPE_MAX + 1];
    uint8_t *body;
    size_t body_len;
};

void ingress_handle(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct ingress_request *rq,
                    struct ingress_response *out);
void ingress_response_clear(struct ingress_response *r);

/* The verifier in force: readers take a reference for one request
 * (keyring_get / keyring_put); a reload swaps in a new one, and the old
 * one is freed when its last reader lets go. 0 or -ENOMEM. */
int keyring_init(struct keyring *k, once_verifier *v);
int keyring_swap(struct keyring *k, once_verifier *v);
struct keyset *keyring_get(struct keyring *k);
void keyring_put(struct keyring *k, struct keyset *ks);
void keyring_destroy(struct keyring *k);

/* Start the listeners (0 or INGRESS_E_LISTEN / INGRESS_E_NOMEM). */
int ingress_server_start(struct ingress *g, char *msg);
void ingress_server_stop(struct ingress *g);

/* ------------------------------------------------------------------------
 * --mode idempotency-key (idem.h): the upstream call of any method
 * (upstream.c), one request (idem_pipeline.c), its HTTP side
 * (idem_server.c)
 * ---------------------------------------------------------------------- */

struct upstream_call
{
    const char *method; /* a token */
    const char *url;
    const uint8_t *body;
    size_t body_len;
    const char *const *headers; /* "Name: value" lines, NULL-ended */
    uint64_t timeout_ms;
    size_t body_cap; /* reply bytes kept; past it reply->truncated */
};

/* 0 (an HTTP answer, any status; reply->headers holds its header lines)
 * or INGRESS_E_UPSTREAM (reply->error). */
int ingress_upstream_call(void *h,
                          const struct upstream_call *rq,
                          struct upstream_reply *reply);

/* The answer to one request; headers and body malloc'd (or NULL). */
struct idem_response
{
    unsigned status;
    const char *outcome;  /* Once-Outcome */
    bool replayed;        /* Idempotent-Replayed: true */
    uint64_t retry_after; /* seconds; 0: no Retry-After */
    char *headers;        /* "Name: value\n" lines */
    size_t headers_len;
    uint8_t *body;
    size_t body_len;
};

/* @cert_scope: the verified client certificate's CN, or NULL. */
void idem_handle(struct ingress *g,
                 struct ingress_worker *wk,
                 const struct idem_http_request *rq,
                 const char *cert_scope,
                 struct idem_response *out);
void idem_response_clear(struct idem_response *r);
/* A problem answer (application/problem+json) into @out. */
void idem_answer_problem(struct idem_response *out,
                         unsigned status,
                         const char *outcome,
                         const char *title,
                         const char *detail);

struct MHD_Connection;
/* server.c's hooks into the mode: one whole request read (@body, @len
 * borrowed); @wk NULL if the thread has no resources. MHD_YES/MHD_NO. */
int idem_serve(struct ingress *g,
               struct ingress_worker *wk,
               struct MHD_Connection *conn,
               const char *method,
               const char *url,
               const uint8_t *body,
               size_t len);
/* A body over --max-body: 413. */
int idem_too_large(struct ingress *g, struct MHD_Connection *conn);
/* MHD's unescape callback: the mode forwards the path and query as they
 * came; the webhook mode keeps libmicrohttpd's decoding. */
size_t ingress_unescape(void *cls, struct MHD_Connection *conn, char *s);

/* TLS on --listen (--tls-cert, --tls-key, --tls-client-ca): the PEM files
 * read into g->tls_pem at start (0 or INGRESS_E_CONFIG with a message),
 * freed at the end; the daemon's extra flags and options (@items, 4,
 * ended by MHD_OPTION_END; none unless @main and TLS is configured). */
int idem_tls_load(struct ingress *g, char *msg);
void idem_tls_free(struct ingress *g);
struct MHD_OptionItem;
unsigned idem_tls_options(const struct ingress *g,
                          bool main,
                          struct MHD_OptionItem *items);

#endif /* ONCE_INGRESS_INGRESS_H_ */
