/* client/admin.c: the admin calls of libonce (include/once.h): status,
 * members, transfer, snapshot. Each is an op run by op.c (client_int.h):
 * status is served by each node itself (never redirected by a hint) and
 * may be asked of one given node; the admin writes carry no request id,
 * so they are not retried once they may have applied. */
#include <stdlib.h>
#include <string.h>

#include "client/client_int.h"

/* ------------------------------------------------------------------------
 * Admin
 * ---------------------------------------------------------------------- */

/* An admin op with an optional body already packed. */
static int admin_call(once_client *c,
                      enum rpc_method method,
                      bool write,
                      int (*packer)(struct op *op, const void *arg),
                      const void *arg,
                      const struct client_outputs *out,
                      uint32_t timeout_ms,
                      struct once_result *r)
{
    struct op *op = op_new(c, method, write);

    if (op == NULL || (packer != NULL && packer(op, arg) != 0)) {
        if (op != NULL) {
            op_free(op);
        }
        return client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED,
                                 "out of memory");
    }
    if (out != NULL) {
        op->out = *out;
    }
    return op_run_sync(op, timeout_ms, r);
}

static int status_call(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       bool digest,
                       struct once_status_info *out,
                       struct once_result *r);

int once_status(once_client *c,
                const char *addr,
                uint32_t timeout_ms,
                struct once_status_info *out,
                struct once_result *r)
{
    return status_call(c, addr, timeout_ms, false, out, r);
}

int once_status_digest(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       struct once_status_info *out,
                       struct once_result *r)
{
    return status_call(c, addr, timeout_ms, true, out, r);
}

static int status_call(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       bool digest,
                       struct once_status_info *out,
                       struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct client_outputs o = {0};
    struct op *op;
    size_t node = 0;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (out == NULL) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, "out: NULL");
    }
    memset(out, 0, sizeof *out);
    if (!client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    if (addr != NULL) {
        size_t len = strnlen(addr, ONCE_ADDR_MAX + 1);

        for (node = 0; node < c->n_nodes; node++) {
            if (len <= ONCE_ADDR_MAX &&
                strcmp(c->nodes[node].addr, addr) == 0) {
                break;
            }
        }
        if (node == c->n_nodes) {
            return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                     "addr: not one of the client's addresses");
        }
    }
    op = op_new(c, RPC_METHOD_STATUS, false);
    if (op == NULL ||
        (digest && client_pack_status(true, &op->body, &op->body_len) != 0)) {
        if (op != NULL) {
            op_free(op);
        }
        return client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED,
                                 "out of memory");
    }
    op->no_hint = true;
    if (addr != NULL) {
        op->one_node = true;
        op->node = node;
    }
    o.status = out;
    op->out = o;
    return op_run_sync(op, timeout_ms, r);
}

int once_members_list(once_client *c,
                      uint32_t timeout_ms,
                      struct once_member *out,
                      size_t *n_out,
                      struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct client_outputs o = {0};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (out == NULL || n_out == NULL) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                 out == NULL ? "out: NULL" : "n_out: NULL");
    }
    *n_out = 0;
    if (!client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    o.members = out;
    o.n_members = n_out;
    return admin_call(c, RPC_METHOD_MEMBERS_LIST, false, NULL, NULL, &o,
                      timeout_ms, r);
}

static int pack_member_add(struct op *op, const void *arg)
{
    return client_pack_member_add(arg, &op->body, &op->body_len);
}

int once_members_add(once_client *c,
                     const struct once_member *m,
                     uint32_t timeout_ms,
                     struct once_result *r)
{
    char err[ERR_MSG_SIZE];

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_member(m, err) ||
        !client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    return admin_call(c, RPC_METHOD_MEMBERS_ADD, true, pack_member_add, m, NULL,
                      timeout_ms, r);
}

struct id_args
{
    enum rpc_method method;
    uint64_t id;
    enum once_role role;
    bool force;
};

static int pack_id(struct op *op, const void *arg)
{
    const struct id_args *a = arg;

    return client_pack_id(a->method, a->id, a->role, a->force, &op->body,
                          &op->body_len);
}

/* Remove or assign member @a->id (not 0; assign: with a valid role). */
static int member_id_call(once_client *c,
                          const struct id_args *a,
                          uint32_t timeout_ms,
                          struct once_result *r)
{
    char err[ERR_MSG_SIZE];

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (a->id == 0) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                 "id: must not be 0");
    }
    if ((a->method == RPC_METHOD_MEMBERS_ASSIGN &&
         !client_check_role(a->role, err)) ||
        !client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    return admin_call(c, a->method, true, pack_id, a, NULL, timeout_ms, r);
}

int once_members_remove(once_client *c,
                        uint64_t id,
                        uint32_t timeout_ms,
                        struct once_result *r)
{
    return once_members_remove_flags(c, id, 0, timeout_ms, r);
}

int once_members_remove_flags(once_client *c,
                              uint64_t id,
                              unsigned flags,
                              uint32_t timeout_ms,
                              struct once_result *r)
{
    struct id_args a = {RPC_METHOD_MEMBERS_REMOVE, id, ONCE_ROLE_NONE,
                        (flags & ONCE_MEMBERS_FORCE) != 0};

    return member_id_call(c, &a, timeout_ms, r);
}

int once_members_assign(once_client *c,
                        uint64_t id,
                        enum once_role role,
                        uint32_t timeout_ms,
                        struct once_result *r)
{
    return once_members_assign_flags(c, id, role, 0, timeout_ms, r);
}

int once_members_assign_flags(once_client *c,
                              uint64_t id,
                              enum once_role role,
                              unsigned flags,
                              uint32_t timeout_ms,
                              struct once_result *r)
{
    struct id_args a = {RPC_METHOD_MEMBERS_ASSIGN, id, role,
                        (flags & ONCE_MEMBERS_FORCE) != 0};

    return member_id_call(c, &a, timeout_ms, r);
}

int once_transfer(once_client *c,
                  uint64_t id,
                  uint32_t timeout_ms,
                  uint64_t *new_leader,
                  struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct id_args a = {RPC_METHOD_TRANSFER, id, ONCE_ROLE_NONE};
    struct client_outputs o = {0};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (new_leader != NULL) {
        *new_leader = 0;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    o.u64_a = new_leader;
    return admin_call(c, a.method, true, pack_id, &a, &o, timeout_ms, r);
}

int once_snapshot_take(once_client *c,
                       uint32_t timeout_ms,
                       uint64_t *index,
                       uint64_t *size_bytes,
                       struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct client_outputs o = {0};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (index != NULL) {
        *index = 0;
    }
    if (size_bytes != NULL) {
        *size_bytes = 0;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    o.u64_a = index;
    o.u64_b = size_bytes;
    return admin_call(c, RPC_METHOD_SNAPSHOT_TAKE, true, NULL, NULL, &o,
                      timeout_ms, r);
}

/* ------------------------------------------------------------------------
 * Backups
 * ---------------------------------------------------------------------- */

struct backup_args
{
    enum rpc_method method;
    uint64_t id;
    uint64_t offset;
    uint32_t max_bytes;
};

static int pack_backup(struct op *op, const void *arg)
{
    const struct backup_args *a = arg;

    return client_pack_backup(a->method, a->id, a->offset, a->max_bytes,
                              &op->body, &op->body_len);
}

/* The common start of the backup and quota calls: ONCE_STATUS_OK to go
 * on, else r->status. */
static int admin_begin(once_client *c,
                       uint32_t timeout_ms,
                       struct once_result *r)
{
    char err[ERR_MSG_SIZE];

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    return ONCE_STATUS_OK;
}

int once_backup_open(once_client *c,
                     uint32_t timeout_ms,
                     uint64_t *backup_id,
                     struct once_result *r)
{
    struct client_outputs o = {0};
    int rv;

    if (backup_id != NULL) {
        *backup_id = 0;
    }
    rv = admin_begin(c, timeout_ms, r);
    if (rv != ONCE_STATUS_OK) {
        return rv;
    }
    o.u64_a = backup_id;
    /* A write: a lost answer leaves a backup the leader removes when it
     * times out, never a second one opened by a blind retry. */
    return admin_call(c, RPC_METHOD_BACKUP_OPEN, true, NULL, NULL, &o,
                      timeout_ms, r);
}

int once_backup_read(once_client *c,
                     uint64_t backup_id,
                     uint64_t offset,
                     uint8_t *buf,
                     size_t cap,
                     uint32_t timeout_ms,
                     bool *ready,
                     uint64_t *total,
                     size_t *n,
                     struct once_result *r)
{
    struct backup_args a = {RPC_METHOD_BACKUP_READ, backup_id, offset, 0};
    struct client_outputs o = {0};
    int rv;

    rv = admin_begin(c, timeout_ms, r);
    if (rv != ONCE_STATUS_OK) {
        return rv;
    }
    if (backup_id == 0 || buf == NULL || cap == 0 ||
        cap > ONCE_BACKUP_READ_MAX || ready == NULL || total == NULL ||
        n == NULL) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                 "backup read: id, buffer (1..256 KiB) and "
                                 "outputs are required");
    }
    a.max_bytes = (uint32_t)cap;
    o.buf = buf;
    o.buf_cap = cap;
    o.buf_n = n;
    o.ready = ready;
    o.u64_a = total;
    *ready = false;
    *total = 0;
    *n = 0;
    return admin_call(c, RPC_METHOD_BACKUP_READ, false, pack_backup, &a, &o,
                      timeout_ms, r);
}

int once_backup_close(once_client *c,
                      uint64_t backup_id,
                      uint32_t timeout_ms,
                      struct once_result *r)
{
    struct backup_args a = {RPC_METHOD_BACKUP_CLOSE, backup_id, 0, 0};
    int rv = admin_begin(c, timeout_ms, r);

    if (rv != ONCE_STATUS_OK) {
        return rv;
    }
    if (backup_id == 0) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                 "backup id: must not be 0");
    }
    return admin_call(c, RPC_METHOD_BACKUP_CLOSE, true, pack_backup, &a, NULL,
                      timeout_ms, r);
}

/* ------------------------------------------------------------------------
 * Quotas and the log schema
 * ---------------------------------------------------------------------- */

struct quota_args
{
    const char *pattern;
    size_t len;
    uint64_t max_records;
    uint64_t max_bytes;
    bool remove;
};

static int pack_quota(struct op *op, const void *arg)
{
    const struct quota_args *a = arg;

    return client_pack_quota_set(a->pattern, a->len, a->max_records,
                                 a->max_bytes, a->remove, &op->body,
                                 &op->body_len);
}

static int quota_call(once_client *c,
                      struct quota_args *a,
                      uint32_t timeout_ms,
                      struct once_result *r)
{
    int rv = admin_begin(c, timeout_ms, r);

    if (rv != ONCE_STATUS_OK) {
        return rv;
    }
    a->len = a->pattern != NULL ? strnlen(a->pattern, ONCE_PATTERN_MAX + 1) : 0;
    if (a->len < 1 || a->len > ONCE_PATTERN_MAX) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                 "pattern: must be 1..129 bytes");
    }
    return admin_call(c, RPC_METHOD_QUOTA_SET, true, pack_quota, a, NULL,
                      timeout_ms, r);
}

int once_quota_set(once_client *c,
                   const char *pattern,
                   uint64_t max_records,
                   uint64_t max_bytes,
                   uint32_t timeout_ms,
                   struct once_result *r)
{
    struct quota_args a = {pattern, 0, max_records, max_bytes, false};

    return quota_call(c, &a, timeout_ms, r);
}

int once_quota_remove(once_client *c,
                      const char *pattern,
                      uint32_t timeout_ms,
                      struct once_result *r)
{
    struct quota_args a = {pattern, 0, 0, 0, true};

    return quota_call(c, &a, timeout_ms, r);
}

int once_quota_list(once_client *c,
                    uint32_t timeout_ms,
                    struct once_quota *out,
                    size_t *n_out,
                    struct once_result *r)
{
    struct client_outputs o = {0};
    int rv = admin_begin(c, timeout_ms, r);

    if (rv != ONCE_STATUS_OK) {
        return rv;
    }
    if (out == NULL || n_out == NULL) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                                 "out, n_out: NULL");
    }
    *n_out = 0;
    o.quotas = out;
    o.n_quotas = n_out;
    return admin_call(c, RPC_METHOD_QUOTA_LIST, false, NULL, NULL, &o,
                      timeout_ms, r);
}

static int pack_upgrade(struct op *op, const void *arg)
{
    return client_pack_schema_upgrade(*(const uint32_t *)arg, &op->body,
                                      &op->body_len);
}

int once_schema_upgrade(once_client *c,
                        uint32_t target,
                        uint32_t timeout_ms,
                        uint32_t *schema,
                        struct once_result *r)
{
    struct client_outputs o = {0};
    int rv = admin_begin(c, timeout_ms, r);

    if (schema != NULL) {
        *schema = 0;
    }
    if (rv != ONCE_STATUS_OK) {
        return rv;
    }
    o.schema = schema;
    return admin_call(c, RPC_METHOD_SCHEMA_UPGRADE, true, pack_upgrade, &target,
                      &o, timeout_ms, r);
}
