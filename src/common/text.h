/* common/text.h: parsing and printing of the values operators type.
 *
 * Durations, integers, node ids and byte strings appear in flags of onced,
 * arguments of oncectl and JSON of `oncectl session`; one parser for each
 * keeps their rules identical everywhere (docs/design.md §6: a duration is an
 * integer with ms, s, m or h; ids are hex strings). Every parser takes a
 * NUL-terminated string and accepts it whole or not at all (on false an
 * output buffer may be partly written, *out scalars are untouched). None
 * allocates. Reentrant. */
#ifndef ONCE_COMMON_TEXT_H_
#define ONCE_COMMON_TEXT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "250ms", "5s", "10m", "24h" -> milliseconds. The number is decimal,
 * without sign or spaces; the unit is required. False if malformed, or if
 * the value is over @max_ms. */
bool text_parse_duration_ms(const char *s, uint64_t max_ms, uint64_t *out);

/* A decimal unsigned integer 0..@max, no sign, no spaces. */
bool text_parse_u64(const char *s, uint64_t max, uint64_t *out);

/* A node id: 1..16 hex digits (an optional "0x" prefix), not zero. */
bool text_parse_id(const char *s, uint64_t *out);

/* Print a node id as 16 lowercase hex digits; @buf has 17 bytes. */
const char *text_format_id(uint64_t id, char buf[17]);

/* What text_hex_digit gives for a character that is not a hex digit: a
 * value below every digit's, not an error code. */
#define TEXT_NOT_HEX (-1)

/* One hex digit (either case): 0..15, or TEXT_NOT_HEX. */
int text_hex_digit(char c);

/* Exactly 2*@len hex digits (either case) -> @len bytes at @out. */
bool text_parse_hex(const char *s, uint8_t *out, size_t len);

/* Up to @cap bytes of hex (an even number of digits) -> *out_len bytes. */
bool text_parse_hex_var(const char *s,
                        uint8_t *out,
                        size_t cap,
                        size_t *out_len);

/* @len bytes -> 2*@len lowercase hex digits and a NUL at @buf (2*len+1
 * bytes). Returns @buf. */
char *text_format_hex(const uint8_t *in, size_t len, char *buf);

/* @s (NUL-terminated; NULL is empty) as the inside of a JSON string into
 * @buf (@cap >= 1 bytes, always NUL-terminated): '"' and '\\' escaped,
 * control bytes and bytes >= 0x7f as \u00XX. Stops before a character that
 * would not fit whole (a truncated text, never a broken escape). Returns
 * the length written. */
size_t text_json_escape(const char *s, char *buf, size_t cap);

#endif /* ONCE_COMMON_TEXT_H_ */
