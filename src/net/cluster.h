/* Redis Cluster pieces of the net layer, apart from net.h:
 *
 *   slot.c     CRC16 key slots with hash tags, and the slot map read from
 *              CLUSTER SLOTS (pure functions: no I/O, fuzzable)
 *   cluster.c  the cluster router: a node (connection pool) per primary,
 *              requests routed by their keys' slot, MOVED / ASK followed,
 *              TRYAGAIN / CLUSTERDOWN retried, the map refreshed
 * Not installed. */
#ifndef DLOCK_NET_CLUSTER_H
#define DLOCK_NET_CLUSTER_H

#include "net/net.h"

#define DLOCK__SLOTS 16384
#define DLOCK__NO_NODE 0xFFFFu

/* CRC16-CCITT (XMODEM), as Redis Cluster computes it. */
uint16_t dlock__crc16(const char *buf, size_t len);
/* The slot of a key: CRC16 of the hash tag (the bytes between the first '{'
 * and the next '}', when that is not empty), else of the whole key, mod 16384. */
int dlock__key_slot(const char *key, size_t len);

/* Who serves each slot: an index into a table of primaries' addresses. */
typedef struct dlock__slot_addr {
    char host[256];
    int port;
} dlock__slot_addr;

typedef struct dlock__slotmap {
    uint16_t owner[DLOCK__SLOTS];   /* index into addr, or DLOCK__NO_NODE */
    dlock__slot_addr *addr;
    size_t naddr;
    size_t covered;                 /* slots with an owner */
} dlock__slotmap;

/* Reads a CLUSTER SLOTS answer into m (zeroed first, freed with
 * dlock__slotmap_clear). A primary whose host is empty or "?" (unknown to
 * the node asked) gets `asked_host`. DLOCK_OK, DLOCK_EPROTO for an answer of
 * the wrong shape (message set), DLOCK_ENOMEM. */
int dlock__slotmap_parse(const redisReply *r, const char *asked_host, dlock__slotmap *m);
void dlock__slotmap_clear(dlock__slotmap *m);

/* -------------------------------------------------------------- router */

typedef struct dlock__cluster dlock__cluster;

/* Seeds: the nodes named by the URL; `auth` gives the credentials every node
 * gets (user, password; database 0). Reads the slot map from the first seed
 * that answers: DLOCK_ECONN when none does (message names each seed's
 * failure), DLOCK_EREDIS when the servers are not a cluster, DLOCK_ECONN
 * when slots are uncovered (message says how many). */
int dlock__cluster_new(dlock__cluster **out, dlock__netctx *ctx, const dlock__endpoint *seeds,
                       size_t nseeds, const dlock__endpoint *auth);
void dlock__cluster_free(dlock__cluster *cl);
/* The node serving `key` (any node when key is NULL), from the map as it is:
 * no I/O, so the io thread may ask. Never NULL. */
dlock__node *dlock__cluster_node(dlock__cluster *cl, const char *key, size_t len);
/* The primaries that serve at least one slot, from the map as it is (no
 * I/O): up to max into out; returns how many there are (may exceed max).
 * The nodes live as long as the cluster. */
size_t dlock__cluster_primaries(dlock__cluster *cl, dlock__node **out, size_t max);
/* Runs req on the node serving its keys (every key must share one slot:
 * else DLOCK_EINVAL); follows MOVED and ASK, retries TRYAGAIN, CLUSTERDOWN
 * and READONLY within the command timeout, refreshes the map after MOVED. */
int dlock__cluster_call(dlock__cluster *cl, const dlock__req *req, dlock__res *res);
/* 1 when the nodes have sharded pub/sub (SSUBSCRIBE / SPUBLISH, Redis 7). */
int dlock__cluster_sharded(const dlock__cluster *cl);
/* Bumped whenever the map changes. */
uint64_t dlock__cluster_generation(dlock__cluster *cl);
/* Asks the refresher thread to read the map soon; never blocks (io thread). */
void dlock__cluster_stale(dlock__cluster *cl);

#endif
