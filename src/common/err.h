/* common/err.h: the one error convention of once.
 *
 * A function that can fail returns an int: 0 is success, a negative value
 * is an error. Three kinds of negative values exist, in disjoint ranges:
 *
 *   -1 .. -999      a negated errno value (-ENOMEM, -EIO ...): a system
 *                   call or libc failed; err_str() gives strerror's text;
 *   -1100 .. -2199  a module's own code, one range of 100 per module, all
 *                   listed in ERR_CODES below (the single table of names);
 *
 * and, at the raft_io and raft_fsm boundaries only, libraft's positive
 * RAFT_* codes, because raft reads them (raft_strerror gives their text).
 * Nothing else returns a positive value as an error.
 *
 * A message goes with a code where the caller must show the operator why
 * (a path, an offset, a peer): a buffer of ERR_MSG_SIZE bytes (the same size
 * as raft's errmsg, so one can be copied into the other), filled with
 * err_printf and prefixed with context with err_wrapf, as canonical raft's
 * ErrMsgPrintf/ErrMsgWrapf do. A NULL message buffer is allowed everywhere
 * and means "the caller does not want the text". Messages are cut, never
 * overflowed.
 *
 * No function returns a bare -1 meaning "some error": -1 is -EPERM. Where
 * -1 is a value (a libc or library callback convention), a comment says so.
 *
 * err_str() is the single table of texts: every module's *_strerror
 * (fsm_strerror, replica_strerror, rpc_strerror, rpc_conn_strerror) is a
 * call to it, and no other table of error texts exists.
 *
 * The chain of translations, each step in exactly one function:
 *
 *   module code (this table, or -errno)
 *     -> RPC status + applied, the status of an answer on the wire:
 *        rpc_status_of (rpc/status.h); onced's answers (server/reply.c,
 *        server/forward.c) all go through it;
 *     -> once_status, libonce's public enum (include/once.h):
 *        client_status_from_rpc (client/client.h); when the channel gave
 *        no answer, the code itself becomes a once_status by
 *        client_status_of_channel, next to it;
 *     -> exit code of oncectl: cli_exit_code (cli/cli.h), from the status,
 *        applied and outcome of a result;
 *     -> HTTP status of the JSON API: rpc_status_http (rpc/status.h), from
 *        the RPC status and applied of the answer; once-ingress answers a
 *        webhook from the verdict of once_verify_and_claim with
 *        ingress_answer_for (ingress/ingress.h), a once_status other than
 *        OK being its verdict UNAVAILABLE (INVALID_ARGUMENT: REFUSED).
 *
 * and the texts: err_str for a code, rpc_status_name / once_status_name for
 * a status (the wire and public spellings, which tests and harnesses parse).
 *
 * Thread-safe: no global state (err_str returns static strings). */
#ifndef ONCE_COMMON_ERR_H_
#define ONCE_COMMON_ERR_H_

#include <stddef.h>

/* Every message buffer has this size, NUL included (RAFT_ERRMSG_BUF_SIZE). */
#define ERR_MSG_SIZE 256

/* The modules' ranges: codes of module M are M_BASE-1 .. M_BASE-99. */
#define ERR_FSM_BASE      (-1100)
#define ERR_ENTRY_BASE    (-1200)
#define ERR_REPLICA_BASE  (-1300)
#define ERR_IDENTITY_BASE (-1400)
#define ERR_RPC_BASE      (-1500)
#define ERR_TLS_BASE      (-1600)
#define ERR_ACCESS_BASE   (-1700)
#define ERR_HTTP_BASE     (-1800)
#define ERR_VERIFY_BASE   (-2000)
#define ERR_INGRESS_BASE  (-2100)

/* The single table: X(name, value, text). Each module's header declares its
 * enum from its part with ERR_ENUM, so the numbers live here only. */
#define ERR_FSM_CODES(X)                                                \
    X(FSM_E_MALFORMED, -1101, "malformed batch or snapshot")            \
    X(FSM_E_SCHEMA, -1102, "newer schema version than this node knows") \
    X(FSM_E_CHECKSUM, -1103, "snapshot checksum mismatch")              \
    X(FSM_E_TOOBIG, -1104, "over a size limit")                         \
    X(FSM_E_BUSY, -1105, "a frozen view is live")

#define ERR_ENTRY_CODES(X)                              \
    X(ENTRY_E_MALFORMED, -1201, "not an entry of ours") \
    X(ENTRY_E_TOOBIG, -1202, "batch over 1 MiB")        \
    X(ENTRY_E_NOMEM, -1203, "out of memory")

#define ERR_REPLICA_CODES(X)                                                  \
    X(REPLICA_E_NOTLEADER, -1301,                                             \
      "not the leader, or not ready yet (not applied)")                       \
    X(REPLICA_E_BUSY, -1302, "busy: queue full or one running (not applied)") \
    X(REPLICA_E_UNKNOWN, -1303,                                               \
      "outcome unknown: leadership lost after proposing")                     \
    X(REPLICA_E_SHUTDOWN, -1304, "shutting down (not applied)")               \
    X(REPLICA_E_TOOBIG, -1305, "too big: over the batch size (not applied)")  \
    X(REPLICA_E_INVALID, -1306, "invalid: does not encode (not applied)")     \
    X(REPLICA_E_NOMEM, -1307, "out of memory (not applied)")                  \
    X(REPLICA_E_PRECONDITION, -1308,                                          \
      "failed precondition, e.g. a retired id (not applied)")                 \
    X(REPLICA_E_INTERNAL, -1309,                                              \
      "entry did not decode: committed, did nothing")                         \
    X(REPLICA_E_START, -1310, "libraft did not set up or start")

#define ERR_IDENTITY_CODES(X)                                            \
    X(IDENTITY_E_TOMBSTONE, -1401, "the directory holds a removed node") \
    X(IDENTITY_E_CORRUPT, -1402, "node-id is not a valid id")            \
    X(IDENTITY_E_IO, -1403, "a system call failed")                      \
    X(IDENTITY_E_INVALID, -1404, "bad argument")

#define ERR_RPC_CODES(X)                                                    \
    X(RPC_E_EMPTY, -1501, "empty frame")                                    \
    X(RPC_E_TOOBIG, -1502, "frame over the size limit")                     \
    X(RPC_E_MALFORMED, -1503, "malformed message")                          \
    X(RPC_E_BUDGET, -1504, "message too expensive to decode")               \
    X(RPC_E_ID, -1505, "cluster or boot id of the wrong length")            \
    X(RPC_E_STRING, -1506, "text field too long or with a NUL byte")        \
    X(RPC_E_ENUM, -1507, "unknown enum value")                              \
    X(RPC_E_DEADLINE, -1508, "deadline too long")                           \
    X(RPC_E_FIELDS, -1509, "inconsistent envelope fields")                  \
    X(RPC_E_NOSPACE, -1510, "buffer too small")                             \
    X(RPC_E_LIMIT, -1511, "invalid frame size limit")                       \
    X(RPC_E_NOMEM, -1512, "out of memory")                                  \
    X(RPC_E_ADDR, -1520, "address is not IPv4 IP:PORT")                     \
    X(RPC_E_LISTEN, -1521, "cannot listen")                                 \
    X(RPC_E_CONNECT, -1522, "cannot connect (not sent)")                    \
    X(RPC_E_LOST, -1523, "connection lost after sending (outcome unknown)") \
    X(RPC_E_TIMEOUT, -1524, "no answer within the timeout")                 \
    X(RPC_E_CLOSED, -1525, "channel closed")                                \
    X(RPC_E_BUSY, -1526, "too many calls in flight (not sent)")             \
    X(RPC_E_PROTOCOL, -1527,                                                \
      "the peer sent an invalid or connection-level error frame")

#define ERR_TLS_CODES(X)                                              \
    X(TLS_E_CONFIG, -1601, "certificate, key or CA file refused")     \
    X(TLS_E_HANDSHAKE, -1602, "TLS handshake failed")                 \
    X(TLS_E_NOT_TLS, -1603, "the peer did not start a TLS handshake") \
    X(TLS_E_CLOSED, -1604, "the peer closed the TLS session")         \
    X(TLS_E_PEER, -1605, "the peer certificate is not allowed here")  \
    X(TLS_E_NOMEM, -1606, "out of memory")                            \
    X(TLS_E_IO, -1607, "TLS record error after the handshake")        \
    X(TLS_E_FRAME, -1608, "a Raft message breaks its framing or a bound")

#define ERR_ACCESS_CODES(X)                                           \
    X(ACCESS_E_IO, -1701, "the access file cannot be read")           \
    X(ACCESS_E_TOOBIG, -1702, "the access file is over a size limit") \
    X(ACCESS_E_SYNTAX, -1703, "the access file is not valid JSON")    \
    X(ACCESS_E_INVALID, -1704, "the access file breaks a rule")       \
    X(ACCESS_E_NOMEM, -1705, "out of memory")                         \
    X(ACCESS_E_DENIED, -1706, "permission denied")                    \
    X(ACCESS_E_CERT, -1707, "a caller certificate does not decode")

#define ERR_HTTP_CODES(X)                                \
    X(HTTP_E_ADDR, -1801, "address is not IPv4 IP:PORT") \
    X(HTTP_E_LISTEN, -1802, "socket/bind/listen failed") \
    X(HTTP_E_ROUTES, -1803, "bad route table")           \
    X(HTTP_E_MHD, -1804, "libmicrohttpd did not start")  \
    X(HTTP_E_NOMEM, -1805, "out of memory")

#define ERR_VERIFY_CODES(X)                                                   \
    X(VERIFY_E_ENCODING, -2001, "not canonical base64")                       \
    X(VERIFY_E_TOOBIG, -2002, "decodes over its buffer")                      \
    X(VERIFY_E_TIMESTAMP, -2003, "timestamp is not 1..12 digits")             \
    X(VERIFY_E_HEADER, -2004, "signature header malformed or over its bound") \
    X(VERIFY_E_ID, -2005, "message id missing, too long or not printable")    \
    X(VERIFY_E_BODY, -2006, "body is not JSON")                               \
    X(VERIFY_E_SECRET, -2007, "secret does not parse")                        \
    X(VERIFY_E_DUPLICATE, -2008, "the same secret twice")                     \
    X(VERIFY_E_SIGNATURE, -2009, "no signature matches any secret")           \
    X(VERIFY_E_CRYPTO, -2010, "OpenSSL failed")                               \
    X(VERIFY_E_NOMEM, -2011, "out of memory")

#define ERR_INGRESS_CODES(X)                                     \
    X(INGRESS_E_CONFIG, -2101, "bad flag or configuration")      \
    X(INGRESS_E_SECRETS, -2102, "secrets unreadable or invalid") \
    X(INGRESS_E_LISTEN, -2103, "could not listen")               \
    X(INGRESS_E_UPSTREAM, -2104, "upstream request failed")      \
    X(INGRESS_E_NOMEM, -2105, "out of memory")

/* Every module's codes, for a walk over all of them (err.c, tests). One
 * module a line; clang-format 14 does not settle on a layout for it. */
/* clang-format off */
#define ERR_CODES(X)      \
    ERR_FSM_CODES(X)      \
    ERR_ENTRY_CODES(X)    \
    ERR_REPLICA_CODES(X)  \
    ERR_IDENTITY_CODES(X) \
    ERR_RPC_CODES(X)      \
    ERR_TLS_CODES(X)      \
    ERR_ACCESS_CODES(X)   \
    ERR_HTTP_CODES(X)     \
    ERR_VERIFY_CODES(X)   \
    ERR_INGRESS_CODES(X)
/* clang-format on */

#define ERR_ENUM(name, value, text) name = (value),

/* The name of a module code ("FSM_E_MALFORMED"), or NULL for any other
 * value (errno values and raft codes have their own names). */
const char *err_name(int code);

/* The module owning @code ("fsm", "rpc", ...), "errno" for -1..-999,
 * "raft" for positive codes, NULL for 0 and unknown codes. */
const char *err_module(int code);

/* A short text for any code: the table's text, or strerror(-code) for an
 * errno value. Never NULL. libonce links this file and not libraft, so a
 * positive (RAFT_*) code gives "libraft error": call raft_strerror for
 * those where libraft is linked. */
const char *err_str(int code);

/* Format into @msg (ERR_MSG_SIZE bytes; NULL: nothing). */
void err_printf(char *msg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix @msg with a formatted context and ": " (NULL: nothing), e.g.
 * err_wrapf(msg, "open %s", path) turns "No such file" into "open x: No
 * such file". */
void err_wrapf(char *msg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* ONCE_COMMON_ERR_H_ */
