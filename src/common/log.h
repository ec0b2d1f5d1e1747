/* common/log.h: the daemons' logger (onced and once-ingress), logfmt lines
 * on stderr. Depends on libc only, like the rest of common/.
 *
 * One line per event:
 *   ts=2026-12-01T10:00:00.123Z level=info node=1f2e3d4c5b6a7980
 *     msg="became leader" term=3
 * `ts` is UTC with milliseconds, `node` appears once the node's id is known
 * (log_set_node), `msg` is always quoted. Callers append their own
 * key=value pairs through a printf format; a value that may hold spaces,
 * quotes or control characters goes through log_quote first. Lines below
 * the configured level are not formatted at all.
 *
 * Never log whole request ids, tokens or keys at info: the daemon logs
 * start, leadership and membership changes, forwarding errors, shutdown.
 * Loop thread only (one process-wide logger, no locking). */
#ifndef ONCE_COMMON_LOG_H_
#define ONCE_COMMON_LOG_H_

#include <stddef.h>
#include <stdint.h>

enum log_level {
    LOG_DEBUG = 0,
    LOG_INFO,
    LOG_WARN,
    LOG_ERROR,
};

/* Longest line written (longer ones are cut, with a "..." marker). */
#define LOG_LINE_MAX 2048

/* "debug" | "info" | "warn" | "error" -> 0 and *out; else -EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
const char *log_level_name(enum log_level l);

/* Lines below @l are dropped (default LOG_INFO). */
void log_set_level(enum log_level l);
/* Add node=<16 hex digits> to every line from now on (0: none). */
void log_set_node(uint64_t id);
/* True if a line at @l would be written. */
int log_enabled(enum log_level l);

/* Write one line: level, @msg (quoted and escaped here), then @fmt
 * (printf, may be NULL or "") as the rest of the key=value pairs. */
void log_kv(enum log_level l, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* @s as a logfmt value into @buf (@cap bytes, at least 3): unchanged if it
 * is a non-empty run of safe characters, else in double quotes with \" \\
 * and \n escaped and other control bytes as \xNN; cut to fit. Returns
 * @buf. */
const char *log_quote(const char *s, char *buf, size_t cap);

/* Like log_quote for @len bytes that may hold anything (error text from a
 * peer). */
const char *log_quote_n(const char *s, size_t len, char *buf, size_t cap);

#endif /* ONCE_COMMON_LOG_H_ */
