/* The exporter's listening sockets (exporter.c): "host:port", "[v6]:port"
 * or ":port" (every address of both families), bound with a few retries
 * when a port is taken between the families' binds. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"

/* "host:port", "[v6]:port" or ":port" (every address) into host (NULL for
 * every address) and port. 0, or -1 after a usage error. */
static int split_listen(const cli_opts *o, const char *s, char *host, size_t hsize, char *port,
                        size_t psize)
{
    const char *colon = strrchr(s, ':');
    const char *h = s;
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (colon && s[0] == '[') {
        h = s + 1;
        hl = colon > s + 1 && colon[-1] == ']' ? (size_t)(colon - s - 2) : (size_t)-1;
    } else if (colon && memchr(s, ':', hl)) {
        hl = (size_t)-1;   /* an IPv6 address needs its brackets */
    }
    const char *p = colon ? colon + 1 : "";
    size_t pl = strlen(p);
    long pn = pl && pl <= 5 && strspn(p, "0123456789") == pl ? strtol(p, NULL, 10) : -1;
    if (!colon || hl == (size_t)-1 || hl >= hsize || pn < 0 || pn > 65535 || pl >= psize) {
        char e[120];
        cli_usage_error(o, "exporter", "--listen '%s': give ADDR:PORT (127.0.0.1:9464, "
                                       "[::1]:9464, :9464 for every address; port 0 to 65535)",
                        cli_esc(s, e, sizeof(e)));
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, psize, "%ld", pn);
    return 0;
}

/* 1 when the address is a loopback one (127.0.0.0/8, ::1, ::ffff:127.x). */
int listen_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

static void set_port(struct sockaddr *sa, int port)
{
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
}

void listen_close(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* Binds every address of res (":PORT": both families' wildcards; a name:
 * each of its addresses) on one port: port 0 picks it at the first bind.
 * The listening sockets into fds; their count, or -1 (*err, *again: port 0
 * taken on a later address, worth another try). An address family the host
 * lacks is left out. */
static int bind_all(struct addrinfo *res, int *fds, int *err, int *again)
{
    int n = 0, port = -1;
    *again = 0;
    for (struct addrinfo *ai = res; ai && n < LISTEN_MAX; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        struct sockaddr_storage ss;
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        int given = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
        if (given == 0 && port > 0)
            set_port((struct sockaddr *)&ss, port);
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);
        if (fd < 0 && n > 0 && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT))
            continue;
        int one = 1;
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            /* Each family on its own socket: [::] does not take IPv4 too. */
            if (ai->ai_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        }
        if (fd < 0 || bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) != 0 ||
            listen(fd, 128) != 0) {
            *err = errno;
            if (fd >= 0)
                close(fd);
            if (n > 0 && (*err == EADDRNOTAVAIL || *err == EAFNOSUPPORT))
                continue;   /* no address of that family here (IPv6 off) */
            *again = n > 0 && given == 0 && *err == EADDRINUSE;
            listen_close(fds, n);
            return -1;
        }
        fds[n++] = fd;
        if (port < 0) {
            socklen_t sl = sizeof(ss);
            getsockname(fd, (struct sockaddr *)&ss, &sl);
            port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                 : ((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    return n;
}

/* The listening sockets on the address into fds. Returns their count, or
 * -1 after a message (*code: the exit code). */
int listen_open(const cli_opts *o, const char *spec, int *fds, int *code)
{
    char host[256], port[8];
    *code = EXIT_USAGE;
    if (split_listen(o, spec, host, sizeof(host), port, sizeof(port)) != 0)
        return -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *res;
    char e[300];
    cli_esc(spec, e, sizeof(e));
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    *code = EXIT_OSERR;
    if (gai != 0) {
        cli_err(o, "exporter: cannot listen on %s: %s", e, gai_strerror(gai));
        return -1;
    }
    int n = -1, err = 0, again = 1;
    for (int tries = 0; n < 0 && again && tries < 8; tries++)
        n = bind_all(res, fds, &err, &again);
    freeaddrinfo(res);
    if (n < 0 || n == 0)
        cli_err(o, "exporter: cannot listen on %s: %s%s", e, strerror(n ? err : EADDRNOTAVAIL),
                err == EADDRINUSE ? " (another process listens there: another exporter?)" : "");
    return n > 0 ? n : -1;
}
