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

/* A script on the latch and its channel answering one integer. */
static int run(dlock_latch *l, dlock__op *op, const char *opname, int64_t *v)
{
    redisReply *r;
    int rc = dlock__op_run(l->c, op, 0, NULL, WHAT, l->name, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__reply_integer(r, v) != DLOCK_OK)
        return dlock__proto(WHAT, l->name, opname, r);
    freeReplyObject(r);
    return DLOCK_OK;
}

int dlock_latch_try_set_count(dlock_latch *l, int64_t count, int *was_set)
{
    int rc = bad_handle(l);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(count, 1, "latch count");
    if (rc != DLOCK_OK)
        return rc;
    /* KEYS: latch, channel; ARGV: count (scripts/latch/set.lua). Not resent
     * after a lost answer: a retry would answer 0 for its own count. */
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_LATCH_SET);
    dlock__op_key(&op, l->name, l->nlen);
    dlock__op_key(&op, l->channel, l->clen);
    dlock__op_argi(&op, count);
    int64_t set = 0;
    rc = run(l, &op, "try set count", &set);
    if (rc == DLOCK_OK && was_set)
        *was_set = set == 1;
    return rc;
}

int dlock_latch_count_down(dlock_latch *l)
{
    int rc = bad_handle(l);
    if (rc != DLOCK_OK)
        return rc;
    /* KEYS: latch, channel (scripts/latch/count_down.lua). */
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_LATCH_COUNT_DOWN);
    dlock__op_key(&op, l->name, l->nlen);
    dlock__op_key(&op, l->channel, l->clen);
    int64_t left = 0;
    return run(l, &op, "count down", &left);
}

int dlock_latch_delete(dlock_latch *l, int *deleted)
{
    int rc = bad_handle(l);
    if (rc != DLOCK_OK)
        return rc;
    /* KEYS: latch, channel (scripts/latch/delete.lua). */
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_LATCH_DELETE);
    dlock__op_key(&op, l->name, l->nlen);
    dlock__op_key(&op, l->channel, l->clen);
    int64_t was = 0;
    rc = run(l, &op, "delete", &was);
    if (rc == DLOCK_OK && deleted)
        *deleted = was == 1;
    return rc;
}

/* ------------------------------------------------------------- count */

static int get_count(dlock_latch *l, dlock_cancel *cancel, int64_t *count)
{
    dlock__op op;
    dlock__op_init(&op, -1);
    dlock__op_args(&op, "GET");
    dlock__op_arg(&op, l->name, l->nlen);
    redisReply *r;
    int rc = dlock__op_run(l->c, &op, DLOCK__CALL_IDEMPOTENT, cancel, WHAT, l->name, &r);
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

static int await_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    (void)waited_ms;
    awaiting *a = ud;
    dlock__attempts++;
    int rc = get_count(a->l, a->cancel, &a->count);
    if (rc != DLOCK_OK)
        return rc;
    if (a->count == 0)
        return DLOCK_OK;
    b->ttl = -1;   /* only a count-down (or a delete) ends it: sleep until the message */
    b->first = 0;
    return DLOCK__BUSY;
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
    dlock__wait_spec spec = {.name = l->name, .channel = l->channel, .clen = l->clen,
                             .wake = wake_latch, .need = 1, .settles = 1, .awaits = 1,
                             .wait_ms = wait_ms, .cancel = cancel};
    dlock__wait_ops ops = {await_attempt, await_busy, NULL, &a};
    return dlock__wait(l->c, &spec, &ops);
}
