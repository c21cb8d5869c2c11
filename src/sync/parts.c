/* A composite operation's parts (sync.h: dlock__parts), run alike for both
 * drivers (docs/internals/operations.md, "Composite operations").
 *
 * A round's parts are grouped by client. Each part is an asynchronous call
 * (async.c) with no wait, so it has that driver's rules (the ACL fallback,
 * the failover quarantine, the replicas' acknowledgement and the give-back
 * of what cannot stand, a release's wait for the renewals in flight, the
 * client's close). A client's group goes to its io thread as one job that
 * starts them all, so their requests go out in one write per node; on that
 * io thread itself they start at once. A blocking caller keeps one group
 * for itself (own_share: one client, one node) and runs it right there with
 * the blocking driver, its requests in one write (dlock__run_batch): a
 * round on one server wakes no thread. A blocking caller on a part's
 * own io thread (a dlock callback, a program's loop that runs dlock's), or
 * on any client's io thread, runs that part with the blocking driver, right
 * there: the io thread cannot answer while its caller waits, nor wait for
 * another that may wait for it. No thread is started. The end of each part
 * is counted under the round's mutex: the last wakes the blocking caller,
 * or notifies the asynchronous one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

int dlock__parts_init(dlock__parts *k)
{
    memset(k, 0, sizeof(*k));
    if (pthread_mutex_init(&k->mu, NULL) != 0)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (pthread_cond_init(&k->cv, NULL) != 0) {
        pthread_mutex_destroy(&k->mu);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

void dlock__parts_destroy(dlock__parts *k)
{
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
}

/* One part (or the start's guard) ended. Once unlocked, k is touched no
 * more: the blocking caller may be gone with it. */
static void ended(dlock__parts *k)
{
    pthread_mutex_lock(&k->mu);
    int last = --k->pending == 0;
    void (*notify)(void *) = k->notify;
    void *arg = k->arg;
    if (last && !notify)
        pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    if (last && notify)
        notify(arg);
}

/* Its busy answer, if it ended after one, is in p->b already. */
static void set_outcome(dlock__part *p, int rc, const char *msg, const dlock__result *res)
{
    p->rc = rc;
    snprintf(p->msg, sizeof(p->msg), "%s", rc == DLOCK_OK ? "" : msg);
    p->busied = res && res->busied;
}

void dlock__parts_refuse(dlock__parts *k, int rc, const char *msg)
{
    for (size_t i = 0; i < k->n; i++)
        set_outcome(k->part[i], rc, msg, NULL);
}

static void on_part(const dlock_async_result *res, void *ud)
{
    dlock__part *p = ud;
    set_outcome(p, res->status, res->message, res);
    ended(p->k);
}

/* As an asynchronous call: refused, it ends at once (its failure written
 * into its record). */
static void start(dlock__part *p)
{
    p->msg[0] = '\0';
    dlock__errto prev = dlock__err_into(p->msg, sizeof(p->msg));
    int rc = dlock__async_run(p->h, p->t, p->st, p->size, NULL,
                              &(dlock__via){on_part, p, &p->b}, 1);
    dlock__err_reset(prev);
    if (rc != DLOCK_OK) {
        p->rc = rc;
        p->busied = 0;
        ended(p->k);
    }
}

/* A part run with the blocking driver has ended with rc: its failure was
 * written into its record (p->msg) while it ran. */
static void ended_here(dlock__part *p, int rc, const dlock__result *res)
{
    p->rc = rc;
    if (rc == DLOCK_OK)
        p->msg[0] = '\0';
    p->busied = res && res->busied;
    ended(p->k);
}

/* With the blocking driver, on the calling thread (its client's io thread):
 * its failures written into its record. */
static void run_here(dlock__part *p)
{
    dlock__result res = {.count = -1};
    p->msg[0] = '\0';
    dlock__errto prev = dlock__err_into(p->msg, sizeof(p->msg));
    int rc = dlock__run(p->h, p->t, p->st, NULL, &res, &p->b);
    dlock__err_reset(prev);
    ended_here(p, rc, &res);
}

/* A client's group, on its io thread. Each part's next is read before it
 * starts: the round may end, and the parts be set anew, once the last has. */
static void on_group(void *arg)
{
    for (dlock__part *p = arg, *next; p; p = next) {
        next = p->next;
        start(p);
    }
}

/* A group on client c, p its first part. A blocking caller on an io thread
 * (any client's: two callbacks waiting for each other's io thread would
 * never end) runs it right here, as one on c's own io thread must. */
static void launch(dlock__parts *k, dlock_client *c, dlock__part *p)
{
    dlock__part *next;
    if (dlock__loop_on_io_thread(c->loop) || (!k->notify && dlock__loop_on_some_io_thread())) {
        for (; p; p = next) {
            next = p->next;
            if (k->notify)
                start(p);
            else
                run_here(p);
        }
        return;
    }
    dlock__job_init(&p->job, on_group, p);
    if (dlock__loop_post(c->loop, &p->job))
        return;
    for (; p; p = next) {   /* its loop has stopped: the client is closing */
        next = p->next;
        set_outcome(p, DLOCK_ECLOSED, "client is closing", NULL);
        ended(k);
    }
}

/* A blocking caller's own share of its round: the parts on the first
 * part's client whose names its node serves (none composite), marked as
 * taken (p->k), *m of them; NULL when none. The caller runs them itself,
 * their requests in one write (dlock__run_batch): no io thread carries
 * them, none wakes for them. Not on an io thread (launch), nor with the
 * replicas' acknowledgement (a WAIT after each acquisition, on a connection
 * of its own: the io thread's per node). */
static dlock__part **own_share(dlock__parts *k, dlock__node **node, size_t *m)
{
    *m = 0;
    dlock_client *c = k->part[0]->h->c;
    if (c->cfg.ack_replicas > 0 || dlock__loop_on_some_io_thread())
        return NULL;
    const dlock__handle *h = k->part[0]->h;
    if (!(*node = dlock__router_node(c->router, h->name, h->nlen)))
        return NULL;
    dlock__part **mine = malloc(k->n * sizeof(*mine));
    for (size_t i = 0; mine && i < k->n; i++) {
        dlock__part *p = k->part[i];
        if (p->h->c == c && !p->t->compose &&
            dlock__router_node(c->router, p->h->name, p->h->nlen) == *node) {
            p->k = k;
            mine[(*m)++] = p;
        }
    }
    if (*m == 0) {
        free(mine);
        return NULL;
    }
    return mine;
}

void dlock__parts_run(dlock__parts *k, void (*notify)(void *arg), void *arg)
{
    k->notify = notify;
    k->arg = arg;
    k->pending = k->n + 1;   /* and a guard: the round cannot end while it starts */
    for (size_t i = 0; i < k->n; i++) {
        k->part[i]->k = NULL;   /* not in a group yet */
        k->part[i]->next = NULL;
    }
    dlock__node *node = NULL;
    size_t m = 0;
    dlock__part **mine = notify || k->n == 0 ? NULL : own_share(k, &node, &m);
    for (size_t i = 0; i < k->n; i++) {
        dlock__part *first = k->part[i], *tail = first;
        if (first->k)
            continue;
        first->k = k;
        for (size_t j = i + 1; j < k->n; j++) {
            dlock__part *p = k->part[j];
            if (!p->k && p->h->c == first->h->c) {
                p->k = k;
                tail->next = p;
                tail = p;
            }
        }
        launch(k, first->h->c, first);
    }
    if (m == 1)
        run_here(mine[0]);
    else if (m > 1)
        dlock__run_batch(node, mine, m, ended_here);
    free(mine);
    ended(k);   /* the guard */
    if (!notify) {
        pthread_mutex_lock(&k->mu);
        while (k->pending > 0)
            pthread_cond_wait(&k->cv, &k->mu);
        pthread_mutex_unlock(&k->mu);
    }
}
