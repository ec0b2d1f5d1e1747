/* ingress/idem.h: once-ingress --mode idempotency-key, a reverse proxy that
 * makes any HTTP API idempotent by its Idempotency-Key header
 * (draft-ietf-httpapi-idempotency-key-header; docs/ingress.md).
 *
 * For each covered request (a method of --methods with the key header):
 * parse and fingerprint it (idem_request.c) -> claim (scope, key)
 * IDEMPOTENT with payload_hash = the fingerprint, ttl = --retention ->
 * forward once as the record's owner (idem_pipeline.c) -> complete the
 * record with the encoded response (idem_store.c), or release it when the
 * upstream failed -> answer. Every later request with the key replays the
 * stored response; the cluster alone decides who forwards.
 *
 * This header holds the mode's configuration and its pure parts (no I/O,
 * no clocks): the request parser and the stored response's encoding, both
 * fuzzed (tests/fuzz/fuzz_idem_request.c, fuzz_idem_store.c). The parts
 * that need the proxy's state are declared at the end of ingress.h. */
#ifndef ONCE_INGRESS_IDEM_H_
#define ONCE_INGRESS_IDEM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "once.h"

#define IDEM_KEY_MAX   255 /* bytes of a key, the draft's bound */
#define IDEM_NAME_MAX  64  /* bytes of a header name or method in a flag */
#define IDEM_NAMES_MAX 16  /* names in one list flag */
/* The stored response: its headers take at most IDEM_STORED_HEADERS_MAX
 * bytes and IDEM_STORED_ENTRIES_MAX entries, so --max-response can have
 * the rest of the record's result (ONCE_RESULT_MAX). */
#define IDEM_STORED_HEADERS_MAX 4096
#define IDEM_STORED_ENTRIES_MAX 32
#define IDEM_ENC_OVERHEAD       16 /* magic, flags, status, lengths */
#define IDEM_RESPONSE_MAX \
    (ONCE_RESULT_MAX - IDEM_STORED_HEADERS_MAX - IDEM_ENC_OVERHEAD)
#define IDEM_FINGERPRINT_LEN 32    /* SHA-256 */
#define IDEM_PATH_MAX        4096  /* a file flag's value */
#define IDEM_PEM_MAX         65536 /* bytes of one PEM file */

enum ingress_mode {
    INGRESS_MODE_WEBHOOK = 0, /* the default */
    INGRESS_MODE_IDEM = 1,
};

/* A list of names (methods or header names), each 1..IDEM_NAME_MAX bytes
 * of token characters. */
struct idem_names
{
    size_t n;
    char name[IDEM_NAMES_MAX][IDEM_NAME_MAX + 1];
};

struct idem_config
{
    char key_header[IDEM_NAME_MAX + 1];    /* default Idempotency-Key */
    char scope_header[IDEM_NAME_MAX + 1];  /* "": --scope for every request */
    struct idem_names methods;             /* default POST, PATCH */
    struct idem_names store_headers;       /* default Content-Type, Location */
    struct idem_names fingerprint_headers; /* default none */
    bool require_key;
    bool fail_open;        /* cluster unavailable: forward unclaimed */
    uint64_t retention_ms; /* the record's ttl: default 24h */
    uint64_t wait_ms;      /* 0: a request in flight is 409 at once */
    size_t max_response;   /* 1..IDEM_RESPONSE_MAX */
    /* Upstream statuses that count as failures (release, retry); an
     * upstream that gives no answer always counts. Default 5xx. */
    bool fail_status[600];
    /* TLS on --listen (libmicrohttpd over GnuTLS): "" for plain HTTP. */
    char tls_cert[IDEM_PATH_MAX + 1];
    char tls_key[IDEM_PATH_MAX + 1];
    char tls_client_ca[IDEM_PATH_MAX + 1]; /* "": no client certificates */
    bool scope_from_cert; /* the scope is the client certificate's CN */
};

/* Defaults of the mode's flags. */
void idem_config_defaults(struct idem_config *c);
/* One of the mode's flags: 1 applied, 0 not one of its names, -1 its
 * value refused. */
int idem_config_apply(struct idem_config *c, const char *name, const char *v);
/* The mode's flags, for --help and the parser's list of names. */
extern const char *const idem_flag_names[];
extern const size_t idem_flag_count;
/* The mode's part of --help. */
const char *idem_usage(void);

/* ------------------------------------------------------------------------
 * Requests (idem_request.c): pure
 * ---------------------------------------------------------------------- */

struct idem_header
{
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* One received request, borrowed. @path starts with '/'; @query is the
 * raw text after '?', or NULL when there is none. */
struct idem_http_request
{
    const char *method;
    const char *path;
    const char *query;
    const struct idem_header *headers;
    size_t n_headers;
    const uint8_t *body;
    size_t body_len;
};

enum idem_route {
    IDEM_PASS = 1,   /* not covered: forward untouched, no claim */
    IDEM_CLAIM = 2,  /* covered, with a valid key */
    IDEM_REFUSE = 3, /* answer @status with @reason, forward nothing */
};

struct idem_parsed
{
    enum idem_route route;
    unsigned status;    /* IDEM_REFUSE: 400 */
    const char *reason; /* IDEM_REFUSE: a static sentence */
    char key[IDEM_KEY_MAX + 1];
    size_t key_len;
    char scope[ONCE_SCOPE_MAX + 1];
    size_t scope_len;
    uint8_t fingerprint[IDEM_FINGERPRINT_LEN];
};

/* Route @rq and, for a claim, decode its key (a bare token or a
 * Structured Fields string, 1..255 printable ASCII bytes), take its
 * scope (@default_scope, or the --scope-header's value; a NULL
 * @default_scope, with no --scope-header, refuses the request 403: the
 * client certificate that was to name it is missing) and compute its
 * fingerprint: SHA-256 over method, path, query, the
 * --fingerprint-headers and the body, each length-prefixed. */
void idem_parse(const struct idem_config *c,
                const char *default_scope,
                const struct idem_http_request *rq,
                struct idem_parsed *out);

/* Case-insensitive lookup of header @name in @rq: the number of times it
 * occurs, the first in *out. */
size_t idem_header_find(const struct idem_http_request *rq,
                        const char *name,
                        struct idem_header *out);
/* true if @name (@len bytes) is one of @l, case-insensitively. */
bool idem_names_has(const struct idem_names *l, const char *name, size_t len);
/* Headers a proxy never copies from one hop to the next (RFC 9110 7.6.1),
 * and those it sets itself (Host, Content-Length). */
bool idem_hop_header(const char *name, size_t len);

/* ------------------------------------------------------------------------
 * The stored response (idem_store.c): pure
 *
 *   "OIK1" flags:u8 status:u16 hlen:u16 { nlen:u8 name vlen:u16 value }*
 *   blen:u32 body                         (integers big-endian)
 *
 * flags bit 0: the body was over --max-response and is not stored (the
 * replay is a 502 problem that says so, with the upstream's status).
 * ---------------------------------------------------------------------- */

#define IDEM_STORE_BODY_DROPPED 0x01u

struct idem_stored
{
    unsigned status; /* 100..599 */
    unsigned flags;
    size_t n_headers;
    struct idem_header headers[IDEM_STORED_ENTRIES_MAX];
    const uint8_t *body;
    size_t body_len;
};

/* The encoding of @s into @out: its length, or 0 if it does not fit @cap
 * or breaks a bound above (too many or too long headers, a name that is
 * not a token, a value with CR, LF or NUL). */
size_t idem_store_encode(const struct idem_stored *s, uint8_t *out, size_t cap);
/* false if @in is not exactly such an encoding; the pointers in @s point
 * into @in. */
bool idem_store_decode(const uint8_t *in, size_t len, struct idem_stored *s);

/* Collect from @raw ("Name: value" lines, as upstream.c keeps them) the
 * headers named in @allow into @s. false if they break the bounds of the
 * encoding (then nothing may be stored). */
bool idem_store_pick_headers(const struct idem_names *allow,
                             const char *raw,
                             size_t raw_len,
                             struct idem_stored *s);

/* A problem body (RFC 9457, application/problem+json) into @buf: its
 * length. @detail is escaped. */
size_t idem_problem(unsigned status,
                    const char *title,
                    const char *detail,
                    char *buf,
                    size_t cap);

#endif /* ONCE_INGRESS_IDEM_H_ */
