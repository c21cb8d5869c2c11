/* The semaphores' lifecycle, as Redisson users call it every day: delete,
 * expire and TTL of every key of the object, trySetPermits with a time to
 * live and releaseIfExists (plain semaphore), acquiredPermits and getPermits
 * as direct calls (permit-expirable semaphore). Both handles start with a
 * dlock__handle whose channel is redisson_sc:{name}; the permit-expirable
 * one's leases key, {name}:timeout, is named here again from the name.
 * Scripts: scripts/semaphore/{delete,expire,try_set_ttl,release_if_exists}.lua. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

enum { L_DELETE, L_EXPIRE, L_TTL, L_TRY_SET_TTL, L_RELEASE_IF_EXISTS };

typedef struct life {
    const dlock__handle *h;
    int kind;
    int leases;              /* a permit-expirable semaphore: its leases key too */
    char *lkey;              /* owned: {name}:timeout */
    size_t llen;
    int64_t a, b;            /* the call's numbers */
    int64_t v;               /* the answer */
} life;

static void life_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    life *s = st;
    const dlock__handle *h = s->h;
    switch (s->kind) {
    case L_TTL:
        dlock__op_cmd(op, "PTTL", h->name, h->nlen, NULL, 0);
        op->flags = DLOCK__CALL_IDEMPOTENT;
        return;
    case L_DELETE:
    case L_EXPIRE:
        dlock__op_init(op, s->kind == L_DELETE ? DLOCK__SCRIPT_SEMAPHORE_DELETE
                                               : DLOCK__SCRIPT_SEMAPHORE_EXPIRE);
        dlock__op_key(op, h->name, h->nlen);
        if (s->lkey)
            dlock__op_key(op, s->lkey, s->llen);
        if (s->kind == L_EXPIRE)
            dlock__op_argi(op, s->a);
        op->flags = DLOCK__CALL_IDEMPOTENT;
        return;
    default:
        dlock__op_init(op, s->kind == L_TRY_SET_TTL ? DLOCK__SCRIPT_SEMAPHORE_TRY_SET_TTL
                                                    : DLOCK__SCRIPT_SEMAPHORE_RELEASE_IF_EXISTS);
        dlock__op_key(op, h->name, h->nlen);
        dlock__op_key(op, h->channel, h->clen);
        dlock__op_argi(op, s->a);
        dlock__op_argi(op, s->kind == L_TRY_SET_TTL ? s->b : DLOCK_COUNT_MAX);
        /* Not resent after a lost answer: a release could count twice, and a
         * set retried would answer "existed". */
        return;
    }
}

static int life_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    life *s = st;
    if (rc == DLOCK_EREDIS && res && res->err == DLOCK__RERR_OVER_BOUND)
        return dlock__fail(DLOCK_EINVAL, "%s '%s': releasing %lld permits would pass %lld "
                                         "(unchanged)",
                           s->h->what, s->h->name, (long long)s->a, (long long)DLOCK_COUNT_MAX);
    if (rc != DLOCK_OK)
        return dlock__refused(s->h, rc, res);
    static const char *const what[] = {"delete", "expire", "PTTL", "try set permits",
                                       "release if exists"};
    if (dlock__reply_integer(res->r, &s->v) != DLOCK_OK)
        return dlock__proto(s->h, what[s->kind], res->r);
    freeReplyObject(res->r);
    return DLOCK_OK;
}

static void life_result(void *st, dlock__result *res)
{
    life *s = st;
    res->count = s->v;
    res->flag = s->kind != L_TTL && s->v > 0;
}

/* The leases key is named where the state lives (a copy, for an
 * asynchronous call), and freed with it. */
static int life_setup(void *st)
{
    life *s = st;
    if (s->leases && s->kind != L_TTL &&
        !(s->lkey = dlock__suffixed(s->h->name, s->h->nlen, "timeout", &s->llen)))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

static void life_done(void *st, int read)
{
    life *s = st;
    (void)read;
    free(s->lkey);
    s->lkey = NULL;
}

static const dlock__op_type life_type = {.setup = life_setup,
                                         .request = life_request,
                                         .read = life_read,
                                         .result = life_result,
                                         .done = life_done};

/* releaseIfExists of 0 permits: answered 0 here, without a round trip
 * (Redisson's), as a composite of no parts, so that an asynchronous caller's
 * callback still runs once, on the io thread. */
static int nothing_compose(void *st, int64_t waited_ms, dlock__parts *k, dlock__busy *b)
{
    (void)waited_ms;
    (void)k;
    (void)b;
    ((life *)st)->v = 0;
    return DLOCK_OK;
}

static const dlock__op_type nothing_type = {.compose = nothing_compose, .result = life_result};

/* One call on handle h (NULL: DLOCK_EINVAL), `leases` for a permit
 * semaphore: blocking (via NULL; *v, may be NULL, = the answer) or
 * asynchronous (the result's count, and flag for the yes/no calls). */
static int life_call(const void *handle, int leases, int kind, int64_t a, int64_t b,
                     const dlock__via *via, int64_t *v)
{
    const dlock__handle *h = handle;
    int rc = dlock__check_handle(h, "semaphore");
    if (rc != DLOCK_OK)
        return rc;
    life s = {.h = h, .kind = kind, .leases = leases, .a = a, .b = b};
    dlock__result res;
    const dlock__op_type *t = kind == L_RELEASE_IF_EXISTS && a == 0 ? &nothing_type : &life_type;
    rc = dlock__start(h, t, &s, sizeof(s), NULL, via, &res);
    if (rc == DLOCK_OK && v && !via)
        *v = res.count;
    return rc;
}

/* A call whose answer is a flag: *flag (may be NULL) = answer > 0. */
static int flag_call(const void *handle, int leases, int kind, int64_t a, int64_t b, int *flag)
{
    int64_t v = 0;
    int rc = life_call(handle, leases, kind, a, b, NULL, &v);
    if (rc == DLOCK_OK && flag)
        *flag = v > 0;
    return rc;
}

static int check_ttl(int64_t ttl_ms, int zero_ok)
{
    if (ttl_ms < (zero_ok ? 0 : 1) || ttl_ms > (int64_t)1 << 50)
        return dlock__fail(DLOCK_EINVAL, "time to live %lld ms: use %s..2^50", (long long)ttl_ms,
                           zero_ok ? "0 (none) or 1" : "1");
    return DLOCK_OK;
}

/* ------------------------------------------------------------- semaphore */

int dlock_semaphore_delete(dlock_semaphore *s, int *deleted)
{
    return flag_call(s, 0, L_DELETE, 0, 0, deleted);
}

int dlock_semaphore_expire(dlock_semaphore *s, int64_t ttl_ms, int *existed)
{
    dlock__clear_error();
    int rc = check_ttl(ttl_ms, 1);
    return rc != DLOCK_OK ? rc : flag_call(s, 0, L_EXPIRE, ttl_ms, 0, existed);
}

int dlock_semaphore_ttl(dlock_semaphore *s, int64_t *ttl_ms)
{
    if (s && !ttl_ms) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "the out-parameter is NULL");
    }
    return life_call(s, 0, L_TTL, 0, 0, NULL, ttl_ms);
}

int dlock_semaphore_try_set_permits_ttl(dlock_semaphore *s, int64_t permits, int64_t ttl_ms,
                                        int *was_set)
{
    dlock__clear_error();
    int rc = dlock__check_count(permits, 0, "permits");
    if (rc == DLOCK_OK)
        rc = check_ttl(ttl_ms, 0);
    return rc != DLOCK_OK ? rc : flag_call(s, 0, L_TRY_SET_TTL, permits, ttl_ms, was_set);
}

int dlock_semaphore_release_if_exists(dlock_semaphore *s, int64_t n, int *released)
{
    dlock__clear_error();
    int rc = dlock__check_count(n, 0, "permits");
    return rc != DLOCK_OK ? rc
                          : flag_call(s, 0, L_RELEASE_IF_EXISTS, n, 0, released);
}

/* ------------------------------------------------ permit-expirable semaphore */

int dlock_permit_semaphore_delete(dlock_permit_semaphore *p, int *deleted)
{
    return flag_call(p, 1, L_DELETE, 0, 0, deleted);
}

int dlock_permit_semaphore_expire(dlock_permit_semaphore *p, int64_t ttl_ms, int *existed)
{
    dlock__clear_error();
    int rc = check_ttl(ttl_ms, 1);
    return rc != DLOCK_OK ? rc : flag_call(p, 1, L_EXPIRE, ttl_ms, 0, existed);
}

int dlock_permit_semaphore_ttl(dlock_permit_semaphore *p, int64_t *ttl_ms)
{
    if (p && !ttl_ms) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "the out-parameter is NULL");
    }
    return life_call(p, 1, L_TTL, 0, 0, NULL, ttl_ms);
}

int dlock_permit_semaphore_acquired(dlock_permit_semaphore *p, int64_t *n)
{
    int64_t avail = 0;
    if (p && !n) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "the out-parameter is NULL");
    }
    return dlock_permit_semaphore_available(p, &avail, n);
}

int dlock_permit_semaphore_permits(dlock_permit_semaphore *p, int64_t *total)
{
    int64_t avail = 0, held = 0;
    if (p && !total) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "the out-parameter is NULL");
    }
    int rc = dlock_permit_semaphore_available(p, &avail, &held);
    if (rc == DLOCK_OK)
        *total = avail + held;
    return rc;
}

/* ------------------------------------------------------------------ async */

static int life_async(const void *handle, int leases, int kind, int64_t a, int64_t b,
                      dlock_async_fn fn, void *ud)
{
    return life_call(handle, leases, kind, a, b, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_semaphore_delete_async(dlock_semaphore *s, dlock_async_fn fn, void *ud)
{
    return life_async(s, 0, L_DELETE, 0, 0, fn, ud);
}

int dlock_semaphore_expire_async(dlock_semaphore *s, int64_t ttl_ms, dlock_async_fn fn, void *ud)
{
    dlock__clear_error();
    int rc = check_ttl(ttl_ms, 1);
    return rc != DLOCK_OK ? rc : life_async(s, 0, L_EXPIRE, ttl_ms, 0, fn, ud);
}

int dlock_semaphore_ttl_async(dlock_semaphore *s, dlock_async_fn fn, void *ud)
{
    return life_async(s, 0, L_TTL, 0, 0, fn, ud);
}

int dlock_semaphore_try_set_permits_ttl_async(dlock_semaphore *s, int64_t permits,
                                              int64_t ttl_ms, dlock_async_fn fn, void *ud)
{
    dlock__clear_error();
    int rc = dlock__check_count(permits, 0, "permits");
    if (rc == DLOCK_OK)
        rc = check_ttl(ttl_ms, 0);
    return rc != DLOCK_OK ? rc : life_async(s, 0, L_TRY_SET_TTL, permits, ttl_ms, fn, ud);
}

int dlock_semaphore_release_if_exists_async(dlock_semaphore *s, int64_t n, dlock_async_fn fn,
                                            void *ud)
{
    dlock__clear_error();
    int rc = dlock__check_count(n, 0, "permits");
    return rc != DLOCK_OK ? rc : life_async(s, 0, L_RELEASE_IF_EXISTS, n, 0, fn, ud);
}

int dlock_permit_semaphore_delete_async(dlock_permit_semaphore *p, dlock_async_fn fn, void *ud)
{
    return life_async(p, 1, L_DELETE, 0, 0, fn, ud);
}

int dlock_permit_semaphore_expire_async(dlock_permit_semaphore *p, int64_t ttl_ms,
                                        dlock_async_fn fn, void *ud)
{
    dlock__clear_error();
    int rc = check_ttl(ttl_ms, 1);
    return rc != DLOCK_OK ? rc : life_async(p, 1, L_EXPIRE, ttl_ms, 0, fn, ud);
}

int dlock_permit_semaphore_ttl_async(dlock_permit_semaphore *p, dlock_async_fn fn, void *ud)
{
    return life_async(p, 1, L_TTL, 0, 0, fn, ud);
}
