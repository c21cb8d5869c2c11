/* dlock: run a command under a distributed lock, inspect locks. What flock(1)
 * is for one machine, dlock is for many. This file: global options, opening
 * the client (URL, password sources), and the exit code of each failure. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define PASSWORD_MAX 512

void cli_err(const cli_opts *o, const char *fmt, ...)
{
    if (o && o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("dlock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_usage_error(const cli_opts *o, const char *cmd, const char *fmt, ...)
{
    if (o && o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dlock: %s%s", cmd ? cmd : "", cmd ? ": " : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "(dlock %s --help for its usage)\n", cmd);
    else
        fputs("usage: dlock [OPTIONS] run|status|list|watch|unlock|revoke|latch|barrier|fence|elect|leader|"
              "check|exporter|doctor|help ... (dlock --help for more)\n", stderr);
}

int cli_exit_code(int rc, const char *detail)
{
    switch (rc) {
    case DLOCK_ECONN:
    case DLOCK_ECMDTIMEOUT:
    case DLOCK_EUNKNOWN:
    case DLOCK_EREPLICAS:
        return EXIT_UNAVAILABLE;
    case DLOCK_EAUTH:
        /* The library gives one code to AUTH and SELECT refusals: a database
         * that does not exist is a configuration error, not a permission (an
         * ACL without +select is one). */
        if (detail && !strstr(detail, "NOPERM") &&
            (strstr(detail, "database selection") || strstr(detail, "DB index")))
            return EXIT_CONFIG;
        return EXIT_NOPERM;
    case DLOCK_EWRONGTYPE:
        return EXIT_DATAERR;
    case DLOCK_EFENCED:
        return EXIT_FENCED;
    case DLOCK_ETLS:
        return EXIT_TLS;
    case DLOCK_EINVAL:
    case DLOCK_ENAMETOOLONG:
        return EXIT_USAGE;
    default:
        return EXIT_SOFTWARE;
    }
}

int cli_fail(const cli_opts *o, int rc, const char *what)
{
    const char *detail = dlock_last_error();
    int code = cli_exit_code(rc, detail);
    char d[700];
    cli_err(o, "%s: %s", what, *detail ? cli_detail(o, detail, d, sizeof(d)) : dlock_strerror(rc));
    return code;
}

int cli_stop_signals(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    return signalfd(-1, &mask, SFD_CLOEXEC);
}

int64_t cli_connect_timeout(const cli_opts *o)
{
    int64_t t = o->connect_timeout_ms ? o->connect_timeout_ms : CLI_CONNECT_TIMEOUT_MS;
    if (o->connect_bound_ms > 0) {
        int64_t b = o->connect_bound_ms < CLI_CONNECT_FLOOR_MS ? CLI_CONNECT_FLOOR_MS
                                                                : o->connect_bound_ms;
        if (b < t)
            t = b;
    }
    return t;
}

/* 1 when the URL turns certificate checks off (rediss...?insecure, as the
 * library reads it: no value, 1, true or yes). */
static int insecure_url(const char *url)
{
    if (strncmp(url, "rediss", 6) != 0)
        return 0;
    const char *q = strchr(url, '?');
    while (q && *q && *q != '#') {
        q++;
        size_t n = strcspn(q, "&#");
        if (strncmp(q, "insecure", 8) == 0 &&
            (n == 8 || (n == 10 && strncmp(q + 8, "=1", 2) == 0) ||
             (n == 13 && strncmp(q + 8, "=true", 5) == 0) ||
             (n == 12 && strncmp(q + 8, "=yes", 4) == 0)))
            return 1;
        q += n;
    }
    return 0;
}

/* ------------------------------------------------------------ passwords */

static int hexval(int ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* The userinfo of a redis:// URL: *user (percent-decoded, malloc'd, NULL if
 * none), *has_pass, and *bare = the URL without it (malloc'd). Returns 0, or
 * -1 when there is no userinfo (or it is for the library to judge). */
static int split_userinfo(const char *url, char **user, int *has_pass, char **bare)
{
    *user = NULL;
    *bare = NULL;
    *has_pass = 0;
    if (strncmp(url, "redis://", 8) != 0)
        return -1;
    const char *a = url + 8;
    size_t alen = strcspn(a, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (a[i] == '@')
            at = a + i;
    if (!at)
        return -1;
    const char *colon = memchr(a, ':', (size_t)(at - a));
    size_t ulen = colon ? (size_t)(colon - a) : (size_t)(at - a);
    *has_pass = colon != NULL && at > colon + 1;
    if (ulen > 0) {
        char *u = malloc(ulen + 1);
        if (!u)
            return -1;
        size_t j = 0;
        for (size_t i = 0; i < ulen; i++) {
            int h1, h2;
            if (a[i] == '%' && i + 2 < ulen && (h1 = hexval((unsigned char)a[i + 1])) >= 0 &&
                (h2 = hexval((unsigned char)a[i + 2])) >= 0 && (h1 | h2)) {
                u[j++] = (char)(h1 * 16 + h2);
                i += 2;
            } else {
                u[j++] = a[i];
            }
        }
        u[j] = '\0';
        *user = u;
    }
    size_t blen = 8 + strlen(at + 1) + 1;
    *bare = malloc(blen);
    if (!*bare) {
        free(*user);
        *user = NULL;
        return -1;
    }
    snprintf(*bare, blen, "redis://%s", at + 1);
    return 0;
}

/* First line of the file, without its line ending. Returns 0 or an exit code. */
static int read_password_file(const cli_opts *o, char *buf, size_t size)
{
    int fd = open(o->password_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        cli_err(o, "cannot read --password-file %s: %s", o->password_file, strerror(errno));
        return EXIT_NOINPUT;
    }
    /* As ssh says of a private key others may read (a warning, not a refusal:
     * the password is read all the same). */
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077))
        cli_err(o, "warning: --password-file %s may be read by %s (mode %04o): chmod go= it",
                o->password_file, st.st_mode & 007 ? "any user" : "its group",
                (unsigned)(st.st_mode & 07777));
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, size - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            cli_err(o, "cannot read --password-file %s: %s", o->password_file, strerror(errno));
            close(fd);
            return EXIT_NOINPUT;
        }
        if (k == 0 || (n += (size_t)k) == size - 1)
            break;
    }
    close(fd);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\r')
        buf[--n] = '\0';
    if (n == 0) {
        cli_err(o, "--password-file %s: the first line is empty", o->password_file);
        return EXIT_NOINPUT;
    }
    if (n >= PASSWORD_MAX) {
        cli_err(o, "--password-file %s: the password is longer than %d bytes", o->password_file,
                PASSWORD_MAX - 1);
        return EXIT_NOINPUT;
    }
    return 0;
}

/* --password-command: the URL's user and the command's first line, fetched
 * afresh at every connect (the library's credentials callback). */
static struct {
    const char *cmd;
    char user[256];
} pwcmd;

static int password_command(const char *addr, int sentinel, char *user, char *password,
                            void *ud)
{
    (void)addr;
    (void)ud;
    if (sentinel)
        return DLOCK_CREDENTIALS_NONE;   /* the command gives the data nodes' password */
    snprintf(user, DLOCK_CREDENTIAL_MAX, "%s", pwcmd.user);
    FILE *f = popen(pwcmd.cmd, "r");
    if (!f)
        return -1;
    password[0] = '\0';
    if (!fgets(password, DLOCK_CREDENTIAL_MAX, f))
        password[0] = '\0';
    char drain[256];
    while (fgets(drain, sizeof(drain), f))
        ;
    int st = pclose(f);
    password[strcspn(password, "\r\n")] = '\0';
    return st == 0 ? 0 : -1;
}

/* --map (repeatable): the library's address map, the syntax of the URL's
 * ?map=. Returns 0 or an exit code. */
static int add_maps(const cli_opts *o, dlock_config *cfg)
{
    for (int i = 0; i < o->nmaps; i++) {
        int rc = dlock_config_add_address_map(cfg, o->maps[i]);
        if (rc == DLOCK_ENOMEM) {
            cli_err(o, "out of memory");
            return EXIT_SOFTWARE;
        }
        if (rc != DLOCK_OK) {
            cli_usage_error(o, NULL, "--map: %s", dlock_last_error());
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* Sets the URL and the password, from the first of: --password-file, the
 * URL itself, $DLOCK_PASSWORD, $REDISCLI_AUTH. Returns 0 or an exit code. */
static int configure_endpoint(const cli_opts *o, dlock_config *cfg)
{
    const char *src = o->url_from_env ? "$DLOCK_URL" : "--url";
    int bad_url = o->url_from_env ? EXIT_CONFIG : EXIT_USAGE;
    char *user = NULL, *bare = NULL;
    int has_pass = 0;
    split_userinfo(o->url, &user, &has_pass, &bare);
    char pw[PASSWORD_MAX + 2] = "";
    const char *pass = NULL;
    int code = 0;
    if (o->password_file && o->password_command) {
        cli_usage_error(o, NULL, "--password-file and --password-command: give one");
        code = EXIT_USAGE;
        goto out;
    }
    if (o->password_command) {
        snprintf(pwcmd.user, sizeof(pwcmd.user), "%s", user ? user : "");
        pwcmd.cmd = o->password_command;
        dlock_config_set_credentials(cfg, password_command, NULL);
        pass = NULL;
    } else if (o->password_file) {
        if ((code = read_password_file(o, pw, sizeof(pw))) != 0)
            goto out;
        pass = pw;
    } else if (!has_pass) {
        const char *e = getenv("DLOCK_PASSWORD");
        if (!e || !*e)
            e = getenv("REDISCLI_AUTH");
        if (e && *e)
            pass = e;
    }
    if (user && !has_pass && !pass && !o->password_command) {
        char u[80];
        cli_err(o, "%s names user '%s' but no password: give it with --password-file, "
                   "$DLOCK_PASSWORD or $REDISCLI_AUTH", src, cli_esc(user, u, sizeof(u)));
        code = bad_url;
        goto out;
    }
    if (dlock_config_set_url(cfg, (pass || o->password_command) && bare ? bare : o->url) !=
        DLOCK_OK) {
        if (o->url_from_env)
            cli_err(o, "$DLOCK_URL: %s", dlock_last_error());
        else
            cli_usage_error(o, NULL, "--url: %s", dlock_last_error());
        code = bad_url;
        goto out;
    }
    if (pass && dlock_config_set_password(cfg, user, pass) != DLOCK_OK) {
        cli_err(o, "password: %s", dlock_last_error());
        code = EXIT_CONFIG;
    }
out:
    explicit_bzero(pw, sizeof(pw));
    free(user);
    free(bare);
    return code;
}

int cli_open(const cli_opts *o, dlock_client **out, dlock_lost_cause_fn lost, void *lost_ud)
{
    dlock_config *cfg = dlock_config_new();
    if (!cfg) {
        cli_err(o, "out of memory");
        return EXIT_SOFTWARE;
    }
    int code = configure_endpoint(o, cfg);
    if (!code)
        code = add_maps(o, cfg);
    if (code) {
        dlock_config_free(cfg);
        return code;
    }
    int rc = 0;
    if ((o->watchdog_ms && (rc = dlock_config_set_watchdog_timeout(cfg, o->watchdog_ms)) != 0) ||
        (o->command_timeout_ms &&
         (rc = dlock_config_set_command_timeout(cfg, o->command_timeout_ms)) != 0) ||
        (o->retry_attempts >= 0 && (rc = dlock_config_set_retry(cfg, o->retry_attempts, 0)) != 0) ||
        (rc = dlock_config_set_failover_quarantine(cfg, (dlock_quarantine)o->quarantine_mode,
                                                   o->quarantine_ms)) != 0) {
        cli_usage_error(o, NULL, "%s", dlock_last_error());
        dlock_config_free(cfg);
        return EXIT_USAGE;
    }
    if (!rc && (rc = dlock_config_set_connect_timeout(cfg, cli_connect_timeout(o))) != 0) {
        cli_usage_error(o, NULL, "%s", dlock_last_error());
        dlock_config_free(cfg);
        return EXIT_USAGE;
    }
    if (insecure_url(o->url))
        cli_err(o, "warning: the URL says insecure: the server's certificate is not checked, "
                   "so the connection is encrypted but anyone on the path can pose as the "
                   "server");
    /* WAIT's timeout must stay under the command timeout (default 3 s). */
    if (o->replica_ack > 0 &&
        dlock_config_set_replica_ack(cfg, o->replica_ack, 1000, DLOCK_ACK_KEEP) != DLOCK_OK) {
        cli_usage_error(o, NULL, "%s", dlock_last_error());
        dlock_config_free(cfg);
        return EXIT_USAGE;
    }
    if (o->inspect_max && dlock_config_set_inspect_limit(cfg, o->inspect_max) != DLOCK_OK) {
        cli_usage_error(o, NULL, "%s", dlock_last_error());
        dlock_config_free(cfg);
        return EXIT_USAGE;
    }
    if (lost)
        dlock_config_set_lost_cause_callback(cfg, lost, lost_ud);
    if (o->label)
        dlock_config_set_client_name(cfg, o->label);
    rc = dlock_client_open(out, cfg);
    dlock_config_free(cfg);
    if (rc != DLOCK_OK) {
        /* The server wants a password and was given none: say where one goes. */
        int noauth = rc == DLOCK_EAUTH && strstr(dlock_last_error(), "NOAUTH");
        code = cli_fail(o, rc, "cannot use Redis");
        if (noauth)
            cli_err(o, "the server asks for a password: give it with --password-file FILE, "
                       "$DLOCK_PASSWORD, or in the URL (redis://[USER]:PASSWORD@HOST:PORT)");
        return code;
    }
    return 0;
}

/* --------------------------------------------------------------- options */

int cli_opt_value(const cli_opts *o, const char *cmd, int argc, char **argv, int *i,
                  const char *lng, const char *shrt, const char **val)
{
    const char *a = argv[*i];
    size_t n = lng ? strlen(lng) : 0;
    if ((lng && strcmp(a, lng) == 0) || (shrt && strcmp(a, shrt) == 0)) {
        if (*i + 1 >= argc) {
            cli_usage_error(o, cmd, "%s needs a value", a);
            return -1;
        }
        *val = argv[++*i];
        return 1;
    }
    if (lng && strncmp(a, lng, n) == 0 && a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (shrt && strncmp(a, shrt, 2) == 0 && a[2] != '\0') {   /* -w5 */
        *val = a + 2;
        return 1;
    }
    return 0;
}

/* The password of a URL's userinfo, as [*from, *to) in url (every scheme
 * dlock takes; the userinfo ends at the authority's last '@'). 0 when it
 * has none. */
static int url_password(const char *url, const char **from, const char **to)
{
    static const char *const schemes[] = {"redis://",           "rediss://",
                                          "redis-sentinel://",  "redis-cluster://",
                                          "redis-replicated://", "rediss-sentinel://",
                                          "rediss-cluster://",  "rediss-replicated://"};
    const char *a = NULL;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]) && !a; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            a = url + strlen(schemes[i]);
    if (!a)
        return 0;
    size_t alen = strcspn(a, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (a[i] == '@')
            at = a + i;
    const char *colon = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
    if (!colon || colon + 1 == at)
        return 0;
    *from = colon + 1;
    *to = at;
    return 1;
}

/* Masks a password given in --url in our own argument list, so that `ps` shows
 * it for as short a time as we can manage (prefer the other sources). */
static void mask_url_password(char *url)
{
    const char *from, *to;
    if (url_password(url, &from, &to))
        memset(url + (from - url), 'x', (size_t)(to - from));
}

char *cli_url_without_password(const char *url)
{
    const char *from, *to;
    if (!url || !url_password(url, &from, &to))
        return NULL;
    size_t head = (size_t)(from - 1 - url);   /* up to the ':' before the password */
    char *s = malloc(strlen(url) + 1);
    if (s) {
        memcpy(s, url, head);
        strcpy(s + head, to);
    }
    return s;
}

const char *cli_default_pattern(const cli_opts *o)
{
    static char glob[2 * DLOCK_NAME_MAX + 2];
    if (!o->prefix || !*o->prefix)
        return NULL;
    size_t j = 0;
    for (const char *p = o->prefix; *p && j + 3 < sizeof(glob); p++) {
        if (strchr("*?[]\\", *p))
            glob[j++] = '\\';
        glob[j++] = *p;
    }
    glob[j++] = '*';
    glob[j] = '\0';
    return glob;
}

void cli_prefix_hint(const cli_opts *o, int rc, const char *pattern)
{
    if (rc != DLOCK_EAUTH || (pattern && strcmp(pattern, "*") != 0))
        return;
    cli_err(o, "this user may not read every key (its ACL limits it to a prefix): give a "
               "PATTERN under its prefix ('orders:*'), or the prefix once with --prefix or "
               "$DLOCK_PREFIX");
}

int cli_global_opt(cli_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *val;
    int r;
    if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
        o->quiet = 1;
        return 1;
    }
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--url", NULL, &val)) != 0) {
        if (r > 0) {
            /* The library parses a copy (in cli_open): the mask is for ps. */
            char *copy = strdup(val);
            if (!copy) {
                cli_err(o, "out of memory");
                return -1;
            }
            mask_url_password((char *)val);
            free(o->url_copy);
            o->url = o->url_copy = copy;
            o->url_from_env = 0;
        }
        return r;
    }
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--prefix", NULL, &val)) != 0) {
        if (r > 0 && strlen(val) > DLOCK_NAME_MAX) {
            cli_usage_error(o, NULL, "--prefix is longer than a name may be (%d bytes)",
                            DLOCK_NAME_MAX);
            return -1;
        }
        if (r > 0)
            o->prefix = val;
        return r;
    }
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--password-file", NULL, &val)) != 0) {
        if (r > 0)
            o->password_file = val;
        return r;
    }
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--map", NULL, &val)) != 0) {
        if (r > 0 && o->nmaps == (int)(sizeof(o->maps) / sizeof(o->maps[0]))) {
            cli_usage_error(o, NULL, "--map: at most %d", o->nmaps);
            return -1;
        }
        if (r > 0)
            o->maps[o->nmaps++] = val;
        return r;
    }
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--password-command", NULL, &val)) != 0) {
        if (r > 0)
            o->password_command = val;
        return r;
    }
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--failover-quarantine", NULL, &val)) != 0) {
        if (r <= 0)
            return r;
        static const cli_dur_rule q = {0, NULL, 1, 86400000, "1ms to 1d"};
        o->quarantine_ms = 0;
        if (strcmp(val, "off") == 0)
            o->quarantine_mode = DLOCK_QUARANTINE_OFF;
        else if (strcmp(val, "auto") == 0)
            o->quarantine_mode = DLOCK_QUARANTINE_AUTO;
        else if (cli_duration_opt(o, NULL, "--failover-quarantine (off, auto or a duration)",
                                  val, &q, &o->quarantine_ms) == 0)
            o->quarantine_mode = DLOCK_QUARANTINE_ON;
        else
            return -1;
        return 1;
    }
    if (strcmp(a, "--timeout") == 0 || strncmp(a, "--timeout=", 10) == 0) {
        cli_usage_error(o, NULL, "--timeout is the wait limit of 'run' (flock's name for it): "
                                 "give it after 'run'; the Redis reply timeout is "
                                 "--command-timeout");
        return -1;
    }
    /* The library's bounds, said here in the command's words. */
    static const cli_dur_rule watchdog = {0, NULL, 30, 86400000, "30ms to 1d"};
    static const cli_dur_rule timeout = {0, NULL, 1, 86400000, "1ms to 1d"};
    int64_t *dst = NULL;
    const cli_dur_rule *rule = &timeout;
    const char *name = NULL;
    if ((r = cli_opt_value(o, NULL, argc, argv, i, "--watchdog", NULL, &val)) != 0) {
        dst = &o->watchdog_ms;
        name = "--watchdog";
        rule = &watchdog;
    } else if ((r = cli_opt_value(o, NULL, argc, argv, i, "--command-timeout", NULL, &val)) != 0) {
        dst = &o->command_timeout_ms;
        name = "--command-timeout";
    } else if ((r = cli_opt_value(o, NULL, argc, argv, i, "--connect-timeout", NULL, &val)) != 0) {
        dst = &o->connect_timeout_ms;
        name = "--connect-timeout";
    }
    if (r <= 0)
        return r;
    return cli_duration_opt(o, NULL, name, val, rule, dst) == 0 ? 1 : -1;
}

int cli_duration_opt(const cli_opts *o, const char *cmd, const char *opt, const char *val,
                     const cli_dur_rule *rule, int64_t *ms)
{
    char v[80];
    cli_esc(val, v, sizeof(v));
    int rc = cli_parse_duration(val, ms);
    if (rc == -2) {
        cli_usage_error(o, cmd, "%s '%s' is longer than a year, the longest duration dlock "
                                "takes%s%s", opt, v, rule->inf ? "; inf: " : "",
                        rule->inf ? rule->inf : "");
        return -1;
    }
    if (rc != 0) {
        cli_usage_error(o, cmd, "%s '%s' is not a duration (%s500ms, 10s, 1m30s%s)", opt, v,
                        rule->zero_ok ? "0, " : "", rule->inf ? ", inf" : "");
        return -1;
    }
    if (*ms == CLI_DUR_INF && !rule->inf) {
        cli_usage_error(o, cmd, "%s '%s': give a finite duration (500ms, 10s, 1m30s)", opt, v);
        return -1;
    }
    if (*ms == 0 && !rule->zero_ok) {
        cli_usage_error(o, cmd, "%s '%s': give a duration above 0 (500ms, 10s, 1m30s)", opt, v);
        return -1;
    }
    if (*ms != CLI_DUR_INF && ((rule->min_ms && *ms < rule->min_ms && *ms != 0) ||
                               (rule->max_ms && *ms > rule->max_ms))) {
        cli_usage_error(o, cmd, "%s '%s' is out of range: %s", opt, v, rule->range);
        return -1;
    }
    return 0;
}

int cli_common_arg(cli_opts *o, int argc, char **argv, int *i, int *dashdash)
{
    if (*dashdash)
        return 0;
    if (strcmp(argv[*i], "--") == 0) {
        *dashdash = 1;
        return 1;
    }
    return cli_global_opt(o, argc, argv, i);
}

static int run_main(cli_opts *o, int argc, char **argv);

int main(int argc, char **argv)
{
    cli_opts o;
    memset(&o, 0, sizeof(o));
    /* The argument strings lie end to end: one area from argv[0]'s first
     * byte to the last one's NUL (checked: nothing else may be written over). */
    if (argc > 0 && argv[0]) {
        char *end = argv[0];
        int contiguous = 1;
        for (int k = 0; k < argc && contiguous; k++) {
            contiguous = argv[k] == end;
            end = argv[k] + strlen(argv[k]) + 1;
        }
        if (contiguous) {
            o.args = argv[0];
            o.args_len = (size_t)(end - argv[0]);
        }
    }
    int code = run_main(&o, argc, argv);
    free(o.url_copy);
    return code;
}

static int run_main(cli_opts *o, int argc, char **argv)
{
    o->retry_attempts = -1;
    o->prefix = getenv("DLOCK_PREFIX");
    o->url = getenv("DLOCK_URL");
    o->url_from_env = 1;
    if (!o->url || !*o->url) {
        o->url = "redis://127.0.0.1:6379";
        o->url_from_env = 0;
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            cli_help(stdout, NULL);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("dlock %s (libdlock %s)\n", DLOCK_VERSION_STRING, dlock_version());
            return 0;
        }
        int r = cli_global_opt(o, argc, argv, &i);
        if (r < 0)
            return EXIT_USAGE;
        if (r == 0) {
            cli_usage_error(o, NULL, "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) {
        cli_usage_error(o, NULL, "missing command");
        return EXIT_USAGE;
    }
    const char *cmd = argv[i];
    int cargc = argc - i;
    char **cargv = argv + i;
    if (strcmp(cmd, "help") == 0) {
        if (cargc == 2 && (strcmp(cargv[1], "--help") == 0 || strcmp(cargv[1], "-h") == 0))
            cargv[1] = "help";
        /* "help latch set": a subcommand's usage. */
        char sub[32];
        const char *topic = cargc > 1 ? cargv[1] : NULL;
        if (cargc == 3 && strcmp(cargv[1], "latch") == 0 && strlen(cargv[2]) < 16) {
            snprintf(sub, sizeof(sub), "latch %s", cargv[2]);
            topic = sub;
        } else if (cargc > 2) {
            cli_usage_error(o, "help", "one command at most");
            return EXIT_USAGE;
        }
        if (cli_help(stdout, topic) != 0) {
            char e[80];
            cli_usage_error(o, NULL, "help: unknown command '%s'", cli_esc(topic, e, sizeof(e)));
            return EXIT_USAGE;
        }
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(cli_opts *, int, char **);
    } cmds[] = {{"run", cmd_run},       {"status", cmd_status}, {"list", cmd_list},
                {"watch", cmd_watch},   {"unlock", cmd_unlock}, {"latch", cmd_latch},
                {"fence", cmd_fence},   {"elect", cmd_elect},   {"leader", cmd_leader},
                {"check", cmd_check},   {"exporter", cmd_exporter}, {"doctor", cmd_doctor},
                {"barrier", cmd_barrier}, {"revoke", cmd_revoke}};
    for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
        if (strcmp(cmd, cmds[k].name) != 0)
            continue;
        /* "--help" / "-h" before any "--" is a request for help, whatever else
         * the line holds. */
        for (int j = 1; j < cargc && strcmp(cargv[j], "--") != 0; j++) {
            if (strcmp(cargv[j], "--help") == 0 || strcmp(cargv[j], "-h") == 0) {
                /* A command with subcommands: the subcommand's usage. */
                char sub[32];
                if (j > 1 && strlen(cargv[1]) < 16) {
                    snprintf(sub, sizeof(sub), "%s %s", cmd, cargv[1]);
                    if (cli_help(stdout, sub) == 0)
                        return 0;
                }
                cli_help(stdout, cmd);
                return 0;
            }
        }
        return cmds[k].fn(o, cargc, cargv);
    }
    cli_usage_error(o, NULL, "unknown command '%s'", cmd);
    return EXIT_USAGE;
}
