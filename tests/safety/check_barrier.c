/* The double barrier's checks (type barrier). Every enter that returned
 * DLOCK_OK names its round; the members of a round are those enters. A
 * round never has more than N members; no member's enter returns before
 * another member of its round called enter (the round opened before the
 * N-th came); no leave returns "all gone" (DLOCK_OK) before every other
 * member of its round left, or was dropped (its own leave answered
 * DLOCK_ENOTOWNER), or was killed or stopped before it (its lease then ends
 * it). A restart of the server forgets the barrier: the rounds it cut are
 * counted apart, not checked. */
#include <stdlib.h>

#include "check.h"

typedef struct bev {
    int w, t, kind;   /* 'B' enter, 'V' leave */
    unsigned long long round;
    long long call, ret;
    int rc;
} bev;

static vec evs = {NULL, 0, 0, sizeof(bev)};

int check_barrier_line(const char *line)
{
    bev e;
    if (line[0] == 'v' && sscanf(line + 1, " %d %d %llu %lld", &e.w, &e.t, &e.round, &e.call) == 4) {
        e.kind = 'V';   /* a leave sent, not answered (its worker killed): rc unknown */
        e.ret = -1;
        e.rc = 1;
        bev *p = check_push(&evs);
        *p = e;
        return 1;
    }
    if ((line[0] != 'B' && line[0] != 'V') ||
        sscanf(line + 1, " %d %d %llu %lld %lld %d", &e.w, &e.t, &e.round, &e.call, &e.ret,
               &e.rc) != 6)
        return 0;
    e.kind = line[0];
    bev *p = check_push(&evs);
    *p = e;
    return 1;
}

void check_barrier_free(void)
{
    free(evs.v);
    evs.v = NULL;
    evs.n = evs.cap = 0;
}

/* Enters before leaves, each by round. */
static int by_kind_round(const void *a, const void *b)
{
    const bev *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->round < y->round ? -1 : x->round > y->round;
}

/* Worker w killed, or stopped, at or before t. */
static int gone_before(int w, long long t)
{
    const fault *f = faults.v;
    for (size_t q = 0; q < faults.n; q++)
        if ((f[q].kind == 'K' || f[q].kind == 'P' || f[q].kind == 'N') && f[q].w == w &&
            f[q].a <= t)
            return 1;
    return 0;
}

/* m's leave: the answered one (V), else the one sent (v: its worker killed
 * before the answer was recorded). */
static const bev *leave_of(const bev *m, const bev *v, size_t nv)
{
    const bev *sent = NULL;
    size_t lo = 0, hi = nv;   /* v is sorted by round: its first of m's round */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].round < m->round)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < nv && v[i].round == m->round; i++)
        if (v[i].w == m->w && v[i].t == m->t) {
            if (v[i].ret >= 0)
                return &v[i];
            sent = &v[i];
        }
    return sent;
}

void check_barrier(const check_params *cp, check_report *rep)
{
    bev *e = evs.v;
    if (evs.n)
        qsort(e, evs.n, sizeof(bev), by_kind_round);
    size_t nb = 0;
    while (nb < evs.n && e[nb].kind == 'B')
        nb++;
    const bev *v = e + nb;
    const size_t nv = evs.n - nb;
    for (size_t k = 0; k < nv; k++)
        rep->bar_leaves += v[k].ret >= 0;
    size_t i = 0;
    while (i < nb && (e[i].rc != DLOCK_OK || e[i].round == 0))
        i++;   /* enters that failed sort first (round 0) */
    rep->bar_enters = (long long)nb;
    while (i < nb) {
        size_t j = i;
        long long first = e[i].call, last = e[i].ret, maxcall = e[i].call;
        for (; j < nb && e[j].round == e[i].round; j++) {
            first = e[j].call < first ? e[j].call : first;
            maxcall = e[j].call > maxcall ? e[j].call : maxcall;
            const bev *l = leave_of(&e[j], v, nv);
            long long end = l && l->ret >= 0 ? l->ret : cp->run_end;
            last = end > last ? end : last;
        }
        rep->bar_rounds++;
        int reset = 0;
        const fault *f = faults.v;
        for (size_t q = 0; q < faults.n; q++)
            if (f[q].kind == 'R' && f[q].a <= last && f[q].b >= first)
                reset = 1;
        if (reset) {
            rep->bar_reset++;
            i = j;
            continue;
        }
        if ((long long)(j - i) > cp->parties) {
            rep->bar_over++;
            check_problem(rep, "barrier round %llu has %zu members, for %d parties", e[i].round,
                          j - i, cp->parties);
        }
        for (size_t m = i; m < j; m++) {
            if (e[m].ret < maxcall) {
                rep->bar_early_enter++;
                check_problem(rep, "barrier round %llu: worker %d thread %d's enter returned at "
                                   "%lld, before another member called at %lld",
                              e[m].round, e[m].w, e[m].t, e[m].ret, maxcall);
            }
            const bev *l = leave_of(&e[m], v, nv);
            if (!l || l->rc != DLOCK_OK)
                continue;
            for (size_t o = i; o < j; o++) {
                if (o == m)
                    continue;
                const bev *lo = leave_of(&e[o], v, nv);
                if (lo && (lo->call <= l->ret || lo->rc == DLOCK_ENOTOWNER))
                    continue;
                if (gone_before(e[o].w, l->ret)) {
                    rep->bar_waited_dead++;
                    continue;
                }
                rep->bar_early_leave++;
                check_problem(rep, "barrier round %llu: worker %d thread %d's leave returned "
                                   "all gone at %lld, worker %d thread %d still in (left at %lld)",
                              e[m].round, e[m].w, e[m].t, l->ret, e[o].w, e[o].t,
                              lo ? lo->call : -1LL);
            }
        }
        i = j;
    }
}
