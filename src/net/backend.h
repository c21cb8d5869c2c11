/* The deployments behind the router (router.c): one interface, which each
 * kind of deployment implements. Not installed. */
#ifndef DLOCK_NET_BACKEND_H
#define DLOCK_NET_BACKEND_H

#include "net/net.h"

typedef struct dlock__backend dlock__backend;

/* What a deployment does; the router asks nothing else. Hooks marked
 * optional may be NULL. */
typedef struct dlock__backend_ops {
    /* A Redis Cluster (keys routed by slot): its new() proved it by reading
     * CLUSTER SLOTS, so the router's check asks nothing more. */
    int cluster;
    /* It finds its primary (or map) again by itself: the nodes it serves
     * from may change without a READONLY answer. */
    int dynamic;
    void (*free)(dlock__backend *b);
    /* The node serving `key` (any node when key is NULL) from what it knows:
     * no I/O, so the io thread may ask; never NULL. */
    dlock__node *(*node)(dlock__backend *b, const char *key, size_t len);
    /* Runs req where it belongs, following the deployment's rules (below). */
    int (*call)(dlock__backend *b, const dlock__req *req, dlock__res *res);
    /* Optional: asks it to look again soon (never blocks; io thread). */
    void (*stale)(dlock__backend *b);
    /* Optional: a node answered READONLY (seen: the node, or NULL); NULL:
     * stale. Any thread, never blocks. */
    void (*demoted)(dlock__backend *b, const dlock__node *seen);
    /* Optional: the primaries that serve (no I/O), up to max into out; how
     * many there are. NULL: the one node. */
    size_t (*primaries)(dlock__backend *b, dlock__node **out, size_t max);
    /* Optional: 1 when pub/sub is sharded (SSUBSCRIBE / SPUBLISH, Redis 7
     * cluster). NULL: 0. */
    int (*sharded)(const dlock__backend *b);
} dlock__backend_ops;

/* The first member of every deployment's own struct, so that its hooks get
 * their struct back by a cast. */
struct dlock__backend {
    const dlock__backend_ops *ops;
    _Atomic uint64_t generation;   /* bumped at every change of the node(s) it serves
                                      from (its new() leaves it 0) */
};

/* The background thread of a deployment that finds its nodes by itself
 * (refresher.c), the one idiom of cluster.c, sentinel.c and replicated.c: fn
 * runs a round of its work, `poked` when dlock__refresher_poke asked for it,
 * and returns the ms from that round's start until the next is due (0: at
 * once, for a round that waits by itself, a slice at a time). The first
 * round comes first_ms after the start. Between rounds the thread waits on
 * a condition variable: a poke or the stop is seen at once (during a round,
 * when it returns). */
typedef struct dlock__refresher dlock__refresher;
typedef int64_t (*dlock__refresh_fn)(void *ud, int poked);
/* Starts the thread ("what" names it in the message of a failure). */
int dlock__refresher_start(dlock__refresher **out, int64_t first_ms, dlock__refresh_fn fn,
                           void *ud, const char *what);
/* A round soon, whatever is due (a stale hook: any thread, never waits for
 * a round). NULL: nothing. */
void dlock__refresher_poke(dlock__refresher *r);
/* Stops the thread (after its round in progress), joins it and frees r.
 * NULL: nothing. */
void dlock__refresher_stop(dlock__refresher *r);

/* One address (single.c): a READONLY answer (the server behind the address
 * is a replica now) drops the connections to it, and the request goes again
 * on new ones (the name resolved again) after the retry delay, within the
 * retry budget. */
int dlock__single_new(dlock__backend **out, dlock__netctx *ctx, const dlock__endpoint *ep);

/* A sentinel-managed primary (sentinel.c). Asks the sentinels (host and
 * port each; `suser`/`spass` their credentials, may be NULL) for master
 * `name`; the primary gets `data`'s credentials and database. DLOCK_ECONN
 * when no sentinel answers (each failure named), DLOCK_EINVAL when the
 * sentinels that answer do not know the name. Starts a thread that follows
 * +switch-master and checks every CHECK_EVERY_MS. A call refused because the
 * node is no longer the primary (READONLY, a connection that failed before
 * the request could run) asks the sentinels again and resends to the new
 * primary within the command timeout. */
int dlock__sentinel_new(dlock__backend **out, dlock__netctx *ctx,
                        const dlock__endpoint *sentinels, size_t n, const char *name,
                        const char *suser, const char *spass, const dlock__endpoint *data);

/* A primary and replicas found by ROLE (replicated.c). Asks every node (host
 * and port each) its ROLE until exactly one is the primary, up to the
 * connect timeout: DLOCK_ECONN then, naming the roles seen ("no node is a
 * primary" or "more than one node is a primary"). The nodes get `data`'s
 * credentials and database. Starts the scanner thread (every scan interval,
 * and soon after stale). Its node is the last primary seen, or, while more
 * than one node is a primary, a node no connection reaches (so that
 * renewals, asynchronous calls and subscriptions refuse too). A call:
 * READONLY or an unreachable primary, the roles are read again and the
 * request goes to the new primary at once, or again after the retry delay
 * within the retry budget; while there is not exactly one primary, requests
 * wait for one within the budget, then fail with DLOCK_ECONN naming the
 * roles seen; nothing is written meanwhile. */
int dlock__replicated_new(dlock__backend **out, dlock__netctx *ctx,
                          const dlock__endpoint *nodes, size_t n, const dlock__endpoint *data);

/* A Redis Cluster (cluster.c; its slot map: cluster.h). Seeds: the nodes
 * named by the URL; `auth` gives the credentials every node gets (user,
 * password; database 0). Reads the slot map from the first seed that
 * answers: DLOCK_ECONN when none does (message names each seed's failure),
 * DLOCK_EREDIS when the servers are not a cluster, DLOCK_ECONN when slots
 * are uncovered (message says how many). A call runs on the node serving its
 * keys (every key must share one slot: else DLOCK_EINVAL); follows MOVED and
 * ASK, retries TRYAGAIN, CLUSTERDOWN and READONLY within the command timeout,
 * refreshes the map after MOVED. The primaries live as long as the cluster. */
int dlock__cluster_new(dlock__backend **out, dlock__netctx *ctx, const dlock__endpoint *seeds,
                       size_t nseeds, const dlock__endpoint *auth);

#endif
