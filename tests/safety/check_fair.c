/* The fair lock's checks (type fair): the order of acquisition, and the dead
 * waiters that the wake-up and kill checks must allow for.
 *
 * The fair lock queues waiters in the order their first attempts reach Redis,
 * grants the lock to the head only, and never drops a live waiter (it renews
 * its place at least every half slot). So among waiters that stayed alive and
 * were not touched by a fault:
 *
 *   fair order   A wait A that began clearly before a wait B of the same name
 *                (A's W record more than fair_margin_ns before B's: the margin
 *                covers the time from the record to A's first attempt reaching
 *                Redis), by another thread, and still waiting when B began,
 *                must be served first:
 *                  - A acquired: A's token is below B's (tokens grow in the
 *                    order Redis granted them);
 *                  - A timed out (F, DLOCK_ETIMEDOUT): it stayed in the queue,
 *                    ahead of B, until its deadline (t_call + its wait; it
 *                    leaves only after that): B must not have acquired before;
 *                  - A was cancelled at the end of the run (DLOCK_ECANCELED):
 *                    likewise until the end of the run.
 *                Each such (A, B) is one check; each that fails, a violation.
 *                A timed-out wait leaves the queue: those behind it going
 *                first afterwards is no violation.
 *
 * Exempt waits (neither A nor B of any check):
 *   - waits that failed with an error: their place is unknown (an acquire
 *     whose answer was lost may have joined the queue, or taken the lock);
 *   - waits of a worker whose own fault window they overlap: SIGSTOP and
 *     partition, from the fault until recover_ns after it ends (a stopped or
 *     cut-off waiter cannot renew its place: it is dropped and queues again at
 *     the end when it comes back, which is the lock's rule for dead waiters;
 *     recover_ns covers its first calls after, which may be retried);
 *   - every wait overlapping a restart or a CLIENT PAUSE, or recover_ns after
 *     one: a restart without persistence loses the queue, so the order starts
 *     again from the waiters' next attempts; a pause holds every attempt and
 *     lets them in in an order of the server's choosing, and may drop a live
 *     head whose renewal it held past its deadline;
 *   - a thread's next wait on a name after a wait of it that was exempt and
 *     did not acquire: the earlier wait may have left its entry behind (its
 *     leave failed, or its outcome was unknown), and the thread's owner id
 *     is the same, so the next wait inherits that place.
 * A kill exempts nothing: the killed worker's waits have no outcome and its
 * dead entries are dropped from the head in turn; the live waiters keep
 * their order.
 *
 * Dead waiters ("ghosts"): a queue entry nobody renews any more delays the
 * waiters behind it by one slot at most once the lock is free (its deadline
 * is cut to now + slot then). Ghosts: the waits of a killed worker left
 * without an outcome, the waits of a stopped or cut-off worker during the
 * fault, and exempt waits that failed or timed out (their entry may remain).
 * A ghost may sit in the queue from its wait's start until GHOST_AFTER past
 * the moment it stopped being renewed (the live waiters ahead of it served,
 * a dead holder's lease run out, the ghosts ahead dropped: 3 slots + watchdog
 * + slack, generous). The blocked-while-free check allows a wait one slot per
 * ghost of its name that overlapped it; the kill check likewise. */
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "check.h"

typedef struct ghost {
    int name, w, t;
    long long a, b;
} ghost;

static vec ghosts = {0, 0, 0, sizeof(ghost)};

/* [a, b] overlaps a restart, a pause or a failover, or a SIGSTOP or
 * partition of worker w, each extended by recover_ns. */
static int affected(int w, long long a, long long b, const check_params *cp)
{
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++) {
        int global = f[i].kind == 'R' || f[i].kind == 'C' || f[i].kind == 'O';
        int own = (f[i].kind == 'P' || f[i].kind == 'N') && f[i].w == w;
        if ((global || own) && a <= f[i].b + cp->recover_ns && b >= f[i].a)
            return 1;
    }
    return 0;
}

static int outcome_known(const waitrec *r)
{
    return r->acquired || r->rc == DLOCK_ETIMEDOUT || r->rc == DLOCK_ECANCELED;
}

static void add_ghost(int name, int w, int t, long long a, long long b)
{
    ghost *g = check_push(&ghosts);
    g->name = name;
    g->w = w;
    g->t = t;
    g->a = a;
    g->b = b;
}

void check_ghosts_build(const check_params *cp)
{
    long long after = 3 * cp->slot_ns + cp->watchdog_ns + cp->free_slack_ns;   /* GHOST_AFTER */
    const callrec *c = calls.v;
    for (size_t i = 0; i < calls.n; i++) {
        if (c[i].ended)
            continue;
        long long k = check_kill_time(c[i].w);
        add_ghost(c[i].name, c[i].w, c[i].t, c[i].t_call,
                  (k >= c[i].t_call ? k : cp->run_end) + after);
    }
    const waitrec *r = waits.v;
    const fault *f = faults.v;
    for (size_t i = 0; i < waits.n; i++) {
        for (size_t q = 0; q < faults.n; q++)
            if ((f[q].kind == 'P' || f[q].kind == 'N') && f[q].w == r[i].w &&
                f[q].a < r[i].t_ret && f[q].b > r[i].t_call)
                add_ghost(r[i].name, r[i].w, r[i].t, f[q].a > r[i].t_call ? f[q].a : r[i].t_call,
                          f[q].b + after);
        if (!r[i].acquired && (!outcome_known(&r[i]) || affected(r[i].w, r[i].t_call, r[i].t_ret, cp)))
            add_ghost(r[i].name, r[i].w, r[i].t, r[i].t_call, r[i].t_ret + after);
        /* A failover may bring back a queue entry its waiter had left
         * (acquired or gone): the new primary had not heard of the leaving. */
        for (size_t q = 0; q < faults.n; q++)
            if (f[q].kind == 'O' && r[i].t_call <= f[q].b && r[i].t_ret + cp->recover_ns >= f[q].a)
                add_ghost(r[i].name, r[i].w, r[i].t, f[q].a, f[q].b + after);
    }
}

void check_ghosts_free(void)
{
    free(ghosts.v);
    ghosts.v = NULL;
    ghosts.n = ghosts.cap = 0;
}

long long check_ghosts_in(int name, int w, int t, long long a, long long b)
{
    const ghost *g = ghosts.v;
    long long n = 0;
    for (size_t i = 0; i < ghosts.n; i++)
        if (g[i].name == name && !(g[i].w == w && g[i].t == t) && g[i].a <= b && g[i].b >= a)
            n++;
    return n;
}

/* ---------------------------------------------------------- fair order */

static int by_thread(const void *x, const void *y)
{
    const waitrec *a = *(waitrec *const *)x, *b = *(waitrec *const *)y;
    if (a->w != b->w)
        return a->w - b->w;
    if (a->t != b->t)
        return a->t - b->t;
    if (a->name != b->name)
        return a->name - b->name;
    return (a->t_call > b->t_call) - (a->t_call < b->t_call);
}

static int by_call(const void *x, const void *y)
{
    const waitrec *a = *(waitrec *const *)x, *b = *(waitrec *const *)y;
    if (a->name != b->name)
        return a->name - b->name;
    return (a->t_call > b->t_call) - (a->t_call < b->t_call);
}

/* How long A stayed in the queue at least, when it did not acquire. */
static long long queued_until(const waitrec *a, const check_params *cp)
{
    if (a->rc == DLOCK_ECANCELED)
        return cp->run_end;   /* the cancellation came after the run's end */
    long long wait = a->wait_ms > 0 ? a->wait_ms * 1000000LL : cp->slot_ns;
    return a->t_call + wait - 2000000LL;   /* its deadline is in whole ms */
}

/* One check of A (clearly earlier) against B (acquired). 1 when violated. */
static int out_of_order(const waitrec *a, const waitrec *b, const check_params *cp)
{
    if (a->acquired)
        return a->token > b->token;
    return b->t_ret < queued_until(a, cp);
}

void check_fair_order(const check_params *cp, check_report *rep)
{
    size_t n = waits.n;
    waitrec **v = malloc((n ? n : 1) * sizeof(*v)), **act = malloc((n ? n : 1) * sizeof(*act));
    char *clean = calloc(n ? n : 1, 1);
    if (!v || !act || !clean)
        exit(3);
    waitrec *r = waits.v;
    for (size_t i = 0; i < n; i++)
        v[i] = &r[i];
    /* Clean waits: a known outcome, no fault window, no inherited place. */
    qsort(v, n, sizeof(*v), by_thread);
    for (size_t i = 0; i < n; i++) {
        const waitrec *x = v[i];
        int ok = outcome_known(x) && !affected(x->w, x->t_call, x->t_ret, cp);
        if (ok && i > 0) {
            const waitrec *p = v[i - 1];
            if (p->w == x->w && p->t == x->t && p->name == x->name && !p->acquired &&
                (!outcome_known(p) || affected(p->w, p->t_call, p->t_ret, cp)))
                ok = 0;
        }
        clean[x - r] = (char)ok;
        rep->fair_waits += ok;
        rep->fair_exempt += !ok;
    }
    /* Per name in call order: B against the clean waits that began clearly
     * before it and were still waiting when it began (the active set: at most
     * as many as there are waiting threads). */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (clean[&r[i] - r])
            v[m++] = &r[i];
    qsort(v, m, sizeof(*v), by_call);
    for (size_t i = 0; i < m;) {
        size_t j = i, p = i, na = 0;
        while (j < m && v[j]->name == v[i]->name)
            j++;
        for (size_t q = i; q < j; q++) {
            const waitrec *b = v[q];
            for (; p < q && v[p]->t_call < b->t_call - cp->fair_margin_ns; p++)
                act[na++] = v[p];
            size_t keep = 0;
            for (size_t k = 0; k < na; k++)
                if (act[k]->t_ret > b->t_call)
                    act[keep++] = act[k];
            na = keep;
            if (!b->acquired)
                continue;
            for (size_t k = 0; k < na; k++) {
                const waitrec *a = act[k];
                if (a->w == b->w && a->t == b->t)
                    continue;
                rep->fair_checks++;
                rep->fair_timeouts += !a->acquired;
                if (out_of_order(a, b, cp)) {
                    rep->fair_violations++;
                    check_problem(rep, "fair order on name %d: worker %d thread %d waited from "
                                       "%lld, %.1f ms before worker %d thread %d, and %s; the "
                                       "later one acquired at %lld (token %llu)",
                                  b->name, a->w, a->t, a->t_call, (b->t_call - a->t_call) / 1e6,
                                  b->w, b->t,
                                  a->acquired ? "acquired after it"
                                              : a->rc == DLOCK_ETIMEDOUT ? "timed out after it"
                                                                         : "was cancelled after it",
                                  b->t_ret, b->token);
                }
            }
            /* Inside the margin: out-of-order grants the margin forgives. */
            for (size_t k = q; k-- > i && v[k]->t_call >= b->t_call - cp->fair_margin_ns;) {
                const waitrec *a = v[k];
                if (a->acquired && a->token > b->token && a->t_call < b->t_call &&
                    !(a->w == b->w && a->t == b->t)) {
                    rep->fair_close++;
                    double ms = (b->t_call - a->t_call) / 1e6;
                    if (ms > rep->worst_close_ms)
                        rep->worst_close_ms = ms;
                }
            }
        }
        i = j;
    }
    free(v);
    free(act);
    free(clean);
}
