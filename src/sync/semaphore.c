/* The counting semaphore (Redisson's RSemaphore): a string of available
 * permits at `name`, wake-ups on redisson_sc:{name} carrying the new count
 * (scripts/semaphore/); and the calls on that count both semaphores share.
 *
 * Waiting is the shared wait loop's (wait.c): an attempt takes n permits or
 * answers how many there are; a busy waiter sleeps until a message, since
 * nothing else brings permits back. Its need is n: a message saying "k
 * permits" wakes this process's waiters whose needs fit in k
 * (dlock__wake_permits), so a release of many permits wakes as many waiters
 * as it can serve and a waiter for 5 sleeps through a count of 3. A woken
 * waiter that finds less than it needs (another process took some first)
 * offers the count it saw to the smaller waiters of its process.
 *
 * The permit-expirable semaphore (permit_semaphore.c) keeps its available
 * count the same way: its set, add and read go through dlock__count_call,
 * and its waiters wake by the same policy. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "semaphore";

struct dlock_semaphore {
    dlock__handle h;         /* channel: redisson_sc:{name} */
    atomic_int heard;        /* the last release through this handle woke some client */
};

int dlock__wake_permits(const char *msg, size_t len)
{
    /* The message is a count: Redisson's new count, or (Redisson's
     * permit-expirable semaphore) the permits a change brought. */
    size_t i = len > 0 && msg[0] == '-' ? 1 : 0;
    if (len <= i || len - i > 18)
        return DLOCK__WAKE_ALL;   /* not a count: let every waiter look */
    int64_t n = 0;
    for (size_t k = i; k < len; k++) {
        if (msg[k] < '0' || msg[k] > '9')
            return DLOCK__WAKE_ALL;
        n = n * 10 + (msg[k] - '0');
    }
    if (i || n == 0)
        return 0;   /* nothing to serve */
    return n > DLOCK_COUNT_MAX ? (int)DLOCK_COUNT_MAX : (int)n;
}

/* ------------------------------------------------------------- the count */

/* An add's request and answer (scripts/semaphore/add.lua: KEYS semaphore,
 * channel; ARGV delta, bound): *count = the new count, *heard = 1 when some
 * client heard the message. */
static void add_op(const dlock__handle *h, int64_t delta, dlock__op *op)
{
    /* KEYS: semaphore, channel; ARGV: delta, bound (scripts/semaphore/add.lua). */
    dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_ADD);
    dlock__op_key(op, h->name, h->nlen);
    dlock__op_key(op, h->channel, h->clen);
    dlock__op_argi(op, delta);
    dlock__op_argi(op, DLOCK_COUNT_MAX);
}

static int add_read(const dlock__handle *h, int rc, dlock__res *res, int64_t *count, int *heard)
{
    if (rc == DLOCK_EINVAL && res->err == DLOCK__RERR_ARG)
        /* The script's refusal: "EINVAL the semaphore would hold ..." */
        return dlock__fail(DLOCK_EINVAL, "%s '%s': %s", h->what, h->name,
                           dlock__redis_error_detail(res->text));
    if (rc != DLOCK_OK)
        return dlock__refused(h, rc, res);
    int64_t n = 0, k = 0;
    if (dlock__reply_pair(res->r, &n, &k) != DLOCK_OK)
        return dlock__proto(h, "add", res->r);
    freeReplyObject(res->r);
    *count = n;
    *heard = k > 0;
    return DLOCK_OK;
}

typedef struct count_call {
    const dlock__handle *h;
    const char *leases;      /* a permit semaphore's leases key, or NULL */
    size_t llen;
    int kind;                /* DLOCK__COUNT_* */
    int64_t arg;             /* permits to set, delta to add */
    int64_t v, held;
} count_call;

static void count_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    const count_call *q = st;
    const dlock__handle *h = q->h;
    switch (q->kind) {
    case DLOCK__COUNT_SET:
    case DLOCK__COUNT_TRY_SET:
        /* KEYS: semaphore, channel (and the leases: scripts/permits/set.lua);
         * ARGV: permits, only if unset (scripts/semaphore/set.lua). Setting is
         * idempotent; setting if unset is not (a retry would answer 0). */
        dlock__op_init(op, q->leases ? DLOCK__SCRIPT_PERMITS_SET : DLOCK__SCRIPT_SEMAPHORE_SET);
        dlock__op_key(op, h->name, h->nlen);
        dlock__op_key(op, h->channel, h->clen);
        if (q->leases)
            dlock__op_key(op, q->leases, q->llen);
        dlock__op_argi(op, q->arg);
        dlock__op_args(op, q->kind == DLOCK__COUNT_TRY_SET ? "1" : "0");
        op->flags = q->kind == DLOCK__COUNT_TRY_SET ? 0 : DLOCK__CALL_IDEMPOTENT;
        break;
    case DLOCK__COUNT_ADD:
        add_op(h, q->arg, op);
        break;
    case DLOCK__COUNT_AVAILABLE:
    case DLOCK__COUNT_HELD:
    case DLOCK__COUNT_TOTAL:
        if (q->leases) {
            /* KEYS: semaphore, leases, channel (scripts/permits/available.lua). */
            dlock__op_init(op, DLOCK__SCRIPT_PERMITS_AVAILABLE);
            dlock__op_key(op, h->name, h->nlen);
            dlock__op_key(op, q->leases, q->llen);
            dlock__op_key(op, h->channel, h->clen);
        } else {
            dlock__op_cmd(op, "GET", h->name, h->nlen, NULL, 0);
        }
        op->flags = DLOCK__CALL_IDEMPOTENT;
        break;
    default:
        /* KEYS: semaphore (scripts/semaphore/drain.lua). Not resent: a retry
         * would answer 0 for permits the first attempt took. */
        dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_DRAIN);
        dlock__op_key(op, h->name, h->nlen);
        break;
    }
}

static int count_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    count_call *q = st;
    const dlock__handle *h = q->h;
    if (q->kind == DLOCK__COUNT_ADD) {
        int heard;
        return add_read(h, rc, res, &q->v, &heard);
    }
    if (rc != DLOCK_OK)
        return dlock__refused(h, rc, res);
    redisReply *r = res->r;
    if (q->kind == DLOCK__COUNT_HELD || q->kind == DLOCK__COUNT_TOTAL) {
        if (dlock__reply_pair(r, &q->v, &q->held) != DLOCK_OK)
            return dlock__proto(h, "available", r);
    } else if (q->kind == DLOCK__COUNT_AVAILABLE && q->leases) {
        if (dlock__reply_pair(r, &q->v, &q->held) != DLOCK_OK)
            return dlock__proto(h, "available", r);
    } else if (q->kind == DLOCK__COUNT_AVAILABLE) {
        rc = dlock__reply_signed(r, &q->v);
        if (rc == DLOCK_EPROTO)
            return dlock__proto(h, "GET", r);
        if (rc == DLOCK_EWRONGTYPE) {
            freeReplyObject(r);
            return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: it holds a "
                                                 "string that is not a permit count",
                               h->name, h->what);
        }
    } else if (q->kind == DLOCK__COUNT_DRAIN) {
        if (dlock__reply_integer(r, &q->v) != DLOCK_OK)
            return dlock__proto(h, "drain", r);
    } else {
        int set = 0;
        if (dlock__reply_flag(r, &set) != DLOCK_OK)
            return dlock__proto(h, "set permits", r);
        q->v = set;
    }
    freeReplyObject(r);
    return DLOCK_OK;
}

static void count_result(void *st, dlock__result *res)
{
    const count_call *q = st;
    if (q->kind == DLOCK__COUNT_SET || q->kind == DLOCK__COUNT_TRY_SET)
        res->flag = (int)q->v;
    else if (q->kind == DLOCK__COUNT_HELD)
        res->count = q->held;
    else if (q->kind == DLOCK__COUNT_TOTAL)
        res->count = q->v + q->held;
    else
        res->count = q->v;
}

static const dlock__op_type count_type = {
    .request = count_request, .read = count_read, .result = count_result};

int dlock__count_call(const dlock__handle *h, const char *leases, size_t llen, int kind,
                      int64_t arg, const dlock__via *via, int64_t *v, int64_t *held)
{
    int rc = dlock__check_handle(h, WHAT);
    if (rc == DLOCK_OK && (kind == DLOCK__COUNT_SET || kind == DLOCK__COUNT_TRY_SET))
        rc = dlock__check_count(arg, 0, "permits");
    if (rc == DLOCK_OK && kind == DLOCK__COUNT_ADD)
        rc = dlock__check_delta(arg);
    if (rc == DLOCK_OK && kind == DLOCK__COUNT_AVAILABLE && !via && !v)
        rc = dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    if (rc != DLOCK_OK)
        return rc;
    count_call q = {h, leases, llen, kind, arg, 0, 0};
    rc = dlock__start(h, &count_type, &q, sizeof(q), NULL, via, NULL);
    if (rc == DLOCK_OK && !via) {
        if (v)
            *v = q.v;
        if (held)
            *held = q.held;
    }
    return rc;
}

/* ------------------------------------------------------------- handle */

int dlock_semaphore_get(dlock_client *c, const char *name, dlock_semaphore **out)
{
    dlock__handle *h;
    int rc = dlock__handle_new(c, name, out, sizeof(dlock_semaphore), WHAT, "redisson_sc", 0, &h);
    if (out)
        *out = (dlock_semaphore *)h;
    return rc;
}

void dlock_semaphore_free(dlock_semaphore *s) { dlock__handle_free((dlock__handle *)s); }

const char *dlock_semaphore_name(const dlock_semaphore *s) { return s ? s->h.name : ""; }

int dlock_semaphore_replica_acks(const dlock_semaphore *s)
{
    return dlock__handle_acks_of(s ? &s->h : NULL);
}

#define H(s) ((const dlock__handle *)(s))

int dlock_semaphore_try_set_permits(dlock_semaphore *s, int64_t permits, int *was_set)
{
    int64_t v = 0;
    int rc = dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_TRY_SET, permits, NULL, &v, NULL);
    if (rc == DLOCK_OK && was_set)
        *was_set = (int)v;
    return rc;
}

int dlock_semaphore_set_permits(dlock_semaphore *s, int64_t permits)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_SET, permits, NULL, NULL, NULL);
}

int dlock_semaphore_add_permits(dlock_semaphore *s, int64_t delta)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_ADD, delta, NULL, NULL, NULL);
}

int dlock_semaphore_available(dlock_semaphore *s, int64_t *n)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_AVAILABLE, 0, NULL, n, NULL);
}

int dlock_semaphore_drain(dlock_semaphore *s, int64_t *drained)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_DRAIN, 0, NULL, drained, NULL);
}

int dlock_semaphore_set_permits_async(dlock_semaphore *s, int64_t permits, dlock_async_fn fn,
                                      void *ud)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_SET, permits, &(dlock__via){fn, ud, 0},
                             NULL, NULL);
}

int dlock_semaphore_try_set_permits_async(dlock_semaphore *s, int64_t permits,
                                          dlock_async_fn fn, void *ud)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_TRY_SET, permits,
                             &(dlock__via){fn, ud, 0}, NULL, NULL);
}

int dlock_semaphore_add_permits_async(dlock_semaphore *s, int64_t delta, dlock_async_fn fn,
                                      void *ud)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_ADD, delta, &(dlock__via){fn, ud, 0}, NULL,
                             NULL);
}

int dlock_semaphore_available_async(dlock_semaphore *s, dlock_async_fn fn, void *ud)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_AVAILABLE, 0, &(dlock__via){fn, ud, 0},
                             NULL, NULL);
}

int dlock_semaphore_drain_async(dlock_semaphore *s, dlock_async_fn fn, void *ud)
{
    return dlock__count_call(H(s), NULL, 0, DLOCK__COUNT_DRAIN, 0, &(dlock__via){fn, ud, 0}, NULL,
                             NULL);
}

/* ------------------------------------------------------------- release */

typedef struct give {
    dlock_semaphore *s;
    int64_t n;
    int64_t count;
} give;

static void give_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    give *g = st;
    add_op(&g->s->h, g->n, op);
    /* A release after one that woke somebody is likely a handoff: the PING
     * makes Redis write the message to the waiters before our answer
     * (docs/internals/waiting.md). */
    if (atomic_load_explicit(&g->s->heard, memory_order_relaxed))
        op->flags = DLOCK__CALL_PING_FIRST;
}

static int give_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    give *g = st;
    int heard = 0;
    rc = add_read(&g->s->h, rc, res, &g->count, &heard);
    if (rc == DLOCK_OK)
        atomic_store_explicit(&g->s->heard, heard, memory_order_relaxed);
    return rc;
}

static void give_result(void *st, dlock__result *res) { res->count = ((give *)st)->count; }

static const dlock__op_type give_type = {
    .request = give_request, .read = give_read, .result = give_result};

static int give_permits(dlock_semaphore *s, int64_t n, const dlock__via *via)
{
    int rc = dlock__check_handle(s, WHAT);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits to release");
    if (rc != DLOCK_OK)
        return rc;
    give g = {s, n, 0};
    return dlock__start(&s->h, &give_type, &g, sizeof(g), NULL, via, NULL);
}

int dlock_semaphore_release(dlock_semaphore *s, int64_t n) { return give_permits(s, n, NULL); }

int dlock_semaphore_release_async(dlock_semaphore *s, int64_t n, dlock_async_fn fn, void *ud)
{
    return give_permits(s, n, &(dlock__via){fn, ud, 0});
}

/* ------------------------------------------------------------- acquire */

typedef struct take {
    dlock_semaphore *s;
    int64_t n;
    int64_t have;            /* the count the last busy attempt saw */
} take;

/* KEYS: semaphore; ARGV: n (scripts/semaphore/acquire.lua). */
static void take_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    take *t = st;
    dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_ACQUIRE);
    dlock__op_key(op, t->s->h.name, t->s->h.nlen);
    dlock__quarantine_key(&t->s->h, op);
    dlock__op_argi(op, t->n);
}

static int take_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    take *t = st;
    if (rc != DLOCK_OK)
        return dlock__refused(&t->s->h, rc, res);
    rc = dlock__reply_take(res->r, &t->have);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(&t->s->h, "acquire", res->r);
    freeReplyObject(res->r);
    if (rc == DLOCK__BUSY) {
        b->ttl = -1;   /* only a release brings permits back: sleep until its message */
        b->first = 0;
        b->pass = t->have > 0 ? t->have : 0;
    }
    return rc;
}

/* Permits that cannot stand (too few replicas acknowledged them): back to
 * the pool. */
static int take_give_back(void *st, dlock__op *op)
{
    take *t = st;
    add_op(&t->s->h, t->n, op);
    return 1;
}

static int take_gave_back(void *st, int rc, dlock__res *res)
{
    take *t = st;
    int64_t count;
    int heard;
    return add_read(&t->s->h, rc, res, &count, &heard);
}

static int take_busy(void *st, const dlock__busy *b)
{
    (void)b;
    take *t = st;
    return dlock__fail(DLOCK_ETIMEDOUT, "semaphore '%s': %lld permit%s asked, %lld available",
                       t->s->h.name, (long long)t->n, t->n == 1 ? "" : "s", (long long)t->have);
}

static const dlock__op_type take_type = {
    .request = take_request,
    .read = take_read,
    .give_back = take_give_back,
    .gave_back = take_gave_back,
    .busy_error = take_busy,
    .acquires = 1,
};

static int take_permits(dlock_semaphore *s, int64_t n, const dlock_wait_opts *opts,
                        const dlock__via *via)
{
    int rc = dlock__check_handle(s, WHAT);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits to acquire");
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, 0, "a semaphore", &o);
    if (rc != DLOCK_OK)
        return rc;
    take t = {s, n, 0};
    dlock__wait_spec spec = {.wake = dlock__wake_permits, .need = n, .wait_ms = o.wait_ms,
                             .cancel = o.cancel};
    return dlock__start(&s->h, &take_type, &t, sizeof(t), &spec, via, NULL);
}

int dlock_semaphore_acquire_opts(dlock_semaphore *s, int64_t n, const dlock_wait_opts *o)
{
    return take_permits(s, n, o, NULL);
}

int dlock_semaphore_acquire(dlock_semaphore *s, int64_t n)
{
    return take_permits(s, n, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, NULL);
}

int dlock_semaphore_try(dlock_semaphore *s, int64_t n, int64_t wait_ms)
{
    return take_permits(s, n, &(dlock_wait_opts){.wait_ms = wait_ms}, NULL);
}

int dlock_semaphore_acquire_async(dlock_semaphore *s, int64_t n, const dlock_wait_opts *o,
                                  dlock_async_fn fn, void *ud)
{
    return take_permits(s, n, o, &(dlock__via){fn, ud, 0});
}
