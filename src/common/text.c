/* common/text.c: see text.h. */
#include "common/text.h"

#include <stdio.h>
#include <string.h>

#include "common/assert.h"

bool text_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (s == NULL || *s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        unsigned d;

        if (*s < '0' || *s > '9') {
            return false;
        }
        d = (unsigned)(*s - '0');
        if (d > max || v > (max - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool text_parse_duration_ms(const char *s, uint64_t max_ms, uint64_t *out)
{
    static const struct
    {
        const char *unit;
        uint64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    char num[21];
    size_t n = 0;
    uint64_t v;

    if (s == NULL) {
        return false;
    }
    while (s[n] >= '0' && s[n] <= '9') {
        n++;
    }
    if (n == 0 || n >= sizeof num) {
        return false;
    }
    memcpy(num, s, n);
    num[n] = '\0';
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(s + n, units[i].unit) != 0) {
            continue;
        }
        if (!text_parse_u64(num, max_ms / units[i].ms, &v)) {
            return false;
        }
        *out = v * units[i].ms;
        return true;
    }
    return false;
}

int text_hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return TEXT_NOT_HEX;
}

bool text_parse_id(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t n = 0;

    if (s == NULL) {
        return false;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
    }
    for (; s[n] != '\0'; n++) {
        int d = text_hex_digit(s[n]);

        if (d == TEXT_NOT_HEX || n >= 16) {
            return false;
        }
        v = (v << 4) | (uint64_t)d;
    }
    if (n == 0 || v == 0) {
        return false;
    }
    *out = v;
    return true;
}

const char *text_format_id(uint64_t id, char buf[17])
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 15; i >= 0; i--) {
        buf[i] = digits[id & 0xf];
        id >>= 4;
    }
    buf[16] = '\0';
    return buf;
}

bool text_parse_hex_var(const char *s,
                        uint8_t *out,
                        size_t cap,
                        size_t *out_len)
{
    size_t n;

    if (s == NULL) {
        return false;
    }
    n = strlen(s);
    if (n % 2 != 0 || n / 2 > cap) {
        return false;
    }
    for (size_t i = 0; i < n / 2; i++) {
        int hi = text_hex_digit(s[2 * i]);
        int lo = text_hex_digit(s[2 * i + 1]);

        if (hi == TEXT_NOT_HEX || lo == TEXT_NOT_HEX) {
            return false;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    *out_len = n / 2;
    return true;
}

bool text_parse_hex(const char *s, uint8_t *out, size_t len)
{
    size_t got;

    return s != NULL && strlen(s) == 2 * len &&
           text_parse_hex_var(s, out, len, &got);
}

char *text_format_hex(const uint8_t *in, size_t len, char *buf)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        buf[2 * i] = digits[in[i] >> 4];
        buf[2 * i + 1] = digits[in[i] & 0xf];
    }
    buf[2 * len] = '\0';
    return buf;
}

size_t text_json_escape(const char *s, char *buf, size_t cap)
{
    size_t j = 0;

    ONCE_ASSERT(cap >= 1, "room for the NUL");
    /* The longest escape is 6 bytes (\u00XX), plus the NUL. */
    for (size_t i = 0; s != NULL && s[i] != '\0' && j + 7 <= cap; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\') {
            buf[j++] = '\\';
            buf[j++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            j += (size_t)snprintf(buf + j, cap - j, "\\u%04x", c);
        } else {
            buf[j++] = (char)c;
        }
    }
    buf[j] = '\0';
    return j;
}
