/* The processes below this one, read from /proc, for dlock run's guard (and
 * for dlock itself should the guard die): both are subreapers, so every
 * process the command starts stays below them however it forks, and "no
 * child left" means "no descendant left". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

typedef struct proc {
    pid_t pid, ppid, pgrp;
    int zombie;
} proc;

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const proc *)a)->pid, y = ((const proc *)b)->pid;
    return (x > y) - (x < y);
}

/* One process's parent and state from /proc/PID/stat; 0 when read. */
static int read_stat(const char *pid, proc *p)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%.20s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    char *rp = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
    char state;
    int pp, pg;
    if (!rp || sscanf(rp + 1, " %c %d %d", &state, &pp, &pg) != 3)
        return -1;
    p->pid = atoi(pid);
    p->ppid = pp;
    p->pgrp = pg;
    p->zombie = state == 'Z' || state == 'X';
    return 0;
}

/* Every process, sorted by pid; NULL when /proc cannot be read. */
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
        if (n == cap) {
            proc *w = realloc(v, (cap *= 2) * sizeof(proc));
            if (!w)
                break;
            v = w;
        }
        if (read_stat(e->d_name, &v[n]) == 0)
            n++;
    }
    closedir(d);
    if (v)
        qsort(v, n, sizeof(proc), by_pid);
    *count = n;
    return v;
}

size_t tree_signal(int sig, pid_t skip_group)
{
    size_t n = 0, live = 0;
    proc *v = read_procs(&n);
    if (!v)
        return 0;
    pid_t self = getpid();
    for (size_t i = 0; i < n; i++) {
        pid_t up = v[i].ppid;
        for (int depth = 0; up != self && up > 1 && depth < 4096; depth++) {
            proc key = {up, 0, 0, 0};
            proc *p = bsearch(&key, v, n, sizeof(proc), by_pid);
            up = p ? p->ppid : 0;
        }
        if (up != self || v[i].zombie || (skip_group > 0 && v[i].pgrp == skip_group))
            continue;
        live++;
        if (sig > 0) {
            kill(v[i].pid, sig);
            /* A stopped process would keep a SIGTERM pending until continued. */
            if (sig != SIGKILL && sig != SIGCONT)
                kill(v[i].pid, SIGCONT);
        }
    }
    free(v);
    return live;
}

int tree_reap(pid_t watched, int *status)
{
    int st, found = 0;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w == watched && watched > 0) {
            *status = st;
            found = TREE_WATCHED;
        }
    }
    if (w < 0 && errno == ECHILD)
        found |= TREE_EMPTY;
    return found;
}

void tree_kill_all(void)
{
    for (int round = 0;; round++) {
        tree_signal(SIGKILL, 0);
        int st;
        if (tree_reap(0, &st) & TREE_EMPTY)
            return;
        /* The children of killed processes come to us and are found by the
         * next round; one in uninterruptible sleep dies when it wakes. */
        struct timespec ts = {0, (round < 100 ? 10 : 100) * 1000000L};
        nanosleep(&ts, NULL);
    }
}
