/* The safety checker: reads every history and the coordinator's fault log and
 * looks for what must never happen, and for each fault's expected effects.
 *
 * Violations (the run fails):
 *   overlap           two holds of one name overlap while neither had lost it
 *   lost update       a counter differs from its number of accepted writes
 *   token regression  a later hold of a name got a token not above an earlier one
 *   blocked           a worker waited with the lock free for blocked_ns
 * Expectations per fault (each failure fails the run):
 *   SIGKILL    the dead holder's lock frees within watchdog + slack
 *   SIGSTOP    the paused holder is told (lost callback), its release answers
 *              DLOCK_ENOTOWNER, and a late write of it is refused
 *   restart    every hold in progress is told it was lost
 *   partition  the cut-off holder is told before another gets the lock
 * Hold intervals are [acquire returned, release called]: inside the interval
 * Redis granted, so client-side overlap implies server-side overlap. */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "safety.h"

typedef struct hold {
    int w, t, name;
    unsigned long long token;
    long long t_call, t_acq, t_end, t_rel, lost_at, t_write;
    int read_ok, write_ok, release_rc, lost_reason, ended;
    long long end;         /* for overlap: t_end, or when a killed worker died */
} hold;

typedef struct waitrec {
    int w, name, acquired, rc;
    long long t_call, t_ret;
} waitrec;

typedef struct fault {
    char kind;
    int w;
    long long a, b;
} fault;

typedef struct vec {
    void *v;
    size_t n, cap, size;
} vec;

static void *push(vec *x)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 1024;
        void *nv = realloc(x->v, cap * x->size);
        if (!nv) {
            fprintf(stderr, "checker: out of memory\n");
            exit(3);
        }
        x->v = nv;
        x->cap = cap;
    }
    void *p = (char *)x->v + x->n * x->size;
    memset(p, 0, x->size);
    x->n++;
    return p;
}

static vec holds = {0, 0, 0, sizeof(hold)}, waits = {0, 0, 0, sizeof(waitrec)},
           faults = {0, 0, 0, sizeof(fault)};

static void problem(check_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(check_report *r, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "  problem: %s\n", buf);
    if (!r->first_problem[0])
        snprintf(r->first_problem, sizeof(r->first_problem), "%s", buf);
}

/* S records open holds; E records close them (matched by worker, thread, token). */
static hold *find_open(int w, int t, unsigned long long token)
{
    hold *h = holds.v;
    for (size_t i = holds.n; i-- > 0;)
        if (h[i].w == w && h[i].t == t && h[i].token == token && !h[i].ended)
            return &h[i];
    return NULL;
}

static void parse_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        hold h;
        memset(&h, 0, sizeof(h));
        long long a, b;
        int w, pid;
        switch (line[0]) {
        case 'S':
            if (sscanf(line, "S %d %d %d %llu %lld %lld", &h.w, &h.t, &h.name, &h.token,
                       &h.t_call, &h.t_acq) == 6) {
                hold *p = push(&holds);
                *p = h;
                waitrec *wr = push(&waits);
                wr->w = h.w;
                wr->name = h.name;
                wr->acquired = 1;
                wr->t_call = h.t_call;
                wr->t_ret = h.t_acq;
            }
            break;
        case 'E':
            if (sscanf(line, "E %d %d %d %llu %lld %lld %lld %d %d %d %lld %d %lld", &h.w, &h.t,
                       &h.name, &h.token, &h.t_acq, &h.t_end, &h.t_rel, &h.read_ok, &h.write_ok,
                       &h.release_rc, &h.lost_at, &h.lost_reason, &h.t_write) == 13) {
                hold *p = find_open(h.w, h.t, h.token);
                if (!p) {   /* S lost with a kill? keep the hold anyway */
                    p = push(&holds);
                    p->w = h.w;
                    p->t = h.t;
                    p->name = h.name;
                    p->token = h.token;
                    p->t_call = p->t_acq = h.t_acq;
                }
                p->t_end = h.t_end;
                p->t_rel = h.t_rel;
                p->read_ok = h.read_ok;
                p->write_ok = h.write_ok;
                p->release_rc = h.release_rc;
                p->lost_at = h.lost_at;
                p->lost_reason = h.lost_reason;
                p->t_write = h.t_write;
                p->ended = 1;
            }
            break;
        case 'F': {
            waitrec r;
            memset(&r, 0, sizeof(r));
            if (sscanf(line, "F %d %*d %d %lld %lld %d", &r.w, &r.name, &r.t_call, &r.t_ret,
                       &r.rc) == 5) {
                waitrec *p = push(&waits);
                *p = r;
            }
            break;
        }
        case 'K':
            if (sscanf(line, "K %d %d %lld", &w, &pid, &a) == 3) {
                fault *p = push(&faults);
                p->kind = 'K';
                p->w = w;
                p->a = p->b = a;
            }
            break;
        case 'P':
        case 'N':
            if (sscanf(line + 2, "%d %*d %lld %lld", &w, &a, &b) == 3 && line[0] == 'P') {
                fault *p = push(&faults);
                p->kind = 'P';
                p->w = w;
                p->a = a;
                p->b = b;
            } else if (line[0] == 'N' && sscanf(line, "N %d %lld %lld", &w, &a, &b) == 3) {
                fault *p = push(&faults);
                p->kind = 'N';
                p->w = w;
                p->a = a;
                p->b = b;
            }
            break;
        case 'R':
        case 'C':
            if (sscanf(line + 2, "%lld %lld", &a, &b) == 2) {
                fault *p = push(&faults);
                p->kind = line[0];
                p->w = -1;
                p->a = a;
                p->b = b;
            }
            break;
        default:
            break;
        }
    }
    fclose(f);
}

static int by_name_acq(const void *x, const void *y)
{
    const hold *a = x, *b = y;
    if (a->name != b->name)
        return a->name - b->name;
    return (a->t_acq > b->t_acq) - (a->t_acq < b->t_acq);
}

static const fault *fault_of(char kind, int w, long long t)
{
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if (f[i].kind == kind && f[i].w == w && f[i].a <= t && (kind == 'K' || t <= f[i].b))
            return &f[i];
    return NULL;
}

static long long kill_time(int w)
{
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if (f[i].kind == 'K' && f[i].w == w)
            return f[i].a;
    return -1;
}

static int lost(const hold *h)
{
    return h->lost_at != 0 || h->release_rc == DLOCK_ENOTOWNER || !h->ended;
}

/* Occupied intervals of one name, merged: holds, possible holds of acquires
 * whose outcome is unknown, and windows where Redis served nobody. */
typedef struct span {
    long long a, b;
} span;

static int by_a(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

static span *occupied(int name, const check_params *cp, size_t *count)
{
    vec s = {0, 0, 0, sizeof(span)};
    hold *h = holds.v;
    for (size_t i = 0; i < holds.n; i++) {
        if (h[i].name != name)
            continue;
        span *p = push(&s);
        p->a = h[i].t_acq;
        if (h[i].ended) {
            p->b = h[i].t_rel;
        } else {
            long long k = kill_time(h[i].w);
            p->b = (k >= 0 ? k : cp->run_end) + cp->watchdog_ns + cp->free_slack_ns;
        }
    }
    waitrec *wr = waits.v;
    for (size_t i = 0; i < waits.n; i++)
        if (wr[i].name == name && !wr[i].acquired && wr[i].rc != DLOCK_ETIMEDOUT &&
            wr[i].rc != DLOCK_ECANCELED) {
            span *p = push(&s);   /* it may have acquired without knowing */
            p->a = wr[i].t_call;
            p->b = wr[i].t_ret + cp->watchdog_ns;
        }
    fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if (f[i].kind == 'R' || f[i].kind == 'C') {
            span *p = push(&s);
            p->a = f[i].a;
            p->b = f[i].b + 1000000000LL;   /* and a second to reconnect */
        }
    span *v = s.v;
    if (s.n)
        qsort(v, s.n, sizeof(span), by_a);
    size_t m = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (m && v[i].a <= v[m - 1].b) {
            if (v[i].b > v[m - 1].b)
                v[m - 1].b = v[i].b;
        } else {
            v[m++] = v[i];
        }
    }
    *count = m;
    return v;
}

/* Longest time inside [a, b] not covered by the merged spans. */
static long long longest_free(const span *v, size_t n, long long a, long long b)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {   /* first span ending after a */
        size_t mid = (lo + hi) / 2;
        if (v[mid].b <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    long long best = 0, cur = a;
    for (size_t i = lo; i < n && v[i].a < b; i++) {
        if (v[i].a > cur && v[i].a - cur > best)
            best = v[i].a - cur;
        if (v[i].b > cur)
            cur = v[i].b;
    }
    if (b > cur && b - cur > best)
        best = b - cur;
    return best;
}

/* First hold of `name` by a worker other than w acquired in [a, b). */
static const hold *next_other(int name, int w, long long a, long long b)
{
    const hold *h = holds.v, *best = NULL;
    for (size_t i = 0; i < holds.n; i++)
        if (h[i].name == name && h[i].w != w && h[i].t_acq >= a && h[i].t_acq < b &&
            (!best || h[i].t_acq < best->t_acq))
            best = &h[i];
    return best;
}

static int someone_waiting(int name, int w, long long t)
{
    const waitrec *r = waits.v;
    for (size_t i = 0; i < waits.n; i++)
        if (r[i].name == name && r[i].w != w && r[i].t_call <= t && r[i].t_ret > t)
            return 1;
    return 0;
}

int safety_check(const check_params *cp, check_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->min_part_margin_ms = -1;
    DIR *d = opendir(cp->dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strstr(e->d_name, ".log")) {
            char path[1024];
            snprintf(path, sizeof(path), "%s/%s", cp->dir, e->d_name);
            parse_file(path);
        }
    }
    closedir(d);
    hold *h = holds.v;
    if (holds.n)
        qsort(h, holds.n, sizeof(hold), by_name_acq);
    for (size_t i = 0; i < holds.n; i++) {
        if (h[i].ended) {
            h[i].end = h[i].t_end;
        } else {
            long long k = kill_time(h[i].w);
            h[i].end = k >= 0 && k > h[i].t_acq ? k : cp->run_end;
        }
        rep->holds++;
        rep->lost_holds += h[i].lost_at != 0;
        rep->release_errors += h[i].ended && h[i].release_rc != DLOCK_OK &&
                               h[i].release_rc != DLOCK_ENOTOWNER;
        rep->refused_reads += h[i].read_ok == 0;
        rep->refused_writes += h[i].ended && h[i].read_ok == 1 && h[i].write_ok == 0;
    }
    const waitrec *wr = waits.v;
    for (size_t i = 0; i < waits.n; i++) {
        rep->waits++;
        if (!wr[i].acquired) {
            rep->wait_failures++;
            rep->errors += wr[i].rc != DLOCK_ETIMEDOUT && wr[i].rc != DLOCK_ECANCELED;
        }
    }

    /* Overlaps and token order, per name, in acquisition order. */
    for (size_t i = 0; i < holds.n;) {
        size_t j = i;
        const hold *maxend = NULL;
        for (; j < holds.n && h[j].name == h[i].name; j++) {
            if (maxend && h[j].t_acq < maxend->end) {
                if (lost(&h[j]) || lost(maxend)) {
                    rep->allowed_overlaps++;
                } else {
                    rep->overlaps++;
                    problem(rep, "overlap on name %d: worker %d token %llu [%lld..%lld] and "
                                 "worker %d token %llu from %lld, neither lost",
                            h[j].name, maxend->w, maxend->token, maxend->t_acq, maxend->end,
                            h[j].w, h[j].token, h[j].t_acq);
                }
            }
            if (j > i && h[j].token <= h[j - 1].token) {
                rep->token_regressions++;
                problem(rep, "token regression on name %d: %llu after %llu", h[j].name,
                        h[j].token, h[j - 1].token);
            }
            if (!maxend || h[j].end > maxend->end)
                maxend = &h[j];
        }
        i = j;
    }

    /* Counters: every accepted write, and only those, is in the value. */
    if (cp->storage_ok)
        for (int k = 0; k < cp->names; k++)
            if (cp->value[k] != cp->accepted[k]) {
                rep->lost_updates++;
                problem(rep, "name %d: counter %lld but %lld accepted writes", k, cp->value[k],
                        cp->accepted[k]);
            }

    /* Blocked while free. A worker stopped or cut off is not expected to wake. */
    for (int k = 0; k < cp->names; k++) {
        size_t n;
        span *occ = occupied(k, cp, &n);
        for (size_t i = 0; i < waits.n; i++) {
            if (wr[i].name != k || wr[i].rc == DLOCK_ECANCELED)
                continue;
            if (fault_of('P', wr[i].w, wr[i].t_ret) || fault_of('N', wr[i].w, wr[i].t_ret))
                continue;
            int skip = 0;
            const fault *f = faults.v;
            for (size_t q = 0; q < faults.n; q++)
                if ((f[q].kind == 'P' || f[q].kind == 'N') && f[q].w == wr[i].w &&
                    f[q].a < wr[i].t_ret && f[q].b > wr[i].t_call)
                    skip = 1;
            if (skip)
                continue;
            long long idle = longest_free(occ, n, wr[i].t_call, wr[i].t_ret);
            if (idle > cp->blocked_ns) {
                rep->blocked++;
                problem(rep, "worker %d waited for name %d %.0f ms while it was free",
                        wr[i].w, k, idle / 1e6);
            }
        }
        free(occ);
    }

    /* Each fault's expectations. */
    const fault *f = faults.v;
    for (size_t q = 0; q < faults.n; q++) {
        switch (f[q].kind) {
        case 'K':
            rep->kills++;
            for (size_t i = 0; i < holds.n; i++) {
                if (h[i].w != f[q].w || h[i].ended || h[i].t_acq > f[q].a)
                    continue;
                if (!someone_waiting(h[i].name, f[q].w, f[q].a))
                    continue;
                const hold *o = next_other(h[i].name, f[q].w, f[q].a, cp->run_end + 1);
                if (!o)
                    continue;
                double ms = (o->t_acq - f[q].a) / 1e6;
                rep->kill_measured++;
                if (ms > rep->worst_free_ms)
                    rep->worst_free_ms = ms;
                if (o->t_acq - f[q].a > cp->watchdog_ns + cp->free_slack_ns) {
                    rep->expectation_failures++;
                    problem(rep, "killed holder's lock (name %d) took %.0f ms to free", h[i].name,
                            ms);
                }
            }
            break;
        case 'P':
            rep->stops++;
            for (size_t i = 0; i < holds.n; i++) {
                if (h[i].w != f[q].w || h[i].t_acq > f[q].a || (h[i].ended && h[i].t_end < f[q].a))
                    continue;
                if (!h[i].ended)
                    continue;
                rep->stop_holds++;
                const hold *o = next_other(h[i].name, f[q].w, f[q].a, f[q].b);
                if (o)
                    rep->stop_passed++;
                int told = h[i].lost_at != 0 && h[i].release_rc == DLOCK_ENOTOWNER;
                rep->stop_told += told;
                if (!told) {
                    rep->expectation_failures++;
                    problem(rep, "paused holder (worker %d, name %d) not told: lost_at %lld, "
                                 "release %d",
                            h[i].w, h[i].name, h[i].lost_at, h[i].release_rc);
                }
                if (o && h[i].t_write > f[q].b) {   /* its write came after the resume */
                    if (h[i].write_ok == 1 && h[i].read_ok == 1) {
                        rep->expectation_failures++;
                        problem(rep, "paused holder's late write (token %llu) was accepted",
                                h[i].token);
                    } else {
                        rep->stop_late_refused++;
                    }
                }
            }
            break;
        case 'R':
            rep->restarts++;
            for (size_t i = 0; i < holds.n; i++) {
                if (h[i].t_acq >= f[q].a || !h[i].ended || h[i].t_rel <= f[q].b)
                    continue;
                rep->restart_holds++;
                if (h[i].lost_at) {
                    rep->restart_told++;
                    double ms = (h[i].lost_at - f[q].b) / 1e6;
                    if (ms > rep->worst_report_ms)
                        rep->worst_report_ms = ms;
                } else {
                    rep->expectation_failures++;
                    problem(rep, "holder (worker %d, name %d) across a restart never told",
                            h[i].w, h[i].name);
                }
            }
            break;
        case 'C':
            rep->pauses++;
            break;
        case 'N':
            rep->partitions++;
            for (size_t i = 0; i < holds.n; i++) {
                if (h[i].w == f[q].w || h[i].t_acq < f[q].a || h[i].t_acq > f[q].b)
                    continue;
                rep->others_during_partition++;
            }
            for (size_t i = 0; i < holds.n; i++) {
                if (h[i].w != f[q].w || h[i].t_acq > f[q].a || !h[i].ended ||
                    h[i].release_rc == DLOCK_OK || h[i].t_rel < f[q].a)
                    continue;
                const hold *o = next_other(h[i].name, f[q].w, f[q].a, h[i].t_rel);
                if (!o)
                    continue;   /* nobody took it meanwhile */
                rep->part_holds++;
                if (h[i].lost_at && h[i].lost_at <= o->t_acq) {
                    rep->part_told++;
                    double margin = (o->t_acq - h[i].lost_at) / 1e6;
                    if (rep->min_part_margin_ms < 0 || margin < rep->min_part_margin_ms)
                        rep->min_part_margin_ms = margin;
                    double ms = (h[i].lost_at - f[q].a) / 1e6;
                    if (ms > rep->worst_report_ms)
                        rep->worst_report_ms = ms;
                } else {
                    rep->expectation_failures++;
                    problem(rep, "cut-off holder (name %d) told at %lld, after another got the "
                                 "lock at %lld",
                            h[i].name, h[i].lost_at, o->t_acq);
                }
                if (h[i].t_write > o->t_acq && h[i].read_ok == 1) {
                    rep->part_late++;
                    if (h[i].write_ok == 1) {
                        rep->expectation_failures++;
                        problem(rep, "cut-off holder's late write was accepted");
                    }
                }
            }
            break;
        default:
            break;
        }
    }
    free(holds.v);
    free(waits.v);
    free(faults.v);
    memset(&holds, 0, sizeof(holds));
    holds.size = sizeof(hold);
    memset(&waits, 0, sizeof(waits));
    waits.size = sizeof(waitrec);
    memset(&faults, 0, sizeof(faults));
    faults.size = sizeof(fault);
    return (int)(rep->overlaps + rep->lost_updates + rep->token_regressions + rep->blocked +
                 rep->expectation_failures);
}

void safety_print_report(const char *scenario, const check_params *cp, const check_report *r,
                         double seconds, FILE *out)
{
    long long accepted = 0, refused = 0;
    for (int k = 0; k < cp->names; k++) {
        accepted += cp->accepted[k];
        refused += cp->refused[k];
    }
    long long violations = r->overlaps + r->lost_updates + r->token_regressions + r->blocked;
    fprintf(out, "scenario %-10s %6.1f s  %lld holds (%.0f/s), %lld guarded writes accepted, "
                 "%lld stale reads/writes refused by fencing\n",
            scenario, seconds, r->holds, seconds > 0 ? r->holds / seconds : 0.0, accepted, refused);
    fprintf(out, "  waits %lld: %lld gave up or failed (%lld errors); holds reported lost %lld; "
                 "release errors %lld\n",
            r->waits, r->wait_failures, r->errors, r->lost_holds, r->release_errors);
    fprintf(out, "  violations: %lld  (overlap %lld, lost update %lld, token regression %lld, "
                 "blocked while free %lld)\n",
            violations, r->overlaps, r->lost_updates, r->token_regressions, r->blocked);
    if (r->allowed_overlaps)
        fprintf(out, "  holds overlapping a holder that had lost its lock (allowed; fencing "
                     "guards the data): %lld\n",
                r->allowed_overlaps);
    if (r->kills)
        fprintf(out, "  SIGKILL x%lld: %lld measured; worst time to free a dead holder's lock "
                     "%.0f ms (watchdog %.0f ms)\n",
                r->kills, r->kill_measured, r->worst_free_ms, cp->watchdog_ns / 1e6);
    if (r->stops)
        fprintf(out, "  SIGSTOP x%lld: %lld paused holds, %lld passed to another worker, %lld told "
                     "(lost callback + DLOCK_ENOTOWNER), %lld late writes refused\n",
                r->stops, r->stop_holds, r->stop_passed, r->stop_told, r->stop_late_refused);
    if (r->restarts)
        fprintf(out, "  restart x%lld: %lld holds in progress, %lld told; overlaps this allowed: "
                     "%lld (Redis without persistence forgets its locks; fencing refused %lld "
                     "stale operations)\n",
                r->restarts, r->restart_holds, r->restart_told, r->allowed_overlaps,
                r->refused_reads + r->refused_writes);
    if (r->pauses)
        fprintf(out, "  CLIENT PAUSE x%lld: %lld acquire errors and %lld release errors reported "
                     "to callers, %lld holds reported lost; no double grant\n",
                r->pauses, r->errors, r->release_errors, r->lost_holds);
    if (r->partitions)
        fprintf(out, "  partition x%lld: %lld cut-off holds passed on, %lld told before the "
                     "other got it (smallest margin %.1f ms), %lld late writes refused; %lld holds "
                     "by the others meanwhile\n",
                r->partitions, r->part_holds, r->part_told, r->min_part_margin_ms, r->part_late,
                r->others_during_partition);
    if (r->restarts || r->partitions)
        fprintf(out, "  worst time to report a lost lock: %.0f ms after the fault\n",
                r->worst_report_ms);
    fprintf(out, "  expectations failed: %lld%s%s\n", r->expectation_failures,
            r->first_problem[0] ? "; first problem: " : "", r->first_problem);
}
