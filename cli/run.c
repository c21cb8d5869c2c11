/* dlock run: acquire, run the command (child.c), release when it is gone.
 *
 * Signals INT, TERM, HUP, QUIT, CHLD and CONT are blocked in every thread and
 * read from a signalfd, in one poll loop with the lost-lock pipe and the timers:
 *   - while waiting for the lock, a signal cancels the wait (the acquire runs in
 *     its own thread) and dlock exits 128+signal without running anything;
 *   - while the command runs, see child.c.
 * A hold that was lost is not released (nothing to release; and with Redis
 * gone a release would only retry); otherwise the release decides: a lock
 * the release finds gone was lost while the command ran. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

#define OWNER_CHAIN_MAX 16   /* nested runs whose locks a run may re-enter */
#define VERBOSE_EVERY_MS 10000

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

/* ------------------------------------------------------------ arguments */

static int parse_wait(const cli_opts *o, const char *opt, const char *val, int64_t *ms)
{
    if (cli_parse_duration(val, ms) != 0) {
        cli_usage_error(o, "run", "%s '%s' is not a duration (0, 500ms, 10s, 1m30s, inf)", opt,
                        val);
        return -1;
    }
    if (*ms == CLI_DUR_INF)
        *ms = DLOCK_WAIT_FOREVER;
    return 0;
}

static int parse_args(cli_opts *o, int argc, char **argv, run_args *ra)
{
    memset(ra, 0, sizeof(*ra));
    ra->wait_ms = DLOCK_WAIT_FOREVER;
    ra->lease_ms = DLOCK_WATCHDOG;
    ra->conflict_code = EXIT_NOTACQUIRED;
    ra->on_lost_term = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if (strcmp(a, "--") == 0) {
            if (!ra->name) {   /* dlock run -- NAME -- CMD: a NAME that begins with '-' */
                if (i + 1 >= argc) {
                    cli_usage_error(o, "run", "missing lock NAME");
                    return -1;
                }
                ra->name = argv[++i];
                if (i + 1 >= argc || strcmp(argv[i + 1], "--") != 0) {
                    cli_usage_error(o, "run", "after '-- NAME' comes '-- CMD'");
                    return -1;
                }
                i++;
            }
            ra->cmd = argv + i + 1;
            if (!ra->cmd[0]) {
                cli_usage_error(o, "run", "no command after --");
                return -1;
            }
            break;
        }
        if (strcmp(a, "-n") == 0 || strcmp(a, "--nonblock") == 0) {
            ra->wait_ms = 0;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            ra->verbose = 1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--wait", "-w", &val)) != 0 ||
                   (r = cli_opt_value(o, "run", argc, argv, &i, "--timeout", NULL, &val)) != 0) {
            if (r < 0 || parse_wait(o, a, val, &ra->wait_ms) < 0)
                return -1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--lease", NULL, &val)) != 0) {
            if (r < 0)
                return -1;
            if (cli_parse_duration(val, &ra->lease_ms) != 0 || ra->lease_ms == 0) {
                cli_usage_error(o, "run", "--lease '%s' is not a positive duration (10s, 1m30s, "
                                          "inf)", val);
                return -1;
            }
            if (ra->lease_ms == CLI_DUR_INF)
                ra->lease_ms = DLOCK_WATCHDOG;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--conflict-exit-code", "-E",
                                      &val)) != 0) {
            if (r < 0)
                return -1;
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (errno || *end || end == val || v < 0 || v > 255) {
                cli_usage_error(o, "run", "--conflict-exit-code '%s' is not a number in 0..255",
                                val);
                return -1;
            }
            ra->conflict_code = (int)v;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--on-lost", NULL, &val)) != 0) {
            if (r < 0)
                return -1;
            if (strcmp(val, "term") == 0 || strcmp(val, "ignore") == 0) {
                ra->on_lost_term = val[0] == 't';
            } else {
                cli_usage_error(o, "run", "--on-lost '%s': use term or ignore", val);
                return -1;
            }
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--name", NULL, &val)) != 0) {
            if (r < 0)
                return -1;
            if (ra->name) {
                cli_usage_error(o, "run", "one lock NAME only");
                return -1;
            }
            ra->name = val;
        } else if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return -1;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error(o, "run", "unknown option '%s'", a);
            return -1;
        } else if (!ra->name) {
            ra->name = a;
        } else {
            char e[80];
            cli_usage_error(o, "run", "unexpected '%s' (put the command after --)",
                            cli_esc(a, e, sizeof(e)));
            return -1;
        }
    }
    if (!ra->name) {
        cli_usage_error(o, "run", "missing lock NAME");
        return -1;
    }
    if (!ra->cmd) {
        cli_usage_error(o, "run", "missing -- CMD");
        return -1;
    }
    ra->watchdog_ms = o->watchdog_ms ? o->watchdog_ms : 30000;
    return 0;
}

/* ------------------------------------------------------------- waiting */

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

/* "held by <owner> (dlock run on web1, pid 42 (...), for 3 s: make), 12.3 s left" */
static void describe_holder(dlock_client *c, dlock_lock *l, char *buf, size_t size)
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
    char ttl[32], left[48], who[120], d[300], holds[32] = "";
    int64_t t = dlock_info_ttl(info);
    long long n = (long long)dlock_info_hold_count(info, 0);
    if (t >= 0)
        snprintf(left, sizeof(left), "%s left", cli_fmt_duration(t, ttl, sizeof(ttl)));
    else
        snprintf(left, sizeof(left), "with no expiry");
    cli_esc(dlock_info_owner(info, 0), who, sizeof(who));
    holder_map *map = holder_map_load(c);
    holder_describe(map, dlock_info_owner(info, 0), 0, d, sizeof(d));
    holder_map_free(map);
    if (n > 1)
        snprintf(holds, sizeof(holds), ", %lld holds", n);
    snprintf(buf, size, "held by %s (%s%s), %s", who, d[0] ? d : "?", holds, left);
    dlock_info_free(info);
}

/* -v: a line when the wait starts and every 10 s; on a terminal, one line
 * rewritten every second. */
typedef struct progress {
    int on, tty, shown;
    int64_t start, next;
} progress;

static void progress_tick(const cli_opts *o, progress *pg, dlock_client *c, dlock_lock *l,
                          const char *nm)
{
    char who[600], so_far[32];
    int64_t now = mono_ms();
    describe_holder(c, l, who, sizeof(who));
    cli_fmt_duration(now - pg->start, so_far, sizeof(so_far));
    if (pg->tty)
        fprintf(stderr, "\r\033[Kdlock: waiting for '%s' (%s so far): %s", nm, so_far, who);
    else if (!pg->shown)
        cli_err(o, "waiting for '%s': %s", nm, who);
    else
        cli_err(o, "still waiting for '%s' (%s so far): %s", nm, so_far, who);
    fflush(stderr);
    pg->shown = 1;
    pg->next = now + (pg->tty ? 1000 : VERBOSE_EVERY_MS);
}

/* Waits for the lock while watching for signals. Returns 1 when acquired
 * (*token set), else 0 and *code = the exit code (which may be 0: -E 0). */
static int acquire_watching(const cli_opts *o, const run_args *ra, dlock_client *c,
                            dlock_lock *l, int sfd, uint64_t *token, int *code)
{
    int done[2];
    dlock_cancel *cancel = NULL;
    if (pipe2(done, O_CLOEXEC) != 0 || dlock_cancel_new(&cancel) != DLOCK_OK) {
        cli_err(o, "cannot set up the wait: %s", strerror(errno));
        *code = EXIT_SOFTWARE;
        return 0;
    }
    acquirer a = {l, ra->wait_ms, ra->lease_ms, cancel, 0, 0, "", done[1]};
    pthread_t t;
    if (pthread_create(&t, NULL, acquire_main, &a) != 0) {
        cli_err(o, "cannot start a thread");
        *code = EXIT_SOFTWARE;
        return 0;
    }
    char nm[200];
    cli_esc(ra->name, nm, sizeof(nm));
    progress pg = {ra->verbose && !o->quiet, isatty(STDERR_FILENO), 0, mono_ms(), 0};
    pg.next = pg.start + 100;   /* not acquired at once: it is a wait */
    int sig = 0;
    for (;;) {
        int64_t left = pg.next - mono_ms();
        struct pollfd p[2] = {{done[0], POLLIN, 0}, {sfd, POLLIN, 0}};
        int n = poll(p, 2, pg.on && !sig ? (int)(left > 0 ? left : 0) : -1);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && p[0].revents)
            break;
        if (n > 0 && p[1].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD &&
                si.ssi_signo != SIGCONT && !sig) {
                sig = (int)si.ssi_signo;
                dlock_cancel_fire(cancel);
            }
        }
        if (n == 0 && pg.on)
            progress_tick(o, &pg, c, l, nm);
    }
    pthread_join(t, NULL);
    close(done[0]);
    close(done[1]);
    dlock_cancel_free(cancel);
    if (pg.tty && pg.shown)
        fputs("\r\033[K", stderr);
    if (a.rc == DLOCK_OK) {
        if (sig) {
            /* Acquired just as the signal came: give it back and leave. */
            dlock_lock_release(l);
            *code = 128 + sig;
            return 0;
        }
        if (pg.on) {
            char took[32];
            cli_err(o, "acquired '%s' after %s (fencing token %llu)", nm,
                    cli_fmt_duration(mono_ms() - pg.start, took, sizeof(took)),
                    (unsigned long long)a.token);
        }
        *token = a.token;
        return 1;
    }
    if (a.rc == DLOCK_ECANCELED) {
        cli_err(o, "interrupted (%s) while waiting for '%s'", strsignal(sig), nm);
        *code = 128 + sig;
        return 0;
    }
    if (a.rc == DLOCK_ETIMEDOUT) {
        char who[600], waited[32];
        describe_holder(c, l, who, sizeof(who));
        cli_err(o, "'%s' is %s; not acquired within %s", nm, who,
                cli_fmt_duration(ra->wait_ms, waited, sizeof(waited)));
        *code = ra->conflict_code;
        return 0;
    }
    if (a.rc == DLOCK_EWRONGTYPE) {
        cli_err(o, "cannot acquire '%s': %s; dlock leaves it as it is", nm,
                a.err[0] ? a.err : "the key exists and is not a lock");
        *code = EXIT_DATAERR;
        return 0;
    }
    cli_err(o, "cannot acquire '%s': %s", nm, a.err[0] ? a.err : dlock_strerror(a.rc));
    *code = cli_exit_code(a.rc, a.err);
    return 0;
}

/* ------------------------------------------------------------- owners */

/* A run inside a run's command finds the owner ids of the runs around it in
 * DLOCK_OWNERS (space-separated, innermost first). When one of them holds
 * `name`, this run acts as that owner and re-enters the lock; otherwise it
 * is a new owner. Returns 0 or an exit code; *inherited = the chain. */
static int choose_owner(const cli_opts *o, dlock_client *c, const char *name, char *owner,
                        size_t size, int *reentry)
{
    *reentry = 0;
    const char *chain = getenv("DLOCK_OWNERS");
    if (!chain || !*chain)
        chain = getenv("DLOCK_OWNER");
    dlock_lock *probe;
    dlock_info *info = NULL;
    if (chain && *chain && dlock_lock_get(c, name, &probe) == DLOCK_OK) {
        if (dlock_lock_inspect(probe, &info) != DLOCK_OK)
            info = NULL;
        dlock_lock_free(probe);
    }
    for (size_t i = 0; info && i < dlock_info_holders(info) && !*reentry; i++) {
        const char *h = dlock_info_owner(info, i);
        size_t hl = strlen(h);
        for (const char *p = chain; *p && !*reentry; p += strcspn(p, " ")) {
            p += strspn(p, " ");
            size_t n = strcspn(p, " ");
            if (n == hl && n < size && memcmp(p, h, n) == 0) {
                memcpy(owner, h, n + 1);
                *reentry = 1;
            }
        }
    }
    dlock_info_free(info);
    if (*reentry)
        return 0;
    int rc = dlock_client_new_owner_id(c, owner, size);
    return rc == DLOCK_OK ? 0 : cli_fail(o, rc, "owner id");
}

/* "DLOCK_OWNERS=<owner> <inherited...>", at most OWNER_CHAIN_MAX ids. */
static char *owners_var(const char *owner)
{
    const char *chain = getenv("DLOCK_OWNERS");
    if (!chain || !*chain)
        chain = getenv("DLOCK_OWNER");
    if (!chain)
        chain = "";
    size_t size = strlen("DLOCK_OWNERS=") + strlen(owner) + strlen(chain) + 2;
    char *v = malloc(size);
    if (!v)
        return NULL;
    size_t off = (size_t)snprintf(v, size, "DLOCK_OWNERS=%s", owner);
    int count = 1;
    for (const char *p = chain; *p && count < OWNER_CHAIN_MAX; p += strcspn(p, " ")) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n == 0 || (n == strlen(owner) && memcmp(p, owner, n) == 0))
            continue;
        off += (size_t)snprintf(v + off, size - off, " %.*s", (int)n, p);
        count++;
    }
    return v;
}

/* ----------------------------------------------------------------- run */

/* The hold ended: release it unless it was lost. Returns the loss reason
 * (LOST_AT_RELEASE when the release found it gone), else 0. */
static int finish_hold(const cli_opts *o, const run_args *ra, dlock_lock *l, int lost,
                       int64_t lease_deadline)
{
    char nm[200], c0[200], why[200];
    cli_esc(ra->name, nm, sizeof(nm));
    cli_esc(ra->cmd[0], c0, sizeof(c0));
    if (lost)
        return lost;   /* nothing to release: a retry against a dead Redis would only wait */
    int64_t at = mono_ms();
    int rc = dlock_lock_release(l);
    if (rc == DLOCK_OK)
        return 0;
    if (rc != DLOCK_ENOTOWNER) {
        char e[300];
        cli_err(o, "warning: cannot release '%s' (%s); it ends with its lease", nm,
                cli_esc(dlock_last_error(), e, sizeof(e)));
        return 0;
    }
    if (lease_deadline >= 0 && at >= lease_deadline) {
        cli_err(o, "warning: the --lease of '%s' ran out as '%s' ended", nm, c0);
        return 0;
    }
    lost_why(LOST_AT_RELEASE, why, sizeof(why));
    if (ra->on_lost_term)
        cli_err(o, "lock '%s' was lost while '%s' ran (%s)", nm, c0, why);
    else
        cli_err(o, "warning: lock '%s' was lost while '%s' ran (%s) (--on-lost ignore)", nm,
                c0, why);
    return LOST_AT_RELEASE;
}

static int run_locked(cli_opts *o, const run_args *ra, guard *g, int sfd)
{
    dlock_client *c;
    o->label = "run-waiting";
    int code = cli_open(o, &c, on_lost, NULL);
    if (code)
        return code;
    /* The wait runs in a thread and the release on this one: act as one
     * explicit owner id for both, not as two thread ids. */
    char owner[DLOCK_OWNER_MAX + 1];
    dlock_lock *l = NULL;
    int reentry = 0, rc;
    code = choose_owner(o, c, ra->name, owner, sizeof(owner), &reentry);
    if (code == 0 && (rc = dlock_lock_get_as(c, ra->name, owner, &l)) != DLOCK_OK)
        code = cli_fail(o, rc, "bad lock name");
    uint64_t token = 0;
    if (code == 0 && reentry && ra->verbose) {
        char nm[200];
        cli_err(o, "re-entering '%s': a dlock run around this one holds it (owner %s)",
                cli_esc(ra->name, nm, sizeof(nm)), owner);
    }
    if (code != 0 || !acquire_watching(o, ra, c, l, sfd, &token, &code)) {
        dlock_lock_free(l);
        dlock_client_close(c);
        return code;
    }
    /* Who holds it, for status and list: this host and pid (the connection
     * name) and, in the label, since when and what for. */
    char label[160];
    run_label(ra->cmd, wall_ms(), label, sizeof(label));
    dlock_client_set_label(c, label);
    /* A --lease is renewed by nobody: the lock is gone when its TTL runs out.
     * Counting the TTL read just now from before the read errs early. */
    int64_t lease_deadline = -1;
    if (ra->lease_ms != DLOCK_WATCHDOG) {
        int64_t before = mono_ms(), ttl = 0;
        lease_deadline = before + (dlock_lock_ttl(l, &ttl) == DLOCK_OK && ttl >= 0 ? ttl : 0);
    }
    char tok[40], own[DLOCK_OWNER_MAX + 16];
    char *name_var = malloc(strlen(ra->name) + 12);
    char *owners = owners_var(owner);
    snprintf(tok, sizeof(tok), "DLOCK_TOKEN=%llu", (unsigned long long)token);
    snprintf(own, sizeof(own), "DLOCK_OWNER=%s", owner);
    int lost = 0, status = 0;
    if (!name_var || !owners) {
        cli_err(o, "out of memory");
        code = EXIT_SOFTWARE;
    } else {
        sprintf(name_var, "DLOCK_NAME=%s", ra->name);
        char *extra[] = {name_var, tok, own, owners, NULL};
        code = guard_exec(o, g, ra->cmd[0], extra);
    }
    free(name_var);
    free(owners);
    if (code == 0) {
        status = supervise(o, ra, g, sfd, lost_pipe[0], lease_deadline, &lost);
        if (status < 0)
            code = EXIT_SOFTWARE;
    }
    lost = finish_hold(o, ra, l, lost, lease_deadline);
    dlock_lock_free(l);
    dlock_client_close(c);
    if (code)
        return code;
    if (lost && ra->on_lost_term)
        return EXIT_LOST;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_SOFTWARE;
}

int cmd_run(cli_opts *o, int argc, char **argv)
{
    run_args ra;
    if (parse_args(o, argc, argv, &ra) != 0)
        return EXIT_USAGE;
    /* Block before any thread exists (the io thread and the guard inherit the
     * mask); a write to a guard that died must not kill us. */
    sigset_t mask;
    sigemptyset(&mask);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGCONT};
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaddset(&mask, sigs[k]);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    guard *g;
    int code = guard_start(o, ra.cmd, &g);
    if (code)
        return code;
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0 || pipe2(lost_pipe, O_CLOEXEC) != 0) {
        cli_err(o, "cannot set up signals: %s", strerror(errno));
        guard_stop(g);
        return EXIT_SOFTWARE;
    }
    code = run_locked(o, &ra, g, sfd);
    guard_stop(g);
    close(sfd);
    return code;
}
