/* dlock exporter: an HTTP endpoint (/metrics) with the state of the locks in
 * Redis, in Prometheus' text format (metrics.c).
 *
 * Bounded so that scrapes never load Redis: a pass (monitor.c: SCAN in
 * batches, then a snapshot of each object found, at most --max-keys of them)
 * runs only when a scrape finds the last one older than --interval, so at
 * most one per interval however many scrapers there are; between passes the
 * rendered text is served from memory. Passes run in a thread of their own;
 * a scrape waits for one at most the scrape timeout (--scrape-timeout, or
 * less when Prometheus says less in X-Prometheus-Scrape-Timeout-Seconds),
 * then answers dlock_up 0 with why, and the pass goes on for the next scrape.
 * Requests are served one at a time, each bounded in time (reading, waiting,
 * writing). SIGINT, SIGTERM and SIGHUP end it (exit 0). */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics.h"

#define REQUEST_MAX 8192
#define IO_TIMEOUT_MS 5000            /* reading a request, writing an answer */
#define DEFAULT_INTERVAL_MS 15000
#define DEFAULT_SCRAPE_TIMEOUT_MS 5000
#define DEFAULT_MAX_KEYS 10000
#define MAX_KEYS_LIMIT 10000000

typedef struct exp_args {
    const char *listen;
    int64_t interval_ms, scrape_timeout_ms;
    int64_t max_keys;
    const char *pattern;
} exp_args;

typedef struct exporter {
    exp_args a;
    cli_opts qo;              /* the options, quiet: the worker's opens */
    const cli_opts *o;        /* for messages */
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* a pass wanted, a pass done, stop */
    int want, running, stop;
    uint64_t done;            /* passes finished */
    int64_t started_ms;       /* monotonic start of the last pass, -1: none yet */
    char *body;               /* the last pass's text */
    size_t len;
    uint64_t passes, errors;  /* the worker's alone */
    int was_up;               /* -1 at first */
    char last_error[512];
    dlock_client *c;          /* the worker's */
    mon_memory *mem;
} exporter;

/* ------------------------------------------------------------ arguments */

static int parse_args(cli_opts *o, int argc, char **argv, exp_args *a)
{
    memset(a, 0, sizeof(*a));
    a->interval_ms = DEFAULT_INTERVAL_MS;
    a->scrape_timeout_ms = DEFAULT_SCRAPE_TIMEOUT_MS;
    a->max_keys = DEFAULT_MAX_KEYS;
    static const cli_dur_rule interval = {0, NULL, 100, 86400000, "100ms to 1d"};
    static const cli_dur_rule timeout = {0, NULL, 100, 600000, "100ms to 10m"};
    const mon_opt opts[] = {
        {"--listen", "-l", MON_STR, NULL, 0, 0, &a->listen},
        {"--interval", NULL, MON_DUR, &interval, 0, 0, &a->interval_ms},
        {"--scrape-timeout", NULL, MON_DUR, &timeout, 0, 0, &a->scrape_timeout_ms},
        {"--max-keys", NULL, MON_NUM, NULL, 1, MAX_KEYS_LIMIT, &a->max_keys}};
    if (mon_parse_args(o, "exporter", argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                       &a->pattern) != 0)
        return -1;
    if (!a->listen) {
        cli_usage_error(o, "exporter", "missing --listen ADDR:PORT (e.g. 127.0.0.1:9464)");
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- listen */

/* "host:port", "[v6]:port" or ":port" (every address) into host (NULL for
 * every address) and port. 0, or -1 after a usage error. */
static int split_listen(const cli_opts *o, const char *s, char *host, size_t hsize, char *port,
                        size_t psize)
{
    const char *colon = strrchr(s, ':');
    const char *h = s;
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (colon && s[0] == '[') {
        h = s + 1;
        hl = colon > s + 1 && colon[-1] == ']' ? (size_t)(colon - s - 2) : (size_t)-1;
    } else if (colon && memchr(s, ':', hl)) {
        hl = (size_t)-1;   /* an IPv6 address needs its brackets */
    }
    const char *p = colon ? colon + 1 : "";
    size_t pl = strlen(p);
    long pn = pl && pl <= 5 && strspn(p, "0123456789") == pl ? strtol(p, NULL, 10) : -1;
    if (!colon || hl == (size_t)-1 || hl >= hsize || pn < 0 || pn > 65535 || pl >= psize) {
        char e[120];
        cli_usage_error(o, "exporter", "--listen '%s': give ADDR:PORT (127.0.0.1:9464, "
                                       "[::1]:9464, :9464 for every address; port 0 to 65535)",
                        cli_esc(s, e, sizeof(e)));
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, psize, "%ld", pn);
    return 0;
}

/* A listening socket on the address. Returns it, or -1 after a message
 * (*code: the exit code). */
static int open_listener(const cli_opts *o, const char *spec, int *code)
{
    char host[256], port[8];
    *code = EXIT_USAGE;
    if (split_listen(o, spec, host, sizeof(host), port, sizeof(port)) != 0)
        return -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *res;
    char e[300];
    cli_esc(spec, e, sizeof(e));
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    *code = EXIT_OSERR;
    if (gai != 0) {
        cli_err(o, "exporter: cannot listen on %s: %s", e, gai_strerror(gai));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        cli_err(o, "exporter: cannot listen on %s: %s%s", e, strerror(err),
                err == EADDRINUSE ? " (another process listens there: another exporter?)"
                                  : "");
    return fd;
}

/* --------------------------------------------------------------- passes */

/* One pass (the worker's): its text; *up: it read Redis. The counters are
 * written by the worker alone, under the lock (scrapes read them). */
static char *pass(exporter *x, size_t *len, int *up)
{
    mon_status st = {.max_keys = (size_t)x->a.max_keys, .started_unix_ms = wall_ms()};
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
    mon_pass p = {.pattern = x->a.pattern, .limit = (size_t)x->a.max_keys};
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
        while (!x->want && !x->stop)
            pthread_cond_wait(&x->cv, &x->mu);
        if (x->stop)
            break;
        x->want = 0;
        x->running = 1;
        x->started_ms = mono_ms();
        pthread_mutex_unlock(&x->mu);
        size_t len = 0;
        int up;
        char *text = pass(x, &len, &up);
        pthread_mutex_lock(&x->mu);
        x->passes++;
        x->errors += !up;
        if (text) {
            free(x->body);
            x->body = text;
            x->len = len;
        }
        x->running = 0;
        x->done++;
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* The text of a scrape (malloc'd): the last pass's when it is recent, else
 * that of a pass started now (or running), waited for up to timeout_ms. */
static char *scrape(exporter *x, int64_t timeout_ms, size_t *len)
{
    int64_t now = mono_ms(), deadline = now + timeout_ms;
    char *text = NULL;
    pthread_mutex_lock(&x->mu);
    if (!x->running && !x->want && (x->started_ms < 0 || now - x->started_ms >= x->a.interval_ms)) {
        x->want = 1;
        pthread_cond_broadcast(&x->cv);
    }
    uint64_t done = x->done;
    int timed_out = 0;
    while ((x->want || x->running) && x->done == done) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
    if (!timed_out && x->body && (text = malloc(x->len + 1))) {
        memcpy(text, x->body, x->len + 1);
        *len = x->len;
    }
    mon_status st = {.up = 0, .passes = x->passes, .errors = x->errors,
                     .max_keys = (size_t)x->a.max_keys};
    pthread_mutex_unlock(&x->mu);
    if (!text) {
        char why[200], d[32];
        snprintf(why, sizeof(why), "no pass over Redis finished within the scrape timeout "
                                   "(%s): Redis is slow or unreachable; the pass goes on",
                 cli_fmt_duration(timeout_ms, d, sizeof(d)));
        st.error = why;
        text = mon_render(NULL, NULL, NULL, &st, len);
    }
    return text;
}

/* ----------------------------------------------------------------- HTTP */

/* Writes all of buf before the deadline. 0, or -1. */
static int send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        int64_t left = deadline - mono_ms();
        struct pollfd pfd = {fd, POLLOUT, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) < 0)
            return -1;
    }
    return 0;
}

static void respond(int fd, const char *status, const char *type, const char *extra,
                    const char *body, size_t len, int head_only, int64_t deadline)
{
    char hdr[512];
    int n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu"
                                       "\r\n%sConnection: close\r\n\r\n",
                     status, type, len, extra ? extra : "");
    if (send_all(fd, hdr, (size_t)n, deadline) == 0 && !head_only)
        send_all(fd, body, len, deadline);
}

/* Reads the request's head (up to the blank line). Its length, or -1. */
static ssize_t read_request(int fd, char *buf, size_t size, int64_t deadline)
{
    size_t got = 0;
    while (got < size - 1) {
        ssize_t n = recv(fd, buf + got, size - 1 - got, 0);
        if (n > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
                return (ssize_t)got;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        int64_t left = deadline - mono_ms();
        struct pollfd pfd = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return -1;
    }
    return -1;   /* too long */
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

static void serve(exporter *x, int fd)
{
    static const char index_page[] =
        "<html><head><title>dlock exporter</title></head><body><h1>dlock exporter</h1>"
        "<p><a href=\"/metrics\">/metrics</a>: the locks, semaphores and latches in Redis."
        "</p></body></html>\n";
    static const char text[] = "text/plain; charset=utf-8";
    char req[REQUEST_MAX];
    int64_t deadline = mono_ms() + IO_TIMEOUT_MS;
    if (read_request(fd, req, sizeof(req), deadline) < 0) {
        respond(fd, "400 Bad Request", text, NULL, "bad request\n", 12, 0, deadline);
        return;
    }
    char method[16], target[1024];
    if (sscanf(req, "%15s %1023s HTTP/1.%*d", method, target) != 2) {
        respond(fd, "400 Bad Request", text, NULL, "bad request\n", 12, 0, deadline);
        return;
    }
    int head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        respond(fd, "405 Method Not Allowed", text, "Allow: GET, HEAD\r\n",
                "only GET and HEAD\n", 18, 0, deadline);
        return;
    }
    target[strcspn(target, "?#")] = '\0';
    if (strcmp(target, "/") == 0) {
        respond(fd, "200 OK", "text/html; charset=utf-8", NULL, index_page,
                sizeof(index_page) - 1, head, deadline);
        return;
    }
    if (strcmp(target, "/metrics") != 0) {
        respond(fd, "404 Not Found", text, NULL, "not found: see /metrics\n", 24, 0, deadline);
        return;
    }
    size_t len = 0;
    char *body = scrape(x, scrape_timeout(x, req), &len);
    if (!body) {
        respond(fd, "500 Internal Server Error", text, NULL, "out of memory\n", 14, 0,
                mono_ms() + IO_TIMEOUT_MS);
        return;
    }
    respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", NULL, body, len, head,
            mono_ms() + IO_TIMEOUT_MS);
    free(body);
}

/* The listener's address as a URL, for the first message. */
static void say_listening(const exporter *x, int lfd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?", pat[120], d[32];
    if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV);
    int v6 = strchr(host, ':') != NULL;
    cli_err(x->o, "exporter: serving http://%s%s%s:%s/metrics (pattern %s, a pass at most "
                  "every %s, at most %lld keys)", v6 ? "[" : "", host, v6 ? "]" : "", port,
            cli_esc(x->a.pattern ? x->a.pattern : "*", pat, sizeof(pat)),
            cli_fmt_duration(x->a.interval_ms, d, sizeof(d)), (long long)x->a.max_keys);
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
    x.o = o;
    x.qo = *o;
    x.qo.quiet = 1;
    x.started_ms = -1;
    x.was_up = -1;
    /* Blocked before any thread starts (the client's io thread, the worker
     * inherit the mask): read from a signalfd by the accept loop. */
    int sfd = cli_stop_signals();
    signal(SIGPIPE, SIG_IGN);
    int code;
    int lfd = open_listener(o, x.a.listen, &code);
    if (lfd < 0) {
        if (sfd >= 0)
            close(sfd);
        return code;
    }
    if ((code = first_open(&x)) != 0 || !(x.mem = mon_memory_new())) {
        if (!code)
            cli_err(o, "out of memory");
        dlock_client_close(x.c);
        close(lfd);
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
    say_listening(&x, lfd);
    for (;;) {
        struct pollfd pf[2] = {{lfd, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve(&x, fd);
        shutdown(fd, SHUT_WR);
        close(fd);
    }
    pthread_mutex_lock(&x.mu);
    x.stop = 1;
    pthread_cond_broadcast(&x.cv);
    pthread_mutex_unlock(&x.mu);
    pthread_join(th, NULL);
    code = 0;
out:
    if (sfd >= 0)
        close(sfd);
    close(lfd);
    pthread_cond_destroy(&x.cv);
    pthread_mutex_destroy(&x.mu);
    free(x.body);
    mon_memory_free(x.mem);
    dlock_client_close(x.c);
    return code;
}
