/* server/leader.c: where the current leader is (leader.h). */
#include "server/leader.h"

#include <stdio.h>

#include "server/server.h"

bool leader_addr(struct server *s, uint64_t *id, char *buf)
{
    uint64_t lid = 0;
    const char *raddr = NULL;
    const struct fsm *f = s->rep.fsm;

    buf[0] = '\0';
    *id = 0;
    if (s->raft_closed || f == NULL) {
        return false;
    }
    replica_leader(&s->rep, &lid, &raddr);
    *id = lid;
    if (lid == 0) {
        return false;
    }
    if (lid == s->id) {
        snprintf(buf, RPC_ADDR_MAX + 1, "%s", s->cfg.client_addr);
        return true;
    }
    for (size_t i = 0; i < fsm_n_members(f); i++) {
        const struct fsm_member *m = fsm_member(f, i);
        if (m->id == lid && m->client_addr[0] != '\0') {
            snprintf(buf, RPC_ADDR_MAX + 1, "%s", m->client_addr);
            return true;
        }
    }
    return false;
}
