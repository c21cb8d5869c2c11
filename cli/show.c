/* dlock status, list, watch and unlock --force. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* -------------------------------------------------------------- helpers */

/* Parses [global options] [positional...] [--json] [--interval DUR]; the
 * command-specific flags it accepts are given by `flags`. */
enum { F_JSON = 1, F_INTERVAL = 2, F_FORCE = 4 };

typedef struct show_args {
    int json;
    int force;
    int64_t interval_ms;
    const char *pos[2];
    int npos;
} show_args;

static int parse_show(cli_opts *o, const char *cmd, int argc, char **argv, unsigned flags,
                      int max_pos, show_args *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->interval_ms = 1000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int g = cli_global_opt(o, argc, argv, &i);
        if (g < 0)
            return -1;
        if (g > 0)
            continue;
        if ((flags & F_JSON) && strcmp(a, "--json") == 0) {
            sa->json = 1;
        } else if ((flags & F_FORCE) && strcmp(a, "--force") == 0) {
            sa->force = 1;
        } else if ((flags & F_INTERVAL) &&
                   (strcmp(a, "--interval") == 0 || strncmp(a, "--interval=", 11) == 0)) {
            const char *v = a[10] == '=' ? a + 11 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || cli_parse_duration(v, &sa->interval_ms) != 0 || sa->interval_ms < 50) {
                cli_usage_error(o, "%s: --interval needs a duration of at least 50ms", cmd);
                return -1;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error(o, "%s: unknown option '%s'", cmd, a);
            return -1;
        } else if (sa->npos < max_pos) {
            sa->pos[sa->npos++] = a;
        } else {
            cli_usage_error(o, "%s: unexpected argument '%s'", cmd, a);
            return -1;
        }
    }
    return 0;
}

/* The URL without credentials, for display. */
static const char *display_url(const char *url, char *buf, size_t size)
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

static void json_info(FILE *f, const dlock_info *info, int with_waiters)
{
    fputs("{\"name\":", f);
    cli_json_string(f, dlock_info_name(info));
    fprintf(f, ",\"locked\":%s,\"holders\":[", dlock_info_locked(info) ? "true" : "false");
    for (size_t i = 0; i < dlock_info_holders(info); i++) {
        fputs(i ? ",{\"owner\":" : "{\"owner\":", f);
        cli_json_string(f, dlock_info_owner(info, i));
        fprintf(f, ",\"count\":%lld}", (long long)dlock_info_hold_count(info, i));
    }
    fprintf(f, "],\"ttl_ms\":%lld,\"token\":%llu", (long long)dlock_info_ttl(info),
            (unsigned long long)dlock_info_token(info));
    if (with_waiters)
        fprintf(f, ",\"waiters\":%lld", (long long)dlock_info_waiters(info));
    fputc('}', f);
}

/* --------------------------------------------------------------- status */

int cmd_status(cli_opts *o, int argc, char **argv)
{
    show_args sa;
    if (parse_show(o, "status", argc, argv, F_JSON, 1, &sa) != 0)
        return EXIT_USAGE;
    if (sa.npos != 1) {
        cli_usage_error(o, "status: missing lock NAME");
        return EXIT_USAGE;
    }
    dlock_client *c;
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    dlock_lock *l;
    dlock_info *info = NULL;
    int rc = dlock_lock_get(c, sa.pos[0], &l);
    if (rc == DLOCK_OK) {
        rc = dlock_lock_inspect(l, &info);
        dlock_lock_free(l);
    }
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "status");
        dlock_client_close(c);
        return code;
    }
    if (sa.json) {
        json_info(stdout, info, 1);
        fputc('\n', stdout);
    } else {
        char ttl[32];
        printf("name:    %s\n", dlock_info_name(info));
        printf("state:   %s\n", dlock_info_locked(info) ? "held" : "free");
        for (size_t i = 0; i < dlock_info_holders(info); i++)
            printf("holder:  %s (%lld %s)\n", dlock_info_owner(info, i),
                   (long long)dlock_info_hold_count(info, i),
                   dlock_info_hold_count(info, i) == 1 ? "hold" : "holds");
        if (dlock_info_locked(info))
            printf("ttl:     %s\n", dlock_info_ttl(info) >= 0
                                        ? cli_fmt_duration(dlock_info_ttl(info), ttl, sizeof(ttl))
                                        : "no expiry");
        printf("token:   %llu\n", (unsigned long long)dlock_info_token(info));
        printf("waiters: %lld\n", (long long)dlock_info_waiters(info));
    }
    dlock_info_free(info);
    dlock_client_close(c);
    return 0;
}

/* ----------------------------------------------------------------- list */

typedef struct row {
    char *name;
    char *holders;     /* "owner x2, owner2 x1" */
    int64_t ttl;
    uint64_t token;
} row;

typedef struct rows {
    row *v;
    size_t n, cap;
    int json;
    int oom;
    FILE *json_out;
} rows;

static int collect(const dlock_info *info, void *ud)
{
    rows *rs = ud;
    if (rs->json_out) {   /* streamed: hundreds of thousands of locks need no memory */
        fputs(rs->n ? ",\n" : "\n", rs->json_out);
        json_info(rs->json_out, info, 0);
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
    size_t len = 1;
    for (size_t i = 0; i < dlock_info_holders(info); i++)
        len += strlen(dlock_info_owner(info, i)) + 32;
    row *r = &rs->v[rs->n];
    r->name = strdup(dlock_info_name(info));
    r->holders = malloc(len);
    if (!r->name || !r->holders) {
        free(r->name);
        free(r->holders);
        rs->oom = 1;
        return 1;
    }
    size_t off = 0;
    r->holders[0] = '\0';
    for (size_t i = 0; i < dlock_info_holders(info); i++)
        off += (size_t)snprintf(r->holders + off, len - off, "%s%s x%lld", i ? ", " : "",
                                dlock_info_owner(info, i),
                                (long long)dlock_info_hold_count(info, i));
    r->ttl = dlock_info_ttl(info);
    r->token = dlock_info_token(info);
    rs->n++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const row *)a)->name, ((const row *)b)->name);
}

static void free_rows(rows *rs)
{
    for (size_t i = 0; i < rs->n && !rs->json_out; i++) {
        free(rs->v[i].name);
        free(rs->v[i].holders);
    }
    free(rs->v);
    memset(rs, 0, sizeof(*rs));
}

/* Prints the rows as a table; at most max_rows (0 = all). */
static void print_table(FILE *f, rows *rs, size_t max_rows)
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
    if (wh > 60)
        wh = 60;
    fprintf(f, "%-*s  %-*s  %10s  %s\n", (int)wn, "NAME", (int)wh, "HOLDERS", "TTL", "TOKEN");
    for (size_t i = 0; i < rs->n && (!max_rows || i < max_rows); i++) {
        char ttl[32];
        const row *r = &rs->v[i];
        fprintf(f, "%-*s  %-*s  %10s  %llu\n", (int)wn, r->name, (int)wh, r->holders,
                r->ttl >= 0 ? cli_fmt_duration(r->ttl, ttl, sizeof(ttl)) : "no expiry",
                (unsigned long long)r->token);
    }
    if (max_rows && rs->n > max_rows)
        fprintf(f, "... and %zu more\n", rs->n - max_rows);
}

int cmd_list(cli_opts *o, int argc, char **argv)
{
    show_args sa;
    if (parse_show(o, "list", argc, argv, F_JSON, 1, &sa) != 0)
        return EXIT_USAGE;
    const char *pattern = sa.npos ? sa.pos[0] : "*";
    dlock_client *c;
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    rows rs;
    memset(&rs, 0, sizeof(rs));
    if (sa.json) {
        rs.json_out = stdout;
        fputc('[', stdout);
    }
    int rc = dlock_client_scan(c, pattern, collect, &rs);
    if (rc == DLOCK_OK && rs.oom)
        rc = DLOCK_ENOMEM;
    if (rc != DLOCK_OK) {
        if (sa.json)
            fputs("]\n", stdout);
        code = cli_fail(o, rc, "list");
    } else if (sa.json) {
        fputs(rs.n ? "\n]\n" : "]\n", stdout);
    } else {
        if (rs.n)
            qsort(rs.v, rs.n, sizeof(row), by_name);
        if (rs.n)
            print_table(stdout, &rs, 0);
        else if (!o->quiet)
            fprintf(stderr, "no locks match '%s'\n", pattern);
    }
    free_rows(&rs);
    dlock_client_close(c);
    return code;
}

/* ---------------------------------------------------------------- watch */

static struct termios saved_tio;
static int tio_saved;

static void restore_terminal(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
        tio_saved = 0;
    }
}

int cmd_watch(cli_opts *o, int argc, char **argv)
{
    show_args sa;
    if (parse_show(o, "watch", argc, argv, F_INTERVAL, 1, &sa) != 0)
        return EXIT_USAGE;
    const char *pattern = sa.npos ? sa.pos[0] : "*";
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    dlock_client *c;
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    int tty = isatty(STDOUT_FILENO);
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        tio_saved = 1;
    }
    if (tty)
        fputs("\033[?1049h\033[?25l", stdout);   /* alternate screen, hide cursor */
    char shown[300], interval[32];
    display_url(o->url, shown, sizeof(shown));
    cli_fmt_duration(sa.interval_ms, interval, sizeof(interval));
    int stdin_open = 1;
    for (;;) {
        rows rs;
        memset(&rs, 0, sizeof(rs));
        int rc = dlock_client_scan(c, pattern, collect, &rs);
        if (rs.n)
            qsort(rs.v, rs.n, sizeof(row), by_name);
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        if (tty)
            fputs("\033[H\033[2J", stdout);
        printf("dlock watch  %s  pattern '%s'  every %s  %02d:%02d:%02d  (q to quit)\n\n", shown,
               pattern, interval, tm.tm_hour, tm.tm_min, tm.tm_sec);
        if (rc != DLOCK_OK)
            printf("error: %s\n", dlock_last_error());
        else if (rs.n == 0)
            printf("no locks\n");
        else
            print_table(stdout, &rs, tty ? 40 : 0);
        printf("\n%zu lock%s\n", rs.n, rs.n == 1 ? "" : "s");
        if (!tty)
            fputs("\n", stdout);
        fflush(stdout);
        free_rows(&rs);

        int quit = 0;
        int64_t left = sa.interval_ms;
        while (left > 0 && !quit) {
            struct timespec t0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            struct pollfd p[2] = {{sfd, POLLIN, 0}, {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
            int n = poll(p, 2, (int)left);
            if (n < 0 && errno != EINTR)
                quit = 1;
            if (p[0].revents) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) > 0)
                    quit = 1;
            }
            if (p[1].revents) {
                char ch;
                ssize_t k = read(STDIN_FILENO, &ch, 1);
                if (k == 1 && (ch == 'q' || ch == 'Q'))
                    quit = 1;
                else if (k <= 0)
                    stdin_open = 0;   /* closed: only signals end the watch */
            }
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            left -= (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        }
        if (quit)
            break;
    }
    if (tty)
        fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    restore_terminal();
    dlock_client_close(c);
    close(sfd);
    return 0;
}

/* --------------------------------------------------------------- unlock */

int cmd_unlock(cli_opts *o, int argc, char **argv)
{
    show_args sa;
    if (parse_show(o, "unlock", argc, argv, F_FORCE, 1, &sa) != 0)
        return EXIT_USAGE;
    if (sa.npos != 1) {
        cli_usage_error(o, "unlock: missing lock NAME");
        return EXIT_USAGE;
    }
    if (!sa.force) {
        cli_usage_error(o, "unlock: only 'unlock --force NAME' exists: it releases the lock "
                           "whoever holds it");
        return EXIT_USAGE;
    }
    dlock_client *c;
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    dlock_lock *l;
    int rc = dlock_lock_get(c, sa.pos[0], &l);
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "unlock");
        dlock_client_close(c);
        return code;
    }
    char who[300] = "";
    dlock_info *info = NULL;
    if (dlock_lock_inspect(l, &info) == DLOCK_OK && dlock_info_locked(info))
        snprintf(who, sizeof(who), " by %s", dlock_info_owner(info, 0));
    dlock_info_free(info);
    int was = 0;
    rc = dlock_lock_force_release(l, &was);
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "unlock");
    } else if (!o->quiet) {
        if (was)
            printf("%s: was held%s; released, waiters woken\n", sa.pos[0], who);
        else
            printf("%s: was not held\n", sa.pos[0]);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    return code;
}
