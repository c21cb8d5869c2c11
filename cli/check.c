/* dlock check: the locks, semaphores and latches past a threshold, for cron
 * and Nagios-style monitoring (Redisson's LockMonitor pattern). One pass
 * (monitor.c); each object past a threshold is printed with its holders;
 * exit 0 when none is, 1 when some are, the usual codes (64, 69, ...) on
 * errors. The scan's snapshots decide which names need a full one: all of
 * them when --waiters-over asks (waiters are counted only there), else only
 * those past --held-over or --queue-over already. A rate limiter has no
 * holders, queue or countable waiters: it is flagged only when its keys hold
 * other data than a limiter's (its acquisitions fail), whatever the
 * thresholds. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "monitor.h"

#define CHECK_NUM_MAX 1000000000LL

typedef struct check_args {
    int64_t held_ms;      /* -1: not asked */
    int64_t waiters;      /* -1: not asked */
    int64_t queue;        /* -1: not asked */
    const char *pattern;
} check_args;

typedef struct judge {
    const check_args *ca;
    const holder_map *map;
    size_t unjudged;      /* held, no holder's hold age known (--held-over) */
} judge;

static int parse_args(cli_opts *o, int argc, char **argv, check_args *ca)
{
    memset(ca, 0, sizeof(*ca));
    ca->held_ms = ca->waiters = ca->queue = -1;
    static const cli_dur_rule any = {1, NULL, 0, 0, NULL};
    const mon_opt opts[] = {
        {"--held-over", NULL, MON_DUR, &any, 0, 0, &ca->held_ms},
        {"--waiters-over", NULL, MON_NUM, NULL, 0, CHECK_NUM_MAX, &ca->waiters},
        {"--queue-over", NULL, MON_NUM, NULL, 0, CHECK_NUM_MAX, &ca->queue}};
    if (mon_parse_args(o, "check", argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                       &ca->pattern) != 0)
        return -1;
    if (ca->held_ms < 0 && ca->waiters < 0 && ca->queue < 0) {
        cli_usage_error(o, "check", "give a threshold: --held-over DUR, --waiters-over N or "
                                    "--queue-over N");
        return -1;
    }
    return 0;
}

/* -------------------------------------------------------------- judging */

enum { PAST_HELD = 1, PAST_WAITERS = 2, PAST_QUEUE = 4, UNJUDGED = 8, BROKEN = 16 };

/* An OVERALL rate limiter whose count or grants its snapshot cannot read:
 * they hold other data, which every acquisition refuses. */
static int broken_rate(const dlock_info *info)
{
    dlock_rate_config rc;
    return dlock_info_rate(info, &rc) == DLOCK_OK && rc.type == DLOCK_RATE_OVERALL &&
           dlock_info_count(info) < 0;
}

/* Which thresholds the snapshot is past; UNJUDGED when --held-over asks and
 * it is held by holders none of whose hold age is known. Waiters count only
 * in a full snapshot (a scan's has -1). */
static unsigned judge_info(const judge *j, const dlock_info *info)
{
    unsigned past = 0;
    const check_args *ca = j->ca;
    if (dlock_info_kind(info) == DLOCK_KIND_RATE)
        return broken_rate(info) ? BROKEN : 0;
    if (ca->held_ms >= 0 && dlock_info_holders(info)) {
        int64_t age = mon_oldest_hold(j->map, info);
        if (age > ca->held_ms)
            past |= PAST_HELD;
        else if (age < 0)
            past |= UNJUDGED;
    }
    if (ca->waiters >= 0 && (dlock_info_waiters(info) > ca->waiters ||
                             dlock_info_latch_waiters(info) > ca->waiters))
        past |= PAST_WAITERS;
    if (ca->queue >= 0 && (int64_t)dlock_info_queued(info) > ca->queue)
        past |= PAST_QUEUE;
    return past;
}

static int keep(const dlock_info *info, void *ud)
{
    judge *j = ud;
    unsigned past = judge_info(j, info);
    j->unjudged += (past & UNJUDGED) != 0;
    if (dlock_info_kind(info) == DLOCK_KIND_RATE)   /* nothing to count again */
        return past != 0;
    return j->ca->waiters >= 0 || (past & ~(unsigned)UNJUDGED) != 0;
}

/* ------------------------------------------------------------- printing */

static const char *kind_words(const dlock_info *info)
{
    switch (dlock_info_kind(info)) {
    case DLOCK_KIND_RWLOCK:
        return "read-write lock";
    case DLOCK_KIND_COUNT:
        return "semaphore/latch";
    case DLOCK_KIND_PERMITS:
        return "permit semaphore";
    case DLOCK_KIND_RATE:
        return "rate limiter";
    default:
        return dlock_info_queued(info) ? "fair lock" : "lock";
    }
}

/* One holder: who (host, pid, command, since when) or what is known. */
static void print_holder(const dlock_info *info, size_t i, const holder_map *map)
{
    const char *owner = dlock_info_owner(info, i);
    char who[600], esc[120], ttl[32];
    holder_info h;
    int r = holder_lookup(map, NULL, owner, &h);
    int64_t age = r > 0 && h.run ? (h.held_ms < 0 ? 0 : h.held_ms) : -1;
    int64_t acquired = h.acquired_ms;
    holder_info_free(&h);
    holder_describe(map, dlock_info_name(info), owner, 0, who, sizeof(who));
    cli_esc(owner, esc, sizeof(esc));
    int64_t t = dlock_info_kind(info) == DLOCK_KIND_PERMITS ? dlock_info_holder_ttl(info, i)
                                                            : dlock_info_ttl(info);
    const char *ttl_s = t >= 0 ? cli_fmt_duration(t, ttl, sizeof(ttl)) : "no expiry";
    if (age >= 0) {
        char since[40];
        time_t s = (time_t)(acquired / 1000);
        struct tm tm;
        gmtime_r(&s, &tm);
        strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
        printf("  %s %s: %s, since %s\n", dlock_info_kind(info) == DLOCK_KIND_PERMITS
                                              ? "permit" : "holder", esc, who, since);
        return;
    }
    printf("  %s %s: %s; hold age unknown%s; TTL %s%s\n",
           dlock_info_kind(info) == DLOCK_KIND_PERMITS ? "permit" : "holder", esc,
           r < 0 ? "who: CLIENT LIST refused" : who,
           r > 0 ? " (not a dlock run)" : "", ttl_s,
           r == 0 && t >= 0 ? ", renewed or not: unknown from one look (dlock exporter "
                              "tells: dlock_lock_renewed)" : "");
}

static void print_past(const dlock_info *info, unsigned past, const check_args *ca,
                       const holder_map *map)
{
    char *name = cli_escape(dlock_info_name(info));
    char d1[32], d2[32];
    printf("%s  %s", name ? name : "?", kind_words(info));
    free(name);
    if (dlock_info_kind(info) == DLOCK_KIND_RWLOCK && dlock_info_mode(info))
        printf(" (%s)", dlock_info_mode(info));
    if (dlock_info_kind(info) == DLOCK_KIND_PERMITS)
        printf(", %lld permits available, %zu held", (long long)dlock_info_count(info),
               dlock_info_holders(info));
    else if (mon_is_count(info))
        printf(", count %lld", (long long)dlock_info_count(info));
    if (past & BROKEN) {
        char rate[64];
        dlock_rate_config rc;
        dlock_info_rate(info, &rc);
        printf(" (%s): its count or grants hold other data than a rate limiter's: "
               "acquisitions fail until they are repaired or deleted",
               cli_rate_text(&rc, rate, sizeof(rate)));
    }
    if (past & PAST_HELD)
        printf(", held %s (over %s)",
               cli_fmt_duration(mon_oldest_hold(map, info), d1, sizeof(d1)),
               cli_fmt_duration(ca->held_ms, d2, sizeof(d2)));
    if (past & PAST_WAITERS) {
        if (dlock_info_waiters(info) > ca->waiters)
            printf(", %lld waiting (over %lld)", (long long)dlock_info_waiters(info),
                   (long long)ca->waiters);
        if (dlock_info_latch_waiters(info) > ca->waiters)
            printf(", %lld awaiting the latch (over %lld)",
                   (long long)dlock_info_latch_waiters(info), (long long)ca->waiters);
    }
    if (past & PAST_QUEUE)
        printf(", %zu queued (over %lld)", dlock_info_queued(info), (long long)ca->queue);
    putchar('\n');
    for (size_t i = 0; i < dlock_info_holders(info); i++)
        print_holder(info, i, map);
}

/* "held over 1 m, more than 2 waiting": the thresholds asked for. */
static const char *thresholds(const check_args *ca, char *buf, size_t size)
{
    char d[32];
    size_t off = 0;
    buf[0] = '\0';
    if (ca->held_ms >= 0)
        off += (size_t)snprintf(buf + off, size - off, "held over %s",
                                cli_fmt_duration(ca->held_ms, d, sizeof(d)));
    if (ca->waiters >= 0 && off < size)
        off += (size_t)snprintf(buf + off, size - off, "%smore than %lld waiting",
                                off ? ", " : "", (long long)ca->waiters);
    if (ca->queue >= 0 && off < size)
        snprintf(buf + off, size - off, "%smore than %lld queued", off ? ", " : "",
                 (long long)ca->queue);
    return buf;
}

int cmd_check(cli_opts *o, int argc, char **argv)
{
    check_args ca;
    if (parse_args(o, argc, argv, &ca) != 0)
        return EXIT_USAGE;
    dlock_client *c;
    o->label = "check";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    holder_map *map = holder_map_load(c);
    judge j = {&ca, map, 0};
    mon_pass p = {.pattern = ca.pattern, .keep = keep, .keep_ud = &j};
    int rc = mon_run(c, &p);
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "check");
        cli_prefix_hint(o, rc, ca.pattern ? ca.pattern : "*");
        goto out;
    }
    size_t npast = 0;
    unsigned *past = calloc(p.n ? p.n : 1, sizeof(*past));
    if (!past) {
        code = cli_fail(o, DLOCK_ENOMEM, "check");
        goto out;
    }
    for (size_t i = 0; i < p.n; i++) {
        past[i] = judge_info(&j, p.v[i]);
        npast += (past[i] & ~(unsigned)UNJUDGED) != 0;
    }
    char th[160];
    thresholds(&ca, th, sizeof(th));
    if (npast || !o->quiet)
        printf("dlock check: %zu of %zu past a threshold (%s)\n", npast, p.seen, th);
    for (size_t i = 0; i < p.n; i++)
        if (past[i] & ~(unsigned)UNJUDGED)
            print_past(p.v[i], past[i], &ca, j.map);
    if (ca.held_ms >= 0 && !o->quiet && holder_map_error(j.map))
        printf("note: who holds what is unknown (CLIENT LIST refused: %s): --held-over "
               "judges nothing\n", holder_map_error(j.map));
    else if (j.unjudged && !o->quiet)
        printf("note: %zu held with no hold age known (Redisson, a library client, or a client "
               "gone): not judged by --held-over ('dlock status NAME' shows them; dlock "
               "exporter measures how long it sees them held)\n", j.unjudged);
    free(past);
    code = npast ? 1 : 0;
out:
    mon_pass_free(&p);
    holder_map_free(map);
    dlock_client_close(c);
    return code;
}
