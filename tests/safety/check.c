/* The safety checker: reads every history and the coordinator's fault log and
 * looks for what must never happen, and for each fault's expected effects.
 *
 * Violations (the run fails):
 *   overlap           two holds of one name that exclude each other overlap
 *                     while neither had lost it. Types lock and fair: any two
 *                     holds. Type rw: a write hold and any other hold; read
 *                     holds may overlap each other
 *   lost update       a counter differs from its number of accepted writes
 *   token regression  types lock, fair and elect: a later grant of a name got
 *                     a token not above an earlier one, in grant order (a lost
 *                     or paused hold's clock reading may be late:
 *                     check_tokens.c). Type rw (concurrent readers
 *                     return in any order): a hold whose acquire returned
 *                     before another's began has the lower token
 *   blocked           a worker waited with the lock free for blocked_ns. Type
 *                     rw: "free" for a reader is "no write hold". Type fair:
 *                     one slot more per dead waiter that may have been queued
 *                     meanwhile (check_fair.c)
 *   torn read         type rw: a read hold not lost read the counter twice
 *                     and saw two values: a write got in beside it (the
 *                     storage's witness, apart from the timeline's; the
 *                     second read's value is taken even when the fence
 *                     refused it)
 *   fair order        type fair: check_fair.c
 * Expectations per fault (each failure fails the run):
 *   SIGKILL    the dead holder's lock frees within watchdog + slack (type fair:
 *              + one slot per dead waiter; type rw: measured from when the
 *              live holds that would also have kept the next holder out ended)
 *   SIGSTOP    the paused holder is told (lost callback), its release answers
 *              DLOCK_ENOTOWNER, and a late write of it is refused (a read
 *              hold's late second read, when a writer got in)
 *   restart    every hold in progress is told it was lost
 *   partition  the cut-off holder is told before another (one it excludes)
 *              gets the lock
 * Hold intervals are [acquire returned, release called]: inside the interval
 * Redis granted, so client-side overlap implies server-side overlap. */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "check.h"

vec holds = {0, 0, 0, sizeof(hold)}, waits = {0, 0, 0, sizeof(waitrec)},
    calls = {0, 0, 0, sizeof(callrec)}, faults = {0, 0, 0, sizeof(fault)};

void *check_push(vec *x)
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

static int problems_printed;   /* per check: the first PROBLEMS_SHOWN go to stderr */
#define PROBLEMS_SHOWN 30

void check_problem(check_report *r, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (problems_printed < PROBLEMS_SHOWN)
        fprintf(stderr, "  problem: %s\n", buf);
    else if (problems_printed == PROBLEMS_SHOWN)
        fprintf(stderr, "  (more problems: see the counts)\n");
    problems_printed++;
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

/* The side at the end of a record ('x' when absent); for W records the wait
 * before it. */
static int side_at(const char *rest, long long *wait_ms)
{
    char c = 'x';
    if (wait_ms) {
        long long wv;
        if (sscanf(rest, " %lld %c", &wv, &c) == 2)
            *wait_ms = wv;
        else
            c = 'x';
    } else if (sscanf(rest, " %c", &c) != 1) {
        c = 'x';
    }
    return c == 'r' || c == 'w' ? c : 'x';
}

/* The record's last field is this tag (type handover's h and a). */
static int tagged(const char *rest, char tag)
{
    size_t n = strlen(rest);
    while (n > 0 && (rest[n - 1] == '\n' || rest[n - 1] == ' '))
        n--;
    return n >= 2 && rest[n - 1] == tag && rest[n - 2] == ' ';
}

static void parse_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        if (check_sem_line(line))   /* types sem and latch: check_sem.c */
            continue;
        if (check_rate_line(line))   /* type rate: check_rate.c */
            continue;
        if (check_barrier_line(line))   /* type barrier: check_barrier.c */
            continue;
        if (check_revoke_line(line))   /* type revoke: check_revoke.c */
            continue;
        hold h;
        memset(&h, 0, sizeof(h));
        long long a, b;
        int w, pid, n = 0;
        switch (line[0]) {
        case 'W': {
            callrec c;
            memset(&c, 0, sizeof(c));
            c.wait_ms = -2;   /* not recorded */
            if (sscanf(line, "W %d %d %d %lld%n", &c.w, &c.t, &c.name, &c.t_call, &n) == 4) {
                c.side = side_at(line + n, &c.wait_ms);
                callrec *p = check_push(&calls);
                *p = c;
            }
            break;
        }
        case 'S':
            if (sscanf(line, "S %d %d %d %llu %lld %lld%n", &h.w, &h.t, &h.name, &h.token,
                       &h.t_call, &h.t_acq, &n) == 6) {
                h.side = side_at(line + n, NULL);
                h.adopted = tagged(line + n, 'a');
                hold *p = check_push(&holds);
                *p = h;
                waitrec *wr = check_push(&waits);
                wr->w = h.w;
                wr->t = h.t;
                wr->name = h.name;
                wr->side = h.side;
                wr->acquired = 1;
                wr->token = h.token;
                wr->t_call = h.t_call;
                wr->t_ret = h.t_acq;
            }
            break;
        case 'E':
            if (sscanf(line, "E %d %d %d %llu %lld %lld %lld %d %d %d %lld %d %lld%n", &h.w, &h.t,
                       &h.name, &h.token, &h.t_acq, &h.t_end, &h.t_rel, &h.read_ok, &h.write_ok,
                       &h.release_rc, &h.lost_at, &h.lost_reason, &h.t_write, &n) == 13) {
                char c = 'x';
                if (sscanf(line + n, " %c %lld %lld", &c, &h.v1, &h.v2) != 3)
                    h.v1 = h.v2 = 0;
                hold *p = find_open(h.w, h.t, h.token);
                if (!p) {   /* S lost with a kill? keep the hold anyway */
                    p = check_push(&holds);
                    p->w = h.w;
                    p->t = h.t;
                    p->name = h.name;
                    p->token = h.token;
                    p->t_call = p->t_acq = h.t_acq;
                    p->side = c == 'r' || c == 'w' ? c : 'x';
                }
                p->t_end = h.t_end;
                p->t_rel = h.t_rel;
                p->read_ok = h.read_ok;
                p->write_ok = h.write_ok;
                p->release_rc = h.release_rc;
                p->lost_at = h.lost_at;
                p->lost_reason = h.lost_reason;
                p->t_write = h.t_write;
                p->v1 = h.v1;
                p->v2 = h.v2;
                p->handed = c == 'h';
                p->ended = 1;
            }
            break;
        case 'F': {
            waitrec r;
            memset(&r, 0, sizeof(r));
            if (sscanf(line, "F %d %d %d %lld %lld %d%n", &r.w, &r.t, &r.name, &r.t_call,
                       &r.t_ret, &r.rc, &n) == 6) {
                r.side = side_at(line + n, NULL);
                r.adopt = tagged(line + n, 'a');
                waitrec *p = check_push(&waits);
                *p = r;
            }
            break;
        }
        case 'K':
            if (sscanf(line, "K %d %d %lld", &w, &pid, &a) == 3) {
                fault *p = check_push(&faults);
                p->kind = 'K';
                p->w = w;
                p->a = p->b = a;
            }
            break;
        case 'P':
        case 'N':
            if (sscanf(line + 2, "%d %*d %lld %lld", &w, &a, &b) == 3 && line[0] == 'P') {
                fault *p = check_push(&faults);
                p->kind = 'P';
                p->w = w;
                p->a = a;
                p->b = b;
            } else if (line[0] == 'N' && sscanf(line, "N %d %lld %lld", &w, &a, &b) == 3) {
                fault *p = check_push(&faults);
                p->kind = 'N';
                p->w = w;
                p->a = a;
                p->b = b;
            }
            break;
        case 'R':
        case 'C':
        case 'O':
        case 'J':
            if (sscanf(line + 2, "%lld %lld", &a, &b) == 2) {
                fault *p = check_push(&faults);
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

long long check_kill_time(int w)
{
    const fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if (f[i].kind == 'K' && f[i].w == w)
            return f[i].a;
    return -1;
}


/* Occupied intervals of one name for a waiter on `side`, merged: holds that
 * exclude it, possible holds of acquires whose outcome is unknown, and windows
 * where Redis served nobody (type fair: and half a slot more, the longest a
 * waiter sleeps before trying again, its queue lost or reordered). */
typedef struct span {
    long long a, b;
} span;

static int by_a(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

static span *occupied(int name, int side, const check_params *cp, size_t *count)
{
    vec s = {0, 0, 0, sizeof(span)};
    hold *h = holds.v;
    for (size_t i = 0; i < holds.n; i++) {
        if (h[i].name != name || !check_conflicts(h[i].side, side))
            continue;
        span *p = check_push(&s);
        p->a = h[i].t_acq;
        if (h[i].ended) {
            p->b = h[i].handed ? h[i].held_until : h[i].t_rel;
        } else {
            long long k = check_kill_time(h[i].w);
            p->b = (k >= 0 ? k : cp->run_end) + cp->watchdog_ns + cp->free_slack_ns;
        }
    }
    waitrec *wr = waits.v;
    for (size_t i = 0; i < waits.n; i++)
        if (wr[i].name == name && !wr[i].acquired && wr[i].rc != DLOCK_ETIMEDOUT &&
            wr[i].rc != DLOCK_ECANCELED && check_conflicts(wr[i].side, side)) {
            span *p = check_push(&s);   /* it may have acquired without knowing */
            p->a = wr[i].t_call;
            p->b = wr[i].t_ret + cp->watchdog_ns;
        }
    /* Writer-first: a reader also waits while a writer waits, and for a
     * writer killed while waiting until its intent lapses. */
    for (size_t i = 0; cp->writer_first && side == 'r' && i < waits.n; i++)
        if (wr[i].name == name && wr[i].side == 'w') {
            span *p = check_push(&s);
            p->a = wr[i].t_call;
            p->b = wr[i].t_ret;
        }
    const callrec *c = calls.v;
    for (size_t i = 0; cp->writer_first && side == 'r' && i < calls.n; i++)
        if (c[i].name == name && c[i].side == 'w' && !c[i].ended) {
            long long k = check_kill_time(c[i].w);
            span *p = check_push(&s);
            p->a = c[i].t_call;
            p->b = (k >= 0 ? k : cp->run_end) + cp->watchdog_ns + cp->free_slack_ns;
        }
    fault *f = faults.v;
    for (size_t i = 0; i < faults.n; i++)
        if (f[i].kind == 'R' || f[i].kind == 'C' || f[i].kind == 'O' || f[i].kind == 'J') {
            span *p = check_push(&s);
            p->a = f[i].a;
            p->b = f[i].b + 1000000000LL;   /* and a second to reconnect */
            if (f[i].kind == 'J')   /* and the quarantine its discovery starts: a lease,
                                       from a renewal pass (a third of it) later */
                p->b += cp->quarantine_ns + cp->watchdog_ns / 3;
            if (f[i].kind == 'O')   /* and the quarantine it starts, or a lost release */
                p->b += cp->quarantine_ns > cp->lost_release_ns ? cp->quarantine_ns
                                                                : cp->lost_release_ns;
            if (cp->type == SAFETY_FAIR)
                p->b += cp->slot_ns / 2;
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

/* First hold of `name` by a worker other than w acquired in [a, b) that a
 * hold on `side` excludes. */
static const hold *next_other(int name, int w, long long a, long long b, int side)
{
    const hold *h = holds.v, *best = NULL;
    for (size_t i = 0; i < holds.n; i++)
        if (h[i].name == name && h[i].w != w && h[i].t_acq >= a && h[i].t_acq < b &&
            check_conflicts(h[i].side, side) && (!best || h[i].t_acq < best->t_acq))
            best = &h[i];
    return best;
}

static int someone_waiting(int name, int w, long long t, int side)
{
    const waitrec *r = waits.v;
    for (size_t i = 0; i < waits.n; i++)
        if (r[i].name == name && r[i].w != w && r[i].t_call <= t && r[i].t_ret > t &&
            check_conflicts(r[i].side, side))
            return 1;
    return 0;
}

static int by_call_key(const void *x, const void *y)
{
    const callrec *a = x, *b = y;
    if (a->w != b->w)
        return a->w - b->w;
    if (a->t != b->t)
        return a->t - b->t;
    return (a->t_call > b->t_call) - (a->t_call < b->t_call);
}

/* Each wait's W record: its wait; W records left without an outcome are the
 * waits of killed workers. */
static void match_calls(void)
{
    callrec *c = calls.v;
    if (calls.n)
        qsort(c, calls.n, sizeof(callrec), by_call_key);
    waitrec *wr = waits.v;
    for (size_t i = 0; i < waits.n; i++) {
        callrec key = {.w = wr[i].w, .t = wr[i].t, .t_call = wr[i].t_call};
        callrec *m = calls.n ? bsearch(&key, c, calls.n, sizeof(callrec), by_call_key) : NULL;
        wr[i].wait_ms = m ? m->wait_ms : -2;
        if (m)
            m->ended = 1;
    }
}

static void free_all(void)
{
    vec *v[] = {&holds, &waits, &calls, &faults};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        free(v[i]->v);
        v[i]->v = NULL;
        v[i]->n = v[i]->cap = 0;
    }
}

int safety_check(const check_params *cp, check_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->min_part_margin_ms = -1;
    problems_printed = 0;
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
    match_calls();
    hold *h = holds.v;
    if (holds.n)
        qsort(h, holds.n, sizeof(hold), by_name_acq);
    for (size_t i = 0; i < holds.n; i++) {
        if (h[i].ended) {
            h[i].end = h[i].t_end;
        } else {
            long long k = check_kill_time(h[i].w);
            h[i].end = k >= 0 && k > h[i].t_acq ? k : cp->run_end;
        }
        rep->holds++;
        rep->lost_holds += h[i].lost_at != 0;
        rep->clock_jump_lost += h[i].lost_at != 0 &&
                                (h[i].lost_reason >> 8) == DLOCK_CAUSE_CLOCK_JUMP;
        rep->release_errors += h[i].ended && h[i].release_rc != DLOCK_OK &&
                               h[i].release_rc != DLOCK_ENOTOWNER;
        rep->refused_reads += h[i].read_ok == 0;
        rep->refused_writes += h[i].ended && h[i].read_ok == 1 && h[i].write_ok == 0;
        rep->read_holds += h[i].side == 'r';
        rep->write_holds += h[i].side == 'w';
        if (h[i].side == 'r' && h[i].ended && h[i].read_ok == 1 && h[i].write_ok != -1 &&
            h[i].v1 != h[i].v2 && check_lost(&h[i])) {
            rep->torn_lost++;   /* a writer came after it lost its hold: allowed */
        } else if (h[i].side == 'r' && h[i].ended && h[i].read_ok == 1 && h[i].write_ok != -1 &&
                   h[i].v1 != h[i].v2) {
            rep->torn_reads++;
            check_problem(rep, "torn read on name %d: worker %d token %llu read %lld then %lld "
                               "under one read hold",
                          h[i].name, h[i].w, h[i].token, h[i].v1, h[i].v2);
        }
    }
    const waitrec *wr = waits.v;
    for (size_t i = 0; i < waits.n; i++) {
        rep->waits++;
        if (!wr[i].acquired) {
            rep->wait_failures++;
            rep->errors += wr[i].rc != DLOCK_ETIMEDOUT && wr[i].rc != DLOCK_ECANCELED;
        }
    }

    /* Overlaps per name in acquisition order; token order by grant order
     * (check_tokens.c). */
    if (cp->type == SAFETY_RW) {
        check_rw_exclusion(rep);
        check_rw_tokens(rep);
        check_rw_writer_first(cp, rep);
    }
    if (cp->type == SAFETY_SEM)
        check_sem(cp, rep);
    if (cp->type == SAFETY_LATCH)
        check_latch(cp, rep);   /* fault counts too: the switch below is skipped */
    if (cp->type == SAFETY_RATE)
        check_rate(cp, rep);
    if (cp->type == SAFETY_BARRIER)
        check_barrier(cp, rep);
    int lockish = safety_exclusive(cp->type);
    if (cp->type == SAFETY_HANDOVER)
        check_handover(cp, rep);
    if (cp->type == SAFETY_REVOKE)
        check_revoke(cp, rep);
    for (size_t i = 0; lockish && i < holds.n;) {
        size_t j = i;
        const hold *maxend = NULL;
        for (; j < holds.n && h[j].name == h[i].name; j++) {
            if (maxend && h[j].t_acq < maxend->end) {
                if (check_lost(&h[j]) || check_lost(maxend)) {
                    rep->allowed_overlaps++;
                } else {
                    rep->overlaps++;
                    check_problem(rep, "overlap on name %d: worker %d token %llu [%lld..%lld] and "
                                 "worker %d token %llu from %lld, neither lost",
                            h[j].name, maxend->w, maxend->token, maxend->t_acq, maxend->end,
                            h[j].w, h[j].token, h[j].t_acq);
                }
            }
            if (!maxend || h[j].end > maxend->end)
                maxend = &h[j];
        }
        i = j;
    }

    if (lockish)
        check_token_order(cp, rep);

    /* Counters: every accepted write, and only those, is in the value. */
    if (cp->storage_ok)
        for (int k = 0; k < cp->names; k++)
            if (cp->value[k] != cp->accepted[k]) {
                rep->lost_updates++;
                check_problem(rep, "name %d: counter %lld but %lld accepted writes", k, cp->value[k],
                        cp->accepted[k]);
            }

    /* Blocked while free. A worker stopped or cut off is not expected to wake.
     * Type rw: readers wait for writers only. Type fair: each dead waiter that
     * may have been ahead costs a slot. */
    if (cp->type == SAFETY_FAIR)
        check_ghosts_build(cp);
    for (int k = 0; (lockish || cp->type == SAFETY_RW) && k < cp->names; k++) {
        size_t n, nr = 0;
        span *occ = occupied(k, cp->type == SAFETY_RW ? 'w' : 'x', cp, &n);
        span *occ_r = cp->type == SAFETY_RW ? occupied(k, 'r', cp, &nr) : NULL;
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
            long long idle = wr[i].side == 'r'
                                 ? longest_free(occ_r, nr, wr[i].t_call, wr[i].t_ret)
                                 : longest_free(occ, n, wr[i].t_call, wr[i].t_ret);
            long long allowed = cp->blocked_ns;
            if (cp->type == SAFETY_FAIR)
                allowed += cp->slot_ns *
                           check_ghosts_in(k, wr[i].w, wr[i].t, wr[i].t_call, wr[i].t_ret);
            if (idle > allowed) {
                rep->blocked++;
                check_problem(rep, "worker %d waited for name %d %.0f ms while it was free",
                        wr[i].w, k, idle / 1e6);
            }
        }
        free(occ);
        free(occ_r);
    }

    /* Each fault's expectations. */
    const fault *f = faults.v;
    for (size_t q = 0; cp->type != SAFETY_LATCH && q < faults.n; q++) {
        switch (f[q].kind) {
        case 'K':
            rep->kills++;
            /* sem: a dead holder's permits are timed by the coordinator (X). */
            for (size_t i = 0; cp->type != SAFETY_SEM && i < holds.n; i++) {
                if (h[i].w != f[q].w || h[i].ended || h[i].t_acq > f[q].a)
                    continue;
                if (!someone_waiting(h[i].name, f[q].w, f[q].a, h[i].side))
                    continue;
                const hold *o = next_other(h[i].name, f[q].w, f[q].a, cp->run_end + 1, h[i].side);
                if (!o)
                    continue;
                long long from = cp->type == SAFETY_RW ? check_rw_free_for(o, f[q].w, f[q].a) : f[q].a;
                long long allowed = cp->watchdog_ns + cp->free_slack_ns;
                if (cp->type == SAFETY_FAIR)   /* and a slot per dead waiter ahead */
                    allowed += cp->slot_ns * check_ghosts_in(h[i].name, -1, -1, f[q].a, o->t_acq);
                double ms = (o->t_acq - from) / 1e6;
                rep->kill_measured++;
                if (ms > rep->worst_free_ms)
                    rep->worst_free_ms = ms;
                if (o->t_acq - from > allowed) {
                    rep->expectation_failures++;
                    check_problem(rep, "killed holder's lock (name %d) took %.0f ms to free", h[i].name,
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
                const hold *o = next_other(h[i].name, f[q].w, f[q].a, f[q].b, h[i].side);
                if (o)
                    rep->stop_passed++;
                /* The next hold by another, during the stop or after it (a
                 * lock-delay pushes it past the stop): did it begin before the
                 * paused holder was told? */
                const hold *n = next_other(h[i].name, f[q].w, f[q].a, cp->run_end + 1, h[i].side);
                int before = n && h[i].lost_at != 0 && n->t_acq < h[i].lost_at;
                rep->stop_next += n != NULL;
                rep->stop_before_told += before;
                /* The pause in half leases, rounded (the coordinator's steps). */
                long long step = cp->watchdog_ns > 0
                                     ? ((f[q].b - f[q].a) * 2 + cp->watchdog_ns / 2) / cp->watchdog_ns
                                     : 0;
                if (step >= SAFETY_SPREAD_STEPS)
                    step = SAFETY_SPREAD_STEPS - 1;
                rep->step_holds[step]++;
                rep->step_lost[step] += h[i].lost_at != 0;
                rep->step_next[step] += n != NULL;
                rep->step_before[step] += before;
                int told = h[i].lost_at != 0 && h[i].release_rc == DLOCK_ENOTOWNER;
                rep->stop_told += told;
                /* A pause shorter than the lease may lose nothing (the
                 * watchdog renews on resuming): then nobody else may have
                 * had the lock meanwhile. One clearly past the lease (500 ms
                 * for a renewal sent just before the stop; the scenario's
                 * default pause is the lease + 1 s) must be told. */
                int must = o != NULL || f[q].b - f[q].a > cp->watchdog_ns + 500000000LL;
                if (!told && must) {
                    rep->expectation_failures++;
                    check_problem(rep, "paused holder (worker %d, name %d) not told: lost_at %lld, "
                                 "release %d",
                            h[i].w, h[i].name, h[i].lost_at, h[i].release_rc);
                }
                if (o && h[i].t_write > f[q].b && cp->type != SAFETY_SEM) {
                    /* its write came after the resume */
                    if (h[i].write_ok == 1 && h[i].read_ok == 1) {
                        rep->expectation_failures++;
                        check_problem(rep, "paused holder's late write (token %llu) was accepted",
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
                } else if (h[i].t_end <= f[q].b && h[i].release_rc == DLOCK_ENOTOWNER) {
                    /* It stopped working (called release) before the server
                     * was back, and the release told it: nothing ran
                     * unknowing after the restart. */
                    rep->restart_told++;
                } else {
                    rep->expectation_failures++;
                    check_problem(rep, "holder (worker %d, name %d) across a restart never told",
                            h[i].w, h[i].name);
                }
            }
            break;
        case 'C':
            rep->pauses++;
            break;
        case 'J': {
            /* Detected: a hold lost to it (the worker's lost_reason carries
             * the cause in its second byte) within a pass and a second. */
            rep->clock_jumps++;
            int seen = 0;
            for (size_t i = 0; i < holds.n && !seen; i++)
                seen = (h[i].lost_reason >> 8) == DLOCK_CAUSE_CLOCK_JUMP &&
                       h[i].lost_at >= f[q].a &&
                       h[i].lost_at <= f[q].b + cp->watchdog_ns / 3 + cp->free_slack_ns;
            rep->clock_jumps_detected += seen;
            break;
        }
        case 'O': {
            rep->failovers++;
            long long first = -1;
            /* A grant that stands (one the old primary made after the
                 * promotion began is lost with it). */
            for (size_t i = 0; i < holds.n; i++)
                if (h[i].t_acq > f[q].a && !check_lost(&h[i]) && (first < 0 || h[i].t_acq < first))
                    first = h[i].t_acq;
            if (first >= 0) {
                double ms = (first - f[q].a) / 1e6;
                rep->failover_gaps++;
                rep->failover_gap_ms_sum += ms;
                if (ms > rep->failover_gap_ms_max)
                    rep->failover_gap_ms_max = ms;
            }
            break;
        }
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
                /* Until it began its release: from then on it claims the
                 * lock no more (a release the cut kept from Redis ends the
                 * renewal; the lock goes at its lease, then to another). */
                const hold *o = next_other(h[i].name, f[q].w, f[q].a, h[i].t_end, h[i].side);
                if (!o)
                    continue;   /* nobody took it meanwhile */
                if (cp->type == SAFETY_SEM) {
                    /* Another permit may have gone to the other: only that the
                     * cut-off holder is told. */
                    rep->part_holds++;
                    if (h[i].lost_at) {
                        rep->part_told++;
                        double ms = (h[i].lost_at - f[q].a) / 1e6;
                        if (ms > rep->worst_report_ms)
                            rep->worst_report_ms = ms;
                    } else {
                        rep->expectation_failures++;
                        check_problem(rep, "cut-off permit holder (name %d) never told",
                                      h[i].name);
                    }
                    continue;
                }
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
                    check_problem(rep, "cut-off holder (name %d) told at %lld, after another got the "
                                 "lock at %lld",
                            h[i].name, h[i].lost_at, o->t_acq);
                }
                if (h[i].t_write > o->t_acq && h[i].read_ok == 1) {
                    rep->part_late++;
                    if (h[i].write_ok == 1) {
                        rep->expectation_failures++;
                        check_problem(rep, "cut-off holder's late write was accepted");
                    }
                }
            }
            break;
        default:
            break;
        }
    }
    if (cp->type == SAFETY_FAIR) {
        check_fair_order(cp, rep);
        check_ghosts_free();
    }
    check_sem_free();
    check_rate_free();
    check_barrier_free();
    check_revoke_free();
    free_all();
    return (int)(safety_violations(rep) + rep->expectation_failures);
}
