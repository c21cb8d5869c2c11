/* dlock: run a command under a distributed lock, inspect locks. What flock(1)
 * is for one machine, dlock is for many. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: dlock [--url URL] [--watchdog DUR] [--timeout DUR] [-q] COMMAND ...\n"
    "\n"
    "Commands:\n"
    "  run [--wait DUR] [--lease DUR] [--conflict-exit-code N] [--on-lost term|ignore]\n"
    "      NAME -- CMD [ARG...]   run CMD while holding lock NAME, then release it\n"
    "  status NAME [--json]       free or held; holders, TTL, fencing token, waiters\n"
    "  list [PATTERN] [--json]    the locks in Redis (SCAN), Redisson's included\n"
    "  watch [PATTERN] [--interval DUR]\n"
    "                             a live table of locks, until q or Ctrl-C\n"
    "  unlock --force NAME        delete the lock whoever holds it; wake its waiters\n"
    "\n"
    "Options:\n"
    "  --url URL        redis://[user[:password]@]host[:port][/db] or unix:///path[?db=N]\n"
    "                   (default: $DLOCK_URL, else redis://127.0.0.1:6379)\n"
    "  --watchdog DUR   lease of a lock held without --lease, renewed every DUR/3\n"
    "                   while dlock runs (default 30s)\n"
    "  --timeout DUR    longest wait for one Redis reply (default 3s)\n"
    "  -q, --quiet      no messages on stderr, exit codes only\n"
    "  -h, --help       this text;  --version  the version\n"
    "\n"
    "run:\n"
    "  --wait DUR       give up after DUR (0: try once); default: wait as long as it takes\n"
    "  --lease DUR      hold for DUR at most, no renewal; default: the watchdog\n"
    "  --conflict-exit-code N   exit code when not acquired (default 75)\n"
    "  --on-lost term   if the lock is lost while CMD runs: SIGTERM, SIGKILL 10 s later,\n"
    "                   exit 76 (default);  --on-lost ignore: warn only\n"
    "  CMD gets DLOCK_NAME and DLOCK_TOKEN (the fencing token) in its environment.\n"
    "  SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to dlock are passed on to CMD; the\n"
    "  lock is released once CMD is gone, whatever happened.\n"
    "\n"
    "Durations: 500ms, 10s, 2m, 1h; a bare number is seconds (1.5 = 1500ms).\n"
    "\n"
    "Exit codes:\n"
    "  0    success (run: CMD's own status; 128+N if CMD died of signal N)\n"
    "  64   usage error            65  the key exists and is not a lock\n"
    "  69   Redis unreachable      70  other failure\n"
    "  75   lock not acquired in time (see --conflict-exit-code)\n"
    "  76   lock lost while CMD ran (with --on-lost term)\n"
    "  126, 127  CMD could not be run / was not found\n";

static const char *prog_name = "dlock";

void cli_err(const cli_opts *o, const char *fmt, ...)
{
    if (o && o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_usage_error(const cli_opts *o, const char *fmt, ...)
{
    if (o && o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fprintf(stderr, "usage: dlock [--url URL] [-q] run|status|list|watch|unlock ... "
                    "(dlock --help for more)\n");
}

int cli_fail(const cli_opts *o, int rc, const char *what)
{
    int code;
    switch (rc) {
    case DLOCK_ECONN:
    case DLOCK_ECMDTIMEOUT:
    case DLOCK_EAUTH:
        code = EXIT_UNAVAILABLE;
        break;
    case DLOCK_EWRONGTYPE:
        code = EXIT_DATAERR;
        break;
    case DLOCK_EINVAL:
    case DLOCK_ENAMETOOLONG:
        code = EXIT_USAGE;
        break;
    default:
        code = EXIT_SOFTWARE;
    }
    const char *detail = dlock_last_error();
    cli_err(o, "%s: %s", what, *detail ? detail : dlock_strerror(rc));
    return code;
}

int cli_open(const cli_opts *o, dlock_client **out, dlock_lost_fn lost, void *lost_ud)
{
    dlock_config *cfg = dlock_config_new();
    if (!cfg) {
        cli_err(o, "out of memory");
        return EXIT_SOFTWARE;
    }
    int rc = dlock_config_set_url(cfg, o->url);
    if (rc != DLOCK_OK) {
        cli_usage_error(o, "--url: %s", dlock_last_error());
        dlock_config_free(cfg);
        return EXIT_USAGE;
    }
    if ((o->watchdog_ms && (rc = dlock_config_set_watchdog_timeout(cfg, o->watchdog_ms)) != 0) ||
        (o->timeout_ms && (rc = dlock_config_set_command_timeout(cfg, o->timeout_ms)) != 0)) {
        cli_usage_error(o, "%s", dlock_last_error());
        dlock_config_free(cfg);
        return EXIT_USAGE;
    }
    if (lost)
        dlock_config_set_lost_callback(cfg, lost, lost_ud);
    rc = dlock_client_open(out, cfg);
    dlock_config_free(cfg);
    if (rc != DLOCK_OK)
        return cli_fail(o, rc, "cannot use Redis");
    return 0;
}

int cli_global_opt(cli_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    static const char *const names[] = {"--url", "--watchdog", "--timeout"};
    if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
        o->quiet = 1;
        return 1;
    }
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        size_t n = strlen(names[k]);
        const char *val = NULL;
        if (strcmp(a, names[k]) == 0) {
            if (*i + 1 >= argc) {
                cli_usage_error(o, "%s needs a value", names[k]);
                return -1;
            }
            val = argv[++*i];
        } else if (strncmp(a, names[k], n) == 0 && a[n] == '=') {
            val = a + n + 1;
        } else {
            continue;
        }
        if (k == 0) {
            o->url = val;
            return 1;
        }
        int64_t ms;
        if (cli_parse_duration(val, &ms) != 0 || ms == 0) {
            cli_usage_error(o, "%s '%s' is not a positive duration (500ms, 10s, 2m, 1h)",
                            names[k], val);
            return -1;
        }
        if (k == 1)
            o->watchdog_ms = ms;
        else
            o->timeout_ms = ms;
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    cli_opts o;
    memset(&o, 0, sizeof(o));
    o.url = getenv("DLOCK_URL");
    if (!o.url || !*o.url)
        o.url = "redis://127.0.0.1:6379";
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("dlock %s (libdlock %s)\n", DLOCK_VERSION_STRING, dlock_version());
            return 0;
        }
        int r = cli_global_opt(&o, argc, argv, &i);
        if (r < 0)
            return EXIT_USAGE;
        if (r == 0) {
            cli_usage_error(&o, "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) {
        cli_usage_error(&o, "missing command");
        return EXIT_USAGE;
    }
    const char *cmd = argv[i];
    int cargc = argc - i;
    char **cargv = argv + i;
    if (strcmp(cmd, "run") == 0)
        return cmd_run(&o, cargc, cargv);
    if (strcmp(cmd, "status") == 0)
        return cmd_status(&o, cargc, cargv);
    if (strcmp(cmd, "list") == 0)
        return cmd_list(&o, cargc, cargv);
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(&o, cargc, cargv);
    if (strcmp(cmd, "unlock") == 0)
        return cmd_unlock(&o, cargc, cargv);
    if (strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    cli_usage_error(&o, "unknown command '%s'", cmd);
    return EXIT_USAGE;
}
