/* The waiter table: one dlock__channel per channel that has waiters, keyed
 * by name, guarded by ps->mu (shared with user threads). A user thread joins
 * a channel and waits for its subscription to be confirmed before retrying
 * its acquire: an unlock published between its failed attempt and its retry
 * is then either seen by the retry or delivered as a message. The io thread
 * alone subscribes (pubsub.c); user threads mark channels dirty and post its
 * sync job.
 *
 * Wake-ups. Each channel has a wake policy, its waiting type's: how many
 * waiters a message wakes (one, all, or a budget of units: a semaphore's
 * count wakes waiters whose needs fit in it). A waiter may ask to go first
 * (dlock__waiter_set_first: a lock's reserved turn): a message that wakes
 * fewer than all picks it before the others. A wake-up sets w->woken, so one
 * that arrives while its waiter is busy retrying is kept, and a waiter that
 * leaves with an unconsumed wake-up passes it on: no lost wake-ups.
 *
 * Settling messages (a latch's zero, DLOCK__WAKE_ALL_DONE) end the waits of
 * the waiters that were armed when it came: a barrier PING, sent on the
 * pub/sub connection after the waiter joined, had been answered. Redis
 * answers in order on one connection, so such a message was published after
 * the waiter joined, hence during its wait. */
#include <stdlib.h>
#include <string.h>

#include "io/pubsub_int.h"

int dlock__ps_channel_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const dlock__channel *ch = (const dlock__channel *)n;
    return ch->len == len && memcmp(ch->name, key, len) == 0;
}

dlock__channel *dlock__ps_find(dlock__pubsub *ps, const char *name, size_t len)
{
    return (dlock__channel *)dlock__map_find(&ps->channels, dlock__hash(name, len), name, len);
}

void dlock__ps_free_channel(dlock__pubsub *ps, dlock__channel *ch)
{
    dlock__map_remove(&ps->channels, &ch->hn);
    if (ch->dirty)
        dlock__list_remove(&ch->dirty_link);
    free(ch);
}

void dlock__ps_mark(dlock__pubsub *ps, dlock__channel *ch)
{
    if (!ch->dirty) {
        ch->dirty = 1;
        dlock__list_push_back(&ps->dirty, &ch->dirty_link);
    }
}

/* Tells a waiter to look: a sleeping thread is signalled, an asynchronous
 * waiter notified. Caller holds mu. */
static void signal_w(dlock__waiter *w)
{
    if (w->notify)
        w->notify(w->notify_arg);
    else
        pthread_cond_signal(&w->cv);
}

/* Gives a wake-up to the first waiter that has none pending and needs no
 * more than `budget`, in join order, except that a waiter that asked to go
 * first does (a lock's reserved turn: the others would only be turned away);
 * returns it, or NULL when no waiter qualifies. Caller holds mu and signals. */
static dlock__waiter *pick_one(dlock__channel *ch, int64_t budget)
{
    dlock__waiter *first = NULL;
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &ch->waiters) {
        dlock__waiter *w = DLOCK__CONTAINER_OF(it, dlock__waiter, link);
        if (w->woken || w->need > budget)
            continue;
        if (w->first || ch->nfirst == 0) {
            first = w;
            break;
        }
        if (!first)
            first = w;
    }
    if (first) {
        first->woken = 1;
        first->woken_us = dlock__now_us();
    }
    return first;
}

/* Passes on a wake-up a leaving waiter did not use: to the next waiter
 * whatever it needs (the budget that woke the leaver is not known here). */
static void wake_one(dlock__channel *ch)
{
    dlock__waiter *w = pick_one(ch, INT64_MAX);
    if (w)
        signal_w(w);
}

/* A budget of several units: waiters in join order while their needs fit. */
static void wake_budget(dlock__channel *ch, int64_t budget)
{
    dlock__waiter *w;
    while (budget > 0 && (w = pick_one(ch, budget))) {
        budget -= w->need;
        signal_w(w);
    }
}

/* A settling message ends the waits of the settling waiters armed by a
 * barrier answered before it came. Caller holds mu. */
static void settle_armed(dlock__pubsub *ps, dlock__channel *ch)
{
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &ch->waiters) {
        dlock__waiter *w = DLOCK__CONTAINER_OF(it, dlock__waiter, link);
        /* Armed: it joined before the subscription was asked for (so every
         * message since came after), or a barrier PING written on the
         * channel's connection after it joined was answered. */
        if (w->settle && (!w->join_pc || w->join_pc != (void *)ch->pc ||
                          ch->pc->barriers_acked > w->join_seq))
            w->settled = 1;
    }
}

void dlock__ps_wake_all(dlock__channel *ch, int set_woken)
{
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &ch->waiters) {
        dlock__waiter *w = DLOCK__CONTAINER_OF(it, dlock__waiter, link);
        if (set_woken) {
            w->woken = 1;
            w->woken_us = dlock__now_us();
        }
        signal_w(w);
    }
}
/* An unlock-like message (a budget of one) wakes one waiter; signalled after
 * mu is released (see dlock__ps_deliver). */
void dlock__ps_deliver(dlock__pubsub *ps, const char *chr, size_t clen, const redisReply *msg)
{
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = dlock__ps_find(ps, chr, clen);
    dlock__waiter *one = NULL;
    if (ch) {
        ch->msg_ms = dlock__now_ms();
        if (msg->type == REDIS_REPLY_STRING) {
            dlock__list *it;
            DLOCK__LIST_FOREACH(it, &ch->waiters) {
                dlock__waiter *w = DLOCK__CONTAINER_OF(it, dlock__waiter, link);
                if (w->on_msg)
                    w->on_msg(msg->str, msg->len, w->notify_arg);
            }
        }
        int n = msg->type == REDIS_REPLY_STRING ? ch->wake(msg->str, msg->len) : DLOCK__WAKE_ALL;
        if (n == 1) {
            one = pick_one(ch, 1);
            if (one && one->notify) {
                signal_w(one);   /* no thread to hand the core to */
                one = NULL;
            } else if (one) {
                one->pins++;
            }
        } else if (n == DLOCK__WAKE_ALL || n == DLOCK__WAKE_ALL_DONE) {
            if (n == DLOCK__WAKE_ALL_DONE)
                settle_armed(ps, ch);
            dlock__ps_wake_all(ch, 1);
        } else if (n > 1) {
            wake_budget(ch, n);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    if (one) {
        /* The unlock message, the handoff's hot path: signal after unlocking,
         * so that the waiter, woken on this core, does not run only to block on
         * mu at once. The pin keeps its cv alive until then (see leave). */
        pthread_cond_signal(&one->cv);
        pthread_mutex_lock(&ps->mu);
        if (--one->pins == 0 && !one->ch)
            pthread_cond_broadcast(&one->cv);   /* it is in leave, waiting for us */
        pthread_mutex_unlock(&ps->mu);
    }
}

/* A channel created with no policy: every message wakes every waiter. */
static int wake_all_policy(const char *msg, size_t len)
{
    (void)msg;
    (void)len;
    return DLOCK__WAKE_ALL;
}

void dlock__pubsub_shutdown(dlock__pubsub *ps)
{
    if (!ps)
        return;
    pthread_mutex_lock(&ps->mu);
    ps->closed = 1;
    DLOCK__MAP_EACH(&ps->channels, n)
        dlock__ps_wake_all((dlock__channel *)n, 0);
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &ps->quiet)
        signal_w(DLOCK__CONTAINER_OF(it, dlock__waiter, link));
    pthread_mutex_unlock(&ps->mu);
}

/* ------------------------------------------------------------- waiters */

static int enter(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                 dlock__wake_policy wake);

int dlock__waiter_join(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                       dlock__wake_policy wake, int64_t need, int settle, int64_t deadline_ms,
                       dlock_cancel *cancel)
{
    memset(w, 0, sizeof(*w));
    w->need = need > 1 ? need : 1;
    w->settle = settle;
    if (dlock__cond_init(&w->cv) != 0)
        return dlock__fail(DLOCK_ESYS, "cannot create a condition variable");
    w->cancel = cancel;
    dlock__cancel_attach(cancel, &w->creg, &ps->mu, &w->cv);

    pthread_mutex_lock(&ps->mu);
    if (ps->closed) {
        pthread_mutex_unlock(&ps->mu);
        dlock__cancel_detach(cancel, &w->creg);
        pthread_cond_destroy(&w->cv);
        return dlock__fail(DLOCK_ECLOSED, "client is closing");
    }
    if (enter(ps, w, channel, len, wake) != DLOCK_OK) {
        pthread_mutex_unlock(&ps->mu);
        dlock__cancel_detach(cancel, &w->creg);
        pthread_cond_destroy(&w->cv);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    dlock__channel *ch = w->ch;
    if (!ch) {
        pthread_mutex_unlock(&ps->mu);   /* on no channel: nothing to subscribe */
        return DLOCK_OK;
    }
    /* Wait for the subscription, at most the command timeout: past it the
     * caller falls back to retrying at the retry delay. */
    int64_t until = dlock__now_ms() + ps->ctx->cfg->command_timeout_ms;
    if (deadline_ms < until)
        until = deadline_ms;
    struct timespec ts;
    dlock__abstime(until, &ts);
    int rc = DLOCK_OK;
    while (ch->state != CH_SUBSCRIBED && !ch->sub_failed) {
        if (ps->closed) {
            rc = DLOCK_ECLOSED;
            break;
        }
        if (dlock_cancel_fired(cancel)) {
            rc = DLOCK_ECANCELED;
            break;
        }
        if (dlock__now_ms() >= until)
            break;
        pthread_cond_timedwait(&w->cv, &ps->mu, &ts);
    }
    w->subscribed = ch->state == CH_SUBSCRIBED;
    pthread_mutex_unlock(&ps->mu);
    if (rc != DLOCK_OK) {
        dlock__waiter_leave(ps, w, 0);
        return dlock__fail(rc, rc == DLOCK_ECLOSED ? "client is closing" : "cancelled");
    }
    return DLOCK_OK;
}

/* Registers w on its channel, creating the channel if needed (channel
 * NULL: on no channel, subscribed to nothing). Caller holds mu; DLOCK_OK or
 * DLOCK_ENOMEM. */
static int enter(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                 dlock__wake_policy wake)
{
    if (!channel) {
        w->ch = NULL;
        w->subscribed = 1;   /* nothing to wait for, nothing that may drop */
        dlock__list_push_back(&ps->quiet, &w->link);
        return DLOCK_OK;
    }
    dlock__channel *ch = dlock__ps_find(ps, channel, len);
    if (!ch) {
        ch = malloc(sizeof(*ch) + len + 1);
        if (!ch)
            return DLOCK_ENOMEM;
        memset(ch, 0, sizeof(*ch));
        dlock__list_init(&ch->waiters);
        dlock__list_init(&ch->dirty_link);
        ch->len = len;
        ch->wake = wake ? wake : wake_all_policy;
        memcpy(ch->name, channel, len);
        ch->name[len] = '\0';
        ch->hn.hash = dlock__hash(channel, len);
        if (dlock__map_insert(&ps->channels, &ch->hn) != 0) {
            free(ch);
            return DLOCK_ENOMEM;
        }
    }
    w->ch = ch;
    dlock__list_push_back(&ch->waiters, &w->link);
    ch->nwaiters++;
    if (w->settle && ch->pc) {
        /* Armed by the answer to a PING written on the channel's connection
         * after this point. (A channel not subscribed yet arms it at once:
         * its subscription is asked for after this point.) */
        w->join_pc = ch->pc;
        w->join_seq = ch->pc->barriers_sent;
        ch->pc->barrier_wanted = 1;
    }
    if (ch->state != CH_SUBSCRIBED) {
        ch->sub_failed = 0;
        dlock__ps_mark(ps, ch);
    }
    if (ch->state != CH_SUBSCRIBED || w->settle)
        dlock__loop_post(ps->lp, &ps->sync_job);
    return DLOCK_OK;
}

static int join_async(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                      dlock__wake_policy wake, int64_t need, int settle, dlock_cancel *cancel,
                      void (*on_msg)(const char *msg, size_t len, void *arg),
                      void (*notify)(void *arg), void *arg)
{
    memset(w, 0, sizeof(*w));
    w->on_msg = on_msg;
    w->need = need > 1 ? need : 1;
    w->settle = settle;
    w->notify = notify;
    w->notify_arg = arg;
    w->cancel = cancel;
    dlock__cancel_attach_fn(cancel, &w->creg, notify, arg);
    pthread_mutex_lock(&ps->mu);
    int rc = ps->closed ? DLOCK_ECLOSED : enter(ps, w, channel, len, wake);
    pthread_mutex_unlock(&ps->mu);
    if (rc != DLOCK_OK) {
        dlock__cancel_detach(cancel, &w->creg);
        return dlock__fail(rc, rc == DLOCK_ECLOSED ? "client is closing" : "out of memory");
    }
    return DLOCK_OK;
}

int dlock__waiter_join_async(dlock__pubsub *ps, dlock__waiter *w, const char *channel,
                             size_t len, dlock__wake_policy wake, int64_t need, int settle,
                             dlock_cancel *cancel, void (*notify)(void *arg), void *arg)
{
    return join_async(ps, w, channel, len, wake, need, settle, cancel, NULL, notify, arg);
}

int dlock__waiter_listen(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                         void (*on_msg)(const char *msg, size_t len, void *arg),
                         void (*notify)(void *arg), void *arg)
{
    return join_async(ps, w, channel, len, NULL, 1, 0, NULL, on_msg, notify, arg);
}

int dlock__waiter_poll(dlock__pubsub *ps, dlock__waiter *w, int *ready)
{
    int rc = 0;
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = w->ch;
    *ready = !ch || ch->state == CH_SUBSCRIBED || ch->sub_failed;
    if (ps->closed) {
        rc = DLOCK_ECLOSED;
    } else if (dlock_cancel_fired(w->cancel)) {
        rc = DLOCK_ECANCELED;
    } else if (w->woken) {
        w->woken = 0;
        w->took_us = w->woken_us;
        rc = w->settled ? DLOCK__WAKE_DONE : DLOCK__WAKE_MESSAGE;
    }
    /* As dlock__waiter_wait: a dropped subscription means polling meanwhile. */
    w->subscribed = !ch || ch->state == CH_SUBSCRIBED;
    pthread_mutex_unlock(&ps->mu);
    return rc;
}

int dlock__waiter_wait(dlock__pubsub *ps, dlock__waiter *w, int64_t until_ms)
{
    struct timespec ts;
    dlock__abstime(until_ms, &ts);
    int rc;
    pthread_mutex_lock(&ps->mu);
    for (;;) {
        if (w->woken) {
            w->woken = 0;
            w->took_us = w->woken_us;
            rc = w->settled ? DLOCK__WAKE_DONE : DLOCK__WAKE_MESSAGE;
            break;
        }
        if (ps->closed) {
            rc = DLOCK_ECLOSED;
            break;
        }
        if (dlock_cancel_fired(w->cancel)) {
            rc = DLOCK_ECANCELED;
            break;
        }
        if (w->subscribed && w->ch && w->ch->state != CH_SUBSCRIBED) {
            /* The subscription dropped, most often because the server is going
             * away: a retry now would likely be written to a dying server and
             * end in DLOCK_EUNKNOWN. Poll at the retry delay instead; the
             * resubscription wakes every waiter (messages may have been missed). */
            w->subscribed = 0;
            int64_t poll = dlock__now_ms() + ps->ctx->cfg->retry_delay_ms;
            if (poll < until_ms) {
                until_ms = poll;
                dlock__abstime(until_ms, &ts);
            }
            continue;
        }
        if (dlock__now_ms() >= until_ms) {
            rc = DLOCK__WAKE_TIMEOUT;
            break;
        }
        pthread_cond_timedwait(&w->cv, &ps->mu, &ts);
    }
    if (!w->subscribed && w->ch && w->ch->state == CH_SUBSCRIBED)
        w->subscribed = 1;
    pthread_mutex_unlock(&ps->mu);
    return rc;
}

void dlock__waiter_set_first(dlock__pubsub *ps, dlock__waiter *w, int on)
{
    pthread_mutex_lock(&ps->mu);
    if (w->ch && w->first != !!on) {
        w->first = !!on;
        w->ch->nfirst += on ? 1 : -1;
    }
    pthread_mutex_unlock(&ps->mu);
}

void dlock__waiter_pass_budget(dlock__pubsub *ps, dlock__waiter *w, int64_t budget)
{
    pthread_mutex_lock(&ps->mu);
    /* w itself needs more than it saw, so the budget never picks it. */
    if (w->ch)
        wake_budget(w->ch, budget);
    pthread_mutex_unlock(&ps->mu);
}

void dlock__waiter_leave(dlock__pubsub *ps, dlock__waiter *w, int pass_wake)
{
    dlock__waiter_watch(ps, w, NULL, 0);
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = w->ch;
    dlock__list_remove(&w->link);
    if (!ch) {
        pthread_mutex_unlock(&ps->mu);   /* on no channel: no wake-up to pass on */
        dlock__cancel_detach(w->cancel, &w->creg);
        if (!w->notify)
            pthread_cond_destroy(&w->cv);
        return;
    }
    ch->nwaiters--;
    if (w->first)
        ch->nfirst--;
    if (w->woken || pass_wake)
        wake_one(ch);   /* pass on a wake-up this waiter did not use */
    if (ch->nwaiters == 0 && !ps->closed) {
        dlock__ps_mark(ps, ch);
        dlock__loop_post(ps->lp, &ps->sync_job);
    }
    /* An unlock message's signal may still be on its way (on_sub_push). */
    w->ch = NULL;
    while (w->pins > 0)
        pthread_cond_wait(&w->cv, &ps->mu);
    pthread_mutex_unlock(&ps->mu);
    dlock__cancel_detach(w->cancel, &w->creg);
    if (!w->notify)
        pthread_cond_destroy(&w->cv);
}

uint64_t dlock__pubsub_keywatch_wakes(dlock__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    uint64_t n = ps->keywatch_wakes;
    pthread_mutex_unlock(&ps->mu);
    return n;
}

size_t dlock__pubsub_waiters(dlock__pubsub *ps, const char *channel, size_t len)
{
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = dlock__ps_find(ps, channel, len);
    size_t n = ch ? (size_t)ch->nwaiters : 0;
    pthread_mutex_unlock(&ps->mu);
    return n;
}
