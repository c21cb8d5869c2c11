/* The lock handle and every dlock_lock_* call, for every lock type
 * (lock.h): owner ids, the wait, the watchdog's bookkeeping, the unlock
 * latch and the queries are here, once. The reentrant lock's own part, the
 * type table `dlock__reentrant_type`, is in reentrant.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* ---------------------------------------------------------------- owners */

/* The owner a call acts for, with its field and the type's per-owner key. */
static int owner_init(const dlock_lock *l, dlock__owner *o)
{
    if (l->owner) {
        o->id = l->owner;
        o->len = l->olen;
    } else {
        /* Written where the field is made: the field is the id + suffix. */
        o->len = dlock__owner_of_thread(l->c, o->fbuf);
        o->id = o->fbuf;
    }
    size_t sl = strlen(l->type->suffix);
    if (sl == 0) {
        o->field = o->id;
        o->flen = o->len;
    } else {
        if (o->id != o->fbuf)
            memcpy(o->fbuf, o->id, o->len);
        memcpy(o->fbuf + o->len, l->type->suffix, sl + 1);
        o->field = o->fbuf;
        o->flen = o->len + sl;
    }
    o->aux = NULL;
    o->alen = 0;
    if (l->type->owner_key && l->type->owner_key(l, o) != DLOCK_OK)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

static void owner_done(dlock__owner *o)
{
    free(o->aux);
    o->aux = NULL;
}

/* ---------------------------------------------------------------- handle */

void dlock_lock_free(dlock_lock *l)
{
    if (!l)
        return;
    free(l->name);
    free(l->channel);
    free(l->token_key);
    free(l->latch_prefix);
    for (int i = 0; i < DLOCK__LOCK_KEYS; i++)
        free(l->key[i]);
    free(l->owner);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int dlock__lock_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                    const char *owner, dlock_lock **out)
{
    size_t nlen = 0, olen = 0;
    int rc = dlock__get_args(c, name, out, &nlen);
    if (out)
        *out = NULL;
    if (rc == DLOCK_OK && owner)
        rc = dlock__check_owner(owner, &olen);
    if (rc != DLOCK_OK)
        return rc;
    dlock_lock *l = calloc(1, sizeof(*l));
    if (!l)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    l->c = c;
    l->type = type;
    l->nlen = nlen;
    l->name = dlock__strndup(name, nlen);
    l->token_key = dlock__prefixed("redisson_lock_token", name, nlen, "", &l->tlen);
    l->latch_prefix = dlock__prefixed("redisson_unlock_latch", name, nlen, ":", &l->lplen);
    if (owner) {
        l->owner = dlock__strndup(owner, olen);
        l->olen = olen;
    }
    if (!l->name || !l->token_key || !l->latch_prefix || (owner && !l->owner) ||
        type->init(l) != DLOCK_OK || !l->channel) {
        dlock_lock_free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = l;
    return DLOCK_OK;
}

int dlock_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return dlock__lock_new(c, &dlock__reentrant_type, name, NULL, out);
}

/* The explicit-owner form of a getter: a NULL owner is an error here, not
 * "the calling thread". */
static int get_as(dlock_client *c, const dlock__lock_type *type, const char *name,
                  const char *owner, dlock_lock **out)
{
    if (!owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    return dlock__lock_new(c, type, name, owner, out);
}

int dlock_lock_get_as(dlock_client *c, const char *name, const char *owner, dlock_lock **out)
{
    return get_as(c, &dlock__reentrant_type, name, owner, out);
}

int dlock_fair_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return dlock__lock_new(c, &dlock__fair_type, name, NULL, out);
}

int dlock_fair_lock_get_as(dlock_client *c, const char *name, const char *owner,
                           dlock_lock **out)
{
    return get_as(c, &dlock__fair_type, name, owner, out);
}

const char *dlock_lock_name(const dlock_lock *l) { return l ? l->name : ""; }

void dlock_lock_set_lost_callback(dlock_lock *l, dlock_lost_fn fn, void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->fn = fn;
    l->ud = ud;
    pthread_mutex_unlock(&l->mu);
}

int dlock_lock_set_max_hold(dlock_lock *l, int64_t ms)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    int64_t v;
    int rc = dlock__check_max_hold(ms, 1, &v);
    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    l->max_hold = v;
    pthread_mutex_unlock(&l->mu);
    return DLOCK_OK;
}

/* The hold limit an acquisition through l gets now, ms (0: none). */
static int64_t hold_limit(dlock_lock *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t m = l->max_hold;
    pthread_mutex_unlock(&l->mu);
    if (m == 0)
        m = l->c->cfg.max_hold_ms;
    return m > 0 ? m : 0;
}

/* ------------------------------------------------------- shared helpers */

int dlock__lock_proto(const dlock_lock *l, const char *what, redisReply *r)
{
    return dlock__proto(l->type->what, l->name, what, r);
}

int dlock__lock_wrong_type(const dlock_lock *l) { return dlock__wrong_type(l->type->what, l->name); }

int dlock__lock_busy(const dlock_lock *l, int64_t ttl)
{
    if (ttl >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is held by another owner (expires in %lld ms)",
                           l->name, (long long)ttl);
    return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is held by another owner (no expiry)", l->name);
}

void dlock__lock_best_effort(dlock_lock *l, const dlock__op *op, unsigned flags, int code)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    redisReply *r = NULL;
    if (dlock__op_call(l->c, op, flags | DLOCK__CALL_NO_RETRY, NULL, 0, &r) == DLOCK_OK)
        freeReplyObject(r);
    dlock__fail(code, "%s", msg);
}

int dlock__lock_call(dlock_lock *l, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                     redisReply **r)
{
    int rc = dlock__op_call(l->c, op, flags, cancel, 0, r);
    return rc == DLOCK_EWRONGTYPE ? dlock__lock_wrong_type(l) : rc;
}

/* ------------------------------------------------------------- acquire */

static int check_times(int64_t wait_ms, int64_t lease_ms)
{
    if (lease_ms != DLOCK_WATCHDOG && lease_ms <= 0)
        return dlock__fail(DLOCK_EINVAL,
                           "lease %lld ms: use a positive lease or DLOCK_WATCHDOG",
                           (long long)lease_ms);
    if (lease_ms > (int64_t)1 << 50)
        return dlock__fail(DLOCK_EINVAL, "lease %lld ms is too long", (long long)lease_ms);
    if (wait_ms < DLOCK_WAIT_FOREVER)
        return dlock__fail(DLOCK_EINVAL,
                           "wait %lld ms: use 0 (try once), a positive wait or DLOCK_WAIT_FOREVER",
                           (long long)wait_ms);
    return DLOCK_OK;
}

int dlock__acq_hold(dlock__acq *a)
{
    dlock_lock *l = a->l;
    dlock__hold_id id;
    l->type->hold_id(l, &a->o, &id);
    if (a->lease != DLOCK_WATCHDOG) {
        dlock__watchdog_lease_reentry(l->c->wd, &id, a->sent,
                                      l->type->lease_keeps_ttl ? -1 : a->lease);
        return DLOCK_OK;
    }
    pthread_mutex_lock(&l->mu);
    dlock_lost_fn fn = l->fn;
    void *ud = l->ud;
    pthread_mutex_unlock(&l->mu);
    return dlock__watchdog_add_limited(l->c->wd, &id, a->sent, a->max_hold, fn, ud);
}

int dlock__acq_acquired(dlock__acq *a)
{
    dlock_lock *l = a->l;
    int rc = dlock__acq_hold(a);
    if (rc != DLOCK_OK) {
        /* Held but not renewable: give it back rather than let it lapse unseen. */
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        dlock_lock_release(l);
        return dlock__fail(rc, "%s", msg);
    }
    return DLOCK_OK;
}

void dlock__acq_prepare(dlock__acq *a)
{
    dlock_lock *l = a->l;
    dlock__hold_id id;
    l->type->hold_id(l, &a->o, &id);
    int64_t left = dlock__watchdog_limit_left(l->c->wd, &id);
    if (left < a->lease_ms)
        a->lease_ms = left > 1 ? left : 1;
}

static int give_back_hold(void *ud)
{
    return dlock_lock_release(ud);   /* this hold only: a reentry keeps the earlier ones */
}

int dlock__acq_attempt(dlock__acq *a, int64_t waited_ms, dlock__busy *b)
{
    dlock__op op;
    dlock__acq_prepare(a);
    a->l->type->attempt_op(a, waited_ms, &op);
    /* Taken before sending, so the watchdog's deadline is never later than Redis's. */
    a->sent = dlock__now_ms();
    dlock__attempts++;
    dlock__res res;
    dlock__acks_reset();
    int rc = dlock__op_call_res(a->l->c, &op, DLOCK__CALL_WAIT_ACK, a->cancel, 0, &res);
    if (rc == DLOCK_EWRONGTYPE)
        rc = dlock__lock_wrong_type(a->l);
    if (rc == DLOCK_OK)
        rc = a->l->type->attempt_reply(a, res.r, b);
    if (rc != DLOCK_OK)
        return rc;
    dlock__acks_record(res.acks);
    rc = dlock__acq_acquired(a);
    return rc == DLOCK_OK ? dlock__acks_check(a->l->c, a->l->type->what, a->l->name,
                                              give_back_hold, a->l)
                          : rc;
}

static int acq_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    return dlock__acq_attempt(ud, waited_ms, b);
}

static int acq_busy_error(void *ud, const dlock__busy *b)
{
    dlock__acq *a = ud;
    return a->l->type->busy_error(a, b);
}

void dlock__acq_give_up(dlock__acq *a, int rc)
{
    dlock__op op;
    unsigned flags = 0;
    if (a->l->type->give_up_op && a->l->type->give_up_op(a, rc, &op, &flags))
        dlock__lock_best_effort(a->l, &op, flags, rc);
}

static void acq_give_up(void *ud, int rc) { dlock__acq_give_up(ud, rc); }

int dlock__acq_init(dlock__acq *a, dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                    dlock_cancel *cancel, int fenced)
{
    memset(a, 0, sizeof(*a));
    int rc = check_times(wait_ms, lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    a->l = l;
    a->wait = wait_ms;
    a->lease = lease_ms;
    a->lease_ms = lease_ms == DLOCK_WATCHDOG ? l->c->cfg.watchdog_ms : lease_ms;
    if (lease_ms == DLOCK_WATCHDOG) {
        /* A limit shorter than the timeout: the first TTL already ends with it. */
        a->max_hold = hold_limit(l);
        if (a->max_hold > 0 && a->max_hold < a->lease_ms)
            a->lease_ms = a->max_hold;
    }
    a->fenced = fenced;
    a->cancel = cancel;
    return owner_init(l, &a->o);
}

void dlock__acq_done(dlock__acq *a) { owner_done(&a->o); }

static int acquire(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, dlock_cancel *cancel,
                   uint64_t *token)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    dlock__acq a;
    int rc = dlock__acq_init(&a, l, wait_ms, lease_ms, cancel, token != NULL);
    if (rc != DLOCK_OK)
        return rc;
    dlock__wait_spec spec = {.name = l->name, .wait_ms = wait_ms, .cancel = cancel};
    spec.channel = l->type->wait_channel(l, &a.o, &spec.clen);
    dlock__wait_ops ops = {acq_attempt, acq_busy_error, acq_give_up, &a};
    rc = dlock__wait(l->c, &spec, &ops);
    dlock__acq_done(&a);
    if (rc == DLOCK_OK && token)
        *token = a.token;
    return rc;
}

int dlock_lock_acquire(dlock_lock *l, int64_t lease_ms)
{
    return acquire(l, DLOCK_WAIT_FOREVER, lease_ms, NULL, NULL);
}

int dlock_lock_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return acquire(l, wait_ms, lease_ms, NULL, NULL);
}

int dlock_lock_acquire_cancellable(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                                   dlock_cancel *cancel)
{
    return acquire(l, wait_ms, lease_ms, cancel, NULL);
}

int dlock_lock_acquire_fenced(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                              dlock_cancel *cancel, uint64_t *token)
{
    if (!token) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "token is NULL");
    }
    return acquire(l, wait_ms, lease_ms, cancel, token);
}

/* ------------------------------------------------------------- release */

int dlock__rel_init(dlock__rel *x, dlock_lock *l)
{
    x->l = l;
    x->latch = NULL;
    int rc = owner_init(l, &x->o);
    if (rc != DLOCK_OK)
        return rc;
    /* latch key = prefix + fresh request id, kept for every retry of this call */
    x->latch_len = l->lplen + 32;
    x->latch = x->latch_len < sizeof(x->lbuf) ? x->lbuf : malloc(x->latch_len + 1);
    if (!x->latch) {
        owner_done(&x->o);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    memcpy(x->latch, l->latch_prefix, l->lplen);
    dlock__random_hex32(x->latch + l->lplen);
    l->type->hold_id(l, &x->o, &x->id);
    int renewed = dlock__watchdog_release_begin(l->c->wd, &x->id);
    l->type->release_op(l, &x->o, x->latch, x->latch_len, renewed ? l->c->cfg.watchdog_ms : 0,
                        &x->op);
    /* A lock whose last release woke someone is likely contended again. */
    x->flags = DLOCK__CALL_IDEMPOTENT;
    if (atomic_load_explicit(&l->heard, memory_order_relaxed))
        x->flags |= DLOCK__CALL_PING_FIRST;
    return DLOCK_OK;
}

/* What a release's answer means; *outcome for the watchdog. */
static int rel_answer(dlock__rel *x, int rc, redisReply *r, int *outcome)
{
    dlock_lock *l = x->l;
    *outcome = DLOCK__RELEASE_KEPT;
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__lock_wrong_type(l);
    if (rc != DLOCK_OK)
        return rc;
    int heard = 0;
    if (dlock__reply_release(r, outcome, &heard) != DLOCK_OK) {
        *outcome = DLOCK__RELEASE_KEPT;
        return dlock__lock_proto(l, "release", r);
    }
    freeReplyObject(r);
    if (*outcome == DLOCK__RELEASE_GONE)
        atomic_store_explicit(&l->heard, heard, memory_order_relaxed);
    if (*outcome == DLOCK__RELEASE_NOT_HELD)
        return l->type->not_held ? l->type->not_held(l, &x->o)
                                 : dlock__fail(DLOCK_ENOTOWNER, "%s '%s' is not held by %s",
                                               l->type->what, l->name, x->o.id);
    return DLOCK_OK;
}

int dlock__rel_end(dlock__rel *x, int rc, redisReply *r)
{
    int outcome;
    rc = rel_answer(x, rc, r, &outcome);
    /* Whatever the answer, even an error, this release attempt counts. */
    dlock__watchdog_release_end(x->l->c->wd, &x->id, outcome);
    if (x->latch != x->lbuf)
        free(x->latch);
    owner_done(&x->o);
    return rc;
}

int dlock_lock_release(dlock_lock *l)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    dlock__rel x;
    int rc = dlock__rel_init(&x, l);
    if (rc != DLOCK_OK)
        return rc;
    redisReply *r = NULL;
    rc = dlock__op_call(l->c, &x.op, x.flags, NULL, l->c->latch_px, &r);
    return dlock__rel_end(&x, rc, r);
}

int dlock_lock_force_release(dlock_lock *l, int *was_locked)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    dlock__op op;
    l->type->force_op(l, &op);
    redisReply *r;
    /* Not resent after a lost reply: its PUBLISH may already have handed the
     * lock to a waiter, whose hold a second DEL would destroy. */
    int rc = dlock__op_call(l->c, &op, 0, NULL, 0, &r);
    return dlock__lock_force_end(l, rc, rc == DLOCK_OK ? r : NULL, was_locked);
}

int dlock__lock_force_end(dlock_lock *l, int rc, redisReply *r, int *was_locked)
{
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__lock_wrong_type(l);
    if (rc != DLOCK_OK)
        return rc;
    int was = 0;
    if (dlock__reply_flag(r, &was) != DLOCK_OK)
        return dlock__lock_proto(l, "force release", r);
    freeReplyObject(r);
    /* The caller's own renewal stops (as Redisson's forceUnlock does); other
     * holds of this process that the force destroyed are reported lost by
     * their next renewal, while a hold taken since is kept. */
    dlock__owner o;
    if (owner_init(l, &o) == DLOCK_OK) {
        dlock__hold_id id;
        l->type->hold_id(l, &o, &id);
        dlock__watchdog_release_end(l->c->wd, &id, DLOCK__RELEASE_GONE);
        owner_done(&o);
    }
    if (was_locked)
        *was_locked = was;
    return DLOCK_OK;
}

/* -------------------------------------------------------------- queries */

int dlock__lock_owner(const dlock_lock *l, dlock__owner *o) { return owner_init(l, o); }

void dlock__lock_owner_done(dlock__owner *o) { owner_done(o); }

static void query_cmd(const dlock_lock *l, const char *cmd, const char *field, size_t flen,
                      dlock__op *op)
{
    dlock__op_init(op, -1);
    dlock__op_args(op, cmd);
    dlock__op_arg(op, l->name, l->nlen);
    if (field)
        dlock__op_arg(op, field, flen);
}

/* Reentrant and fair locks: held when the key is a hash. */
void dlock__lock_hash_op(const dlock_lock *l, dlock__op *op)
{
    query_cmd(l, "TYPE", NULL, 0, op);
}

int dlock__lock_hash_end(dlock_lock *l, int rc, redisReply *r, int *locked)
{
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__lock_wrong_type(l);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__reply_type_locked(r, locked);
    if (rc == DLOCK_EPROTO)
        return dlock__lock_proto(l, "TYPE", r);
    if (rc == DLOCK_EWRONGTYPE)
        rc = dlock__fail(DLOCK_EWRONGTYPE, "key '%s' holds a %s, not a %s", l->name, r->str,
                         l->type->what);
    freeReplyObject(r);
    return rc;
}

void dlock__lock_query_op(const dlock_lock *l, const dlock__owner *o, int q, dlock__op *op)
{
    switch (q) {
    case DLOCK__Q_LOCKED:
        l->type->locked_op(l, op);
        break;
    case DLOCK__Q_HELD:
        query_cmd(l, "HEXISTS", o->field, o->flen, op);
        break;
    case DLOCK__Q_COUNT:
        query_cmd(l, "HGET", o->field, o->flen, op);
        break;
    default:
        query_cmd(l, "PTTL", NULL, 0, op);
        break;
    }
}

int dlock__lock_query_end(dlock_lock *l, int q, int rc, redisReply *r, int64_t *v)
{
    if (q == DLOCK__Q_LOCKED) {
        int locked = 0;
        rc = l->type->locked_end(l, rc, r, &locked);
        *v = locked;
        return rc;
    }
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__lock_wrong_type(l);
    if (rc != DLOCK_OK)
        return rc;
    static const char *const what[] = {"", "HEXISTS", "HGET", "PTTL"};
    int flag = 0;
    int bad = q == DLOCK__Q_HELD    ? dlock__reply_flag(r, &flag)
              : q == DLOCK__Q_COUNT ? dlock__reply_count(r, v)
                                    : dlock__reply_integer(r, v);
    if (bad != DLOCK_OK)
        return dlock__lock_proto(l, what[q], r);
    freeReplyObject(r);
    if (q == DLOCK__Q_HELD)
        *v = flag;
    return DLOCK_OK;
}

/* One query, blocking. */
static int query(dlock_lock *l, int q, int64_t *v)
{
    dlock__owner o;
    int rc = DLOCK_OK;
    int owned = q == DLOCK__Q_HELD || q == DLOCK__Q_COUNT;
    if (owned && (rc = owner_init(l, &o)) != DLOCK_OK)
        return rc;
    dlock__op op;
    dlock__lock_query_op(l, owned ? &o : NULL, q, &op);
    redisReply *r = NULL;
    rc = dlock__op_call(l->c, &op, DLOCK__CALL_IDEMPOTENT, NULL, 0, &r);
    rc = dlock__lock_query_end(l, q, rc, rc == DLOCK_OK ? r : NULL, v);
    if (owned)
        owner_done(&o);
    return rc;
}

int dlock_lock_is_locked(dlock_lock *l, int *locked)
{
    dlock__clear_error();
    if (!l || !locked)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    int64_t v = 0;
    int rc = query(l, DLOCK__Q_LOCKED, &v);
    if (rc == DLOCK_OK)
        *locked = (int)v;
    return rc;
}

int dlock_lock_is_held(dlock_lock *l, int *held)
{
    dlock__clear_error();
    if (!l || !held)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    int64_t v = 0;
    int rc = query(l, DLOCK__Q_HELD, &v);
    if (rc == DLOCK_OK)
        *held = (int)v;
    return rc;
}

int dlock_lock_hold_count(dlock_lock *l, int64_t *count)
{
    dlock__clear_error();
    if (!l || !count)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    return query(l, DLOCK__Q_COUNT, count);
}

int dlock_lock_ttl(dlock_lock *l, int64_t *ttl_ms)
{
    dlock__clear_error();
    if (!l || !ttl_ms)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    return query(l, DLOCK__Q_TTL, ttl_ms);
}

int dlock_lock_is_held_by(dlock_lock *l, const char *owner, int *held)
{
    dlock__clear_error();
    if (!l || !held)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    size_t olen = 0;
    int rc = dlock__check_owner(owner, &olen);
    if (rc != DLOCK_OK)
        return rc;
    char field[DLOCK_OWNER_MAX + 16];
    size_t sl = strlen(l->type->suffix);
    memcpy(field, owner, olen);
    memcpy(field + olen, l->type->suffix, sl);
    dlock__op op;
    query_cmd(l, "HEXISTS", field, olen + sl, &op);
    redisReply *r = NULL;
    rc = dlock__op_call(l->c, &op, DLOCK__CALL_IDEMPOTENT, NULL, 0, &r);
    int64_t v = 0;
    rc = dlock__lock_query_end(l, DLOCK__Q_HELD, rc, rc == DLOCK_OK ? r : NULL, &v);
    if (rc == DLOCK_OK)
        *held = (int)v;
    return rc;
}

/* ----------------------------------------------------------------- run */

int dlock_lock_run(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, dlock_run_fn fn, void *ud,
                   int *fn_result)
{
    if (!fn) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "fn is NULL");
    }
    int rc = acquire(l, wait_ms, lease_ms, NULL, NULL);
    if (rc != DLOCK_OK)
        return rc;
    int res = fn(ud);
    if (fn_result)
        *fn_result = res;
    return dlock_lock_release(l);
}

const char *dlock__lock_channel(const dlock_lock *l, size_t *len)
{
    *len = l->clen;
    return l->channel;
}

dlock_client *dlock__lock_client(const dlock_lock *l) { return l->c; }
