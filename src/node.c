/* One Redis server seen through a pool of blocking hiredis connections.
 *
 * The hot path (acquire or release without contention) is one round trip on a
 * pooled connection taken by the calling thread: no hop through the io thread.
 *
 * Retry policy. A failure before the request could reach Redis (connect
 * refused, a write that failed) is retried up to retry_attempts times. Once the
 * request is written, any failure to read the reply (timeout, reset, EOF) means
 * it may have run: it is retried only for idempotent requests, otherwise the
 * call returns DLOCK_EUNKNOWN, so that an acquire is never counted twice.
 * An idle pooled connection is checked before use (a non-blocking peek): after
 * a server restart every idle connection is dead, and is dropped unused.
 * A request guarded by a latch (release) is never written when its reply
 * could come after the latch expires: a retry landing after that would count
 * a second release. Discarded connections are aborted (RST), so that nothing
 * they still had queued reaches Redis later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "internal.h"

#define ARGV_STACK 24

struct dlock__node {
    dlock_client *c;
    dlock__endpoint ep;
    char addr[320];          /* printable address, no credentials */
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* an idle connection or a free slot appeared */
    redisContext **idle;     /* stack of idle connections */
    int nidle;
    int nopen;               /* idle + in use + being opened */
    int max;
};

static struct timeval tv_of(int64_t ms)
{
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

const dlock__endpoint *dlock__node_endpoint(const dlock__node *n) { return &n->ep; }

int dlock__node_new(dlock__node **out, dlock_client *c, const dlock__endpoint *ep)
{
    dlock__node *n = calloc(1, sizeof(*n));
    if (!n)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    n->c = c;
    n->max = c->cfg.pool_size;
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
        redisFree(n->idle[i]);
    free(n->idle);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    dlock__endpoint_clear(&n->ep);
    free(n);
}

/* Runs the connection handshake: AUTH, SELECT, CLIENT SETNAME, pipelined;
 * a PING when none of them applies. A new connection is used only once the
 * server has answered on it. */
static int handshake(dlock__node *n, redisContext *ctx)
{
    const dlock__endpoint *ep = &n->ep;
    const char *what[3];
    int credentials[3];   /* a refusal of this step means bad credentials */
    int sent = 0;
    if (ep->pass) {
        if (ep->user) {
            const char *av[] = {"AUTH", ep->user, ep->pass};
            redisAppendCommandArgv(ctx, 3, av, NULL);
        } else {
            const char *av[] = {"AUTH", ep->pass};
            redisAppendCommandArgv(ctx, 2, av, NULL);
        }
        credentials[sent] = 1;
        what[sent++] = "authentication";
    }
    if (ep->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", ep->db);
        const char *av[] = {"SELECT", db};
        redisAppendCommandArgv(ctx, 2, av, NULL);
        credentials[sent] = 1;
        what[sent++] = "database selection";
    }
    if (n->c->cfg.client_name) {
        const char *av[] = {"CLIENT", "SETNAME", n->c->cfg.client_name};
        redisAppendCommandArgv(ctx, 3, av, NULL);
        credentials[sent] = 0;
        what[sent++] = "CLIENT SETNAME";
    }
    if (sent == 0) {
        /* Nothing else to say: PING, so that a connection the kernel completed
         * for a server that is going away (shutting down, not accepting) fails
         * here, before a request that cannot be resent goes out on it. */
        const char *av[] = {"PING"};
        redisAppendCommandArgv(ctx, 1, av, NULL);
        credentials[sent] = 0;
        what[sent++] = "the first PING";
    }
    int rc = DLOCK_OK;
    for (int i = 0; i < sent; i++) {
        redisReply *r = NULL;
        if (redisGetReply(ctx, (void **)&r) != REDIS_OK || !r) {
            return dlock__fail(DLOCK_ECONN, "connection to %s failed during %s: %s", n->addr,
                               what[i], ctx->errstr[0] ? ctx->errstr : "no reply");
        }
        if (r->type == REDIS_REPLY_ERROR && rc == DLOCK_OK) {
            int code = dlock__redis_error_code(r->str);
            if (code == DLOCK_EREDIS && credentials[i])
                code = DLOCK_EAUTH;
            rc = dlock__fail(code, "%s refused by %s: %s", what[i], n->addr, r->str);
        }
        freeReplyObject(r);
    }
    return rc;
}

static int open_conn(dlock__node *n, redisContext **out)
{
    const dlock_config *cfg = &n->c->cfg;
    struct timeval ctv = tv_of(cfg->connect_timeout_ms);
    redisContext *ctx = n->ep.path ? redisConnectUnixWithTimeout(n->ep.path, ctv)
                                   : redisConnectWithTimeout(n->ep.host, n->ep.port, ctv);
    if (!ctx)
        return dlock__fail(DLOCK_ENOMEM, "out of memory opening a connection");
    if (ctx->err) {
        int rc = dlock__fail(DLOCK_ECONN, "cannot connect to %s: %s", n->addr, ctx->errstr);
        redisFree(ctx);
        return rc;
    }
    /* The handshake runs under the connect timeout (hiredis 0.14 applies its
     * connect timeout to the connect only), commands under theirs. */
    int rc = redisSetTimeout(ctx, ctv) == REDIS_OK
                 ? handshake(n, ctx)
                 : dlock__fail(DLOCK_ESYS, "cannot set the connect timeout: %s", ctx->errstr);
    if (rc == DLOCK_OK && redisSetTimeout(ctx, tv_of(cfg->command_timeout_ms)) != REDIS_OK)
        rc = dlock__fail(DLOCK_ESYS, "cannot set the command timeout: %s", ctx->errstr);
    if (rc != DLOCK_OK) {
        redisFree(ctx);
        return rc;
    }
    if (!n->ep.path)
        redisEnableKeepAlive(ctx);   /* fails, and breaks the context, on unix sockets */
    *out = ctx;
    return DLOCK_OK;
}

/* Closes with a reset: data still queued in the socket is dropped, not sent. */
static void conn_abort(redisContext *ctx)
{
    if (ctx->fd >= 0) {
        struct linger lg = {1, 0};
        setsockopt(ctx->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    redisFree(ctx);
}

/* An idle connection is usable when it has nothing to read and is not closed. */
static int conn_alive(redisContext *ctx)
{
    char b;
    ssize_t k = recv(ctx->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Takes an idle connection, or opens one if the pool has room, or waits for
 * one up to the command timeout; idle_only: an idle one or DLOCK_ECONN at
 * once. *fresh = 1 when newly opened. */
static int pool_get(dlock__node *n, redisContext **out, int *fresh, int idle_only)
{
    pthread_mutex_lock(&n->mu);
    int64_t deadline = dlock__now_ms() + n->c->cfg.command_timeout_ms;
    for (;;) {
        if (n->nidle > 0) {
            redisContext *ctx = n->idle[--n->nidle];
            if (!conn_alive(ctx)) {
                n->nopen--;   /* closed by the server meanwhile: drop it unused */
                pthread_mutex_unlock(&n->mu);
                conn_abort(ctx);
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
    int rc = open_conn(n, out);
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

static void pool_put(dlock__node *n, redisContext *ctx, int broken)
{
    pthread_mutex_lock(&n->mu);
    if (broken || ctx->err || n->nidle >= n->max) {
        n->nopen--;
        pthread_mutex_unlock(&n->mu);
        conn_abort(ctx);
        pthread_mutex_lock(&n->mu);
    } else {
        n->idle[n->nidle++] = ctx;
    }
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

int dlock__node_check(dlock__node *n)
{
    redisContext *ctx;
    int fresh;
    int rc = pool_get(n, &ctx, &fresh, 0);
    if (rc != DLOCK_OK)
        return rc;
    redisReply *r = redisCommand(ctx, "PING");
    if (!r) {
        int timed_out = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
        rc = dlock__fail(timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, "%s does not answer PING: %s",
                         n->addr, timed_out ? "no reply within the command timeout" : ctx->errstr);
        pool_put(n, ctx, 1);
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR)
        rc = dlock__fail(dlock__redis_error_code(r->str), "%s answered PING with: %s", n->addr,
                         r->str);
    freeReplyObject(r);
    pool_put(n, ctx, 0);
    return rc;
}

/* Transient server states worth a retry after the pause. */
static int transient_error(const char *s)
{
    return strncmp(s, "LOADING", 7) == 0 || strncmp(s, "BUSY", 4) == 0 ||
           strncmp(s, "TRYAGAIN", 8) == 0 || strncmp(s, "MASTERDOWN", 10) == 0;
}

static int load_script(dlock__node *n, redisContext *ctx, int script)
{
    const dlock__script *s = &dlock__scripts[script];
    const char *av[] = {"SCRIPT", "LOAD", s->body};
    size_t lens[] = {6, 4, s->len};
    redisReply *r = redisCommandArgv(ctx, 3, av, lens);
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_STRING && r->len == 40 && memcmp(r->str, s->sha, 40) == 0;
    if (!ok)
        dlock__log(n->c, DLOCK_LOG_ERROR, "SCRIPT LOAD of %s on %s failed: %s", s->name, n->addr,
                   r->type == REDIS_REPLY_ERROR ? r->str : "unexpected digest");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

typedef enum { SENT_OK, NOT_SENT, MAYBE_RAN } send_outcome;

/* Writes one command and reads its reply. A failure while writing means Redis
 * cannot have run it (a partial command is discarded with the connection); a
 * failure while reading means it may have. *timed_out tells which read failure. */
static send_outcome roundtrip(redisContext *ctx, int argc, const char **argv, const size_t *lens,
                              int ping_first, redisReply **out, int *timed_out)
{
    static const char *ping_av[] = {"PING"};
    static const size_t ping_len[] = {4};
    *out = NULL;
    if (ping_first && redisAppendCommandArgv(ctx, 1, ping_av, ping_len) != REDIS_OK)
        return NOT_SENT;
    if (redisAppendCommandArgv(ctx, argc, argv, lens) != REDIS_OK)
        return NOT_SENT;
    int done = 0;
    do {
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            return NOT_SENT;
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
            return MAYBE_RAN;
        }
    }
    *out = r;
    return SENT_OK;
}

/* One attempt on one connection, reloading the script after NOSCRIPT. */
static send_outcome send_once(dlock__node *n, redisContext *ctx, int script, int argc,
                              const char **argv, const size_t *lens, int ping_first,
                              redisReply **out, int *timed_out)
{
    redisReply *r;
    send_outcome o = roundtrip(ctx, argc, argv, lens, ping_first, &r, timed_out);
    if (o == SENT_OK && script >= 0 && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* The server's script cache is empty (restart, SCRIPT FLUSH): load and resend. */
        freeReplyObject(r);
        if (load_script(n, ctx, script) != 0) {
            *out = NULL;
            return ctx->err ? MAYBE_RAN : SENT_OK;   /* MAYBE_RAN: the load's, harmless */
        }
        o = roundtrip(ctx, argc, argv, lens, 0, &r, timed_out);
    }
    *out = r;
    return o;
}

static int pause_retry(const dlock__req *req, int64_t ms)
{
    return dlock__cancel_sleep(req->cancel, ms);
}

int dlock__node_call(dlock__node *n, const dlock__req *req, redisReply **out)
{
    const dlock_config *cfg = &n->c->cfg;
    const char *av_stack[ARGV_STACK];
    size_t len_stack[ARGV_STACK];
    const char **av = req->argv;
    const size_t *lens = req->lens;
    int argc = req->argc;
    char nk[16];

    if (req->script >= 0) {
        /* EVALSHA <sha> <nkeys> keys... args... */
        argc = req->argc + 3;
        const char **a = av_stack;
        size_t *l = len_stack;
        if (argc > ARGV_STACK) {
            a = malloc(sizeof(*a) * (size_t)argc);
            l = malloc(sizeof(*l) * (size_t)argc);
            if (!a || !l) {
                free(a);
                free(l);
                return dlock__fail(DLOCK_ENOMEM, "out of memory");
            }
        }
        a[0] = "EVALSHA";
        l[0] = 7;
        a[1] = dlock__scripts[req->script].sha;
        l[1] = 40;
        a[2] = nk;
        l[2] = dlock__fmt_i64(nk, req->nkeys);
        for (int i = 0; i < req->argc; i++) {
            a[i + 3] = req->argv[i];
            l[i + 3] = req->lens ? req->lens[i] : strlen(req->argv[i]);
        }
        av = a;
        lens = l;
    }

    int rc = DLOCK_OK;
    int failures = 0;
    int64_t first_write = -1;
    for (;;) {
        redisContext *ctx;
        int fresh, timed_out = 0;
        redisReply *r = NULL;
        rc = pool_get(n, &ctx, &fresh, (req->flags & DLOCK__CALL_IDLE_ONLY) != 0);
        /* A PING first is a second read, each under the command timeout. */
        int64_t answer_within =
            cfg->command_timeout_ms * ((req->flags & DLOCK__CALL_PING_FIRST) ? 2 : 1);
        if (rc == DLOCK_OK && req->latch_ms > 0 && first_write >= 0 &&
            dlock__now_ms() + answer_within + 500 > first_write + req->latch_ms) {
            /* Its reply could come after the latch is gone: a retry that then ran
             * would release a second hold. Give up with the last error. */
            pool_put(n, ctx, 0);
            rc = dlock__fail(DLOCK_ECMDTIMEOUT,
                             "%s: no answer, and retrying now could release twice", n->addr);
            break;
        }
        if (rc == DLOCK_OK) {
            if (first_write < 0)
                first_write = dlock__now_ms();
            send_outcome o = send_once(n, ctx, req->script, argc, av, lens,
                                       (req->flags & DLOCK__CALL_PING_FIRST) != 0, &r,
                                       &timed_out);
            if (o == SENT_OK) {
                pool_put(n, ctx, 0);
                if (!r) {
                    rc = dlock__fail(DLOCK_EREDIS, "cannot load script %s on %s",
                                     dlock__scripts[req->script].name, n->addr);
                    break;
                }
                if (r->type != REDIS_REPLY_ERROR) {
                    *out = r;
                    rc = DLOCK_OK;
                    break;
                }
                rc = dlock__fail(dlock__redis_error_code(r->str), "%s: %s", n->addr, r->str);
                int again = transient_error(r->str);
                freeReplyObject(r);
                if (!again)
                    break;
            } else {
                const char *why = ctx->errstr[0] ? ctx->errstr : "connection lost";
                rc = dlock__fail(timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, "%s: %s", n->addr,
                                 timed_out ? "no reply within the command timeout" : why);
                pool_put(n, ctx, 1);
                if (o == MAYBE_RAN && !(req->flags & DLOCK__CALL_IDEMPOTENT)) {
                    rc = dlock__fail(DLOCK_EUNKNOWN,
                                     "%s: %s after the request was sent; it may have run",
                                     n->addr, timed_out ? "no reply in time" : "connection lost");
                    break;
                }
                if (o == NOT_SENT && !fresh)
                    continue;   /* a connection that died idle: try another at once */
            }
        }
        if (rc == DLOCK_ENOMEM || rc == DLOCK_EAUTH || rc == DLOCK_ESYS ||
            (req->flags & DLOCK__CALL_NO_RETRY))
            break;
        if (failures++ >= cfg->retry_attempts)
            break;
        int prc = pause_retry(req, cfg->retry_delay_ms);
        if (prc != DLOCK_OK) {
            rc = prc;
            break;
        }
    }
    if (av != req->argv && av != av_stack) {
        free((void *)av);
        free((void *)lens);
    }
    return rc;
}
