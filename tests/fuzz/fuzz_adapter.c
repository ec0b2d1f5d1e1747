/* fuzz_adapter: libFuzzer target for what the raft adapter takes from disk
 * and from peers: snapshots (restore) and log entries (apply), through the
 * struct raft_fsm the adapter gives raft (src/raft/adapter.c).
 *
 * Input: one mode byte, then
 *   mode even: the rest is one snapshot, restored into a fresh replica; if
 *              it is accepted, snapshot -> restore -> snapshot must give the
 *              same bytes;
 *   mode odd:  a sequence of entries, each a little-endian u16 length and
 *              that many bytes (a short last chunk is taken as it is),
 *              applied at indexes 1, 2, ... to two replicas: both must end
 *              with the same digest and identical snapshots, and a third
 *              restored from the first's snapshot must snapshot the same.
 * Checked besides "no crash, no leak, no UB": apply never fails (a business
 * outcome or an undecodable entry is never an error for raft), except for
 * an entry of a newer schema, which stops the input (the node would stop).
 *
 * Run: ./tests/fuzz/fuzz_adapter -dict=tests/fuzz/adapter.dict
 *      -max_total_time=60 WORKDIR tests/fuzz/corpus/adapter */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/replica.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES 64

#define CHECK(cond)                                                    \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "fuzz_adapter: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                        \
            abort();                                                   \
        }                                                              \
    } while (0)

struct rig
{
    struct replica rep;
    struct raft raft; /* only last_applied and the snapshot fields are used */
    int fatal;
};

static uint64_t clock_ms(void *arg)
{
    (void)arg;
    return 1700000000000ull;
}

static void fatal_hook(void *arg, const char *what, int status, const char *msg)
{
    struct rig *g = arg;
    (void)what;
    (void)status;
    (void)msg;
    g->fatal++;
}

static void quiet(void *arg, const char *level, const char *msg)
{
    (void)arg;
    (void)level;
    (void)msg;
}

static void rig_init(struct rig *g)
{
    struct replica_clock clock = {NULL, clock_ms, clock_ms};
    struct replica_hooks hooks = {g, fatal_hook, quiet, NULL, NULL};
    struct fsm *f = fsm_new();

    CHECK(f != NULL);
    memset(g, 0, sizeof *g);
    replica_prepare(&g->rep, f, &clock, &hooks);
    g->rep.raft = &g->raft;
    g->rep.started = true; /* a bad snapshot is then a fatal, not a refusal */
}

static void rig_close(struct rig *g)
{
    replica_close(&g->rep);
}

/* Restore @len bytes (copied into a raft_malloc'd buffer, as raft passes
 * it). Returns raft's code. */
static int rig_restore(struct rig *g, const uint8_t *p, size_t len)
{
    struct raft_buffer buf;
    int rv;

    buf.len = len;
    buf.base = raft_malloc(len > 0 ? len : 1);
    CHECK(buf.base != NULL);
    memcpy(buf.base, p, len);
    rv = g->rep.raft_fsm.restore(&g->rep.raft_fsm, &buf);
    if (rv != 0) {
        raft_free(buf.base); /* refused: still ours */
    }
    return rv;
}

/* Snapshot into a malloc'd copy (*len); frees raft's buffers. */
static uint8_t *rig_snapshot(struct rig *g, size_t *len)
{
    struct raft_buffer *bufs = NULL;
    unsigned n = 0;
    uint8_t *copy;
    int rv;

    rv = g->rep.raft_fsm.snapshot(&g->rep.raft_fsm, &bufs, &n);
    CHECK(rv == 0 && n == 1);
    copy = malloc(bufs[0].len);
    CHECK(copy != NULL);
    memcpy(copy, bufs[0].base, bufs[0].len);
    *len = bufs[0].len;
    rv = g->rep.raft_fsm.snapshot_finalize(&g->rep.raft_fsm, &bufs, &n);
    CHECK(rv == 0);
    return copy;
}

static void check_roundtrip(struct rig *g)
{
    struct rig h;
    uint8_t *a, *b;
    size_t a_len, b_len;

    a = rig_snapshot(g, &a_len);
    rig_init(&h);
    CHECK(rig_restore(&h, a, a_len) == 0);
    CHECK(h.rep.digest == g->rep.digest);
    b = rig_snapshot(&h, &b_len);
    CHECK(a_len == b_len && memcmp(a, b, a_len) == 0);
    free(a);
    free(b);
    rig_close(&h);
}

static int apply(struct rig *g, raft_index index, const uint8_t *p, size_t len)
{
    struct raft_buffer buf = {(void *)p, len};
    void *result = NULL;

    g->raft.last_applied = index - 1; /* what raft has inside apply (B10) */
    return g->rep.raft_fsm.apply(&g->rep.raft_fsm, &buf, &result);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rig a, b;
    size_t off = 1, n = 0;

    if (size < 1) {
        return 0;
    }
    rig_init(&a);
    if ((data[0] & 1) == 0) {
        if (rig_restore(&a, data + 1, size - 1) == 0) {
            CHECK(a.fatal == 0);
            check_roundtrip(&a);
        } else {
            CHECK(a.fatal == 1); /* refused loudly */
        }
        rig_close(&a);
        return 0;
    }
    rig_init(&b);
    while (off < size && n < MAX_ENTRIES) {
        size_t len = size - off;
        int ra, rb;

        if (len >= 2) {
            size_t want = (size_t)data[off] | (size_t)data[off + 1] << 8;
            off += 2;
            len = size - off < want ? size - off : want;
        } else {
            off = size; /* a lone trailing byte */
            break;
        }
        n++;
        ra = apply(&a, n, data + off, len);
        rb = apply(&b, n, data + off, len);
        CHECK(ra == rb);
        CHECK(a.fatal == b.fatal);
        off += len;
        if (ra != 0) {
            CHECK(a.fatal > 0); /* only a newer schema stops the node */
            break;
        }
        CHECK(a.rep.digest == b.rep.digest);
    }
    if (a.fatal == 0) {
        check_roundtrip(&a);
    }
    rig_close(&a);
    rig_close(&b);
    return 0;
}
