/* A node: one Redis server seen through a pool of blocking connections.
 *
 * The hot path (acquire or release without contention) is one round trip on a
 * pooled connection taken by the calling thread: no hop through the io thread.
 * An idle pooled connection is checked before use (a non-blocking peek): after
 * a server restart every idle connection is dead, and is dropped unused.
 * Discarded connections are aborted (RST), so that nothing they still had
 * queued reaches Redis later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

typedef struct idle_conn {
    redisContext *ctx;
    uint64_t name_gen;       /* the connection name it was opened with */
} idle_conn;

struct dlock__node {
    dlock__netctx *ctx;
    dlock__endpoint ep;
    char addr[320];          /* printable address, no credentials */
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* an idle connection or a free slot appeared */
    idle_conn *idle;         /* stack of idle connections */
    int nidle;
    int nopen;               /* idle + in use + being opened */
    int max;
};

const dlock__endpoint *dlock__node_endpoint(const dlock__node *n) { return &n->ep; }
const char *dlock__node_addr(const dlock__node *n) { return n->addr; }
dlock__netctx *dlock__node_ctx(const dlock__node *n) { return n->ctx; }

int dlock__node_new(dlock__node **out, dlock__netctx *ctx, const dlock__endpoint *ep)
{
    dlock__node *n = calloc(1, sizeof(*n));
    if (!n)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    n->ctx = ctx;
    n->max = ctx->cfg->pool_size;
    n->idle = calloc((size_t)n->max, sizeof(*n->idle));
    if (!n->idle || dlock__endpoint_copy(&n->ep, ep) != DLOCK_OK) {
        free(n->idle);
        free(n);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    dlock__endpoint_str(&n->ep, n->addr, sizeof(n->addr));
    pthread_mutex_init(&n->mu, NULL);
    if (dlock__cond_init(&n->cv) != 0) {
        pthread_mutex_destroy(&n->mu);
        dlock__endpoint_clear(&n->ep);
        free(n->idle);
        free(n);
        return dlock__fail(DLOCK_ESYS, "cannot create a condition variable");
    }
    *out = n;
    return DLOCK_OK;
}

void dlock__node_free(dlock__node *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->nidle; i++)
        redisFree(n->idle[i].ctx);
    free(n->idle);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    dlock__endpoint_clear(&n->ep);
    free(n);
}

int dlock__node_get_conn(dlock__node *n, redisContext **out, uint64_t *gen, int *fresh,
                         int idle_only)
{
    pthread_mutex_lock(&n->mu);
    int64_t deadline = dlock__now_ms() + n->ctx->cfg->command_timeout_ms;
    for (;;) {
        if (n->nidle > 0) {
            idle_conn ic = n->idle[--n->nidle];
            redisContext *ctx = ic.ctx;
            /* Closed by the server meanwhile, or named before the client's
             * name changed: drop it unused (a new one carries the new name). */
            if (ic.name_gen != dlock__netctx_gen(n->ctx) || !dlock__conn_alive(ctx)) {
                n->nopen--;
                pthread_mutex_unlock(&n->mu);
                dlock__conn_abort(ctx);
                pthread_mutex_lock(&n->mu);
                continue;
            }
            *out = ctx;
            *gen = ic.name_gen;
            pthread_mutex_unlock(&n->mu);
            *fresh = 0;
            return DLOCK_OK;
        }
        if (idle_only) {
            pthread_mutex_unlock(&n->mu);
            return dlock__fail(DLOCK_ECONN, "no idle connection to %s", n->addr);
        }
        if (n->nopen < n->max)
            break;
        struct timespec ts;
        dlock__abstime(deadline, &ts);
        if (pthread_cond_timedwait(&n->cv, &n->mu, &ts) == ETIMEDOUT && n->nidle == 0 &&
            n->nopen >= n->max) {
            pthread_mutex_unlock(&n->mu);
            return dlock__fail(DLOCK_ECMDTIMEOUT,
                               "all %d connections to %s stayed busy for the command timeout",
                               n->max, n->addr);
        }
    }
    n->nopen++;
    pthread_mutex_unlock(&n->mu);
    int rc = dlock__conn_open(n->ctx, &n->ep, n->addr, out, gen);
    if (rc != DLOCK_OK) {
        pthread_mutex_lock(&n->mu);
        n->nopen--;
        pthread_cond_signal(&n->cv);
        pthread_mutex_unlock(&n->mu);
        return rc;
    }
    *fresh = 1;
    return DLOCK_OK;
}

void dlock__node_put_conn(dlock__node *n, redisContext *ctx, uint64_t gen, int broken)
{
    pthread_mutex_lock(&n->mu);
    if (broken || ctx->err || n->nidle >= n->max) {
        n->nopen--;
        pthread_mutex_unlock(&n->mu);
        dlock__conn_abort(ctx);
        pthread_mutex_lock(&n->mu);
    } else {
        n->idle[n->nidle].ctx = ctx;
        n->idle[n->nidle++].name_gen = gen;
    }
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

int dlock__node_check(dlock__node *n)
{
    redisContext *ctx;
    uint64_t gen;
    int fresh;
    int rc = dlock__node_get_conn(n, &ctx, &gen, &fresh, 0);
    if (rc != DLOCK_OK)
        return rc;
    redisReply *r = redisCommand(ctx, "PING");
    if (!r) {
        int timed_out = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
        rc = dlock__fail(timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, "%s does not answer PING: %s",
                         n->addr, timed_out ? "no reply within the command timeout" : ctx->errstr);
        dlock__node_put_conn(n, ctx, gen, 1);
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR)
        rc = dlock__fail(dlock__redis_error_code(r->str), "%s answered PING with: %s", n->addr,
                         r->str);
    freeReplyObject(r);
    dlock__node_put_conn(n, ctx, gen, 0);
    return rc;
}
