/* A libuv TCP server that takes a distributed lock per request, without a
 * thread per request: the asynchronous API (dlock/async.h).
 *
 *   example_async_server URL [PORT]      serve: each line "NAME" takes the
 *                                        lock NAME, holds it 50 ms (the
 *                                        "work"), releases it and answers
 *                                        "done NAME token T"
 *   example_async_server URL --selftest N   serve on a free port and send N
 *                                        requests for one name at once from
 *                                        the same loop; check that the holds
 *                                        never overlapped and every request
 *                                        was answered; exit 0 when so
 *
 * Threads: the server's loop runs on main(); dlock's callbacks run on
 * dlock's io thread, so each completion is handed back to the loop through
 * a queue and a uv_async_t. Each request acts for its own owner id
 * (dlock_client_new_owner_id): its work moves between callbacks, not
 * threads. */
/* POSIX calls (nanosleep, pthreads, sockets) under plain cc -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <dlock/async.h>

#include "common.h"

#define HOLD_MS 50

typedef struct request {
    struct request *next;    /* in the completion queue */
    uv_tcp_t conn;
    char line[200];
    size_t len;
    dlock_lock *lock;
    uv_timer_t work;
    int stage;               /* 1: acquire answered, 2: release answered */
    int status;
    uint64_t token;
    char msg[200];
} request;

static dlock_client *client;
static uv_loop_t *loop;
static uv_async_t wake;
static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static request *queue;

/* Self-test bookkeeping (loop thread only). */
static int inside, overlaps, answered, expected;
static uv_tcp_t server;

/* ------------------------------------------ from dlock's io thread */

/* Callbacks run on dlock's io thread: note the outcome, hand it to the loop. */
static void handoff(request *r, const dlock_async_result *res, int stage)
{
    r->stage = stage;
    r->status = dlock_async_status(res);
    r->token = stage == 1 ? dlock_async_token(res) : r->token;
    snprintf(r->msg, sizeof(r->msg), "%s", dlock_async_message(res));
    pthread_mutex_lock(&qmu);
    r->next = queue;
    queue = r;
    pthread_mutex_unlock(&qmu);
    uv_async_send(&wake);
}

static void on_acquired(const dlock_async_result *res, void *ud) { handoff(ud, res, 1); }
static void on_released(const dlock_async_result *res, void *ud) { handoff(ud, res, 2); }

/* ------------------------------------------------- on the loop */

static void on_closed(uv_handle_t *h)
{
    request *r = h->data;
    dlock_lock_free(r->lock);   /* no call of it is pending any more */
    free(r);
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    request *r = w->data;
    free(w);
    uv_close((uv_handle_t *)&r->conn, on_closed);
}

static void reply(request *r, const char *text)
{
    uv_write_t *w = malloc(sizeof(*w) + strlen(text) + 1);
    char *copy = (char *)(w + 1);
    strcpy(copy, text);
    w->data = r;
    uv_buf_t b = uv_buf_init(copy, (unsigned)strlen(copy));
    uv_write(w, (uv_stream_t *)&r->conn, &b, 1, on_written);
}

static void on_work_timer_closed(uv_handle_t *h) { (void)h; }

static void work_done(uv_timer_t *t)
{
    request *r = t->data;
    inside--;
    uv_close((uv_handle_t *)&r->work, on_work_timer_closed);
    if (dlock_lock_release_async(r->lock, on_released, r) != DLOCK_OK) {
        char text[300];
        snprintf(text, sizeof(text), "error release: %s\n", dlock_last_error());
        reply(r, text);
    }
}

static void on_wake(uv_async_t *a)
{
    (void)a;
    pthread_mutex_lock(&qmu);
    request *list = queue;
    queue = NULL;
    pthread_mutex_unlock(&qmu);
    while (list) {
        request *r = list;
        list = r->next;
        char text[400];
        if (r->status != DLOCK_OK) {
            snprintf(text, sizeof(text), "error %s: %s\n", dlock_errname(r->status), r->msg);
            reply(r, text);
        } else if (r->stage == 1) {
            /* Held: do the work (here, wait HOLD_MS on the loop). */
            if (++inside > 1)
                overlaps++;
            uv_timer_init(loop, &r->work);
            r->work.data = r;
            uv_timer_start(&r->work, work_done, HOLD_MS, 0);
        } else {
            snprintf(text, sizeof(text), "done %s token %llu\n", r->line,
                     (unsigned long long)r->token);
            reply(r, text);
        }
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    request *r = h->data;
    *buf = uv_buf_init(r->line + r->len, (unsigned)(sizeof(r->line) - 1 - r->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    request *r = s->data;
    if (n < 0) {
        uv_close((uv_handle_t *)&r->conn, on_closed);
        return;
    }
    r->len += (size_t)n;
    r->line[r->len] = '\0';
    char *nl = strchr(r->line, '\n');
    if (!nl && r->len < sizeof(r->line) - 1)
        return;
    if (nl)
        *nl = '\0';
    uv_read_stop(s);
    char owner[DLOCK_OWNER_BUFSIZE];
    int rc = dlock_client_new_owner_id(client, owner, sizeof(owner));
    if (rc == DLOCK_OK)
        rc = dlock_lock_get_as(client, r->line, owner, &r->lock);
    if (rc == DLOCK_OK)
        rc =
            dlock_lock_acquire_async(r->lock, &(dlock_wait_opts){.wait_ms = 10000}, on_acquired, r);
    if (rc != DLOCK_OK) {
        char text[300];
        snprintf(text, sizeof(text), "error %s: %s\n", dlock_errname(rc), dlock_last_error());
        reply(r, text);
    }
}

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0)
        return;
    request *r = calloc(1, sizeof(*r));
    uv_tcp_init(loop, &r->conn);
    r->conn.data = r;
    if (uv_accept(srv, (uv_stream_t *)&r->conn) != 0) {
        uv_close((uv_handle_t *)&r->conn, on_closed);
        return;
    }
    uv_read_start((uv_stream_t *)&r->conn, on_alloc, on_read);
}

/* ------------------------------------------------------ self-test */

typedef struct probe {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    char buf[300];
    size_t len;
} probe;

static void on_probe_closed(uv_handle_t *h) { free(h->data); }

static void stop_all(void)
{
    uv_close((uv_handle_t *)&server, NULL);
    uv_close((uv_handle_t *)&wake, NULL);
}

static void probe_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    probe *p = h->data;
    *buf = uv_buf_init(p->buf + p->len, (unsigned)(sizeof(p->buf) - 1 - p->len));
}

static void probe_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    probe *p = s->data;
    if (n > 0) {
        p->len += (size_t)n;
        return;
    }
    p->buf[p->len] = '\0';
    if (strncmp(p->buf, "done ", 5) == 0)
        answered++;
    else
        fprintf(stderr, "unexpected answer: %s", p->buf);
    uv_close((uv_handle_t *)&p->tcp, on_probe_closed);
    if (answered == expected)
        stop_all();
}

static void probe_connected(uv_connect_t *c, int status)
{
    probe *p = c->data;
    if (status < 0) {
        fprintf(stderr, "connect: %s\n", uv_strerror(status));
        uv_close((uv_handle_t *)&p->tcp, on_probe_closed);
        return;
    }
    static char line[] = "example:async-server\n";
    uv_buf_t b = uv_buf_init(line, sizeof(line) - 1);
    uv_write(&p->wreq, (uv_stream_t *)&p->tcp, &b, 1, NULL);
    uv_read_start((uv_stream_t *)&p->tcp, probe_alloc, probe_read);
}

static void start_probes(int port, int n)
{
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", port, &addr);
    for (int i = 0; i < n; i++) {
        probe *p = calloc(1, sizeof(*p));
        uv_tcp_init(loop, &p->tcp);
        p->tcp.data = p;
        p->creq.data = p;
        uv_tcp_connect(&p->creq, &p->tcp, (const struct sockaddr *)&addr, probe_connected);
    }
}

int main(int argc, char **argv)
{
    int selftest = argc > 3 && strcmp(argv[2], "--selftest") == 0 ? atoi(argv[3]) : 0;
    int port = argc > 2 && !selftest ? atoi(argv[2]) : 0;
    client = example_open(argc, argv, 0);
    loop = uv_default_loop();
    uv_async_init(loop, &wake, on_wake);
    uv_tcp_init(loop, &server);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", port ? port : 7070, &addr);
    if (selftest)
        uv_ip4_addr("127.0.0.1", 0, &addr);
    int rc = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&server, 128, on_connection);
    if (rc != 0) {
        fprintf(stderr, "listen: %s\n", uv_strerror(rc));
        return 1;
    }
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &blen);
    int bport = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    if (selftest) {
        expected = selftest;
        start_probes(bport, selftest);
        printf("%d requests for one lock, each holding it %d ms\n", selftest, HOLD_MS);
    } else {
        printf("listening on 127.0.0.1:%d; send a lock name per connection, e.g. "
               "`echo orders | nc 127.0.0.1 %d`\n",
               bport, bport);
    }
    fflush(stdout);
    uv_run(loop, UV_RUN_DEFAULT);
    dlock_client_close(client);
    if (selftest) {
        printf("answered %d of %d, overlapping holds: %d\n", answered, expected, overlaps);
        return answered == expected && overlaps == 0 ? 0 : 1;
    }
    return 0;
}
