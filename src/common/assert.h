/* common/assert.h: invariants that are always checked.
 *
 * ONCE_ASSERT(cond, msg) states something the code itself guarantees: an
 * index the code computed is inside its buffer, a handle is closed once, a
 * callback runs on the loop thread, one proposal is in flight. When it is
 * false, the program is wrong and continuing would corrupt state (a nonce
 * accepted twice is the one thing once must never do), so it prints
 *
 *     file:line: function: assertion `cond' failed: msg
 *
 * to stderr and calls abort(), which leaves a core for the post-mortem.
 * ONCE_ASSERTF(cond, fmt, ...) does the same with a printf-style message,
 * for the values that explain the failure.
 *
 * Unlike <assert.h>, these do not depend on NDEBUG: release builds define
 * NDEBUG and keep every check. So each check must be cheap (a comparison or
 * two, no walk over a table) and its condition must have no side effect.
 *
 * Never on input: a frame, a protobuf body, an HTTP request, a peer's
 * message, a file on disk (log segment, snapshot, backup, access file,
 * certificate), a flag or a config file gets an error, not an abort. Assert
 * only what a bug in once can break; the fuzzers replay inputs to check it.
 *
 * Thread-safe: the failure path writes one line with one fprintf call. */
#ifndef ONCE_COMMON_ASSERT_H_
#define ONCE_COMMON_ASSERT_H_

/* The failure path, out of line and cold so that a true check costs one
 * predicted branch. Prints the line described above and aborts. */
_Noreturn void assert_fail(const char *file,
                           int line,
                           const char *func,
                           const char *cond,
                           const char *fmt,
                           ...) __attribute__((cold, format(printf, 5, 6)));

#define ONCE_ASSERT(cond, msg)     \
    (__builtin_expect(!!(cond), 1) \
         ? (void)0                 \
         : assert_fail(__FILE__, __LINE__, __func__, #cond, "%s", (msg)))

#define ONCE_ASSERTF(cond, ...)    \
    (__builtin_expect(!!(cond), 1) \
         ? (void)0                 \
         : assert_fail(__FILE__, __LINE__, __func__, #cond, __VA_ARGS__))

#endif /* ONCE_COMMON_ASSERT_H_ */
