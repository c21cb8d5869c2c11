/* The count-down latch (Redisson's RCountDownLatch): a string count at
 * `name` (absent = zero), wake-ups on
 * redisson_countdownlatch__channel__{name} (scripts/latch/).
 *
 * Awaiting is the shared wait loop's: an attempt is one GET, "busy" while
 * the count is above zero, and a busy awaiter sleeps until a message (no
 * deadline from Redis: only a count-down or a delete ends the wait). Every
 * message wakes every local awaiter. The zero message ends the wait of each
 * awaiter that was waiting when it was published (the pub/sub layer knows
 * by a barrier PING, see DLOCK__WAKE_ALL_DONE): no GET after it, so a
 * hundred awaiters wake without a hundred commands. A "1" (a new count,
 * when nobody should wait, or a delete, after which the count is zero too),
 * or a zero that may predate the wait, makes each check the count once. So
 * an awaiter costs its subscription and a GET or two before it sleeps, and
 * nothing while it sleeps. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "count-down latch";

struct dlock_latch {
    dlock_client *c;
    char *name;
    size_t nlen;
    char *channel;           /* redisson_countdownlatch__channel__{name} */
    size_t clen;
};

/* Every message wakes every awaiter of this process; "0" (the count reached
 * zero) also ends the waits of those waiting when it was published, without
 * another GET (DLOCK__WAKE_ALL_DONE). A "1" (a new count, a delete) only
 * wakes: each checks the count. */
static int wake_latch(const char *msg, size_t len)
{
    return len == 1 && msg[0] == '0' ? DLOCK__WAKE_ALL_DONE : DLOCK__WAKE_ALL;
}

static int bad_handle(const void *l)
{
    dlock__clear_error();
    return l ? DLOCK_OK : dlock__fail(DLOCK_EINVAL, "latch is NULL");
}

int dlock_latch_get(dlock_client *c, const char *name, dlock_latch **out)
{
    size_t nlen = 0;
    int rc = dlock__get_args(c, name, out, &nlen);
    if (out)
        *out = NULL;
    if (rc != DLOCK_OK)
        return rc;
    dlock_latch *l = calloc(1, sizeof(*l));
    if (!l)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    /* Redisson wraps the name in braces whatever it holds (unlike its other
     * objects' channels). */
    static const char prefix[] = "redisson_countdownlatch__channel__{";
    l->c = c;
    l->nlen = nlen;
    l->name = dlock__strndup(name, nlen);
    l->clen = sizeof(prefix) - 1 + nlen + 1;
    l->channel = malloc(l->clen + 1);
    if (!l->name || !l->channel) {
        dlock_latch_free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    memcpy(l->channel, prefix, sizeof(prefix) - 1);
    memcpy(l->channel + sizeof(prefix) - 1, name, nlen);
    memcpy(l->channel + l->clen - 1, "}", 2);
    *out = l;
    return DLOCK_OK;
}

void dlock_latch_free(dlock_latch *l)
{
    if (!l)
        return;
    free(l->name);
    free(l->channel);
    free(l);
}

const char *dlock_latch_name(const dlock_latch *l) { return l ? l->name : ""; }

/* ------------------------------------------------------------- changes */

/* The answer of a script answering one integer (rc: the call's status). */
static int int_end(dlock_latch *l, const char *opname, int rc, redisReply *r, int64_t *v)
{
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, l->name);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__reply_integer(r, v) != DLOCK_OK)
        return dlock__proto(WHAT, l->name, opname, r);
    freeReplyObject(r);
    return DLOCK_OK;
}

/* A script on the latch and its channel answering one integer. */
static int run(dlock_latch *l, dlock__op *op, const char *opname, int64_t *v)
{
    redisReply *r = NULL;
    int rc = dlock__op_call(l->c, op, 0, NULL, 0, &r);
    return int_end(l, opname, rc, rc == DLOCK_OK ? r : NULL, v);
}

/* KEYS: latch, channel; ARGV: count (scripts/latch/set.lua). Not resent
 * after a lost answer: a retry would answer 0 for its own count. */
static void set_op(const dlock_latch *l, int64_t count, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_LATCH_SET);
    dlock__op_key(op, l->name, l->nlen);
    dlock__op_key(op, l->channel, l->clen);
    dlock__op_argi(op, count);
}

int dlock_latch_try_set_count(dlock_latch *l, int64_t count, int *was_set)
{
    int rc = bad_handle(l);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(count, 1, "latch count");
    if (rc != DLOCK_OK)
        return rc;
    dlock__op op;
    set_op(l, count, &op);
    int64_t set = 0;
    rc = run(l, &op, "try set count", &set);
    if (rc == DLOCK_OK && was_set)
        *was_set = set == 1;
    return rc;
}

/* KEYS: latch, channel (scripts/latch/count_down.lua). */
static void count_down_op(const dlock_latch *l, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_LATCH_COUNT_DOWN);
    dlock__op_key(op, l->name, l->nlen);
    dlock__op_key(op, l->channel, l->clen);
}

int dlock_latch_count_down(dlock_latch *l)
{
    int rc = bad_handle(l);
    if (rc != DLOCK_OK)
        return rc;
    dlock__op op;
    count_down_op(l, &op);
    int64_t left = 0;
    return run(l, &op, "count down", &left);
}

/* KEYS: latch, channel (scripts/latch/delete.lua). */
static void delete_op(const dlock_latch *l, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_LATCH_DELETE);
    dlock__op_key(op, l->name, l->nlen);
    dlock__op_key(op, l->channel, l->clen);
}

int dlock_latch_delete(dlock_latch *l, int *deleted)
{
    int rc = bad_handle(l);
    if (rc != DLOCK_OK)
        return rc;
    dlock__op op;
    delete_op(l, &op);
    int64_t was = 0;
    rc = run(l, &op, "delete", &was);
    if (rc == DLOCK_OK && deleted)
        *deleted = was == 1;
    return rc;
}

/* ------------------------------------------------------------- count */

static void count_op(const dlock_latch *l, dlock__op *op)
{
    dlock__op_init(op, -1);
    dlock__op_args(op, "GET");
    dlock__op_arg(op, l->name, l->nlen);
}

/* The count from a GET's status and answer (r freed). */
static int count_end(dlock_latch *l, int rc, redisReply *r, int64_t *count)
{
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, l->name);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__reply_signed(r, count);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(WHAT, l->name, "GET", r);
    freeReplyObject(r);
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: it holds a "
                                             "string that is not a count",
                           l->name, WHAT);
    if (*count < 0)
        *count = 0;   /* Redisson deletes the key at or below zero; a stray is zero too */
    return DLOCK_OK;
}

static int get_count(dlock_latch *l, dlock_cancel *cancel, int64_t *count)
{
    dlock__op op;
    count_op(l, &op);
    redisReply *r = NULL;
    int rc = dlock__op_call(l->c, &op, DLOCK__CALL_IDEMPOTENT, cancel, 0, &r);
    return count_end(l, rc, rc == DLOCK_OK ? r : NULL, count);
}

int dlock_latch_count(dlock_latch *l, int64_t *count)
{
    int rc = bad_handle(l);
    if (rc != DLOCK_OK)
        return rc;
    if (!count)
        return dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    return get_count(l, NULL, count);
}

/* ------------------------------------------------------------- await */

typedef struct awaiting {
    dlock_latch *l;
    dlock_cancel *cancel;
    int64_t count;           /* what the last check saw */
} awaiting;

/* An attempt's verdict from the count it read. */
static int await_verdict(awaiting *a, int rc, dlock__busy *b)
{
    if (rc != DLOCK_OK)
        return rc;
    if (a->count == 0)
        return DLOCK_OK;
    b->ttl = -1;   /* only a count-down (or a delete) ends it: sleep until the message */
    b->first = 0;
    return DLOCK__BUSY;
}

static int await_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    (void)waited_ms;
    awaiting *a = ud;
    dlock__attempts++;
    return await_verdict(a, get_count(a->l, a->cancel, &a->count), b);
}

static dlock__wait_spec await_spec(dlock_latch *l, int64_t wait_ms, dlock_cancel *cancel)
{
    return (dlock__wait_spec){.name = l->name, .channel = l->channel, .clen = l->clen,
                              .wake = wake_latch, .need = 1, .settles = 1, .awaits = 1,
                              .wait_ms = wait_ms, .cancel = cancel};
}

static int await_busy(void *ud, const dlock__busy *b)
{
    (void)b;
    awaiting *a = ud;
    return dlock__fail(DLOCK_ETIMEDOUT, "latch '%s' still counts %lld", a->l->name,
                       (long long)a->count);
}

int dlock_latch_await(dlock_latch *l, int64_t wait_ms, dlock_cancel *cancel)
{
    int rc = bad_handle(l);
    if (rc != DLOCK_OK)
        return rc;
    if (wait_ms < DLOCK_WAIT_FOREVER)
        return dlock__fail(DLOCK_EINVAL, "wait %lld ms: use 0 (check once), a positive wait or "
                                         "DLOCK_WAIT_FOREVER",
                           (long long)wait_ms);
    awaiting a = {l, cancel, 0};
    dlock__wait_spec spec = await_spec(l, wait_ms, cancel);
    dlock__wait_ops ops = {await_attempt, await_busy, NULL, &a};
    return dlock__wait(l->c, &spec, &ops);
}

/* ------------------------------------------------------------- async */

static void aawait_op(void *st, int64_t waited_ms, dlock__op *op, unsigned *flags)
{
    (void)waited_ms;
    count_op(((awaiting *)st)->l, op);
    *flags = DLOCK__CALL_IDEMPOTENT;
}

static int aawait_end(void *st, int rc, redisReply *r, int64_t sent_ms, dlock__busy *b)
{
    (void)sent_ms;
    awaiting *a = st;
    return await_verdict(a, count_end(a->l, rc, r, &a->count), b);
}

static const dlock__await_type await_type = {
    .attempt_op = aawait_op,
    .attempt_end = aawait_end,
    .busy_error = await_busy,
};

int dlock_latch_await_async(dlock_latch *l, int64_t wait_ms, dlock_cancel *cancel,
                            dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(l);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc == DLOCK_OK && wait_ms < DLOCK_WAIT_FOREVER)
        rc = dlock__fail(DLOCK_EINVAL, "wait %lld ms: use 0 (check once), a positive wait or "
                                       "DLOCK_WAIT_FOREVER",
                         (long long)wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    awaiting *a = dlock__async_wait_new(l->c, &await_type, sizeof(*a), fn, ud);
    if (!a)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    a->l = l;
    a->cancel = cancel;
    dlock__wait_spec spec = await_spec(l, wait_ms, cancel);
    return dlock__async_wait_start(a, &spec);
}

/* The latch's calls of one round trip, asynchronously. */
enum { LQ_COUNT_DOWN, LQ_TRY_SET, LQ_DELETE, LQ_COUNT };

typedef struct latch_req {
    dlock_latch *l;
    int kind;
    int64_t count;
} latch_req;

static const dlock__op *lq_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    const latch_req *q = st;
    (void)latch_ms;
    switch (q->kind) {
    case LQ_COUNT_DOWN:
        count_down_op(q->l, scratch);
        break;
    case LQ_TRY_SET:
        set_op(q->l, q->count, scratch);
        break;
    case LQ_DELETE:
        delete_op(q->l, scratch);
        break;
    default:
        count_op(q->l, scratch);
        *flags = DLOCK__CALL_IDEMPOTENT;
        break;
    }
    return scratch;
}

static int lq_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    const latch_req *q = st;
    int64_t v = 0;
    switch (q->kind) {
    case LQ_COUNT_DOWN:
        rc = int_end(q->l, "count down", rc, r, &v);
        res->count = v;
        break;
    case LQ_TRY_SET:
        rc = int_end(q->l, "try set count", rc, r, &v);
        res->flag = v == 1;
        break;
    case LQ_DELETE:
        rc = int_end(q->l, "delete", rc, r, &v);
        res->flag = v == 1;
        break;
    default:
        rc = count_end(q->l, rc, r, &v);
        res->count = v;
        break;
    }
    return rc;
}

static const dlock__call_type latch_call = {lq_op, lq_end, NULL};

static int latch_async(dlock_latch *l, int kind, int64_t count, dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(l);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc == DLOCK_OK && kind == LQ_TRY_SET)
        rc = dlock__check_count(count, 1, "latch count");
    if (rc != DLOCK_OK)
        return rc;
    latch_req *q = dlock__async_call_new(l->c, &latch_call, sizeof(*q), fn, ud);
    if (!q)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    *q = (latch_req){l, kind, count};
    return dlock__async_call_start(q);
}

int dlock_latch_count_down_async(dlock_latch *l, dlock_async_fn fn, void *ud)
{
    return latch_async(l, LQ_COUNT_DOWN, 0, fn, ud);
}

int dlock_latch_try_set_count_async(dlock_latch *l, int64_t count, dlock_async_fn fn, void *ud)
{
    return latch_async(l, LQ_TRY_SET, count, fn, ud);
}

int dlock_latch_delete_async(dlock_latch *l, dlock_async_fn fn, void *ud)
{
    return latch_async(l, LQ_DELETE, 0, fn, ud);
}

int dlock_latch_count_async(dlock_latch *l, dlock_async_fn fn, void *ud)
{
    return latch_async(l, LQ_COUNT, 0, fn, ud);
}
