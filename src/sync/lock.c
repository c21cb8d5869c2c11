/* The lock handle and every dlock_lock_* call, blocking and asynchronous,
 * for every lock type (lock.h): owner ids, the watchdog's bookkeeping, the
 * unlock latch and the queries are here, once, as operations that both
 * drivers run (sync.h). The reentrant lock's own part, the type table
 * `dlock__reentrant_type`, is in reentrant.c. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* ---------------------------------------------------------------- owners */

/* The owner a call acts for (`by`, an explicit id; else the handle's), with
 * its field and the type's per-owner key. */
static int owner_init(const dlock_lock *l, const char *by, size_t blen, dlock__owner *o)
{
    if (by) {
        o->id = by;
        o->len = blen;
    } else if (l->owner) {
        o->id = l->owner;
        o->len = l->olen;
    } else {
        /* Written where the field is made: the field is the id + suffix. */
        o->len = dlock__owner_of_thread(l->h.c, o->fbuf);
        o->id = o->fbuf;
    }
    size_t sl = strlen(l->type->suffix);
    o->fheap = NULL;
    o->aux = NULL;
    o->alen = 0;
    if (sl == 0) {
        o->field = o->id;
        o->flen = o->len;
    } else {
        char *f = o->fbuf;
        if (o->len + sl + 1 > sizeof(o->fbuf) && !(f = o->fheap = malloc(o->len + sl + 1)))
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        if (o->id != f)
            memcpy(f, o->id, o->len);
        memcpy(f + o->len, l->type->suffix, sl + 1);
        o->field = f;
        o->flen = o->len + sl;
    }
    if (l->type->owner_key && l->type->owner_key(l, o) != DLOCK_OK) {
        free(o->fheap);
        o->fheap = NULL;
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

static void owner_done(dlock__owner *o)
{
    free(o->aux);
    o->aux = NULL;
    free(o->fheap);
    o->fheap = NULL;
}

int dlock__lock_owner(const dlock_lock *l, dlock__owner *o) { return owner_init(l, NULL, 0, o); }

int dlock__lock_owner_by(const dlock_lock *l, const char *by, size_t blen, dlock__owner *o)
{
    return owner_init(l, by, blen, o);
}

void dlock__lock_owner_done(dlock__owner *o) { owner_done(o); }

int dlock__acq_read(dlock__acq *a, redisReply *r, dlock__acq_reader read, dlock__busy *b)
{
    int64_t ms = -1;
    int rc = read(r, a->fenced, &ms, &a->token, &a->state);
    if (rc == DLOCK_EPROTO)
        return dlock__proto(&a->l->h, "acquire", r);
    freeReplyObject(r);
    if (rc == DLOCK__BUSY) {
        b->ttl = ms;
        b->first = 0;
    }
    return rc;
}

/* ---------------------------------------------------------------- handle */

void dlock_lock_free(dlock_lock *l)
{
    if (!l)
        return;
    dlock__lock_rq_free(l);
    l->h.channel = NULL;   /* in names */
    free(l->names);
    free(l->owner);
    pthread_mutex_destroy(&l->mu);
    dlock__handle_free(&l->h);
}

/* The names a handle derives from its name (the token key, the latch prefix,
 * the channel, the type's own keys), in one allocation: the lengths first,
 * then each written after the previous one's NUL. */
static int derive_names(dlock_lock *l)
{
    enum { N = 3 + DLOCK__LOCK_KEYS };
    const dlock__lock_type *t = l->type;
    const char *prefix[N] = {"redisson_lock_token", "redisson_unlock_latch", t->channel};
    const char *tail[N] = {"", ":", ""};
    const char **dst[N] = {&l->token_key, &l->latch_prefix, (const char **)&l->h.channel};
    size_t *len[N] = {&l->tlen, &l->lplen, &l->h.clen};
    for (int k = 0; k < DLOCK__LOCK_KEYS; k++) {
        prefix[3 + k] = t->keys[k];
        tail[3 + k] = "";
        dst[3 + k] = &l->key[k];
        len[3 + k] = &l->klen[k];
    }
    size_t total = 0;
    for (int i = 0; i < N; i++)
        if (prefix[i])
            total += dlock__prefixed_to(NULL, prefix[i], l->h.name, l->h.nlen, tail[i]) + 1;
    char *p = l->names = malloc(total);
    if (!p)
        return DLOCK_ENOMEM;
    for (int i = 0; i < N; i++) {
        if (!prefix[i])
            continue;
        *dst[i] = p;
        *len[i] = dlock__prefixed_to(p, prefix[i], l->h.name, l->h.nlen, tail[i]);
        p += *len[i] + 1;
    }
    return DLOCK_OK;
}

/* A handle of a type; owner NULL: the calling thread. */
static int lock_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                    const char *owner, dlock_lock **out)
{
    size_t olen = 0;
    dlock__handle *h;
    int rc = dlock__handle_new(c, name, out, sizeof(dlock_lock), type->what, NULL, 0, &h);
    if (out)
        *out = NULL;
    if (rc == DLOCK_OK && owner)
        rc = dlock__check_owner(owner, &olen);
    if (rc != DLOCK_OK) {
        dlock__handle_free(h);
        return rc;
    }
    dlock_lock *l = (dlock_lock *)h;
    pthread_mutex_init(&l->mu, NULL);
    l->type = type;
    if (owner) {
        l->owner = dlock__strndup(owner, olen);
        l->olen = olen;
    }
    if (derive_names(l) != DLOCK_OK || (owner && !l->owner) ||
        (type->init && type->init(l) != DLOCK_OK)) {
        dlock_lock_free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = l;
    return DLOCK_OK;
}

int dlock__lock_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                    const char *owner, dlock_lock **out)
{
    return lock_new(c, type, name, owner, out);
}

int dlock_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return lock_new(c, &dlock__reentrant_type, name, NULL, out);
}

/* The explicit-owner form of a getter: a NULL owner is an error here, not
 * "the calling thread". */
static int get_as(dlock_client *c, const dlock__lock_type *type, const char *name,
                  const char *owner, dlock_lock **out)
{
    if (!owner) {
        dlock__clear_error();
        if (out)
            *out = NULL;
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    }
    return lock_new(c, type, name, owner, out);
}

int dlock_lock_get_as(dlock_client *c, const char *name, const char *owner, dlock_lock **out)
{
    return get_as(c, &dlock__reentrant_type, name, owner, out);
}

int dlock_fair_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return lock_new(c, &dlock__fair_type, name, NULL, out);
}

int dlock_fair_lock_get_as(dlock_client *c, const char *name, const char *owner,
                           dlock_lock **out)
{
    return get_as(c, &dlock__fair_type, name, owner, out);
}

int dlock_read_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return lock_new(c, &dlock__read_type, name, NULL, out);
}

int dlock_read_lock_get_as(dlock_client *c, const char *name, const char *owner,
                           dlock_lock **out)
{
    return get_as(c, &dlock__read_type, name, owner, out);
}

int dlock_write_lock_get(dlock_client *c, const char *name, dlock_lock **out)
{
    return lock_new(c, &dlock__write_type, name, NULL, out);
}

int dlock_write_lock_get_as(dlock_client *c, const char *name, const char *owner,
                            dlock_lock **out)
{
    return get_as(c, &dlock__write_type, name, owner, out);
}

const char *dlock_lock_name(const dlock_lock *l) { return l ? l->h.name : ""; }

int dlock_lock_replica_acks(const dlock_lock *l) { return dlock__handle_acks_of(l ? &l->h : NULL); }

void dlock_lock_set_lost_callback(dlock_lock *l, dlock_lost_fn fn, void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->lost = (dlock__lost_cb){.fn = fn, .ud = ud};
    pthread_mutex_unlock(&l->mu);
}

void dlock_lock_set_lost_cause_callback(dlock_lock *l, dlock_lost_cause_fn fn, void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->lost = (dlock__lost_cb){.cfn = fn, .ud = ud};
    pthread_mutex_unlock(&l->mu);
}

int dlock_lock_set_lock_delay(dlock_lock *l, int64_t ms)
{
    int rc = dlock__check_handle(l, "lock");
    return rc != DLOCK_OK ? rc : dlock__lock_set_delay(l, ms);
}

int dlock_lock_set_max_hold(dlock_lock *l, int64_t ms)
{
    int rc = dlock__check_handle(l, "lock");
    if (rc != DLOCK_OK)
        return rc;
    int64_t v;
    if ((rc = dlock__check_max_hold(ms, 1, &v)) != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    l->max_hold = v;
    pthread_mutex_unlock(&l->mu);
    return DLOCK_OK;
}

/* The hold limit an acquisition through l gets now, ms (0: none). */
int64_t dlock__lock_hold_limit(dlock_lock *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t m = l->max_hold;
    pthread_mutex_unlock(&l->mu);
    if (m == 0)
        m = l->h.c->cfg.max_hold_ms;
    return m > 0 ? m : 0;
}

int dlock__lock_busy(const dlock_lock *l, int64_t ttl)
{
    if (ttl >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is held by another owner (expires in %lld ms)",
                           l->h.name, (long long)ttl);
    return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is held by another owner (no expiry)", l->h.name);
}

/* The calls' first checks: the handle, and for an asynchronous call (via)
 * an explicit owner, since a callback does not run on the thread that asked. */
int dlock__lock_check_call(const dlock_lock *l, const dlock__via *via)
{
    int rc = dlock__check_handle(l, "lock");
    if (rc == DLOCK_OK && via && !l->owner)
        rc = dlock__fail(DLOCK_EINVAL,
                         "asynchronous calls need a handle with an explicit owner id "
                         "(dlock_lock_get_as and the other *_get_as): '%s' acts for the "
                         "calling thread, and callbacks do not run on it",
                         l->h.name);
    return rc;
}

/* ------------------------------------------------------------- release */

/* A release for owner `by` (NULL: the handle's or the calling thread's). */
static int rel_start(dlock__rel *x, dlock_lock *l, const char *by, size_t blen)
{
    x->l = l;
    x->latch = NULL;
    x->call = x->again = 0;
    int rc = owner_init(l, by, blen, &x->o);
    if (rc != DLOCK_OK)
        return rc;
    /* latch key = prefix + fresh request id, kept for every retry of this call */
    x->latch_len = l->lplen + 32;
    x->latch = x->latch_len < sizeof(x->lbuf) ? x->lbuf : malloc(x->latch_len + 1);
    if (!x->latch) {
        owner_done(&x->o);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    memcpy(x->latch, l->latch_prefix, l->lplen);
    dlock__random_hex32(x->latch + l->lplen);
    dlock_client *c = l->h.c;
    l->type->hold_id(l, &x->o, &x->id);
    int renewed = dlock__watchdog_release_begin(c->wd, &x->id);
    l->type->release_op(l, &x->o, x->latch, x->latch_len, renewed ? c->cfg.watchdog_ms : 0,
                        &x->op);
    /* A lock whose last release woke someone is likely contended again. */
    x->op.flags = DLOCK__CALL_IDEMPOTENT;
    if (atomic_load_explicit(&l->heard, memory_order_relaxed))
        x->op.flags |= DLOCK__CALL_PING_FIRST;
    x->op.latch_ms = c->latch_px;
    x->open = 1;
    return DLOCK_OK;
}

int dlock__rel_init(dlock__rel *x, dlock_lock *l) { return rel_start(x, l, NULL, 0); }

int dlock__rel_init_as(dlock__rel *x, dlock_lock *l, const dlock__owner *as)
{
    return rel_start(x, l, as->id, as->len);
}

void dlock__rel_closed(dlock__rel *x)
{
    if (!x->open)
        return;
    dlock__aside aside;
    dlock__aside_begin(&aside);
    dlock__res res;
    dlock__res_init(&res);
    dlock__rel_end(x, DLOCK_ECLOSED, &res);
    dlock__aside_end(&aside, DLOCK_ECLOSED);
}

/* What a release's answer means; *outcome for the watchdog. */
static int rel_answer(dlock__rel *x, int rc, dlock__res *res, int *outcome)
{
    dlock_lock *l = x->l;
    *outcome = DLOCK__RELEASE_KEPT;
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    int heard = 0;
    if (dlock__reply_release(res->r, outcome, &heard) != DLOCK_OK) {
        *outcome = DLOCK__RELEASE_KEPT;
        return dlock__proto(&l->h, "release", res->r);
    }
    freeReplyObject(res->r);
    if (*outcome == DLOCK__RELEASE_GONE)
        atomic_store_explicit(&l->heard, heard, memory_order_relaxed);
    if (*outcome == DLOCK__RELEASE_NOT_HELD)
        return l->type->not_held ? l->type->not_held(l, &x->o)
                                 : dlock__fail(DLOCK_ENOTOWNER, "%s '%s' is not held by %s",
                                               l->h.what, l->h.name, x->o.id);
    return DLOCK_OK;
}

int dlock__rel_end(dlock__rel *x, int rc, dlock__res *res)
{
    int outcome;
    dlock_lock *l = x->l;
    int answered = rc == DLOCK_OK;
    rc = rel_answer(x, rc, res, &outcome);
    answered = answered && (rc == DLOCK_OK || outcome == DLOCK__RELEASE_NOT_HELD);
    x->again = dlock__holds_released(&l->h.c->holds, l, &x->o, answered, outcome, x->call);
    /* Whatever the answer, even an error, this release attempt counts. A
     * repeat that finds nothing held lost nothing the watchdog renews. */
    if (x->call == 2 && outcome == DLOCK__RELEASE_NOT_HELD)
        outcome = DLOCK__RELEASE_GONE;
    dlock__watchdog_release_end(l->h.c->wd, &x->id, outcome);
    if (x->latch != x->lbuf)
        free(x->latch);
    owner_done(&x->o);
    x->open = 0;
    return rc;
}

static int rel_setup(void *st)
{
    dlock__rel *x = st;
    int rc = dlock__rel_init(x, x->l);
    x->call = 1;
    return rc;
}

static void rel_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    *op = ((dlock__rel *)st)->op;
}

static int rel_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    dlock__rel *x = st;
    if (x->call != 2)
        return dlock__rel_end(x, rc, res);
    /* The caller's own hold went with the first release: a repeat that fails
     * leaves a hold of unknown outcome to its lease, as before (logged, not
     * the call's failure). */
    char why[DLOCK__MSG_MAX];
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    rc = dlock__rel_end(x, rc, res);
    dlock__err_reset(prev);
    if (rc != DLOCK_OK) {
        dlock__log(&x->l->h.c->cfg, DLOCK_LOG_WARN,
                   "%s '%s': the release of a hold of unknown outcome failed (it ends with "
                   "its lease): %s",
                   x->l->h.what, x->l->h.name, why);
        x->again = 0;
        rc = DLOCK_OK;
    }
    return rc;
}

/* The release ended the owner's last known hold and holds remain: one of its
 * acquisitions that ended DLOCK_EUNKNOWN ran, and is released too, by a
 * release of its own (a fresh unlock latch). */
static int rel_again(void *st)
{
    dlock__rel *x = st;
    if (!x->again)
        return 0;
    if (dlock__rel_init(x, x->l) != DLOCK_OK) {
        dlock__clear_error();   /* the caller's release succeeded; this one lapses */
        return 0;
    }
    x->call = 2;
    return 1;
}

static void rel_done(void *st, int read)
{
    (void)read;
    dlock__rel_closed(st);
}

static const dlock__op_type release_type = {.setup = rel_setup,
                                            .request = rel_request,
                                            .read = rel_read,
                                            .again = rel_again,
                                            .done = rel_done,
                                            .releases = 1};

static int release(dlock_lock *l, const dlock__via *via)
{
    int rc = dlock__lock_check_call(l, via);
    if (rc != DLOCK_OK)
        return rc;
    dlock__rel x = {.l = l};
    return dlock__start(&l->h, &release_type, &x, sizeof(x), NULL, via, NULL);
}

int dlock_lock_release(dlock_lock *l) { return release(l, NULL); }

int dlock_lock_release_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    return release(l, &(dlock__via){fn, ud, 0});
}

int dlock__lock_release_via(dlock_lock *l, const dlock__via *via) { return release(l, via); }

/* ------------------------------------------------------------- acquire */

/* The watchdog's side of a success: a DLOCK_WATCHDOG hold is renewed from
 * now on; a lease acquisition moves a renewed hold's loss deadline. */
static int acq_keep(void *st, int64_t sent_ms)
{
    dlock__acq *a = st;
    dlock_lock *l = a->l;
    dlock__hold_id id;
    l->type->hold_id(l, &a->o, &id);
    if (a->asked_lease != DLOCK_WATCHDOG) {
        /* Recorded before the watchdog counts it (a record made now starts
         * from the watchdog's count: it must not hold this one). */
        dlock__holds_acquired(&l->h.c->holds, l, &a->o, 0, a->asked_lease);
        dlock__netctx_note_lease(&l->h.c->net, a->asked_lease);   /* the auto quarantine's */
        dlock__watchdog_lease_reentry(l->h.c->wd, &id, sent_ms,
                                      l->type->lease_keeps_ttl ? -1 : a->asked_lease);
        return DLOCK_OK;
    }
    pthread_mutex_lock(&l->mu);
    dlock__lost_cb cb = l->lost;
    pthread_mutex_unlock(&l->mu);
    int rc = dlock__watchdog_add_limited(l->h.c->wd, &id, sent_ms, a->max_hold, &cb);
    /* After the watchdog counts it (holds.c: a record made in between counts
     * it twice, never not at all). */
    dlock__holds_acquired(&l->h.c->holds, l, &a->o, 0, a->asked_lease);
    return rc;
}

static int acq_setup(void *st)
{
    dlock__acq *a = st;
    dlock_lock *l = a->l;
    /* a->asked_lease was checked with the call's options (dlock__check_opts). */
    a->lease_ms = a->asked_lease == DLOCK_WATCHDOG ? l->h.c->cfg.watchdog_ms : a->asked_lease;
    if (l->fence_all)
        a->fenced = 1;
    if (a->asked_lease == DLOCK_WATCHDOG) {
        /* A limit shorter than the timeout: the first TTL already ends with it. */
        a->max_hold = dlock__lock_hold_limit(l);
        if (a->max_hold > 0 && a->max_hold < a->lease_ms)
            a->lease_ms = a->max_hold;
    }
    return owner_init(l, NULL, 0, &a->o);
}

/* Each attempt first cuts the lease to what the hold limit of the owner's
 * scheduled hold leaves (a reentry never sets a TTL past it). */
static void acq_request(void *st, int64_t waited_ms, dlock__op *op)
{
    dlock__acq *a = st;
    dlock_lock *l = a->l;
    dlock__hold_id id;
    l->type->hold_id(l, &a->o, &id);
    int64_t left = dlock__watchdog_limit_left(l->h.c->wd, &id);
    if (left < a->lease_ms)
        a->lease_ms = left > 1 ? left : 1;
    l->type->attempt_op(a, waited_ms, op);
}

/* The key a busy answer found in the way, for the waiter to watch. */
static void busy_watch(const dlock__acq *a, dlock__busy *b)
{
    const dlock_lock *l = a->l;
    const dlock__lock_type *t = l->type;
    if (a->state >= 0 && a->state < 32 && (t->held_states & (1u << a->state))) {
        b->watch = l->h.name;
        b->wlen = l->h.nlen;
    } else if (a->state == t->delayed && t->watch_marker) {
        b->watch = l->key[DLOCK__K_DELAY];
        b->wlen = l->klen[DLOCK__K_DELAY];
    }
}

static int acq_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    dlock__acq *a = st;
    if (rc == DLOCK_EUNKNOWN)   /* it may hold: a later release may owe it one */
        dlock__holds_acquired(&a->l->h.c->holds, a->l, &a->o, 1, a->asked_lease);
    if (rc != DLOCK_OK)
        return dlock__refused(&a->l->h, rc, res);
    rc = a->l->type->attempt_reply(a, res->r, b);
    if (rc == DLOCK__BUSY)
        busy_watch(a, b);
    return rc;
}

/* The hold given back (the watchdog could not take it, too few replicas
 * acknowledged it): this hold only, a reentry keeps the earlier ones. */
static int acq_give_back(void *st, dlock__op *op)
{
    dlock__acq *a = st;
    if (!(a->back = malloc(sizeof(*a->back))))
        return 0;   /* it lapses at its TTL */
    /* The acquisition's owner, whatever thread gives it back (a multi-lock's
     * part, on its client's io thread). */
    if (dlock__rel_init_as(a->back, a->l, &a->o) != DLOCK_OK) {
        free(a->back);
        a->back = NULL;
        return 0;
    }
    *op = a->back->op;
    return 1;
}

static int acq_gave_back(void *st, int rc, dlock__res *res)
{
    dlock__acq *a = st;
    rc = dlock__rel_end(a->back, rc, res);
    free(a->back);
    a->back = NULL;
    return rc;
}

static int acq_busy(void *st, const dlock__busy *b)
{
    dlock__acq *a = st;
    const dlock__lock_type *t = a->l->type;
    if (a->state == t->delayed)
        return dlock__delay_busy(a->l, b->ttl);
    return t->busy_error ? t->busy_error(a, b) : dlock__lock_busy(a->l, b->ttl);
}

static int acq_give_up(void *st, int rc, dlock__op *op)
{
    dlock__acq *a = st;
    return a->l->type->give_up_op ? a->l->type->give_up_op(a, rc, op) : 0;
}

static const char *acq_channel(void *st, size_t *len)
{
    dlock__acq *a = st;
    return a->l->type->wait_channel(a->l, &a->o, len);
}

/* The token goes where the caller's options said before anything else sees
 * the result (an asynchronous callback included). */
static void acq_result(void *st, dlock__result *res)
{
    dlock__acq *a = st;
    res->token = a->token;
    if (a->token_out)
        *a->token_out = a->token;
}

void dlock__acq_closed(dlock__acq *a)
{
    if (!a->back)
        return;
    dlock__aside aside;
    dlock__aside_begin(&aside);
    acq_gave_back(a, DLOCK_ECLOSED, &(dlock__res){.acks = -1});
    dlock__aside_end(&aside, DLOCK_ECLOSED);
}

static void acq_done(void *st, int read)
{
    dlock__acq *a = st;
    (void)read;
    owner_done(&a->o);
    dlock__acq_closed(a);
}

const dlock__op_type dlock__acquire_type = {
    .setup = acq_setup,
    .request = acq_request,
    .read = acq_read,
    .keep = acq_keep,
    .give_back = acq_give_back,
    .gave_back = acq_gave_back,
    .busy_error = acq_busy,
    .give_up = acq_give_up,
    .channel = acq_channel,
    .result = acq_result,
    .done = acq_done,
    .acquires = 1,
};

static int acquire(dlock_lock *l, const dlock_wait_opts *opts, const dlock__via *via)
{
    int rc = dlock__lock_check_call(l, via);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_LEASE | DLOCK__TAKES_TOKEN, "a lock", &o);
    if (rc != DLOCK_OK)
        return rc;
    dlock__acq a = {.l = l, .wait = o.wait_ms, .asked_lease = o.lease_ms, .cancel = o.cancel,
                    .fenced = o.token != NULL, .token_out = o.token};
    dlock__wait_spec spec = {.wake = dlock__wake_lock, .wait_ms = o.wait_ms, .cancel = o.cancel};
    if (l->spin) {
        pthread_mutex_lock(&l->mu);
        spec.quiet = 1;
        spec.backoff_ms = l->backoff.initial_ms;
        spec.backoff_max_ms = l->backoff.max_ms;
        spec.backoff_mult = l->backoff.multiplier;
        pthread_mutex_unlock(&l->mu);
    }
    return dlock__start(&l->h, &dlock__acquire_type, &a, sizeof(a), &spec, via,
                        &(dlock__result){0});
}

int dlock_lock_acquire_opts(dlock_lock *l, const dlock_wait_opts *o)
{
    return acquire(l, o, NULL);
}

int dlock_lock_acquire(dlock_lock *l, int64_t lease_ms)
{
    return acquire(l, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = lease_ms},
                   NULL);
}

int dlock_lock_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return acquire(l, &(dlock_wait_opts){.wait_ms = wait_ms, .lease_ms = lease_ms}, NULL);
}

int dlock_lock_acquire_async(dlock_lock *l, const dlock_wait_opts *o, dlock_async_fn fn,
                             void *ud)
{
    return acquire(l, o, &(dlock__via){fn, ud, 0});
}

int dlock_lock_run(dlock_lock *l, const dlock_wait_opts *o, dlock_run_fn fn, void *ud,
                   int *fn_result)
{
    if (!fn) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "fn is NULL");
    }
    int rc = acquire(l, o, NULL);
    if (rc != DLOCK_OK)
        return rc;
    int res = fn(ud);
    if (fn_result)
        *fn_result = res;
    return dlock_lock_release(l);
}
