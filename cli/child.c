/* dlock run: the guard process and the supervision of CMD's process tree.
 *
 * A lock has one job: two holders never run at once. So not only CMD but
 * every process CMD starts must be gone before the lock passes on. CMD is
 * not dlock's child but the child of a guard, a process dlock forks before it
 * starts any thread:
 *
 *   dlock (subreaper) ── dlock-guard (subreaper) ── CMD (PDEATHSIG SIGKILL) ── ...
 *
 * The guard is the child subreaper of everything below it: a process whose
 * parent dies (a double fork, a setsid daemon, CMD's background job once CMD
 * exits) becomes the guard's child, so "the guard has no child left" means
 * "nothing CMD started still runs". dlock holds (and renews) the lock until
 * the guard says so, whatever ended CMD itself:
 *   - CMD exits and leaves processes behind: the lock stays held until they
 *     end, as flock(1)'s does (they inherit its descriptor); --kill-orphans
 *     ends them instead (SIGTERM, SIGKILL after --kill-after);
 *   - the lock is lost (--on-lost term): SIGTERM to every descendant at once,
 *     SIGKILL to every one left after --kill-after, CMD alive or not; dlock
 *     exits 76 only when none is left;
 *   - SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to dlock by a process: passed on
 *     to every descendant, SIGKILL after --kill-after; the lock is released
 *     when the last one is gone. The terminal's signals reach CMD's process
 *     group directly (all three processes stay in dlock's group); once CMD
 *     has exited they are passed on to the leftovers outside the group, and
 *     --kill-after runs;
 *   - dlock dies (kill -9): the guard reads EOF on its pipe and kills the
 *     whole tree with SIGKILL; the guard dies: CMD dies by its parent-death
 *     signal, its descendants come to dlock (a subreaper too), which kills
 *     them. Both killed at once (pkill -9 dlock matches both names): CMD dies
 *     by its parent-death signal, but its descendants escape; the lock then
 *     ends with its lease (see the man page, "When dlock dies").
 *
 * Pipe messages are one op byte and a 32-bit value:
 *   dlock -> guard: 'X' len + len bytes of "K=V\0" (start CMD), 'S' signo
 *                   (to every descendant, 'O' the same to those outside
 *                   dlock's process group), 'K' (SIGKILL to every descendant
 *                   until none is left); EOF: dlock is gone or done.
 *   guard -> dlock: 'P' pid (CMD started), 'E' errno (could not be run),
 *                   'W' wait status (CMD ended), 'R' count (processes CMD
 *                   started that still run after it), 'A' (none left). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

extern char **environ;

/* The guard's command line (ps's COMMAND column, pkill -f) says what it is;
 * its process name (comm: ps -e, top, and what pkill and killall match by
 * default) leaves "dlock" out, so that `pkill dlock` ends dlock and not its
 * guard, which then kills the command's whole tree (a guard killed with dlock
 * would leave what the command started running, unlocked). */
#define GUARD_NAME "dlock-guard"
#define GUARD_COMM "dlk-guard"

struct guard {
    pid_t pid;
    int ctl;   /* write end, dlock -> guard */
    int rep;   /* read end, guard -> dlock */
};

/* All n bytes written (writing) or read, through EINTR; -1 on an error or
 * an early end. */
static int xfer_all(int fd, void *buf, size_t n, int writing)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    return xfer_all(fd, (void *)buf, n, 1);
}

static int read_all(int fd, void *buf, size_t n) { return xfer_all(fd, buf, n, 0); }

static int send_msg(int fd, char op, int32_t v)
{
    char m[5];
    m[0] = op;
    memcpy(m + 1, &v, 4);
    return write_all(fd, m, 5);
}

/* ------------------------------------------------------------ the guard */

typedef struct gstate {
    int rep;
    pid_t cmd;
    int cmd_done;
    int empty_sent;   /* 'A' sent: nothing is left below the guard */
    int killing;      /* 'K' received: SIGKILL every round until none is left */
} gstate;

/* Reaps what ended; tells dlock when CMD ended and when nothing is left. */
static void guard_reap(gstate *gs)
{
    int st = 0;
    int r = tree_reap(gs->cmd_done ? 0 : gs->cmd, &st);
    if (r & TREE_WATCHED) {
        gs->cmd_done = 1;
        send_msg(gs->rep, 'W', st);
        if (!(r & TREE_EMPTY))
            send_msg(gs->rep, 'R', (int32_t)tree_signal(0, 0));
    }
    if (gs->cmd_done && (r & TREE_EMPTY) && !gs->empty_sent) {
        gs->empty_sent = 1;
        send_msg(gs->rep, 'A', 0);
    }
}

/* environ, minus the variables `extra` sets or removes, plus those it sets. */
static char **merge_env(char **extra)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (extra[m])
        m++;
    char **env = calloc(n + m + 1, sizeof(char *));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (size_t j = 0; j < m && !replaced; j++) {
            size_t key = strcspn(extra[j], "=");
            replaced = strncmp(environ[i], extra[j], key) == 0 && environ[i][key] == '=';
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        if (strchr(extra[j], '='))
            env[k++] = extra[j];
    return env;
}

/* Forks CMD; reports 'P' pid or 'E' errno. */
static void start_cmd(gstate *gs, char **cmd, char *block, uint32_t len)
{
    size_t m = 0;
    for (uint32_t i = 0; i < len; i++)
        m += block[i] == '\0';
    char **extra = calloc(m + 1, sizeof(char *));
    char **env = NULL;
    if (extra) {
        for (uint32_t i = 0, j = 0; i < len; i += (uint32_t)strlen(block + i) + 1)
            extra[j++] = block + i;
        env = merge_env(extra);
    }
    int ep[2];
    if (!env || pipe2(ep, O_CLOEXEC) != 0) {
        send_msg(gs->rep, 'E', env ? errno : ENOMEM);
        free(env);
        free(extra);
        return;
    }
    pid_t guard_pid = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* Dies with the guard; and if the guard died before this line, now. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != guard_pid)
            _exit(EXIT_CANTRUN);
        static const int dfl[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE,
                                  SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};
        for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
            signal(dfl[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvpe(cmd[0], cmd, env);
        int e = errno;
        ssize_t w = write(ep[1], &e, sizeof(e));
        (void)w;
        _exit(EXIT_CANTRUN);
    }
    close(ep[1]);
    int e = 0;
    if (pid < 0) {
        send_msg(gs->rep, 'E', errno);
    } else if (read_all(ep[0], &e, sizeof(e)) == 0) {
        waitpid(pid, NULL, 0);   /* it _exits at once */
        send_msg(gs->rep, 'E', e);
    } else {
        gs->cmd = pid;
        send_msg(gs->rep, 'P', pid);
    }
    close(ep[0]);
    free(env);
    free(extra);
}

/* The guard's names (see GUARD_NAME): its process name, and its command
 * line written over the arguments it inherited (only their own bytes: the
 * area cannot grow). */
static void rename_guard(const cli_opts *o)
{
    prctl(PR_SET_NAME, GUARD_COMM, 0, 0, 0);
    if (o->args && o->args_len > 1) {
        memset(o->args, 0, o->args_len);
        size_t n = strlen(GUARD_NAME) < o->args_len - 1 ? strlen(GUARD_NAME) : o->args_len - 1;
        memcpy(o->args, GUARD_NAME, n);
    }
}

/* A copy of a NULL-terminated argument vector; NULL when out of memory. */
static char **dup_argv(char **v)
{
    size_t n = 0;
    while (v[n])
        n++;
    char **c = calloc(n + 1, sizeof(char *));
    for (size_t i = 0; c && i < n; i++) {
        if (!(c[i] = strdup(v[i]))) {
            while (i > 0)
                free(c[--i]);
            free(c);
            return NULL;
        }
    }
    return c;
}

static void guard_main(const cli_opts *o, int ctl, int rep, char **cmd_arg)
{
    char **cmd = dup_argv(cmd_arg);   /* before the arguments are written over */
    if (!cmd)
        _exit(EXIT_SOFTWARE);
    rename_guard(o);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* The terminal's stop signals are for CMD; INT, TERM, HUP, QUIT stay
     * blocked (inherited from dlock): a pkill that reaches the guard too
     * leaves it to do its job. */
    signal(SIGTSTP, SIG_IGN);
    signal(SIGTTIN, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    gstate gs = {rep, 0, 0, 0, 0};
    pid_t group = getpgrp();
    for (;;) {
        struct pollfd p[2] = {{ctl, POLLIN, 0}, {sfd, POLLIN, 0}};
        int n = poll(p, 2, gs.killing && !gs.empty_sent ? 10 : -1);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && p[1].revents) {
            struct signalfd_siginfo si;
            ssize_t k = read(sfd, &si, sizeof(si));
            (void)k;
        }
        /* What was forked between two rounds is found by the next one. */
        if (gs.killing && !gs.empty_sent)
            tree_signal(SIGKILL, 0);
        if (gs.cmd)
            guard_reap(&gs);
        if (n <= 0 || !p[0].revents)
            continue;
        char m[5];
        if (read_all(ctl, m, 5) != 0)
            break;   /* dlock is gone, or done */
        int32_t v;
        memcpy(&v, m + 1, 4);
        if (m[0] == 'X' && !gs.cmd && v >= 0 && v < (1 << 20)) {
            char *block = malloc((size_t)v + 1);
            if (!block || read_all(ctl, block, (size_t)v) != 0)
                break;
            block[v] = '\0';
            start_cmd(&gs, cmd, block, (uint32_t)v);
            free(block);
        } else if ((m[0] == 'S' || m[0] == 'O') && gs.cmd && !gs.empty_sent && v > 0 &&
                   v < NSIG) {
            tree_signal(v, m[0] == 'O' ? group : 0);
        } else if (m[0] == 'K' && gs.cmd) {
            gs.killing = 1;
            tree_signal(SIGKILL, 0);
        }
    }
    /* dlock left while something CMD started runs: nothing may go on
     * without it. */
    if (gs.cmd && !gs.empty_sent)
        tree_kill_all();
    _exit(0);
}

int guard_start(const cli_opts *o, char **cmd, guard **out)
{
    guard *g = calloc(1, sizeof(*g));
    int ctl[2] = {-1, -1}, rep[2] = {-1, -1};
    if (!g || pipe2(ctl, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
        cli_err(o, "cannot start: %s", strerror(errno));
        goto fail;
    }
    fflush(NULL);   /* the guard _exits, but never prints what we buffered */
    pid_t pid = fork();
    if (pid < 0) {
        cli_err(o, "cannot fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        close(ctl[1]);
        close(rep[0]);
        guard_main(o, ctl[0], rep[1], cmd);
    }
    close(ctl[0]);
    close(rep[1]);
    g->pid = pid;
    g->ctl = ctl[1];
    g->rep = rep[0];
    *out = g;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (ctl[i] >= 0)
            close(ctl[i]);
        if (rep[i] >= 0)
            close(rep[i]);
    }
    free(g);
    return EXIT_SOFTWARE;
}

/* ------------------------------------------------------------ dlock side */

int guard_env_scrub(char **v, char **url_var)
{
    int n = 0;
    *url_var = NULL;
    if (getenv("DLOCK_PASSWORD"))
        v[n++] = "DLOCK_PASSWORD";
    if (getenv("REDISCLI_AUTH"))
        v[n++] = "REDISCLI_AUTH";
    char *bare = cli_url_without_password(getenv("DLOCK_URL"));
    if (bare && (*url_var = malloc(strlen("DLOCK_URL=") + strlen(bare) + 1))) {
        sprintf(*url_var, "DLOCK_URL=%s", bare);
        v[n++] = *url_var;
    } else if (bare) {
        v[n++] = "DLOCK_URL";   /* out of memory: without it rather than with the password */
    }
    free(bare);
    v[n] = NULL;
    return n;
}

int guard_exec(const cli_opts *o, guard *g, const char *cmd0, char *const *extra)
{
    size_t len = 0;
    for (size_t k = 0; extra[k]; k++)
        len += strlen(extra[k]) + 1;
    char *m = malloc(5 + len);
    if (!m) {
        cli_err(o, "out of memory");
        return EXIT_SOFTWARE;
    }
    int32_t v = (int32_t)len;
    m[0] = 'X';
    memcpy(m + 1, &v, 4);
    size_t off = 5;
    for (size_t k = 0; extra[k]; k++) {
        size_t n = strlen(extra[k]) + 1;
        memcpy(m + off, extra[k], n);
        off += n;
    }
    char r[5];
    int ok = write_all(g->ctl, m, off) == 0 && read_all(g->rep, r, 5) == 0;
    free(m);
    char c0[200];
    if (!ok) {
        cli_err(o, "cannot run '%s': the guard process is gone", cli_esc(cmd0, c0, sizeof(c0)));
        return EXIT_SOFTWARE;
    }
    memcpy(&v, r + 1, 4);
    if (r[0] == 'P')
        return 0;
    cli_err(o, "cannot run '%s': %s", cli_esc(cmd0, c0, sizeof(c0)), strerror(v));
    return v == ENOENT ? EXIT_CANTRUN : EXIT_CANTEXEC;
}

void guard_stop(guard *g)
{
    if (!g)
        return;
    close(g->ctl);   /* EOF: the guard ends (and ends what CMD started, if any runs) */
    close(g->rep);
    while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    free(g);
}

int guard_send(guard *g, char op, int32_t v) { return send_msg(g->ctl, op, v); }

int guard_read(guard *g, char *op, int32_t *v)
{
    char m[5];
    if (read_all(g->rep, m, 5) != 0)
        return -1;
    *op = m[0];
    memcpy(v, m + 1, 4);
    return 0;
}

int guard_fd(const guard *g) { return g->rep; }
