/* The cluster router: requests go to the primary that serves their keys'
 * slot (docs/internals/deployments.md).
 *
 * Nodes. One dlock__node (a connection pool) per primary ever seen; a node
 * is never freed before the router, so callers may keep the pointers they
 * were given (a multi-lock's batch, the watchdog's groups) across a refresh.
 *
 * The map. slot -> index into nodes, swapped whole under a write lock by a
 * refresh; read under the read lock on every call. A refresh asks CLUSTER
 * SLOTS of the known primaries, then of the seeds, first answer wins. It runs
 * after a MOVED, when a key's slot has no owner, and at most every
 * REFRESH_EVERY_MS on a call (by the first thread to see it due; the others
 * go on with the map they have).
 *
 * Redirections. MOVED: the slot has moved for good; refresh, and send to the
 * node named. ASK: the slot is migrating; send ASKING then the request on one
 * connection of the node named, without changing the map. TRYAGAIN (a
 * multi-key request during a migration) is retried by the node call itself;
 * CLUSTERDOWN (a failover under way) is retried here after a pause, until the
 * command timeout has passed. A redirected request was not run where it was
 * refused, so resending it is safe whatever its kind. */
#include <stdlib.h>
#include <string.h>

#include "net/backend.h"
#include "net/cluster.h"

#define REFRESH_EVERY_MS 5000
#define REFRESH_MIN_GAP_MS 100     /* MOVED storms refresh once */
#define MAX_REDIRECTS 5
#define CLUSTERDOWN_PAUSE_MS 100

typedef struct dlock__cluster dlock__cluster;

struct dlock__cluster {
    dlock__backend base;             /* first: the router's handle */
    dlock__netctx *ctx;
    dlock__endpoint auth;            /* user, password and TLS of every node */
    dlock__endpoint *seeds;
    size_t nseeds;

    pthread_rwlock_t mu;             /* nodes, nnodes, owner */
    dlock__node **nodes;
    size_t nnodes, cap;
    uint16_t owner[DLOCK__SLOTS];

    pthread_mutex_t refresh_mu;      /* one refresh at a time */
    _Atomic int64_t refreshed_at;
    int sharded;                     /* the nodes have SPUBLISH (Redis 7) */

    /* The refresher thread (refresher.c): every REFRESH_EVERY_MS, and when
     * told the map is stale by a thread that must not block (the io thread). */
    dlock__refresher *bg;
};

/* The node at host:port, created when new. Caller holds the write lock. */
static int node_at(dlock__cluster *cl, const char *announced, int aport, size_t *idx)
{
    char host[DLOCK_HOST_MAX];
    int port;
    dlock__map_address(cl->ctx->cfg, announced, aport, host, &port);
    for (size_t i = 0; i < cl->nnodes; i++) {
        const dlock__endpoint *ep = dlock__node_endpoint(cl->nodes[i]);
        if (ep->port == port && ep->host && strcmp(ep->host, host) == 0) {
            *idx = i;
            return DLOCK_OK;
        }
    }
    if (cl->nnodes == cl->cap) {
        size_t cap = cl->cap ? cl->cap * 2 : 8;
        dlock__node **a = realloc(cl->nodes, cap * sizeof(*a));
        if (!a)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        cl->nodes = a;
        cl->cap = cap;
    }
    dlock__endpoint ep = cl->auth;   /* borrowed strings; node_new copies */
    ep.host = host;
    ep.port = port;
    ep.path = NULL;
    ep.db = 0;
    int rc = dlock__node_new(&cl->nodes[cl->nnodes], cl->ctx, &ep);
    if (rc != DLOCK_OK)
        return rc;
    *idx = cl->nnodes++;
    return DLOCK_OK;
}

/* CLUSTER SLOTS of one node, read into m. */
static int ask_slots(dlock__cluster *cl, dlock__node *n, dlock__slotmap *m)
{
    const char *av[] = {"CLUSTER", "SLOTS"};
    dlock__req req = {.script = -1, .argc = 2, .argv = av,
                      .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
    dlock__res res;
    int rc = dlock__node_call(n, &req, &res);
    if (rc != DLOCK_OK)
        return rc;
    const char *host = dlock__node_endpoint(n)->host;
    rc = dlock__slotmap_parse(res.r, host ? host : "127.0.0.1", m);
    freeReplyObject(res.r);
    if (rc == DLOCK_OK && m->naddr == 0) {
        dlock__slotmap_clear(m);
        rc = dlock__fail(DLOCK_ECONN, "%s serves no slots (a cluster that is not set up yet?)",
                         dlock__node_addr(n));
    }
    return rc;
}

/* Installs map m: every primary it names gets a node. */
static int install(dlock__cluster *cl, const dlock__slotmap *m)
{
    size_t *idx = malloc((m->naddr ? m->naddr : 1) * sizeof(*idx));
    if (!idx)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_rwlock_wrlock(&cl->mu);
    int rc = DLOCK_OK;
    for (size_t i = 0; i < m->naddr && rc == DLOCK_OK; i++)
        rc = node_at(cl, m->addr[i].host, m->addr[i].port, &idx[i]);
    int changed = 0;
    /* A node that served no slots and now serves some another node served:
     * a replica promoted by a failover (a resharding moves slots between
     * primaries, which keep theirs). */
    unsigned char *was = rc == DLOCK_OK ? calloc(cl->nnodes, 2) : NULL;
    dlock__node **promoted = was ? calloc(cl->nnodes, sizeof(*promoted)) : NULL;
    size_t npromoted = 0;
    if (was && promoted)
        for (size_t s = 0; s < DLOCK__SLOTS; s++)
            if (cl->owner[s] != DLOCK__NO_NODE)
                was[cl->owner[s]] = 1;
    if (rc == DLOCK_OK)
        for (size_t s = 0; s < DLOCK__SLOTS; s++) {
            uint16_t o = m->owner[s] == DLOCK__NO_NODE ? DLOCK__NO_NODE
                                                       : (uint16_t)idx[m->owner[s]];
            if (promoted && o != DLOCK__NO_NODE && cl->owner[s] != DLOCK__NO_NODE &&
                cl->owner[s] != o && !was[o] && !was[cl->nnodes + o]) {
                was[cl->nnodes + o] = 1;
                promoted[npromoted++] = cl->nodes[o];
            }
            changed |= cl->owner[s] != o;
            cl->owner[s] = o;
        }
    if (changed)
        atomic_fetch_add(&cl->base.generation, 1);
    pthread_rwlock_unlock(&cl->mu);
    /* Not again when a MOVED to it said so since the last map (cluster_call). */
    const int64_t since = atomic_load(&cl->refreshed_at);
    for (size_t i = 0; i < npromoted; i++)
        if (dlock__node_promoted_at(promoted[i]) <= since)
            dlock__node_promoted(promoted[i]);
    free(promoted);
    free(was);
    free(idx);
    return rc;
}

/* Reads the map again: known primaries first, then the seeds. */
static int refresh_locked(dlock__cluster *cl)
{
    char why[DLOCK__MSG_MAX] = "";
    size_t off = 0;
    int rc = DLOCK_ECONN;
    dlock__slotmap m;
    pthread_rwlock_rdlock(&cl->mu);
    size_t known = cl->nnodes;
    pthread_rwlock_unlock(&cl->mu);
    for (size_t i = 0; i < known + cl->nseeds; i++) {
        dlock__node *n;
        if (i < known) {
            pthread_rwlock_rdlock(&cl->mu);
            n = cl->nodes[i];
            pthread_rwlock_unlock(&cl->mu);
        } else {
            size_t k;
            pthread_rwlock_wrlock(&cl->mu);
            rc = node_at(cl, cl->seeds[i - known].host, cl->seeds[i - known].port, &k);
            n = rc == DLOCK_OK ? cl->nodes[k] : NULL;
            pthread_rwlock_unlock(&cl->mu);
            if (!n)
                return rc;
        }
        char one[DLOCK__MSG_MAX] = "";   /* why this node did not tell */
        dlock__errto prev = dlock__err_into(one, sizeof(one));
        rc = ask_slots(cl, n, &m);
        dlock__err_reset(prev);
        if (rc == DLOCK_OK) {
            rc = install(cl, &m);
            size_t covered = m.covered;
            dlock__slotmap_clear(&m);
            atomic_store(&cl->refreshed_at, dlock__now_ms());
            if (rc == DLOCK_OK && covered < DLOCK__SLOTS)
                dlock__log(cl->ctx->cfg, DLOCK_LOG_WARN,
                           "cluster: %zu of %d slots have no primary", DLOCK__SLOTS - covered,
                           DLOCK__SLOTS);
            return rc;
        }
        if (rc == DLOCK_ENOMEM)
            return dlock__fail(rc, "out of memory");
        if (off < sizeof(why))
            off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s", off ? "; " : "", one);
    }
    return dlock__fail(rc == DLOCK_EREDIS ? DLOCK_EREDIS : DLOCK_ECONN,
                       "no cluster node answered CLUSTER SLOTS: %s", why);
}

/* Reads the slot map again now (any thread); DLOCK_OK or the last failure. */
static int refresh(dlock__cluster *cl)
{
    pthread_mutex_lock(&cl->refresh_mu);
    int rc = refresh_locked(cl);
    pthread_mutex_unlock(&cl->refresh_mu);
    return rc;
}

/* A refresh unless one ran less than min_gap ms ago; wait: block until it
 * can run (else skip when another thread is refreshing). */
static void refresh_if(dlock__cluster *cl, int64_t min_gap, int wait)
{
    if (dlock__now_ms() - atomic_load(&cl->refreshed_at) < min_gap)
        return;
    if (wait)
        pthread_mutex_lock(&cl->refresh_mu);
    else if (pthread_mutex_trylock(&cl->refresh_mu) != 0)
        return;
    if (dlock__now_ms() - atomic_load(&cl->refreshed_at) >= min_gap) {
        char why[DLOCK__MSG_MAX];
        dlock__errto prev = dlock__err_into(why, sizeof(why));
        int rc = refresh_locked(cl);
        dlock__err_reset(prev);
        if (rc != DLOCK_OK)
            dlock__log(cl->ctx->cfg, DLOCK_LOG_WARN, "cluster: slot map refresh failed: %s",
                       why);
    }
    pthread_mutex_unlock(&cl->refresh_mu);
}

static dlock__node *owner_of(dlock__cluster *cl, int slot, int any);

/* A round of the refresher thread: a poke (the map is stale) reads the map
 * unless it was read in the last REFRESH_MIN_GAP_MS, the period's round
 * unless in the last half period. */
static int64_t refresher(void *arg, int stale)
{
    refresh_if(arg, stale ? REFRESH_MIN_GAP_MS : REFRESH_EVERY_MS / 2, 1);
    return REFRESH_EVERY_MS;
}

static void cl_stale(dlock__backend *b) { dlock__refresher_poke(((dlock__cluster *)b)->bg); }

/* Sharded pub/sub (SSUBSCRIBE, SPUBLISH) came with Redis 7: a node that
 * knows SPUBLISH has it. */
static int has_sharded_pubsub(dlock__cluster *cl)
{
    const char *av[] = {"COMMAND", "INFO", "SPUBLISH"};
    dlock__req req = {.script = -1, .argc = 3, .argv = av, .flags = DLOCK__CALL_IDEMPOTENT};
    dlock__res res;
    dlock__node *n = owner_of(cl, -1, 1);
    if (!n || dlock__node_call(n, &req, &res) != DLOCK_OK)
        return 0;
    const redisReply *r = res.r;
    int yes = r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
              r->element[0]->type == REDIS_REPLY_ARRAY;
    freeReplyObject(res.r);
    return yes;
}

static int cl_sharded(const dlock__backend *b) { return ((const dlock__cluster *)b)->sharded; }

static const dlock__backend_ops cluster_ops;
static void cl_free(dlock__backend *b);

int dlock__cluster_new(dlock__backend **out, dlock__netctx *ctx, const dlock__endpoint *seeds,
                       size_t nseeds, const dlock__endpoint *auth)
{
    if (nseeds == 0)
        return dlock__fail(DLOCK_EINVAL, "a cluster URL needs at least one seed node");
    dlock__cluster *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    cl->base.ops = &cluster_ops;
    cl->ctx = ctx;
    pthread_rwlock_init(&cl->mu, NULL);
    pthread_mutex_init(&cl->refresh_mu, NULL);
    for (size_t s = 0; s < DLOCK__SLOTS; s++)
        cl->owner[s] = DLOCK__NO_NODE;
    int rc = DLOCK_OK;
    cl->auth.tls = auth->tls;   /* rediss-cluster://: every node over TLS */
    if (dlock__dup_opt(&cl->auth.user, auth->user) || dlock__dup_opt(&cl->auth.pass, auth->pass) ||
        !(cl->seeds = calloc(nseeds, sizeof(*cl->seeds))))
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == DLOCK_OK && i < nseeds; i++, cl->nseeds++)
        if (dlock__endpoint_copy(&cl->seeds[i], &seeds[i]) != DLOCK_OK)
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc == DLOCK_OK)
        rc = refresh(cl);
    if (rc == DLOCK_OK) {
        size_t uncovered = 0;
        for (size_t s = 0; s < DLOCK__SLOTS; s++)
            uncovered += cl->owner[s] == DLOCK__NO_NODE;
        if (uncovered)
            rc = dlock__fail(DLOCK_ECONN,
                             "the cluster does not cover every slot: %zu of %d slots have no "
                             "primary (CLUSTER SLOTS); keys there cannot be locked",
                             uncovered, DLOCK__SLOTS);
    }
    if (rc == DLOCK_OK)
        cl->sharded = has_sharded_pubsub(cl);
    if (rc == DLOCK_OK)
        rc = dlock__refresher_start(&cl->bg, REFRESH_EVERY_MS, refresher, cl,
                                    "cluster map refresher");
    if (rc != DLOCK_OK) {
        cl_free(&cl->base);
        return rc;
    }
    *out = &cl->base;
    return DLOCK_OK;
}

static void cl_free(dlock__backend *b)
{
    dlock__cluster *cl = (dlock__cluster *)b;
    dlock__refresher_stop(cl->bg);
    for (size_t i = 0; i < cl->nnodes; i++)
        dlock__node_free(cl->nodes[i]);
    free(cl->nodes);
    for (size_t i = 0; i < cl->nseeds; i++)
        dlock__endpoint_clear(&cl->seeds[i]);
    free(cl->seeds);
    dlock__endpoint_clear(&cl->auth);
    pthread_rwlock_destroy(&cl->mu);
    pthread_mutex_destroy(&cl->refresh_mu);
    free(cl);
}

/* The node serving slot (any when slot < 0 or uncovered), or NULL when none. */
static dlock__node *owner_of(dlock__cluster *cl, int slot, int any)
{
    pthread_rwlock_rdlock(&cl->mu);
    dlock__node *n = NULL;
    if (slot >= 0 && cl->owner[slot] != DLOCK__NO_NODE)
        n = cl->nodes[cl->owner[slot]];
    else if (any || slot < 0)
        for (size_t s = 0; s < DLOCK__SLOTS && !n; s += 128)
            if (cl->owner[s] != DLOCK__NO_NODE)
                n = cl->nodes[cl->owner[s]];
    if (!n && (any || slot < 0) && cl->nnodes)
        n = cl->nodes[0];
    pthread_rwlock_unlock(&cl->mu);
    return n;
}

static dlock__node *cl_node(dlock__backend *b, const char *key, size_t len)
{
    return owner_of((dlock__cluster *)b, key ? dlock__key_slot(key, len) : -1, 1);
}

static size_t cl_primaries(dlock__backend *b, dlock__node **out, size_t max)
{
    dlock__cluster *cl = (dlock__cluster *)b;
    pthread_rwlock_rdlock(&cl->mu);
    size_t n = 0;
    for (size_t i = 0; i < cl->nnodes; i++) {
        int serves = 0;
        for (size_t s = 0; s < DLOCK__SLOTS && !serves; s++)
            serves = cl->owner[s] == i;
        if (!serves)
            continue;
        if (n < max)
            out[n] = cl->nodes[i];
        n++;
    }
    pthread_rwlock_unlock(&cl->mu);
    return n;
}

/* Commands without a key: any node answers them. */
static int keyless(const char *cmd, size_t len)
{
    static const char *const names[] = {"PING", "CLIENT", "SCAN", "PUBSUB", "INFO", "SCRIPT",
                                        "CLUSTER", "TIME", "DBSIZE", "WAIT", "ECHO", "HELLO"};
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(names); i++)
        if (strlen(names[i]) == len && strncasecmp(names[i], cmd, len) == 0)
            return 1;
    return 0;
}

static size_t arg_len(const dlock__req *req, int i)
{
    return req->lens ? req->lens[i] : strlen(req->argv[i]);
}

/* The slot of the request's keys (-1: keyless); DLOCK_EINVAL when they span
 * several slots. */
static int req_slot(const dlock__req *req, int *slot)
{
    *slot = -1;
    int first = 0, n = 0;
    if (req->script >= 0) {
        n = req->nkeys;
    } else if (req->argc >= 3 && arg_len(req, 0) == 6 && strncasecmp(req->argv[0], "PUBSUB", 6) == 0 &&
               arg_len(req, 1) == 11 && strncasecmp(req->argv[1], "SHARDNUMSUB", 11) == 0) {
        first = 2;   /* a shard channel: counted on the node that serves its slot */
        n = 1;
    } else if (req->argc >= 2 && !keyless(req->argv[0], arg_len(req, 0))) {
        first = 1;   /* GET key, HEXISTS key field, TYPE key, ... */
        n = 1;
    }
    for (int i = first; i < first + n; i++) {
        int s = dlock__key_slot(req->argv[i], arg_len(req, i));
        if (*slot >= 0 && s != *slot)
            return dlock__fail(DLOCK_EINVAL,
                               "keys '%.*s' and '%.*s' of one request are in different cluster "
                               "slots (%d, %d): every key of one object must share a slot "
                               "(a name with a {hash tag} keeps them together)",
                               (int)arg_len(req, first), req->argv[first],
                               (int)arg_len(req, i), req->argv[i], *slot, s);
        *slot = s;
    }
    return DLOCK_OK;
}

/* ASKING then req on one connection of n. */
static int call_asking(dlock__node *n, const dlock__req *req, dlock__res *res)
{
    static const char *asking[] = {"ASKING"};
    dlock__req two[2] = {{.script = -1, .argc = 1, .argv = asking, .flags = req->flags}, *req};
    dlock__res rep[2];
    int rc[2];
    dlock__node_call_many(n, two, 2, req->flags & DLOCK__CALL_NO_RETRY, req->cancel, rep, rc);
    if (rep[0].r)
        freeReplyObject(rep[0].r);
    *res = rep[1];
    return rc[1];
}

/* After a try on n that could not reach it: pauses (the retry delay, less
 * when the map changes meanwhile: its primary was replaced), reading the
 * map again now and then. DLOCK_OK to try again, or the cancel status. */
static int pause_for_owner(dlock__cluster *cl, const dlock__req *req, int slot, dlock__node *n)
{
    int64_t until = dlock__now_ms() + cl->ctx->cfg->retry_delay_ms;
    while (dlock__now_ms() < until) {
        refresh_if(cl, 250, 0);
        if (owner_of(cl, slot, 1) != n)
            return DLOCK_OK;
        int64_t left = until - dlock__now_ms();
        int prc = dlock__cancel_sleep(req->cancel, left < 50 ? (left > 0 ? left : 0) : 50);
        if (prc != DLOCK_OK)
            return prc;
    }
    return DLOCK_OK;
}

/* Each try goes to the slot's owner of the moment, with call.c's retry
 * budget for a node that cannot be reached (it may have been replaced by its
 * replica meanwhile); redirections follow the node's word. */
static int cl_call(dlock__backend *b, const dlock__req *req, dlock__res *res)
{
    dlock__cluster *cl = (dlock__cluster *)b;
    const dlock_config *cfg = cl->ctx->cfg;
    int slot;
    dlock__res_init(res);
    int rc = req_slot(req, &slot);
    if (rc != DLOCK_OK)
        return rc;
    dlock__node *n = owner_of(cl, slot, 0);
    if (!n) {
        refresh_if(cl, REFRESH_MIN_GAP_MS, 1);
        if (!(n = owner_of(cl, slot, 0)))
            return dlock__fail(DLOCK_ECONN,
                               "no cluster primary serves slot %d (the cluster does not cover "
                               "every slot)",
                               slot);
    }
    int64_t deadline = dlock__now_ms() + cfg->command_timeout_ms;
    int asking = 0, failures = 0;
    dlock__req once = *req;
    once.flags |= DLOCK__CALL_NO_RETRY;
    for (int hops = 0;; hops++) {
        rc = asking ? call_asking(n, &once, res) : dlock__node_call(n, &once, res);
        if (rc == DLOCK_OK)
            return rc;
        if (rc == DLOCK_ECONN && !(req->flags & DLOCK__CALL_NO_RETRY)) {
            /* Not sent (else EUNKNOWN): safe to send again, here or elsewhere. */
            if (failures++ >= cfg->retry_attempts)
                return rc;
            int prc = pause_for_owner(cl, req, slot, n);
            if (prc != DLOCK_OK)
                return prc;
            n = owner_of(cl, slot, 1);
            asking = 0;
            hops--;
            continue;
        }
        if (res->err == DLOCK__RERR_NONE)
            return rc;
        dlock__try t = {.sent = DLOCK__SENT_OK, .err = res->err};
        dlock__verdict v = dlock__call_policy(&t, req->flags, 0, 1, cfg);
        if (v.next == DLOCK__NEXT_RETRY && !asking)
            return dlock__node_call(n, req, res);   /* its own retries */
        if (v.next != DLOCK__NEXT_REROUTE || hops >= MAX_REDIRECTS)
            return rc;
        char host[256];
        int port = 0;
        if (res->err != DLOCK__RERR_MOVED && res->err != DLOCK__RERR_ASK) {
            /* A failover under way (CLUSTERDOWN, or a primary turned replica):
             * wait for it within the command timeout. */
            if (dlock__now_ms() + CLUSTERDOWN_PAUSE_MS > deadline)
                return rc;
            int prc = dlock__cancel_sleep(req->cancel, CLUSTERDOWN_PAUSE_MS);
            if (prc != DLOCK_OK)
                return prc;
            refresh_if(cl, REFRESH_MIN_GAP_MS, 1);
            hops--;   /* not a redirect */
            dlock__node *m = owner_of(cl, slot, 1);
            if (m)
                n = m;
            asking = 0;
            continue;
        }
        if (dlock__redis_redirect_to(res->text, host, sizeof(host), &port) != 0)
            return rc;
        if (res->err == DLOCK__RERR_MOVED)
            refresh_if(cl, REFRESH_MIN_GAP_MS, 1);
        size_t k;
        pthread_rwlock_wrlock(&cl->mu);
        rc = node_at(cl, host, port, &k);
        dlock__node *m = rc == DLOCK_OK ? cl->nodes[k] : NULL;
        /* MOVED to a node that serves no slots in the map (the refresh may
         * have read a node whose view lags): a replica just promoted, as far
         * as this client can tell, so its quarantine starts before the
         * request goes there (a node added by a resharding gets one too). */
        int unknown = m && res->err == DLOCK__RERR_MOVED;
        for (size_t s = 0; unknown && s < DLOCK__SLOTS; s++)
            unknown = cl->owner[s] != (uint16_t)k;
        pthread_rwlock_unlock(&cl->mu);
        if (!m)
            return rc;
        if (unknown && dlock__node_promoted_at(m) <= atomic_load(&cl->refreshed_at))
            dlock__node_promoted(m);   /* once until the map knows it */
        n = m;
        asking = res->err == DLOCK__RERR_ASK;
    }
}


static const dlock__backend_ops cluster_ops = {
    .cluster = 1,
    .dynamic = 1,
    .free = cl_free,
    .node = cl_node,
    .call = cl_call,
    .stale = cl_stale,
    .primaries = cl_primaries,
    .sharded = cl_sharded,
};
