/* ingress/pipeline.c: one webhook through verify, claim, forward, and
 * complete or release (ingress.h).
 *
 * The order keeps the guarantees: nothing is forwarded without an
 * ACCEPTED claim (fail closed), the answer is 200 only once COMPLETED is
 * durable, and a failed delivery is released (the sender's retry takes
 * over at once) or, after --max-attempts or an upstream 4xx, failed for
 * good, so one owner (the cluster) decides "this message failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/text.h"
#include "ingress/ingress.h"

/* ------------------------------------------------------------------------
 * Answers
 * ---------------------------------------------------------------------- */

void ingress_response_clear(struct ingress_response *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* A small JSON body for answers without an upstream body. */
static void json_body(struct ingress_response *out, const char *reason)
{
    char esc[ONCE_ERROR_MAX + 1];
    int n;

    text_json_escape(reason, esc, sizeof esc);
    free(out->body);
    out->body = malloc(sizeof esc + 64);
    if (out->body == NULL) {
        out->body_len = 0;
        return;
    }
    n = snprintf((char *)out->body, sizeof esc + 64,
                 "{\"outcome\":\"%s\",\"reason\":\"%s\"}\n", out->a.outcome,
                 esc);
    out->body_len = n > 0 ? (size_t)n : 0;
    snprintf(out->ctype, sizeof out->ctype, "application/json");
}

static void answer(struct ingress_response *out,
                   struct ingress_answer a,
                   const char *reason)
{
    out->a = a;
    json_body(out, reason);
}

/* DUPLICATE: the stored upstream answer, without calling the upstream. */
static void answer_stored(struct ingress_response *out,
                          const struct once_result *r)
{
    const uint8_t *body;
    size_t len;
    long status;

    out->a = ingress_answer_for(ONCE_VC_DUPLICATE, 0, 0);
    if (!ingress_result_decode(r->result, r->result_len, &status, out->ctype,
                               &body, &len)) {
        /* Completed by something other than once-ingress: it is still a
         * delivered message; say so without its bytes. */
        json_body(out, "completed before; the stored result is not ours");
        return;
    }
    out->upstream_status = status;
    out->body = malloc(len > 0 ? len : 1);
    if (out->body != NULL) {
        memcpy(out->body, body, len);
        out->body_len = len;
    }
}

/* ------------------------------------------------------------------------
 * Delivery
 * ---------------------------------------------------------------------- */

static int deliver(struct ingress *g,
                   struct ingress_worker *wk,
                   const struct ingress_request *rq,
                   const struct once_verified *ver,
                   const struct once_result *claim,
                   struct upstream_reply *reply)
{
    char h_ct[INGRESS_CTYPE_MAX + 32];
    char h_id[ONCE_KEY_MAX + 32];
    char h_att[48];
    char h_sig[ONCE_VERIFY_HEADER_MAX + 32];
    char h_ts[64];
    char h_wid[ONCE_KEY_MAX + 32];
    const char *headers[8];
    size_t n = 0;
    struct upstream_request up;

    snprintf(h_ct, sizeof h_ct, "Content-Type: %s",
             rq->ctype != NULL ? rq->ctype : "application/octet-stream");
    headers[n++] = h_ct;
    snprintf(h_id, sizeof h_id, "Once-Message-Id: %s", ver->id);
    headers[n++] = h_id;
    snprintf(h_att, sizeof h_att, "Once-Attempt: %u", claim->owner_attempt);
    headers[n++] = h_att;
    /* The signature headers go along: an upstream that verifies for
     * itself still can. */
    if (g->cfg.scheme == ONCE_SCHEME_STANDARD) {
        snprintf(h_wid, sizeof h_wid, "webhook-id: %s", ver->id);
        headers[n++] = h_wid;
        snprintf(h_ts, sizeof h_ts, "webhook-timestamp: %.*s",
                 (int)rq->w.timestamp_len, rq->w.timestamp);
        headers[n++] = h_ts;
        snprintf(h_sig, sizeof h_sig, "webhook-signature: %.*s",
                 (int)rq->w.signature_len, rq->w.signature);
        headers[n++] = h_sig;
    } else {
        snprintf(h_sig, sizeof h_sig, "Stripe-Signature: %.*s",
                 (int)rq->w.signature_len, rq->w.signature);
        headers[n++] = h_sig;
    }
    headers[n] = NULL;
    up = (struct upstream_request){g->cfg.upstream, rq->w.body, rq->w.body_len,
                                   headers, g->cfg.upstream_timeout_ms};
    return ingress_upstream_post(wk->upstream, &up, reply);
}

static void complete(struct ingress *g,
                     struct ingress_worker *wk,
                     const struct once_verified *ver,
                     const struct once_result *claim,
                     struct upstream_reply *reply,
                     struct ingress_response *out)
{
    uint8_t *res = malloc(ONCE_RESULT_MAX);
    struct once_complete c = {0};
    struct once_result r;
    char why[ONCE_ERROR_MAX + 64];

    once_result_init(&r);
    c.scope = (const uint8_t *)g->cfg.scope;
    c.scope_len = strlen(g->cfg.scope);
    c.key = (const uint8_t *)ver->id;
    c.key_len = ver->id_len;
    c.owner_token = claim->owner_token;
    c.timeout_ms = g->cfg.timeout_ms;
    if (res != NULL) {
        c.result = res;
        c.result_len =
            ingress_result_encode(reply->status, reply->ctype, reply->body,
                                  reply->body_len, res, ONCE_RESULT_MAX);
    }
    if (res != NULL && once_complete(wk->client, &c, &r) == ONCE_STATUS_OK &&
        r.outcome == ONCE_COMPLETED) {
        out->a = ingress_answer_for(ONCE_VC_ACCEPTED, 0, 0);
        out->upstream_status = reply->status;
        snprintf(out->ctype, sizeof out->ctype, "%s", reply->ctype);
        out->body = reply->body;
        out->body_len = reply->body_len;
        reply->body = NULL;
        reply->body_len = 0;
    } else {
        /* Delivered, but not recorded: the sender's retry will find the
         * message PENDING (409) until the lease ends, then deliver again.
         * That is the one window where the upstream sees it twice. */
        atomic_fetch_add_explicit(&g->metrics.completes_failed, 1,
                                  memory_order_relaxed);
        char q[ONCE_ERROR_MAX + 8];

        snprintf(why, sizeof why, "delivered but not recorded; retry later");
        log_kv(LOG_WARN, "complete failed", "upstream_status=%ld error=%s",
               reply->status,
               log_quote(r.status != ONCE_STATUS_OK ? r.error
                         : res == NULL              ? "out of memory"
                                       : once_outcome_name(r.outcome),
                         q, sizeof q));
        answer(out, ingress_answer_for(ONCE_VC_UNAVAILABLE, 0, g->cfg.lease_ms),
               why);
    }
    once_result_clear(&r);
    free(res);
}

static void release(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct once_verified *ver,
                    const struct once_result *claim,
                    bool terminal,
                    const char *error)
{
    struct once_release rl = {0};
    struct once_result r;

    once_result_init(&r);
    rl.scope = (const uint8_t *)g->cfg.scope;
    rl.scope_len = strlen(g->cfg.scope);
    rl.key = (const uint8_t *)ver->id;
    rl.key_len = ver->id_len;
    rl.owner_token = claim->owner_token;
    rl.terminal = terminal;
    if (terminal) { /* a plain release keeps no error */
        rl.error = (const uint8_t *)error;
        rl.error_len = strlen(error);
    }
    rl.timeout_ms = g->cfg.timeout_ms;
    if (once_release(wk->client, &rl, &r) != ONCE_STATUS_OK ||
        (r.outcome != ONCE_RELEASED && r.outcome != ONCE_FAILED)) {
        char q[ONCE_ERROR_MAX + 8];

        atomic_fetch_add_explicit(&g->metrics.releases_failed, 1,
                                  memory_order_relaxed);
        log_kv(LOG_WARN, "release failed; the lease will free the message",
               "status=%s outcome=%s error=%s", once_status_name(r.status),
               once_outcome_name(r.outcome), log_quote(r.error, q, sizeof q));
    }
    once_result_clear(&r);
}

static void forward(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct ingress_request *rq,
                    const struct once_verified *ver,
                    const struct once_result *claim,
                    struct ingress_response *out)
{
    struct upstream_reply reply;
    char why[ONCE_ERROR_MAX];
    enum upstream_class cls;

    deliver(g, wk, rq, ver, claim, &reply);
    cls = reply.status != 0 ? ingress_upstream_class(reply.status)
                            : UPSTREAM_RETRYABLE;
    if (cls == UPSTREAM_OK) {
        atomic_fetch_add_explicit(&g->metrics.upstream_ok, 1,
                                  memory_order_relaxed);
        complete(g, wk, ver, claim, &reply, out);
        ingress_upstream_reply_clear(&reply);
        return;
    }
    /* What the sender (and a later claim's FAILED answer) is told: the
     * status only. The upstream's body and curl's error text (an address,
     * a host name) describe the inside and go to the log alone. */
    if (reply.status != 0) {
        snprintf(why, sizeof why, "upstream answered %ld", reply.status);
    } else {
        snprintf(why, sizeof why, "upstream did not answer");
    }
    if (cls == UPSTREAM_TERMINAL ||
        claim->owner_attempt >= g->cfg.max_attempts) {
        atomic_fetch_add_explicit(cls == UPSTREAM_TERMINAL
                                      ? &g->metrics.upstream_terminal
                                      : &g->metrics.upstream_retryable,
                                  1, memory_order_relaxed);
        release(g, wk, ver, claim, true, why);
        answer(out, (struct ingress_answer){422, "failed", 0}, why);
    } else {
        atomic_fetch_add_explicit(&g->metrics.upstream_retryable, 1,
                                  memory_order_relaxed);
        release(g, wk, ver, claim, false, why);
        answer(out,
               (struct ingress_answer){503, "upstream_failed",
                                       (g->cfg.retry_after_ms + 999) / 1000},
               why);
    }
    {
        char q[sizeof reply.error + 8];

        log_kv(LOG_INFO, "delivery failed",
               "attempt=%u upstream_status=%ld error=%s", claim->owner_attempt,
               reply.status,
               log_quote(reply.status != 0 ? "" : reply.error, q, sizeof q));
    }
    ingress_upstream_reply_clear(&reply);
}

/* ------------------------------------------------------------------------
 * The pipeline
 * ---------------------------------------------------------------------- */

static const char *claim_reason(enum once_vc_outcome o,
                                const struct once_verified *ver,
                                const struct once_result *r)
{
    switch (o) {
        case ONCE_VC_BAD_SIGNATURE:
        case ONCE_VC_MALFORMED:
            return ver->reason;
        case ONCE_VC_FAILED:
            return r->stored_error;
        /* The cluster's own error text names nodes and addresses: the
         * log gets it, the sender a plain sentence. */
        case ONCE_VC_UNAVAILABLE:
            return "the cluster gave no decision; nothing was forwarded";
        case ONCE_VC_REFUSED:
            return "the cluster refused this receiver's claim arguments";
        default:
            return r->reason;
    }
}

void ingress_handle(struct ingress *g,
                    struct ingress_worker *wk,
                    const struct ingress_request *rq,
                    struct ingress_response *out)
{
    struct keyset *ks = keyring_get(&g->keys);
    struct once_vc_args a = {0};
    struct once_verified ver;
    struct once_result r;
    enum once_vc_outcome o;

    memset(out, 0, sizeof *out);
    once_result_init(&r);
    a.scope = (const uint8_t *)g->cfg.scope;
    a.scope_len = strlen(g->cfg.scope);
    a.kind = ONCE_IDEMPOTENT;
    a.tolerance_ms = g->cfg.tolerance_ms;
    a.lease_ms = g->cfg.lease_ms;
    a.execution_id = (const uint8_t *)g->execution_id;
    a.execution_id_len = strlen(g->execution_id);
    a.timeout_ms = g->cfg.timeout_ms;
    o = once_verify_and_claim(wk->client, ks->v, &rq->w, &a, &ver, &r);
    keyring_put(&g->keys, ks);
    atomic_fetch_add_explicit(&g->metrics.outcome[o], 1, memory_order_relaxed);
    if (o == ONCE_VC_ACCEPTED) {
        forward(g, wk, rq, &ver, &r, out);
    } else if (o == ONCE_VC_DUPLICATE) {
        answer_stored(out, &r);
    } else {
        enum log_level l = o == ONCE_VC_REFUSED ? LOG_WARN : LOG_DEBUG;

        if (log_enabled(l)) {
            char q[ONCE_ERROR_MAX + 8];

            log_kv(l, "webhook not delivered", "outcome=%s error=%s",
                   once_vc_outcome_name(o), log_quote(r.error, q, sizeof q));
        }
        answer(out, ingress_answer_for(o, r.retry_after_ms, 1000),
               claim_reason(o, &ver, &r));
    }
    once_result_clear(&r);
}
