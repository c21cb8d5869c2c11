/* The pub/sub connections that feed the waiter table (waiters.c): the io
 * thread alone sends SUBSCRIBE/UNSUBSCRIBE (SSUBSCRIBE on a cluster with
 * sharded pub/sub), for the channels user threads marked dirty, and hands
 * each message to the table.
 *
 * Channel states (the io thread moves them, under mu):
 *   NONE --SUBSCRIBE sent--> SUBSCRIBING --confirmed--> SUBSCRIBED
 *   SUBSCRIBED --no waiters left, UNSUBSCRIBE sent--> UNSUBSCRIBING --confirmed--> NONE
 *   any --connection lost--> NONE (resubscribed on reconnect; waiters then all
 *   retry, as messages may have been missed)
 * A channel in NONE with no waiters is freed, so no channel stays subscribed
 * once its waiters are gone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/pubsub_int.h"

/* ---------------------------------------------------------- io thread */

static void sync_channels(dlock__pubsub *ps);
static void retry_later(dlock__pubsub *ps);
static void watch_start(dlock__pubsub *ps);
static void on_sub_run_id(dlock__aconn *ac, redisReply *r, int status, void *ud);

static dlock__channel *reply_channel(dlock__pubsub *ps, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return NULL;
    return dlock__ps_find(ps, r->element[1]->str, r->element[1]->len);
}

/* The channels of one SUBSCRIBE or UNSUBSCRIBE, for its replies. The names
 * point into channels that stay allocated while the command is in flight
 * (SUBSCRIBING / UNSUBSCRIBING channels are not freed until answered). */
typedef struct sub_cmd {
    dlock__pubsub *ps;
    dlock__psconn *pc;
    int subscribe;           /* SUBSCRIBE (else UNSUBSCRIBE) */
    int left;                /* replies still expected */
    int n;
    const char *names[];
} sub_cmd;

static sub_cmd *new_sub_cmd(dlock__psconn *pc, int subscribe, const char **names, int n)
{
    sub_cmd *sc = malloc(sizeof(*sc) + (size_t)n * sizeof(char *));
    if (sc) {
        sc->ps = pc->ps;
        sc->pc = pc;
        sc->subscribe = subscribe;
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
        dlock__channel *ch = dlock__ps_find(ps, sc->names[i], strlen(sc->names[i]));
        if (!ch || ch->pc != sc->pc || ch->state != (subscribe ? CH_SUBSCRIBING : CH_UNSUBSCRIBING))
            continue;
        ch->state = CH_NONE;
        ch->pc = NULL;
        if (subscribe) {
            ch->sub_failed = 1;
            dlock__ps_wake_all(ch, 0);
        } else if (ch->nwaiters == 0) {
            dlock__ps_free_channel(ps, ch);
        }
    }
    pthread_mutex_unlock(&ps->mu);
}

/* One channel's confirmation of a SUBSCRIBE or UNSUBSCRIBE. */
static void on_sub_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    sub_cmd *sc = ud;
    dlock__pubsub *ps = sc->ps;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        /* !r: the connection failed; on_sub_down resets every channel. */
        if (r)
            sub_refused(sc, r, sc->subscribe);
        free(sc);
        return;
    }
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = reply_channel(ps, r);
    if (ch && ch->pc == sc->pc && ch->state == (sc->subscribe ? CH_SUBSCRIBING : CH_UNSUBSCRIBING)) {
        if (sc->subscribe) {
            ch->state = CH_SUBSCRIBED;
            /* Waiters in join are waiting for this; after a reconnect, every
             * waiter retries since messages may have been missed meanwhile. */
            dlock__ps_wake_all(ch, ch->resync);
            ch->resync = 0;
            if (ch->nwaiters == 0)
                dlock__ps_mark(ps, ch);   /* they all left meanwhile: unsubscribe */
        } else {
            ch->state = CH_NONE;
            ch->pc = NULL;
            if (ch->nwaiters > 0)
                dlock__ps_mark(ps, ch);   /* waiters came meanwhile: subscribe again */
            else
                dlock__ps_free_channel(ps, ch);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    if (--sc->left == 0)
        free(sc);
    sync_channels(ps);
}

/* ch is no longer subscribed where it was (a lost connection, a dropped
 * sharded subscription, a topology change): freed when nobody waits; else
 * its waiters are told, and retry once it is subscribed again (messages may
 * have been missed meanwhile). 1 when waiters remain. Caller holds mu. */
static int lost_subscription(dlock__pubsub *ps, dlock__channel *ch)
{
    ch->state = CH_NONE;
    ch->pc = NULL;
    if (ch->nwaiters == 0) {
        dlock__ps_free_channel(ps, ch);
        return 0;
    }
    ch->resync = 1;
    dlock__ps_wake_all(ch, 0);   /* let them see they are unsubscribed */
    return 1;
}

/* The server dropped a sharded subscription (its slot moved to another
 * node): the channel is subscribed again where the map then says, and its
 * waiters retry once it is (messages may have been missed). */
static void on_dropped(dlock__pubsub *ps, dlock__psconn *pc, const redisReply *chr)
{
    dlock__router_stale(ps->router);
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = dlock__ps_find(ps, chr->str, chr->len);
    if (ch && ch->pc == pc && ch->state == CH_SUBSCRIBED)
        lost_subscription(ps, ch);
    pthread_mutex_unlock(&ps->mu);
    retry_later(ps);   /* after the map is read again */
}

static void on_sub_push(dlock__aconn *ac, redisReply *r, void *ud)
{
    dlock__pubsub *ps = ((dlock__psconn *)ud)->ps;
    if (strcmp(r->element[0]->str, "sunsubscribe") == 0) {
        if (r->element[1]->type == REDIS_REPLY_STRING)
            on_dropped(ps, ud, r->element[1]);
        return;
    }
    /* message: [kind, channel, payload]; pmessage: [kind, pattern, channel, payload] */
    size_t ci = r->elements == 4 ? 2 : 1;
    const redisReply *chr = r->element[ci];
    if (chr->type == REDIS_REPLY_STRING)
        dlock__ps_deliver(ps, chr->str, chr->len, r->element[ci + 1]);
}

static void on_sub_ready(dlock__aconn *ac, void *ud)
{
    dlock__psconn *pc = ud;
    dlock__pubsub *ps = pc->ps;
    pc->run_id[0] = '\0';
    if (!ps->dynamic && ps->acall && !ps->role_off) {   /* for the watch: which server */
        static const char *av[] = {"INFO", "server"};
        static const size_t len[] = {4, 6};
        (void)dlock__aconn_send(ac, 2, av, len, 1, on_sub_run_id, pc);
    }
    pthread_mutex_lock(&ps->mu);
    DLOCK__MAP_EACH(&ps->channels, n)
        if (((dlock__channel *)n)->state == CH_NONE)
            dlock__ps_mark(ps, (dlock__channel *)n);
    pthread_mutex_unlock(&ps->mu);
    sync_channels(ps);
}

static void on_sub_down(dlock__aconn *ac, int status, void *ud)
{
    dlock__psconn *pc = ud;
    dlock__pubsub *ps = pc->ps;
    /* The node may be gone for good (a failover): the channels' next
     * subscription goes where the map then says. */
    if (ps->dynamic)
        dlock__router_stale(ps->router);
    int resubscribe = 0;
    pthread_mutex_lock(&ps->mu);
    DLOCK__MAP_EACH(&ps->channels, n) {
        dlock__channel *ch = (dlock__channel *)n;
        if (ch->pc == pc)
            resubscribe |= lost_subscription(ps, ch);
    }
    pthread_mutex_unlock(&ps->mu);
    /* The reconnect's on_sub_ready subscribes them again; if the node stays
     * away, the retry asks the router where they belong now. */
    if (resubscribe && ps->dynamic)
        retry_later(ps);
}

/* A barrier PING's answer: messages from now on were published after it. */
typedef struct barrier {
    dlock__psconn *pc;
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
static void send_barrier(dlock__psconn *pc)
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
static dlock__psconn *conn_for(dlock__pubsub *ps, dlock__node *n)
{
    for (size_t i = 0; i < ps->nconns; i++)
        if (ps->conns[i]->node == n)
            return ps->conns[i];
    dlock__psconn **a = realloc(ps->conns, (ps->nconns + 1) * sizeof(*a));
    if (!a)
        return NULL;
    ps->conns = a;
    dlock__psconn *pc = calloc(1, sizeof(*pc));
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
static int add_name(dlock__psconn *pc, int which, const char *name, size_t len)
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
    dlock__keywatch_moved(ps->kw);
    pthread_mutex_lock(&ps->mu);
    DLOCK__MAP_EACH(&ps->channels, n) {
        dlock__channel *ch = (dlock__channel *)n;
        if (!ch->pc || ch->pc->node == dlock__router_node(ps->router,
                                                           ps->sharded ? ch->name : NULL,
                                                           ps->sharded ? ch->len : 0))
            continue;
        if (lost_subscription(ps, ch))
            dlock__ps_mark(ps, ch);
    }
    dlock__psconn **gone = malloc((ps->nconns ? ps->nconns : 1) * sizeof(*gone));
    size_t ngone = 0, keep = 0;
    for (size_t i = 0; gone && i < ps->nconns; i++) {
        dlock__psconn *pc = ps->conns[i];
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
    DLOCK__MAP_EACH(&ps->channels, n) {
        dlock__channel *ch = (dlock__channel *)n;
        if (ch->state == CH_NONE && ch->nwaiters > 0)
            dlock__ps_mark(ps, ch);
    }
    pthread_mutex_unlock(&ps->mu);
    sync_channels(ps);
}

/* t initialised on first use (*inited); 1 when it is idle, to be started. */
static int timer_idle(dlock__pubsub *ps, uv_timer_t *t, int *inited)
{
    if (!*inited) {
        if (uv_timer_init(dlock__loop_uv(ps->lp), t) != 0)
            return 0;
        t->data = ps;
        *inited = 1;
    }
    return !uv_is_active((uv_handle_t *)t);
}

static void retry_later(dlock__pubsub *ps)
{
    if (ps->stopping || !timer_idle(ps, &ps->retry, &ps->retry_inited))
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

/* ------------------------------------------------ one address: the watch */

/* How often the address is asked while waiters wait: the pace of the pub/sub
 * keepalive PING (aconn.c), and never before the subscriptions have stayed
 * unchanged that long, so that a wait is silent for its first 10 s (a waiter
 * sends nothing; a test that counts a new waiter's commands sees none). The
 * timer ticks every WATCH_TICK_MS to see demotions other requests saw. */
#define WATCH_MS 10000
#define WATCH_TICK_MS 1000

/* A watch's question (two requests through the asynchronous calls'
 * connection to the address: ROLE, INFO server) and what the subscriptions'
 * connection said of its server when it connected. */
typedef struct watch_ask {
    dlock__pubsub *ps;
    dlock__node *node;       /* the address's node when asked (retired on a move) */
    int left;                /* answers still due */
    int role;                /* -1 unknown, 1 master, 0 anything else */
    char role_text[16];
    char sub_run_id[DLOCK__RUN_ID_MAX];   /* the subscriptions' server ("" unknown) */
    char run_id[DLOCK__RUN_ID_MAX];       /* the address's server now ("" unknown) */
} watch_ask;

/* The run_id line of an INFO server answer into out ("" when absent). */
static void read_run_id(const redisReply *r, char *out)
{
    out[0] = '\0';
    if (r && r->type == REDIS_REPLY_STRING)
        dlock__info_field(r->str, "run_id", out, DLOCK__RUN_ID_MAX);
}

/* The subscriptions' connection's own INFO server, sent before it subscribes. */
static void on_sub_run_id(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    (void)ac;
    dlock__psconn *pc = ud;
    if (status == DLOCK_OK)
        read_run_id(r, pc->run_id);
}

static dlock__psconn *subscribed_conn(dlock__pubsub *ps)
{
    dlock__psconn *pc = NULL;
    pthread_mutex_lock(&ps->mu);
    for (size_t i = 0; i < ps->channels.nbuckets && !pc; i++)
        for (dlock__hnode *n = ps->channels.buckets[i]; n && !pc; n = n->next)
            pc = ((dlock__channel *)n)->pc;
    pthread_mutex_unlock(&ps->mu);
    return pc;
}

/* Both answers in: the subscriptions move when the server at the address is
 * a replica now (a demotion that kept every connection open), or when the
 * address names a primary other than the server they are on (a DNS name
 * moved; their server may no longer get the primary's messages). */
static void watch_decide(watch_ask *wa)
{
    dlock__pubsub *ps = wa->ps;
    const char *why = NULL;
    int other = wa->role == 1 && !ps->run_id_off && wa->run_id[0] && wa->sub_run_id[0] &&
                strcmp(wa->run_id, wa->sub_run_id) != 0;
    if (wa->role == 1 && wa->run_id[0] && wa->sub_run_id[0] && !other)
        ps->run_id_moves = 0;   /* the subscriptions are on the address's server */
    if (other && ++ps->run_id_moves > 2) {
        /* Moved twice and still another server: the address's connections
         * do not all reach one server (a proxy in front of several), so
         * run_id says nothing; ROLE alone from now on. */
        ps->run_id_off = 1;
        dlock__log(ps->ctx->cfg, DLOCK_LOG_WARN,
                   "%s: connections to the address reach servers with different run_ids; "
                   "the subscriptions move only when it says it is not the primary",
                   dlock__node_addr(wa->node));
        other = 0;
    }
    if (wa->role == 0)
        why = wa->role_text;
    else if (other)
        why = "master, another server than the one the subscriptions are on";
    if (!why)
        return;
    dlock__log(ps->ctx->cfg, DLOCK_LOG_WARN,
               "%s says ROLE %s: the pub/sub subscriptions move to new connections",
               dlock__node_addr(wa->node), why);
    dlock__router_demoted(ps->router, wa->node);
    check_moves(ps);
    sync_channels(ps);
}

static void on_watch_answer(int status, dlock__res *res, void *ud, int is_role)
{
    watch_ask *wa = ud;
    dlock__pubsub *ps = wa->ps;
    if (status == DLOCK_OK && is_role) {
        const redisReply *r = res->r;
        if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING) {
            wa->role = strcmp(r->element[0]->str, "master") == 0;
            snprintf(wa->role_text, sizeof(wa->role_text), "%s", r->element[0]->str);
        }
    } else if (status == DLOCK_OK) {
        read_run_id(res->r, wa->run_id);
    }
    if (status == DLOCK_OK) {
        freeReplyObject(res->r);   /* the answer is the callback's to free */
        res->r = NULL;
    } else if (is_role && !ps->role_off && !ps->stopping &&
               (res->err == DLOCK__RERR_NOPERM || res->err == DLOCK__RERR_UNKNOWN_CMD ||
                res->err == DLOCK__RERR_OTHER)) {
        /* Refused (an ACL without +role, a renamed command): not asked
         * again (the ticks still move the channels after a READONLY); a
         * lost connection or a transient refusal: asked at the next tick. */
        ps->role_off = 1;
        dlock__log(ps->ctx->cfg, DLOCK_LOG_WARN,
                   "ROLE refused (%s): a demotion that keeps the pub/sub connection open "
                   "is seen only when a request is refused with READONLY",
                   res->text);
    }
    if (--wa->left > 0)
        return;
    ps->role_inflight = 0;
    if (!ps->stopping && status != DLOCK_ECLOSED)
        watch_decide(wa);
    free(wa);
}

static void on_watch_role(int status, dlock__res *res, void *ud)
{
    on_watch_answer(status, res, ud, 1);
}

static void on_watch_info(int status, dlock__res *res, void *ud)
{
    on_watch_answer(status, res, ud, 0);
}

/* Every WATCH_TICK_MS while a channel is subscribed: a demotion another
 * request saw moves the channels; every WATCH_MS, once the subscriptions
 * have not changed for as long, the address's server is asked whether it is
 * still the primary, and which server it is. */
static void on_watch(uv_timer_t *t)
{
    dlock__pubsub *ps = t->data;
    check_moves(ps);
    sync_channels(ps);
    dlock__psconn *pc = subscribed_conn(ps);
    if (!pc) {
        uv_timer_stop(&ps->watch);   /* the next subscription starts it again */
        return;
    }
    int64_t now = dlock__now_ms();
    if (ps->role_inflight || ps->role_off || now - ps->subs_changed_ms < WATCH_MS ||
        now - ps->watch_asked_ms < WATCH_MS)
        return;
    watch_ask *wa = calloc(1, sizeof(*wa));
    if (!wa)
        return;
    wa->ps = ps;
    wa->node = dlock__router_node(ps->router, NULL, 0);
    wa->role = -1;
    memcpy(wa->sub_run_id, pc->run_id, sizeof(wa->sub_run_id));
    static const char *const role[] = {"ROLE"}, *const info[] = {"INFO", "server"};
    dlock__req rq = {.script = -1, .argc = 1, .argv = role,
                     .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
    dlock__req iq = {.script = -1, .argc = 2, .argv = info,
                     .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
    if (dlock__acall_send(ps->acall, &rq, on_watch_role, wa) != DLOCK_OK) {
        free(wa);
        return;
    }
    ps->role_inflight = 1;
    ps->watch_asked_ms = now;
    wa->left = 2;
    if (dlock__acall_send(ps->acall, &iq, on_watch_info, wa) != DLOCK_OK)
        wa->left = 1;   /* ROLE alone */
}

static void watch_start(dlock__pubsub *ps)
{
    if (ps->dynamic || !ps->acall || ps->stopping)
        return;
    if (timer_idle(ps, &ps->watch, &ps->watch_inited)) {
        uv_timer_start(&ps->watch, on_watch, WATCH_TICK_MS, WATCH_TICK_MS);
    }
}

void dlock__pubsub_use_acall(dlock__pubsub *ps, dlock__acall *x) { ps->acall = x; }

/* Sends (un)subscription command `cmd` for names[1..n-1] (names[0] is the
 * command's place) on pc: one command for them all; sharded, one per slot
 * (SSUBSCRIBE and SUNSUBSCRIBE refuse channels of two slots with CROSSSLOT,
 * and one node serves many slots: waiters on two names of one node would
 * otherwise have polled, and a revoke listener never have heard). The
 * commands of one write go together (the connection is corked). */
static void send_subs(dlock__psconn *pc, int subscribe, const char *cmd, const char **names,
                      size_t *lens, size_t n, int sharded)
{
    if (n <= 1)
        return;
    size_t from = 1;
    while (from < n) {
        size_t to = n;
        if (sharded) {   /* the names of from's slot first, then send them */
            const int slot = dlock__key_slot(names[from], lens[from]);
            to = from + 1;
            for (size_t j = to; j < n; j++)
                if (dlock__key_slot(names[j], lens[j]) == slot) {
                    const char *nm = names[j];
                    size_t ln = lens[j];
                    names[j] = names[to];
                    lens[j] = lens[to];
                    names[to] = nm;
                    lens[to] = ln;
                    to++;
                }
        }
        const char *keep = names[from - 1];
        size_t keep_len = lens[from - 1];
        names[from - 1] = cmd;
        lens[from - 1] = strlen(cmd);
        sub_cmd *sc = new_sub_cmd(pc, subscribe, names + from, (int)(to - from));
        if (!sc || dlock__aconn_send(pc->ac, (int)(to - from + 1), names + from - 1,
                                     lens + from - 1, (int)(to - from), on_sub_reply, sc) != 0)
            free(sc);   /* not sent: the channels stay (UN)SUBSCRIBING until on_sub_down */
        names[from - 1] = keep;
        lens[from - 1] = keep_len;
        from = to;
    }
}

/* Sends the SUBSCRIBE/UNSUBSCRIBE that dirty channels need, one command per
 * connection each (sharded: per slot), then the barrier PINGs wanted. A channel whose node's
 * connection is not ready yet waits for it (its on_sub_ready syncs again). */
static void sync_channels(dlock__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    int barriers = 0;
    for (size_t i = 0; i < ps->nconns; i++)
        barriers |= ps->conns[i]->barrier_wanted;
    if (ps->dynamic && !ps->stopping)
        retry_later(ps);   /* starts the periodic look at the topology */
    if (!dlock__list_empty(&ps->dirty)) {
        ps->subs_changed_ms = dlock__now_ms();
        watch_start(ps);
    }
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
            dlock__psconn *pc = conn_for(ps, n);
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
            dlock__ps_free_channel(ps, ch);
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
        dlock__psconn *pc = ps->conns[i];
        if (!dlock__aconn_ready(pc->ac))
            continue;
        dlock__aconn_cork(pc->ac);
        send_subs(pc, 1, subcmd, pc->sub, pc->sl, pc->ns, ps->sharded);
        send_subs(pc, 0, unscmd, pc->uns, pc->ul, pc->nu, ps->sharded);
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
    if (ps->watch_inited) {
        uv_timer_stop(&ps->watch);
        uv_close((uv_handle_t *)&ps->watch, NULL);
    }
    /* Closing fails the connection's pending commands: their callbacks
     * still see it; it is freed with the pubsub. */
    for (size_t i = 0; i < ps->nconns; i++)
        dlock__aconn_close(ps->conns[i]->ac, NULL, NULL);
    dlock__keywatch_stop(ps->kw);
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
    dlock__map_init(&ps->channels, dlock__ps_channel_eq);
    dlock__list_init(&ps->dirty);
    dlock__list_init(&ps->quiet);
    int rc = dlock__keywatch_new(&ps->kw, ps);
    if (rc == DLOCK_OK)
        rc = dlock__loop_on_stop(lp, on_stop, ps);
    if (rc != DLOCK_OK) {
        dlock__pubsub_free(ps);
        return rc;
    }
    *out = ps;
    return DLOCK_OK;
}

void dlock__pubsub_free(dlock__pubsub *ps)
{
    if (!ps)
        return;
    DLOCK__MAP_EACH(&ps->channels, n)
        free(n);
    dlock__map_free(&ps->channels);
    for (size_t i = 0; i < ps->nconns; i++) {
        dlock__psconn *pc = ps->conns[i];
        free(pc->sub);
        free(pc->uns);
        free(pc->sl);
        free(pc->ul);
        free(pc);
    }
    free(ps->conns);
    dlock__keywatch_free(ps->kw);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}