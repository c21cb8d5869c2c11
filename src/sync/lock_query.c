/* What a lock handle can ask without changing anything (lock.h): is it
 * locked, held by this owner, how often, for how long (Redisson's isLocked,
 * isHeldByThread, getHoldCount, remainTimeToLive), the last fencing token
 * given (getToken), and what inspection needs of a handle. Each is an
 * operation that both drivers run. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* -------------------------------------------------------------- queries */

/* Reentrant and fair locks (a type without locked_op): held when the key is
 * a hash. */
static void hash_locked_op(const dlock_lock *l, dlock__op *op)
{
    dlock__op_cmd(op, "TYPE", l->h.name, l->h.nlen, NULL, 0);
}

static int hash_locked_end(dlock_lock *l, int rc, dlock__res *res, int *locked)
{
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    redisReply *r = res->r;
    rc = dlock__reply_type_locked(r, locked);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(&l->h, "TYPE", r);
    if (rc == DLOCK_EWRONGTYPE)
        rc = dlock__fail(DLOCK_EWRONGTYPE, "key '%s' holds a %s, not a %s", l->h.name, r->str,
                         l->h.what);
    freeReplyObject(r);
    return rc;
}

enum { Q_LOCKED, Q_HELD, Q_COUNT, Q_TTL };

typedef struct query {
    dlock_lock *l;
    int q;
    const char *by;          /* is held by: this owner id (checked), else the handle's */
    size_t blen;
    int owned;               /* o is set up */
    dlock__owner o;
    int64_t v;
} query;

static int query_setup(void *st)
{
    query *s = st;
    if (s->q != Q_HELD && s->q != Q_COUNT)
        return DLOCK_OK;
    /* An explicit owner's field needs no per-owner key: only the hash's. */
    dlock__owner *o = &s->o;
    int rc = dlock__lock_owner_by(s->l, s->by, s->blen, o);
    s->owned = rc == DLOCK_OK;
    return rc;
}

static void query_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    query *s = st;
    const dlock_lock *l = s->l;
    switch (s->q) {
    case Q_LOCKED:
        (l->type->locked_op ? l->type->locked_op : hash_locked_op)(l, op);
        break;
    case Q_HELD:
        dlock__op_cmd(op, "HEXISTS", l->h.name, l->h.nlen, s->o.field, s->o.flen);
        break;
    case Q_COUNT:
        dlock__op_cmd(op, "HGET", l->h.name, l->h.nlen, s->o.field, s->o.flen);
        break;
    default:
        dlock__op_cmd(op, "PTTL", l->h.name, l->h.nlen, NULL, 0);
        break;
    }
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int query_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    query *s = st;
    dlock_lock *l = s->l;
    if (s->q == Q_LOCKED) {
        int locked = 0;
        rc = (l->type->locked_end ? l->type->locked_end : hash_locked_end)(l, rc, res,
                                                                           &locked);
        s->v = locked;
        return rc;
    }
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    static const char *const what[] = {"", "HEXISTS", "HGET", "PTTL"};
    int flag = 0;
    int bad = s->q == Q_HELD    ? dlock__reply_flag(res->r, &flag)
              : s->q == Q_COUNT ? dlock__reply_count(res->r, &s->v)
                                : dlock__reply_integer(res->r, &s->v);
    if (bad != DLOCK_OK)
        return dlock__proto(&l->h, what[s->q], res->r);
    freeReplyObject(res->r);
    if (s->q == Q_HELD)
        s->v = flag;
    return DLOCK_OK;
}

static void query_result(void *st, dlock__result *res)
{
    query *s = st;
    if (s->q == Q_LOCKED || s->q == Q_HELD)
        res->flag = (int)s->v;
    else
        res->count = s->v;
}

static void query_done(void *st, int read)
{
    query *s = st;
    (void)read;
    if (s->owned)
        dlock__lock_owner_done(&s->o);
    s->owned = 0;
}

static const dlock__op_type query_type = {.setup = query_setup,
                                          .request = query_request,
                                          .read = query_read,
                                          .result = query_result,
                                          .done = query_done};

/* One query: blocking (*v, with l checked for NULL with it) or asynchronous
 * (via). Queries act for the handle's owner (is held, hold count), or for
 * `by` (checked). */
static int run_query(dlock_lock *l, int q, const char *by, const dlock__via *via, int64_t *v)
{
    if (!via && (!l || !v)) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    }
    query s = {.l = l, .q = q, .by = by};
    int rc = dlock__lock_check_call(l, via);
    if (rc == DLOCK_OK && by)
        rc = dlock__check_owner(by, &s.blen);
    if (rc != DLOCK_OK)
        return rc;
    dlock__result res;
    rc = dlock__start(&l->h, &query_type, &s, sizeof(s), NULL, via, &res);
    if (rc == DLOCK_OK && v)
        *v = q == Q_LOCKED || q == Q_HELD ? res.flag : res.count;
    return rc;
}

static int flag_query(dlock_lock *l, int q, const char *by, int *flag)
{
    int64_t v = 0;
    int rc = run_query(l, q, by, NULL, flag ? &v : NULL);
    if (rc == DLOCK_OK)
        *flag = (int)v;
    return rc;
}

int dlock_lock_is_locked(dlock_lock *l, int *locked) { return flag_query(l, Q_LOCKED, NULL, locked); }

int dlock_lock_is_held(dlock_lock *l, int *held) { return flag_query(l, Q_HELD, NULL, held); }

int dlock_lock_hold_count(dlock_lock *l, int64_t *count)
{
    return run_query(l, Q_COUNT, NULL, NULL, count);
}

int dlock_lock_ttl(dlock_lock *l, int64_t *ttl_ms) { return run_query(l, Q_TTL, NULL, NULL, ttl_ms); }

int dlock_lock_is_held_by(dlock_lock *l, const char *owner, int *held)
{
    if (l && held && !owner) {   /* an error here, not the handle's owner */
        size_t n;
        dlock__clear_error();
        return dlock__check_owner(NULL, &n);
    }
    return flag_query(l, Q_HELD, owner, held);
}

int dlock_lock_is_locked_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return run_query(l, Q_LOCKED, NULL, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_lock_is_held_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return run_query(l, Q_HELD, NULL, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_lock_hold_count_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return run_query(l, Q_COUNT, NULL, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_lock_ttl_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return run_query(l, Q_TTL, NULL, &(dlock__via){fn, ud, 0}, NULL);
}

/* ------------------------------------------------------------ inspection */

const char *dlock__lock_channel(const dlock_lock *l, size_t *len)
{
    *len = l->h.clen;
    return l->h.channel;
}

dlock_client *dlock__lock_client(const dlock_lock *l) { return l->h.c; }

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
