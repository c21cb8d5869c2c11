#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#define MAX_EXTRA 16

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

int64_t th_slack(void)
{
    const char *s = getenv("DLOCK_TEST_SLOW");
    return s && atoi(s) > 1 ? atoi(s) : 1;
}

const char *th_name(char *buf, size_t size, const char *prefix)
{
    static int counter;
    snprintf(buf, size, "%s:%d:%d", prefix, (int)getpid(), ++counter);
    return buf;
}

/* A port the kernel just handed out; a server bound right after gets it
 * unless another process races us, in which case start() tries again. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
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

static int ping_ok(const th_redis *r)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    int ok = 0;
    if (c && !c->err) {
        redisReply *rep = redisCommand(c, "PING");
        /* A server with requirepass answers NOAUTH: alive all the same. */
        ok = rep && (rep->type == REDIS_REPLY_STATUS ||
                     (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOAUTH", 6) == 0));
        if (rep)
            freeReplyObject(rep);
    }
    if (c)
        redisFree(c);
    return ok;
}

/* A server started with --requirepass keeps its default user to itself:
 * the ACL mode leaves it alone (its test logs in on its own terms). */
static int wants_password(const th_redis *r)
{
    for (int i = 0; r->extra[i]; i++)
        if (strcmp(r->extra[i], "--requirepass") == 0)
            return 1;
    return 0;
}

static int launch(th_redis *r)
{
    char prog[PATH_MAX], port[16], tls_port[16], log[300];
    if (!th__find_prog("redis-server", prog, sizeof(prog))) {
        fprintf(stderr, "harness: redis-server not found in PATH\n");
        return -1;
    }
    snprintf(port, sizeof(port), "%d", r->port);
    snprintf(tls_port, sizeof(tls_port), "%d", r->tls_port);
    snprintf(log, sizeof(log), "%s/redis.log", r->dir);
    char *argv[80] = {prog,          "--port",     port,    "--bind",      "127.0.0.1",
                      "--save",      "",           "--appendonly", "no",   "--dir",
                      r->dir,        "--unixsocket", r->sock, "--daemonize", "no",
                      "--logfile",   log,          "--protected-mode", "no"};
    int argc = 0;
    while (argv[argc])
        argc++;
    char cert[300], key[300], ca[300];
    if (r->tls) {
        const char *d = th_tls_dir();
        if (!d)
            return -1;
        snprintf(cert, sizeof(cert), "%s/server.crt", d);
        snprintf(key, sizeof(key), "%s/server.key", d);
        snprintf(ca, sizeof(ca), "%s/ca.crt", d);
        const char *tls_args[] = {"--tls-port", tls_port, "--tls-cert-file", cert,
                                  "--tls-key-file", key, "--tls-ca-cert-file", ca,
                                  "--tls-auth-clients", "yes"};
        for (size_t i = 0; i < sizeof(tls_args) / sizeof(tls_args[0]); i++)
            argv[argc++] = (char *)tls_args[i];
    }
    for (int i = 0; r->extra[i] && argc < 78; i++)
        argv[argc++] = (char *)r->extra[i];
    argv[argc] = NULL;
    r->pid = th__spawn_argv(argv, -1);
    if (r->pid < 0)
        return -1;
    for (int i = 0; i < 500; i++) {
        if (ping_ok(r)) {
            if (r->acl && th__acl_setup(r) != 0) {
                th_redis_stop(r);
                return -1;
            }
            return 0;
        }
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1;   /* exited: probably the port was taken */
        }
        th_sleep_ms(10);
    }
    th_redis_stop(r);
    return -1;
}

static int start_va(th_redis *r, int tls, va_list ap)
{
    memset(r, 0, sizeof(*r));
    int n = 0;
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < MAX_EXTRA * 2)
        r->extra[n++] = a;
    r->extra[n] = NULL;
    r->tls = tls;
    r->acl = th_acl_mode() && !wants_password(r);
    snprintf(r->dir, sizeof(r->dir), "/tmp/dlock-test-XXXXXX");
    if (!mkdtemp(r->dir))
        return -1;
    snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
    for (int tries = 0; tries < 10; tries++) {
        r->port = free_port();
        r->tls_port = tls ? free_port() : 0;
        if (r->port > 0 && r->tls_port != r->port && r->tls_port >= 0 && launch(r) == 0) {
            th_url_port(r, th_client_port(r), r->url, sizeof(r->url));
            if (tls) {   /* for workers' own plain connections (worker.c) */
                char var[48], val[16];
                snprintf(var, sizeof(var), "DLOCK_TEST_PLAIN_%d", r->tls_port);
                snprintf(val, sizeof(val), "%d", r->port);
                setenv(var, val, 1);
            }
            return 0;
        }
    }
    return -1;
}

int th_redis_start(th_redis *r, ...)
{
    va_list ap;
    va_start(ap, r);
    int rc = start_va(r, th_tls_mode(), ap);
    va_end(ap);
    return rc;
}

int th_redis_start_tls(th_redis *r, ...)
{
    va_list ap;
    va_start(ap, r);
    int rc = start_va(r, 1, ap);
    va_end(ap);
    return rc;
}

void th_redis_stop(th_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return;
        }
        th_sleep_ms(10);
    }
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    r->pid = 0;
}

int th_redis_restart(th_redis *r)
{
    th_redis_stop(r);
    for (int tries = 0; tries < 50; tries++) {
        if (launch(r) == 0)
            return 0;
        th_sleep_ms(100);   /* the port may linger a moment */
    }
    return -1;
}

void th_redis_destroy(th_redis *r)
{
    th_redis_stop(r);
    if (r->dir[0]) {
        char path[400];
        snprintf(path, sizeof(path), "%s/redis.log", r->dir);
        unlink(path);
        unlink(r->sock);
        rmdir(r->dir);
    }
}

redisContext *th_admin(const th_redis *r)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static redisReply *vcmd(const th_redis *r, const char *fmt, va_list ap)
{
    redisContext *c = th_admin(r);
    if (!c)
        return NULL;
    redisReply *rep = redisvCommand(c, fmt, ap);
    redisFree(c);
    return rep;
}

redisReply *th_cmd(const th_redis *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = vcmd(r, fmt, ap);
    va_end(ap);
    return rep;
}

long long th_int(const th_redis *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = vcmd(r, fmt, ap);
    va_end(ap);
    long long v = LLONG_MIN;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    if (rep)
        freeReplyObject(rep);
    return v;
}

long long th_calls(const th_redis *r, const char *cmd)
{
    redisReply *rep = th_cmd(r, "INFO commandstats");
    if (!rep || rep->type != REDIS_REPLY_STRING) {
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    long long total = 0;
    size_t clen = cmd ? strlen(cmd) : 0;
    for (const char *p = rep->str; (p = strstr(p, "cmdstat_")); p++) {
        const char *name = p + 8;
        const char *calls = strstr(name, ":calls=");
        if (!calls)
            break;
        size_t nlen = (size_t)(calls - name);
        int is_info = nlen == 4 && strncmp(name, "info", 4) == 0;
        if (cmd ? nlen == clen && strncmp(name, cmd, clen) == 0 : !is_info)
            total += atoll(calls + 7);
    }
    freeReplyObject(rep);
    return total;
}

long long th_calls_settled(const th_redis *r, int64_t max_ms)
{
    int64_t end = th_now_ms() + max_ms * th_slack();
    long long n = th_calls(r, NULL);
    for (;;) {
        th_sleep_ms(100);
        long long m = th_calls(r, NULL);
        if (m == n || th_now_ms() >= end)
            return m;
        n = m;
    }
}

int th_cli(const th_redis *r, ...)
{
    char prog[PATH_MAX], port[16];
    if (!th__find_prog("redis-cli", prog, sizeof(prog)))
        return -1;
    snprintf(port, sizeof(port), "%d", r->port);
    char *argv[32] = {prog, "-h", "127.0.0.1", "-p", port};
    int argc = 5;
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    pid_t pid = th__spawn_argv(argv, -1);
    return th_wait(pid, 10000);
}

dlock_client *th_client_url(const char *url, int64_t watchdog_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_non_null(cfg);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    if (watchdog_ms)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, watchdog_ms), DLOCK_OK);
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, cfg);
    if (rc != DLOCK_OK)
        fprintf(stderr, "dlock_client_open: %s\n", dlock_last_error());
    assert_int_equal(rc, DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

dlock_client *th_client(const th_redis *r, int64_t watchdog_ms)
{
    return th_client_url(r->url, watchdog_ms);
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
    int64_t until = th_now_ms() + timeout_ms;
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
    int64_t until = th_now_ms() + timeout_ms;
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
