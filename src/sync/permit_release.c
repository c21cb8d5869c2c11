/* The permit-expirable semaphore's releases (sync/permit.h): one permit
 * (scripts/permits/release.lua), a list of them, all or none
 * (release_n.lua: the ids travel as one argument, their 16 bytes each one
 * after the other, so any n fits one request). Each is one operation that
 * both drivers run; an acquisition's give-back runs them too. The watchdog
 * is told of each permit before its release is sent and of what became of
 * it after. Not resent after a lost answer: a retry would call the permits
 * unknown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/permit.h"

/* A release closed before its answer was read: the watchdog counts an
 * attempt of unknown outcome, through the release's own read (st's); the
 * close's message stays. */
static void read_closed(void *st, int (*read)(void *, int, dlock__res *, dlock__busy *))
{
    dlock__aside aside;
    dlock__aside_begin(&aside);
    dlock__res res;
    dlock__res_init(&res);
    read(st, DLOCK_ECLOSED, &res, NULL);
    dlock__aside_end(&aside, DLOCK_ECLOSED);
}

/* ------------------------------------------------------------ one permit */

int dlock__permit_drop_setup(void *st)
{
    dlock__permit_drop *d = st;
    dlock__hold_id h;
    dlock__permit_hold(d->p, &d->id, &h);
    dlock__watchdog_release_begin(d->p->h.c->wd, &h);
    return DLOCK_OK;
}

void dlock__permit_drop_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    dlock__permit_drop *d = st;
    dlock__permit_keys_id(op, DLOCK__SCRIPT_PERMITS_RELEASE, d->p, &d->id);
    if (d->force)
        dlock__op_args(op, "1");
    if (atomic_load_explicit(&d->p->heard, memory_order_relaxed))
        op->flags = DLOCK__CALL_PING_FIRST;
}

static int not_held(const dlock_permit_semaphore *p, const dlock__permit_id *id, int outcome)
{
    if (outcome == DLOCK__GONE_EXPIRED)
        return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' had expired: its lease ran "
                                            "out and it went back to the pool",
                           id->hex, p->h.what, p->h.name);
    return dlock__fail(DLOCK_ENOTOWNER, "permit %s of %s '%s' is unknown: released already, or "
                                        "never acquired",
                       id->hex, p->h.what, p->h.name);
}

int dlock__permit_drop_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    dlock__permit_drop *d = st;
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
    dlock__permit_hold(p, &d->id, &h);
    dlock__watchdog_release_end(p->h.c->wd, &h,
                                rc != DLOCK_OK                  ? DLOCK__RELEASE_KEPT
                                : out == DLOCK__GONE_RELEASED ? DLOCK__RELEASE_GONE
                                                              : DLOCK__RELEASE_NOT_HELD);
    if (rc != DLOCK_OK)
        return rc;
    d->outcome = (int)out;
    if (out == DLOCK__GONE_RELEASED)
        atomic_store_explicit(&p->heard, heard > 0, memory_order_relaxed);
    else if (!d->try_only)
        return not_held(p, &d->id, d->outcome);
    return DLOCK_OK;
}

static void drop_result(void *st, dlock__result *res)
{
    res->flag = ((dlock__permit_drop *)st)->outcome == DLOCK__GONE_RELEASED;
}

static void drop_done(void *st, int read)
{
    if (!read)
        read_closed(st, dlock__permit_drop_read);
}

static const dlock__op_type drop_type = {.setup = dlock__permit_drop_setup,
                                         .request = dlock__permit_drop_request,
                                         .read = dlock__permit_drop_read,
                                         .result = drop_result,
                                         .done = drop_done};

static int drop_permit(dlock_permit_semaphore *p, const char *id, int try_only,
                       const dlock__via *via, int *released)
{
    dlock__permit_drop d = {.p = p, .try_only = try_only != 0, .force = try_only == 2};
    int rc = dlock__permit_check(p, id, &d.id);
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

/* ------------------------------------------------------------ a list */

static void drops_free(dlock__permit_drops *d)
{
    if (!d->borrowed) {
        free(d->ids);
        free(d->raw);
    }
    d->ids = NULL;
    d->raw = NULL;
}

/* Parses the caller's list into d: each 32 hex characters, no two alike. */
static int parse_ids(dlock__permit_drops *d)
{
    const char *const *ids = d->list;
    size_t n = d->n;
    if (!ids || n == 0)
        return dlock__fail(DLOCK_EINVAL, "no permit ids given (%s)", ids ? "n = 0" : "NULL list");
    if (n > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "%zu permit ids: at most %lld in one call", n,
                           (long long)DLOCK_COUNT_MAX);
    if (!(d->ids = calloc(n, sizeof(*d->ids))))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc = dlock__permit_parse_id(ids[i], &d->ids[i]);
        if (rc != DLOCK_OK)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (memcmp(d->ids[j].raw, d->ids[i].raw, 16) == 0)
                return dlock__fail(DLOCK_EINVAL, "permit id %s is given twice (numbers %zu and "
                                                 "%zu): nothing released",
                                   d->ids[i].hex, j + 1, i + 1);
    }
    if (!(d->raw = dlock__permit_raw(d->ids, n)))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

/* The list parsed where the call is made (its ids copied: an asynchronous
 * caller's list may go once the call returns), unless borrowed. */
int dlock__permit_drops_setup(void *st)
{
    dlock__permit_drops *d = st;
    if (!d->borrowed) {
        int rc = parse_ids(d);
        if (rc != DLOCK_OK) {
            drops_free(d);
            return rc;
        }
    }
    for (size_t i = 0; i < d->n; i++) {
        dlock__hold_id h;
        dlock__permit_hold(d->p, &d->ids[i], &h);
        dlock__watchdog_release_begin(d->p->h.c->wd, &h);
    }
    return DLOCK_OK;
}

/* KEYS: semaphore, leases, channel; ARGV: the ids (scripts/permits/release_n.lua). */
void dlock__permit_drops_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    dlock__permit_drops *d = st;
    dlock__permit_keys(op, DLOCK__SCRIPT_PERMITS_RELEASE_N, d->p);
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

int dlock__permit_drops_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    dlock__permit_drops *d = st;
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
        dlock__permit_hold(p, &d->ids[i], &h);
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
                           d->ids[bad].hex, bad + 1, d->n, p->h.what, p->h.name,
                           v[3] == DLOCK__GONE_EXPIRED ? "had expired"
                                                       : "is unknown (released already, or "
                                                         "never acquired)");
    return DLOCK_OK;
}

static void drops_result(void *st, dlock__result *res)
{
    int64_t k = ((dlock__permit_drops *)st)->released;
    res->count = k;
    res->flag = k > 0;
}

static void drops_done(void *st, int read)
{
    if (!read)
        read_closed(st, dlock__permit_drops_read);
    drops_free(st);
}

static const dlock__op_type drops_type = {.setup = dlock__permit_drops_setup,
                                          .request = dlock__permit_drops_request,
                                          .read = dlock__permit_drops_read,
                                          .result = drops_result,
                                          .done = drops_done};

static int drop_list(dlock_permit_semaphore *p, const char *const *ids, size_t n, int try_only,
                     const dlock__via *via, int64_t *released)
{
    int rc = dlock__permit_check(p, NULL, NULL);
    if (rc != DLOCK_OK)
        return rc;
    dlock__permit_drops d = {.p = p, .list = ids, .n = n, .try_only = try_only};
    dlock__result res;
    rc = dlock__start(&p->h, &drops_type, &d, sizeof(d), NULL, via, &res);
    if (rc == DLOCK_OK && released)
        *released = res.count;
    return rc;
}

int dlock_permit_semaphore_release_list(dlock_permit_semaphore *p, const char *const *ids,
                                        size_t n)
{
    return drop_list(p, ids, n, 0, NULL, NULL);
}

int dlock_permit_semaphore_try_release_list(dlock_permit_semaphore *p, const char *const *ids,
                                            size_t n, int64_t *released)
{
    return drop_list(p, ids, n, 1, NULL, released);
}

int dlock_permit_semaphore_release_list_async(dlock_permit_semaphore *p, const char *const *ids,
                                              size_t n, dlock_async_fn fn, void *ud)
{
    return drop_list(p, ids, n, 0, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_permit_semaphore_try_release_list_async(dlock_permit_semaphore *p,
                                                  const char *const *ids, size_t n,
                                                  dlock_async_fn fn, void *ud)
{
    return drop_list(p, ids, n, 1, &(dlock__via){fn, ud, 0}, NULL);
}
