/* Multi-lock and RedLock (Redisson's RedissonMultiLock and RedissonRedLock):
 * several lock handles, of any type and on any clients, taken as one. Built
 * on the locks' acquire operation (lock.h: dlock__acquire_type, its hooks
 * one by one) and release (dlock__rel_*): nothing here knows a type. See
 * docs/internals/multilock.md.
 *
 * A round attempts every lock at once: one pipelined write per node, the
 * nodes in parallel (a thread each beyond the first). All taken (a multi-lock)
 * or a quorum taken within its validity (a RedLock): done. Otherwise what was
 * taken is given back the same way, and the wait loop (wait.c, the blocking
 * driver: a multi-lock's attempt is its own round) sleeps on the
 * channel of one busy lock, the target, until it is released, its TTL, the
 * deadline or a cancellation; then the next round. Nothing is held while
 * waiting, so two multi-locks over the same names in opposite orders cannot
 * deadlock. The target is attempted as a waiting single acquire would be (it
 * may reserve its next turn, a fair lock queues the caller); the other locks
 * as a try with no wait (never queued, never reserved). */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

#define MAX_THREADS 16      /* nodes a round talks to in parallel */
#define NONE ((size_t)-1)
#define MSG 512
#define REDLOCK_RETRY_MS 50 /* a RedLock that waits for one of several busy locks looks
                               again within 50..100 ms */

struct dlock_multilock {
    int red;                 /* RedLock: a quorum, not all */
    size_t n;
    size_t quorum;
    dlock_lock **locks;
    char label[160];         /* for messages: "multi-lock a, b, c" */
};

/* One lock in one call. */
typedef struct slot {
    dlock_lock *l;
    dlock__node *node;
    dlock__acq a;
    dlock__rel x;
    dlock__op op;            /* this round's request */
    dlock__res res;          /* its answer */
    int rc;                  /* the answer's status, then what it means */
    int arc;                 /* the last attempt's outcome: DLOCK_OK, DLOCK__BUSY or an error */
    int held;                /* taken by this call, not given back */
    dlock__busy b;
    char msg[MSG];           /* the message of rc when an error */
} slot;

/* The requests of one round to one node. */
typedef struct batch {
    dlock_client *c;
    dlock__node *node;
    slot **s;
    size_t k;
    dlock__op *ops;
    dlock__res *res;
    int *rc;
    unsigned flags;
    dlock_cancel *cancel;
    char msg[MSG];           /* the batch's connection-level message */
} batch;

typedef struct call {
    const dlock_multilock *ml;
    slot *s;
    size_t n;
    int64_t wait;            /* the caller's */
    dlock_cancel *cancel;
    size_t target;           /* the lock waited on, or NONE */
    int64_t lease;           /* the shortest TTL the attempts set (ms) */
    int stale;               /* the last round took all (a quorum) too late to use */
    int64_t took_ms;         /* how long that round took */
    size_t taken;            /* how many the last round took */
    /* scratch for the rounds */
    batch *bs;
    slot **order;
    dlock__op *ops;
    dlock__res *res;
    int *rc;
    size_t *group;
    slot **sel;
} call;

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
    if (n > (SIZE_MAX / 4) / sizeof(slot))
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

/* ------------------------------------------------------------- rounds */

static void run_batch(batch *b)
{
    dlock__op_call_many(b->c, b->node, b->ops, b->k, b->flags, b->cancel, b->res, b->rc);
    snprintf(b->msg, sizeof(b->msg), "%s", dlock_last_error());
}

typedef struct worker {
    batch *bs;
    size_t nb, first, step;
    pthread_t t;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (size_t i = w->first; i < w->nb; i += w->step)
        run_batch(&w->bs[i]);
    return NULL;
}

/* Runs the batches, one thread per node beyond the first (the caller's). */
static void run_batches(batch *bs, size_t nb)
{
    size_t nw = nb < MAX_THREADS ? nb : MAX_THREADS;
    worker w[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (size_t i = 1; i < nw; i++) {
        w[i] = (worker){bs, nb, i, nw, 0};
        started[i] = pthread_create(&w[i].t, NULL, worker_main, &w[i]) == 0;
    }
    w[0] = (worker){bs, nb, 0, nw, 0};
    worker_main(&w[0]);
    for (size_t i = 1; i < nw; i++) {
        if (started[i])
            pthread_join(w[i].t, NULL);
        else
            worker_main(&w[i]);   /* no thread to be had: do its share here */
    }
}

/* Sends the request of every slot in sel (k of them: its attempt, or its
 * release when `releases`), one batch per node, and leaves each answer in its
 * slot: rc = DLOCK_OK with res, or an error with msg (and res). */
static void send_round(call *cl, slot **sel, size_t k, unsigned flags, int releases)
{
    size_t nb = 0;
    for (size_t i = 0; i < k; i++) {
        dlock_lock *l = sel[i]->l;
        sel[i]->node = dlock__router_node(l->h.c->router, l->h.name, l->h.nlen);
        size_t g = 0;
        while (g < nb && cl->bs[g].node != sel[i]->node)
            g++;
        if (g == nb)
            cl->bs[nb++] = (batch){.c = l->h.c, .node = sel[i]->node, .cancel = cl->cancel,
                                   .flags = flags};
        cl->bs[g].k++;
        cl->group[i] = g;
    }
    size_t at = 0;
    for (size_t g = 0; g < nb; g++) {
        batch *b = &cl->bs[g];
        b->s = cl->order + at;
        b->ops = cl->ops + at;
        b->res = cl->res + at;
        b->rc = cl->rc + at;
        at += b->k;
        b->k = 0;
    }
    for (size_t i = 0; i < k; i++) {
        batch *b = &cl->bs[cl->group[i]];
        b->s[b->k] = sel[i];
        b->ops[b->k++] = releases ? sel[i]->x.op : sel[i]->op;
    }
    run_batches(cl->bs, nb);
    for (size_t g = 0; g < nb; g++) {
        batch *b = &cl->bs[g];
        for (size_t j = 0; j < b->k; j++) {
            slot *s = b->s[j];
            s->res = b->res[j];
            s->rc = b->rc[j];
            if (s->rc == DLOCK_OK)
                continue;
            if (b->res[j].err != DLOCK__RERR_NONE)   /* Redis refused it */
                dlock__fail(s->rc, "%s: %s", dlock__node_addr(b->node), b->res[j].text);
            else
                dlock__fail(s->rc, "%s", b->msg);
            if (!releases)   /* dlock__rel_end maps its own */
                s->rc = dlock__refused(&s->l->h, s->rc, &s->res);
            snprintf(s->msg, MSG, "%s", dlock_last_error());
        }
    }
}

/* ------------------------------------------------------------- a call */

static void call_free(call *cl)
{
    free(cl->s);
    free(cl->bs);
    free(cl->order);
    free(cl->ops);
    free(cl->res);
    free(cl->rc);
    free(cl->group);
    free(cl->sel);
}

static int call_init(call *cl, const dlock_multilock *ml)
{
    memset(cl, 0, sizeof(*cl));
    size_t n = ml->n;
    cl->ml = ml;
    cl->n = n;
    cl->target = NONE;
    cl->s = calloc(n, sizeof(*cl->s));
    cl->bs = malloc(n * sizeof(*cl->bs));
    cl->order = malloc(n * sizeof(*cl->order));
    cl->ops = malloc(n * sizeof(*cl->ops));
    cl->res = malloc(n * sizeof(*cl->res));
    cl->rc = malloc(n * sizeof(*cl->rc));
    cl->group = malloc(n * sizeof(*cl->group));
    cl->sel = malloc(n * sizeof(*cl->sel));
    if (!cl->s || !cl->bs || !cl->order || !cl->ops || !cl->res || !cl->rc || !cl->group ||
        !cl->sel) {
        call_free(cl);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        cl->s[i].l = ml->locks[i];
    return DLOCK_OK;
}

/* RedLock's clock-drift allowance for a lease (the Redis description's: 1 %
 * of the lease, plus 2 ms for the granularity of expiries). */
static int64_t drift_of(int64_t lease_ms) { return lease_ms / 100 + 2; }

/* Gives back what this call holds (and, with `unknown`, sends a release for
 * the locks whose attempt went unanswered: a RedLock unlocks every server it
 * may hold). A lock found no longer held counts as given back. Returns
 * DLOCK_OK, or the first failure, with its message. */
static int give_back(call *cl, int unknown)
{
    const dlock_multilock *ml = cl->ml;
    size_t k = 0;
    int rc = DLOCK_OK;
    char msg[MSG];
    for (size_t i = 0; i < cl->n; i++) {
        slot *s = &cl->s[i];
        if (!s->held && !(unknown && s->arc == DLOCK_EUNKNOWN))
            continue;
        int e = dlock__rel_init(&s->x, s->l);
        if (e != DLOCK_OK) {
            if (rc == DLOCK_OK) {
                rc = e;
                snprintf(msg, sizeof(msg), "'%s': %s", s->l->h.name, dlock_last_error());
            }
            continue;
        }
        cl->sel[k++] = s;
    }
    if (k > 0)
        send_round(cl, cl->sel, k, DLOCK__CALL_IDEMPOTENT | (ml->red ? DLOCK__CALL_NO_RETRY : 0),
                   1);
    for (size_t j = 0; j < k; j++) {
        slot *s = cl->sel[j];
        if (s->rc != DLOCK_OK)
            dlock__fail(s->rc, "%s", s->msg);
        int e = dlock__rel_end(&s->x, s->rc, &s->res);
        if (e != DLOCK_OK && e != DLOCK_ENOTOWNER && s->held && rc == DLOCK_OK) {
            rc = e;
            snprintf(msg, sizeof(msg),
                     "could not give back '%s' (it stays held until its lease ends at most): %s",
                     s->l->h.name, dlock_last_error());
        }
        s->held = 0;
    }
    return rc == DLOCK_OK ? DLOCK_OK : dlock__fail(rc, "%s: %s", ml->label, msg);
}

/* After an attempt took it: the watchdog's schedule, or (when that cannot
 * be had) the lock given back rather than left to lapse unseen. */
static int keep(slot *s, int64_t sent)
{
    int rc = dlock__acquire_type.keep(&s->a, sent);
    if (rc != DLOCK_OK) {
        char msg[MSG];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        dlock_lock_release(s->l);
        rc = dlock__fail(rc, "%s", msg);
    }
    return rc;
}

/* One round: every lock attempted at once. */
static void attempt_round(call *cl, int64_t waited_ms)
{
    const dlock__op_type *acq = &dlock__acquire_type;
    for (size_t i = 0; i < cl->n; i++) {
        slot *s = &cl->s[i];
        int target = i == cl->target;
        /* The target as a waiting acquire would try; the others as a try with
         * no wait (never queued for, nor reserved). */
        s->a.wait = target ? cl->wait : 0;
        acq->request(&s->a, target ? waited_ms : -1, &s->op);
        cl->sel[i] = s;
    }
    /* Taken before sending: neither the watchdog's deadlines nor the
     * validity are ever later than Redis's. */
    int64_t start = dlock__now_ms();
    dlock__attempts += cl->n;
    /* A lock the router moves to a new primary on its way is not sent there
     * while it is in its quarantine: it answers busy (below). */
    send_round(cl, cl->sel, cl->n,
               DLOCK__CALL_QUARANTINE | (cl->ml->red ? DLOCK__CALL_NO_RETRY : 0), 0);
    cl->took_ms = dlock__now_ms() - start;
    cl->taken = 0;
    for (size_t i = 0; i < cl->n; i++) {
        slot *s = &cl->s[i];
        s->b = (dlock__busy){.ttl = -1};
        s->held = 0;   /* a round starts with nothing held (given back before) */
        if (dlock__quarantine_met(&s->l->h, acq, s->rc, &s->res, &s->b))
            s->rc = DLOCK__BUSY;
        if (s->rc == DLOCK_OK) {
            s->rc = acq->read(&s->a, DLOCK_OK, &s->res, &s->b);
            if (s->rc == DLOCK_OK) {
                s->a.queued = 0;   /* taken: no longer waiting in Redis */
                s->rc = keep(s, start);
                s->held = s->rc == DLOCK_OK;
                cl->taken += (size_t)s->held;
            }
            if (s->rc != DLOCK_OK && s->rc != DLOCK__BUSY)
                snprintf(s->msg, MSG, "%s", dlock_last_error());
        }
        s->arc = s->rc;
    }
}

/* The error that ends a call after a round that cannot succeed: a lost
 * answer first (a lock may be held), else the first in the caller's order. */
static int failure(call *cl, size_t failed)
{
    const dlock_multilock *ml = cl->ml;
    size_t e = NONE;
    for (size_t i = 0; i < cl->n; i++) {
        int rc = cl->s[i].arc;
        if (rc != DLOCK_OK && rc != DLOCK__BUSY &&
            (e == NONE || (rc == DLOCK_EUNKNOWN && cl->s[e].arc != DLOCK_EUNKNOWN)))
            e = i;
    }
    slot *s = &cl->s[e];
    if (ml->red)
        return dlock__fail(s->arc,
                           "%s: %zu of %zu servers failed, %zu taken, %zu needed (all released); "
                           "'%s': %s",
                           ml->label, failed, ml->n, cl->taken, ml->quorum, s->l->h.name, s->msg);
    if (s->arc == DLOCK_EUNKNOWN)
        return dlock__fail(s->arc,
                           "%s: '%s': %s (that lock may be held until its lease ends, not "
                           "renewed; the others were released)",
                           ml->label, s->l->h.name, s->msg);
    return dlock__fail(s->arc, "%s: '%s': %s (the others were released)", ml->label,
                       s->l->h.name, s->msg);
}

/* After a round: DLOCK_OK, or DLOCK__BUSY with b telling where to wait (what
 * was taken given back), or an error (likewise). */
static int decide(call *cl, dlock__busy *b)
{
    const dlock_multilock *ml = cl->ml;
    size_t busy = 0, failed = 0, first_busy = NONE;
    for (size_t i = 0; i < cl->n; i++) {
        int rc = cl->s[i].arc;
        if (rc == DLOCK__BUSY && busy++ == 0)
            first_busy = i;
        else if (rc != DLOCK_OK && rc != DLOCK__BUSY)
            failed++;
    }
    cl->stale = 0;
    if (cl->taken >= ml->quorum) {
        /* Valid only while every lock taken is: a round slower than the lease
         * may have let the first lock answered expire before the last. */
        int64_t validity = cl->lease - cl->took_ms - (ml->red ? drift_of(cl->lease) : 0);
        if (validity > 0)
            return DLOCK_OK;
        cl->stale = 1;   /* all (a quorum), but too late to use */
    }
    int rc = give_back(cl, ml->red);
    if (rc != DLOCK_OK)
        return rc;
    if (!cl->stale && failed > ml->n - ml->quorum)
        return failure(cl, failed);
    slot *t;
    if (cl->stale) {
        /* Try again after a short random pause (as the algorithm says), on the
         * target's channel if there is one: a message there is as good a
         * reason to try as any. */
        t = &cl->s[cl->target == NONE ? 0 : cl->target];
        uint32_t u;
        dlock__random(&u, sizeof(u));
        b->ttl = 1 + (int64_t)(u % 50);
        b->first = 0;
    } else {
        if (cl->target == NONE || cl->s[cl->target].arc != DLOCK__BUSY)
            cl->target = first_busy;
        t = &cl->s[cl->target];
        b->ttl = t->b.ttl;
        b->first = t->b.first;
        b->quarantine = t->b.quarantine;
        b->qserver = t->b.qserver;
        b->watch = t->b.watch;
        b->wlen = t->b.wlen;
        if (ml->red && busy > ml->quorum - cl->taken) {
            /* Any of several busy locks would do, and only the target's
             * release wakes this call: look again after a random pause (the
             * algorithm's retry), or at once when the target is released. */
            uint32_t u;
            dlock__random(&u, sizeof(u));
            int64_t pause = REDLOCK_RETRY_MS + (int64_t)(u % REDLOCK_RETRY_MS);
            if (b->ttl < 0 || b->ttl > pause)
                b->ttl = pause;
        }
    }
    b->c = t->l->h.c;
    b->channel = dlock__acquire_type.channel(&t->a, &b->clen);
    return DLOCK__BUSY;
}

/* The lock (its index) whose node is a new primary in the longest failover
 * quarantine still running (each lock's client's
 * dlock_config_set_failover_quarantine), *b its busy answer; NONE when
 * none. A call waits that out before a round sends anything (all or
 * nothing: no lock is taken while another cannot be). */
static size_t longest_quarantine(dlock_lock *const *locks, size_t n, dlock__busy *b)
{
    size_t at = NONE;
    for (size_t i = 0; i < n; i++) {
        dlock__busy q = {.ttl = -1};
        if (dlock__quarantined(&locks[i]->h, &dlock__acquire_type, &q) &&
            (at == NONE || q.ttl > b->ttl)) {
            *b = q;
            at = i;
        }
    }
    return at;
}

/* The blocking form: waits on that lock's channel. */
static int quarantined(call *cl, dlock__busy *b)
{
    size_t i = longest_quarantine(cl->ml->locks, cl->n, b);
    if (i == NONE)
        return 0;
    b->c = cl->s[i].l->h.c;
    b->channel = dlock__acquire_type.channel(&cl->s[i].a, &b->clen);
    return 1;
}

static int ml_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    call *cl = ud;
    if (quarantined(cl, b))
        return DLOCK__BUSY;
    attempt_round(cl, waited_ms);
    return decide(cl, b);
}

static int ml_busy_error(void *ud, const dlock__busy *b)
{
    (void)b;
    call *cl = ud;
    const dlock_multilock *ml = cl->ml;
    if (cl->stale && ml->red)
        return dlock__fail(DLOCK_ETIMEDOUT,
                           "%s: a quorum (%zu of %zu) was taken in %lld ms, past its validity "
                           "(lease %lld ms - clock drift %lld ms): released",
                           ml->label, cl->taken, ml->n, (long long)cl->took_ms,
                           (long long)cl->lease, (long long)drift_of(cl->lease));
    if (cl->stale)
        return dlock__fail(DLOCK_ETIMEDOUT,
                           "%s: the locks were taken in %lld ms, not within their lease (%lld "
                           "ms): released",
                           ml->label, (long long)cl->took_ms, (long long)cl->lease);
    slot *t = &cl->s[cl->target];
    int rc = dlock__acquire_type.busy_error(&t->a, &t->b);
    char msg[MSG];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    if (ml->red)
        return dlock__fail(rc, "%s: %zu of %zu taken, %zu needed (all released): %s", ml->label,
                           cl->taken, ml->n, ml->quorum, msg);
    return dlock__fail(rc, "%s: %s", ml->label, msg);
}

static int ml_give_up(void *ud, int rc, dlock__op *op)
{
    call *cl = ud;
    return cl->target != NONE && dlock__acquire_type.give_up(&cl->s[cl->target].a, rc, op);
}

static const dlock__op_type ml_type = {
    .attempt = ml_attempt, .busy_error = ml_busy_error, .give_up = ml_give_up};

static int acquire(dlock_multilock *ml, const dlock_wait_opts *opts)
{
    int rc = dlock__check_handle(ml, "multi-lock");
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE, "a multi-lock", &o);
    if (rc != DLOCK_OK)
        return rc;
    int64_t wait_ms = o.wait_ms, lease_ms = o.lease_ms;
    dlock_cancel *cancel = o.cancel;
    if (wait_ms != 0)
        for (size_t i = 0; i < ml->n; i++)
            if (dlock__loop_on_io_thread(ml->locks[i]->h.c->loop))
                return dlock__fail(DLOCK_EINVAL, "a wait from a dlock callback would stall the "
                                                 "io thread: use a wait of 0 there");
    call cl;
    if ((rc = call_init(&cl, ml)) != DLOCK_OK)
        return rc;
    cl.wait = wait_ms;
    cl.cancel = cancel;
    size_t ready = 0;
    for (; ready < ml->n; ready++) {
        cl.s[ready].a = (dlock__acq){.l = ml->locks[ready], .wait = wait_ms, .lease = lease_ms,
                                     .cancel = cancel};
        if ((rc = dlock__acquire_type.setup(&cl.s[ready].a)) != DLOCK_OK)
            break;
    }
    cl.lease = INT64_MAX;
    for (size_t i = 0; i < ready; i++)
        if (cl.s[i].a.lease_ms < cl.lease)
            cl.lease = cl.s[i].a.lease_ms;   /* with the watchdog: each client's timeout */
    if (rc == DLOCK_OK) {
        /* Waits are on the first lock's channel until a busy lock names its own. */
        dlock_lock *l0 = ml->locks[0];
        dlock__handle h = {.c = l0->h.c, .what = ml->red ? "RedLock" : "multi-lock",
                           .name = ml->label, .channel = l0->h.channel, .clen = l0->h.clen};
        dlock__wait_spec spec = {.wake = dlock__wake_lock, .wait_ms = wait_ms, .cancel = cancel};
        rc = dlock__run(&h, &ml_type, &cl, &spec, NULL);
    }
    for (size_t i = 0; i < ready; i++)
        dlock__acquire_type.done(&cl.s[i].a, 1);
    call_free(&cl);
    return rc;
}

int dlock_multilock_acquire_opts(dlock_multilock *ml, const dlock_wait_opts *o)
{
    return acquire(ml, o);
}

int dlock_multilock_acquire(dlock_multilock *ml, int64_t lease_ms)
{
    return acquire(ml, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease_ms});
}

int dlock_multilock_try(dlock_multilock *ml, int64_t wait_ms, int64_t lease_ms)
{
    return acquire(ml, &(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms});
}

/* ------------------------------------------------------------ release */

int dlock_multilock_release(dlock_multilock *ml)
{
    int rc = dlock__check_handle(ml, "multi-lock");
    if (rc != DLOCK_OK)
        return rc;
    call cl;
    rc = call_init(&cl, ml);
    if (rc != DLOCK_OK)
        return rc;
    size_t k = 0;
    for (size_t i = 0; i < ml->n; i++) {
        slot *s = &cl.s[i];
        s->rc = dlock__rel_init(&s->x, s->l);
        if (s->rc == DLOCK_OK)
            cl.sel[k++] = s;
        else
            snprintf(s->msg, MSG, "%s", dlock_last_error());
    }
    if (k > 0)
        send_round(&cl, cl.sel, k, DLOCK__CALL_IDEMPOTENT | (ml->red ? DLOCK__CALL_NO_RETRY : 0),
                   1);
    for (size_t j = 0; j < k; j++) {
        slot *s = cl.sel[j];
        if (s->rc != DLOCK_OK)
            dlock__fail(s->rc, "%s", s->msg);
        s->rc = dlock__rel_end(&s->x, s->rc, &s->res);
        if (s->rc != DLOCK_OK)
            snprintf(s->msg, MSG, "%s", dlock_last_error());
    }
    /* A multi-lock: the first error in the caller's order. A RedLock: held
     * while a quorum released; else not held (a lease ran out), or the first
     * error. */
    size_t released = 0, e = NONE;
    for (size_t i = 0; i < ml->n; i++) {
        slot *s = &cl.s[i];
        if (s->rc == DLOCK_OK)
            released++;
        else if (e == NONE || (ml->red && s->rc == DLOCK_ENOTOWNER &&
                               cl.s[e].rc != DLOCK_ENOTOWNER))
            e = i;
    }
    rc = DLOCK_OK;
    if (ml->red && released < ml->quorum)
        rc = dlock__fail(cl.s[e].rc, "%s: released on %zu of %zu servers, %zu needed; '%s': %s",
                         ml->label, released, ml->n, ml->quorum, cl.s[e].l->h.name, cl.s[e].msg);
    else if (!ml->red && e != NONE)
        rc = dlock__fail(cl.s[e].rc, "%s", cl.s[e].msg);
    call_free(&cl);
    return rc;
}

/* ------------------------------------------------------ asynchronously
 *
 * Built on the locks' own asynchronous calls (explicit-owner handles), in
 * rounds as the blocking form: every lock tried at once (no wait); all (a
 * quorum, within its validity) taken: done; else what was taken is released
 * (asynchronously, all of it, before anything else), and the call waits on
 * one busy lock, the target, with a waiting acquire of its own (pub/sub, the
 * remaining wait, the caller's cancel token); the target taken, the others
 * are tried again. Nothing is held while waiting, nor when the call ends
 * without DLOCK_OK. The locks may be on several clients: their callbacks,
 * on those clients' io threads, meet under the call's mutex; the caller's
 * callback runs on the io thread of the step that ends the call. */

enum { A_TRY, A_TARGET, A_BACK, A_RELEASE };

typedef struct amulti amulti;

typedef struct asub {
    amulti *am;
    size_t i;
} asub;

struct amulti {
    pthread_mutex_t mu;
    dlock_multilock *ml;
    dlock_async_fn fn;
    void *ud;
    dlock_wait_opts o;       /* the caller's (token NULL) */
    int64_t deadline;        /* monotonic ms; INT64_MAX: none */
    int64_t lease;           /* for the validity: the lease, or the shortest watchdog timeout */
    int64_t taken_at;        /* the round's first acquisition sent (ms) */
    int phase;
    size_t pending;          /* sub-calls in flight */
    size_t target;           /* the lock waited on, or NONE */
    int *rc;                 /* per lock: this round's status (DLOCK_OK: held) */
    int final;               /* the call's outcome once decided (A_BACK) */
    char msg[MSG];
    char why[256];           /* why the target's last wait ran out (a failover
                                quarantine, say): the timeout's message names it */
    asub *subs;
};

static void am_free(amulti *am)
{
    pthread_mutex_destroy(&am->mu);
    free(am->rc);
    free(am->subs);
    free(am);
}

/* Ends the call: the caller's callback, then am is freed. Outside am->mu. */
static void am_end(amulti *am, int rc)
{
    dlock__result res = {.status = rc, .message = rc == DLOCK_OK ? "" : am->msg, .count = -1};
    dlock_async_fn fn = am->fn;
    void *ud = am->ud;
    char msg[MSG];
    snprintf(msg, sizeof(msg), "%s", am->msg);
    res.message = rc == DLOCK_OK ? "" : msg;
    am_free(am);
    fn(&res, ud);
}

static void am_note(amulti *am, int rc, const char *msg)
{
    if (am->final == DLOCK_OK || (am->final == DLOCK_ETIMEDOUT && rc != DLOCK_ETIMEDOUT)) {
        am->final = rc;
        snprintf(am->msg, sizeof(am->msg), "%s: %s", am->ml->label, msg);
    }
}

static void on_sub(const dlock_async_result *res, void *ud);

/* Starts lock i's acquire (wait_ms, the caller's lease and token) or its
 * release; under am->mu. A refused start counts as answered at once. */
static void am_start(amulti *am, size_t i, int release, int64_t wait_ms)
{
    am->pending++;
    int rc;
    /* A RedLock does not wait for a server that is down: one connection
     * attempt, no retry (the quorum of the others decides), as the blocking
     * RedLock's rounds. */
    dlock__via via = {on_sub, &am->subs[i], am->ml->red ? DLOCK__CALL_NO_RETRY : 0};
    if (release)
        rc = dlock__lock_release_via(am->ml->locks[i], &via);
    else
        rc = dlock__lock_acquire_via(am->ml->locks[i],
                                     &(dlock_wait_opts){.wait_ms = wait_ms,
                                                        .lease_ms = am->o.lease_ms,
                                                        .cancel = am->o.cancel},
                                     &via);
    if (rc != DLOCK_OK) {
        am->pending--;
        if (!release)
            am->rc[i] = rc;
        am_note(am, rc, dlock_last_error());
    }
}

/* Waits on the target (A_TARGET): its own acquire, with what is left of
 * the caller's wait (a RedLock's: the algorithm's random pause at most, but
 * a failover quarantine's in full). Under am->mu. */
static void am_wait_target(amulti *am, int quarantine)
{
    int64_t now = dlock__now_ms();
    int64_t wait = am->deadline == INT64_MAX ? DLOCK_WAIT_FOREVER : am->deadline - now;
    if (am->ml->red && !quarantine) {
        /* Any of several busy locks would do: look again after the
         * algorithm's random pause at the latest. */
        uint32_t u;
        dlock__random(&u, sizeof(u));
        int64_t pause = REDLOCK_RETRY_MS + (int64_t)(u % REDLOCK_RETRY_MS);
        if (wait == DLOCK_WAIT_FOREVER || wait > pause)
            wait = pause;
    }
    am->phase = A_TARGET;
    for (size_t i = 0; i < am->ml->n; i++)
        am->rc[i] = DLOCK__BUSY;
    am->taken_at = now;
    am_start(am, am->target, 0, wait);
}

/* A new round (A_TRY): every lock tried at once, or, while a lock's node is
 * in its failover quarantine, nothing sent but that lock's own wait, which
 * sleeps it out (then the others are tried). Under am->mu. */
static void am_round(amulti *am)
{
    dlock__busy q;
    size_t t = longest_quarantine(am->ml->locks, am->ml->n, &q);
    if (t != NONE) {
        am->target = t;
        am_wait_target(am, 1);
        return;
    }
    am->phase = A_TRY;
    am->taken_at = dlock__now_ms();
    for (size_t i = 0; i < am->ml->n; i++)
        am_start(am, i, 0, 0);
}

/* Gives back every lock held (A_BACK), then the call ends with am->final or
 * goes on waiting. Under am->mu. */
static void am_give_back(amulti *am)
{
    am->phase = A_BACK;
    for (size_t i = 0; i < am->ml->n; i++)
        if (am->rc[i] == DLOCK_OK) {
            am->rc[i] = DLOCK__BUSY;   /* not held (whatever the release says) */
            am_start(am, i, 1, 0);
        }
}

/* A round (or the target's wait) answered: decide. Under am->mu; returns 1
 * when the call ended (am freed, the callback run: the caller must not touch
 * am). */
static int am_decide(amulti *am)
{
    dlock_multilock *ml = am->ml;
    for (;;) {
        if (am->pending > 0)
            return 0;
        if (am->phase == A_RELEASE) {
            size_t released = 0;
            for (size_t i = 0; i < ml->n; i++)
                released += am->rc[i] == DLOCK_OK;
            int rc = ml->red ? (released >= ml->quorum ? DLOCK_OK : am->final)
                             : am->final;
            if (rc == DLOCK_OK)
                am->final = DLOCK_OK;
            pthread_mutex_unlock(&am->mu);
            am_end(am, rc);
            return 1;
        }
        if (am->phase == A_BACK) {
            /* Everything given back: end, or wait on the target. */
            int64_t now = dlock__now_ms();
            if (am->final == DLOCK_OK && am->o.cancel && dlock_cancel_fired(am->o.cancel)) {
                am->final = DLOCK_ECANCELED;
                snprintf(am->msg, sizeof(am->msg), "%s: canceled", ml->label);
            }
            if (am->final == DLOCK_OK && now >= am->deadline) {
                am->final = DLOCK_ETIMEDOUT;
                snprintf(am->msg, sizeof(am->msg), "%s: not taken within the wait (all released)%s%s",
                         ml->label, am->why[0] ? ": " : "", am->why);
            }
            if (am->final != DLOCK_OK) {
                int rc = am->final;
                pthread_mutex_unlock(&am->mu);
                am_end(am, rc);
                return 1;
            }
            if (am->target == NONE)
                am_round(am);   /* a stale round: again at once */
            else
                am_wait_target(am, 0);
            continue;
        }
        if (am->phase == A_TARGET) {
            size_t t = am->target;
            int rc = am->rc[t];
            if (rc == DLOCK_ETIMEDOUT) {
                /* Its wait ran out: the deadline (decided in A_BACK), or a
                 * RedLock's pause: a new round. */
                am->final = DLOCK_OK;
                am->phase = A_BACK;
                if (ml->red)
                    am->target = NONE;
                continue;
            }
            if (rc != DLOCK_OK) {
                am_give_back(am);   /* nothing held; the error stands (noted) */
                continue;
            }
            /* The target held: the others, once each (the validity counts
             * from now: the drift margin covers the round trip before). */
            am->phase = A_TRY;
            am->taken_at = dlock__now_ms();
            for (size_t i = 0; i < ml->n; i++)
                if (i != t)
                    am_start(am, i, 0, 0);
            continue;
        }
        /* A_TRY answered. */
        size_t taken = 0, failed = 0, busy = NONE;
        for (size_t i = 0; i < ml->n; i++) {
            if (am->rc[i] == DLOCK_OK)
                taken++;
            else if (am->rc[i] == DLOCK_ETIMEDOUT) {
                if (busy == NONE || i == am->target)
                    busy = i;
            } else
                failed++;
        }
        int64_t took = dlock__now_ms() - am->taken_at;
        if (taken >= ml->quorum &&
            am->lease - took - (ml->red ? drift_of(am->lease) : 0) > 0) {
            pthread_mutex_unlock(&am->mu);
            am_end(am, DLOCK_OK);
            return 1;
        }
        if (failed <= ml->n - ml->quorum) {
            /* No error decides (a RedLock's within its margin): released,
             * then the target's wait, or (taken too late) again at once. */
            am->final = DLOCK_OK;
            am->target = taken >= ml->quorum ? NONE : busy;
        }   /* else the error noted stands */
        am_give_back(am);
    }
}

static void on_sub(const dlock_async_result *res, void *ud)
{
    asub *s = ud;
    amulti *am = s->am;
    int rc = dlock_async_status(res);
    pthread_mutex_lock(&am->mu);
    am->pending--;
    if (am->phase == A_BACK) {
        /* a give-back: its error does not change the outcome */
    } else {
        am->rc[s->i] = rc;
        if (rc == DLOCK_ETIMEDOUT && am->phase == A_TARGET)
            snprintf(am->why, sizeof(am->why), "%s", dlock_async_message(res));
        if (rc != DLOCK_OK && rc != DLOCK_ETIMEDOUT)
            am_note(am, rc, dlock_async_message(res));
        else if (am->phase == A_RELEASE && rc != DLOCK_OK)
            am_note(am, rc, dlock_async_message(res));
    }
    if (!am_decide(am))
        pthread_mutex_unlock(&am->mu);
}

/* Checks the handles for asynchronous use: explicit owners. */
static int am_check(dlock_multilock *ml, dlock_async_fn fn)
{
    int rc = dlock__check_handle(ml, "multi-lock");
    if (rc != DLOCK_OK)
        return rc;
    if (!fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    for (size_t i = 0; i < ml->n; i++)
        if (!ml->locks[i]->owner)
            return dlock__fail(DLOCK_EINVAL, "%s: '%s' acts for the calling thread: an "
                                             "asynchronous call needs explicit-owner handles "
                                             "(dlock_lock_get_as)",
                               ml->label, ml->locks[i]->h.name);
    return DLOCK_OK;
}

static amulti *am_new(dlock_multilock *ml, dlock_async_fn fn, void *ud)
{
    amulti *am = calloc(1, sizeof(*am));
    if (!am || !(am->rc = calloc(ml->n, sizeof(*am->rc))) ||
        !(am->subs = calloc(ml->n, sizeof(*am->subs)))) {
        if (am) {
            free(am->rc);
            free(am);
        }
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&am->mu, NULL);
    am->ml = ml;
    am->fn = fn;
    am->ud = ud;
    am->target = NONE;
    for (size_t i = 0; i < ml->n; i++)
        am->subs[i] = (asub){am, i};
    return am;
}

/* Starts the sub-calls of a first step under a guard: all refused at the
 * call returns that error (nothing started, no callback); else the
 * callbacks decide. */
static int am_launch(amulti *am, int release)
{
    dlock_multilock *ml = am->ml;
    pthread_mutex_lock(&am->mu);
    am->pending++;   /* the guard */
    if (release)
        for (size_t i = 0; i < ml->n; i++)
            am_start(am, i, 1, 0);
    else
        am_round(am);
    am->pending--;
    if (am->pending == 0) {
        /* nothing started: nothing held */
        int rc = am->final;
        char msg[MSG];
        snprintf(msg, sizeof(msg), "%s", am->msg);
        pthread_mutex_unlock(&am->mu);
        am_free(am);
        return dlock__fail(rc == DLOCK_OK ? DLOCK_ECLOSED : rc, "%s", msg);
    }
    /* Some answered already (refused): the decision waits for the rest. */
    pthread_mutex_unlock(&am->mu);
    return DLOCK_OK;
}

int dlock_multilock_acquire_async(dlock_multilock *ml, const dlock_wait_opts *opts,
                                  dlock_async_fn fn, void *ud)
{
    int rc = am_check(ml, fn);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE, "a multi-lock", &o);
    if (rc != DLOCK_OK)
        return rc;
    amulti *am = am_new(ml, fn, ud);
    if (!am)
        return DLOCK_ENOMEM;
    am->o = o;
    int64_t now = dlock__now_ms();
    am->deadline = o.wait_ms == DLOCK_WAIT_FOREVER ? INT64_MAX : now + o.wait_ms;
    am->lease = o.lease_ms;
    if (am->lease == DLOCK_WATCHDOG) {
        am->lease = INT64_MAX;
        for (size_t i = 0; i < ml->n; i++)
            if (ml->locks[i]->h.c->cfg.watchdog_ms < am->lease)
                am->lease = ml->locks[i]->h.c->cfg.watchdog_ms;
    }
    return am_launch(am, 0);
}

int dlock_multilock_release_async(dlock_multilock *ml, dlock_async_fn fn, void *ud)
{
    int rc = am_check(ml, fn);
    if (rc != DLOCK_OK)
        return rc;
    amulti *am = am_new(ml, fn, ud);
    if (!am)
        return DLOCK_ENOMEM;
    am->phase = A_RELEASE;
    for (size_t i = 0; i < ml->n; i++)
        am->rc[i] = DLOCK__BUSY;
    return am_launch(am, 1);
}
