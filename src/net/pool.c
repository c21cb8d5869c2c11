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

struct dlock__node {
    const dlock__netctx *ctx;
    dlock__endpoint ep;
    char addr[320];          /* printable address, no credentials */
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* an idle connection or a free slot appeared */
    redisContext **idle;     /* stack of idle connections */
    unsigned *idle_gen;      /* the generation of each one's name */
    int nidle;
    int nopen;               /* idle + in use + being opened */
    int max;
};

const dlock__endpoint *dlock__node_endpoint(const dlock__node *n) { return &n->ep; }
const char *dlock__node_addr(const dlock__node *n) { return n->addr; }
const dlock__netctx *dlock__node_ctx(const dlock__node *n) { return n->ctx; }

int dlock__node_new(dlock__node **out, const dlock__netctx *ctx, const dlock__endpoint *ep)
{
    dlock__node *n = calloc(1, sizeof(*n));
    if (!n)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    n->ctx = ctx;
    n->max = ctx->cfg->pool_size;
    n->idle = calloc((size_t)n->max, sizeof(*n->idle));
    n->idle_gen = calloc((size_t)n->max, sizeof(*n->idle_gen));
    if (!n->idle || !n->idle_gen || dlock__endpoint_copy(&n->ep, ep) != DLOCK_OK) {
        free(n->idle);
        free(n->idle_gen);
        free(n);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    dlock__endpoint_str(&n->ep, n->addr, sizeof(n->addr));
    pthread_mutex_init(&n->mu, NULL);
    if (dlock__cond_init(&n->cv) != 0) {
        pthread_mutex_destroy(&n->mu);
        dlock__endpoint_clear(&n->ep);
        free(n->idle);
        free(n->idle_gen);
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
        redisFree(n->idle[i]);
    free(n->idle);
    free(n->idle_gen);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    dlock__endpoint_clear(&n->ep);
    free(n);
}

/* The generation of the current name (0 when connections are not named). */
static unsigned name_gen_now(const dlock__node *n)
{
    return n->ctx->name ? atomic_load(&n->ctx->name->gen) : 0;
}

int dlock__node_get_conn(dlock__node *n, redisContext **out, int *fresh, int idle_only,
                         unsigned *name_gen)
{
    pthread_mutex_lock(&n->mu);
    int64_t deadline = dlock__now_ms() + n->ctx->cfg->command_timeout_ms;
    for (;;) {
        if (n->nidle > 0) {
            redisContext *ctx = n->idle[--n->nidle];
            *name_gen = n->idle_gen[n->nidle];
            if (!dlock__conn_alive(ctx)) {
                n->nopen--;   /* closed by the server meanwhile: drop it unused */
                pthread_mutex_unlock(&n->mu);
                dlock__conn_abort(ctx);
                pthread_mutex_lock(&n->mu);
                continue;
            }
            *out = ctx;
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
    int rc = dlock__conn_open(n->ctx, &n->ep, n->addr, out, name_gen);
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

void dlock__node_put_conn(dlock__node *n, redisContext *ctx, int broken, unsigned name_gen)
{
    pthread_mutex_lock(&n->mu);
    if (broken || ctx->err || n->nidle >= n->max || name_gen != name_gen_now(n)) {
        n->nopen--;
        pthread_mutex_unlock(&n->mu);
        dlock__conn_abort(ctx);
        pthread_mutex_lock(&n->mu);
    } else {
        n->idle_gen[n->nidle] = name_gen;
        n->idle[n->nidle++] = ctx;
    }
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

void dlock__node_rename_idle(dlock__node *n)
{
    if (!n->ctx->name)
        return;
    /* Take every idle connection out (nobody else uses them meanwhile), rename
     * each with one round trip, give them back. */
    pthread_mutex_lock(&n->mu);
    int k = n->nidle;
    redisContext **v = k ? malloc((size_t)k * sizeof(*v)) : NULL;
    if (!v) {
        pthread_mutex_unlock(&n->mu);
        return;
    }
    memcpy(v, n->idle, (size_t)k * sizeof(*v));
    n->nidle = 0;
    pthread_mutex_unlock(&n->mu);
    char name[DLOCK__CONN_NAME_MAX];
    unsigned gen = dlock__connname_get(n->ctx->name, name);
    for (int i = 0; i < k; i++) {
        redisReply *r = redisCommand(v[i], "CLIENT SETNAME %s", name);
        int ok = r && r->type != REDIS_REPLY_ERROR;
        if (r)
            freeReplyObject(r);
        dlock__node_put_conn(n, v[i], !ok, gen);
    }
    free(v);
}

int dlock__node_check(dlock__node *n)
{
    redisContext *ctx;
    int fresh;
    unsigned gen;
    int rc = dlock__node_get_conn(n, &ctx, &fresh, 0, &gen);
    if (rc != DLOCK_OK)
        return rc;
    redisReply *r = redisCommand(ctx, "PING");
    if (!r) {
        int timed_out = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
        rc = dlock__fail(timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, "%s does not answer PING: %s",
                         n->addr, timed_out ? "no reply within the command timeout" : ctx->errstr);
        dlock__node_put_conn(n, ctx, 1, gen);
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR)
        rc = dlock__fail(dlock__redis_error_code(r->str), "%s answered PING with: %s", n->addr,
                         r->str);
    freeReplyObject(r);
    dlock__node_put_conn(n, ctx, 0, gen);
    return rc;
}
