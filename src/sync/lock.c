/* The reentrant lock (Redisson's RLock). The Redis work is in scripts/lock/
 * (one .lua per operation); this file builds their arguments, reads their
 * answers, keeps the watchdog's schedule in step, and hands the wait loop
 * (wait.c) its attempt. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

struct dlock_lock {
    dlock_client *c;
    char *name;
    size_t nlen;
    char *channel;           /* redisson_lock__channel:{name} */
    size_t clen;
    char *token_key;         /* redisson_lock_token:{name} */
    size_t tlen;
    char *latch_prefix;      /* redisson_unlock_latch:{name}: */
    size_t lplen;
    char *reserve_key;       /* dlock_lock_next:{name} */
    size_t rlen;
    char *owner;             /* explicit owner id, or NULL for the calling thread */
    size_t olen;
    atomic_int heard;        /* the last release through this handle woke some client */
    pthread_mutex_t mu;      /* guards fn, ud */
    dlock_lost_fn fn;
    void *ud;
};

/* The owner id a call acts for. */
typedef struct owner_buf {
    char buf[DLOCK_OWNER_BUFSIZE];
    const char *id;
    size_t len;
} owner_buf;

static void owner_of(const dlock_lock *l, owner_buf *o)
{
    if (l->owner) {
        o->id = l->owner;
        o->len = l->olen;
    } else {
        o->len = dlock__owner_of_thread(l->c, o->buf);
        o->id = o->buf;
    }
}

/* How the watchdog renews a reentrant lock's hold: KEYS = the lock, ARGV = its
 * owner (scripts/lock/renew.lua). */
static const dlock__hold_kind lock_hold = {"lock", DLOCK__SCRIPT_LOCK_RENEW, 1, 1};

static dlock__hold_id hold_of(const dlock_lock *l, const owner_buf *o)
{
    dlock__hold_id id = {.kind = &lock_hold, .owner = o->id, .olen = o->len};
    id.part[0] = l->name;
    id.len[0] = l->nlen;
    id.part[1] = o->id;
    id.len[1] = o->len;
    return id;
}

void dlock_lock_free(dlock_lock *l)
{
    if (!l)
        return;
    free(l->name);
    free(l->channel);
    free(l->token_key);
    free(l->latch_prefix);
    free(l->reserve_key);
    free(l->owner);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static int lock_new(dlock_client *c, const char *name, const char *owner, dlock_lock **out)
{
    dlock__clear_error();
    if (!out)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    size_t nlen = 0, olen = 0;
    int rc = dlock__check_name(name, &nlen);
    if (rc == DLOCK_OK && owner)
        rc = dlock__check_owner(owner, &olen);
    if (rc != DLOCK_OK)
        return rc;
    dlock_lock *l = calloc(1, sizeof(*l));
    if (!l)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    l->c = c;
    l->nlen = nlen;
    l->name = dlock__strndup(name, nlen);
    l->channel = dlock__prefixed("redisson_lock__channel", name, nlen, "", &l->clen);
    l->token_key = dlock__prefixed("redisson_lock_token", name, nlen, "", &l->tlen);
    l->latch_prefix = dlock__prefixed("redisson_unlock_latch", name, nlen, ":", &l->lplen);
    l->reserve_key = dlock__prefixed("dlock_lock_next", name, nlen, "", &l->rlen);
    if (owner) {
        l->owner = dlock__strndup(owner, olen);
        l->olen = olen;
    }
    if (!l->name || !l->channel || !l->token_key || !l->latch_prefix || !l->reserve_key ||
        (owner && !l->owner)) {
        dlock_lock_free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = l;
    return DLOCK_OK;
}

int dlock_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return lock_new(c, name, NULL, out);
}

int dlock_lock_get_as(dlock_client *c, const char *name, const char *owner, dlock_lock **out)
{
    if (!owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    return lock_new(c, name, owner, out);
}

const char *dlock_lock_name(const dlock_lock *l) { return l ? l->name : ""; }

void dlock_lock_set_lost_callback(dlock_lock *l, dlock_lost_fn fn, void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->fn = fn;
    l->ud = ud;
    pthread_mutex_unlock(&l->mu);
}

/* ------------------------------------------------------------- acquire */

#define BUSY DLOCK__BUSY   /* attempt(): held by someone else; *ttl set */

static int call(dlock_lock *l, int script, int nkeys, int argc, const char **argv,
                const size_t *lens, unsigned flags, dlock_cancel *cancel, redisReply **r)
{
    dlock__req req = {.script = script, .nkeys = nkeys, .argc = argc, .argv = argv,
                      .lens = lens, .flags = flags, .cancel = cancel};
    return dlock__call(l->c, &req, r);
}

static int proto_error(dlock_lock *l, const char *what, redisReply *r)
{
    int type = r ? r->type : -1;
    if (r)
        freeReplyObject(r);
    return dlock__fail(DLOCK_EPROTO, "unexpected reply type %d to %s of '%s'", type, what,
                       l->name);
}

/* The verdict for a key that is not a lock, with Redis's words for what it
 * holds (the scripts say "WRONGTYPE the key holds a read-write lock", ...). */
static int wrong_type(const dlock_lock *l)
{
    const char *why = strstr(dlock_last_error(), "WRONGTYPE");
    char detail[200];
    snprintf(detail, sizeof(detail), "%s", why ? why + 9 : "");
    return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a lock:%s", l->name,
                       detail[0] ? detail : " it holds another type");
}

/* A script call that names the reservation key at argv[with_key]. When the
 * client does not use reservations, or Redis refuses the key (an ACL that
 * allows Redisson's keys only: NOPERM, answered before the script runs), it is
 * left out; after such a refusal, if the call then goes through, the client
 * stops using reservations (logged once). */
static int call_reserving(dlock_lock *l, int script, int nkeys, int argc, const char **argv,
                          const size_t *lens, int with_key, unsigned flags, dlock_cancel *cancel,
                          int64_t latch_ms, redisReply **r)
{
    dlock_client *c = l->c;
    dlock__req req = {.script = script, .nkeys = nkeys, .argc = argc, .argv = argv,
                      .lens = lens, .flags = flags, .cancel = cancel, .latch_ms = latch_ms};
    int on = atomic_load_explicit(&c->reserve_on, memory_order_relaxed);
    if (on) {
        int rc = dlock__call(c, &req, r);
        if (rc != DLOCK_EAUTH || !strstr(dlock_last_error(), "NOPERM") ||
            !strstr(dlock_last_error(), "key"))
            return rc;
    }
    const char *av[16];
    size_t ln[16];
    int k = 0;
    for (int i = 0; i < argc && k < 16; i++) {
        if (i == with_key)
            continue;
        av[k] = argv[i];
        ln[k++] = lens[i];
    }
    req.nkeys = nkeys - 1;
    req.argc = k;
    req.argv = av;
    req.lens = ln;
    int rc = dlock__call(c, &req, r);
    if (on && !(rc == DLOCK_EAUTH && strstr(dlock_last_error(), "NOPERM")) &&
        atomic_exchange(&c->reserve_on, 0))
        dlock__log(&c->cfg, DLOCK_LOG_WARN,
                   "Redis refuses the key %s to this user (ACL): waiters no longer reserve "
                   "turns (allow ~dlock_lock_next:* to keep them)",
                   l->reserve_key);
    return rc;
}

/* One acquisition attempt: DLOCK_OK (acquired), BUSY (*ttl = how long to sleep
 * at most: the holder's PTTL, or what is left of another waiter's reservation;
 * *resv says which) or an error. `claim`: reserve the next turn if the lock is
 * held. Schedules the watchdog for DLOCK_WATCHDOG holds. */
static int attempt(dlock_lock *l, const owner_buf *o, int64_t lease, int fenced, int claim,
                   dlock_cancel *cancel, int64_t *ttl, uint64_t *token, int *resv)
{
    dlock_client *c = l->c;
    char lease_s[24];
    size_t lease_n = dlock__fmt_i64(lease_s, lease == DLOCK_WATCHDOG ? c->cfg.watchdog_ms : lease);
    const char *argv[] = {l->name, l->token_key, l->reserve_key, lease_s, o->id,
                          fenced ? "1" : "0", claim ? "1" : "0", DLOCK__RESERVE_GRACE_ARG};
    const size_t lens[] = {l->nlen, l->tlen, l->rlen, lease_n, o->len, 1, 1,
                           sizeof(DLOCK__RESERVE_GRACE_ARG) - 1};
    /* Taken before sending, so the watchdog's deadline is never later than Redis's. */
    int64_t sent = dlock__now_ms();
    dlock__attempts++;
    redisReply *r;
    int rc = call_reserving(l, DLOCK__SCRIPT_LOCK_ACQUIRE, 3, 8, argv, lens, 2, 0, cancel, 0, &r);
    if (rc != DLOCK_OK)
        return rc == DLOCK_EWRONGTYPE ? wrong_type(l) : rc;
    rc = dlock__reply_acquire(r, fenced, ttl, token, resv);
    if (rc == DLOCK_EPROTO)
        return proto_error(l, "acquire", r);
    freeReplyObject(r);
    if (rc == DLOCK__BUSY)
        return BUSY;
    dlock__hold_id id = hold_of(l, o);
    if (lease != DLOCK_WATCHDOG) {
        dlock__watchdog_lease_reentry(c->wd, &id, sent, lease);
        return DLOCK_OK;
    }
    pthread_mutex_lock(&l->mu);
    dlock_lost_fn fn = l->fn;
    void *ud = l->ud;
    pthread_mutex_unlock(&l->mu);
    rc = dlock__watchdog_add(c->wd, &id, sent, fn, ud);
    if (rc != DLOCK_OK) {
        /* Held but not renewable: give it back rather than let it lapse unseen. */
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        dlock_lock_release(l);
        return dlock__fail(rc, "%s", msg);
    }
    return DLOCK_OK;
}

static int check_times(int64_t wait_ms, int64_t lease_ms)
{
    if (lease_ms != DLOCK_WATCHDOG && lease_ms <= 0)
        return dlock__fail(DLOCK_EINVAL,
                           "lease %lld ms: use a positive lease or DLOCK_WATCHDOG",
                           (long long)lease_ms);
    if (lease_ms > (int64_t)1 << 50)
        return dlock__fail(DLOCK_EINVAL, "lease %lld ms is too long", (long long)lease_ms);
    if (wait_ms < DLOCK_WAIT_FOREVER)
        return dlock__fail(DLOCK_EINVAL,
                           "wait %lld ms: use 0 (try once), a positive wait or DLOCK_WAIT_FOREVER",
                           (long long)wait_ms);
    return DLOCK_OK;
}

static int busy_message(dlock_lock *l, int64_t ttl, int resv)
{
    if (resv == DLOCK__RESV_OTHER)
        return dlock__fail(DLOCK_ETIMEDOUT,
                           "'%s' is free but its next turn is reserved for a waiter that has "
                           "waited long (for %lld ms more)",
                           l->name, (long long)ttl);
    if (ttl >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is held by another owner (expires in %lld ms)",
                           l->name, (long long)ttl);
    return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is held by another owner (no expiry)", l->name);
}

/* A waiter that reserved the next turn and gives up (deadline, cancellation)
 * hands it back, so the others need not wait out its grace. Best effort: one
 * try on an idle pooled connection, no retry, so a cancellation is not held
 * up; it keeps the caller's error message. Should it fail, the reservation
 * lapses by itself. */
static void unclaim(dlock_lock *l, const owner_buf *o, int code)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    const char *argv[] = {l->name, l->reserve_key, l->channel, o->id};
    const size_t lens[] = {l->nlen, l->rlen, l->clen, o->len};
    redisReply *r = NULL;
    if (call(l, DLOCK__SCRIPT_LOCK_UNCLAIM, 3, 4, argv, lens,
             DLOCK__CALL_NO_RETRY | DLOCK__CALL_IDLE_ONLY, NULL, &r) == DLOCK_OK)
        freeReplyObject(r);
    dlock__fail(code, "%s", msg);
}

/* One acquisition as the wait loop drives it. */
typedef struct acquisition {
    dlock_lock *l;
    owner_buf o;
    int64_t lease;
    int fenced;
    dlock_cancel *cancel;
    uint64_t token;
    int resv;                /* the last busy answer's reservation state */
} acquisition;

static int acq_attempt(void *ud, int64_t waited_ms, dlock__busy *b)
{
    acquisition *a = ud;
    /* A waiter that has waited long enough asks for the next turn. */
    int64_t after = a->l->c->cfg.priority_after_ms;
    int claim = waited_ms >= 0 && after != DLOCK_PRIORITY_OFF && waited_ms >= after;
    int64_t ttl = -1;
    int rc = attempt(a->l, &a->o, a->lease, a->fenced, claim, a->cancel, &ttl, &a->token,
                     &a->resv);
    if (rc == BUSY) {
        b->ttl = ttl;
        b->first = a->resv == DLOCK__RESV_MINE;
    }
    return rc;
}

static int acq_busy_error(void *ud, const dlock__busy *b)
{
    acquisition *a = ud;
    return busy_message(a->l, b->ttl, a->resv);
}

static void acq_give_up(void *ud, int rc)
{
    acquisition *a = ud;
    if (a->resv == DLOCK__RESV_MINE && (rc == DLOCK_ETIMEDOUT || rc == DLOCK_ECANCELED))
        unclaim(a->l, &a->o, rc);
}

static int acquire(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, dlock_cancel *cancel,
                   uint64_t *token)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    int rc = check_times(wait_ms, lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    acquisition a = {.l = l, .lease = lease_ms, .fenced = token != NULL, .cancel = cancel};
    owner_of(l, &a.o);
    dlock__wait_spec spec = {.name = l->name, .channel = l->channel, .clen = l->clen,
                             .wait_ms = wait_ms, .cancel = cancel};
    dlock__wait_ops ops = {acq_attempt, acq_busy_error, acq_give_up, &a};
    rc = dlock__wait(l->c, &spec, &ops);
    if (rc == DLOCK_OK && token)
        *token = a.token;
    return rc;
}

int dlock_lock_acquire(dlock_lock *l, int64_t lease_ms)
{
    return acquire(l, DLOCK_WAIT_FOREVER, lease_ms, NULL, NULL);
}

int dlock_lock_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return acquire(l, wait_ms, lease_ms, NULL, NULL);
}

int dlock_lock_acquire_cancellable(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                                   dlock_cancel *cancel)
{
    return acquire(l, wait_ms, lease_ms, cancel, NULL);
}

int dlock_lock_acquire_fenced(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                              dlock_cancel *cancel, uint64_t *token)
{
    if (!token) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "token is NULL");
    }
    return acquire(l, wait_ms, lease_ms, cancel, token);
}

/* ------------------------------------------------------------- release */

int dlock_lock_release(dlock_lock *l)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    dlock_client *c = l->c;
    owner_buf o;
    owner_of(l, &o);
    dlock__hold_id id = hold_of(l, &o);
    int renewed = dlock__watchdog_release_begin(c->wd, &id);

    /* latch key = prefix + fresh request id, kept for every retry of this call */
    char latch_stack[256];
    size_t latch_len = l->lplen + 32;
    char *latch = latch_len < sizeof(latch_stack) ? latch_stack : malloc(latch_len + 1);
    if (!latch) {
        dlock__watchdog_release_end(c->wd, &id, DLOCK__RELEASE_KEPT);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    memcpy(latch, l->latch_prefix, l->lplen);
    dlock__random_hex32(latch + l->lplen);

    char lease_s[24], px_s[24];
    size_t lease_n = dlock__fmt_i64(lease_s, renewed ? c->cfg.watchdog_ms : 0);
    size_t px_n = dlock__fmt_i64(px_s, c->latch_px);
    const char *argv[] = {l->name, l->channel, latch, l->reserve_key, o.id, lease_s, px_s,
                          DLOCK__RESERVE_GRACE_ARG};
    const size_t lens[] = {l->nlen, l->clen, latch_len, l->rlen, o.len, lease_n, px_n,
                           sizeof(DLOCK__RESERVE_GRACE_ARG) - 1};
    redisReply *r;
    /* A lock whose last release woke someone is likely contended again. */
    unsigned flags = DLOCK__CALL_IDEMPOTENT;
    if (atomic_load_explicit(&l->heard, memory_order_relaxed))
        flags |= DLOCK__CALL_PING_FIRST;
    int rc = call_reserving(l, DLOCK__SCRIPT_LOCK_RELEASE, 4, 8, argv, lens, 3, flags, NULL,
                            c->latch_px, &r);
    if (latch != latch_stack)
        free(latch);
    int outcome = DLOCK__RELEASE_KEPT, heard = 0;
    if (rc == DLOCK_OK) {
        if (dlock__reply_release(r, &outcome, &heard) != DLOCK_OK) {
            outcome = DLOCK__RELEASE_KEPT;
            rc = proto_error(l, "release", r);
        } else {
            freeReplyObject(r);
            if (outcome == DLOCK__RELEASE_GONE)
                atomic_store_explicit(&l->heard, heard, memory_order_relaxed);
            if (outcome == DLOCK__RELEASE_NOT_HELD)
                rc = dlock__fail(DLOCK_ENOTOWNER, "'%s' is not held by %s", l->name, o.id);
        }
    } else if (rc == DLOCK_EWRONGTYPE) {
        rc = wrong_type(l);
    }
    dlock__watchdog_release_end(c->wd, &id, outcome);
    return rc;
}

int dlock_lock_force_release(dlock_lock *l, int *was_locked)
{
    dlock__clear_error();
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    const char *argv[] = {l->name, l->channel};
    const size_t lens[] = {l->nlen, l->clen};
    redisReply *r;
    /* Not resent after a lost reply: its PUBLISH may already have handed the
     * lock to a waiter, whose hold a second DEL would destroy. */
    int rc = call(l, DLOCK__SCRIPT_LOCK_FORCE, 2, 2, argv, lens, 0, NULL, &r);
    if (rc != DLOCK_OK)
        return rc;
    int was = 0;
    if (dlock__reply_flag(r, &was) != DLOCK_OK)
        return proto_error(l, "force release", r);
    /* The caller's own renewal stops (as Redisson's forceUnlock does); other
     * holds of this process that the force destroyed are reported lost by
     * their next renewal, while a hold taken since is kept. */
    owner_buf o;
    owner_of(l, &o);
    dlock__hold_id id = hold_of(l, &o);
    dlock__watchdog_release_end(l->c->wd, &id, DLOCK__RELEASE_GONE);
    if (was_locked)
        *was_locked = was;
    freeReplyObject(r);
    return DLOCK_OK;
}

/* -------------------------------------------------------------- queries */


static int query(dlock_lock *l, int argc, const char **argv, const size_t *lens, redisReply **r)
{
    int rc = call(l, -1, 0, argc, argv, lens, DLOCK__CALL_IDEMPOTENT, NULL, r);
    if (rc == DLOCK_EWRONGTYPE)
        rc = wrong_type(l);
    return rc;
}

int dlock_lock_is_locked(dlock_lock *l, int *locked)
{
    dlock__clear_error();
    if (!l || !locked)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    const char *argv[] = {"TYPE", l->name};
    const size_t lens[] = {4, l->nlen};
    redisReply *r;
    int rc = query(l, 2, argv, lens, &r);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__reply_type_locked(r, locked);
    if (rc == DLOCK_EPROTO)
        return proto_error(l, "TYPE", r);
    if (rc == DLOCK_EWRONGTYPE)
        rc = dlock__fail(DLOCK_EWRONGTYPE, "key '%s' holds a %s, not a lock", l->name, r->str);
    freeReplyObject(r);
    return rc;
}

static int held_by(dlock_lock *l, const char *owner, size_t olen, int *held)
{
    const char *argv[] = {"HEXISTS", l->name, owner};
    const size_t lens[] = {7, l->nlen, olen};
    redisReply *r;
    int rc = query(l, 3, argv, lens, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__reply_flag(r, held) != DLOCK_OK)
        return proto_error(l, "HEXISTS", r);
    freeReplyObject(r);
    return DLOCK_OK;
}

int dlock_lock_is_held(dlock_lock *l, int *held)
{
    dlock__clear_error();
    if (!l || !held)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    owner_buf o;
    owner_of(l, &o);
    return held_by(l, o.id, o.len, held);
}

int dlock_lock_is_held_by(dlock_lock *l, const char *owner, int *held)
{
    dlock__clear_error();
    if (!l || !held)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    size_t olen = 0;
    int rc = dlock__check_owner(owner, &olen);
    return rc == DLOCK_OK ? held_by(l, owner, olen, held) : rc;
}

int dlock_lock_hold_count(dlock_lock *l, int64_t *count)
{
    dlock__clear_error();
    if (!l || !count)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    owner_buf o;
    owner_of(l, &o);
    const char *argv[] = {"HGET", l->name, o.id};
    const size_t lens[] = {4, l->nlen, o.len};
    redisReply *r;
    int rc = query(l, 3, argv, lens, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__reply_count(r, count) != DLOCK_OK)
        return proto_error(l, "HGET", r);
    freeReplyObject(r);
    return DLOCK_OK;
}

int dlock_lock_ttl(dlock_lock *l, int64_t *ttl_ms)
{
    dlock__clear_error();
    if (!l || !ttl_ms)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    const char *argv[] = {"PTTL", l->name};
    const size_t lens[] = {4, l->nlen};
    redisReply *r;
    int rc = query(l, 2, argv, lens, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__reply_integer(r, ttl_ms) != DLOCK_OK)
        return proto_error(l, "PTTL", r);
    freeReplyObject(r);
    return DLOCK_OK;
}

/* ----------------------------------------------------------------- run */

int dlock_lock_run(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, dlock_run_fn fn, void *ud,
                   int *fn_result)
{
    if (!fn) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "fn is NULL");
    }
    int rc = acquire(l, wait_ms, lease_ms, NULL, NULL);
    if (rc != DLOCK_OK)
        return rc;
    int res = fn(ud);
    if (fn_result)
        *fn_result = res;
    return dlock_lock_release(l);
}

const char *dlock__lock_channel(const dlock_lock *l, size_t *len)
{
    *len = l->clen;
    return l->channel;
}

dlock_client *dlock__lock_client(const dlock_lock *l) { return l->c; }
