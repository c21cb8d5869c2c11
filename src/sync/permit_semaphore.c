/* The permit-expirable semaphore (Redisson's RPermitExpirableSemaphore):
 * the available count at `name` (a string, as the plain semaphore's), each
 * held permit in the sorted set {name}:timeout (member = the id's 16 bytes,
 * score = the epoch ms its lease ends), wake-ups on redisson_sc:{name}
 * (scripts/permits/). This file: the handle, its keys and permit ids, and
 * the queries (the counts, a lease left, a lease updated); acquisitions in
 * permit_acquire.c, releases in permit_release.c (sync/permit.h).
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

#include "sync/permit.h"

static const char WHAT[] = "permit-expirable semaphore";

/* Renewal of watchdog permits: KEYS = (semaphore, leases) per permit, ARGV =
 * its id (scripts/permits/renew.lua). The lost callback gets the semaphore's
 * name and the id. */
static const dlock__hold_kind permit_hold = {"permit", DLOCK__SCRIPT_PERMITS_RENEW, 2, 1, 1};
/* With a lock-delay: the set dlock_permit_delay:{name} a third key, the
 * delay a second argument. */
static const dlock__hold_kind permit_delay_hold = {"permit", DLOCK__SCRIPT_PERMITS_RENEW, 3, 2, 1};


static void decode(dlock__permit_id *id)
{
    for (int i = 0; i < 16; i++)
        id->raw[i] = (unsigned char)(dlock__hexval(id->hex[2 * i]) << 4 | dlock__hexval(id->hex[2 * i + 1]));
}

void dlock__permit_new_id(dlock__permit_id *id)
{
    dlock__random_hex32(id->hex);
    decode(id);
}

unsigned char *dlock__permit_raw(const dlock__permit_id *ids, size_t n)
{
    unsigned char *raw = malloc(16 * n);
    for (size_t i = 0; raw && i < n; i++)
        memcpy(raw + 16 * i, ids[i].raw, 16);
    return raw;
}

int dlock__permit_parse_id(const char *s, dlock__permit_id *id)
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

void dlock__permit_hold(const dlock_permit_semaphore *p, const dlock__permit_id *id,
                        dlock__hold_id *h)
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
void dlock__permit_delay_arg(const dlock_permit_semaphore *p, dlock__op *op)
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
void dlock__permit_keys(dlock__op *op, int script, const dlock_permit_semaphore *p)
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
void dlock__permit_keys_id(dlock__op *op, int script, const dlock_permit_semaphore *p,
                           const dlock__permit_id *id)
{
    dlock__permit_keys(op, script, p);
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

int dlock_permit_semaphore_replica_acks(const dlock_permit_semaphore *p)
{
    return dlock__handle_acks_of(p ? &p->h : NULL);
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
    p->lost = (dlock__lost_cb){.fn = fn, .ud = ud};
    pthread_mutex_unlock(&p->mu);
}

void dlock_permit_semaphore_set_lost_cause_callback(dlock_permit_semaphore *p,
                                                    dlock_lost_cause_fn fn, void *ud)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->lost = (dlock__lost_cb){.cfn = fn, .ud = ud};
    pthread_mutex_unlock(&p->mu);
}

int dlock__permit_watch(dlock_permit_semaphore *p, const dlock__permit_id *id, int64_t sent_ms)
{
    dlock__hold_id h;
    dlock__permit_hold(p, id, &h);
    pthread_mutex_lock(&p->mu);
    dlock__lost_cb cb = p->lost;
    pthread_mutex_unlock(&p->mu);
    return dlock__watchdog_add(p->h.c->wd, &h, sent_ms, &cb);
}

int dlock__permit_check(const dlock_permit_semaphore *p, const char *s, dlock__permit_id *id)
{
    int rc = dlock__check_handle(p, "semaphore");
    return rc == DLOCK_OK && id ? dlock__permit_parse_id(s, id) : rc;
}

/* ------------------------------------------------------------- lease */

typedef struct update {
    dlock_permit_semaphore *p;
    dlock__permit_id id;
    int64_t lease;
} update;

/* KEYS: semaphore, leases, channel; ARGV: id, lease (scripts/permits/update.lua). */
static void update_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    update *u = st;
    dlock__permit_keys_id(op, DLOCK__SCRIPT_PERMITS_UPDATE, u->p, &u->id);
    dlock__op_argi(op, u->lease == DLOCK_WATCHDOG ? u->p->h.c->cfg.watchdog_ms : u->lease);
    dlock__permit_delay_arg(u->p, op);
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
    dlock__permit_hold(p, &u->id, &h);
    if (!updated) {
        /* A watchdog permit of ours found gone was lost: reported so. */
        dlock__watchdog_release_end(p->h.c->wd, &h, DLOCK__RELEASE_NOT_HELD);
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is not held: released, "
                                            "expired, or never acquired",
                           u->id.hex, p->h.what, p->h.name);
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
    return u->lease == DLOCK_WATCHDOG ? dlock__permit_watch(u->p, &u->id, sent_ms) : DLOCK_OK;
}

static const dlock__op_type update_type = {
    .request = update_request, .read = update_read, .keep = update_keep};

static int update_lease(dlock_permit_semaphore *p, const char *id, int64_t lease_ms,
                        const dlock__via *via)
{
    update u = {.p = p, .lease = lease_ms};
    int rc = dlock__permit_check(p, id, &u.id);
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
    dlock__permit_id id;
    int64_t left;
} lease_q;

/* KEYS: semaphore, leases, channel; ARGV: id (scripts/permits/lease.lua). */
static void lease_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    lease_q *q = st;
    dlock__permit_keys_id(op, DLOCK__SCRIPT_PERMITS_LEASE, q->p, &q->id);
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
                           q->id.hex, q->p->h.what, q->p->h.name);
    return DLOCK_OK;
}

static void lease_result(void *st, dlock__result *res) { res->count = ((lease_q *)st)->left; }

static const dlock__op_type lease_type = {
    .request = lease_request, .read = lease_read, .result = lease_result};

static int lease_time(dlock_permit_semaphore *p, const char *id, const dlock__via *via,
                      int64_t *ms)
{
    lease_q q = {.p = p};
    int rc = dlock__permit_check(p, id, &q.id);
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
