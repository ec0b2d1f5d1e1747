/* raft/digest.c: work over a frozen view, off the loop; the state digest.
 *
 * Every request (replica_view_work) waits for the view, freezes it on the
 * loop, runs its function on raft's thread pool and is answered on the
 * loop after the release. The state digest is the first such work; the
 * backup encoder (server/backup.c) is another.
 *
 * The state digest is a SHA-256 of the state machine's canonical snapshot
 * bytes: equal on every replica at one applied index, so the chaos checker
 * compares replicas with it. It costs O(state) in time and memory, so it
 * runs on raft's thread pool over a frozen view (fsm_freeze), like a
 * snapshot. A state machine has one view at a time: a request that finds
 * the view taken (a snapshot, or another digest) waits in a short queue
 * and starts when the view is released (adapter finalize, or the digest
 * before it). */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/assert.h"
#include "raft/heap.h"
#include "raft/replica_int.h"

static struct replica_digest_req *req_of(struct raft_io_async_work *w)
{
    char *p = (char *)w - offsetof(struct replica_digest_req, work);

    return (struct replica_digest_req *)(void *)p;
}

/* The pool: the request's function over the view. */
static int digest_work(struct raft_io_async_work *w)
{
    struct replica_digest_req *req = req_of(w);

    ONCE_ASSERT(req->view != NULL, "the loop froze the view before queueing");
    req->fn_rv = req->fn(req, req->view);
    return req->fn_rv == 0 ? 0 : RAFT_NOMEM;
}

/* The state digest: encode the view and hash it. */
static int digest_hash(struct replica_digest_req *req, struct fsm_frozen *view)
{
    size_t len = fsm_frozen_size(view);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    uint8_t md[SHA256_DIGEST_LENGTH];
    uint64_t d = 0;

    if (buf == NULL) {
        return REPLICA_E_NOMEM;
    }
    fsm_frozen_write(view, buf, len);
    if (EVP_Digest(buf, len, md, NULL, EVP_sha256(), NULL) != 1) {
        free(buf);
        return REPLICA_E_NOMEM;
    }
    free(buf);
    for (int i = 0; i < 8; i++) {
        d = d << 8 | md[i];
    }
    req->state_digest = d;
    return 0;
}

static void digest_start_next(struct replica *rep);

static void digest_done(struct raft_io_async_work *w, int status)
{
    struct replica_digest_req *req = req_of(w);
    struct replica *rep = req->rep;

    /* What the view alone still used is freed off the loop (heap.h): a
     * backup holds it for seconds while apply copies slot arrays. */
    ONCE_ASSERT(rep->digest_running && req->view != NULL,
                "the digest running holds the view");
    fsm_release_with(rep->fsm, req->view, heap_bg_free_later);
    req->view = NULL;
    rep->digest_running = false;
    if (rep->closing) {
        status = REPLICA_E_SHUTDOWN;
    } else if (status != 0) {
        status = req->fn_rv < 0 ? req->fn_rv : REPLICA_E_NOMEM;
    }
    req->cb(req, status);
    /* An install waits for the view; else the next digest may start. */
    rio_install_resume(&rep->rio);
    digest_start_next(rep);
}

bool replica_digest_idle(void *arg)
{
    return !((struct replica *)arg)->digest_running;
}

/* Freeze for the first waiting request and queue its work; the others keep
 * waiting. Called whenever the view may have become free. */
static void digest_start_next(struct replica *rep)
{
    struct replica_digest_req *req = rep->digest_head;
    struct rio *rio = &rep->rio;
    int rv;

    /* While an install is stored, restore will need the view. */
    if (req == NULL || rep->digest_running || rep->closing ||
        rio->installing > 0) {
        return;
    }
    rv = fsm_freeze(rep->fsm, &req->view);
    if (rv == FSM_E_BUSY) {
        return; /* a snapshot holds the view: finalize calls again */
    }
    ONCE_ASSERT(rep->digest_n > 0, "digest_n counts the waiting requests");
    rep->digest_head = req->next;
    if (rep->digest_head == NULL) {
        rep->digest_tail = NULL;
    }
    rep->digest_n--;
    if (rv != 0) {
        req->cb(req, REPLICA_E_NOMEM);
        digest_start_next(rep);
        return;
    }
    req->index = rep->raft->last_applied;
    req->term = rep->raft->current_term;
    req->applied_digest = rep->digest;
    req->fn_rv = 0;
    req->work.work = digest_work;
    rep->digest_running = true;
    if (rio->inner->async_work(rio->inner, &req->work, digest_done) != 0) {
        fsm_release(rep->fsm, req->view);
        req->view = NULL;
        rep->digest_running = false;
        req->cb(req, REPLICA_E_NOMEM);
        digest_start_next(rep);
    }
}

int replica_state_digest(struct replica *rep,
                         struct replica_digest_req *req,
                         replica_digest_cb cb)
{
    return replica_view_work(rep, req, digest_hash, cb);
}

int replica_view_work(struct replica *rep,
                      struct replica_digest_req *req,
                      replica_view_fn fn,
                      replica_digest_cb cb)
{
    if (rep->closing) {
        return REPLICA_E_SHUTDOWN;
    }
    if (rep->digest_n >= REPLICA_DIGEST_QUEUE_MAX) {
        return REPLICA_E_BUSY;
    }
    ONCE_ASSERT(fn != NULL && cb != NULL, "work and callback are required");
    req->fn = fn;
    req->cb = cb;
    req->rep = rep;
    req->view = NULL;
    req->next = NULL;
    if (rep->digest_tail != NULL) {
        rep->digest_tail->next = req;
    } else {
        rep->digest_head = req;
    }
    rep->digest_tail = req;
    rep->digest_n++;
    digest_start_next(rep);
    return 0;
}

void replica_digest_poll(struct replica *rep)
{
    digest_start_next(rep);
}

void replica_digest_fail_all(struct replica *rep)
{
    struct replica_digest_req *req;

    while ((req = rep->digest_head) != NULL) {
        rep->digest_head = req->next;
        rep->digest_n--;
        req->cb(req, REPLICA_E_SHUTDOWN);
    }
    ONCE_ASSERT(rep->digest_n == 0, "digest_n counts the waiting requests");
    rep->digest_tail = NULL;
}
