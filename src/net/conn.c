/* A blocking hiredis connection: opened with the handshake under the connect
 * timeout, then used for one request at a time under the command timeout. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "net/net.h"

static struct timeval tv_of(int64_t ms)
{
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

/* Sends the handshake pipelined and reads every answer. A new connection is
 * used only once the server has answered on it. */
static int handshake(dlock__netctx *nc, const dlock__endpoint *ep, const char *addr,
                     redisContext *ctx, uint64_t *name_gen)
{
    dlock__hs_step steps[DLOCK__HS_MAX];
    int n = dlock__handshake_steps(nc, ep, steps, name_gen);
    for (int i = 0; i < n; i++)
        redisAppendCommandArgv(ctx, steps[i].argc, steps[i].argv, NULL);
    int rc = DLOCK_OK;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(ctx, (void **)&r) != REDIS_OK || !r)
            return dlock__fail(DLOCK_ECONN, "connection to %s failed during %s: %s", addr,
                               steps[i].what, ctx->errstr[0] ? ctx->errstr : "no reply");
        if (rc == DLOCK_OK)
            rc = dlock__handshake_check(nc, &steps[i], r, addr);
        freeReplyObject(r);
    }
    return rc;
}

int dlock__conn_open(dlock__netctx *nc, const dlock__endpoint *ep, const char *addr,
                     redisContext **out, uint64_t *name_gen)
{
    const dlock_config *cfg = nc->cfg;
    struct timeval ctv = tv_of(cfg->connect_timeout_ms);
    redisContext *ctx = ep->path ? redisConnectUnixWithTimeout(ep->path, ctv)
                                 : redisConnectWithTimeout(ep->host, ep->port, ctv);
    if (!ctx)
        return dlock__fail(DLOCK_ENOMEM, "out of memory opening a connection");
    if (ctx->err) {
        int rc = dlock__fail(DLOCK_ECONN, "cannot connect to %s: %s", addr, ctx->errstr);
        redisFree(ctx);
        return rc;
    }
    /* The handshake runs under the connect timeout (hiredis 0.14 applies its
     * connect timeout to the connect only), commands under theirs. */
    int rc = redisSetTimeout(ctx, ctv) == REDIS_OK
                 ? handshake(nc, ep, addr, ctx, name_gen)
                 : dlock__fail(DLOCK_ESYS, "cannot set the connect timeout: %s", ctx->errstr);
    if (rc == DLOCK_OK && redisSetTimeout(ctx, tv_of(cfg->command_timeout_ms)) != REDIS_OK)
        rc = dlock__fail(DLOCK_ESYS, "cannot set the command timeout: %s", ctx->errstr);
    if (rc != DLOCK_OK) {
        redisFree(ctx);
        return rc;
    }
    if (!ep->path)
        redisEnableKeepAlive(ctx);   /* fails, and breaks the context, on unix sockets */
    *out = ctx;
    return DLOCK_OK;
}

void dlock__conn_abort(redisContext *ctx)
{
    if (ctx->fd >= 0) {
        struct linger lg = {1, 0};
        setsockopt(ctx->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    redisFree(ctx);
}

int dlock__conn_alive(redisContext *ctx)
{
    char b;
    ssize_t k = recv(ctx->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

dlock__sent dlock__conn_roundtrip(redisContext *ctx, int argc, const char *const *argv,
                                  const size_t *lens, int ping_first, redisReply **out,
                                  int *timed_out)
{
    static const char *ping_av[] = {"PING"};
    static const size_t ping_len[] = {4};
    *out = NULL;
    if (ping_first && redisAppendCommandArgv(ctx, 1, ping_av, ping_len) != REDIS_OK)
        return DLOCK__NOT_SENT;
    if (redisAppendCommandArgv(ctx, argc, (const char **)argv, lens) != REDIS_OK)
        return DLOCK__NOT_SENT;
    int done = 0;
    do {
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            return DLOCK__NOT_SENT;
    } while (!done);
    /* The PING's answer (whatever it is, even NOPERM) comes first and is
     * dropped; failing to read either means the request may have run. */
    void *r = NULL;
    for (int replies = ping_first ? 2 : 1; replies > 0; replies--) {
        if (r)
            freeReplyObject(r);
        r = NULL;
        if (redisGetReply(ctx, &r) != REDIS_OK || !r) {
            /* hiredis reports a read timeout as an I/O error with EAGAIN. */
            *timed_out = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
            return DLOCK__MAYBE_RAN;
        }
    }
    *out = r;
    return DLOCK__SENT_OK;
}
