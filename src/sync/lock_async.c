/* The lock family's asynchronous calls (include/dlock/async.h): the type
 * table's halves (lock.h) as the asynchronous engine's types (async.c). The
 * acquisition, the release and the force release are the blocking calls'
 * own (dlock__acq_*, dlock__rel_*, dlock__lock_force_end), so both paths
 * keep the same owner ids, watchdog bookkeeping and verdicts. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* ------------------------------------------------------------- acquire */

typedef struct lock_acq {
    dlock__acq a;
    char *latch;             /* a give-back's unlock latch */
} lock_acq;

static void acq_op(void *st, int64_t waited_ms, dlock__op *op, unsigned *flags)
{
    dlock__acq *a = &((lock_acq *)st)->a;
    (void)flags;
    a->l->type->attempt_op(a, waited_ms, op);
}

static int acq_end(void *st, int rc, redisReply *r, int64_t sent_ms, dlock__busy *b)
{
    dlock__acq *a = &((lock_acq *)st)->a;
    a->sent = sent_ms;
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__lock_wrong_type(a->l);
    if (rc != DLOCK_OK)
        return rc;
    return a->l->type->attempt_reply(a, r, b);
}

static int acq_keep(void *st) { return dlock__acq_hold(&((lock_acq *)st)->a); }

/* The hold the watchdog could not take goes back at once (a release under
 * a fresh latch), as the blocking call's does. */
static int acq_give_back(void *st, dlock__op *op, unsigned *flags)
{
    lock_acq *s = st;
    dlock_lock *l = s->a.l;
    size_t len = l->lplen + 32;
    if (!(s->latch = malloc(len + 1)))
        return 0;   /* it lapses at its TTL */
    memcpy(s->latch, l->latch_prefix, l->lplen);
    dlock__random_hex32(s->latch + l->lplen);
    l->type->release_op(l, &s->a.o, s->latch, len, 0, op);
    *flags = 0;
    return 1;
}

static int acq_busy(void *st, const dlock__busy *b)
{
    dlock__acq *a = &((lock_acq *)st)->a;
    return a->l->type->busy_error(a, b);
}

static int acq_give_up(void *st, int rc, dlock__op *op, unsigned *flags)
{
    dlock__acq *a = &((lock_acq *)st)->a;
    return a->l->type->give_up_op ? a->l->type->give_up_op(a, rc, op, flags) : 0;
}

static void acq_result(void *st, dlock_async_result *res) { res->token = ((lock_acq *)st)->a.token; }

static void acq_done(void *st)
{
    lock_acq *s = st;
    dlock__acq_done(&s->a);
    free(s->latch);
    s->latch = NULL;
}

static const dlock__await_type acquire_type = {
    .attempt_op = acq_op,
    .attempt_end = acq_end,
    .keep = acq_keep,
    .give_back_op = acq_give_back,
    .busy_error = acq_busy,
    .give_up_op = acq_give_up,
    .result = acq_result,
    .done = acq_done,
};

static int check_handle(dlock_lock *l, dlock_async_fn fn)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    if (!fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (!l->owner)
        return dlock__fail(DLOCK_EINVAL,
                           "asynchronous calls need a handle with an explicit owner id "
                           "(dlock_lock_get_as and the other *_get_as): '%s' acts for the "
                           "calling thread, and callbacks do not run on it",
                           l->name);
    return DLOCK_OK;
}

static int acquire_async(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, dlock_cancel *cancel,
                         int fenced, dlock_async_fn fn, void *ud)
{
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    lock_acq *s = dlock__async_wait_new(l->c, &acquire_type, sizeof(*s), fn, ud);
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    rc = dlock__acq_init(&s->a, l, wait_ms, lease_ms, cancel, fenced);
    if (rc != DLOCK_OK) {
        dlock__acq_done(&s->a);
        dlock__async_discard(s);
        return rc;
    }
    dlock__wait_spec spec = {.name = l->name, .wait_ms = wait_ms, .cancel = cancel};
    spec.channel = l->type->wait_channel(l, &s->a.o, &spec.clen);
    return dlock__async_wait_start(s, &spec);
}

int dlock_lock_acquire_async(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                             dlock_cancel *cancel, dlock_async_fn fn, void *ud)
{
    return acquire_async(l, wait_ms, lease_ms, cancel, 0, fn, ud);
}

int dlock_lock_acquire_fenced_async(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                                    dlock_cancel *cancel, dlock_async_fn fn, void *ud)
{
    return acquire_async(l, wait_ms, lease_ms, cancel, 1, fn, ud);
}

/* ------------------------------------------------------------- release */

static const dlock__op *rel_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    dlock__rel *x = st;
    (void)scratch;
    *flags = x->flags;
    *latch_ms = x->l->c->latch_px;
    return &x->op;
}

static int rel_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    (void)res;
    return dlock__rel_end(st, rc, r);
}

static void rel_done(void *st, int ended)
{
    /* Never answered (closed first): the watchdog counts an attempt of
     * unknown outcome, as for a lost reply. */
    if (!ended) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        dlock__rel_end(st, DLOCK_ECLOSED, NULL);
        dlock__fail(DLOCK_ECLOSED, "%s", msg);
    }
}

static const dlock__call_type release_type = {rel_op, rel_end, rel_done};

int dlock_lock_release_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    dlock__rel *x = dlock__async_call_new(l->c, &release_type, sizeof(*x), fn, ud);
    if (!x)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    rc = dlock__rel_init(x, l);
    if (rc != DLOCK_OK) {
        dlock__async_discard(x);
        return rc;
    }
    return dlock__async_call_start(x);
}

/* -------------------------------------------------------------- force */

static const dlock__op *force_op(void *st, dlock__op *scratch, unsigned *flags,
                                 int64_t *latch_ms)
{
    dlock_lock *l = *(dlock_lock **)st;
    /* Not resent after a lost reply (see dlock_lock_force_release). */
    *flags = 0;
    *latch_ms = 0;
    l->type->force_op(l, scratch);
    return scratch;
}

static int force_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    int was = 0;
    rc = dlock__lock_force_end(*(dlock_lock **)st, rc, r, &was);
    res->flag = was;
    return rc;
}

static const dlock__call_type force_type = {force_op, force_end, NULL};

int dlock_lock_force_release_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    dlock_lock **s = dlock__async_call_new(l->c, &force_type, sizeof(*s), fn, ud);
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    *s = l;
    return dlock__async_call_start(s);
}

/* ------------------------------------------------------------ queries */

typedef struct lock_query {
    dlock_lock *l;
    int q;
    int owned;               /* o is set up */
    dlock__owner o;
} lock_query;

static const dlock__op *query_op(void *st, dlock__op *scratch, unsigned *flags,
                                 int64_t *latch_ms)
{
    lock_query *s = st;
    (void)latch_ms;
    dlock__lock_query_op(s->l, s->owned ? &s->o : NULL, s->q, scratch);
    *flags = DLOCK__CALL_IDEMPOTENT;
    return scratch;
}

static int query_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    lock_query *s = st;
    int64_t v = 0;
    rc = dlock__lock_query_end(s->l, s->q, rc, r, &v);
    if (rc == DLOCK_OK) {
        if (s->q == DLOCK__Q_LOCKED || s->q == DLOCK__Q_HELD)
            res->flag = (int)v;
        else
            res->count = v;
    }
    return rc;
}

static void query_done(void *st, int ended)
{
    lock_query *s = st;
    (void)ended;
    if (s->owned)
        dlock__lock_owner_done(&s->o);
    s->owned = 0;
}

static const dlock__call_type query_type = {query_op, query_end, query_done};

/* Queries act for the handle's owner too (is held, hold count): an explicit
 * one, as every asynchronous call. */
static int query_async(dlock_lock *l, int q, dlock_async_fn fn, void *ud)
{
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    lock_query *s = dlock__async_call_new(l->c, &query_type, sizeof(*s), fn, ud);
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->l = l;
    s->q = q;
    if (q == DLOCK__Q_HELD || q == DLOCK__Q_COUNT) {
        if ((rc = dlock__lock_owner(l, &s->o)) != DLOCK_OK) {
            dlock__lock_owner_done(&s->o);
            dlock__async_discard(s);
            return rc;
        }
        s->owned = 1;
    }
    return dlock__async_call_start(s);
}

int dlock_lock_is_locked_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return query_async(l, DLOCK__Q_LOCKED, fn, ud);
}

int dlock_lock_is_held_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return query_async(l, DLOCK__Q_HELD, fn, ud);
}

int dlock_lock_hold_count_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return query_async(l, DLOCK__Q_COUNT, fn, ud);
}

int dlock_lock_ttl_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return query_async(l, DLOCK__Q_TTL, fn, ud);
}
