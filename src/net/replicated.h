/* A primary and replicas found by ROLE (replicated.c). Not installed. */
#ifndef DLOCK_NET_REPLICATED_H
#define DLOCK_NET_REPLICATED_H

#include "net/net.h"

typedef struct dlock__replicated dlock__replicated;

/* Asks every node (host and port each) its ROLE until exactly one is the
 * primary, up to the connect timeout: DLOCK_ECONN then, naming the roles
 * seen ("no node is a primary" or "more than one node is a primary"). The
 * nodes get `data`'s credentials and database. Starts the scanner thread
 * (every scan interval, and soon after dlock__replicated_stale). */
int dlock__replicated_new(dlock__replicated **out, dlock__netctx *ctx,
                          const dlock__endpoint *nodes, size_t n, const dlock__endpoint *data);
void dlock__replicated_free(dlock__replicated *x);
/* The io thread's node (no I/O; never NULL): the last primary seen, or,
 * while more than one node is a primary, a node no connection reaches (so
 * that renewals, asynchronous calls and subscriptions refuse too). */
dlock__node *dlock__replicated_primary(dlock__replicated *x);
/* Runs req on the primary. READONLY or an unreachable primary: the roles
 * are read again and the request goes to the new primary at once, or again
 * after the retry delay within the retry budget. While there is not exactly
 * one primary, requests wait for one within the budget, then fail with
 * DLOCK_ECONN naming the roles seen; nothing is written meanwhile. */
int dlock__replicated_call(dlock__replicated *x, const dlock__req *req, dlock__res *res);
/* Bumped at every change of primary. */
uint64_t dlock__replicated_generation(dlock__replicated *x);
/* Asks the scanner to read the roles soon (never blocks). */
void dlock__replicated_stale(dlock__replicated *x);

#endif
