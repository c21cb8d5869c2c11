/* Harness: time, the slack of timing bounds, unique names, and the helper
 * processes tests start (spawn, read a line, wait). */
#include "harness_int.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void th_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* What slows this build and process down, whatever the machine does: the
 * caller's DLOCK_TEST_SLOW, a sanitizer, valgrind (its preload library in the
 * environment it gives its client). */
static int64_t build_slack(void)
{
    const char *s = getenv("DLOCK_TEST_SLOW");
    int64_t f = s && atoi(s) > 1 ? atoi(s) : 1;
#if defined(__SANITIZE_THREAD__)
    f = f < 5 ? 5 : f;
#elif defined(__SANITIZE_ADDRESS__)
    f = f < 3 ? 3 : f;
#endif
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload") && f < 20)
        f = 20;
    return f;
}

/* The machine's load per CPU, rounded up, 1 to TH_LOAD_MAX: runnable
 * processes (the 1-minute load average, or the run queue now when higher,
 * this process's own threads aside) over the CPUs this process may use.
 * A slowed build (a sanitizer, valgrind) doubles its factor only when more
 * than 2 per CPU wait to run: its factor is sized for its own targets' runs
 * (two tests per CPU), and waits sized with the slack (a lease that must
 * outlast a failover) would otherwise grow past the tests' limits. */
#define TH_LOAD_MAX 4
static int64_t load_slack(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double avg = 0;
    int running = 0, total = 0;
    if (!f)
        return 1;
    int n = fscanf(f, "%lf %*f %*f %d/%d", &avg, &running, &total);
    fclose(f);
    if (n < 1)
        return 1;
    if (n == 3 && running - 1 > avg)
        avg = running - 1;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    if (cpus < 1)
        cpus = 1;
    int64_t l = (int64_t)(avg / cpus + 0.999);
    return l < 1 ? 1 : l > TH_LOAD_MAX ? TH_LOAD_MAX : l;
}

int64_t th_slack(void)
{
    static _Atomic int64_t base, load, measured_at;
    if (!atomic_load(&base))
        atomic_store(&base, build_slack());
    /* The load is looked at again once a second: a long test sees the
     * machine get busier (or quieter) while it runs. */
    int64_t now = th_now_ms(), at = atomic_load(&measured_at);
    if (!at || now - at >= 1000) {
        atomic_store(&load, load_slack());
        atomic_store(&measured_at, now);
    }
    int64_t b = atomic_load(&base), l = atomic_load(&load);
    return b > 1 ? b * (l > 2 ? 2 : 1) : l;
}

int th_ttl_within(long long ttl, long long lease, long long margin)
{
    long long low = lease - margin * th_slack();
    return ttl > (low > 0 ? low : 0) && ttl <= lease;
}

const char *th_name(char *buf, size_t size, const char *prefix)
{
    static int counter;
    snprintf(buf, size, "%s:%d:%d", prefix, (int)getpid(), ++counter);
    return buf;
}

const char *th__find_prog(const char *name, char *buf, size_t size)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, size, "%.*s/%s", (int)n, path, name);
        if (access(buf, X_OK) == 0)
            return buf;
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}

pid_t th__spawn_argv(char *const argv[], int out_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* Die with the test: no server outlives a crashed test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            if (out_fd < 0)
                dup2(devnull, 1);
        }
        if (out_fd >= 0)
            dup2(out_fd, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

pid_t th_spawn(int *out_fd, const char *prog, ...)
{
    char *argv[32] = {(char *)prog};
    int argc = 1;
    va_list ap;
    va_start(ap, prog);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    int fds[2] = {-1, -1};
    if (out_fd && pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = th__spawn_argv(argv, out_fd ? fds[1] : -1);
    if (out_fd) {
        close(fds[1]);
        *out_fd = fds[0];
    }
    return pid;
}

int th_read_line(int fd, char *buf, size_t size, int64_t timeout_ms)
{
    size_t n = 0;
    int64_t until = th_now_ms() + timeout_ms * th_slack();
    while (n + 1 < size) {
        int64_t left = until - th_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char ch;
        ssize_t k = read(fd, &ch, 1);
        if (k <= 0)
            return -1;
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return 0;
}

int th_wait(pid_t pid, int64_t timeout_ms)
{
    int64_t until = th_now_ms() + timeout_ms * th_slack();
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0)
            return -1;
        if (th_now_ms() >= until)
            return -1;
        th_sleep_ms(5);
    }
}
