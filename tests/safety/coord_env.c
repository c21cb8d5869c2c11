/* The safety coordinator's environment: child processes, the Redis servers
 * it starts on free loopback ports (or inside a network namespace), and the
 * namespaces of the partition scenario. Everything is stopped by pid. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coord.h"
#include "harness.h"

volatile sig_atomic_t interrupted;

void msleep(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !interrupted) {
    }
}

/* ------------------------------------------------------------ processes */

pid_t spawn(const char *ns, char *const argv[], const char *out_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (out_path) {
            int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
            }
        }
        if (ns) {
            char *av[64] = {"ip", "netns", "exec", (char *)ns};
            int n = 4;
            for (int i = 0; argv[i] && n < 63; i++)
                av[n++] = argv[i];
            av[n] = NULL;
            execvp("ip", av);   /* setns + exec: the pid stays that of the program */
        } else {
            execvp(argv[0], argv);
        }
        _exit(127);
    }
    return pid;
}

int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void stop_pid(pid_t pid, int sig, int64_t wait_ms)
{
    if (pid <= 0)
        return;
    kill(pid, sig);
    for (int64_t i = 0; i < wait_ms / 10; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        msleep(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* -------------------------------------------------------------- servers */

/* A connection to s, made from inside its namespace when it has one (a socket
 * keeps the namespace it was created in). */
typedef struct ns_conn {
    const server *s;
    redisContext *c;
} ns_conn;

static void *connect_in_ns(void *arg)
{
    ns_conn *nc = arg;
    if (nc->s->ns) {
        char path[128];
        snprintf(path, sizeof(path), "/var/run/netns/%s", nc->s->ns);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            if (fd >= 0)
                close(fd);
            return NULL;
        }
        close(fd);
    }
    struct timeval tv = {2, 0};
    nc->c = redisConnectWithTimeout(nc->s->host, nc->s->port, tv);
    if (nc->c && nc->c->err) {
        redisFree(nc->c);
        nc->c = NULL;
    }
    if (nc->c)
        redisSetTimeout(nc->c, tv);
    return NULL;
}

redisContext *admin(const server *s)
{
    ns_conn nc = {s, NULL};
    pthread_t t;
    pthread_create(&t, NULL, connect_in_ns, &nc);   /* setns changes only that thread */
    pthread_join(t, NULL);
    return nc.c;
}

static int ping(const server *s)
{
    redisContext *c = admin(s);
    if (!c)
        return 0;
    redisReply *r = redisCommand(c, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

int server_launch(run *r, server *s)
{
    char port[16], log[sizeof(s->dir) + 16];
    snprintf(port, sizeof(port), "%d", s->port);
    snprintf(log, sizeof(log), "%s/redis.log", s->dir);
    /* Never a wildcard: loopback, or inside namespace R exactly the two
     * addresses this run gave its veth ends (worker A reaches the first,
     * the others the second). */
    char ns_addrs[64];
    snprintf(ns_addrs, sizeof(ns_addrs), "%s %s", NS_R_ADDR, NS_R_ADDR_B);
    char *argv[] = {"redis-server", "--port", port, "--bind", s->ns ? ns_addrs : "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", s->dir, "--daemonize", "no",
                    "--protected-mode", "no", "--logfile", log, NULL};
    s->pid = spawn(s->ns, argv, NULL);
    for (int i = 0; i < 300; i++) {
        if (ping(s))
            return 0;
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
            break;
        msleep(10);
    }
    fprintf(stderr, "safety: cannot start redis-server on port %d (%s)\n", s->port, r->scenario);
    return -1;
}

int server_start(run *r, server *s, const char *name, const char *ns, const char *host)
{
    snprintf(s->dir, sizeof(s->dir), "%s/%s", r->dir, name);
    mkdir(s->dir, 0755);
    s->ns = ns;
    snprintf(s->host, sizeof(s->host), "%s", host);
    for (int tries = 0; tries < 10; tries++) {
        s->port = th_free_port();
        if (server_launch(r, s) == 0)
            return 0;
    }
    return -1;
}

/* --------------------------------------------------------------- netns */

const char *NS_R_ADDR = "10.200.1.1", *NS_A_ADDR = "10.200.1.2";
const char *NS_R_ADDR_B = "10.200.2.1", *NS_B_ADDR = "10.200.2.2";

void netns_down(run *r)
{
    if (!r->netns)
        return;
    sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null",
       r->ns_r, r->ns_a, r->ns_b);
    r->netns = 0;
}

/* Three namespaces made for this run: R (the servers), A (the worker that
 * will be cut off) and B (the others), linked by veth pairs. */
int netns_up(run *r)
{
    int id = (int)getpid() % 100000;
    snprintf(r->ns_r, sizeof(r->ns_r), "dls%dr", id);
    snprintf(r->ns_a, sizeof(r->ns_a), "dls%da", id);
    snprintf(r->ns_b, sizeof(r->ns_b), "dls%db", id);
    r->netns = 1;
    int rc = sh("set -e; for n in %s %s %s; do ip netns add $n; ip -n $n link set lo up; done; "
                "ip link add dls%dra type veth peer name dls%dar; "
                "ip link set dls%dra netns %s; ip link set dls%dar netns %s; "
                "ip link add dls%drb type veth peer name dls%dbr; "
                "ip link set dls%drb netns %s; ip link set dls%dbr netns %s; "
                "ip -n %s addr add %s/30 dev dls%dra; ip -n %s addr add %s/30 dev dls%dar; "
                "ip -n %s addr add %s/30 dev dls%drb; ip -n %s addr add %s/30 dev dls%dbr; "
                "ip -n %s link set dls%dra up; ip -n %s link set dls%drb up; "
                "ip -n %s link set dls%dar up; ip -n %s link set dls%dbr up",
                r->ns_r, r->ns_a, r->ns_b, id, id, id, r->ns_r, id, r->ns_a, id, id, id, r->ns_r,
                id, r->ns_b, r->ns_r, NS_R_ADDR, id, r->ns_a, NS_A_ADDR, id, r->ns_r, NS_R_ADDR_B,
                id, r->ns_b, NS_B_ADDR, id, r->ns_r, id, r->ns_r, id, r->ns_a, id, r->ns_b, id);
    if (rc != 0) {
        netns_down(r);
        return -1;
    }
    return 0;
}

int partition(run *r, int on)
{
    const char *op = on ? "-A" : "-D";
    return sh("ip netns exec %s iptables %s OUTPUT -p tcp -d %s --dport %d -j DROP && "
              "ip netns exec %s iptables %s INPUT -p tcp -s %s --sport %d -j DROP",
              r->ns_a, op, NS_R_ADDR, r->lock.port, r->ns_a, op, NS_R_ADDR, r->lock.port);
}
