/* Asynchronous Redis connection on libuv; see net.h.
 *
 * Life of a connection: IDLE -> CONNECTING (resolve, connect) -> TLS (its
 * handshake, rediss:// only) -> HANDSHAKE (handshake.c: AUTH / SELECT /
 * CLIENT SETNAME, or a PING) -> READY. Any failure goes to BACKOFF, which
 * reconnects after a pause that doubles from 50 ms up to the retry delay.
 * CLOSING is final: the struct is freed once libuv has released every handle
 * and request that points at it (`live` counts them).
 *
 * The bytes go through the same transport as the blocking connections'
 * (transport.c, tls.c), a non-blocking socket that a uv_poll watches: reads
 * until the transport would block, writes from one output buffer that keeps
 * what the socket did not take. TLS may want to write while reading and the
 * other way round: the transport says what it waits for, and the poll asks
 * for that.
 *
 * One uv_timer serves every deadline of the current state: the connect timeout
 * (TLS and handshake included), the oldest pending reply's command timeout,
 * the pub/sub keepalive PING, and the reconnect pause. */
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "net/net.h"

#define BACKOFF_MIN_MS 50
#define PING_INTERVAL_MS 10000
#define READ_BUF 65536
#define KEEP_OBUF 65536

enum { ST_IDLE, ST_CONNECTING, ST_TLS, ST_HANDSHAKE, ST_READY, ST_BACKOFF, ST_CLOSING };

typedef struct pending {
    dlock__list link;
    dlock__aconn_reply_fn fn;
    void *ud;
    int64_t sent_us;
    int expect;
    int sunsub;              /* a SUNSUBSCRIBE: its replies are "sunsubscribe" arrays */
} pending;

/* One connection attempt's poll handle; a new one per attempt, so callbacks
 * of an old attempt can be told apart (box != ac->box) and ignored. */
typedef struct poll_box {
    uv_poll_t poll;
    dlock__aconn *ac;
} poll_box;

struct dlock__aconn {
    uv_loop_t *uv;
    dlock__netctx *ctx;
    dlock__endpoint ep;
    char addr[320];
    int pubsub;
    dlock__aconn_cbs cbs;

    int state;
    int live;                /* timer + box + resolver request still held by libuv */
    dlock__transport t;
    poll_box *box;
    int events;              /* what the poll watches now */
    int want_write;          /* the transport waits to write (output left, or TLS asks) */
    int write_failed;        /* a write failed: the timer fails the connection at once */
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    int gai_active;
    int64_t conn_deadline;
    int64_t backoff_ms;
    int64_t reconnect_at;
    int64_t last_io;
    int hs_left;             /* handshake replies still expected */
    uint64_t name_gen;       /* the connection name generation it last sent */
    dlock__hs_step hs[DLOCK__HS_MAX];   /* the handshake in flight (its replies point here) */

    redisReader *reader;
    dlock__list pending;
    char *obuf;
    size_t olen, ooff, ocap; /* obuf[ooff..olen) is still to be written */
    int corked;

    void (*done)(void *);
    void *done_arg;
    char rbuf[READ_BUF];
};

static void arm_timer(dlock__aconn *ac);
static void fail(dlock__aconn *ac, int status, const char *why);

/* ------------------------------------------------------------- lifetime */

static void release(dlock__aconn *ac)
{
    if (--ac->live > 0 || ac->state != ST_CLOSING)
        return;
    void (*done)(void *) = ac->done;
    void *arg = ac->done_arg;
    if (ac->reader)
        redisReaderFree(ac->reader);
    free(ac->obuf);
    dlock__endpoint_clear(&ac->ep);
    free(ac);
    if (done)
        done(arg);
}

static void on_box_closed(uv_handle_t *h)
{
    poll_box *b = h->data;
    dlock__aconn *ac = b->ac;
    free(b);
    release(ac);
}

/* Ends the current attempt's socket. uv_close stops the poll (the fd leaves
 * epoll) before the socket is closed, so the number cannot be reused under it. */
static void close_box(dlock__aconn *ac, int reset)
{
    poll_box *b = ac->box;
    if (b) {
        ac->box = NULL;
        uv_close((uv_handle_t *)&b->poll, on_box_closed);
    }
    dlock__transport_close(&ac->t, reset);
    ac->events = 0;
    ac->want_write = 0;
}

static void on_timer_closed(uv_handle_t *h) { release(h->data); }

int dlock__aconn_new(dlock__aconn **out, uv_loop_t *uv, dlock__netctx *ctx,
                     const dlock__endpoint *ep, int pubsub, const dlock__aconn_cbs *cbs)
{
    dlock__aconn *ac = calloc(1, sizeof(*ac));
    if (!ac)
        return DLOCK_ENOMEM;
    if (dlock__endpoint_copy(&ac->ep, ep) != DLOCK_OK || !(ac->reader = redisReaderCreate())) {
        dlock__endpoint_clear(&ac->ep);
        free(ac);
        return DLOCK_ENOMEM;
    }
    dlock__endpoint_str(&ac->ep, ac->addr, sizeof(ac->addr));
    dlock__transport_init(&ac->t);
    ac->uv = uv;
    ac->ctx = ctx;
    ac->pubsub = pubsub;
    ac->cbs = *cbs;
    ac->state = ST_IDLE;
    ac->backoff_ms = BACKOFF_MIN_MS;
    dlock__list_init(&ac->pending);
    uv_timer_init(uv, &ac->timer);
    ac->timer.data = ac;
    ac->live = 1;
    *out = ac;
    return DLOCK_OK;
}

int dlock__aconn_ready(const dlock__aconn *ac) { return ac && ac->state == ST_READY; }

/* ------------------------------------------------------------ pending */

static void fail_pending(dlock__aconn *ac, int status)
{
    dlock__list list;
    dlock__list_init(&list);
    /* Detach first: callbacks may queue new commands (which then fail fast). */
    if (!dlock__list_empty(&ac->pending)) {
        list.next = ac->pending.next;
        list.prev = ac->pending.prev;
        list.next->prev = &list;
        list.prev->next = &list;
        dlock__list_init(&ac->pending);
    }
    while (!dlock__list_empty(&list)) {
        pending *p = DLOCK__CONTAINER_OF(list.next, pending, link);
        dlock__list_remove(&p->link);
        p->fn(ac, NULL, status, p->ud);
        free(p);
    }
}

/* ---------------------------------------------------------------- poll */

static void on_poll(uv_poll_t *h, int status, int events);

/* Asks the poll for what the connection waits for now. */
static void update_events(dlock__aconn *ac)
{
    if (!ac->box)
        return;
    int ev;
    if (ac->state == ST_CONNECTING)
        ev = UV_WRITABLE;
    else if (ac->state == ST_TLS)
        ev = ac->t.want == POLLOUT ? UV_WRITABLE : UV_READABLE;
    else
        ev = UV_READABLE | (ac->want_write ? UV_WRITABLE : 0);
    if (ev == ac->events)
        return;
    int rc = uv_poll_start(&ac->box->poll, ev, on_poll);
    if (rc < 0) {
        fail(ac, DLOCK_ECONN, uv_strerror(rc));
        return;
    }
    ac->events = ev;
}

/* ------------------------------------------------------------- writing */

/* Writes what the socket takes; the rest waits for the poll. A failure is
 * acted on from the timer, never from inside dlock__aconn_send: its caller
 * must not see callbacks (on_down, failed replies) before send returns. */
static void flush(dlock__aconn *ac)
{
    if ((ac->state != ST_HANDSHAKE && ac->state != ST_READY) || ac->write_failed)
        return;
    ac->want_write = 0;
    while (ac->ooff < ac->olen) {
        ssize_t k = ac->t.vt->write(&ac->t, ac->obuf + ac->ooff, ac->olen - ac->ooff);
        if (k > 0) {
            ac->ooff += (size_t)k;
            continue;
        }
        if (k == DLOCK__IO_AGAIN) {
            ac->want_write = 1;
            break;
        }
        ac->write_failed = 1;
        ac->ooff = ac->olen = 0;
        arm_timer(ac);
        return;
    }
    if (ac->ooff == ac->olen) {
        ac->ooff = ac->olen = 0;
        if (ac->ocap > KEEP_OBUF) {
            free(ac->obuf);
            ac->obuf = NULL;
            ac->ocap = 0;
        }
    }
    update_events(ac);
}

static int append(dlock__aconn *ac, const char *p, size_t n)
{
    if (ac->olen + n > ac->ocap) {
        size_t cap = ac->ocap ? ac->ocap : 4096;
        while (cap < ac->olen + n)
            cap *= 2;
        char *nb = realloc(ac->obuf, cap);
        if (!nb)
            return -1;
        ac->obuf = nb;
        ac->ocap = cap;
    }
    memcpy(ac->obuf + ac->olen, p, n);
    ac->olen += n;
    return 0;
}

static int queue_cmd(dlock__aconn *ac, int argc, const char **argv, const size_t *lens,
                     int expect, dlock__aconn_reply_fn fn, void *ud)
{
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    pending *p = malloc(sizeof(*p));
    if (n < 0 || !p || append(ac, cmd, (size_t)n) != 0) {
        free(p);
        if (n >= 0)
            free(cmd);
        return DLOCK_ENOMEM;
    }
    free(cmd);
    p->fn = fn;
    p->ud = ud;
    p->sent_us = dlock__now_us();
    p->expect = expect > 0 ? expect : 1;
    p->sunsub = argc > 0 && strcasecmp(argv[0], "SUNSUBSCRIBE") == 0;
    int was_empty = dlock__list_empty(&ac->pending);
    dlock__list_push_back(&ac->pending, &p->link);
    if (!ac->corked)
        flush(ac);
    if (was_empty && ac->state != ST_BACKOFF)
        arm_timer(ac);
    return DLOCK_OK;
}

static void on_rename(dlock__aconn *ac, redisReply *r, int status, void *ud) {}

int dlock__aconn_send(dlock__aconn *ac, int argc, const char **argv, const size_t *lens,
                      int expect, dlock__aconn_reply_fn fn, void *ud)
{
    if (ac->state != ST_READY)
        return DLOCK_ECONN;
    if (ac->name_gen != dlock__netctx_gen(ac->ctx)) {
        /* The client was renamed: the next command carries the new name first. */
        char name[DLOCK__CONN_NAME_MAX];
        ac->name_gen = dlock__netctx_name(ac->ctx, name);
        const char *av[] = {"CLIENT", "SETNAME", name};
        if (name[0] && !ac->pubsub && !atomic_load(&ac->ctx->name_refused))
            queue_cmd(ac, 3, av, NULL, 1, on_rename, NULL);
    }
    return queue_cmd(ac, argc, argv, lens, expect, fn, ud);
}

void dlock__aconn_cork(dlock__aconn *ac) { ac->corked++; }

void dlock__aconn_uncork(dlock__aconn *ac)
{
    if (ac->corked > 0 && --ac->corked == 0 && ac->state != ST_CLOSING)
        flush(ac);
}

/* ------------------------------------------------------------- reading */

static int is_push(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return 0;
    const char *k = r->element[0]->str;
    return strcmp(k, "message") == 0 || strcmp(k, "smessage") == 0 ||
           (strcmp(k, "pmessage") == 0 && r->elements >= 4);
}

/* A "sunsubscribe" that answers no SUNSUBSCRIBE of ours: the server dropped
 * a sharded subscription by itself (its slot moved to another node). */
static int unasked_sunsubscribe(dlock__aconn *ac, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "sunsubscribe") != 0)
        return 0;
    if (dlock__list_empty(&ac->pending))
        return 1;
    return !DLOCK__CONTAINER_OF(ac->pending.next, pending, link)->sunsub;
}

static void dispatch(dlock__aconn *ac, redisReply *r)
{
    if (ac->pubsub && (is_push(r) || unasked_sunsubscribe(ac, r))) {
        if (ac->cbs.on_push)
            ac->cbs.on_push(ac, r, ac->cbs.ud);
        return;
    }
    if (dlock__list_empty(&ac->pending)) {
        fail(ac, DLOCK_EPROTO, "reply without a request");
        return;
    }
    pending *p = DLOCK__CONTAINER_OF(ac->pending.next, pending, link);
    /* An error answers a whole multi-reply command (SUBSCRIBE a b c -> one -ERR). */
    int last = --p->expect <= 0 || r->type == REDIS_REPLY_ERROR;
    if (last) {
        dlock__list_remove(&p->link);
        dlock__stats_rtt(ac->ctx->stats, dlock__now_us() - p->sent_us);
    }
    p->fn(ac, r, DLOCK_OK, p->ud);
    if (last)
        free(p);
}

/* Reads until the transport would block, handing each reply on. */
static void read_some(dlock__aconn *ac)
{
    poll_box *b = ac->box;
    for (;;) {
        ssize_t k = ac->t.vt->read(&ac->t, ac->rbuf, sizeof(ac->rbuf));
        if (k == DLOCK__IO_AGAIN) {
            if (ac->t.want == POLLOUT)
                ac->want_write = 1;   /* TLS must write before it can read on */
            break;
        }
        if (k <= 0) {
            fail(ac, ac->t.tls_error ? DLOCK_ETLS : DLOCK_ECONN, ac->t.err);
            return;
        }
        ac->last_io = dlock__now_ms();
        if (redisReaderFeed(ac->reader, ac->rbuf, (size_t)k) != REDIS_OK) {
            fail(ac, DLOCK_EPROTO, "protocol error");
            return;
        }
        for (;;) {
            void *rep = NULL;
            if (redisReaderGetReply(ac->reader, &rep) != REDIS_OK) {
                fail(ac, DLOCK_EPROTO, "protocol error");
                return;
            }
            if (!rep)
                break;
            dispatch(ac, rep);
            freeReplyObject(rep);
            /* A callback may have failed or closed the connection (the reader is
             * then gone): stop here. */
            if (ac->box != b || ac->state == ST_CLOSING)
                return;
        }
    }
    arm_timer(ac);
}

/* ----------------------------------------------------------- handshake */

static void become_ready(dlock__aconn *ac)
{
    ac->state = ST_READY;
    ac->backoff_ms = BACKOFF_MIN_MS;
    ac->last_io = dlock__now_ms();
    arm_timer(ac);
    dlock__log(ac->ctx->cfg, DLOCK_LOG_DEBUG, "%s connection to %s ready",
               ac->pubsub ? "pub/sub" : "renewal", ac->addr);
    if (ac->cbs.on_ready)
        ac->cbs.on_ready(ac, ac->cbs.ud);
}

static void on_hs_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    const dlock__hs_step *step = ud;
    if (!r)
        return;   /* the connection failed; fail() handles it */
    char why[DLOCK__MSG_MAX];
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int rc = dlock__handshake_check(ac->ctx, step, r, ac->addr);
    dlock__err_reset(prev);
    if (rc != DLOCK_OK) {
        fail(ac, rc, why);
        return;
    }
    if (--ac->hs_left == 0 && ac->state == ST_HANDSHAKE)
        become_ready(ac);
}

static void handshake(dlock__aconn *ac)
{
    ac->state = ST_HANDSHAKE;
    dlock__stats_count(ac->ctx->stats, DLOCK__ST_CONNECTS, 1);
    char why[DLOCK__MSG_MAX];
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int n = dlock__handshake_steps(ac->ctx, &ac->ep, ac->hs, &ac->name_gen);
    dlock__err_reset(prev);
    if (n < 0) {
        fail(ac, n, why);   /* the credentials callback failed */
        return;
    }
    ac->hs_left = n;
    ac->corked++;   /* the steps in one write */
    for (int i = 0; i < n; i++)
        if (queue_cmd(ac, ac->hs[i].argc, ac->hs[i].argv, NULL, 1, on_hs_reply, &ac->hs[i]) !=
            DLOCK_OK) {
            ac->corked--;
            fail(ac, DLOCK_ENOMEM, "out of memory");
            return;
        }
    ac->corked--;
    dlock__handshake_wipe(ac->hs, n);   /* formatted into the output buffer */
    flush(ac);
}

/* ------------------------------------------------------------- connect */

/* Drives the TLS handshake as far as the socket allows. */
static void tls_step(dlock__aconn *ac)
{
    int rc = ac->t.vt->handshake(&ac->t);
    if (rc == DLOCK_OK) {
        handshake(ac);
        return;
    }
    if (rc == DLOCK__IO_AGAIN) {
        update_events(ac);
        return;
    }
    fail(ac, ac->t.tls_error ? DLOCK_ETLS : DLOCK_ECONN, ac->t.err);
}

static void connected(dlock__aconn *ac)
{
    if (!ac->ep.tls) {
        handshake(ac);
        return;
    }
    if (dlock__tls_attach(&ac->t, ac->ctx->tls, &ac->ep) != DLOCK_OK) {
        fail(ac, DLOCK_ETLS, ac->t.err);
        return;
    }
    ac->state = ST_TLS;
    tls_step(ac);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    poll_box *b = h->data;
    dlock__aconn *ac = b->ac;
    if (ac->box != b)
        return;   /* an attempt abandoned by fail() or close() */
    if (status < 0) {
        fail(ac, DLOCK_ECONN, uv_strerror(status));
        return;
    }
    switch (ac->state) {
    case ST_CONNECTING: {
        int rc = dlock__transport_connected(&ac->t);
        if (rc == DLOCK_OK)
            connected(ac);
        else if (rc != DLOCK__IO_AGAIN)
            fail(ac, DLOCK_ECONN, ac->t.err);
        return;
    }
    case ST_TLS:
        tls_step(ac);
        return;
    case ST_HANDSHAKE:
    case ST_READY:
        if (ac->write_failed) {
            fail(ac, ac->t.tls_error ? DLOCK_ETLS : DLOCK_ECONN, ac->t.err);
            return;
        }
        /* Either way may be what the transport waited for (TLS): try both. */
        if (ac->want_write)
            flush(ac);
        if (ac->box == b && ac->state != ST_BACKOFF)
            read_some(ac);
        if (ac->box == b && ac->state != ST_BACKOFF)
            update_events(ac);
        return;
    default:
        return;
    }
}

static void connect_addr(dlock__aconn *ac, const struct sockaddr *sa, socklen_t len)
{
    int rc = dlock__transport_connect(&ac->t, sa, len);
    if (rc == DLOCK__IO_ERR) {
        fail(ac, DLOCK_ECONN, ac->t.err);
        return;
    }
    poll_box *b = calloc(1, sizeof(*b));
    if (!b) {
        fail(ac, DLOCK_ENOMEM, "out of memory");
        return;
    }
    int urc = uv_poll_init_socket(ac->uv, &b->poll, ac->t.fd);
    if (urc < 0) {
        free(b);
        fail(ac, DLOCK_ECONN, uv_strerror(urc));
        return;
    }
    b->ac = ac;
    b->poll.data = b;
    ac->box = b;
    ac->live++;
    ac->events = 0;
    if (rc == DLOCK_OK)
        connected(ac);
    else
        update_events(ac);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    dlock__aconn *ac = req->data;
    ac->gai_active = 0;
    if (ac->state != ST_CONNECTING) {
        if (res)
            uv_freeaddrinfo(res);
        release(ac);
        return;
    }
    if (status < 0 || !res) {
        if (res)
            uv_freeaddrinfo(res);
        char why[200];
        snprintf(why, sizeof(why), "cannot resolve host: %s", uv_strerror(status));
        fail(ac, DLOCK_ECONN, why);
        release(ac);
        return;
    }
    /* Prefer IPv4: "localhost" often resolves to ::1 first while Redis binds
     * 127.0.0.1 only. */
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    connect_addr(ac, pick->ai_addr, pick->ai_addrlen);
    uv_freeaddrinfo(res);
    release(ac);
}

static void start(dlock__aconn *ac);

void dlock__aconn_start(dlock__aconn *ac)
{
    /* From outside only an idle connection starts: one in BACKOFF reconnects
     * when its pause is over, however many waiters ask meanwhile. The start
     * runs from the timer, at once, never inside the caller: one that fails
     * on the spot (out of memory) calls on_down, which takes the locks its
     * callers hold while they ask (pub/sub's, the watchdog's). */
    if (ac->state == ST_IDLE) {
        ac->state = ST_BACKOFF;
        ac->reconnect_at = dlock__now_ms();
        arm_timer(ac);
    }
}

static void start(dlock__aconn *ac)
{
    if (ac->state != ST_IDLE && ac->state != ST_BACKOFF)
        return;
    if (!ac->reader && !(ac->reader = redisReaderCreate())) {
        ac->state = ST_BACKOFF;
        ac->reconnect_at = dlock__now_ms() + ac->ctx->cfg->retry_delay_ms;
        arm_timer(ac);
        return;
    }
    if (ac->gai_active) {
        /* The last attempt's resolver request could not be cancelled; its
         * struct is still in use. Try again shortly. */
        ac->state = ST_BACKOFF;
        ac->reconnect_at = dlock__now_ms() + BACKOFF_MIN_MS;
        arm_timer(ac);
        return;
    }
    ac->state = ST_CONNECTING;
    ac->conn_deadline = dlock__now_ms() + ac->ctx->cfg->connect_timeout_ms;
    arm_timer(ac);
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
    } u;
    memset(&u, 0, sizeof(u));
    if (ac->ep.path) {
        u.un.sun_family = AF_UNIX;
        snprintf(u.un.sun_path, sizeof(u.un.sun_path), "%s", ac->ep.path);
        connect_addr(ac, &u.sa, sizeof(u.un));
        return;
    }
    if (uv_ip4_addr(ac->ep.host, ac->ep.port, &u.in4) == 0) {
        connect_addr(ac, &u.sa, sizeof(u.in4));
        return;
    }
    if (uv_ip6_addr(ac->ep.host, ac->ep.port, &u.in6) == 0) {
        connect_addr(ac, &u.sa, sizeof(u.in6));
        return;
    }
    char port[8];
    snprintf(port, sizeof(port), "%d", ac->ep.port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    ac->gai.data = ac;
    int rc = uv_getaddrinfo(ac->uv, &ac->gai, on_resolved, ac->ep.host, port, &hints);
    if (rc < 0) {
        fail(ac, DLOCK_ECONN, uv_strerror(rc));
        return;
    }
    ac->gai_active = 1;
    ac->live++;
}

/* --------------------------------------------------------------- failure */

static void fail(dlock__aconn *ac, int status, const char *why)
{
    if (ac->state == ST_CLOSING || ac->state == ST_IDLE || ac->state == ST_BACKOFF)
        return;
    int was_ready = ac->state == ST_READY;
    dlock__log(ac->ctx->cfg, was_ready ? DLOCK_LOG_WARN : DLOCK_LOG_INFO,
               "%s connection to %s %s: %s", ac->pubsub ? "pub/sub" : "renewal", ac->addr,
               was_ready ? "lost" : "failed", why);
    if (was_ready)
        dlock__stats_count(ac->ctx->stats, DLOCK__ST_RECONNECTS, 1);
    close_box(ac, 1);
    ac->write_failed = 0;
    if (ac->gai_active)
        uv_cancel((uv_req_t *)&ac->gai);
    redisReaderFree(ac->reader);
    ac->reader = redisReaderCreate();   /* NULL is retried by start() */
    free(ac->obuf);
    ac->obuf = NULL;
    ac->olen = ac->ooff = ac->ocap = 0;
    ac->state = ST_BACKOFF;
    ac->reconnect_at = dlock__now_ms() + ac->backoff_ms;
    ac->backoff_ms *= 2;
    if (ac->backoff_ms > ac->ctx->cfg->retry_delay_ms)
        ac->backoff_ms = ac->ctx->cfg->retry_delay_ms;
    fail_pending(ac, status);
    if (ac->cbs.on_down && ac->state != ST_CLOSING)
        ac->cbs.on_down(ac, status, ac->cbs.ud);
    if (ac->state == ST_BACKOFF)
        arm_timer(ac);
}

/* ---------------------------------------------------------------- timer */

static void on_ping(dlock__aconn *ac, redisReply *r, int status, void *ud) {}

static void on_timer(uv_timer_t *t)
{
    dlock__aconn *ac = t->data;
    int64_t now = dlock__now_ms();
    if (ac->write_failed && (ac->state == ST_HANDSHAKE || ac->state == ST_READY)) {
        fail(ac, ac->t.tls_error ? DLOCK_ETLS : DLOCK_ECONN, ac->t.err);
        return;
    }
    switch (ac->state) {
    case ST_CONNECTING:
    case ST_TLS:
    case ST_HANDSHAKE:
        if (now >= ac->conn_deadline) {
            fail(ac, DLOCK_ECONN, ac->state == ST_TLS ? "no TLS answer within the connect "
                                                        "timeout (a plain port?)"
                                                      : "connect timeout");
            return;
        }
        break;
    case ST_READY:
        if (!dlock__list_empty(&ac->pending)) {
            pending *p = DLOCK__CONTAINER_OF(ac->pending.next, pending, link);
            if (now >= p->sent_us / 1000 + ac->ctx->cfg->command_timeout_ms) {
                fail(ac, DLOCK_ECMDTIMEOUT, "no reply within the command timeout");
                return;
            }
        } else if (ac->pubsub && now - ac->last_io >= PING_INTERVAL_MS) {
            const char *av[] = {"PING"};
            queue_cmd(ac, 1, av, NULL, 1, on_ping, NULL);
        }
        break;
    case ST_BACKOFF:
        if (now >= ac->reconnect_at) {
            start(ac);
            return;
        }
        break;
    default:
        return;
    }
    arm_timer(ac);
}

static void arm_timer(dlock__aconn *ac)
{
    int64_t now = dlock__now_ms(), at = -1;
    if (ac->write_failed && (ac->state == ST_HANDSHAKE || ac->state == ST_READY)) {
        uv_timer_start(&ac->timer, on_timer, 0, 0);
        return;
    }
    switch (ac->state) {
    case ST_CONNECTING:
    case ST_TLS:
    case ST_HANDSHAKE:
        at = ac->conn_deadline;
        break;
    case ST_READY:
        if (!dlock__list_empty(&ac->pending)) {
            pending *p = DLOCK__CONTAINER_OF(ac->pending.next, pending, link);
            at = p->sent_us / 1000 + ac->ctx->cfg->command_timeout_ms;
        } else if (ac->pubsub) {
            at = ac->last_io + PING_INTERVAL_MS;
        }
        break;
    case ST_BACKOFF:
        at = ac->reconnect_at;
        break;
    default:
        break;
    }
    if (at < 0) {
        uv_timer_stop(&ac->timer);
        return;
    }
    uv_timer_start(&ac->timer, on_timer, (uint64_t)(at > now ? at - now : 0), 0);
}

/* ---------------------------------------------------------------- close */

void dlock__aconn_close(dlock__aconn *ac, void (*done)(void *), void *arg)
{
    if (!ac || ac->state == ST_CLOSING)
        return;
    ac->state = ST_CLOSING;
    ac->done = done;
    ac->done_arg = arg;
    close_box(ac, 0);
    if (ac->gai_active)
        uv_cancel((uv_req_t *)&ac->gai);
    uv_timer_stop(&ac->timer);
    uv_close((uv_handle_t *)&ac->timer, on_timer_closed);
    fail_pending(ac, DLOCK_ECLOSED);
}
