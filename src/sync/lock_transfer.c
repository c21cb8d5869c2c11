/* Hand-over without a gap (lock.h; dlock's own, Redisson has none): the
 * holder passes its hold to another owner id in one script
 * (scripts/lock/transfer.lua), so that nobody else can take the lock in
 * between, and the receiver adopts it (scripts/lock/adopt.lua): its
 * watchdog takes over the renewal, or a fixed lease is set. Each is an
 * operation that both drivers run. Reentrant locks only (plain, fenced,
 * spin, non-reentrant). */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* The calls' common checks: the handle (an explicit owner for an
 * asynchronous call) and its type. */
static int check_kind(const dlock_lock *l, const dlock__via *via, const char *call)
{
    int rc = dlock__lock_check_call(l, via);
    if (rc == DLOCK_OK && l->type != &dlock__reentrant_type)
        rc = dlock__fail(DLOCK_EINVAL,
                         "%s works on reentrant locks (plain, fenced, spin, non-reentrant), "
                         "not a %s ('%s')",
                         call, l->h.what, l->h.name);
    return rc;
}

/* ------------------------------------------------------------- transfer */

typedef struct transfer {
    dlock_lock *l;
    int64_t ttl;             /* the least TTL the lock keeps: the watchdog timeout */
    int owned;               /* o set up */
    int open;                /* the watchdog was told (release_begin), not yet the end */
    int gone;                /* handed over */
    dlock__owner o;          /* the giver */
    dlock__hold_id id;
    size_t tlen;
    char to[DLOCK_OWNER_MAX + 1];   /* the receiver's id (its field: a reentrant lock's
                                       suffix is empty) */
} transfer;

/* The giver's hold is marked as being released before the request goes: a
 * renewal or a tracking recheck that finds its field gone meanwhile is the
 * hand-over's doing, not a loss. */
static int transfer_setup(void *st)
{
    transfer *s = st;
    dlock_lock *l = s->l;
    int rc = dlock__lock_owner(l, &s->o);
    if (rc != DLOCK_OK)
        return rc;
    if (s->o.flen == s->tlen && memcmp(s->o.field, s->to, s->tlen) == 0) {
        dlock__lock_owner_done(&s->o);   /* a failed setup has no done */
        return dlock__fail(DLOCK_EINVAL, "%s '%s': the new owner '%s' is the caller itself",
                           l->h.what, l->h.name, s->to);
    }
    s->owned = 1;
    l->type->hold_id(l, &s->o, &s->id);
    dlock__watchdog_release_begin(l->h.c->wd, &s->id);
    s->open = 1;
    return DLOCK_OK;
}

/* The watchdog and the giver's record told of the outcome: handed over
 * (the renewal stops, nothing reported), not held (a renewed hold was lost:
 * reported as a release that finds nothing does), or unknown (the mark is
 * taken back: the next renewal finds out, and reports a loss if the hold
 * went). */
static void transfer_end(transfer *s, int outcome, int answered)
{
    if (!s->open)
        return;
    s->open = 0;
    dlock_lock *l = s->l;
    if (!answered) {
        dlock__watchdog_release_abort(l->h.c->wd, &s->id);
        return;
    }
    dlock__holds_released(&l->h.c->holds, l, &s->o, 1, outcome, 0);
    dlock__watchdog_release_end(l->h.c->wd, &s->id, outcome);
}

/* KEYS: lock, marker (optional); ARGV: giver's field, receiver's field, the
 * least TTL (scripts/lock/transfer.lua). Not resent after a lost reply: a
 * hand-over that ran would be answered "not held". */
static void transfer_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    transfer *s = st;
    dlock_lock *l = s->l;
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_TRANSFER);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key_optional(op, DLOCK__OWN_DELAY, l->key[DLOCK__K_DELAY],
                           l->klen[DLOCK__K_DELAY]);
    dlock__op_arg(op, s->o.field, s->o.flen);
    dlock__op_arg(op, s->to, s->tlen);
    dlock__op_argi(op, s->ttl);
}

static int transfer_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    transfer *s = st;
    dlock_lock *l = s->l;
    if (rc != DLOCK_OK) {
        transfer_end(s, DLOCK__RELEASE_KEPT, 0);
        return dlock__refused(&l->h, rc, res);
    }
    if (dlock__reply_flag(res->r, &s->gone) != DLOCK_OK) {
        transfer_end(s, DLOCK__RELEASE_KEPT, 0);
        return dlock__proto(&l->h, "transfer", res->r);
    }
    freeReplyObject(res->r);
    transfer_end(s, s->gone ? DLOCK__RELEASE_GONE : DLOCK__RELEASE_NOT_HELD, 1);
    if (!s->gone)
        return dlock__fail(DLOCK_ENOTOWNER, "%s '%s' is not held by %s: nothing to hand over",
                           l->h.what, l->h.name, s->o.id);
    return DLOCK_OK;
}

static void transfer_done(void *st, int read)
{
    (void)read;
    transfer *s = st;
    transfer_end(s, DLOCK__RELEASE_KEPT, 0);   /* never answered (closed first) */
    if (s->owned)
        dlock__lock_owner_done(&s->o);
    s->owned = 0;
}

static const dlock__op_type transfer_type = {.setup = transfer_setup,
                                             .request = transfer_request,
                                             .read = transfer_read,
                                             .done = transfer_done,
                                             .releases = 1};

static int transfer_lock(dlock_lock *l, const char *new_owner, const dlock__via *via)
{
    int rc = check_kind(l, via, "transfer");
    if (rc != DLOCK_OK)
        return rc;
    size_t tlen = 0;
    if ((rc = dlock__check_owner(new_owner, &tlen)) != DLOCK_OK)
        return rc;
    transfer s = {.l = l, .ttl = l->h.c->cfg.watchdog_ms, .tlen = tlen};
    memcpy(s.to, new_owner, tlen);
    return dlock__start(&l->h, &transfer_type, &s, sizeof(s), NULL, via, NULL);
}

int dlock_lock_transfer(dlock_lock *l, const char *new_owner)
{
    return transfer_lock(l, new_owner, NULL);
}

int dlock_lock_transfer_async(dlock_lock *l, const char *new_owner, dlock_async_fn fn,
                              void *ud)
{
    return transfer_lock(l, new_owner, &(dlock__via){fn, ud, 0});
}

/* ---------------------------------------------------------------- adopt */

typedef struct adopt {
    dlock_lock *l;
    int64_t lease;           /* the caller's: ms or DLOCK_WATCHDOG */
    int64_t lease_ms;        /* the TTL set: the lease, or the watchdog timeout (cut to
                                the hold limit) */
    int64_t max_hold;        /* a watchdog adoption's hold limit, ms (0: none) */
    int64_t count;           /* the hold count adopted */
    int owned;
    dlock__owner o;
} adopt;

static int adopt_setup(void *st)
{
    adopt *s = st;
    dlock_lock *l = s->l;
    int rc = dlock__lock_owner(l, &s->o);
    if (rc != DLOCK_OK)
        return rc;
    dlock__hold_id id;
    l->type->hold_id(l, &s->o, &id);
    if (dlock__watchdog_renews(l->h.c->wd, &id)) {
        dlock__lock_owner_done(&s->o);   /* a failed setup has no done */
        return dlock__fail(DLOCK_EINVAL,
                           "%s '%s': %s holds it under this client's watchdog already "
                           "(acquired or adopted): nothing to adopt",
                           l->h.what, l->h.name, s->o.id);
    }
    s->owned = 1;
    atomic_store(&l->attempted, 1);   /* the handle's delay is fixed from now on */
    s->lease_ms = s->lease;
    if (s->lease == DLOCK_WATCHDOG) {
        s->lease_ms = l->h.c->cfg.watchdog_ms;
        s->max_hold = dlock__lock_hold_limit(l);
        if (s->max_hold > 0 && s->max_hold < s->lease_ms)
            s->lease_ms = s->max_hold;
    }
    return DLOCK_OK;
}

/* KEYS: lock, marker (optional); ARGV: the owner's field, the lease
 * (scripts/lock/adopt.lua). */
static void adopt_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    adopt *s = st;
    dlock_lock *l = s->l;
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_ADOPT);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key_optional(op, DLOCK__OWN_DELAY, l->key[DLOCK__K_DELAY],
                           l->klen[DLOCK__K_DELAY]);
    dlock__op_arg(op, s->o.field, s->o.flen);
    dlock__op_argi(op, s->lease_ms);
    op->flags = DLOCK__CALL_IDEMPOTENT;   /* the same TTL for the same owner */
}

/* Hold counts are at most DLOCK_COUNT_MAX in practice; the watchdog counts
 * an int32. */
#define ADOPT_MAX 0x7fffffff

static int adopt_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    adopt *s = st;
    dlock_lock *l = s->l;
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    if (dlock__reply_integer(res->r, &s->count) != DLOCK_OK || s->count < 0 ||
        s->count > ADOPT_MAX)
        return dlock__proto(&l->h, "adopt", res->r);
    freeReplyObject(res->r);
    if (s->count == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "%s '%s' is not held by %s: nothing to adopt",
                           l->h.what, l->h.name, s->o.id);
    return DLOCK_OK;
}

/* The client counts each of the holds handed over as one acquisition, as
 * acquisitions of its own are counted (lock.c: acq_keep): the watchdog
 * first, then the owner's record. */
static int adopt_keep(void *st, int64_t sent_ms)
{
    adopt *s = st;
    dlock_lock *l = s->l;
    dlock__hold_id id;
    l->type->hold_id(l, &s->o, &id);
    if (s->lease == DLOCK_WATCHDOG) {
        pthread_mutex_lock(&l->mu);
        dlock__lost_cb cb = l->lost;
        pthread_mutex_unlock(&l->mu);
        int rc = dlock__watchdog_add_limited(l->h.c->wd, &id, sent_ms, s->max_hold, &cb);
        if (rc != DLOCK_OK)
            return rc;
        for (int64_t i = 1; i < s->count; i++)
            dlock__watchdog_lease_reentry(l->h.c->wd, &id, sent_ms, -1);   /* counted only */
    } else {
        dlock__netctx_note_lease(&l->h.c->net, s->lease);
    }
    for (int64_t i = 0; i < s->count; i++)
        dlock__holds_acquired(&l->h.c->holds, l, &s->o, 0, s->lease);
    return DLOCK_OK;
}

static void adopt_result(void *st, dlock__result *res) { res->count = ((adopt *)st)->count; }

static void adopt_done(void *st, int read)
{
    (void)read;
    adopt *s = st;
    if (s->owned)
        dlock__lock_owner_done(&s->o);
    s->owned = 0;
}

static const dlock__op_type adopt_type = {.setup = adopt_setup,
                                          .request = adopt_request,
                                          .read = adopt_read,
                                          .keep = adopt_keep,
                                          .result = adopt_result,
                                          .done = adopt_done};

static int adopt_lock(dlock_lock *l, int64_t lease_ms, const dlock__via *via, int64_t *count)
{
    int rc = check_kind(l, via, "adopt");
    if (rc == DLOCK_OK)
        rc = dlock__check_lease(lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    adopt s = {.l = l, .lease = lease_ms};
    dlock__result res = {0};
    rc = dlock__start(&l->h, &adopt_type, &s, sizeof(s), NULL, via, &res);
    if (rc == DLOCK_OK && count)
        *count = res.count;
    return rc;
}

int dlock_lock_adopt(dlock_lock *l, int64_t lease_ms, int64_t *count)
{
    return adopt_lock(l, lease_ms, NULL, count);
}

int dlock_lock_adopt_async(dlock_lock *l, int64_t lease_ms, dlock_async_fn fn, void *ud)
{
    return adopt_lock(l, lease_ms, &(dlock__via){fn, ud, 0}, NULL);
}
