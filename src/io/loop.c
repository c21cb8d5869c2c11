/* The client's io thread: a libuv loop that runs posted jobs and the timers
 * and connections of the modules that registered with it (pub/sub, the
 * watchdog). It names none of them: a module posts dlock__job units to reach
 * the thread, and registers a stop hook that closes its handles.
 *
 * Embedded (dlock_config_set_uv_loop): no thread. dlock's loop is driven by
 * the program's: a uv_poll on dlock's backend fd (epoll: it turns readable
 * when any of dlock's handles has an event, a posted job included) and a
 * timer at dlock's next timeout run `uv_run(dlock's, NOWAIT)` on the
 * program's thread, so every dlock callback runs there. Closing runs dlock's
 * loop to its end on the calling thread (a different loop: no re-entry of
 * the program's). */
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

    /* Embedded in a program's loop (NULL: a thread of our own). */
    uv_loop_t *host;
    uv_thread_t host_thread;      /* the thread that opened the client: the loop's */
    uv_poll_t *epoll;             /* on host: our backend fd (freed by its close callback) */
    uv_timer_t *etimer;           /* on host: our next timeout */
    int running;                  /* inside uv_run of our loop (embedded) */
};

void dlock__job_init(dlock__job *j, void (*fn)(void *arg), void *arg)
{
    dlock__list_init(&j->link);
    j->fn = fn;
    j->arg = arg;
    j->queued = 0;
}

int dlock__loop_post(dlock__loop *lp, dlock__job *j)
{
    pthread_mutex_lock(&lp->qmu);
    int ok = !lp->closing || j->queued;
    if (!lp->closing && !j->queued) {
        j->queued = 1;
        dlock__list_push_back(&lp->jobs, &j->link);
        /* Under qmu: the async handle cannot be closed meanwhile. */
        uv_async_send(&lp->async);
    }
    pthread_mutex_unlock(&lp->qmu);
    return ok;
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

int dlock__loop_on_some_io_thread(void) { return tls_io_loop != NULL; }

int dlock__loop_running_here(const dlock__loop *lp) { return lp && tls_io_loop == lp; }

int dlock__loop_hosted(const dlock__loop *lp) { return lp && lp->host; }

int dlock__loop_on_io_thread(dlock__loop *lp)
{
    if (!lp)
        return 0;
    if (tls_io_loop == lp)
        return 1;
    /* Embedded: the program's loop thread runs dlock's callbacks, and a wait
     * there would stall them. */
    uv_thread_t self = uv_thread_self();
    return lp->host && uv_thread_equal(&self, &lp->host_thread);
}

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
    lp->host = cfg->uv_loop;
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

/* ------------------------------------------------------------ embedded */

static void embed_arm(dlock__loop *lp);

/* One turn of our loop, on the program's thread. */
static void embed_run(dlock__loop *lp)
{
    if (lp->running)
        return;
    lp->running = 1;
    dlock__loop *was = tls_io_loop;
    tls_io_loop = lp;
    uv_run(&lp->uv, UV_RUN_NOWAIT);
    tls_io_loop = was;
    lp->running = 0;
    embed_arm(lp);
}

static void on_embed_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    embed_run(p->data);
}

static void on_embed_timer(uv_timer_t *t) { embed_run(t->data); }

static void embed_arm(dlock__loop *lp)
{
    if (!lp->etimer)
        return;
    int t = uv_backend_timeout(&lp->uv);
    if (t >= 0)
        uv_timer_start(lp->etimer, on_embed_timer, (uint64_t)t, 0);
    else
        uv_timer_stop(lp->etimer);
}

static void free_handle(uv_handle_t *h) { free(h); }

static int embed_start(dlock__loop *lp)
{
    lp->host_thread = uv_thread_self();
    lp->epoll = malloc(sizeof(*lp->epoll));
    lp->etimer = malloc(sizeof(*lp->etimer));
    if (!lp->epoll || !lp->etimer) {
        free(lp->epoll);
        free(lp->etimer);
        lp->epoll = NULL;
        lp->etimer = NULL;
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    int rc = uv_poll_init(lp->host, lp->epoll, uv_backend_fd(&lp->uv));
    if (rc < 0) {
        free(lp->epoll);
        free(lp->etimer);
        lp->epoll = NULL;
        lp->etimer = NULL;
        return dlock__fail(DLOCK_ESYS, "cannot watch dlock's loop from the program's: %s",
                           uv_strerror(rc));
    }
    uv_timer_init(lp->host, lp->etimer);
    lp->epoll->data = lp;
    lp->etimer->data = lp;
    uv_poll_start(lp->epoll, UV_READABLE, on_embed_poll);
    /* What the modules set up already (a job posted) runs on the first turn. */
    uv_timer_start(lp->etimer, on_embed_timer, 0, 0);
    return DLOCK_OK;
}

/* The program's handles go (their memory with them, in their close
 * callbacks: nothing of ours is touched after). */
static void embed_detach(dlock__loop *lp)
{
    if (lp->epoll) {
        uv_poll_stop(lp->epoll);
        uv_close((uv_handle_t *)lp->epoll, free_handle);
        lp->epoll = NULL;
    }
    if (lp->etimer) {
        uv_timer_stop(lp->etimer);
        uv_close((uv_handle_t *)lp->etimer, free_handle);
        lp->etimer = NULL;
    }
}

/* Starts the thread once the modules are set up (embedded: the watch). */
int dlock__loop_run(dlock__loop *lp)
{
    if (lp->host)
        return embed_start(lp);
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
    if (lp->host) {
        /* Embedded: our loop runs to its end here, on the program's thread. */
        embed_detach(lp);
        dlock__loop *was = tls_io_loop;
        tls_io_loop = lp;
        uv_run(&lp->uv, UV_RUN_DEFAULT);
        tls_io_loop = was;
    } else {
        uv_thread_join(&lp->thread);
    }
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
