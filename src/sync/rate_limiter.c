/* The rate limiter (Redisson's RRateLimiter): at most `rate` permits per
 * `interval` across every client, or per client (PER_CLIENT), in Redisson's
 * keys (scripts/rate/, include/rate_state.lua):
 *
 *   name                          hash: rate, interval, type, keepAliveTime
 *   {name}:value[:<client id>]    the permits left in the window
 *   {name}:permits[:<client id>]  the grants, scored by when they were made
 *
 * The client id of the PER_CLIENT keys is the dlock client's (Redisson's:
 * its instance's id). Grants are scored on the server's clock (TIME in the
 * scripts), where Redisson's are on each client's: see docs/c-types.md.
 *
 * An acquisition that finds too few permits learns when the window's oldest
 * grant frees its own and sleeps that long (a quiet wait: no channel, no
 * polling in between), then tries again. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "rate limiter";

enum { RK_CONFIG, RK_VALUE, RK_CVALUE, RK_PERMITS, RK_CPERMITS, RK_N };

struct dlock_rate_limiter {
    dlock__handle h;         /* no channel: nobody publishes */
    char *key[RK_N];         /* key[RK_CONFIG] is h.name */
    size_t klen[RK_N];
};

int dlock_rate_limiter_get(dlock_client *c, const char *name, dlock_rate_limiter **out)
{
    dlock__handle *h;
    int rc = dlock__handle_new(c, name, out, sizeof(dlock_rate_limiter), WHAT, NULL, 0, &h);
    if (out)
        *out = NULL;
    if (rc != DLOCK_OK)
        return rc;
    dlock_rate_limiter *r = (dlock_rate_limiter *)h;
    char tail[64];
    r->key[RK_CONFIG] = h->name;
    r->klen[RK_CONFIG] = h->nlen;
    r->key[RK_VALUE] = dlock__suffixed(h->name, h->nlen, "value", &r->klen[RK_VALUE]);
    snprintf(tail, sizeof(tail), "value:%s", dlock_client_id(c));
    r->key[RK_CVALUE] = dlock__suffixed(h->name, h->nlen, tail, &r->klen[RK_CVALUE]);
    r->key[RK_PERMITS] = dlock__suffixed(h->name, h->nlen, "permits", &r->klen[RK_PERMITS]);
    snprintf(tail, sizeof(tail), "permits:%s", dlock_client_id(c));
    r->key[RK_CPERMITS] = dlock__suffixed(h->name, h->nlen, tail, &r->klen[RK_CPERMITS]);
    for (int i = RK_VALUE; i < RK_N; i++)
        if (!r->key[i]) {
            dlock_rate_limiter_free(r);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
    *out = r;
    return DLOCK_OK;
}

void dlock_rate_limiter_free(dlock_rate_limiter *r)
{
    if (!r)
        return;
    for (int i = RK_VALUE; i < RK_N; i++)
        free(r->key[i]);
    dlock__handle_free(&r->h);
}

const char *dlock_rate_limiter_name(const dlock_rate_limiter *r) { return r ? r->h.name : ""; }

/* ---------------------------------------------------------------- calls */

enum { RQ_ACQUIRE, RQ_AVAILABLE, RQ_RELEASE, RQ_SET, RQ_EXPIRE, RQ_DELETE, RQ_CONFIG };

typedef struct rate_call {
    const dlock_rate_limiter *r;
    int kind;
    int64_t n;               /* permits; a TTL (RQ_EXPIRE) */
    const char *mode;        /* RQ_SET: "try", "set", "update" */
    int keep_state;
    dlock_rate_config cfg;   /* RQ_SET's; RQ_CONFIG's answer */
    char id[16];             /* RQ_ACQUIRE: the grant's id */
    uint64_t *at_out;        /* RQ_ACQUIRE: the grant's time (server ms), or NULL */
    int64_t v;               /* the answer: a count, a flag, the grant's time */
} rate_call;

static void rate_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    rate_call *q = st;
    const dlock_rate_limiter *r = q->r;
    if (q->kind == RQ_CONFIG) {
        dlock__op_cmd(op, "HGETALL", r->h.name, r->h.nlen, NULL, 0);
        op->flags = DLOCK__CALL_IDEMPOTENT;
        return;
    }
    static const int script[] = {
        [RQ_ACQUIRE] = DLOCK__SCRIPT_RATE_ACQUIRE, [RQ_AVAILABLE] = DLOCK__SCRIPT_RATE_AVAILABLE,
        [RQ_RELEASE] = DLOCK__SCRIPT_RATE_RELEASE, [RQ_SET] = DLOCK__SCRIPT_RATE_SET,
        [RQ_EXPIRE] = DLOCK__SCRIPT_RATE_EXPIRE,   [RQ_DELETE] = DLOCK__SCRIPT_RATE_DELETE};
    dlock__op_init(op, script[q->kind]);
    for (int i = 0; i < RK_N; i++)
        dlock__op_key(op, r->key[i], r->klen[i]);
    switch (q->kind) {
    case RQ_ACQUIRE:
        /* A fresh id per attempt: a grant is never taken for another's. Not
         * sent again after a lost answer (it may have been granted). */
        dlock__random(q->id, sizeof(q->id));
        dlock__op_argi(op, q->n);
        dlock__op_arg(op, q->id, sizeof(q->id));
        break;
    case RQ_AVAILABLE:
        op->flags = DLOCK__CALL_IDEMPOTENT;
        break;
    case RQ_RELEASE:
        dlock__op_argi(op, q->n);
        break;
    case RQ_SET:
        dlock__op_argi(op, q->cfg.rate);
        dlock__op_argi(op, q->cfg.interval_ms);
        dlock__op_args(op, q->cfg.type == DLOCK_RATE_PER_CLIENT ? "1" : "0");
        dlock__op_argi(op, q->cfg.keep_alive_ms);
        dlock__op_args(op, q->mode);
        dlock__op_args(op, q->keep_state ? "1" : "0");
        break;
    case RQ_EXPIRE:
        dlock__op_argi(op, q->n);
        op->flags = DLOCK__CALL_IDEMPOTENT;
        break;
    default:
        break;
    }
}

/* A count answered as an integer, or as the rate the configuration stores
 * (a bulk string: available on a fresh limiter, as Redisson's script). */
static int read_count(const redisReply *x, int64_t *v)
{
    if (dlock__reply_integer(x, v) == DLOCK_OK)
        return DLOCK_OK;
    if (x && x->type == REDIS_REPLY_STRING) {
        char *end;
        long long n = strtoll(x->str, &end, 10);
        if (end != x->str && *end == '\0') {
            *v = n;
            return DLOCK_OK;
        }
    }
    return DLOCK_EPROTO;
}

/* HGETALL's pairs into q->cfg; DLOCK_ENOTFOUND when no rate is set. */
static int read_config(rate_call *q, const redisReply *x)
{
    int64_t rate = -1, interval = -1, keep = 0, type = -1;
    for (size_t i = 0; i + 1 < x->elements; i += 2) {
        const redisReply *k = x->element[i], *v = x->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            return DLOCK_EPROTO;
        int64_t *to = !strcmp(k->str, "rate")            ? &rate
                      : !strcmp(k->str, "interval")      ? &interval
                      : !strcmp(k->str, "keepAliveTime") ? &keep
                      : !strcmp(k->str, "type")          ? &type
                                                         : NULL;
        if (!to)
            return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: its hash "
                                                 "has a field '%s'", q->r->h.name, WHAT, k->str);
        *to = strtoll(v->str, NULL, 10);
    }
    if (rate < 0 || interval < 0 || type < 0)
        return dlock__fail(DLOCK_ENOTFOUND, "%s '%s' has no rate set", WHAT, q->r->h.name);
    q->cfg = (dlock_rate_config){.type = type == 1 ? DLOCK_RATE_PER_CLIENT : DLOCK_RATE_OVERALL,
                                 .rate = rate, .interval_ms = interval, .keep_alive_ms = keep};
    return DLOCK_OK;
}

static int rate_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    rate_call *q = st;
    const dlock__handle *h = &q->r->h;
    static const char *const opname[] = {"acquire",    "available", "release", "set rate",
                                         "expire",     "delete",    "HGETALL"};
    if (rc != DLOCK_OK)
        return dlock__refused(h, rc, res);
    redisReply *x = res->r;
    if (q->kind == RQ_CONFIG) {
        if (x->type != REDIS_REPLY_ARRAY)
            return dlock__proto(h, opname[q->kind], x);
        rc = read_config(q, x);
        if (rc == DLOCK_EPROTO)
            return dlock__proto(h, opname[q->kind], x);
        freeReplyObject(x);
        return rc;
    }
    if (q->kind == RQ_ACQUIRE) {
        int64_t granted = 0, a = 0;
        if (x->type != REDIS_REPLY_ARRAY || x->elements < 2 ||
            dlock__reply_integer(x->element[0], &granted) != DLOCK_OK ||
            dlock__reply_integer(x->element[1], &a) != DLOCK_OK)
            return dlock__proto(h, opname[q->kind], x);
        freeReplyObject(x);
        if (!granted) {
            b->ttl = a;   /* the oldest grant frees its permits then */
            return DLOCK__BUSY;
        }
        q->v = a;
        if (q->at_out)
            *q->at_out = (uint64_t)a;
        return DLOCK_OK;
    }
    if (read_count(x, &q->v) != DLOCK_OK)
        return dlock__proto(h, opname[q->kind], x);
    freeReplyObject(x);
    return DLOCK_OK;
}

static void rate_result(void *st, dlock__result *res)
{
    const rate_call *q = st;
    switch (q->kind) {
    case RQ_SET:
    case RQ_EXPIRE:
    case RQ_DELETE:
        res->flag = q->v == 1;
        break;
    case RQ_AVAILABLE:
    case RQ_RELEASE:
        res->count = q->v;
        break;
    case RQ_ACQUIRE:
        res->token = (uint64_t)q->v;
        break;
    default:
        break;
    }
}

static int rate_busy(void *st, const dlock__busy *b)
{
    const rate_call *q = st;
    return dlock__fail(DLOCK_ETIMEDOUT,
                       "%s '%s': %lld permit%s not free within the wait (the next are freed "
                       "in %lld ms)",
                       WHAT, q->r->h.name, (long long)q->n, q->n == 1 ? "" : "s",
                       (long long)b->ttl);
}

static const dlock__op_type rate_type = {
    .request = rate_request, .read = rate_read, .result = rate_result, .busy_error = rate_busy};

/* ---------------------------------------------------------- the checks */

#define RATE_MAX 2147483647LL           /* Redisson's permits: a Java int in the grant */
#define INTERVAL_MAX (1LL << 40)        /* ms: 34 years */

static int check_config(const dlock_rate_config *cfg)
{
    if (!cfg)
        return dlock__fail(DLOCK_EINVAL, "rate config is NULL");
    if (cfg->type != DLOCK_RATE_OVERALL && cfg->type != DLOCK_RATE_PER_CLIENT)
        return dlock__fail(DLOCK_EINVAL, "rate type %d: DLOCK_RATE_OVERALL or "
                                         "DLOCK_RATE_PER_CLIENT", (int)cfg->type);
    if (cfg->rate < 1 || cfg->rate > RATE_MAX)
        return dlock__fail(DLOCK_EINVAL, "rate %lld out of range (1..%lld permits per interval)",
                           (long long)cfg->rate, RATE_MAX);
    if (cfg->interval_ms < 1 || cfg->interval_ms > INTERVAL_MAX)
        return dlock__fail(DLOCK_EINVAL, "interval_ms %lld out of range (1..%lld)",
                           (long long)cfg->interval_ms, INTERVAL_MAX);
    if (cfg->keep_alive_ms != 0 &&
        (cfg->keep_alive_ms < cfg->interval_ms || cfg->keep_alive_ms > INTERVAL_MAX))
        return dlock__fail(DLOCK_EINVAL, "keep_alive_ms %lld: 0 (none), or at least the "
                                         "interval (%lld ms)", (long long)cfg->keep_alive_ms,
                           (long long)cfg->interval_ms);
    return DLOCK_OK;
}

static int check_permits(int64_t n)
{
    if (n < 1 || n > RATE_MAX)
        return dlock__fail(DLOCK_EINVAL, "permits %lld out of range (1..%lld)", (long long)n,
                           RATE_MAX);
    return DLOCK_OK;
}

/* Runs q (no wait: spec NULL); the answer in *v. */
static int run(dlock_rate_limiter *r, rate_call *q, const dlock__via *via, int64_t *v)
{
    q->r = r;
    int rc = dlock__start(&r->h, &rate_type, q, sizeof(*q), NULL, via, NULL);
    if (rc == DLOCK_OK && v)
        *v = q->v;
    return rc;
}

static int set_rate(dlock_rate_limiter *r, const dlock_rate_config *cfg, const char *mode,
                    int keep_state, const dlock__via *via, int *flag)
{
    int rc = dlock__check_handle(r, WHAT);
    if (rc == DLOCK_OK)
        rc = check_config(cfg);
    if (rc != DLOCK_OK)
        return rc;
    rate_call q = {.kind = RQ_SET, .mode = mode, .keep_state = !!keep_state, .cfg = *cfg};
    int64_t v = 0;
    rc = run(r, &q, via, &v);
    if (rc == DLOCK_OK && flag)
        *flag = v == 1;
    return rc;
}

int dlock_rate_limiter_try_set_rate(dlock_rate_limiter *r, const dlock_rate_config *cfg,
                                    int *was_set)
{
    return set_rate(r, cfg, "try", 0, NULL, was_set);
}

int dlock_rate_limiter_set_rate(dlock_rate_limiter *r, const dlock_rate_config *cfg,
                                int keep_state)
{
    return set_rate(r, cfg, "set", keep_state, NULL, NULL);
}

int dlock_rate_limiter_update_rate(dlock_rate_limiter *r, const dlock_rate_config *cfg,
                                   int keep_state, int *updated)
{
    return set_rate(r, cfg, "update", keep_state, NULL, updated);
}

int dlock_rate_limiter_config(dlock_rate_limiter *r, dlock_rate_config *out)
{
    int rc = dlock__check_handle(r, WHAT);
    if (rc == DLOCK_OK && !out)
        rc = dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    if (rc != DLOCK_OK)
        return rc;
    rate_call q = {.kind = RQ_CONFIG};
    rc = run(r, &q, NULL, NULL);
    if (rc == DLOCK_OK)
        *out = q.cfg;
    return rc;
}

static int count_call(dlock_rate_limiter *r, int kind, int64_t n, const dlock__via *via,
                      int64_t *v)
{
    int rc = dlock__check_handle(r, WHAT);
    if (rc != DLOCK_OK)
        return rc;
    rate_call q = {.kind = kind, .n = n};
    return run(r, &q, via, v);
}

int dlock_rate_limiter_available(dlock_rate_limiter *r, int64_t *permits)
{
    if (r && !permits) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    }
    return count_call(r, RQ_AVAILABLE, 0, NULL, permits);
}

int dlock_rate_limiter_release(dlock_rate_limiter *r, int64_t permits)
{
    int rc = dlock__check_handle(r, WHAT);
    if (rc == DLOCK_OK && permits == 0)
        return DLOCK_OK;   /* Redisson's: nothing to give back, no round trip */
    if (rc == DLOCK_OK)
        rc = check_permits(permits);
    return rc == DLOCK_OK ? count_call(r, RQ_RELEASE, permits, NULL, NULL) : rc;
}

int dlock_rate_limiter_delete(dlock_rate_limiter *r, int *deleted)
{
    int64_t v = 0;
    int rc = count_call(r, RQ_DELETE, 0, NULL, &v);
    if (rc == DLOCK_OK && deleted)
        *deleted = v == 1;
    return rc;
}

int dlock_rate_limiter_expire(dlock_rate_limiter *r, int64_t ttl_ms, int *set)
{
    int rc = dlock__check_handle(r, WHAT);
    if (rc == DLOCK_OK && (ttl_ms < 0 || ttl_ms > INTERVAL_MAX))
        rc = dlock__fail(DLOCK_EINVAL, "ttl_ms %lld out of range (0: none, up to %lld)",
                         (long long)ttl_ms, INTERVAL_MAX);
    if (rc != DLOCK_OK)
        return rc;
    int64_t v = 0;
    rc = count_call(r, RQ_EXPIRE, ttl_ms, NULL, &v);
    if (rc == DLOCK_OK && set)
        *set = v == 1;
    return rc;
}

/* ---------------------------------------------------------- acquisition */

static int acquire(dlock_rate_limiter *r, int64_t permits, const dlock_wait_opts *opts,
                   const dlock__via *via)
{
    int rc = dlock__check_handle(r, WHAT);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = check_permits(permits);
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_TOKEN, "a rate limiter", &o);
    if (rc != DLOCK_OK)
        return rc;
    rate_call q = {.r = r, .kind = RQ_ACQUIRE, .n = permits, .at_out = o.token};
    /* Quiet: the busy answer says when permits are freed; nobody publishes. */
    dlock__wait_spec spec = {.wake = dlock__wake_all, .wait_ms = o.wait_ms, .cancel = o.cancel,
                             .quiet = 1};
    return dlock__start(&r->h, &rate_type, &q, sizeof(q), &spec, via, NULL);
}

int dlock_rate_limiter_try_acquire(dlock_rate_limiter *r, int64_t permits, int64_t wait_ms)
{
    return acquire(r, permits, &(dlock_wait_opts){.wait_ms = wait_ms}, NULL);
}

int dlock_rate_limiter_acquire(dlock_rate_limiter *r, int64_t permits)
{
    return acquire(r, permits, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER}, NULL);
}

int dlock_rate_limiter_acquire_opts(dlock_rate_limiter *r, int64_t permits,
                                    const dlock_wait_opts *o)
{
    return acquire(r, permits, o, NULL);
}

/* ---------------------------------------------------------- asynchronous */

int dlock_rate_limiter_acquire_async(dlock_rate_limiter *r, int64_t permits,
                                     const dlock_wait_opts *o, dlock_async_fn fn, void *ud)
{
    return acquire(r, permits, o, &(dlock__via){fn, ud, 0});
}

int dlock_rate_limiter_try_set_rate_async(dlock_rate_limiter *r, const dlock_rate_config *cfg,
                                          dlock_async_fn fn, void *ud)
{
    return set_rate(r, cfg, "try", 0, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_rate_limiter_set_rate_async(dlock_rate_limiter *r, const dlock_rate_config *cfg,
                                      int keep_state, dlock_async_fn fn, void *ud)
{
    return set_rate(r, cfg, "set", keep_state, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_rate_limiter_available_async(dlock_rate_limiter *r, dlock_async_fn fn, void *ud)
{
    return count_call(r, RQ_AVAILABLE, 0, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_rate_limiter_release_async(dlock_rate_limiter *r, int64_t permits, dlock_async_fn fn,
                                     void *ud)
{
    int rc = dlock__check_handle(r, WHAT);
    if (rc == DLOCK_OK)
        rc = check_permits(permits);
    return rc == DLOCK_OK ? count_call(r, RQ_RELEASE, permits, &(dlock__via){fn, ud, 0}, NULL)
                          : rc;
}
