/* Configuration commands and batch envelopes: docs/state-machine.md "Log
 * entries", "Before bootstrap", "Configuration commands". Loop tests run once
 * per path (_i: FH_DIRECT, FH_PROTOBUF). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *config_suite(void);

#define W  300000ull /* fh_settings() max_window */
#define K  60000ull  /* fh_settings() max_skew */
#define T1 (FH_T0 + 1000ull)

static void boot(struct fh *h, int path)
{
    struct fsm_settings s;

    fh_settings(&s);
    fh_init_booted(h, path, &s, FH_T0);
}

static bool settings_eq(const struct fsm_settings *a,
                        const struct fsm_settings *b)
{
    return a->max_window_ms == b->max_window_ms &&
           a->max_skew_ms == b->max_skew_ms && a->max_ttl_ms == b->max_ttl_ms &&
           a->max_lease_ms == b->max_lease_ms &&
           a->max_records == b->max_records && a->max_bytes == b->max_bytes;
}

/* The member with @id in the directory, or NULL. */
static const struct fsm_member *find_member(const struct fsm *f, uint64_t id)
{
    for (size_t i = 0; i < fsm_n_members(f); i++) {
        const struct fsm_member *m = fsm_member(f, i);

        ck_assert_ptr_nonnull(m);
        if (m->id == id) {
            return m;
        }
    }
    return NULL;
}

static enum fsm_outcome set_window(struct fh *h,
                                   uint64_t time,
                                   uint64_t max_window)
{
    struct fsm_settings s = *fsm_settings(h->f);
    struct fsm_cmd cmd;

    s.max_window_ms = max_window;
    cmd = fh_cmd_settings(&s);
    return fh_do(h, time, &cmd, NULL);
}

START_TEST(test_config_before_bootstrap)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_settings s;
    struct fsm_bootstrap *b = malloc(sizeof(*b));
    struct fsm_cmd cmds[9];
    struct fh_res *r = fh_res_array(9);
    struct fsm_token t = fh_token(FH_GROUP_ID, 1, 0);
    size_t i;

    ck_assert_ptr_nonnull(b);
    fh_init(&h, _i);
    ck_assert(!fsm_bootstrapped(h.f));
    fh_settings(&s);
    fh_claim(&c, FSM_KIND_NONCE, "s", "k", 1);
    c.ttl_ms = 1000;
    cmds[0] = fh_cmd_claim(&c);
    cmds[1] = fh_cmd_complete("s", "k", t, "r", 1);
    cmds[2] = fh_cmd_release("s", "k", t, false, NULL, 0);
    cmds[3] = fh_cmd_lookup("s", "k");
    cmds[4] = fh_cmd_forget("s", "k");
    cmds[5] = fh_cmd_settings(&s);
    cmds[6] =
        fh_cmd_member(1, "10.0.0.1:7000", "10.0.0.1:7001", FSM_ROLE_VOTER);
    cmds[7] = fh_cmd_retire(2);
    cmds[8] = fh_cmd_schema(FSM_SCHEMA_VERSION);
    ck_assert_int_eq(fh_apply(&h, FH_T0, cmds, 9, r), 0);
    for (i = 0; i < 9; i++) {
        ck_assert_msg(r[i].outcome == FSM_FAILED_PRECONDITION,
                      "command %zu: %s", i, fsm_outcome_name(r[i].outcome));
        ck_assert(r[i].has_reason);
    }
    ck_assert(!fsm_bootstrapped(h.f));
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_n_members(h.f), 0);
    ck_assert(!fsm_is_retired(h.f, 2));

    fh_bootstrap_cmd(b, &s);
    cmds[0] = fh_cmd_bootstrap(b);
    fh_assert_is(fh_do(&h, FH_T0 + 1, &cmds[0], r), FSM_OK);
    ck_assert(fsm_bootstrapped(h.f));
    free(r);
    free(b);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_bootstrap_once)
{
    struct fh h;
    struct fsm_settings s;
    struct fsm_bootstrap *b = malloc(sizeof(*b));
    struct fsm_cmd cmd;
    struct fh_res r;
    uint8_t want_id[FSM_CLUSTER_ID_LEN];
    size_t i;

    ck_assert_ptr_nonnull(b);
    fh_init(&h, _i);
    fh_settings(&s);
    fh_bootstrap_cmd(b, &s);
    b->n_members = 3;
    for (i = 0; i < 3; i++) {
        b->members[i].id = 10 + i;
        snprintf(b->members[i].raft_addr, sizeof(b->members[i].raft_addr),
                 "10.0.0.%zu:7000", i + 1);
        snprintf(b->members[i].client_addr, sizeof(b->members[i].client_addr),
                 "10.0.0.%zu:7001", i + 1);
        b->members[i].role = FSM_ROLE_VOTER;
    }
    memcpy(want_id, b->cluster_id, sizeof(want_id));
    cmd = fh_cmd_bootstrap(b);
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_OK);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.cmd, FSM_CMD_BOOTSTRAP);
    ck_assert(fsm_bootstrapped(h.f));
    ck_assert_mem_eq(fsm_cluster_id(h.f), want_id, FSM_CLUSTER_ID_LEN);
    ck_assert_uint_eq(fsm_group_id(h.f), FH_GROUP_ID);
    ck_assert_uint_eq(fsm_schema_version(h.f), FSM_SCHEMA_VERSION);
    ck_assert(settings_eq(fsm_settings(h.f), &s));
    ck_assert_uint_eq(fsm_now(h.f), FH_T0);
    ck_assert_uint_eq(fsm_n_members(h.f), 3);
    for (i = 0; i < 3; i++) {
        const struct fsm_member *m = find_member(h.f, 10 + i);
        char addr[32];

        ck_assert_ptr_nonnull(m);
        snprintf(addr, sizeof(addr), "10.0.0.%zu:7000", i + 1);
        ck_assert_str_eq(m->raft_addr, addr);
        snprintf(addr, sizeof(addr), "10.0.0.%zu:7001", i + 1);
        ck_assert_str_eq(m->client_addr, addr);
        ck_assert_int_eq(m->role, FSM_ROLE_VOTER);
    }

    /* A second bootstrap is refused and changes nothing. */
    b->cluster_id[0] = 0x77;
    b->group_id = 9;
    b->settings.max_records = 5;
    b->n_members = 0;
    fh_assert_is(fh_do(&h, FH_T0 + 1, &cmd, &r), FSM_FAILED_PRECONDITION);
    ck_assert(r.has_reason);
    ck_assert_mem_eq(fsm_cluster_id(h.f), want_id, FSM_CLUSTER_ID_LEN);
    ck_assert_uint_eq(fsm_group_id(h.f), FH_GROUP_ID);
    ck_assert(settings_eq(fsm_settings(h.f), &s));
    ck_assert_uint_eq(fsm_n_members(h.f), 3);
    free(b);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_bootstrap_invalid)
{
    struct fh h;
    struct fsm_settings s;
    struct fsm_bootstrap *b = malloc(sizeof(*b));
    struct fsm_cmd cmd;
    struct fh_res r;

    ck_assert_ptr_nonnull(b);
    fh_init(&h, _i);
    fh_settings(&s);

    /* All-zero cluster id. */
    fh_bootstrap_cmd(b, &s);
    memset(b->cluster_id, 0, sizeof(b->cluster_id));
    cmd = fh_cmd_bootstrap(b);
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    ck_assert(!fsm_bootstrapped(h.f));

    /* Group 0. */
    fh_bootstrap_cmd(b, &s);
    b->group_id = 0;
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_INVALID_ARGUMENT);
    ck_assert(!fsm_bootstrapped(h.f));

    /* Settings that fsm_settings_check refuses. */
    fh_bootstrap_cmd(b, &s);
    b->settings.max_window_ms = FSM_MAX_WINDOW_CEIL + 1;
    ck_assert_ptr_nonnull(fsm_settings_check(&b->settings));
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_INVALID_ARGUMENT);
    ck_assert(!fsm_bootstrapped(h.f));

    /* One non-zero byte is enough; then it works. */
    fh_bootstrap_cmd(b, &s);
    memset(b->cluster_id, 0, sizeof(b->cluster_id));
    b->cluster_id[15] = 1;
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_OK);
    ck_assert(fsm_bootstrapped(h.f));
    ck_assert_uint_eq(fsm_cluster_id(h.f)[15], 1);
    free(b);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_defaults)
{
    struct fh h;
    struct fsm_settings def, s;
    struct fsm_bootstrap *b = malloc(sizeof(*b));
    struct fsm_cmd cmd;
    struct fh_res r;

    ck_assert_ptr_nonnull(b);
    memset(&def, 0, sizeof(def));
    fsm_settings_default(&def);
    ck_assert_ptr_null(fsm_settings_check(&def));
    ck_assert_uint_gt(def.max_window_ms, 0);
    ck_assert_uint_gt(def.max_skew_ms, 0);
    ck_assert_uint_gt(def.max_ttl_ms, 0);
    ck_assert_uint_gt(def.max_lease_ms, 0);
    ck_assert_uint_gt(def.max_records, 0);
    ck_assert_uint_gt(def.max_bytes, 0);

    /* All zero: every default. */
    fh_init(&h, _i);
    fh_bootstrap_cmd(b, NULL);
    cmd = fh_cmd_bootstrap(b);
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_OK);
    ck_assert(settings_eq(fsm_settings(h.f), &def));
    fh_close(&h);

    /* Some zero: those take defaults, the others are kept. */
    fh_init(&h, _i);
    memset(&s, 0, sizeof(s));
    s.max_window_ms = 120000;
    s.max_records = 777;
    fh_bootstrap_cmd(b, &s);
    cmd = fh_cmd_bootstrap(b);
    fh_assert_is(fh_do(&h, FH_T0, &cmd, &r), FSM_OK);
    s = def;
    s.max_window_ms = 120000;
    s.max_records = 777;
    ck_assert(settings_eq(fsm_settings(h.f), &s));
    free(b);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_set_settings_lower)
{
    struct fh h;
    struct fsm_settings s;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res r;

    boot(&h, _i);
    fh_settings(&s);
    s.max_window_ms = 100000;
    s.max_skew_ms = 1000;
    s.max_ttl_ms = 86400000;
    s.max_lease_ms = 5000;
    s.max_records = 10;
    s.max_bytes = 1 << 20;
    ck_assert_ptr_null(fsm_settings_check(&s));
    cmd = fh_cmd_settings(&s);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
    ck_assert_int_eq(r.cmd, FSM_CMD_SET_SETTINGS);
    ck_assert(settings_eq(fsm_settings(h.f), &s));

    /* The new bounds apply to the next claims. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    c.ttl_ms = 86400001;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    fh_claim_ts(&c, T1, 100001);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    fh_claim_ts(&c, T1 + 1001, 1000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_FUTURE);
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    fh_claim_ts(&c, T1 + 1000, 1000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + 1000 + 100000 + 1000);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "b", 2);
    c.ttl_ms = 1000;
    c.lease_ms = 5001;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);

    /* Refused settings change nothing. */
    {
        struct fsm_settings bad = s;

        bad.max_skew_ms = FSM_MAX_SKEW_CEIL + 1;
        ck_assert_ptr_nonnull(fsm_settings_check(&bad));
        cmd = fh_cmd_settings(&bad);
        fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
        ck_assert(r.has_reason);
        ck_assert(settings_eq(fsm_settings(h.f), &s));
    }
    fh_close(&h);
}
END_TEST

/* Raising max_window from a to b at T: claims with ts <= T + max_skew keep
 * using a until now > T + max_skew + b. A nonce pruned under a stays STALE. */
START_TEST(test_config_raise_window_fence)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    const uint64_t a = W, b = 2 * W;
    const uint64_t t = T1;            /* the nonce's ts and claim time */
    const uint64_t raise = T1 + 1000; /* log time of the raise */
    const uint64_t fence = raise + K;
    const uint64_t later = t + a + K + 5000; /* n1 is pruned by then */

    boot(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, "s", "n1", 1);
    fh_claim_ts(&c, t, 60000);
    fh_assert_is(fh_do_claim(&h, t, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, t + a + K);

    fh_assert_is(set_window(&h, raise, b), FSM_OK);
    ck_assert_uint_eq(fsm_settings(h.f)->max_window_ms, b);

    fh_tick(&h, later);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    /* Under b alone now - b <= ts would accept it: the fence keeps a. */
    ck_assert_uint_le(later - b, t);
    fh_claim(&c, FSM_KIND_NONCE, "s", "n1", 2);
    fh_claim_ts(&c, t, b);
    fh_assert_is(fh_do_claim(&h, later, &c, &r), FSM_STALE);
    /* At the fence exactly: still a. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "at-fence", 3);
    fh_claim_ts(&c, fence, b);
    ck_assert_uint_lt(fence, later - a);
    fh_assert_is(fh_do_claim(&h, later, &c, &r), FSM_STALE);
    /* Past the fence: b applies. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "past-fence", 4);
    fh_claim_ts(&c, fence + 1, b);
    fh_assert_is(fh_do_claim(&h, later, &c, &r), FSM_ACCEPTED);
    /* Retention of new claims uses the new max_window. */
    ck_assert_uint_eq(r.expires_ms, fence + 1 + b + K);
    /* With a window at most a, the fence changes nothing. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "small", 5);
    fh_claim_ts(&c, later - 1000, 1000);
    fh_assert_is(fh_do_claim(&h, later, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_raise_while_settling)
{
    struct fh h;
    struct fsm_settings s;
    struct fsm_cmd cmd;
    struct fh_res r;
    const uint64_t b = 2 * W, c2 = 3 * W;
    const uint64_t raise = T1;
    const uint64_t settled = raise + K + b; /* settling while now <= this */

    boot(&h, _i);
    fh_assert_is(set_window(&h, raise, b), FSM_OK);
    fh_assert_is(set_window(&h, raise + 1000, c2), FSM_FAILED_PRECONDITION);
    ck_assert_uint_eq(fsm_settings(h.f)->max_window_ms, b);

    /* Changing other bounds is fine meanwhile. */
    s = *fsm_settings(h.f);
    s.max_records = 5000;
    cmd = fh_cmd_settings(&s);
    fh_assert_is(fh_do(&h, raise + 2000, &cmd, &r), FSM_OK);
    ck_assert_uint_eq(fsm_settings(h.f)->max_records, 5000);

    fh_assert_is(set_window(&h, settled, c2), FSM_FAILED_PRECONDITION);
    ck_assert_uint_eq(fsm_settings(h.f)->max_window_ms, b);
    fh_assert_is(set_window(&h, settled + 1, c2), FSM_OK);
    ck_assert_uint_eq(fsm_settings(h.f)->max_window_ms, c2);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_set_member)
{
    struct fh h;
    struct fsm_cmd cmd;
    struct fh_res r;
    const struct fsm_member *m;

    boot(&h, _i);
    ck_assert_uint_eq(fsm_n_members(h.f), 0);
    cmd = fh_cmd_member(1, "10.0.0.1:7000", "10.0.0.1:7001", FSM_ROLE_VOTER);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
    ck_assert_int_eq(r.cmd, FSM_CMD_SET_MEMBER);
    ck_assert_uint_eq(fsm_n_members(h.f), 1);
    m = find_member(h.f, 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->raft_addr, "10.0.0.1:7000");
    ck_assert_str_eq(m->client_addr, "10.0.0.1:7001");
    ck_assert_int_eq(m->role, FSM_ROLE_VOTER);

    /* Update in place. */
    cmd = fh_cmd_member(1, "10.0.0.9:7000", "10.0.0.9:7001", FSM_ROLE_STANDBY);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
    ck_assert_uint_eq(fsm_n_members(h.f), 1);
    m = find_member(h.f, 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->raft_addr, "10.0.0.9:7000");
    ck_assert_str_eq(m->client_addr, "10.0.0.9:7001");
    ck_assert_int_eq(m->role, FSM_ROLE_STANDBY);

    /* 64-byte addresses are the limit. */
    {
        char addr[FSM_ADDR_MAX + 1];

        memset(addr, 'a', FSM_ADDR_MAX);
        addr[FSM_ADDR_MAX] = '\0';
        cmd = fh_cmd_member(2, addr, addr, FSM_ROLE_SPARE);
        fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
        ck_assert_uint_eq(fsm_n_members(h.f), 2);
        m = find_member(h.f, 2);
        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(m->raft_addr, addr);
        ck_assert_int_eq(m->role, FSM_ROLE_SPARE);
    }
    ck_assert_ptr_nonnull(find_member(h.f, 1));
    fh_close(&h);
}
END_TEST

/* id 0, an empty address and a bad role are out of range. */
START_TEST(test_config_set_member_invalid)
{
    struct fh h;
    struct fsm_cmd cmd;
    struct fh_res r;

    boot(&h, FH_DIRECT);
    cmd = fh_cmd_member(0, "10.0.0.1:7000", "10.0.0.1:7001", FSM_ROLE_VOTER);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    cmd = fh_cmd_member(1, "", "10.0.0.1:7001", FSM_ROLE_VOTER);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    cmd = fh_cmd_member(1, "10.0.0.1:7000", "", FSM_ROLE_VOTER);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    cmd = fh_cmd_member(1, "10.0.0.1:7000", "10.0.0.1:7001", (enum fsm_role)0);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    cmd = fh_cmd_member(1, "10.0.0.1:7000", "10.0.0.1:7001", (enum fsm_role)4);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    ck_assert_uint_eq(fsm_n_members(h.f), 0);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_retire_member)
{
    struct fh h;
    struct fsm_cmd cmd;
    struct fh_res r;
    uint64_t id;

    boot(&h, _i);
    for (id = 1; id <= 3; id++) {
        char addr[32];

        snprintf(addr, sizeof(addr), "10.0.0.%llu:7000",
                 (unsigned long long)id);
        cmd = fh_cmd_member(id, addr, addr, FSM_ROLE_VOTER);
        fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
    }
    ck_assert_uint_eq(fsm_n_members(h.f), 3);
    ck_assert_uint_eq(fsm_n_retired(h.f), 0);

    cmd = fh_cmd_retire(2);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, &r), FSM_OK);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.cmd, FSM_CMD_RETIRE_MEMBER);
    ck_assert_uint_eq(fsm_n_members(h.f), 2);
    ck_assert_ptr_null(find_member(h.f, 2));
    ck_assert_ptr_nonnull(find_member(h.f, 1));
    ck_assert_ptr_nonnull(find_member(h.f, 3));
    ck_assert(fsm_is_retired(h.f, 2));
    ck_assert(!fsm_is_retired(h.f, 1));
    ck_assert_uint_eq(fsm_n_retired(h.f), 1);

    /* Again: OK retry. */
    fh_assert_is(fh_do(&h, T1 + 2, &cmd, &r), FSM_OK);
    ck_assert(r.retry);
    ck_assert_uint_eq(fsm_n_retired(h.f), 1);
    ck_assert_uint_eq(fsm_n_members(h.f), 2);

    /* A retired id can never come back. */
    cmd = fh_cmd_member(2, "10.0.0.2:7000", "10.0.0.2:7000", FSM_ROLE_VOTER);
    fh_assert_is(fh_do(&h, T1 + 3, &cmd, &r), FSM_FAILED_PRECONDITION);
    ck_assert(r.has_reason);
    ck_assert_uint_eq(fsm_n_members(h.f), 2);
    ck_assert_ptr_null(find_member(h.f, 2));

    /* An id that never was a member can be retired too. */
    cmd = fh_cmd_retire(99);
    fh_assert_is(fh_do(&h, T1 + 4, &cmd, &r), FSM_OK);
    ck_assert(fsm_is_retired(h.f, 99));
    ck_assert_uint_eq(fsm_n_retired(h.f), 2);
    ck_assert_uint_eq(fsm_n_members(h.f), 2);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_members_max)
{
    struct fh h;
    struct fsm_cmd *cmds = calloc(FSM_MEMBERS_MAX + 2, sizeof(*cmds));
    struct fh_res *r = fh_res_array(FSM_MEMBERS_MAX + 2);
    struct fsm_cmd cmd;
    const struct fsm_member *m;
    size_t i;

    ck_assert_ptr_nonnull(cmds);
    boot(&h, _i);
    for (i = 0; i < FSM_MEMBERS_MAX + 1; i++) {
        char addr[32];

        snprintf(addr, sizeof(addr), "10.0.1.%zu:7000", i + 1);
        cmds[i] = fh_cmd_member(i + 1, addr, addr, FSM_ROLE_SPARE);
    }
    /* And an update of an existing member once the directory is full. */
    cmds[FSM_MEMBERS_MAX + 1] =
        fh_cmd_member(10, "10.9.9.9:1", "10.9.9.9:2", FSM_ROLE_STANDBY);
    ck_assert_int_eq(fh_apply(&h, T1, cmds, FSM_MEMBERS_MAX + 2, r), 0);
    for (i = 0; i < FSM_MEMBERS_MAX; i++) {
        ck_assert_msg(r[i].outcome == FSM_OK, "member %zu: %s", i + 1,
                      fsm_outcome_name(r[i].outcome));
    }
    fh_assert_outcome(&r[FSM_MEMBERS_MAX], FSM_FAILED_PRECONDITION);
    fh_assert_outcome(&r[FSM_MEMBERS_MAX + 1], FSM_OK);
    ck_assert_uint_eq(fsm_n_members(h.f), FSM_MEMBERS_MAX);
    ck_assert_ptr_null(find_member(h.f, FSM_MEMBERS_MAX + 1));
    m = find_member(h.f, 10);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->raft_addr, "10.9.9.9:1");
    ck_assert_int_eq(m->role, FSM_ROLE_STANDBY);

    /* Retiring one makes room. */
    cmd = fh_cmd_retire(10);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_OK);
    ck_assert_uint_eq(fsm_n_members(h.f), FSM_MEMBERS_MAX - 1);
    fh_assert_is(fh_do(&h, T1 + 2, &cmds[FSM_MEMBERS_MAX], r), FSM_OK);
    ck_assert_uint_eq(fsm_n_members(h.f), FSM_MEMBERS_MAX);
    free(cmds);
    free(r);
    fh_close(&h);
}
END_TEST

START_TEST(test_config_set_schema)
{
    struct fh h;
    struct fsm_cmd cmd;
    struct fh_res r;

    boot(&h, _i);
    cmd = fh_cmd_schema(FSM_SCHEMA_VERSION - 1);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    cmd = fh_cmd_schema(FSM_SCHEMA_VERSION);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
    ck_assert_int_eq(r.cmd, FSM_CMD_SET_SCHEMA);
    ck_assert_uint_eq(fsm_schema_version(h.f), FSM_SCHEMA_VERSION);

    /* Newer than the code: the node stops. */
    cmd = fh_cmd_schema(FSM_SCHEMA_VERSION + 1);
    ck_assert_int_eq(fh_apply(&h, T1 + 1, &cmd, 1, &r), FSM_E_SCHEMA);
    fh_close(&h);
}
END_TEST

/* A batch of a newer schema: FSM_E_SCHEMA, nothing changes. */
START_TEST(test_config_batch_schema_newer)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmds[2];
    struct fh_res *r = fh_res_array(2);
    uint8_t *snap;
    size_t snap_len;
    uint64_t records, bytes;

    boot(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, "s", "old", 1);
    c.ttl_ms = 100000;
    fh_assert_is(fh_do_claim(&h, T1, &c, r), FSM_ACCEPTED);
    records = fsm_n_records(h.f);
    bytes = fsm_bytes(h.f);
    snap = fh_snapshot(h.f, &snap_len);

    fh_claim(&c, FSM_KIND_NONCE, "s", "new", 2);
    c.ttl_ms = 100000;
    cmds[0] = fh_cmd_claim(&c);
    cmds[1] = fh_cmd_forget("s", "old");
    ck_assert_int_eq(
        fh_apply_schema(&h, FSM_SCHEMA_VERSION + 1, T1 + 50000, cmds, 2, r),
        FSM_E_SCHEMA);
    ck_assert(!r[0].emitted);
    ck_assert(!r[1].emitted);
    ck_assert_uint_eq(fsm_now(h.f), T1);
    ck_assert_uint_eq(fsm_n_records(h.f), records);
    ck_assert_uint_eq(fsm_bytes(h.f), bytes);
    fh_assert_snapshot(&h, snap, snap_len);
    free(snap);
    fh_lookup_read(&h, "s", "new", r);
    fh_assert_outcome(r, FSM_NOT_FOUND);
    fh_lookup_read(&h, "s", "old", r);
    fh_assert_outcome(r, FSM_FOUND);
    free(r);
    fh_close(&h);
}
END_TEST

/* schema_version 0 or an envelope that does not decode: FSM_E_MALFORMED,
 * nothing changes. */
START_TEST(test_config_batch_malformed)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(1);
    uint8_t *snap;
    size_t snap_len, n_emitted;
    static const uint8_t garbage[][6] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* endless varint tag */
        {0x08, 0x81, 0x80, 0x80, 0x80, 0x80}, /* truncated varint */
        {0x1a, 0x05, 0x01, 0x02, 0x00, 0x00}, /* commands: 5 bytes, 4 left */
        {0x0f, 0x00, 0x00, 0x00, 0x00, 0x00}, /* wire type 7 */
    };

    boot(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, "s", "old", 1);
    c.ttl_ms = 100000;
    fh_assert_is(fh_do_claim(&h, T1, &c, r), FSM_ACCEPTED);
    snap = fh_snapshot(h.f, &snap_len);

    fh_claim(&c, FSM_KIND_NONCE, "s", "new", 2);
    c.ttl_ms = 100000;
    cmd = fh_cmd_claim(&c);
    ck_assert_int_eq(fh_apply_schema(&h, 0, T1 + 50000, &cmd, 1, r),
                     FSM_E_MALFORMED);
    ck_assert(!r->emitted);
    ck_assert_uint_eq(fsm_now(h.f), T1);
    fh_assert_snapshot(&h, snap, snap_len);

    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        ck_assert_int_eq(
            fh_apply_raw(&h, garbage[i], sizeof(garbage[i]), r, 1, &n_emitted),
            FSM_E_MALFORMED);
        ck_assert_uint_eq(n_emitted, 0);
    }
    /* No bytes at all: schema_version 0. */
    ck_assert_int_eq(fh_apply_raw(&h, garbage[0], 0, r, 1, &n_emitted),
                     FSM_E_MALFORMED);
    ck_assert_uint_eq(n_emitted, 0);
    ck_assert_uint_eq(fsm_now(h.f), T1);
    fh_assert_snapshot(&h, snap, snap_len);
    free(snap);

    /* The next good batch applies normally. */
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, r), FSM_ACCEPTED);
    free(r);
    fh_close(&h);
}
END_TEST

/* One undecodable command: INVALID_ARGUMENT for it alone. */
START_TEST(test_config_invalid_command_in_batch)
{
    struct fh h;
    struct fsm_claim c[2];
    struct fsm_cmd cmds[3];
    struct fh_res *r = fh_res_array(3);

    boot(&h, _i);
    fh_claim(&c[0], FSM_KIND_NONCE, "s", "a", 1);
    c[0].ttl_ms = 100000;
    fh_claim(&c[1], FSM_KIND_IDEMPOTENT, "s", "b", 2);
    c[1].ttl_ms = 100000;
    cmds[0] = fh_cmd_claim(&c[0]);
    cmds[1] = fh_cmd_invalid();
    cmds[2] = fh_cmd_claim(&c[1]);
    ck_assert_int_eq(fh_apply(&h, T1, cmds, 3, r), 0);
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    fh_assert_outcome(&r[1], FSM_INVALID_ARGUMENT);
    ck_assert_int_eq(r[1].cmd, FSM_CMD_INVALID);
    ck_assert(r[1].has_reason);
    fh_assert_outcome(&r[2], FSM_ACCEPTED);
    fh_assert_token(r[2].owner_token, fh_token(FH_GROUP_ID, h.index, 2));
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    ck_assert_uint_eq(fsm_now(h.f), T1);
    free(r);
    fh_close(&h);
}
END_TEST

/* Through the codec: garbage, an empty Command and a Command whose claim is
 * out of range, among good ones. */
START_TEST(test_config_undecodable_commands_protobuf)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(5);
    static const uint8_t garbage[] = {0x0a, 0x7f, 0x00};
    static const uint8_t empty = 0;
    uint8_t *good1, *good2;
    size_t len1, len2;

    boot(&h, FH_PROTOBUF);
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    c.ttl_ms = 100000;
    cmd = fh_cmd_claim(&c);
    good1 = fh_encode(&cmd, &len1);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "b", 2);
    c.ttl_ms = 100000;
    cmd = fh_cmd_claim(&c);
    good2 = fh_encode(&cmd, &len2);
    {
        const uint8_t *const cmds[5] = {good1, garbage, &empty, good2, good1};
        const size_t lens[5] = {len1, sizeof(garbage), 0, len2, len1};

        ck_assert_int_eq(
            fh_apply_encoded(&h, FSM_SCHEMA_VERSION, T1, cmds, lens, 5, r), 0);
    }
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    fh_assert_outcome(&r[1], FSM_INVALID_ARGUMENT);
    ck_assert(r[1].has_reason);
    fh_assert_outcome(&r[2], FSM_INVALID_ARGUMENT);
    ck_assert(r[2].has_reason);
    fh_assert_outcome(&r[3], FSM_ACCEPTED);
    fh_assert_token(r[3].owner_token, fh_token(FH_GROUP_ID, h.index, 3));
    fh_assert_outcome(&r[4], FSM_ACCEPTED);
    ck_assert(r[4].retry);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    free(good1);
    free(good2);
    free(r);
    fh_close(&h);
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("bootstrap");

    tcase_add_loop_test(tc, test_config_before_bootstrap, 0, 2);
    tcase_add_loop_test(tc, test_config_bootstrap_once, 0, 2);
    tcase_add_loop_test(tc, test_config_bootstrap_invalid, 0, 2);
    tcase_add_loop_test(tc, test_config_defaults, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("settings");
    tcase_add_loop_test(tc, test_config_set_settings_lower, 0, 2);
    tcase_add_loop_test(tc, test_config_raise_window_fence, 0, 2);
    tcase_add_loop_test(tc, test_config_raise_while_settling, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("members");
    tcase_add_loop_test(tc, test_config_set_member, 0, 2);
    tcase_add_test(tc, test_config_set_member_invalid);
    tcase_add_loop_test(tc, test_config_retire_member, 0, 2);
    tcase_add_loop_test(tc, test_config_members_max, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("schema");
    tcase_add_loop_test(tc, test_config_set_schema, 0, 2);
    tcase_add_loop_test(tc, test_config_batch_schema_newer, 0, 2);
    tcase_add_loop_test(tc, test_config_batch_malformed, 0, 2);
    tcase_add_loop_test(tc, test_config_invalid_command_in_batch, 0, 2);
    tcase_add_test(tc, test_config_undecodable_commands_protobuf);
    suite_add_tcase(s, tc);
    return s;
}
