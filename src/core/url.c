/* Endpoints and URL parsing. Messages name the bad part of a URL but never
 * echo a password, not even a malformed one. */
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/un.h>

#include "core/core.h"

#define DEFAULT_PORT 6379

#define MAX_HOST_LEN 255
#define MAX_CRED_LEN 512
#define MAX_PATH_LEN 4096

/* ------------------------------------------------------------- endpoint */

const char *dlock__endpoint_str(const dlock__endpoint *ep, char *buf, size_t size)
{
    if (ep->path)
        snprintf(buf, size, "unix:%s", ep->path);
    else if (ep->host && strchr(ep->host, ':'))
        snprintf(buf, size, "[%s]:%d", ep->host, ep->port);
    else
        snprintf(buf, size, "%s:%d", ep->host ? ep->host : "?", ep->port);
    return buf;
}

void dlock__endpoint_clear(dlock__endpoint *ep)
{
    free(ep->host);
    free(ep->path);
    free(ep->user);
    dlock__free_secret(ep->pass);
    memset(ep, 0, sizeof(*ep));
}

int dlock__endpoint_copy(dlock__endpoint *dst, const dlock__endpoint *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->port = src->port;
    dst->db = src->db;
    dst->tls = src->tls;
    dst->sentinel = src->sentinel;
    if (dlock__dup_opt(&dst->host, src->host) || dlock__dup_opt(&dst->path, src->path) ||
        dlock__dup_opt(&dst->user, src->user) || dlock__dup_opt(&dst->pass, src->pass)) {
        dlock__endpoint_clear(dst);
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

void dlock__tls_opts_clear(dlock__tls_opts *o)
{
    free(o->ca_file);
    free(o->ca_dir);
    free(o->cert_file);
    free(o->key_file);
    free(o->server_name);
    memset(o, 0, sizeof(*o));
    o->verify = 1;
}

int dlock__tls_opts_copy(dlock__tls_opts *dst, const dlock__tls_opts *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->verify = src->verify;
    if (dlock__dup_opt(&dst->ca_file, src->ca_file) ||
        dlock__dup_opt(&dst->ca_dir, src->ca_dir) ||
        dlock__dup_opt(&dst->cert_file, src->cert_file) ||
        dlock__dup_opt(&dst->key_file, src->key_file) ||
        dlock__dup_opt(&dst->server_name, src->server_name)) {
        dlock__tls_opts_clear(dst);
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

int dlock__tls_opts_set(const dlock__tls_opts *o)
{
    return o->ca_file || o->ca_dir || o->cert_file || o->key_file || o->server_name ||
           o->verify == 0;
}

/* ------------------------------------------------------------ URL parser */

/* Percent-decodes s[0..n) into a new string of at most max bytes. `what`
 * names the part in errors ("user", "password"); the value itself is never
 * printed. */
static int decode_max(const char *s, size_t n, size_t max, const char *what, char **out)
{
    if (n > max)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: %s is longer than %zu bytes", what, max);
    char *d = malloc(n + 1);
    if (!d)
        return dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            /* Two hex digits must follow; %00 would cut the string short. */
            int a = i + 2 < n ? dlock__hexval((unsigned char)s[i + 1]) : -1;
            int b = i + 2 < n ? dlock__hexval((unsigned char)s[i + 2]) : -1;
            if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                free(d);
                return dlock__fail(DLOCK_EINVAL, "invalid URL: bad percent-encoding in the %s",
                                   what);
            }
            d[j++] = (char)(a * 16 + b);
            i += 2;
        } else if ((unsigned char)s[i] < 0x21 || s[i] == 0x7f) {
            free(d);
            return dlock__fail(DLOCK_EINVAL,
                               "invalid URL: the %s contains a space or control character "
                               "(percent-encode it)",
                               what);
        } else {
            d[j++] = s[i];
        }
    }
    d[j] = '\0';
    *out = d;
    return DLOCK_OK;
}

static int decode_part(const char *s, size_t n, const char *what, char **out)
{
    return decode_max(s, n, MAX_CRED_LEN, what, out);
}

/* Parses a decimal integer in [lo, hi] from s[0..n). */
static int parse_int(const char *s, size_t n, long lo, long hi, long *out)
{
    if (n == 0 || n > 10)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int valid_hostname(const char *s, size_t n)
{
    if (n == 0 || n > MAX_HOST_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(isalnum(ch) || ch == '.' || ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

static int valid_ipv6(const char *s, size_t n)
{
    char buf[64];
    struct in6_addr a;
    if (n == 0 || n >= sizeof(buf))
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(AF_INET6, buf, &a) == 1;
}

/* Length-limited printable excerpt of user input for messages (never used on
 * the userinfo part). */
const char *dlock__excerpt(const char *s, size_t n, char *buf, size_t size)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 4 < size; i++)
        buf[j++] = isprint((unsigned char)s[i]) ? s[i] : '?';
    if (n > 0 && j + 4 >= size)
        memcpy(buf + j, "...", 3), j += 3;
    buf[j] = '\0';
    return buf;
}

static int parse_tls_params(const char *q, const dlock__endpoint *ep, dlock__tls_opts *tls);

static int parse_redis_url(const char *u, dlock__endpoint *ep, dlock__tls_opts *tls)
{
    char ex[64];
    const char *auth = u;
    size_t alen = strcspn(auth, "/?#");
    const char *rest = auth + alen;

    /* userinfo: everything before the last '@' of the authority. */
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (auth[i] == '@')
            at = auth + i;
    const char *hp = auth;
    if (at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        size_t ulen = colon ? (size_t)(colon - auth) : (size_t)(at - auth);
        int rc;
        if (ulen > 0 && (rc = decode_part(auth, ulen, "user", &ep->user)) != DLOCK_OK)
            return rc;
        if (colon && (rc = decode_part(colon + 1, (size_t)(at - colon - 1), "password",
                                       &ep->pass)) != DLOCK_OK)
            return rc;
        if (ep->pass && !*ep->pass) {
            free(ep->pass);
            ep->pass = NULL;
        }
        if (ep->user && !ep->pass)
            return dlock__fail(DLOCK_EINVAL, "invalid URL: a user needs a password "
                                             "(redis://user:password@host)");
        hp = at + 1;
    }
    size_t hplen = (size_t)(auth + alen - hp);

    /* host, possibly [ipv6], then optional :port */
    const char *host = hp, *port = NULL;
    size_t hlen, plen = 0;
    if (hplen > 0 && hp[0] == '[') {
        const char *close = memchr(hp, ']', hplen);
        if (!close)
            return dlock__fail(DLOCK_EINVAL, "invalid URL: '[' of an IPv6 host is not closed");
        host = hp + 1;
        hlen = (size_t)(close - host);
        if (!valid_ipv6(host, hlen))
            return dlock__fail(DLOCK_EINVAL, "invalid URL: '%s' is not an IPv6 address",
                               dlock__excerpt(host, hlen, ex, sizeof(ex)));
        const char *after = close + 1;
        size_t left = (size_t)(hp + hplen - after);
        if (left > 0) {
            if (after[0] != ':')
                return dlock__fail(DLOCK_EINVAL, "invalid URL: expected ':port' after ']'");
            port = after + 1;
            plen = left - 1;
        }
    } else {
        const char *colon = memchr(hp, ':', hplen);
        hlen = colon ? (size_t)(colon - hp) : hplen;
        if (colon) {
            port = colon + 1;
            plen = (size_t)(hp + hplen - port);
        }
        if (hlen == 0)
            return dlock__fail(DLOCK_EINVAL, "invalid URL: the host is empty");
        if (!valid_hostname(host, hlen))
            return dlock__fail(DLOCK_EINVAL, "invalid URL: '%s' is not a valid host name",
                               dlock__excerpt(host, hlen, ex, sizeof(ex)));
    }
    ep->host = dlock__strndup(host, hlen);
    if (!ep->host)
        return dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");

    ep->port = DEFAULT_PORT;
    if (port) {
        long v;
        if (parse_int(port, plen, 1, 65535, &v) != 0)
            return dlock__fail(DLOCK_EINVAL, "invalid URL: port '%s' is not a number in 1..65535",
                               dlock__excerpt(port, plen, ex, sizeof(ex)));
        ep->port = (int)v;
    }

    /* optional /db */
    if (rest[0] == '/') {
        const char *db = rest + 1;
        size_t dlen = strcspn(db, "?#");
        if (dlen > 0) {
            long v;
            if (parse_int(db, dlen, 0, INT_MAX, &v) != 0)
                return dlock__fail(DLOCK_EINVAL,
                                   "invalid URL: database '%s' is not a non-negative number",
                                   dlock__excerpt(db, dlen, ex, sizeof(ex)));
            ep->db = (int)v;
        }
        rest = db + dlen;
    }
    if (rest[0] == '?')
        return parse_tls_params(rest + 1, ep, tls);
    if (rest[0] != '\0')
        return dlock__fail(DLOCK_EINVAL, "invalid URL: unexpected '%s' after the host",
                           dlock__excerpt(rest, strlen(rest), ex, sizeof(ex)));
    return DLOCK_OK;
}

/* One TLS parameter's value, percent-decoded, into *dst (replacing it). */
static int tls_value(const char *v, size_t n, const char *what, char **dst)
{
    if (n == 0)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: %s is empty", what);
    char *d;
    int rc = decode_max(v, n, MAX_PATH_LEN, what, &d);
    if (rc != DLOCK_OK)
        return rc;
    free(*dst);
    *dst = d;
    return DLOCK_OK;
}

/* ?cacert=FILE&cacertdir=DIR&cert=FILE&key=FILE&sni=NAME&insecure, redis-cli's
 * names for its TLS options; rediss:// only. */
static int parse_tls_params(const char *q, const dlock__endpoint *ep, dlock__tls_opts *tls)
{
    static const struct {
        const char *name;
        size_t off;
    } params[] = {
        {"cacert", offsetof(dlock__tls_opts, ca_file)},
        {"cacertdir", offsetof(dlock__tls_opts, ca_dir)},
        {"cert", offsetof(dlock__tls_opts, cert_file)},
        {"key", offsetof(dlock__tls_opts, key_file)},
        {"sni", offsetof(dlock__tls_opts, server_name)},
    };
    char ex[64];
    dlock__tls_opts scratch;
    memset(&scratch, 0, sizeof(scratch));
    dlock__tls_opts *o = tls ? tls : &scratch;
    int rc = DLOCK_OK;
    while (*q && rc == DLOCK_OK) {
        size_t n = strcspn(q, "&#");
        size_t klen = strcspn(q, "=&#");
        const char *v = klen < n ? q + klen + 1 : q + n;
        size_t vlen = klen < n ? n - klen - 1 : 0;
        int known = 0;
        if (!ep->tls && n > 0) {
            rc = dlock__fail(DLOCK_EINVAL,
                             "invalid URL: parameter '%s' needs a rediss:// (TLS) URL",
                             dlock__excerpt(q, klen, ex, sizeof(ex)));
            break;
        }
        for (size_t i = 0; i < DLOCK__ARRAY_LEN(params) && !known; i++) {
            if (klen == strlen(params[i].name) && strncmp(q, params[i].name, klen) == 0) {
                known = 1;
                rc = tls_value(v, vlen, params[i].name, (char **)((char *)o + params[i].off));
            }
        }
        if (!known && klen == 8 && strncmp(q, "insecure", 8) == 0) {
            known = 1;
            if (klen == n || (vlen == 1 && *v == '1') || (vlen == 4 && !strncmp(v, "true", 4)) ||
                (vlen == 3 && !strncmp(v, "yes", 3)))
                o->verify = 0;
            else
                rc = dlock__fail(DLOCK_EINVAL, "invalid URL: insecure takes no value, or 1, "
                                               "true or yes (certificate checks off)");
        }
        if (!known && n > 0)
            rc = dlock__fail(DLOCK_EINVAL,
                             "invalid URL: unknown parameter '%s' (known: cacert, cacertdir, "
                             "cert, key, sni, insecure)",
                             dlock__excerpt(q, klen, ex, sizeof(ex)));
        q += n;
        if (*q == '&')
            q++;
        else
            break;
    }
    if (rc == DLOCK_OK && *q != '\0')
        rc = dlock__fail(DLOCK_EINVAL, "invalid URL: unexpected '%s' after the parameters",
                         dlock__excerpt(q, strlen(q), ex, sizeof(ex)));
    if (rc == DLOCK_OK && o->server_name && !valid_hostname(o->server_name, strlen(o->server_name)))
        rc = dlock__fail(DLOCK_EINVAL, "invalid URL: sni '%s' is not a host name",
                         dlock__excerpt(o->server_name, strlen(o->server_name), ex, sizeof(ex)));
    dlock__tls_opts_clear(&scratch);
    return rc;
}

static int parse_unix_url(const char *u, dlock__endpoint *ep)
{
    char ex[64];
    size_t plen = strcspn(u, "?#");
    if (plen == 0 || u[0] != '/')
        return dlock__fail(DLOCK_EINVAL, "invalid URL: a unix socket needs an absolute path "
                                         "(unix:///path/to.sock)");
    if (plen >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return dlock__fail(DLOCK_EINVAL, "invalid URL: socket path longer than %zu bytes",
                           sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    for (size_t i = 0; i < plen; i++)
        if ((unsigned char)u[i] < 0x20)
            return dlock__fail(DLOCK_EINVAL, "invalid URL: control character in the socket path");
    ep->path = dlock__strndup(u, plen);
    if (!ep->path)
        return dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
    const char *q = u + plen;
    if (q[0] == '?') {
        q++;
        while (*q) {
            size_t n = strcspn(q, "&#");
            if (n > 3 && strncmp(q, "db=", 3) == 0) {
                long v;
                if (parse_int(q + 3, n - 3, 0, INT_MAX, &v) != 0)
                    return dlock__fail(DLOCK_EINVAL,
                                       "invalid URL: database '%s' is not a non-negative number",
                                       dlock__excerpt(q + 3, n - 3, ex, sizeof(ex)));
                ep->db = (int)v;
            } else {
                return dlock__fail(DLOCK_EINVAL,
                                   "invalid URL: unknown parameter '%s' (only db=N is known)",
                                   dlock__excerpt(q, n, ex, sizeof(ex)));
            }
            q += n;
            if (*q == '&')
                q++;
            else
                break;
        }
    }
    if (*q != '\0')
        return dlock__fail(DLOCK_EINVAL, "invalid URL: unexpected '%s' after the path",
                           dlock__excerpt(q, strlen(q), ex, sizeof(ex)));
    return DLOCK_OK;
}

int dlock__parse_url(const char *url, dlock__endpoint *out)
{
    return dlock__parse_url_tls(url, out, NULL);
}

int dlock__parse_url_tls(const char *url, dlock__endpoint *out, dlock__tls_opts *tls)
{
    if (!url || !*url)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: empty");
    if (strlen(url) > 4096)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: longer than 4096 bytes");
    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    int rc;
    dlock__tls_opts t;
    memset(&t, 0, sizeof(t));
    t.verify = -1;
    if (strncmp(url, "redis://", 8) == 0) {
        rc = parse_redis_url(url + 8, &ep, &t);
    } else if (strncmp(url, "rediss://", 9) == 0) {
        ep.tls = 1;
        rc = parse_redis_url(url + 9, &ep, &t);
    } else if (strncmp(url, "unix://", 7) == 0) {
        rc = parse_unix_url(url + 7, &ep);
    } else {
        char ex[32];
        size_t n = strcspn(url, ":/@");
        rc = dlock__fail(DLOCK_EINVAL,
                         "invalid URL: unknown scheme '%s' (expected redis://, rediss://, "
                         "unix://, redis-sentinel://, redis-cluster://, redis-replicated://, "
                         "rediss-sentinel://, rediss-cluster:// or rediss-replicated://)",
                         dlock__excerpt(url, n, ex, sizeof(ex)));
    }
    if (rc != DLOCK_OK) {
        dlock__endpoint_clear(&ep);
        dlock__tls_opts_clear(&t);
        return rc;
    }
    if (tls) {
        dlock__tls_opts_clear(tls);
        *tls = t;
    } else {
        dlock__tls_opts_clear(&t);
    }
    dlock__endpoint_clear(out);
    *out = ep;
    return DLOCK_OK;
}

