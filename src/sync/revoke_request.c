/* Revoke requests (lock.h): somebody asks the holders of a lock to let it
 * go, and a holder whose handle has a revoke handler hears it and decides.
 * Nothing is forced. Not to be confused with io/revoke.c (loss detection
 * through client tracking).
 *
 * The asker runs scripts/lock/revoke_request.lua: when the lock is held it
 * writes the request into a short-lived record beside the lock,
 * dlock_revoke_request:{name}, and publishes it on
 * dlock_revoke_request__channel:{name} (the lock's slot: SPUBLISH on a
 * cluster with sharded pub/sub). A handle with a handler keeps a listener:
 * a pub/sub subscription to that channel (dlock__waiter_listen) whose
 * messages come to a job on the io thread, which calls the handler once per
 * request and matching holder of the handle. When the subscription is
 * confirmed (the first time, and again after a reconnect or a move) the job
 * reads the record once, so that a request published while the listener was
 * not subscribed is still heard while the record lives. docs/wire-format.md
 * has the bytes. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

#define RECORD_MS 10000     /* a request's record lives this long */
#define ID_MAX 64

typedef struct rq_msg {
    struct rq_msg *next;
    size_t len;
    char text[];
} rq_msg;

struct dlock__rq_listener {
    dlock_client *c;
    dlock__list link;        /* in c->rq_list, under c->rq_mu, until stopped */
    int gone;                /* stopped by the client's close (c is no more) */
    pthread_mutex_t mu;      /* guards refs, queue, dead, fn, ud */
    int refs;                /* the handle's, a job queued, a record read in flight */
    int dead;                /* stopped: no more handler calls */
    int job_queued;
    dlock_revoke_fn fn;
    void *ud;
    rq_msg *head, **tail;
    dlock__waiter w;
    dlock__job job;          /* io thread: delivers what came */
    dlock__job stop_job;     /* io thread: a stop asked from another thread */
    pthread_cond_t cv;       /* ... signalled when it ran */
    int stopped;
    int subscribed;          /* io thread: the subscription as the job last saw it */
    char last_id[ID_MAX];    /* io thread: the last request heard (one per request) */
    /* Copies of what the handle says (the handle may go before the listener). */
    char *name, *channel, *record, *owner, *suffix;
    size_t clen, rlen, olen, slen;
};

static void rq_unref(dlock__rq_listener *q)
{
    pthread_mutex_lock(&q->mu);
    int left = --q->refs;
    pthread_mutex_unlock(&q->mu);
    if (left > 0)
        return;
    for (rq_msg *m = q->head, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->name);
    free(q->channel);
    free(q->record);
    free(q->owner);
    free(q->suffix);
    free(q);
}

/* Queues a request (the channel's message, or the record read) and posts
 * the job. Any thread; the pub/sub table's mutex may be held. */
static void rq_push(dlock__rq_listener *q, const char *text, size_t len)
{
    rq_msg *m = text ? malloc(sizeof(*m) + len + 1) : NULL;
    pthread_mutex_lock(&q->mu);
    if (m && !q->dead) {
        m->next = NULL;
        m->len = len;
        memcpy(m->text, text, len);
        m->text[len] = '\0';
        *q->tail = m;
        q->tail = &m->next;
        m = NULL;
    }
    int post = !q->dead && !q->job_queued;
    if (post) {
        q->job_queued = 1;
        q->refs++;
    }
    pthread_mutex_unlock(&q->mu);
    free(m);
    if (post && !dlock__loop_post(q->c->loop, &q->job)) {
        pthread_mutex_lock(&q->mu);
        q->job_queued = 0;
        q->refs--;   /* the handle's ref is still there */
        pthread_mutex_unlock(&q->mu);
    }
}

static void on_msg(const char *msg, size_t len, void *arg) { rq_push(arg, msg, len); }

/* The waiter's notify (a subscription confirmed or dropped, a wake-up):
 * the job looks. */
static void on_notify(void *arg) { rq_push(arg, NULL, 0); }

/* The holder field f (n bytes) as this handle's owner, or 0 when the hold
 * is not one the handle acts for: its explicit owner's, or any thread of
 * this client's ("<uuid>:<digits>"), with the type's suffix. */
static int rq_matches(const dlock__rq_listener *q, const char *f, size_t n, size_t *olen)
{
    if (n < q->slen || memcmp(f + n - q->slen, q->suffix, q->slen) != 0)
        return 0;
    n -= q->slen;
    *olen = n;
    if (q->owner)
        return n == q->olen && memcmp(f, q->owner, n) == 0;
    size_t ul = strlen(q->c->uuid);
    if (n <= ul + 1 || memcmp(f, q->c->uuid, ul) != 0 || f[ul] != ':')
        return 0;
    for (size_t i = ul + 1; i < n; i++)
        if (f[i] < '0' || f[i] > '9')
            return 0;
    return 1;
}

/* One request "<id>\n<n>\n<holder>...\n<note>": the handler once per holder
 * it acts for, unless heard already. io thread, in the job. */
static void rq_deliver(dlock__rq_listener *q, char *text)
{
    char *id = text, *p = strchr(text, '\n');
    if (!p)
        return;
    *p++ = '\0';
    if (strlen(id) >= ID_MAX || strcmp(id, q->last_id) == 0)
        return;   /* not a request of this version's, or heard already */
    char *end;
    long n = strtol(p, &end, 10);
    if (end == p || *end != '\n' || n < 1 || n > 1000000)
        return;
    p = end + 1;
    char *holder[16];
    size_t hlen[16];
    int k = 0;
    for (long i = 0; i < n; i++) {
        char *nl = strchr(p, '\n');
        if (!nl)
            return;
        size_t olen;
        if (k < 16 && rq_matches(q, p, (size_t)(nl - p), &olen)) {
            holder[k] = p;
            hlen[k++] = olen;
        }
        p = nl + 1;
    }
    memcpy(q->last_id, id, strlen(id) + 1);
    const char *note = p;
    for (int i = 0; i < k; i++) {
        holder[i][hlen[i]] = '\0';
        pthread_mutex_lock(&q->mu);
        dlock_revoke_fn fn = q->dead ? NULL : q->fn;
        void *ud = q->ud;
        pthread_mutex_unlock(&q->mu);
        if (fn)
            fn(q->name, holder[i], note, ud);
    }
}

static void on_record(int status, dlock__res *res, void *ud)
{
    dlock__rq_listener *q = ud;
    if (status == DLOCK_OK && res->r->type == REDIS_REPLY_STRING)
        rq_push(q, res->r->str, res->r->len);
    if (res->r)
        freeReplyObject(res->r);
    rq_unref(q);
}

/* Reads the record (the subscription just came up: a request published
 * while it was down would be missed). io thread. */
static void rq_read_record(dlock__rq_listener *q)
{
    const char *av[2] = {"GET", q->record};
    size_t ln[2] = {3, q->rlen};
    dlock__req req = {.script = -1, .nkeys = 1, .argc = 2, .argv = av, .lens = ln,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    pthread_mutex_lock(&q->mu);
    q->refs++;
    pthread_mutex_unlock(&q->mu);
    if (dlock__acall_send(q->c->acall, &req, on_record, q) != DLOCK_OK)
        rq_unref(q);
}

static void on_job(void *arg)
{
    dlock__rq_listener *q = arg;
    pthread_mutex_lock(&q->mu);
    q->job_queued = 0;
    rq_msg *m = q->head;
    q->head = NULL;
    q->tail = &q->head;
    int dead = q->dead;
    pthread_mutex_unlock(&q->mu);
    if (!dead) {
        int ready;
        dlock__waiter_poll(q->c->pubsub, &q->w, &ready);
        int up = ready && q->w.subscribed;
        if (up && !q->subscribed)
            rq_read_record(q);
        q->subscribed = up;
    }
    for (rq_msg *n; m; m = n) {
        n = m->next;
        if (m->len > 0 && !dead)
            rq_deliver(q, m->text);
        free(m);
    }
    rq_unref(q);   /* the job's */
}

/* Takes the listener's job out of the io thread's queue: on the io thread,
 * where no job runs meanwhile. */
static void rq_unpost(dlock__rq_listener *q)
{
    dlock__loop_unpost(q->c->loop, &q->job);
    pthread_mutex_lock(&q->mu);
    int queued = q->job_queued;
    q->job_queued = 0;
    if (queued)
        q->refs--;
    pthread_mutex_unlock(&q->mu);
}

static void on_stop_job(void *arg)
{
    dlock__rq_listener *q = arg;
    rq_unpost(q);
    pthread_mutex_lock(&q->mu);
    q->stopped = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* Stops q: no handler call runs or starts once it returns (but on the io
 * thread, from inside a handler: that call ends first). Any thread. */
static void rq_halt(dlock__rq_listener *q, dlock_client *c)
{
    pthread_mutex_lock(&q->mu);
    q->dead = 1;
    pthread_mutex_unlock(&q->mu);
    dlock__waiter_leave(c->pubsub, &q->w, 0);   /* no more on_msg or notify */
    if (dlock__loop_on_io_thread(c->loop)) {
        rq_unpost(q);
    } else if (dlock__loop_post(c->loop, &q->stop_job)) {
        pthread_mutex_lock(&q->mu);
        while (!q->stopped)
            pthread_cond_wait(&q->cv, &q->mu);
        pthread_mutex_unlock(&q->mu);
    } else {
        rq_unpost(q);   /* the loop is stopping: its jobs no longer run */
    }
}

/* rq_halt, unless the client's close did it, and the handle's ref dropped. */
static void rq_stop(dlock__rq_listener *q)
{
    if (!q->gone) {   /* the close, if any, has returned (dlock_client_close) */
        dlock_client *c = q->c;
        pthread_mutex_lock(&c->rq_mu);
        dlock__list_remove(&q->link);
        pthread_mutex_unlock(&c->rq_mu);
        rq_halt(q, c);
    }
    rq_unref(q);
}

void dlock__rq_close_all(dlock_client *c)
{
    for (;;) {
        pthread_mutex_lock(&c->rq_mu);
        dlock__list *it = c->rq_list.next;
        if (it == &c->rq_list) {
            pthread_mutex_unlock(&c->rq_mu);
            return;
        }
        dlock__rq_listener *q = DLOCK__CONTAINER_OF(it, dlock__rq_listener, link);
        dlock__list_remove(&q->link);
        q->gone = 1;   /* its handle's free only drops its ref */
        pthread_mutex_unlock(&c->rq_mu);
        rq_halt(q, c);
    }
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int rq_start(dlock_lock *l, dlock_revoke_fn fn, void *ud, dlock__rq_listener **out)
{
    dlock__rq_listener *q = calloc(1, sizeof(*q));
    if (!q)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    q->c = l->h.c;
    q->refs = 1;
    q->fn = fn;
    q->ud = ud;
    q->tail = &q->head;
    q->slen = strlen(l->type->suffix);
    q->olen = l->olen;
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        free(q);
        return dlock__fail(DLOCK_ESYS, "cannot create a mutex");
    }
    if (dlock__cond_init(&q->cv) != 0) {
        pthread_mutex_destroy(&q->mu);
        free(q);
        return dlock__fail(DLOCK_ESYS, "cannot create a condition variable");
    }
    dlock__job_init(&q->job, on_job, q);
    dlock__job_init(&q->stop_job, on_stop_job, q);
    q->name = dup_n(l->h.name, l->h.nlen);
    q->channel = dlock__prefixed("dlock_revoke_request__channel", l->h.name, l->h.nlen, "",
                                 &q->clen);
    q->record = dlock__prefixed("dlock_revoke_request", l->h.name, l->h.nlen, "", &q->rlen);
    q->suffix = dup_n(l->type->suffix, q->slen);
    q->owner = l->owner ? dup_n(l->owner, l->olen) : NULL;
    if (!q->name || !q->channel || !q->record || !q->suffix || (l->owner && !q->owner)) {
        rq_unref(q);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    dlock_client *c = q->c;
    pthread_mutex_lock(&c->rq_mu);
    int rc = dlock__waiter_listen(c->pubsub, &q->w, q->channel, q->clen, on_msg, on_notify, q);
    if (rc == DLOCK_OK)
        dlock__list_push_back(&c->rq_list, &q->link);
    pthread_mutex_unlock(&c->rq_mu);
    if (rc != DLOCK_OK) {
        rq_unref(q);
        return rc;
    }
    *out = q;
    return DLOCK_OK;
}

int dlock_lock_set_revoke_handler(dlock_lock *l, dlock_revoke_fn fn, void *ud)
{
    int rc = dlock__check_handle(l, "lock");
    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    dlock__rq_listener *q = l->rq;
    if (q && fn) {   /* a new handler on the same subscription */
        pthread_mutex_lock(&q->mu);
        q->fn = fn;
        q->ud = ud;
        pthread_mutex_unlock(&q->mu);
        pthread_mutex_unlock(&l->mu);
        return DLOCK_OK;
    }
    l->rq = NULL;
    pthread_mutex_unlock(&l->mu);
    if (q)
        rq_stop(q);
    if (!fn)
        return DLOCK_OK;
    if ((rc = rq_start(l, fn, ud, &q)) != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    dlock__rq_listener *raced = l->rq;   /* another thread set one meanwhile */
    l->rq = q;
    pthread_mutex_unlock(&l->mu);
    if (raced)
        rq_stop(raced);
    return DLOCK_OK;
}

void dlock__lock_rq_free(dlock_lock *l)
{
    if (l->rq)
        rq_stop(l->rq);
    l->rq = NULL;
}

/* ------------------------------------------------------------- the request */

typedef struct rq_ask {
    dlock_lock *l;
    const char *note;
    size_t nlen;
    char *record, *channel;
    size_t rlen, clen;
    char id[ID_MAX];
    int64_t holders, listeners;
} rq_ask;

static int ask_setup(void *st)
{
    rq_ask *a = st;
    dlock_lock *l = a->l;
    static atomic_uint_fast64_t seq;
    snprintf(a->id, sizeof(a->id), "%s:%llu", l->h.c->uuid,
             (unsigned long long)atomic_fetch_add(&seq, 1) + 1);
    a->record = dlock__prefixed("dlock_revoke_request", l->h.name, l->h.nlen, "", &a->rlen);
    a->channel = dlock__prefixed("dlock_revoke_request__channel", l->h.name, l->h.nlen, "",
                                 &a->clen);
    if (!a->record || !a->channel) {
        free(a->record);
        free(a->channel);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

static void ask_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    rq_ask *a = st;
    /* Not resent after a lost reply (flags 0): a second request would reach
     * the handler twice. */
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_REVOKE_REQUEST);
    dlock__op_key(op, a->l->h.name, a->l->h.nlen);
    dlock__op_key(op, a->record, a->rlen);
    dlock__op_key(op, a->channel, a->clen);
    dlock__op_args(op, a->id);
    dlock__op_argi(op, RECORD_MS);
    dlock__op_arg(op, a->note, a->nlen);
}

static int ask_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    rq_ask *a = st;
    if (rc != DLOCK_OK)
        return dlock__refused(&a->l->h, rc, res);
    redisReply *r = res->r;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return dlock__proto(&a->l->h, "revoke request", r);
    a->holders = r->element[0]->integer;
    a->listeners = r->element[1]->integer;
    freeReplyObject(r);
    return DLOCK_OK;
}

static void ask_result(void *st, dlock__result *res)
{
    rq_ask *a = st;
    res->flag = a->holders > 0;
    res->count = a->listeners;
    /* the blocking form's holders: through the token, unused otherwise */
    res->token = (uint64_t)a->holders;
}

static void ask_done(void *st, int read)
{
    (void)read;
    rq_ask *a = st;
    free(a->record);
    free(a->channel);
}

static const dlock__op_type ask_type = {.setup = ask_setup,
                                        .request = ask_request,
                                        .read = ask_read,
                                        .result = ask_result,
                                        .done = ask_done};

static int request_revoke(dlock_lock *l, const char *note, const dlock__via *via,
                          dlock_revoke_answer *out)
{
    if (out)
        *out = (dlock_revoke_answer){0, 0};
    int rc = dlock__check_handle(l, "lock");
    if (rc != DLOCK_OK)
        return rc;
    if (via && !via->fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    size_t nlen = note ? strlen(note) : 0;
    if (nlen > DLOCK_REVOKE_NOTE_MAX)
        return dlock__fail(DLOCK_EINVAL, "revoke request note of %zu bytes: at most %d", nlen,
                           DLOCK_REVOKE_NOTE_MAX);
    rq_ask a = {.l = l, .note = note ? note : "", .nlen = nlen};
    dlock__result res;
    rc = dlock__start(&l->h, &ask_type, &a, sizeof(a), NULL, via, &res);
    if (rc == DLOCK_OK && out && !via) {
        out->holders = (int)res.token;
        out->listeners = (int)res.count;
    }
    return rc;
}

int dlock_lock_request_revoke(dlock_lock *l, const char *note, dlock_revoke_answer *out)
{
    return request_revoke(l, note, NULL, out);
}

int dlock_lock_request_revoke_async(dlock_lock *l, const char *note, dlock_async_fn fn,
                                    void *ud)
{
    return request_revoke(l, note, &(dlock__via){fn, ud, 0}, NULL);
}
