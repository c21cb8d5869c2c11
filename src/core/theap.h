/* Intrusive min-heap of deadlines (the asynchronous driver's sleeping
 * calls). The caller embeds a dlock__tentry in its struct; entries are
 * ordered by their time `at`, ties in the order they were armed. Not
 * thread-safe: one thread (an io thread) owns a heap. */
#ifndef DLOCK_THEAP_H
#define DLOCK_THEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct dlock__tentry {
    int64_t at;      /* its deadline (ms, monotonic) */
    uint64_t seq;    /* when it was armed: the earlier first among equal times */
    int idx;         /* its place in the heap, or -1 when not in it (set -1 before
                        first use) */
} dlock__tentry;

typedef struct dlock__theap {
    dlock__tentry **e;
    size_t n, cap;
    uint64_t seq;
} dlock__theap;

/* Puts e (not in the heap) in h at `at`. -1, with nothing changed, when no
 * memory could be had. */
int dlock__theap_add(dlock__theap *h, dlock__tentry *e, int64_t at);
/* Takes e out of h (nothing when it is not in it). */
void dlock__theap_remove(dlock__theap *h, dlock__tentry *e);
/* The earliest entry, or NULL. */
static inline dlock__tentry *dlock__theap_top(const dlock__theap *h)
{
    return h->n ? h->e[0] : NULL;
}
/* Frees the array only. */
void dlock__theap_free(dlock__theap *h);

#endif
