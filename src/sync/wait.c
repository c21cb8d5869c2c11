/* The wait loop every waiting operation shares, blocking or asynchronous
 * (docs/internals/waiting.md).
 *
 *   attempt -> busy -> join the channel -> attempt -> sleep -> attempt ...
 *
 * Subscribing before the retry closes the gap between a failed attempt and the
 * subscription: a release in between is seen by the retry, or arrives as a
 * message. The sleep ends at a wake-up (a message for this channel, kept if it
 * came while the caller was busy), the busy answer's TTL (the holder may
 * expire without anybody publishing), the deadline, a cancellation or the
 * client closing. A waiter that used a wake-up and then failed with an error
 * passes it on, so another waiter of this process gets the chance.
 *
 * While it sleeps, the key its last attempt found in the way (the lock held)
 * is watched: freed without a message (an operator's DEL, an eviction), it
 * wakes the waiter too (io/keywatch.c).
 *
 * The operation decides what an attempt is and what "busy" means; the loop
 * decides when to try. An operation whose channel carries a settling message
 * (a latch's zero) ends the wait on it without another attempt
 * (spec->settles). A busy answer may ask for this waiter to go first among
 * the channel's local waiters (a reserved turn), or to wait on another
 * channel (a multi-lock waits on whichever of its locks was busy); the loop
 * keeps the waiter table in step.
 *
 * It is a state machine: each step returns what the driver does next
 * (attempt, join, sleep, done). The blocking driver (run.c) does it on the
 * calling thread; the asynchronous one (async.c) with a callback waiter and
 * a timer on the io thread. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

_Thread_local uint64_t dlock__attempts;
_Thread_local uint64_t dlock__wakeups;
_Thread_local uint64_t dlock__wakeups_wasted;

int dlock__wake_all(const char *msg, size_t len)
{
    (void)msg;
    (void)len;
    return DLOCK__WAKE_ALL;
}

static int end_error(const dlock__wait *w, int rc)
{
    return dlock__fail(rc, "wait for '%s' %s", w->h->name,
                       rc == DLOCK_ECANCELED ? "cancelled" : "ended: client closing");
}

int dlock__quarantined(const dlock__handle *h, const dlock__op_type *t, dlock__busy *b)
{
    if (!t->acquires || h->c->cfg.quarantine_mode == DLOCK_QUARANTINE_OFF)
        return 0;
    /* Every key of an object shares its name's slot (Redisson's hash tags). */
    dlock__node *n = dlock__router_node(h->c->router, h->name, h->nlen);
    int64_t left = n ? dlock__node_quarantine_left(n) : 0;
    if (left <= 0)
        return 0;
    b->ttl = left;
    b->quarantine = dlock__node_addr(n);
    return 1;
}

int dlock__quarantine_met(const dlock__handle *h, const dlock__op_type *t, int rc,
                          const dlock__res *res, dlock__busy *b)
{
    if (rc == DLOCK_OK || res->err != DLOCK__RERR_QUARANTINE)
        return 0;
    if (dlock__quarantined(h, t, b))
        return 1;
    const char *left = res->text;
    if (strncmp(left, DLOCK__QUARANTINE_ERR, sizeof(DLOCK__QUARANTINE_ERR) - 1) == 0) {
        /* The script read the quarantine another client recorded there. */
        left += sizeof(DLOCK__QUARANTINE_ERR) - 1;
        dlock__node *n = dlock__router_node(h->c->router, h->name, h->nlen);
        b->quarantine = n ? dlock__node_addr(n) : "the new one";
        b->qserver = 1;
    } else {
        /* The node the router sent it to is not the one the map names yet
         * (a cluster's MOVED): what that node said is left. */
        b->quarantine = "the new one";
    }
    b->ttl = strtoll(left, NULL, 10);
    return 1;
}

static int busy_error(dlock__wait *w, const dlock__busy *b)
{
    if (b->quarantine)
        return dlock__fail(DLOCK_ETIMEDOUT,
                           "%s '%s' not %s: its primary %s is new (a failover) and in its "
                           "failover quarantine for %lld ms more%s",
                           w->h->what, w->h->name, b->qserver ? "taken" : "tried", b->quarantine,
                           (long long)b->ttl,
                           b->qserver ? " (recorded on the server)" : "");
    if (!w->t->busy_error)
        return dlock__fail(DLOCK_EPROTO, "'%s': busy answer to a call that cannot wait",
                           w->h->name);
    return w->t->busy_error(w->st, b);
}

/* Where the last busy answer says to wait: its own channel, the
 * operation's, or the handle's. 1 when that is not where it is. */
static int place(dlock__wait *w, const dlock__busy *b)
{
    dlock_client *c = w->h->c;
    const char *ch = w->h->channel;
    size_t len = w->h->clen;
    if (w->spec.quiet) {
        /* On no channel (dlock__waiter_join's NULL): nothing to move. */
        int moved = !w->joined;
        w->at = c;
        w->channel = NULL;
        w->clen = 0;
        return moved;
    }
    if (b->channel) {
        c = b->c ? b->c : c;
        ch = b->channel;
        len = b->clen;
    } else if (w->t->channel) {
        ch = w->t->channel(w->st, &len);
    }
    int moved = !w->joined || c != w->at || len != w->clen || memcmp(ch, w->channel, len) != 0;
    w->at = c;
    w->channel = ch;
    w->clen = len;
    return moved;
}

/* A quiet wait's next sleep (0: it has no back-off): the back-off grows by
 * its multiplier and a jitter of up to one ms per busy answer so far (so
 * waiters that started together drift apart), to its maximum, where it
 * stays. */
static int64_t backoff_step(dlock__wait *w)
{
    const dlock__wait_spec *s = &w->spec;
    if (!s->quiet || s->backoff_ms <= 0)
        return 0;
    int64_t step = w->next_sleep;
    if (step < s->backoff_max_ms) {
        if (w->fails < UINT16_MAX)
            w->fails++;
        int64_t mult = s->backoff_mult > 0 ? s->backoff_mult : 1;
        int64_t next = step > s->backoff_max_ms / mult ? s->backoff_max_ms : step * mult;
        uint32_t r;
        dlock__random(&r, sizeof(r));
        next += (int64_t)(r % (w->fails + 1));
        w->next_sleep = next < s->backoff_max_ms ? next : s->backoff_max_ms;
    }
    return step;
}

void dlock__wait_init(dlock__wait *w, const dlock__handle *h, const dlock__op_type *t, void *st,
                      const dlock__wait_spec *spec)
{
    w->h = h;
    w->t = t;
    w->st = st;
    w->waits = spec != NULL;
    if (spec)
        w->spec = *spec;
    else
        w->spec = (dlock__wait_spec){.wake = dlock__wake_all};
    w->attempts = w->seen_busy = w->joined = w->used_wake = w->first = 0;
    w->at = NULL;
    w->channel = NULL;
    w->clen = 0;
    w->start_us = 0;
    w->deadline = INT64_MAX;
    w->next_sleep = w->spec.backoff_ms;
    w->fails = 0;
    if (!spec)
        return;   /* a call that does not wait reads no clock */
    w->start_us = dlock__now_us();
    int64_t start = w->start_us / 1000, wait = w->spec.wait_ms;
    if (wait != DLOCK_WAIT_FOREVER && wait <= INT64_MAX - start)
        w->deadline = start + wait;
}

int64_t dlock__wait_waited(dlock__wait *w, int again)
{
    if (w->attempts == 0 || (again && !w->seen_busy)) {
        w->attempts = 1;
        return -1;
    }
    return dlock__now_ms() - w->start_us / 1000;
}

int dlock__wait_attempted(dlock__wait *w, int *rc, const dlock__busy *b)
{
    dlock__stats *st = &w->h->c->stats;
    if (*rc == DLOCK__BUSY && w->used_wake) {
        dlock__wakeups_wasted++;   /* woken by a message, and it was taken again */
        dlock__stats_count(st, DLOCK__ST_WAKEUPS_TAKEN, 1);
    }
    if (*rc == DLOCK_OK && w->used_wake)
        dlock__stats_time(st, DLOCK__H_HANDOFF_GAP, dlock__now_us() - w->w.took_us);
    if (*rc == DLOCK_OK && w->t->again && w->t->again(w->st))
        return DLOCK__W_ATTEMPT;
    if (*rc != DLOCK__BUSY)
        return DLOCK__W_DONE;
    if (!w->seen_busy) {
        w->seen_busy = 1;
        if (w->spec.wait_ms == 0) {
            *rc = busy_error(w, b);
            return DLOCK__W_DONE;
        }
        if (dlock_cancel_fired(w->spec.cancel)) {
            *rc = end_error(w, DLOCK_ECANCELED);
            return DLOCK__W_DONE;
        }
        dlock__stats_count(st, DLOCK__ST_WAITS, 1);
        place(w, b);
        return DLOCK__W_JOIN;
    }
    /* Woken by a budget, and others took part of it first: what is left may
     * serve a smaller local waiter the message did not wake. */
    if (w->used_wake && b->pass > 0)
        dlock__waiter_pass_budget(w->at->pubsub, &w->w, b->pass);
    w->used_wake = 0;
    int64_t now = dlock__now_ms();
    if (now >= w->deadline) {
        *rc = busy_error(w, b);
        return DLOCK__W_DONE;
    }
    dlock_client *was = w->at;
    if (place(w, b)) {
        /* Busy elsewhere now: subscribe there, then retry at once. */
        dlock__waiter_leave(was->pubsub, &w->w, 0);
        w->joined = 0;
        w->first = 0;
        return DLOCK__W_JOIN;
    }
    /* Follow each answer: a reserved turn can lapse or pass to another. */
    if (!!b->first != w->first) {
        w->first = !!b->first;
        dlock__waiter_set_first(w->at->pubsub, &w->w, w->first);
    }
    /* Sleep until a message, the busy answer's TTL or the deadline. */
    w->until = w->deadline;
    if (b->ttl >= 0 && now + b->ttl + 1 < w->until)
        w->until = now + b->ttl + 1;
    int64_t step = backoff_step(w);
    if (step > 0 && now + step < w->until)
        w->until = now + step;
    if (!w->w.subscribed && now + w->at->cfg.retry_delay_ms < w->until)
        w->until = now + w->at->cfg.retry_delay_ms;   /* pub/sub down: poll meanwhile */
    /* Freed without a message (a DEL, expiry, eviction): woken all the same. */
    dlock__waiter_watch(w->at->pubsub, &w->w, b->watch, b->wlen);
    return DLOCK__W_SLEEP;
}

int dlock__wait_join(dlock__wait *w)
{
    return dlock__waiter_join(w->at->pubsub, &w->w, w->channel, w->clen, w->spec.wake,
                              w->spec.need, w->spec.settles, w->deadline, w->spec.cancel);
}

int dlock__wait_join_async(dlock__wait *w, void (*notify)(void *arg), void *arg)
{
    return dlock__waiter_join_async(w->at->pubsub, &w->w, w->channel, w->clen, w->spec.wake,
                                    w->spec.need, w->spec.settles, w->spec.cancel, notify, arg);
}

int dlock__wait_joined(dlock__wait *w, int *rc)
{
    if (*rc != DLOCK_OK)
        return DLOCK__W_DONE;
    w->joined = 1;
    return DLOCK__W_ATTEMPT;
}

int dlock__wait_sleep(dlock__wait *w) { return dlock__waiter_wait(w->at->pubsub, &w->w, w->until); }

int dlock__wait_woke(dlock__wait *w, int ev, int *rc)
{
    if (ev == DLOCK__WAKE_DONE) {
        *rc = DLOCK_OK;   /* a settling message: the wait is over, no attempt needed */
        return DLOCK__W_DONE;
    }
    if (ev == DLOCK_ECANCELED || ev == DLOCK_ECLOSED) {
        *rc = end_error(w, ev);
        return DLOCK__W_DONE;
    }
    w->used_wake = ev == DLOCK__WAKE_MESSAGE;
    if (w->used_wake) {
        dlock__wakeups++;
        dlock__stats_count(&w->h->c->stats, DLOCK__ST_WAKEUPS, 1);
    }
    return DLOCK__W_ATTEMPT;
}

int dlock__wait_end(dlock__wait *w, int rc, dlock__op *op)
{
    /* Woken, then failed with an error before learning whether the object
     * was free: another waiter must get the chance. */
    if (w->joined)
        dlock__waiter_leave(w->at->pubsub, &w->w, rc != DLOCK_OK && w->used_wake);
    w->joined = 0;
    if (rc == DLOCK_OK && w->waits && !w->spec.awaits) {
        dlock__stats *st = &w->h->c->stats;
        dlock__stats_count(st, DLOCK__ST_ACQUISITIONS, 1);
        dlock__stats_time(st, DLOCK__H_ACQUIRE_WAIT, dlock__now_us() - w->start_us);
    }
    return rc != DLOCK_OK && w->seen_busy && w->t->give_up && w->t->give_up(w->st, rc, op);
}
