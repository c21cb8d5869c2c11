/* dlock barrier NAME N -- CMD: a double barrier from the shell. Each of the N
 * machines runs the same line: it enters barrier NAME, runs CMD once all N
 * have entered, then leaves and waits until all N have left (or were
 * dropped: a dlock killed mid-way is dropped after the watchdog timeout, so
 * the others never wait for ever on it). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"

extern char **environ;

typedef struct barrier_args {
    const char *name;
    const char *parties;     /* N, unparsed */
    int64_t wait_ms;         /* --wait: each of enter and leave; DLOCK_WAIT_FOREVER */
    int keep_env_secrets;
    char **cmd;
} barrier_args;

static int parse_barrier(cli_opts *o, int argc, char **argv, barrier_args *ba)
{
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    ba->wait_ms = DLOCK_WAIT_FOREVER;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if (strcmp(a, "--") == 0) {
            ba->cmd = argv + i + 1;
            break;
        }
        if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return -1;
            continue;
        }
        if ((r = cli_opt_value(o, "barrier", argc, argv, &i, "--wait", "-w", &val)) != 0) {
            if (r < 0)
                return -1;
            static const cli_dur_rule wait = {1, "no limit", 0, 0, NULL};
            if (cli_duration_opt(o, "barrier", "--wait", val, &wait, &ba->wait_ms) != 0)
                return -1;
            if (ba->wait_ms == CLI_DUR_INF)
                ba->wait_ms = DLOCK_WAIT_FOREVER;
            continue;
        }
        if (strcmp(a, "--keep-env-secrets") == 0) {
            ba->keep_env_secrets = 1;
            continue;
        }
        char e[80];
        if (a[0] == '-' && a[1] != '\0' && npos != 1) {
            cli_usage_error(o, "barrier", "unknown option '%s'", cli_esc(a, e, sizeof(e)));
            return -1;
        }
        if (npos == 2) {
            cli_usage_error(o, "barrier", "unexpected argument '%s' (CMD goes after --)",
                            cli_esc(a, e, sizeof(e)));
            return -1;
        }
        pos[npos++] = a;
    }
    if (npos < 1) {
        cli_usage_error(o, "barrier", "missing barrier NAME");
        return -1;
    }
    if (npos < 2) {
        cli_usage_error(o, "barrier", "missing the number of parties N");
        return -1;
    }
    if (!ba->cmd || !ba->cmd[0]) {
        cli_usage_error(o, "barrier", "missing -- CMD");
        return -1;
    }
    ba->name = pos[0];
    ba->parties = pos[1];
    return 0;
}

/* SIGINT, SIGTERM and SIGHUP, read from a signalfd by a thread of their
 * own: while CMD runs they go on to it (dlock leaves once it has ended);
 * during the enter or the final wait they cancel it (a waiting entrant
 * withdraws: it leaves nothing behind for the others to wait on), and dlock
 * exits 128 + the signal. */
typedef struct sigs {
    int fd;
    int quit[2];             /* a byte ends the thread */
    pthread_mutex_t mu;
    pid_t child;             /* CMD while it runs, else 0 */
    int got;                 /* the first signal that cancelled, 0: none */
    dlock_cancel *cancel;
    pthread_t t;
} sigs;

static void *sig_main(void *arg)
{
    sigs *g = arg;
    struct pollfd p[2] = {{g->fd, POLLIN, 0}, {g->quit[0], POLLIN, 0}};
    for (;;) {
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[1].revents)
            return NULL;
        struct signalfd_siginfo si;
        if (!(p[0].revents & POLLIN) || read(g->fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
            continue;
        pthread_mutex_lock(&g->mu);
        if (g->child > 0) {
            kill(g->child, (int)si.ssi_signo);
        } else {
            if (!g->got)
                g->got = (int)si.ssi_signo;
            dlock_cancel_fire(g->cancel);
        }
        pthread_mutex_unlock(&g->mu);
    }
}

/* Before dlock starts its threads (they inherit the blocked signals). */
static int sigs_start(sigs *g)
{
    memset(g, 0, sizeof(*g));
    pthread_mutex_init(&g->mu, NULL);
    g->quit[0] = g->quit[1] = -1;
    if ((g->fd = cli_stop_signals()) < 0 || pipe(g->quit) != 0 ||
        dlock_cancel_new(&g->cancel) != DLOCK_OK ||
        pthread_create(&g->t, NULL, sig_main, g) != 0) {
        if (g->fd >= 0)
            close(g->fd);
        if (g->quit[0] >= 0) {
            close(g->quit[0]);
            close(g->quit[1]);
        }
        dlock_cancel_free(g->cancel);
        pthread_mutex_destroy(&g->mu);
        return -1;
    }
    return 0;
}

static void sigs_stop(sigs *g)
{
    char b = 0;
    if (write(g->quit[1], &b, 1) == 1)
        pthread_join(g->t, NULL);
    close(g->fd);
    close(g->quit[0]);
    close(g->quit[1]);
    dlock_cancel_free(g->cancel);
    pthread_mutex_destroy(&g->mu);
}

static int sigs_got(sigs *g)
{
    pthread_mutex_lock(&g->mu);
    int s = g->got;
    pthread_mutex_unlock(&g->mu);
    return s;
}

/* environ less Redis credentials (unless kept), plus DLOCK_NAME and
 * DLOCK_BARRIER_ROUND; malloc'd (the strings are environ's or add's). */
static char **child_env(const barrier_args *ba, char **add, char **url_var)
{
    char *drop[8];
    int nd = ba->keep_env_secrets ? 0 : guard_env_scrub(drop, url_var);
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = malloc((n + nd + 4) * sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int skip = (len == 10 && strncmp(environ[i], "DLOCK_NAME", 10) == 0) ||
                   (len == 19 && strncmp(environ[i], "DLOCK_BARRIER_ROUND", 19) == 0);
        for (int d = 0; d < nd && !skip; d++) {
            const char *deq = strchr(drop[d], '=');
            size_t dl = deq ? (size_t)(deq - drop[d]) : strlen(drop[d]);
            skip = dl == len && strncmp(environ[i], drop[d], len) == 0;
        }
        if (!skip)
            env[k++] = environ[i];
    }
    for (int d = 0; d < nd; d++)
        if (strchr(drop[d], '='))
            env[k++] = drop[d];   /* DLOCK_URL without its password */
    for (int a = 0; add[a]; a++)
        env[k++] = add[a];
    env[k] = NULL;
    return env;
}

/* Runs CMD and waits for it; its exit code (128 + signal), or 126/127. */
static int run_cmd(const cli_opts *o, const barrier_args *ba, uint64_t round, sigs *g)
{
    char *name_var = malloc(strlen("DLOCK_NAME=") + strlen(ba->name) + 1);
    char round_var[64], *url_var = NULL;
    snprintf(round_var, sizeof(round_var), "DLOCK_BARRIER_ROUND=%llu", (unsigned long long)round);
    if (!name_var) {
        cli_err(o, "out of memory");
        return EXIT_SOFTWARE;
    }
    sprintf(name_var, "DLOCK_NAME=%s", ba->name);
    char *add[] = {name_var, round_var, NULL};
    char **env = child_env(ba, add, &url_var);
    if (!env) {
        free(name_var);
        cli_err(o, "out of memory");
        return EXIT_SOFTWARE;
    }
    /* CMD starts with no signal blocked (this process blocks the three). */
    posix_spawnattr_t attr;
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    pthread_mutex_lock(&g->mu);
    int err = g->got ? ECANCELED : posix_spawnp(&pid, ba->cmd[0], NULL, &attr, ba->cmd, env);
    if (!err)
        g->child = pid;
    pthread_mutex_unlock(&g->mu);
    posix_spawnattr_destroy(&attr);
    int code;
    if (err == ECANCELED) {
        code = 128 + g->got;   /* a signal came just after the enter: CMD not run */
    } else if (err) {
        char c0[200];
        cli_err(o, "cannot run '%s': %s", cli_esc(ba->cmd[0], c0, sizeof(c0)), strerror(err));
        code = err == ENOENT ? EXIT_CANTRUN : EXIT_CANTEXEC;
    } else {
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&g->mu);
        g->child = 0;
        pthread_mutex_unlock(&g->mu);
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    free(env);
    free(name_var);
    free(url_var);
    return code;
}

int cmd_barrier(cli_opts *o, int argc, char **argv)
{
    barrier_args ba;
    memset(&ba, 0, sizeof(ba));
    if (parse_barrier(o, argc, argv, &ba) != 0)
        return EXIT_USAGE;
    int64_t n = 0;
    if (cli_parse_count(ba.parties, &n) != 0 || n > DLOCK_BARRIER_PARTIES_MAX) {
        char e[80];
        cli_usage_error(o, "barrier", "the number of parties '%s' is not a whole number in 1..%d",
                        cli_esc(ba.parties, e, sizeof(e)), DLOCK_BARRIER_PARTIES_MAX);
        return EXIT_USAGE;
    }
    o->label = "barrier";
    if (ba.wait_ms != DLOCK_WAIT_FOREVER)
        o->connect_bound_ms = ba.wait_ms > 0 ? ba.wait_ms : 1;
    sigs g;
    if (sigs_start(&g) != 0) {
        cli_err(o, "cannot watch for signals: %s", strerror(errno));
        return EXIT_OSERR;
    }
    dlock_client *c;
    int code = cli_open(o, &c, NULL, NULL);
    if (code) {
        sigs_stop(&g);
        return code;
    }
    dlock_barrier *b;
    int rc = dlock_barrier_get(c, ba.name, n, &b);
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "bad barrier name");
        dlock_client_close(c);
        sigs_stop(&g);
        return code;
    }
    const dlock_wait_opts wait = {.wait_ms = ba.wait_ms, .cancel = g.cancel};
    rc = dlock_barrier_enter(b, &wait);
    if (rc == DLOCK_ECANCELED) {
        cli_err(o, "not started: signal %d while waiting to enter (withdrawn)", sigs_got(&g));
        code = 128 + sigs_got(&g);
    } else if (rc == DLOCK_ETIMEDOUT) {
        cli_err(o, "not started: %s", dlock_last_error());
        code = EXIT_NOTACQUIRED;
    } else if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "barrier enter");
    } else {
        code = run_cmd(o, &ba, dlock_barrier_round(b), &g);
        /* A signal while CMD ran went to CMD; one now ends the final wait. */
        rc = dlock_barrier_leave(b, &wait);
        if (rc == DLOCK_ECANCELED) {
            cli_err(o, "left; signal %d ended the wait for the others", sigs_got(&g));
            if (code == 0)
                code = 128 + sigs_got(&g);
        } else if (rc != DLOCK_OK) {
            int lc = rc == DLOCK_ETIMEDOUT ? EXIT_NOTACQUIRED
                     : rc == DLOCK_ENOTOWNER ? EXIT_LOST
                                             : cli_exit_code(rc, dlock_last_error());
            cli_err(o, "barrier leave: %s", dlock_last_error());
            if (code == 0)
                code = lc;
        }
    }
    dlock_barrier_free(b);
    dlock_client_close(c);
    sigs_stop(&g);
    return code;
}
