/* The read-write lock's exclusion and token rules (type rw): a write hold
 * excludes every other hold of its name, read holds share; tokens grow in the
 * order Redis granted them, which concurrent readers' returns do not show. */
#include <stdlib.h>

#include "check.h"

/* Type rw: when the lock became free for o after worker w was killed at
 * `kill`: the last release, before o, of a live hold that excluded o (other
 * readers may keep a writer out after a dead reader's hold expired). */
long long check_rw_free_for(const hold *o, int w, long long kill)
{
    const hold *h = holds.v;
    long long from = kill;
    for (size_t i = 0; i < holds.n; i++)
        if (h[i].name == o->name && h[i].w != w && &h[i] != o && h[i].ended &&
            h[i].t_acq < o->t_acq && h[i].t_rel <= o->t_acq && h[i].t_rel > from &&
            check_conflicts(h[i].side, o->side))
            from = h[i].t_rel;
    return from;
}

/* Type rw: a write hold excludes every other hold of its name, read holds
 * share. One sweep per name in acquisition order, keeping the hold that ends
 * last so far among all holds and among write holds, and the same among
 * holds not lost. */
void check_rw_exclusion(check_report *rep)
{
    hold *h = holds.v;
    for (size_t i = 0; i < holds.n;) {
        size_t j = i;
        const hold *any = NULL, *any_ok = NULL, *wr = NULL, *wr_ok = NULL, *rd = NULL;
        for (; j < holds.n && h[j].name == h[i].name; j++) {
            const hold *x = &h[j];
            const hold *all = x->side == 'r' ? wr : any, *ok = x->side == 'r' ? wr_ok : any_ok;
            if (!check_lost(x) && ok && x->t_acq < ok->end) {
                rep->overlaps++;
                check_problem(rep, "overlap on name %d: worker %d %c token %llu [%lld..%lld] and "
                                   "worker %d %c token %llu from %lld, neither lost",
                              x->name, ok->w, ok->side, ok->token, ok->t_acq, ok->end, x->w,
                              x->side, x->token, x->t_acq);
            } else if (all && x->t_acq < all->end) {
                rep->allowed_overlaps++;
            }
            if (x->side == 'r' && rd && x->t_acq < rd->end)
                rep->read_overlaps++;   /* readers did share */
#define LATER(p) \
    if (!(p) || x->end > (p)->end) \
        (p) = x
            LATER(any);
            if (!check_lost(x))
                LATER(any_ok);
            if (x->side != 'r') {
                LATER(wr);
                if (!check_lost(x))
                    LATER(wr_ok);
            } else {
                LATER(rd);
            }
#undef LATER
        }
        i = j;
    }
}

static int by_call_ptr(const void *x, const void *y)
{
    const hold *a = *(hold *const *)x, *b = *(hold *const *)y;
    return (a->t_call > b->t_call) - (a->t_call < b->t_call);
}

/* Type rw: a hold whose acquire returned before another's began was granted
 * first, so has the lower token. Per name, holds by call time against the
 * highest token of holds returned before. */
void check_rw_tokens(check_report *rep)
{
    hold *h = holds.v;
    hold **by_call = malloc((holds.n ? holds.n : 1) * sizeof(*by_call));
    if (!by_call)
        exit(3);
    for (size_t i = 0; i < holds.n;) {
        size_t j = i, m = 0;
        for (; j < holds.n && h[j].name == h[i].name; j++)
            by_call[m++] = &h[j];
        qsort(by_call, m, sizeof(*by_call), by_call_ptr);
        const hold *top = NULL;
        size_t p = i;
        for (size_t q = 0; q < m; q++) {
            for (; p < j && h[p].t_acq < by_call[q]->t_call; p++)
                if (!top || h[p].token > top->token)
                    top = &h[p];
            if (top && top->token >= by_call[q]->token) {
                rep->token_regressions++;
                check_problem(rep, "token regression on name %d: %llu (called %lld) after %llu "
                                   "(returned %lld)",
                              h[i].name, by_call[q]->token, by_call[q]->t_call, top->token,
                              top->t_acq);
            }
        }
        i = j;
    }
    free(by_call);
}

/* 1 when a fault that lets an intent lapse or forgets it overlaps [a, b]: a
 * restart, a pause of Redis or a failover (for anyone), a SIGSTOP or a
 * partition of worker w (its renewals stop). */
static int intent_fault(int w, long long a, long long b)
{
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++) {
        int any = f[i].kind == 'R' || f[i].kind == 'C' || f[i].kind == 'O';
        int own = (f[i].kind == 'P' || f[i].kind == 'N') && f[i].w == w;
        if ((any || own) && f[i].a <= b && f[i].b >= a)
            return 1;
    }
    return 0;
}

/* Type rw: once a writer waits, no read hold begins before it acquires. For
 * each write wait that acquired with no fault around it: a read hold of
 * another thread that was called more than free_slack after the writer's
 * call (wf_margin: its first attempt, which records the intent, is sent by
 * then) and
 * returned before the writer's acquisition returned was granted past the
 * waiting writer (its script ran before the writer's: after it, the write
 * hold keeps it out until the release). Writer-first: a violation; without
 * it, what Redisson's rules allow, counted. */
void check_rw_writer_first(const check_params *cp, check_report *rep)
{
    const waitrec *wr = waits.v;
    const hold *h = holds.v;
    for (size_t i = 0; i < waits.n; i++) {
        if (wr[i].side != 'w' || !wr[i].acquired ||
            intent_fault(wr[i].w, wr[i].t_call, wr[i].t_ret))
            continue;
        long long from = wr[i].t_call + cp->wf_margin_ns;
        if (wr[i].t_ret <= from)
            continue;   /* no read could be called past it: nothing to check */
        int readers = 0;
        long long admitted = 0;
        for (size_t j = 0; j < holds.n; j++) {
            if (h[j].name != wr[i].name || h[j].side != 'r' ||
                (h[j].w == wr[i].w && h[j].t == wr[i].t))
                continue;
            long long end = h[j].ended ? h[j].t_rel : cp->run_end;
            readers |= h[j].t_acq <= from && end > from;
            if (h[j].t_call > from && h[j].t_acq < wr[i].t_ret) {
                admitted++;
                if (cp->writer_first && rep->wf_violations == 0)
                    check_problem(rep, "name %d: worker %d's read hold (called %lld) began "
                                       "while worker %d's writer waited (called %lld, acquired "
                                       "%lld)",
                                  wr[i].name, h[j].w, h[j].t_call, wr[i].w, wr[i].t_call,
                                  wr[i].t_ret);
                if (cp->writer_first)
                    rep->wf_violations++;
            }
        }
        if (!readers)
            continue;
        rep->wf_waits++;
        rep->wf_admitted += admitted;
        double ms = (double)(wr[i].t_ret - wr[i].t_call) / 1e6;
        if (ms > rep->wf_longest_wait_ms)
            rep->wf_longest_wait_ms = ms;
    }
}
