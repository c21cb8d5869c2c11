/* The lock kinds beyond the four types' plain handles (lock.h), each a
 * handle on one of those types with a setting of its own: the fenced lock
 * (Redisson's RFencedLock, a reentrant lock whose every acquisition counts a
 * fencing token), the non-reentrant locks (Redisson 4.4: the lock and the
 * fair lock refusing their holder's second acquisition) and the spin lock
 * (Redisson's RedissonSpinLock: the reentrant lock's keys, waits that
 * subscribe to nothing and retry on a back-off). */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* ------------------------------------------------------------ fenced lock */

static int fenced_new(dlock_client *c, const char *name, const char *owner, dlock_lock **out)
{
    int rc = dlock__lock_new(c, &dlock__reentrant_type, name, owner, out);
    if (rc == DLOCK_OK)
        (*out)->fence_all = 1;
    return rc;
}

int dlock_fenced_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return fenced_new(c, name, NULL, out);
}

int dlock_fenced_lock_get_as(dlock_client *c, const char *name, const char *owner,
                             dlock_lock **out)
{
    if (!owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    return fenced_new(c, name, owner, out);
}

/* ----------------------------------------------------- non-reentrant lock */

/* A lock whose holder may not take it again (Redisson 4.4's non-reentrant
 * locks): the type's acquire script refuses it (DLOCK_EREENTRY) before
 * writing anything. Redis holds it as the lock it is built on. */
static int nonreentrant_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                            const char *owner, int explicit_owner, dlock_lock **out)
{
    if (explicit_owner && !owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    int rc = dlock__lock_new(c, type, name, owner, out);
    if (rc == DLOCK_OK)
        (*out)->no_reentry = 1;
    return rc;
}

int dlock_nonreentrant_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__reentrant_type, name, NULL, 0, out);
}

int dlock_nonreentrant_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                   dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__reentrant_type, name, owner, 1, out);
}

int dlock_nonreentrant_fair_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__fair_type, name, NULL, 0, out);
}

int dlock_nonreentrant_fair_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                        dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__fair_type, name, owner, 1, out);
}

/* -------------------------------------------------------------- spin lock */

/* Redisson's ExponentialBackOff defaults. */
static const dlock_backoff default_backoff = {.initial_ms = 1, .max_ms = 128, .multiplier = 2};

/* A reentrant lock whose waits subscribe to nothing (Redisson's
 * RedissonSpinLock): the acquire operation's wait is quiet, with the
 * handle's back-off (lock.c: acquire). Redis holds it as the lock it is. */
static int spin_new(dlock_client *c, const char *name, const char *owner, int explicit_owner,
                    dlock_lock **out)
{
    if (explicit_owner && !owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    int rc = dlock__lock_new(c, &dlock__reentrant_type, name, owner, out);
    if (rc == DLOCK_OK) {
        (*out)->spin = 1;
        (*out)->backoff = default_backoff;
    }
    return rc;
}

int dlock_spin_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return spin_new(c, name, NULL, 0, out);
}

int dlock_spin_lock_get_as(dlock_client *c, const char *name, const char *owner,
                           dlock_lock **out)
{
    return spin_new(c, name, owner, 1, out);
}

int dlock_lock_set_backoff(dlock_lock *l, const dlock_backoff *b)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    if (!l->spin)
        return dlock__fail(DLOCK_EINVAL, "'%s' is not a spin lock: its waiters sleep on "
                                         "pub/sub, with no back-off", l->h.name);
    dlock_backoff v = b ? *b : default_backoff;
    const int64_t hour = 3600000;
    if (v.initial_ms < 1 || v.initial_ms > hour)
        return dlock__fail(DLOCK_EINVAL, "back-off initial_ms %lld out of range (1..%lld)",
                           (long long)v.initial_ms, (long long)hour);
    if (v.max_ms < v.initial_ms || v.max_ms > hour)
        return dlock__fail(DLOCK_EINVAL, "back-off max_ms %lld out of range (initial_ms..%lld)",
                           (long long)v.max_ms, (long long)hour);
    if (v.multiplier < 1 || v.multiplier > 1000)
        return dlock__fail(DLOCK_EINVAL, "back-off multiplier %d out of range (1..1000)",
                           v.multiplier);
    pthread_mutex_lock(&l->mu);
    l->backoff = v;
    pthread_mutex_unlock(&l->mu);
    return DLOCK_OK;
}
