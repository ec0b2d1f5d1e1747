/* raft/replica_int.h: what the files of the Raft layer share and nothing
 * above it uses (replica.h is the layer's public API). As canonical raft's
 * src/uv.h is to its include/raft.h: tests of the layer may include it;
 * src/server, src/http, src/cli, src/client and src/ingress may not
 * (scripts/check-layers: a *_int.h is included only from its own folder).
 *
 * Everything runs on the raft loop thread, like replica.h. */
#ifndef ONCE_RAFT_REPLICA_INT_H_
#define ONCE_RAFT_REPLICA_INT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "fsm/fsm.h"
#include "raft/replica.h"

/* Never a node's id (identity.c does not make it): the spare that a
 * configuration refresh adds and removes again. */
#define REPLICA_REFRESH_ID   UINT64_MAX
#define REPLICA_REFRESH_ADDR "127.255.255.254:1"

/* Called after every callback into raft (rio's event hook) and after the
 * layer's own calls into it (replica_start, member.c). */
void replica_poll(struct replica *rep);

/* The view may be free again: start a waiting digest (from replica_poll). */
void replica_digest_poll(struct replica *rep);
/* rio's install_ready: no digest holds the view. */
bool replica_digest_idle(void *arg);
/* Closing: waiting digests get REPLICA_E_SHUTDOWN. */
void replica_digest_fail_all(struct replica *rep);

/* --- shared by replica.c, adapter.c, pipeline.c, member.c, digest.c ----- */
void replica_logf(struct replica *rep, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void replica_fatal(struct replica *rep,
                   const char *what,
                   int status,
                   const char *msg);
void adapter_setup(struct replica *rep);
/* raft_init refuses an fsm with snapshot_async over an io of version < 2,
 * which the 0.15 fixture's is: the fixture path grows servers without it
 * and sets it once rio (version 2) is in place; raft reads it per snapshot.
 */
void adapter_set_async(struct replica *rep, bool on);
/* Apply the snapshot policy's current decision to raft (after configure). */
void adapter_policy_apply(struct replica *rep);
/* The payload of a raft snapshot of state @f (any instance, read only)
 * with applied-entry digest @digest, as the adapter writes and restores
 * it, in a raft_malloc'd buffer at @out: 0 or RAFT_NOMEM. What a restored
 * cluster's first snapshot holds (replica_seed). */
int adapter_snapshot_of(const struct fsm *f,
                        uint64_t digest,
                        struct raft_buffer *out);
/* rio's install_work: build the state machine of @snap (pool thread). */
int adapter_install_work(void *arg, const struct raft_snapshot *snap);
/* Free what the adapter holds (replica_close, after raft closed). */
void adapter_close(struct replica *rep);
/* The adapter reports each command's outcome of entry @index. */
void pipeline_emit(struct replica *rep,
                   raft_index index,
                   size_t i,
                   const struct fsm_result *res);
void pipeline_fail_all(struct replica *rep, int status);
void member_poll(struct replica *rep);
void member_fail(struct replica *rep, int status, const char *msg);

#endif /* ONCE_RAFT_REPLICA_INT_H_ */
