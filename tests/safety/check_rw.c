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
