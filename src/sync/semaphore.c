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

static void add_op(dlock__op *op, const char *name, size_t nlen, const char *channel,
                             size_t clen, int64_t delta)
{
    /* KEYS: semaphore, channel; ARGV: delta, bound (scripts/semaphore/add.lua). */
    dlock__op_init(op, DLOCK__SCRIPT_SEMAPHORE_ADD);
    dlock__op_key(op, name, nlen);
    dlock__op_key(op, channel, clen);
    dlock__op_argi(op, delta);
    dlock__op_argi(op, DLOCK_COUNT_MAX);
}

int dlock__semaphore_add(dlock_client *c, const char *what, const char *name, size_t nlen,
                         const char *channel, size_t clen, int64_t delta, unsigned flags,
                         int64_t *count, int *heard)
{
    dlock__op op;
    add_op(&op, name, nlen, channel, clen, delta);
    redisReply *r;
    int rc = dlock__op_run(c, &op, flags, NULL, what, name, &r);
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

static int set_permits(dlock_semaphore *s, int64_t permits, int only_if_unset, int *was_set)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(permits, 0, "permits");
    if (rc != DLOCK_OK)
        return rc;
    /* KEYS: semaphore, channel; ARGV: permits, only if unset (scripts/semaphore/set.lua). */
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_SEMAPHORE_SET);
    dlock__op_key(&op, s->name, s->nlen);
    dlock__op_key(&op, s->channel, s->clen);
    dlock__op_argi(&op, permits);
    dlock__op_args(&op, only_if_unset ? "1" : "0");
    /* Setting is idempotent; setting if unset is not (a retry would answer 0). */
    redisReply *r;
    rc = dlock__op_run(s->c, &op, only_if_unset ? 0 : DLOCK__CALL_IDEMPOTENT, NULL, WHAT,
                       s->name, &r);
    if (rc != DLOCK_OK)
        return rc;
    int set = 0;
    if (dlock__reply_flag(r, &set) != DLOCK_OK)
        return dlock__proto(WHAT, s->name, "set permits", r);
    freeReplyObject(r);
    if (was_set)
        *was_set = set;
    return DLOCK_OK;
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
static int take_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    (void)waited_ms;
    take *t = ud;
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_SEMAPHORE_ACQUIRE);
    dlock__op_key(&op, t->s->name, t->s->nlen);
    dlock__op_argi(&op, t->n);
    dlock__attempts++;
    redisReply *r;
    int rc = dlock__op_run(t->s->c, &op, 0, t->cancel, WHAT, t->s->name, &r);
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

static int take_busy(void *ud, const dlock__busy *b)
{
    (void)b;
    take *t = ud;
    return dlock__fail(DLOCK_ETIMEDOUT, "semaphore '%s': %lld permit%s asked, %lld available",
                       t->s->name, (long long)t->n, t->n == 1 ? "" : "s", (long long)t->have);
}

static int take_permits(dlock_semaphore *s, int64_t n, int64_t wait_ms, dlock_cancel *cancel)
{
    int rc = bad_handle(s);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits to acquire");
    if (rc == DLOCK_OK && wait_ms < DLOCK_WAIT_FOREVER)
        rc = dlock__fail(DLOCK_EINVAL, "wait %lld ms: use 0 (try once), a positive wait or "
                                       "DLOCK_WAIT_FOREVER",
                         (long long)wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    take t = {s, n, 0, cancel};
    dlock__wait_spec spec = {.name = s->name, .channel = s->channel, .clen = s->clen,
                             .wake = dlock__wake_permits, .need = n, .wait_ms = wait_ms,
                             .cancel = cancel};
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

/* ------------------------------------------------------------- queries */

int dlock_semaphore_available(dlock_semaphore *s, int64_t *n)
{
    int rc = bad_handle(s);
    if (rc != DLOCK_OK)
        return rc;
    if (!n)
        return dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    dlock__op op;
    dlock__op_init(&op, -1);
    dlock__op_args(&op, "GET");
    dlock__op_arg(&op, s->name, s->nlen);
    redisReply *r;
    rc = dlock__op_run(s->c, &op, DLOCK__CALL_IDEMPOTENT, NULL, WHAT, s->name, &r);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__reply_signed(r, n);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(WHAT, s->name, "GET", r);
    freeReplyObject(r);
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: it holds a "
                                             "string that is not a permit count",
                           s->name, WHAT);
    return DLOCK_OK;
}

int dlock_semaphore_drain(dlock_semaphore *s, int64_t *drained)
{
    int rc = bad_handle(s);
    if (rc != DLOCK_OK)
        return rc;
    /* KEYS: semaphore (scripts/semaphore/drain.lua). Not resent: a retry
     * would answer 0 for permits the first attempt took. */
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_SEMAPHORE_DRAIN);
    dlock__op_key(&op, s->name, s->nlen);
    redisReply *r;
    rc = dlock__op_run(s->c, &op, 0, NULL, WHAT, s->name, &r);
    if (rc != DLOCK_OK)
        return rc;
    int64_t v = 0;
    if (dlock__reply_integer(r, &v) != DLOCK_OK)
        return dlock__proto(WHAT, s->name, "drain", r);
    freeReplyObject(r);
    if (drained)
        *drained = v;
    return DLOCK_OK;
}
