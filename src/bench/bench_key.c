/* bench/bench_key.c: once-bench's key strings, written by hand (bench.h).
 *
 * Why: snprintf cost once-bench ~1,700 instructions per claim (callgrind,
 * --pipeline 128), CPU the servers share on a small machine. The strings
 * are exactly the printf formats they replace ("%016" PRIx64 "-%u-%" PRIu64
 * and "%016" PRIx64 "-hot-%" PRIu64); tests/unit/bench compares both on
 * random values. */
#include <string.h>

#include "bench/bench.h"

static char *put_hex16(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 15; i >= 0; i--) {
        p[i] = digits[v & 0xf];
        v >>= 4;
    }
    return p + 16;
}

static char *put_dec(char *p, uint64_t v)
{
    char tmp[20]; /* UINT64_MAX has 20 digits */
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0) {
        *p++ = tmp[--n];
    }
    return p;
}

void bench_key_unique(char *buf, uint64_t run_id, unsigned idx, uint64_t n)
{
    char *p = put_hex16(buf, run_id);

    *p++ = '-';
    p = put_dec(p, idx);
    *p++ = '-';
    p = put_dec(p, n);
    *p = '\0';
}

void bench_key_hot(char *buf, uint64_t run_id, uint64_t n)
{
    char *p = put_hex16(buf, run_id);

    memcpy(p, "-hot-", 5);
    p = put_dec(p + 5, n);
    *p = '\0';
}
