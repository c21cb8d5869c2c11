/* dlock run: the guard process and the supervision of CMD.
 *
 * CMD must not outlive the dlock that holds its lock: a `kill -9` of dlock
 * would otherwise leave CMD running with no lock while the next `dlock run`
 * starts beside it. So CMD is not dlock's child but the child of a guard, a
 * process dlock forks before it starts any thread:
 *
 *   dlock ── guard (PR_SET_CHILD_SUBREAPER) ── CMD (PR_SET_PDEATHSIG SIGKILL) ── ...
 *
 * dlock holds the write end of a pipe to the guard, and nobody else does.
 * When dlock dies while CMD runs the guard reads EOF and kills CMD and all its
 * descendants with SIGKILL: being their subreaper, it inherits every orphan
 * CMD leaves (double forks and setsid included), so it finds them all under
 * itself in /proc. If the guard dies too, CMD dies by its parent-death signal.
 *
 * All three stay in dlock's process group: the terminal's Ctrl-C and Ctrl-Z
 * reach CMD as they would without dlock (the guard ignores them).
 *
 * Pipe messages are one op byte and a 32-bit value:
 *   dlock -> guard: 'X' len + len bytes of "K=V\0" (start CMD), 'S' signo
 *                   (pass a signal on), 'K' (kill CMD and its descendants);
 *                   EOF: dlock is gone or done.
 *   guard -> dlock: 'P' pid (CMD started), 'E' errno (could not be run),
 *                   'W' wait status (CMD ended). */
#include <dirent.h>
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

#define KILL_GRACE_MS 10000

struct guard {
    pid_t pid;
    int ctl;   /* write end, dlock -> guard */
    int rep;   /* read end, guard -> dlock */
};

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

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
} gstate;

/* Reaps every child that has ended; reports CMD's status. */
static void reap(gstate *gs)
{
    int st;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w == gs->cmd && !gs->cmd_done) {
            gs->cmd_done = 1;
            send_msg(gs->rep, 'W', st);
        }
    }
}

typedef struct proc {
    pid_t pid, ppid;
    int zombie;
} proc;

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const proc *)a)->pid, y = ((const proc *)b)->pid;
    return (x > y) - (x < y);
}

/* Every process, from /proc: pid, ppid, zombie or not. Sorted by pid. */
static proc *read_procs(size_t *count)
{
    DIR *d = opendir("/proc");
    if (!d)
        return NULL;
    size_t n = 0, cap = 256;
    proc *v = malloc(cap * sizeof(proc));
    struct dirent *e;
    while (v && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%.20s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
            continue;
        buf[k] = '\0';
        char *rp = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
        char state;
        int pp;
        if (!rp || sscanf(rp + 1, " %c %d", &state, &pp) != 2)
            continue;
        if (n == cap) {
            proc *w = realloc(v, (cap *= 2) * sizeof(proc));
            if (!w)
                break;
            v = w;
        }
        v[n].pid = atoi(e->d_name);
        v[n].ppid = pp;
        v[n].zombie = state == 'Z' || state == 'X';
        n++;
    }
    closedir(d);
    if (v)
        qsort(v, n, sizeof(proc), by_pid);
    *count = n;
    return v;
}

/* SIGKILL to every descendant of this process that is not yet a zombie.
 * Returns how many were sent. */
static size_t kill_descendants(void)
{
    size_t n = 0, sent = 0;
    proc *v = read_procs(&n);
    if (!v)
        return 0;
    pid_t self = getpid();
    for (size_t i = 0; i < n; i++) {
        pid_t up = v[i].ppid;
        for (int depth = 0; up != self && up > 1 && depth < 4096; depth++) {
            proc key = {up, 0, 0};
            proc *p = bsearch(&key, v, n, sizeof(proc), by_pid);
            up = p ? p->ppid : 0;
        }
        if (up == self && !v[i].zombie) {
            kill(v[i].pid, SIGKILL);
            sent++;
        }
    }
    free(v);
    return sent;
}

/* SIGKILL to CMD and every process below the guard, until none is left: the
 * children of killed processes come to us (we are their subreaper) and are
 * found by the next round. */
static void kill_tree(gstate *gs)
{
    if (gs->cmd > 0 && !gs->cmd_done)
        kill(gs->cmd, SIGKILL);   /* at once, even if /proc cannot be read */
    for (int round = 0; round < 500; round++) {
        size_t alive = kill_descendants();
        reap(gs);
        if (alive == 0 && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
            break;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    reap(gs);
}

/* environ, minus the variables `extra` sets, plus `extra`. */
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
            size_t key = strcspn(extra[j], "=") + 1;
            replaced = strncmp(environ[i], extra[j], key) == 0;
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
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

static void guard_main(int ctl, int rep, char **cmd)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* The terminal's stop signals are for CMD; INT, TERM, HUP, QUIT stay
     * blocked (inherited from dlock). */
    signal(SIGTSTP, SIG_IGN);
    signal(SIGTTIN, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    gstate gs = {rep, 0, 0};
    for (;;) {
        struct pollfd p[2] = {{ctl, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            ssize_t k = read(sfd, &si, sizeof(si));
            (void)k;
            reap(&gs);
        }
        if (!p[0].revents)
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
        } else if (m[0] == 'S' && gs.cmd && !gs.cmd_done) {
            kill(gs.cmd, v);
        } else if (m[0] == 'K') {
            kill_tree(&gs);
        }
    }
    /* dlock left while CMD runs: nothing it started may go on without it. */
    if (gs.cmd && !gs.cmd_done)
        kill_tree(&gs);
    _exit(0);
}

int guard_start(const cli_opts *o, char **cmd, guard **out)
{
    guard *g = calloc(1, sizeof(*g));
    int ctl[2], rep[2];
    if (!g || pipe2(ctl, O_CLOEXEC) != 0) {
        cli_err(o, "cannot start: %s", strerror(errno));
        free(g);
        return EXIT_SOFTWARE;
    }
    if (pipe2(rep, O_CLOEXEC) != 0) {
        cli_err(o, "cannot start: %s", strerror(errno));
        close(ctl[0]);
        close(ctl[1]);
        free(g);
        return EXIT_SOFTWARE;
    }
    fflush(NULL);   /* the guard _exits, but never prints what we buffered */
    pid_t pid = fork();
    if (pid < 0) {
        cli_err(o, "cannot fork: %s", strerror(errno));
        close(ctl[0]);
        close(ctl[1]);
        close(rep[0]);
        close(rep[1]);
        free(g);
        return EXIT_SOFTWARE;
    }
    if (pid == 0) {
        close(ctl[1]);
        close(rep[0]);
        guard_main(ctl[0], rep[1], cmd);
    }
    close(ctl[0]);
    close(rep[1]);
    g->pid = pid;
    g->ctl = ctl[1];
    g->rep = rep[0];
    *out = g;
    return 0;
}

/* ------------------------------------------------------------ dlock side */

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
    close(g->ctl);   /* EOF: the guard ends (and ends CMD, if it still runs) */
    close(g->rep);
    while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    free(g);
}

/* The last pause of this process long enough to count (stopped by SIGSTOP or
 * Ctrl-Z, or starved of CPU), measured on CLOCK_BOOTTIME around each poll:
 * what the poll slept beyond its timeout. */
static int64_t pause_ms, pause_at = -1, hold_lease_ms;

static int64_t boot_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A pause is to blame for a loss when it came within a lease of it and was
 * long enough to let the lease run out between two renewals. */
static int paused_past_lease(void)
{
    return pause_at >= 0 && boot_ms() - pause_at <= hold_lease_ms + 2000 &&
           pause_ms >= hold_lease_ms / 2;
}

const char *lost_why(int reason, char *buf, size_t size)
{
    char a[32], b[32];
    /* The library says DLOCK_LOST_PAUSED when its renewal tick came late; we
     * also measure our own poll loop, which sees a stop the io thread may
     * report as a renewal that found the lock gone. */
    if (reason == DLOCK_LOST_PAUSED || (reason != LOST_LEASE && paused_past_lease())) {
        if (pause_at >= 0)
            snprintf(buf, size, "this process was paused (stopped, or starved of CPU) for %s or "
                                "more, past its lease of %s: Redis let the lock go",
                     cli_fmt_duration(pause_ms, a, sizeof(a)),
                     cli_fmt_duration(hold_lease_ms, b, sizeof(b)));
        else
            snprintf(buf, size, "this process was paused (stopped, or starved of CPU) past its "
                                "lease: Redis let the lock go");
        return buf;
    }
    switch (reason) {
    case DLOCK_LOST_GONE:
        snprintf(buf, size, "a renewal found it gone: forced open or deleted");
        break;
    case DLOCK_LOST_UNREACHABLE:
        snprintf(buf, size, "Redis was unreachable until the lease ran out");
        break;
    case LOST_LEASE:
        snprintf(buf, size, "its --lease of %s ran out", cli_fmt_duration(hold_lease_ms, a,
                                                                         sizeof(a)));
        break;
    case LOST_AT_RELEASE:
        snprintf(buf, size, "the release found it gone: forced open, deleted or expired");
        break;
    default:
        snprintf(buf, size, "lost (reason %d)", reason);
    }
    return buf;
}

int supervise(const cli_opts *o, const run_args *ra, guard *g, int sfd, int lost_fd,
              int64_t lease_deadline, int *lost)
{
    hold_lease_ms = ra->lease_ms != DLOCK_WATCHDOG ? ra->lease_ms : ra->watchdog_ms;
    int64_t tick = hold_lease_ms / 4;
    tick = tick < 50 ? 50 : tick > 1000 ? 1000 : tick;
    int64_t kill_at = -1;
    int done = 0, status = 0;
    char nm[200], c0[200], why[200];
    cli_esc(ra->name, nm, sizeof(nm));
    cli_esc(ra->cmd[0], c0, sizeof(c0));
    *lost = 0;
    while (!done) {
        int64_t now = mono_ms();
        if (kill_at >= 0 && now >= kill_at) {
            cli_err(o, "'%s' still running %d s after SIGTERM: SIGKILL to it and everything "
                       "it started", c0, KILL_GRACE_MS / 1000);
            send_msg(g->ctl, 'K', 0);
            kill_at = -1;
        }
        int lost_now = 0;
        if (lease_deadline >= 0 && now >= lease_deadline) {
            lost_now = LOST_LEASE;
            lease_deadline = -1;
        }
        int64_t timeout = tick;
        if (kill_at >= 0 && kill_at - now < timeout)
            timeout = kill_at - now;
        if (lease_deadline >= 0 && lease_deadline - now < timeout)
            timeout = lease_deadline - now;
        if (lost_now || timeout < 0)
            timeout = 0;
        struct pollfd p[3] = {{sfd, POLLIN, 0}, {lost_fd, POLLIN, 0}, {g->rep, POLLIN, 0}};
        int64_t t0 = boot_ms();
        int n = poll(p, 3, (int)timeout);
        int64_t over = boot_ms() - t0 - timeout;
        if (over >= 200) {
            pause_ms = over;
            pause_at = boot_ms();
        }
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0 && p[0].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD &&
                si.ssi_signo != SIGCONT && si.ssi_code <= 0)
                send_msg(g->ctl, 'S', (int32_t)si.ssi_signo);   /* sent by a process: pass it on */
        }
        if (n > 0 && p[1].revents) {
            char b;
            if (read(lost_fd, &b, 1) == 1 && !lost_now)
                lost_now = b;
        }
        if (n > 0 && p[2].revents) {
            char m[5];
            if (read_all(g->rep, m, 5) != 0) {
                cli_err(o, "the guard process of '%s' ended unexpectedly", c0);
                return -1;
            }
            if (m[0] == 'W') {
                memcpy(&status, m + 1, 4);
                done = 1;
            }
        }
        if (!lost_now || *lost)
            continue;
        *lost = lost_now;
        lost_why(lost_now, why, sizeof(why));
        if (done)
            cli_err(o, "%s '%s' lost while '%s' ran (%s)", ra->noun, nm, c0, why);
        else if (ra->on_lost_term) {
            cli_err(o, "%s '%s' lost while '%s' ran (%s): sending SIGTERM", ra->noun, nm, c0,
                    why);
            send_msg(g->ctl, 'S', SIGTERM);
            kill_at = mono_ms() + KILL_GRACE_MS;
        } else {
            cli_err(o, "warning: %s '%s' lost while '%s' runs (%s); carrying on "
                       "(--on-lost ignore)", ra->noun, nm, c0, why);
        }
    }
    return status;
}
