/* tests/store/crash_child.c: the process tests/store/store_crash.py kills.
 *
 *   store-crash-child run DIR ENGINE SEED SEGMENT
 *     load the store in DIR, store a new term, then append for ever with up
 *     to 64 appends in flight (group commit), now and then (with nothing in
 *     flight) a truncation or a snapshot. One line on stdout per durable
 *     fact, flushed at once:
 *       E <name> <direct>     the engine that runs ("uring" or "pwrite")
 *                             and whether its appends are O_DIRECT (1/0)
 *       T <term>              set_term returned
 *       a <index> <term>      the append of that entry completed
 *       t <index>             truncate(index) called with nothing in flight
 *       S <index> <trailing>  that snapshot_put completed
 *   store-crash-child verify DIR ENGINE SEGMENT
 *     load, check every entry's payload against its index and term and the
 *     snapshot's data against its index, print
 *       V <term> <snapshot index> <start> <n>
 *     then "e <index> <term>" per entry; exit 1 on any mismatch or a
 *     refused load (the message on stderr).
 * ENGINE: uring, uring-buffered (no O_DIRECT) or pwrite. Payload of entry i of
 * term t: u64 i, u64 t, then bytes (i * 7 + t + k) & 0xff, 16 + 8 * ((i * 13) %
 * 64) bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "common/le.h"
#include "store/store_log.h"

#define DEPTH 64

static struct store st;
static uv_loop_t loop;
static uint64_t next_index, eterm, first_index, snap_index;
static unsigned inflight, since_special;
static bool draining;
static unsigned long long rng;

static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}

static size_t len_of(uint64_t i)
{
    return 16 + 8 * (size_t)((i * 13) % 64);
}

static void fill(uint8_t *p, size_t len, uint64_t i, uint64_t t)
{
    le_put64(p, i);
    le_put64(p + 8, t);
    for (size_t k = 16; k < len; k++) {
        p[k] = (uint8_t)(i * 7 + t + k);
    }
}

static bool check(const uint8_t *p,
                  size_t len,
                  size_t want,
                  uint64_t i,
                  uint64_t t)
{
    if (len != want || le_get64(p) != i || le_get64(p + 8) != t) {
        return false;
    }
    for (size_t k = 16; k < len; k++) {
        if (p[k] != (uint8_t)(i * 7 + t + k)) {
            return false;
        }
    }
    return true;
}

struct areq
{
    struct raft_io_append req;
    uint64_t index, term;
};

static void pump(void);

static void special_done(void)
{
    draining = false;
    since_special = 0;
    pump();
}

static void put_cb(struct raft_io_snapshot_put *req, int status)
{
    struct raft_snapshot *s = req->data;

    if (status != 0) {
        fprintf(stderr, "snapshot_put: %d %s\n", status, st.errmsg);
        exit(1);
    }
    printf("S %" PRIu64 " %u\n", (uint64_t)s->index,
           (unsigned)(uintptr_t)s->bufs[1].len);
    fflush(stdout);
    snap_index = s->index;
    raft_configuration_close(&s->configuration);
    free(s->bufs[0].base);
    free(s->bufs);
    free(s);
    free(req);
    special_done();
}

static void special(void)
{
    if (rnd(2) == 0 && next_index - 1 > snap_index + 1) {
        uint64_t span = next_index - 1 - snap_index;
        uint64_t back = 1 + rnd((unsigned)(span < 40 ? span : 40));
        uint64_t at = next_index - back;

        if (st.ops->truncate(&st, at) != 0) {
            fprintf(stderr, "truncate: %s\n", st.errmsg);
            exit(1);
        }
        printf("t %" PRIu64 "\n", at);
        fflush(stdout);
        next_index = at;
        eterm++; /* the rewrite must differ from what it replaces */
        special_done();
        return;
    }
    if (next_index > 1) {
        struct raft_io_snapshot_put *req = calloc(1, sizeof *req);
        struct raft_snapshot *s = calloc(1, sizeof *s);
        unsigned trailing = rnd(8) == 0 ? 0 : rnd(200);
        size_t len = 64 + 8 * rnd(128);

        s->index = next_index - 1;
        s->term = eterm;
        s->configuration_index = 1;
        raft_configuration_init(&s->configuration);
        raft_configuration_add(&s->configuration, 1, "127.0.0.1:1", RAFT_VOTER);
        /* bufs[1] is empty and carries the trailing count for put_cb. */
        s->bufs = calloc(2, sizeof *s->bufs);
        s->bufs[0].base = malloc(len);
        s->bufs[0].len = len;
        s->bufs[1].len = 0;
        fill(s->bufs[0].base, len, s->index, 0);
        s->n_bufs = 1;
        req->data = s;
        if (st.ops->snapshot_put(&st, trailing, req, s, put_cb) != 0) {
            fprintf(stderr, "snapshot_put: %s\n", st.errmsg);
            exit(1);
        }
        s->bufs[1].len = trailing;
        if (trailing == 0) {
            next_index = s->index + 1;
        }
        return;
    }
    special_done();
}

static void append_cb(struct raft_io_append *req, int status)
{
    struct areq *a = req->data;

    if (status != 0) {
        fprintf(stderr, "append: %d %s\n", status, st.errmsg);
        exit(1);
    }
    printf("a %" PRIu64 " %" PRIu64 "\n", a->index, a->term);
    fflush(stdout);
    free(a);
    inflight--;
    since_special++;
    if (draining && inflight == 0) {
        special();
        return;
    }
    pump();
}

static void pump(void)
{
    while (!draining && inflight < DEPTH) {
        struct areq *a = calloc(1, sizeof *a);
        struct raft_entry e;
        size_t len = len_of(next_index);
        uint8_t *buf = malloc(len);

        if (since_special > 200 + rnd(400)) {
            free(a);
            free(buf);
            draining = true;
            if (inflight == 0) {
                special();
            }
            return;
        }
        fill(buf, len, next_index, eterm);
        memset(&e, 0, sizeof e);
        e.term = eterm;
        e.type = RAFT_COMMAND;
        e.buf.base = buf;
        e.buf.len = len;
        a->req.data = a;
        a->index = next_index;
        a->term = eterm;
        if (st.ops->append(&st, &a->req, &e, 1, append_cb) != 0) {
            fprintf(stderr, "append: %s\n", st.errmsg);
            exit(1);
        }
        free(buf);
        next_index++;
        inflight++;
    }
}

int main(int argc, char **argv)
{
    struct store_log_options o;
    raft_term term;
    raft_id vote;
    struct raft_snapshot *snap = NULL;
    raft_index start;
    struct raft_entry *entries;
    size_t n;
    char err[256];
    bool verify;
    int ai;

    if (argc < 5 ||
        (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "verify") != 0)) {
        fprintf(stderr,
                "usage: store-crash-child run|verify DIR ENGINE "
                "[SEED] SEGMENT\n");
        return 2;
    }
    verify = strcmp(argv[1], "verify") == 0;
    ai = verify ? 4 : 5;
    if (argc != ai + 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    memset(&o, 0, sizeof o);
    o.engine = strncmp(argv[3], "uring", 5) == 0 ? STORE_ENGINE_URING
                                                 : STORE_ENGINE_PWRITE;
    o.no_direct = strcmp(argv[3], "uring-buffered") == 0;
    o.segment_size = strtoull(argv[ai], NULL, 10);
    rng = verify ? 1 : strtoull(argv[4], NULL, 10);
    uv_loop_init(&loop);
    if (store_log_init(&st, &loop, argv[2], &o, err) != 0) {
        fprintf(stderr, "store_log_init: %s\n", err);
        return 1;
    }
    if (!verify) {
        printf("E %s %d\n", st.name, store_log_direct(&st) ? 1 : 0);
        fflush(stdout);
    }
    if (st.ops->load(&st, &term, &vote, &snap, &start, &entries, &n) != 0) {
        fprintf(stderr, "load refused: %s\n", st.errmsg);
        return 1;
    }
    snap_index = snap != NULL ? snap->index : 0;
    if (snap != NULL && (snap->n_bufs != 1 || snap->bufs[0].len < 16 ||
                         !check(snap->bufs[0].base, snap->bufs[0].len,
                                snap->bufs[0].len, snap->index, 0))) {
        fprintf(stderr, "snapshot %" PRIu64 ": bad data\n",
                (uint64_t)snap->index);
        return 1;
    }
    eterm = term;
    for (size_t i = 0; i < n; i++) {
        if (!check(entries[i].buf.base, entries[i].buf.len, len_of(start + i),
                   start + i, entries[i].term)) {
            fprintf(stderr, "entry %zu: bad payload (term %" PRIu64 ")\n",
                    (size_t)(start + i), (uint64_t)entries[i].term);
            return 1;
        }
        if (i > 0 && entries[i].term < entries[i - 1].term) {
            fprintf(stderr, "entry %zu: term goes down\n", (size_t)(start + i));
            return 1;
        }
        if (entries[i].term > eterm) {
            eterm = entries[i].term;
        }
    }
    if (verify) {
        printf("V %" PRIu64 " %" PRIu64 " %" PRIu64 " %zu\n", (uint64_t)term,
               snap_index, (uint64_t)start, n);
        for (size_t i = 0; i < n; i++) {
            printf("e %zu %" PRIu64 "\n", (size_t)(start + i),
                   (uint64_t)entries[i].term);
        }
    }
    for (size_t i = 0; i < n; i++) { /* a batch's entries are contiguous */
        if (i == 0 || entries[i].batch != entries[i - 1].batch) {
            raft_free(entries[i].batch);
        }
    }
    raft_free(entries);
    if (snap != NULL) {
        raft_configuration_close(&snap->configuration);
        raft_free(snap->bufs[0].base);
        raft_free(snap->bufs);
        raft_free(snap);
    }
    if (verify) {
        return 0;
    }
    first_index = start;
    next_index = start + n;
    eterm++; /* a new run writes a new term */
    if (st.ops->set_term(&st, eterm) != 0) {
        fprintf(stderr, "set_term: %s\n", st.errmsg);
        return 1;
    }
    printf("T %" PRIu64 "\n", eterm);
    fflush(stdout);
    pump();
    uv_run(&loop, UV_RUN_DEFAULT);
    return 1; /* never ends by itself */
}
