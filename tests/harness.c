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

#include "sync/sync.h"

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
    char prog[PATH_MAX], port[16], tls_port[16], log[300], bus[16], conf[300];
    if (!th__find_prog("redis-server", prog, sizeof(prog))) {
        fprintf(stderr, "harness: redis-server not found in PATH\n");
        return -1;
    }
    snprintf(port, sizeof(port), "%d", r->port);
    snprintf(tls_port, sizeof(tls_port), "%d", r->tls_port);
    snprintf(log, sizeof(log), "%s/redis.log", r->dir);
    snprintf(bus, sizeof(bus), "%d", r->bus_port);
    snprintf(conf, sizeof(conf), "%s/sentinel.conf", r->dir);
    char *argv[80] = {prog,          "--port",     port,    "--bind",      "127.0.0.1",
                      "--save",      "",           "--appendonly", "no",   "--dir",
                      r->dir,        "--unixsocket", r->sock, "--daemonize", "no",
                      "--logfile",   log,          "--protected-mode", "no",
                      /* replicas synchronise at once, not after 5 s */
                      "--repl-diskless-sync-delay", "0"};
    int argc = 0;
    while (argv[argc])
        argc++;
    if (r->sentinel) {
        /* A sentinel rewrites its config file: it lives in the server's dir. */
        char *sv[] = {prog, conf, "--sentinel", "--port", port, "--bind", "127.0.0.1",
                      "--dir", r->dir, "--daemonize", "no", "--logfile", log,
                      "--protected-mode", "no", NULL};
        for (argc = 0; sv[argc]; argc++)
            argv[argc] = sv[argc];
    }
    if (r->bus_port > 0) {
        /* The bus port is chosen too: port + 10000 may be out of range. */
        char *cv[] = {"--cluster-enabled", "yes", "--cluster-port", bus,
                      "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
                      "--cluster-require-full-coverage", "yes", NULL};
        for (int i = 0; cv[i]; i++)
            argv[argc++] = cv[i];
    }
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

/* Picks free ports and launches r (its extra, bus_port < 0 for a cluster
 * node, sentinel flag and, for a sentinel, sentinel.conf in its dir, set). */
static int start_in_dir(th_redis *r, const char *sentinel_conf)
{
    int want_bus = r->bus_port < 0;
    for (int tries = 0; tries < 10; tries++) {
        r->port = free_port();
        r->bus_port = want_bus ? free_port() : 0;
        r->tls_port = r->tls ? free_port() : 0;
        if (r->port <= 0 || (want_bus && (r->bus_port <= 0 || r->bus_port == r->port)) ||
            r->tls_port < 0 || (r->tls && r->tls_port == r->port))
            continue;
        if (sentinel_conf) {
            char path[300];
            snprintf(path, sizeof(path), "%s/sentinel.conf", r->dir);
            FILE *f = fopen(path, "w");
            if (!f)
                return -1;
            fprintf(f, "port %d\n%s", r->port, sentinel_conf);
            fclose(f);
        }
        if (launch(r) == 0) {
            th_url_port(r, th_client_port(r), r->url, sizeof(r->url));
            if (r->tls) {   /* for workers' own plain connections (worker.c) */
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

/* A deployment's URL: scheme, the nodes' client ports (TLS ones over TLS),
 * the test certificates over TLS, then `tail` (a master's "#name"). */
static void deploy_url(char *buf, size_t size, const char *kind, th_redis *const *nodes, int n,
                       const char *tail)
{
    int tls = nodes[0]->tls;
    size_t off = (size_t)snprintf(buf, size, "%s-%s://", tls ? "rediss" : "redis", kind);
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(buf + off, off < size ? size - off : 0, "%s127.0.0.1:%d",
                                i ? "," : "", th_client_port(nodes[i]));
    char query[1024];
    snprintf(buf + off, off < size ? size - off : 0, "%s%s",
             th__tls_query(tls, query, sizeof(query)), tail);
}

static int make_dir(th_redis *r)
{
    snprintf(r->dir, sizeof(r->dir), "/tmp/dlock-test-XXXXXX");
    if (!mkdtemp(r->dir)) {
        r->dir[0] = '\0';
        return -1;
    }
    snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
    return 0;
}

/* Appends the extra arguments of ap after those r has. */
static void collect_extra(th_redis *r, va_list ap)
{
    int n = 0;
    while (r->extra[n])
        n++;
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < MAX_EXTRA * 2)
        r->extra[n++] = a;
    r->extra[n] = NULL;
}

/* Appends "--opt value" pairs (string literals, NULL-terminated) to r's extras. */
static void add_extra(th_redis *r, ...)
{
    va_list ap;
    va_start(ap, r);
    collect_extra(r, ap);
    va_end(ap);
}

/* Deployments started in place of a single server (DLOCK_TEST_DEPLOY). */
typedef struct deployed {
    const th_redis *r;
    th_replset *rs;
    th_sentinels *ss;
    th_cluster *cl;
} deployed;
static deployed deployments[8];

const char *th_deploy_name(void)
{
    const char *d = getenv("DLOCK_TEST_DEPLOY");
    if (d && (strcmp(d, "sentinel") == 0 || strcmp(d, "cluster") == 0))
        return d;
    return "single";
}

static deployed *deployment_of(const th_redis *r)
{
    for (size_t i = 0; i < sizeof(deployments) / sizeof(deployments[0]); i++)
        if (deployments[i].r == r)
            return &deployments[i];
    return NULL;
}

int th_deployed(const th_redis *r) { return deployment_of(r) != NULL; }

static int start_deployment(th_redis *r)
{
    deployed *d = deployment_of(NULL);
    if (!d)
        return -1;
    memset(d, 0, sizeof(*d));
    if (strcmp(th_deploy_name(), "sentinel") == 0) {
        d->rs = calloc(1, sizeof(*d->rs));
        d->ss = calloc(1, sizeof(*d->ss));
        if (!d->rs || !d->ss || th_replset_start(d->rs, NULL) != 0) {
            free(d->rs);
            free(d->ss);
            return -1;
        }
        if (th_sentinels_start(d->ss, d->rs, "dlocktest") != 0) {
            th_replset_destroy(d->rs);
            free(d->rs);
            free(d->ss);
            return -1;
        }
        r->port = d->rs->primary.port;
        r->pid = d->rs->primary.pid;
        snprintf(r->url, sizeof(r->url), "%s", d->ss->url);
    } else {
        d->cl = calloc(1, sizeof(*d->cl));
        if (!d->cl || th_cluster_start(d->cl) != 0) {
            free(d->cl);
            return -1;
        }
        r->port = d->cl->node[0].port;
        r->pid = d->cl->node[0].pid;
        snprintf(r->url, sizeof(r->url), "%s", d->cl->url);
    }
    d->r = r;
    /* Workers (tests/worker.c) reach a data node with it, not the URL's. */
    char port[16];
    snprintf(port, sizeof(port), "%d", r->port);
    setenv("DLOCK_TEST_ADMIN_PORT", port, 1);
    return 0;
}

static void stop_deployment(deployed *d)
{
    if (d->ss) {
        th_sentinels_destroy(d->ss);
        th_replset_destroy(d->rs);
    }
    if (d->cl)
        th_cluster_destroy(d->cl);
    free(d->ss);
    free(d->rs);
    free(d->cl);
    memset(d, 0, sizeof(*d));
}

/* A single server, TLS beside plain when tls, as the ACL mode's user when
 * that mode is on. */
static int start_single(th_redis *r, int tls)
{
    r->tls = tls;
    r->acl = th_acl_mode() && !wants_password(r);
    if (make_dir(r) != 0)
        return -1;
    return start_in_dir(r, NULL);
}

int th_redis_start(th_redis *r, ...)
{
    memset(r, 0, sizeof(*r));
    va_list ap;
    va_start(ap, r);
    collect_extra(r, ap);
    va_end(ap);
    if (!r->extra[0] && strcmp(th_deploy_name(), "single") != 0)
        return start_deployment(r);
    return start_single(r, th_tls_mode());
}

int th_redis_start_tls(th_redis *r, ...)
{
    memset(r, 0, sizeof(*r));
    va_list ap;
    va_start(ap, r);
    collect_extra(r, ap);
    va_end(ap);
    return start_single(r, 1);
}

void th_redis_stop(th_redis *r)
{
    deployed *d = deployment_of(r);
    if (d) {
        stop_deployment(d);
        r->pid = 0;
        return;
    }
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
    if (deployment_of(r))
        return -1;   /* a deployment is not restarted as one server */
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
        static const char *files[] = {"redis.log", "nodes.conf", "sentinel.conf", "dump.rdb",
                                      "temp-sentinel.conf"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
            snprintf(path, sizeof(path), "%s/%s", r->dir, files[i]);
            unlink(path);
        }
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
    va_list again;
    va_copy(again, ap);
    redisReply *rep = redisvCommand(c, fmt, ap);
    redisFree(c);
    /* A cluster node sends a key's command to the node that serves it. */
    for (int hops = 0; hops < 3 && rep && rep->type == REDIS_REPLY_ERROR &&
                       strncmp(rep->str, "MOVED ", 6) == 0; hops++) {
        const char *colon = strrchr(rep->str, ':');
        th_redis other = *r;
        other.port = colon ? atoi(colon + 1) : 0;
        freeReplyObject(rep);
        rep = NULL;
        if (other.port <= 0 || !(c = th_admin(&other)))
            break;
        va_list ap2;
        va_copy(ap2, again);
        rep = redisvCommand(c, fmt, ap2);
        va_end(ap2);
        redisFree(c);
    }
    va_end(again);
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

static long long calls_on(const th_redis *r, const char *cmd);

long long th_calls(const th_redis *r, const char *cmd)
{
    /* A cluster runs a command on the node serving its key: all of them. */
    deployed *d = deployment_of(r);
    if (!d || !d->cl)
        return calls_on(r, cmd);
    long long total = 0;
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        if (d->cl->node[i].pid <= 0)
            continue;
        /* primaries only: a replica also counts what it replicates */
        redisReply *role = th_cmd(&d->cl->node[i], "ROLE");
        int primary = role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                      role->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(role->element[0]->str, "master") == 0;
        if (role)
            freeReplyObject(role);
        if (!primary)
            continue;
        long long n = calls_on(&d->cl->node[i], cmd);
        if (n < 0)
            return -1;
        total += n;
    }
    return total;
}

static long long calls_on(const th_redis *r, const char *cmd)
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
    deployed *d = deployment_of(r);
    if (d && d->cl)
        argv[argc++] = "-c";   /* follows MOVED to the key's node */
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

/* ------------------------------------------------------------ deployments */

/* The value of `field:` in an INFO-style text, into buf; 0 when found. */
static int info_field(const char *text, const char *field, char *buf, size_t size)
{
    size_t fl = strlen(field);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
            size_t n = strcspn(p + fl + 1, "\r\n");
            if (n >= size)
                n = size - 1;
            memcpy(buf, p + fl + 1, n);
            buf[n] = '\0';
            return 0;
        }
    }
    return -1;
}

/* INFO-style field of `cmd`'s answer on r ("INFO replication", "CLUSTER INFO"). */
static int cmd_field(const th_redis *r, const char *cmd, const char *field, char *buf,
                     size_t size)
{
    redisReply *rep = th_cmd(r, cmd);
    int rc = -1;
    if (rep && rep->type == REDIS_REPLY_STRING)
        rc = info_field(rep->str, field, buf, size);
    if (rep)
        freeReplyObject(rep);
    return rc;
}

static int replica_up(const th_redis *r)
{
    char v[32];
    return cmd_field(r, "INFO replication", "master_link_status", v, sizeof(v)) == 0 &&
           strcmp(v, "up") == 0;
}

int th_replset_start(th_replset *rs, ...)
{
    memset(rs, 0, sizeof(*rs));
    th_redis proto;
    memset(&proto, 0, sizeof(proto));
    va_list ap;
    va_start(ap, rs);
    collect_extra(&proto, ap);
    va_end(ap);
    th_redis *all[1 + TH_REPLICAS] = {&rs->primary};
    for (int i = 0; i < TH_REPLICAS; i++)
        all[i + 1] = &rs->replica[i];
    for (int i = 0; i < 1 + TH_REPLICAS; i++) {
        memcpy(all[i]->extra, proto.extra, sizeof(proto.extra));
        all[i]->tls = th_tls_mode();   /* replication over TLS too */
        if (all[i]->tls)
            add_extra(all[i], "--tls-replication", "yes", NULL);
        if (make_dir(all[i]) != 0 || start_in_dir(all[i], NULL) != 0)
            goto fail;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", th_client_port(&rs->primary));
    for (int i = 0; i < TH_REPLICAS; i++) {
        redisReply *rep = th_cmd(&rs->replica[i], "REPLICAOF 127.0.0.1 %s", port);
        int ok = rep && rep->type == REDIS_REPLY_STATUS;
        if (rep)
            freeReplyObject(rep);
        if (!ok)
            goto fail;
    }
    for (int64_t until = th_now_ms() + 20000 * th_slack();;) {
        int up = 0;
        for (int i = 0; i < TH_REPLICAS; i++)
            up += replica_up(&rs->replica[i]);
        if (up == TH_REPLICAS)
            return 0;
        if (th_now_ms() > until)
            goto fail;
        th_sleep_ms(50);
    }
fail:
    fprintf(stderr, "harness: cannot start a primary with %d replicas\n", TH_REPLICAS);
    th_replset_destroy(rs);
    return -1;
}

void th_replset_destroy(th_replset *rs)
{
    for (int i = 0; i < TH_REPLICAS; i++)
        th_redis_destroy(&rs->replica[i]);
    th_redis_destroy(&rs->primary);
}

/* Count of entries a SENTINEL subcommand lists for the master, or -1. */
static int sentinel_count(const th_redis *s, const char *sub, const char *master)
{
    redisReply *rep = th_cmd(s, "SENTINEL %s %s", sub, master);
    int n = rep && rep->type == REDIS_REPLY_ARRAY ? (int)rep->elements : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

int th_sentinel_primary_port(const th_redis *s, const char *master)
{
    redisReply *rep = th_cmd(s, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", master);
    int port = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(rep->element[1]->str);
    if (rep)
        freeReplyObject(rep);
    /* Over TLS the sentinels know the TLS ports: the plain one, as th_redis's. */
    char var[48];
    snprintf(var, sizeof(var), "DLOCK_TEST_PLAIN_%d", port);
    const char *plain = port > 0 ? getenv(var) : NULL;
    return plain ? atoi(plain) : port;
}

int th_sentinels_start(th_sentinels *ss, const th_replset *rs, const char *master)
{
    memset(ss, 0, sizeof(*ss));
    snprintf(ss->master, sizeof(ss->master), "%s", master);
    char conf[512];
    snprintf(conf, sizeof(conf),
             "bind 127.0.0.1\n"
             "sentinel monitor %s 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds %s 1000\n"
             "sentinel failover-timeout %s 5000\n"
             "sentinel parallel-syncs %s 1\n",
             master, th_client_port(&rs->primary), master, master, master);
    th_redis *nodes[TH_SENTINELS];
    for (int i = 0; i < TH_SENTINELS; i++) {
        ss->s[i].sentinel = 1;
        ss->s[i].tls = rs->primary.tls;   /* to clients, the data nodes and each other */
        if (ss->s[i].tls)
            add_extra(&ss->s[i], "--tls-replication", "yes", NULL);
        if (make_dir(&ss->s[i]) != 0 || start_in_dir(&ss->s[i], conf) != 0)
            goto fail;
        nodes[i] = &ss->s[i];
    }
    char tail[80];
    snprintf(tail, sizeof(tail), "#%s", master);
    deploy_url(ss->url, sizeof(ss->url), "sentinel", nodes, TH_SENTINELS, tail);
    /* Ready when each sentinel has found the replicas and the other sentinels
     * (by the hello channel, every 2 s). */
    for (int64_t until = th_now_ms() + 30000 * th_slack();;) {
        int ready = 0;
        for (int i = 0; i < TH_SENTINELS; i++)
            ready += sentinel_count(&ss->s[i], "REPLICAS", master) == TH_REPLICAS &&
                     sentinel_count(&ss->s[i], "SENTINELS", master) == TH_SENTINELS - 1;
        if (ready == TH_SENTINELS)
            return 0;
        if (th_now_ms() > until)
            goto fail;
        th_sleep_ms(100);
    }
fail:
    fprintf(stderr, "harness: cannot start %d sentinels for %s\n", TH_SENTINELS, master);
    th_sentinels_destroy(ss);
    return -1;
}

void th_sentinels_destroy(th_sentinels *ss)
{
    for (int i = 0; i < TH_SENTINELS; i++)
        th_redis_destroy(&ss->s[i]);
}

/* The slot ranges and their primaries' ports as node r sees them (CLUSTER
 * SLOTS), as text "start-end:port;..." sorted by start; 0 when answered. */
static int slots_signature(const th_redis *r, char *buf, size_t size)
{
    redisReply *rep = th_cmd(r, "CLUSTER SLOTS");
    if (!rep || rep->type != REDIS_REPLY_ARRAY) {
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    buf[0] = '\0';
    size_t off = 0;
    long long last = -1;
    /* Sorted output without sorting: pick the next range start each time. */
    for (size_t k = 0; k < rep->elements; k++) {
        redisReply *best = NULL;
        for (size_t i = 0; i < rep->elements; i++) {
            redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
                e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
                continue;
            long long st = e->element[0]->integer;
            if (st > last && (!best || st < best->element[0]->integer))
                best = e;
        }
        if (!best)
            break;
        last = best->element[0]->integer;
        off += (size_t)snprintf(buf + off, off < size ? size - off : 0, "%lld-%lld:%lld;",
                                best->element[0]->integer, best->element[1]->integer,
                                best->element[2]->element[1]->integer);
    }
    freeReplyObject(rep);
    return off < size ? 0 : -1;
}

int th_cluster_wait_ok(th_cluster *cl, int64_t timeout_ms)
{
    for (int64_t until = th_now_ms() + timeout_ms * th_slack();;) {
        char first[2048] = "", sig[2048], st[32];
        int ok = 1;
        for (int i = 0; i < TH_CLUSTER_NODES && ok; i++) {
            th_redis *n = &cl->node[i];
            if (n->pid <= 0)
                continue;
            ok = cmd_field(n, "CLUSTER INFO", "cluster_state", st, sizeof(st)) == 0 &&
                 strcmp(st, "ok") == 0 && slots_signature(n, sig, sizeof(sig)) == 0;
            if (ok && !first[0])
                snprintf(first, sizeof(first), "%s", sig);
            else if (ok)
                ok = strcmp(first, sig) == 0;
        }
        if (ok)
            return 0;
        if (th_now_ms() > until)
            return -1;
        th_sleep_ms(100);
    }
}

int th_cluster_node_start(th_redis *r)
{
    memset(r, 0, sizeof(*r));
    r->bus_port = -1;
    if (make_dir(r) != 0)
        return -1;
    return start_in_dir(r, NULL);
}

int th_cluster_start(th_cluster *cl)
{
    memset(cl, 0, sizeof(*cl));
    char prog[PATH_MAX];
    char addr[TH_CLUSTER_NODES][32];
    char *argv[16 + TH_CLUSTER_NODES];
    int argc = 0;
    if (!th__find_prog("redis-cli", prog, sizeof(prog)))
        return -1;
    argv[argc++] = prog;
    argv[argc++] = "--cluster";
    argv[argc++] = "create";
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        cl->node[i].bus_port = -1;
        /* Over TLS: the bus and replication too, and CLUSTER SLOTS names the
         * TLS ports to TLS clients (the plain ones to the harness's). */
        cl->node[i].tls = th_tls_mode();
        if (cl->node[i].tls)
            add_extra(&cl->node[i], "--tls-cluster", "yes", "--tls-replication", "yes", NULL);
        if (make_dir(&cl->node[i]) != 0 || start_in_dir(&cl->node[i], NULL) != 0)
            goto fail;
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", cl->node[i].port);
        argv[argc++] = addr[i];
    }
    argv[argc++] = "--cluster-replicas";
    argv[argc++] = "1";
    argv[argc++] = "--cluster-yes";
    argv[argc] = NULL;
    pid_t pid = th__spawn_argv(argv, -1);
    if (pid < 0 || th_wait(pid, 60000 * th_slack()) != 0)
        goto fail;
    if (th_cluster_wait_ok(cl, 60000) != 0)
        goto fail;
    /* The replicas have their primaries' data (so a failover test starts from
     * a synchronised pair). */
    for (int64_t until = th_now_ms() + 30000 * th_slack();;) {
        int pending = 0;
        for (int i = 0; i < TH_CLUSTER_NODES; i++) {
            char role[16];
            if (cmd_field(&cl->node[i], "INFO replication", "role", role, sizeof(role)) != 0)
                pending++;
            else if (strcmp(role, "slave") == 0 && !replica_up(&cl->node[i]))
                pending++;
        }
        if (!pending)
            break;
        if (th_now_ms() > until)
            goto fail;
        th_sleep_ms(100);
    }
    th_redis *seeds[] = {&cl->node[0], &cl->node[1], &cl->node[2]};
    deploy_url(cl->url, sizeof(cl->url), "cluster", seeds, 3, "");
    return 0;
fail:
    fprintf(stderr, "harness: cannot create a cluster of %d nodes\n", TH_CLUSTER_NODES);
    th_cluster_destroy(cl);
    return -1;
}

void th_cluster_destroy(th_cluster *cl)
{
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        th_redis_destroy(&cl->node[i]);
}

th_redis *th_cluster_node_for(th_cluster *cl, const char *key)
{
    th_redis *any = NULL;
    for (int i = 0; i < TH_CLUSTER_NODES && !any; i++)
        if (cl->node[i].pid > 0)
            any = &cl->node[i];
    if (!any)
        return NULL;
    long long slot = th_int(any, "CLUSTER KEYSLOT %s", key);
    redisReply *rep = th_cmd(any, "CLUSTER SLOTS");
    long long port = -1;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 && e->element[0]->integer <= slot &&
            slot <= e->element[1]->integer && e->element[2]->type == REDIS_REPLY_ARRAY &&
            e->element[2]->elements >= 2)
            port = e->element[2]->element[1]->integer;
    }
    if (rep)
        freeReplyObject(rep);
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        if (cl->node[i].pid > 0 && cl->node[i].port == port)
            return &cl->node[i];
    return NULL;
}

/* The nodes a count of subscribers asks: r itself, or every node of its
 * deployment. Returns how many were put in out. */
static int deployment_nodes(const th_redis *r, const th_redis **out, int max)
{
    deployed *d = deployment_of(r);
    int n = 0;
    if (!d) {
        out[n++] = r;
    } else if (d->cl) {
        for (int i = 0; i < TH_CLUSTER_NODES && n < max; i++)
            if (d->cl->node[i].pid > 0)
                out[n++] = &d->cl->node[i];
    } else if (d->rs) {
        if (d->rs->primary.pid > 0)
            out[n++] = &d->rs->primary;
        for (int i = 0; i < TH_REPLICAS && n < max; i++)
            if (d->rs->replica[i].pid > 0)
                out[n++] = &d->rs->replica[i];
    }
    return n;
}

static long long numsub_on(const th_redis *r, const char *sub, const char *channel)
{
    redisReply *rep = th_cmd(r, "PUBSUB %s %s", sub, channel);
    long long n = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
                          rep->element[1]->type == REDIS_REPLY_INTEGER
                      ? rep->element[1]->integer
                      : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

long long th_numsub(const th_redis *r, const char *channel)
{
    if (!th_deployed(r))
        return numsub_on(r, "NUMSUB", channel);
    const th_redis *nodes[TH_CLUSTER_NODES + TH_REPLICAS + 1];
    int n = deployment_nodes(r, nodes, (int)(sizeof(nodes) / sizeof(nodes[0])));
    long long total = 0;
    for (int i = 0; i < n; i++) {
        long long a = numsub_on(nodes[i], "NUMSUB", channel);
        long long b = numsub_on(nodes[i], "SHARDNUMSUB", channel);
        if (a < 0 || b < 0)
            return -1;
        total += a + b;
    }
    return total;
}

static long long channels_on(const th_redis *r, const char *sub, const char *pattern)
{
    redisReply *rep = th_cmd(r, "PUBSUB %s %s", sub, pattern);
    long long n = rep && rep->type == REDIS_REPLY_ARRAY ? (long long)rep->elements : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

long long th_channels(const th_redis *r, const char *pattern)
{
    if (!th_deployed(r))
        return channels_on(r, "CHANNELS", pattern);
    const th_redis *nodes[TH_CLUSTER_NODES + TH_REPLICAS + 1];
    int n = deployment_nodes(r, nodes, (int)(sizeof(nodes) / sizeof(nodes[0])));
    long long total = 0;
    for (int i = 0; i < n; i++) {
        long long a = channels_on(nodes[i], "CHANNELS", pattern);
        long long b = channels_on(nodes[i], "SHARDCHANNELS", pattern);
        if (a < 0 || b < 0)
            return -1;
        total += a + b;
    }
    return total;
}

static int cluster_deployed(const th_redis *r)
{
    deployed *d = deployment_of(r);
    return d && d->cl;
}

long long th_publish(const th_redis *r, const char *channel, const char *msg)
{
    /* SPUBLISH names its channel as a key: th_cmd follows MOVED to its node. */
    redisReply *rep = th_cmd(r, "%s %s %s", cluster_deployed(r) ? "SPUBLISH" : "PUBLISH",
                             channel, msg);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

redisContext *th_subscribe(const th_redis *r, const char *channel)
{
    const th_redis *at = r;
    deployed *d = deployment_of(r);
    if (d && d->cl && !(at = th_cluster_node_for(d->cl, channel)))
        return NULL;
    redisContext *c = th_admin(at);
    if (!c)
        return NULL;
    redisReply *rep = redisCommand(c, "%s %s", d && d->cl ? "SSUBSCRIBE" : "SUBSCRIBE", channel);
    int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3;
    if (rep)
        freeReplyObject(rep);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

int th_await_lock_waiter(dlock_client *c, const char *name)
{
    char ch[300];
    int len = snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    for (int64_t until = th_now_ms() + 5000 * th_slack(); th_now_ms() < until; th_sleep_ms(5))
        if (dlock__pubsub_waiters(c->pubsub, ch, (size_t)len) > 0)
            return 1;
    return dlock__pubsub_waiters(c->pubsub, ch, (size_t)len) > 0;
}
