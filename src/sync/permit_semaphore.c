/* The permit-expirable semaphore (Redisson's RPermitExpirableSemaphore):
 * the available count at `name` (a string, as the plain semaphore's), each
 * held permit in the sorted set {name}:timeout (member = the id's 16 bytes,
 * score = the epoch ms its lease ends), wake-ups on redisson_sc:{name}
 * (scripts/permits/).
 *
 * Every script first gives expired permits back to the pool and publishes
 * the new count, so a lease that ends wakes waiters as soon as anybody
 * touches the semaphore; a waiter sleeps no longer than the earliest lease
 * (the busy answer's TTL), since nobody publishes when a lease just runs out.
 * The count's own calls (set, add, available) are the plain semaphore's
 * (dlock__count_call), with this semaphore's leases key.
 *
 * Watchdog permits (beyond Redisson) are a watchdog hold kind: the permit
 * (semaphore, leases key, id) is renewed in the client's batched renewals
 * (scripts/permits/renew.lua), reported lost like a lock, and back in the
 * pool within the watchdog timeout once its holder stops renewing it.
 *
 * Lock-delay (dlock_permit_semaphore_set_lock_delay): every permit taken
 * through a handle with a delay has an entry in the sorted set
 * dlock_permit_delay:{name} (id -> the server time its lease + delay ends),
 * renewed with the permit and removed by its release; a permit whose lease
 * ran out unreleased is back in the count but not given out while its entry
 * lives (include/delay.lua's pdelay_left), through whichever handle it is
 * asked. Scripts take the set as an optional KEYS[4] and the delay as an
 * optional last argument. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "permit-expirable semaphore";

/* Renewal of watchdog permits: KEYS = (semaphore, leases) per permit, ARGV =
 * its id (scripts/permits/renew.lua). The lost callback gets the semaphore's
 * name and the id. */
static const dlock__hold_kind permit_hold = {"permit", DLOCK__SCRIPT_PERMITS_RENEW, 2, 1, 1};
/* With a lock-delay: the set dlock_permit_delay:{name} a third key, the
 * delay a second argument. */
static const dlock__hold_kind permit_delay_hold = {"permit", DLOCK__SCRIPT_PERMITS_RENEW, 3, 2, 1};

struct dlock_permit_semaphore {
    dlock__handle h;         /* channel: redisson_sc:{name} */
    char *leases;            /* {name}:timeout */
    size_t llen;
    char *pdelay;            /* dlock_permit_delay:{name}, the lock-delay's set */
    size_t plen;
    int64_t lock_delay;      /* ms, 0 off; fixed by the first acquisition */
    atomic_int attempted;    /* an acquisition was attempted through it */
    char delay_arg[24];      /* lock_delay in decimal */
    atomic_int heard;        /* the last release through this handle woke some client */
    pthread_mutex_t mu;      /* guards fn, ud */
    dlock_lost_fn fn;
    void *ud;
};

/* A permit id: what the caller sees (32 lowercase hex) and what Redis keeps
 * (the 16 bytes), as Redisson does since 3.17. */
typedef struct permit_id {
    char hex[DLOCK_PERMIT_ID_BUFSIZE];
    unsigned char raw[16];
} permit_id;

static void decode(permit_id *id)
{
    for (int i = 0; i < 16; i++)
        id->raw[i] = (unsigned char)(dlock__hexval(id->hex[2 * i]) << 4 | dlock__hexval(id->hex[2 * i + 1]));
}

static int parse_id(const char *s, permit_id *id)
{
    if (!s)
        return dlock__fail(DLOCK_EINVAL, "permit id is NULL");
    size_t n = strnlen(s, 33);
    int ok = n == 32;
    for (size_t i = 0; ok && i < n; i++)
        ok = dlock__hexval(s[i]) >= 0;
    if (!ok)
        return dlock__fail(DLOCK_EINVAL, "permit id '%.40s%s' is not 32 hex characters (the "
                                         "form an acquire returns)",
                           s, n > 40 ? "..." : "");
    for (size_t i = 0; i < 32; i++)
        id->hex[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    id->hex[32] = '\0';
    decode(id);
    return DLOCK_OK;
}

static void hold_of(const dlock_permit_semaphore *p, const permit_id *id, dlock__hold_id *h)
{
    memset(h, 0, sizeof(*h));
    h->kind = &permit_hold;
    h->part[0] = p->h.name;
    h->len[0] = p->h.nlen;
    h->part[1] = p->leases;
    h->len[1] = p->llen;
    h->part[2] = (const char *)id->raw;
    h->len[2] = sizeof(id->raw);
    h->owner = id->hex;
    h->olen = 32;
    if (p->lock_delay <= 0)
        return;
    h->kind = &permit_delay_hold;
    h->part[2] = p->pdelay;
    h->len[2] = p->plen;
    h->part[3] = (const char *)id->raw;
    h->len[3] = sizeof(id->raw);
    h->part[4] = p->delay_arg;
    h->len[4] = strlen(p->delay_arg);
}

/* The lock-delay's set to KEYS (after the three every script takes): a
 * key the script writes with a lock-delay; else, for a script that only
 * reads or clears it (`honour`), one of dlock's own optional keys. */
static void delay_key(const dlock_permit_semaphore *p, dlock__op *op, int honour)
{
    if (p->lock_delay > 0)
        dlock__op_key(op, p->pdelay, p->plen);
    else if (honour)
        dlock__op_key_optional(op, DLOCK__OWN_DELAY, p->pdelay, p->plen);
}

/* With a lock-delay: the delay to ARGV (last). */
static void delay_arg(const dlock_permit_semaphore *p, dlock__op *op)
{
    if (p->lock_delay > 0)
        dlock__op_args(op, p->delay_arg);
}

/* The three keys every script but set takes, and the lock-delay's set (then,
 * for the acquisitions, the failover quarantine's record): for
 * the acquisitions always (every one honours the delays of permits lost
 * unreleased, whatever its own delay) and for the releases (a permit taken
 * through another handle with a delay is released properly through this one
 * too); with a delay for an update of a lease; never for lease.lua, which
 * has no use for it. */
static void three_keys(dlock__op *op, int script, const dlock_permit_semaphore *p)
{
    dlock__op_init(op, script);
    dlock__op_key(op, p->h.name, p->h.nlen);
    dlock__op_key(op, p->leases, p->llen);
    dlock__op_key(op, p->h.channel, p->h.clen);
    if (script == DLOCK__SCRIPT_PERMITS_RELEASE || script == DLOCK__SCRIPT_PERMITS_RELEASE_N)
        dlock__op_key_optional(op, DLOCK__OWN_DELAY, p->pdelay, p->plen);
    else if (script != DLOCK__SCRIPT_PERMITS_LEASE)
        delay_key(p, op, script != DLOCK__SCRIPT_PERMITS_UPDATE);
    if (script == DLOCK__SCRIPT_PERMITS_ACQUIRE || script == DLOCK__SCRIPT_PERMITS_ACQUIRE_N)
        dlock__quarantine_key(&p->h, op);
}

/* The keys, then the permit id. */
static void keys_and_id(dlock__op *op, int script, const dlock_permit_semaphore *p,
                        const permit_id *id)
{
    three_keys(op, script, p);
    dlock__op_arg(op, (const char *)id->raw, sizeof(id->raw));
}

/* ------------------------------------------------------------- handle */

int dlock_permit_semaphore_get(dlock_client *c, const char *name, dlock_permit_semaphore **out)
{
    dlock__handle *h;
    int rc = dlock__handle_new(c, name, out, sizeof(dlock_permit_semaphore), WHAT, "redisson_sc",
                               0, &h);
    if (out)
        *out = NULL;
    if (rc != DLOCK_OK)
        return rc;
    dlock_permit_semaphore *p = (dlock_permit_semaphore *)h;
    pthread_mutex_init(&p->mu, NULL);
    p->lock_delay = c->cfg.lock_delay_ms;
    snprintf(p->delay_arg, sizeof(p->delay_arg), "%lld", (long long)p->lock_delay);
    if (!(p->leases = dlock__suffixed(h->name, h->nlen, "timeout", &p->llen)) ||
        !(p->pdelay = dlock__prefixed("dlock_permit_delay", h->name, h->nlen, "", &p->plen))) {
        dlock_permit_semaphore_free(p);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = p;
    return DLOCK_OK;
}

void dlock_permit_semaphore_free(dlock_permit_semaphore *p)
{
    if (!p)
        return;
    free(p->leases);
    free(p->pdelay);
    pthread_mutex_destroy(&p->mu);
    dlock__handle_free(&p->h);
}

const char *dlock_permit_semaphore_name(const dlock_permit_semaphore *p)
{
    return p ? p->h.name : "";
}

int dlock_permit_semaphore_set_lock_delay(dlock_permit_semaphore *p, int64_t ms)
{
    int rc = dlock__check_handle(p, "semaphore");
    return rc != DLOCK_OK ? rc
                          : dlock__delay_set(&p->lock_delay, p->delay_arg, sizeof(p->delay_arg),
                                             &p->attempted, ms);
}

void dlock_permit_semaphore_set_lost_callback(dlock_permit_semaphore *p, dlock_lost_fn fn,
                                              void *ud)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ud = ud;
    pthread_mutex_unlock(&p->mu);
}

/* Renew permit `id` from now on; the lease was set at `sent_ms` or later. */
static int watch(dlock_permit_semaphore *p, const permit_id *id, int64_t sent_ms)
{
    dlock__hold_id h;
    hold_of(p, id, &h);
    pthread_mutex_lock(&p->mu);
    dlock_lost_fn fn = p->fn;
    void *ud = p->ud;
    pthread_mutex_unlock(&p->mu);
    return dlock__watchdog_add(p->h.c->wd, &h, sent_ms, fn, ud);
}

/* The calls' first checks: the handle, and the permit id when the call
 * takes one (pid). */
static int check_call(const dlock_permit_semaphore *p, const char *id, permit_id *pid)
{
    int rc = dlock__check_handle(p, "semaphore");
    return rc == DLOCK_OK && pid ? parse_id(id, pid) : rc;
}

/* ------------------------------------------------------------- release */

enum { GONE_UNKNOWN = 0, GONE_RELEASED = 1, GONE_EXPIRED = 2 };   /* release.lua's answers */

/* One release of permit `id`, the watchdog told first (setup) and after. */
typedef struct drop {
    dlock_permit_semaphore *p;
    permit_id id;
    int try_only;            /* a try-release: not held is no error (flag 0) */
    int force;               /* by an operator: the holder's lock-delay stays */
    int outcome;             /* GONE_* */
} drop;

static int drop_setup(void *st)
{
    drop *d = st;
    dlock__hold_id h;
    hold_of(d->p, &d->id, &h);
    dlock__watchdog_release_begin(d->p->h.c->wd, &h);
    return DLOCK_OK;
}

/* Not resent after a lost answer: a retry would call the permit unknown. */
static void drop_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    drop *d = st;
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_RELEASE, d->p, &d->id);
    if (d->force)
        dlock__op_args(op, "1");
    if (atomic_load_explicit(&d->p->heard, memory_order_relaxed))
        op->flags = DLOCK__CALL_PING_FIRST;
}

static int not_held(const dlock_permit_semaphore *p, const permit_id *id, int outcome)
{
    if (outcome == GONE_EXPIRED)
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' had expired: its lease ran "
                                            "out and it went back to the pool",
                           id->hex, WHAT, p->h.name);
    return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is unknown: released already, or "
                                        "never acquired",
                       id->hex, WHAT, p->h.name);
}

static int drop_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    drop *d = st;
    dlock_permit_semaphore *p = d->p;
    int64_t out = -1, heard = 0;
    if (rc != DLOCK_OK)
        rc = dlock__refused(&p->h, rc, res);
    else if (dlock__reply_pair(res->r, &out, &heard) != DLOCK_OK || out < 0 || out > 2)
        rc = dlock__proto(&p->h, "release", res->r);
    else
        freeReplyObject(res->r);
    /* Whatever the answer, this release attempt ends the watchdog's renewal;
     * a watchdog permit found gone was lost, and is reported so. */
    dlock__hold_id h;
    hold_of(p, &d->id, &h);
    dlock__watchdog_release_end(p->h.c->wd, &h,
                                rc != DLOCK_OK          ? DLOCK__RELEASE_KEPT
                                : out == GONE_RELEASED ? DLOCK__RELEASE_GONE
                                                       : DLOCK__RELEASE_NOT_HELD);
    if (rc != DLOCK_OK)
        return rc;
    d->outcome = (int)out;
    if (out == GONE_RELEASED)
        atomic_store_explicit(&p->heard, heard > 0, memory_order_relaxed);
    else if (!d->try_only)
        return not_held(p, &d->id, d->outcome);
    return DLOCK_OK;
}

static void drop_result(void *st, dlock__result *res)
{
    res->flag = ((drop *)st)->outcome == GONE_RELEASED;
}

/* A release closed before its answer was read: the watchdog counts an
 * attempt of unknown outcome, through the release's own read (st's); the
 * close's message stays. */
static void read_closed(void *st, int (*read)(void *, int, dlock__res *, dlock__busy *))
{
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    dlock__res res;
    dlock__res_init(&res);
    read(st, DLOCK_ECLOSED, &res, NULL);
    dlock__fail(DLOCK_ECLOSED, "%s", msg);
}

static void drop_done(void *st, int read)
{
    if (!read)
        read_closed(st, drop_read);
}

static const dlock__op_type drop_type = {.setup = drop_setup,
                                         .request = drop_request,
                                         .read = drop_read,
                                         .result = drop_result,
                                         .done = drop_done};

static int drop_permit(dlock_permit_semaphore *p, const char *id, int try_only,
                       const dlock__via *via, int *released)
{
    drop d = {.p = p, .try_only = try_only != 0, .force = try_only == 2};
    int rc = check_call(p, id, &d.id);
    if (rc != DLOCK_OK)
        return rc;
    dlock__result res;
    rc = dlock__start(&p->h, &drop_type, &d, sizeof(d), NULL, via, &res);
    if (rc == DLOCK_OK && released)
        *released = res.flag;
    return rc;
}

int dlock_permit_semaphore_release(dlock_permit_semaphore *p, const char *id)
{
    return drop_permit(p, id, 0, NULL, NULL);
}

int dlock_permit_semaphore_try_release(dlock_permit_semaphore *p, const char *id, int *released)
{
    return drop_permit(p, id, 1, NULL, released);
}

int dlock_permit_semaphore_force_release(dlock_permit_semaphore *p, const char *id,
                                         int *was_held)
{
    return drop_permit(p, id, 2, NULL, was_held);
}

int dlock_permit_semaphore_force_release_async(dlock_permit_semaphore *p, const char *id,
                                               dlock_async_fn fn, void *ud)
{
    return drop_permit(p, id, 2, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_permit_semaphore_release_async(dlock_permit_semaphore *p, const char *id,
                                         dlock_async_fn fn, void *ud)
{
    return drop_permit(p, id, 0, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_permit_semaphore_try_release_async(dlock_permit_semaphore *p, const char *id,
                                             dlock_async_fn fn, void *ud)
{
    return drop_permit(p, id, 1, &(dlock__via){fn, ud, 0}, NULL);
}

/* ------------------------------------------------------------- acquire */

typedef struct grab {
    dlock_permit_semaphore *p;
    int64_t lease;           /* the caller's: ms or DLOCK_WATCHDOG */
    permit_id id;            /* fixed for the whole call: a resent attempt is harmless */
    int64_t lease_ms;        /* the lease the script sets */
    int64_t ends_in;         /* the last busy answer: earliest lease end, ms (-1 none) */
    drop back;               /* a give-back's release */
} grab;

static int grab_setup(void *st)
{
    grab *g = st;
    /* g->lease was checked with the call's options (dlock__check_opts). */
    g->lease_ms = g->lease == DLOCK_WATCHDOG ? g->p->h.c->cfg.watchdog_ms : g->lease;
    dlock__netctx_note_lease(&g->p->h.c->net, g->lease_ms);   /* the auto quarantine's */
    g->ends_in = -1;
    dlock__random_hex32(g->id.hex);
    decode(&g->id);
    return DLOCK_OK;
}

/* KEYS: semaphore, leases, channel[, delay set]; ARGV: id, lease[, delay]
 * (scripts/permits/acquire.lua). */
static void grab_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    grab *g = st;
    atomic_store(&g->p->attempted, 1);   /* the delay is fixed from now on */
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_ACQUIRE, g->p, &g->id);
    dlock__op_argi(op, g->lease_ms);
    delay_arg(g->p, op);
    op->flags = DLOCK__CALL_IDEMPOTENT;
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

static int grab_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    grab *g = st;
    return take_answer(g->p, rc, res, b, &g->ends_in);
}

/* A watchdog permit is renewed from now on. */
static int grab_keep(void *st, int64_t sent_ms)
{
    grab *g = st;
    return g->lease == DLOCK_WATCHDOG ? watch(g->p, &g->id, sent_ms) : DLOCK_OK;
}

/* A permit that cannot stand goes back to the pool (and out of the
 * watchdog's schedule). */
static int grab_give_back(void *st, dlock__op *op)
{
    grab *g = st;
    g->back = (drop){.p = g->p, .id = g->id};
    drop_setup(&g->back);
    drop_request(&g->back, -1, op);
    op->flags = 0;
    return 1;
}

static int grab_gave_back(void *st, int rc, dlock__res *res)
{
    grab *g = st;
    rc = drop_read(&g->back, rc, res, NULL);
    return rc == DLOCK_OK && g->back.outcome != GONE_RELEASED ? DLOCK_ENOTOWNER : rc;
}

static int grab_busy(void *st, const dlock__busy *b)
{
    (void)b;
    grab *g = st;
    if (g->ends_in >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': no permit available (the earliest lease "
                                            "ends in %lld ms, or a lock-delay after a lease that "
                                            "ran out unreleased)",
                           WHAT, g->p->h.name, (long long)g->ends_in);
    return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': no permit available", WHAT, g->p->h.name);
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
    int rc = check_call(p, NULL, NULL);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE, "a permit semaphore", &o);
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

/* ------------------------------------------------------------- lease */

typedef struct update {
    dlock_permit_semaphore *p;
    permit_id id;
    int64_t lease;
} update;

/* KEYS: semaphore, leases, channel; ARGV: id, lease (scripts/permits/update.lua). */
static void update_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    update *u = st;
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_UPDATE, u->p, &u->id);
    dlock__op_argi(op, u->lease == DLOCK_WATCHDOG ? u->p->h.c->cfg.watchdog_ms : u->lease);
    delay_arg(u->p, op);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int update_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    update *u = st;
    dlock_permit_semaphore *p = u->p;
    if (rc != DLOCK_OK)
        return dlock__refused(&p->h, rc, res);   /* as it was, or it may be set */
    int updated = 0;
    if (dlock__reply_flag(res->r, &updated) != DLOCK_OK)
        return dlock__proto(&p->h, "update lease", res->r);
    freeReplyObject(res->r);
    dlock__hold_id h;
    hold_of(p, &u->id, &h);
    if (!updated) {
        /* A watchdog permit of ours found gone was lost: reported so. */
        dlock__watchdog_release_end(p->h.c->wd, &h, DLOCK__RELEASE_NOT_HELD);
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is not held: released, "
                                            "expired, or never acquired",
                           u->id.hex, WHAT, p->h.name);
    }
    /* A fixed lease now: no more renewals (one already sent may still land). */
    if (u->lease != DLOCK_WATCHDOG)
        dlock__watchdog_release_end(p->h.c->wd, &h, DLOCK__RELEASE_GONE);
    return DLOCK_OK;
}

/* A watchdog lease now: renewed from the moment it was asked. */
static int update_keep(void *st, int64_t sent_ms)
{
    update *u = st;
    return u->lease == DLOCK_WATCHDOG ? watch(u->p, &u->id, sent_ms) : DLOCK_OK;
}

static const dlock__op_type update_type = {
    .request = update_request, .read = update_read, .keep = update_keep};

static int update_lease(dlock_permit_semaphore *p, const char *id, int64_t lease_ms,
                        const dlock__via *via)
{
    update u = {.p = p, .lease = lease_ms};
    int rc = check_call(p, id, &u.id);
    if (rc == DLOCK_OK)
        rc = dlock__check_lease(lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    return dlock__start(&p->h, &update_type, &u, sizeof(u), NULL, via, NULL);
}

int dlock_permit_semaphore_update_lease(dlock_permit_semaphore *p, const char *id,
                                        int64_t lease_ms)
{
    return update_lease(p, id, lease_ms, NULL);
}

int dlock_permit_semaphore_update_lease_async(dlock_permit_semaphore *p, const char *id,
                                              int64_t lease_ms, dlock_async_fn fn, void *ud)
{
    return update_lease(p, id, lease_ms, &(dlock__via){fn, ud, 0});
}

/* ------------------------------------------------------------- counts */

/* The plain semaphore's calls on the count, with this one's leases key. */
static int count(const dlock_permit_semaphore *p, int kind, int64_t arg, const dlock__via *via,
                 int64_t *v, int64_t *held)
{
    return dlock__count_call((const dlock__handle *)p, p ? p->leases : NULL, p ? p->llen : 0, kind,
                             arg, via, v, held);
}

int dlock_permit_semaphore_try_set_permits(dlock_permit_semaphore *p, int64_t permits,
                                           int *was_set)
{
    int64_t v = 0;
    int rc = count(p, DLOCK__COUNT_TRY_SET, permits, NULL, &v, NULL);
    if (rc == DLOCK_OK && was_set)
        *was_set = (int)v;
    return rc;
}

int dlock_permit_semaphore_set_total(dlock_permit_semaphore *p, int64_t permits)
{
    return count(p, DLOCK__COUNT_SET, permits, NULL, NULL, NULL);
}

int dlock_permit_semaphore_add_permits(dlock_permit_semaphore *p, int64_t delta)
{
    return count(p, DLOCK__COUNT_ADD, delta, NULL, NULL, NULL);
}

int dlock_permit_semaphore_available(dlock_permit_semaphore *p, int64_t *n, int64_t *held)
{
    return count(p, DLOCK__COUNT_AVAILABLE, 0, NULL, n, held);
}

int dlock_permit_semaphore_set_total_async(dlock_permit_semaphore *p, int64_t permits,
                                             dlock_async_fn fn, void *ud)
{
    return count(p, DLOCK__COUNT_SET, permits, &(dlock__via){fn, ud, 0}, NULL, NULL);
}

int dlock_permit_semaphore_try_set_permits_async(dlock_permit_semaphore *p, int64_t permits,
                                                 dlock_async_fn fn, void *ud)
{
    return count(p, DLOCK__COUNT_TRY_SET, permits, &(dlock__via){fn, ud, 0}, NULL, NULL);
}

int dlock_permit_semaphore_add_permits_async(dlock_permit_semaphore *p, int64_t delta,
                                             dlock_async_fn fn, void *ud)
{
    return count(p, DLOCK__COUNT_ADD, delta, &(dlock__via){fn, ud, 0}, NULL, NULL);
}

int dlock_permit_semaphore_available_async(dlock_permit_semaphore *p, dlock_async_fn fn,
                                           void *ud)
{
    return count(p, DLOCK__COUNT_AVAILABLE, 0, &(dlock__via){fn, ud, 0}, NULL, NULL);
}

/* ------------------------------------------------------ several permits */

/* n permits in one script, all or none (scripts/permits/acquire_n.lua and
 * release_n.lua): the ids travel as one argument, their 16 bytes each one
 * after the other, so any n fits one request. */

/* The ids' raw bytes, one after the other: raw[16 * n]. */
static unsigned char *raw_of(const permit_id *ids, size_t n)
{
    unsigned char *raw = malloc(16 * n);
    for (size_t i = 0; raw && i < n; i++)
        memcpy(raw + 16 * i, ids[i].raw, 16);
    return raw;
}

/* A release of n permits: the watchdog told of each first (setup), then of
 * what became of each. */
typedef struct drop_n {
    dlock_permit_semaphore *p;
    size_t n;
    permit_id *ids;          /* owned (n) */
    unsigned char *raw;      /* owned (16 n) */
    int try_only;
    int64_t released;
} drop_n;

static void drop_n_free(drop_n *d)
{
    free(d->ids);
    free(d->raw);
    d->ids = NULL;
    d->raw = NULL;
}

static int drop_n_setup(void *st)
{
    drop_n *d = st;
    for (size_t i = 0; i < d->n; i++) {
        dlock__hold_id h;
        hold_of(d->p, &d->ids[i], &h);
        dlock__watchdog_release_begin(d->p->h.c->wd, &h);
    }
    return DLOCK_OK;
}

/* KEYS: semaphore, leases, channel; ARGV: the ids (scripts/permits/release_n.lua).
 * Not resent after a lost answer: a retry would call the permits unknown. */
static void drop_n_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    drop_n *d = st;
    three_keys(op, DLOCK__SCRIPT_PERMITS_RELEASE_N, d->p);
    dlock__op_arg(op, (const char *)d->raw, 16 * d->n);
}

/* The answer {n, heard} or {0, 0, place, why} into v[4]. */
static int read_release_n(const redisReply *r, size_t n, int64_t v[4])
{
    if (!r || r->type != REDIS_REPLY_ARRAY || (r->elements != 2 && r->elements != 4))
        return DLOCK_EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return DLOCK_EPROTO;
        v[i] = r->element[i]->integer;
    }
    if (r->elements == 2 ? v[0] != (int64_t)n
                         : v[0] != 0 || v[2] < 1 || v[2] > (int64_t)n || (v[3] != 0 && v[3] != 2))
        return DLOCK_EPROTO;
    return DLOCK_OK;
}

static int drop_n_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    drop_n *d = st;
    dlock_permit_semaphore *p = d->p;
    int64_t v[4] = {0, 0, 0, 0};
    if (rc != DLOCK_OK)
        rc = dlock__refused(&p->h, rc, res);
    else if (read_release_n(res->r, d->n, v) != DLOCK_OK)
        rc = dlock__proto(&p->h, "release", res->r);
    else
        freeReplyObject(res->r);
    /* Released: out of the schedule. Refused: the permit named is lost (if
     * it was a watchdog one), the others are held as before. No answer:
     * the renewals end, as a single release's. */
    size_t bad = rc == DLOCK_OK && v[0] == 0 ? (size_t)v[2] - 1 : d->n;
    for (size_t i = 0; i < d->n; i++) {
        dlock__hold_id h;
        hold_of(p, &d->ids[i], &h);
        if (rc != DLOCK_OK)
            dlock__watchdog_release_end(p->h.c->wd, &h, DLOCK__RELEASE_KEPT);
        else if (v[0] > 0)
            dlock__watchdog_release_end(p->h.c->wd, &h, DLOCK__RELEASE_GONE);
        else if (i == bad)
            dlock__watchdog_release_end(p->h.c->wd, &h, DLOCK__RELEASE_NOT_HELD);
        else
            dlock__watchdog_release_abort(p->h.c->wd, &h);
    }
    if (rc != DLOCK_OK)
        return rc;
    d->released = v[0];
    if (v[0] > 0)
        atomic_store_explicit(&p->heard, v[1] > 0, memory_order_relaxed);
    else if (!d->try_only)
        return dlock__fail(DLOCK_ENOTOWNER, "nothing released: permit %s (number %zu of %zu) "
                                            "of %s '%s' %s",
                           d->ids[bad].hex, bad + 1, d->n, WHAT, p->h.name,
                           v[3] == GONE_EXPIRED ? "had expired"
                                                : "is unknown (released already, or never "
                                                  "acquired)");
    return DLOCK_OK;
}

static void drop_n_result(void *st, dlock__result *res) { res->count = ((drop_n *)st)->released; }

static void drop_n_done(void *st, int read)
{
    if (!read)
        read_closed(st, drop_n_read);
}

static const dlock__op_type drop_n_type = {.setup = drop_n_setup,
                                           .request = drop_n_request,
                                           .read = drop_n_read,
                                           .result = drop_n_result,
                                           .done = drop_n_done};

/* Parses n ids into d (allocated): each 32 hex characters, no two alike. */
static int parse_ids(drop_n *d, const char *const *ids, size_t n)
{
    if (!ids || n == 0)
        return dlock__fail(DLOCK_EINVAL, "no permit ids given (%s)", ids ? "n = 0" : "NULL list");
    if (n > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "%zu permit ids: at most %lld in one call", n,
                           (long long)DLOCK_COUNT_MAX);
    if (!(d->ids = calloc(n, sizeof(*d->ids))))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    d->n = n;
    for (size_t i = 0; i < n; i++) {
        int rc = parse_id(ids[i], &d->ids[i]);
        if (rc != DLOCK_OK)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (memcmp(d->ids[j].raw, d->ids[i].raw, 16) == 0)
                return dlock__fail(DLOCK_EINVAL, "permit id %s is given twice (numbers %zu and "
                                                 "%zu): nothing released",
                                   d->ids[i].hex, j + 1, i + 1);
    }
    if (!(d->raw = raw_of(d->ids, n)))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

static int drop_list(dlock_permit_semaphore *p, const char *const *ids, size_t n, int try_only,
                     int64_t *released)
{
    drop_n d = {.p = p, .try_only = try_only};
    int rc = check_call(p, NULL, NULL);
    if (rc == DLOCK_OK)
        rc = parse_ids(&d, ids, n);
    if (rc == DLOCK_OK) {
        dlock__result res;
        rc = dlock__start(&p->h, &drop_n_type, &d, sizeof(d), NULL, NULL, &res);
        if (rc == DLOCK_OK && released)
            *released = res.count;
    }
    drop_n_free(&d);
    return rc;
}

int dlock_permit_semaphore_release_list(dlock_permit_semaphore *p, const char *const *ids,
                                        size_t n)
{
    return drop_list(p, ids, n, 0, NULL);
}

int dlock_permit_semaphore_try_release_list(dlock_permit_semaphore *p, const char *const *ids,
                                            size_t n, int64_t *released)
{
    return drop_list(p, ids, n, 1, released);
}

/* n permits taken together. */
typedef struct grab_n {
    dlock_permit_semaphore *p;
    int64_t lease;           /* the caller's: ms or DLOCK_WATCHDOG */
    int64_t lease_ms;        /* the lease the script sets */
    int64_t ends_in;         /* the last busy answer: earliest lease end, ms (-1 none) */
    size_t n;
    permit_id *ids;          /* owned (n), fixed for the whole call */
    unsigned char *raw;      /* owned (16 n) */
    size_t watched;          /* watchdog permits scheduled */
    drop_n back;             /* a give-back's release (borrows ids and raw) */
} grab_n;

/* KEYS: semaphore, leases, channel; ARGV: lease, ids (scripts/permits/acquire_n.lua). */
static void grab_n_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    grab_n *g = st;
    atomic_store(&g->p->attempted, 1);   /* the delay is fixed from now on */
    three_keys(op, DLOCK__SCRIPT_PERMITS_ACQUIRE_N, g->p);
    dlock__op_argi(op, g->lease_ms);
    dlock__op_arg(op, (const char *)g->raw, 16 * g->n);
    delay_arg(g->p, op);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int grab_n_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    grab_n *g = st;
    if (rc == DLOCK_EREDIS && res && res->err == DLOCK__RERR_OVER_TOTAL)
        /* n above the total: refused before anything was written; the
         * script's words after "ERR" ("<n> permits asked of ...") */
        return dlock__fail(DLOCK_EINVAL, "%s '%s': %.*s", WHAT, g->p->h.name, 120,
                           dlock__redis_error_detail(res->text));
    return take_answer(g->p, rc, res, b, &g->ends_in);
}

static int grab_n_keep(void *st, int64_t sent_ms)
{
    grab_n *g = st;
    if (g->lease != DLOCK_WATCHDOG)
        return DLOCK_OK;
    for (; g->watched < g->n; g->watched++) {
        int rc = watch(g->p, &g->ids[g->watched], sent_ms);
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

/* Permits that cannot stand go back to the pool, all of them. */
static int grab_n_give_back(void *st, dlock__op *op)
{
    grab_n *g = st;
    g->back = (drop_n){.p = g->p, .n = g->n, .ids = g->ids, .raw = g->raw, .try_only = 1};
    drop_n_setup(&g->back);
    drop_n_request(&g->back, -1, op);
    return 1;
}

static int grab_n_gave_back(void *st, int rc, dlock__res *res)
{
    grab_n *g = st;
    rc = drop_n_read(&g->back, rc, res, NULL);
    return rc == DLOCK_OK && g->back.released == 0 ? DLOCK_ENOTOWNER : rc;
}

static int grab_n_busy(void *st, const dlock__busy *b)
{
    (void)b;
    grab_n *g = st;
    if (g->ends_in >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': %zu permits not available (the earliest "
                                            "lease ends in %lld ms, or a lock-delay after a lease "
                                            "that ran out unreleased)",
                           WHAT, g->p->h.name, g->n, (long long)g->ends_in);
    return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': %zu permits not available", WHAT,
                       g->p->h.name, g->n);
}

static const dlock__op_type grab_n_type = {
    .request = grab_n_request,
    .read = grab_n_read,
    .keep = grab_n_keep,
    .give_back = grab_n_give_back,
    .gave_back = grab_n_gave_back,
    .busy_error = grab_n_busy,
    .acquires = 1,
};

static int grab_list(dlock_permit_semaphore *p, int64_t n, int64_t wait_ms, int64_t lease_ms,
                     char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    int rc = check_call(p, NULL, NULL);
    if (rc == DLOCK_OK && !ids)
        rc = dlock__fail(DLOCK_EINVAL, "the permit ids' array is NULL");
    if (rc == DLOCK_OK && n < 1)
        rc = dlock__fail(DLOCK_EINVAL, "%lld permits asked: at least 1", (long long)n);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits");
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(&(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms},
                               DLOCK__TAKES_LEASE, "a permit semaphore", &o);
    if (rc != DLOCK_OK)
        return rc;
    grab_n g = {.p = p, .lease = lease_ms, .n = (size_t)n, .ends_in = -1};
    g.lease_ms = lease_ms == DLOCK_WATCHDOG ? p->h.c->cfg.watchdog_ms : lease_ms;
    dlock__netctx_note_lease(&p->h.c->net, g.lease_ms);
    if (!(g.ids = calloc(g.n, sizeof(*g.ids))))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; i < g.n; i++) {
        dlock__random_hex32(g.ids[i].hex);
        decode(&g.ids[i]);
    }
    if (!(g.raw = raw_of(g.ids, g.n))) {
        free(g.ids);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    dlock__wait_spec spec = {.wake = dlock__wake_permits, .need = n, .wait_ms = wait_ms};
    rc = dlock__start(&p->h, &grab_n_type, &g, sizeof(g), &spec, NULL, NULL);
    for (size_t i = 0; i < g.n; i++)
        memcpy(ids[i], rc == DLOCK_OK ? g.ids[i].hex : "", rc == DLOCK_OK ? 33 : 1);
    free(g.ids);
    free(g.raw);
    return rc;
}

int dlock_permit_semaphore_acquire_n(dlock_permit_semaphore *p, int64_t n, int64_t lease_ms,
                                     char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    return grab_list(p, n, DLOCK_WAIT_FOREVER, lease_ms, ids);
}

int dlock_permit_semaphore_try_n(dlock_permit_semaphore *p, int64_t n, int64_t wait_ms,
                                         int64_t lease_ms, char (*ids)[DLOCK_PERMIT_ID_BUFSIZE])
{
    return grab_list(p, n, wait_ms, lease_ms, ids);
}

/* ------------------------------------------------- n permits, asynchronously
 *
 * The call's state is copied into the call (async.c): the copy owns the ids
 * once the driver set it up (`adopted`), and its done hook frees them; the
 * ids' text goes to the callback (dlock_async_permit_ids), owned by the
 * result, which the driver frees after the callback. Before adoption the
 * caller frees. */

typedef struct agrab_n {
    grab_n g;
    char (*hex)[DLOCK_PERMIT_ID_BUFSIZE];   /* owned (n) until the result takes it */
    int *adopted;            /* set up in the call: the copy owns what it points to */
} agrab_n;

static int agrab_n_setup(void *st)
{
    agrab_n *a = st;
    *a->adopted = 1;
    a->adopted = NULL;
    return DLOCK_OK;
}

static void agrab_n_request(void *st, int64_t waited_ms, dlock__op *op)
{
    grab_n_request(&((agrab_n *)st)->g, waited_ms, op);
}

static int agrab_n_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    return grab_n_read(&((agrab_n *)st)->g, rc, res, b);
}

static int agrab_n_keep(void *st, int64_t sent_ms) { return grab_n_keep(&((agrab_n *)st)->g, sent_ms); }

static int agrab_n_give_back(void *st, dlock__op *op)
{
    return grab_n_give_back(&((agrab_n *)st)->g, op);
}

static int agrab_n_gave_back(void *st, int rc, dlock__res *res)
{
    return grab_n_gave_back(&((agrab_n *)st)->g, rc, res);
}

static int agrab_n_busy(void *st, const dlock__busy *b) { return grab_n_busy(&((agrab_n *)st)->g, b); }

static void agrab_n_result(void *st, dlock__result *res)
{
    agrab_n *a = st;
    res->permit_ids = (const char(*)[DLOCK_PERMIT_ID_BUFSIZE])a->hex;
    res->n_ids = a->g.n;
    res->permit_id = a->hex[0];
    res->count = (int64_t)a->g.n;
    res->owned = a->hex;
    a->hex = NULL;
}

static void agrab_n_done(void *st, int read)
{
    (void)read;
    agrab_n *a = st;
    free(a->g.ids);
    free(a->g.raw);
    free(a->hex);
    a->g.ids = NULL;
    a->g.raw = NULL;
    a->hex = NULL;
}

static const dlock__op_type agrab_n_type = {
    .setup = agrab_n_setup,
    .request = agrab_n_request,
    .read = agrab_n_read,
    .keep = agrab_n_keep,
    .give_back = agrab_n_give_back,
    .gave_back = agrab_n_gave_back,
    .busy_error = agrab_n_busy,
    .result = agrab_n_result,
    .done = agrab_n_done,
    .acquires = 1,
};

int dlock_permit_semaphore_acquire_n_async(dlock_permit_semaphore *p, int64_t n,
                                           const dlock_wait_opts *opts, dlock_async_fn fn,
                                           void *ud)
{
    dlock_wait_opts o;
    int rc = check_call(p, NULL, NULL);
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE, "a permit semaphore", &o);
    if (rc == DLOCK_OK && n < 1)
        rc = dlock__fail(DLOCK_EINVAL, "%lld permits asked: at least 1", (long long)n);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(n, 1, "permits");
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    int adopted = 0;
    agrab_n a = {.g = {.p = p, .lease = o.lease_ms, .n = (size_t)n, .ends_in = -1},
                 .adopted = &adopted};
    a.g.lease_ms = o.lease_ms == DLOCK_WATCHDOG ? p->h.c->cfg.watchdog_ms : o.lease_ms;
    dlock__netctx_note_lease(&p->h.c->net, a.g.lease_ms);
    a.g.ids = calloc(a.g.n, sizeof(*a.g.ids));
    a.hex = calloc(a.g.n, sizeof(*a.hex));
    if (a.g.ids && a.hex) {
        for (size_t i = 0; i < a.g.n; i++) {
            dlock__random_hex32(a.g.ids[i].hex);
            decode(&a.g.ids[i]);
            memcpy(a.hex[i], a.g.ids[i].hex, DLOCK_PERMIT_ID_BUFSIZE);
        }
        a.g.raw = raw_of(a.g.ids, a.g.n);
    }
    if (!a.g.raw) {
        agrab_n_done(&a, 0);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    dlock__wait_spec spec = {.wake = dlock__wake_permits, .need = n, .wait_ms = o.wait_ms,
                             .cancel = o.cancel};
    rc = dlock__start(&p->h, &agrab_n_type, &a, sizeof(a), &spec, &(dlock__via){fn, ud, 0}, NULL);
    if (!adopted)
        agrab_n_done(&a, 0);
    return rc;
}

/* A list release, asynchronously: the copy owns the ids once set up. */
typedef struct adrop_n {
    drop_n d;
    int *adopted;
} adrop_n;

static int adrop_n_setup(void *st)
{
    adrop_n *a = st;
    *a->adopted = 1;
    a->adopted = NULL;
    return drop_n_setup(&a->d);
}

static void adrop_n_request(void *st, int64_t waited_ms, dlock__op *op)
{
    drop_n_request(&((adrop_n *)st)->d, waited_ms, op);
}

static int adrop_n_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    return drop_n_read(&((adrop_n *)st)->d, rc, res, b);
}

static void adrop_n_result(void *st, dlock__result *res)
{
    int64_t k = ((adrop_n *)st)->d.released;
    res->count = k;
    res->flag = k > 0;
}

static void adrop_n_done(void *st, int read)
{
    adrop_n *a = st;
    drop_n_done(&a->d, read);
    drop_n_free(&a->d);
}

static const dlock__op_type adrop_n_type = {.setup = adrop_n_setup,
                                            .request = adrop_n_request,
                                            .read = adrop_n_read,
                                            .result = adrop_n_result,
                                            .done = adrop_n_done};

static int drop_list_async(dlock_permit_semaphore *p, const char *const *ids, size_t n,
                           int try_only, dlock_async_fn fn, void *ud)
{
    int adopted = 0;
    adrop_n a = {.d = {.p = p, .try_only = try_only}, .adopted = &adopted};
    int rc = check_call(p, NULL, NULL);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc == DLOCK_OK)
        rc = parse_ids(&a.d, ids, n);
    if (rc == DLOCK_OK)
        rc = dlock__start(&p->h, &adrop_n_type, &a, sizeof(a), NULL, &(dlock__via){fn, ud, 0}, NULL);
    if (!adopted)
        drop_n_free(&a.d);
    return rc;
}

int dlock_permit_semaphore_release_list_async(dlock_permit_semaphore *p, const char *const *ids,
                                              size_t n, dlock_async_fn fn, void *ud)
{
    return drop_list_async(p, ids, n, 0, fn, ud);
}

int dlock_permit_semaphore_try_release_list_async(dlock_permit_semaphore *p,
                                                  const char *const *ids, size_t n,
                                                  dlock_async_fn fn, void *ud)
{
    return drop_list_async(p, ids, n, 1, fn, ud);
}

int dlock_permit_semaphore_acquired_async(dlock_permit_semaphore *p, dlock_async_fn fn, void *ud)
{
    return count(p, DLOCK__COUNT_HELD, 0, &(dlock__via){fn, ud, 0}, NULL, NULL);
}

int dlock_permit_semaphore_permits_async(dlock_permit_semaphore *p, dlock_async_fn fn, void *ud)
{
    return count(p, DLOCK__COUNT_TOTAL, 0, &(dlock__via){fn, ud, 0}, NULL, NULL);
}

/* ------------------------------------------------------------ lease left */

typedef struct lease_q {
    dlock_permit_semaphore *p;
    permit_id id;
    int64_t left;
} lease_q;

/* KEYS: semaphore, leases, channel; ARGV: id (scripts/permits/lease.lua). */
static void lease_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    lease_q *q = st;
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_LEASE, q->p, &q->id);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int lease_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    lease_q *q = st;
    if (rc != DLOCK_OK)
        return dlock__refused(&q->p->h, rc, res);
    if (dlock__reply_integer(res->r, &q->left) != DLOCK_OK || q->left < -2 || q->left == 0)
        return dlock__proto(&q->p->h, "lease time", res->r);
    freeReplyObject(res->r);
    if (q->left == -2)
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is not held: released, "
                                            "expired, or never acquired",
                           q->id.hex, WHAT, q->p->h.name);
    return DLOCK_OK;
}

static void lease_result(void *st, dlock__result *res) { res->count = ((lease_q *)st)->left; }

static const dlock__op_type lease_type = {
    .request = lease_request, .read = lease_read, .result = lease_result};

static int lease_time(dlock_permit_semaphore *p, const char *id, const dlock__via *via,
                      int64_t *ms)
{
    lease_q q = {.p = p};
    int rc = check_call(p, id, &q.id);
    if (rc == DLOCK_OK && !via && !ms)
        rc = dlock__fail(DLOCK_EINVAL, "the out-parameter is NULL");
    if (rc != DLOCK_OK)
        return rc;
    dlock__result res;
    rc = dlock__start(&p->h, &lease_type, &q, sizeof(q), NULL, via, &res);
    if (rc == DLOCK_OK && !via)
        *ms = res.count;
    return rc;
}

int dlock_permit_semaphore_lease_time(dlock_permit_semaphore *p, const char *id, int64_t *ms)
{
    return lease_time(p, id, NULL, ms);
}

int dlock_permit_semaphore_lease_time_async(dlock_permit_semaphore *p, const char *id,
                                            dlock_async_fn fn, void *ud)
{
    return lease_time(p, id, &(dlock__via){fn, ud, 0}, NULL);
}
