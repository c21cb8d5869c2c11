/* Waiters woken however their lock was freed (docs/internals/waiting.md,
 * "Woken by any change"). A release publishes on the lock's channel, but an
 * operator's DEL, a force unlock by another tool, an expiry, an eviction or
 * a FLUSHALL publish nothing: a waiter would sleep until the TTL its last
 * attempt read. So while waiters sleep on a key (the lock they found held,
 * or the lock-delay marker they found alive: dlock__waiter_watch), the key
 * is tracked: per node, a reader connection with client-side tracking on,
 * redirected to an invalidation listener (tracking.c), reads it (EXISTS);
 * Redis then reports the next change to it, whoever makes it. A change is
 * looked at with another EXISTS, which also tracks the key again (tracking
 * reports one change per read): a key still there (a renewal, a reentry)
 * wakes nobody; a key gone wakes every waiter of the channels that watch it,
 * unless one of those channels had a message within WINDOW_MS of the change
 * (a release publishes as it deletes: its message woke whom it should).
 * Waiters send nothing for this: the io thread reads each watched key once
 * per change, one EXISTS for every waiter of the process on that key.
 *
 * Everything here runs on the io thread; user threads post requests (add,
 * drop) through a queue. Channels are referred to by name and looked up in
 * the waiter table under its mutex when woken, so a channel freed meanwhile
 * is simply not found. Without tracking (Redis < 6, an ACL without CLIENT,
 * a listener down) waiters wake at the TTL, as before. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/pubsub_int.h"

/* A release's message and the invalidation of its DEL come from one script,
 * on two connections: this close together, the message speaks for it. */
#define WINDOW_MS 20
/* A key found gone is woken for after this much, so that a release's
 * message on the other connection has landed first. */
#define GRACE_MS 3

typedef struct kw_node {
    dlock__keywatch *kw;
    dlock__node *node;
    dlock__tracking *listener;
    dlock__aconn *reader;
    int64_t listen_id;       /* the listener's client id; 0 while it is down */
    int tracking;            /* CLIENT TRACKING answered OK since the reader connected */
    int refused;             /* Redis refused tracking here: waiters wake at TTLs */
} kw_node;

typedef struct kw_ref {
    char *chan;
    size_t clen;
    int count;               /* waiters of this process on (key, channel) */
} kw_ref;

typedef struct kw_key {
    dlock__hnode hn;
    dlock__list due;         /* in kw->due while found gone and not yet woken for */
    kw_node *kn;
    kw_ref *refs;
    int nrefs, cap;
    int64_t since_ms;        /* the change being looked at: when it was reported */
    int64_t msg_ms;          /* the last message of a channel that stopped watching it (a
                                fair lock's head leaves its own channel once woken) */
    size_t len;
    char name[];
} kw_key;

/* A request from a user thread. */
typedef struct kw_req {
    dlock__list link;
    int add;                 /* 1: a waiter watches; 0: it stopped */
    size_t klen, clen;
    char *chan;              /* after the key, in the same block */
    char key[];
} kw_req;

struct dlock__keywatch {
    dlock__pubsub *ps;
    dlock__map keys;         /* io thread */
    kw_node **nodes;         /* io thread */
    size_t nnodes;
    dlock__list due;         /* io thread */
    uv_timer_t grace;
    int grace_inited, stopping;
    uint64_t gen;            /* the router generation the keys' nodes were looked up in */
    dlock__job job;
    pthread_mutex_t qmu;     /* guards reqs */
    dlock__list reqs;
};

static int key_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const kw_key *k = (const kw_key *)n;
    return k->len == len && memcmp(k->name, key, len) == 0;
}

static kw_key *find(dlock__keywatch *kw, const char *key, size_t len)
{
    return (kw_key *)dlock__map_find(&kw->keys, dlock__hash(key, len), key, len);
}

/* ------------------------------------------------------------- waking */

/* 1 when a channel that watches k had a message close to the change. Caller
 * holds the table's mutex. */
static int covered(dlock__pubsub *ps, const kw_key *k)
{
    if (k->msg_ms >= k->since_ms - WINDOW_MS)
        return 1;
    for (int i = 0; i < k->nrefs; i++) {
        dlock__channel *ch = dlock__ps_find(ps, k->refs[i].chan, k->refs[i].clen);
        if (ch && ch->msg_ms >= k->since_ms - WINDOW_MS)
            return 1;
    }
    return 0;
}

static void on_grace(uv_timer_t *t)
{
    dlock__keywatch *kw = t->data;
    dlock__pubsub *ps = kw->ps;
    pthread_mutex_lock(&ps->mu);
    while (!dlock__list_empty(&kw->due)) {
        kw_key *k = DLOCK__CONTAINER_OF(kw->due.next, kw_key, due);
        dlock__list_remove(&k->due);
        dlock__list_init(&k->due);
        if (covered(ps, k))
            continue;
        for (int i = 0; i < k->nrefs; i++) {
            dlock__channel *ch = dlock__ps_find(ps, k->refs[i].chan, k->refs[i].clen);
            if (ch)
                dlock__ps_wake_all(ch, 1);
        }
        ps->keywatch_wakes++;
    }
    pthread_mutex_unlock(&ps->mu);
}

/* k is gone (EXISTS said so): its waiters are woken after the grace. */
static void gone(dlock__keywatch *kw, kw_key *k)
{
    if (kw->stopping)
        return;
    if (k->due.next == &k->due)
        dlock__list_push_back(&kw->due, &k->due);
    if (!kw->grace_inited) {
        if (uv_timer_init(dlock__loop_uv(kw->ps->lp), &kw->grace) != 0)
            return;
        kw->grace.data = kw;
        kw->grace_inited = 1;
    }
    if (!uv_is_active((uv_handle_t *)&kw->grace))
        uv_timer_start(&kw->grace, on_grace, GRACE_MS, 0);
}

/* ------------------------------------------------------------- reading */

typedef struct kw_read {
    dlock__keywatch *kw;
    kw_node *kn;
    size_t len;
    char key[];
} kw_read;

static void on_exists(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    (void)ac;
    (void)status;
    kw_read *q = ud;
    kw_key *k = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0
                    ? find(q->kw, q->key, q->len)
                    : NULL;
    if (k && k->kn == q->kn)
        gone(q->kw, k);
    free(q);
}

/* Reads k on its node's reader (tracked from then on); a change since
 * `since_ms` is being looked at. Without tracking on there, nothing: the
 * key is read when tracking comes (back) on. */
static void look(dlock__keywatch *kw, kw_key *k, int64_t since_ms)
{
    k->since_ms = since_ms;
    kw_node *kn = k->kn;
    if (!kn || !kn->tracking || !dlock__aconn_ready(kn->reader))
        return;
    kw_read *q = malloc(sizeof(*q) + k->len);
    if (!q)
        return;   /* this change is found at the TTL */
    q->kw = kw;
    q->kn = kn;
    q->len = k->len;
    memcpy(q->key, k->name, k->len);
    const char *av[] = {"EXISTS", k->name};
    size_t lens[] = {6, k->len};
    if (dlock__aconn_send(kn->reader, 2, av, lens, 1, on_exists, q) != DLOCK_OK)
        free(q);
}

/* Every key of kn (all of them when kn is NULL) looked at again. */
static void look_all(dlock__keywatch *kw, kw_node *kn)
{
    int64_t now = dlock__now_ms();
    DLOCK__MAP_EACH(&kw->keys, n) {
        kw_key *k = (kw_key *)n;
        if (!kn || k->kn == kn)
            look(kw, k, now);
    }
}

/* ------------------------------------------------------ per node: tracking */

static void on_tracking_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    (void)status;
    kw_node *kn = ud;
    if (!r || ac != kn->reader)
        return;   /* the connection went: enabled again when it is back */
    if (r->type == REDIS_REPLY_STATUS) {
        kn->tracking = 1;
        look_all(kn->kw, kn);   /* changes made while it was off were missed */
        return;
    }
    kn->refused = 1;
    dlock__log(kn->kw->ps->ctx->cfg, DLOCK_LOG_WARN,
               "CLIENT TRACKING refused on %s (%s): a waiter wakes at its holder's TTL when "
               "a lock is deleted without a release",
               dlock__node_addr(kn->node), r->type == REDIS_REPLY_ERROR ? r->str : "?");
    dlock__tracking_stop(kn->listener);
}

static void enable(kw_node *kn)
{
    if (kn->refused || kn->kw->stopping || !kn->listen_id || !dlock__aconn_ready(kn->reader))
        return;
    char id[24];
    const char *av[] = {"CLIENT", "TRACKING", "ON", "REDIRECT", id};
    size_t lens[] = {6, 8, 2, 8, 0};
    lens[4] = dlock__fmt_i64(id, kn->listen_id);
    dlock__aconn_send(kn->reader, 5, av, lens, 1, on_tracking_reply, kn);
}

static void on_reader_ready(dlock__aconn *ac, void *ud)
{
    (void)ac;
    kw_node *kn = ud;
    kn->tracking = 0;
    enable(kn);
}

static void on_reader_down(dlock__aconn *ac, int status, void *ud)
{
    (void)ac;
    (void)status;
    ((kw_node *)ud)->tracking = 0;   /* its tracked keys went with it */
}

static void on_listen_id(int64_t id, void *ud)
{
    kw_node *kn = ud;
    kn->listen_id = id > 0 ? id : 0;
    if (id < 0)
        kn->refused = 1;
    if (id <= 0) {
        kn->tracking = 0;   /* Redis drops what it would have told us */
        return;
    }
    kn->tracking = 0;   /* redirected anew: every key read again */
    enable(kn);
}

static void on_invalidate(const redisReply *keys, void *ud)
{
    kw_node *kn = ud;
    dlock__keywatch *kw = kn->kw;
    if (!keys) {
        look_all(kw, kn);   /* FLUSHALL, FLUSHDB, a full tracking table */
        return;
    }
    int64_t now = dlock__now_ms();
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *e = keys->element[i];
        kw_key *k = e->type == REDIS_REPLY_STRING ? find(kw, e->str, e->len) : NULL;
        if (k && k->kn == kn)
            look(kw, k, now);
    }
}

/* The connections to n, made when a key of n is first watched. NULL when out
 * of memory (its keys then wake their waiters at TTLs). */
static kw_node *node_for(dlock__keywatch *kw, dlock__node *n)
{
    for (size_t i = 0; i < kw->nnodes; i++)
        if (kw->nodes[i]->node == n)
            return kw->nodes[i];
    kw_node **a = realloc(kw->nodes, (kw->nnodes + 1) * sizeof(*a));
    if (!a)
        return NULL;
    kw->nodes = a;
    kw_node *kn = calloc(1, sizeof(*kn));
    if (!kn)
        return NULL;
    kn->kw = kw;
    kn->node = n;
    dlock__pubsub *ps = kw->ps;
    uv_loop_t *uv = dlock__loop_uv(ps->lp);
    dlock__tracking_cbs tc = {on_listen_id, on_invalidate, kn};
    dlock__aconn_cbs rc = {on_reader_ready, on_reader_down, NULL, kn};
    if (dlock__tracking_new(&kn->listener, uv, ps->ctx, ps->router, n, &tc) != DLOCK_OK) {
        free(kn);
        return NULL;
    }
    if (dlock__aconn_new(&kn->reader, uv, ps->ctx, dlock__node_endpoint(n), 0, &rc) != DLOCK_OK) {
        dlock__tracking_free(kn->listener);
        free(kn);
        return NULL;
    }
    kw->nodes[kw->nnodes++] = kn;
    dlock__tracking_start(kn->listener);
    dlock__aconn_start(kn->reader);
    return kn;
}

/* -------------------------------------------------------------- requests */

static void key_free(kw_key *k)
{
    for (int i = 0; i < k->nrefs; i++)
        free(k->refs[i].chan);
    free(k->refs);
    free(k);
}

static void drop(dlock__keywatch *kw, const kw_req *q)
{
    kw_key *k = find(kw, q->key, q->klen);
    if (!k)
        return;
    dlock__pubsub *ps = kw->ps;
    pthread_mutex_lock(&ps->mu);
    dlock__channel *ch = dlock__ps_find(ps, q->chan, q->clen);
    if (ch && ch->msg_ms > k->msg_ms)
        k->msg_ms = ch->msg_ms;   /* the message that woke the leaver speaks for the key */
    pthread_mutex_unlock(&ps->mu);
    for (int i = 0; i < k->nrefs; i++) {
        kw_ref *f = &k->refs[i];
        if (f->clen != q->clen || memcmp(f->chan, q->chan, q->clen) != 0 || --f->count > 0)
            continue;
        free(f->chan);
        k->refs[i] = k->refs[--k->nrefs];
        break;
    }
    if (k->nrefs > 0)
        return;
    dlock__map_remove(&kw->keys, &k->hn);
    dlock__list_remove(&k->due);
    key_free(k);   /* Redis may report it once more: not found then */
}

static void add(dlock__keywatch *kw, const kw_req *q)
{
    dlock__pubsub *ps = kw->ps;
    kw_key *k = find(kw, q->key, q->klen);
    int fresh = !k;
    if (fresh) {
        k = calloc(1, sizeof(*k) + q->klen + 1);
        if (!k)
            return;
        dlock__list_init(&k->due);
        k->len = q->klen;
        memcpy(k->name, q->key, q->klen);
        k->hn.hash = dlock__hash(q->key, q->klen);
        k->kn = node_for(kw, dlock__router_node(ps->router, q->key, q->klen));
        if (dlock__map_insert(&kw->keys, &k->hn) != 0) {
            free(k);
            return;
        }
    }
    for (int i = 0; i < k->nrefs; i++)
        if (k->refs[i].clen == q->clen && memcmp(k->refs[i].chan, q->chan, q->clen) == 0) {
            k->refs[i].count++;
            return;
        }
    if (k->nrefs == k->cap) {
        int cap = k->cap ? 2 * k->cap : 2;
        kw_ref *a = realloc(k->refs, (size_t)cap * sizeof(*a));
        if (!a)
            goto unused;
        k->refs = a;
        k->cap = cap;
    }
    kw_ref *f = &k->refs[k->nrefs];
    if (!(f->chan = malloc(q->clen)))
        goto unused;
    memcpy(f->chan, q->chan, q->clen);
    f->clen = q->clen;
    f->count = 1;
    k->nrefs++;
    if (fresh)
        look(kw, k, dlock__now_ms());   /* tracked from now on; gone already: woken */
    return;
unused:
    if (k->nrefs == 0) {
        dlock__map_remove(&kw->keys, &k->hn);
        key_free(k);
    }
}

/* A topology change: keys whose slot moved to another node are watched
 * there (and looked at: a change in between went unheard). */
static void check_moves(dlock__keywatch *kw)
{
    dlock__router *router = kw->ps->router;
    uint64_t g = dlock__router_generation(router);
    if (g == kw->gen)
        return;
    kw->gen = g;
    int64_t now = dlock__now_ms();
    DLOCK__MAP_EACH(&kw->keys, n) {
        kw_key *k = (kw_key *)n;
        dlock__node *at = dlock__router_node(router, k->name, k->len);
        if (k->kn && k->kn->node == at)
            continue;
        k->kn = node_for(kw, at);
        look(kw, k, now);
    }
}

static void on_job(void *arg)
{
    dlock__keywatch *kw = arg;
    dlock__list batch;
    dlock__list_init(&batch);
    pthread_mutex_lock(&kw->qmu);
    while (!dlock__list_empty(&kw->reqs)) {
        dlock__list *it = kw->reqs.next;
        dlock__list_remove(it);
        dlock__list_push_back(&batch, it);
    }
    pthread_mutex_unlock(&kw->qmu);
    if (!kw->stopping && dlock__router_dynamic(kw->ps->router))
        check_moves(kw);
    while (!dlock__list_empty(&batch)) {
        kw_req *q = DLOCK__CONTAINER_OF(batch.next, kw_req, link);
        dlock__list_remove(&q->link);
        if (!kw->stopping) {
            if (q->add)
                add(kw, q);
            else
                drop(kw, q);
        }
        free(q);
    }
}

/* Any thread. Out of memory: the request is dropped (the waiter wakes at
 * the TTL; a drop left undone costs one key read per change until close). */
static void request(dlock__keywatch *kw, int add, const char *key, size_t klen,
                    const char *chan, size_t clen)
{
    kw_req *q = malloc(sizeof(*q) + klen + clen);
    if (!q)
        return;
    q->add = add;
    q->klen = klen;
    q->clen = clen;
    memcpy(q->key, key, klen);
    q->chan = q->key + klen;
    memcpy(q->chan, chan, clen);
    pthread_mutex_lock(&kw->qmu);
    dlock__list_push_back(&kw->reqs, &q->link);
    pthread_mutex_unlock(&kw->qmu);
    dlock__loop_post(kw->ps->lp, &kw->job);
}

/* ------------------------------------------------------------ the waiter */

void dlock__waiter_watch(dlock__pubsub *ps, dlock__waiter *w, const char *key, size_t len)
{
    if (w->watch && key && w->wlen == len && memcmp(w->watch, key, len) == 0)
        return;
    dlock__channel *ch = w->ch;   /* stays while w is joined */
    if (!ch)
        return;   /* on no channel: woken by nothing but its time */
    if (w->watch) {
        request(ps->kw, 0, w->watch, w->wlen, ch->name, ch->len);
        w->watch = NULL;
    }
    if (!key || !ps->kw)
        return;
    w->watch = key;
    w->wlen = len;
    request(ps->kw, 1, key, len, ch->name, ch->len);
}

/* ------------------------------------------------------------ lifecycle */

int dlock__keywatch_new(dlock__keywatch **out, dlock__pubsub *ps)
{
    dlock__keywatch *kw = calloc(1, sizeof(*kw));
    if (!kw)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    kw->ps = ps;
    dlock__map_init(&kw->keys, key_eq);
    dlock__list_init(&kw->due);
    dlock__list_init(&kw->reqs);
    pthread_mutex_init(&kw->qmu, NULL);
    dlock__job_init(&kw->job, on_job, kw);
    kw->gen = dlock__router_generation(ps->router);
    *out = kw;
    return DLOCK_OK;
}

void dlock__keywatch_moved(dlock__keywatch *kw)
{
    if (kw && !kw->stopping)
        check_moves(kw);
}

void dlock__keywatch_stop(dlock__keywatch *kw)
{
    if (!kw)
        return;
    kw->stopping = 1;
    if (kw->grace_inited) {
        uv_timer_stop(&kw->grace);
        uv_close((uv_handle_t *)&kw->grace, NULL);
    }
    for (size_t i = 0; i < kw->nnodes; i++) {
        dlock__tracking_stop(kw->nodes[i]->listener);
        dlock__aconn_close(kw->nodes[i]->reader, NULL, NULL);
    }
}

void dlock__keywatch_free(dlock__keywatch *kw)
{
    if (!kw)
        return;
    DLOCK__MAP_EACH(&kw->keys, n)
        key_free((kw_key *)n);
    dlock__map_free(&kw->keys);
    for (size_t i = 0; i < kw->nnodes; i++) {
        dlock__tracking_free(kw->nodes[i]->listener);
        free(kw->nodes[i]);
    }
    free(kw->nodes);
    while (!dlock__list_empty(&kw->reqs)) {
        dlock__list *it = kw->reqs.next;
        dlock__list_remove(it);
        free(DLOCK__CONTAINER_OF(it, kw_req, link));
    }
    pthread_mutex_destroy(&kw->qmu);
    free(kw);
}
