/* One pass over the locks, semaphores, latches and rate limiters in Redis,
 * for dlock check and dlock exporter (monitor.h). */
#include <stdlib.h>
#include <string.h>

#include "monitor.h"

typedef struct collect {
    mon_pass *p;
    char **names;
    size_t n, cap;
    int fences;   /* the pattern names fence guards: keep them */
    int oom;
    int stopped;
} collect;

static int stopped(const mon_pass *p) { return p->stop && atomic_load(p->stop); }

static int collect_one(const dlock_info *info, void *ud)
{
    collect *col = ud;
    mon_pass *p = col->p;
    const char *name = dlock_info_name(info);
    if (stopped(p)) {
        col->stopped = 1;
        return 1;
    }
    if (!col->fences && mon_is_count(info) &&
        strncmp(name, MON_FENCE_PREFIX, strlen(MON_FENCE_PREFIX)) == 0)
        return 0;
    if (p->limit && p->seen >= p->limit) {
        p->truncated = 1;
        return 1;
    }
    p->seen++;
    if (p->keep && !p->keep(info, p->keep_ud))
        return 0;
    if (col->n == col->cap) {
        size_t cap = col->cap ? col->cap * 2 : 64;
        char **v = realloc(col->names, cap * sizeof(*v));
        if (!v) {
            col->oom = 1;
            return 1;
        }
        col->names = v;
        col->cap = cap;
    }
    if (!(col->names[col->n] = strdup(name))) {
        col->oom = 1;
        return 1;
    }
    col->n++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(dlock_info_name(*(dlock_info *const *)a),
                  dlock_info_name(*(dlock_info *const *)b));
}

/* A full snapshot of each name collected (waiters counted). */
static int snapshot_all(dlock_client *c, mon_pass *p, collect *col)
{
    p->v = calloc(col->n ? col->n : 1, sizeof(*p->v));
    if (!p->v)
        return DLOCK_ENOMEM;
    for (size_t i = 0; i < col->n; i++) {
        if (stopped(p))
            return DLOCK_ECANCELED;
        dlock_info *info;
        int rc = dlock_client_inspect(c, col->names[i], &info);
        if (rc != DLOCK_OK)
            return rc;
        /* Released meanwhile, or gone and replaced by other data. */
        if (dlock_info_kind(info) == DLOCK_KIND_NONE || dlock_info_kind(info) == DLOCK_KIND_OTHER) {
            dlock_info_free(info);
            continue;
        }
        p->v[p->n++] = info;
    }
    qsort(p->v, p->n, sizeof(*p->v), by_name);
    return DLOCK_OK;
}

int mon_run(dlock_client *c, mon_pass *p)
{
    p->v = NULL;
    p->n = p->seen = 0;
    p->truncated = 0;
    const char *pattern = p->pattern && *p->pattern ? p->pattern : "*";
    collect col = {p, NULL, 0, 0, strncmp(pattern, MON_FENCE_PREFIX,
                                          strlen(MON_FENCE_PREFIX)) == 0, 0, 0};
    dlock_stats before, after;
    dlock_client_stats(c, &before, sizeof(before));
    int64_t t0 = mono_ms();
    int rc = dlock_client_walk(c, pattern, DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS | DLOCK_WALK_RATES,
                               0, collect_one, &col);
    if (rc == DLOCK_OK && col.oom)
        rc = DLOCK_ENOMEM;
    if (rc == DLOCK_OK && col.stopped)
        rc = DLOCK_ECANCELED;
    if (rc == DLOCK_OK)
        rc = snapshot_all(c, p, &col);
    p->ms = mono_ms() - t0;
    /* (Not after a failure: a call would clear its message.) */
    if (rc == DLOCK_OK && dlock_client_stats(c, &after, sizeof(after)) == DLOCK_OK)
        p->roundtrips = after.roundtrips - before.roundtrips;
    for (size_t i = 0; i < col.n; i++)
        free(col.names[i]);
    free(col.names);
    return rc;
}

void mon_pass_free(mon_pass *p)
{
    for (size_t i = 0; i < p->n; i++)
        dlock_info_free(p->v[i]);
    free(p->v);
    p->v = NULL;
    p->n = 0;
}

static int parse_num(const cli_opts *o, const char *cmd, const char *opt, const char *val,
                     int64_t min, int64_t max, int64_t *n)
{
    size_t len = strlen(val);
    int64_t v = len && len <= 18 && strspn(val, "0123456789") == len ? strtoll(val, NULL, 10)
                                                                     : -1;
    if (v < min || v > max) {
        char e[80];
        cli_usage_error(o, cmd, "%s '%s' is not a whole number from %lld to %lld", opt,
                        cli_esc(val, e, sizeof(e)), (long long)min, (long long)max);
        return -1;
    }
    *n = v;
    return 0;
}

static int pattern_arg(const cli_opts *o, const char *cmd, const char *arg, int dashdash,
                       const char **pattern)
{
    if (!dashdash && arg[0] == '-' && arg[1] != '\0') {
        cli_usage_error(o, cmd, "unknown option '%s'", arg);
        return -1;
    }
    if (*pattern) {
        char e[80];
        cli_usage_error(o, cmd, "unexpected argument '%s': one PATTERN",
                        cli_esc(arg, e, sizeof(e)));
        return -1;
    }
    *pattern = arg;
    return 0;
}

/* argv[*i] as one of opts: 1 taken, 0 not one of them, -1 usage error. */
static int take_opt(cli_opts *o, const char *cmd, int argc, char **argv, int *i,
                    const mon_opt *opts, size_t nopts)
{
    for (size_t k = 0; k < nopts; k++) {
        const mon_opt *m = &opts[k];
        const char *val;
        int r = cli_opt_value(o, cmd, argc, argv, i, m->lng, m->shrt, &val);
        if (r == 0)
            continue;
        if (r < 0)
            return -1;
        if (m->kind == MON_STR) {
            *(const char **)m->dst = val;
            return 1;
        }
        r = m->kind == MON_DUR ? cli_duration_opt(o, cmd, m->lng, val, m->rule, m->dst)
                               : parse_num(o, cmd, m->lng, val, m->min, m->max, m->dst);
        return r == 0 ? 1 : -1;
    }
    return 0;
}

int mon_parse_args(cli_opts *o, const char *cmd, int argc, char **argv, const mon_opt *opts,
                   size_t nopts, const char **pattern)
{
    int dashdash = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_arg(o, argc, argv, &i, &dashdash);
        if (r == 0 && !dashdash)
            r = take_opt(o, cmd, argc, argv, &i, opts, nopts);
        if (r < 0 || (r == 0 && pattern_arg(o, cmd, argv[i], dashdash, pattern) != 0))
            return -1;
    }
    if (!*pattern)
        *pattern = cli_default_pattern(o);
    return 0;
}

int mon_is_count(const dlock_info *info)
{
    return dlock_info_kind(info) == DLOCK_KIND_COUNT || dlock_info_kind(info) == DLOCK_KIND_PERMITS;
}

int64_t mon_hold_age(const holder_map *m, const char *owner)
{
    holder_info h;
    int64_t age = -1;
    if (holder_lookup(m, NULL, owner, &h) > 0 && h.run)
        age = h.held_ms < 0 ? 0 : h.held_ms;
    holder_info_free(&h);
    return age;
}

int64_t mon_oldest_hold(const holder_map *m, const dlock_info *info)
{
    int64_t oldest = -1;
    for (size_t i = 0; i < dlock_info_holders(info); i++) {
        int64_t a = mon_hold_age(m, dlock_info_owner(info, i));
        if (a > oldest)
            oldest = a;
    }
    return oldest;
}
