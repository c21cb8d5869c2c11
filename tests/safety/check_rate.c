/* The rate check (type rate): per name, never more than `rate` starts in any
 * interval.
 *
 * A start is stamped by the command `dlock run --rate` execs, a little after
 * the grant (the exec and the stamp's own start-up: at most stamp_slack_ns).
 * Stamps can only lag their grants, so rate + 1 stamps within
 * interval - stamp_slack_ns are rate + 1 grants within the interval: a
 * violation, unless a restart of the server fell in between (without
 * persistence the limiter's grants go with it: allowed, counted apart). */
#include <stdlib.h>

#include "check.h"

typedef struct rstart {
    int w, t, name;
    long long at;
} rstart;

static vec starts = {NULL, 0, 0, sizeof(rstart)};
static long long unstarted, errors;

int check_rate_line(const char *line)
{
    rstart s;
    long long t_call, t_ret;
    int status;
    if (line[0] == 'G' &&
        sscanf(line, "G %d %d %d %lld", &s.w, &s.t, &s.name, &s.at) == 4) {
        rstart *p = check_push(&starts);
        *p = s;
        return 1;
    }
    if (line[0] == 'g' &&
        sscanf(line, "g %d %d %d %lld %lld %d", &s.w, &s.t, &s.name, &t_call, &t_ret,
               &status) == 6) {
        unstarted += status != 0;
        errors += status != 0 && status != 75 && status != -2;
        return 1;
    }
    return 0;
}

static int by_name_at(const void *a, const void *b)
{
    const rstart *x = a, *y = b;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* A restart of the server that may have wiped grants of [a, b]. */
static int restart_within(long long a, long long b)
{
    const fault *f = faults.v;
    for (size_t q = 0; q < faults.n; q++)
        if (f[q].kind == 'R' && f[q].a <= b && f[q].b >= a)
            return 1;
    return 0;
}

void check_rate(const check_params *cp, check_report *rep)
{
    /* The faults are counted by check.c's loop (no holds here). */
    rep->rate_unstarted = unstarted;
    rep->rate_errors = errors;
    rep->rate_tightest_ms = -1;
    rstart *s = starts.v;
    rep->rate_starts = (long long)starts.n;
    if (starts.n)
        qsort(s, starts.n, sizeof(*s), by_name_at);
    const size_t n = (size_t)cp->rate;
    for (size_t i = 0; i < starts.n; i++) {
        /* The most starts in one checked window from this one (none across
         * a restart). */
        size_t k = i;
        while (k + 1 < starts.n && s[k + 1].name == s[i].name &&
               s[k + 1].at - s[i].at < cp->interval_ns - cp->stamp_slack_ns)
            k++;
        if (!restart_within(s[i].at - cp->stamp_slack_ns, s[k].at) &&
            (long long)(k - i + 1) > rep->rate_max_in_window)
            rep->rate_max_in_window = (long long)(k - i + 1);
        size_t j = i + n;
        if (j >= starts.n || s[j].name != s[i].name)
            continue;
        double span_ms = (double)(s[j].at - s[i].at) / 1e6;
        if (rep->rate_tightest_ms < 0 || span_ms < rep->rate_tightest_ms)
            rep->rate_tightest_ms = span_ms;
        if (s[j].at - s[i].at >= cp->interval_ns - cp->stamp_slack_ns)
            continue;
        if (restart_within(s[i].at - cp->stamp_slack_ns, s[j].at)) {
            rep->rate_reset++;
            continue;
        }
        rep->rate_over++;
        check_problem(rep, "name %d: %d starts within %.1f ms (worker %d thread %d at %lld .. "
                           "worker %d thread %d at %lld), over %d per %.0f ms",
                      s[i].name, cp->rate + 1, span_ms, s[i].w, s[i].t, s[i].at, s[j].w, s[j].t,
                      s[j].at, cp->rate, (double)cp->interval_ns / 1e6);
    }
}

void check_rate_free(void)
{
    free(starts.v);
    memset(&starts, 0, sizeof(starts));
    starts.size = sizeof(rstart);
    unstarted = errors = 0;
}
