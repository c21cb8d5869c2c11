/* The handshake of a new connection, blocking or asynchronous: one list of
 * commands and one reading of their answers, so both connection kinds
 * authenticate, select and name themselves the same way. */
#include <stdio.h>
#include <string.h>

#include "net/net.h"

int dlock__netctx_init(dlock__netctx *ctx, const dlock_config *cfg, dlock__stats *stats)
{
    char addr[320];
    dlock__endpoint_str(&cfg->ep, addr, sizeof(addr));
    memset(ctx, 0, sizeof(*ctx));
    ctx->cfg = cfg;
    ctx->stats = stats;
    pthread_mutex_init(&ctx->name_mu, NULL);
    atomic_init(&ctx->name_gen, 0);
    atomic_init(&ctx->name_refused, 0);
    atomic_init(&ctx->longest_lease, 0);
    pthread_mutex_init(&ctx->hook_mu, NULL);
    if (!cfg->ep.tls && dlock__tls_opts_set(&cfg->tls))
        return dlock__fail(DLOCK_EINVAL, "TLS settings (CA, certificate, server name, verify) "
                                         "are given but the URL for %s is not rediss://",
                           addr);
    if (cfg->ep.tls) {
        int rc = dlock__tls_new(&ctx->tls, &cfg->tls, addr);
        if (rc != DLOCK_OK)
            return rc;
        if (!cfg->tls.verify)
            dlock__log(cfg, DLOCK_LOG_WARN,
                       "TLS to %s does not verify the server's certificate (verification "
                       "turned off): the link is encrypted but anyone in the path can pose "
                       "as the server",
                       addr);
    }
    return DLOCK_OK;
}

void dlock__netctx_clear(dlock__netctx *ctx)
{
    pthread_mutex_destroy(&ctx->name_mu);
    pthread_mutex_destroy(&ctx->hook_mu);
    dlock__tls_free(ctx->tls);
    ctx->tls = NULL;
}

void dlock__netctx_note_lease(dlock__netctx *ctx, int64_t lease_ms)
{
    int64_t was = atomic_load(&ctx->longest_lease);
    while (lease_ms > was && !atomic_compare_exchange_weak(&ctx->longest_lease, &was, lease_ms))
        ;
}

int64_t dlock__netctx_quarantine_ms(dlock__netctx *ctx)
{
    const dlock_config *cfg = ctx->cfg;
    if (cfg->quarantine_mode != DLOCK_QUARANTINE_AUTO)
        return cfg->quarantine_mode == DLOCK_QUARANTINE_ON ? cfg->quarantine_ms : 0;
    /* The longest a previous holder may still believe it holds. */
    int64_t lease = dlock__netctx_lease_ms(ctx);
    return lease > cfg->quarantine_ms ? lease : cfg->quarantine_ms;
}

int64_t dlock__netctx_lease_ms(dlock__netctx *ctx)
{
    /* A watchdog hold's lease (renewed up to the last moment), or the
     * longest fixed lease seen. */
    int64_t lease = atomic_load(&ctx->longest_lease);
    return lease > ctx->cfg->watchdog_ms ? lease : ctx->cfg->watchdog_ms;
}

void dlock__netctx_on_jumped(dlock__netctx *ctx, void (*fn)(void *ud, dlock__node *n, int64_t ms),
                             void *ud)
{
    pthread_mutex_lock(&ctx->hook_mu);
    ctx->on_jumped = fn;
    ctx->jumped_ud = ud;
    pthread_mutex_unlock(&ctx->hook_mu);
}

void dlock__netctx_on_promoted(dlock__netctx *ctx, int which,
                               void (*fn)(void *ud, dlock__node *n), void *ud)
{
    pthread_mutex_lock(&ctx->hook_mu);
    ctx->on_promoted[which] = fn;
    ctx->promoted_ud[which] = ud;
    pthread_mutex_unlock(&ctx->hook_mu);
}

int dlock__handshake_io_fail(const dlock__transport *t, const char *addr, const char *what,
                             int tls)
{
    /* A TLS port resets a connection that does not start with a TLS hello.
     * Over TLS 1.3 the client's side of the handshake ends before the server
     * has checked the client's certificate: one it refuses shows as an alert
     * on the first read, or, when the server's reset overtakes the alert, as
     * a connection closed unanswered (tls.c reports the certificate the
     * server asked for and did not get as a TLS error itself). */
    return dlock__fail(t->tls_error ? DLOCK_ETLS : DLOCK_ECONN, "connection to %s failed during "
                       "%s: %s%s", addr, what, t->err[0] ? t->err : "connection lost",
                       !t->hung_up || t->tls_error ? ""
                       : tls ? " (right after the TLS handshake: does the server want a client "
                               "certificate it trusts?)"
                             : " (a TLS port? use rediss://)");
}

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

/* AUTH [user] password (both borrowed). */
static void auth_step(dlock__hs_step *s, const char *user, const char *pass)
{
    s->argv[0] = "AUTH";
    s->argv[1] = user ? user : pass;
    s->argv[2] = user ? pass : NULL;
    s->argc = user ? 3 : 2;
    s->what = "authentication";
    s->credentials = 1;
}

/* Asks the credentials callback for ep into s (AUTH), or leaves s unused
 * when the node takes none: 1 (AUTH), 0 (none), or DLOCK_EAUTH. */
static int ask_credentials(dlock__netctx *ctx, const dlock__endpoint *ep, dlock__hs_step *s)
{
    char addr[320];
    dlock__endpoint_str(ep, addr, sizeof(addr));
    int rc = ctx->cfg->cred_fn(addr, ep->sentinel, s->user, s->secret, ctx->cfg->cred_ud);
    s->user[sizeof(s->user) - 1] = s->secret[sizeof(s->secret) - 1] = '\0';
    if (rc == DLOCK_CREDENTIALS_NONE) {
        dlock__handshake_wipe(s, 1);
        return 0;
    }
    if (rc != 0 || !s->secret[0]) {
        dlock__handshake_wipe(s, 1);
        return dlock__fail(DLOCK_EAUTH, "the credentials callback %s for %s",
                           rc != 0 ? "failed" : "returned no password", addr);
    }
    auth_step(s, s->user[0] ? s->user : NULL, s->secret);
    return 1;
}

void dlock__handshake_wipe(dlock__hs_step *steps, int n)
{
    for (int i = 0; i < n; i++) {
        volatile char *u = steps[i].user, *p = steps[i].secret;
        for (size_t k = 0; k < sizeof(steps[i].secret); k++)
            u[k] = p[k] = 0;
    }
}

int dlock__handshake_steps(dlock__netctx *ctx, const dlock__endpoint *ep,
                           dlock__hs_step out[DLOCK__HS_MAX], uint64_t *name_gen)
{
    int n = 0;
    memset(out, 0, sizeof(*out) * DLOCK__HS_MAX);
    if (ctx->cfg->cred_fn) {
        int rc = ask_credentials(ctx, ep, &out[0]);
        if (rc < 0)
            return rc;
        n += rc;
    } else if (ep->pass) {
        auth_step(&out[n++], ep->user, ep->pass);
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
        name->optional = 1;
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
    dlock__rerr e = dlock__redis_classify(r->str);
    if (s->optional &&
        (e == DLOCK__RERR_NOPERM || e == DLOCK__RERR_NOPERM_KEY || e == DLOCK__RERR_UNKNOWN_CMD)) {
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
    int code = dlock__rerr_code(e);
    if (code == DLOCK_EREDIS && s->credentials)
        code = DLOCK_EAUTH;
    return dlock__fail(code, "%s refused by %s: %s", s->what, addr, r->str);
}
