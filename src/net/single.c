/* One address (redis://, rediss://, unix://) whose server may stop being the
 * primary: a managed Redis fails over behind a DNS name, or an operator runs
 * REPLICAOF, and the connections already open keep reaching the old server,
 * now a replica that answers every write with READONLY.
 *
 * A READONLY answer retires the node (the pool of connections) it came from:
 * a new node for the same address takes its place, so every connection from
 * then on is opened afresh, resolving the name again (transport.c and aconn.c
 * resolve on every connect), and the holders of node pointers (the watchdog's
 * renewal connections, the asynchronous calls) move to it at their next
 * request. The retired node's idle connections are closed at once; its pool
 * stays allocated until the router goes, since pointers to it may be held.
 *
 * A request refused with READONLY did not run, so it goes again within the
 * retry budget: at once on the new node's connections, after the retry
 * delay when no move was due (one per retry delay); a connection reset or LOADING follows
 * call.c's rules (a LOADING connection is not kept either). When the name
 * still reaches a replica when the budget ends, the caller gets the READONLY
 * status with a message saying so; holds whose renewals keep being refused
 * are reported lost by the watchdog at their loss deadline. */
#include <stdio.h>
#include <stdlib.h>

#include "net/backend.h"

/* Nodes kept for the router's life: one per move. Past this, a move only
 * closes the idle connections of the node of the moment. */
#define MAX_NODES 64

typedef struct dlock__single dlock__single;

struct dlock__single {
    dlock__backend base;                /* first: the router's handle */
    dlock__netctx *ctx;
    pthread_mutex_t mu;                 /* nodes, nnodes, moved_at */
    dlock__node *nodes[MAX_NODES];
    size_t nnodes;
    int64_t moved_at;                   /* when the last move happened (ms) */
    _Atomic(dlock__node *) cur;
};

static const dlock__backend_ops single_ops;

int dlock__single_new(dlock__backend **out, dlock__netctx *ctx, const dlock__endpoint *ep)
{
    dlock__single *s = calloc(1, sizeof(*s));
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->base.ops = &single_ops;
    s->ctx = ctx;
    int rc = dlock__node_new(&s->nodes[0], ctx, ep);
    if (rc != DLOCK_OK) {
        free(s);
        return rc;
    }
    s->nnodes = 1;
    s->moved_at = -1;
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->cur, s->nodes[0]);
    *out = &s->base;
    return DLOCK_OK;
}

static void one_free(dlock__backend *b)
{
    dlock__single *s = (dlock__single *)b;
    for (size_t i = 0; i < s->nnodes; i++)
        dlock__node_free(s->nodes[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static dlock__node *one_node(dlock__backend *b, const char *key, size_t len)
{
    (void)key;
    (void)len;
    return atomic_load(&((dlock__single *)b)->cur);
}


/* Closes every idle pooled connection of n (those in use are closed when
 * they next fail). */
static void drop_idle(dlock__node *n)
{
    dlock__conn *c;
    uint64_t gen;
    int fresh;
    while (dlock__node_get_conn(n, &c, &gen, &fresh, 1) == DLOCK_OK)
        dlock__node_put_conn(n, c, gen, 1);
}

/* The server answered READONLY: new connections from now on. 1 when this
 * call moved to a new node. */
static int demoted(dlock__single *s, const dlock__node *seen)
{
    dlock__node *old = atomic_load(&s->cur);
    if (seen && seen != old)
        return 1;   /* already moved since that answer */
    const dlock_config *cfg = s->ctx->cfg;
    int64_t now = dlock__now_ms();
    pthread_mutex_lock(&s->mu);
    /* One move per retry delay: a name that still reaches a replica would
     * otherwise get a new pool for every refused request. */
    int64_t every = cfg->retry_delay_ms > 100 ? cfg->retry_delay_ms : 100;
    int move = atomic_load(&s->cur) == old && (s->moved_at < 0 || now - s->moved_at >= every);
    dlock__node *n = NULL;
    if (move) {
        s->moved_at = now;
        if (s->nnodes < MAX_NODES &&
            dlock__node_new(&n, s->ctx, dlock__node_endpoint(old)) == DLOCK_OK) {
            s->nodes[s->nnodes++] = n;
            atomic_store(&s->cur, n);
        }
        atomic_fetch_add(&s->base.generation, 1);
    }
    pthread_mutex_unlock(&s->mu);
    if (!move)
        return 0;
    if (n) {
        dlock__log(cfg, DLOCK_LOG_WARN,
                   "%s: the server there is not the primary now (READONLY, or ROLE "
                   "asked for a waiter); connecting again (the name resolved afresh)",
                   dlock__node_addr(old));
        dlock__node_promoted(n);   /* whatever serves the name next is another server */
    }
    drop_idle(old);
    return n != NULL;
}

static void one_demoted(dlock__backend *b, const dlock__node *seen)
{
    (void)demoted((dlock__single *)b, seen);
}

static int one_call(dlock__backend *b, const dlock__req *req, dlock__res *res)
{
    dlock__single *s = (dlock__single *)b;
    const dlock_config *cfg = s->ctx->cfg;
    int failures = 0;
    for (;;) {
        dlock__node *n = atomic_load(&s->cur);
        int rc = dlock__node_call(n, req, res);
        if (rc == DLOCK_OK || res->err != DLOCK__RERR_READONLY)
            return rc;
        dlock__aside aside;
        dlock__aside_begin(&aside);
        int moved = demoted(s, n);
        dlock__aside_end(&aside, DLOCK_OK);
        if ((req->flags & DLOCK__CALL_NO_RETRY) || failures++ >= cfg->retry_attempts)
            return dlock__fail(rc, "%s: %s (the server behind the address is a replica, at "
                                   "every try within the retry budget)",
                               dlock__node_addr(n), res->text);
        if (moved)
            continue;   /* new connections: the name may name the new primary now */
        int prc = dlock__cancel_sleep(req->cancel, cfg->retry_delay_ms);
        if (prc != DLOCK_OK)
            return prc;
    }
}

static const dlock__backend_ops single_ops = {
    .free = one_free,
    .node = one_node,
    .call = one_call,
    .demoted = one_demoted,
};
