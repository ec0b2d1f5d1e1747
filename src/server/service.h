/* server/service.h: the RPC methods' dispatch (docs/server.md, "Serving a
 * call").
 *
 * One table (service.c) lists every method of docs/design.md §5 with the
 * checks it passes and its handler:
 *
 *   flags   where it is served: SERVICE_LOCAL by the receiving node itself
 *           (Status); SERVICE_LEADER only on the ready leader with a
 *           bootstrapped fsm, and with SERVICE_FORWARD forwarded there from
 *           any other node (forward.h); SERVICE_ADMIN marks the operator's
 *           methods for the reader only: no code reads it, because who
 *           may call a method is decided by the rights table (authz.c),
 *           before the method is served or forwarded;
 *   check   the bounds any node can check before serving or forwarding
 *           (convert.h: those that do not depend on the cluster settings);
 *           it also converts the body into struct service_in;
 *   serve   the handler, given the checked body and its conversion.
 *
 * Loop thread only. */
#ifndef ONCE_SERVER_SERVICE_H_
#define ONCE_SERVER_SERVICE_H_

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "fsm/fsm.h"
#include "rpc/conn.h"
#include "server/authz.h"

struct server;

enum {
    SERVICE_LOCAL = 1u << 0,   /* answered by the receiving node */
    SERVICE_LEADER = 1u << 1,  /* the ready leader, fsm bootstrapped */
    SERVICE_FORWARD = 1u << 2, /* elsewhere: forwarded to the leader */
    SERVICE_ADMIN = 1u << 3,   /* an operator's method (not read: authz.c) */
};

/* A checked request body, converted; borrows from the body (valid while
 * the handler runs). */
struct service_in
{
    struct fsm_cmd cmd;        /* Claim, Complete, Release, Lookup, Forget */
    const uint8_t *request_id; /* Claim, Complete, Release; else NULL */
    struct fsm_member member;  /* MembersAdd */
    bool leader_only;          /* Lookup: the caller asks the leader */
    /* Who calls, once authorized (service.c): ClaimBatch authorizes each
     * item's scope as this caller. */
    struct authz_caller who;
};

typedef int (*service_check_fn)(const ProtobufCMessage *msg,
                                struct service_in *in,
                                char *why);
typedef void (*service_serve_fn)(struct server *s,
                                 struct rpc_call *call,
                                 const ProtobufCMessage *msg,
                                 const struct service_in *in);

struct service_method
{
    enum rpc_method method;
    unsigned flags;         /* SERVICE_* */
    service_check_fn check; /* NULL: nothing to check */
    service_serve_fn serve;
};

/* The RPC server's serve callback (rpc_server_config.serve; @arg the
 * server). Answers every call exactly once, now or later. */
void service_serve(void *arg, struct rpc_call *call, struct envelope_view *req);

/* The record commands' spare ops (service.c keeps freed ones for the next
 * commands): set up before the first call is served, freed after
 * replica_close, which ends every op. */
void service_init(struct server *s);
void service_close(struct server *s);

#endif /* ONCE_SERVER_SERVICE_H_ */
