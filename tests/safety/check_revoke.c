/* Type revoke's checks beside the lock's: requests (Q records) against the
 * holds that heard them (Y records). A request that found a holder and a
 * listener must be heard by a holder that kept the lock well past the
 * request's answer (its handler runs when the request's message arrives,
 * which is about when the answer does), unless a fault of the server's, or
 * of that holder's worker, fell in between. The latency from a request's
 * send to a handler is reported (the request just before the hearing, on
 * the same name). */
#include <stdlib.h>

#include "check.h"

typedef struct rq {
    int w, name, rc, holders, listeners;
    long long sent, ret;
} rq;

typedef struct heard {
    int w, t, name;
    unsigned long long token;
    long long at;
} heard;

static vec rqs = {NULL, 0, 0, sizeof(rq)}, hs = {NULL, 0, 0, sizeof(heard)};

int check_revoke_line(const char *line)
{
    if (line[0] == 'Q') {
        rq q;
        if (sscanf(line, "Q %d %d %lld %lld %d %d %d", &q.w, &q.name, &q.sent, &q.ret, &q.rc,
                   &q.holders, &q.listeners) != 7)
            return 0;
        rq *p = check_push(&rqs);
        *p = q;
        return 1;
    }
    if (line[0] == 'Y') {
        heard y;
        if (sscanf(line, "Y %d %d %d %llu %lld", &y.w, &y.t, &y.name, &y.token, &y.at) != 5)
            return 0;
        heard *p = check_push(&hs);
        *p = y;
        return 1;
    }
    return 0;
}

void check_revoke_free(void)
{
    free(rqs.v);
    free(hs.v);
    rqs.v = hs.v = NULL;
    rqs.n = rqs.cap = hs.n = hs.cap = 0;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A fault of the server's (restart, pause, failover), or of worker w's,
 * during [a, b]. */
static int fault_near(int w, long long a, long long b)
{
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++) {
        int all = f[i].kind == 'R' || f[i].kind == 'C' || f[i].kind == 'O';
        long long fb = f[i].kind == 'K' ? f[i].a : f[i].b;
        if ((all || f[i].w == w) && f[i].a <= b && fb >= a)
            return 1;
    }
    return 0;
}

static const heard *heard_by(const hold *h)
{
    const heard *y = hs.v;
    for (size_t i = 0; i < hs.n; i++)
        if (y[i].w == h->w && y[i].t == h->t && y[i].name == h->name && y[i].token == h->token)
            return &y[i];
    return NULL;
}

void check_revoke(const check_params *cp, check_report *rep)
{
    const rq *q = rqs.v;
    const heard *y = hs.v;
    const hold *h = holds.v;
    const long long margin = cp->revoke_margin_ns;
    rep->rv_heard = (long long)hs.n;
    for (size_t i = 0; i < rqs.n; i++) {
        rep->rv_requests++;
        if (q[i].rc != DLOCK_OK || q[i].holders == 0)
            continue;
        rep->rv_held++;
        if (q[i].listeners == 0)
            continue;
        rep->rv_listened++;
        for (size_t j = 0; j < holds.n; j++) {
            if (h[j].name != q[i].name || h[j].t_acq > q[i].sent || !h[j].ended ||
                h[j].t_end < q[i].ret + margin || heard_by(&h[j]))
                continue;
            if (fault_near(h[j].w, q[i].sent, q[i].ret + margin) || check_lost(&h[j]))
                continue;
            rep->rv_unheard++;
            rep->expectation_failures++;
            check_problem(rep, "revoke request on name %d (sent %lld, answered %lld: %d holders, "
                               "%d listeners) not heard by worker %d thread %d, which held it "
                               "from %lld to %lld",
                          q[i].name, q[i].sent, q[i].ret, q[i].holders, q[i].listeners, h[j].w,
                          h[j].t, h[j].t_acq, h[j].t_end);
        }
    }
    double *lat = malloc((hs.n + 1) * sizeof(double));
    size_t n = 0;
    for (size_t j = 0; lat && j < hs.n; j++) {
        const rq *best = NULL;
        for (size_t i = 0; i < rqs.n; i++)
            if (q[i].name == y[j].name && q[i].sent <= y[j].at && q[i].holders > 0 &&
                (!best || q[i].sent > best->sent))
                best = &q[i];
        if (best)
            lat[n++] = (y[j].at - best->sent) / 1e6;
    }
    if (n) {
        qsort(lat, n, sizeof(double), by_double);
        rep->rv_p50_ms = lat[n / 2];
        rep->rv_max_ms = lat[n - 1];
    }
    free(lat);
}
