/* dlock watch: a live table of locks. When Redis goes away the header says so
 * at the next refresh (no retries: the client is opened with none) and the
 * last good table stays on screen, greyed, with its time: a dead server is
 * never shown as "no locks". */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "show.h"

static struct termios saved_tio;
static int tio_saved;

static void restore_terminal(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
        tio_saved = 0;
    }
}

static int parse_watch(cli_opts *o, int argc, char **argv, int64_t *interval_ms,
                       const char **pattern)
{
    *interval_ms = 1000;
    *pattern = NULL;
    int dashdash = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if (!dashdash && strcmp(a, "--") == 0) {
            dashdash = 1;
            continue;
        }
        if (!dashdash && (r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return -1;
            continue;
        }
        if (!dashdash &&
            (r = cli_opt_value(o, "watch", argc, argv, &i, "--interval", NULL, &val)) != 0) {
            static const cli_dur_rule every = {0, NULL, 50, 0, "at least 50ms"};
            if (r < 0 || cli_duration_opt(o, "watch", "--interval", val, &every, interval_ms) != 0)
                return -1;
            continue;
        }
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            cli_usage_error(o, "watch", "unknown option '%s'", a);
            return -1;
        }
        if (*pattern) {
            cli_usage_error(o, "watch", "one PATTERN at most");
            return -1;
        }
        *pattern = a;
    }
    if (!*pattern)
        *pattern = cli_default_pattern(o);
    if (!*pattern)
        *pattern = "*";
    return 0;
}

/* One refresh: the locks (SCAN), then each shown row inspected again for its
 * waiters. Returns a dlock status; on failure *rs is left empty. */
static int load(dlock_client *c, const char *pattern, size_t max_rows, rows *rs)
{
    memset(rs, 0, sizeof(*rs));
    rs->map = holder_map_load(c);
    int rc = dlock_client_scan(c, pattern, rows_collect, rs);
    if (rc == DLOCK_OK && rs->oom)
        rc = DLOCK_ENOMEM;
    rows_sort(rs);
    for (size_t i = 0; rc == DLOCK_OK && i < rs->n && (!max_rows || i < max_rows); i++) {
        dlock_lock *l;
        dlock_info *info = NULL;
        rc = dlock_lock_get(c, rs->v[i].raw, &l);
        if (rc == DLOCK_OK) {
            rc = dlock_lock_inspect(l, &info);
            dlock_lock_free(l);
        }
        if (rc == DLOCK_OK)
            rc = rows_refresh(rs, i, info);
        dlock_info_free(info);
    }
    holder_map_free(rs->map);   /* the rows keep what they need as text */
    rs->map = NULL;
    if (rc != DLOCK_OK)
        rows_free(rs);
    return rc;
}

static const char *clock_str(time_t t, char *buf, size_t size)
{
    struct tm tm;
    localtime_r(&t, &tm);
    snprintf(buf, size, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
    return buf;
}

typedef struct view {
    int tty;
    size_t max_rows;
    rows good;          /* the last good table */
    time_t good_at;     /* 0: none yet */
    time_t down_since;  /* 0: Redis answered the last refresh */
    int unreachable;    /* the failure is Redis not answering */
    char err[300];
} view;

static void draw(const view *v, const char *shown, const char *pattern, const char *interval)
{
    char now[16], at[16], since[16];
    if (v->tty)
        fputs("\033[H\033[2J", stdout);
    printf("dlock watch  %s  pattern '%s'  every %s  %s  (q to quit)\n", shown, pattern,
           interval, clock_str(time(NULL), now, sizeof(now)));
    if (v->down_since) {
        printf("%s%s since %s: %s%s\n", v->tty ? "\033[1;31m" : "",
               v->unreachable ? "Redis unreachable" : "refresh failing",
               clock_str(v->down_since, since, sizeof(since)), v->err, v->tty ? "\033[0m" : "");
        if (!v->good_at) {
            printf("\n(no table yet)\n");
        } else {
            printf("\n%slast good table, %s (stale):\n", v->tty ? "\033[2m" : "",
                   clock_str(v->good_at, at, sizeof(at)));
            rows_print(stdout, &v->good, v->max_rows, 1);
            printf("\n%zu lock%s at %s%s\n", v->good.n, v->good.n == 1 ? "" : "s", at,
                   v->tty ? "\033[0m" : "");
        }
    } else {
        putchar('\n');
        if (v->good.n == 0)
            printf("no locks\n");
        else
            rows_print(stdout, &v->good, v->max_rows, 1);
        printf("\n%zu lock%s\n", v->good.n, v->good.n == 1 ? "" : "s");
    }
    if (!v->tty)
        fputs("\n", stdout);
    fflush(stdout);
}

/* Waits up to ms for a key or a signal. Returns 1 to quit. */
static int wait_input(int sfd, int64_t ms, int *stdin_open)
{
    int64_t until = mono_ms() + ms;
    for (int64_t left = ms; left > 0; left = until - mono_ms()) {
        struct pollfd p[2] = {{sfd, POLLIN, 0}, {*stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
        int n = poll(p, 2, (int)left);
        if (n < 0 && errno != EINTR)
            return 1;
        if (n > 0 && p[0].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) > 0)
                return 1;
        }
        if (n > 0 && p[1].revents) {
            char ch;
            ssize_t k = read(STDIN_FILENO, &ch, 1);
            if (k == 1 && (ch == 'q' || ch == 'Q'))
                return 1;
            if (k <= 0)
                *stdin_open = 0;   /* closed: only signals end the watch */
        }
    }
    return 0;
}

int cmd_watch(cli_opts *o, int argc, char **argv)
{
    int64_t interval_ms;
    const char *pattern;
    if (parse_watch(o, argc, argv, &interval_ms, &pattern) != 0)
        return EXIT_USAGE;
    int sfd = cli_stop_signals();
    dlock_client *c;
    o->retry_attempts = 0;   /* a dead server is news for the next frame, not after retries */
    o->label = "watch";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    view v;
    memset(&v, 0, sizeof(v));
    v.tty = isatty(STDOUT_FILENO);
    v.max_rows = v.tty ? 40 : 0;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        tio_saved = 1;
    }
    if (v.tty)
        fputs("\033[?1049h\033[?25l", stdout);   /* alternate screen, hide cursor */
    char shown[300], interval[32], pat[200];
    display_url(o->url, shown, sizeof(shown));
    cli_fmt_duration(interval_ms, interval, sizeof(interval));
    cli_esc(pattern, pat, sizeof(pat));
    int stdin_open = 1, first = 1;
    do {
        rows fresh;
        int rc = load(c, pattern, v.max_rows, &fresh);
        /* Refused by the ACL from the start: no later frame would be let
         * through either. */
        if (first && rc != DLOCK_OK && cli_exit_code(rc, dlock_last_error()) == EXIT_NOPERM) {
            if (v.tty)
                fputs("\033[?25h\033[?1049l", stdout);
            fflush(stdout);
            restore_terminal();
            code = cli_fail(o, rc, "watch");
            cli_prefix_hint(o, rc, pattern);
            break;
        }
        first = 0;
        if (rc == DLOCK_OK) {
            rows_free(&v.good);
            v.good = fresh;
            v.good_at = time(NULL);
            v.down_since = 0;
        } else {
            if (!v.down_since)
                v.down_since = time(NULL);
            v.unreachable = cli_exit_code(rc, dlock_last_error()) == EXIT_UNAVAILABLE;
            cli_esc(dlock_last_error(), v.err, sizeof(v.err));
        }
        draw(&v, shown, pat, interval);
    } while (!wait_input(sfd, interval_ms, &stdin_open));
    if (!code) {
        if (v.tty)
            fputs("\033[?25h\033[?1049l", stdout);
        fflush(stdout);
        restore_terminal();
    }
    rows_free(&v.good);
    dlock_client_close(c);
    close(sfd);
    return code;
}
