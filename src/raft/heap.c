/* raft/heap.c: libraft's heap with large frees on a thread (heap.h). */
#include "raft/heap.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <raft.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/assert.h"

/* A queued block's first bytes link it to the next: a freed block is ours,
 * so the queue needs no allocation (and cannot fail). */
struct queued
{
    struct queued *next;
};

static struct
{
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    struct queued *head;
    bool running;
    bool stop;
    unsigned long handed;
} bg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* A large block's pages are given back in steps before the free: one
 * munmap of 750 MB held the process's memory map for 24-50 ms (strace), a
 * wait for the loop's own mmaps and page faults meanwhile; each madvise
 * step is short. The block is being freed, so its contents do not
 * matter. */
#define RELEASE_STEP ((size_t)8 << 20)

static void release(void *ptr)
{
    size_t len = malloc_usable_size(ptr);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a =
        ((uintptr_t)ptr + sizeof(struct queued) + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)ptr + len) & ~(page - 1);

    if (len >= HEAP_BG_MIN) {
        for (; a + RELEASE_STEP <= end; a += RELEASE_STEP) {
            (void)madvise((void *)a, RELEASE_STEP, MADV_DONTNEED);
        }
    }
    free(ptr);
}

static void *bg_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bg.mu);
    for (;;) {
        struct queued *q = bg.head;

        if (q == NULL) {
            if (bg.stop) {
                break;
            }
            pthread_cond_wait(&bg.cv, &bg.mu);
            continue;
        }
        bg.head = NULL;
        pthread_mutex_unlock(&bg.mu);
        while (q != NULL) {
            struct queued *next = q->next;

            release(q);
            q = next;
        }
        pthread_mutex_lock(&bg.mu);
    }
    pthread_mutex_unlock(&bg.mu);
    return NULL;
}

static void *h_malloc(void *data, size_t size)
{
    (void)data;
    return malloc(size);
}

/* Queue @ptr (not NULL, at least sizeof (struct queued) usable bytes, as
 * every malloc'd block has), or free it now if the thread is not running. */
static void enqueue(void *ptr)
{
    struct queued *q = ptr;

    ONCE_ASSERT(malloc_usable_size(ptr) >= sizeof *q,
                "a queued block holds its link");
    pthread_mutex_lock(&bg.mu);
    if (!bg.running || bg.stop) {
        pthread_mutex_unlock(&bg.mu);
        free(ptr);
        return;
    }
    q->next = bg.head;
    bg.head = q;
    bg.handed++;
    pthread_cond_signal(&bg.cv);
    pthread_mutex_unlock(&bg.mu);
}

static void h_free(void *data, void *ptr)
{
    (void)data;
    if (ptr == NULL || malloc_usable_size(ptr) < HEAP_BG_MIN) {
        free(ptr);
        return;
    }
    enqueue(ptr);
}

void heap_bg_free_later(void *ptr)
{
    if (ptr != NULL) {
        enqueue(ptr);
    }
}

static void *h_calloc(void *data, size_t nmemb, size_t size)
{
    (void)data;
    return calloc(nmemb, size);
}

static void *h_realloc(void *data, void *ptr, size_t size)
{
    (void)data;
    return realloc(ptr, size);
}

static void *h_aligned_alloc(void *data, size_t alignment, size_t size)
{
    (void)data;
    return aligned_alloc(alignment, size);
}

static void h_aligned_free(void *data, size_t alignment, void *ptr)
{
    (void)data;
    (void)alignment;
    free(ptr); /* I/O buffers: small */
}

static struct raft_heap heap = {NULL,          h_malloc,  h_free,
                                h_calloc,      h_realloc, h_aligned_alloc,
                                h_aligned_free};

int heap_bg_start(void)
{
    int rv;

    if (bg.running) {
        return 0;
    }
    bg.stop = false;
    rv = pthread_create(&bg.thread, NULL, bg_main, NULL);
    if (rv != 0) {
        return -rv;
    }
    pthread_mutex_lock(&bg.mu);
    bg.running = true;
    pthread_mutex_unlock(&bg.mu);
    raft_heap_set(&heap);
    return 0;
}

void heap_bg_stop(void)
{
    if (!bg.running) {
        return;
    }
    raft_heap_set_default();
    pthread_mutex_lock(&bg.mu);
    bg.stop = true;
    pthread_cond_signal(&bg.cv);
    pthread_mutex_unlock(&bg.mu);
    pthread_join(bg.thread, NULL);
    pthread_mutex_lock(&bg.mu);
    bg.running = false;
    pthread_mutex_unlock(&bg.mu);
}

unsigned long heap_bg_handed(void)
{
    unsigned long n;

    pthread_mutex_lock(&bg.mu);
    n = bg.handed;
    pthread_mutex_unlock(&bg.mu);
    return n;
}
