/* Sockets: how a connection's bytes travel (see net.h, "transport").
 *
 * Every socket is non-blocking from its creation: connects and reads have
 * deadlines, and the blocking connection (conn.c) waits with poll() while the
 * libuv one (aconn.c) waits with uv_poll, on the same transport. Writes use
 * MSG_NOSIGNAL: a peer gone away is an error to report, never a SIGPIPE. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/net.h"

#define KEEPALIVE_IDLE_S 30
#define KEEPALIVE_INTVL_S 10
#define KEEPALIVE_CNT 3

int dlock__io_fail(dlock__transport *t, int err, const char *what)
{
    t->err_no = err;
    t->hung_up = err == ECONNRESET || err == EPIPE;
    if (t->hung_up)
        snprintf(t->err, sizeof(t->err), "connection reset by the server");
    else
        snprintf(t->err, sizeof(t->err), "%s: %s", what, strerror(err));
    return DLOCK__IO_ERR;
}

/* ------------------------------------------------------------- plain */

static int sock_handshake(dlock__transport *t) { return DLOCK_OK; }

static ssize_t sock_read(dlock__transport *t, char *buf, size_t n)
{
    for (;;) {
        ssize_t k = recv(t->fd, buf, n, 0);
        if (k >= 0) {
            if (k == 0) {
                t->hung_up = 1;
                snprintf(t->err, sizeof(t->err), "connection closed by the server");
            }
            return k;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            t->want = POLLIN;
            return DLOCK__IO_AGAIN;
        }
        return dlock__io_fail(t, errno, "read");
    }
}

static ssize_t sock_write(dlock__transport *t, const char *buf, size_t n)
{
    for (;;) {
        ssize_t k = send(t->fd, buf, n, MSG_NOSIGNAL);
        if (k >= 0)
            return k;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            t->want = POLLOUT;
            return DLOCK__IO_AGAIN;
        }
        return dlock__io_fail(t, errno, "write");
    }
}

static int sock_pending(const dlock__transport *t) { return 0; }

static void sock_close(dlock__transport *t, int reset) {}

static const dlock__transport_vt plain_vt = {"tcp", sock_handshake, sock_read, sock_write,
                                             sock_pending, sock_close};
static const dlock__transport_vt unix_vt = {"unix", sock_handshake, sock_read, sock_write,
                                            sock_pending, sock_close};

void dlock__transport_init(dlock__transport *t)
{
    memset(t, 0, sizeof(*t));
    t->fd = -1;
    t->vt = &plain_vt;
}

void dlock__transport_close(dlock__transport *t, int reset)
{
    if (t->fd < 0)
        return;
    t->vt->close(t, reset);   /* TLS: its state goes, with a close_notify unless reset */
    if (reset) {
        /* Drop whatever is still queued instead of sending it late. */
        struct linger lg = {1, 0};
        setsockopt(t->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(t->fd);
    t->fd = -1;
}

/* ----------------------------------------------------------- connect */

static void tune_tcp(int fd)
{
    int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_CNT;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int dlock__transport_connect(dlock__transport *t, const struct sockaddr *sa, socklen_t len)
{
    dlock__transport_close(t, 1);
    t->vt = sa->sa_family == AF_UNIX ? &unix_vt : &plain_vt;
    t->want = 0;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return dlock__io_fail(t, errno, "socket");
    if (sa->sa_family != AF_UNIX)
        tune_tcp(fd);
    t->fd = fd;
    int rc;
    do
        rc = connect(fd, sa, len);
    while (rc != 0 && errno == EINTR);
    if (rc == 0)
        return DLOCK_OK;
    if (errno == EINPROGRESS) {
        t->want = POLLOUT;
        return DLOCK__IO_AGAIN;
    }
    if (errno == EAGAIN && sa->sa_family == AF_UNIX)
        return dlock__io_fail(t, errno, "connect (the server's backlog is full)");
    return dlock__io_fail(t, errno, "connect");
}

int dlock__transport_connected(dlock__transport *t)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == EINPROGRESS || err == EALREADY) {
        t->want = POLLOUT;
        return DLOCK__IO_AGAIN;
    }
    return err ? dlock__io_fail(t, err, "connect") : DLOCK_OK;
}

int dlock__transport_wait(dlock__transport *t, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - dlock__now_ms();
        if (left <= 0)
            return DLOCK_ECMDTIMEOUT;
        struct pollfd p = {t->fd, events, 0};
        int k = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (k > 0)
            return DLOCK_OK;   /* ready, or an error the next call reports */
        if (k < 0 && errno != EINTR)
            return dlock__fail(DLOCK_ESYS, "poll: %s", strerror(errno));
    }
}

/* The addresses of ep, IPv4 first: "localhost" often resolves to ::1 first
 * while Redis binds 127.0.0.1 only. */
static int resolve(const dlock__endpoint *ep, const char *addr, struct addrinfo **out)
{
    char port[8];
    snprintf(port, sizeof(port), "%d", ep->port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    int rc = getaddrinfo(ep->host, port, &hints, out);
    if (rc != 0)
        return dlock__fail(DLOCK_ECONN, "cannot connect to %s: cannot resolve host: %s", addr,
                           rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    struct addrinfo *v4 = NULL, **v4_tail = &v4, *v6 = NULL, **v6_tail = &v6;
    for (struct addrinfo *a = *out, *next; a; a = next) {
        next = a->ai_next;
        a->ai_next = NULL;
        if (a->ai_family == AF_INET) {
            *v4_tail = a;
            v4_tail = &a->ai_next;
        } else {
            *v6_tail = a;
            v6_tail = &a->ai_next;
        }
    }
    *v4_tail = v6;
    *out = v4;
    return DLOCK_OK;
}

/* Connects to one address, waiting up to the deadline. */
static int connect_one(dlock__transport *t, const struct sockaddr *sa, socklen_t len,
                       int64_t deadline_ms)
{
    int rc = dlock__transport_connect(t, sa, len);
    while (rc == DLOCK__IO_AGAIN) {
        if (dlock__transport_wait(t, POLLOUT, deadline_ms) != DLOCK_OK) {
            snprintf(t->err, sizeof(t->err), "connect timeout");
            t->err_no = ETIMEDOUT;
            return DLOCK__IO_ERR;
        }
        rc = dlock__transport_connected(t);
    }
    return rc;
}

int dlock__transport_open(dlock__transport *t, const dlock__endpoint *ep, const char *addr,
                          int64_t deadline_ms)
{
    if (ep->path) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", ep->path);
        if (connect_one(t, (struct sockaddr *)&sun, sizeof(sun), deadline_ms) != DLOCK_OK)
            return dlock__fail(DLOCK_ECONN, "cannot connect to %s: %s", addr, t->err);
        return DLOCK_OK;
    }
    struct addrinfo *ai;
    int rc = resolve(ep, addr, &ai);
    if (rc != DLOCK_OK)
        return rc;
    rc = DLOCK__IO_ERR;
    for (struct addrinfo *a = ai; a && rc != DLOCK_OK && dlock__now_ms() < deadline_ms;
         a = a->ai_next)
        rc = connect_one(t, a->ai_addr, a->ai_addrlen, deadline_ms);
    freeaddrinfo(ai);
    if (rc != DLOCK_OK) {
        if (!t->err[0])
            snprintf(t->err, sizeof(t->err), "connect timeout");
        return dlock__fail(DLOCK_ECONN, "cannot connect to %s: %s", addr, t->err);
    }
    return DLOCK_OK;
}

/* --------------------------------------------------------------- I/O */

int dlock__transport_write_all(dlock__transport *t, const char *buf, size_t n,
                               int64_t deadline_ms, size_t *written)
{
    size_t off = 0;
    int rc = DLOCK_OK;
    while (off < n) {
        ssize_t k = t->vt->write(t, buf + off, n - off);
        if (k > 0) {
            off += (size_t)k;
            continue;
        }
        if (k == DLOCK__IO_AGAIN) {
            rc = dlock__transport_wait(t, t->want, deadline_ms);
            if (rc == DLOCK_ECMDTIMEOUT)
                snprintf(t->err, sizeof(t->err), "write timeout");
            if (rc != DLOCK_OK)
                break;
            continue;
        }
        rc = DLOCK__IO_ERR;
        break;
    }
    if (written)
        *written = off;
    return rc;
}
