/* The reentrant lock (Redisson's RLock): its keys, channel and scripts
 * (scripts/lock/). Everything every lock type shares is in lock.c.
 *
 * Turn order (dlock's own, beyond Redisson): a waiter that has waited
 * `priority after` reserves the next turn in dlock_lock_next:{name}; see
 * docs/internals/waiting.md. The reservation key is optional in every script
 * (an ACL that allows Redisson's keys only refuses it: the client then goes on
 * without reservations). */
#include <string.h>

#include <stdio.h>

#include "sync/lock.h"

enum { K_RESERVE = 0, K_DELAY = DLOCK__K_DELAY };   /* l->key[] */

/* Every lock type's channel carries "0" for an unlock, which one waiter can
 * use (the others would find it taken again), and other words ("1": a
 * read-write lock's last write hold went) for news every waiter may use. */
int dlock__wake_lock(const char *msg, size_t len)
{
    return len == 1 && msg[0] == '0' ? 1 : DLOCK__WAKE_ALL;
}

/* How the watchdog renews a reentrant (or fair, or write) lock's hold: KEYS =
 * the lock, ARGV = the owner's field (scripts/lock/renew.lua). */
const dlock__hold_kind dlock__lock_hold = {"lock", DLOCK__SCRIPT_LOCK_RENEW, 1, 1, 0};

/* A reentrant or fair lock with a lock-delay: KEYS = the lock and its
 * marker, ARGV = the owner's field and the delay
 * (scripts/lock/renew_delay.lua). */
static const dlock__hold_kind delay_hold = {"lock", DLOCK__SCRIPT_LOCK_RENEW_DELAY, 2, 2, 0};

void dlock__delay_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id)
{
    dlock__lock_hold_id(l, o, id);
    if (l->lock_delay <= 0)
        return;
    id->kind = &delay_hold;
    id->part[1] = l->key[K_DELAY];
    id->len[1] = l->klen[K_DELAY];
    id->part[2] = o->field;
    id->len[2] = o->flen;
    id->part[3] = l->delay_arg;
    id->len[3] = strlen(l->delay_arg);
}

int dlock__delay_set(int64_t *delay, char *arg, size_t size, const atomic_int *attempted,
                     int64_t ms)
{
    if (ms < 0 || ms > DLOCK__LOCK_DELAY_MAX)
        return dlock__fail(DLOCK_EINVAL, "lock-delay: 0 (off) to %lld ms (1 day), not %lld",
                           (long long)DLOCK__LOCK_DELAY_MAX, (long long)ms);
    if (atomic_load(attempted))
        return dlock__fail(DLOCK_EINVAL, "lock-delay: set before the handle's first "
                                         "acquisition");
    *delay = ms;
    snprintf(arg, size, "%lld", (long long)ms);
    return DLOCK_OK;
}

int dlock__lock_set_delay(dlock_lock *l, int64_t ms)
{
    return dlock__delay_set(&l->lock_delay, l->delay_arg, sizeof(l->delay_arg), &l->attempted,
                            ms);
}

void dlock__lock_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id)
{
    memset(id, 0, sizeof(*id));
    id->kind = &dlock__lock_hold;
    id->owner = o->id;
    id->olen = o->len;
    id->part[0] = l->h.name;
    id->len[0] = l->h.nlen;
    id->part[1] = o->field;
    id->len[1] = o->flen;
}

int dlock__delay_init(dlock_lock *l)
{
    int64_t d = l->h.c->cfg.lock_delay_ms;
    l->lock_delay = d;
    snprintf(l->delay_arg, sizeof(l->delay_arg), "%lld", (long long)d);
    return DLOCK_OK;
}

void dlock__delay_key(const dlock_lock *l, dlock__op *op)
{
    if (l->lock_delay > 0)   /* written by this handle's holds: it must go along */
        dlock__op_key(op, l->key[K_DELAY], l->klen[K_DELAY]);
    else                     /* honoured (or cleared) only: dlock's own, optional */
        dlock__op_key_optional(op, DLOCK__OWN_DELAY, l->key[K_DELAY], l->klen[K_DELAY]);
}

void dlock__delay_arg(const dlock_lock *l, dlock__op *op)
{
    if (l->lock_delay > 0)
        dlock__op_args(op, l->delay_arg);
}

void dlock__acquire_tail_args(const dlock_lock *l, dlock__op *op)
{
    if (l->no_reentry) {
        dlock__op_args(op, l->delay_arg);   /* the delay always, then the flag */
        dlock__op_args(op, "1");
    } else {
        dlock__delay_arg(l, op);
    }
}

int dlock__delay_busy(const dlock_lock *l, int64_t left)
{
    return dlock__fail(DLOCK_ETIMEDOUT,
                       "%s '%s' is free but in its lock-delay: its last holder lost it without "
                       "releasing (for %lld ms more)",
                       l->type->what, l->h.name, (long long)left);
}

const char *dlock__lock_shared_channel(const dlock_lock *l, const dlock__owner *o, size_t *len)
{
    (void)o;
    *len = l->h.clen;
    return l->h.channel;
}

/* KEYS: lock, token, marker, quarantine, reservation (dlock's own, optional); ARGV:
 * lease, owner, fenced, claim, grace[, delay[, no reentry]] (scripts/lock/acquire.lua). */
static void attempt_op(dlock__acq *a, int64_t waited_ms, dlock__op *op)
{
    dlock_lock *l = a->l;
    atomic_store(&l->attempted, 1);   /* the delay is fixed from now on */
    /* A waiter that has waited long enough asks for the next turn. */
    int64_t after = l->h.c->cfg.priority_after_ms;
    int claim = waited_ms >= 0 && after != DLOCK_PRIORITY_OFF && waited_ms >= after;
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_ACQUIRE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->token_key, l->tlen);
    dlock__delay_key(l, op);
    dlock__quarantine_key(&l->h, op);
    dlock__op_key_optional(op, DLOCK__OWN_RESERVE, l->key[K_RESERVE], l->klen[K_RESERVE]);
    dlock__op_argi(op, a->lease_ms);
    dlock__op_arg(op, a->o.field, a->o.flen);
    dlock__op_args(op, a->fenced ? "1" : "0");
    dlock__op_args(op, claim ? "1" : "0");
    dlock__op_args(op, DLOCK__RESERVE_GRACE_ARG);
    dlock__acquire_tail_args(l, op);
}

/* Busy: sleep at most the holder's PTTL, or what is left of another
 * waiter's reservation; a reserved turn goes first locally. */
static int attempt_reply(dlock__acq *a, redisReply *r, dlock__busy *b)
{
    int rc = dlock__acq_read(a, r, dlock__reply_acquire, b);
    if (rc == DLOCK__BUSY)
        b->first = a->state == DLOCK__RESV_MINE;
    return rc;
}

static int busy_error(dlock__acq *a, const dlock__busy *b)
{
    if (a->state != DLOCK__RESV_OTHER)
        return dlock__lock_busy(a->l, b->ttl);
    return dlock__fail(DLOCK_ETIMEDOUT,
                       "'%s' is free but its next turn is reserved for a waiter that has "
                       "waited long (for %lld ms more)",
                       a->l->h.name, (long long)b->ttl);
}

/* A waiter that reserved the next turn and gives up (deadline, cancellation)
 * hands it back, so the others need not wait out its grace. Best effort: one
 * try on an idle pooled connection, no retry, so a cancellation is not held
 * up; it keeps the caller's error message. Should it fail, the reservation
 * lapses by itself. KEYS: lock, reservation, channel; ARGV: owner
 * (scripts/lock/unclaim.lua). */
static int give_up_op(dlock__acq *a, int code, dlock__op *op)
{
    if (a->state != DLOCK__RESV_MINE || (code != DLOCK_ETIMEDOUT && code != DLOCK_ECANCELED))
        return 0;
    dlock_lock *l = a->l;
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_UNCLAIM);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->key[K_RESERVE], l->klen[K_RESERVE]);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_arg(op, a->o.field, a->o.flen);
    op->flags = DLOCK__CALL_IDLE_ONLY;
    return 1;
}

/* KEYS: lock, channel, latch, marker, reservation (dlock's own, optional);
 * ARGV: owner, lease, latch lifetime, grace[, delay] (scripts/lock/release.lua). */
static void release_op(const dlock_lock *l, const dlock__owner *o, const char *latch,
                       size_t latch_len, int64_t renew_ms, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_RELEASE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_key(op, latch, latch_len);
    dlock__delay_key(l, op);
    dlock__op_key_optional(op, DLOCK__OWN_RESERVE, l->key[K_RESERVE], l->klen[K_RESERVE]);
    dlock__op_arg(op, o->field, o->flen);
    dlock__op_argi(op, renew_ms);
    dlock__op_argi(op, l->h.c->latch_px);
    dlock__op_args(op, DLOCK__RESERVE_GRACE_ARG);
    dlock__delay_arg(l, op);
}

/* KEYS: lock, channel (scripts/lock/force.lua). */
static void force_op(const dlock_lock *l, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_LOCK_FORCE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->h.channel, l->h.clen);
}

const dlock__lock_type dlock__reentrant_type = {
    .what = "lock",
    .suffix = "",
    .channel = "redisson_lock__channel",
    .keys = {[K_RESERVE] = "dlock_lock_next", [K_DELAY] = "dlock_lock_delay"},
    .hold = &dlock__lock_hold,
    .init = dlock__delay_init,
    .owner_key = NULL,
    .hold_id = dlock__delay_hold_id,
    .plain_hold_id = dlock__lock_hold_id,
    .wait_channel = dlock__lock_shared_channel,
    .attempt_op = attempt_op,
    .attempt_reply = attempt_reply,
    .delayed = DLOCK__RESV_DELAYED,
    .held_states = 1u << DLOCK__RESV_NONE | 1u << DLOCK__RESV_MINE,
    .watch_marker = 1,
    .busy_error = busy_error,
    .give_up_op = give_up_op,
    .release_op = release_op,
    .force_op = force_op,
};
