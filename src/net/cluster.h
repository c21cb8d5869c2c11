/* Redis Cluster pieces of the net layer, apart from net.h:
 *
 *   slot.c     CRC16 key slots with hash tags, and the slot map read from
 *              CLUSTER SLOTS (pure functions: no I/O, fuzzable)
 *   cluster.c  the cluster deployment (backend.h): a node (connection pool)
 *              per primary, requests routed by their keys' slot, MOVED / ASK
 *              followed, TRYAGAIN / CLUSTERDOWN retried, the map refreshed
 * Not installed. */
#ifndef DLOCK_NET_CLUSTER_H
#define DLOCK_NET_CLUSTER_H

#include "net/net.h"

#define DLOCK__NO_NODE 0xFFFFu

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

#endif
