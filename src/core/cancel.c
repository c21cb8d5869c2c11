/* Cancellation tokens: another thread fires one to end waits early. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "core/core.h"

struct dlock_cancel {
    pthread_mutex_t mu;    /* guards regs; taken before any registered mutex */
    atomic_int fired;
    dlock__list regs;      /* dlock__cancel_reg of the threads waiting now */
};

int dlock_cancel_new(dlock_cancel **out)
{
    dlock__clear_error();
    if (!out)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    dlock_cancel *t = calloc(1, sizeof(*t));
    if (!t)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    atomic_init(&t->fired, 0);
    dlock__list_init(&t->regs);
    *out = t;
    return DLOCK_OK;
}

void dlock_cancel_free(dlock_cancel *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void dlock_cancel_fire(dlock_cancel *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->fired, 1);
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &t->regs) {
        dlock__cancel_reg *r = DLOCK__CONTAINER_OF(it, dlock__cancel_reg, link);
        if (r->fn) {
            r->fn(r->arg);
            continue;
        }
        /* Taking the waiter's mutex orders this broadcast after its check of
         * `fired`, so the wake-up cannot fall between check and wait. */
        pthread_mutex_lock(r->mu);
        pthread_cond_broadcast(r->cv);
        pthread_mutex_unlock(r->mu);
    }
    pthread_mutex_unlock(&t->mu);
}

void dlock_cancel_reset(dlock_cancel *t)
{
    if (t)
        atomic_store(&t->fired, 0);
}

int dlock_cancel_fired(const dlock_cancel *t)
{
    return t ? atomic_load(&((dlock_cancel *)t)->fired) : 0;
}

void dlock__cancel_attach(dlock_cancel *t, dlock__cancel_reg *reg, pthread_mutex_t *mu,
                          pthread_cond_t *cv)
{
    if (!t)
        return;
    reg->mu = mu;
    reg->cv = cv;
    reg->fn = NULL;
    reg->arg = NULL;
    pthread_mutex_lock(&t->mu);
    dlock__list_push_back(&t->regs, &reg->link);
    pthread_mutex_unlock(&t->mu);
}

void dlock__cancel_attach_fn(dlock_cancel *t, dlock__cancel_reg *reg, void (*fn)(void *arg),
                             void *arg)
{
    if (!t)
        return;
    reg->mu = NULL;
    reg->cv = NULL;
    reg->fn = fn;
    reg->arg = arg;
    pthread_mutex_lock(&t->mu);
    dlock__list_push_back(&t->regs, &reg->link);
    pthread_mutex_unlock(&t->mu);
}

void dlock__cancel_detach(dlock_cancel *t, dlock__cancel_reg *reg)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    dlock__list_remove(&reg->link);
    pthread_mutex_unlock(&t->mu);
}

int dlock__cancel_sleep(dlock_cancel *t, int64_t ms)
{
    if (ms <= 0)
        return dlock_cancel_fired(t) ? DLOCK_ECANCELED : DLOCK_OK;
    if (!t) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        return DLOCK_OK;
    }
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dlock__cancel_reg reg;
    pthread_mutex_init(&mu, NULL);
    if (dlock__cond_init(&cv) != 0) {
        pthread_mutex_destroy(&mu);
        return dlock__fail(DLOCK_ESYS, "cannot create a condition variable");
    }
    dlock__cancel_attach(t, &reg, &mu, &cv);
    int64_t until = dlock__now_ms() + ms;
    struct timespec ts;
    dlock__abstime(until, &ts);
    pthread_mutex_lock(&mu);
    while (!dlock_cancel_fired(t) && dlock__now_ms() < until)
        pthread_cond_timedwait(&cv, &mu, &ts);
    int fired = dlock_cancel_fired(t);
    pthread_mutex_unlock(&mu);
    dlock__cancel_detach(t, &reg);
    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&mu);
    return fired ? dlock__fail(DLOCK_ECANCELED, "cancelled") : DLOCK_OK;
}
