/* The permit-expirable semaphore's acquisitions (sync/permit.h): one permit
 * (scripts/permits/acquire.lua) or n at once, all or none (acquire_n.lua:
 * the ids travel as one argument, their 16 bytes each one after the other,
 * so any n fits one request). Each is one operation that both drivers run,
 * blocking or asynchronous: its ids are made where it runs (setup) and fixed
 * for the whole call, so a resent attempt is harmless; a success that cannot
 * stand (the watchdog, the replicas' acknowledgement) goes back to the pool
 * by the release's own operation (permit_release.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/permit.h"

/* The lease the script sets for the caller's (ms, or DLOCK_WATCHDOG, checked
 * with the call's options), noted for the auto quarantine; -1 (the scripts'
 * "no expiry") for DLOCK_NO_EXPIRY. */
static int64_t script_lease(dlock_permit_semaphore *p, int64_t lease)
{
    if (lease == DLOCK_NO_EXPIRY)
        return -1;
    int64_t ms = lease == DLOCK_WATCHDOG ? p->h.c->cfg.watchdog_ms : lease;
    dlock__netctx_note_lease(&p->h.c->net, ms);
    return ms;
}

/* An acquire script's answer (acquire.lua, acquire_n.lua): taken, or busy
 * with the earliest lease's end in *ends_in. */
static int take_answer(dlock_permit_semaphore *p, int rc, dlock__res *res, dlock__busy *b,
                       int64_t *ends_in)
{
    if (rc != DLOCK_OK)
        return dlock__refused(&p->h, rc, res);
    rc = dlock__reply_take(res->r, ends_in);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(&p->h, "acquire", res->r);
    freeReplyObject(res->r);
    if (rc == DLOCK__BUSY) {
        b->ttl = *ends_in;   /* an expiring lease brings a permit back unannounced */
        b->first = 0;
    }
    return rc;
}

/* The timeout's message: `what` not available. */
static int not_available(const dlock_permit_semaphore *p, const char *what, int64_t ends_in)
{
    if (ends_in >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': %s available (the earliest lease ends in "
                                            "%lld ms, or a lock-delay after a lease that ran "
                                            "out unreleased)",
                           p->h.what, p->h.name, what, (long long)ends_in);
    return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': %s available", p->h.what, p->h.name, what);
}

/* ------------------------------------------------------------ one permit */

typedef struct grab {
    dlock_permit_semaphore *p;
    int64_t lease;           /* the caller's: ms or DLOCK_WATCHDOG */
    dlock__permit_id id;     /* fixed for the whole call: a resent attempt is harmless */
    int64_t lease_ms;        /* the lease the script sets */
    int64_t ends_in;         /* the last busy answer: earliest lease end, ms (-1 none) */
    dlock__permit_drop back; /* a give-back's release */
} grab;

static int grab_setup(void *st)
{
    grab *g = st;
    g->lease_ms = script_lease(g->p, g->lease);
    g->ends_in = -1;
    dlock__permit_new_id(&g->id);
    return DLOCK_OK;
}

/* KEYS: semaphore, leases, channel[, delay set]; ARGV: id, lease[, delay]
 * (scripts/permits/acquire.lua). */
static void grab_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    grab *g = st;
    atomic_store(&g->p->attempted, 1);   /* the delay is fixed from now on */
    dlock__permit_keys_id(op, DLOCK__SCRIPT_PERMITS_ACQUIRE, g->p, &g->id);
    dlock__op_argi(op, g->lease_ms);
    dlock__permit_delay_arg(g->p, op);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int grab_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    grab *g = st;
    return take_answer(g->p, rc, res, b, &g->ends_in);
}

/* A watchdog permit is renewed from now on. */
static int grab_keep(void *st, int64_t sent_ms)
{
    grab *g = st;
    return g->lease == DLOCK_WATCHDOG ? dlock__permit_watch(g->p, &g->id, sent_ms) : DLOCK_OK;
}

/* A permit that cannot stand goes back to the pool (and out of the
 * watchdog's schedule). */
static int grab_give_back(void *st, dlock__op *op)
{
    grab *g = st;
    g->back = (dlock__permit_drop){.p = g->p, .id = g->id};
    dlock__permit_drop_setup(&g->back);
    dlock__permit_drop_request(&g->back, -1, op);
    op->flags = 0;
    return 1;
}

static int grab_gave_back(void *st, int rc, dlock__res *res)
{
    grab *g = st;
    rc = dlock__permit_drop_read(&g->back, rc, res, NULL);
    return rc == DLOCK_OK && g->back.outcome != DLOCK__GONE_RELEASED ? DLOCK_ENOTOWNER : rc;
}

static int grab_busy(void *st, const dlock__busy *b)
{
    (void)b;
    grab *g = st;
    return not_available(g->p, "no permit", g->ends_in);
}

static void grab_result(void *st, dlock__result *res) { res->permit_id = ((grab *)st)->id.hex; }

static const dlock__op_type grab_type = {
    .setup = grab_setup,
    .request = grab_request,
    .read = grab_read,
    .keep = grab_keep,
    .give_back = grab_give_back,
    .gave_back = grab_gave_back,
    .busy_error = grab_busy,
    .result = grab_result,
    .acquires = 1,
};

static int grab_permit(dlock_permit_semaphore *p, const dlock_wait_opts *opts,
                       const dlock__via *via, char *id, size_t size)
{
    int rc = dlock__permit_check(p, NULL, NULL);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE | DLOCK__TAKES_NO_EXPIRY,
                               "a permit semaphore", &o);
    if (rc == DLOCK_OK && !via && (!id || size < DLOCK_PERMIT_ID_BUFSIZE))
        rc = dlock__fail(DLOCK_EINVAL, "the permit id needs a buffer of %d bytes",
                         DLOCK_PERMIT_ID_BUFSIZE);
    if (rc != DLOCK_OK)
        return rc;
    grab g = {.p = p, .lease = o.lease_ms};
    dlock__wait_spec spec = {.wake = dlock__wake_permits, .need = 1, .wait_ms = o.wait_ms,
                             .cancel = o.cancel};
    dlock__result res;
    rc = dlock__start(&p->h, &grab_type, &g, sizeof(g), &spec, via, &res);
    if (rc == DLOCK_OK && !via)
        memcpy(id, res.permit_id, DLOCK_PERMIT_ID_BUFSIZE);
    return rc;
}

int dlock_permit_semaphore_acquire_opts(dlock_permit_semaphore *p, const dlock_wait_opts *o,
                                        char *id, size_t size)
{
    return grab_permit(p, o, NULL, id, size);
}

int dlock_permit_semaphore_acquire(dlock_permit_semaphore *p, int64_t lease_ms, char *id,
                                   size_t size)
{
    return grab_permit(p, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease_ms},
                       NULL, id, size);
}

int dlock_permit_semaphore_try(dlock_permit_semaphore *p, int64_t wait_ms, int64_t lease_ms,
                               char *id, size_t size)
{
    return grab_permit(p, &(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms}, NULL, id,
                       size);
}

int dlock_permit_semaphore_acquire_async(dlock_permit_semaphore *p, const dlock_wait_opts *o,
                                         dlock_async_fn fn, void *ud)
{
    return grab_permit(p, o, &(dlock__via){fn, ud, 0}, NULL, 0);
}

/* ------------------------------------------------------------ n permits */

/* n permits taken together. The ids are made where the call runs (setup)
 * and freed by done; their text goes to the result (dlock_async_permit_ids),
 * owned by it: the asynchronous driver frees it after the callback, the
 * blocking call once copied out. */
typedef struct grab_n {
    dlock_permit_semaphore *p;
    int64_t lease;           /* the caller's: ms or DLOCK_WATCHDOG */
    size_t n;
    int64_t lease_ms;        /* the lease the script sets */
    int64_t ends_in;         /* the last busy answer: earliest lease end, ms (-1 none) */
    dlock__permit_id *ids;   /* n */
    unsigned char *raw;      /* 16 n */
    char (*hex)[DLOCK_PERMIT_ID_BUFSIZE];   /* n, until the result takes them */
    size_t watched;          /* watchdog permits scheduled */
    dlock__permit_drops back;   /* a give-back's release (borrows ids and raw) */
} grab_n;

static void grab_n_done(void *st, int read)
{
    (void)read;
    grab_n *g = st;
    free(g->ids);
    free(g->raw);
    free(g->hex);
    g->ids = NULL;
    g->raw = NULL;
    g->hex = NULL;
}

static int grab_n_setup(void *st)
{
    grab_n *g = st;
    g->lease_ms = script_lease(g->p, g->lease);
    g->ends_in = -1;
    g->ids = calloc(g->n, sizeof(*g->ids));
    g->hex = calloc(g->n, sizeof(*g->hex));
    for (size_t i = 0; g->ids && g->hex && i < g->n; i++) {
        dlock__permit_new_id(&g->ids[i]);
        memcpy(g->hex[i], g->ids[i].hex, DLOCK_PERMIT_ID_BUFSIZE);
    }
    if (!g->ids || !g->hex || !(g->raw = dlock__permit_raw(g->ids, g->n))) {
        grab_n_done(g, 0);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

/* KEYS: semaphore, leases, channel; ARGV: lease, ids (scripts/permits/acquire_n.lua). */
static void grab_n_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    grab_n *g = st;
    atomic_store(&g->p->attempted, 1);   /* the delay is fixed from now on */
    dlock__permit_keys(op, DLOCK__SCRIPT_PERMITS_ACQUIRE_N, g->p);
    dlock__op_argi(op, g->lease_ms);
    dlock__op_arg(op, (const char *)g->raw, 16 * g->n);
    dlock__permit_delay_arg(g->p, op);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int grab_n_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    grab_n *g = st;
    if (rc == DLOCK_EREDIS && res && res->err == DLOCK__RERR_OVER_TOTAL)
        /* n above the total: refused before anything was written; the
         * script's words after "ERR" ("<n> permits asked of ...") */
        return dlock__fail(DLOCK_EINVAL, "%s '%s': %.*s", g->p->h.what, g->p->h.name, 120,
                           dlock__redis_error_detail(res->text));
    return take_answer(g->p, rc, res, b, &g->ends_in);
}

static int grab_n_keep(void *st, int64_t sent_ms)
{
    grab_n *g = st;
    if (g->lease != DLOCK_WATCHDOG)
        return DLOCK_OK;
    for (; g->watched < g->n; g->watched++) {
        int rc = dlock__permit_watch(g->p, &g->ids[g->watched], sent_ms);
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

/* Permits that cannot stand go back to the pool, all of them. */
static int grab_n_give_back(void *st, dlock__op *op)
{
    grab_n *g = st;
    g->back = (dlock__permit_drops){.p = g->p, .n = g->n, .ids = g->ids, .raw = g->raw,
                                    .borrowed = 1, .try_only = 1};
    dlock__permit_drops_setup(&g->back);
    dlock__permit_drops_request(&g->back, -1, op);
    return 1;
}

static int grab_n_gave_back(void *st, int rc, dlock__res *res)
{
    grab_n *g = st;
    rc = dlock__permit_drops_read(&g->back, rc, res, NULL);
    return rc == DLOCK_OK && g->back.released == 0 ? DLOCK_ENOTOWNER : rc;
}

static int grab_n_busy(void *st, const dlock__busy *b)
{
    (void)b;
    grab_n *g = st;
    char what[48];
    snprintf(what, sizeof(what), "%zu permits not", g->n);
    return not_available(g->p, what, g->ends_in);
}

static void grab_n_result(void *st, dlock__result *res)
{
    grab_n *g = st;
    res->permit_ids = (const char(*)[DLOCK_PERMIT_ID_BUFSIZE])g->hex;
    res->n_ids = g->n;
    res->permit_id = g->hex[0];
    res->count = (int64_t)g->n;
    res->owned = g->hex;
    g->hex = NULL;
}

static const dlock__op_type grab_n_type = {
    .setup = grab_n_setup,
    .request = grab_n_request,
    .read = grab_n_read,
    .keep = grab_n_keep,
    .give_back = grab_n_give_back,
    .gave_back = grab_n_gave_back,
    .busy_error = grab_n_busy,
    .result = grab_n_result,
    .done = grab_n_done,
    .acquires = 1,
};

/* n permits, blocking (ids: the caller's n buffers, each "" on failure once
 * the call ran) or asynchronously (via). */
static int grab_list(dlock_permit_semaphore *p, int64_t n, const dlock_wait_opts *opts,
                     const dlock__via *via, char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    int rc = dlock__permit_check(p, NULL, NULL);
    if (rc == DLOCK_OK && !via && !ids)
        rc = dlock__fail(DLOCK_EINVAL, "the permit ids' array is NULL");
    if (rc == DLOCK_OK && n < 1)
        rc = dlock__fail(DLOCK_EINVAL, "%lld permits asked: at least 1", (long long)n);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits");
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE | DLOCK__TAKES_NO_EXPIRY,
                               "a permit semaphore", &o);
    if (rc != DLOCK_OK)
        return rc;
    grab_n g = {.p = p, .lease = o.lease_ms, .n = (size_t)n};
    dlock__wait_spec spec = {.wake = dlock__wake_permits, .need = n, .wait_ms = o.wait_ms,
                             .cancel = o.cancel};
    dlock__result res;
    rc = dlock__start(&p->h, &grab_n_type, &g, sizeof(g), &spec, via, &res);
    if (via)
        return rc;
    for (size_t i = 0; i < g.n; i++)
        memcpy(ids[i], rc == DLOCK_OK ? res.permit_ids[i] : "", rc == DLOCK_OK ? 33 : 1);
    if (rc == DLOCK_OK)
        free(res.owned);
    return rc;
}

int dlock_permit_semaphore_acquire_n_opts(dlock_permit_semaphore *p, int64_t n,
                                          const dlock_wait_opts *o,
                                          char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    return grab_list(p, n, o, NULL, ids);
}

int dlock_permit_semaphore_acquire_n(dlock_permit_semaphore *p, int64_t n, int64_t lease_ms,
                                     char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    return grab_list(p, n,
                     &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease_ms},
                     NULL, ids);
}

int dlock_permit_semaphore_try_n(dlock_permit_semaphore *p, int64_t n, int64_t wait_ms,
                                 int64_t lease_ms, char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    return grab_list(p, n, &(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms}, NULL,
                     ids);
}

int dlock_permit_semaphore_acquire_n_async(dlock_permit_semaphore *p, int64_t n,
                                           const dlock_wait_opts *opts, dlock_async_fn fn,
                                           void *ud)
{
    return grab_list(p, n, opts, &(dlock__via){fn, ud, 0}, NULL);
}
