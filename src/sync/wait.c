/* The wait loop every waiting type shares (docs/internals/waiting.md).
 *
 *   attempt -> busy -> join the channel -> attempt -> sleep -> attempt ...
 *
 * Subscribing before the retry closes the gap between a failed attempt and the
 * subscription: a release in between is seen by the retry, or arrives as a
 * message. The sleep ends at a wake-up (a message for this channel, kept if it
 * came while the thread was busy), the busy answer's TTL (the holder may
 * expire without anybody publishing), the deadline, a cancellation or the
 * client closing. A waiter that used a wake-up and then failed with an error
 * passes it on, so another waiter of this process gets the chance.
 *
 * The type decides what an attempt is and what "busy" means; the loop decides
 * when to try. A type whose channel carries a settling message (a latch's
 * zero) ends the wait on it without another attempt (spec->settles). A busy
 * answer may ask for this waiter to go first among the channel's local
 * waiters (a reserved turn), or to wait on another channel (a multi-lock
 * waits on whichever of its locks was busy); the loop keeps the waiter table
 * in step. */
#include <string.h>

#include "sync/sync.h"

_Thread_local uint64_t dlock__attempts;
_Thread_local uint64_t dlock__wakeups;
_Thread_local uint64_t dlock__wakeups_wasted;

static int end_error(const dlock__wait_spec *s, int rc)
{
    return dlock__fail(rc, "wait for '%s' %s", s->name,
                       rc == DLOCK_ECANCELED ? "cancelled" : "ended: client closing");
}

/* Where a busy answer says to wait: its own channel, or the spec's. */
typedef struct place {
    dlock_client *c;
    const char *channel;
    size_t clen;
} place;

static place place_of(dlock_client *c, const dlock__wait_spec *s, const dlock__busy *b)
{
    if (b->channel)
        return (place){b->c ? b->c : c, b->channel, b->clen};
    return (place){c, s->channel, s->clen};
}

static int same_place(const place *x, const place *y)
{
    return x->c == y->c && x->clen == y->clen && memcmp(x->channel, y->channel, x->clen) == 0;
}

/* The loop after a first busy answer: joined, retrying, sleeping. */
static int wait_joined(dlock_client *c, const dlock__wait_spec *s, const dlock__wait_ops *ops,
                       int64_t start, int64_t deadline, dlock__busy *b)
{
    place at = place_of(c, s, b);
    dlock__waiter w;
    int rc = dlock__waiter_join(at.c->pubsub, &w, at.channel, at.clen, s->wake, s->need,
                                s->settles, deadline, s->cancel);
    if (rc != DLOCK_OK)
        return rc;
    int joined = 1;
    int used_wake = 0;   /* consumed a wake-up not yet answered by a busy attempt */
    int64_t woken_us = 0;   /* when the message behind it arrived */
    int first = 0;
    for (;;) {
        rc = ops->attempt(ops->ud, dlock__now_ms() - start, b);
        if (rc == DLOCK__BUSY && used_wake) {
            dlock__wakeups_wasted++;   /* woken by a message, and it was taken again */
            dlock__stats_count(&c->stats, DLOCK__ST_WAKEUPS_TAKEN, 1);
        }
        if (rc == DLOCK_OK && used_wake)
            dlock__stats_time(&c->stats, DLOCK__H_HANDOFF_GAP, dlock__now_us() - woken_us);
        if (rc != DLOCK__BUSY)
            break;
        /* Woken by a budget, and others took part of it first: what is left
         * may serve a smaller local waiter the message did not wake. */
        if (used_wake && b->pass > 0)
            dlock__waiter_pass_budget(at.c->pubsub, &w, b->pass);
        used_wake = 0;
        int64_t now = dlock__now_ms();
        if (now >= deadline) {
            rc = ops->busy_error(ops->ud, b);
            break;
        }
        place next = place_of(c, s, b);
        if (!same_place(&at, &next)) {
            /* Busy elsewhere now: subscribe there, then retry at once. */
            dlock__waiter_leave(at.c->pubsub, &w, 0);
            joined = 0;
            at = next;
            first = 0;
            rc = dlock__waiter_join(at.c->pubsub, &w, at.channel, at.clen, s->wake, s->need,
                                    s->settles, deadline, s->cancel);
            if (rc != DLOCK_OK)
                break;
            joined = 1;
            continue;
        }
        /* Follow each answer: a reserved turn can lapse or pass to another. */
        if (!!b->first != first) {
            first = !!b->first;
            dlock__waiter_set_claimant(at.c->pubsub, &w, first);
        }
        /* Sleep until a message, the busy answer's TTL or the deadline. */
        int64_t until = deadline;
        if (b->ttl >= 0 && now + b->ttl + 1 < until)
            until = now + b->ttl + 1;
        if (!w.subscribed && now + at.c->cfg.retry_delay_ms < until)
            until = now + at.c->cfg.retry_delay_ms;   /* pub/sub down: poll meanwhile */
        int wr = dlock__waiter_wait(at.c->pubsub, &w, until);
        if (wr == DLOCK__WAKE_DONE) {
            rc = DLOCK_OK;   /* a settling message: the wait is over, no attempt needed */
            break;
        }
        if (wr == DLOCK_ECANCELED || wr == DLOCK_ECLOSED) {
            rc = end_error(s, wr);
            break;
        }
        used_wake = wr == DLOCK__WAKE_MESSAGE;
        dlock__wakeups += used_wake;
        if (used_wake) {
            woken_us = w.took_us;
            dlock__stats_count(&c->stats, DLOCK__ST_WAKEUPS, 1);
        }
    }
    /* Woken, then failed with an error before learning whether the object was
     * free: another waiter must get the chance. */
    if (joined)
        dlock__waiter_leave(at.c->pubsub, &w, rc != DLOCK_OK && used_wake);
    return rc;
}

int dlock__wait(dlock_client *c, const dlock__wait_spec *s, const dlock__wait_ops *ops)
{
    if (s->wait_ms != 0 && dlock__loop_on_io_thread(c->loop))
        return dlock__fail(DLOCK_EINVAL, "a wait from a dlock callback would stall the io "
                                         "thread: use a wait of 0 there");
    const int64_t start_us = dlock__now_us();
    const int64_t start = start_us / 1000;
    const int64_t deadline = s->wait_ms == DLOCK_WAIT_FOREVER || s->wait_ms > INT64_MAX - start
                                 ? INT64_MAX
                                 : start + s->wait_ms;
    dlock__busy b = {.ttl = -1};
    int rc = ops->attempt(ops->ud, -1, &b);
    if (rc == DLOCK__BUSY) {
        if (s->wait_ms == 0) {
            rc = ops->busy_error(ops->ud, &b);
        } else if (dlock_cancel_fired(s->cancel)) {
            rc = end_error(s, DLOCK_ECANCELED);
        } else {
            dlock__stats_count(&c->stats, DLOCK__ST_WAITS, 1);
            rc = wait_joined(c, s, ops, start, deadline, &b);
        }
        if (rc != DLOCK_OK && ops->give_up)
            ops->give_up(ops->ud, rc);
    }
    if (rc == DLOCK_OK && !s->awaits) {
        dlock__stats_count(&c->stats, DLOCK__ST_ACQUISITIONS, 1);
        dlock__stats_time(&c->stats, DLOCK__H_ACQUIRE_WAIT, dlock__now_us() - start_us);
    }
    return rc;
}
