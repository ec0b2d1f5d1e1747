/* server/httpapi.h: the HTTP/JSON API on onced's --http-addr listener
 * (docs/http-api.md): POST /v1/claim, /v1/complete, /v1/release,
 * GET /v1/records/{scope}/{key}, GET /v1/status, and POST /v1/claims (a
 * batch: ClaimBatch, one JSON object per item in the answer's array).
 *
 * Every call goes through the RPC's own path: the JSON body becomes the
 * method's request message (httpapi_parse.h), which is served as a local
 * call of the node's RPC server (rpc_server_call_local): the same checks,
 * leader forwarding, deadline and metrics as a call on the client port.
 * The HTTP request is deferred (http_defer) until that call is answered;
 * the answer becomes JSON (httpapi_json.h) with the HTTP status of its
 * class (one table, httpapi.c).
 *
 * Bounds: a local call has no connection of its own, so the RPC's
 * per-connection call limit does not apply; an HTTP connection carries one
 * request at a time, so the listener's connection limit (64) bounds the
 * calls in flight, and each call's deadline bounds how long it is held.
 *
 * Ownership: each call owns a small record, freed with its answer; a call
 * answered after the listener closed is dropped (http.h). Loop thread
 * only. */
#ifndef ONCE_SERVER_HTTPAPI_H_
#define ONCE_SERVER_HTTPAPI_H_

#include <stddef.h>

#include "http/http.h"

struct server;

#define HTTPAPI_ROUTES        6
#define HTTPAPI_RETRY_AFTER_S 1 /* Retry-After of a 503 */

/* The API's routes for the node @s into @out (HTTPAPI_ROUTES entries). */
void httpapi_routes(struct server *s, struct http_route *out);

#endif /* ONCE_SERVER_HTTPAPI_H_ */
