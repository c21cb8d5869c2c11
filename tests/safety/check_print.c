/* The checker's report (safety_print_report). */
#include <stdio.h>

#include "check.h"

/* The faults, the violations (one kind: `what`) and the expectations. */
static void print_tail(FILE *out, const check_report *r, long long violations, const char *what,
                       long long n)
{
    fprintf(out, "  faults: %lld SIGKILL, %lld SIGSTOP, %lld restarts, %lld CLIENT PAUSE, "
                 "%lld partitions\n",
            r->kills, r->stops, r->restarts, r->pauses, r->partitions);
    fprintf(out, "  violations: %lld  (%s %lld)\n", violations, what, n);
    fprintf(out, "  expectations failed: %lld%s%s\n", r->expectation_failures,
            r->first_problem[0] ? "; first problem: " : "", r->first_problem);
}

void safety_print_report(const char *scenario, const check_params *cp, const check_report *r,
                         double seconds, FILE *out)
{
    long long accepted = 0, refused = 0;
    for (int k = 0; k < cp->names; k++) {
        accepted += cp->accepted[k];
        refused += cp->refused[k];
    }
    long long violations = safety_violations(r);
    char label[64];
    if (cp->type == SAFETY_LOCK)
        snprintf(label, sizeof(label), "%s", scenario);
    else
        snprintf(label, sizeof(label), "%s/%s", safety_type_name(cp->type), scenario);
    if (cp->type == SAFETY_LATCH) {   /* no holds: rounds, count-downs, awaits */
        fprintf(out, "scenario %-10s %6.1f s  %lld latch rounds, %lld count-downs, %lld awaits\n",
                label, seconds, r->latch_rounds, r->latch_countdowns, r->latch_awaits);
        fprintf(out, "  awaits: %lld released at zero, %lld timed out (a count-downer killed, "
                     "stopped or cut off), %lld released by a restart (the latch forgotten)\n",
                r->latch_released, r->latch_timeouts, r->latch_reset);
        print_tail(out, r, violations, "latch released early", r->latch_early);
        return;
    }
    if (cp->type == SAFETY_BARRIER) {   /* no holds: rounds of a double barrier */
        fprintf(out, "scenario %-10s %6.1f s  %lld barrier rounds of %d parties, %lld enters, "
                     "%lld leaves\n",
                label, seconds, r->bar_rounds, cp->parties, r->bar_enters, r->bar_leaves);
        fprintf(out, "  rounds over N %lld, opened early %lld, left early %lld; leaves that went "
                     "on past a killed or stopped member %lld; rounds a restart cut (not "
                     "checked) %lld\n",
                r->bar_over, r->bar_early_enter, r->bar_early_leave, r->bar_waited_dead,
                r->bar_reset);
        print_tail(out, r, violations, "barrier released early",
                   r->bar_over + r->bar_early_enter + r->bar_early_leave);
        return;
    }
    if (cp->type == SAFETY_RATE) {   /* no holds: starts of dlock run --rate */
        fprintf(out, "scenario %-10s %6.1f s  %lld starts (%.0f/s) at %d per %.0f ms per name, "
                     "%lld runs not started (%lld errors)\n",
                label, seconds, r->rate_starts, seconds > 0 ? r->rate_starts / seconds : 0.0,
                cp->rate, cp->interval_ns / 1e6, r->rate_unstarted, r->rate_errors);
        fprintf(out, "  rate: at most %lld starts in %.0f ms (the interval less %.0f ms a stamp "
                     "may lag its grant); the shortest span of %d starts %.1f ms; over the rate "
                     "across a restart: %lld (allowed)\n",
                r->rate_max_in_window, (cp->interval_ns - cp->stamp_slack_ns) / 1e6,
                cp->stamp_slack_ns / 1e6, cp->rate + 1, r->rate_tightest_ms, r->rate_reset);
        print_tail(out, r, violations, "over the rate", r->rate_over);
        return;
    }
    fprintf(out, "scenario %-10s %6.1f s  %lld holds (%.0f/s), %lld guarded writes accepted, "
                 "%lld stale reads/writes refused by fencing\n",
            label, seconds, r->holds, seconds > 0 ? r->holds / seconds : 0.0, accepted, refused);
    fprintf(out, "  waits %lld: %lld gave up or failed (%lld errors); holds reported lost %lld; "
                 "release errors %lld\n",
            r->waits, r->wait_failures, r->errors, r->lost_holds, r->release_errors);
    fprintf(out, "  violations: %lld  (overlap %lld, lost update %lld, token regression %lld, "
                 "blocked while free %lld",
            violations, r->overlaps, r->lost_updates, r->token_regressions, r->blocked);
    if (cp->type == SAFETY_ELECT)
        fprintf(out, ", two leaders in one term %lld", r->shared_terms);
    if (cp->type == SAFETY_FAIR)
        fprintf(out, ", fair order %lld", r->fair_violations);
    if (cp->type == SAFETY_RW)
        fprintf(out, ", torn read %lld", r->torn_reads);
    if (cp->type == SAFETY_RW && cp->writer_first)
        fprintf(out, ", read past a waiting writer %lld", r->wf_violations);
    if (cp->type == SAFETY_LATCH)
        fprintf(out, ", latch released early %lld", r->latch_early);
    fprintf(out, ")\n");
    if (cp->type == SAFETY_SEM)
        fprintf(out, "  semaphore: limit %d per name, at most %lld in use (holds not lost); "
                     "over the limit with a lost holder: %lld (allowed)\n",
                cp->permits, r->sem_max_in_use, r->allowed_overlaps);
    if (cp->type == SAFETY_SEM && r->sem_permits_back)
        fprintf(out, "  killed holders' permits: %lld timed, worst back after %.0f ms (watchdog "
                     "%.0f ms + %.0f ms allowed), %lld late\n",
                r->sem_permits_back, r->sem_worst_back_ms, cp->watchdog_ns / 1e6,
                cp->free_slack_ns / 1e6, r->sem_back_late);
    if (cp->type == SAFETY_LATCH)
        fprintf(out, "  latch: %lld rounds, %lld count-downs, %lld awaits: %lld released at "
                     "zero, %lld timed out, %lld released by a restart (the latch forgotten), "
                     "%lld early\n",
                r->latch_rounds, r->latch_countdowns, r->latch_awaits, r->latch_released,
                r->latch_timeouts, r->latch_reset, r->latch_early);
    if (cp->type == SAFETY_FAIR)
        fprintf(out, "  fair order: %lld checks (%lld against an earlier waiter that timed out or "
                     "was cancelled) among %lld clean waits (%lld exempt: fault windows, errors); "
                     "%lld violations; %lld grants out of call order within the %.0f ms margin "
                     "(widest %.1f ms)\n",
                r->fair_checks, r->fair_timeouts, r->fair_waits, r->fair_exempt,
                r->fair_violations, r->fair_close, cp->fair_margin_ns / 1e6, r->worst_close_ms);
    if (cp->type == SAFETY_RW)
        fprintf(out, "  read-write: %lld read holds (%lld began beside another read hold), %lld "
                     "write holds; torn reads %lld (and %lld by readers that had lost their "
                     "lock: allowed)\n",
                r->read_holds, r->read_overlaps, r->write_holds, r->torn_reads, r->torn_lost);
    if (cp->type == SAFETY_RW)
        fprintf(out, "  writer-first %s: %lld write waits among read holds (no fault around "
                     "them), the longest %.0f ms; %lld read holds began past a waiting writer%s\n",
                cp->writer_first ? "on" : "off", r->wf_waits, r->wf_longest_wait_ms,
                r->wf_admitted, cp->writer_first ? " (violations)" : " (Redisson's rules allow it)");
    if (cp->type == SAFETY_HANDOVER)
        fprintf(out, "  hand-over: %lld holds handed over, %lld adopted (longest gap %.1f ms, "
                     "nobody else granted in it), %lld never adopted, of them %lld with no "
                     "fault to explain it (lost)\n",
                r->handovers, r->handovers_adopted, r->handover_gap_max_ms,
                r->handovers_unadopted, r->handovers_lost);
    if (cp->type == SAFETY_REVOKE)
        fprintf(out, "  revoke requests: %lld, %lld found a holder, %lld with a listener; %lld "
                     "holds let go on hearing one (request -> handler p50 %.2f ms, max %.1f ms); "
                     "%lld kept past one unheard\n",
                r->rv_requests, r->rv_held, r->rv_listened, r->rv_heard, r->rv_p50_ms,
                r->rv_max_ms, r->rv_unheard);
    if (r->allowed_overlaps && cp->type != SAFETY_SEM)
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
    if (r->stops)
        fprintf(out, "  SIGSTOP: %lld of the %lld next holds by others began before the paused "
                     "holder's lost callback (lock-delay: 0 when it is at least the pause past "
                     "the lease)\n",
                r->stop_before_told, r->stop_next);
    for (int k = 0; r->stops && k < SAFETY_SPREAD_STEPS; k++)
        if (r->step_holds[k])
            fprintf(out, "  SIGSTOP %s%.1f x lease: %lld paused holds, %lld lost, %lld next holds "
                         "by others, %lld of them before the lost callback\n",
                    k == SAFETY_SPREAD_STEPS - 1 ? ">= " : "", k / 2.0, r->step_holds[k],
                    r->step_lost[k], r->step_next[k], r->step_before[k]);
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
    if (r->partitions && cp->type == SAFETY_SEM)
        fprintf(out, "  partition x%lld: %lld cut-off permit holds, %lld told; %lld holds by the "
                     "others meanwhile\n",
                r->partitions, r->part_holds, r->part_told, r->others_during_partition);
    else if (r->partitions)
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
