/* dlock status (locks, semaphores, latches, rate limiters); the table of
 * locks that list and watch share. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "show.h"


/* ------------------------------------------------------------ arguments */

int parse_show(cli_opts *o, const char *cmd, int argc, char **argv, unsigned flags,
               show_args *sa)
{
    memset(sa, 0, sizeof(*sa));
    int dashdash = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r = 0;
        if ((r = cli_common_arg(o, argc, argv, &i, &dashdash)) != 0) {
            if (r < 0)
                return -1;
            continue;
        }
        if (!dashdash) {
            if ((flags & F_JSON) && strcmp(a, "--json") == 0) {
                sa->json = 1;
                continue;
            }
            if ((flags & F_STATS) && strcmp(a, "--stats") == 0) {
                sa->stats = 1;
                continue;
            }
            if ((flags & F_FORCE) && strcmp(a, "--force") == 0) {
                sa->force = 1;
                continue;
            }
            if ((flags & F_PERMIT) &&
                (r = cli_opt_value(o, cmd, argc, argv, &i, "--permit", NULL, &val)) != 0) {
                if (r < 0)
                    return -1;
                sa->permit = val;
                continue;
            }
            if ((flags & F_NAME) &&
                (r = cli_opt_value(o, cmd, argc, argv, &i, "--name", NULL, &val)) != 0) {
                if (r < 0)
                    return -1;
                a = val;   /* a positional that may begin with '-' */
            } else if (a[0] == '-' && a[1] != '\0') {
                cli_usage_error(o, cmd, "unknown option '%s'", a);
                return -1;
            }
        }
        if (sa->npos == 0) {
            sa->pos = a;
            sa->npos = 1;
        } else {
            char e[80];
            cli_usage_error(o, cmd, "unexpected argument '%s'", cli_esc(a, e, sizeof(e)));
            return -1;
        }
    }
    return 0;
}

/* ----------------------------------------------------------------- rows */

const char *display_url(const char *url, char *buf, size_t size)
{
    const char *s = strstr(url, "://");
    const char *at = s ? strchr(s + 3, '@') : NULL;
    const char *slash = s ? strchr(s + 3, '/') : NULL;
    if (at && (!slash || at < slash))
        snprintf(buf, size, "%.*s%s", (int)(s + 3 - url), url, at + 1);
    else
        snprintf(buf, size, "%s", url);
    return buf;
}

/* "lock", "fair lock", "read-write lock", "count", "permit semaphore",
 * "rate limiter", or "none" (no key: free). A fair lock is told by its queue: with nobody
 * queued it has no key beside the lock's hash (Redisson deletes the empty
 * queue and timeouts), so it shows as "lock". */
static const char *kind_name(const dlock_info *info)
{
    switch (dlock_info_kind(info)) {
    case DLOCK_KIND_LOCK:
        return dlock_info_queued(info) ? "fair lock" : "lock";
    case DLOCK_KIND_RWLOCK:
        return "read-write lock";
    case DLOCK_KIND_COUNT:
        return "count";
    case DLOCK_KIND_PERMITS:
        return "permit semaphore";
    case DLOCK_KIND_RATE:
        return "rate limiter";
    default:
        return "none";
    }
}


/* A semaphore's or a latch's object: name, kind, count, the permits held
 * (a permit semaphore's) with their leases, the key's TTL and the waiters. */
static void json_count(FILE *f, const dlock_info *info, int with_waiters, const holder_map *map)
{
    fputc('{', f);
    cli_json_field(f, "name", dlock_info_name(info));
    fprintf(f, ",\"kind\":\"%s\",\"count\":%lld", kind_name(info),
            (long long)dlock_info_count(info));
    if (dlock_info_kind(info) == DLOCK_KIND_PERMITS) {
        fputs(",\"holders\":[", f);
        for (size_t i = 0; i < dlock_info_holders(info); i++) {
            fprintf(f, "%s{\"permit\":\"%s\",\"ttl_ms\":%lld", i ? "," : "",
                    dlock_info_owner(info, i), (long long)dlock_info_holder_ttl(info, i));
            holder_json(f, map, dlock_info_name(info), dlock_info_owner(info, i));
            fputc('}', f);
        }
        fputc(']', f);
    }
    fprintf(f, ",\"ttl_ms\":%lld", (long long)dlock_info_ttl(info));
    if (with_waiters) {
        fprintf(f, ",\"waiters\":%lld", (long long)dlock_info_waiters(info));
        if (dlock_info_kind(info) == DLOCK_KIND_COUNT)
            fprintf(f, ",\"latch_waiters\":%lld", (long long)dlock_info_latch_waiters(info));
    }
    fputc('}', f);
}

/* "4 per 10.0 s" into buf. */
const char *cli_rate_text(const dlock_rate_config *rc, char *buf, size_t size)
{
    char d[32];
    snprintf(buf, size, "%lld per %s", (long long)rc->rate,
             cli_fmt_duration(rc->interval_ms, d, sizeof(d)));
    return buf;
}

/* A rate limiter's object: name, kind, rate, interval, type, the permits
 * left (null for a per-client one, or when its keys hold other data),
 * keep-alive, the key's TTL. */
static void json_rate(FILE *f, const dlock_info *info)
{
    dlock_rate_config rc = {DLOCK_RATE_OVERALL, 0, 0, 0};
    dlock_info_rate(info, &rc);
    fputc('{', f);
    cli_json_field(f, "name", dlock_info_name(info));
    fprintf(f, ",\"kind\":\"rate limiter\",\"rate\":%lld,\"interval_ms\":%lld,\"type\":\"%s\"",
            (long long)rc.rate, (long long)rc.interval_ms,
            rc.type == DLOCK_RATE_PER_CLIENT ? "per_client" : "overall");
    if (dlock_info_count(info) >= 0)
        fprintf(f, ",\"left\":%lld", (long long)dlock_info_count(info));
    else
        fputs(",\"left\":null", f);
    fprintf(f, ",\"keep_alive_ms\":%lld,\"ttl_ms\":%lld}", (long long)rc.keep_alive_ms,
            (long long)dlock_info_ttl(info));
}

void show_json_info(FILE *f, const dlock_info *info, int with_waiters, const holder_map *map)
{
    if (mon_is_count(info)) {
        json_count(f, info, with_waiters, map);
        return;
    }
    if (dlock_info_kind(info) == DLOCK_KIND_RATE) {
        json_rate(f, info);
        return;
    }
    fputc('{', f);
    cli_json_field(f, "name", dlock_info_name(info));
    fprintf(f, ",\"locked\":%s,\"holders\":[", dlock_info_locked(info) ? "true" : "false");
    for (size_t i = 0; i < dlock_info_holders(info); i++) {
        fputs(i ? ",{" : "{", f);
        cli_json_field(f, "owner", dlock_info_owner(info, i));
        fprintf(f, ",\"count\":%lld", (long long)dlock_info_hold_count(info, i));
        if (dlock_info_kind(info) == DLOCK_KIND_RWLOCK)
            fprintf(f, ",\"role\":\"%s\"", dlock_info_holder_writes(info, i) ? "write" : "read");
        holder_json(f, map, dlock_info_name(info), dlock_info_owner(info, i));
        fputc('}', f);
    }
    fprintf(f, "],\"ttl_ms\":%lld,\"token\":%llu", (long long)dlock_info_ttl(info),
            (unsigned long long)dlock_info_token(info));
    fprintf(f, ",\"kind\":\"%s\"", kind_name(info));
    if (dlock_info_mode(info))
        fprintf(f, ",\"mode\":\"%s\"", dlock_info_mode(info));
    if (dlock_info_queued(info)) {
        fputs(",\"queue\":[", f);
        for (size_t i = 0; i < dlock_info_queued(info); i++) {
            fputs(i ? ",{" : "{", f);
            cli_json_field(f, "owner", dlock_info_queued_owner(info, i));
            fprintf(f, ",\"deadline_ms\":%lld}", (long long)dlock_info_queued_deadline(info, i));
        }
        fputc(']', f);
    }
    if (dlock_info_next_turn(info)) {
        fputs(",\"next_turn\":{", f);
        cli_json_field(f, "owner", dlock_info_next_turn(info));
        fprintf(f, ",\"ttl_ms\":%lld}", (long long)dlock_info_next_turn_ttl(info));
    }
    if (with_waiters)
        fprintf(f, ",\"waiters\":%lld", (long long)dlock_info_waiters(info));
    fputc('}', f);
}

/* "web1:42 [make] 3.0 s x1, <owner> x2 (not dlock)", escaped. */
static char *format_holders(const dlock_info *info, const holder_map *map)
{
    size_t len = 1;
    for (size_t i = 0; i < dlock_info_holders(info); i++)
        len += strlen(dlock_info_owner(info, i)) * 4 + 300;
    char *s = malloc(len);
    if (!s)
        return NULL;
    size_t off = 0;
    s[0] = '\0';
    for (size_t i = 0; i < dlock_info_holders(info); i++) {
        char who[300];
        holder_info h;
        int known = holder_lookup(map, NULL, dlock_info_owner(info, i), &h);
        holder_info_free(&h);
        holder_describe(map, dlock_info_name(info), dlock_info_owner(info, i), 1, who,
                        sizeof(who));
        char *e = known > 0 ? NULL : cli_escape(dlock_info_owner(info, i));
        const char *role = dlock_info_kind(info) != DLOCK_KIND_RWLOCK ? ""
                           : dlock_info_holder_writes(info, i)     ? "W "
                                                                   : "R ";
        off += (size_t)snprintf(s + off, len - off, "%s%s%s x%lld%s%s%s", i ? ", " : "", role,
                                known > 0 ? who : e ? e : "?",
                                (long long)dlock_info_hold_count(info, i),
                                known == 0 ? " (" : "", known == 0 ? who : "",
                                known == 0 ? ")" : "");
        free(e);
    }
    return s;
}

static int fill_row(row *r, const dlock_info *info, const holder_map *map)
{
    r->raw = strdup(dlock_info_name(info));
    r->name = cli_escape(dlock_info_name(info));
    r->holders = format_holders(info, map);
    r->ttl = dlock_info_ttl(info);
    r->token = dlock_info_token(info);
    r->waiters = dlock_info_waiters(info);
    if (!r->raw || !r->name || !r->holders) {
        free(r->raw);
        free(r->name);
        free(r->holders);
        return -1;
    }
    return 0;
}

int rows_collect(const dlock_info *info, void *ud)
{
    rows *rs = ud;
    if (rs->json_out) {   /* streamed: hundreds of thousands of locks need no memory */
        fputs(rs->n ? ",\n" : "\n", rs->json_out);
        show_json_info(rs->json_out, info, 0, rs->map);
        rs->n++;
        return 0;
    }
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 64;
        row *v = realloc(rs->v, cap * sizeof(*v));
        if (!v) {
            rs->oom = 1;
            return 1;
        }
        rs->v = v;
        rs->cap = cap;
    }
    if (fill_row(&rs->v[rs->n], info, rs->map) != 0) {
        rs->oom = 1;
        return 1;
    }
    rs->n++;
    return 0;
}

int rows_refresh(rows *rs, size_t i, const dlock_info *info)
{
    row fresh;
    if (fill_row(&fresh, info, rs->map) != 0)
        return DLOCK_ENOMEM;
    free(rs->v[i].raw);
    free(rs->v[i].name);
    free(rs->v[i].holders);
    rs->v[i] = fresh;
    return DLOCK_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const row *)a)->raw, ((const row *)b)->raw);
}

void rows_sort(rows *rs)
{
    if (rs->n)
        qsort(rs->v, rs->n, sizeof(row), by_name);
}

void rows_free(rows *rs)
{
    for (size_t i = 0; i < rs->n && !rs->json_out; i++) {
        free(rs->v[i].raw);
        free(rs->v[i].name);
        free(rs->v[i].holders);
    }
    free(rs->v);
    rs->v = NULL;
    rs->n = rs->cap = 0;
}

void rows_print(FILE *f, const rows *rs, size_t max_rows, int with_waiters)
{
    size_t wn = 4, wh = 7;
    for (size_t i = 0; i < rs->n; i++) {
        size_t a = strlen(rs->v[i].name), b = strlen(rs->v[i].holders);
        if (a > wn)
            wn = a;
        if (b > wh)
            wh = b;
    }
    if (wn > 48)
        wn = 48;
    if (wh > 72)
        wh = 72;
    fprintf(f, "%-*s  %-*s  %10s  %-8s%s\n", (int)wn, "NAME", (int)wh, "HOLDERS", "TTL", "TOKEN",
            with_waiters ? "  WAITERS" : "");
    for (size_t i = 0; i < rs->n && (!max_rows || i < max_rows); i++) {
        char ttl[32], w[24] = "";
        const row *r = &rs->v[i];
        if (with_waiters)
            snprintf(w, sizeof(w), "  %lld", (long long)r->waiters);
        fprintf(f, "%-*s  %-*s  %10s  %-8llu%s\n", (int)wn, r->name, (int)wh, r->holders,
                r->ttl >= 0 ? cli_fmt_duration(r->ttl, ttl, sizeof(ttl)) : "no expiry",
                (unsigned long long)r->token, w);
    }
    if (max_rows && rs->n > max_rows)
        fprintf(f, "... and %zu more\n", rs->n - max_rows);
}

/* --------------------------------------------------------------- status */

/* A semaphore or a latch: what its count means, the permits held with their
 * leases (a permit semaphore's), and who waits on each of its channels. */
static void print_count_status(const dlock_info *info, const holder_map *map)
{
    char ttl[32];
    char *name = cli_escape(dlock_info_name(info));
    long long n = (long long)dlock_info_count(info);
    printf("name:    %s\n", name ? name : "?");
    free(name);
    if (dlock_info_kind(info) == DLOCK_KIND_PERMITS) {
        size_t held = dlock_info_holders(info);
        printf("kind:    permit-expirable semaphore\n");
        printf("permits: %lld available, %zu held (%lld in all)\n", n, held,
               n + (long long)held);
        for (size_t i = 0; i < held; i++) {
            int64_t t = dlock_info_holder_ttl(info, i);
            char who[400];
            printf("%s%s (%s%s)\n", i ? "         " : "holders: ", dlock_info_owner(info, i),
                   t >= 0 ? cli_fmt_duration(t, ttl, sizeof(ttl)) : "no expiry",
                   t >= 0 ? " left" : "");
            /* who: a dlock run names its permit in its client's label */
            if (*holder_describe(map, dlock_info_name(info), dlock_info_owner(info, i), 0, who,
                             sizeof(who)))
                printf("           %s\n", who);
        }
        printf("waiters: %lld\n", (long long)dlock_info_waiters(info));
    } else {
        printf("kind:    count (a count-down latch's, or a semaphore's permits: Redis stores "
               "both alike)\n");
        printf("count:   %lld\n", n);
        printf("waiters: %lld for permits, %lld awaiting the latch\n",
               (long long)dlock_info_waiters(info), (long long)dlock_info_latch_waiters(info));
    }
    if (dlock_info_ttl(info) >= 0)
        printf("ttl:     %s\n", cli_fmt_duration(dlock_info_ttl(info), ttl, sizeof(ttl)));
}

const char *cli_rate_left(const dlock_info *info, char *buf, size_t size)
{
    dlock_rate_config rc = {DLOCK_RATE_OVERALL, 0, 0, 0};
    dlock_info_rate(info, &rc);
    if (dlock_info_count(info) >= 0)
        snprintf(buf, size, "%lld", (long long)dlock_info_count(info));
    else
        snprintf(buf, size, "%s", rc.type == DLOCK_RATE_PER_CLIENT ? "-" : "unreadable");
    return buf;
}

/* A rate limiter: its rate, whose budget it is, what is left in the window
 * now, its keep-alive and TTL. */
static void print_rate_status(const dlock_info *info)
{
    char rate[64], left[32], d[32];
    dlock_rate_config rc = {DLOCK_RATE_OVERALL, 0, 0, 0};
    dlock_info_rate(info, &rc);
    char *name = cli_escape(dlock_info_name(info));
    printf("name:    %s\n", name ? name : "?");
    free(name);
    printf("kind:    rate limiter (%s)\n", rc.type == DLOCK_RATE_PER_CLIENT
                                               ? "per client: each client has the rate"
                                               : "overall: every client shares the rate");
    printf("rate:    %s\n", cli_rate_text(&rc, rate, sizeof(rate)));
    cli_rate_left(info, left, sizeof(left));
    if (dlock_info_count(info) >= 0)
        printf("left:    %s now (the window: the last %s)\n", left,
               cli_fmt_duration(rc.interval_ms, d, sizeof(d)));
    else if (rc.type == DLOCK_RATE_PER_CLIENT)
        printf("left:    per client (each client's count is its own)\n");
    else
        printf("left:    unreadable: its count or grants hold other data (acquisitions fail)\n");
    if (rc.keep_alive_ms > 0)
        printf("keep:    %s after the last change, then its keys expire\n",
               cli_fmt_duration(rc.keep_alive_ms, d, sizeof(d)));
    if (dlock_info_ttl(info) >= 0)
        printf("ttl:     %s\n", cli_fmt_duration(dlock_info_ttl(info), d, sizeof(d)));
}

static void print_status(const dlock_info *info, const holder_map *map)
{
    char ttl[32];
    char *name = cli_escape(dlock_info_name(info));
    printf("name:    %s\n", name ? name : "?");
    free(name);
    if (dlock_info_kind(info) == DLOCK_KIND_RWLOCK)
        printf("state:   %s (read-write lock, mode %s)\n",
               dlock_info_locked(info) ? "held" : "free", dlock_info_mode(info));
    else
        printf("state:   %s\n", dlock_info_locked(info) ? "held" : "free");
    if (dlock_info_kind(info) == DLOCK_KIND_LOCK)
        printf("kind:    %s\n", dlock_info_queued(info)
                                    ? "fair lock (it has a queue)"
                                    : "lock (or a fair lock with nobody queued: Redis holds "
                                      "both alike)");
    for (size_t i = 0; i < dlock_info_holders(info); i++) {
        char *owner = cli_escape(dlock_info_owner(info, i));
        const char *role = dlock_info_kind(info) != DLOCK_KIND_RWLOCK ? ""
                           : dlock_info_holder_writes(info, i)     ? ", writes"
                                                                   : ", reads";
        printf("holder:  %s (%lld %s%s)\n", owner ? owner : "?",
               (long long)dlock_info_hold_count(info, i),
               dlock_info_hold_count(info, i) == 1 ? "hold" : "holds", role);
        free(owner);
        char who[400];
        if (*holder_describe(map, dlock_info_name(info), dlock_info_owner(info, i), 0, who,
                             sizeof(who)))
            printf("         %s\n", who);
    }
    if (dlock_info_holders(info) && holder_map_error(map))
        printf("         (who: CLIENT LIST refused: %s)\n", holder_map_error(map));
    if (dlock_info_locked(info))
        printf("ttl:     %s\n", dlock_info_ttl(info) >= 0
                                    ? cli_fmt_duration(dlock_info_ttl(info), ttl, sizeof(ttl))
                                    : "no expiry");
    printf("token:   %llu\n", (unsigned long long)dlock_info_token(info));
    printf("waiters: %lld\n", (long long)dlock_info_waiters(info));
    /* A fair lock's queue, in order, each with the time left to its deadline. */
    for (size_t i = 0; i < dlock_info_queued(info); i++) {
        char *owner = cli_escape(dlock_info_queued_owner(info, i));
        char who[400], dl[32];
        int64_t d = dlock_info_queued_deadline(info, i);
        printf("%s %zu. %s (deadline %s)\n", i ? "        " : "queue:  ", i + 1,
               owner ? owner : "?", d < 0 ? "none" : cli_fmt_duration(d, dl, sizeof(dl)));
        free(owner);
        if (*holder_describe(map, NULL, dlock_info_queued_owner(info, i), 0, who, sizeof(who)))
            printf("            %s\n", who);
    }
    if (dlock_info_next_turn(info)) {
        char *owner = cli_escape(dlock_info_next_turn(info));
        char t[32];
        printf("next:    %s (reserved the next turn, %s left)\n", owner ? owner : "?",
               cli_fmt_duration(dlock_info_next_turn_ttl(info), t, sizeof(t)));
        free(owner);
    }
}

/* What status adds about the client itself: the server's eviction policy
 * (a warning when it may evict held locks) and, with --stats, the client's
 * statistics. JSON: fields appended to the object being printed. */
static void status_extras(dlock_client *c, const show_args *sa, int json)
{
    char policy[64] = "";
    int risky = 0;
    dlock_client_eviction_policy(c, policy, sizeof(policy), &risky);
    dlock_stats st;
    if (sa->stats)
        dlock_client_stats(c, &st, sizeof(st));
    if (json) {
        fputs(",\"eviction_policy\":", stdout);
        if (policy[0])
            cli_json_string(stdout, policy);
        else
            fputs("null", stdout);
        fprintf(stdout, ",\"eviction_risk\":%s", risky ? "true" : "false");
        if (sa->stats) {
            fputs(",\"stats\":", stdout);
            cli_json_stats(stdout, &st);
        }
        return;
    }
    if (risky)
        printf("warning: Redis's maxmemory-policy is %s: when its memory is full it may evict "
               "held locks (keys with a TTL); use noeviction\n", policy);
    if (sa->stats)
        cli_print_stats(stdout, &st);
}

int cmd_status(cli_opts *o, int argc, char **argv)
{
    show_args sa;
    if (parse_show(o, "status", argc, argv, F_JSON | F_NAME | F_STATS, &sa) != 0)
        return EXIT_USAGE;
    if (sa.npos != 1 && !sa.stats) {
        cli_usage_error(o, "status", "missing lock NAME");
        return EXIT_USAGE;
    }
    dlock_client *c;
    o->label = "status";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    if (sa.npos == 0) {   /* --stats alone: the client and its server */
        if (sa.json) {
            fputc('{', stdout);
            fputs("\"url\":", stdout);
            char u[600];
            cli_json_string(stdout, display_url(o->url, u, sizeof(u)));
            status_extras(c, &sa, 1);
            fputs("}\n", stdout);
        } else {
            char u[600];
            printf("server:  %s\n", display_url(o->url, u, sizeof(u)));
            status_extras(c, &sa, 0);
        }
        dlock_client_close(c);
        return 0;
    }
    dlock_info *info = NULL;
    int rc = dlock_client_inspect(c, sa.pos, &info);
    if (rc != DLOCK_OK) {
        code = cli_fail_key(o, c, rc, "status", sa.pos, DLOCK_KIND_LOCK,
                            "a lock, semaphore, latch or rate limiter");
        dlock_client_close(c);
        return code;
    }
    if (cli_not_other(o, info, "a lock, semaphore, latch or rate limiter")) {
        dlock_info_free(info);
        dlock_client_close(c);
        return EXIT_DATAERR;
    }
    holder_map *map = dlock_info_holders(info) || dlock_info_queued(info) ? holder_map_load(c)
                                                                          : NULL;
    if (sa.json) {
        /* The lock's object, with the client's fields before its end. */
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (m) {
            show_json_info(m, info, 1, map);
            fclose(m);
        }
        if (buf && len > 0 && buf[len - 1] == '}') {
            fwrite(buf, 1, len - 1, stdout);
            status_extras(c, &sa, 1);
            fputs("}\n", stdout);
        } else {
            show_json_info(stdout, info, 1, map);
            fputc('\n', stdout);
        }
        free(buf);
    } else if (mon_is_count(info)) {
        print_count_status(info, map);
        status_extras(c, &sa, 0);
    } else if (dlock_info_kind(info) == DLOCK_KIND_RATE) {
        print_rate_status(info);
        status_extras(c, &sa, 0);
    } else {
        print_status(info, map);
        status_extras(c, &sa, 0);
    }
    holder_map_free(map);
    dlock_info_free(info);
    dlock_client_close(c);
    return 0;
}
