/* server/backup.h: Admin.BackupOpen / BackupRead / BackupClose on the ready
 * leader (docs/server.md, "Backups"; the file format is fsm/backup_file.h).
 *
 * Open freezes the state machine (bounded time on the loop: fsm_freeze
 * copies no record) through replica_view_work, and encodes the view on
 * raft's thread pool straight into DIR/backup-<id>.tmp (space reserved
 * with posix_fallocate first, then written through a shared mapping, so a
 * full disk is an error, never a SIGBUS). The frozen view, which costs the
 * pages apply copies meanwhile, is held only while encoding; then Read
 * serves the file in chunks (pread on the loop, at most BACKUP_READ_MAX
 * bytes a call) and Close removes it.
 *
 * Bounds: BACKUP_OPEN_MAX backups at once (RESOURCE_EXHAUSTED beyond); one
 * that nobody read for --backup-idle-timeout (default BACKUP_IDLE_MS) after
 * it was encoded is removed (a client that died); every file is removed at
 * the node's stop, and stale ones (a crash) at its start.
 *
 * Ownership: struct backups is the server's; each session is a heap record
 * owned by it, and while its encoding runs, also by the view work, whose
 * callback frees a session closed meanwhile. Loop thread only, but for the
 * encoder, which touches only its session's file, info and message. */
#ifndef ONCE_SERVER_BACKUP_H_
#define ONCE_SERVER_BACKUP_H_

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "rpc/conn.h"
#include "server/service.h"

#define BACKUP_OPEN_MAX 2
#define BACKUP_IDLE_MS  60000 /* the default of --backup-idle-timeout */
#define BACKUP_READ_MAX (256u << 10)

struct server;
struct backup_sess;

struct backups
{
    struct server *s;
    struct backup_sess *head;
    unsigned n;
    uv_timer_t timer;
    bool timer_up;
};

/* Set up (the loop is running; stale backup files of DIR are removed). */
void backups_init(struct backups *b, struct server *s);
/* Stopping: remove every file; sessions still encoding are freed by their
 * work's callback. Closes the timer. */
void backups_close(struct backups *b);
/* Backups held now (status). */
unsigned backups_open(const struct backups *b);

void admin_backup_open(struct server *s,
                       struct rpc_call *call,
                       const ProtobufCMessage *msg,
                       const struct service_in *in);
void admin_backup_read(struct server *s,
                       struct rpc_call *call,
                       const ProtobufCMessage *msg,
                       const struct service_in *in);
void admin_backup_close(struct server *s,
                        struct rpc_call *call,
                        const ProtobufCMessage *msg,
                        const struct service_in *in);

#endif /* ONCE_SERVER_BACKUP_H_ */
