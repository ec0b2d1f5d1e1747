/* raft/heap.h: libraft's allocator, with the release of large blocks moved
 * off the event loop.
 *
 * The largest blocks a node holds are snapshot buffers: the one the encoder
 * fills, the file a leader reads to send to a member, the one a follower
 * receives and restores. libraft frees them with raft_free on the loop
 * thread, and freeing 750 MB (10 M records) is a munmap that took the loop
 * 46 ms here (strace, bench/scale at 10 M). Installed, this heap hands a
 * block of HEAP_BG_MIN bytes or more to a thread of its own, which gives
 * its pages back in 8 MiB madvise steps and then frees it (one munmap of
 * the whole block holds the process's memory map long enough to stall
 * the loop's own mmaps); smaller blocks are freed at once. Everything
 * else is libc's malloc, so blocks allocated before the install or freed
 * after the stop stay compatible.
 *
 * Process-wide (raft_heap_set is): heap_bg_start once before the node's
 * raft is set up, heap_bg_stop after it is closed; the stop frees what is
 * still queued, joins the thread and puts libraft's default heap back.
 * Thread-safe (any thread may free). */
#ifndef ONCE_RAFT_HEAP_H_
#define ONCE_RAFT_HEAP_H_

#include <stddef.h>

#define HEAP_BG_MIN ((size_t)16 << 20)

/* 0, or -errno if the thread could not be started (then libraft's default
 * heap stays: large frees happen where they are called). */
int heap_bg_start(void);
void heap_bg_stop(void);

/* Free @ptr (a block from malloc, or NULL) on the thread, whatever its
 * size; at once if the thread is not running. For many blocks that end
 * together (a frozen view's, fsm_release_with). */
void heap_bg_free_later(void *ptr);

/* Blocks handed to the thread so far (tests, logs). */
unsigned long heap_bg_handed(void);

#endif
