/* common/json_value.c: shared JSON values (json_value.h). */
#include "common/json_value.h"

#include <stdio.h>

#include "common/text.h"

#define HEX_MAX 64

json_t *json_value_uint(uint64_t v)
{
    char buf[24];

    if (v <= (uint64_t)INT64_MAX) {
        return json_integer((json_int_t)v);
    }
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return json_string(buf);
}

json_t *json_value_hex(const uint8_t *b, size_t n)
{
    char buf[2 * HEX_MAX + 1];

    if (n > HEX_MAX) {
        n = HEX_MAX;
    }
    return json_string(text_format_hex(b, n, buf));
}

json_t *json_value_id(uint64_t id)
{
    char buf[17];

    return json_string(id == 0 ? "" : text_format_id(id, buf));
}
