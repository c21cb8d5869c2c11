/* A primary managed by Redis Sentinel (docs/internals/deployments.md).
 *
 * Discovery. SENTINEL GET-MASTER-ADDR-BY-NAME on each sentinel in turn; the
 * first answer wins. The sentinels get their own credentials (config), the
 * data nodes the URL's.
 *
 * Following a failover. A watcher thread keeps a connection subscribed to a
 * sentinel's +switch-master channel (a switch is followed as soon as it is
 * announced), and asks a sentinel every CHECK_EVERY_MS as well (a
 * subscription lost during the switch does not leave the client on the old
 * primary). A caller whose request was refused because the node it reached is
 * no longer the primary (READONLY), or could not reach it, asks the
 * sentinels itself and resends.
 *
 * Nodes. One dlock__node per primary ever seen, kept until the router goes:
 * callers may hold the pointers (the watchdog, pub/sub), and see the switch
 * through primary() and the generation. */
#include <stdlib.h>
#include <string.h>

#include "net/backend.h"

#define CHECK_EVERY_MS 1000
#define MAX_NODES 64
#define MAX_SENTINELS 32
#define LEARN_EVERY_MS 30000   /* SENTINEL SENTINELS at least this often */

typedef struct dlock__sentinel dlock__sentinel;

struct dlock__sentinel {
    dlock__backend base;             /* first: the router's handle */
    dlock__netctx *ctx;
    char *name;
    dlock__endpoint data;            /* credentials and database of the data nodes */
    /* Request/response connections to each sentinel: the URL's, then those
     * learnt from SENTINEL SENTINELS (appended under ask_mu; an entry is
     * written before the count that publishes it). */
    dlock__node *sentinels[MAX_SENTINELS];
    _Atomic size_t nsentinels;
    int64_t learned_at;              /* last SENTINEL SENTINELS (-1: never) */

    pthread_rwlock_t mu;             /* nodes, nnodes, primary */
    dlock__node *nodes[MAX_NODES];
    size_t nnodes;
    dlock__node *primary;

    pthread_mutex_t ask_mu;          /* one discovery at a time */
    /* The watcher thread (refresher.c), poked when a caller saw the primary
     * refuse or vanish; its own: */
    dlock__refresher *bg;
    dlock__conn *sub;                /* subscribed to +switch-master, or NULL */
    size_t next;                     /* the sentinel to subscribe to next */
    int64_t checked;                 /* when a sentinel was last asked */
};

/* The node for host:port, created when new. Caller holds the write lock. */
static dlock__node *node_at(dlock__sentinel *s, const char *announced, int aport)
{
    char host[DLOCK_HOST_MAX];
    int port;
    dlock__map_address(s->ctx->cfg, announced, aport, host, &port);
    for (size_t i = 0; i < s->nnodes; i++) {
        const dlock__endpoint *ep = dlock__node_endpoint(s->nodes[i]);
        if (ep->port == port && ep->host && strcmp(ep->host, host) == 0)
            return s->nodes[i];
    }
    if (s->nnodes == MAX_NODES) {
        dlock__fail(DLOCK_ENOMEM, "more than %d primaries seen", MAX_NODES);
        return NULL;
    }
    dlock__endpoint ep = s->data;   /* borrowed strings; node_new copies */
    ep.host = host;
    ep.port = port;
    ep.path = NULL;
    if (dlock__node_new(&s->nodes[s->nnodes], s->ctx, &ep) != DLOCK_OK)
        return NULL;
    return s->nodes[s->nnodes++];
}

/* Makes host:port the primary. */
static int set_primary(dlock__sentinel *s, const char *host, int port)
{
    pthread_rwlock_wrlock(&s->mu);
    dlock__node *old = s->primary;
    dlock__node *n = node_at(s, host, port);
    if (n && n != old) {
        s->primary = n;
        atomic_fetch_add(&s->base.generation, 1);
    }
    pthread_rwlock_unlock(&s->mu);
    if (!n)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (old && n && n != old) {
        dlock__log(s->ctx->cfg, DLOCK_LOG_WARN, "sentinel: master '%s' moved from %s to %s",
                   s->name, dlock__node_addr(old), dlock__node_addr(n));
        dlock__node_promoted(n);
    }
    return DLOCK_OK;
}

/* A sentinel's entry in SENTINEL SENTINELS: a flat array of names and
 * values (RESP2); the value of `key`, or NULL. */
static const char *field(const redisReply *e, const char *key)
{
    if (e->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t k = 0; k + 1 < e->elements; k += 2)
        if (e->element[k]->type == REDIS_REPLY_STRING && strcmp(e->element[k]->str, key) == 0 &&
            e->element[k + 1]->type == REDIS_REPLY_STRING)
            return e->element[k + 1]->str;
    return NULL;
}

/* Adds the sentinels that sentinel i knows for the master (SENTINEL
 * SENTINELS), through the address map. Caller holds ask_mu. */
static void learn_sentinels(dlock__sentinel *s, size_t i)
{
    s->learned_at = dlock__now_ms();
    const char *av[] = {"SENTINEL", "SENTINELS", s->name};
    dlock__req req = {.script = -1, .argc = 3, .argv = av,
                      .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
    dlock__res res;
    if (dlock__node_call(s->sentinels[i], &req, &res) != DLOCK_OK)
        return;
    redisReply *r = res.r;
    for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        const char *ip = field(r->element[k], "ip"), *port = field(r->element[k], "port");
        int p = port ? atoi(port) : 0;
        size_t n = atomic_load(&s->nsentinels);
        if (!ip || p <= 0 || p > 65535 || n == MAX_SENTINELS)
            continue;
        char host[DLOCK_HOST_MAX];
        int mp;
        dlock__map_address(s->ctx->cfg, ip, p, host, &mp);
        int known = 0;
        for (size_t j = 0; j < n && !known; j++) {
            const dlock__endpoint *ep = dlock__node_endpoint(s->sentinels[j]);
            known = ep->port == mp && ep->host && strcmp(ep->host, host) == 0;
        }
        if (known)
            continue;
        dlock__endpoint ep = *dlock__node_endpoint(s->sentinels[0]);   /* borrowed */
        ep.host = host;
        ep.port = mp;
        if (dlock__node_new(&s->sentinels[n], s->ctx, &ep) != DLOCK_OK)
            break;
        atomic_store(&s->nsentinels, n + 1);
        dlock__log(s->ctx->cfg, DLOCK_LOG_INFO, "sentinel: learnt sentinel %s for '%s' from %s",
                   dlock__node_addr(s->sentinels[n]), s->name,
                   dlock__node_addr(s->sentinels[i]));
    }
    freeReplyObject(r);
}

/* Asks the sentinels where the primary is; sets it. */
static int discover(dlock__sentinel *s)
{
    char why[768] = "";
    size_t off = 0;
    int unknown = 0, answered = 0;
    pthread_mutex_lock(&s->ask_mu);
    for (size_t i = 0; i < atomic_load(&s->nsentinels); i++) {
        const char *av[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", s->name};
        dlock__req req = {.script = -1, .argc = 3, .argv = av,
                          .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
        dlock__res res;
        char one[DLOCK__MSG_MAX] = "";   /* why this sentinel did not tell */
        dlock__errto prev = dlock__err_into(one, sizeof(one));
        int rc = dlock__node_call(s->sentinels[i], &req, &res);
        dlock__err_reset(prev);
        redisReply *r = res.r;
        if (rc == DLOCK_OK) {
            answered++;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                r->element[0]->type == REDIS_REPLY_STRING &&
                r->element[1]->type == REDIS_REPLY_STRING) {
                int port = atoi(r->element[1]->str);
                char host[256];
                snprintf(host, sizeof(host), "%s", r->element[0]->str);
                freeReplyObject(r);
                if (port > 0 && port <= 65535) {
                    rc = set_primary(s, host, port);
                    /* The other sentinels, for when those known are down:
                     * learnt at the first answer, after a sentinel failed to
                     * answer, and every LEARN_EVERY_MS. */
                    if (rc == DLOCK_OK && (s->learned_at < 0 || i > 0 ||
                                           dlock__now_ms() - s->learned_at >= LEARN_EVERY_MS))
                        learn_sentinels(s, i);
                    pthread_mutex_unlock(&s->ask_mu);
                    return rc;
                }
                snprintf(one, sizeof(one), "%s: a bad port for master '%s'",
                         dlock__node_addr(s->sentinels[i]), s->name);
            } else {
                freeReplyObject(r);
                unknown++;
                snprintf(one, sizeof(one), "%s does not know master '%s'",
                         dlock__node_addr(s->sentinels[i]), s->name);
            }
        }
        if (off < sizeof(why))
            off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s", off ? "; " : "", one);
    }
    pthread_mutex_unlock(&s->ask_mu);
    if (answered && unknown == answered)
        return dlock__fail(DLOCK_EINVAL, "no sentinel knows master '%s' (check the name after "
                                         "'#'): %s", s->name, why);
    return dlock__fail(DLOCK_ECONN, "no sentinel told where master '%s' is: %s", s->name, why);
}

/* ------------------------------------------------------------- watcher */

/* "+switch-master <name> <old ip> <old port> <new ip> <new port>" */
static void on_switch(dlock__sentinel *s, const char *msg, size_t len)
{
    char buf[600], name[256], oip[256], nip[256];
    int oport, nport;
    if (len >= sizeof(buf))
        return;
    memcpy(buf, msg, len);
    buf[len] = '\0';
    if (sscanf(buf, "%255s %255s %d %255s %d", name, oip, &oport, nip, &nport) != 5 ||
        strcmp(name, s->name) != 0 || nport <= 0 || nport > 65535)
        return;
    set_primary(s, nip, nport);
}

/* A connection to one sentinel, subscribed to +switch-master, or NULL. */
static dlock__conn *subscribe(dlock__sentinel *s, size_t i)
{
    dlock__conn *c;
    uint64_t gen;
    const dlock__endpoint *ep = dlock__node_endpoint(s->sentinels[i]);
    if (dlock__conn_open(s->ctx, ep, dlock__node_addr(s->sentinels[i]), &c, &gen) != DLOCK_OK)
        return NULL;
    const char *av[] = {"SUBSCRIBE", "+switch-master"};
    redisReply *r = NULL;
    int timed_out = 0;
    int ok = dlock__conn_roundtrip(c, 2, av, NULL, 0, &r, &timed_out) == DLOCK__SENT_OK &&
             r->type == REDIS_REPLY_ARRAY;
    if (r)
        freeReplyObject(r);
    if (!ok) {
        dlock__conn_abort(c);
        return NULL;
    }
    return c;
}

/* A round of the watcher: subscribe when not subscribed, ask a sentinel
 * when CHECK_EVERY_MS passed or a caller asked (poked), and wait for a
 * message for WATCH_SLICE_MS: a round a slice, so that a stop or a request
 * to check is seen that soon. */
#define WATCH_SLICE_MS 100

static int64_t watcher(void *arg, int poked)
{
    dlock__sentinel *s = arg;
    if (!s->sub) {
        s->sub = subscribe(s, s->next);
        s->next = (s->next + 1) % atomic_load(&s->nsentinels);
    }
    int64_t now = dlock__now_ms();
    if (now - s->checked >= CHECK_EVERY_MS || poked) {
        s->checked = now;
        char why[DLOCK__MSG_MAX];
        dlock__errto prev = dlock__err_into(why, sizeof(why));
        int rc = discover(s);
        dlock__err_reset(prev);
        if (rc != DLOCK_OK)
            dlock__log(s->ctx->cfg, DLOCK_LOG_WARN, "sentinel: %s", why);
    }
    if (!s->sub)
        return WATCH_SLICE_MS;   /* then subscribe again */
    redisReply *m = NULL;
    int rc = dlock__conn_wait_reply(s->sub, WATCH_SLICE_MS, &m);
    if (rc == DLOCK_ETIMEDOUT)
        return 0;
    if (rc != DLOCK_OK) {
        dlock__conn_abort(s->sub);
        s->sub = NULL;
        return 0;
    }
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
        m->element[0]->type == REDIS_REPLY_STRING && strcmp(m->element[0]->str, "message") == 0 &&
        m->element[2]->type == REDIS_REPLY_STRING)
        on_switch(s, m->element[2]->str, m->element[2]->len);
    freeReplyObject(m);
    return 0;
}

static void sen_stale(dlock__backend *b) { dlock__refresher_poke(((dlock__sentinel *)b)->bg); }

/* ------------------------------------------------------------ lifecycle */

static const dlock__backend_ops sentinel_ops;
static void sen_free(dlock__backend *b);

int dlock__sentinel_new(dlock__backend **out, dlock__netctx *ctx,
                        const dlock__endpoint *sentinels, size_t n, const char *name,
                        const char *suser, const char *spass, const dlock__endpoint *data)
{
    if (n == 0 || !name)
        return dlock__fail(DLOCK_EINVAL, "a sentinel URL needs sentinels and a master name");
    if (n > MAX_SENTINELS)
        return dlock__fail(DLOCK_EINVAL, "a sentinel URL names more than %d sentinels",
                           MAX_SENTINELS);
    dlock__sentinel *s = calloc(1, sizeof(*s));
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->base.ops = &sentinel_ops;
    s->ctx = ctx;
    pthread_rwlock_init(&s->mu, NULL);
    pthread_mutex_init(&s->ask_mu, NULL);
    int rc = DLOCK_OK;
    s->learned_at = -1;
    atomic_init(&s->nsentinels, 0);
    if (!(s->name = dlock__strndup(name, strlen(name))) ||
        dlock__endpoint_copy(&s->data, data) != DLOCK_OK)
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        dlock__endpoint ep = sentinels[i];   /* borrowed; node_new copies */
        ep.user = (char *)suser;
        ep.pass = (char *)spass;
        ep.db = 0;
        ep.sentinel = 1;
        if ((rc = dlock__node_new(&s->sentinels[i], ctx, &ep)) == DLOCK_OK)
            atomic_store(&s->nsentinels, i + 1);
    }
    if (rc == DLOCK_OK)
        rc = discover(s);
    if (rc == DLOCK_OK) {
        s->checked = dlock__now_ms();
        rc = dlock__refresher_start(&s->bg, 0, watcher, s, "sentinel watcher");
    }
    if (rc != DLOCK_OK) {
        sen_free(&s->base);
        return rc;
    }
    *out = &s->base;
    return DLOCK_OK;
}

static void sen_free(dlock__backend *b)
{
    dlock__sentinel *s = (dlock__sentinel *)b;
    dlock__refresher_stop(s->bg);
    if (s->sub)
        dlock__conn_abort(s->sub);
    for (size_t i = 0; i < atomic_load(&s->nsentinels); i++)
        dlock__node_free(s->sentinels[i]);
    for (size_t i = 0; i < s->nnodes; i++)
        dlock__node_free(s->nodes[i]);
    dlock__endpoint_clear(&s->data);
    free(s->name);
    pthread_rwlock_destroy(&s->mu);
    pthread_mutex_destroy(&s->ask_mu);
    free(s);
}

static dlock__node *primary(dlock__sentinel *s)
{
    pthread_rwlock_rdlock(&s->mu);
    dlock__node *n = s->primary;
    pthread_rwlock_unlock(&s->mu);
    return n;
}

static dlock__node *sen_node(dlock__backend *b, const char *key, size_t len)
{
    (void)key;
    (void)len;
    return primary((dlock__sentinel *)b);
}


/* Each try goes to the primary of the moment, with call.c's retry budget:
 * between tries on a node that cannot be reached or refuses writes, the
 * sentinels are asked, and a new primary gets the request at once. */
static int sen_call(dlock__backend *b, const dlock__req *req, dlock__res *res)
{
    dlock__sentinel *s = (dlock__sentinel *)b;
    const dlock_config *cfg = s->ctx->cfg;
    dlock__req once = *req;
    once.flags |= DLOCK__CALL_NO_RETRY;
    int failures = 0;
    for (;;) {
        dlock__node *n = primary(s);
        int rc = dlock__node_call(n, &once, res);
        if (rc == DLOCK_OK || (req->flags & DLOCK__CALL_NO_RETRY))
            return rc;
        dlock__try t = {.sent = DLOCK__SENT_OK, .err = res->err};
        dlock__verdict v = dlock__call_policy(&t, req->flags, 0, 1, cfg);
        if (res->err != DLOCK__RERR_NONE && v.next == DLOCK__NEXT_RETRY)
            return dlock__node_call(n, req, res);   /* its own retries */
        /* Not run on a node that is no longer the primary (READONLY), or that
         * could not be reached (it may be gone for good): ask the sentinels. */
        if (rc != DLOCK_ECONN && v.next != DLOCK__NEXT_REROUTE)
            return rc;
        dlock__aside aside;   /* the call's failure stays its message */
        dlock__aside_begin(&aside);
        int switched = discover(s) == DLOCK_OK && primary(s) != n;
        dlock__aside_end(&aside, DLOCK_OK);
        if (switched)
            continue;   /* at once */
        if (failures++ >= cfg->retry_attempts)
            return rc;
        /* The pause ends early when the watcher hears of a switch. */
        uint64_t gen = atomic_load(&s->base.generation);
        for (int64_t until = dlock__now_ms() + cfg->retry_delay_ms;
             dlock__now_ms() < until && atomic_load(&s->base.generation) == gen;) {
            int64_t left = until - dlock__now_ms();
            int prc = dlock__cancel_sleep(req->cancel, left < 50 ? left : 50);
            if (prc != DLOCK_OK)
                return prc;
        }
    }
}

static const dlock__backend_ops sentinel_ops = {
    .dynamic = 1,
    .free = sen_free,
    .node = sen_node,
    .call = sen_call,
    .stale = sen_stale,
};
