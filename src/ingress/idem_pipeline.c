/* ingress/idem_pipeline.c: one request of --mode idempotency-key through
 * parse, claim, forward, and complete or release (ingress.h, idem.h).
 *
 * The order keeps the guarantees: nothing covered is forwarded without an
 * ACCEPTED claim (fail closed, unless --pass-through-unavailable); the
 * owner's answer is built from the very encoding it completed, so the first
 * answer and every replay are the same bytes; a failed upstream call is
 * released (the next retry is forwarded again, Once-Attempt + 1) until
 * --max-attempts, when the failure itself is completed as the answer; the
 * owner token fences a complete after a takeover (NOT_OWNER: not stored). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "ingress/ingress.h"

#define WAIT_STEP_MIN_MS 20
#define WAIT_STEP_MAX_MS 250

static void bump(atomic_uint_fast64_t *a, uint64_t n)
{
    atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

static uint64_t ceil_s(uint64_t ms)
{
    return ms == 0 ? 1 : (ms + 999) / 1000;
}

void idem_response_clear(struct idem_response *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static bool add_header(struct idem_response *out,
                       const char *name,
                       size_t nlen,
                       const char *value,
                       size_t vlen)
{
    char *h = realloc(out->headers, out->headers_len + nlen + vlen + 3);

    if (h == NULL) {
        return false;
    }
    out->headers = h;
    memcpy(h + out->headers_len, name, nlen);
    memcpy(h + out->headers_len + nlen, ": ", 2);
    memcpy(h + out->headers_len + nlen + 2, value, vlen);
    h[out->headers_len + nlen + 2 + vlen] = '\n';
    out->headers_len += nlen + vlen + 3;
    return true;
}

void idem_answer_problem(struct idem_response *out,
                         unsigned status,
                         const char *outcome,
                         const char *title,
                         const char *detail)
{
    static const char ct[] = "application/problem+json";
    char buf[2048];
    size_t n = idem_problem(status, title, detail, buf, sizeof buf);

    idem_response_clear(out);
    out->status = status;
    out->outcome = outcome;
    out->body = malloc(n > 0 ? n : 1);
    if (out->body != NULL) {
        memcpy(out->body, buf, n);
        out->body_len = n;
    }
    add_header(out, "Content-Type", 12, ct, sizeof ct - 1);
}

/* The stored response @enc as the answer: status, its headers, its body;
 * a dropped body (over --max-response) as the 502 that says so. */
static void answer_stored(struct idem_response *out,
                          const uint8_t *enc,
                          size_t len,
                          const char *outcome,
                          bool replayed)
{
    struct idem_stored s;

    if (!idem_store_decode(enc, len, &s)) {
        idem_answer_problem(out, 502, "not_ours", "Bad Gateway",
                            "this key was completed by another client of the "
                            "cluster; its result is not a stored response");
        out->replayed = replayed;
        return;
    }
    if (s.flags & IDEM_STORE_BODY_DROPPED) {
        char d[256];

        snprintf(d, sizeof d,
                 "the request was processed (upstream status %u) but its "
                 "response was over the proxy's --max-response and is not "
                 "stored",
                 s.status);
        idem_answer_problem(out, 502, "not_stored", "Bad Gateway", d);
        out->replayed = replayed;
        return;
    }
    idem_response_clear(out);
    out->status = s.status;
    out->outcome = outcome;
    out->replayed = replayed;
    for (size_t i = 0; i < s.n_headers; i++) {
        add_header(out, s.headers[i].name, s.headers[i].name_len,
                   s.headers[i].value, s.headers[i].value_len);
    }
    out->body = malloc(s.body_len > 0 ? s.body_len : 1);
    if (out->body != NULL) {
        memcpy(out->body, s.body, s.body_len);
        out->body_len = s.body_len;
    }
}

/* ------------------------------------------------------------------------
 * The upstream call
 * ---------------------------------------------------------------------- */

static bool forwardable(const struct idem_header *x)
{
    return !idem_hop_header(x->name, x->name_len) &&
           !(x->name_len == 12 &&
             strncasecmp(x->name, "Once-Attempt", 12) == 0);
}

/* The client's headers but the hop-by-hop ones, then Once-Attempt, as
 * "Name: value" lines: the array and the lines in one allocation. */
static const char **upstream_headers(const struct idem_http_request *rq,
                                     uint32_t attempt)
{
    size_t bytes = (rq->n_headers + 3) * sizeof(char *) + 48;
    const char **h;
    char *p;
    size_t n = 0;

    for (size_t i = 0; i < rq->n_headers; i++) {
        bytes += rq->headers[i].name_len + rq->headers[i].value_len + 3;
    }
    h = malloc(bytes);
    if (h == NULL) {
        return NULL;
    }
    p = (char *)(h + rq->n_headers + 3);
    for (size_t i = 0; i < rq->n_headers; i++) {
        const struct idem_header *x = &rq->headers[i];

        if (forwardable(x)) {
            h[n++] = p;
            memcpy(p, x->name, x->name_len);
            memcpy(p + x->name_len, ": ", 2);
            memcpy(p + x->name_len + 2, x->value, x->value_len);
            p += x->name_len + 2 + x->value_len;
            *p++ = '\0';
        }
    }
    if (attempt > 0) {
        snprintf(p, 48, "Once-Attempt: %u", attempt);
        h[n++] = p;
    }
    h[n++] = "Expect:"; /* no 100-continue round trip */
    h[n] = NULL;
    return h;
}

static int call_upstream(struct ingress *g,
                         struct ingress_worker *wk,
                         const struct idem_http_request *rq,
                         uint32_t attempt,
                         size_t body_cap,
                         struct upstream_reply *reply)
{
    size_t base = strlen(g->cfg.upstream);
    size_t plen = strlen(rq->path);
    size_t qlen = rq->query != NULL ? strlen(rq->query) : 0;
    char *url;
    const char **hdrs;
    struct upstream_call up;
    int rv;

    while (base > 0 && g->cfg.upstream[base - 1] == '/') {
        base--;
    }
    url = malloc(base + plen + qlen + 2);
    hdrs = upstream_headers(rq, attempt);
    if (url == NULL || hdrs == NULL) {
        free(url);
        free(hdrs);
        memset(reply, 0, sizeof *reply);
        snprintf(reply->error, sizeof reply->error, "out of memory");
        return INGRESS_E_UPSTREAM;
    }
    memcpy(url, g->cfg.upstream, base);
    memcpy(url + base, rq->path, plen + 1);
    if (rq->query != NULL) {
        url[base + plen] = '?';
        memcpy(url + base + plen + 1, rq->query, qlen + 1);
    }
    up = (struct upstream_call){rq->method,   url,  rq->body,
                                rq->body_len, hdrs, g->cfg.upstream_timeout_ms,
                                body_cap};
    rv = ingress_upstream_call(wk->upstream, &up, reply);
    free(hdrs);
    free(url);
    return rv;
}

/* Not covered (or the cluster is down and the operator chose to pass):
 * the upstream's answer as it is, headers but the hop-by-hop ones; its
 * body up to INGRESS_BODY_MAX_MAX (16 MiB, then 502), since nothing of it
 * is stored. */
static void pass_through(struct ingress *g,
                         struct ingress_worker *wk,
                         const struct idem_http_request *rq,
                         const char *outcome,
                         struct idem_response *out)
{
    struct upstream_reply reply;
    const char *p;
    const char *end;

    bump(&g->metrics.idem_pass_through, 1);
    if (call_upstream(g, wk, rq, 0, INGRESS_BODY_MAX_MAX, &reply) != 0 ||
        reply.truncated) {
        idem_answer_problem(out, 502, outcome, "Bad Gateway",
                            reply.status == 0
                                ? "the upstream did not answer"
                                : "the upstream's answer was too large");
        ingress_upstream_reply_clear(&reply);
        return;
    }
    idem_response_clear(out);
    out->status = (unsigned)reply.status;
    out->outcome = outcome;
    p = reply.headers;
    end = p != NULL ? p + reply.headers_len : p;
    while (p != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)(nl - p));

        /* Date is the proxy's own (libmicrohttpd adds it). */
        if (colon != NULL && !idem_hop_header(p, (size_t)(colon - p)) &&
            !(colon - p == 4 && strncasecmp(p, "Date", 4) == 0)) {
            const char *v = colon + 1;

            while (v < nl && *v == ' ') {
                v++;
            }
            add_header(out, p, (size_t)(colon - p), v, (size_t)(nl - v));
        }
        p = nl + 1;
    }
    out->body = reply.body;
    out->body_len = reply.body_len;
    reply.body = NULL;
    ingress_upstream_reply_clear(&reply);
}

/* ------------------------------------------------------------------------
 * Owner: forward, then complete or release
 * ---------------------------------------------------------------------- */

static bool complete(struct ingress *g,
                     struct ingress_worker *wk,
                     const struct idem_parsed *p,
                     const struct once_result *claim,
                     const uint8_t *enc,
                     size_t len)
{
    struct once_complete c = {0};
    struct once_result r;
    bool ok;

    once_result_init(&r);
    c.scope = (const uint8_t *)p->scope;
    c.scope_len = p->scope_len;
    c.key = (const uint8_t *)p->key;
    c.key_len = p->key_len;
    c.owner_token = claim->owner_token;
    c.result = enc;
    c.result_len = len;
    c.timeout_ms = g->cfg.timeout_ms;
    ok = once_complete(wk->client, &c, &r) == ONCE_STATUS_OK &&
         r.outcome == ONCE_COMPLETED;
    if (!ok) {
        char q[ONCE_ERROR_MAX + 8];

        bump(&g->metrics.completes_failed, 1);
        log_kv(LOG_WARN,
               r.outcome == ONCE_NOT_OWNER
                   ? "complete fenced: the lease ended and another owner took "
                     "over; the response is not stored"
                   : "complete failed; the response is not stored",
               "status=%s outcome=%s error=%s", once_status_name(r.status),
               once_outcome_name(r.outcome), log_quote(r.error, q, sizeof q));
    }
    once_result_clear(&r);
    return ok;
}

static void release(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct idem_parsed *p,
                    const struct once_result *claim)
{
    struct once_release rl = {0};
    struct once_result r;

    once_result_init(&r);
    rl.scope = (const uint8_t *)p->scope;
    rl.scope_len = p->scope_len;
    rl.key = (const uint8_t *)p->key;
    rl.key_len = p->key_len;
    rl.owner_token = claim->owner_token;
    rl.timeout_ms = g->cfg.timeout_ms;
    if (once_release(wk->client, &rl, &r) != ONCE_STATUS_OK ||
        r.outcome != ONCE_RELEASED) {
        char q[ONCE_ERROR_MAX + 8];

        bump(&g->metrics.releases_failed, 1);
        log_kv(LOG_WARN,
               r.outcome == ONCE_NOT_OWNER
                   ? "release fenced: the lease ended and another owner took "
                     "over"
                   : "release failed; the lease will free the key",
               "status=%s outcome=%s error=%s", once_status_name(r.status),
               once_outcome_name(r.outcome), log_quote(r.error, q, sizeof q));
    }
    once_result_clear(&r);
}

/* What the owner stores: the upstream's answer, its body dropped when over
 * --max-response or its headers over the encoding's bounds; or, for an
 * upstream that did not answer, a 502 problem. 0 if it cannot be encoded. */
static size_t encode_reply(struct ingress *g,
                           const struct upstream_reply *reply,
                           uint32_t attempt,
                           uint8_t *enc)
{
    struct idem_stored s = {0};
    char buf[512];
    char d[256];

    if (reply->status == 0) {
        snprintf(d, sizeof d, "the upstream did not answer (attempt %u of %u)",
                 attempt, g->cfg.max_attempts);
        s.status = 502;
        s.headers[0] = (struct idem_header){"Content-Type", 12,
                                            "application/problem+json", 24};
        s.n_headers = 1;
        s.body = (const uint8_t *)buf;
        s.body_len = idem_problem(502, "Bad Gateway", d, buf, sizeof buf);
        return idem_store_encode(&s, enc, ONCE_RESULT_MAX);
    }
    s.status = (unsigned)reply->status;
    if (reply->truncated || reply->headers_over ||
        !idem_store_pick_headers(&g->cfg.idem.store_headers, reply->headers,
                                 reply->headers_len, &s)) {
        s.flags = IDEM_STORE_BODY_DROPPED;
        s.n_headers = 0;
    } else {
        s.body = reply->body;
        s.body_len = reply->body_len;
    }
    return idem_store_encode(&s, enc, ONCE_RESULT_MAX);
}

static bool is_failure(struct ingress *g, long status)
{
    return status < 100 || status > 599 || g->cfg.idem.fail_status[status];
}

static void forward(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct idem_http_request *rq,
                    const struct idem_parsed *p,
                    const struct once_result *claim,
                    struct idem_response *out)
{
    struct upstream_reply reply;
    uint8_t *enc = malloc(ONCE_RESULT_MAX);
    size_t len = 0;
    bool failed;
    bool final;

    bump(&g->metrics.idem_forwarded, 1);
    call_upstream(g, wk, rq, claim->owner_attempt, g->cfg.idem.max_response,
                  &reply);
    failed = is_failure(g, reply.status);
    final = !failed || claim->owner_attempt >= g->cfg.max_attempts;
    if (failed) {
        char q[sizeof reply.error + 8];

        bump(&g->metrics.idem_upstream_failures, 1);
        log_kv(LOG_INFO, "upstream failed", "attempt=%u status=%ld error=%s",
               claim->owner_attempt, reply.status,
               log_quote(reply.error, q, sizeof q));
    }
    if (enc != NULL) {
        len = encode_reply(g, &reply, claim->owner_attempt, enc);
    }
    if (len == 0) {
        /* Cannot happen within the bounds; the key is freed for a retry. */
        release(g, wk, p, claim);
        idem_answer_problem(out, 500, "error", "Internal Server Error",
                            "the response could not be encoded");
    } else if (!final) {
        release(g, wk, p, claim);
        answer_stored(out, enc, len, "upstream_failed", false);
        out->outcome = "upstream_failed"; /* also when its body was dropped */
        out->retry_after = ceil_s(g->cfg.retry_after_ms);
    } else if (complete(g, wk, p, claim, enc, len)) {
        struct idem_stored s;

        bump(&g->metrics.idem_stored, 1);
        bump(&g->metrics.idem_stored_bytes, len);
        if (idem_store_decode(enc, len, &s) &&
            (s.flags & IDEM_STORE_BODY_DROPPED)) {
            bump(&g->metrics.idem_not_stored, 1);
        }
        answer_stored(out, enc, len, failed ? "failed" : "forwarded", false);
    } else {
        bump(&g->metrics.idem_not_recorded, 1);
        idem_answer_problem(out, 503, "not_recorded", "Service Unavailable",
                            "the request was processed but its response "
                            "could not be recorded; retry later for the "
                            "recorded answer");
        out->retry_after = ceil_s(g->cfg.lease_ms);
    }
    free(enc);
    ingress_upstream_reply_clear(&reply);
}

/* ------------------------------------------------------------------------
 * The claim, and --wait
 * ---------------------------------------------------------------------- */

static int claim(struct ingress *g,
                 struct ingress_worker *wk,
                 const struct idem_parsed *p,
                 struct once_result *r)
{
    struct once_claim a = {0};

    a.scope = (const uint8_t *)p->scope;
    a.scope_len = p->scope_len;
    a.key = (const uint8_t *)p->key;
    a.key_len = p->key_len;
    a.kind = ONCE_IDEMPOTENT;
    a.execution_id = (const uint8_t *)g->execution_id;
    a.execution_id_len = strlen(g->execution_id);
    a.ttl_ms = g->cfg.idem.retention_ms;
    a.payload_hash = p->fingerprint;
    a.payload_hash_len = IDEM_FINGERPRINT_LEN;
    a.lease_ms = g->cfg.lease_ms;
    a.timeout_ms = g->cfg.timeout_ms;
    return once_claim(wk->client, &a, r);
}

/* Waits (lookups, which record nothing) until the key is no longer held
 * by a live lease or @deadline passes; true if a new claim may decide. */
static bool wait_settled(struct ingress *g,
                         struct ingress_worker *wk,
                         const struct idem_parsed *p,
                         uint64_t deadline)
{
    uint64_t step = WAIT_STEP_MIN_MS;

    for (;;) {
        struct once_result r;
        uint64_t now = mono_ms();
        bool held;

        if (now >= deadline) {
            return false;
        }
        sleep_ms(step < deadline - now ? step : deadline - now);
        step = step * 2 < WAIT_STEP_MAX_MS ? step * 2 : WAIT_STEP_MAX_MS;
        once_result_init(&r);
        held = once_lookup(wk->client, (const uint8_t *)p->scope, p->scope_len,
                           (const uint8_t *)p->key, p->key_len,
                           g->cfg.timeout_ms, &r) == ONCE_STATUS_OK &&
               r.outcome == ONCE_FOUND && r.state == ONCE_STATE_PENDING &&
               r.lease_expires_ms > r.log_time_ms;
        once_result_clear(&r);
        if (!held) {
            return true;
        }
    }
}

static void unavailable(struct ingress *g,
                        struct ingress_worker *wk,
                        const struct idem_http_request *rq,
                        const struct once_result *r,
                        struct idem_response *out)
{
    char q[ONCE_ERROR_MAX + 8];

    bump(&g->metrics.idem_unavailable, 1);
    log_kv(LOG_WARN, "claim got no decision", "status=%s error=%s",
           once_status_name(r->status), log_quote(r->error, q, sizeof q));
    if (g->cfg.idem.fail_open) {
        pass_through(g, wk, rq, "unclaimed", out);
        return;
    }
    idem_answer_problem(out, 503, "unavailable", "Service Unavailable",
                        "the cluster gave no decision; nothing was forwarded");
    out->retry_after = 1;
}

/* One decision of the cluster; false to claim again (--wait). */
static bool decided(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct idem_http_request *rq,
                    const struct idem_parsed *p,
                    const struct once_result *r,
                    uint64_t deadline,
                    struct idem_response *out)
{
    switch (r->outcome) {
        case ONCE_ACCEPTED:
            forward(g, wk, rq, p, r, out);
            return true;
        case ONCE_DUPLICATE:
            bump(&g->metrics.idem_replays, 1);
            answer_stored(out, r->result, r->result_len, "replayed", true);
            return true;
        case ONCE_CONFLICT:
            bump(&g->metrics.idem_conflicts, 1);
            idem_answer_problem(out, 422, "conflict", "Unprocessable Content",
                                "this idempotency key was used with another "
                                "request (method, path, query, body or "
                                "fingerprinted headers differ)");
            return true;
        case ONCE_IN_PROGRESS:
            if (mono_ms() < deadline) {
                bump(&g->metrics.idem_waits, 1);
                if (wait_settled(g, wk, p, deadline)) {
                    return false;
                }
            }
            bump(&g->metrics.idem_in_flight, 1);
            idem_answer_problem(out, 409, "in_flight", "Conflict",
                                "a request with this idempotency key is "
                                "being processed; retry after Retry-After");
            out->retry_after = ceil_s(r->retry_after_ms);
            return true;
        case ONCE_FAILED:
            idem_answer_problem(out, 502, "failed", "Bad Gateway",
                                r->stored_error);
            out->replayed = true;
            return true;
        case ONCE_OUT_OF_SPACE:
            idem_answer_problem(out, 503, "out_of_space", "Service Unavailable",
                                "the cluster holds no room for a new key");
            out->retry_after = ceil_s(g->cfg.retry_after_ms);
            return true;
        default: {
            char q[ONCE_ERROR_MAX + 8];

            log_kv(LOG_WARN, "claim refused", "outcome=%s error=%s",
                   once_outcome_name(r->outcome),
                   log_quote(r->error, q, sizeof q));
            idem_answer_problem(out, 500, "refused", "Internal Server Error",
                                "the cluster refused this proxy's claim "
                                "(see its log: --retention or --lease over "
                                "the cluster's bounds?)");
            return true;
        }
    }
}

void idem_handle(struct ingress *g,
                 struct ingress_worker *wk,
                 const struct idem_http_request *rq,
                 const char *cert_scope,
                 struct idem_response *out)
{
    struct idem_parsed p;
    uint64_t deadline = mono_ms() + g->cfg.idem.wait_ms;

    memset(out, 0, sizeof *out);
    idem_parse(&g->cfg.idem,
               g->cfg.idem.scope_from_cert ? cert_scope : g->cfg.scope, rq, &p);
    if (p.route == IDEM_PASS) {
        pass_through(g, wk, rq, "pass_through", out);
        return;
    }
    if (p.route == IDEM_REFUSE) {
        bump(&g->metrics.idem_bad_request, 1);
        idem_answer_problem(out, p.status, "bad_request",
                            p.status == 400   ? "Bad Request"
                            : p.status == 403 ? "Forbidden"
                                              : "Internal Server Error",
                            p.reason);
        return;
    }
    for (;;) {
        struct once_result r;
        bool done;

        once_result_init(&r);
        if (claim(g, wk, &p, &r) != ONCE_STATUS_OK) {
            unavailable(g, wk, rq, &r, out);
            once_result_clear(&r);
            return;
        }
        done = decided(g, wk, rq, &p, &r, deadline, out);
        once_result_clear(&r);
        if (done) {
            return;
        }
    }
}
