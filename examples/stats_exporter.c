/* A Prometheus exporter for a dlock client's statistics: a program that
 * uses locks (here: two worker threads taking turns on one lock, with the
 * watchdog) and serves dlock_client_stats() at http://127.0.0.1:PORT/metrics
 * in Prometheus' text format. Histograms use dlock's bucket scheme directly:
 * bucket b holds durations under 2^b us, so its cumulated count is the
 * "le" = 2^b / 1e6 seconds line, the last bucket being "+Inf".
 *
 *   example_stats_exporter [URL] [PORT] [SECONDS]
 *   curl -s http://127.0.0.1:9464/metrics
 *
 * PORT 0 picks a free one (printed); SECONDS (default 0 = forever) stops it.
 * One request at a time, HTTP/1.0, GET /metrics only: an example, not a
 * server to expose beyond loopback. */
/* POSIX calls (nanosleep, pthreads, sockets) under plain cc -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

static dlock_client *client;
static atomic_int stopping;

/* Two threads taking turns on one lock, so the numbers move. */
static void *worker(void *arg)
{
    (void)arg;
    dlock_lock *l;
    if (dlock_lock_get(client, "example:exporter", &l) != DLOCK_OK)
        return NULL;
    while (!atomic_load(&stopping)) {
        if (dlock_lock_acquire(l, DLOCK_WATCHDOG) == DLOCK_OK) {
            example_sleep_ms(20);
            dlock_lock_release(l);
        }
        example_sleep_ms(5);
    }
    dlock_lock_free(l);
    return NULL;
}

/* ---------------------------------------------------------- text format */

typedef struct out {
    char *buf;
    size_t len, cap;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 8192;
        while (cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *nb = realloc(o->buf, cap);
        if (!nb)
            return;
        o->buf = nb;
        o->cap = cap;
    }
}

static void counter(out *o, const char *name, const char *help, uint64_t v)
{
    put(o, "# HELP dlock_%s %s\n# TYPE dlock_%s counter\ndlock_%s %llu\n", name, help, name, name,
        (unsigned long long)v);
}

static void histogram(out *o, const char *name, const char *help, const dlock_histogram *h)
{
    put(o, "# HELP dlock_%s_seconds %s\n# TYPE dlock_%s_seconds histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int b = 0; b < DLOCK_STATS_BUCKETS - 1; b++) {
        cum += h->bucket[b];
        put(o, "dlock_%s_seconds_bucket{le=\"%g\"} %llu\n", name,
            (double)dlock_stats_bucket_limit_us(b) / 1e6, (unsigned long long)cum);
    }
    put(o, "dlock_%s_seconds_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
    put(o, "dlock_%s_seconds_sum %.6f\n", name, (double)h->sum_us / 1e6);
    put(o, "dlock_%s_seconds_count %llu\n", name, (unsigned long long)h->count);
}

static void metrics(out *o)
{
    dlock_stats s;
    if (dlock_client_stats(client, &s, sizeof(s)) != DLOCK_OK)
        return;
    counter(o, "acquisitions_total", "Acquire calls that succeeded.", s.acquisitions);
    counter(o, "waits_total", "Acquire calls that found the object taken and waited.", s.waits);
    counter(o, "wakeups_total", "Wake-ups by a message that a waiter used.", s.wakeups);
    counter(o, "wakeups_taken_total",
            "Wake-ups whose next attempt found the object taken again.", s.wakeups_taken);
    counter(o, "renewals_total", "Holds renewed by the watchdog.", s.renewals);
    counter(o, "renewal_roundtrips_total", "Renewal batches sent.", s.renewal_roundtrips);
    counter(o, "renewal_writes_total", "Writes carrying renewals (one per node per pass).",
            s.renewal_writes);
    static const char *const reasons[] = {NULL, "gone", "unreachable", "paused", "replicas"};
    put(o, "# HELP dlock_lost_total Holds reported lost, by reason.\n"
           "# TYPE dlock_lost_total counter\n");
    for (int r = 1; r < 5; r++)
        put(o, "dlock_lost_total{reason=\"%s\"} %llu\n", reasons[r],
            (unsigned long long)s.lost[r]);
    counter(o, "connects_total", "Connections opened.", s.connects);
    counter(o, "reconnects_total", "Connections lost and replaced.", s.reconnects);
    counter(o, "roundtrips_total", "Requests written and answered.", s.roundtrips);
    histogram(o, "acquire_wait", "From an acquire call to the acquisition.", &s.acquire_wait);
    histogram(o, "handoff_gap", "From an unlock message to the acquisition it led to.",
              &s.handoff_gap);
    histogram(o, "roundtrip", "Round trips to Redis.", &s.roundtrip);
}

/* ---------------------------------------------------------------- HTTP */

static void serve(int fd)
{
    char req[2048];
    ssize_t n = recv(fd, req, sizeof(req) - 1, 0);
    if (n <= 0)
        return;
    req[n] = '\0';
    out body = {0};
    const char *status = "200 OK";
    if (strncmp(req, "GET /metrics ", 13) == 0 || strncmp(req, "GET /metrics?", 13) == 0) {
        metrics(&body);
    } else {
        status = "404 Not Found";
        put(&body, "only GET /metrics\n");
    }
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, body.len);
    if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl && body.len)
        send(fd, body.buf, body.len, MSG_NOSIGNAL);
    free(body.buf);
}

int main(int argc, char **argv)
{
    client = example_open(argc, argv, 0);
    int port = argc > 2 ? atoi(argv[2]) : 9464;
    int seconds = argc > 3 ? atoi(argv[3]) : 0;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 16) != 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 71;
    }
    char ts[16];
    printf("%s serving http://127.0.0.1:%d/metrics\n", example_now(ts, sizeof(ts)),
           ntohs(sa.sin_port));
    fflush(stdout);
    pthread_t w[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, worker, NULL);
    time_t end = seconds > 0 ? time(NULL) + seconds : 0;
    while (!end || time(NULL) < end) {
        struct pollfd p = {ls, POLLIN, 0};
        if (poll(&p, 1, 200) == 1) {
            int fd = accept(ls, NULL, NULL);
            if (fd >= 0) {
                serve(fd);
                close(fd);
            }
        }
    }
    atomic_store(&stopping, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    close(ls);
    dlock_client_close(client);
    return 0;
}
