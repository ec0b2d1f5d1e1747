/* server/forward.c: a follower's one hop to the leader (forward.h).
 *
 * The forward's deadline is what remains of the caller's (5 s when none
 * was given). A channel error is UNAVAILABLE applied FALSE when the request
 * was not sent, UNKNOWN applied UNKNOWN when it may have been: never a
 * blind retry. */
#include "server/forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "rpc/status.h"
#include "server/leader.h"
#include "server/reply.h"
#include "server/server.h"

/* Deadline of a forwarded call whose caller gave none (docs/design.md §5). */
#define FORWARD_DEFAULT_MS 5000
/* At most one forwarding error line per this many ms (the rest counted). */
#define FORWARD_LOG_MS 1000

/* One forwarded call, until its channel answers. */
struct forward_rec
{
    struct forwarder *f;
    struct rpc_call *call;
    char addr[RPC_ADDR_MAX + 1];
};

void forward_init(struct forwarder *f,
                  uv_loop_t *loop,
                  const struct rpc_limits *limits,
                  struct tls_slot *tls)
{
    memset(f, 0, sizeof *f);
    f->loop = loop;
    f->limits = limits;
    f->tls = tls;
}

static void forward_log(struct forwarder *f,
                        const char *addr,
                        int rv,
                        bool sent)
{
    uint64_t now = uv_now(f->loop);

    f->errors++;
    if (f->log_ms != 0 && now - f->log_ms < FORWARD_LOG_MS) {
        f->log_suppressed++;
        return;
    }
    log_kv(LOG_WARN, "forwarding to the leader failed",
           "leader=%s error=%s sent=%d suppressed=%u", addr,
           log_quote(rpc_conn_strerror(rv), (char[96]){0}, 96), sent ? 1 : 0,
           f->log_suppressed);
    f->log_ms = now;
    f->log_suppressed = 0;
}

static void forward_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct forward_rec *fw = arg;
    struct rpc_reply r;

    if (rv != 0) {
        enum rpc_applied applied;
        enum rpc_status status = rpc_status_of(rv, sent, &applied);

        forward_log(fw->f, fw->addr, rv, sent);
        if (status == RPC_STATUS_UNKNOWN) {
            reply_error(fw->call, status, applied,
                        "forwarded to the leader; no answer (outcome unknown)",
                        NULL);
        } else {
            reply_error(fw->call, status, applied, "could not reach the leader",
                        fw->addr);
        }
        free(fw);
        return;
    }
    /* The leader's answer, as it is. */
    memset(&r, 0, sizeof r);
    r.status = ans->status;
    r.applied = ans->applied;
    r.error = ans->error_len > 0 ? ans->error : NULL;
    r.leader_hint = ans->leader_hint_len > 0 ? ans->leader_hint : NULL;
    r.body = ans->body;
    r.body_len = ans->body_len;
    rpc_call_reply(fw->call, &r);
    free(fw);
}

/* The channel to @addr: the kept one, or a new one (the old one drains). */
static struct rpc_channel *channel_for(struct forwarder *f, const char *addr)
{
    struct rpc_channel *ch;
    char errmsg[ERR_MSG_SIZE];
    int rv;

    if (f->ch != NULL && strcmp(rpc_channel_addr(f->ch), addr) == 0) {
        return f->ch;
    }
    rv = rpc_channel_open(&ch, f->loop, addr, f->limits, errmsg);
    if (rv != 0) {
        log_kv(LOG_WARN, "cannot open a channel to the leader",
               "leader=%s error=%s", addr,
               log_quote(errmsg, (char[300]){0}, 300));
        return NULL;
    }
    if (f->tls != NULL) {
        rpc_channel_set_tls(ch, f->tls);
    }
    if (f->ch != NULL) {
        if (f->n_drain == FORWARD_DRAIN_MAX) {
            /* Too many leaders in a row: the oldest one's calls fail
             * (outcome unknown for those sent). */
            rpc_channel_close(f->drain[0]);
            memmove(&f->drain[0], &f->drain[1],
                    (FORWARD_DRAIN_MAX - 1) * sizeof f->drain[0]);
            f->n_drain--;
        }
        f->drain[f->n_drain++] = f->ch;
    }
    f->ch = ch;
    log_kv(LOG_INFO, "forwarding to a new leader", "leader=%s", addr);
    return ch;
}

struct rpc_channel *forward_channel(struct forwarder *f, const char *addr)
{
    return channel_for(f, addr);
}

/* What remains of the caller's deadline into *@budget; false (answered
 * DEADLINE_EXCEEDED) if nothing does. */
static bool forward_budget(struct forwarder *f,
                           struct rpc_call *call,
                           uint64_t *budget)
{
    uint64_t now, elapsed;

    *budget = FORWARD_DEFAULT_MS;
    if (call->deadline_ms == 0) {
        return true;
    }
    now = uv_now(f->loop);
    elapsed = now > call->received_mono_ms ? now - call->received_mono_ms : 0;
    if (elapsed >= call->deadline_ms) {
        reply_error(call, RPC_STATUS_DEADLINE_EXCEEDED, RPC_APPLIED_FALSE,
                    "deadline passed before forwarding", NULL);
        return false;
    }
    *budget = call->deadline_ms - elapsed;
    return true;
}

/* The leader's client address into @addr, or false with @call answered. */
static bool forward_target(struct server *s, struct rpc_call *call, char *addr)
{
    uint64_t lid;

    if (call->forwarded) {
        reply_unavailable(s, call,
                          "not the ready leader (a forwarded call is never "
                          "forwarded again)");
        return false;
    }
    if (!leader_addr(s, &lid, addr)) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    lid == 0 ? "no known leader"
                             : "the leader's client address is not known yet",
                    NULL);
        return false;
    }
    if (lid == s->id) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "this node is the leader but not ready yet (term start)",
                    addr);
        return false;
    }
    return true;
}

/* The DER of @call's peer certificate into @fv (*@der: the caller's to
 * OPENSSL_free); nothing without TLS. False if it cannot be encoded or is
 * over RPC_CALLER_CERT_MAX. */
static bool forward_caller_cert(struct rpc_call *call,
                                unsigned char **der,
                                struct envelope_view *fv)
{
    X509 *peer = call->peer_cert;
    int n;

    *der = NULL;
    if (peer == NULL) {
        return true;
    }
    n = i2d_X509(peer, der);
    if (n <= 0 || (size_t)n > RPC_CALLER_CERT_MAX) {
        OPENSSL_free(*der);
        *der = NULL;
        return false;
    }
    fv->caller_cert = *der;
    fv->caller_cert_len = (size_t)n;
    return true;
}

void forward_call(struct server *s,
                  struct rpc_call *call,
                  const struct envelope_view *req)
{
    struct forwarder *f = &s->fwd;
    char addr[RPC_ADDR_MAX + 1];
    struct envelope_view fv;
    struct rpc_channel *ch;
    struct forward_rec *fw;
    unsigned char *der = NULL;
    uint64_t budget;
    int rv;

    if (!forward_target(s, call, addr) || !forward_budget(f, call, &budget)) {
        return;
    }
    ch = channel_for(f, addr);
    fw = ch != NULL ? calloc(1, sizeof *fw) : NULL;
    if (fw == NULL) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "cannot forward to the leader", addr);
        return;
    }
    fw->f = f;
    fw->call = call;
    snprintf(fw->addr, sizeof fw->addr, "%s", addr);
    memset(&fv, 0, sizeof fv);
    fv.method = call->method;
    fv.direction = RPC_REQUEST;
    fv.deadline_ms = budget;
    fv.group_id = call->group_id;
    fv.body = req->body;
    fv.body_len = req->body_len;
    fv.forwarded = true;
    /* The leader authorizes the call as its original caller (authz.h). */
    if (!forward_caller_cert(call, &der, &fv)) {
        free(fw);
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "cannot forward the caller's certificate", NULL);
        return;
    }
    fv.has_cluster_id = call->has_cluster_id; /* the caller's pin */
    memcpy(fv.cluster_id, call->cluster_id, RPC_ID_LEN);
    rv = rpc_channel_call(ch, &fv, budget, forward_cb, fw);
    OPENSSL_free(der); /* the channel copied the frame */
    if (rv != 0) {
        free(fw);
        forward_log(f, addr, rv, false);
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "cannot forward to the leader", addr);
        return;
    }
    /* The leader may act on it from now on. */
    rpc_call_mark_sent(call);
    f->forwarded++;
}

void forward_tick(struct forwarder *f)
{
    unsigned i = 0;

    while (i < f->n_drain) {
        if (rpc_channel_pending(f->drain[i]) == 0) {
            rpc_channel_close(f->drain[i]);
            f->drain[i] = f->drain[--f->n_drain];
        } else {
            i++;
        }
    }
}

void forward_close(struct forwarder *f)
{
    if (f->ch != NULL) {
        rpc_channel_close(f->ch);
        f->ch = NULL;
    }
    for (unsigned i = 0; i < f->n_drain; i++) {
        rpc_channel_close(f->drain[i]);
    }
    f->n_drain = 0;
}
