/* fuzz_access: libFuzzer target for the access file parser
 * (src/server/access.c), the one file an operator edits by hand and a
 * running node reads again on SIGHUP.
 *
 * Input: the file's bytes. Besides "no crash, no leak, no UB", an accepted
 * file is checked against the rules access.h states: at most
 * ACCESS_IDENTITIES_MAX identities; each with a known kind and role, a
 * match text that starts with its kind's prefix and a value within
 * ACCESS_MATCH_MAX; scopes only for role client and there 1..256 of them,
 * each 1..128 bytes with '*' only as the last byte; raft_addrs only for
 * role member and there 1..64 of them, each an IPv4 "IP:PORT" of at most
 * ACCESS_ADDR_MAX bytes in the directory's spelling. Every scope pattern of
 * an accepted file then allows the scope it names (the pattern without its
 * '*'). A refusal must say why (a non-empty message).
 *
 * Run: ./tests/fuzz/fuzz_access -max_total_time=60 -dict=tests/fuzz/access.dict
 * WORKDIR tests/fuzz/corpus/access */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "server/access.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_identity(const struct access_identity *id)
{
    static const char *const prefix[] = {"", "uri:", "dns:", "cn:"};

    if (id->kind < ACCESS_MATCH_URI || id->kind > ACCESS_MATCH_CN ||
        id->role < ACCESS_ROLE_CLIENT || id->role > ACCESS_ROLE_MEMBER ||
        strncmp(id->text, prefix[id->kind], strlen(prefix[id->kind])) != 0 ||
        id->value != id->text + strlen(prefix[id->kind]) ||
        strlen(id->value) > ACCESS_MATCH_MAX || id->value[0] == '\0') {
        abort();
    }
    if ((id->role == ACCESS_ROLE_CLIENT) !=
            (id->n_scopes >= 1 && id->n_scopes <= ACCESS_SCOPES_MAX) ||
        (id->role != ACCESS_ROLE_CLIENT && id->n_scopes != 0)) {
        abort();
    }
    if ((id->role != ACCESS_ROLE_MEMBER && id->n_raft_addrs != 0) ||
        id->n_raft_addrs > ACCESS_RAFT_ADDRS_MAX) {
        abort();
    }
    for (size_t j = 0; j < id->n_raft_addrs; j++) {
        if (strlen(id->raft_addrs[j]) > ACCESS_ADDR_MAX ||
            !addr_parse_ipv4(id->raft_addrs[j], ADDR_PORT_CANONICAL, NULL)) {
            abort();
        }
    }
    for (size_t j = 0; j < id->n_scopes; j++) {
        const char *p = id->scopes[j];
        size_t n = strlen(p);
        const char *star = strchr(p, '*');
        size_t base = star != NULL ? n - 1 : n;

        if (n == 0 || (star != NULL && star != p + n - 1) ||
            base > ACCESS_SCOPE_MAX || (base == 0 && star == NULL)) {
            abort();
        }
        if (!access_scope_allowed(id, (const uint8_t *)p, base) && base > 0) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct access *a = NULL;
    char msg[ERR_MSG_SIZE];
    int rv;

    msg[0] = '\0';
    rv = access_parse((const char *)data, size, &a, msg);
    if (rv != 0) {
        if (a != NULL || msg[0] == '\0') {
            abort();
        }
        return 0;
    }
    if (a->n > ACCESS_IDENTITIES_MAX) {
        abort();
    }
    for (size_t i = 0; i < a->n; i++) {
        check_identity(&a->ids[i]);
    }
    if (access_match(a, NULL) != NULL) {
        abort();
    }
    access_free(a);
    return 0;
}
