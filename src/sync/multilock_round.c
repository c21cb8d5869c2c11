/* Multi-lock and RedLock as composite operations (sync.h: compose): the
 * round of lock attempts, the decision (all, or a quorum within the
 * validity), the give-back of what a round that cannot stand took, the wait
 * on one busy lock, and the release. Both drivers run them, blocking or
 * asynchronous, the same way (docs/internals/multilock.md).
 *
 * A round's parts are each lock's own acquire operation (lock.h:
 * dlock__acquire_type), one attempt with no wait, on its lock's client
 * (parts.c): so each lock is attempted, kept (the watchdog), acknowledged by
 * replicas and, when it cannot stand, given back exactly as a single acquire
 * of its handle would be. The target, the lock the call waits on, is
 * attempted as a waiting acquire would be (it may reserve its next turn; a
 * fair lock queues the caller); the others as a try with no wait. Nothing
 * is held while waiting: two multi-locks over the same names in opposite
 * orders cannot deadlock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/multilock.h"

#define NONE ((size_t)-1)
#define REDLOCK_RETRY_MS 50 /* a RedLock that waits for one of several busy locks looks
                               again within 50..100 ms */

enum { P_NONE, P_ATTEMPT, P_BACK };

struct dlock__ml_slot {
    dlock__ml_slot *self;    /* its parts' state: a pointer to this slot */
    const dlock_multilock *ml;
    dlock_lock *l;
    dlock__acq a;            /* an acquisition's, set up for the whole call */
    int64_t waited;          /* this round's attempt: a waiting acquire's (the target), or -1 */
    dlock__rel x;            /* a release: a give-back, or the release call's */
    dlock__op gop;           /* the give-up's request */
    dlock__part part;        /* its part in the round out */
    int arc;                 /* the last attempt's outcome: DLOCK_OK, DLOCK__BUSY or an error */
    int held;                /* taken by this call, not given back */
    dlock__busy b;           /* the last attempt's busy answer */
    char msg[DLOCK__PART_MSG];   /* the message of an error arc (or of the release call's) */
};

const size_t dlock__ml_slot_size = sizeof(dlock__ml_slot);

/* RedLock's clock-drift allowance for a lease (the Redis description's: 1 %
 * of the lease, plus 2 ms for the granularity of expiries). */
static int64_t drift_of(int64_t lease_ms) { return lease_ms / 100 + 2; }

/* ------------------------------------------------------------- parts */

static dlock__ml_slot *slot_of(void *st) { return *(dlock__ml_slot **)st; }

/* A RedLock tries each server once (no retry: a server that is down fails
 * its lock at once, and the quorum of the others decides). */
static void no_retry(const dlock__ml_slot *s, dlock__op *op)
{
    if (s->ml->red)
        op->flags |= DLOCK__CALL_NO_RETRY;
}

/* An attempt: the acquire operation's hooks on the slot's acquisition. */
static void tried_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    dlock__ml_slot *s = slot_of(st);
    dlock__acquire_type.request(&s->a, s->waited, op);
    no_retry(s, op);
}

static int tried_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    dlock__ml_slot *s = slot_of(st);
    rc = dlock__acquire_type.read(&s->a, rc, res, b);
    if (rc == DLOCK_OK)
        s->a.queued = 0;   /* taken: no longer waiting in Redis */
    return rc;
}

static int tried_keep(void *st, int64_t sent_ms)
{
    return dlock__acquire_type.keep(&slot_of(st)->a, sent_ms);
}

static int tried_give_back(void *st, dlock__op *op)
{
    dlock__ml_slot *s = slot_of(st);
    int rc = dlock__acquire_type.give_back(&s->a, op);
    no_retry(s, op);
    return rc;
}

static int tried_gave_back(void *st, int rc, dlock__res *res)
{
    return dlock__acquire_type.gave_back(&slot_of(st)->a, rc, res);
}

static int tried_busy(void *st, const dlock__busy *b)
{
    return dlock__acquire_type.busy_error(&slot_of(st)->a, b);
}

static void tried_done(void *st, int read)
{
    (void)read;
    dlock__acq_closed(&slot_of(st)->a);
}

static const dlock__op_type tried_type = {.request = tried_request,
                                          .read = tried_read,
                                          .keep = tried_keep,
                                          .give_back = tried_give_back,
                                          .gave_back = tried_gave_back,
                                          .busy_error = tried_busy,
                                          .done = tried_done,
                                          .acquires = 1};

/* A release of the slot's x (a give-back, the release call's): as a single
 * release's, its answer read by dlock__rel_end. */
static void freed_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    dlock__ml_slot *s = slot_of(st);
    *op = s->x.op;
    no_retry(s, op);
}

static int freed_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    return dlock__rel_end(&slot_of(st)->x, rc, res);
}

static void freed_done(void *st, int read)
{
    (void)read;
    dlock__rel_closed(&slot_of(st)->x);
}

static const dlock__op_type freed_type = {
    .request = freed_request, .read = freed_read, .done = freed_done, .releases = 1};

/* The target's give-up (s->gop), once, its answer ignored. */
static void given_up_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    *op = slot_of(st)->gop;
    op->flags |= DLOCK__CALL_NO_RETRY;
}

static int given_up_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)st;
    (void)b;
    if (rc == DLOCK_OK)
        freeReplyObject(res->r);
    return DLOCK_OK;
}

static const dlock__op_type given_up_type = {.request = given_up_request,
                                             .read = given_up_read};

/* s's part in the round, its outcome cleared, in cl->sel[i]. */
static void put(dlock__ml_call *cl, size_t i, dlock__ml_slot *s, const dlock__op_type *t)
{
    s->part.h = &s->l->h;
    s->part.t = t;
    s->part.st = &s->self;
    s->part.size = sizeof(s->self);
    s->part.rc = DLOCK_OK;
    s->part.busied = 0;
    s->part.msg[0] = '\0';
    cl->sel[i] = &s->part;
}

static int round_out(dlock__ml_call *cl, dlock__parts *k, int phase, size_t n)
{
    cl->phase = phase;
    k->part = cl->sel;
    k->n = n;
    return DLOCK__MORE;
}

/* ---------------------------------------------------------- a call */

static int alloc_slots(dlock__ml_call *cl)
{
    size_t n = cl->ml->n;
    cl->s = calloc(n, sizeof(*cl->s));
    cl->sel = malloc(n * sizeof(*cl->sel));
    if (!cl->s || !cl->sel) {
        free(cl->s);
        free(cl->sel);
        cl->s = NULL;
        cl->sel = NULL;
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        dlock__ml_slot *s = &cl->s[i];
        s->self = s;
        s->ml = cl->ml;
        s->l = cl->ml->locks[i];
    }
    cl->target = NONE;
    cl->back_err = NONE;
    cl->phase = P_NONE;
    return DLOCK_OK;
}

static void free_slots(dlock__ml_call *cl)
{
    free(cl->s);
    free(cl->sel);
    cl->s = NULL;
    cl->sel = NULL;
}

/* Every acquisition set up where the call runs (owners: a thread-owned
 * handle acts for the caller whatever thread carries its parts). */
static int acq_setup(void *st)
{
    dlock__ml_call *cl = st;
    int rc = alloc_slots(cl);
    if (rc != DLOCK_OK)
        return rc;
    cl->lease = INT64_MAX;
    for (cl->ready = 0; cl->ready < cl->ml->n; cl->ready++) {
        dlock__ml_slot *s = &cl->s[cl->ready];
        s->a = (dlock__acq){.l = s->l, .wait = cl->o.wait_ms, .asked_lease = cl->o.lease_ms,
                            .cancel = cl->o.cancel};
        if ((rc = dlock__acquire_type.setup(&s->a)) != DLOCK_OK)
            break;
        if (s->a.lease_ms < cl->lease)
            cl->lease = s->a.lease_ms;   /* with the watchdog: each client's timeout */
    }
    if (rc == DLOCK_OK)
        return DLOCK_OK;
    for (size_t i = 0; i < cl->ready; i++)
        dlock__acquire_type.done(&cl->s[i].a, 1);
    free_slots(cl);
    return rc;
}

static void ignore(const dlock_async_result *res, void *ud)
{
    (void)res;
    (void)ud;
}

static void acq_done(void *st, int read)
{
    dlock__ml_call *cl = st;
    if (!cl->s)
        return;
    /* A round whose outcome was never read (the client closed with its
     * parts out; an asynchronous call's locks have explicit owners): what
     * it took is given back, best effort. */
    for (size_t i = 0; !read && cl->phase == P_ATTEMPT && i < cl->ml->n; i++)
        if (cl->s[i].part.rc == DLOCK_OK && cl->s[i].l->owner)
            dlock__lock_release_via(cl->s[i].l, &(dlock__via){ignore, NULL, NULL});
    for (size_t i = 0; i < cl->ready; i++)
        dlock__acquire_type.done(&cl->s[i].a, 1);
    free_slots(cl);
}

/* ------------------------------------------------------------- rounds */

/* The lock (its index) whose node is a new primary in the longest failover
 * quarantine still running (each lock's client's
 * dlock_config_set_failover_quarantine), *b its busy answer on that lock's
 * channel; 0 when none. A call waits that out before a round sends
 * anything (all or nothing: no lock is taken while another cannot be). */
static int quarantined(dlock__ml_call *cl, dlock__busy *b)
{
    size_t at = NONE;
    for (size_t i = 0; i < cl->ml->n; i++) {
        dlock__busy q = {.ttl = -1};
        if (dlock__quarantined(&cl->s[i].l->h, &dlock__acquire_type, &q) &&
            (at == NONE || q.ttl > b->ttl)) {
            *b = q;
            at = i;
        }
    }
    if (at == NONE)
        return 0;
    b->c = cl->s[at].l->h.c;
    b->channel = dlock__acquire_type.channel(&cl->s[at].a, &b->clen);
    return 1;
}

/* Every lock attempted at once. */
static int attempt_round(dlock__ml_call *cl, int64_t waited_ms, dlock__parts *k)
{
    size_t n = cl->ml->n;
    for (size_t i = 0; i < n; i++) {
        dlock__ml_slot *s = &cl->s[i];
        int target = i == cl->target;
        /* The target as a waiting acquire would try; the others as a try with
         * no wait (never queued for, nor reserved). */
        s->a.wait = target ? cl->o.wait_ms : 0;
        s->waited = target ? waited_ms : -1;
        s->held = 0;   /* a round starts with nothing held (given back before) */
        put(cl, i, s, &tried_type);
    }
    dlock__attempts += n;
    /* Taken before sending: the validity is never longer than what Redis grants. */
    cl->started = dlock__now_ms();
    return round_out(cl, k, P_ATTEMPT, n);
}

/* The error that ends a call after a round that cannot succeed: a lost
 * answer first (a lock may be held), else the first in the caller's order. */
static int failure(const dlock__ml_call *cl)
{
    const dlock_multilock *ml = cl->ml;
    size_t e = NONE;
    for (size_t i = 0; i < ml->n; i++) {
        int rc = cl->s[i].arc;
        if (rc != DLOCK_OK && rc != DLOCK__BUSY &&
            (e == NONE || (rc == DLOCK_EUNKNOWN && cl->s[e].arc != DLOCK_EUNKNOWN)))
            e = i;
    }
    const dlock__ml_slot *s = &cl->s[e];
    if (ml->red)
        return dlock__fail(s->arc,
                           "%s: %zu of %zu servers failed, %zu taken, %zu needed (all released); "
                           "'%s': %s",
                           ml->label, cl->failed, ml->n, cl->taken, ml->quorum, s->l->h.name,
                           s->msg);
    if (s->arc == DLOCK_EUNKNOWN)
        return dlock__fail(s->arc,
                           "%s: '%s': %s (that lock may be held until its lease ends, not "
                           "renewed; the others were released)",
                           ml->label, s->l->h.name, s->msg);
    return dlock__fail(s->arc, "%s: '%s': %s (the others were released)", ml->label,
                       s->l->h.name, s->msg);
}

/* After the give-back (or with nothing to give back): a give-back's error,
 * the round's, or DLOCK__BUSY with b telling where to wait. */
static int conclude(dlock__ml_call *cl, dlock__busy *b)
{
    const dlock_multilock *ml = cl->ml;
    if (cl->back_err != NONE)
        return dlock__fail(cl->back_rc, "%s: %s", ml->label, cl->s[cl->back_err].msg);
    if (!cl->stale && cl->failed > ml->n - ml->quorum)
        return failure(cl);
    size_t busy = 0, first_busy = NONE;
    for (size_t i = 0; i < ml->n; i++)
        if (cl->s[i].arc == DLOCK__BUSY && busy++ == 0)
            first_busy = i;
    dlock__ml_slot *t;
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
        /* Locks refused for a failover quarantine (recorded on the server,
         * or met on the way) are tried again once the longest has ended:
         * all or nothing, no round before every lock can be taken. */
        for (size_t i = 0; i < ml->n; i++) {
            const dlock__busy *q = &cl->s[i].b;
            if (cl->s[i].arc == DLOCK__BUSY && q->quarantine && q->ttl > b->ttl) {
                b->ttl = q->ttl;
                b->quarantine = q->quarantine;
                b->qserver = q->qserver;
            }
        }
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

/* After a round: DLOCK_OK, or what it took given back (the next parts: a
 * RedLock also releases where an answer was lost, as the algorithm says),
 * then the outcome (conclude). */
static int decide(dlock__ml_call *cl, dlock__parts *k, dlock__busy *b)
{
    const dlock_multilock *ml = cl->ml;
    cl->took_ms = dlock__now_ms() - cl->started;
    cl->taken = cl->failed = 0;
    for (size_t i = 0; i < ml->n; i++) {
        dlock__ml_slot *s = &cl->s[i];
        const dlock__part *p = &s->part;
        s->arc = p->rc == DLOCK_OK ? DLOCK_OK : p->busied ? DLOCK__BUSY : p->rc;
        s->held = s->arc == DLOCK_OK;
        cl->taken += (size_t)s->held;
        if (s->arc == DLOCK__BUSY)
            s->b = p->b;
        else if (s->arc != DLOCK_OK) {
            cl->failed++;
            snprintf(s->msg, sizeof(s->msg), "%s", p->msg);
        }
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
    cl->back_err = NONE;
    size_t m = 0;
    for (size_t i = 0; i < ml->n; i++) {
        dlock__ml_slot *s = &cl->s[i];
        if (!s->held && !(ml->red && s->arc == DLOCK_EUNKNOWN))
            continue;
        char why[DLOCK__MSG_MAX];
        dlock__errto prev = dlock__err_into(why, sizeof(why));
        int e = dlock__rel_init_as(&s->x, s->l, &s->a.o);
        dlock__err_reset(prev);
        if (e != DLOCK_OK) {
            if (cl->back_err == NONE) {
                cl->back_err = i;
                cl->back_rc = e;
                snprintf(s->msg, sizeof(s->msg), "'%s': %.400s", s->l->h.name, why);
            }
            continue;
        }
        put(cl, m++, s, &freed_type);
    }
    return m > 0 ? round_out(cl, k, P_BACK, m) : conclude(cl, b);
}

/* The give-back's outcome: a lock found no longer held counts as given back. */
static int gave_back(dlock__ml_call *cl, dlock__parts *k, dlock__busy *b)
{
    for (size_t j = 0; j < k->n; j++) {
        dlock__ml_slot *s = DLOCK__CONTAINER_OF(k->part[j], dlock__ml_slot, part);
        int e = s->part.rc;
        if (e != DLOCK_OK && e != DLOCK_ENOTOWNER && s->held && cl->back_err == NONE) {
            cl->back_err = (size_t)(s - cl->s);
            cl->back_rc = e;
            snprintf(s->msg, sizeof(s->msg),
                     "could not give back '%s' (it stays held until its lease ends at most): "
                     "%.400s",
                     s->l->h.name, s->part.msg);
        }
        s->held = 0;
    }
    return conclude(cl, b);
}

/* The target's give-up, once: its reservation handed back, its queue left. */
static int give_up(dlock__ml_call *cl, dlock__parts *k)
{
    if (cl->target == NONE)
        return DLOCK_OK;
    dlock__ml_slot *s = &cl->s[cl->target];
    if (!dlock__acquire_type.give_up(&s->a, k->give_up, &s->gop))
        return DLOCK_OK;
    put(cl, 0, s, &given_up_type);
    return round_out(cl, k, cl->phase, 1);
}

static int acq_compose(void *st, int64_t waited_ms, dlock__parts *k, dlock__busy *b)
{
    dlock__ml_call *cl = st;
    if (k->give_up)
        return give_up(cl, k);
    if (k->round == 0)
        return quarantined(cl, b) ? DLOCK__BUSY : attempt_round(cl, waited_ms, k);
    if (cl->phase == P_ATTEMPT)
        return decide(cl, k, b);
    return gave_back(cl, k, b);
}

static int acq_busy_error(void *st, const dlock__busy *b)
{
    (void)b;
    dlock__ml_call *cl = st;
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
    dlock__ml_slot *t = &cl->s[cl->target];
    char why[DLOCK__MSG_MAX] = "";   /* the busy lock's words, in the multi-lock's */
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int rc = dlock__acquire_type.busy_error(&t->a, &t->b);
    dlock__err_reset(prev);
    if (ml->red)
        return dlock__fail(rc, "%s: %zu of %zu taken, %zu needed (all released): %s", ml->label,
                           cl->taken, ml->n, ml->quorum, why);
    return dlock__fail(rc, "%s: %s", ml->label, why);
}

const dlock__op_type dlock__ml_acquire_type = {.setup = acq_setup,
                                               .compose = acq_compose,
                                               .busy_error = acq_busy_error,
                                               .done = acq_done};

/* ------------------------------------------------------------ release */

/* Every release begun where the call runs (the owners, as for setup above). */
static int rel_setup(void *st)
{
    dlock__ml_call *cl = st;
    int rc = alloc_slots(cl);
    for (size_t i = 0; rc == DLOCK_OK && i < cl->ml->n; i++) {
        dlock__ml_slot *s = &cl->s[i];
        dlock__errto prev = dlock__err_into(s->msg, sizeof(s->msg));
        s->arc = dlock__rel_init(&s->x, s->l);
        dlock__err_reset(prev);
    }
    return rc;
}

/* Sends every release begun; then a multi-lock answers the first error in
 * the caller's order, a RedLock DLOCK_OK when a quorum was released (else
 * not held, a lease having run out, or the first error). */
static int rel_compose(void *st, int64_t waited_ms, dlock__parts *k, dlock__busy *b)
{
    (void)waited_ms;
    (void)b;
    dlock__ml_call *cl = st;
    const dlock_multilock *ml = cl->ml;
    if (k->round == 0) {
        size_t m = 0;
        for (size_t i = 0; i < ml->n; i++)
            if (cl->s[i].arc == DLOCK_OK)
                put(cl, m++, &cl->s[i], &freed_type);
        if (m > 0)
            return round_out(cl, k, P_BACK, m);
    }
    size_t released = 0, e = NONE;
    for (size_t i = 0; i < ml->n; i++) {
        dlock__ml_slot *s = &cl->s[i];
        if (s->arc == DLOCK_OK && (s->arc = s->part.rc) != DLOCK_OK)
            snprintf(s->msg, sizeof(s->msg), "%s", s->part.msg);
        if (s->arc == DLOCK_OK)
            released++;
        else if (e == NONE || (ml->red && s->arc == DLOCK_ENOTOWNER &&
                               cl->s[e].arc != DLOCK_ENOTOWNER))
            e = i;
    }
    if (ml->red && released < ml->quorum)
        return dlock__fail(cl->s[e].arc,
                           "%s: released on %zu of %zu servers, %zu needed; '%s': %s", ml->label,
                           released, ml->n, ml->quorum, cl->s[e].l->h.name, cl->s[e].msg);
    if (!ml->red && e != NONE)
        return dlock__fail(cl->s[e].arc, "%s", cl->s[e].msg);
    return DLOCK_OK;
}

static void rel_done(void *st, int read)
{
    (void)read;
    dlock__ml_call *cl = st;
    if (!cl->s)
        return;
    for (size_t i = 0; i < cl->ml->n; i++)
        dlock__rel_closed(&cl->s[i].x);   /* never sent (a call refused at its start) */
    free_slots(cl);
}

const dlock__op_type dlock__ml_release_type = {
    .setup = rel_setup, .compose = rel_compose, .done = rel_done};
