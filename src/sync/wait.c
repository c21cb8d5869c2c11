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
 * zero) ends the wait on it without another attempt (spec->settles). A busy answer may ask for this waiter to go first among the
 * channel's local waiters (a reserved turn); the loop keeps the waiter table
 * in step. */
#include "sync/sync.h"

_Thread_local uint64_t dlock__attempts;

static int end_error(const dlock__wait_spec *s, int rc)
{
    return dlock__fail(rc, "wait for '%s' %s", s->name,
                       rc == DLOCK_ECANCELED ? "cancelled" : "ended: client closing");
}

/* The loop after a first busy answer: joined, retrying, sleeping. */
static int wait_joined(dlock_client *c, const dlock__wait_spec *s, const dlock__wait_ops *ops,
                       int64_t start, int64_t deadline, dlock__busy *b)
{
    dlock__waiter w;
    int rc = dlock__waiter_join(c->pubsub, &w, s->channel, s->clen, s->wake, s->need,
                                s->settles, deadline, s->cancel);
    if (rc != DLOCK_OK)
        return rc;
    int used_wake = 0;   /* consumed a wake-up not yet answered by a busy attempt */
    int first = 0;
    for (;;) {
        rc = ops->attempt(ops->ud, dlock__now_ms() - start, b);
        if (rc != DLOCK__BUSY)
            break;
        /* Woken by a budget, and others took part of it first: what is left
         * may serve a smaller local waiter the message did not wake. */
        if (used_wake && b->pass > 0)
            dlock__waiter_pass_budget(c->pubsub, &w, b->pass);
        used_wake = 0;
        /* Follow each answer: a reserved turn can lapse or pass to another. */
        if (!!b->first != first) {
            first = !!b->first;
            dlock__waiter_set_claimant(c->pubsub, &w, first);
        }
        int64_t now = dlock__now_ms();
        if (now >= deadline) {
            rc = ops->busy_error(ops->ud, b);
            break;
        }
        /* Sleep until a message, the busy answer's TTL or the deadline. */
        int64_t until = deadline;
        if (b->ttl >= 0 && now + b->ttl + 1 < until)
            until = now + b->ttl + 1;
        if (!w.subscribed && now + c->cfg.retry_delay_ms < until)
            until = now + c->cfg.retry_delay_ms;   /* pub/sub down: poll meanwhile */
        int wr = dlock__waiter_wait(c->pubsub, &w, until);
        if (wr == DLOCK__WAKE_DONE) {
            rc = DLOCK_OK;   /* a settling message: the wait is over, no attempt needed */
            break;
        }
        if (wr == DLOCK_ECANCELED || wr == DLOCK_ECLOSED) {
            rc = end_error(s, wr);
            break;
        }
        used_wake = wr == DLOCK__WAKE_MESSAGE;
    }
    /* Woken, then failed with an error before learning whether the object was
     * free: another waiter must get the chance. */
    dlock__waiter_leave(c->pubsub, &w, rc != DLOCK_OK && used_wake);
    return rc;
}

int dlock__wait(dlock_client *c, const dlock__wait_spec *s, const dlock__wait_ops *ops)
{
    if (s->wait_ms != 0 && dlock__loop_on_io_thread(c->loop))
        return dlock__fail(DLOCK_EINVAL, "a wait from a dlock callback would stall the io "
                                         "thread: use a wait of 0 there");
    const int64_t start = dlock__now_ms();
    const int64_t deadline = s->wait_ms == DLOCK_WAIT_FOREVER || s->wait_ms > INT64_MAX - start
                                 ? INT64_MAX
                                 : start + s->wait_ms;
    dlock__busy b = {-1, 0, 0};
    int rc = ops->attempt(ops->ud, -1, &b);
    if (rc != DLOCK__BUSY)
        return rc;
    if (s->wait_ms == 0)
        rc = ops->busy_error(ops->ud, &b);
    else if (dlock_cancel_fired(s->cancel))
        rc = end_error(s, DLOCK_ECANCELED);
    else
        rc = wait_joined(c, s, ops, start, deadline, &b);
    if (rc != DLOCK_OK && ops->give_up)
        ops->give_up(ops->ud, rc);
    return rc;
}
