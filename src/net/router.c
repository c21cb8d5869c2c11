/* Which node serves a key. One server today: every request already goes
 * through here, so Sentinel and Cluster routing (key -> slot -> node, MOVED
 * and ASK) change this file and not its callers. */
#include <stdlib.h>

#include "net/net.h"

struct dlock__router {
    dlock__node *only;
};

int dlock__router_new(dlock__router **out, dlock__netctx *ctx, const dlock__endpoint *ep)
{
    dlock__router *r = calloc(1, sizeof(*r));
    if (!r)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__node_new(&r->only, ctx, ep);
    if (rc != DLOCK_OK) {
        free(r);
        return rc;
    }
    *out = r;
    return DLOCK_OK;
}

void dlock__router_free(dlock__router *r)
{
    if (!r)
        return;
    dlock__node_free(r->only);
    free(r);
}

int dlock__router_check(dlock__router *r) { return dlock__node_check(r->only); }

dlock__node *dlock__router_node(dlock__router *r, const char *key, size_t len)
{
    (void)key;
    (void)len;
    return r->only;
}

int dlock__router_call(dlock__router *r, const dlock__req *req, redisReply **out)
{
    return dlock__node_call(r->only, req, out);
}
