/* Sentinel-managed primary (sentinel.c). Not installed. */
#ifndef DLOCK_NET_SENTINEL_H
#define DLOCK_NET_SENTINEL_H

#include "net/net.h"

typedef struct dlock__sentinel dlock__sentinel;

/* Asks the sentinels (host and port each; `suser`/`spass` their
 * credentials, may be NULL) for master `name`; the primary gets `data`'s
 * credentials and database. DLOCK_ECONN when no sentinel answers (each
 * failure named), DLOCK_EINVAL when the sentinels that answer do not know the
 * name. Starts a thread that follows +switch-master and checks every
 * CHECK_EVERY_MS. */
int dlock__sentinel_new(dlock__sentinel **out, dlock__netctx *ctx, const dlock__endpoint *sentinels,
                        size_t n, const char *name, const char *suser, const char *spass,
                        const dlock__endpoint *data);
void dlock__sentinel_free(dlock__sentinel *s);
/* The current primary's node (no I/O). */
dlock__node *dlock__sentinel_primary(dlock__sentinel *s);
/* Runs req on the primary; a refusal that says the node is no longer the
 * primary (READONLY, a connection that failed before the request could run)
 * asks the sentinels again and resends to the new primary within the command
 * timeout. */
int dlock__sentinel_call(dlock__sentinel *s, const dlock__req *req, dlock__res *res);
/* Bumped at every switch of primary. */
uint64_t dlock__sentinel_generation(dlock__sentinel *s);
/* Asks the watcher to check the sentinels soon (never blocks). */
void dlock__sentinel_stale(dlock__sentinel *s);

#endif
