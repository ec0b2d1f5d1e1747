/* server/http_front.h: onced's HTTP listener on --http-addr (docs/server.md,
 * "The HTTP listener"): the routes /metrics, /healthz, /readyz and the JSON
 * API under /v1 (httpapi.h), served by http/http.h on the node's loop.
 *
 * The listener is the front door; what it serves lives elsewhere: the
 * metrics text and the readiness rule in metrics.c, the /v1 handlers in
 * httpapi.c. Here: the route table, who may scrape /metrics when the port
 * has TLS, the 503 of a stopping node, and the listener's log lines.
 *
 * Ownership: the listener (struct http) is s->http, made by
 * http_front_start and closed by http_front_close (its handles close
 * through the loop); NULL when there is none. The route table is static:
 * one listener per process. Loop thread only. */
#ifndef ONCE_SERVER_HTTP_FRONT_H_
#define ONCE_SERVER_HTTP_FRONT_H_

struct server;

/* Serve the routes on @addr (the node's loop, s->metrics made). 0 or an
 * HTTP_E_* code with @errmsg (ERR_MSG_SIZE). */
int http_front_start(struct server *s, const char *addr, char *errmsg);
/* Close the listener, if any. */
void http_front_close(struct server *s);

#endif /* ONCE_SERVER_HTTP_FRONT_H_ */
