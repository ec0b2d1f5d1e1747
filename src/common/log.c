/* common/log.c: logfmt lines on stderr (log.h). */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum log_level log_min = LOG_INFO;
static uint64_t log_node;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *s, enum log_level *out)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *log_level_name(enum log_level l)
{
    return l <= LOG_ERROR ? level_names[l] : "error";
}

void log_set_level(enum log_level l)
{
    log_min = l;
}

void log_set_node(uint64_t id)
{
    log_node = id;
}

int log_enabled(enum log_level l)
{
    return l >= log_min;
}

/* A bare logfmt value: printable ASCII without space, quote, '=' or '\'. */
static bool safe_char(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '"' && c != '=' && c != '\\';
}

static const char *quote(const char *s,
                         size_t len,
                         char *buf,
                         size_t cap,
                         bool force)
{
    size_t i, o = 0;
    bool bare = len > 0 && !force;

    for (i = 0; i < len && bare; i++) {
        bare = safe_char((unsigned char)s[i]);
    }
    if (bare && len < cap) {
        memcpy(buf, s, len);
        buf[len] = '\0';
        return buf;
    }
    /* Room for the closing quote and the NUL is kept at every step. */
    buf[o++] = '"';
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[5];
        size_t n;

        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            n = 2;
        } else if (c == '\n') {
            memcpy(esc, "\\n", 2);
            n = 2;
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            n = 4;
        } else {
            esc[0] = (char)c;
            n = 1;
        }
        if (o + n + 2 > cap) {
            break;
        }
        memcpy(buf + o, esc, n);
        o += n;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

const char *log_quote_n(const char *s, size_t len, char *buf, size_t cap)
{
    return quote(s, len, buf, cap, false);
}

const char *log_quote(const char *s, char *buf, size_t cap)
{
    if (s == NULL) {
        s = "";
    }
    return log_quote_n(s, strlen(s), buf, cap);
}

void log_kv(enum log_level l, const char *msg, const char *fmt, ...)
{
    char line[LOG_LINE_MAX + 1];
    char qmsg[512];
    struct timespec ts;
    struct tm tm;
    size_t o;
    int n;

    if (l < log_min) {
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof line,
                 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_level_name(l));
    o = n > 0 ? (size_t)n : 0;
    if (log_node != 0 && o < sizeof line) {
        n = snprintf(line + o, sizeof line - o, " node=%016llx",
                     (unsigned long long)log_node);
        o += n > 0 ? (size_t)n : 0;
    }
    /* msg is always quoted, so a reader finds it whatever its text. */
    if (msg == NULL) {
        msg = "";
    }
    if (o < sizeof line) {
        quote(msg, strlen(msg), qmsg, sizeof qmsg, true);
        n = snprintf(line + o, sizeof line - o, " msg=%s", qmsg);
        o += n > 0 ? (size_t)n : 0;
    }
    if (fmt != NULL && fmt[0] != '\0' && o + 1 < sizeof line) {
        va_list ap;

        line[o++] = ' ';
        line[o] = '\0';
        va_start(ap, fmt);
        n = vsnprintf(line + o, sizeof line - o, fmt, ap);
        va_end(ap);
        o += n > 0 ? (size_t)n : 0;
    }
    if (o >= sizeof line) {
        /* Cut: say so rather than end in half a value. */
        memcpy(line + sizeof line - 5, " ...", 4);
        o = sizeof line - 1;
    }
    line[o] = '\0';
    fprintf(stderr, "%s\n", line);
}
