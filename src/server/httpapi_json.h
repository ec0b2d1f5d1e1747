/* server/httpapi_json.h: the HTTP/JSON API's answers (docs/http-api.md)
 * as JSON objects, from the RPC's answer messages.
 *
 * The field names, spellings and "as they apply" rules are those of
 * `oncectl --json` (src/cli/json.c, docs/oncectl.md), so a caller can
 * switch between the two: outcome, retry, request_id, first_request_id,
 * ..., result_b64, stored_error, the origin (cluster_id, node_id,
 * boot_id); errors as error, applied ("false"/"unknown"), leader_hint,
 * message. oncectl builds them from libonce's struct once_result, this
 * from the wire's Once__Rpc__Result: the node does not link libonce.
 *
 * Every function returns a new object (the caller's reference), or NULL
 * when out of memory. Pure. */
#ifndef ONCE_SERVER_HTTPAPI_JSON_H_
#define ONCE_SERVER_HTTPAPI_JSON_H_

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "once_rpc.pb-c.h"
#include "rpc/conn.h"

/* A decided answer of Claim, Complete, Release or Lookup. */
json_t *httpapi_json_result(enum rpc_method m, const Once__Rpc__Result *r);

/* A Lookup's answer: add served_by, the id of the node that read (none
 * when @id is 0), as oncectl prints it. */
void httpapi_json_served_by(json_t *o, uint64_t id);

/* An error answer: @status (an enum rpc_status), @applied unknown or not,
 * @hint and @message (may be NULL), the call's @request_id (NULL: none). */
json_t *httpapi_json_error(enum rpc_status status,
                           bool applied_unknown,
                           const char *hint,
                           const char *message,
                           const uint8_t *request_id);

/* GET /v1/status. */
json_t *httpapi_json_status(const Once__Rpc__StatusResponse *st);

/* Add who answered: cluster_id, node_id, boot_id ("" when not known). */
void httpapi_json_origin(json_t *o, const struct rpc_ids *ids);

/* The name of enum value @v of @d without @prefix ("OUTCOME_"), as oncectl
 * spells it; "UNKNOWN_VALUE" for a value not in @d. */
const char *httpapi_enum_name(const ProtobufCEnumDescriptor *d,
                              int v,
                              const char *prefix);

#endif /* ONCE_SERVER_HTTPAPI_JSON_H_ */
