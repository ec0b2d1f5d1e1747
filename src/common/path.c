/* common/path.c: DIR/NAME, never cut (path.h). */
#include "common/path.h"

#include <errno.h>
#include <string.h>

int path_join(char *out, size_t cap, const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);

    /* d + 1 + n + 1 <= cap, written so that no sum can wrap. */
    if (cap == 0 || d >= cap || n >= cap - d || cap - d - n < 2) {
        if (cap > 0) {
            out[0] = '\0';
        }
        return -ENAMETOOLONG;
    }
    memcpy(out, dir, d);
    out[d] = '/';
    memcpy(out + d + 1, name, n + 1);
    return 0;
}
