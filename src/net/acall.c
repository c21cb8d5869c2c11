/* Requests from the io thread: the asynchronous calls' round trips.
 *
 * One command connection (an aconn, not pub/sub) per node, opened on the
 * first request for it. A request goes to the node that serves its key (the
 * router's answer: the primary, behind Sentinel the current one, on a
 * cluster the owner of the key's slot), chosen again whenever it waits for a
 * connection: a node that answers MOVED, ASK, READONLY or CLUSTERDOWN gets
 * the router told (it reads the map or the primary again) and the request
 * is sent again after the retry delay, as an idempotent one is after a lost
 * reply. A request keeps dlock__node_call's rules (net/call.c,
 * docs/internals/retries.md), without a thread to block:
 *   - scripts go by EVALSHA; NOSCRIPT loads the script and resends once
 *     (replies come in order, so the load runs before the resend);
 *   - a request that cannot be written yet (the connection is down) waits
 *     in `waiting` for the connection, at most the blocking call's whole
 *     connect-and-retry schedule, then fails with DLOCK_ECONN; one with
 *     DLOCK__CALL_NO_RETRY (a RedLock's) waits for one connection attempt
 *     only: it fails when that attempt fails, or after the connect timeout;
 *   - once written, a lost reply (timeout, reset) means it may have run: an
 *     idempotent request is written again after the retry delay, up to
 *     retry_attempts times; any other ends with DLOCK_EUNKNOWN;
 *   - a latched request (a release) is never written when its reply could
 *     come after first write + latch;
 *   - transient server errors (LOADING, BUSY, ...) are retried after the
 *     retry delay;
 *   - an acquisition (DLOCK__CALL_WAIT_ACK) with replica acknowledgement on
 *     is answered after WAIT (under DLOCK_REPLICAS_ALL, ROLE then WAIT) on
 *     the connection that wrote it, as the blocking call does (its count in
 *     res->acks; 0 when WAIT could not be asked). Such acquisitions have a
 *     connection per node of their own: a WAIT holds the replies behind it
 *     up to the ack timeout, and releases and queries do not queue there.
 * The callback runs exactly once per accepted request; on the io thread.
 *
 * Writes: the requests of one turn of the loop go out in one write. The
 * first request corks the connection and starts a uv_prepare and a
 * uv_check; whichever runs first uncorks it: the prepare right before the
 * loop waits for I/O (requests made by timers), the check right after the
 * I/O callbacks (requests made by completions; the loop may be embedded in a
 * program's and run one turn at a time, so the next prepare may be far).
 * A hundred callbacks that each start a call cost one write, not a hundred. */
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

typedef struct anode anode;

typedef struct areq {
    dlock__list link;        /* in its node's waiting list while not written */
    dlock__acall *x;
    anode *an;               /* the node it was last routed to */
    const char *key;         /* routes it (NULL: any node); in its own copy */
    size_t klen;
    dlock__acall_fn fn;
    void *ud;
    int script;
    unsigned flags;
    int64_t latch_ms;
    int64_t first_write;     /* 0: never written */
    int64_t not_before;      /* a retry's pause */
    int64_t give_up_at;      /* waiting for the connection until then */
    int tries;               /* failures retried so far */
    int reloaded;
    redisReply *answer;      /* the answer, while WAIT (and ROLE) follow it */
    int argc;
    const char **av;
    size_t *lens;
} areq;

/* A node's connection and the requests waiting for it (io thread only). */
struct anode {
    dlock__acall *x;
    dlock__node *node;       /* the router's: lives as long as it */
    dlock__aconn *conn;
    dlock__list waiting;
    int corked;
    int acks;                /* the connection for acquisitions that WAIT */
};

struct dlock__acall {
    dlock__netctx *ctx;
    dlock__router *router;
    uv_loop_t *uv;
    anode **nodes;           /* io thread only, like everything below */
    size_t nn, cap;
    uv_timer_t timer;
    uv_prepare_t prep;       /* uncork before the loop waits ... */
    uv_check_t check;        /* ... or after its I/O callbacks */
    int corked;              /* some node is */
    int stopping;
};

static void on_reply(dlock__aconn *ac, redisReply *r, int status, void *ud);
static void on_prepare(uv_prepare_t *p);
static void on_check(uv_check_t *c);
static void arm(dlock__acall *x);

static const char *addr_of(const areq *a) { return dlock__node_addr(a->an->node); }

static void on_ready(dlock__aconn *ac, void *ud);
static void on_down(dlock__aconn *ac, int status, void *ud);

/* Whether a WAITs for replicas after its answer: then it goes on a
 * connection of its own to the node, so that the WAIT (up to the ack
 * timeout) holds only other such acquisitions, never releases and queries. */
static int wants_acks(const dlock__acall *x, const areq *a)
{
    return (a->flags & DLOCK__CALL_WAIT_ACK) && x->ctx->cfg->ack_replicas > 0;
}

/* The node that serves a's key now, with its connection (made on first
 * use), or NULL (out of memory: message set). */
static anode *route(dlock__acall *x, const areq *a)
{
    dlock__node *n = dlock__router_node(x->router, a->key, a->klen);
    int acks = wants_acks(x, a);
    for (size_t i = 0; i < x->nn; i++)
        if (x->nodes[i]->node == n && x->nodes[i]->acks == acks)
            return x->nodes[i];
    if (x->nn == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 4;
        anode **v = realloc(x->nodes, cap * sizeof(*v));
        if (!v) {
            dlock__fail(DLOCK_ENOMEM, "out of memory");
            return NULL;
        }
        x->nodes = v;
        x->cap = cap;
    }
    anode *an = calloc(1, sizeof(*an));
    if (!an) {
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    an->x = x;
    an->node = n;
    an->acks = acks;
    dlock__list_init(&an->waiting);
    dlock__aconn_cbs cbs = {on_ready, on_down, NULL, an};
    if (dlock__aconn_new(&an->conn, x->uv, x->ctx, dlock__node_endpoint(n), 0, &cbs) !=
        DLOCK_OK) {
        free(an);
        dlock__fail(DLOCK_ENOMEM, "out of memory creating a connection");
        return NULL;
    }
    x->nodes[x->nn++] = an;
    return an;
}

/* A deep copy: the aconn frees its reply after the callback, the caller
 * keeps ours. */
static redisReply *dup_reply(const redisReply *r)
{
    redisReply *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->type = r->type;
    d->integer = r->integer;
    if (r->str) {
        d->len = r->len;
        if (!(d->str = dlock__strndup(r->str, r->len))) {
            free(d);
            return NULL;
        }
    }
    if (r->element && r->elements > 0) {
        d->element = calloc(r->elements, sizeof(*d->element));
        if (!d->element) {
            freeReplyObject(d);
            return NULL;
        }
        d->elements = r->elements;
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i] && !(d->element[i] = dup_reply(r->element[i]))) {
                freeReplyObject(d);
                return NULL;
            }
    }
    return d;
}

/* Ends a request: fn(status, res), the answer in res->r, or the failure's
 * message in res->msg. */
static void finish(areq *a, int status, dlock__res *res)
{
    dlock__acall_fn fn = a->fn;
    void *ud = a->ud;
    free(a);
    fn(status, res, ud);
}

/* Ends a request that has no outcome beyond its status and message. */
static void fail(areq *a, int status, const char *fmt, ...) DLOCK__PRINTF(3, 4);
static void fail(areq *a, int status, const char *fmt, ...)
{
    char msg[DLOCK__MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dlock__res res;
    dlock__res_init(&res);
    res.msg = msg;
    finish(a, status, &res);
}

static int64_t connect_budget(const dlock_config *cfg)
{
    return (cfg->connect_timeout_ms + cfg->retry_delay_ms) * (cfg->retry_attempts + 1);
}

/* Queues a for a connection (routed afresh: the node may have changed). */
static void wait_for_conn(dlock__acall *x, areq *a, int64_t not_before)
{
    a->not_before = not_before;
    a->give_up_at = dlock__now_ms() + ((a->flags & DLOCK__CALL_NO_RETRY)
                                           ? x->ctx->cfg->connect_timeout_ms
                                           : connect_budget(x->ctx->cfg));
    anode *an = route(x, a);
    if (an)
        a->an = an;   /* else the last node: it fails or answers again */
    dlock__list_push_back(&a->an->waiting, &a->link);
    dlock__aconn_start(a->an->conn);
    arm(x);
}

/* What this turn queued goes out in one write per node. */
static void uncork(dlock__acall *x)
{
    uv_prepare_stop(&x->prep);
    uv_check_stop(&x->check);
    if (!x->corked)
        return;
    x->corked = 0;
    for (size_t i = 0; i < x->nn; i++)
        if (x->nodes[i]->corked) {
            x->nodes[i]->corked = 0;
            dlock__stats_count(x->ctx->stats, DLOCK__ST_ACALL_WRITES, 1);
            dlock__aconn_uncork(x->nodes[i]->conn);
        }
}

static void on_prepare(uv_prepare_t *p) { uncork(p->data); }
static void on_check(uv_check_t *c) { uncork(c->data); }

/* Writes a on its node's connection, or queues it for the connection. */
static void write_req(dlock__acall *x, areq *a)
{
    dlock__res qres;
    dlock__res_init(&qres);
    char why[DLOCK__MSG_MAX] = "";
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int qrc = dlock__quarantine_refusal(a->an->node, a->flags, &qres);
    dlock__err_reset(prev);
    if (qrc != DLOCK_OK) {
        qres.msg = why;
        finish(a, DLOCK_ETIMEDOUT, &qres);
        return;
    }
    int64_t now = dlock__now_ms();
    if (!dlock__latch_allows(a->first_write ? a->first_write : -1, a->latch_ms,
                             x->ctx->cfg->command_timeout_ms, now)) {
        fail(a, DLOCK_EUNKNOWN, "%s: no reply to a request guarded by a latch, and a resend "
                                "could be answered after the latch: it may have run",
             addr_of(a));
        return;
    }
    anode *an = a->an;
    if (!an->corked) {
        dlock__aconn_cork(an->conn);
        an->corked = 1;
    }
    if (!x->corked) {
        x->corked = 1;
        uv_prepare_start(&x->prep, on_prepare);
        uv_check_start(&x->check, on_check);
    }
    if (dlock__aconn_send(an->conn, a->argc, a->av, a->lens, 1, on_reply, a) != DLOCK_OK) {
        wait_for_conn(x, a, 0);
        return;
    }
    if (!a->first_write)
        a->first_write = now;
}

/* Ends a with its answer and the replicas that acknowledged it. */
static void finish_acked(areq *a, int acks)
{
    dlock__res res;
    dlock__res_init(&res);
    res.r = a->answer;
    res.acks = acks;
    finish(a, DLOCK_OK, &res);
}

static void on_wait_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    (void)ac;
    (void)status;
    finish_acked(ud, dlock__ack_count(r));
}

/* WAIT for want replicas after a's answer, on ac; -1: not asked. */
static void ask_acks(dlock__aconn *ac, areq *a, int want)
{
    if (want < 0) {
        finish_acked(a, -1);
        return;
    }
    dlock__wait_cmd_t w;
    dlock__wait_cmd(&w, a->x->ctx->cfg, want);
    if (dlock__aconn_send(ac, 3, w.av, w.lens, 1, on_wait_reply, a) != DLOCK_OK)
        finish_acked(a, 0);   /* cannot be asked: none acknowledged */
}

static void on_role_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    areq *a = ud;
    if (!r) {
        finish_acked(a, 0);   /* the connection went: WAIT cannot follow */
        return;
    }
    ask_acks(ac, a, dlock__ack_want(a->x->ctx->cfg, dlock__role_replicas(r)));
}

/* a answered: with acknowledgement asked and on, ROLE and/or WAIT first. */
static void answered(dlock__aconn *ac, areq *a)
{
    const dlock_config *cfg = a->x->ctx->cfg;
    if (!wants_acks(a->x, a)) {
        finish_acked(a, -1);
        return;
    }
    if (!cfg->ack_all) {
        ask_acks(ac, a, cfg->ack_replicas);
        return;
    }
    const char *av[] = {"ROLE"};
    size_t lens[] = {4};
    if (dlock__aconn_send(ac, 1, av, lens, 1, on_role_reply, a) != DLOCK_OK)
        finish_acked(a, 0);
}

static void on_load(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    anode *an = ud;
    if (r && r->type == REDIS_REPLY_ERROR)
        dlock__log(an->x->ctx->cfg, DLOCK_LOG_ERROR, "SCRIPT LOAD on %s failed: %s",
                   dlock__node_addr(an->node), r->str);
}

static void on_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    areq *a = ud;
    dlock__acall *x = a->x;
    const dlock_config *cfg = x->ctx->cfg;
    if (!r && (status == DLOCK_ECLOSED || x->stopping)) {
        fail(a, DLOCK_ECLOSED, "client is closing");
        return;
    }
    /* Written, then no reply: it may have run. */
    dlock__try t = {.sent = r ? DLOCK__SENT_OK : DLOCK__MAYBE_RAN,
                    .timed_out = status == DLOCK_ECMDTIMEOUT};
    if (r && r->type == REDIS_REPLY_ERROR)
        t.err = dlock__redis_classify(r->str);
    unsigned flags = a->flags | (x->stopping ? DLOCK__CALL_NO_RETRY : 0);
    dlock__verdict v = dlock__call_policy(&t, flags, a->tries, a->reloaded || x->stopping, cfg);
    dlock__res res;
    dlock__res_init(&res);
    if (v.next == DLOCK__NEXT_RELOAD) {
        /* The server lost its script cache (restart, SCRIPT FLUSH): the load
         * goes first on the connection (replies come in order), then the
         * request again. */
        a->reloaded = 1;
        const dlock__script *s = &dlock__scripts[a->script];
        const char *av[] = {"SCRIPT", "LOAD", s->body};
        size_t lens[] = {6, 4, s->len};
        dlock__aconn_send(ac, 3, av, lens, 1, on_load, a->an);
        write_req(x, a);
        return;
    }
    if (v.next == DLOCK__NEXT_REROUTE &&
        (dlock__router_dynamic(x->router) || t.err == DLOCK__RERR_READONLY)) {
        /* Read the topology again soon (one address: connect anew, the name
         * resolved again); then routed afresh, as a retry. */
        if (t.err == DLOCK__RERR_READONLY)
            dlock__router_demoted(x->router, a->an->node);
        else
            dlock__router_stale(x->router);
        if (!(flags & DLOCK__CALL_NO_RETRY) && a->tries < cfg->retry_attempts)
            v = (dlock__verdict){DLOCK__NEXT_RETRY, v.rc, cfg->retry_delay_ms, 1};
    }
    if (v.next == DLOCK__NEXT_RETRY) {
        a->tries += v.counts;
        wait_for_conn(x, a, dlock__now_ms() + v.after_ms);
        return;
    }
    if (v.next == DLOCK__NEXT_DONE) {
        if (!(a->answer = dup_reply(r))) {
            fail(a, DLOCK_ENOMEM, "out of memory");
            return;
        }
        answered(ac, a);
        return;
    }
    char why[DLOCK__MSG_MAX];
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int rc = r ? dlock__res_refused(&res, addr_of(a), r)
               : dlock__call_lost(addr_of(a), &t, "connection lost", a->flags);
    dlock__err_reset(prev);
    res.msg = why;
    finish(a, rc, &res);
}

/* The waiting requests: written once their node's connection is ready and
 * their pause is over; failed once their budget is spent. */
static void run_waiting(dlock__acall *x)
{
    int64_t now = dlock__now_ms();
    dlock__list due, moved;
    dlock__list_init(&due);
    dlock__list_init(&moved);
    for (size_t i = 0; i < x->nn; i++) {
        anode *an = x->nodes[i];
        int ready = dlock__aconn_ready(an->conn);
        dlock__list *it = an->waiting.next;
        while (it != &an->waiting) {
            areq *a = DLOCK__CONTAINER_OF(it, areq, link);
            it = it->next;
            if ((ready && now >= a->not_before) || now >= a->give_up_at) {
                dlock__list_remove(&a->link);
                dlock__list_push_back(&due, &a->link);
            } else if (!ready && dlock__router_node(x->router, a->key, a->klen) != an->node) {
                /* Its node is down and no longer serves it (a new primary,
                 * a new slot map): to the node that does. */
                dlock__list_remove(&a->link);
                dlock__list_push_back(&moved, &a->link);
            }
        }
    }
    while (!dlock__list_empty(&moved)) {
        areq *a = DLOCK__CONTAINER_OF(moved.next, areq, link);
        dlock__list_remove(&a->link);
        int64_t give_up_at = a->give_up_at;
        wait_for_conn(x, a, a->not_before);
        a->give_up_at = give_up_at;
    }
    /* Callbacks may queue more; they wait for the next round. */
    while (!dlock__list_empty(&due)) {
        areq *a = DLOCK__CONTAINER_OF(due.next, areq, link);
        dlock__list_remove(&a->link);
        if (dlock__aconn_ready(a->an->conn) && now >= a->not_before) {
            write_req(x, a);
        } else {
            fail(a, DLOCK_ECONN, "%s: cannot reach the server", addr_of(a));
        }
    }
    arm(x);
}

static void on_timer(uv_timer_t *t) { run_waiting(t->data); }

static void arm(dlock__acall *x)
{
    if (x->stopping)
        return;
    int64_t at = INT64_MAX;
    /* A node that is down is looked at again every retry delay on a
     * deployment whose keys move: its requests may belong elsewhere now. */
    const int64_t recheck = dlock__router_dynamic(x->router)
                                ? dlock__now_ms() + x->ctx->cfg->retry_delay_ms
                                : INT64_MAX;
    for (size_t i = 0; i < x->nn; i++) {
        int ready = dlock__aconn_ready(x->nodes[i]->conn);
        dlock__list *it;
        DLOCK__LIST_FOREACH(it, &x->nodes[i]->waiting) {
            areq *a = DLOCK__CONTAINER_OF(it, areq, link);
            int64_t t = ready && a->not_before < a->give_up_at ? a->not_before : a->give_up_at;
            if (!ready && recheck < t)
                t = recheck;
            if (t < at)
                at = t;
        }
    }
    if (at == INT64_MAX) {
        uv_timer_stop(&x->timer);
        return;
    }
    int64_t now = dlock__now_ms();
    uv_timer_start(&x->timer, on_timer, (uint64_t)(at > now ? at - now : 0), 0);
}

static void on_ready(dlock__aconn *ac, void *ud) { run_waiting(((anode *)ud)->x); }

/* The node's connection failed (or was lost): the requests that wait for one
 * attempt only (DLOCK__CALL_NO_RETRY) fail, from the timer (never inside the
 * call that started the attempt). */
static void on_down(dlock__aconn *ac, int status, void *ud)
{
    (void)ac;
    (void)status;
    anode *an = ud;
    int64_t now = dlock__now_ms();
    int any = 0;
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &an->waiting) {
        areq *a = DLOCK__CONTAINER_OF(it, areq, link);
        if ((a->flags & DLOCK__CALL_NO_RETRY) && a->give_up_at > now) {
            a->give_up_at = now;
            any = 1;
        }
    }
    if (any)
        arm(an->x);
}

int dlock__acall_send(dlock__acall *x, const dlock__req *req, dlock__acall_fn fn, void *ud)
{
    if (x->stopping)
        return dlock__fail(DLOCK_ECLOSED, "client is closing");
    int rc = dlock__req_check(req);
    if (rc != DLOCK_OK)
        return rc;
    int pre = req->script >= 0 ? 3 : 0;
    int argc = req->argc + pre;
    size_t bytes = 0;
    for (int i = 0; i < req->argc; i++)
        bytes += req->lens ? req->lens[i] : strlen(req->argv[i]);
    /* One block: the request, its argv and lengths, then the bytes. */
    size_t head = sizeof(areq) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
    areq *a = malloc(head + bytes + 16);
    if (!a)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    memset(a, 0, sizeof(*a));
    a->x = x;
    a->fn = fn;
    a->ud = ud;
    /* The sharded variant (SPUBLISH) on a cluster with sharded pub/sub, as
     * dlock__router_call sends: its waiters SSUBSCRIBE, and a PUBLISH would
     * not reach them. */
    a->script = dlock__router_script(x->router, req->script);
    a->flags = req->flags;
    a->latch_ms = req->latch_ms;
    a->argc = argc;
    a->av = (const char **)(a + 1);
    a->lens = (size_t *)(a->av + argc);
    char *p = (char *)a + head;
    if (pre) {
        a->av[0] = "EVALSHA";
        a->lens[0] = 7;
        a->av[1] = dlock__scripts[a->script].sha;
        a->lens[1] = 40;
        a->lens[2] = dlock__fmt_i64(p, req->nkeys);
        a->av[2] = p;
        p += 16;
    }
    for (int i = 0; i < req->argc; i++) {
        size_t n = req->lens ? req->lens[i] : strlen(req->argv[i]);
        memcpy(p, req->argv[i], n);
        a->av[pre + i] = p;
        a->lens[pre + i] = n;
        p += n;
    }
    /* The key that routes it: a script's first key, a command's first
     * argument (every plain command the calls send names its key there). */
    int k = req->script >= 0 ? (req->nkeys > 0 ? pre : -1) : (req->argc >= 2 ? 1 : -1);
    if (k >= 0) {
        a->key = a->av[k];
        a->klen = a->lens[k];
    }
    a->an = route(x, a);
    if (!a->an) {
        free(a);
        return DLOCK_ENOMEM;   /* message set */
    }
    if (dlock__list_empty(&a->an->waiting) && dlock__aconn_ready(a->an->conn))
        write_req(x, a);
    else
        wait_for_conn(x, a, 0);
    return DLOCK_OK;
}

static void on_handle_closed(uv_handle_t *h) { (void)h; }

void dlock__acall_stop(dlock__acall *x)
{
    x->stopping = 1;
    x->corked = 0;
    for (size_t i = 0; i < x->nn; i++) {
        anode *an = x->nodes[i];
        dlock__aconn_close(an->conn, NULL, NULL);   /* fails the written ones */
        an->conn = NULL;
        while (!dlock__list_empty(&an->waiting)) {
            areq *a = DLOCK__CONTAINER_OF(an->waiting.next, areq, link);
            dlock__list_remove(&a->link);
            fail(a, DLOCK_ECLOSED, "client is closing");
        }
    }
    uv_timer_stop(&x->timer);
    uv_close((uv_handle_t *)&x->timer, on_handle_closed);
    uv_prepare_stop(&x->prep);
    uv_close((uv_handle_t *)&x->prep, on_handle_closed);
    uv_check_stop(&x->check);
    uv_close((uv_handle_t *)&x->check, on_handle_closed);
}

int dlock__acall_new(dlock__acall **out, uv_loop_t *uv, dlock__netctx *ctx,
                     dlock__router *router)
{
    dlock__acall *x = calloc(1, sizeof(*x));
    if (!x)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    x->ctx = ctx;
    x->router = router;
    x->uv = uv;
    uv_timer_init(uv, &x->timer);
    x->timer.data = x;
    uv_prepare_init(uv, &x->prep);
    x->prep.data = x;
    uv_check_init(uv, &x->check);
    x->check.data = x;
    *out = x;
    return DLOCK_OK;
}

void dlock__acall_free(dlock__acall *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->nn; i++)
        free(x->nodes[i]);
    free(x->nodes);
    free(x);
}
