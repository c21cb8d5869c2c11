/* Deployment URLs: redis-sentinel://, redis-cluster:// and
 * redis-replicated:// (a list of hosts),
 * read with the one-server parser (url.c) host by host, so that hosts,
 * ports, credentials and their messages follow one set of rules.
 *
 *   redis-sentinel://[user:password@]host[:port][,host[:port]...][/db]#MASTERNAME
 *   redis-cluster://[user:password@]host[:port][,host[:port]...]
 *
 *   redis-replicated://[user:password@]host[:port][,host[:port]...][/db]
 *
 * Each may carry the address map, before the '#':
 *   ?map=HOST:PORT=HOST:PORT[,HOST:PORT=HOST:PORT...]   (map= may repeat)
 * the address announced, then the one to reach it at (dlock__deploy_map).
 *
 * rediss-sentinel://, rediss-cluster:// and rediss-replicated:// are the same over TLS: every
 * connection (sentinels, data nodes, nodes learnt from the topology) is
 * TLS, with rediss://'s parameters after the hosts (?cacert=&cert=&key=&sni=
 * &insecure), or the dlock_config_set_tls_* settings.
 *
 * The user and password are the data nodes' (the sentinels' are set by
 * dlock_config_set_sentinel_password). A sentinel's port defaults to 26379. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

#define SENTINEL_PORT 26379
#define MAX_SEEDS 64
#define MAX_MASTER_LEN 255
#define MAX_MAPS 64

static void maps_clear(dlock__deploy *d)
{
    for (size_t i = 0; i < d->nmaps; i++) {
        free(d->maps[i].from);
        free(d->maps[i].to);
    }
    free(d->maps);
    d->maps = NULL;
    d->nmaps = 0;
}

void dlock__deploy_clear(dlock__deploy *d)
{
    for (size_t i = 0; i < d->nseeds; i++)
        dlock__endpoint_clear(&d->seeds[i]);
    free(d->seeds);
    maps_clear(d);
    free(d->master);
    free(d->sentinel_user);
    dlock__free_secret(d->sentinel_pass);
    memset(d, 0, sizeof(*d));
}

int dlock__deploy_copy(dlock__deploy *dst, const dlock__deploy *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->kind = src->kind;
    if (src->nseeds) {
        dst->seeds = calloc(src->nseeds, sizeof(*dst->seeds));
        if (!dst->seeds)
            return DLOCK_ENOMEM;
        for (size_t i = 0; i < src->nseeds; i++, dst->nseeds++)
            if (dlock__endpoint_copy(&dst->seeds[i], &src->seeds[i]) != DLOCK_OK) {
                dlock__deploy_clear(dst);
                return DLOCK_ENOMEM;
            }
    }
    if (src->nmaps) {
        dst->maps = calloc(src->nmaps, sizeof(*dst->maps));
        if (!dst->maps) {
            dlock__deploy_clear(dst);
            return DLOCK_ENOMEM;
        }
        for (size_t i = 0; i < src->nmaps; i++, dst->nmaps++) {
            dst->maps[i] = src->maps[i];
            dst->maps[i].from = dst->maps[i].to = NULL;
            if (dlock__dup_opt(&dst->maps[i].from, src->maps[i].from) ||
                dlock__dup_opt(&dst->maps[i].to, src->maps[i].to)) {
                dst->nmaps++;
                dlock__deploy_clear(dst);
                return DLOCK_ENOMEM;
            }
        }
    }
    if (dlock__dup_opt(&dst->master, src->master) ||
        dlock__dup_opt(&dst->sentinel_user, src->sentinel_user) ||
        dlock__dup_opt(&dst->sentinel_pass, src->sentinel_pass)) {
        dlock__deploy_clear(dst);
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

/* Parses "redis://<text>" (rediss:// when tls) with the one-server parser;
 * its TLS parameters into *opts when opts is not NULL. */
static int parse_as_redis(const char *text, size_t n, int tls, dlock__endpoint *ep,
                          dlock__tls_opts *opts)
{
    const char *scheme = tls ? "rediss://" : "redis://";
    size_t sl = strlen(scheme);
    char *u = malloc(n + sl + 1);
    if (!u)
        return dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
    memcpy(u, scheme, sl);
    memcpy(u + sl, text, n);
    u[n + sl] = '\0';
    memset(ep, 0, sizeof(*ep));
    int rc = dlock__parse_url_tls(u, ep, opts);
    dlock__free_secret(u);   /* it may hold a password */
    return rc;
}

/* host[:port] or [v6][:port] (already validated): is the port given? */
static int has_port(const char *h, size_t n)
{
    if (h[0] == '[') {
        const char *close = memchr(h, ']', n);
        return close && close + 1 < h + n && close[1] == ':';
    }
    return memchr(h, ':', n) != NULL;
}

int dlock__deploy_map(const dlock__deploy *d, const char *host, int port, char *host_out,
                      int *port_out)
{
    for (size_t i = 0; i < d->nmaps; i++)
        if (d->maps[i].from_port == port && strcasecmp(d->maps[i].from, host) == 0) {
            snprintf(host_out, DLOCK_HOST_MAX, "%s", d->maps[i].to);
            *port_out = d->maps[i].to_port;
            return 1;
        }
    return 0;
}

/* How the map's messages name it: in a URL (map=...) or given on its own
 * (dlock_config_add_address_map, the CLI's --map). */
static const char *map_what(int url) { return url ? "invalid URL: map entry" : "address map entry"; }
static const char *map_form(int url) { return url ? "map=" : ""; }

/* One side of a map entry, "host:port" or "[v6]:port", into *host, *port. */
static int map_side(const char *s, size_t n, const char *entry, size_t elen, int url, char **host,
                    int *port)
{
    char ex[96];
    dlock__endpoint ep;
    int bad = n == 0 || !has_port(s, n);
    for (size_t i = 0; i < n && !bad; i++)
        bad = s[i] == '@' || s[i] == '/' || s[i] == '%';
    int rc = bad ? DLOCK_EINVAL : parse_as_redis(s, n, 0, &ep, NULL);
    if (rc == DLOCK_ENOMEM)
        return rc;
    if (rc != DLOCK_OK)
        return dlock__fail(DLOCK_EINVAL,
                           "%s '%s' does not parse: give "
                           "%sHOST:PORT=HOST:PORT[,HOST:PORT=HOST:PORT...] (the address "
                           "announced, then the one to reach it at)",
                           map_what(url), dlock__excerpt(entry, elen, ex, sizeof(ex)),
                           map_form(url));
    *host = ep.host;
    *port = ep.port;
    ep.host = NULL;
    dlock__endpoint_clear(&ep);
    return DLOCK_OK;
}

/* The value of one map= parameter (url 1) or of
 * dlock_config_add_address_map: entries separated by ','. */
static int parse_maps(const char *v, size_t n, int url, dlock__deploy *d)
{
    if (n == 0)
        return dlock__fail(DLOCK_EINVAL, "%s is empty (give %sHOST:PORT=HOST:PORT[,...])",
                           url ? "invalid URL: map=" : "the address map", map_form(url));
    for (const char *e = v, *end = v + n; e <= end;) {
        const char *comma = memchr(e, ',', (size_t)(end - e));
        size_t len = (size_t)((comma ? comma : end) - e);
        const char *eq = memchr(e, '=', len);
        if (d->nmaps == MAX_MAPS)
            return dlock__fail(DLOCK_EINVAL, "%smore than %d address map entries",
                               url ? "invalid URL: " : "", MAX_MAPS);
        dlock__addr_map *a = realloc(d->maps, (d->nmaps + 1) * sizeof(*a));
        if (!a)
            return dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
        d->maps = a;
        a = &d->maps[d->nmaps];
        memset(a, 0, sizeof(*a));
        int rc = map_side(e, eq ? (size_t)(eq - e) : 0, e, len, url, &a->from, &a->from_port);
        if (rc == DLOCK_OK)
            rc = map_side(eq + 1, len - (size_t)(eq - e) - 1, e, len, url, &a->to, &a->to_port);
        d->nmaps++;   /* cleared with the rest on failure */
        if (rc != DLOCK_OK)
            return rc;
        e += len + 1;
    }
    return DLOCK_OK;
}

/* The deployment schemes: which kind, whether TLS. */
static const struct {
    const char *scheme;
    dlock__deploy_kind kind;
    int tls;
} schemes[] = {
    {"redis-sentinel://", DLOCK__DEPLOY_SENTINEL, 0},
    {"redis-cluster://", DLOCK__DEPLOY_CLUSTER, 0},
    {"redis-replicated://", DLOCK__DEPLOY_REPLICATED, 0},
    {"rediss-sentinel://", DLOCK__DEPLOY_SENTINEL, 1},
    {"rediss-cluster://", DLOCK__DEPLOY_CLUSTER, 1},
    {"rediss-replicated://", DLOCK__DEPLOY_REPLICATED, 1},
};

static int scheme_of(const char *url)
{
    for (int i = 0; url && i < (int)(sizeof(schemes) / sizeof(schemes[0])); i++)
        if (strncmp(url, schemes[i].scheme, strlen(schemes[i].scheme)) == 0)
            return i;
    return -1;
}

/* q[0..n) ("?a=1&b", or empty): map= parameters into d, the others (TLS
 * ones, rediss only) into a new "?..." string *rest ("" when none). */
static int split_query(const char *q, size_t n, const char *scheme, int tls, dlock__deploy *d,
                       char **rest)
{
    char *r = malloc(n + 1);
    if (!r)
        return dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
    size_t rl = 0;
    int rc = DLOCK_OK;
    for (const char *p = q + (n > 0), *end = q + n; rc == DLOCK_OK && p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        size_t len = (size_t)((amp ? amp : end) - p);
        if (len >= 4 && strncmp(p, "map=", 4) == 0) {
            rc = parse_maps(p + 4, len - 4, 1, d);
        } else if (len > 0) {
            r[rl] = rl == 0 ? '?' : '&';
            rl++;
            memcpy(r + rl, p, len);
            rl += len;
        }
        p += len + 1;
    }
    r[rl] = '\0';
    if (rc == DLOCK_OK && rl > 0 && !tls)
        rc = dlock__fail(DLOCK_EINVAL,
                         "invalid URL: %s takes no parameters but map= (TLS parameters go "
                         "with rediss%s)",
                         scheme, scheme + 5);
    if (rc != DLOCK_OK) {
        free(r);
        return rc;
    }
    *rest = r;
    return DLOCK_OK;
}

static int parse_list(const char *url, int which, dlock__endpoint *ep, dlock__deploy *d,
                      dlock__tls_opts *opts)
{
    const char *scheme = schemes[which].scheme;
    dlock__deploy_kind kind = schemes[which].kind;
    int sentinel = kind == DLOCK__DEPLOY_SENTINEL, tls = schemes[which].tls;
    int cluster = kind == DLOCK__DEPLOY_CLUSTER;
    const char *body = url + strlen(scheme);
    if (strstr(body, "://"))
        return dlock__fail(DLOCK_EINVAL,
                           "invalid URL: one URL names one deployment; a second scheme inside "
                           "a %s URL mixes schemes",
                           scheme);
    size_t alen = strcspn(body, "/#?");
    const char *rest = body + alen;
    /* The userinfo ends at the last '@' of the authority. */
    const char *hosts = body;
    for (const char *p = body; p < body + alen; p++)
        if (*p == '@')
            hosts = p + 1;
    size_t ulen = hosts > body ? (size_t)(hosts - body) : 0;   /* with its '@' */
    size_t hlen = (size_t)(body + alen - hosts);
    if (hlen == 0)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: %s needs at least one host", scheme);

    /* Credentials and database: "user:pass@firsthost/db" read as one server. */
    const char *db = "";
    size_t dblen = 0;
    const char *master = NULL, *query = "";
    size_t mlen = 0, qlen = 0;
    if (rest[0] == '/') {
        dblen = strcspn(rest, "#?");
        db = rest;
        rest += dblen;
    }
    if (rest[0] == '?') {   /* map= below; the TLS parameters read with the data nodes' URL */
        qlen = strcspn(rest, "#");
        query = rest;
        rest += qlen;
    }
    if (rest[0] == '#') {
        master = rest + 1;
        mlen = strlen(master);
    }
    if (cluster && (dblen > 1 || (dblen == 1 && db[0] != '/')))
        return dlock__fail(DLOCK_EINVAL,
                           "invalid URL: a Redis Cluster has database 0 only (no /db)");
    if (!sentinel && master)
        return dlock__fail(DLOCK_EINVAL,
                           "invalid URL: '#' names a sentinel master; %s takes none",
                           scheme);
    if (sentinel && (!master || mlen == 0))
        return dlock__fail(DLOCK_EINVAL,
                           "invalid URL: redis-sentinel:// needs the master name "
                           "(redis-sentinel://host:26379#mymaster)");
    if (sentinel && mlen > MAX_MASTER_LEN)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: the master name is longer than %d bytes",
                           MAX_MASTER_LEN);
    for (size_t i = 0; i < mlen; i++)
        if ((unsigned char)master[i] <= ' ' || master[i] == 0x7f)
            return dlock__fail(DLOCK_EINVAL,
                               "invalid URL: the master name contains a space or control "
                               "character");

    dlock__deploy nd;
    memset(&nd, 0, sizeof(nd));
    nd.kind = kind;
    dlock__endpoint nep;
    memset(&nep, 0, sizeof(nep));
    char *tlsq = NULL;   /* the query less its map= parameters */
    int rc = split_query(query, qlen, scheme, tls, &nd, &tlsq);
    if (rc == DLOCK_OK) {
        query = tlsq;
        qlen = strlen(tlsq);
    }
    const char *h = hosts;
    while (rc == DLOCK_OK && h <= hosts + hlen) {
        size_t n = strcspn(h, ",/#?");
        if (h + n > hosts + hlen)
            n = (size_t)(hosts + hlen - h);
        if (n == 0) {
            rc = dlock__fail(DLOCK_EINVAL, "invalid URL: an empty host in the list");
            break;
        }
        if (nd.nseeds == MAX_SEEDS) {
            rc = dlock__fail(DLOCK_EINVAL, "invalid URL: more than %d hosts", MAX_SEEDS);
            break;
        }
        dlock__endpoint *a = realloc(nd.seeds, (nd.nseeds + 1) * sizeof(*a));
        if (!a) {
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
            break;
        }
        nd.seeds = a;
        rc = parse_as_redis(h, n, tls, &nd.seeds[nd.nseeds], NULL);
        if (rc != DLOCK_OK)
            break;
        dlock__endpoint *s = &nd.seeds[nd.nseeds++];
        if (sentinel && !has_port(h, n))
            s->port = SENTINEL_PORT;
        h += n + 1;
    }
    if (rc == DLOCK_OK) {
        /* The data nodes' endpoint: the credentials, the database, the first
         * seed's address (for messages until the topology is known), the TLS
         * parameters. */
        size_t fl = strcspn(hosts, ",/#?");
        if (fl > hlen)
            fl = hlen;
        size_t tl = ulen + fl + dblen + qlen;
        char *t = malloc(tl + 1);
        if (!t) {
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
        } else {
            memcpy(t, body, ulen);
            memcpy(t + ulen, hosts, fl);
            memcpy(t + ulen + fl, db, dblen);
            memcpy(t + ulen + fl + dblen, query, qlen);
            t[tl] = '\0';
            rc = parse_as_redis(t, tl, tls, &nep, opts);
            dlock__free_secret(t);
        }
    }
    free(tlsq);
    if (rc == DLOCK_OK && sentinel && !(nd.master = dlock__strndup(master, mlen)))
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory parsing the URL");
    if (rc != DLOCK_OK) {
        dlock__deploy_clear(&nd);
        dlock__endpoint_clear(&nep);
        return rc;
    }
    /* The sentinels' credentials are the config's, not the URL's. */
    nd.sentinel_user = d->sentinel_user;
    nd.sentinel_pass = d->sentinel_pass;
    d->sentinel_user = d->sentinel_pass = NULL;
    dlock__deploy_clear(d);
    *d = nd;
    dlock__endpoint_clear(ep);
    *ep = nep;
    return DLOCK_OK;
}

int dlock__is_deploy_url(const char *url) { return scheme_of(url) >= 0; }

int dlock__add_maps(dlock__deploy *d, const char *entries)
{
    if (!entries)
        return dlock__fail(DLOCK_EINVAL, "the address map is NULL");
    size_t before = d->nmaps;
    int rc = parse_maps(entries, strlen(entries), 0, d);
    while (rc != DLOCK_OK && d->nmaps > before) {   /* all of entries or nothing */
        d->nmaps--;
        free(d->maps[d->nmaps].from);
        free(d->maps[d->nmaps].to);
    }
    return rc;
}

/* Back to one server: seeds and master name dropped, sentinel credentials kept. */
static void deploy_single(dlock__deploy *d)
{
    for (size_t i = 0; i < d->nseeds; i++)
        dlock__endpoint_clear(&d->seeds[i]);
    free(d->seeds);
    free(d->master);
    maps_clear(d);
    d->seeds = NULL;
    d->nseeds = 0;
    d->master = NULL;
    d->kind = DLOCK__DEPLOY_SINGLE;
}

int dlock__parse_deploy_url(const char *url, dlock__endpoint *ep, dlock__deploy *d,
                            dlock__tls_opts *opts)
{
    if (url && strlen(url) > 4096)
        return dlock__fail(DLOCK_EINVAL, "invalid URL: longer than 4096 bytes");
    int which = scheme_of(url);
    if (which >= 0)
        return parse_list(url, which, ep, d, opts);
    int rc = dlock__parse_url_tls(url, ep, opts);
    if (rc == DLOCK_OK)
        deploy_single(d);
    return rc;
}
