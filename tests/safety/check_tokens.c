/* Token order for the exclusive types (lock, fair, elect): a later grant of a
 * name carries a higher token (elect: a higher term, never the same one).
 *
 * The order that counts is the order Redis granted in. A hold's grant lies in
 * [t_call, t_acq]: t_acq is the holder's clock reading after the acquire
 * returned, and it can be late. For a hold its holder kept (not lost, its
 * worker not stopped or cut off while acquiring) that does not matter: the
 * next holder could only be granted after it released, so t_acq order is
 * grant order. A hold that was lost, or whose worker was paused between the
 * grant and the reading, can read its clock after later holders were granted
 * (a worker stopped for 2.5 s right after its grant: its lease ran out and
 * another holder came first by the clocks). Such a hold is checked only
 * against what its interval proves: its token must be above every kept hold
 * that returned before its call began, and below every kept hold whose call
 * began after it returned. */
#include <stdlib.h>

#include "check.h"

/* Its grant may have been read late: lost, or its worker paused (SIGSTOP,
 * partition) while it acquired. */
static int late_reading(const hold *h)
{
    if (check_lost(h))
        return 1;
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if ((f[i].kind == 'P' || f[i].kind == 'N') && f[i].w == h->w && f[i].a <= h->t_acq &&
            f[i].b >= h->t_call)
            return 1;
    return 0;
}

/* Counts `later` (granted after `earlier`) against it. */
static void judge(check_report *rep, int type, const hold *earlier, const hold *later)
{
    if (later->token > earlier->token)
        return;
    if (later->adopted && later->token == earlier->token)
        return;   /* type handover: the adopted hold keeps the giver's token */
    if (later->token == earlier->token && type == SAFETY_ELECT) {
        rep->shared_terms++;
        check_problem(rep, "two leaders of name %d in term %llu: worker %d and worker %d",
                      later->name, later->token, earlier->w, later->w);
        return;
    }
    rep->token_regressions++;
    check_problem(rep, "token regression on name %d: %llu (worker %d, called %lld) after %llu "
                       "(worker %d, returned %lld)",
                  later->name, later->token, later->w, later->t_call, earlier->token, earlier->w,
                  earlier->t_acq);
}

/* holds[from..to): one name's, sorted by t_acq. */
static void check_name(check_report *rep, int type, hold *h, size_t from, size_t to)
{
    size_t *kept = malloc((to - from) * sizeof(*kept));
    if (!kept)
        exit(3);
    size_t nk = 0;
    for (size_t i = from; i < to; i++)
        if (!late_reading(&h[i])) {
            if (nk)
                judge(rep, type, &h[kept[nk - 1]], &h[i]);
            kept[nk++] = i;
        }
    for (size_t i = from; i < to; i++) {
        if (!late_reading(&h[i]))
            continue;
        /* The last kept hold that returned before this call began... */
        size_t lo = 0, hi = nk;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (h[kept[mid]].t_acq < h[i].t_call)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0)
            judge(rep, type, &h[kept[lo - 1]], &h[i]);
        /* ...and the first kept hold called after this one returned (kept
         * holds' tokens rise in t_acq order: the first found is the lowest). */
        for (size_t k = lo; k < nk; k++)
            if (h[kept[k]].t_call > h[i].t_acq) {
                judge(rep, type, &h[i], &h[kept[k]]);
                break;
            }
    }
    free(kept);
}

void check_token_order(const check_params *cp, check_report *rep)
{
    hold *h = holds.v;
    for (size_t i = 0; i < holds.n;) {
        size_t j = i;
        while (j < holds.n && h[j].name == h[i].name)
            j++;
        check_name(rep, cp->type, h, i, j);
        i = j;
    }
}
