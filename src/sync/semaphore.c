/* The counting semaphore (Redisson's RSemaphore): a string of available
 * permits at `name`, wake-ups on redisson_sc:{name} carrying the new count
 * (scripts/semaphore/).
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
 * count the same way: it adds permits with this file's op and wakes its
 * waiters with the same policy. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "semaphore";

struct dlock_semaphore {
    dlock_client *c;
    char *name;
    size_t nlen;
    char *channel;           /* redisson_sc:{name} */
    size_t clen;
    atomic_int heard;        /* the last release through this handle woke some client */
};

/* ------------------------------------------------------------- shared */

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

int dlock__check_count(int64_t n, int64_t min, const char *what)
{
    if (n < min || n > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "%s %lld: use %lld..%lld", what, (long long)n,
                           (long long)min, (long long)DLOCK_COUNT_MAX);
    return DLOCK_OK;
}

void dlock__semaphore_add_op(dlock__op *op, const char *name, size_t nlen, const char *channel,
                             size_t clen, int64_t delta)
{
    /* KEYS: semaphore, channel; ARGV: delta, bound (scripts/semaphore/add.lua). */
    dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_ADD);
    dlock__op_key(op, name, nlen);
    dlock__op_key(op, channel, clen);
    dlock__op_argi(op, delta);
    dlock__op_argi(op, DLOCK_COUNT_MAX);
}

/* An add's answer (rc: the call's status; r freed). */
int dlock__semaphore_add_end(const char *what, const char *name, int rc, redisReply *r,
                             int64_t *count, int *heard)
{
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(what, name);
    if (rc == DLOCK_EINVAL) {
        /* The script's refusal: "<addr>: EINVAL the semaphore would hold ..." */
        const char *why = strstr(dlock_last_error(), "EINVAL ");
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", why ? why + 7 : dlock_last_error());
        return dlock__fail(DLOCK_EINVAL, "%s '%s': %s", what, name, msg);
    }
    if (rc != DLOCK_OK)
        return rc;
    int64_t n = 0, h = 0;
    if (dlock__reply_pair(r, &n, &h) != DLOCK_OK)
        return dlock__proto(what, name, "add", r);
    freeReplyObject(r);
    if (count)
        *count = n;
    if (heard)
        *heard = h > 0;
    return DLOCK_OK;
}

int dlock__semaphore_add(dlock_client *c, const char *what, const char *name, size_t nlen,
                         const char *channel, size_t clen, int64_t delta, unsigned flags,
                         int64_t *count, int *heard)
{
    dlock__op op;
    dlock__semaphore_add_op(&op, name, nlen, channel, clen, delta);
    redisReply *r = NULL;
    int rc = dlock__op_call(c, &op, flags, NULL, 0, &r);
    return dlock__semaphore_add_end(what, name, rc, rc == DLOCK_OK ? r : NULL, count, heard);
}

/* ------------------------------------------------------------- handle */

static int bad_handle(const void *s)
{
    dlock__clear_error();
    return s ? DLOCK_OK : dlock__fail(DLOCK_EINVAL, "semaphore is NULL");
}

int dlock_semaphore_get(dlock_client *c, const char *name, dlock_semaphore **out)
{
    size_t nlen = 0;
    int rc = dlock__get_args(c, name, out, &nlen);
    if (out)
        *out = NULL;
    if (rc != DLOCK_OK)
        return rc;
    dlock_semaphore *s = calloc(1, sizeof(*s));
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->c = c;
    s->nlen = nlen;
    s->name = dlock__strndup(name, nlen);
    s->channel = dlock__prefixed("redisson_sc", name, nlen, "", &s->clen);
    if (!s->name || !s->channel) {
        dlock_semaphore_free(s);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = s;
    return DLOCK_OK;
}

void dlock_semaphore_free(dlock_semaphore *s)
{
    if (!s)
        return;
    free(s->name);
    free(s->channel);
    free(s);
}

const char *dlock_semaphore_name(const dlock_semaphore *s) { return s ? s->name : ""; }

/* ------------------------------------------------------------- set, add */

/* The calls of one round trip (blocking and asynchronous alike): a request
 * and what its answer means. */
enum { SQ_SET, SQ_TRY_SET, SQ_ADD, SQ_AVAILABLE, SQ_DRAIN };

typedef struct sem_req {
    dlock_semaphore *s;
    int kind;
    int64_t arg;             /* permits to set, delta to add */
} sem_req;

static void sem_req_op(const sem_req *q, dlock__op *op, unsigned *flags)
{
    dlock_semaphore *s = q->s;
    switch (q->kind) {
    case SQ_SET:
    case SQ_TRY_SET:
        /* KEYS: semaphore, channel; ARGV: permits, only if unset
         * (scripts/semaphore/set.lua). Setting is idempotent; setting if
         * unset is not (a retry would answer 0). */
        dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_SET);
        dlock__op_key(op, s->name, s->nlen);
        dlock__op_key(op, s->channel, s->clen);
        dlock__op_argi(op, q->arg);
        dlock__op_args(op, q->kind == SQ_TRY_SET ? "1" : "0");
        *flags = q->kind == SQ_TRY_SET ? 0 : DLOCK__CALL_IDEMPOTENT;
        break;
    case SQ_ADD:
        dlock__semaphore_add_op(op, s->name, s->nlen, s->channel, s->clen, q->arg);
        *flags = 0;
        break;
    case SQ_AVAILABLE:
        dlock__op_init(op, -1);
        dlock__op_args(op, "GET");
        dlock__op_arg(op, s->name, s->nlen);
        *flags = DLOCK__CALL_IDEMPOTENT;
        break;
    default:
        /* KEYS: semaphore (scripts/semaphore/drain.lua). Not resent: a retry
         * would answer 0 for permits the first attempt took. */
        dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_DRAIN);
        dlock__op_key(op, s->name, s->nlen);
        *flags = 0;
        break;
    }
}

/* The answer (rc: the call's status; r freed): *v = 1/0 (set), the new count
 * (add), the count (available), the permits taken (drain). */
static int sem_req_end(const sem_req *q, int rc, redisReply *r, int64_t *v)
{
    dlock_semaphore *s = q->s;
    if (q->kind == SQ_ADD)
        return dlock__semaphore_add_end(WHAT, s->name, rc, r, v, NULL);
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, s->name);
    if (rc != DLOCK_OK)
        return rc;
    if (q->kind == SQ_AVAILABLE) {
        rc = dlock__reply_signed(r, v);
        if (rc == DLOCK_EPROTO)
            return dlock__proto(WHAT, s->name, "GET", r);
        freeReplyObject(r);
        if (rc == DLOCK_EWRONGTYPE)
            return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: it holds a "
                                                 "string that is not a permit count",
                               s->name, WHAT);
        return DLOCK_OK;
    }
    if (q->kind == SQ_DRAIN) {
        if (dlock__reply_integer(r, v) != DLOCK_OK)
            return dlock__proto(WHAT, s->name, "drain", r);
        freeReplyObject(r);
        return DLOCK_OK;
    }
    int set = 0;
    if (dlock__reply_flag(r, &set) != DLOCK_OK)
        return dlock__proto(WHAT, s->name, "set permits", r);
    freeReplyObject(r);
    *v = set;
    return DLOCK_OK;
}

static int sem_run(dlock_semaphore *s, int kind, int64_t arg, int64_t *v)
{
    sem_req q = {s, kind, arg};
    dlock__op op;
    unsigned flags = 0;
    sem_req_op(&q, &op, &flags);
    redisReply *r = NULL;
    int rc = dlock__op_call(s->c, &op, flags, NULL, 0, &r);
    return sem_req_end(&q, rc, rc == DLOCK_OK ? r : NULL, v);
}

static int set_permits(dlock_semaphore *s, int64_t permits, int only_if_unset, int *was_set)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(permits, 0, "permits");
    if (rc != DLOCK_OK)
        return rc;
    int64_t set = 0;
    rc = sem_run(s, only_if_unset ? SQ_TRY_SET : SQ_SET, permits, &set);
    if (rc == DLOCK_OK && was_set)
        *was_set = (int)set;
    return rc;
}

int dlock_semaphore_try_set_permits(dlock_semaphore *s, int64_t permits, int *was_set)
{
    return set_permits(s, permits, 1, was_set);
}

int dlock_semaphore_set_permits(dlock_semaphore *s, int64_t permits)
{
    return set_permits(s, permits, 0, NULL);
}

int dlock_semaphore_add_permits(dlock_semaphore *s, int64_t delta)
{
    int rc = bad_handle(s);
    if (rc != DLOCK_OK)
        return rc;
    if (delta == 0 || delta < -DLOCK_COUNT_MAX || delta > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "permits to add %lld: use a non-zero change within "
                                         "+-%lld",
                           (long long)delta, (long long)DLOCK_COUNT_MAX);
    return dlock__semaphore_add(s->c, WHAT, s->name, s->nlen, s->channel, s->clen, delta, 0,
                                NULL, NULL);
}

int dlock_semaphore_release(dlock_semaphore *s, int64_t n)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits to release");
    if (rc != DLOCK_OK)
        return rc;
    /* A release after one that woke somebody is likely a handoff: the PING
     * makes Redis write the message to the waiters before our answer
     * (docs/internals/waiting.md). */
    unsigned flags = atomic_load_explicit(&s->heard, memory_order_relaxed)
                         ? DLOCK__CALL_PING_FIRST
                         : 0;
    int heard = 0;
    rc = dlock__semaphore_add(s->c, WHAT, s->name, s->nlen, s->channel, s->clen, n, flags, NULL,
                              &heard);
    if (rc == DLOCK_OK)
        atomic_store_explicit(&s->heard, heard, memory_order_relaxed);
    return rc;
}

/* ------------------------------------------------------------- acquire */

typedef struct take {
    dlock_semaphore *s;
    int64_t n;
    int64_t have;            /* the count the last busy attempt saw */
    dlock_cancel *cancel;
} take;

/* KEYS: semaphore; ARGV: n (scripts/semaphore/acquire.lua). */
static void take_op(void *st, int64_t waited_ms, dlock__op *op, unsigned *flags)
{
    (void)waited_ms;
    (void)flags;
    take *t = st;
    dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_ACQUIRE);
    dlock__op_key(op, t->s->name, t->s->nlen);
    dlock__op_argi(op, t->n);
}

/* An attempt's answer (rc: the call's status; r freed). */
static int take_end(void *st, int rc, redisReply *r, int64_t sent_ms, dlock__busy *b)
{
    (void)sent_ms;
    take *t = st;
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, t->s->name);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__reply_take(r, &t->have);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(WHAT, t->s->name, "acquire", r);
    freeReplyObject(r);
    if (rc == DLOCK__BUSY) {
        b->ttl = -1;   /* only a release brings permits back: sleep until its message */
        b->first = 0;
        b->pass = t->have > 0 ? t->have : 0;
    }
    return rc;
}

/* Replicas did not acknowledge the permits taken: back to the pool. */
static int give_back_permits(void *ud)
{
    take *t = ud;
    int heard = 0;
    return dlock__semaphore_add(t->s->c, WHAT, t->s->name, t->s->nlen, t->s->channel,
                                t->s->clen, t->n, 0, NULL, &heard);
}

static int take_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    take *t = ud;
    dlock__op op;
    take_op(t, waited_ms, &op, NULL);
    dlock__attempts++;
    dlock__res res;
    dlock__acks_reset();
    int rc = dlock__op_call_res(t->s->c, &op, DLOCK__CALL_WAIT_ACK, t->cancel, 0, &res);
    rc = take_end(t, rc, res.r, 0, b);
    if (rc != DLOCK_OK)
        return rc;
    dlock__acks_record(res.acks);
    return dlock__acks_check(t->s->c, WHAT, t->s->name, give_back_permits, t);
}

static int take_busy(void *ud, const dlock__busy *b)
{
    (void)b;
    take *t = ud;
    return dlock__fail(DLOCK_ETIMEDOUT, "semaphore '%s': %lld permit%s asked, %lld available",
                       t->s->name, (long long)t->n, t->n == 1 ? "" : "s", (long long)t->have);
}

static int check_take(dlock_semaphore *s, int64_t n, int64_t wait_ms)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits to acquire");
    if (rc == DLOCK_OK && wait_ms < DLOCK_WAIT_FOREVER)
        rc = dlock__fail(DLOCK_EINVAL, "wait %lld ms: use 0 (try once), a positive wait or "
                                       "DLOCK_WAIT_FOREVER",
                         (long long)wait_ms);
    return rc;
}

static dlock__wait_spec take_spec(dlock_semaphore *s, int64_t n, int64_t wait_ms,
                                  dlock_cancel *cancel)
{
    return (dlock__wait_spec){.name = s->name, .channel = s->channel, .clen = s->clen,
                              .wake = dlock__wake_permits, .need = n, .wait_ms = wait_ms,
                              .cancel = cancel};
}

static int take_permits(dlock_semaphore *s, int64_t n, int64_t wait_ms, dlock_cancel *cancel)
{
    int rc = check_take(s, n, wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    take t = {s, n, 0, cancel};
    dlock__wait_spec spec = take_spec(s, n, wait_ms, cancel);
    dlock__wait_ops ops = {take_attempt, take_busy, NULL, &t};
    return dlock__wait(s->c, &spec, &ops);
}

int dlock_semaphore_acquire(dlock_semaphore *s, int64_t n)
{
    return take_permits(s, n, DLOCK_WAIT_FOREVER, NULL);
}

int dlock_semaphore_try_acquire(dlock_semaphore *s, int64_t n, int64_t wait_ms)
{
    return take_permits(s, n, wait_ms, NULL);
}

int dlock_semaphore_acquire_cancellable(dlock_semaphore *s, int64_t n, int64_t wait_ms,
                                        dlock_cancel *cancel)
{
    return take_permits(s, n, wait_ms, cancel);
}

/* ------------------------------------------------------------- async */

static const dlock__await_type take_type = {
    .attempt_op = take_op,
    .attempt_end = take_end,
    .busy_error = take_busy,
};

int dlock_semaphore_acquire_async(dlock_semaphore *s, int64_t n, int64_t wait_ms,
                                  dlock_cancel *cancel, dlock_async_fn fn, void *ud)
{
    int rc = check_take(s, n, wait_ms);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    take *t = dlock__async_wait_new(s->c, &take_type, sizeof(*t), fn, ud);
    if (!t)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    *t = (take){s, n, 0, cancel};
    dlock__wait_spec spec = take_spec(s, n, wait_ms, cancel);
    return dlock__async_wait_start(t, &spec);
}

typedef struct give {
    dlock_semaphore *s;
    int64_t n;
} give;

static const dlock__op *give_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    give *g = st;
    (void)latch_ms;
    dlock__semaphore_add_op(scratch, g->s->name, g->s->nlen, g->s->channel, g->s->clen, g->n);
    if (atomic_load_explicit(&g->s->heard, memory_order_relaxed))
        *flags = DLOCK__CALL_PING_FIRST;
    return scratch;
}

static int give_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    give *g = st;
    int heard = 0;
    int64_t count = 0;
    rc = dlock__semaphore_add_end(WHAT, g->s->name, rc, r, &count, &heard);
    if (rc == DLOCK_OK) {
        atomic_store_explicit(&g->s->heard, heard, memory_order_relaxed);
        res->count = count;
    }
    return rc;
}

static const dlock__call_type give_type = {give_op, give_end, NULL};

int dlock_semaphore_release_async(dlock_semaphore *s, int64_t n, dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits to release");
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    give *g = dlock__async_call_new(s->c, &give_type, sizeof(*g), fn, ud);
    if (!g)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    *g = (give){s, n};
    return dlock__async_call_start(g);
}

/* ------------------------------------------------------------- queries */

int dlock_semaphore_available(dlock_semaphore *s, int64_t *n)
{
    int rc = bad_handle(s);
    if (rc != DLOCK_OK)
        return rc;
    if (!n)
        return dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    return sem_run(s, SQ_AVAILABLE, 0, n);
}

int dlock_semaphore_drain(dlock_semaphore *s, int64_t *drained)
{
    int rc = bad_handle(s);
    if (rc != DLOCK_OK)
        return rc;
    int64_t v = 0;
    rc = sem_run(s, SQ_DRAIN, 0, &v);
    if (rc == DLOCK_OK && drained)
        *drained = v;
    return rc;
}

/* ------------------------------------------------------ async, one trip */

static const dlock__op *sq_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    (void)latch_ms;
    sem_req_op(st, scratch, flags);
    return scratch;
}

static int sq_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    const sem_req *q = st;
    int64_t v = 0;
    rc = sem_req_end(q, rc, r, &v);
    if (rc == DLOCK_OK) {
        if (q->kind == SQ_SET || q->kind == SQ_TRY_SET)
            res->flag = (int)v;
        else
            res->count = v;
    }
    return rc;
}

static const dlock__call_type sem_call = {sq_op, sq_end, NULL};

static int sem_async(dlock_semaphore *s, int kind, int64_t arg, dlock_async_fn fn, void *ud)
{
    if (!fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    sem_req *q = dlock__async_call_new(s->c, &sem_call, sizeof(*q), fn, ud);
    if (!q)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    *q = (sem_req){s, kind, arg};
    return dlock__async_call_start(q);
}

int dlock_semaphore_set_permits_async(dlock_semaphore *s, int64_t permits, dlock_async_fn fn,
                                      void *ud)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(permits, 0, "permits");
    return rc == DLOCK_OK ? sem_async(s, SQ_SET, permits, fn, ud) : rc;
}

int dlock_semaphore_try_set_permits_async(dlock_semaphore *s, int64_t permits,
                                          dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(permits, 0, "permits");
    return rc == DLOCK_OK ? sem_async(s, SQ_TRY_SET, permits, fn, ud) : rc;
}

int dlock_semaphore_add_permits_async(dlock_semaphore *s, int64_t delta, dlock_async_fn fn,
                                      void *ud)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK && (delta == 0 || delta < -DLOCK_COUNT_MAX || delta > DLOCK_COUNT_MAX))
        rc = dlock__fail(DLOCK_EINVAL, "permits to add %lld: use a non-zero change within "
                                       "+-%lld",
                         (long long)delta, (long long)DLOCK_COUNT_MAX);
    return rc == DLOCK_OK ? sem_async(s, SQ_ADD, delta, fn, ud) : rc;
}

int dlock_semaphore_available_async(dlock_semaphore *s, dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(s);
    return rc == DLOCK_OK ? sem_async(s, SQ_AVAILABLE, 0, fn, ud) : rc;
}

int dlock_semaphore_drain_async(dlock_semaphore *s, dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(s);
    return rc == DLOCK_OK ? sem_async(s, SQ_DRAIN, 0, fn, ud) : rc;
}
