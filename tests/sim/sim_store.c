/* tests/sim/sim_store.c: see sim_store.h. */
#include "sim_store.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"

/* One queued job or pool work. */
struct ss_item
{
    struct ss_item *next;
    raft_time due;
    bool ran; /* ran at a crash: only its (cancelled) completion is left */
    struct job *job; /* a job, or: */
    uv_work_t *w;
    uv_work_cb work;
    uv_after_work_cb done;
};

static struct sim_store *of_exec(const struct store_exec *x)
{
    return (struct sim_store *)(void *)((char *)(uintptr_t)x -
                                        offsetof(struct sim_store, exec));
}

static struct sim_store *of_store(struct store *s)
{
    return (struct sim_store *)(void *)s; /* the store is the first member */
}

/* --- the executor ----------------------------------------------------------
 */

static void insert(struct sim_store *d, struct ss_item *it)
{
    struct ss_item **pp = &d->head;

    while (*pp != NULL && (*pp)->due <= it->due) {
        pp = &(*pp)->next;
    }
    it->next = *pp;
    *pp = it;
    d->queued++;
}

static struct ss_item *pop(struct sim_store *d)
{
    struct ss_item *it = d->head;

    d->head = it->next;
    d->queued--;
    return it;
}

static struct ss_item *item_new(void)
{
    struct ss_item *it = calloc(1, sizeof *it);

    ONCE_ASSERT(it != NULL, "out of memory queueing simulated store work");
    return it;
}

static int x_start(const struct store_exec *x,
                   struct slog *sl,
                   int *handles,
                   char *errmsg)
{
    (void)x;
    (void)sl;
    (void)errmsg;
    *handles = 0; /* no loop handles: the store closes synchronously */
    return 0;
}

/* One worker: jobs complete in submission order, each after the one
 * before it and the disk's latency. */
static void x_submit(const struct store_exec *x, struct slog *sl, struct job *j)
{
    struct sim_store *d = of_exec(x);
    struct ss_item *it = item_new();
    raft_time from = *d->now > d->last_job_due ? *d->now : d->last_job_due;

    (void)sl;
    it->job = j;
    it->due = from + d->latency_ms;
    d->last_job_due = it->due;
    insert(d, it);
}

static int x_stop(const struct store_exec *x, struct slog *sl)
{
    (void)sl;
    /* The close wrapper drained everything before the store closed. */
    ONCE_ASSERT(of_exec(x)->head == NULL, "nothing queued when a store stops");
    return 0;
}

static int x_queue_work(const struct store_exec *x,
                        struct slog *sl,
                        uv_work_t *w,
                        uv_work_cb work,
                        uv_after_work_cb done)
{
    struct sim_store *d = of_exec(x);
    struct ss_item *it = item_new();

    (void)sl;
    it->w = w;
    it->work = work;
    it->done = done;
    it->due = *d->now + d->latency_ms;
    insert(d, it);
    return 0;
}

void sim_store_run(struct sim_store *d)
{
    while (d->head != NULL && d->head->due <= *d->now) {
        struct ss_item *it = pop(d);

        ONCE_ASSERT(!it->ran, "only a crash runs an item early");
        if (it->job != NULL) {
            store_job_run(it->job);
            store_job_complete(it->job);
        } else {
            it->work(it->w);
            it->done(it->w, 0);
        }
        free(it);
    }
}

static void run_only(struct ss_item *it)
{
    if (it->job != NULL) {
        store_job_run(it->job);
    } else {
        it->work(it->w);
    }
    it->ran = true;
}

/* Everything queued completes as cancelled (a crashed process's work
 * never reports; raft's requests are cancelled as its io closes). */
static void drain(struct sim_store *d)
{
    while (d->head != NULL) {
        struct ss_item *it = pop(d);

        if (it->job != NULL) {
            store_job_cancel(it->job);
            store_job_complete(it->job);
        } else {
            if (!it->ran) {
                it->work(it->w); /* (its descriptors are the work's) */
            }
            it->done(it->w, UV_ECANCELED);
        }
        free(it);
    }
}

void sim_store_crash(struct sim_store *d, uint64_t (*draw)(void), bool torn_ok)
{
    struct ss_item *it = d->head;
    unsigned ran = 0, m = 0;

    if (d->queued > 0 && draw() % 2 == 1) {
        m = (unsigned)(draw() % (d->queued + 1));
    }
    for (; it != NULL && ran < m; it = it->next, ran++) {
        run_only(it); /* on disk; the process never saw it complete */
    }
    if (it != NULL && draw() % 2 == 1) {
        d->fs.budget = (long)(draw() % 3); /* the power goes part way */
        run_only(it);
        ran++;
    }
    d->stats.ran_at_crash += ran;
    d->stats.lost_at_crash += d->queued - ran;
    sim_fs_power_cut(&d->fs, draw, torn_ok);
}

/* --- the store's calls, wrapped --------------------------------------------
 */

/* An append whose write failed never completes to raft when rio's G4 stops
 * the node there (a node aborts; the harness's hook returns, and rio drops
 * the request: rio.h). raft's request for it then outlives the node, and
 * the leak checker at the child's exit would blame raft for it. The bytes
 * at the start of rio's request (its struct raft_io_append, then the
 * pointer to raft's) are kept here, so that raft's request stays
 * referenced until exit. Conservative like the checker itself; one run per
 * process, never cleared. */
#define SS_STUCK_MAX 256
static uint8_t stuck[SS_STUCK_MAX]
                    [sizeof(struct raft_io_append) + sizeof(void *)];
static unsigned n_stuck;
static raft_io_append_cb rio_append_cb; /* rio's, the same for every node */

static void ss_append_cb(struct raft_io_append *req, int status)
{
    if (status != 0 && status != RAFT_CANCELED && n_stuck < SS_STUCK_MAX) {
        memcpy(stuck[n_stuck++], req, sizeof stuck[0]);
    }
    rio_append_cb(req, status);
}

static int ss_append(struct store *s,
                     struct raft_io_append *req,
                     const struct raft_entry entries[],
                     unsigned n,
                     raft_io_append_cb cb)
{
    ONCE_ASSERT(rio_append_cb == NULL || rio_append_cb == cb,
                "every append comes from rio");
    rio_append_cb = cb;
    return of_store(s)->log->append(s, req, entries, n, ss_append_cb);
}

/* The node closes (a crash, or the end of the run): what is queued is
 * cancelled first, so that the store closes before this returns, inside
 * raft_close (the fixture closes synchronously). */
static void ss_close(struct store *s, store_close_cb cb)
{
    struct sim_store *d = of_store(s);

    drain(d);
    d->log->close(s, cb);
    ONCE_ASSERT(d->head == NULL && s->impl == NULL,
                "a simulated store closes synchronously");
    d->open = false;
}

static void ss_log(void *arg, const char *level, const char *msg)
{
    struct sim_store *d = arg;

    (void)level;
    if (strncmp(msg, "cut a torn record", 17) == 0) {
        d->stats.cuts++;
    }
}

struct store *sim_store_open(struct sim_store *d)
{
    struct store_log_options o;
    char err[256];
    int rv;

    ONCE_ASSERT(!d->open && d->head == NULL, "one store at a time");
    memset(&o, 0, sizeof o);
    o.engine = STORE_ENGINE_PWRITE;
    o.segment_size = d->segment_size;
    o.log = ss_log;
    o.log_arg = d;
    o.sys = &d->fs.sys;
    o.exec = &d->exec;
    sim_fs_power_on(&d->fs);
    d->last_job_due = 0;
    rv = store_log_init(&d->store, NULL, "/sim/log", &o, err);
    ONCE_ASSERTF(rv == 0, "simulated store: %s", err);
    d->log = d->store.ops;
    d->ops = *d->log;
    d->ops.append = ss_append;
    d->ops.close = ss_close;
    d->store.ops = &d->ops;
    d->open = true;
    return &d->store;
}

void sim_store_init(struct sim_store *d,
                    const raft_time *now,
                    size_t segment_size)
{
    static const struct store_exec exec = {
        .start = x_start,
        .submit = x_submit,
        .stop = x_stop,
        .queue_work = x_queue_work,
    };

    memset(d, 0, sizeof *d);
    d->exec = exec;
    d->now = now;
    d->latency_ms = 10;
    d->segment_size = segment_size;
    sim_fs_init(&d->fs);
}

void sim_store_free(struct sim_store *d)
{
    ONCE_ASSERT(!d->open && d->head == NULL,
                "the node's raft closed its store first");
    sim_fs_free(&d->fs);
    memset(d, 0, sizeof *d);
}
