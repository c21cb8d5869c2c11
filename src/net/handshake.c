/* The handshake of a new connection, blocking or asynchronous: one list of
 * commands and one reading of their answers, so both connection kinds
 * authenticate, select and name themselves the same way. */
#include <string.h>

#include "net/net.h"

unsigned dlock__connname_get(dlock__connname *cn, char buf[DLOCK__CONN_NAME_MAX])
{
    pthread_mutex_lock(&cn->mu);
    memcpy(buf, cn->name, DLOCK__CONN_NAME_MAX);
    unsigned gen = atomic_load(&cn->gen);
    pthread_mutex_unlock(&cn->mu);
    return gen;
}

int dlock__handshake_steps(const dlock__netctx *ctx, const dlock__endpoint *ep,
                           dlock__hs_step out[DLOCK__HS_MAX], unsigned *name_gen)
{
    int n = 0;
    *name_gen = 0;
    memset(out, 0, sizeof(*out) * DLOCK__HS_MAX);
    if (ep->pass) {
        dlock__hs_step *s = &out[n++];
        s->argv[0] = "AUTH";
        if (ep->user) {
            s->argv[1] = ep->user;
            s->argv[2] = ep->pass;
            s->argc = 3;
        } else {
            s->argv[1] = ep->pass;
            s->argc = 2;
        }
        s->what = "authentication";
        s->credentials = 1;
    }
    if (ep->db != 0) {
        dlock__hs_step *s = &out[n++];
        dlock__fmt_i64(s->buf, ep->db);
        s->argv[0] = "SELECT";
        s->argv[1] = s->buf;
        s->argc = 2;
        s->what = "database selection";
        s->credentials = 1;
    }
    if (ctx->name) {
        dlock__hs_step *s = &out[n++];
        *name_gen = dlock__connname_get(ctx->name, s->buf);
        s->argv[0] = "CLIENT";
        s->argv[1] = "SETNAME";
        s->argv[2] = s->buf;
        s->argc = 3;
        s->what = "CLIENT SETNAME";
    }
    if (n == 0) {
        dlock__hs_step *s = &out[n++];
        s->argv[0] = "PING";
        s->argc = 1;
        s->what = "the first PING";
    }
    return n;
}

int dlock__handshake_check(const dlock__hs_step *s, const redisReply *r, const char *addr)
{
    if (r->type != REDIS_REPLY_ERROR)
        return DLOCK_OK;
    /* Only AUTH and SELECT refusals mean bad credentials: a first PING
     * answered with -LOADING is a server still starting. */
    int code = dlock__redis_error_code(r->str);
    if (code == DLOCK_EREDIS && s->credentials)
        code = DLOCK_EAUTH;
    return dlock__fail(code, "%s refused by %s: %s", s->what, addr, r->str);
}
