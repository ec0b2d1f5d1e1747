/* tests/raft/regress_starvation.c: the starvation scenario, B3 (the pipeline)
 * (regress.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "common/crc32c.h"
#include "fsm/command.h"
#include "fsm_helpers.h"
#include "raft/entry.h"
#include "raft/guard.h"
#include "regress.h"

/* --- starvation: B3 ---------------------------------------------------------
 */

#define ST_PERIOD_MS 5
#define ST_LOAD_MS   3000
#define ST_MAX       (ST_LOAD_MS / ST_PERIOD_MS + 16)
/* In pipeline mode every command must be acknowledged within this. */
#define ST_LATENCY_MAX_MS 1000

struct st_raw
{
    struct raft_apply req;
    raft_time t_invoke;
};

static unsigned st_acked, st_acked_load;
static raft_time st_lat_max, st_first_ack;
static bool st_in_load;

static void st_ack(raft_time t_invoke)
{
    raft_time now = raft_fixture_time(&C.f);

    st_acked++;
    if (st_in_load) {
        st_acked_load++;
    }
    if (st_first_ack == 0) {
        st_first_ack = now;
    }
    if (now - t_invoke > st_lat_max) {
        st_lat_max = now - t_invoke;
    }
}

static void st_raw_cb(struct raft_apply *req, int status, void *result)
{
    struct st_raw *a = req->data;

    (void)result;
    if (status == 0) {
        st_ack(a->t_invoke);
    }
    free(a);
}

/* One raft_apply per command, bypassing the pipeline (what B3 starves). */
static int st_raw_submit(unsigned l, unsigned k)
{
    struct st_raw *a = calloc(1, sizeof *a);
    struct raft_entry e;
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    char key[16];
    int rv;

    if (a == NULL) {
        return -1;
    }
    snprintf(key, sizeof key, "s%u", k);
    cmd = cl_claim_cmd(&cl, key, k + 1);
    if (make_entry(&cmd, raft_fixture_time(&C.f) + CL_WALL0, 0, &e) != 0) {
        free(a);
        return -1;
    }
    a->req.data = a;
    a->t_invoke = raft_fixture_time(&C.f);
    rv = raft_apply(cl_raft(&C, l), &a->req, &e.buf, 1, st_raw_cb);
    if (rv != 0) {
        raft_free(e.buf.base);
        free(a);
        return -1;
    }
    return 0;
}

int scenario_starvation(void)
{
    static struct cl_op ops[ST_MAX];
    raft_time start, next;
    raft_index commit_load, stored_load;
    unsigned submitted = 0, k, in_pipe_acked = 0;
    char extra[256];
    struct raft *r;
    int l;

    C.quiet = getenv("REGRESS_VERBOSE") == NULL;
    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    if (l < 0) {
        setup_error("no ready leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    r = cl_raft(&C, (unsigned)l);
    start = raft_fixture_time(&C.f);
    next = start;
    st_in_load = true;
    while (raft_fixture_time(&C.f) - start < ST_LOAD_MS) {
        while (raft_fixture_time(&C.f) >= next && submitted < ST_MAX) {
            char key[16];
            int rv;

            if (O.raw) {
                rv = st_raw_submit((unsigned)l, submitted);
            } else {
                snprintf(key, sizeof key, "s%u", submitted);
                rv = cl_claim(&C, (unsigned)l, &ops[submitted], key,
                              submitted + 1);
            }
            if (rv != 0) {
                setup_error("submit refused");
                cl_close(&C);
                return EXIT_SETUP;
            }
            submitted++;
            next += ST_PERIOD_MS;
        }
        raft_fixture_step(&C.f);
        if (!O.raw) {
            /* Pipeline acks: count them as they arrive. */
            for (k = in_pipe_acked; k < submitted && ops[k].done; k++) {
                if (ops[k].status == 0) {
                    st_ack(ops[k].t_invoke);
                }
            }
            in_pipe_acked = k;
        }
    }
    st_in_load = false;
    commit_load = r->commit_index;
    stored_load = r->last_stored;
    printf(
        "starvation: load done: submitted=%u acked=%u last_stored=%llu "
        "commit=%llu\n",
        submitted, st_acked_load, (unsigned long long)r->last_stored,
        (unsigned long long)r->commit_index);
    /* Let it drain. */
    for (raft_time t0 = raft_fixture_time(&C.f);
         raft_fixture_time(&C.f) - t0 < 2000 && st_acked < submitted;) {
        raft_fixture_step(&C.f);
        if (!O.raw) {
            for (k = in_pipe_acked; k < submitted && ops[k].done; k++) {
                if (ops[k].status == 0) {
                    st_ack(ops[k].t_invoke);
                }
            }
            in_pipe_acked = k;
        }
    }
    if (st_acked_load == 0) {
        violation(
            "commit starvation: no command acknowledged during %u ms "
            "of load (%u submitted, one every %u ms); leader commit "
            "was %llu at its end, last_stored %llu",
            ST_LOAD_MS, submitted, ST_PERIOD_MS,
            (unsigned long long)commit_load, (unsigned long long)stored_load);
    } else if (st_lat_max > ST_LATENCY_MAX_MS) {
        violation(
            "commit starvation: a command waited %llu ms for its "
            "acknowledgement (limit %u ms)",
            (unsigned long long)st_lat_max, ST_LATENCY_MAX_MS);
    } else if (st_acked < submitted) {
        violation("only %u of %u commands acknowledged after the load",
                  st_acked, submitted);
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    if (!violated && !cl_same_applied(&C)) {
        violation("%s", C.violation_msg);
    }
    snprintf(extra, sizeof extra,
             "submitted=%u acked_during_load=%u acked_total=%u "
             "max_latency_ms=%llu batches=%llu",
             submitted, st_acked_load, st_acked, (unsigned long long)st_lat_max,
             (unsigned long long)C.s[l].rep.stats.batches);
    cl_close(&C);
    return finish(extra);
}
