/* Frozen views: the state at one applied index, encoded by another thread
 * while the owner keeps applying (fsm.h, fsm_freeze).
 *
 * Copy-on-write at page granularity through the slab's handle -> page
 * indirection. Freezing copies what is small: the page pointer array
 * (slab_freeze marks the pages frozen), the struct fsm itself (header
 * fields, the 4096 table headers) and the retired ids. It never walks the
 * records. Afterwards the owner never writes memory the view can see:
 *
 *   - slab pages: the first write to a frozen page copies it (slab_mut);
 *   - slot arrays: the first change to a vp copies its array (fsm_vp_mut);
 *     a resize or close of that copy then frees only the owner's memory;
 *   - result/error buffers (ext->stored) are malloc'd: their frees wait in
 *     f->deferred until fsm_release.
 *
 * The view's shell is a struct fsm whose slab points at the frozen page
 * array and whose tables are the frozen headers, so fsm_snapshot_write
 * encodes it unchanged: byte-identical to a synchronous snapshot taken at
 * the freeze. Only fsm_snapshot_size/_write may be called on the shell (it
 * has no slab metadata, wheel state is stale, nothing in it is freed but
 * what fsm_release frees). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

struct fsm_frozen
{
    struct fsm *shell;
    uint8_t **pages; /* page pointers at the freeze */
    uint32_t n_pages;
    size_t size;          /* fsm_snapshot_size at the freeze */
    uint64_t fixed_bytes; /* shell, page array and retired ids */
};

int fsm_freeze(struct fsm *f, struct fsm_frozen **out)
{
    struct fsm_frozen *z;
    struct fsm *shell;
    uint64_t *retired;
    size_t n_ret = f->n_retired;

    if (f->frozen != NULL) {
        return FSM_E_BUSY;
    }
    z = calloc(1, sizeof *z);
    shell = malloc(sizeof *shell);
    retired = malloc((n_ret > 0 ? n_ret : 1) * sizeof *retired);
    if (z == NULL || shell == NULL || retired == NULL ||
        (z->pages = slab_freeze(&f->slab, &z->n_pages)) == NULL) {
        free(z);
        free(shell);
        free(retired);
        return -ENOMEM;
    }
    memcpy(shell, f, sizeof *f);
    if (n_ret > 0) {
        memcpy(retired, f->retired, n_ret * sizeof *retired);
    }
    shell->slab.pages = z->pages;
    shell->slab.meta = NULL;
    shell->retired = retired;
    shell->cap_retired = n_ret;
    shell->cmds = NULL;
    shell->hashes = NULL;
    shell->hashed = NULL;
    shell->frozen = NULL;
    shell->deferred = NULL;
    shell->stored = NULL;
    memset(&shell->ticks, 0, sizeof shell->ticks);
    memset(&shell->pending, 0, sizeof shell->pending); /* the owner's */
    for (size_t i = 0; i < shell->n_quotas; i++) {
        /* Only the patterns and limits are the view's (snapshots). */
        memset(&shell->quotas[i].ticks, 0, sizeof shell->quotas[i].ticks);
    }
    for (size_t v = 0; v < FSM_N_VPS; v++) {
        f->vp_frozen[v] = f->vps[v].cap != 0;
    }
    ONCE_ASSERT(f->n_deferred == 0 && f->deferred == NULL,
                "no deferred frees outlive the view that needed them");
    z->shell = shell;
    z->size = fsm_snapshot_size(f);
    z->fixed_bytes = sizeof *shell + (uint64_t)z->n_pages * sizeof *z->pages +
                     n_ret * sizeof *retired;
    f->frozen_vp_bytes = 0;
    f->deferred_bytes = 0;
    f->frozen = z;
    *out = z;
    return 0;
}

size_t fsm_frozen_size(const struct fsm_frozen *z)
{
    return z->size;
}

void fsm_frozen_write(struct fsm_frozen *z, uint8_t *buf, size_t len)
{
    ONCE_ASSERT(len == z->size, "the buffer has fsm_frozen_size bytes");
    fsm_snapshot_write(z->shell, buf, len);
}

const struct fsm *fsm_frozen_state(const struct fsm_frozen *z)
{
    return z->shell;
}

void fsm_release(struct fsm *f, struct fsm_frozen *z)
{
    fsm_release_with(f, z, free);
}

void fsm_release_with(struct fsm *f,
                      struct fsm_frozen *z,
                      void (*free_fn)(void *))
{
    ONCE_ASSERT(z != NULL && f->frozen == z,
                "releasing a view f does not hold");
    slab_thaw(&f->slab, z->pages, z->n_pages);
    for (size_t v = 0; v < FSM_N_VPS; v++) {
        if (!f->vp_frozen[v] && z->shell->vps[v].slots != NULL) {
            /* The owner copied it (or it was empty): the original is the
             * view's alone. */
            free_fn(z->shell->vps[v].slots);
        }
        f->vp_frozen[v] = false;
    }
    for (size_t i = 0; i < f->n_deferred; i++) {
        if (f->deferred[i] != NULL) {
            free_fn(f->deferred[i]);
        }
    }
    free(f->deferred);
    f->deferred = NULL;
    f->n_deferred = 0;
    f->cap_deferred = 0;
    f->deferred_bytes = 0;
    f->frozen_vp_bytes = 0;
    free(z->shell->retired);
    free(z->shell);
    free(z);
    f->frozen = NULL;
}

uint64_t fsm_frozen_extra_bytes(const struct fsm *f)
{
    if (f->frozen == NULL) {
        return 0;
    }
    return f->frozen->fixed_bytes + slab_cow_bytes(&f->slab) +
           f->frozen_vp_bytes + f->deferred_bytes +
           f->cap_deferred * sizeof *f->deferred;
}

void fsm_vp_thaw(struct fsm *f, uint32_t v)
{
    struct table *t = &f->vps[v];
    size_t bytes = (size_t)t->cap * sizeof *t->slots;
    uint64_t *copy;

    ONCE_ASSERT(f->frozen != NULL && f->vp_frozen[v],
                "copying a table no view reads");
    copy = malloc(bytes);
    if (copy == NULL) {
        fsm_panic("out of memory (table copy)");
    }
    memcpy(copy, t->slots, bytes);
    t->slots = copy; /* the view keeps the original */
    f->vp_frozen[v] = false;
    f->frozen_vp_bytes += bytes;
}

void fsm_free_stored(struct fsm *f, uint8_t *p, size_t len)
{
    if (p == NULL) {
        return;
    }
    if (f->frozen == NULL) {
        free(p);
        return;
    }
    if (f->n_deferred == f->cap_deferred) {
        size_t cap = f->cap_deferred == 0 ? 64 : 2 * f->cap_deferred;
        void **d = realloc(f->deferred, cap * sizeof *d);
        if (d == NULL) {
            fsm_panic("out of memory (deferred free)");
        }
        f->deferred = d;
        f->cap_deferred = cap;
    }
    ONCE_ASSERT(f->n_deferred < f->cap_deferred, "deferred list has room");
    f->deferred[f->n_deferred++] = p;
    f->deferred_bytes += len;
}
