/* common/json_value.h: the JSON values both JSON writers of the project
 * spell alike: oncectl's answers (src/cli/json.c) and onced's HTTP/JSON
 * API (src/server/httpapi_json.c), so that the two never drift apart.
 *
 * Not part of libonce_core (which does not link jansson): compiled into
 * the programs that use it. Each returns a new reference, or NULL when out
 * of memory. Pure. */
#ifndef ONCE_COMMON_JSON_VALUE_H_
#define ONCE_COMMON_JSON_VALUE_H_

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* JSON integers are signed 64-bit: a larger value is a decimal string
 * rather than a wrapped negative number. */
json_t *json_value_uint(uint64_t v);

/* @n bytes (at most 64; more are cut) as lowercase hex. */
json_t *json_value_hex(const uint8_t *b, size_t n);

/* A node id as 16 hex digits; "" for 0 (none). */
json_t *json_value_id(uint64_t id);

#endif /* ONCE_COMMON_JSON_VALUE_H_ */
