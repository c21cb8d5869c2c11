/* dlock run: acquire, run the command as a child, release when it is gone.
 *
 * Signals INT, TERM, HUP, QUIT and CHLD are blocked in every thread and read
 * from a signalfd, in one poll loop with the lost-lock pipe and the timers:
 *   - while waiting for the lock, a signal cancels the wait (the acquire runs in
 *     its own thread) and dlock exits 128+signal without running anything;
 *   - while the child runs, signals sent to dlock by a process are passed on
 *     (terminal-generated ones already reached the child, which shares dlock's
 *     process group, and are not sent twice);
 *   - a lost lock (the watchdog's callback, or a --lease that ran out) means
 *     SIGTERM, then SIGKILL 10 s later, and exit 76 (--on-lost term).
 * The lock is released after the child has been reaped, whatever happened. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;


#define KILL_GRACE_MS 10000

static int lost_pipe[2] = {-1, -1};

/* io thread: one byte per loss, the reason. */
static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    (void)ud;
    char b = (char)reason;
    ssize_t w = write(lost_pipe[1], &b, 1);
    (void)w;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct acquirer {
    dlock_lock *l;
    int64_t wait_ms, lease_ms;
    dlock_cancel *cancel;
    uint64_t token;
    int rc;
    char err[512];
    int done_fd;
} acquirer;

static void *acquire_main(void *arg)
{
    acquirer *a = arg;
    a->rc = dlock_lock_acquire_fenced(a->l, a->wait_ms, a->lease_ms, a->cancel, &a->token);
    snprintf(a->err, sizeof(a->err), "%s", dlock_last_error());   /* thread-local */
    char b = 1;
    ssize_t w = write(a->done_fd, &b, 1);
    (void)w;
    return NULL;
}

/* "held by X (2 holds), 12.3 s left" */
static void describe_holder(dlock_lock *l, char *buf, size_t size)
{
    dlock_info *info = NULL;
    if (dlock_lock_inspect(l, &info) != DLOCK_OK) {
        snprintf(buf, size, "held by another owner");
        return;
    }
    if (!dlock_info_locked(info)) {
        /* Refused while free: the next turn was reserved for a long waiter
         * (or the holder let go just now). */
        snprintf(buf, size, "free, but its next turn is reserved for a waiter");
        dlock_info_free(info);
        return;
    }
    char ttl[32], left[48];
    int64_t t = dlock_info_ttl(info);
    long long n = (long long)dlock_info_hold_count(info, 0);
    if (t >= 0)
        snprintf(left, sizeof(left), "%s left", cli_fmt_duration(t, ttl, sizeof(ttl)));
    else
        snprintf(left, sizeof(left), "with no expiry");
    if (n > 1)
        snprintf(buf, size, "held by %s (%lld holds), %s", dlock_info_owner(info, 0), n, left);
    else
        snprintf(buf, size, "held by %s, %s", dlock_info_owner(info, 0), left);
    dlock_info_free(info);
}

/* environ plus DLOCK_NAME and DLOCK_TOKEN (replacing inherited ones). */
static char **child_env(const char *name, uint64_t token)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof(char *));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "DLOCK_NAME=", 11) != 0 && strncmp(environ[i], "DLOCK_TOKEN=", 12) != 0)
            env[k++] = environ[i];
    size_t nl = strlen(name) + 12;
    env[k] = malloc(nl);
    env[k + 1] = malloc(40);
    if (!env[k] || !env[k + 1]) {
        free(env[k]);
        free(env[k + 1]);
        free(env);
        return NULL;
    }
    snprintf(env[k], nl, "DLOCK_NAME=%s", name);
    snprintf(env[k + 1], 40, "DLOCK_TOKEN=%llu", (unsigned long long)token);
    return env;
}

static void free_env(char **env)
{
    if (!env)
        return;
    size_t k = 0;
    while (env[k])
        k++;
    free(env[k - 2]);   /* the two we allocated are last */
    free(env[k - 1]);
    free(env);
}

typedef struct run_args {
    int64_t wait_ms;       /* DLOCK_WAIT_FOREVER by default */
    int64_t lease_ms;      /* DLOCK_WATCHDOG by default */
    int conflict_code;
    int on_lost_term;
    const char *name;
    char **cmd;
} run_args;

static int parse_args(cli_opts *o, int argc, char **argv, run_args *ra)
{
    ra->wait_ms = DLOCK_WAIT_FOREVER;
    ra->lease_ms = DLOCK_WATCHDOG;
    ra->conflict_code = EXIT_NOTACQUIRED;
    ra->on_lost_term = 1;
    ra->name = NULL;
    ra->cmd = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            ra->cmd = argv + i + 1;
            if (!ra->cmd[0]) {
                cli_usage_error(o, "run: no command after --");
                return -1;
            }
            break;
        }
        int g = cli_global_opt(o, argc, argv, &i);
        if (g < 0)
            return -1;
        if (g > 0)
            continue;
        const char *val = NULL;
        const char *opt = NULL;
        static const char *const with_value[] = {"--wait", "--lease", "--conflict-exit-code",
                                                 "--on-lost"};
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
            size_t n = strlen(with_value[k]);
            if (strcmp(a, with_value[k]) == 0) {
                if (i + 1 >= argc) {
                    cli_usage_error(o, "run: %s needs a value", a);
                    return -1;
                }
                opt = with_value[k];
                val = argv[++i];
            } else if (strncmp(a, with_value[k], n) == 0 && a[n] == '=') {
                opt = with_value[k];
                val = a + n + 1;
            }
        }
        if (opt && strcmp(opt, "--wait") == 0) {
            if (cli_parse_duration(val, &ra->wait_ms) != 0) {
                cli_usage_error(o, "run: --wait '%s' is not a duration (0, 500ms, 10s, 2m, 1h)", val);
                return -1;
            }
        } else if (opt && strcmp(opt, "--lease") == 0) {
            if (cli_parse_duration(val, &ra->lease_ms) != 0 || ra->lease_ms == 0) {
                cli_usage_error(o, "run: --lease '%s' is not a positive duration", val);
                return -1;
            }
        } else if (opt && strcmp(opt, "--conflict-exit-code") == 0) {
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (errno || *end || end == val || v < 0 || v > 255) {
                cli_usage_error(o, "run: --conflict-exit-code '%s' is not a number in 0..255", val);
                return -1;
            }
            ra->conflict_code = (int)v;
        } else if (opt && strcmp(opt, "--on-lost") == 0) {
            if (strcmp(val, "term") == 0)
                ra->on_lost_term = 1;
            else if (strcmp(val, "ignore") == 0)
                ra->on_lost_term = 0;
            else {
                cli_usage_error(o, "run: --on-lost '%s': use term or ignore", val);
                return -1;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error(o, "run: unknown option '%s'", a);
            return -1;
        } else if (!ra->name) {
            ra->name = a;
        } else {
            cli_usage_error(o, "run: unexpected '%s' (put the command after --)", a);
            return -1;
        }
    }
    if (!ra->name) {
        cli_usage_error(o, "run: missing lock NAME");
        return -1;
    }
    if (!ra->cmd) {
        cli_usage_error(o, "run: missing -- CMD");
        return -1;
    }
    return 0;
}

/* Waits for the lock while watching for signals. Returns 0 when acquired
 * (*token set), else the exit code. */
static int acquire_watching(const cli_opts *o, const run_args *ra, dlock_lock *l, int sfd,
                            uint64_t *token)
{
    int done[2];
    dlock_cancel *cancel = NULL;
    if (pipe2(done, O_CLOEXEC) != 0 || dlock_cancel_new(&cancel) != DLOCK_OK) {
        cli_err(o, "cannot set up the wait: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    acquirer a = {l, ra->wait_ms, ra->lease_ms, cancel, 0, 0, "", done[1]};
    pthread_t t;
    if (pthread_create(&t, NULL, acquire_main, &a) != 0) {
        cli_err(o, "cannot start a thread");
        return EXIT_SOFTWARE;
    }
    int sig = 0;
    for (;;) {
        struct pollfd p[2] = {{done[0], POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD &&
                !sig) {
                sig = (int)si.ssi_signo;
                dlock_cancel_fire(cancel);
            }
        }
    }
    pthread_join(t, NULL);
    close(done[0]);
    close(done[1]);
    dlock_cancel_free(cancel);
    if (a.rc == DLOCK_OK) {
        if (sig) {
            /* Acquired just as the signal came: give it back and leave. */
            dlock_lock_release(l);
            return 128 + sig;
        }
        *token = a.token;
        return 0;
    }
    if (a.rc == DLOCK_ECANCELED) {
        cli_err(o, "interrupted (%s) while waiting for '%s'", strsignal(sig), ra->name);
        return 128 + sig;
    }
    if (a.rc == DLOCK_ETIMEDOUT) {
        char who[300], waited[32];
        describe_holder(l, who, sizeof(who));
        cli_err(o, "'%s' is %s; not acquired within %s", ra->name, who,
                cli_fmt_duration(ra->wait_ms, waited, sizeof(waited)));
        return ra->conflict_code;
    }
    cli_err(o, "cannot acquire '%s': %s", ra->name, a.err[0] ? a.err : dlock_strerror(a.rc));
    switch (a.rc) {
    case DLOCK_ECONN:
    case DLOCK_ECMDTIMEOUT:
    case DLOCK_EAUTH:
        return EXIT_UNAVAILABLE;
    case DLOCK_EWRONGTYPE:
        return EXIT_DATAERR;
    default:
        return EXIT_SOFTWARE;
    }
}

static int spawn_child(const cli_opts *o, const run_args *ra, uint64_t token, pid_t *pid)
{
    char **env = child_env(ra->name, token);
    posix_spawnattr_t attr;
    sigset_t none, deflt;
    sigemptyset(&none);
    sigemptyset(&deflt);
    sigaddset(&deflt, SIGINT);
    sigaddset(&deflt, SIGTERM);
    sigaddset(&deflt, SIGHUP);
    sigaddset(&deflt, SIGQUIT);
    sigaddset(&deflt, SIGCHLD);
    sigaddset(&deflt, SIGPIPE);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &deflt);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = env ? posix_spawnp(pid, ra->cmd[0], NULL, &attr, ra->cmd, env) : ENOMEM;
    posix_spawnattr_destroy(&attr);
    free_env(env);
    if (rc != 0) {
        cli_err(o, "cannot run '%s': %s", ra->cmd[0], strerror(rc));
        return rc == ENOENT ? EXIT_CANTRUN : 126;
    }
    return 0;
}

static const char *lost_why(int reason)
{
    switch (reason) {
    case DLOCK_LOST_GONE:
        return "a renewal found it gone";
    case DLOCK_LOST_UNREACHABLE:
        return "Redis was unreachable until the lease ran out";
    default:
        return "its lease ran out";
    }
}

/* Waits for the child, passing signals on and acting on a lost lock.
 * Returns the child's wait status; *lost = the reason if lost, else 0. */
static int supervise(const cli_opts *o, const run_args *ra, pid_t pid, int sfd,
                     int64_t lease_deadline, int *lost)
{
    int64_t kill_at = -1;
    int status = 0;
    *lost = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return status;
        int64_t now = now_ms();
        if (kill_at >= 0 && now >= kill_at) {
            cli_err(o, "'%s' still running %d s after SIGTERM: sending SIGKILL", ra->cmd[0],
                    KILL_GRACE_MS / 1000);
            kill(pid, SIGKILL);
            kill_at = -1;
        }
        int lost_now = 0;
        if (lease_deadline >= 0 && now >= lease_deadline && !*lost) {
            lost_now = 3;   /* lease ran out */
            lease_deadline = -1;
        }
        int timeout = -1;
        if (!lost_now) {
            int64_t next = -1;
            if (kill_at >= 0)
                next = kill_at;
            if (lease_deadline >= 0 && (next < 0 || lease_deadline < next))
                next = lease_deadline;
            if (next >= 0)
                timeout = (int)(next > now ? next - now : 0);
            struct pollfd p[2] = {{sfd, POLLIN, 0}, {lost_pipe[0], POLLIN, 0}};
            if (poll(p, 2, timeout) < 0 && errno != EINTR)
                return status;
            if (p[0].revents) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD &&
                    si.ssi_code <= 0)   /* sent by a process: pass it on */
                    kill(pid, (int)si.ssi_signo);
            }
            if (p[1].revents) {
                char b;
                if (read(lost_pipe[0], &b, 1) == 1 && !*lost)
                    lost_now = b;
            }
        }
        if (lost_now && !*lost) {
            *lost = lost_now;
            if (ra->on_lost_term) {
                cli_err(o, "lock '%s' lost while '%s' ran (%s): sending SIGTERM", ra->name,
                        ra->cmd[0], lost_why(lost_now));
                kill(pid, SIGTERM);
                kill_at = now_ms() + KILL_GRACE_MS;
            } else {
                cli_err(o, "warning: lock '%s' lost while '%s' runs (%s); carrying on "
                           "(--on-lost ignore)",
                        ra->name, ra->cmd[0], lost_why(lost_now));
            }
        }
    }
}

int cmd_run(cli_opts *o, int argc, char **argv)
{
    run_args ra;
    if (parse_args(o, argc, argv, &ra) != 0)
        return EXIT_USAGE;
    if (pipe2(lost_pipe, O_CLOEXEC) != 0) {
        cli_err(o, "pipe: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    /* Block before any thread exists, so the io thread inherits the mask. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        cli_err(o, "signalfd: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    dlock_client *c;
    int code = cli_open(o, &c, on_lost, NULL);
    if (code)
        return code;
    /* The wait runs in a thread and the release on this one: act as one
     * explicit owner id for both, not as two thread ids. */
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *l;
    int rc = dlock_client_new_owner_id(c, owner, sizeof(owner));
    if (rc == DLOCK_OK)
        rc = dlock_lock_get_as(c, ra.name, owner, &l);
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "bad lock name");
        dlock_client_close(c);
        return code;
    }
    uint64_t token = 0;
    code = acquire_watching(o, &ra, l, sfd, &token);
    if (code) {
        dlock_lock_free(l);
        dlock_client_close(c);
        return code;
    }
    /* A --lease is renewed by nobody: the lock is gone when its TTL runs out.
     * Counting the TTL read just now from before the read errs early. */
    int64_t lease_deadline = -1;
    if (ra.lease_ms != DLOCK_WATCHDOG) {
        int64_t before = now_ms(), ttl = 0;
        lease_deadline = before + (dlock_lock_ttl(l, &ttl) == DLOCK_OK && ttl >= 0 ? ttl : 0);
    }
    pid_t pid;
    code = spawn_child(o, &ra, token, &pid);
    int lost = 0, status = 0;
    if (code == 0)
        status = supervise(o, &ra, pid, sfd, lease_deadline, &lost);
    rc = dlock_lock_release(l);
    if (rc == DLOCK_ENOTOWNER && !lost)
        cli_err(o, "warning: lock '%s' was no longer held when '%s' ended", ra.name, ra.cmd[0]);
    else if (rc != DLOCK_OK && rc != DLOCK_ENOTOWNER)
        cli_err(o, "warning: cannot release '%s' (%s); it ends with its lease", ra.name,
                dlock_last_error());
    dlock_lock_free(l);
    dlock_client_close(c);
    close(sfd);
    if (code)
        return code;
    if (lost && ra.on_lost_term)
        return EXIT_LOST;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_SOFTWARE;
}
