/* The fair lock (Redisson's RFairLock): a lock whose waiters take their turns
 * in arrival order, through Redisson's queue (redisson_lock_queue:{name}) and
 * deadlines (redisson_lock_timeout:{name}). Each waiter listens on its own
 * channel, redisson_lock__channel:{name}:<owner>, and a release wakes the head
 * of the queue only. Holds are the reentrant lock's (one hash field, renewed
 * by the same script); only acquire, release, force release and giving up
 * differ (scripts/fair/).
 *
 * Slots. Each waiter has a slot (Redisson's fairLockWaitTimeout, 5 minutes by
 * default; or the caller's wait when it gave one). A dead waiter at the head
 * delays the others by one configured slot (the fair wait timeout, the grace)
 * at most once the lock is free: its turn starts then (a release, a head
 * leaving, or an attempt that finds the lock free cuts its deadline to now +
 * grace). Never to now + a newcomer's own wait: a live head, Redisson's
 * included, keeps its turn for the grace, or to its own deadline if sooner. A live dlock waiter keeps its entry fresh on every
 * attempt and tries again at least every half slot, so it is never dropped
 * however long it waits (scripts/fair/acquire.lua). */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

enum { K_QUEUE = 0, K_DEADLINES = 1 };   /* l->key[] */
enum { FAIR_HELD = 0, FAIR_QUEUED_AHEAD = 1, FAIR_DELAYED = 2 };   /* a busy answer's `why` */

/* The waiter's own channel: the lock's channel, ':', its owner id. */
static int owner_key(const dlock_lock *l, dlock__owner *o)
{
    o->alen = l->h.clen + 1 + o->len;
    if (!(o->aux = malloc(o->alen + 1)))
        return DLOCK_ENOMEM;
    memcpy(o->aux, l->h.channel, l->h.clen);
    o->aux[l->h.clen] = ':';
    memcpy(o->aux + l->h.clen + 1, o->id, o->len);
    o->aux[o->alen] = '\0';
    return DLOCK_OK;
}

static const char *wait_channel(const dlock_lock *l, const dlock__owner *o, size_t *len)
{
    (void)l;
    *len = o->alen;
    return o->aux;
}

/* The waiter's slot: the caller's wait, or the client's fair wait timeout. */
static int64_t slot_of(const dlock__acq *a)
{
    return a->wait > 0 ? a->wait : a->l->h.c->cfg.fair_wait_ms;
}

/* KEYS: lock, queue, deadlines, token[, marker, quarantine]; ARGV: lease, owner, slot,
 * fenced, queue, grace[, delay] (scripts/fair/acquire.lua). */
static void attempt_op(dlock__acq *a, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    dlock_lock *l = a->l;
    atomic_store(&l->attempted, 1);   /* the delay is fixed from now on */
    dlock__op_init(op, DLOCK__SCRIPT_FAIR_ACQUIRE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->key[K_QUEUE], l->klen[K_QUEUE]);
    dlock__op_key(op, l->key[K_DEADLINES], l->klen[K_DEADLINES]);
    dlock__op_key(op, l->token_key, l->tlen);
    dlock__delay_key(l, op);
    dlock__quarantine_key(&l->h, op);
    dlock__op_argi(op, a->lease_ms);
    dlock__op_arg(op, a->o.field, a->o.flen);
    dlock__op_argi(op, slot_of(a));
    dlock__op_args(op, a->fenced ? "1" : "0");
    dlock__op_args(op, a->wait != 0 ? "1" : "0");
    dlock__op_argi(op, l->h.c->cfg.fair_wait_ms);
    dlock__acquire_tail_args(l, op);
}

/* Busy: b->ttl is the script's sleep; b->first stays 0 (one waiter per
 * channel: nobody to go before). */
static int attempt_reply(dlock__acq *a, redisReply *r, dlock__busy *b)
{
    int rc = dlock__acq_read(a, r, dlock__reply_fair_acquire, b);
    if (rc != DLOCK__BUSY)
        return rc;
    if (a->wait != 0)
        a->queued = 1;
    if (a->state != FAIR_QUEUED_AHEAD) {
        a->streak = 0;
        return rc;
    }
    /* Free, and an earlier waiter goes first: it was woken and takes the
     * lock at once, but nothing will tell us when its turn ends if it took
     * the lock with a lease that runs out (no release, no message). Look
     * again soon, then less and less often: a head that died is dropped at
     * its deadline (the script's sleep). */
    int64_t back = (int64_t)20 << (a->streak < 14 ? a->streak : 14);
    a->streak++;
    if (b->ttl < 0 || back < b->ttl)
        b->ttl = back;
    return rc;
}

static int busy_error(dlock__acq *a, const dlock__busy *b)
{
    if (a->state != FAIR_QUEUED_AHEAD)
        return dlock__lock_busy(a->l, b->ttl);
    return dlock__fail(DLOCK_ETIMEDOUT, "fair lock '%s' is free but earlier waiters go first",
                       a->l->h.name);
}

/* A queued waiter that stops waiting leaves the queue at once, so the ones
 * behind it do not wait out its slot; it keeps the caller's message. One try
 * without retries (a cancellation is not held up): should it fail, the entry
 * is dropped when its deadline passes. KEYS: queue, deadlines, lock, channel
 * prefix; ARGV: owner, slot, grace (scripts/fair/leave.lua). */
static int give_up_op(dlock__acq *a, int code, dlock__op *op)
{
    (void)code;
    if (!a->queued)
        return 0;
    dlock_lock *l = a->l;
    dlock__op_init(op, DLOCK__SCRIPT_FAIR_LEAVE);
    dlock__op_key(op, l->key[K_QUEUE], l->klen[K_QUEUE]);
    dlock__op_key(op, l->key[K_DEADLINES], l->klen[K_DEADLINES]);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_arg(op, a->o.field, a->o.flen);
    dlock__op_argi(op, slot_of(a));
    dlock__op_argi(op, l->h.c->cfg.fair_wait_ms);
    return 1;
}

/* KEYS: lock, queue, deadlines, channel prefix, latch[, marker]; ARGV: owner,
 * lease, latch lifetime, slot[, delay] (scripts/fair/release.lua). */
static void release_op(const dlock_lock *l, const dlock__owner *o, const char *latch,
                       size_t latch_len, int64_t renew_ms, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_FAIR_RELEASE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->key[K_QUEUE], l->klen[K_QUEUE]);
    dlock__op_key(op, l->key[K_DEADLINES], l->klen[K_DEADLINES]);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_key(op, latch, latch_len);
    dlock__delay_key(l, op);
    dlock__op_arg(op, o->field, o->flen);
    dlock__op_argi(op, renew_ms);
    dlock__op_argi(op, l->h.c->latch_px);
    dlock__op_argi(op, l->h.c->cfg.fair_wait_ms);
    dlock__delay_arg(l, op);
}

/* KEYS: lock, queue, deadlines, channel prefix; ARGV: slot
 * (scripts/fair/force.lua). */
static void force_op(const dlock_lock *l, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_FAIR_FORCE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->key[K_QUEUE], l->klen[K_QUEUE]);
    dlock__op_key(op, l->key[K_DEADLINES], l->klen[K_DEADLINES]);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_argi(op, l->h.c->cfg.fair_wait_ms);
}

const dlock__lock_type dlock__fair_type = {
    .what = "fair lock",
    .suffix = "",
    .hold = &dlock__lock_hold,
    .channel = "redisson_lock__channel",
    .keys = {[K_QUEUE] = "redisson_lock_queue", [K_DEADLINES] = "redisson_lock_timeout",
             [DLOCK__K_DELAY] = "dlock_lock_delay"},
    .init = dlock__delay_init,
    .owner_key = owner_key,
    .hold_id = dlock__delay_hold_id,
    .plain_hold_id = dlock__lock_hold_id,
    .wait_channel = wait_channel,
    .attempt_op = attempt_op,
    .attempt_reply = attempt_reply,
    .delayed = FAIR_DELAYED,
    .held_states = 1u << FAIR_HELD,
    .watch_marker = 1,
    .busy_error = busy_error,
    .give_up_op = give_up_op,
    .release_op = release_op,
    .force_op = force_op,
};
