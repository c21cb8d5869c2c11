/* dlock check and dlock exporter: what they share. One pass over the
 * family in Redis: the held locks, semaphores, latches and rate limiters in
 * one walk of the keyspace (dlock_client_walk: SCAN, the library's batches of COUNT 200,
 * never KEYS); then a snapshot of each name kept, with its waiters
 * (dlock_client_inspect). */
#ifndef DLOCK_CLI_MONITOR_H
#define DLOCK_CLI_MONITOR_H

#include <stdatomic.h>

#include "cli.h"

/* The keys of dlock's fence guards (dlock fence): its own counters. */
#define MON_FENCE_PREFIX "dlock_fence:"

/* Decides from a scan's snapshot (no waiters counted) whether a name needs a
 * full snapshot: 1 keep, 0 skip. */
typedef int (*mon_keep_fn)(const dlock_info *info, void *ud);

typedef struct mon_pass {
    /* in */
    const char *pattern;     /* a Redis glob, NULL: "*" */
    size_t limit;            /* at most this many objects looked at, 0: no limit */
    mon_keep_fn keep;        /* NULL: keep every one */
    void *keep_ud;
    const atomic_int *stop;  /* set (non-zero): the pass ends at its next step, DLOCK_ECANCELED */
    /* out */
    dlock_info **v;          /* the snapshots of the names kept (waiters counted), by name */
    size_t n;
    size_t seen;             /* objects the scans found (held locks, counts, rate limiters) */
    int truncated;           /* the limit stopped the walk */
    int64_t ms;              /* how long the pass took */
    uint64_t roundtrips;     /* requests it made (the client's statistics) */
} mon_pass;

/* Runs one pass. DLOCK_OK, DLOCK_ECANCELED (p->stop), or the first error
 * (dlock_last_error says it);
 * a name gone between its scan and its snapshot is left out. Free with
 * mon_pass_free, also after an error. */
int mon_run(dlock_client *c, mon_pass *p);
void mon_pass_free(mon_pass *p);

/* The age in ms of the hold of `owner` (a lock's owner id, or a permit id)
 * when known: a dlock run's, from its client's label. -1 unknown (a library
 * client, Redisson, a client no longer connected). */
int64_t mon_hold_age(const holder_map *m, const char *owner);
/* The oldest known hold age of the object's holders, -1 when none known. */
int64_t mon_oldest_hold(const holder_map *m, const dlock_info *info);
/* An option of check or exporter: a duration (per rule), a whole number in
 * min..max, or a string; dst is an int64_t * or a const char **. */
typedef struct mon_opt {
    const char *lng, *shrt;
    enum { MON_DUR, MON_NUM, MON_STR } kind;
    const cli_dur_rule *rule;
    int64_t min, max;
    void *dst;
} mon_opt;
/* Their arguments: the global options, opts, and at most one PATTERN. 0, or
 * -1 after a usage error. */
int mon_parse_args(cli_opts *o, const char *cmd, int argc, char **argv, const mon_opt *opts,
                   size_t nopts, const char **pattern);

/* 1 for a semaphore's or latch's count (plain or with permits). */
int mon_is_count(const dlock_info *info);

#endif
