/* The calls that change a hold other than its owner's acquire and release
 * (lock.h): the force release of whoever holds it (Redisson's forceUnlock)
 * and the extension of a hold taken with a fixed lease
 * (scripts/lock/extend.lua). Each is an operation that both drivers run. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* --------------------------------------------------------------- force */

typedef struct force {
    dlock_lock *l;
    int was;
    int open;                /* the watchdog was told of a release (release_begin) */
    dlock__owner o;
    dlock__hold_id id;
} force;

/* The caller's own hold is marked as being released before the request
 * goes, as for a release: a renewal or a tracking recheck that finds the key
 * gone before the answer is read is the force's doing, not a loss. */
static int force_setup(void *st)
{
    force *f = st;
    int rc = dlock__lock_owner_by(f->l, NULL, 0, &f->o);
    if (rc != DLOCK_OK)
        return rc;
    f->l->type->hold_id(f->l, &f->o, &f->id);
    dlock__watchdog_release_begin(f->l->h.c->wd, &f->id);
    f->open = 1;
    return DLOCK_OK;
}

/* The watchdog told of the outcome: the caller's renewal stops (as
 * Redisson's forceUnlock does) when the force ran (gone); else the release
 * mark is taken back, and a hold the force may have destroyed is found by
 * its next renewal. */
static void force_end(force *f, int gone)
{
    if (!f->open)
        return;
    f->open = 0;
    if (gone)
        dlock__watchdog_release_end(f->l->h.c->wd, &f->id, DLOCK__RELEASE_GONE);
    else
        dlock__watchdog_release_abort(f->l->h.c->wd, &f->id);
}

static void force_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    force *f = st;
    /* Not resent after a lost reply (flags 0): its PUBLISH may already have
     * handed the lock to a waiter, whose hold a second DEL would destroy. */
    f->l->type->force_op(f->l, op);
}

static int force_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    force *f = st;
    dlock_lock *l = f->l;
    if (rc != DLOCK_OK) {
        force_end(f, 0);
        return dlock__refused(&l->h, rc, res);
    }
    if (dlock__reply_flag(res->r, &f->was) != DLOCK_OK) {
        force_end(f, 0);
        return dlock__proto(&l->h, "force release", res->r);
    }
    freeReplyObject(res->r);
    /* Other holds of this process that the force destroyed are reported
     * lost by their next renewal, while a hold taken since is kept. */
    force_end(f, 1);
    return DLOCK_OK;
}

static void force_done(void *st, int read)
{
    (void)read;
    force *f = st;
    force_end(f, 0);   /* never answered (closed first) */
    dlock__lock_owner_done(&f->o);
}

static void force_result(void *st, dlock__result *res) { res->flag = ((force *)st)->was; }

static const dlock__op_type force_type = {.setup = force_setup,
                                          .request = force_request,
                                          .read = force_read,
                                          .result = force_result,
                                          .done = force_done};

static int force_release(dlock_lock *l, const dlock__via *via, int *was_locked)
{
    int rc = dlock__lock_check_call(l, via);
    if (rc != DLOCK_OK)
        return rc;
    force f = {.l = l};
    dlock__result res;
    rc = dlock__start(&l->h, &force_type, &f, sizeof(f), NULL, via, &res);
    if (rc == DLOCK_OK && was_locked)
        *was_locked = res.flag;
    return rc;
}

int dlock_lock_force_release(dlock_lock *l, int *was_locked)
{
    return force_release(l, NULL, was_locked);
}

int dlock_lock_force_release_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return force_release(l, &(dlock__via){fn, ud, 0}, NULL);
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
