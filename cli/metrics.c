/* dlock exporter: the state of the locks in Prometheus' text format (0.0.4),
 * from one pass (monitor.c), and what the exporter remembers between passes
 * of each lock: since when it has seen each holder hold it (a lower bound of
 * the hold age for any client, Redisson's included), its TTL then (a TTL
 * that rose under the same holder was renewed), and the names seen held in
 * the last FORGET_MS, shown free (dlock_lock_held 0) once released. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define FORGET_MS (15 * 60 * 1000)
#define RENEW_SLACK_MS 250   /* TTL reads and the clock between them */

typedef struct seen_holder {
    char *owner;
    int64_t first_ms;        /* monotonic: the first pass that saw it hold */
} seen_holder;

typedef struct seen {
    char *name;
    int rw;                  /* a read-write lock */
    int64_t held_ms;         /* the last pass that saw it held (monotonic) */
    int64_t ttl, ttl_at;     /* its TTL then */
    int renewed;             /* 1, 0, -1 unknown */
    seen_holder *h;          /* by owner */
    size_t nh;               /* 0: free now */
    size_t total;            /* holders it has (more than nh when read in part) */
    const dlock_info *info;  /* this pass's snapshot (during mon_render), else NULL */
} seen;

struct mon_memory {
    seen *v;
    size_t n;
};

mon_memory *mon_memory_new(void) { return calloc(1, sizeof(mon_memory)); }

static void seen_clear(seen *s)
{
    for (size_t i = 0; i < s->nh; i++)
        free(s->h[i].owner);
    free(s->h);
    free(s->name);
}

static void seen_free_all(seen *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        seen_clear(&v[i]);
    free(v);
}

void mon_memory_free(mon_memory *m)
{
    if (!m)
        return;
    seen_free_all(m->v, m->n);
    free(m);
}

static int seen_cmp(const void *a, const void *b)
{
    return strcmp(((const seen *)a)->name, ((const seen *)b)->name);
}

static const seen *find(const mon_memory *m, const char *name)
{
    seen key = {.name = (char *)name};
    return m->n ? bsearch(&key, m->v, m->n, sizeof(seen), seen_cmp) : NULL;
}

static int holder_cmp(const void *a, const void *b)
{
    return strcmp(((const seen_holder *)a)->owner, ((const seen_holder *)b)->owner);
}

/* Since when the last pass saw owner hold (its holders are sorted by owner):
 * a pass is O(h log h) in the holders of a lock, not O(h^2). */
static int64_t first_seen(const seen *old, const char *owner, int64_t now)
{
    seen_holder key = {.owner = (char *)owner};
    const seen_holder *h = old && old->nh ? bsearch(&key, old->h, old->nh, sizeof(*old->h),
                                                    holder_cmp)
                                          : NULL;
    return h ? h->first_ms : now;
}

/* A held lock of this pass, from what the last pass saw of it. */
static int seen_now(seen *s, const dlock_info *info, const seen *old, int64_t now)
{
    memset(s, 0, sizeof(*s));
    s->info = info;
    s->rw = dlock_info_kind(info) == DLOCK_KIND_RWLOCK;
    s->held_ms = now;
    s->ttl = dlock_info_ttl(info);
    s->ttl_at = now;
    s->renewed = -1;
    size_t n = dlock_info_holders(info);
    if (!(s->name = strdup(dlock_info_name(info))) || !(s->h = calloc(n ? n : 1, sizeof(*s->h))))
        return -1;
    s->total = dlock_info_holders_total(info);
    int common = 0;
    for (size_t i = 0; i < n; i++) {
        const char *owner = dlock_info_owner(info, i);
        if (!(s->h[i].owner = strdup(owner)))
            return -1;
        s->h[i].first_ms = first_seen(old, owner, now);
        s->nh = i + 1;
        common |= s->h[i].first_ms < now;
    }
    qsort(s->h, s->nh, sizeof(*s->h), holder_cmp);
    if (common && old->ttl >= 0 && s->ttl >= 0)
        s->renewed = s->ttl > old->ttl - (now - old->ttl_at) + RENEW_SLACK_MS;
    return 0;
}

/* A name the last pass knew and this one did not see held: free now. */
static int seen_free_now(seen *s, const seen *old)
{
    memset(s, 0, sizeof(*s));
    s->rw = old->rw;
    s->held_ms = old->held_ms;
    s->ttl = -2;
    s->renewed = -1;
    return (s->name = strdup(old->name)) ? 0 : -1;
}

static int held_lock(const dlock_info *info)
{
    return !mon_is_count(info) && dlock_info_holders(info) > 0;
}

int mon_memory_update(mon_memory *m, const mon_pass *p, int64_t now, size_t limit)
{
    size_t cap = p->n + m->n, n = 0;
    seen *v = calloc(cap ? cap : 1, sizeof(*v));
    if (!v)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < p->n && rc == 0; i++)
        if (held_lock(p->v[i]) && (rc = seen_now(&v[n], p->v[i], find(m, dlock_info_name(p->v[i])),
                                                 now)) == 0)
            n++;
    if (rc == 0) {
        qsort(v, n, sizeof(*v), seen_cmp);
        /* Names held before and not now: free, for FORGET_MS, within the limit. */
        size_t cur = n;
        for (size_t i = 0; i < m->n && rc == 0 && (!limit || n < limit); i++) {
            const seen *o = &m->v[i];
            seen key = {.name = o->name};
            if (now - o->held_ms >= FORGET_MS ||
                (cur && bsearch(&key, v, cur, sizeof(seen), seen_cmp)))
                continue;
            if ((rc = seen_free_now(&v[n], o)) == 0)
                n++;
        }
    }
    if (rc != 0) {
        seen_clear(&v[n]);   /* the one being built */
        seen_free_all(v, n);
        return -1;
    }
    qsort(v, n, sizeof(*v), seen_cmp);
    seen_free_all(m->v, m->n);
    m->v = v;
    m->n = n;
    return 0;
}

/* ------------------------------------------------------------ rendering */

/* A label value: valid UTF-8 with \\, \" and \n escaped (a name that is not
 * valid UTF-8, or holds control characters - ESC, C1 - or bidirectional
 * overrides, is written as cli_escape gives it: \xHH for those bytes). */
static void label(FILE *f, const char *s)
{
    char *esc = cli_has_unsafe(s) ? cli_escape(s) : NULL;
    for (const char *p = esc ? esc : s; *p; p++) {
        if (*p == '\\' || *p == '"')
            fputc('\\', f), fputc(*p, f);
        else if (*p == '\n')
            fputs("\\n", f);
        else
            fputc(*p, f);
    }
    free(esc);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(FILE *f, const char *metric, const char *name, const char *extra, double v)
{
    fputs(metric, f);
    if (name) {
        fputs("{name=\"", f);
        label(f, name);
        fprintf(f, "\"%s}", extra ? extra : "");
    }
    fprintf(f, " %.15g\n", v);
}

/* A family of one sample without labels. */
static void single(FILE *f, const char *metric, const char *type, const char *help, double v)
{
    family(f, metric, type, help);
    sample(f, metric, NULL, NULL, v);
}

/* One family over the locks the memory holds: the value of each (a NaN
 * leaves it out). */
typedef double (*lock_value)(const seen *s, const holder_map *map, int64_t now);

static void lock_family(FILE *f, const mon_memory *m, const holder_map *map, int64_t now,
                        const char *metric, const char *help, lock_value val)
{
    int head = 0;
    for (size_t i = 0; i < m->n; i++) {
        double v = val(&m->v[i], map, now);
        if (isnan(v))
            continue;
        if (!head++)
            family(f, metric, "gauge", help);
        sample(f, metric, m->v[i].name, NULL, v);
    }
}

#define NONE NAN

static double v_holders(const seen *s, const holder_map *map, int64_t now)
{
    return (double)(s->total > s->nh ? s->total : s->nh);
}

static double v_age(const seen *s, const holder_map *map, int64_t now)
{
    int64_t a = s->info ? mon_oldest_hold(map, s->info) : -1;
    return a < 0 ? NONE : (double)a / 1000;
}

static double v_observed(const seen *s, const holder_map *map, int64_t now)
{
    int64_t oldest = -1;
    for (size_t i = 0; i < s->nh; i++)
        if (oldest < 0 || s->h[i].first_ms < oldest)
            oldest = s->h[i].first_ms;
    return oldest < 0 ? NONE : (double)(now - oldest) / 1000;
}

static double v_ttl(const seen *s, const holder_map *map, int64_t now)
{
    return !s->nh ? NONE : s->ttl == -1 ? -1 : (double)s->ttl / 1000;
}

static double v_renewed(const seen *s, const holder_map *map, int64_t now)
{
    return s->nh && s->renewed >= 0 ? s->renewed : NONE;
}

static double v_waiters(const seen *s, const holder_map *map, int64_t now)
{
    return s->info && dlock_info_waiters(s->info) >= 0 ? (double)dlock_info_waiters(s->info)
                                                       : NONE;
}

static double v_queue(const seen *s, const holder_map *map, int64_t now)
{
    return s->info ? (double)dlock_info_queued(s->info) : NONE;
}

static void render_locks(FILE *f, mon_memory *m, const mon_pass *p, const holder_map *map,
                         int64_t now)
{
    /* This pass's snapshots, by name (both sorted). */
    for (size_t i = 0, j = 0; i < m->n; i++) {
        m->v[i].info = NULL;
        while (j < p->n && strcmp(dlock_info_name(p->v[j]), m->v[i].name) < 0)
            j++;
        if (j < p->n && strcmp(dlock_info_name(p->v[j]), m->v[i].name) == 0)
            m->v[i].info = p->v[j];
    }
    if (m->n) {
        family(f, "dlock_lock_held", "gauge", "1 when the lock is held, 0 when free (a name "
                                              "seen held in the last 15 minutes)");
        for (size_t i = 0; i < m->n; i++)
            sample(f, "dlock_lock_held", m->v[i].name,
                   m->v[i].rw ? ",kind=\"rwlock\"" : ",kind=\"lock\"", m->v[i].nh > 0);
    }
    lock_family(f, m, map, now, "dlock_lock_holders", "Owners holding the lock (readers of a "
                "read-write lock each count)", v_holders);
    lock_family(f, m, map, now, "dlock_lock_hold_age_seconds", "How long the oldest hold by a "
                "dlock run has lasted (its client's label); absent when no holder's age is "
                "known", v_age);
    lock_family(f, m, map, now, "dlock_lock_held_observed_seconds", "How long this exporter "
                "has seen the longest current holder hold the lock: a lower bound of the hold "
                "age, for any client (Redisson's too)", v_observed);
    lock_family(f, m, map, now, "dlock_lock_ttl_seconds", "The lock's TTL (-1: no expiry)",
                v_ttl);
    lock_family(f, m, map, now, "dlock_lock_renewed", "1 when the TTL rose since the previous "
                "pass under the same holder (a watchdog renews it), 0 when it did not; absent "
                "at first sight", v_renewed);
    lock_family(f, m, map, now, "dlock_lock_waiters", "Clients waiting for the lock "
                "(subscribers of its channel, and a fair lock's queue)", v_waiters);
    lock_family(f, m, map, now, "dlock_lock_queue_length", "Entries of a fair lock's queue",
                v_queue);
    int head = 0;
    for (size_t i = 0; i < m->n; i++) {
        const seen *s = &m->v[i];
        if (!s->rw || !s->nh || !s->info || !dlock_info_mode(s->info))
            continue;
        if (!head++)
            family(f, "dlock_rwlock_mode", "gauge", "A held read-write lock's mode: 1 for the "
                                                    "one it is in");
        int w = strcmp(dlock_info_mode(s->info), "write") == 0;
        sample(f, "dlock_rwlock_mode", s->name, ",mode=\"read\"", !w);
        sample(f, "dlock_rwlock_mode", s->name, ",mode=\"write\"", w);
    }
}

/* One family over this pass's objects of a kind (-1: both kinds of count). */
typedef double (*count_value)(const dlock_info *info, const holder_map *map);

static void count_family(FILE *f, const mon_pass *p, const holder_map *map, int kind,
                         const char *metric, const char *help, count_value val)
{
    int head = 0;
    for (size_t i = 0; i < p->n; i++) {
        const dlock_info *info = p->v[i];
        if (kind >= 0 ? (int)dlock_info_kind(info) != kind : !mon_is_count(info))
            continue;
        double v = val(info, map);
        if (isnan(v))
            continue;
        if (!head++)
            family(f, metric, "gauge", help);
        sample(f, metric, dlock_info_name(info), NULL, v);
    }
}

static double c_count(const dlock_info *i, const holder_map *m)
{
    return (double)dlock_info_count(i);
}
static double c_held(const dlock_info *i, const holder_map *m)
{
    return (double)dlock_info_holders_total(i);
}
static double c_age(const dlock_info *i, const holder_map *m)
{
    int64_t a = mon_oldest_hold(m, i);
    return a < 0 ? NONE : (double)a / 1000;
}
static double c_waiters(const dlock_info *i, const holder_map *m)
{
    return dlock_info_waiters(i) < 0 ? NONE : (double)dlock_info_waiters(i);
}
static double c_latch(const dlock_info *i, const holder_map *m)
{
    return dlock_info_latch_waiters(i) < 0 ? NONE : (double)dlock_info_latch_waiters(i);
}

static double r_rate(const dlock_info *i, const holder_map *m)
{
    dlock_rate_config rc;
    return dlock_info_rate(i, &rc) == DLOCK_OK ? (double)rc.rate : NONE;
}
static double r_interval(const dlock_info *i, const holder_map *m)
{
    dlock_rate_config rc;
    return dlock_info_rate(i, &rc) == DLOCK_OK ? (double)rc.interval_ms / 1000 : NONE;
}
static double r_per_client(const dlock_info *i, const holder_map *m)
{
    dlock_rate_config rc;
    return dlock_info_rate(i, &rc) == DLOCK_OK ? rc.type == DLOCK_RATE_PER_CLIENT : NONE;
}
static double r_left(const dlock_info *i, const holder_map *m)
{
    return dlock_info_count(i) < 0 ? NONE : (double)dlock_info_count(i);
}

static void render_rates(FILE *f, const mon_pass *p, const holder_map *map)
{
    count_family(f, p, map, DLOCK_KIND_RATE, "dlock_rate_limiter_rate",
                 "A rate limiter's rate: the permits it grants per interval (per client when "
                 "dlock_rate_limiter_per_client is 1)", r_rate);
    count_family(f, p, map, DLOCK_KIND_RATE, "dlock_rate_limiter_interval_seconds",
                 "A rate limiter's interval (its sliding window)", r_interval);
    count_family(f, p, map, DLOCK_KIND_RATE, "dlock_rate_limiter_per_client",
                 "1 when each client has the rate (PER_CLIENT), 0 when all share it (OVERALL)",
                 r_per_client);
    count_family(f, p, map, DLOCK_KIND_RATE, "dlock_rate_limiter_available",
                 "The permits an overall rate limiter has left in its window now; absent for a "
                 "per-client one and when its keys hold other data", r_left);
}

static void render_counts(FILE *f, const mon_pass *p, const holder_map *map)
{
    count_family(f, p, map, DLOCK_KIND_PERMITS, "dlock_semaphore_permits_available",
                 "A permit-expirable semaphore's available permits", c_count);
    count_family(f, p, map, DLOCK_KIND_PERMITS, "dlock_semaphore_permits_held",
                 "A permit-expirable semaphore's permits held", c_held);
    count_family(f, p, map, DLOCK_KIND_PERMITS, "dlock_semaphore_hold_age_seconds",
                 "How long the oldest permit held by a dlock run has been held; absent when "
                 "none is known", c_age);
    count_family(f, p, map, DLOCK_KIND_COUNT, "dlock_count_value",
                 "A plain count: a semaphore's available permits or a latch's count (Redis "
                 "stores both alike)", c_count);
    count_family(f, p, map, -1, "dlock_semaphore_waiters",
                 "Clients waiting for permits (subscribers of the semaphore's channel)",
                 c_waiters);
    count_family(f, p, map, DLOCK_KIND_COUNT, "dlock_latch_waiters",
                 "Clients awaiting a latch (subscribers of its channel)", c_latch);
}

char *mon_render(mon_memory *m, const mon_pass *p, const holder_map *map, const mon_status *st,
                 size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    single(f, "dlock_up", "gauge", "1 when the last pass read Redis, 0 when it failed "
                                   "(dlock_error_info says why)", st->up);
    if (!st->up) {
        family(f, "dlock_error_info", "gauge", "Why the last pass failed");
        fputs("dlock_error_info{error=\"", f);
        label(f, st->error ? st->error : "?");
        fputs("\"} 1\n", f);
    }
    single(f, "dlock_scan_passes_total", "counter",
           "Passes over Redis since the exporter started", (double)st->passes);
    single(f, "dlock_scan_errors_total", "counter", "Passes that failed", (double)st->errors);
    single(f, "dlock_scan_max_keys", "gauge", "The most objects a pass looks at (--max-keys)",
           (double)st->max_keys);
    single(f, "dlock_scan_max_holders", "gauge", "The most holders a pass reads of one object "
           "(--max-holders)", (double)st->max_holders);
    if (st->up && p) {
        family(f, "dlock_scan_timestamp_seconds", "gauge", "When the pass served here started "
                                                          "(unix time)");
        fprintf(f, "dlock_scan_timestamp_seconds %.3f\n", (double)st->started_unix_ms / 1000);
        single(f, "dlock_scan_duration_seconds", "gauge", "How long the pass took",
               (double)p->ms / 1000);
        single(f, "dlock_scan_roundtrips", "gauge",
               "Requests the pass sent to Redis (SCAN batches, snapshots, waiter counts)",
               (double)p->roundtrips);
        single(f, "dlock_scan_objects", "gauge", "Locks, semaphores, latches and rate limiters "
               "the pass found",
               (double)p->seen);
        single(f, "dlock_scan_truncated", "gauge", "1 when --max-keys cut the pass short",
               p->truncated);
        size_t cut = 0;
        for (size_t i = 0; i < p->n; i++)
            cut += dlock_info_holders_total(p->v[i]) > dlock_info_holders(p->v[i]);
        single(f, "dlock_scan_holders_truncated", "gauge", "Objects with more holders than "
               "--max-holders: read in part (their holder counts are whole)", (double)cut);
        render_locks(f, m, p, map, st->now_ms);
        render_counts(f, p, map);
        render_rates(f, p, map);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
