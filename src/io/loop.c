/* The client's io thread: a libuv loop that runs posted jobs and the timers
 * and connections of the modules that registered with it (pub/sub, the
 * watchdog). It names none of them: a module posts dlock__job units to reach
 * the thread, and registers a stop hook that closes its handles. */
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

/* The modules of a client (pub/sub, the watchdog) fit with room to spare. */
#define MAX_HOOKS 8

typedef struct stop_hook {
    void (*fn)(void *arg);
    void *arg;
} stop_hook;

struct dlock__loop {
    const dlock_config *cfg;
    uv_loop_t uv;
    uv_async_t async;
    uv_thread_t thread;

    pthread_mutex_t qmu;     /* guards jobs and closing */
    dlock__list jobs;
    int closing;             /* the stop job is queued: later posts are ignored */
    dlock__job stop_job;

    stop_hook hooks[MAX_HOOKS];   /* set up before the thread runs */
    int nhooks;
};

void dlock__job_init(dlock__job *j, void (*fn)(void *arg), void *arg)
{
    dlock__list_init(&j->link);
    j->fn = fn;
    j->arg = arg;
    j->queued = 0;
}

void dlock__loop_post(dlock__loop *lp, dlock__job *j)
{
    pthread_mutex_lock(&lp->qmu);
    if (!lp->closing && !j->queued) {
        j->queued = 1;
        dlock__list_push_back(&lp->jobs, &j->link);
        /* Under qmu: the async handle cannot be closed meanwhile. */
        uv_async_send(&lp->async);
    }
    pthread_mutex_unlock(&lp->qmu);
}

void dlock__loop_unpost(dlock__loop *lp, dlock__job *j)
{
    pthread_mutex_lock(&lp->qmu);
    if (j->queued) {
        /* In the queue, or in the batch on_async is running: either way a list. */
        dlock__list_remove(&j->link);
        j->queued = 0;
    }
    pthread_mutex_unlock(&lp->qmu);
}

/* Runs the jobs queued so far; a job posted while they run waits for the next
 * wake-up (uv_async_send was called for it). */
static void on_async(uv_async_t *a)
{
    dlock__loop *lp = a->data;
    dlock__list batch;
    dlock__list_init(&batch);
    pthread_mutex_lock(&lp->qmu);
    while (!dlock__list_empty(&lp->jobs)) {
        dlock__list *it = lp->jobs.next;
        dlock__list_remove(it);
        dlock__list_push_back(&batch, it);
    }
    pthread_mutex_unlock(&lp->qmu);
    while (!dlock__list_empty(&batch)) {
        dlock__job *j = DLOCK__CONTAINER_OF(batch.next, dlock__job, link);
        pthread_mutex_lock(&lp->qmu);
        dlock__list_remove(&j->link);
        j->queued = 0;
        pthread_mutex_unlock(&lp->qmu);
        j->fn(j->arg);
    }
}

static void on_async_closed(uv_handle_t *h) {}

/* The last job: every module closes its handles, then the async handle goes,
 * and uv_run returns once libuv has released them all. */
static void stop_now(void *arg)
{
    dlock__loop *lp = arg;
    for (int i = lp->nhooks; i-- > 0;)
        lp->hooks[i].fn(lp->hooks[i].arg);
    uv_close((uv_handle_t *)&lp->async, on_async_closed);
}

/* Which loop, if any, the calling thread runs. */
static _Thread_local dlock__loop *tls_io_loop;

int dlock__loop_on_io_thread(dlock__loop *lp) { return lp && tls_io_loop == lp; }

static void io_main(void *arg)
{
    dlock__loop *lp = arg;
    tls_io_loop = lp;
    uv_run(&lp->uv, UV_RUN_DEFAULT);
}

uv_loop_t *dlock__loop_uv(dlock__loop *lp) { return &lp->uv; }

int dlock__loop_on_stop(dlock__loop *lp, void (*fn)(void *arg), void *arg)
{
    if (lp->nhooks == MAX_HOOKS)
        return dlock__fail(DLOCK_EINVAL, "too many modules on one loop");
    lp->hooks[lp->nhooks].fn = fn;
    lp->hooks[lp->nhooks++].arg = arg;
    return DLOCK_OK;
}

int dlock__loop_start(dlock__loop **out, const dlock_config *cfg)
{
    dlock__loop *lp = calloc(1, sizeof(*lp));
    if (!lp)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    lp->cfg = cfg;
    pthread_mutex_init(&lp->qmu, NULL);
    dlock__list_init(&lp->jobs);
    dlock__job_init(&lp->stop_job, stop_now, lp);
    int rc = uv_loop_init(&lp->uv);
    if (rc < 0) {
        pthread_mutex_destroy(&lp->qmu);
        free(lp);
        return dlock__fail(DLOCK_ESYS, "cannot create the event loop: %s", uv_strerror(rc));
    }
    uv_async_init(&lp->uv, &lp->async, on_async);
    lp->async.data = lp;
    *out = lp;
    return DLOCK_OK;
}

/* Starts the thread once the modules are set up. */
int dlock__loop_run(dlock__loop *lp)
{
    int rc = uv_thread_create(&lp->thread, io_main, lp);
    if (rc < 0)
        return dlock__fail(DLOCK_ESYS, "cannot start the io thread: %s", uv_strerror(rc));
    return DLOCK_OK;
}

static void free_loop(dlock__loop *lp)
{
    uv_loop_close(&lp->uv);
    pthread_mutex_destroy(&lp->qmu);
    free(lp);
}

void dlock__loop_stop(dlock__loop *lp)
{
    if (!lp)
        return;
    pthread_mutex_lock(&lp->qmu);
    lp->stop_job.queued = 1;
    dlock__list_push_back(&lp->jobs, &lp->stop_job.link);
    lp->closing = 1;
    uv_async_send(&lp->async);
    pthread_mutex_unlock(&lp->qmu);
    uv_thread_join(&lp->thread);
    free_loop(lp);
}

void dlock__loop_abandon(dlock__loop *lp)
{
    if (!lp)
        return;
    /* The thread never ran: close the handles here. */
    lp->closing = 1;
    stop_now(lp);
    uv_run(&lp->uv, UV_RUN_DEFAULT);
    free_loop(lp);
}
