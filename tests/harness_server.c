/* Harness: single redis-server processes on free loopback ports (plain, TLS
 * beside plain, the ACL mode's user), started and stopped by pid. */
#include "harness_int.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_EXTRA 16

int th_free_port(void)
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

int th__start_in_dir(th_redis *r, const char *sentinel_conf)
{
    int want_bus = r->bus_port < 0;
    for (int tries = 0; tries < 10; tries++) {
        r->port = th_free_port();
        r->bus_port = want_bus ? th_free_port() : 0;
        r->tls_port = r->tls ? th_free_port() : 0;
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

int th__make_dir(th_redis *r)
{
    snprintf(r->dir, sizeof(r->dir), "/tmp/dlock-test-XXXXXX");
    if (!mkdtemp(r->dir)) {
        r->dir[0] = '\0';
        return -1;
    }
    snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
    return 0;
}

void th__collect_extra(th_redis *r, va_list ap)
{
    int n = 0;
    while (r->extra[n])
        n++;
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < MAX_EXTRA * 2)
        r->extra[n++] = a;
    r->extra[n] = NULL;
}

void th__add_extra(th_redis *r, ...)
{
    va_list ap;
    va_start(ap, r);
    th__collect_extra(r, ap);
    va_end(ap);
}

/* A single server, TLS beside plain when tls, as the ACL mode's user when
 * that mode is on. */
static int start_single(th_redis *r, int tls)
{
    r->tls = tls;
    r->acl = th_acl_mode() && !wants_password(r);
    if (th__make_dir(r) != 0)
        return -1;
    return th__start_in_dir(r, NULL);
}

/* tls: 1 always, 0 as the mode says (and a deployment in its place when
 * DLOCK_TEST_DEPLOY asks and no extra arguments came). */
static int start(th_redis *r, int tls, va_list ap)
{
    memset(r, 0, sizeof(*r));
    th__collect_extra(r, ap);
    if (!tls && !r->extra[0] && strcmp(th_deploy_name(), "single") != 0)
        return th__deploy_start(r);
    return start_single(r, tls || th_tls_mode());
}

int th_redis_start(th_redis *r, ...)
{
    va_list ap;
    va_start(ap, r);
    int rc = start(r, 0, ap);
    va_end(ap);
    return rc;
}

int th_redis_start_tls(th_redis *r, ...)
{
    va_list ap;
    va_start(ap, r);
    int rc = start(r, 1, ap);
    va_end(ap);
    return rc;
}

void th_redis_stop(th_redis *r)
{
    if (th__deploy_stop(r)) {
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
    if (th_deployed(r))
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
