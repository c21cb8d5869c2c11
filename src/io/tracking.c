/* An invalidation listener: a pub/sub connection subscribed to Redis's
 * `__redis__:invalidate` channel, the target of client-side tracking
 * (CLIENT TRACKING ON REDIRECT <its id>) that its owner enables on another
 * connection to the same node: the watchdog's renewal connection (a held
 * lock deleted or rewritten by someone else: a force unlock, an operator's
 * DEL, expiry, eviction, FLUSHALL) and the key watch's reader (a lock its
 * waiters wait for, freed however it was: keywatch.c). Redis then tells it,
 * within a round trip, of every change to a key that connection read. RESP2
 * has no push type, so the redirect to a subscribed connection is the way
 * Redis 6+ offers it to every client.
 *
 * This module only listens and reports: its connection's client id when it is
 * ready (CLIENT ID, then SUBSCRIBE: a subscribed RESP2 connection may send
 * neither CLIENT nor anything else), 0 when it is down (Redis drops the
 * invalidations meant for it meanwhile), and the keys of each invalidation.
 * What a key means is its owner's business. Io thread only. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/io.h"

#define INVALIDATE "__redis__:invalidate"

struct dlock__tracking {
    dlock__netctx *ctx;
    dlock__router *router;
    dlock__node *node;       /* where it listens; NULL: the router's node for no key */
    uv_loop_t *uv;
    dlock__tracking_cbs cbs;
    dlock__aconn *conn;
    int64_t id_pending;      /* CLIENT ID's answer, until SUBSCRIBE is confirmed */
    int64_t id;              /* reported id, 0 while not subscribed */
    int refused;             /* Redis refused CLIENT ID or the SUBSCRIBE: given up */
    uint64_t epoch;          /* connection generation: stale replies are ignored */
};

typedef struct t_req {
    dlock__tracking *t;
    uint64_t epoch;
} t_req;

static t_req *req_new(dlock__tracking *t)
{
    t_req *q = malloc(sizeof(*q));
    if (q) {
        q->t = t;
        q->epoch = t->epoch;
    }
    return q;
}

static void give_up(dlock__tracking *t, const char *what, const redisReply *r)
{
    if (t->refused)
        return;
    t->refused = 1;
    dlock__log(t->ctx->cfg, DLOCK_LOG_WARN,
               "invalidation listener: %s refused (%s); a lock deleted by someone else is "
               "found at its holder's next renewal, and by its waiters at its TTL",
               what, r && r->str ? r->str : "no answer");
    t->id = 0;
    t->cbs.on_id(-1, t->cbs.ud);
}

static void on_id_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    t_req *q = ud;
    dlock__tracking *t = q->t;
    if (q->epoch == t->epoch && r) {
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
            t->id_pending = r->integer;
        else
            give_up(t, "CLIENT ID", r);
    }
    free(q);
}

static void on_sub_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    t_req *q = ud;
    dlock__tracking *t = q->t;
    if (q->epoch == t->epoch && r) {
        if (r->type == REDIS_REPLY_ARRAY && t->id_pending > 0 && !t->refused) {
            t->id = t->id_pending;
            t->cbs.on_id(t->id, t->cbs.ud);
        } else if (r->type == REDIS_REPLY_ERROR) {
            give_up(t, "SUBSCRIBE " INVALIDATE, r);
        }
    }
    free(q);
}

static void on_ready(dlock__aconn *ac, void *ud)
{
    dlock__tracking *t = ud;
    t->epoch++;
    t->id_pending = 0;
    if (t->refused)
        return;
    const char *idv[] = {"CLIENT", "ID"};
    size_t idl[] = {6, 2};
    const char *subv[] = {"SUBSCRIBE", INVALIDATE};
    size_t subl[] = {9, sizeof(INVALIDATE) - 1};
    t_req *a = req_new(t), *b = req_new(t);
    dlock__aconn_cork(ac);
    if (!a || dlock__aconn_send(ac, 2, idv, idl, 1, on_id_reply, a) != DLOCK_OK) {
        free(a);
        a = NULL;
    }
    if (!a || !b || dlock__aconn_send(ac, 2, subv, subl, 1, on_sub_reply, b) != DLOCK_OK)
        free(b);
    dlock__aconn_uncork(ac);
}

static void on_down(dlock__aconn *ac, int status, void *ud)
{
    dlock__tracking *t = ud;
    t->epoch++;
    t->id_pending = 0;
    if (t->id) {
        t->id = 0;
        t->cbs.on_id(0, t->cbs.ud);
    }
}

static void on_push(dlock__aconn *ac, redisReply *r, void *ud)
{
    dlock__tracking *t = ud;
    if (r->elements != 3 || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[1]->len != sizeof(INVALIDATE) - 1 ||
        memcmp(r->element[1]->str, INVALIDATE, sizeof(INVALIDATE) - 1) != 0 || !t->id)
        return;
    const redisReply *keys = r->element[2];
    if (keys->type == REDIS_REPLY_ARRAY)
        t->cbs.on_invalidate(keys, t->cbs.ud);
    else   /* nil: FLUSHALL / FLUSHDB, or the tracking table overflowed */
        t->cbs.on_invalidate(NULL, t->cbs.ud);
}

int dlock__tracking_new(dlock__tracking **out, uv_loop_t *uv, dlock__netctx *ctx,
                        dlock__router *router, dlock__node *node, const dlock__tracking_cbs *cbs)
{
    dlock__tracking *t = calloc(1, sizeof(*t));
    if (!t)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    t->ctx = ctx;
    t->router = router;
    t->node = node;
    t->uv = uv;
    t->cbs = *cbs;
    *out = t;
    return DLOCK_OK;
}

void dlock__tracking_start(dlock__tracking *t)
{
    if (t->refused)
        return;
    if (!t->conn) {
        dlock__aconn_cbs cbs = {on_ready, on_down, on_push, t};
        dlock__node *n = t->node ? t->node : dlock__router_node(t->router, NULL, 0);
        const dlock__endpoint *ep = dlock__node_endpoint(n);
        if (dlock__aconn_new(&t->conn, t->uv, t->ctx, ep, 1, &cbs) != DLOCK_OK) {
            t->conn = NULL;
            return;
        }
    }
    dlock__aconn_start(t->conn);
}


void dlock__tracking_stop(dlock__tracking *t)
{
    if (t && t->conn) {
        t->epoch++;
        dlock__aconn_close(t->conn, NULL, NULL);
        t->conn = NULL;
        t->id = 0;
    }
}

void dlock__tracking_free(dlock__tracking *t) { free(t); }
