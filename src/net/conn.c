/* A blocking connection: one request at a time from the calling thread, on a
 * non-blocking transport waited on with poll().
 *
 * Open: connect, the TLS handshake when the endpoint has TLS, then the Redis
 * handshake (handshake.c), all under the connect timeout. Requests: commands
 * formatted by hiredis into the connection's buffer, written at once, then
 * their replies read (hiredis's reader) under the command timeout, each. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/net.h"

#define READ_BUF 16384

struct dlock__conn {
    dlock__transport t;
    redisReader *reader;
    dlock__stats *stats;
    int64_t cmd_timeout_ms;
    int broken;              /* failed once: never reused */
    int oom;                 /* it failed for want of memory: DLOCK_ENOMEM */
    int tls;
    char *obuf;
    size_t olen, ocap;
    char rbuf[READ_BUF];
};

_Thread_local uint64_t dlock__roundtrips;

int dlock__conn_broken(const dlock__conn *c) { return c->broken; }
int dlock__conn_oom(const dlock__conn *c) { return c->oom; }
const char *dlock__conn_error(const dlock__conn *c)
{
    return c->t.err[0] ? c->t.err : "connection lost";
}

static void conn_free(dlock__conn *c, int reset)
{
    if (!c)
        return;
    dlock__transport_close(&c->t, reset);
    if (c->reader)
        redisReaderFree(c->reader);
    free(c->obuf);
    free(c);
}

/* Closes with a reset: data still queued in the socket is dropped, not sent. */
void dlock__conn_abort(dlock__conn *c) { conn_free(c, 1); }
void dlock__conn_close(dlock__conn *c) { conn_free(c, 0); }

int dlock__conn_alive(dlock__conn *c)
{
    char b;
    ssize_t k = recv(c->t.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 1;
    if (k <= 0 || !c->tls)
        return 0;   /* closed, failed, or a plain server that spoke unasked */
    /* TLS: a record arrived while idle. A session ticket or key update is
     * read and the connection stays; application data or an alert is not. */
    ssize_t r = c->t.vt->read(&c->t, &b, 1);
    return r == DLOCK__IO_AGAIN;
}

/* ------------------------------------------------------------- writing */

static int append(dlock__conn *c, int argc, const char *const *argv, const size_t *lens)
{
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, (const char **)argv, lens);
    if (n < 0) {
        c->oom = 1;   /* hiredis fails only for want of memory */
        return -1;
    }
    if (c->olen + (size_t)n > c->ocap) {
        size_t cap = c->ocap ? c->ocap : 1024;
        while (cap < c->olen + (size_t)n)
            cap *= 2;
        char *nb = realloc(c->obuf, cap);
        if (!nb) {
            c->oom = 1;
            free(cmd);
            return -1;
        }
        c->obuf = nb;
        c->ocap = cap;
    }
    memcpy(c->obuf + c->olen, cmd, (size_t)n);
    c->olen += (size_t)n;
    free(cmd);
    return 0;
}

/* Writes what append() gathered. */
static int flush(dlock__conn *c, int64_t deadline_ms)
{
    int rc = dlock__transport_write_all(&c->t, c->obuf, c->olen, deadline_ms, NULL);
    c->olen = 0;
    if (c->ocap > 65536) {   /* a big pipeline: do not keep its buffer */
        free(c->obuf);
        c->obuf = NULL;
        c->ocap = 0;
    }
    if (rc != DLOCK_OK)
        c->broken = 1;
    return rc;
}

/* ------------------------------------------------------------- reading */

dlock__transport *dlock__conn_transport(dlock__conn *c) { return &c->t; }
redisReader *dlock__conn_reader(dlock__conn *c) { return c->reader; }

ssize_t dlock__conn_feed(dlock__conn *c)
{
    ssize_t k = c->t.vt->read(&c->t, c->rbuf, sizeof(c->rbuf));
    if (k > 0 && redisReaderFeed(c->reader, c->rbuf, (size_t)k) != REDIS_OK) {
        c->oom = 1;
        return DLOCK__IO_NOMEM;
    }
    return k;
}

/* Reads one reply by deadline_ms. waited: the first read after a write,
 * which waits for the socket first (the answer cannot be there yet). On
 * failure *timed_out tells a timeout from a lost connection. */
static int read_reply(dlock__conn *c, int64_t deadline_ms, int wait_first, redisReply **out,
                      int *timed_out)
{
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(c->reader, &r) != REDIS_OK) {
            c->oom |= c->reader->err == REDIS_ERR_OOM;
            snprintf(c->t.err, sizeof(c->t.err), "protocol error: %s", c->reader->errstr);
            break;
        }
        if (r) {
            *out = r;
            return DLOCK_OK;
        }
        if (wait_first && !c->t.vt->pending(&c->t)) {
            if (dlock__transport_wait(&c->t, POLLIN, deadline_ms) != DLOCK_OK) {
                *timed_out = 1;
                break;
            }
        }
        wait_first = 0;
        ssize_t k = dlock__conn_feed(c);
        if (k == DLOCK__IO_NOMEM) {
            snprintf(c->t.err, sizeof(c->t.err), "out of memory reading a reply");
            break;
        }
        if (k > 0)
            continue;
        if (k == DLOCK__IO_AGAIN) {
            /* TLS may want to write (a key update): wait for what it asks. */
            if (dlock__transport_wait(&c->t, c->t.want, deadline_ms) != DLOCK_OK) {
                *timed_out = 1;
                break;
            }
            continue;
        }
        break;   /* closed (0) or failed: t.err says which */
    }
    if (*timed_out)
        snprintf(c->t.err, sizeof(c->t.err), "no reply within the timeout");
    c->broken = 1;
    return DLOCK__IO_ERR;
}

int dlock__conn_wait_reply(dlock__conn *c, int64_t timeout_ms, redisReply **out)
{
    void *r = NULL;
    if (redisReaderGetReply(c->reader, &r) != REDIS_OK) {
        c->broken = 1;
        return DLOCK_ECONN;
    }
    if (r) {
        *out = r;
        return DLOCK_OK;
    }
    if (!c->t.vt->pending(&c->t)) {
        int rc = dlock__transport_wait(&c->t, POLLIN, dlock__now_ms() + timeout_ms);
        if (rc == DLOCK_ECMDTIMEOUT)
            return DLOCK_ETIMEDOUT;   /* nothing came: still usable */
        if (rc != DLOCK_OK) {
            c->broken = 1;
            return rc;
        }
    }
    int timed_out = 0;
    return read_reply(c, dlock__now_ms() + c->cmd_timeout_ms, 0, out, &timed_out) == DLOCK_OK
               ? DLOCK_OK
               : DLOCK_ECONN;
}

dlock__sent dlock__conn_pipeline(dlock__conn *c, size_t k, const int *argc,
                                 const char *const *const *argv, const size_t *const *lens,
                                 int ping_first, redisReply **out, size_t *nread, int *timed_out)
{
    static const char *ping_av[] = {"PING"};
    static const size_t ping_len[] = {4};
    *nread = 0;
    *timed_out = 0;
    c->olen = 0;
    if (ping_first && append(c, 1, ping_av, ping_len) != 0)
        return DLOCK__NOT_SENT;
    for (size_t i = 0; i < k; i++)
        if (append(c, argc[i], argv[i], lens ? lens[i] : NULL) != 0)
            return DLOCK__NOT_SENT;
    int64_t t0 = dlock__now_us();
    if (flush(c, t0 / 1000 + c->cmd_timeout_ms) != DLOCK_OK)
        return DLOCK__NOT_SENT;
    dlock__roundtrips++;
    /* Each reply within the command timeout of the one before: a PING first
     * is one more read (call.c counts it in its latch guard). */
    for (size_t i = 0; i < k + (ping_first ? 1 : 0); i++) {
        redisReply *r = NULL;
        if (read_reply(c, dlock__now_ms() + c->cmd_timeout_ms, i == 0, &r, timed_out) !=
            DLOCK_OK)
            return DLOCK__MAYBE_RAN;
        if (ping_first && i == 0)
            freeReplyObject(r);
        else
            out[(*nread)++] = r;
    }
    dlock__stats_rtt(c->stats, dlock__now_us() - t0);
    return DLOCK__SENT_OK;
}

dlock__sent dlock__conn_roundtrip(dlock__conn *c, int argc, const char *const *argv,
                                  const size_t *lens, int ping_first, redisReply **out,
                                  int *timed_out)
{
    size_t nread;
    const size_t *const l[1] = {lens};
    *out = NULL;
    return dlock__conn_pipeline(c, 1, &argc, &argv, l, ping_first, out, &nread, timed_out);
}

/* ------------------------------------------------------------- opening */

/* The TLS handshake, waiting by the deadline. */
static int tls_start(dlock__netctx *nc, dlock__conn *c, const dlock__endpoint *ep,
                     const char *addr, int64_t deadline_ms)
{
    if (dlock__tls_attach(&c->t, nc->tls, ep) != DLOCK_OK)
        return dlock__fail(DLOCK_ETLS, "%s: %s", addr, c->t.err);
    for (;;) {
        int rc = c->t.vt->handshake(&c->t);
        if (rc == DLOCK_OK)
            return DLOCK_OK;
        if (rc != DLOCK__IO_AGAIN)
            return dlock__fail(c->t.tls_error ? DLOCK_ETLS : DLOCK_ECONN,
                               "TLS connection to %s failed: %s", addr, c->t.err);
        if (dlock__transport_wait(&c->t, c->t.want, deadline_ms) != DLOCK_OK)
            return dlock__fail(DLOCK_ECONN,
                               "TLS connection to %s failed: no TLS answer within the "
                               "connect timeout (a plain port? use redis://)",
                               addr);
    }
}

/* A connection that failed before its handshake was answered: a TLS server
 * that asked for a client certificate this client does not have closed it. */
static int handshake_fail(dlock__conn *c, const char *addr, const char *what, int tls)
{
    if (c->t.cert_asked && !c->t.tls_error) {
        c->t.tls_error = 1;
        snprintf(c->t.err, sizeof(c->t.err), "TLS: the server wants a client certificate and "
                 "none is configured (dlock_config_set_tls_cert, ?cert=&key=)");
    }
    return dlock__handshake_io_fail(&c->t, addr, what, tls);
}

/* Sends the handshake pipelined and reads every answer. A new connection is
 * used only once the server has answered on it. */
static int handshake(dlock__netctx *nc, const dlock__endpoint *ep, const char *addr,
                     dlock__conn *c, int64_t deadline_ms, uint64_t *name_gen)
{
    dlock__hs_step steps[DLOCK__HS_MAX];
    int n = dlock__handshake_steps(nc, ep, steps, name_gen);
    if (n < 0)
        return n;   /* the credentials callback failed */
    int oom = 0;
    for (int i = 0; i < n && !oom; i++)
        oom = append(c, steps[i].argc, steps[i].argv, NULL) != 0;
    dlock__handshake_wipe(steps, n);
    if (oom)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (flush(c, deadline_ms) != DLOCK_OK)
        return handshake_fail(c, addr, steps[0].what, ep->tls);
    int rc = DLOCK_OK;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        int timed_out = 0;
        if (read_reply(c, deadline_ms, i == 0, &r, &timed_out) != DLOCK_OK) {
            if (c->oom)
                return dlock__fail(DLOCK_ENOMEM, "connection to %s: out of memory reading the "
                                                 "answer to %s", addr, steps[i].what);
            if (timed_out)
                snprintf(c->t.err, sizeof(c->t.err), "no reply within the connect timeout");
            return handshake_fail(c, addr, steps[i].what, ep->tls);
        }
        if (rc == DLOCK_OK)
            rc = dlock__handshake_check(nc, &steps[i], r, addr);
        freeReplyObject(r);
    }
    return rc;
}

int dlock__conn_open(dlock__netctx *nc, const dlock__endpoint *ep, const char *addr,
                     dlock__conn **out, uint64_t *name_gen)
{
    const dlock_config *cfg = nc->cfg;
    dlock__conn *c = malloc(sizeof(*c));
    if (!c)
        return dlock__fail(DLOCK_ENOMEM, "out of memory opening a connection");
    memset(c, 0, offsetof(dlock__conn, rbuf));
    dlock__transport_init(&c->t);
    c->cmd_timeout_ms = cfg->command_timeout_ms;
    c->stats = nc->stats;
    c->tls = ep->tls;
    if (!(c->reader = redisReaderCreate())) {
        free(c);
        return dlock__fail(DLOCK_ENOMEM, "out of memory opening a connection");
    }
    int64_t deadline = dlock__now_ms() + cfg->connect_timeout_ms;
    int rc = dlock__transport_open(&c->t, ep, addr, deadline);
    if (rc == DLOCK_OK && ep->tls)
        rc = tls_start(nc, c, ep, addr, deadline);
    if (rc == DLOCK_OK)
        rc = handshake(nc, ep, addr, c, deadline, name_gen);
    if (rc != DLOCK_OK) {
        conn_free(c, 1);
        return rc;
    }
    dlock__stats_count(nc->stats, DLOCK__ST_CONNECTS, 1);
    *out = c;
    return DLOCK_OK;
}
