#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct conn {
    struct conn *next;
    int cfd, sfd;
    int swallow;
    int cut;
    int done;
    int hold_reply_ms;       /* th_proxy_delay_reply_match: the next reply waits this long */
    pthread_t thr;
    th_proxy *p;
} conn;

struct th_proxy {
    int lfd, port, target;
    int stop_pipe[2];
    pthread_t acceptor;
    pthread_mutex_t mu;
    conn *conns;
    int blackhole;
    int stopping;
    char needle[128];        /* th_proxy_delay_match: "" off */
    int delay_ms, delayed, passed;
    int reply_mode;          /* the match delays the connection's next reply instead */
};

static int flag(th_proxy *p, const int *f)
{
    pthread_mutex_lock(&p->mu);
    int v = *f;
    pthread_mutex_unlock(&p->mu);
    return v;
}

static void *pump(void *arg)
{
    conn *c = arg;
    th_proxy *p = c->p;
    char buf[16384];
    for (;;) {
        if (flag(p, &c->cut) || flag(p, &p->stopping))
            break;
        if (flag(p, &p->blackhole)) {
            usleep(2000);
            continue;
        }
        struct pollfd fds[2] = {{c->cfd, POLLIN, 0}, {c->sfd, POLLIN, 0}};
        int n = poll(fds, 2, 20);
        if (n <= 0)
            continue;
        if (flag(p, &p->blackhole))
            continue;
        if (fds[0].revents) {
            ssize_t k = read(c->cfd, buf, sizeof(buf));
            if (k <= 0)
                break;
            pthread_mutex_lock(&p->mu);
            size_t nl = strlen(p->needle);
            int hold = nl > 0 && memmem(buf, (size_t)k, p->needle, nl) ? p->delay_ms : -1;
            if (hold >= 0)
                p->delayed++;
            if (hold >= 0 && p->reply_mode) {
                c->hold_reply_ms = hold;   /* only this pump reads it */
                hold = 0;
            }
            pthread_mutex_unlock(&p->mu);
            if (hold > 0)
                usleep((useconds_t)hold * 1000);
            if (write(c->sfd, buf, (size_t)k) != k)
                break;
            if (hold >= 0) {
                pthread_mutex_lock(&p->mu);
                p->passed++;
                pthread_mutex_unlock(&p->mu);
            }
        }
        if (fds[1].revents) {
            ssize_t k = read(c->sfd, buf, sizeof(buf));
            if (k <= 0)
                break;
            if (c->hold_reply_ms > 0) {
                usleep((useconds_t)c->hold_reply_ms * 1000);
                c->hold_reply_ms = 0;
            }
            if (!flag(p, &c->swallow) && write(c->cfd, buf, (size_t)k) != k)
                break;
        }
    }
    shutdown(c->cfd, SHUT_RDWR);
    shutdown(c->sfd, SHUT_RDWR);
    pthread_mutex_lock(&p->mu);
    c->done = 1;
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *acceptor(void *arg)
{
    th_proxy *p = arg;
    for (;;) {
        struct pollfd fds[2] = {{p->lfd, POLLIN, 0}, {p->stop_pipe[0], POLLIN, 0}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[1].revents)
            break;
        if (!fds[0].revents)
            continue;
        int cfd = accept(p->lfd, NULL, NULL);
        if (cfd < 0)
            continue;
        int sfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)flag(p, &p->target));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (sfd < 0 || connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(cfd);
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        conn *c = calloc(1, sizeof(*c));
        c->cfd = cfd;
        c->sfd = sfd;
        c->p = p;
        pthread_mutex_lock(&p->mu);
        c->next = p->conns;
        p->conns = c;
        pthread_mutex_unlock(&p->mu);
        pthread_create(&c->thr, NULL, pump, c);
    }
    return NULL;
}

void th_proxy_retarget(th_proxy *p, int target_port)
{
    pthread_mutex_lock(&p->mu);
    p->target = target_port;
    pthread_mutex_unlock(&p->mu);
}

th_proxy *th_proxy_start(int target_port)
{
    th_proxy *p = calloc(1, sizeof(*p));
    p->target = target_port;
    pthread_mutex_init(&p->mu, NULL);
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(p->lfd, 64) != 0 ||
        getsockname(p->lfd, (struct sockaddr *)&sa, &len) != 0 || pipe(p->stop_pipe) != 0) {
        close(p->lfd);
        free(p);
        return NULL;
    }
    p->port = ntohs(sa.sin_port);
    pthread_create(&p->acceptor, NULL, acceptor, p);
    return p;
}

int th_proxy_port(const th_proxy *p) { return p->port; }

void th_proxy_swallow_replies(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    for (conn *c = p->conns; c; c = c->next)
        c->swallow = 1;
    pthread_mutex_unlock(&p->mu);
}

void th_proxy_blackhole(th_proxy *p, int on)
{
    pthread_mutex_lock(&p->mu);
    p->blackhole = on;
    pthread_mutex_unlock(&p->mu);
}

void th_proxy_delay_match(th_proxy *p, const char *needle, int delay_ms)
{
    pthread_mutex_lock(&p->mu);
    snprintf(p->needle, sizeof(p->needle), "%s", needle ? needle : "");
    p->delay_ms = delay_ms;
    p->reply_mode = 0;
    pthread_mutex_unlock(&p->mu);
}

void th_proxy_delay_reply_match(th_proxy *p, const char *needle, int delay_ms)
{
    th_proxy_delay_match(p, needle, delay_ms);
    pthread_mutex_lock(&p->mu);
    p->reply_mode = 1;
    pthread_mutex_unlock(&p->mu);
}

int th_proxy_delayed(th_proxy *p) { return flag(p, &p->delayed); }

int th_proxy_passed(th_proxy *p) { return flag(p, &p->passed); }

void th_proxy_cut(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    for (conn *c = p->conns; c; c = c->next)
        c->cut = 1;
    pthread_mutex_unlock(&p->mu);
}

void th_proxy_stop(th_proxy *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_mutex_unlock(&p->mu);
    if (write(p->stop_pipe[1], "x", 1) != 1) {
    }
    pthread_join(p->acceptor, NULL);
    conn *c = p->conns;
    while (c) {
        conn *next = c->next;
        pthread_join(c->thr, NULL);
        close(c->cfd);
        close(c->sfd);
        free(c);
        c = next;
    }
    close(p->lfd);
    close(p->stop_pipe[0]);
    close(p->stop_pipe[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
