/* The checker must be able to fail: it is fed made-up histories, one
 * violation each, and must count exactly that violation (and none in the
 * clean history). Covers the exclusive types' checks that type elect relies
 * on: two leaders at once, a term that goes back, one term for two leaders;
 * and token order judged by grant order when a clock reading was late; for
 * writer-first read-write locks, a read granted past a waiting writer; the
 * rate limiter's: more starts in an interval than its rate; a hand-over's:
 * another holder in the gap or within an unadopted hold's TTL, an adoption
 * refused with no fault; a double barrier's: a round opened before its N-th
 * party came, a leave done before another member left, more than N members.
 * Exit 0 when every history gets the verdict it should. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define MS 1000000LL

typedef struct hist {
    const char *what;
    int type;
    /* holds as (worker, term, acquired at ms, ended at ms); lost: its release
     * answered DLOCK_ENOTOWNER; call: when its acquire was called (0: 1 ms
     * before acq) */
    struct {
        int w;
        unsigned long long term;
        long long acq, end;
        int lost;
        long long call;
    } h[4];
    int n;
    long long want_overlaps, want_regressions, want_shared;
    struct {
        int w;
        long long stop, cont;   /* a SIGSTOP of worker w (ms), when cont > 0 */
    } pause;
} hist;

static const hist cases[] = {
    {"clean: terms 10, 11, 12 one after another", SAFETY_ELECT,
     {{0, 10, 100, 200, 0, 0}, {1, 11, 210, 300, 0, 0}, {0, 12, 310, 400, 0, 0}}, 3, 0, 0, 0, {0, 0, 0}},
    {"two leaders at once, neither told", SAFETY_ELECT,
     {{0, 10, 100, 300, 0, 0}, {1, 11, 200, 400, 0, 0}}, 2, 1, 0, 0, {0, 0, 0}},
    {"two leaders at once, the first told it lost (allowed)", SAFETY_ELECT,
     {{0, 10, 100, 300, 1, 0}, {1, 11, 200, 400, 0, 0}}, 2, 0, 0, 0, {0, 0, 0}},
    {"a term that goes back", SAFETY_ELECT,
     {{0, 11, 100, 200, 0, 0}, {1, 10, 210, 300, 0, 0}}, 2, 0, 1, 0, {0, 0, 0}},
    {"one term, two leaders", SAFETY_ELECT,
     {{0, 10, 100, 200, 0, 0}, {1, 10, 210, 300, 0, 0}}, 2, 0, 0, 1, {0, 0, 0}},
    {"one token twice for the lock is a regression", SAFETY_LOCK,
     {{0, 10, 100, 200, 0, 0}, {1, 10, 210, 300, 0, 0}}, 2, 0, 1, 0, {0, 0, 0}},
    /* make safety's sigstop run: worker 0 was granted, then stopped for 2.5 s
     * before it read its clock; its lease ran out, worker 1 was granted (a
     * higher token) and returned first by the clocks; worker 0's release
     * answered DLOCK_ENOTOWNER. Grant order is worker 0 first: no violation. */
    {"paused between its grant and its clock reading, lost: grant order", SAFETY_LOCK,
     {{0, 1795653628255473ULL, 2700, 2750, 1, 100}, {1, 1795653630751710ULL, 2600, 2680, 0, 200}},
     2, 0, 0, 0, {0, 150, 2650}},
    {"a lost hold called after a kept one returned, with a lower token", SAFETY_LOCK,
     {{1, 20, 110, 200, 0, 100}, {0, 10, 310, 400, 1, 300}}, 2, 0, 1, 0, {0, 0, 0}},
    {"a kept hold called after a lost one returned, with a lower token", SAFETY_LOCK,
     {{0, 20, 110, 200, 1, 100}, {1, 10, 310, 400, 0, 300}}, 2, 0, 1, 0, {0, 0, 0}},
};

/* The checker's parameters for a made-up history of one name in dir. */
static void params_for(check_params *cp, const char *dir, int type, long long run_end_ms)
{
    memset(cp, 0, sizeof(*cp));
    cp->dir = dir;
    cp->names = 1;
    cp->type = type;
    cp->watchdog_ns = 1500 * MS;
    cp->blocked_ns = 10000 * MS;   /* waits are not what this checks */
    cp->free_slack_ns = 1000 * MS;
    cp->run_end = run_end_ms * MS;
}

/* A history file of dir, for writing (NULL when it cannot be made). */
static FILE *hist_file(const char *dir, const char *file)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return fopen(path, "w");
}

/* Type rate: 2 starts per 1000 ms, stamps lagging by up to 100 ms. */
typedef struct rate_hist {
    const char *what;
    long long at[6];          /* starts of name 0 (ms), by workers 0 and 1 in turn */
    int n;
    long long restart[2];     /* a restart [down, up] (ms), when up > 0 */
    long long want_over, want_reset;
} rate_hist;

static const rate_hist rate_cases[] = {
    {"rate: 2 per s, one window after the other", {0, 10, 1000, 1010, 2000}, 5, {0, 0}, 0, 0},
    {"rate: a third start 950 ms after the first (a stamp's lag)", {0, 10, 950}, 3, {0, 0}, 0, 0},
    {"rate: three starts in 500 ms", {0, 10, 500, 1600}, 4, {0, 0}, 1, 0},
    {"rate: three starts in 500 ms across a restart (allowed)", {0, 10, 500}, 3, {300, 350}, 0, 1},
};

static int run_rate_case(const rate_hist *c, const char *dir)
{
    for (int w = 0; w < 2; w++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/w%d.log", dir, w);
        FILE *f = fopen(path, "w");
        if (!f)
            return -1;
        for (int i = w; i < c->n; i += 2) {
            fprintf(f, "g %d 0 0 %lld %lld 0\n", w, (c->at[i] - 5) * MS, (c->at[i] + 1) * MS);
            fprintf(f, "G %d 0 0 %lld\n", w, c->at[i] * MS);
        }
        fclose(f);
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/coord.log", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    if (c->restart[1] > 0)
        fprintf(f, "R %lld %lld\n", c->restart[0] * MS, c->restart[1] * MS);
    fclose(f);
    check_params cp;
    params_for(&cp, dir, SAFETY_RATE, 3000);
    cp.rate = 2;
    cp.interval_ns = 1000 * MS;
    cp.stamp_slack_ns = 100 * MS;
    check_report rep;
    if (safety_check(&cp, &rep) < 0)
        return -1;
    int ok = rep.rate_over == c->want_over && rep.rate_reset == c->want_reset &&
             rep.rate_starts == c->n && safety_violations(&rep) == c->want_over;
    printf("%s %s: over %lld, across a restart %lld (want %lld, %lld)\n", ok ? "ok  " : "FAIL",
           c->what, rep.rate_over, rep.rate_reset, c->want_over, c->want_reset);
    return ok ? 0 : 1;
}

static int run_case(const hist *c, const char *dir)
{
    for (int w = 0; w < 2; w++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/w%d.log", dir, w);
        FILE *f = fopen(path, "w");
        if (!f)
            return -1;
        for (int i = 0; i < c->n; i++) {
            if (c->h[i].w != w)
                continue;
            long long acq = c->h[i].acq * MS, end = c->h[i].end * MS;
            long long call = c->h[i].call ? c->h[i].call * MS : acq - MS;
            fprintf(f, "W %d 0 0 %lld 10000 x\n", w, call);
            fprintf(f, "S %d 0 0 %llu %lld %lld x\n", w, c->h[i].term, call, acq);
            fprintf(f, "E %d 0 0 %llu %lld %lld %lld 1 1 %d %lld %d %lld x 0 1\n", w,
                    c->h[i].term, acq, end, end + MS, c->h[i].lost ? DLOCK_ENOTOWNER : 0,
                    c->h[i].lost ? end : 0LL, c->h[i].lost ? 1 : 0, end - MS);
        }
        fclose(f);
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/coord.log", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    if (c->pause.cont > 0)
        fprintf(f, "P %d 4242 %lld %lld\n", c->pause.w, c->pause.stop * MS, c->pause.cont * MS);
    fclose(f);
    check_params cp;
    params_for(&cp, dir, c->type, 1000);
    check_report rep;
    if (safety_check(&cp, &rep) < 0)
        return -1;
    int ok = rep.overlaps == c->want_overlaps && rep.token_regressions == c->want_regressions &&
             rep.shared_terms == c->want_shared;
    printf("%s %s: overlaps %lld, regressions %lld, shared terms %lld (want %lld, %lld, %lld)\n",
           ok ? "ok  " : "FAIL", c->what, rep.overlaps, rep.token_regressions, rep.shared_terms,
           c->want_overlaps, c->want_regressions, c->want_shared);
    return ok ? 0 : 1;
}

/* Type rw, writer-first: worker 0 reads 100..500 ms; worker 1's writer calls
 * at 150 and gets in at 520; worker 0's second thread calls a read at
 * `read_call` and gets it 10 ms later (held to 400). Called 25 ms or more
 * after the writer (past its first attempt), that read went past a waiting
 * writer: one violation with writer-first on, counted only with it off. */
static int run_rw_case(const char *what, const char *dir, long long read_call, int on,
                       long long want_admitted, long long want_violations)
{
    FILE *f = hist_file(dir, "w0.log");
    if (!f)
        return -1;
    fprintf(f, "W 0 0 0 %lld 10000 r\n", 99 * MS);
    fprintf(f, "S 0 0 0 1 %lld %lld r\n", 99 * MS, 100 * MS);
    fprintf(f, "W 0 1 0 %lld 10000 r\n", read_call * MS);
    fprintf(f, "S 0 1 0 2 %lld %lld r\n", read_call * MS, (read_call + 10) * MS);
    fprintf(f, "E 0 1 0 2 %lld %lld %lld 1 1 0 0 0 %lld r 5 5\n", (read_call + 10) * MS,
            400 * MS, 401 * MS, 399 * MS);
    fprintf(f, "E 0 0 0 1 %lld %lld %lld 1 1 0 0 0 %lld r 5 5\n", 100 * MS, 500 * MS, 501 * MS,
            499 * MS);
    fclose(f);
    if (!(f = hist_file(dir, "w1.log")))
        return -1;
    fprintf(f, "W 1 0 0 %lld 10000 w\n", 150 * MS);
    fprintf(f, "S 1 0 0 3 %lld %lld w\n", 150 * MS, 520 * MS);
    fprintf(f, "E 1 0 0 3 %lld %lld %lld 1 1 0 0 0 %lld w 5 6\n", 520 * MS, 600 * MS, 601 * MS,
            599 * MS);
    fclose(f);
    if (!(f = hist_file(dir, "coord.log")))
        return -1;
    fclose(f);
    check_params cp;
    params_for(&cp, dir, SAFETY_RW, 1000);
    cp.writer_first = on;
    cp.wf_margin_ns = 25 * MS;
    check_report rep;
    if (safety_check(&cp, &rep) < 0)
        return -1;
    int ok = rep.wf_admitted == want_admitted && rep.wf_violations == want_violations &&
             rep.wf_waits == 1 && rep.overlaps == 0;
    printf("%s %s: reads past a waiting writer %lld, violations %lld, write waits checked %lld "
           "(want %lld, %lld, 1)\n",
           ok ? "ok  " : "FAIL", what, rep.wf_admitted, rep.wf_violations, rep.wf_waits,
           want_admitted, want_violations);
    return ok ? 0 : 1;
}

/* Type handover: worker 0 holds token 10 from 100 ms, hands it over at 200
 * (answered 201); its second owner adopts it (called 230, answered 240,
 * released 300), or never does (adopt 0: killed in the gap), or is refused
 * (adopt -1, answered 240). Worker 1 gets token 11 at `intruder` ms for 20
 * ms. A restart [210, 220] when `restart`. */
static int run_handover_case(const char *what, const char *dir, int adopt, long long intruder,
                             int restart, long long want_overlaps, long long want_regressions,
                             long long want_lost)
{
    FILE *f = hist_file(dir, "w0.log");
    if (!f)
        return -1;
    fprintf(f, "W 0 0 0 %lld 10000 x\n", 99 * MS);
    fprintf(f, "S 0 0 0 10 %lld %lld x\n", 99 * MS, 100 * MS);
    fprintf(f, "E 0 0 0 10 %lld %lld %lld 1 1 0 0 0 %lld h 0 1\n", 100 * MS, 200 * MS,
            201 * MS, 150 * MS);
    if (adopt > 0) {
        fprintf(f, "S 0 0 0 10 %lld %lld a\n", 230 * MS, 240 * MS);
        fprintf(f, "E 0 0 0 10 %lld %lld %lld 1 1 0 0 0 %lld x 1 2\n", 240 * MS, 300 * MS,
                301 * MS, 250 * MS);
    } else if (adopt < 0) {
        fprintf(f, "F 0 0 0 %lld %lld %d a\n", 230 * MS, 240 * MS, DLOCK_ENOTOWNER);
    }
    fclose(f);
    if (!(f = hist_file(dir, "w1.log")))
        return -1;
    fprintf(f, "W 1 0 0 %lld 10000 x\n", (intruder - 1) * MS);
    fprintf(f, "S 1 0 0 11 %lld %lld x\n", (intruder - 1) * MS, intruder * MS);
    fprintf(f, "E 1 0 0 11 %lld %lld %lld 1 1 0 0 0 %lld x 2 3\n", intruder * MS,
            (intruder + 20) * MS, (intruder + 21) * MS, (intruder + 10) * MS);
    fclose(f);
    if (!(f = hist_file(dir, "coord.log")))
        return -1;
    if (restart)
        fprintf(f, "R %lld %lld\n", 210 * MS, 220 * MS);
    fclose(f);
    check_params cp;
    params_for(&cp, dir, SAFETY_HANDOVER, 3000);
    check_report rep;
    if (safety_check(&cp, &rep) < 0)
        return -1;
    int ok = rep.overlaps == want_overlaps && rep.token_regressions == want_regressions &&
             rep.handovers_lost == want_lost && rep.handovers == 1 &&
             rep.handovers_adopted == (adopt > 0);
    printf("%s %s: overlaps %lld, regressions %lld, hand-overs lost %lld (want %lld, %lld, "
           "%lld)\n",
           ok ? "ok  " : "FAIL", what, rep.overlaps, rep.token_regressions, rep.handovers_lost,
           want_overlaps, want_regressions, want_lost);
    return ok ? 0 : 1;
}

/* Type barrier, 2 parties: worker 0 enters (called 100, in at 200), worker 1
 * (called `call1`, in at 200 or 10 ms after its call); worker 0 leaves (sent 300, all gone at 400),
 * worker 1 leaves (sent `leave1`, or never: killed at 250 when `killed`).
 * `third`: worker 1's second thread also in the round (left at 295). */
static int run_barrier_case(const char *what, const char *dir, long long call1, long long leave1,
                            int killed, int third, long long want_early_enter,
                            long long want_early_leave, long long want_over)
{
    FILE *f = hist_file(dir, "w0.log");
    if (!f)
        return -1;
    fprintf(f, "B 0 0 77 %lld %lld 0\n", 100 * MS, 200 * MS);
    fprintf(f, "v 0 0 77 %lld\n", 300 * MS);
    fprintf(f, "V 0 0 77 %lld %lld 0\n", 300 * MS, 400 * MS);
    fclose(f);
    if (!(f = hist_file(dir, "w1.log")))
        return -1;
    fprintf(f, "B 1 0 77 %lld %lld 0\n", call1 * MS, (call1 + 10 > 200 ? call1 + 10 : 200) * MS);
    if (third)
        fprintf(f, "B 1 1 77 %lld %lld 0\nv 1 1 77 %lld\nV 1 1 77 %lld %lld 0\n", 150 * MS,
                200 * MS, 295 * MS, 295 * MS, 400 * MS);
    if (!killed) {
        fprintf(f, "v 1 0 77 %lld\n", leave1 * MS);
        fprintf(f, "V 1 0 77 %lld %lld 0\n", leave1 * MS, (leave1 + 100) * MS);
    }
    fclose(f);
    if (!(f = hist_file(dir, "coord.log")))
        return -1;
    if (killed)
        fprintf(f, "K 1 4242 %lld\n", 250 * MS);
    fclose(f);
    check_params cp;
    params_for(&cp, dir, SAFETY_BARRIER, 3000);
    cp.parties = 2;
    check_report rep;
    if (safety_check(&cp, &rep) < 0)
        return -1;
    int ok = rep.bar_early_enter == want_early_enter && rep.bar_early_leave == want_early_leave &&
             rep.bar_over == want_over && rep.bar_rounds == 1;
    printf("%s %s: opened early %lld, left early %lld, over N %lld (want %lld, %lld, %lld)\n",
           ok ? "ok  " : "FAIL", what, rep.bar_early_enter, rep.bar_early_leave, rep.bar_over,
           want_early_enter, want_early_leave, want_over);
    return ok ? 0 : 1;
}

int main(void)
{
    char dir[] = "/tmp/dlock-check-selftest-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    int failed = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        failed += run_case(&cases[i], dir) != 0;
    failed += run_rw_case("writer-first: a read called past the waiting writer", dir, 300, 1, 1,
                          1) != 0;
    failed += run_rw_case("writer-first off: the same read, counted", dir, 300, 0, 1, 0) != 0;
    failed += run_rw_case("writer-first: a read called with the writer (before its intent)", dir,
                          160, 1, 0, 0) != 0;
    for (size_t i = 0; i < sizeof(rate_cases) / sizeof(rate_cases[0]); i++)
        failed += run_rate_case(&rate_cases[i], dir) != 0;
    failed += run_barrier_case("barrier: a clean round", dir, 150, 290, 0, 0, 0, 0, 0) != 0;
    failed += run_barrier_case("barrier: an enter returned before the other party came", dir,
                               250, 290, 0, 0, 1, 0, 0) != 0;
    failed += run_barrier_case("barrier: a leave done before the other member left", dir, 150,
                               450, 0, 0, 0, 1, 0) != 0;
    failed += run_barrier_case("barrier: a leave done past a killed member (allowed)", dir, 150,
                               0, 1, 0, 0, 0, 0) != 0;
    failed += run_barrier_case("barrier: three members for two parties", dir, 150, 290, 0, 1, 0,
                               0, 1) != 0;
    failed += run_handover_case("hand-over: adopted, the next holder after", dir, 1, 320, 0, 0,
                                0, 0) != 0;
    failed += run_handover_case("hand-over: another holder granted in the gap", dir, 1, 215, 0,
                                1, 1, 0) != 0;
    failed += run_handover_case("hand-over never adopted: another holder within its TTL", dir,
                                0, 1200, 0, 1, 0, 0) != 0;
    failed += run_handover_case("hand-over never adopted: another holder after its TTL", dir, 0,
                                1750, 0, 0, 0, 0) != 0;
    failed += run_handover_case("hand-over: adoption refused with no fault", dir, -1, 260, 0, 0,
                                0, 1) != 0;
    failed += run_handover_case("hand-over: adoption refused after a restart (allowed)", dir, -1,
                                260, 1, 0, 0, 0) != 0;
    const char *files[] = {"w0.log", "w1.log", "coord.log"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[300];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    printf("%s\n", failed ? "FAILED" : "all verdicts as expected");
    return failed ? 1 : 0;
}
