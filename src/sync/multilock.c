/* Multi-lock and RedLock (Redisson's RedissonMultiLock and RedissonRedLock):
 * several lock handles, of any type and on any clients, taken as one. This
 * file makes the handle (its checks) and holds the public calls, blocking
 * and asynchronous: each is one composite operation (multilock_round.c)
 * started with dlock__start, so both forms run the same rounds, decision
 * and give-back. Nothing here knows a lock type. See
 * docs/internals/multilock.md. */
#include <stdlib.h>
#include <string.h>

#include "sync/multilock.h"

/* ------------------------------------------------------------ handles */

static int same_server(const dlock_lock *x, const dlock_lock *y)
{
    if (x->h.c == y->h.c)
        return 1;
    const dlock__endpoint *a = &x->h.c->cfg.ep, *b = &y->h.c->cfg.ep;
    if (a->db != b->db || !a->path != !b->path)
        return 0;
    if (a->path)
        return strcmp(a->path, b->path) == 0;
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

static const char *addr_of(const dlock_lock *l, char *buf, size_t size)
{
    return dlock__endpoint_str(&l->h.c->cfg.ep, buf, size);
}

typedef struct entry {
    const dlock_lock *l;
    size_t i;                /* its place in the caller's array */
} entry;

static int by_name(const void *p, const void *q)
{
    const dlock_lock *x = ((const entry *)p)->l, *y = ((const entry *)q)->l;
    size_t m = x->h.nlen < y->h.nlen ? x->h.nlen : y->h.nlen;
    int d = memcmp(x->h.name, y->h.name, m);
    return d ? d : (x->h.nlen > y->h.nlen) - (x->h.nlen < y->h.nlen);
}

/* No lock twice: not the same handle, nor the same name on the same server
 * (sorted by name, so a long array costs n log n, not n^2). */
static int check_duplicates(dlock_lock *const *locks, size_t n)
{
    entry *e = malloc(n * sizeof(*e));
    if (!e)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        e[i] = (entry){locks[i], i};
    qsort(e, n, sizeof(*e), by_name);
    int rc = DLOCK_OK;
    for (size_t r = 0; r < n && rc == DLOCK_OK; r++)
        for (size_t q = r + 1; q < n && by_name(&e[r], &e[q]) == 0 && rc == DLOCK_OK; q++) {
            size_t i = e[r].i < e[q].i ? e[r].i : e[q].i, j = e[r].i ^ e[q].i ^ i;
            char addr[320];
            if (locks[i] == locks[j])
                rc = dlock__fail(DLOCK_EINVAL, "locks[%zu] and locks[%zu] are the same handle",
                                 i, j);
            else if (same_server(locks[i], locks[j]))
                rc = dlock__fail(DLOCK_EINVAL,
                                 "locks[%zu] and locks[%zu] both name '%s' on %s: a lock may "
                                 "appear once",
                                 i, j, locks[i]->h.name, addr_of(locks[i], addr, sizeof(addr)));
        }
    free(e);
    return rc;
}

/* A RedLock's locks each on a client of their own, on servers of their own. */
static int check_independent(dlock_lock *const *locks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            char addr[320];
            if (locks[i]->h.c == locks[j]->h.c)
                return dlock__fail(DLOCK_EINVAL,
                                   "RedLock: locks[%zu] and locks[%zu] use the same client: "
                                   "each lock must be on its own client and independent server",
                                   i, j);
            if (same_server(locks[i], locks[j]))
                return dlock__fail(DLOCK_EINVAL,
                                   "RedLock: locks[%zu] and locks[%zu] are both on %s: each "
                                   "lock must be on its own independent server",
                                   i, j, addr_of(locks[i], addr, sizeof(addr)));
        }
    return DLOCK_OK;
}

static int create(dlock_lock *const *locks, size_t n, int red, dlock_multilock **out)
{
    dlock__clear_error();
    if (!out)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    const char *what = red ? "RedLock" : "multi-lock";
    if (!locks || n == 0)
        return dlock__fail(DLOCK_EINVAL, "%s of no locks: give an array of at least %d", what,
                           red ? 3 : 1);
    if (red && n < 3)
        return dlock__fail(DLOCK_EINVAL,
                           "RedLock over %zu lock%s: it needs at least 3, each on its own "
                           "independent server (it holds when a majority is taken)",
                           n, n == 1 ? "" : "s");
    if (n > (SIZE_MAX / 4) / dlock__ml_slot_size)
        return dlock__fail(DLOCK_EINVAL, "%s of %zu locks: too many", what, n);
    for (size_t i = 0; i < n; i++)
        if (!locks[i])
            return dlock__fail(DLOCK_EINVAL, "%s: locks[%zu] is NULL", what, i);
    int rc = check_duplicates(locks, n);
    if (rc == DLOCK_OK && red)
        rc = check_independent(locks, n);
    if (rc != DLOCK_OK)
        return rc;
    dlock_multilock *ml = calloc(1, sizeof(*ml));
    if (!ml || !(ml->locks = malloc(n * sizeof(*ml->locks)))) {
        free(ml);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    memcpy(ml->locks, locks, n * sizeof(*locks));
    ml->red = red;
    ml->n = n;
    ml->quorum = red ? n / 2 + 1 : n;
    size_t at = (size_t)snprintf(ml->label, sizeof(ml->label), "%s", what);
    for (size_t i = 0; i < n && at < sizeof(ml->label); i++)
        at += (size_t)snprintf(ml->label + at, sizeof(ml->label) - at, "%s%.*s", i ? ", " : " ",
                               (int)(locks[i]->h.nlen > 40 ? 40 : locks[i]->h.nlen),
                               locks[i]->h.name);
    if (at >= sizeof(ml->label))
        memcpy(ml->label + sizeof(ml->label) - 4, "...", 4);
    /* The drivers' view: calls run on the first lock's client, and wait on
     * its channel until a busy lock names its own. */
    ml->h = (dlock__handle){.c = locks[0]->h.c, .acks = -1, .what = what, .name = ml->label,
                            .nlen = strlen(ml->label), .channel = locks[0]->h.channel,
                            .clen = locks[0]->h.clen};
    *out = ml;
    return DLOCK_OK;
}

int dlock_multilock_new(dlock_lock *const *locks, size_t n, dlock_multilock **out)
{
    return create(locks, n, 0, out);
}

int dlock_redlock_new(dlock_lock *const *locks, size_t n, dlock_multilock **out)
{
    return create(locks, n, 1, out);
}

void dlock_multilock_free(dlock_multilock *ml)
{
    if (!ml)
        return;
    free(ml->locks);
    free(ml);
}

/* ------------------------------------------------------------- calls */

/* The calls' first checks: the handle, and for an asynchronous call (via)
 * the callback and explicit owners, since a callback does not run on the
 * thread that asked. */
static int check_call(const dlock_multilock *ml, const dlock__via *via)
{
    int rc = dlock__check_handle(ml, "multi-lock");
    if (rc != DLOCK_OK || !via)
        return rc;
    if (!via->fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    for (size_t i = 0; i < ml->n; i++)
        if (!ml->locks[i]->owner)
            return dlock__fail(DLOCK_EINVAL, "%s: '%s' acts for the calling thread: an "
                                             "asynchronous call needs explicit-owner handles "
                                             "(dlock_lock_get_as)",
                               ml->label, ml->locks[i]->h.name);
    return DLOCK_OK;
}

static int acquire(dlock_multilock *ml, const dlock_wait_opts *opts, const dlock__via *via)
{
    int rc = check_call(ml, via);
    dlock__ml_call cl = {.ml = ml};
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE, "a multi-lock", &cl.o);
    if (rc != DLOCK_OK)
        return rc;
    if (!via && cl.o.wait_ms != 0)
        for (size_t i = 0; i < ml->n; i++)
            if (dlock__loop_on_io_thread(ml->locks[i]->h.c->loop))
                return dlock__fail(DLOCK_EINVAL, "a wait from a dlock callback would stall the "
                                                 "io thread: use a wait of 0 there");
    dlock__wait_spec spec = {.wake = dlock__wake_lock, .wait_ms = cl.o.wait_ms,
                             .cancel = cl.o.cancel};
    return dlock__start(&ml->h, &dlock__ml_acquire_type, &cl, sizeof(cl), &spec, via, NULL);
}

int dlock_multilock_acquire_opts(dlock_multilock *ml, const dlock_wait_opts *o)
{
    return acquire(ml, o, NULL);
}

int dlock_multilock_acquire(dlock_multilock *ml, int64_t lease_ms)
{
    return acquire(ml, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease_ms},
                   NULL);
}

int dlock_multilock_try(dlock_multilock *ml, int64_t wait_ms, int64_t lease_ms)
{
    return acquire(ml, &(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms}, NULL);
}

int dlock_multilock_acquire_async(dlock_multilock *ml, const dlock_wait_opts *o,
                                  dlock_async_fn fn, void *ud)
{
    return acquire(ml, o, &(dlock__via){fn, ud, 0});
}

static int release(dlock_multilock *ml, const dlock__via *via)
{
    int rc = check_call(ml, via);
    if (rc != DLOCK_OK)
        return rc;
    dlock__ml_call cl = {.ml = ml};
    return dlock__start(&ml->h, &dlock__ml_release_type, &cl, sizeof(cl), NULL, via, NULL);
}

int dlock_multilock_release(dlock_multilock *ml) { return release(ml, NULL); }

int dlock_multilock_release_async(dlock_multilock *ml, dlock_async_fn fn, void *ud)
{
    return release(ml, &(dlock__via){fn, ud, 0});
}
