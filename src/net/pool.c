/* A node: one Redis server seen through its shared connection (mux.c: every
 * thread's requests pipelined on it) and a pool of blocking connections for
 * what needs a connection of its own (a request whose replicas' WAIT counts
 * its connection's writes, a batch, ASKING before a request).
 *
 * The hot path (acquire or release) is one request on the shared connection
 * sent by the calling thread: no hop through the io thread. An idle pooled
 * connection is checked before use (a non-blocking peek): after a server
 * restart every idle connection is dead, and is dropped unused. Discarded
 * connections are aborted (RST), so that nothing they still had queued
 * reaches Redis later. */
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
    dlock__mux *mux;         /* the shared connection, or NULL */
    int mux_opening;         /* a caller is opening it */
    pthread_cond_t mux_cv;   /* ... and has finished */
    uint64_t mux_tries;      /* opens tried */
    int mux_rc;              /* how the last one ended */
    char mux_err[256];       /* ... its message */
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
    for (int i = 0; i < DLOCK__HOOKS; i++)
        if (ctx->on_promoted[i])
            ctx->on_promoted[i](ctx->promoted_ud[i], n);
    pthread_mutex_unlock(&ctx->hook_mu);
}

void dlock__node_clock_jumped(dlock__node *n, int64_t ms)
{
    dlock__netctx *ctx = n->ctx;
    const int64_t until = dlock__now_ms() + ms;
    int64_t was = atomic_load(&n->quarantine_until);
    while (was < until && !atomic_compare_exchange_weak(&n->quarantine_until, &was, until))
        ;
    pthread_mutex_lock(&ctx->hook_mu);
    if (ctx->on_jumped)
        ctx->on_jumped(ctx->jumped_ud, n, ms);
    pthread_mutex_unlock(&ctx->hook_mu);
}

int dlock__quarantine_refusal(const dlock__node *n, unsigned flags, dlock__res *res)
{
    int64_t left = (flags & DLOCK__CALL_QUARANTINE) ? dlock__node_quarantine_left(n) : 0;
    if (left <= 0)
        return DLOCK_OK;
    res->err = DLOCK__RERR_QUARANTINE;
    snprintf(res->text, sizeof(res->text), "%lld", (long long)left);   /* dlock__quarantine_met */
    return dlock__fail(DLOCK_ETIMEDOUT,
                       "%s: quarantined (a new primary, or its clock jumped) for %lld ms more: "
                       "not sent",
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
    if (dlock__cond_init(&n->cv) != 0 || pthread_cond_init(&n->mux_cv, NULL) != 0) {
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
    dlock__mux_free(n->mux);
    free(n->idle);
    pthread_cond_destroy(&n->mux_cv);
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

/* ------------------------------------------------------ shared connection */

/* Drops the node's shared connection when it no longer takes requests;
 * returns it when nobody uses it any more (the caller frees it outside the
 * mutex), else NULL. n->mu held. */
static dlock__mux *unset_mux(dlock__node *n, uint64_t gen)
{
    dlock__mux *m = n->mux;
    if (!m || dlock__mux_usable(m, gen))
        return NULL;
    n->mux = NULL;
    return dlock__mux_ref(m, 0) == 0 ? m : NULL;
}

int dlock__node_get_mux(dlock__node *n, dlock__mux **out, int *fresh, int idle_only)
{
    uint64_t gen = dlock__netctx_gen(n->ctx);
    *fresh = 0;
    pthread_mutex_lock(&n->mu);
    for (;;) {
        dlock__mux *old = unset_mux(n, gen);
        if (old) {
            pthread_mutex_unlock(&n->mu);
            dlock__mux_free(old);
            pthread_mutex_lock(&n->mu);
            continue;
        }
        if (n->mux) {
            dlock__mux_ref(n->mux, 1);
            *out = n->mux;
            pthread_mutex_unlock(&n->mu);
            return DLOCK_OK;
        }
        if (idle_only) {
            pthread_mutex_unlock(&n->mu);
            return dlock__fail(DLOCK_ECONN, "no idle connection to %s", n->addr);
        }
        if (n->mux_opening) {
            /* Another caller opens it (within the connect timeout): its
             * outcome is ours. */
            uint64_t tries = n->mux_tries;
            while (n->mux_opening)
                pthread_cond_wait(&n->mux_cv, &n->mu);
            *fresh = 1;
            if (n->mux_tries != tries && n->mux_rc != DLOCK_OK) {
                int rc = n->mux_rc;
                char msg[sizeof(n->mux_err)];
                memcpy(msg, n->mux_err, sizeof(msg));
                pthread_mutex_unlock(&n->mu);
                return dlock__fail(rc, "%s", msg);
            }
            continue;
        }
        n->mux_opening = 1;
        pthread_mutex_unlock(&n->mu);
        dlock__mux *m = NULL;
        /* Its failure is ours and that of every caller who waited for it. */
        char why[sizeof(n->mux_err)] = "";
        dlock__errto prev = dlock__err_into(why, sizeof(why));
        int rc = dlock__mux_open(n->ctx, &n->ep, n->addr, &m);
        dlock__err_reset(prev);
        pthread_mutex_lock(&n->mu);
        n->mux_opening = 0;
        n->mux_tries++;
        n->mux_rc = rc;
        if (rc != DLOCK_OK)
            memcpy(n->mux_err, why, sizeof(why));
        else
            n->mux = m;
        pthread_cond_broadcast(&n->mux_cv);
        if (rc != DLOCK_OK) {
            pthread_mutex_unlock(&n->mu);
            return dlock__fail(rc, "%s", why);
        }
        *fresh = 1;
    }
}

void dlock__node_put_mux(dlock__node *n, dlock__mux *m)
{
    pthread_mutex_lock(&n->mu);
    int drop = dlock__mux_ref(m, -1) == 0 && n->mux != m;
    dlock__mux *old = unset_mux(n, dlock__netctx_gen(n->ctx));
    pthread_mutex_unlock(&n->mu);
    if (drop)
        dlock__mux_free(m);
    if (old)
        dlock__mux_free(old);
}

int dlock__node_check(dlock__node *n)
{
    dlock__mux *m;
    int fresh, timed_out, oom;
    int rc = dlock__node_get_mux(n, &m, &fresh, 0);
    if (rc != DLOCK_OK)
        return rc;
    static const char *av[] = {"PING"};
    redisReply *r;
    char why[320];
    if (dlock__mux_roundtrip(m, 1, av, NULL, 0, &r, &timed_out, &oom, why, sizeof(why)) !=
        DLOCK__SENT_OK) {
        dlock__node_put_mux(n, m);
        return dlock__fail(oom         ? DLOCK_ENOMEM
                           : timed_out ? DLOCK_ECMDTIMEOUT
                                       : DLOCK_ECONN,
                           "%s does not answer PING: %s", n->addr, why);
    }
    dlock__node_put_mux(n, m);
    if (r->type == REDIS_REPLY_ERROR)
        rc = dlock__fail(dlock__rerr_code(dlock__redis_classify(r->str)),
                         "%s answered PING with: %s", n->addr, r->str);
    freeReplyObject(r);
    return rc;
}
