/* Type handover: a handed hold stays the lock's until it is adopted, or, if
 * nobody adopts it, for the TTL the transfer left it (at least the watchdog
 * timeout, set by the server after the transfer was sent at t_end). Its
 * `end` (the overlap check) and its occupied span (the blocked-while-free
 * check) are set so: an intruder that got the lock in the gap overlaps it.
 *
 * An adoption refused (DLOCK_ENOTOWNER) means the hand-over was lost: a
 * violation unless a fault explains it (a restart forgot the lock, a pause
 * or a stop outlasted the TTL, a failover, the worker killed); the giver's
 * hold then counts as lost, so that an intruder after such a fault is an
 * allowed overlap. */
#include "check.h"

/* A fault of any worker's (restart, pause, failover), or of worker w's
 * (stop, partition, kill), during [a, b]. */
static int fault_during(int w, long long a, long long b)
{
    const fault *f = faults.v;
    for (size_t q = 0; q < faults.n; q++) {
        int everyone = f[q].kind == 'R' || f[q].kind == 'C' || f[q].kind == 'O';
        if (!everyone && f[q].w != w)
            continue;
        long long fb = f[q].kind == 'K' ? f[q].a : f[q].b;
        if (f[q].a <= b && fb >= a)
            return 1;
    }
    return 0;
}

/* The first adoption (S side a, or a refused one: F side a) by the giver's
 * thread after its transfer: adoptions follow their transfer in the same
 * thread, before anything else. */
static const hold *adopted_hold(const hold *g)
{
    const hold *h = holds.v, *best = NULL;
    for (size_t i = 0; i < holds.n; i++)
        if (h[i].adopted && h[i].w == g->w && h[i].t == g->t && h[i].name == g->name &&
            h[i].token == g->token && h[i].t_call >= g->t_rel &&
            (!best || h[i].t_call < best->t_call))
            best = &h[i];
    return best;
}

static const waitrec *refused_adoption(const hold *g)
{
    const waitrec *r = waits.v, *best = NULL;
    for (size_t i = 0; i < waits.n; i++)
        if (r[i].adopt && r[i].w == g->w && r[i].t == g->t && r[i].name == g->name &&
            r[i].t_call >= g->t_rel && (!best || r[i].t_call < best->t_call))
            best = &r[i];
    return best;
}

void check_handover(const check_params *cp, check_report *rep)
{
    hold *h = holds.v;
    for (size_t i = 0; i < holds.n; i++) {
        if (!h[i].handed)
            continue;
        rep->handovers++;
        const hold *a = adopted_hold(&h[i]);
        const waitrec *no = a ? NULL : refused_adoption(&h[i]);
        if (a) {
            rep->handovers_adopted++;
            h[i].held_until = a->t_acq;
            double gap = (a->t_acq - h[i].t_rel) / 1e6;
            if (gap > rep->handover_gap_max_ms)
                rep->handover_gap_max_ms = gap;
        } else {
            rep->handovers_unadopted++;
            h[i].held_until = h[i].t_end + cp->watchdog_ns;
            if (no && no->rc == DLOCK_ENOTOWNER &&
                !fault_during(h[i].w, h[i].t_end, no->t_ret) &&
                no->t_call < h[i].held_until) {
                rep->handovers_lost++;
                check_problem(rep, "hand-over lost on name %d: worker %d thread %d token %llu "
                                   "handed at %lld, its adoption refused at %lld with no fault",
                              h[i].name, h[i].w, h[i].t, h[i].token, h[i].t_rel, no->t_ret);
            }
            if (no)
                h[i].lost_at = no->t_ret;   /* whatever followed was not its holder's */
        }
        h[i].end = h[i].held_until;
    }
}
