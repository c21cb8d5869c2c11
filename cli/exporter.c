/* dlock exporter: an HTTP endpoint (/metrics) with the state of the locks in
 * Redis, in Prometheus' text format (metrics.c).
 *
 * Bounded so that scrapes never load Redis: a pass (monitor.c: SCAN in
 * batches, then a snapshot of each object found, at most --max-keys of them
 * and --max-holders holders of each) runs only when a scrape finds the last
 * one older than --interval, so at most one per interval however many
 * scrapers there are; between passes the rendered text is served from
 * memory. Passes run in a thread of their own; a scrape waits for one at
 * most the scrape timeout (--scrape-timeout, or less when Prometheus says
 * less in X-Prometheus-Scrape-Timeout-Seconds), then answers dlock_up 0
 * with why, and the pass goes on for the next scrape.
 *
 * Bounded so that no client starves another: connections are served at
 * once (one poll loop, up to CONN_MAX of them; past that the oldest one not
 * waiting for a pass is dropped), a request's head must come within
 * HEAD_TIMEOUT_MS of the connection (else 408) and its answer be read within
 * WRITE_TIMEOUT_MS, whatever the others do. HTTP/1.0 and 1.1 only; GET and
 * HEAD. :PORT listens on every address of both families (IPv4 and IPv6);
 * an address that is not loopback is said on stderr (whoever reaches it
 * reads the names of the locks). SIGINT, SIGTERM and SIGHUP end it (exit
 * 0) within a second, a pass in progress included. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"
#include "metrics.h"

#define REQUEST_MAX 8192
#define CONN_MAX 64                   /* connections served at once */
#define HEAD_TIMEOUT_MS 2000          /* from the connection to the request's blank line */
#define WRITE_TIMEOUT_MS 10000        /* to write an answer */
#define STOP_WAIT_MS 700              /* a pass in progress at a stop signal, at most */
#define DEFAULT_INTERVAL_MS 15000
#define DEFAULT_SCRAPE_TIMEOUT_MS 5000
#define DEFAULT_MAX_KEYS 10000
#define MAX_KEYS_LIMIT 10000000
#define DEFAULT_MAX_HOLDERS 10000

typedef struct exp_args {
    const char *listen;
    int64_t interval_ms, scrape_timeout_ms;
    int64_t max_keys, max_holders;
    const char *pattern;
} exp_args;

/* A rendered page, shared by the exporter and the connections writing it. */
typedef struct page {
    atomic_int refs;
    size_t len;
    char *text;
} page;

typedef struct exporter {
    exp_args a;
    cli_opts qo;              /* the options, quiet: the worker's opens */
    const cli_opts *o;        /* for messages */
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* a pass wanted, a pass done, stop */
    int want, running, exited;
    atomic_int stop;
    uint64_t done;            /* passes finished */
    int64_t started_ms;       /* monotonic start of the last pass, -1: none yet */
    page *body;               /* the last pass's text */
    int efd;                  /* eventfd: a pass finished */
    uint64_t passes, errors;  /* the worker's alone */
    int was_up;               /* -1 at first */
    char last_error[512];
    dlock_client *c;          /* the worker's */
    mon_memory *mem;
} exporter;

static page *page_new(char *text, size_t len)
{
    page *p = text ? malloc(sizeof(*p)) : NULL;
    if (!p) {
        free(text);
        return NULL;
    }
    atomic_init(&p->refs, 1);
    p->len = len;
    p->text = text;
    return p;
}

static void page_unref(page *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) {
        free(p->text);
        free(p);
    }
}

/* ------------------------------------------------------------ arguments */

static int parse_args(cli_opts *o, int argc, char **argv, exp_args *a)
{
    memset(a, 0, sizeof(*a));
    a->interval_ms = DEFAULT_INTERVAL_MS;
    a->scrape_timeout_ms = DEFAULT_SCRAPE_TIMEOUT_MS;
    a->max_keys = DEFAULT_MAX_KEYS;
    a->max_holders = DEFAULT_MAX_HOLDERS;
    static const cli_dur_rule interval = {0, NULL, 100, 86400000, "100ms to 1d"};
    static const cli_dur_rule timeout = {0, NULL, 100, 600000, "100ms to 10m"};
    const mon_opt opts[] = {
        {"--listen", "-l", MON_STR, NULL, 0, 0, &a->listen},
        {"--interval", NULL, MON_DUR, &interval, 0, 0, &a->interval_ms},
        {"--scrape-timeout", NULL, MON_DUR, &timeout, 0, 0, &a->scrape_timeout_ms},
        {"--max-keys", NULL, MON_NUM, NULL, 1, MAX_KEYS_LIMIT, &a->max_keys},
        {"--max-holders", NULL, MON_NUM, NULL, 1, MAX_KEYS_LIMIT, &a->max_holders}};
    if (mon_parse_args(o, "exporter", argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                       &a->pattern) != 0)
        return -1;
    if (!a->listen) {
        cli_usage_error(o, "exporter", "missing --listen ADDR:PORT (e.g. 127.0.0.1:9464)");
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- passes */

/* One pass (the worker's): its text; *up: it read Redis. NULL after a stop
 * (or out of memory). The counters are written by the worker alone, under
 * the lock (scrapes read them). */
static char *pass(exporter *x, size_t *len, int *up)
{
    mon_status st = {.max_keys = (size_t)x->a.max_keys, .max_holders = (size_t)x->a.max_holders,
                     .started_unix_ms = wall_ms()};
    int rc = DLOCK_OK;
    const char *err = NULL;
    char buf[512];
    if (!x->c) {
        int code = cli_open(&x->qo, &x->c, NULL, NULL);
        if (code) {
            x->c = NULL;
            snprintf(buf, sizeof(buf), "cannot use Redis: %s",
                     *dlock_last_error() ? dlock_last_error() : "see the exporter's log");
            err = buf;
        }
    }
    mon_pass p = {.pattern = x->a.pattern, .limit = (size_t)x->a.max_keys, .stop = &x->stop};
    holder_map *map = NULL;
    if (x->c) {
        map = holder_map_load(x->c);
        rc = mon_run(x->c, &p);
        if (rc == DLOCK_OK && mon_memory_update(x->mem, &p, mono_ms(), p.limit) != 0)
            rc = DLOCK_ENOMEM;
        if (rc != DLOCK_OK) {
            snprintf(buf, sizeof(buf), "%s", *dlock_last_error() ? dlock_last_error()
                                                                  : dlock_strerror(rc));
            err = buf;
        }
    }
    if (atomic_load(&x->stop)) {
        mon_pass_free(&p);
        holder_map_free(map);
        *up = 0;
        return NULL;
    }
    st.up = *up = err == NULL;
    st.error = err;
    st.passes = x->passes + 1;
    st.errors = x->errors + !st.up;
    st.now_ms = mono_ms();
    /* Said on stderr when it changes. */
    if (st.up && x->was_up == 0)
        cli_err(x->o, "exporter: Redis answers again");
    else if (!st.up && (x->was_up != 0 || strcmp(x->last_error, err) != 0))
        cli_err(x->o, "exporter: a pass failed: %s (dlock_up 0 until one succeeds)", err);
    x->was_up = st.up;
    snprintf(x->last_error, sizeof(x->last_error), "%s", err ? err : "");
    char *text = mon_render(x->mem, st.up ? &p : NULL, map, &st, len);
    mon_pass_free(&p);
    holder_map_free(map);
    return text;
}

static void *worker(void *arg)
{
    exporter *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->want && !atomic_load(&x->stop))
            pthread_cond_wait(&x->cv, &x->mu);
        if (atomic_load(&x->stop))
            break;
        x->want = 0;
        x->running = 1;
        x->started_ms = mono_ms();
        pthread_mutex_unlock(&x->mu);
        size_t len = 0;
        int up;
        char *text = pass(x, &len, &up);
        page *pg = page_new(text, len);
        pthread_mutex_lock(&x->mu);
        x->passes++;
        x->errors += !up;
        page *old = NULL;
        if (pg) {
            old = x->body;
            x->body = pg;
        }
        x->running = 0;
        x->done++;
        pthread_mutex_unlock(&x->mu);
        page_unref(old);
        uint64_t one = 1;
        if (write(x->efd, &one, sizeof(one)) < 0) {
            /* an eventfd's counter does not overflow at one a pass */
        }
        pthread_mutex_lock(&x->mu);
    }
    x->exited = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* ----------------------------------------------------------------- HTTP */

enum { C_READ, C_WAIT, C_WRITE };

typedef struct conn {
    int fd;
    int state;
    int64_t since, deadline;     /* monotonic: accepted; when its state times out */
    char *req;                   /* C_READ: the head so far */
    size_t got;
    int head_only;               /* HEAD: the header of the answer only */
    int64_t scrape_timeout;      /* C_WAIT: the wait's length (for its message) */
    uint64_t done;               /* C_WAIT: the passes finished when it began */
    char hdr[512];               /* C_WRITE: the answer, hdr then body */
    size_t hlen, off;
    page *pg;                    /* the body, or NULL */
    const char *body;            /* a constant body */
    size_t blen;
} conn;

typedef struct server {
    exporter *x;
    conn c[CONN_MAX];
    int n;
} server;

static void conn_close(server *sv, int i)
{
    conn *c = &sv->c[i];
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    free(c->req);
    page_unref(c->pg);
    sv->c[i] = sv->c[--sv->n];
}

/* Starts the answer: its header now, the body (a page, whose reference it
 * takes, or a constant text) as the socket takes it. */
static void answer(conn *c, const char *status, const char *type, const char *extra, page *pg,
                   const char *body, size_t len)
{
    free(c->req);
    c->req = NULL;
    c->pg = pg;
    c->body = pg ? pg->text : body;
    c->blen = c->head_only ? 0 : len;
    int n = snprintf(c->hdr, sizeof(c->hdr), "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: "
                     "%zu\r\n%sConnection: close\r\n\r\n", status, type, len, extra ? extra : "");
    c->hlen = n > 0 && (size_t)n < sizeof(c->hdr) ? (size_t)n : 0;
    c->off = 0;
    c->state = C_WRITE;
    c->deadline = mono_ms() + WRITE_TIMEOUT_MS;
}

static void answer_text(conn *c, const char *status, const char *extra, const char *text)
{
    answer(c, status, "text/plain; charset=utf-8", extra, NULL, text, strlen(text));
}

/* /metrics: the last pass's page. */
static void answer_page(conn *c, page *pg)
{
    answer(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", NULL, pg, NULL, pg->len);
}

/* dlock_up 0, no pass within the scrape's wait. */
static void answer_down(exporter *x, conn *c)
{
    char why[200], d[32];
    snprintf(why, sizeof(why), "no pass over Redis finished within the scrape timeout (%s): "
                               "Redis is slow or unreachable; the pass goes on",
             cli_fmt_duration(c->scrape_timeout, d, sizeof(d)));
    pthread_mutex_lock(&x->mu);
    mon_status st = {.up = 0, .passes = x->passes, .errors = x->errors,
                     .max_keys = (size_t)x->a.max_keys, .max_holders = (size_t)x->a.max_holders,
                     .error = why};
    pthread_mutex_unlock(&x->mu);
    size_t len = 0;
    char *text = mon_render(NULL, NULL, NULL, &st, &len);
    page *pg = page_new(text, len);
    if (pg)
        answer_page(c, pg);
    else
        answer_text(c, "500 Internal Server Error", NULL, "out of memory\n");
}

/* The scrape timeout: ours, or Prometheus' (its header) less a tenth for
 * the answer's way back, whichever is shorter. */
static int64_t scrape_timeout(const exporter *x, const char *req)
{
    int64_t t = x->a.scrape_timeout_ms;
    const char *h = strcasestr(req, "\nX-Prometheus-Scrape-Timeout-Seconds:");
    if (h) {
        double s = strtod(h + strlen("\nX-Prometheus-Scrape-Timeout-Seconds:"), NULL);
        if (s > 0 && s * 900 < (double)t)
            t = (int64_t)(s * 900);
        if (t < 50)
            t = 50;
    }
    return t;
}

/* A scrape: the last pass's page when it is recent, else that of a pass
 * started now (or running), waited for (C_WAIT) up to the scrape timeout. */
static void scrape(exporter *x, conn *c)
{
    int64_t now = mono_ms();
    page *pg = NULL;
    pthread_mutex_lock(&x->mu);
    if (!x->running && !x->want && (x->started_ms < 0 || now - x->started_ms >= x->a.interval_ms)) {
        x->want = 1;
        pthread_cond_broadcast(&x->cv);
    }
    if (!x->want && !x->running && x->body) {
        pg = x->body;
        atomic_fetch_add(&pg->refs, 1);
    }
    c->done = x->done;
    pthread_mutex_unlock(&x->mu);
    if (pg) {
        answer_page(c, pg);
        return;
    }
    free(c->req);
    c->req = NULL;
    c->state = C_WAIT;
    c->deadline = now + c->scrape_timeout;
}

/* The waiting scrapes that a pass finished for: its page. */
static void passes_done(server *sv)
{
    exporter *x = sv->x;
    pthread_mutex_lock(&x->mu);
    uint64_t done = x->done;
    page *pg = x->body;
    pthread_mutex_unlock(&x->mu);
    for (int i = 0; i < sv->n; i++) {
        conn *c = &sv->c[i];
        if (c->state != C_WAIT || c->done == done)
            continue;
        if (pg) {
            atomic_fetch_add(&pg->refs, 1);
            answer_page(c, pg);
        } else {
            answer_down(x, c);
        }
    }
}

/* The request line: "METHOD TARGET HTTP/1.x". 0, or the status to refuse
 * it with (400 malformed, 505 another version). */
static int request_line(const char *req, char *method, size_t msize, char *target,
                        size_t tsize)
{
    size_t n = strcspn(req, "\r\n");
    const char *sp1 = memchr(req, ' ', n);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - req)) : NULL;
    if (!sp1 || !sp2 || sp1 == req || sp2 == sp1 + 1)
        return 400;
    const char *ver = sp2 + 1;
    size_t vl = n - (size_t)(ver - req);
    if (memchr(ver, ' ', vl) || (size_t)(sp1 - req) >= msize ||
        (size_t)(sp2 - sp1 - 1) >= tsize)
        return 400;
    if (vl != 8 || strncmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1'))
        return strncmp(ver, "HTTP/", 5) == 0 ? 505 : 400;
    memcpy(method, req, (size_t)(sp1 - req));
    method[sp1 - req] = '\0';
    memcpy(target, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    target[sp2 - sp1 - 1] = '\0';
    return 0;
}

/* A whole request's head: what to answer. */
static void serve(exporter *x, conn *c)
{
    static const char index_page[] =
        "<html><head><title>dlock exporter</title></head><body><h1>dlock exporter</h1>"
        "<p><a href=\"/metrics\">/metrics</a>: the locks, semaphores and latches in Redis."
        "</p></body></html>\n";
    char method[16], target[1024];
    int bad = request_line(c->req, method, sizeof(method), target, sizeof(target));
    if (bad == 505) {
        answer_text(c, "505 HTTP Version Not Supported", NULL, "HTTP/1.0 and HTTP/1.1 only\n");
        return;
    }
    if (bad) {
        answer_text(c, "400 Bad Request", NULL, "bad request\n");
        return;
    }
    c->head_only = strcmp(method, "HEAD") == 0;
    if (!c->head_only && strcmp(method, "GET") != 0) {
        answer_text(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", "only GET and HEAD\n");
        return;
    }
    target[strcspn(target, "?#")] = '\0';
    if (strcmp(target, "/") == 0) {
        answer(c, "200 OK", "text/html; charset=utf-8", NULL, NULL, index_page,
               sizeof(index_page) - 1);
        return;
    }
    if (strcmp(target, "/metrics") != 0) {
        answer_text(c, "404 Not Found", NULL, "not found: see /metrics\n");
        return;
    }
    c->scrape_timeout = scrape_timeout(x, c->req);
    scrape(x, c);
}

/* Reads what the client sent. 0 going on, -1 to close. */
static int on_read(exporter *x, conn *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->req + c->got, REQUEST_MAX - 1 - c->got, 0);
        if (n == 0)
            return -1;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        c->got += (size_t)n;
        c->req[c->got] = '\0';
        if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
            serve(x, c);
            return 0;
        }
        if (c->got == REQUEST_MAX - 1) {
            answer_text(c, "431 Request Header Fields Too Large", NULL, "request too long\n");
            return 0;
        }
    }
}

/* Writes what the socket takes. 0 going on, -1 done or failed (close). */
static int on_write(conn *c)
{
    while (c->off < c->hlen + c->blen) {
        const char *p = c->off < c->hlen ? c->hdr + c->off : c->body + (c->off - c->hlen);
        size_t left = c->off < c->hlen ? c->hlen - c->off : c->hlen + c->blen - c->off;
        ssize_t n = send(c->fd, p, left, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        c->off += (size_t)n;
    }
    return -1;
}

/* Room for one more connection: the oldest one reading its request, else
 * the oldest one writing, is dropped (one waiting for a pass is a scrape
 * about to be answered). 0, or -1 when all of them wait. */
static int make_room(server *sv)
{
    int pick = -1;
    for (int want = C_READ; pick < 0 && want <= C_WRITE; want += C_WRITE - C_READ)
        for (int i = 0; i < sv->n; i++)
            if (sv->c[i].state == want && (pick < 0 || sv->c[i].since < sv->c[pick].since))
                pick = i;
    if (pick < 0)
        return -1;
    conn_close(sv, pick);
    return 0;
}

static void on_accept(server *sv, int lfd)
{
    for (int k = 0; k < CONN_MAX; k++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        char *req = malloc(REQUEST_MAX);
        if (!req || (sv->n == CONN_MAX && make_room(sv) != 0)) {
            free(req);
            close(fd);
            continue;
        }
        conn *c = &sv->c[sv->n++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->req = req;
        c->state = C_READ;
        c->since = mono_ms();
        c->deadline = c->since + HEAD_TIMEOUT_MS;
        /* The request may be there already. */
        if (on_read(sv->x, c) != 0 || (c->state == C_WRITE && on_write(c) != 0))
            conn_close(sv, sv->n - 1);
    }
}

/* Deadlines: a head not read in time is answered 408, a wait past the
 * scrape timeout dlock_up 0, an answer not taken in time dropped. */
static void on_deadlines(server *sv, int64_t now)
{
    for (int i = sv->n - 1; i >= 0; i--) {
        conn *c = &sv->c[i];
        if (now < c->deadline)
            continue;
        if (c->state == C_READ)
            answer_text(c, "408 Request Timeout", NULL, "the request came too slowly\n");
        else if (c->state == C_WAIT)
            answer_down(sv->x, c);
        else
            c->off = c->hlen + c->blen;   /* given up */
        if (on_write(c) != 0)
            conn_close(sv, i);
    }
}

/* Serves until a stop signal (sfd). */
static void serve_loop(exporter *x, const int *lfd, int nl, int sfd)
{
    static server sv;   /* 64 connections: not on the stack */
    memset(&sv, 0, sizeof(sv));
    sv.x = x;
    struct pollfd pf[2 + LISTEN_MAX + CONN_MAX];
    for (;;) {
        int64_t now = mono_ms(), timeout = -1;
        int np = 0;
        pf[np++] = (struct pollfd){sfd, POLLIN, 0};
        pf[np++] = (struct pollfd){x->efd, POLLIN, 0};
        for (int i = 0; i < nl; i++)
            pf[np++] = (struct pollfd){lfd[i], POLLIN, 0};
        for (int i = 0; i < sv.n; i++) {
            conn *c = &sv.c[i];
            pf[np++] = (struct pollfd){c->fd, c->state == C_READ    ? POLLIN
                                              : c->state == C_WRITE ? POLLOUT
                                                                    : 0, 0};
            int64_t left = c->deadline - now;
            if (timeout < 0 || left < timeout)
                timeout = left < 0 ? 0 : left;
        }
        int r = poll(pf, (nfds_t)np, (int)(timeout > 60000 ? 60000 : timeout));
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0 && pf[0].revents)
            break;
        if (r > 0 && pf[1].revents) {
            uint64_t v;
            if (read(x->efd, &v, sizeof(v)) == (ssize_t)sizeof(v))
                passes_done(&sv);
        }
        /* The connections as they were polled (pf[2 + nl + i] is sv.c[i]
         * until one is closed: walked backwards, closing moves the last). */
        for (int i = sv.n - 1; r > 0 && i >= 0; i--) {
            if (2 + nl + i >= np)
                continue;
            short ev = pf[2 + nl + i].revents;
            conn *c = &sv.c[i];
            if (!ev || c->fd != pf[2 + nl + i].fd)
                continue;
            int end = 0;
            if (c->state == C_READ && (ev & (POLLIN | POLLHUP | POLLERR)))
                end = on_read(x, c) != 0;
            else if (c->state == C_WAIT && (ev & (POLLHUP | POLLERR)))
                end = 1;   /* gone before its answer */
            if (!end && c->state == C_WRITE && (ev & (POLLOUT | POLLHUP | POLLERR)))
                end = on_write(c) != 0;
            if (end)
                conn_close(&sv, i);
        }
        on_deadlines(&sv, mono_ms());
        for (int i = 0; r > 0 && i < nl; i++)
            if (pf[2 + i].revents)
                on_accept(&sv, lfd[i]);
    }
    while (sv.n > 0)
        conn_close(&sv, sv.n - 1);
}

/* The listeners' addresses as URLs, for the first message; a warning for
 * each that is not loopback. */
static void say_listening(const exporter *x, const int *lfd, int nl)
{
    char urls[4 * 80] = "", pat[120], d[32];
    size_t off = 0;
    for (int i = 0; i < nl; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
        if (getsockname(lfd[i], (struct sockaddr *)&ss, &sl) != 0)
            continue;
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV);
        int v6 = strchr(host, ':') != NULL;
        char url[NI_MAXHOST + NI_MAXSERV + 24];
        snprintf(url, sizeof(url), "http://%s%s%s:%s/metrics", v6 ? "[" : "", host,
                 v6 ? "]" : "", port);
        off += (size_t)snprintf(urls + off, sizeof(urls) - off, "%s%s", i ? " and " : "", url);
        if (off >= sizeof(urls))
            off = sizeof(urls) - 1;
        if (!listen_loopback((struct sockaddr *)&ss))
            cli_err(x->o, "exporter: warning: %s is not a loopback address: whoever reaches it "
                          "reads the names of the locks, semaphores and latches and how they "
                          "are held (no authentication, no TLS); listen on 127.0.0.1 or keep "
                          "it behind a firewall", url);
    }
    cli_err(x->o, "exporter: serving %s (pattern %s, a pass at most every %s, at most %lld "
                  "keys, %lld holders each)", urls,
            cli_esc(x->a.pattern ? x->a.pattern : "*", pat, sizeof(pat)),
            cli_fmt_duration(x->a.interval_ms, d, sizeof(d)), (long long)x->a.max_keys,
            (long long)x->a.max_holders);
}

/* Opens the client at the start: a configuration error ends the exporter
 * (its exit code); Redis unreachable or refusing does not (dlock_up 0, and
 * each pass tries again). */
static int first_open(exporter *x)
{
    int code = cli_open(x->o, &x->c, NULL, NULL);
    if (code == EXIT_USAGE || code == EXIT_CONFIG || code == EXIT_NOINPUT)
        return code;
    if (code) {
        x->c = NULL;
        cli_err(x->o, "exporter: serving dlock_up 0 until Redis answers");
    }
    return 0;
}

/* Ends the worker: at once between two steps of a pass; a pass stuck in a
 * call to Redis is not waited for past STOP_WAIT_MS (the process exits
 * with it). 0 joined, -1 not. */
static int stop_worker(exporter *x, pthread_t th)
{
    atomic_store(&x->stop, 1);
    pthread_mutex_lock(&x->mu);
    pthread_cond_broadcast(&x->cv);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += STOP_WAIT_MS * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    while (!x->exited && pthread_cond_timedwait(&x->cv, &x->mu, &ts) == 0) {
    }
    int exited = x->exited;
    pthread_mutex_unlock(&x->mu);
    if (!exited)
        return -1;
    pthread_join(th, NULL);
    return 0;
}

int cmd_exporter(cli_opts *o, int argc, char **argv)
{
    exporter x;
    memset(&x, 0, sizeof(x));
    if (parse_args(o, argc, argv, &x.a) != 0)
        return EXIT_USAGE;
    o->label = "exporter";
    /* A pass's connect and each reply within a scrape's wait, and no retry
     * that outlasts it: a failing pass says why while a scrape waits. */
    o->connect_bound_ms = x.a.scrape_timeout_ms;
    if (!o->command_timeout_ms)
        o->command_timeout_ms = x.a.scrape_timeout_ms < 3000 ? x.a.scrape_timeout_ms : 3000;
    o->retry_attempts = 0;
    o->inspect_max = (size_t)x.a.max_holders;
    x.o = o;
    x.qo = *o;
    x.qo.quiet = 1;
    x.started_ms = -1;
    x.was_up = -1;
    x.efd = -1;
    atomic_init(&x.stop, 0);
    /* Blocked before any thread starts (the client's io thread, the worker
     * inherit the mask): read from a signalfd by the serving loop. */
    int sfd = cli_stop_signals();
    signal(SIGPIPE, SIG_IGN);
    int code, lfd[LISTEN_MAX];
    int nl = listen_open(o, x.a.listen, lfd, &code);
    if (nl < 0) {
        if (sfd >= 0)
            close(sfd);
        return code;
    }
    if ((code = first_open(&x)) != 0 || !(x.mem = mon_memory_new()) ||
        (x.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        if (!code)
            cli_err(o, "exporter: cannot start: %s", strerror(errno ? errno : ENOMEM));
        dlock_client_close(x.c);
        mon_memory_free(x.mem);
        listen_close(lfd, nl);
        if (sfd >= 0)
            close(sfd);
        return code ? code : EXIT_SOFTWARE;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&x.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&x.mu, NULL);
    pthread_t th;
    if (sfd < 0 || pthread_create(&th, NULL, worker, &x) != 0) {
        cli_err(o, "exporter: cannot start: %s", strerror(errno));
        code = EXIT_SOFTWARE;
        goto out;
    }
    say_listening(&x, lfd, nl);
    serve_loop(&x, lfd, nl, sfd);
    listen_close(lfd, nl);
    nl = 0;
    if (stop_worker(&x, th) != 0) {
        /* A call to Redis that hangs: the process ends with it, now. */
        cli_err(o, "exporter: the pass in progress did not end within %d ms: exiting without "
                   "it", STOP_WAIT_MS);
        fflush(NULL);
        _exit(0);
    }
    code = 0;
out:
    if (sfd >= 0)
        close(sfd);
    listen_close(lfd, nl);
    close(x.efd);
    pthread_cond_destroy(&x.cv);
    pthread_mutex_destroy(&x.mu);
    page_unref(x.body);
    mon_memory_free(x.mem);
    dlock_client_close(x.c);
    return code;
}
