/* The topology backends' background thread (backend.h): one idiom for the
 * cluster map refresher, the sentinel watcher and the replicated scanner. A
 * round runs when it is due, or at once when poked; the thread waits on a
 * condition variable between rounds, so a poke or the stop is seen at once
 * (during a round, when the round returns). */
#include <stdlib.h>

#include "net/backend.h"

struct dlock__refresher {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int poked, stop;             /* under mu */
    int64_t first_ms;
    dlock__refresh_fn fn;
    void *ud;
};

static void *run(void *arg)
{
    dlock__refresher *r = arg;
    pthread_mutex_lock(&r->mu);
    int64_t due = dlock__now_ms() + r->first_ms;
    while (!r->stop) {
        int64_t now = dlock__now_ms();
        if (!r->poked && now < due) {
            struct timespec ts;
            dlock__abstime(due, &ts);
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
            continue;
        }
        int poked = r->poked;
        r->poked = 0;
        pthread_mutex_unlock(&r->mu);
        due = now + r->fn(r->ud, poked);   /* the next round counts from this one's start */
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int dlock__refresher_start(dlock__refresher **out, int64_t first_ms, dlock__refresh_fn fn,
                           void *ud, const char *what)
{
    dlock__refresher *r = calloc(1, sizeof(*r));
    if (!r)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    r->first_ms = first_ms;
    r->fn = fn;
    r->ud = ud;
    pthread_mutex_init(&r->mu, NULL);
    int rc = dlock__cond_init(&r->cv);
    if (rc == 0 && (rc = pthread_create(&r->thread, NULL, run, r)) != 0)
        pthread_cond_destroy(&r->cv);
    if (rc != 0) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        return dlock__fail(DLOCK_ESYS, "cannot start the %s thread", what);
    }
    *out = r;
    return DLOCK_OK;
}

void dlock__refresher_poke(dlock__refresher *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->poked = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void dlock__refresher_stop(dlock__refresher *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
