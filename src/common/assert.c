/* common/assert.c: the failure path of ONCE_ASSERT (assert.h). */
#include "common/assert.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void assert_fail(const char *file,
                 int line,
                 const char *func,
                 const char *cond,
                 const char *fmt,
                 ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    /* Cut, never overflowed: the location and the condition matter most. */
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One call, so lines from two threads failing at once do not mix. */
    fprintf(stderr, "%s:%d: %s: assertion `%s' failed: %s\n", file, line, func,
            cond, msg);
    fflush(stderr);
    abort();
}
