/* dlock list: every lock, semaphore, latch and rate limiter matching a
 * pattern, in one walk (a table each, or JSON lines). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "show.h"

/* The keys of dlock's fence guards (dlock fence): dlock_fence:{KEY}. */
#define FENCE_PREFIX "dlock_fence:"

/* The semaphores and latches of a listing, or its rate limiters: one line
 * each, kept to be sorted (or streamed as JSON into the locks' array). */
typedef struct count_rows {
    char **lines;   /* "name\0rest": sorted by name */
    size_t n, cap;
    int oom;
    FILE *json_out;
    size_t *streamed;   /* the JSON array's element count, shared with the locks' */
    const holder_map *map;
    int fences;         /* the pattern asks for fence guards: show them */
} count_rows;

/* Room for one more line; -1 (oom set) when out of memory. */
static int line_room(count_rows *cr)
{
    if (cr->n < cr->cap)
        return 0;
    size_t cap = cr->cap ? cr->cap * 2 : 32;
    char **v = realloc(cr->lines, cap * sizeof(*v));
    if (!v) {
        cr->oom = 1;
        return -1;
    }
    cr->lines = v;
    cr->cap = cap;
    return 0;
}

/* Appends "name\0rest" (the name escaped); 1 when out of memory. */
static int line_add(count_rows *cr, const dlock_info *info, const char *rest)
{
    char *name = cli_escape(dlock_info_name(info));
    size_t len = (name ? strlen(name) : 0) + strlen(rest) + 2;
    char *line = name ? malloc(len) : NULL;
    if (!line) {
        free(name);
        cr->oom = 1;
        return 1;
    }
    int nl = snprintf(line, len, "%s", name);
    snprintf(line + nl + 1, len - (size_t)nl - 1, "%s", rest);
    free(name);
    cr->lines[cr->n++] = line;
    return 0;
}

/* Streams one object into the JSON array; 1 when it did. */
static int json_stream(count_rows *cr, const dlock_info *info)
{
    if (!cr->json_out)
        return 0;
    fputs(*cr->streamed ? ",\n" : "\n", cr->json_out);
    show_json_info(cr->json_out, info, 0, cr->map);
    ++*cr->streamed;
    return 1;
}

static int rate_collect(const dlock_info *info, count_rows *cr)
{
    if (json_stream(cr, info))
        return 0;
    if (line_room(cr) != 0)
        return 1;
    char rate[64], left[32], rest[128];
    dlock_rate_config rc = {DLOCK_RATE_OVERALL, 0, 0, 0};
    dlock_info_rate(info, &rc);
    snprintf(rest, sizeof(rest), "%-16s  %-11s  %s", cli_rate_text(&rc, rate, sizeof(rate)),
             rc.type == DLOCK_RATE_PER_CLIENT ? "per client" : "overall",
             cli_rate_left(info, left, sizeof(left)));
    return line_add(cr, info, rest);
}

static int count_collect(const dlock_info *info, count_rows *cr)
{
    /* dlock's fence guards are its own counters, as fencing tokens are:
     * left out unless asked for by name. */
    if (!cr->fences && strncmp(dlock_info_name(info), FENCE_PREFIX, strlen(FENCE_PREFIX)) == 0)
        return 0;
    if (json_stream(cr, info))
        return 0;
    if (line_room(cr) != 0)
        return 1;
    /* Permits as "<first 8 hex>.. 24.5 s", at most four, then "+N". */
    char held[200] = "", ttl[32];
    size_t off = 0, np = dlock_info_holders(info);
    for (size_t i = 0; i < np && i < 4; i++) {
        int64_t t = dlock_info_holder_ttl(info, i);
        off += (size_t)snprintf(held + off, sizeof(held) - off, "%s%.8s.. %s", i ? ", " : "",
                                dlock_info_owner(info, i),
                                t >= 0 ? cli_fmt_duration(t, ttl, sizeof(ttl)) : "no expiry");
    }
    if (np > 4)
        snprintf(held + off, sizeof(held) - off, ", +%zu", np - 4);
    char rest[300];
    snprintf(rest, sizeof(rest), "%-16s  %5lld  %s",
             dlock_info_kind(info) == DLOCK_KIND_PERMITS ? "permit semaphore"
                                                         : "semaphore/latch",
             (long long)dlock_info_count(info), held);
    return line_add(cr, info, rest);
}

/* What one walk of a listing found, by kind. */
typedef struct list_walk {
    rows *locks;
    count_rows *counts, *rates;
} list_walk;

static int list_collect(const dlock_info *info, void *ud)
{
    list_walk *lw = ud;
    if (dlock_info_kind(info) == DLOCK_KIND_RATE)
        return rate_collect(info, lw->rates);
    return mon_is_count(info) ? count_collect(info, lw->counts) : rows_collect(info, lw->locks);
}

static int by_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines sorted by name, under NAME and `head` (the other columns'
 * titles); a blank line before when `after` (a table above). */
static void lines_print(FILE *f, count_rows *cr, const char *head, int after)
{
    if (!cr->n)
        return;
    size_t wn = 4;
    for (size_t i = 0; i < cr->n; i++)
        if (strlen(cr->lines[i]) > wn)
            wn = strlen(cr->lines[i]);
    if (wn > 48)
        wn = 48;
    qsort(cr->lines, cr->n, sizeof(char *), by_line);
    if (after)
        fputc('\n', f);
    fprintf(f, "%-*s  %s\n", (int)wn, "NAME", head);
    for (size_t i = 0; i < cr->n; i++)
        fprintf(f, "%-*s  %s\n", (int)wn, cr->lines[i], cr->lines[i] + strlen(cr->lines[i]) + 1);
}

static void lines_free(count_rows *cr)
{
    for (size_t i = 0; i < cr->n; i++)
        free(cr->lines[i]);
    free(cr->lines);
}

int cmd_list(cli_opts *o, int argc, char **argv)
{
    show_args sa;
    if (parse_show(o, "list", argc, argv, F_JSON, &sa) != 0)
        return EXIT_USAGE;
    const char *pattern = sa.npos ? sa.pos : cli_default_pattern(o);
    if (!pattern)
        pattern = "*";
    dlock_client *c;
    o->label = "list";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    rows rs;
    memset(&rs, 0, sizeof(rs));
    rs.map = holder_map_load(c);   /* once: who holds, for every lock listed */
    if (sa.json) {
        rs.json_out = stdout;
        fputc('[', stdout);
    }
    count_rows cr, rt;
    memset(&cr, 0, sizeof(cr));
    cr.json_out = rs.json_out;
    cr.streamed = &rs.n;
    cr.map = rs.map;
    cr.fences = strncmp(pattern, FENCE_PREFIX, strlen(FENCE_PREFIX)) == 0;
    rt = cr;
    /* One SCAN of the keyspace for every kind. */
    list_walk lw = {&rs, &cr, &rt};
    int rc = dlock_client_walk(c, pattern, DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS | DLOCK_WALK_RATES,
                               0, list_collect, &lw);
    if (rc == DLOCK_OK && (rs.oom || cr.oom || rt.oom))
        rc = DLOCK_ENOMEM;
    if (rc != DLOCK_OK) {
        if (sa.json)
            fputs("]\n", stdout);
        code = cli_fail(o, rc, "list");
        cli_prefix_hint(o, rc, pattern);
    } else if (sa.json) {
        fputs(rs.n ? "\n]\n" : "]\n", stdout);
    } else if (rs.n || cr.n || rt.n) {
        if (rs.n) {
            rows_sort(&rs);
            rows_print(stdout, &rs, 0, 0);
        }
        lines_print(stdout, &cr, "KIND              COUNT  PERMITS HELD", rs.n > 0);
        lines_print(stdout, &rt, "RATE              TYPE         LEFT", rs.n || cr.n);
    } else if (!o->quiet) {
        char p[200];
        fprintf(stderr, "no locks, semaphores, latches or rate limiters match '%s'\n",
                cli_esc(pattern, p, sizeof(p)));
    }
    lines_free(&cr);
    lines_free(&rt);
    holder_map_free(rs.map);
    rows_free(&rs);
    dlock_client_close(c);
    return code;
}
