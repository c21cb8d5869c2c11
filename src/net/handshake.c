/* The handshake of a new connection, blocking or asynchronous: one list of
 * commands and one reading of their answers, so both connection kinds
 * authenticate, select and name themselves the same way. */
#include <stdio.h>
#include <string.h>

#include "net/net.h"

void dlock__netctx_init(dlock__netctx *ctx, const dlock_config *cfg)
{
    ctx->cfg = cfg;
    pthread_mutex_init(&ctx->name_mu, NULL);
    ctx->conn_name[0] = '\0';
    atomic_init(&ctx->name_gen, 0);
    atomic_init(&ctx->name_refused, 0);
}

void dlock__netctx_clear(dlock__netctx *ctx) { pthread_mutex_destroy(&ctx->name_mu); }

void dlock__netctx_set_name(dlock__netctx *ctx, const char *name)
{
    pthread_mutex_lock(&ctx->name_mu);
    snprintf(ctx->conn_name, sizeof(ctx->conn_name), "%s", name ? name : "");
    atomic_fetch_add_explicit(&ctx->name_gen, 1, memory_order_release);
    pthread_mutex_unlock(&ctx->name_mu);
}

uint64_t dlock__netctx_name(dlock__netctx *ctx, char *buf)
{
    pthread_mutex_lock(&ctx->name_mu);
    memcpy(buf, ctx->conn_name, sizeof(ctx->conn_name));
    uint64_t gen = atomic_load_explicit(&ctx->name_gen, memory_order_relaxed);
    pthread_mutex_unlock(&ctx->name_mu);
    return gen;
}

int dlock__handshake_steps(dlock__netctx *ctx, const dlock__endpoint *ep,
                           dlock__hs_step out[DLOCK__HS_MAX], uint64_t *name_gen)
{
    int n = 0;
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
    dlock__hs_step *name = &out[n];
    *name_gen = dlock__netctx_name(ctx, name->buf);
    if (name->buf[0]) {
        n++;
        name->argv[0] = "CLIENT";
        name->argv[1] = "SETNAME";
        name->argv[2] = name->buf;
        name->argc = 3;
        name->what = "CLIENT SETNAME";
    }
    if (n == 0) {
        dlock__hs_step *s = &out[n++];
        s->argv[0] = "PING";
        s->argc = 1;
        s->what = "the first PING";
    }
    return n;
}

int dlock__handshake_check(dlock__netctx *ctx, const dlock__hs_step *s, const redisReply *r,
                           const char *addr)
{
    if (r->type != REDIS_REPLY_ERROR)
        return DLOCK_OK;
    if (s->argc == 3 && strcmp(s->argv[0], "CLIENT") == 0 &&
        (strncmp(r->str, "NOPERM", 6) == 0 || strstr(r->str, "nknown"))) {
        /* Refused by an ACL, or renamed away: a name only helps people see who
         * holds what, never worth a failed connection. (A server that is not
         * ready, -LOADING, still fails the handshake.) */
        if (!atomic_exchange(&ctx->name_refused, 1))
            dlock__log(ctx->cfg, DLOCK_LOG_WARN,
                       "%s refuses CLIENT SETNAME (%s): connections stay unnamed, so holders "
                       "cannot be mapped to processes (allow +client|setname)",
                       addr, r->str);
        return DLOCK_OK;
    }
    /* Only AUTH and SELECT refusals mean bad credentials: a first PING
     * answered with -LOADING is a server still starting. */
    int code = dlock__redis_error_code(r->str);
    if (code == DLOCK_EREDIS && s->credentials)
        code = DLOCK_EAUTH;
    return dlock__fail(code, "%s refused by %s: %s", s->what, addr, r->str);
}
