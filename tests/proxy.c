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
    char carry[64];          /* the start of a reply that may be a TIME answer, cut short */
    size_t ncarry;
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
    long long shift_us;      /* th_proxy_shift_time */
    int times;
};

/* A TIME answer at s (n bytes): its length, with *us the time it says; 0
 * when s is not one; -1 when s may be one, cut short. */
static int time_answer(const char *s, size_t n, long long *us)
{
    static const char head[] = "*2\r\n$10\r\n";
    const size_t hl = sizeof(head) - 1;
    if (memcmp(s, head, n < hl ? n : hl) != 0)
        return 0;
    size_t i = hl;
    long long sec = 0, usec = 0;
    for (; i < hl + 10; i++) {
        if (i >= n)
            return -1;
        if (s[i] < '0' || s[i] > '9')
            return 0;
        sec = sec * 10 + (s[i] - '0');
    }
    const char *mid = "\r\n$";
    for (int k = 0; k < 3; i++, k++) {
        if (i >= n)
            return -1;
        if (s[i] != mid[k])
            return 0;
    }
    if (i >= n)
        return -1;
    int d = s[i++] - '0';
    if (d < 1 || d > 6)
        return 0;
    for (int k = 0; k < 2; i++, k++) {
        if (i >= n)
            return -1;
        if (s[i] != "\r\n"[k])
            return 0;
    }
    for (int k = 0; k < d; i++, k++) {
        if (i >= n)
            return -1;
        if (s[i] < '0' || s[i] > '9')
            return 0;
        usec = usec * 10 + (s[i] - '0');
    }
    for (int k = 0; k < 2; i++, k++) {
        if (i >= n)
            return -1;
        if (s[i] != "\r\n"[k])
            return 0;
    }
    *us = sec * 1000000 + usec;
    return (int)i;
}

/* Copies the server's bytes in (n) to out with each TIME answer moved by
 * the shift; a possible answer cut short at the end stays in c->carry for
 * the next read. Returns the bytes written to out. */
static size_t shift_times(conn *c, const char *in, size_t n, char *out)
{
    th_proxy *p = c->p;
    pthread_mutex_lock(&p->mu);
    const int shifting = p->shift_us != 0;
    pthread_mutex_unlock(&p->mu);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        long long us;
        int len = in[i] == '*' ? time_answer(in + i, n - i, &us) : 0;
        /* Held back only while answers are moved: unshifted, the bytes
         * pass as they came (an answer cut short is not counted). */
        if (len < 0 && shifting && n - i < sizeof(c->carry)) {
            memcpy(c->carry, in + i, n - i);
            c->ncarry = n - i;
            return o;
        }
        if (len <= 0) {
            out[o++] = in[i++];
            continue;
        }
        pthread_mutex_lock(&p->mu);
        us += p->shift_us;
        p->times++;
        pthread_mutex_unlock(&p->mu);
        char usec[8];
        int ul = snprintf(usec, sizeof(usec), "%lld", us % 1000000);
        o += (size_t)sprintf(out + o, "*2\r\n$10\r\n%010lld\r\n$%d\r\n%s\r\n", us / 1000000,
                             ul, usec);
        i += (size_t)len;
    }
    return o;
}

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
    char buf[2 * 16384];     /* room for a chunk whose TIME answers grew */
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
            char in[16384 + sizeof(c->carry)];
            memcpy(in, c->carry, c->ncarry);
            ssize_t r = read(c->sfd, in + c->ncarry, 16384);
            if (r <= 0)
                break;
            size_t got = c->ncarry + (size_t)r;
            c->ncarry = 0;
            /* An answer moved is as long as it was, give or take a few
             * microseconds' digits. */
            ssize_t k = (ssize_t)shift_times(c, in, got, buf);
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

void th_proxy_shift_time(th_proxy *p, long long shift_us)
{
    pthread_mutex_lock(&p->mu);
    p->shift_us = shift_us;
    pthread_mutex_unlock(&p->mu);
}

int th_proxy_times(th_proxy *p) { return flag(p, &p->times); }

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
