/* A node: one Redis server seen through a pool of blocking connections.
 *
 * The hot path (acquire or release without contention) is one round trip on a
 * pooled connection taken by the calling thread: no hop through the io thread.
 * An idle pooled connection is checked before use (a non-blocking peek): after
 * a server restart every idle connection is dead, and is dropped unused.
 * Discarded connections are aborted (RST), so that nothing they still had
 * queued reaches Redis later. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

typedef struct idle_conn {
    dlock__conn *conn;
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
    _Atomic int64_t quarantine_until;   /* ms (dlock__now_ms): failover quarantine */
    _Atomic int64_t promoted_at;        /* ms (dlock__now_ms) of its last promotion, or 0 */
};

const dlock__endpoint *dlock__node_endpoint(const dlock__node *n) { return &n->ep; }
const char *dlock__node_addr(const dlock__node *n) { return n->addr; }
dlock__netctx *dlock__node_ctx(const dlock__node *n) { return n->ctx; }

void dlock__node_promoted(dlock__node *n)
{
    dlock__netctx *ctx = n->ctx;
    int64_t q = dlock__netctx_quarantine_ms(ctx);
    if (q > 0) {
        atomic_store(&n->quarantine_until, dlock__now_ms() + q);
        dlock__log(ctx->cfg, DLOCK_LOG_WARN,
                   "%s is a new primary: acquisitions on it wait %lld ms (failover quarantine)",
                   n->addr, (long long)q);
    }
    atomic_store(&n->promoted_at, dlock__now_ms());
    pthread_mutex_lock(&ctx->hook_mu);
    if (ctx->on_promoted)
        ctx->on_promoted(ctx->promoted_ud);
    pthread_mutex_unlock(&ctx->hook_mu);
}

int dlock__quarantine_refusal(const dlock__node *n, unsigned flags, dlock__res *res)
{
    int64_t left = (flags & DLOCK__CALL_QUARANTINE) ? dlock__node_quarantine_left(n) : 0;
    if (left <= 0)
        return DLOCK_OK;
    res->err = DLOCK__RERR_QUARANTINE;
    snprintf(res->text, sizeof(res->text), "%lld", (long long)left);   /* dlock__quarantine_met */
    return dlock__fail(DLOCK_ETIMEDOUT, "%s: a new primary, in its failover quarantine for %lld ms "
                                        "more: not sent",
                       n->addr, (long long)left);
}

int64_t dlock__node_promoted_at(const dlock__node *n) { return atomic_load(&n->promoted_at); }

int64_t dlock__node_quarantine_left(const dlock__node *n)
{
    int64_t until = atomic_load(&n->quarantine_until);
    if (until == 0)
        return 0;
    int64_t left = until - dlock__now_ms();
    return left > 0 ? left : 0;
}

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
        dlock__conn_close(n->idle[i].conn);
    free(n->idle);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    dlock__endpoint_clear(&n->ep);
    free(n);
}

int dlock__node_get_conn(dlock__node *n, dlock__conn **out, uint64_t *gen, int *fresh,
                         int idle_only)
{
    pthread_mutex_lock(&n->mu);
    int64_t deadline = -1;
    for (;;) {
        if (n->nidle > 0) {
            idle_conn ic = n->idle[--n->nidle];
            dlock__conn *c = ic.conn;
            /* Closed by the server meanwhile, or named before the client's
             * name changed: drop it unused (a new one carries the new name). */
            int renamed = ic.name_gen != dlock__netctx_gen(n->ctx);
            if (renamed || !dlock__conn_alive(c)) {
                n->nopen--;
                pthread_mutex_unlock(&n->mu);
                if (!renamed)
                    dlock__stats_count(n->ctx->stats, DLOCK__ST_RECONNECTS, 1);
                dlock__conn_abort(c);
                pthread_mutex_lock(&n->mu);
                continue;
            }
            *out = c;
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
        if (deadline < 0)
            deadline = dlock__now_ms() + n->ctx->cfg->command_timeout_ms;
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

void dlock__node_put_conn(dlock__node *n, dlock__conn *c, uint64_t gen, int broken)
{
    broken = broken || dlock__conn_broken(c);
    pthread_mutex_lock(&n->mu);
    if (broken || n->nidle >= n->max) {
        n->nopen--;
        pthread_mutex_unlock(&n->mu);
        if (broken)
            dlock__stats_count(n->ctx->stats, DLOCK__ST_RECONNECTS, 1);
        dlock__conn_abort(c);
        pthread_mutex_lock(&n->mu);
    } else {
        n->idle[n->nidle].conn = c;
        n->idle[n->nidle++].name_gen = gen;
    }
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

int dlock__node_check(dlock__node *n)
{
    dlock__conn *c;
    uint64_t gen;
    int fresh, timed_out = 0;
    int rc = dlock__node_get_conn(n, &c, &gen, &fresh, 0);
    if (rc != DLOCK_OK)
        return rc;
    static const char *av[] = {"PING"};
    redisReply *r;
    if (dlock__conn_roundtrip(c, 1, av, NULL, 0, &r, &timed_out) != DLOCK__SENT_OK) {
        rc = dlock__fail(dlock__conn_oom(c) ? DLOCK_ENOMEM
                         : timed_out        ? DLOCK_ECMDTIMEOUT
                                            : DLOCK_ECONN,
                         "%s does not answer PING: %s", n->addr,
                         timed_out ? "no reply within the command timeout" : dlock__conn_error(c));
        dlock__node_put_conn(n, c, gen, 1);
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR)
        rc = dlock__fail(dlock__rerr_code(dlock__redis_classify(r->str)), "%s answered PING with: %s", n->addr,
                         r->str);
    freeReplyObject(r);
    dlock__node_put_conn(n, c, gen, 0);
    return rc;
}
