/* The safety harness: shared definitions of the worker, the coordinator and
 * the checker.
 *
 * Workers (processes x threads) loop: acquire one of a few lock names, do a
 * guarded read-modify-write on a counter in a separate "storage" Redis through
 * a fencing-aware guard script, release. Every step is appended to a history
 * file as one line (one write(2) each, so a kill loses at most the step in
 * progress). The coordinator injects faults and logs them; the checker reads
 * everything and looks for violations. Times are CLOCK_MONOTONIC nanoseconds,
 * which every process of the machine shares (network namespaces included). */
#ifndef DLOCK_SAFETY_H
#define DLOCK_SAFETY_H

#include <stdint.h>
#include <sys/types.h>
#include <stdio.h>
#include <time.h>

#define SAFETY_MAX_WORKERS 64
#define SAFETY_MAX_THREADS 16
#define SAFETY_MAX_NAMES 16

/* History records (one line each, space separated):
 *   W <w> <t> <name> <t_call>                      waiting starts
 *   S <w> <t> <name> <token> <t_call> <t_acq>      acquired
 *   F <w> <t> <name> <t_call> <t_ret> <rc>         acquire failed (timeout/error)
 *   E <w> <t> <name> <token> <t_acq> <t_end> <t_rel> <read_ok> <write_ok>
 *     <release_rc> <lost_at> <lost_reason> <t_write>  hold ended (t_write: before
 *     the write was sent)
 * <w> worker id, <t> thread index, <name> name index. read_ok/write_ok: 1
 * accepted, 0 refused by the fence, -1 storage error. lost_at: 0 or when the
 * lost callback fired for this hold.
 * Coordinator records:
 *   K <w> <pid> <t>                 SIGKILL
 *   P <w> <pid> <t_stop> <t_cont>   SIGSTOP .. SIGCONT
 *   R <t_down> <t_up>               lock server restarted (no persistence)
 *   C <t_start> <t_end>             CLIENT PAUSE ALL
 *   N <w> <t_cut> <t_heal>          worker w partitioned from the lock server */

/* Per-thread state the coordinator reads (file-backed shared memory), to pick
 * a worker in the middle of a hold when injecting a fault. */
enum { PH_IDLE = 0, PH_WAITING = 1, PH_HOLDING = 2, PH_WRITTEN = 3 };

typedef struct safety_slot {
    volatile int32_t pid;
    volatile int32_t phase;       /* PH_* */
    volatile int32_t name;
    volatile int32_t pad;
    volatile int64_t since;       /* when the phase began */
    volatile int64_t progress;    /* last time an operation completed or failed */
    volatile int64_t ops;         /* completed guarded operations */
} safety_slot;

typedef struct safety_shm {
    safety_slot slot[SAFETY_MAX_WORKERS][SAFETY_MAX_THREADS];
} safety_shm;

/* The guarded resource (in the storage Redis, per name): it remembers the
 * highest fencing token it has seen and refuses any read or write with a lower
 * one. Reads raise the mark too: a stale holder's write after a newer holder's
 * read would otherwise slip in and be overwritten (a lost update).
 *   KEYS: mark, value, accepted, refused   ARGV: op ("read"/"write"), token, value
 *   returns {1, value} read accepted, {1} write accepted, {0} refused */
#define SAFETY_GUARD_LUA                                                          \
    "local mark = tonumber(redis.call('get', KEYS[1]) or '0')\n"                 \
    "local tok = tonumber(ARGV[2])\n"                                             \
    "if tok < mark then redis.call('incr', KEYS[4]) return {0} end\n"             \
    "if tok > mark then redis.call('set', KEYS[1], ARGV[2]) end\n"                \
    "if ARGV[1] == 'read' then\n"                                                 \
    "  return {1, tonumber(redis.call('get', KEYS[2]) or '0')}\n"                 \
    "end\n"                                                                       \
    "redis.call('set', KEYS[2], ARGV[3])\n"                                       \
    "redis.call('incr', KEYS[3])\n"                                               \
    "return {1}\n"

/* What the checker needs besides the histories. */
typedef struct check_params {
    const char *dir;          /* history files w*.log and coord.log */
    int names;
    int64_t watchdog_ns;
    int64_t blocked_ns;       /* a wait with the lock free this long is a violation */
    int64_t free_slack_ns;    /* allowed beyond the watchdog to free a dead holder's lock */
    int64_t run_end;
    long long value[SAFETY_MAX_NAMES], accepted[SAFETY_MAX_NAMES], refused[SAFETY_MAX_NAMES];
    int storage_ok;           /* the storage counters above were read */
} check_params;

typedef struct check_report {
    long long holds, waits, wait_failures, errors, refused_reads, refused_writes;
    long long overlaps, allowed_overlaps, lost_updates, token_regressions, blocked;
    long long kills, kill_measured, stops, stop_holds, stop_passed, stop_told, stop_late_refused;
    long long restarts, restart_holds, restart_told, pauses, partitions, part_holds, part_told;
    long long part_late, expectation_failures, others_during_partition;
    long long lost_holds, release_errors;
    double worst_free_ms, worst_report_ms, min_part_margin_ms;
    char first_problem[512];
} check_report;

int safety_check(const check_params *cp, check_report *rep);
void safety_print_report(const char *scenario, const check_params *cp, const check_report *rep,
                         double seconds, FILE *out);

static inline int64_t safety_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
