/* server/http_front.c: the HTTP listener on --http-addr and its routes
 * (http_front.h). */
#include "server/http_front.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/prom.h"
#include "http/http.h"
#include "server/authz.h"
#include "server/httpapi.h"
#include "server/metrics.h"
#include "server/server.h"

/* With TLS, /metrics is for a certificate whose identity is a monitor or
 * an admin (authz.h); anyone else gets 403 with the reason. */
static bool may_scrape(struct server *s,
                       const struct http_request *req,
                       struct http_response *resp)
{
    struct authz_caller who;
    char why[ERR_MSG_SIZE], text[ERR_MSG_SIZE + 2];

    if (!req->tls) {
        return true; /* no TLS: loopback (or --insecure), every caller */
    }
    if (req->peer == NULL) {
        snprintf(why, sizeof why,
                 "permission denied: /metrics needs a client certificate "
                 "whose identity has the role monitor or admin");
        metrics_denied(&s->metrics);
    } else if (authz_resolve(s->access, true, req->peer, NULL, 0, &who, why) !=
                   0 ||
               authz_check_metrics(&who, why) != 0) {
        if (s->metrics.reg != NULL) {
            /* authz counted its own */
            prom_inc(s->metrics.permission_denied);
        }
    } else {
        return true;
    }
    snprintf(text, sizeof text, "%s\n", why);
    http_text(resp, 403, text);
    return false;
}

static void get_metrics(void *arg,
                        const struct http_request *req,
                        struct http_response *resp)
{
    struct server *s = arg;
    struct prom_buf b;

    if (!may_scrape(s, req, resp)) {
        return;
    }
    if (s->stopping || s->raft_closed) {
        http_text(resp, 503, "stopping\n");
        return;
    }
    prom_buf_init(&b, HTTP_BODY_MAX);
    if (metrics_text(&s->metrics, &b) != 0) {
        prom_buf_free(&b);
        http_text(resp, 500, "metrics text over its limit\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = prom_buf_take(&b, &resp->body_len);
}

/* Answered by the loop itself: that it answers is the check. */
static void get_healthz(void *arg,
                        const struct http_request *req,
                        struct http_response *resp)
{
    (void)arg;
    (void)req;
    http_text(resp, 200, "ok\n");
}

static void get_readyz(void *arg,
                       const struct http_request *req,
                       struct http_response *resp)
{
    struct server *s = arg;
    char why[200], text[220];
    const char *no = metrics_unready(s, why, sizeof why);

    (void)req;
    if (no == NULL) {
        http_text(resp, 200, "ready\n");
        return;
    }
    snprintf(text, sizeof text, "not ready: %s\n", no);
    http_text(resp, 503, text);
}

static void http_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    log_kv(strcmp(level, "error") == 0  ? LOG_ERROR
           : strcmp(level, "warn") == 0 ? LOG_WARN
                                        : LOG_INFO,
           msg, "component=http");
}

int http_front_start(struct server *s, const char *addr, char *errmsg)
{
    static struct http_route routes[3 + HTTPAPI_ROUTES];
    struct http_config hc;

    routes[0] = (struct http_route){"/metrics", get_metrics, s, 0, 0};
    routes[1] = (struct http_route){"/healthz", get_healthz, s, 0, 0};
    routes[2] = (struct http_route){"/readyz", get_readyz, s, 0, 0};
    httpapi_routes(s, &routes[3]); /* the JSON API (docs/http-api.md) */
    memset(&hc, 0, sizeof hc);
    hc.addr = addr;
    hc.routes = routes;
    hc.n_routes = sizeof routes / sizeof routes[0];
    hc.log = http_log;
    /* With TLS the port is HTTPS with the client port's context (the
     * node's certificate, swapped by SIGHUP), client certificates asked
     * for but optional: probes come without one. */
    hc.tls = s->tls.on ? &s->tls.client_port : NULL;
    return http_start(&s->http, &s->loop, &hc, errmsg);
}

void http_front_close(struct server *s)
{
    if (s->http != NULL) {
        http_close(s->http, NULL, NULL);
        s->http = NULL;
    }
}
