/* The safety harness: shared definitions of the worker, the coordinator and
 * the checker.
 *
 * Workers (processes x threads) loop: acquire one of a few lock names, do a
 * guarded read-modify-write on a counter in a separate "storage" Redis through
 * a fencing-aware guard script (type rw: or, under the read lock, two guarded
 * reads), release. Every step is appended to a history
 * file as one line (one write(2) each, so a kill loses at most the step in
 * progress). The coordinator injects faults and logs them; the checker reads
 * everything and looks for violations. Times are CLOCK_MONOTONIC nanoseconds,
 * which every process of the machine shares (network namespaces included). */
#ifndef DLOCK_SAFETY_H
#define DLOCK_SAFETY_H

#include <stdint.h>
#include <sys/types.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SAFETY_MAX_WORKERS 64
#define SAFETY_MAX_THREADS 16
#define SAFETY_MAX_NAMES 16

/* The lock types a run can use (the coordinator's --type, the worker's type=):
 *   lock  the reentrant lock (dlock_lock_get_as), every wait 4 x watchdog + 5 s
 *   fair  the fair lock (dlock_fair_lock_get_as): most waits without limit,
 *         one in four for exactly one slot (the fair wait timeout, the same
 *         for every waiter), so that some time out and leave the queue; one
 *         hold in eight lasts 100 ms longer, so that queues form
 *   rw    the read-write lock: each operation picks the read lock (two reads
 *         of the counter, which must agree) or the write lock (the
 *         read-modify-write of the other types)
 *   sem   the permit-expirable semaphore, SAFETY_SEM_PERMITS watchdog permits
 *         per name: a hold is one permit (no guarded operations: permits
 *         share the resource, there is no fencing token; the check is that
 *         no more than the limit are in use, and that a dead holder's permit
 *         comes back within the watchdog timeout + 1 s)
 *   latch the count-down latch: the coordinator sets a latch per round and
 *         the workers' threads take turns to count it down or await it; the
 *         check is that no awaiter returns before the count reached zero
 *   elect leader election (dlock_election_get_as): a hold is a term, won by
 *         dlock_election_campaign (every wait 4 x watchdog + 5 s) and ended by
 *         dlock_election_resign; the term is the fencing token of the guarded
 *         operations. The checks are the lock's (no two leaders at once,
 *         leadership passed on within watchdog + 1 s of a leader's death)
 *         plus terms: strictly increasing per name, and never one term for
 *         two leaders
 *   rate  the rate limiter through the command: each thread runs `dlock run
 *         --rate N/INTERVAL <prefix>:rate:<k> -- <worker> stamp ...` (the
 *         rate and interval the coordinator gives), whose CMD appends a G
 *         record as it starts; the check is that no name ever has more than
 *         N starts in any INTERVAL (less the stamp's own start-up latency,
 *         which can only draw starts apart), a server restart's window
 *         excepted (without persistence the limiter's grants go with it)
 *   handover the reentrant lock handed over: each thread has two owner ids
 *         (two handles per name); after its guarded operations, one hold in
 *         two is handed to the thread's second owner (dlock_lock_transfer)
 *         instead of released, which adopts it after a random gap of up to
 *         HANDOVER_GAP_MS (dlock_lock_adopt), does its own guarded operations
 *         with the same token and releases. The lock's checks, with the giver's
 *         hold lasting until the adoption (or, never adopted, until the TTL the
 *         transfer guarantees ran out): nobody else may get the lock in the
 *         gap, and no hand-over is lost unless a fault explains it
 *   barrier the double barrier: every thread of every worker is a party of
 *         one barrier for procs x threads parties (workers' parties=);
 *         each enters, stays in for up to hold_ms, leaves, and again. The
 *         checks: no round has more than N members; no member's enter
 *         returns before another member of its round called enter (opened
 *         early); no leave returns all-gone before another member of its
 *         round left, unless that one was dropped (its leave answered
 *         DLOCK_ENOTOWNER, or its worker was killed or stopped first); a
 *         restart (the barrier forgotten) excuses the rounds it cut
 *   revoke the reentrant lock with a revoke handler on every handle: a hold
 *         lasts REVOKE_HOLD_MS unless its holder hears a revoke request,
 *         which ends it early (the guarded write, then the release); each
 *         worker has one more thread that asks the holders of a random name
 *         every REVOKE_ASK_MS (dlock_lock_request_revoke). The lock's checks,
 *         and: every request that found a holder and a listener is heard by
 *         a holder that kept the lock past the request's answer by a margin,
 *         unless a fault fell in between; request -> handler latency */
typedef enum {
    SAFETY_LOCK = 0,
    SAFETY_FAIR = 1,
    SAFETY_RW = 2,
    SAFETY_SEM = 3,
    SAFETY_LATCH = 4,
    SAFETY_ELECT = 5,
    SAFETY_NONREENTRANT = 6,  /* the non-reentrant lock: the lock's checks */
    SAFETY_SPIN = 7,          /* the spin lock: the lock's checks, waits on the back-off */
    SAFETY_RATE = 8,          /* the rate limiter, through dlock run --rate */
    SAFETY_HANDOVER = 9,      /* the reentrant lock, one hold in two handed over */
    SAFETY_BARRIER = 10,      /* the double barrier, every thread a party */
    SAFETY_REVOKE = 11        /* the reentrant lock, holders asked to let go */
} safety_type;
#define SAFETY_TYPE_LAST SAFETY_REVOKE
#define REVOKE_HOLD_MS 2500   /* type revoke: a hold's length when nobody asks */
#define REVOKE_ASK_MS 150     /* type revoke: each worker's asker, between requests */
#define HANDOVER_GAP_MS 60   /* the longest gap between a transfer and its adoption */

#define SAFETY_SEM_PERMITS 2
#define SAFETY_LATCH_ROUNDS 64   /* ticket slots, indexed by round % this */

static const char *const safety_type_names[] = {"lock",  "fair",  "rw",           "sem",
                                                "latch", "elect", "nonreentrant", "spin",
                                                "rate",  "handover", "barrier", "revoke"};
#define SAFETY_TYPE_LIST \
    "lock|fair|rw|sem|latch|elect|nonreentrant|spin|rate|handover|barrier|revoke"

static inline const char *safety_type_name(int type)
{
    return type > 0 && type <= SAFETY_TYPE_LAST ? safety_type_names[type] : "lock";
}

/* The type named `s`, or -1. */
static inline int safety_type_parse(const char *s)
{
    for (int t = 0; t <= SAFETY_TYPE_LAST; t++)
        if (strcmp(s, safety_type_names[t]) == 0)
            return t;
    return -1;
}

/* Types whose holds are exclusive, fenced by their token. */
static inline int safety_exclusive(int type)
{
    return type == SAFETY_LOCK || type == SAFETY_FAIR || type == SAFETY_ELECT ||
           type == SAFETY_NONREENTRANT || type == SAFETY_HANDOVER || type == SAFETY_REVOKE;
}

/* History records (one line each, space separated):
 *   W <w> <t> <name> <t_call> <wait> <side>        waiting starts
 *   S <w> <t> <name> <token> <t_call> <t_acq> <side>  acquired
 *   F <w> <t> <name> <t_call> <t_ret> <rc> <side>  acquire failed (timeout/error)
 *   E <w> <t> <name> <token> <t_acq> <t_end> <t_rel> <op1_ok> <op2_ok>
 *     <release_rc> <lost_at> <lost_reason> <t_op2> <side> <v1> <v2>
 *                                                   hold ended
 * <w> worker id, <t> thread index, <name> name index, <wait> the wait given in
 * ms (-1: no limit). <side>: x a hold of the whole lock (types lock and fair),
 * r the read lock, w the write lock (type rw). A hold does two guarded
 * operations: an exclusive or write hold reads the counter (op1, value v1)
 * then writes v1 + 1 (op2, v2 = the value written); a read hold reads it twice
 * (v1, v2; the second read's value is recorded even when the fence refused it).
 * op1_ok/op2_ok: 1 accepted, 0 refused by the fence, -1 storage error (op2 is
 * not sent, 0, when op1 was not accepted). t_op2: before op2 was sent.
 * lost_at: 0 or when the lost callback fired for this hold; lost_reason the
 * dlock_lost_reason | the dlock_lost_cause << 8. The checker reads
 * the side, the wait and the values when present (records without them are
 * exclusive holds). Type handover: side h in an E record, a hold handed over
 * (release_rc the transfer's status, t_end sent before it, t_rel after it);
 * side a in an S record, the hold adopted (t_call when the adoption was
 * sent, the giver's token), in an F record an adoption that failed.
 * Type barrier:
 *   B <w> <t> <round> <t_call> <t_ret> <rc>   an enter (round 0 unless rc 0)
 *   v <w> <t> <round> <t_call>                a leave sent (before it)
 *   V <w> <t> <round> <t_call> <t_ret> <rc>   a leave of that round, answered
 * Type revoke:
 *   Q <w> <name> <t_sent> <t_ret> <rc> <holders> <listeners>   a request
 *   Y <w> <t> <name> <token> <t_heard>        a holder's handler heard one
 * Coordinator records:
 *   K <w> <pid> <t>                 SIGKILL
 *   P <w> <pid> <t_stop> <t_cont>   SIGSTOP .. SIGCONT
 *   R <t_down> <t_up>               lock server restarted (no persistence)
 *   C <t_start> <t_end>             CLIENT PAUSE ALL
 *   N <w> <t_cut> <t_heal>          worker w partitioned from the lock server
 *   O <t_fault> <t_switched>        a failover of the lock deployment (the
 *                                   primary killed or CLUSTER FAILOVER) until
 *                                   the new primary was seen serving
 *   J <t_step> <t_done>             the lock server's clock stepped forward:
 *                                   the proxy's TIME answers moved, then every
 *                                   lock key's TTL cut by as much
 * Type sem: the token of S and E records is the thread's hold number (no
 * fencing), and the coordinator adds, per permit a killed worker held:
 *   X <w> <name> <t_kill> <t_back>  when the permit was back in the pool (its
 *                                   lease over, by the server's clock), or
 *                                   t_back = -1 when not within 10 s
 * Type latch (r: the round, latch <prefix>:latch:<r>):
 *   L <r> <t_set> <count>           the coordinator set the latch
 *   d <w> <t> <r> <t_sent>          a count-down is about to be sent
 *   D <w> <t> <r> <t_sent> <t_done> <rc>   and its outcome
 *   A <w> <t> <r> <t_call> <t_ret> <rc>    an await and its outcome
 * Type rate (k: the name index):
 *   G <w> <t> <k> <t_start>         a run's command started (written by it)
 *   g <w> <t> <k> <t_call> <t_ret> <status>   a dlock run ended: its exit
 *                                   status (0: the command ran), -1 killed by
 *                                   a signal, -2 ended by the worker's stop */

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
    volatile char permit[40];     /* type sem: the permit held (32 hex), set before
                                   * phase becomes PH_HOLDING */
} safety_slot;

typedef struct safety_shm {
    safety_slot slot[SAFETY_MAX_WORKERS][SAFETY_MAX_THREADS];
    /* Type latch: the round the coordinator has set (0: none yet), each
     * round's count, and its tickets: the threads that take one of the first
     * `count` count down, the others await. */
    volatile int64_t latch_round;
    volatile int32_t latch_count[SAFETY_LATCH_ROUNDS];
    int32_t latch_tickets[SAFETY_LATCH_ROUNDS];   /* __atomic_fetch_add */
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

/* The read-write lock's resource: concurrent readers hold tokens in any order,
 * so a read must not raise the mark writers set (an older reader still
 * holding would be refused). Two marks: the writers' (raised by write holds'
 * operations) and the readers' (raised by reads of read holds). A reader is
 * refused below the writers' mark (a writer came after it: it lost its lock);
 * a writer below either mark (a newer reader or writer came after it). A read
 * hold's second read ("look") answers the value even when refused: two
 * different values under one read hold that was not lost show a writer got
 * in beside it, whatever the fence made of it.
 *   KEYS: write mark, value, accepted, refused, read mark
 *   ARGV: op ("peek" / "look" a read hold's first / second read, "read" /
 *         "write" a write hold's), token, value
 *   returns {1, value} read accepted, {1} write accepted, {0} refused, and
 *   {0, value} a refused look */
#define SAFETY_GUARD_RW_LUA                                                       \
    "local wmark = tonumber(redis.call('get', KEYS[1]) or '0')\n"                \
    "local rmark = tonumber(redis.call('get', KEYS[5]) or '0')\n"                \
    "local tok = tonumber(ARGV[2])\n"                                             \
    "if ARGV[1] == 'peek' or ARGV[1] == 'look' then\n"                           \
    "  local v = tonumber(redis.call('get', KEYS[2]) or '0')\n"                  \
    "  if tok < wmark then\n"                                                    \
    "    redis.call('incr', KEYS[4])\n"                                          \
    "    if ARGV[1] == 'look' then return {0, v} end\n"                          \
    "    return {0}\n"                                                           \
    "  end\n"                                                                    \
    "  if tok > rmark then redis.call('set', KEYS[5], ARGV[2]) end\n"            \
    "  return {1, v}\n"                                                          \
    "end\n"                                                                      \
    "if tok < wmark or tok < rmark then redis.call('incr', KEYS[4]) return {0} end\n" \
    "if tok > wmark then redis.call('set', KEYS[1], ARGV[2]) end\n"              \
    "if ARGV[1] == 'read' then\n"                                                \
    "  return {1, tonumber(redis.call('get', KEYS[2]) or '0')}\n"                \
    "end\n"                                                                      \
    "redis.call('set', KEYS[2], ARGV[3])\n"                                      \
    "redis.call('incr', KEYS[3])\n"                                              \
    "return {1}\n"

/* sigstop --stop-spread: pauses of 0, 0.5, ..., 3 x the lease. */
#define SAFETY_SPREAD_STEPS 7

/* What the checker needs besides the histories. */
typedef struct check_params {
    const char *dir;          /* history files w*.log and coord.log */
    int names;
    int type;                 /* safety_type */
    int64_t watchdog_ns;
    int64_t quarantine_ns;    /* the workers' failover quarantine (0: none): after a
                                 failover nobody is granted a lock that long */
    int64_t lost_release_ns;  /* a failover that drops writes: a release the new primary
                                 never received leaves the key there up to a lease */
    int64_t blocked_ns;       /* a wait with the lock free this long is a violation */
    int64_t free_slack_ns;    /* allowed beyond the watchdog to free a dead holder's lock */
    int64_t run_end;
    int64_t slot_ns;          /* fair: every waiter's slot (= a limited wait) */
    int64_t fair_margin_ns;   /* fair: "clearly earlier" (covers call to first attempt) */
    int64_t recover_ns;       /* fair: how long after a fault ends calls may still be slow */
    long long value[SAFETY_MAX_NAMES], accepted[SAFETY_MAX_NAMES], refused[SAFETY_MAX_NAMES];
    int storage_ok;           /* the storage counters above were read */
    int permits;              /* sem: the limit per name */
    int writer_first;         /* rw: the workers' handles are writer-first */
    int64_t wf_margin_ns;     /* rw: a writer's first attempt is sent within this of its call */
    int rate;                 /* rate: starts per interval per name */
    int64_t interval_ns;      /* rate: the interval */
    int64_t stamp_slack_ns;   /* rate: the most a start's stamp may lag its grant */
    int parties;              /* barrier: N */
    int64_t revoke_margin_ns; /* revoke: a holder that kept the lock this long past a
                                 request's answer must have heard it */
} check_params;

typedef struct check_report {
    long long holds, waits, wait_failures, errors, refused_reads, refused_writes;
    long long overlaps, allowed_overlaps, lost_updates, token_regressions, blocked;
    long long shared_terms;   /* elect: one term, two leaders */
    long long kills, kill_measured, stops, stop_holds, stop_passed, stop_told, stop_late_refused;
    long long stop_next;          /* paused holds another worker's hold followed */
    long long stop_before_told;   /* ... that began before the paused holder's lost callback */
    /* Per pause length, in steps of half the lease (--stop-spread: 0 .. 3 x;
     * the last step also counts longer pauses): paused holds, holds lost,
     * next holds by others, and those that began before the lost callback. */
    long long step_holds[SAFETY_SPREAD_STEPS], step_lost[SAFETY_SPREAD_STEPS];
    long long step_next[SAFETY_SPREAD_STEPS], step_before[SAFETY_SPREAD_STEPS];
    long long restarts, restart_holds, restart_told, pauses, partitions, part_holds, part_told;
    long long part_late, expectation_failures, others_during_partition;
    long long lost_holds, release_errors, failovers;
    /* clock-jump: J records (the server's TIME stepped forward), those that
     * a hold lost with cause "server clock jumped" followed within a lease,
     * and such holds */
    long long clock_jumps, clock_jumps_detected, clock_jump_lost;
    /* failovers: from each O record's start to the first grant after it */
    long long failover_gaps;
    double failover_gap_ms_sum, failover_gap_ms_max;
    /* fair */
    long long fair_checks, fair_violations, fair_waits, fair_exempt, fair_close, fair_timeouts;
    /* rw */
    long long read_holds, write_holds, read_overlaps, torn_reads, torn_lost;
    /* rw: write waits that acquired with read holds of others around (no
     * fault of theirs), read holds that began past one of them (a violation
     * with writer-first), the longest of those waits */
    long long wf_waits, wf_admitted, wf_violations;
    double wf_longest_wait_ms;
    /* handover: holds handed over, of them adopted, never adopted (the
     * worker killed or stopped in the gap, the adoption refused after a
     * fault), adoptions refused with no fault around (violations); the
     * longest gap from a transfer's answer to its adoption */
    long long handovers, handovers_adopted, handovers_unadopted, handovers_lost;
    double handover_gap_max_ms;
    /* barrier: rounds opened (recorded), enters and leaves answered, rounds
     * with more than N members, enters that returned before a member of
     * their round called (opened early), leaves that returned all-gone
     * before a member left (left early), rounds a restart cut (exempt),
     * leaves that waited for a killed or stopped member */
    long long bar_rounds, bar_enters, bar_leaves, bar_over, bar_early_enter, bar_early_leave;
    long long bar_reset, bar_waited_dead;
    /* revoke: requests made, that found a holder, and a listener too; holds
     * that heard one (cut short); requests a holder kept the lock past
     * without hearing (no fault around: expectation failures); latency
     * from a request's send to the handler, p50 and max */
    long long rv_requests, rv_held, rv_listened, rv_heard, rv_unheard;
    double rv_p50_ms, rv_max_ms;
    /* sem */
    long long sem_max_in_use, sem_permits_back, sem_back_late;
    double sem_worst_back_ms;
    /* rate: starts stamped, runs that did not start (and of them errors:
     * neither 75, busy, nor ended by the stop), windows over the rate
     * (violations) and over it across a server restart (allowed), the most
     * starts in one checked window (interval - stamp slack; none across a
     * restart), the shortest
     * span of rate + 1 starts */
    long long rate_starts, rate_unstarted, rate_errors, rate_over, rate_reset, rate_max_in_window;
    double rate_tightest_ms;
    /* latch */
    long long latch_rounds, latch_countdowns, latch_awaits, latch_released, latch_timeouts,
        latch_early, latch_reset;
    double worst_free_ms, worst_report_ms, min_part_margin_ms, worst_close_ms;
    char first_problem[512];
} check_report;

/* What fails a run outright (expectation failures are counted apart). */
static inline long long safety_violations(const check_report *r)
{
    return r->overlaps + r->lost_updates + r->token_regressions + r->shared_terms + r->blocked +
           r->fair_violations + r->torn_reads + r->latch_early + r->wf_violations +
           r->rate_over + r->handovers_lost + r->bar_over + r->bar_early_enter +
           r->bar_early_leave;
}

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
