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
    dlock__handle h;         /* channel: redisson_countdownlatch__channel__{name} */
};

/* Every message wakes every awaiter of this process; "0" (the count reached
 * zero) also ends the waits of those waiting when it was published, without
 * another GET (DLOCK__WAKE_ALL_DONE). A "1" (a new count, a delete) only
 * wakes: each checks the count. */
static int wake_latch(const char *msg, size_t len)
{
    return len == 1 && msg[0] == '0' ? DLOCK__WAKE_ALL_DONE : DLOCK__WAKE_ALL;
}

int dlock_latch_get(dlock_client *c, const char *name, dlock_latch **out)
{
    /* Redisson wraps the name in braces whatever it holds (unlike its other
     * objects' channels). */
    dlock__handle *h;
    int rc = dlock__handle_new(c, name, out, sizeof(dlock_latch), WHAT,
                               "redisson_countdownlatch__channel__", 1, &h);
    if (out)
        *out = (dlock_latch *)h;
    return rc;
}

void dlock_latch_free(dlock_latch *l) { dlock__handle_free((dlock__handle *)l); }

const char *dlock_latch_name(const dlock_latch *l) { return l ? l->h.name : ""; }

/* ---------------------------------------------------------------- calls */

/* The latch's calls of one round trip, and the await's attempt (a count). */
enum { LQ_COUNT_DOWN, LQ_TRY_SET, LQ_DELETE, LQ_COUNT };

typedef struct latch_call {
    const dlock_latch *l;
    int kind;
    int64_t v;               /* the count to set; then the answer */
} latch_call;

static void latch_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    const latch_call *q = st;
    const dlock__handle *h = &q->l->h;
    static const int script[] = {DLOCK__SCRIPT_LATCH_COUNT_DOWN, DLOCK__SCRIPT_LATCH_SET,
                                 DLOCK__SCRIPT_LATCH_DELETE};
    if (q->kind == LQ_COUNT) {
        dlock__op_cmd(op, "GET", h->name, h->nlen, NULL, 0);
        op->flags = DLOCK__CALL_IDEMPOTENT;
        return;
    }
    /* KEYS: latch, channel; ARGV: the count to set (scripts/latch/set.lua,
     * count_down.lua, delete.lua). Not resent after a lost answer: a retried
     * set would answer 0 for its own count. */
    dlock__op_init(op, script[q->kind]);
    dlock__op_key(op, h->name, h->nlen);
    dlock__op_key(op, h->channel, h->clen);
    if (q->kind == LQ_TRY_SET)
        dlock__op_argi(op, q->v);
}

static int latch_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    latch_call *q = st;
    const dlock__handle *h = &q->l->h;
    static const char *const opname[] = {"count down", "try set count", "delete", "GET"};
    if (rc != DLOCK_OK)
        return dlock__refused(h, rc, res);
    redisReply *r = res->r;
    if (q->kind != LQ_COUNT) {
        if (dlock__reply_integer(r, &q->v) != DLOCK_OK)
            return dlock__proto(h, opname[q->kind], r);
        freeReplyObject(r);
        return DLOCK_OK;
    }
    rc = dlock__reply_signed(r, &q->v);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(h, "GET", r);
    freeReplyObject(r);
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: it holds a "
                                             "string that is not a count",
                           h->name, WHAT);
    if (q->v < 0)
        q->v = 0;   /* Redisson deletes the key at or below zero; a stray is zero too */
    return DLOCK_OK;
}

static void latch_result(void *st, dlock__result *res)
{
    const latch_call *q = st;
    if (q->kind == LQ_TRY_SET || q->kind == LQ_DELETE)
        res->flag = q->v == 1;
    else
        res->count = q->v;
}

static const dlock__op_type latch_type = {
    .request = latch_request, .read = latch_read, .result = latch_result};

static int latch_run(dlock_latch *l, int kind, int64_t count, const dlock__via *via, int64_t *v)
{
    int rc = dlock__check_handle(l, "latch");
    if (rc == DLOCK_OK && kind == LQ_TRY_SET)
        rc = dlock__check_count(count, 1, "latch count");
    if (rc != DLOCK_OK)
        return rc;
    latch_call q = {l, kind, count};
    rc = dlock__start(&l->h, &latch_type, &q, sizeof(q), NULL, via, NULL);
    if (rc == DLOCK_OK && v)
        *v = q.v;
    return rc;
}

int dlock_latch_try_set_count(dlock_latch *l, int64_t count, int *was_set)
{
    int64_t v = 0;
    int rc = latch_run(l, LQ_TRY_SET, count, NULL, &v);
    if (rc == DLOCK_OK && was_set)
        *was_set = v == 1;
    return rc;
}

int dlock_latch_count_down(dlock_latch *l) { return latch_run(l, LQ_COUNT_DOWN, 0, NULL, NULL); }

int dlock_latch_delete(dlock_latch *l, int *deleted)
{
    int64_t v = 0;
    int rc = latch_run(l, LQ_DELETE, 0, NULL, &v);
    if (rc == DLOCK_OK && deleted)
        *deleted = v == 1;
    return rc;
}

int dlock_latch_count(dlock_latch *l, int64_t *count)
{
    if (l && !count) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    }
    return latch_run(l, LQ_COUNT, 0, NULL, count);
}

int dlock_latch_count_down_async(dlock_latch *l, dlock_async_fn fn, void *ud)
{
    return latch_run(l, LQ_COUNT_DOWN, 0, &(dlock__via){fn, ud}, NULL);
}

int dlock_latch_try_set_count_async(dlock_latch *l, int64_t count, dlock_async_fn fn, void *ud)
{
    return latch_run(l, LQ_TRY_SET, count, &(dlock__via){fn, ud}, NULL);
}

int dlock_latch_delete_async(dlock_latch *l, dlock_async_fn fn, void *ud)
{
    return latch_run(l, LQ_DELETE, 0, &(dlock__via){fn, ud}, NULL);
}

int dlock_latch_count_async(dlock_latch *l, dlock_async_fn fn, void *ud)
{
    return latch_run(l, LQ_COUNT, 0, &(dlock__via){fn, ud}, NULL);
}

/* ---------------------------------------------------------------- await */

/* An attempt is a count read; busy while it is above zero. */
static int await_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    latch_call *q = st;
    rc = latch_read(st, rc, res, b);
    if (rc != DLOCK_OK || q->v == 0)
        return rc;
    b->ttl = -1;   /* only a count-down (or a delete) ends it: sleep until the message */
    b->first = 0;
    return DLOCK__BUSY;
}

static int await_busy(void *st, const dlock__busy *b)
{
    (void)b;
    const latch_call *q = st;
    return dlock__fail(DLOCK_ETIMEDOUT, "latch '%s' still counts %lld", q->l->h.name,
                       (long long)q->v);
}

static const dlock__op_type await_type = {
    .request = latch_request, .read = await_read, .busy_error = await_busy};

static int await(dlock_latch *l, const dlock_wait_opts *opts, const dlock__via *via)
{
    int rc = dlock__check_handle(l, "latch");
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, 0, "a latch", &o);
    if (rc != DLOCK_OK)
        return rc;
    latch_call q = {l, LQ_COUNT, 0};
    dlock__wait_spec spec = {.wake = wake_latch, .need = 1, .settles = 1, .awaits = 1,
                             .wait_ms = o.wait_ms, .cancel = o.cancel};
    return dlock__start(&l->h, &await_type, &q, sizeof(q), &spec, via, NULL);
}

int dlock_latch_await_opts(dlock_latch *l, const dlock_wait_opts *o)
{
    return await(l, o, NULL);
}

int dlock_latch_await(dlock_latch *l, int64_t wait_ms)
{
    return await(l, &(dlock_wait_opts){.wait_ms = wait_ms}, NULL);
}

int dlock_latch_await_async(dlock_latch *l, const dlock_wait_opts *o, dlock_async_fn fn,
                            void *ud)
{
    return await(l, o, &(dlock__via){fn, ud});
}
