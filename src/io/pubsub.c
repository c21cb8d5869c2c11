/* The waiter table and the pub/sub connection that feeds it.
 *
 * Waiter table. One dlock__channel per channel that has waiters, keyed by name,
 * guarded by ps->mu (shared with user threads). A user thread joins a channel
 * and waits for its subscription to be confirmed before retrying its acquire:
 * an unlock published between its failed attempt and its retry is then either
 * seen by the retry or delivered as a message. The io thread alone sends
 * SUBSCRIBE/UNSUBSCRIBE; user threads mark channels dirty and post its sync
 * job.
 *
 * Channel states (io thread moves them, under mu):
 *   NONE --SUBSCRIBE sent--> SUBSCRIBING --confirmed--> SUBSCRIBED
 *   SUBSCRIBED --no waiters left, UNSUBSCRIBE sent--> UNSUBSCRIBING --confirmed--> NONE
 *   any --connection lost--> NONE (resubscribed on reconnect; waiters then all
 *   retry, as messages may have been missed)
 * A channel in NONE with no waiters is freed, so no channel stays subscribed
 * once its waiters are gone.
 *
 * Wake-ups. Each channel has a wake policy: how many waiters a message wakes
 * (the locks': "0", an unlock, wakes one; anything else wakes all; a
 * semaphore's count wakes waiters whose needs fit in it). A wake-up sets
 * w->woken, so one that arrives while its waiter is busy retrying is kept,
 * and a waiter that leaves with an unconsumed wake-up passes it on: no lost
 * wake-ups.
 *
 * Settling messages (a latch's zero, DLOCK__WAKE_ALL_DONE) end the waits of
 * the waiters that were armed when it came: a barrier PING, sent on the
 * pub/sub connection after the waiter joined, had been answered. Redis
 * answers in order on one connection, so such a message was published after
 * the waiter joined, hence during its wait. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/io.h"

enum { CH_NONE, CH_SUBSCRIBING, CH_SUBSCRIBED, CH_UNSUBSCRIBING };

struct dlock__channel {
    dlock__hnode hn;
    dlock__list waiters;
    dlock__list dirty_link;
    int dirty;
    int state;
    int nwaiters;
    int nclaimants;          /* waiters with w->claimant set */
    int resync;
    int sub_failed;          /* Redis refused the SUBSCRIBE: waiters poll instead */
    dlock__wake_policy wake;
    size_t len;
    char name[];
};

struct dlock__pubsub {
    dlock__netctx *ctx;
    dlock__loop *lp;
    dlock__router *router;
    dlock__job sync_job;     /* sync_channels on the io thread */

    pthread_mutex_t mu;
    dlock__map channels;
    dlock__list dirty;
    int closed;              /* under mu: waits return DLOCK_ECLOSED */

    uint64_t barriers_sent;  /* under mu: barrier PINGs written */
    uint64_t barriers_acked; /* under mu: the highest one answered */
    int barrier_wanted;      /* under mu: a settling waiter joined since the last one */

    /* io thread only */
    int stopping;
    dlock__aconn *sub;
};

static int ch_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const dlock__channel *ch = (const dlock__channel *)n;
    return ch->len == len && memcmp(ch->name, key, len) == 0;
}

static dlock__channel *ch_find(dlock__pubsub *ps, const char *name, size_t len)
{
    return (dlock__channel *)dlock__map_find(&ps->channels, dlock__hash(name, len), name, len);
}

static void ch_free(dlock__pubsub *ps, dlock__channel *ch)
{
    dlock__map_remove(&ps->channels, &ch->hn);
    if (ch->dirty)
        dlock__list_remove(&ch->dirty_link);
    free(ch);
}

/* Marks ch for the io thread's attention. Caller holds mu. */
static void ch_mark(dlock__pubsub *ps, dlock__channel *ch)
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
 * more than `budget`, in join order, except that a waiter holding the lock's
 * reservation goes first (the others would only be turned away); returns it,
 * or NULL when no waiter qualifies. Caller holds mu and signals. */
static dlock__waiter *pick_one(dlock__channel *ch, int64_t budget)
{
    dlock__waiter *first = NULL;
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &ch->waiters) {
        dlock__waiter *w = DLOCK__CONTAINER_OF(it, dlock__waiter, link);
        if (w->woken || w->need > budget)
            continue;
        if (w->claimant || ch->nclaimants == 0) {
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

int dlock__wake_lock(const char *msg, size_t len)
{
    return len == 1 && msg[0] == '0' ? 1 : DLOCK__WAKE_ALL;
}

/* A settling message ends the waits of the settling waiters armed by a
 * barrier answered before it came. Caller holds mu. */
static void settle_armed(dlock__pubsub *ps, dlock__channel *ch)
{
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &ch->waiters) {
        dlock__waiter *w = DLOCK__CONTAINER_OF(it, dlock__waiter, link);
        if (w->settle && ps->barriers_acked > w->join_seq)
            w->settled = 1;
    }
}

static void wake_all(dlock__channel *ch, int set_woken)
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

/* ---------------------------------------------------------- io thread */

static void sync_channels(dlock__pubsub *ps);

static dlock__channel *reply_channel(dlock__pubsub *ps, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return NULL;
    return ch_find(ps, r->element[1]->str, r->element[1]->len);
}

/* The channels of one SUBSCRIBE or UNSUBSCRIBE, for its replies. The names
 * point into channels that stay allocated while the command is in flight
 * (SUBSCRIBING / UNSUBSCRIBING channels are not freed until answered). */
typedef struct sub_cmd {
    dlock__pubsub *ps;
    int left;                /* replies still expected */
    int n;
    const char *names[];
} sub_cmd;

static sub_cmd *new_sub_cmd(dlock__pubsub *ps, const char **names, int n)
{
    sub_cmd *sc = malloc(sizeof(*sc) + (size_t)n * sizeof(char *));
    if (sc) {
        sc->ps = ps;
        sc->left = sc->n = n;
        memcpy(sc->names, names, (size_t)n * sizeof(char *));
    }
    return sc;
}

/* Redis refused a whole command (e.g. NOPERM for a channel): its channels go
 * back to NONE and their waiters fall back to polling at the retry delay. */
static void sub_refused(sub_cmd *sc, const redisReply *r, int subscribe)
{
    dlock__pubsub *ps = sc->ps;
    dlock__log(ps->ctx->cfg, DLOCK_LOG_ERROR, "%s of %d channel%s refused: %s; waiters poll instead",
               subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", sc->n, sc->n == 1 ? "" : "s", r->str);
    pthread_mutex_lock(&ps->mu);
    for (int i = 0; i < sc->n; i++) {
        dlock__channel *ch = ch_find(ps, sc->names[i], strlen(sc->names[i]));
        if (!ch || ch->state != (subscribe ? CH_SUBSCRIBING : CH_UNSUBSCRIBING))
            continue;
        ch->state = CH_NONE;
        if (subscribe) {
            ch->sub_failed = 1;
            wake_all(ch, 0);
        } else if (ch->nwaiters == 0) {
            ch_free(ps, ch);
        }
    }
    pthread_mutex_unlock(&ps->mu);
}

static void on_sub_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    sub_cmd *sc = ud;
    dlock__pubsub *ps = sc->ps;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        /* !r: the connection failed; on_sub_down resets every channel. */
        if (r)
            sub_refused(sc, r, 1);
        free(sc);
        return;
    }
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = reply_channel(ps, r);
    if (ch && ch->state == CH_SUBSCRIBING) {
        ch->state = CH_SUBSCRIBED;
        /* Waiters in join are waiting for this; after a reconnect, every waiter
         * retries since messages may have been missed meanwhile. */
        wake_all(ch, ch->resync);
        ch->resync = 0;
        if (ch->nwaiters == 0)
            ch_mark(ps, ch);
    }
    pthread_mutex_unlock(&ps->mu);
    if (--sc->left == 0)
        free(sc);
    sync_channels(ps);
}

static void on_unsub_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    sub_cmd *sc = ud;
    dlock__pubsub *ps = sc->ps;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        if (r)
            sub_refused(sc, r, 0);
        free(sc);
        return;
    }
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = reply_channel(ps, r);
    if (ch && ch->state == CH_UNSUBSCRIBING) {
        ch->state = CH_NONE;
        if (ch->nwaiters > 0)
            ch_mark(ps, ch);
        else
            ch_free(ps, ch);
    }
    pthread_mutex_unlock(&ps->mu);
    if (--sc->left == 0)
        free(sc);
    sync_channels(ps);
}

static void on_sub_push(dlock__aconn *ac, redisReply *r, void *ud)
{
    dlock__pubsub *ps = ud;
    /* message: [kind, channel, payload]; pmessage: [kind, pattern, channel, payload] */
    size_t ci = r->elements == 4 ? 2 : 1;
    redisReply *chr = r->element[ci], *msg = r->element[ci + 1];
    if (chr->type != REDIS_REPLY_STRING)
        return;
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = ch_find(ps, chr->str, chr->len);
    dlock__waiter *one = NULL;
    if (ch) {
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
            wake_all(ch, 1);
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

static void on_sub_ready(dlock__aconn *ac, void *ud)
{
    dlock__pubsub *ps = ud;
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets; i++)
        for (dlock__hnode *n = ps->channels.buckets[i]; n; n = n->next)
            ch_mark(ps, (dlock__channel *)n);
    pthread_mutex_unlock(&ps->mu);
    sync_channels(ps);
}

static void on_sub_down(dlock__aconn *ac, int status, void *ud)
{
    dlock__pubsub *ps = ud;
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets; i++) {
        dlock__hnode *n = ps->channels.buckets[i];
        while (n) {
            dlock__channel *ch = (dlock__channel *)n;
            n = n->next;
            ch->state = CH_NONE;
            if (ch->nwaiters == 0) {
                ch_free(ps, ch);
            } else {
                ch->resync = 1;
                wake_all(ch, 0);   /* let them see they are unsubscribed */
            }
        }
    }
    pthread_mutex_unlock(&ps->mu);
}

/* A barrier PING's answer: messages from now on were published after it. */
typedef struct barrier {
    dlock__pubsub *ps;
    uint64_t seq;
} barrier;

static void on_barrier_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    barrier *b = ud;
    if (r && r->type != REDIS_REPLY_ERROR) {
        pthread_mutex_lock(&b->ps->mu);
        if (b->seq > b->ps->barriers_acked)
            b->ps->barriers_acked = b->seq;
        pthread_mutex_unlock(&b->ps->mu);
    }
    free(b);
}

/* Writes a barrier PING if a settling waiter asked for one. Caller holds mu. */
static void send_barrier(dlock__pubsub *ps)
{
    if (!ps->barrier_wanted)
        return;
    barrier *b = malloc(sizeof(*b));
    const char *av[] = {"PING"};
    size_t len[] = {4};
    if (!b)
        return;   /* no barrier: settling waiters check after a wake-up instead */
    b->ps = ps;
    b->seq = ps->barriers_sent + 1;
    if (dlock__aconn_send(ps->sub, 1, av, len, 1, on_barrier_reply, b) != DLOCK_OK) {
        free(b);
        return;
    }
    ps->barriers_sent = b->seq;
    ps->barrier_wanted = 0;
}

/* Sends the SUBSCRIBE/UNSUBSCRIBE that dirty channels need, one command each,
 * then a barrier PING if one is wanted. */
static void sync_channels(dlock__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    if (ps->stopping || (dlock__list_empty(&ps->dirty) && !ps->barrier_wanted)) {
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    if (!ps->sub) {
        dlock__aconn_cbs cbs = {on_sub_ready, on_sub_down, on_sub_push, ps};
        const dlock__endpoint *ep = dlock__node_endpoint(dlock__router_node(ps->router, NULL, 0));
        if (dlock__aconn_new(&ps->sub, dlock__loop_uv(ps->lp), ps->ctx, ep, 1, &cbs) != DLOCK_OK) {
            pthread_mutex_unlock(&ps->mu);
            dlock__log(ps->ctx->cfg, DLOCK_LOG_ERROR, "out of memory creating the pub/sub connection");
            return;
        }
    }
    if (!dlock__aconn_ready(ps->sub)) {
        pthread_mutex_unlock(&ps->mu);
        dlock__aconn_start(ps->sub);   /* on_sub_ready comes back here */
        return;
    }
    size_t n = 0, cap = 16;
    const char **sub = malloc(cap * sizeof(*sub));
    const char **uns = malloc(cap * sizeof(*uns));
    size_t *sl = malloc(cap * sizeof(*sl)), *ul = malloc(cap * sizeof(*ul));
    int ns = 1, nu = 1;   /* slot 0 holds the command name */
    while (sub && uns && sl && ul && !dlock__list_empty(&ps->dirty)) {
        dlock__channel *ch = DLOCK__CONTAINER_OF(ps->dirty.next, dlock__channel, dirty_link);
        if ((size_t)(ns + nu) + 2 > cap) {
            cap *= 2;
            const char **a = realloc(sub, cap * sizeof(*a));
            if (a)
                sub = a;
            const char **b = realloc(uns, cap * sizeof(*b));
            if (b)
                uns = b;
            size_t *c1 = realloc(sl, cap * sizeof(*c1));
            if (c1)
                sl = c1;
            size_t *c2 = realloc(ul, cap * sizeof(*c2));
            if (c2)
                ul = c2;
            if (!a || !b || !c1 || !c2)
                break;
        }
        dlock__list_remove(&ch->dirty_link);
        ch->dirty = 0;
        n++;
        if (ch->nwaiters > 0 && ch->state == CH_NONE) {
            ch->state = CH_SUBSCRIBING;
            sub[ns] = ch->name;
            sl[ns++] = ch->len;
        } else if (ch->nwaiters == 0 && ch->state == CH_SUBSCRIBED) {
            ch->state = CH_UNSUBSCRIBING;
            uns[nu] = ch->name;
            ul[nu++] = ch->len;
        } else if (ch->nwaiters == 0 && ch->state == CH_NONE) {
            ch_free(ps, ch);
        }
        /* SUBSCRIBING / UNSUBSCRIBING: the confirmation will look again. */
    }
    /* Channel names stay valid after unlocking: only this thread frees channels. */
    pthread_mutex_unlock(&ps->mu);
    if (sub && uns && sl && ul) {
        dlock__aconn_cork(ps->sub);
        if (ns > 1) {
            sub[0] = "SUBSCRIBE";
            sl[0] = 9;
            sub_cmd *sc = new_sub_cmd(ps, sub + 1, ns - 1);
            if (!sc || dlock__aconn_send(ps->sub, ns, sub, sl, ns - 1, on_sub_reply, sc) != 0)
                free(sc);   /* not sent: the channels stay SUBSCRIBING until on_sub_down */
        }
        if (nu > 1) {
            uns[0] = "UNSUBSCRIBE";
            ul[0] = 11;
            sub_cmd *sc = new_sub_cmd(ps, uns + 1, nu - 1);
            if (!sc || dlock__aconn_send(ps->sub, nu, uns, ul, nu - 1, on_unsub_reply, sc) != 0)
                free(sc);
        }
        pthread_mutex_lock(&ps->mu);
        send_barrier(ps);
        pthread_mutex_unlock(&ps->mu);
        dlock__aconn_uncork(ps->sub);
    } else {
        dlock__log(ps->ctx->cfg, DLOCK_LOG_ERROR, "out of memory updating subscriptions");
    }
    free(sub);
    free(uns);
    free(sl);
    free(ul);
}

static void on_sync_job(void *arg) { sync_channels(arg); }

/* Stop hook (io thread): the pub/sub connection goes; channels stay until free. */
static void on_stop(void *arg)
{
    dlock__pubsub *ps = arg;
    pthread_mutex_lock(&ps->mu);
    ps->stopping = 1;
    pthread_mutex_unlock(&ps->mu);
    if (ps->sub) {
        dlock__aconn_close(ps->sub, NULL, NULL);
        ps->sub = NULL;
    }
}

/* ----------------------------------------------------------- lifecycle */

int dlock__pubsub_new(dlock__pubsub **out, dlock__loop *lp, dlock__netctx *ctx,
                      dlock__router *router)
{
    dlock__pubsub *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    ps->ctx = ctx;
    ps->lp = lp;
    ps->router = router;
    dlock__job_init(&ps->sync_job, on_sync_job, ps);
    pthread_mutex_init(&ps->mu, NULL);
    dlock__map_init(&ps->channels, ch_eq);
    dlock__list_init(&ps->dirty);
    int rc = dlock__loop_on_stop(lp, on_stop, ps);
    if (rc != DLOCK_OK) {
        dlock__pubsub_free(ps);
        return rc;
    }
    *out = ps;
    return DLOCK_OK;
}

void dlock__pubsub_shutdown(dlock__pubsub *ps)
{
    if (!ps)
        return;
    pthread_mutex_lock(&ps->mu);
    ps->closed = 1;
    for (size_t i = 0; i < ps->channels.nbuckets; i++)
        for (dlock__hnode *n = ps->channels.buckets[i]; n; n = n->next)
            wake_all((dlock__channel *)n, 0);
    pthread_mutex_unlock(&ps->mu);
}

void dlock__pubsub_free(dlock__pubsub *ps)
{
    if (!ps)
        return;
    for (size_t i = 0; i < ps->channels.nbuckets; i++) {
        dlock__hnode *n = ps->channels.buckets[i];
        while (n) {
            dlock__hnode *next = n->next;
            free(n);
            n = next;
        }
    }
    dlock__map_free(&ps->channels);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
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

/* Registers w on its channel, creating the channel if needed. Caller holds
 * mu; DLOCK_OK or DLOCK_ENOMEM. */
static int enter(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                 dlock__wake_policy wake)
{
    dlock__channel *ch = ch_find(ps, channel, len);
    if (!ch) {
        ch = malloc(sizeof(*ch) + len + 1);
        if (!ch)
            return DLOCK_ENOMEM;
        memset(ch, 0, sizeof(*ch));
        dlock__list_init(&ch->waiters);
        dlock__list_init(&ch->dirty_link);
        ch->len = len;
        ch->wake = wake ? wake : dlock__wake_lock;
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
    if (w->settle) {
        /* Armed by the answer to a PING written after this point. */
        w->join_seq = ps->barriers_sent;
        ps->barrier_wanted = 1;
    }
    if (ch->state != CH_SUBSCRIBED) {
        ch->sub_failed = 0;
        ch_mark(ps, ch);
    }
    if (ch->state != CH_SUBSCRIBED || w->settle)
        dlock__loop_post(ps->lp, &ps->sync_job);
    return DLOCK_OK;
}

int dlock__waiter_join_async(dlock__pubsub *ps, dlock__waiter *w, const char *channel,
                             size_t len, dlock__wake_policy wake, int64_t need, int settle,
                             dlock_cancel *cancel, void (*notify)(void *arg), void *arg)
{
    memset(w, 0, sizeof(*w));
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

int dlock__waiter_poll(dlock__pubsub *ps, dlock__waiter *w, int *ready)
{
    int rc = 0;
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = w->ch;
    *ready = ch->state == CH_SUBSCRIBED || ch->sub_failed;
    if (ps->closed) {
        rc = DLOCK_ECLOSED;
    } else if (dlock_cancel_fired(w->cancel)) {
        rc = DLOCK_ECANCELED;
    } else if (w->woken) {
        w->woken = 0;
        rc = w->settled ? DLOCK__WAKE_DONE : DLOCK__WAKE_MESSAGE;
    }
    /* As dlock__waiter_wait: a dropped subscription means polling meanwhile. */
    w->subscribed = ch->state == CH_SUBSCRIBED;
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
        if (w->subscribed && w->ch->state != CH_SUBSCRIBED) {
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
    if (!w->subscribed && w->ch->state == CH_SUBSCRIBED)
        w->subscribed = 1;
    pthread_mutex_unlock(&ps->mu);
    return rc;
}

void dlock__waiter_set_claimant(dlock__pubsub *ps, dlock__waiter *w, int on)
{
    pthread_mutex_lock(&ps->mu);
    if (w->claimant != !!on) {
        w->claimant = !!on;
        w->ch->nclaimants += on ? 1 : -1;
    }
    pthread_mutex_unlock(&ps->mu);
}

void dlock__waiter_pass_budget(dlock__pubsub *ps, dlock__waiter *w, int64_t budget)
{
    pthread_mutex_lock(&ps->mu);
    /* w itself needs more than it saw, so the budget never picks it. */
    wake_budget(w->ch, budget);
    pthread_mutex_unlock(&ps->mu);
}

void dlock__waiter_leave(dlock__pubsub *ps, dlock__waiter *w, int pass_wake)
{
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = w->ch;
    dlock__list_remove(&w->link);
    ch->nwaiters--;
    if (w->claimant)
        ch->nclaimants--;
    if (w->woken || pass_wake)
        wake_one(ch);   /* pass on a wake-up this waiter did not use */
    if (ch->nwaiters == 0 && !ps->closed) {
        ch_mark(ps, ch);
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

size_t dlock__pubsub_waiters(dlock__pubsub *ps, const char *channel, size_t len)
{
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = ch_find(ps, channel, len);
    size_t n = ch ? (size_t)ch->nwaiters : 0;
    pthread_mutex_unlock(&ps->mu);
    return n;
}
