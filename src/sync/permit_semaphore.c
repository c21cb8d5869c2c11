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
 *
 * Watchdog permits (beyond Redisson) are a watchdog hold kind: the permit
 * (semaphore, leases key, id) is renewed in the client's batched renewals
 * (scripts/permits/renew.lua), reported lost like a lock, and back in the
 * pool within the watchdog timeout once its holder stops renewing it. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "permit-expirable semaphore";

/* Renewal of watchdog permits: KEYS = (semaphore, leases) per permit, ARGV =
 * its id (scripts/permits/renew.lua). The lost callback gets the semaphore's
 * name and the id. */
static const dlock__hold_kind permit_hold = {"permit", DLOCK__SCRIPT_PERMITS_RENEW, 2, 1, 1};

struct dlock_permit_semaphore {
    dlock_client *c;
    char *name;
    size_t nlen;
    char *leases;            /* {name}:timeout */
    size_t llen;
    char *channel;           /* redisson_sc:{name} */
    size_t clen;
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

static int hex_val(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static void decode(permit_id *id)
{
    for (int i = 0; i < 16; i++)
        id->raw[i] = (unsigned char)(hex_val(id->hex[2 * i]) << 4 | hex_val(id->hex[2 * i + 1]));
}

static int parse_id(const char *s, permit_id *id)
{
    if (!s)
        return dlock__fail(DLOCK_EINVAL, "permit id is NULL");
    size_t n = strnlen(s, 33);
    int ok = n == 32;
    for (size_t i = 0; ok && i < n; i++)
        ok = hex_val(s[i]) >= 0;
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

static void new_id(permit_id *id)
{
    dlock__random_hex32(id->hex);
    decode(id);
}

static void hold_of(const dlock_permit_semaphore *p, const permit_id *id, dlock__hold_id *h)
{
    memset(h, 0, sizeof(*h));
    h->kind = &permit_hold;
    h->part[0] = p->name;
    h->len[0] = p->nlen;
    h->part[1] = p->leases;
    h->len[1] = p->llen;
    h->part[2] = (const char *)id->raw;
    h->len[2] = sizeof(id->raw);
    h->owner = id->hex;
    h->olen = 32;
}

/* The three keys every script but set takes, then the permit id. */
static void keys_and_id(dlock__op *op, int script, const dlock_permit_semaphore *p,
                        const permit_id *id)
{
    dlock__op_init(op, script);
    dlock__op_key(op, p->name, p->nlen);
    dlock__op_key(op, p->leases, p->llen);
    dlock__op_key(op, p->channel, p->clen);
    if (id)
        dlock__op_arg(op, (const char *)id->raw, sizeof(id->raw));
}

static int check_lease(int64_t lease_ms)
{
    if ((lease_ms != DLOCK_WATCHDOG && lease_ms <= 0) || lease_ms > (int64_t)1 << 50)
        return dlock__fail(DLOCK_EINVAL, "lease %lld ms: use a positive lease (up to 2^50) or "
                                         "DLOCK_WATCHDOG",
                           (long long)lease_ms);
    return DLOCK_OK;
}

/* ------------------------------------------------------------- handle */

static int bad_handle(const void *p)
{
    dlock__clear_error();
    return p ? DLOCK_OK : dlock__fail(DLOCK_EINVAL, "semaphore is NULL");
}

int dlock_permit_semaphore_get(dlock_client *c, const char *name, dlock_permit_semaphore **out)
{
    size_t nlen = 0;
    int rc = dlock__get_args(c, name, out, &nlen);
    if (out)
        *out = NULL;
    if (rc != DLOCK_OK)
        return rc;
    dlock_permit_semaphore *p = calloc(1, sizeof(*p));
    if (!p)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    p->c = c;
    p->nlen = nlen;
    p->name = dlock__strndup(name, nlen);
    p->leases = dlock__suffixed(name, nlen, "timeout", &p->llen);
    p->channel = dlock__prefixed("redisson_sc", name, nlen, "", &p->clen);
    if (!p->name || !p->leases || !p->channel) {
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
    free(p->name);
    free(p->leases);
    free(p->channel);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

const char *dlock_permit_semaphore_name(const dlock_permit_semaphore *p)
{
    return p ? p->name : "";
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
    return dlock__watchdog_add(p->c->wd, &h, sent_ms, fn, ud);
}

/* ------------------------------------------------------------- release */

enum { GONE_UNKNOWN = 0, GONE_RELEASED = 1, GONE_EXPIRED = 2 };   /* release.lua's answers */

/* A release's request: the watchdog told first; not resent after a lost
 * answer (a retry would call the permit unknown). */
static unsigned release_begin(dlock_permit_semaphore *p, const permit_id *id, dlock__op *op)
{
    dlock__hold_id h;
    hold_of(p, id, &h);
    dlock__watchdog_release_begin(p->c->wd, &h);
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_RELEASE, p, id);
    return atomic_load_explicit(&p->heard, memory_order_relaxed) ? DLOCK__CALL_PING_FIRST : 0;
}

/* Its outcome (rc: the call's status; r freed); *outcome one of the above. */
static int release_end(dlock_permit_semaphore *p, const permit_id *id, int rc, redisReply *r,
                       int *outcome)
{
    dlock__hold_id h;
    hold_of(p, id, &h);
    int64_t out = -1, heard = 0;
    if (rc == DLOCK_EWRONGTYPE)
        rc = dlock__wrong_type(WHAT, p->name);
    if (rc == DLOCK_OK) {
        if (dlock__reply_pair(r, &out, &heard) != DLOCK_OK || out < 0 || out > 2)
            rc = dlock__proto(WHAT, p->name, "release", r);
        else
            freeReplyObject(r);
    }
    /* Whatever the answer, this release attempt ends the watchdog's renewal;
     * a watchdog permit found gone was lost, and is reported so. */
    dlock__watchdog_release_end(p->c->wd, &h,
                                rc != DLOCK_OK          ? DLOCK__RELEASE_KEPT
                                : out == GONE_RELEASED ? DLOCK__RELEASE_GONE
                                                       : DLOCK__RELEASE_NOT_HELD);
    if (rc == DLOCK_OK) {
        *outcome = (int)out;
        if (out == GONE_RELEASED)
            atomic_store_explicit(&p->heard, heard > 0, memory_order_relaxed);
    }
    return rc;
}

/* One release of permit `id`; *outcome one of the above. */
static int release_once(dlock_permit_semaphore *p, const permit_id *id, int *outcome)
{
    dlock__op op;
    unsigned flags = release_begin(p, id, &op);
    redisReply *r = NULL;
    int rc = dlock__op_call(p->c, &op, flags, NULL, 0, &r);
    return release_end(p, id, rc, rc == DLOCK_OK ? r : NULL, outcome);
}

static int not_held(const dlock_permit_semaphore *p, const permit_id *id, int outcome)
{
    if (outcome == GONE_EXPIRED)
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' had expired: its lease ran "
                                            "out and it went back to the pool",
                           id->hex, WHAT, p->name);
    return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is unknown: released already, or "
                                        "never acquired",
                       id->hex, WHAT, p->name);
}

int dlock_permit_semaphore_release(dlock_permit_semaphore *p, const char *id)
{
    int rc = bad_handle(p);
    permit_id pid;
    if (rc == DLOCK_OK)
        rc = parse_id(id, &pid);
    int outcome = GONE_UNKNOWN;
    if (rc == DLOCK_OK)
        rc = release_once(p, &pid, &outcome);
    if (rc == DLOCK_OK && outcome != GONE_RELEASED)
        rc = not_held(p, &pid, outcome);
    return rc;
}

int dlock_permit_semaphore_try_release(dlock_permit_semaphore *p, const char *id, int *released)
{
    int rc = bad_handle(p);
    permit_id pid;
    if (rc == DLOCK_OK)
        rc = parse_id(id, &pid);
    int outcome = GONE_UNKNOWN;
    if (rc == DLOCK_OK)
        rc = release_once(p, &pid, &outcome);
    if (rc == DLOCK_OK && released)
        *released = outcome == GONE_RELEASED;
    return rc;
}

/* ------------------------------------------------------------- acquire */

typedef struct grab {
    dlock_permit_semaphore *p;
    permit_id id;            /* fixed for the whole call: a resent attempt is harmless */
    int64_t lease;           /* the caller's: ms or DLOCK_WATCHDOG */
    int64_t lease_ms;        /* the lease the script sets */
    dlock_cancel *cancel;
    int64_t ends_in;         /* the last busy answer: earliest lease end, ms (-1 none) */
    int64_t sent;            /* when the last attempt was sent */
} grab;

/* KEYS: semaphore, leases, channel; ARGV: id, lease (scripts/permits/acquire.lua). */
static void grab_op(void *st, int64_t waited_ms, dlock__op *op, unsigned *flags)
{
    (void)waited_ms;
    grab *g = st;
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_ACQUIRE, g->p, &g->id);
    dlock__op_argi(op, g->lease_ms);
    *flags = DLOCK__CALL_IDEMPOTENT;
}

/* An attempt's answer (rc: the call's status; r freed); sent_ms: when it
 * was sent (the watchdog's origin, never later than Redis's). */
static int grab_end(void *st, int rc, redisReply *r, int64_t sent_ms, dlock__busy *b)
{
    grab *g = st;
    g->sent = sent_ms;
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, g->p->name);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__reply_take(r, &g->ends_in);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(WHAT, g->p->name, "acquire", r);
    freeReplyObject(r);
    if (rc == DLOCK__BUSY) {
        b->ttl = g->ends_in;   /* an expiring lease brings a permit back unannounced */
        b->first = 0;
    }
    return rc;
}

/* A watchdog permit is renewed from now on. */
static int grab_keep(void *st)
{
    grab *g = st;
    return g->lease == DLOCK_WATCHDOG ? watch(g->p, &g->id, g->sent) : DLOCK_OK;
}

/* Replicas did not acknowledge the permit: back to the pool. */
static int give_back_permit(void *ud)
{
    grab *g = ud;
    int outcome;
    int rc = release_once(g->p, &g->id, &outcome);
    return rc == DLOCK_OK && outcome != GONE_RELEASED ? DLOCK_ENOTOWNER : rc;
}

static int grab_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    grab *g = ud;
    dlock_permit_semaphore *p = g->p;
    dlock__op op;
    unsigned flags = 0;
    grab_op(g, waited_ms, &op, &flags);
    int64_t sent = dlock__now_ms();
    dlock__attempts++;
    dlock__res res;
    dlock__acks_reset();
    int rc = dlock__op_call_res(p->c, &op, flags | DLOCK__CALL_WAIT_ACK, g->cancel, 0, &res);
    rc = grab_end(g, rc, res.r, sent, b);
    if (rc != DLOCK_OK)
        return rc;
    dlock__acks_record(res.acks);
    if ((rc = dlock__acks_check(p->c, WHAT, p->name, give_back_permit, g)) != DLOCK_OK)
        return rc;
    if ((rc = grab_keep(g)) != DLOCK_OK) {
        /* Held but not renewable: give it back rather than let it lapse unseen. */
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        int outcome;
        release_once(p, &g->id, &outcome);
        return dlock__fail(rc, "%s", msg);
    }
    return DLOCK_OK;
}

static int grab_busy(void *ud, const dlock__busy *b)
{
    (void)b;
    grab *g = ud;
    if (g->ends_in >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': no permit available (the earliest lease "
                                            "ends in %lld ms)",
                           WHAT, g->p->name, (long long)g->ends_in);
    return dlock__fail(DLOCK_ETIMEDOUT, "%s '%s': no permit available", WHAT, g->p->name);
}

static int grab_permit(dlock_permit_semaphore *p, int64_t wait_ms, int64_t lease_ms,
                       dlock_cancel *cancel, char *id, size_t size)
{
    int rc = bad_handle(p);
    if (rc == DLOCK_OK)
        rc = check_lease(lease_ms);
    if (rc == DLOCK_OK && wait_ms < DLOCK_WAIT_FOREVER)
        rc = dlock__fail(DLOCK_EINVAL, "wait %lld ms: use 0 (try once), a positive wait or "
                                       "DLOCK_WAIT_FOREVER",
                         (long long)wait_ms);
    if (rc == DLOCK_OK && (!id || size < DLOCK_PERMIT_ID_BUFSIZE))
        rc = dlock__fail(DLOCK_EINVAL, "the permit id needs a buffer of %d bytes",
                         DLOCK_PERMIT_ID_BUFSIZE);
    if (rc != DLOCK_OK)
        return rc;
    grab g = {.p = p, .lease = lease_ms, .cancel = cancel, .ends_in = -1};
    g.lease_ms = lease_ms == DLOCK_WATCHDOG ? p->c->cfg.watchdog_ms : lease_ms;
    new_id(&g.id);
    dlock__wait_spec spec = {.name = p->name, .channel = p->channel, .clen = p->clen,
                             .wake = dlock__wake_permits, .need = 1, .wait_ms = wait_ms,
                             .cancel = cancel};
    dlock__wait_ops ops = {grab_attempt, grab_busy, NULL, &g};
    rc = dlock__wait(p->c, &spec, &ops);
    if (rc == DLOCK_OK)
        memcpy(id, g.id.hex, DLOCK_PERMIT_ID_BUFSIZE);
    return rc;
}

int dlock_permit_semaphore_acquire(dlock_permit_semaphore *p, int64_t lease_ms, char *id,
                                   size_t size)
{
    return grab_permit(p, DLOCK_WAIT_FOREVER, lease_ms, NULL, id, size);
}

int dlock_permit_semaphore_try_acquire(dlock_permit_semaphore *p, int64_t wait_ms,
                                       int64_t lease_ms, char *id, size_t size)
{
    return grab_permit(p, wait_ms, lease_ms, NULL, id, size);
}

int dlock_permit_semaphore_acquire_cancellable(dlock_permit_semaphore *p, int64_t wait_ms,
                                               int64_t lease_ms, dlock_cancel *cancel, char *id,
                                               size_t size)
{
    return grab_permit(p, wait_ms, lease_ms, cancel, id, size);
}

/* ------------------------------------------------------------- async */

/* The permit the watchdog could not take goes back at once, as the
 * blocking call's does (nothing to tell the watchdog: it never had it). */
static int grab_give_back(void *st, dlock__op *op, unsigned *flags)
{
    grab *g = st;
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_RELEASE, g->p, &g->id);
    *flags = 0;
    return 1;
}

static void grab_result(void *st, dlock_async_result *res)
{
    res->permit_id = ((grab *)st)->id.hex;
}

static const dlock__await_type grab_type = {
    .attempt_op = grab_op,
    .attempt_end = grab_end,
    .keep = grab_keep,
    .give_back_op = grab_give_back,
    .busy_error = grab_busy,
    .result = grab_result,
};

int dlock_permit_semaphore_acquire_async(dlock_permit_semaphore *p, int64_t wait_ms,
                                         int64_t lease_ms, dlock_cancel *cancel,
                                         dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(p);
    if (rc == DLOCK_OK)
        rc = check_lease(lease_ms);
    if (rc == DLOCK_OK && wait_ms < DLOCK_WAIT_FOREVER)
        rc = dlock__fail(DLOCK_EINVAL, "wait %lld ms: use 0 (try once), a positive wait or "
                                       "DLOCK_WAIT_FOREVER",
                         (long long)wait_ms);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    grab *g = dlock__async_wait_new(p->c, &grab_type, sizeof(*g), fn, ud);
    if (!g)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    g->p = p;
    g->lease = lease_ms;
    g->lease_ms = lease_ms == DLOCK_WATCHDOG ? p->c->cfg.watchdog_ms : lease_ms;
    g->cancel = cancel;
    g->ends_in = -1;
    new_id(&g->id);
    dlock__wait_spec spec = {.name = p->name, .channel = p->channel, .clen = p->clen,
                             .wake = dlock__wake_permits, .need = 1, .wait_ms = wait_ms,
                             .cancel = cancel};
    return dlock__async_wait_start(g, &spec);
}

typedef struct drop {
    dlock_permit_semaphore *p;
    permit_id id;
    dlock__op op;
    unsigned flags;
    int try_only;            /* a try-release: not held is no error (flag 0) */
} drop;

static const dlock__op *drop_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    drop *d = st;
    (void)scratch;
    (void)latch_ms;
    *flags = d->flags;
    return &d->op;
}

static int drop_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    drop *d = st;
    int outcome = GONE_UNKNOWN;
    rc = release_end(d->p, &d->id, rc, r, &outcome);
    res->flag = rc == DLOCK_OK && outcome == GONE_RELEASED;
    if (rc == DLOCK_OK && outcome != GONE_RELEASED && !d->try_only)
        rc = not_held(d->p, &d->id, outcome);
    return rc;
}

static void drop_done(void *st, int ended)
{
    drop *d = st;
    if (!ended) {   /* closed first: the watchdog counts an attempt of unknown outcome */
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        int outcome;
        release_end(d->p, &d->id, DLOCK_ECLOSED, NULL, &outcome);
        dlock__fail(DLOCK_ECLOSED, "%s", msg);
    }
}

static const dlock__call_type drop_type = {drop_op, drop_end, drop_done};

static int drop_async(dlock_permit_semaphore *p, const char *id, int try_only,
                      dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(p);
    permit_id pid;
    if (rc == DLOCK_OK)
        rc = parse_id(id, &pid);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    drop *d = dlock__async_call_new(p->c, &drop_type, sizeof(*d), fn, ud);
    if (!d)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    d->p = p;
    d->id = pid;
    d->try_only = try_only;
    d->flags = release_begin(p, &d->id, &d->op);
    return dlock__async_call_start(d);
}

int dlock_permit_semaphore_release_async(dlock_permit_semaphore *p, const char *id,
                                         dlock_async_fn fn, void *ud)
{
    return drop_async(p, id, 0, fn, ud);
}

int dlock_permit_semaphore_try_release_async(dlock_permit_semaphore *p, const char *id,
                                             dlock_async_fn fn, void *ud)
{
    return drop_async(p, id, 1, fn, ud);
}

/* ------------------------------------------------------------- lease */

/* KEYS: semaphore, leases, channel; ARGV: id, lease (scripts/permits/update.lua). */
static void update_op(dlock_permit_semaphore *p, const permit_id *pid, int64_t lease_ms,
                      dlock__op *op)
{
    keys_and_id(op, DLOCK__SCRIPT_PERMITS_UPDATE, p, pid);
    dlock__op_argi(op, lease_ms == DLOCK_WATCHDOG ? p->c->cfg.watchdog_ms : lease_ms);
}

/* Its answer (rc: the call's status; r freed), and the watchdog told. */
static int update_end(dlock_permit_semaphore *p, const permit_id *pid, int64_t lease_ms,
                      int64_t sent, int rc, redisReply *r)
{
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, p->name);
    if (rc != DLOCK_OK)
        return rc;   /* the lease and its renewal are as they were, or it may be set */
    int updated = 0;
    if (dlock__reply_flag(r, &updated) != DLOCK_OK)
        return dlock__proto(WHAT, p->name, "update lease", r);
    freeReplyObject(r);
    dlock__hold_id h;
    hold_of(p, pid, &h);
    if (!updated) {
        /* A watchdog permit of ours found gone was lost: reported so. */
        dlock__watchdog_release_end(p->c->wd, &h, DLOCK__RELEASE_NOT_HELD);
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is not held: released, "
                                            "expired, or never acquired",
                           pid->hex, WHAT, p->name);
    }
    if (lease_ms == DLOCK_WATCHDOG)
        return watch(p, pid, sent);
    /* A fixed lease now: no more renewals (one already sent may still land). */
    dlock__watchdog_release_end(p->c->wd, &h, DLOCK__RELEASE_GONE);
    return DLOCK_OK;
}

int dlock_permit_semaphore_update_lease(dlock_permit_semaphore *p, const char *id,
                                        int64_t lease_ms)
{
    int rc = bad_handle(p);
    permit_id pid;
    if (rc == DLOCK_OK)
        rc = parse_id(id, &pid);
    if (rc == DLOCK_OK)
        rc = check_lease(lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    dlock__op op;
    update_op(p, &pid, lease_ms, &op);
    int64_t sent = dlock__now_ms();
    redisReply *r = NULL;
    rc = dlock__op_call(p->c, &op, DLOCK__CALL_IDEMPOTENT, NULL, 0, &r);
    return update_end(p, &pid, lease_ms, sent, rc, rc == DLOCK_OK ? r : NULL);
}

typedef struct upd {
    dlock_permit_semaphore *p;
    permit_id id;
    int64_t lease_ms;
    int64_t sent;
} upd;

static const dlock__op *upd_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    upd *u = st;
    (void)latch_ms;
    update_op(u->p, &u->id, u->lease_ms, scratch);
    *flags = DLOCK__CALL_IDEMPOTENT;
    u->sent = dlock__now_ms();
    return scratch;
}

static int upd_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    upd *u = st;
    (void)res;
    return update_end(u->p, &u->id, u->lease_ms, u->sent, rc, r);
}

static const dlock__call_type update_type = {upd_op, upd_end, NULL};

int dlock_permit_semaphore_update_lease_async(dlock_permit_semaphore *p, const char *id,
                                              int64_t lease_ms, dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(p);
    permit_id pid;
    if (rc == DLOCK_OK)
        rc = parse_id(id, &pid);
    if (rc == DLOCK_OK)
        rc = check_lease(lease_ms);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    upd *u = dlock__async_call_new(p->c, &update_type, sizeof(*u), fn, ud);
    if (!u)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    u->p = p;
    u->id = pid;
    u->lease_ms = lease_ms;
    return dlock__async_call_start(u);
}

/* ------------------------------------------------------------- counts */

/* The calls of one round trip on the pool's count (blocking and
 * asynchronous alike). */
enum { PQ_SET, PQ_TRY_SET, PQ_ADD, PQ_AVAILABLE };

typedef struct permit_req {
    dlock_permit_semaphore *p;
    int kind;
    int64_t arg;
} permit_req;

static void permit_req_op(const permit_req *q, dlock__op *op, unsigned *flags)
{
    dlock_permit_semaphore *p = q->p;
    switch (q->kind) {
    case PQ_SET:
    case PQ_TRY_SET:
        /* KEYS: semaphore, channel, leases; ARGV: permits, only if unset
         * (scripts/permits/set.lua). Setting the total is idempotent; setting
         * if unset is not (a retry would answer 0). */
        dlock__op_init(op, DLOCK__SCRIPT_PERMITS_SET);
        dlock__op_key(op, p->name, p->nlen);
        dlock__op_key(op, p->channel, p->clen);
        dlock__op_key(op, p->leases, p->llen);
        dlock__op_argi(op, q->arg);
        dlock__op_args(op, q->kind == PQ_TRY_SET ? "1" : "0");
        *flags = q->kind == PQ_TRY_SET ? 0 : DLOCK__CALL_IDEMPOTENT;
        break;
    case PQ_ADD:
        dlock__semaphore_add_op(op, p->name, p->nlen, p->channel, p->clen, q->arg);
        *flags = 0;
        break;
    default:
        /* KEYS: semaphore, leases, channel (scripts/permits/available.lua). */
        keys_and_id(op, DLOCK__SCRIPT_PERMITS_AVAILABLE, p, NULL);
        *flags = DLOCK__CALL_IDEMPOTENT;
        break;
    }
}

/* The answer (rc: the call's status; r freed): *v = 1/0 (set), the new
 * count (add), the available count (available, with *held). */
static int permit_req_end(const permit_req *q, int rc, redisReply *r, int64_t *v,
                          int64_t *held)
{
    dlock_permit_semaphore *p = q->p;
    if (q->kind == PQ_ADD)
        return dlock__semaphore_add_end(WHAT, p->name, rc, r, v, NULL);
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__wrong_type(WHAT, p->name);
    if (rc != DLOCK_OK)
        return rc;
    if (q->kind == PQ_AVAILABLE) {
        int64_t h = 0;
        if (dlock__reply_pair(r, v, &h) != DLOCK_OK)
            return dlock__proto(WHAT, p->name, "available", r);
        freeReplyObject(r);
        if (held)
            *held = h;
        return DLOCK_OK;
    }
    int set = 0;
    if (dlock__reply_flag(r, &set) != DLOCK_OK)
        return dlock__proto(WHAT, p->name, "set permits", r);
    freeReplyObject(r);
    *v = set;
    return DLOCK_OK;
}

static int permit_run(dlock_permit_semaphore *p, int kind, int64_t arg, int64_t *v,
                      int64_t *held)
{
    permit_req q = {p, kind, arg};
    dlock__op op;
    unsigned flags = 0;
    permit_req_op(&q, &op, &flags);
    redisReply *r = NULL;
    int rc = dlock__op_call(p->c, &op, flags, NULL, 0, &r);
    return permit_req_end(&q, rc, rc == DLOCK_OK ? r : NULL, v, held);
}

static int set_permits(dlock_permit_semaphore *p, int64_t permits, int only_if_unset,
                       int *was_set)
{
    int rc = bad_handle(p);
    if (rc == DLOCK_OK)
        rc = dlock__check_count(permits, 0, "permits");
    if (rc != DLOCK_OK)
        return rc;
    int64_t set = 0;
    rc = permit_run(p, only_if_unset ? PQ_TRY_SET : PQ_SET, permits, &set, NULL);
    if (rc == DLOCK_OK && was_set)
        *was_set = (int)set;
    return rc;
}

int dlock_permit_semaphore_available(dlock_permit_semaphore *p, int64_t *n, int64_t *held)
{
    int rc = bad_handle(p);
    if (rc != DLOCK_OK)
        return rc;
    if (!n)
        return dlock__fail(DLOCK_EINVAL, "out-parameter is NULL");
    return permit_run(p, PQ_AVAILABLE, 0, n, held);
}

/* ------------------------------------------------------ async, one trip */

static const dlock__op *pq_op(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms)
{
    (void)latch_ms;
    permit_req_op(st, scratch, flags);
    return scratch;
}

static int pq_end(void *st, int rc, redisReply *r, dlock_async_result *res)
{
    const permit_req *q = st;
    int64_t v = 0;
    rc = permit_req_end(q, rc, r, &v, NULL);
    if (rc == DLOCK_OK) {
        if (q->kind == PQ_SET || q->kind == PQ_TRY_SET)
            res->flag = (int)v;
        else
            res->count = v;
    }
    return rc;
}

static const dlock__call_type permit_call = {pq_op, pq_end, NULL};

static int permit_async(dlock_permit_semaphore *p, int kind, int64_t arg, dlock_async_fn fn,
                        void *ud)
{
    int rc = bad_handle(p);
    if (rc == DLOCK_OK && (kind == PQ_SET || kind == PQ_TRY_SET))
        rc = dlock__check_count(arg, 0, "permits");
    if (rc == DLOCK_OK && kind == PQ_ADD &&
        (arg == 0 || arg < -DLOCK_COUNT_MAX || arg > DLOCK_COUNT_MAX))
        rc = dlock__fail(DLOCK_EINVAL, "permits to add %lld: use a non-zero change within "
                                       "+-%lld",
                         (long long)arg, (long long)DLOCK_COUNT_MAX);
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    permit_req *q = dlock__async_call_new(p->c, &permit_call, sizeof(*q), fn, ud);
    if (!q)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    *q = (permit_req){p, kind, arg};
    return dlock__async_call_start(q);
}

int dlock_permit_semaphore_set_permits_async(dlock_permit_semaphore *p, int64_t permits,
                                             dlock_async_fn fn, void *ud)
{
    return permit_async(p, PQ_SET, permits, fn, ud);
}

int dlock_permit_semaphore_try_set_permits_async(dlock_permit_semaphore *p, int64_t permits,
                                                 dlock_async_fn fn, void *ud)
{
    return permit_async(p, PQ_TRY_SET, permits, fn, ud);
}

int dlock_permit_semaphore_add_permits_async(dlock_permit_semaphore *p, int64_t delta,
                                             dlock_async_fn fn, void *ud)
{
    return permit_async(p, PQ_ADD, delta, fn, ud);
}

int dlock_permit_semaphore_available_async(dlock_permit_semaphore *p, dlock_async_fn fn,
                                           void *ud)
{
    return permit_async(p, PQ_AVAILABLE, 0, fn, ud);
}

int dlock_permit_semaphore_try_set_permits(dlock_permit_semaphore *p, int64_t permits,
                                           int *was_set)
{
    return set_permits(p, permits, 1, was_set);
}

int dlock_permit_semaphore_set_permits(dlock_permit_semaphore *p, int64_t permits)
{
    return set_permits(p, permits, 0, NULL);
}

int dlock_permit_semaphore_add_permits(dlock_permit_semaphore *p, int64_t delta)
{
    int rc = bad_handle(p);
    if (rc != DLOCK_OK)
        return rc;
    if (delta == 0 || delta < -DLOCK_COUNT_MAX || delta > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "permits to add %lld: use a non-zero change within "
                                         "+-%lld",
                           (long long)delta, (long long)DLOCK_COUNT_MAX);
    return dlock__semaphore_add(p->c, WHAT, p->name, p->nlen, p->channel, p->clen, delta, 0,
                                NULL, NULL);
}
