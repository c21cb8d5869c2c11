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
#include "net/cluster.h"

enum { CH_NONE, CH_SUBSCRIBING, CH_SUBSCRIBED, CH_UNSUBSCRIBING };

/* The pub/sub connection to one node. One in all on a single server (and a
 * cluster without sharded pub/sub: a PUBLISH reaches every node); one per
 * node serving a waited-on channel's slot with sharded pub/sub. Created on
 * the io thread, freed with the pubsub; the fields marked mu are read by user
 * threads joining a channel. */
typedef struct psconn {
    dlock__pubsub *ps;
    dlock__node *node;
    dlock__aconn *ac;
    uint64_t barriers_sent;  /* under mu: barrier PINGs written */
    uint64_t barriers_acked; /* under mu: the highest one answered */
    int barrier_wanted;      /* under mu: a settling waiter joined since the last one */
    /* io thread: this sync's commands */
    const char **sub, **uns;
    size_t *sl, *ul;
    int ns, nu, cap;
} psconn;

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
    psconn *pc;              /* where it is (being) subscribed; NULL in CH_NONE */
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

    int sharded;             /* SSUBSCRIBE on the channel's slot's node */
    int dynamic;             /* channels may move between nodes (sentinel, cluster) */
    uint64_t gen;            /* io thread: the router generation last looked at */

    /* io thread only (conns is read under mu too: it only grows, under mu) */
    int stopping;
    uv_timer_t retry;        /* channels left unsubscribed try again */
    int retry_inited;
    psconn **conns;
    size_t nconns;
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
        /* Armed: it joined before the subscription was asked for (so every
         * message since came after), or a barrier PING written on the
         * channel's connection after it joined was answered. */
        if (w->settle && (!w->join_pc || w->join_pc != (void *)ch->pc ||
                          ch->pc->barriers_acked > w->join_seq))
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
static void retry_later(dlock__pubsub *ps);

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
    psconn *pc;
    int left;                /* replies still expected */
    int n;
    const char *names[];
} sub_cmd;

static sub_cmd *new_sub_cmd(psconn *pc, const char **names, int n)
{
    sub_cmd *sc = malloc(sizeof(*sc) + (size_t)n * sizeof(char *));
    if (sc) {
        sc->ps = pc->ps;
        sc->pc = pc;
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
    dlock__log(ps->ctx->cfg, DLOCK_LOG_ERROR,
               "%s of %d channel%s on %s refused: %s; waiters poll instead",
               subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", sc->n, sc->n == 1 ? "" : "s",
               dlock__node_addr(sc->pc->node), r->str);
    if (dlock__redis_classify(r->str) == DLOCK__RERR_MOVED)
        dlock__router_stale(ps->router);   /* the next try goes where the map says */
    pthread_mutex_lock(&ps->mu);
    for (int i = 0; i < sc->n; i++) {
        dlock__channel *ch = ch_find(ps, sc->names[i], strlen(sc->names[i]));
        if (!ch || ch->pc != sc->pc || ch->state != (subscribe ? CH_SUBSCRIBING : CH_UNSUBSCRIBING))
            continue;
        ch->state = CH_NONE;
        ch->pc = NULL;
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
    if (ch && ch->pc == sc->pc && ch->state == CH_SUBSCRIBING) {
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
    if (ch && ch->pc == sc->pc && ch->state == CH_UNSUBSCRIBING) {
        ch->state = CH_NONE;
        ch->pc = NULL;
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

/* The server dropped a sharded subscription (its slot moved to another
 * node): the channel is subscribed again where the map then says, and its
 * waiters retry once it is (messages may have been missed). */
static void on_dropped(dlock__pubsub *ps, psconn *pc, const redisReply *chr)
{
    dlock__router_stale(ps->router);
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = ch_find(ps, chr->str, chr->len);
    if (ch && ch->pc == pc && ch->state == CH_SUBSCRIBED) {
        ch->state = CH_NONE;
        ch->pc = NULL;
        if (ch->nwaiters == 0) {
            ch_free(ps, ch);
        } else {
            ch->resync = 1;
            wake_all(ch, 0);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    retry_later(ps);   /* after the map is read again */
}

static void on_sub_push(dlock__aconn *ac, redisReply *r, void *ud)
{
    dlock__pubsub *ps = ((psconn *)ud)->ps;
    if (strcmp(r->element[0]->str, "sunsubscribe") == 0) {
        if (r->element[1]->type == REDIS_REPLY_STRING)
            on_dropped(ps, ud, r->element[1]);
        return;
    }
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
    dlock__pubsub *ps = ((psconn *)ud)->ps;
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets; i++)
        for (dlock__hnode *n = ps->channels.buckets[i]; n; n = n->next)
            if (((dlock__channel *)n)->state == CH_NONE)
                ch_mark(ps, (dlock__channel *)n);
    pthread_mutex_unlock(&ps->mu);
    sync_channels(ps);
}

static void on_sub_down(dlock__aconn *ac, int status, void *ud)
{
    psconn *pc = ud;
    dlock__pubsub *ps = pc->ps;
    /* The node may be gone for good (a failover): the channels' next
     * subscription goes where the map then says. */
    if (ps->dynamic)
        dlock__router_stale(ps->router);
    int resubscribe = 0;
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets; i++) {
        dlock__hnode *n = ps->channels.buckets[i];
        while (n) {
            dlock__channel *ch = (dlock__channel *)n;
            n = n->next;
            if (ch->pc != pc)
                continue;
            ch->state = CH_NONE;
            ch->pc = NULL;
            resubscribe |= ch->nwaiters > 0;
            if (ch->nwaiters == 0) {
                ch_free(ps, ch);
            } else {
                ch->resync = 1;
                wake_all(ch, 0);   /* let them see they are unsubscribed */
            }
        }
    }
    pthread_mutex_unlock(&ps->mu);
    /* The reconnect's on_sub_ready subscribes them again; if the node stays
     * away, the retry asks the router where they belong now. */
    if (resubscribe && ps->dynamic)
        retry_later(ps);
}

/* A barrier PING's answer: messages from now on were published after it. */
typedef struct barrier {
    psconn *pc;
    uint64_t seq;
} barrier;

static void on_barrier_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    barrier *b = ud;
    if (r && r->type != REDIS_REPLY_ERROR) {
        pthread_mutex_lock(&b->pc->ps->mu);
        if (b->seq > b->pc->barriers_acked)
            b->pc->barriers_acked = b->seq;
        pthread_mutex_unlock(&b->pc->ps->mu);
    }
    free(b);
}

/* Writes a barrier PING on pc if a settling waiter asked for one. Caller
 * holds mu. */
static void send_barrier(psconn *pc)
{
    if (!pc->barrier_wanted || !dlock__aconn_ready(pc->ac))
        return;
    barrier *b = malloc(sizeof(*b));
    const char *av[] = {"PING"};
    size_t len[] = {4};
    if (!b)
        return;   /* no barrier: settling waiters check after a wake-up instead */
    b->pc = pc;
    b->seq = pc->barriers_sent + 1;
    if (dlock__aconn_send(pc->ac, 1, av, len, 1, on_barrier_reply, b) != DLOCK_OK) {
        free(b);
        return;
    }
    pc->barriers_sent = b->seq;
    pc->barrier_wanted = 0;
}

/* The pub/sub connection to node n, created (not started) when new. Caller
 * holds mu (conns grows under it). NULL when out of memory. */
static psconn *conn_for(dlock__pubsub *ps, dlock__node *n)
{
    for (size_t i = 0; i < ps->nconns; i++)
        if (ps->conns[i]->node == n)
            return ps->conns[i];
    psconn **a = realloc(ps->conns, (ps->nconns + 1) * sizeof(*a));
    if (!a)
        return NULL;
    ps->conns = a;
    psconn *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return NULL;
    pc->ps = ps;
    pc->node = n;
    dlock__aconn_cbs cbs = {on_sub_ready, on_sub_down, on_sub_push, pc};
    if (dlock__aconn_new(&pc->ac, dlock__loop_uv(ps->lp), ps->ctx, dlock__node_endpoint(n), 1,
                         &cbs) != DLOCK_OK) {
        free(pc);
        return NULL;
    }
    ps->conns[ps->nconns++] = pc;
    return pc;
}

/* Appends a channel name to pc's SUBSCRIBE (which = 0) or UNSUBSCRIBE list;
 * slot 0 of each holds the command. -1 when out of memory. */
static int add_name(psconn *pc, int which, const char *name, size_t len)
{
    if (pc->ns + pc->nu + 2 > pc->cap) {
        int cap = pc->cap ? pc->cap * 2 : 16;
        const char **a = realloc(pc->sub, (size_t)cap * sizeof(*a));
        if (a)
            pc->sub = a;
        const char **b = realloc(pc->uns, (size_t)cap * sizeof(*b));
        if (b)
            pc->uns = b;
        size_t *c1 = realloc(pc->sl, (size_t)cap * sizeof(*c1));
        if (c1)
            pc->sl = c1;
        size_t *c2 = realloc(pc->ul, (size_t)cap * sizeof(*c2));
        if (c2)
            pc->ul = c2;
        if (!a || !b || !c1 || !c2)
            return -1;
        pc->cap = cap;
    }
    if (which == 0) {
        pc->sub[pc->ns] = name;
        pc->sl[pc->ns++] = len;
    } else {
        pc->uns[pc->nu] = name;
        pc->ul[pc->nu++] = len;
    }
    return 0;
}

/* The retry timer: every channel with waiters and no subscription is looked
 * at again (its node's connection may be up now, or another node may serve
 * it now). */
/* After a topology change (a new primary, a new slot map): channels
 * subscribed on a node that no longer serves them go back to NONE, their
 * waiters retry once they are subscribed where they belong (as after a
 * reconnect: messages may have been missed), and connections left without
 * channels are closed (their node may be gone for good). */
static void check_moves(dlock__pubsub *ps)
{
    uint64_t g = dlock__router_generation(ps->router);
    if (g == ps->gen)
        return;
    ps->gen = g;
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets; i++) {
        dlock__hnode *n = ps->channels.buckets[i];
        while (n) {
            dlock__channel *ch = (dlock__channel *)n;
            n = n->next;
            if (!ch->pc || ch->pc->node == dlock__router_node(ps->router,
                                                               ps->sharded ? ch->name : NULL,
                                                               ps->sharded ? ch->len : 0))
                continue;
            ch->state = CH_NONE;
            ch->pc = NULL;
            if (ch->nwaiters == 0) {
                ch_free(ps, ch);
            } else {
                ch->resync = 1;
                wake_all(ch, 0);
                ch_mark(ps, ch);
            }
        }
    }
    psconn **gone = malloc((ps->nconns ? ps->nconns : 1) * sizeof(*gone));
    size_t ngone = 0, keep = 0;
    for (size_t i = 0; gone && i < ps->nconns; i++) {
        psconn *pc = ps->conns[i];
        int used = 0;
        for (size_t b = 0; b < ps->channels.nbuckets && !used; b++)
            for (dlock__hnode *n = ps->channels.buckets[b]; n && !used; n = n->next)
                used = ((dlock__channel *)n)->pc == pc;
        if (used)
            ps->conns[keep++] = pc;
        else
            gone[ngone++] = pc;
    }
    if (gone)
        ps->nconns = keep;
    pthread_mutex_unlock(&ps->mu);
    for (size_t i = 0; i < ngone; i++) {
        dlock__aconn_close(gone[i]->ac, NULL, NULL);   /* fails its pending commands now */
        free(gone[i]->sub);
        free(gone[i]->uns);
        free(gone[i]->sl);
        free(gone[i]->ul);
        free(gone[i]);
    }
    free(gone);
}

static void on_retry(uv_timer_t *t)
{
    dlock__pubsub *ps = t->data;
    if (ps->dynamic)
        check_moves(ps);
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets; i++)
        for (dlock__hnode *n = ps->channels.buckets[i]; n; n = n->next) {
            dlock__channel *ch = (dlock__channel *)n;
            if (ch->state == CH_NONE && ch->nwaiters > 0)
                ch_mark(ps, ch);
        }
    pthread_mutex_unlock(&ps->mu);
    sync_channels(ps);
}

static void retry_later(dlock__pubsub *ps)
{
    if (ps->stopping)
        return;
    if (!ps->retry_inited) {
        if (uv_timer_init(dlock__loop_uv(ps->lp), &ps->retry) != 0)
            return;
        ps->retry.data = ps;
        ps->retry_inited = 1;
    }
    if (uv_is_active((uv_handle_t *)&ps->retry))
        return;
    if (ps->dynamic) {
        /* Also how a topology change is noticed: soon after the switch. */
        uint64_t every = ps->ctx->cfg->retry_delay_ms < 200 ? (uint64_t)ps->ctx->cfg->retry_delay_ms
                                                            : 200;
        uv_timer_start(&ps->retry, on_retry, every, every);
    } else {
        uv_timer_start(&ps->retry, on_retry, (uint64_t)ps->ctx->cfg->retry_delay_ms, 0);
    }
}

/* Sends the SUBSCRIBE/UNSUBSCRIBE that dirty channels need, one command per
 * connection each, then the barrier PINGs wanted. A channel whose node's
 * connection is not ready yet waits for it (its on_sub_ready syncs again). */
static void sync_channels(dlock__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    int barriers = 0;
    for (size_t i = 0; i < ps->nconns; i++)
        barriers |= ps->conns[i]->barrier_wanted;
    if (ps->dynamic && !ps->stopping)
        retry_later(ps);   /* starts the periodic look at the topology */
    if (ps->stopping || (dlock__list_empty(&ps->dirty) && !barriers)) {
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    for (size_t i = 0; i < ps->nconns; i++)
        ps->conns[i]->ns = ps->conns[i]->nu = 1;   /* slot 0: the command */
    int oom = 0, waiting = 0;
    while (!dlock__list_empty(&ps->dirty)) {
        dlock__channel *ch = DLOCK__CONTAINER_OF(ps->dirty.next, dlock__channel, dirty_link);
        dlock__list_remove(&ch->dirty_link);
        ch->dirty = 0;
        if (ch->nwaiters > 0 && ch->state == CH_NONE) {
            /* Sharded: the node that serves the channel's slot; else any. */
            dlock__node *n = dlock__router_node(ps->router, ps->sharded ? ch->name : NULL,
                                                ps->sharded ? ch->len : 0);
            size_t before = ps->nconns;
            psconn *pc = conn_for(ps, n);
            if (pc && before != ps->nconns)
                pc->ns = pc->nu = 1;
            if (!pc) {
                oom = 1;
            } else if (!dlock__aconn_ready(pc->ac)) {
                /* on_sub_ready marks it again; and if the node is gone for
                 * good (a failover), the retry asks the router again. */
                dlock__aconn_start(pc->ac);
                waiting = 1;
            } else if (add_name(pc, 0, ch->name, ch->len) != 0) {
                oom = 1;
            } else {
                ch->state = CH_SUBSCRIBING;
                ch->pc = pc;
            }
        } else if (ch->nwaiters == 0 && ch->state == CH_SUBSCRIBED) {
            if (add_name(ch->pc, 1, ch->name, ch->len) != 0) {
                oom = 1;
            } else {
                ch->state = CH_UNSUBSCRIBING;
            }
        } else if (ch->nwaiters == 0 && ch->state == CH_NONE) {
            ch_free(ps, ch);
        }
        /* SUBSCRIBING / UNSUBSCRIBING: the confirmation will look again. */
    }
    /* Channel names stay valid after unlocking: only this thread frees channels. */
    pthread_mutex_unlock(&ps->mu);
    if (oom)
        dlock__log(ps->ctx->cfg, DLOCK_LOG_ERROR, "out of memory updating subscriptions");
    if (waiting)
        retry_later(ps);
    const char *subcmd = ps->sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
    const char *unscmd = ps->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
    for (size_t i = 0; i < ps->nconns; i++) {
        psconn *pc = ps->conns[i];
        if (!dlock__aconn_ready(pc->ac))
            continue;
        dlock__aconn_cork(pc->ac);
        if (pc->ns > 1) {
            pc->sub[0] = subcmd;
            pc->sl[0] = strlen(subcmd);
            sub_cmd *sc = new_sub_cmd(pc, pc->sub + 1, pc->ns - 1);
            if (!sc || dlock__aconn_send(pc->ac, pc->ns, pc->sub, pc->sl, pc->ns - 1, on_sub_reply,
                                         sc) != 0)
                free(sc);   /* not sent: the channels stay SUBSCRIBING until on_sub_down */
        }
        if (pc->nu > 1) {
            pc->uns[0] = unscmd;
            pc->ul[0] = strlen(unscmd);
            sub_cmd *sc = new_sub_cmd(pc, pc->uns + 1, pc->nu - 1);
            if (!sc || dlock__aconn_send(pc->ac, pc->nu, pc->uns, pc->ul, pc->nu - 1,
                                         on_unsub_reply, sc) != 0)
                free(sc);
        }
        pc->ns = pc->nu = 1;
        pthread_mutex_lock(&ps->mu);
        send_barrier(pc);
        pthread_mutex_unlock(&ps->mu);
        dlock__aconn_uncork(pc->ac);
    }
}

static void on_sync_job(void *arg) { sync_channels(arg); }

/* Stop hook (io thread): the pub/sub connection goes; channels stay until free. */
static void on_stop(void *arg)
{
    dlock__pubsub *ps = arg;
    pthread_mutex_lock(&ps->mu);
    ps->stopping = 1;
    pthread_mutex_unlock(&ps->mu);
    if (ps->retry_inited) {
        uv_timer_stop(&ps->retry);
        uv_close((uv_handle_t *)&ps->retry, NULL);
    }
    /* Closing fails the connection's pending commands: their callbacks
     * still see it; it is freed with the pubsub. */
    for (size_t i = 0; i < ps->nconns; i++)
        dlock__aconn_close(ps->conns[i]->ac, NULL, NULL);
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
    ps->sharded = dlock__router_sharded(router);
    ps->dynamic = dlock__router_dynamic(router);
    ps->gen = dlock__router_generation(router);
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
    for (size_t i = 0; i < ps->nconns; i++) {
        psconn *pc = ps->conns[i];
        free(pc->sub);
        free(pc->uns);
        free(pc->sl);
        free(pc->ul);
        free(pc);
    }
    free(ps->conns);
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
        w->took_us = w->woken_us;
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
