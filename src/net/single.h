/* One address whose server may change role (single.c). Not installed. */
#ifndef DLOCK_NET_SINGLE_H
#define DLOCK_NET_SINGLE_H

#include "net/net.h"

typedef struct dlock__single dlock__single;

int dlock__single_new(dlock__single **out, dlock__netctx *ctx, const dlock__endpoint *ep);
void dlock__single_free(dlock__single *s);
/* The node of the moment (no I/O). */
dlock__node *dlock__single_node(dlock__single *s);
/* Runs req; a READONLY answer (the server behind the address is a replica
 * now) drops the connections to it, and the request goes again on new ones
 * (the name resolved again) after the retry delay, within the retry budget. */
int dlock__single_call(dlock__single *s, const dlock__req *req, dlock__res *res);
/* The server answered READONLY (any thread, never blocks): new connections
 * from now on. 1 when this call moved to a new node. */
int dlock__single_demoted(dlock__single *s, const dlock__node *seen);
/* Bumped at every change of node. */
uint64_t dlock__single_generation(dlock__single *s);

#endif
