/* common/path.h: the one join of a directory and a file name.
 *
 * The data directory's files (node-id, tombstone, ltime-anchor, the log
 * store's, stale backups) are named DIR/NAME. A path cut to fit its buffer
 * names another file, so the join never cuts: a result that does not fit
 * is an error and the buffer holds "" (a caller that ignores the error
 * still opens nothing by mistake). Reentrant, no allocation. */
#ifndef ONCE_COMMON_PATH_H_
#define ONCE_COMMON_PATH_H_

#include <stddef.h>

/* @dir "/" @name into @out (@cap bytes, NUL included): 0, or
 * -ENAMETOOLONG when it would not fit (@out is then ""). @dir is taken as
 * given: "dir/" gives "dir//name", which names the same file. */
int path_join(char *out, size_t cap, const char *dir, const char *name);

#endif /* ONCE_COMMON_PATH_H_ */
