/* The checker for types sem and latch.
 *
 * sem (each hold is one permit of a name, SAFETY_SEM_PERMITS per name):
 *   too many     at some instant more holds of a name than the limit were in
 *                progress, counting only holds not lost (a hold lost while its
 *                holder was stopped, cut off or across a restart may overlap:
 *                allowed, and counted apart). Hold intervals are [acquire
 *                returned, release called]: inside them Redis had granted the
 *                permit, so a client-side excess is a server-side one
 *   blocked      a worker waited blocked_ns while fewer than the limit were
 *                occupied. Occupied: holds in progress; a killed worker's
 *                holds until its death + watchdog + free_slack (the permit
 *                must be back by then); acquires of unknown outcome; restarts
 *                and pauses (and a second after them)
 *   permit back  (expectation) each permit a killed worker held was back in
 *                the pool within watchdog + free_slack of the kill (X
 *                records, timed by the coordinator against Redis)
 * latch:
 *   early        an awaiter returned DLOCK_OK before the latch's count could
 *                have reached zero: before the count-th count-down of its
 *                round was sent (d records), or with fewer sent. A restart of
 *                the lock server (no persistence) forgets the latch, which
 *                then reads as zero: an await that returns after a restart
 *                that came after its round's latch was set is excused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct sem_ev {
    long long t;
    int d;   /* +1 / -1 */
    int lost;
} sem_ev;

typedef struct xrec {
    int w, name;
    long long t_kill, t_back;
} xrec;

typedef struct lrec {
    char kind;   /* L d D A */
    int w, t, rc, count;
    long long round, a, b;
} lrec;

static vec xs = {0, 0, 0, sizeof(xrec)}, ls = {0, 0, 0, sizeof(lrec)};

int check_sem_line(const char *line)
{
    lrec l;
    memset(&l, 0, sizeof(l));
    switch (line[0]) {
    case 'X': {
        xrec x;
        if (sscanf(line, "X %d %d %lld %lld", &x.w, &x.name, &x.t_kill, &x.t_back) == 4)
            *(xrec *)check_push(&xs) = x;
        return 1;
    }
    case 'L':
        l.kind = 'L';
        if (sscanf(line, "L %lld %lld %d", &l.round, &l.a, &l.count) == 3)
            *(lrec *)check_push(&ls) = l;
        return 1;
    case 'd':
        l.kind = 'd';
        if (sscanf(line, "d %d %d %lld %lld", &l.w, &l.t, &l.round, &l.a) == 4)
            *(lrec *)check_push(&ls) = l;
        return 1;
    case 'D':
    case 'A':
        l.kind = line[0];
        if (sscanf(line + 2, "%d %d %lld %lld %lld %d", &l.w, &l.t, &l.round, &l.a, &l.b,
                   &l.rc) == 6)
            *(lrec *)check_push(&ls) = l;
        return 1;
    default:
        return 0;
    }
}

static int by_t(const void *x, const void *y)
{
    const sem_ev *a = x, *b = y;
    if (a->t != b->t)
        return (a->t > b->t) - (a->t < b->t);
    return a->d - b->d;   /* a release before an acquire at the same instant */
}

/* Events of name k: +1/-1 per interval. lost marks the holds that may exceed
 * the limit. */
static void push_span(vec *ev, long long a, long long b, int lost)
{
    if (b < a)
        b = a;
    sem_ev *e = check_push(ev);
    e->t = a;
    e->d = 1;
    e->lost = lost;
    e = check_push(ev);
    e->t = b;
    e->d = -1;
    e->lost = lost;
}

/* Permits in use never above the limit (holds not lost). */
static void sem_in_use(const check_params *cp, check_report *rep, int k)
{
    vec ev = {0, 0, 0, sizeof(sem_ev)};
    const hold *h = holds.v;
    for (size_t i = 0; i < holds.n; i++)
        if (h[i].name == k)
            push_span(&ev, h[i].t_acq, h[i].end, check_lost(&h[i]));
    sem_ev *e = ev.v;
    if (ev.n)
        qsort(e, ev.n, sizeof(sem_ev), by_t);
    long long all = 0, kept = 0;
    int excess = 0;
    for (size_t i = 0; i < ev.n; i++) {
        all += e[i].d;
        kept += e[i].lost ? 0 : e[i].d;
        if (kept > rep->sem_max_in_use)
            rep->sem_max_in_use = kept;
        if (kept > cp->permits && !excess) {
            rep->overlaps++;
            check_problem(rep, "name %d: %lld permits in use at %lld, none of them lost (limit %d)",
                          k, kept, e[i].t, cp->permits);
        } else if (all > cp->permits && e[i].d > 0 && kept <= cp->permits) {
            rep->allowed_overlaps++;
        }
        excess = kept > cp->permits;
    }
    free(ev.v);
}

/* Longest time in [a, b] during which fewer than `limit` were occupied. */
static long long longest_under(const sem_ev *e, size_t n, int limit, long long a, long long b)
{
    long long occ = 0, best = 0, free_since = -1;
    size_t i = 0;
    for (; i < n && e[i].t <= a; i++)
        occ += e[i].d;
    if (occ < limit)
        free_since = a;
    for (; i < n && e[i].t < b; i++) {
        occ += e[i].d;
        if (occ < limit && free_since < 0) {
            free_since = e[i].t;
        } else if (occ >= limit && free_since >= 0) {
            if (e[i].t - free_since > best)
                best = e[i].t - free_since;
            free_since = -1;
        }
    }
    if (free_since >= 0 && b - free_since > best)
        best = b - free_since;
    return best;
}

/* Nobody waits long while a permit is there for it. */
static void sem_blocked(const check_params *cp, check_report *rep, int k)
{
    vec ev = {0, 0, 0, sizeof(sem_ev)};
    const hold *h = holds.v;
    for (size_t i = 0; i < holds.n; i++) {
        if (h[i].name != k)
            continue;
        long long b;
        if (h[i].ended) {
            b = h[i].t_rel;
        } else {
            long long kt = check_kill_time(h[i].w);
            b = (kt >= 0 ? kt : cp->run_end) + cp->watchdog_ns + cp->free_slack_ns;
        }
        push_span(&ev, h[i].t_acq, b, 0);
    }
    const waitrec *wr = waits.v;
    for (size_t i = 0; i < waits.n; i++)
        if (wr[i].name == k && !wr[i].acquired && wr[i].rc != DLOCK_ETIMEDOUT &&
            wr[i].rc != DLOCK_ECANCELED)   /* it may have taken a permit without knowing */
            push_span(&ev, wr[i].t_call, wr[i].t_ret + cp->watchdog_ns, 0);
    /* Waits never answered (the waiter was killed) may have taken one too. */
    const callrec *c = calls.v;
    for (size_t i = 0; i < calls.n; i++)
        if (c[i].name == k && !c[i].ended) {
            long long kt = check_kill_time(c[i].w);
            if (kt >= c[i].t_call)
                push_span(&ev, c[i].t_call, kt + cp->watchdog_ns + cp->free_slack_ns, 0);
        }
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if (f[i].kind == 'R' || f[i].kind == 'C' || f[i].kind == 'O')
            for (int p = 0; p < cp->permits; p++)   /* the whole pool, and a second */
                push_span(&ev, f[i].a, f[i].b + 1000000000LL, 0);
    sem_ev *e = ev.v;
    if (ev.n)
        qsort(e, ev.n, sizeof(sem_ev), by_t);
    for (size_t i = 0; i < waits.n; i++) {
        if (wr[i].name != k || wr[i].rc == DLOCK_ECANCELED)
            continue;
        int skip = 0;   /* a worker stopped or cut off is not expected to wake */
        for (size_t q = 0; q < faults.n; q++)
            if ((f[q].kind == 'P' || f[q].kind == 'N') && f[q].w == wr[i].w &&
                f[q].a < wr[i].t_ret && f[q].b > wr[i].t_call)
                skip = 1;
        if (skip)
            continue;
        long long idle = longest_under(e, ev.n, cp->permits, wr[i].t_call, wr[i].t_ret);
        if (idle > cp->blocked_ns) {
            rep->blocked++;
            check_problem(rep, "worker %d waited for a permit of name %d %.0f ms while one was "
                               "free",
                          wr[i].w, k, idle / 1e6);
        }
    }
    free(ev.v);
}

void check_sem(const check_params *cp, check_report *rep)
{
    for (int k = 0; k < cp->names; k++) {
        sem_in_use(cp, rep, k);
        sem_blocked(cp, rep, k);
    }
    const xrec *x = xs.v;
    for (size_t i = 0; i < xs.n; i++) {
        double ms = x[i].t_back < 0 ? -1 : (x[i].t_back - x[i].t_kill) / 1e6;
        rep->sem_permits_back++;
        if (ms > rep->sem_worst_back_ms)
            rep->sem_worst_back_ms = ms;
        if (ms < 0 || x[i].t_back - x[i].t_kill > cp->watchdog_ns + cp->free_slack_ns) {
            rep->sem_back_late++;
            rep->expectation_failures++;
            check_problem(rep, "killed worker %d's permit of name %d back after %s%.0f ms "
                               "(watchdog %.0f ms + %.0f ms)",
                          x[i].w, x[i].name, ms < 0 ? "more than " : "", ms < 0 ? 10000 : ms,
                          cp->watchdog_ns / 1e6, cp->free_slack_ns / 1e6);
        }
    }
}

void check_latch(const check_params *cp, check_report *rep)
{
    (void)cp;
    const lrec *l = ls.v;
    const fault *f = faults.v;
    for (size_t q = 0; q < faults.n; q++) {   /* counted here: check.c's are about holds */
        rep->kills += f[q].kind == 'K';
        rep->stops += f[q].kind == 'P';
        rep->restarts += f[q].kind == 'R';
        rep->pauses += f[q].kind == 'C';
        rep->partitions += f[q].kind == 'N';
        rep->failovers += f[q].kind == 'O';
    }
    for (size_t i = 0; i < ls.n; i++) {
        if (l[i].kind == 'L')
            rep->latch_rounds++;
        if (l[i].kind == 'd')
            rep->latch_countdowns++;
        if (l[i].kind != 'A')
            continue;
        rep->latch_awaits++;
        rep->latch_timeouts += l[i].rc == DLOCK_ETIMEDOUT;
        if (l[i].rc != DLOCK_OK)
            continue;
        rep->latch_released++;
        /* The round's count, when it was set, and its count-downs' sends. */
        long long set_at = -1, sent[SAFETY_MAX_WORKERS * SAFETY_MAX_THREADS];
        int count = 0, nsent = 0;
        for (size_t j = 0; j < ls.n; j++) {
            if (l[j].round != l[i].round)
                continue;
            if (l[j].kind == 'L') {
                set_at = l[j].a;
                count = l[j].count;
            } else if (l[j].kind == 'd' && nsent < (int)(sizeof(sent) / sizeof(sent[0]))) {
                sent[nsent++] = l[j].a;
            }
        }
        /* The count-th send, in time order (a small selection). */
        long long zero_at = -1;
        if (count > 0 && nsent >= count) {
            for (int a = 0; a < count; a++)
                for (int b = a + 1; b < nsent; b++)
                    if (sent[b] < sent[a]) {
                        long long tmp = sent[a];
                        sent[a] = sent[b];
                        sent[b] = tmp;
                    }
            zero_at = sent[count - 1];
        }
        if (zero_at >= 0 && l[i].b >= zero_at)
            continue;
        int reset = 0;
        for (size_t q = 0; q < faults.n; q++)
            if (f[q].kind == 'R' && f[q].a >= set_at && f[q].a <= l[i].b)
                reset = 1;
        if (reset) {
            rep->latch_reset++;
            continue;
        }
        rep->latch_early++;
        check_problem(rep, "worker %d's await of latch round %lld returned at %lld, before the "
                           "count could reach zero (%d count-downs sent of %d%s)",
                      l[i].w, l[i].round, l[i].b, nsent, count,
                      zero_at >= 0 ? ", the last one later" : "");
    }
}


void check_sem_free(void)
{
    free(xs.v);
    free(ls.v);
    xs.v = ls.v = NULL;
    xs.n = xs.cap = ls.n = ls.cap = 0;
}
