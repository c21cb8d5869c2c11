/* The lock calls beyond acquire and release (lock.h): the fenced lock
 * (Redisson's RFencedLock, a reentrant lock whose every acquisition counts a
 * fencing token), the last token given (Redisson's getToken), and the
 * extension of a hold taken with a fixed lease (scripts/lock/extend.lua).
 * Each is an operation of its own, run by the blocking driver. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* ------------------------------------------------------------ fenced lock */

static int fenced_new(dlock_client *c, const char *name, const char *owner, dlock_lock **out)
{
    int rc = dlock__lock_new(c, &dlock__reentrant_type, name, owner, out);
    if (rc == DLOCK_OK)
        (*out)->fence_all = 1;
    return rc;
}

int dlock_fenced_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return fenced_new(c, name, NULL, out);
}

int dlock_fenced_lock_get_as(dlock_client *c, const char *name, const char *owner,
                             dlock_lock **out)
{
    if (!owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    return fenced_new(c, name, owner, out);
}

/* ----------------------------------------------------- non-reentrant lock */

/* A lock whose holder may not take it again (Redisson 4.4's non-reentrant
 * locks): the type's acquire script refuses it (DLOCK_EREENTRY) before
 * writing anything. Redis holds it as the lock it is built on. */
static int nonreentrant_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                            const char *owner, int explicit_owner, dlock_lock **out)
{
    if (explicit_owner && !owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    int rc = dlock__lock_new(c, type, name, owner, out);
    if (rc == DLOCK_OK)
        (*out)->no_reentry = 1;
    return rc;
}

int dlock_nonreentrant_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__reentrant_type, name, NULL, 0, out);
}

int dlock_nonreentrant_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                   dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__reentrant_type, name, owner, 1, out);
}

int dlock_nonreentrant_fair_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__fair_type, name, NULL, 0, out);
}

int dlock_nonreentrant_fair_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                        dlock_lock **out)
{
    return nonreentrant_new(c, &dlock__fair_type, name, owner, 1, out);
}

/* -------------------------------------------------------------- spin lock */

/* Redisson's ExponentialBackOff defaults. */
static const dlock_backoff default_backoff = {.initial_ms = 1, .max_ms = 128, .multiplier = 2};

/* A reentrant lock whose waits subscribe to nothing (Redisson's
 * RedissonSpinLock): the acquire operation's wait is quiet, with the
 * handle's back-off (lock.c: acquire). Redis holds it as the lock it is. */
static int spin_new(dlock_client *c, const char *name, const char *owner, int explicit_owner,
                    dlock_lock **out)
{
    if (explicit_owner && !owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    int rc = dlock__lock_new(c, &dlock__reentrant_type, name, owner, out);
    if (rc == DLOCK_OK) {
        (*out)->spin = 1;
        (*out)->backoff = default_backoff;
    }
    return rc;
}

int dlock_spin_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return spin_new(c, name, NULL, 0, out);
}

int dlock_spin_lock_get_as(dlock_client *c, const char *name, const char *owner,
                           dlock_lock **out)
{
    return spin_new(c, name, owner, 1, out);
}

int dlock_lock_set_backoff(dlock_lock *l, const dlock_backoff *b)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    if (!l->spin)
        return dlock__fail(DLOCK_EINVAL, "'%s' is not a spin lock: its waiters sleep on "
                                         "pub/sub, with no back-off", l->h.name);
    dlock_backoff v = b ? *b : default_backoff;
    const int64_t hour = 3600000;
    if (v.initial_ms < 1 || v.initial_ms > hour)
        return dlock__fail(DLOCK_EINVAL, "back-off initial_ms %lld out of range (1..%lld)",
                           (long long)v.initial_ms, (long long)hour);
    if (v.max_ms < v.initial_ms || v.max_ms > hour)
        return dlock__fail(DLOCK_EINVAL, "back-off max_ms %lld out of range (initial_ms..%lld)",
                           (long long)v.max_ms, (long long)hour);
    if (v.multiplier < 1 || v.multiplier > 1000)
        return dlock__fail(DLOCK_EINVAL, "back-off multiplier %d out of range (1..1000)",
                           v.multiplier);
    pthread_mutex_lock(&l->mu);
    l->backoff = v;
    pthread_mutex_unlock(&l->mu);
    return DLOCK_OK;
}

/* ------------------------------------------------------------- get token */

typedef struct token_q {
    dlock_lock *l;
    uint64_t token;
} token_q;

static void token_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    const dlock_lock *l = ((token_q *)st)->l;
    dlock__op_cmd(op, "GET", l->token_key, l->tlen, NULL, 0);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int token_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    token_q *s = st;
    dlock_lock *l = s->l;
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    redisReply *r = res->r;
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        s->token = 0;
        return DLOCK_OK;
    }
    char *end = NULL;
    unsigned long long v = 0;
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->str[0] >= '0' && r->str[0] <= '9')
        v = strtoull(r->str, &end, 10);
    if (!end || *end != '\0') {
        freeReplyObject(r);
        return dlock__fail(DLOCK_EWRONGTYPE, "fencing token key '%s' holds no number",
                           l->token_key);
    }
    freeReplyObject(r);
    s->token = v;
    return DLOCK_OK;
}

static void token_result(void *st, dlock__result *res) { res->token = ((token_q *)st)->token; }

static const dlock__op_type token_type = {
    .request = token_request, .read = token_read, .result = token_result};

static int get_token(dlock_lock *l, const dlock__via *via, uint64_t *token)
{
    int rc = dlock__check_handle(l, "lock");
    if (rc != DLOCK_OK)
        return rc;
    if (!via && !token)
        return dlock__fail(DLOCK_EINVAL, "token is NULL");
    token_q s = {.l = l};
    dlock__result res;
    rc = dlock__start(&l->h, &token_type, &s, sizeof(s), NULL, via, &res);
    if (rc == DLOCK_OK && !via)
        *token = res.token;
    return rc;
}

int dlock_lock_get_token(dlock_lock *l, uint64_t *token) { return get_token(l, NULL, token); }

int dlock_lock_get_token_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return get_token(l, &(dlock__via){fn, ud, 0}, NULL);
}

/* ---------------------------------------------------------------- extend */

typedef struct extend {
    dlock_lock *l;
    int64_t lease;
    int owned;
    dlock__owner o;
    int held;
} extend;

static int extend_setup(void *st)
{
    extend *s = st;
    dlock_lock *l = s->l;
    int rc = dlock__lock_owner(l, &s->o);
    if (rc != DLOCK_OK)
        return rc;
    s->owned = 1;
    /* A watchdog hold is renewed to the watchdog timeout every third of it:
     * a lease set here would be undone by the next renewal. */
    dlock__hold_id id;
    l->type->hold_id(l, &s->o, &id);
    if (dlock__watchdog_renews(l->h.c->wd, &id)) {
        /* a failed setup has no done: the owner goes here */
        dlock__lock_owner_done(&s->o);
        s->owned = 0;
        return dlock__fail(DLOCK_EINVAL,
                           "%s '%s' is held with the watchdog, which renews it: extend is for "
                           "a hold taken with a lease",
                           l->h.what, l->h.name);
    }
    dlock__holds_extend(&l->h.c->holds, l, &s->o, s->lease);
    return DLOCK_OK;
}

/* KEYS: lock; ARGV: owner's field, lease (scripts/lock/extend.lua). */
static void extend_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    extend *s = st;
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_EXTEND);
    dlock__op_key(op, s->l->h.name, s->l->h.nlen);
    dlock__op_arg(op, s->o.field, s->o.flen);
    dlock__op_argi(op, s->lease);
    op->flags = DLOCK__CALL_IDEMPOTENT;   /* the same TTL from the same owner */
}

static int extend_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    extend *s = st;
    dlock_lock *l = s->l;
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    int flag = 0;
    if (dlock__reply_flag(res->r, &flag) != DLOCK_OK)
        return dlock__proto(&l->h, "extend", res->r);
    freeReplyObject(res->r);
    if (!flag)
        return dlock__fail(DLOCK_ENOTOWNER, "%s '%s' is not held by the caller", l->h.what,
                           l->h.name);
    return DLOCK_OK;
}

static void extend_done(void *st, int read)
{
    extend *s = st;
    (void)read;
    if (s->owned)
        dlock__lock_owner_done(&s->o);
    s->owned = 0;
}

static const dlock__op_type extend_type = {
    .setup = extend_setup, .request = extend_request, .read = extend_read, .done = extend_done};

static int extend_lock(dlock_lock *l, int64_t lease_ms, const dlock__via *via)
{
    int rc = dlock__check_handle(l, "lock");
    if (rc != DLOCK_OK)
        return rc;
    if (via && !l->owner)
        return dlock__fail(DLOCK_EINVAL,
                           "asynchronous calls need a handle with an explicit owner id "
                           "(dlock_lock_get_as and the other *_get_as): '%s' acts for the "
                           "calling thread, and callbacks do not run on it",
                           l->h.name);
    if (l->type != &dlock__reentrant_type && l->type != &dlock__fair_type)
        return dlock__fail(DLOCK_EINVAL,
                           "extend works on reentrant, fair and fenced locks, not a %s",
                           l->h.what);
    if (lease_ms == DLOCK_WATCHDOG)
        return dlock__fail(DLOCK_EINVAL, "extend takes a lease in ms, not DLOCK_WATCHDOG");
    if ((rc = dlock__check_lease(lease_ms)) != DLOCK_OK)
        return rc;
    extend s = {.l = l, .lease = lease_ms};
    return dlock__start(&l->h, &extend_type, &s, sizeof(s), NULL, via, NULL);
}

int dlock_lock_extend(dlock_lock *l, int64_t lease_ms) { return extend_lock(l, lease_ms, NULL); }

int dlock_lock_extend_async(dlock_lock *l, int64_t lease_ms, dlock_async_fn fn, void *ud)
{
    return extend_lock(l, lease_ms, &(dlock__via){fn, ud, 0});
}
