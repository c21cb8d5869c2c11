/* The watchdog: renews holds taken without a lease, in batches, and reports
 * their loss before Redis can let them go (docs/internals/watchdog.md: the
 * schedule, loss deadlines, hold limits, per-node renewals, revocation).
 * This file keeps the table of holds (user threads add and remove entries
 * under wd->mu) and the io thread's pass; wdnode.c renews per node, revoke.c
 * and tracking.c hear changes at once (watchdog_int.h: what they share). */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/watchdog_int.h"

static int nparts(const dlock__hold_kind *k) { return k->nkeys + k->nargs; }

/* The identity of a hold: its parts joined by NULs, into buf (or malloc'd
 * when it does not fit; NULL when out of memory). */
static char *join_id(const dlock__hold_id *id, char *buf, size_t size, size_t *out_len)
{
    size_t len = 0;
    int n = nparts(id->kind);
    for (int i = 0; i < n; i++)
        len += id->len[i] + 1;
    char *k = len <= size ? buf : malloc(len);
    if (!k)
        return NULL;
    char *p = k;
    for (int i = 0; i < n; i++) {
        memcpy(p, id->part[i], id->len[i]);
        p += id->len[i];
        *p++ = '\0';
    }
    *out_len = len;
    return k;
}

typedef struct lookup {
    const dlock__hold_kind *kind;
    const char *bytes;
} lookup;

static int h_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const held *h = (const held *)n;
    const lookup *l = key;
    if (h->kind != l->kind || h->klen != len)
        return 0;
    /* Part by part, each with its NUL (no part holds one: the join is
     * unambiguous). */
    const char *b = l->bytes;
    for (int i = 0; i < nparts(h->kind); i++) {
        if (memcmp(h_part(h, i), b, h->len[i] + 1) != 0)
            return 0;
        b += h->len[i] + 1;
    }
    return 1;
}

static int o_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const wowner *o = (const wowner *)n;
    return o->len == len && memcmp(o->id, key, len) == 0;
}

/* The owner id's shared copy, one more hold naming it; NULL when out of
 * memory. Caller holds mu. */
static wowner *owner_ref(dlock__watchdog *wd, const char *id, size_t len)
{
    uint64_t hash = dlock__hash(id, len);
    wowner *o = (wowner *)dlock__map_find(&wd->owners, hash, id, len);
    if (!o) {
        o = malloc(sizeof(*o) + len + 1);
        if (!o)
            return NULL;
        o->hn.hash = hash;
        o->refs = 0;
        o->len = (uint32_t)len;
        memcpy(o->id, id, len);
        o->id[len] = '\0';
        if (dlock__map_insert(&wd->owners, &o->hn) != 0) {
            free(o);
            return NULL;
        }
    }
    o->refs++;
    return o;
}

/* Frees h, and its owner id with the last hold naming it. Caller holds mu
 * (or the watchdog is being freed). */
static void held_free(dlock__watchdog *wd, held *h)
{
    wowner *o = h->own;
    if (o && --o->refs == 0) {
        dlock__map_remove(&wd->owners, &o->hn);
        free(o);
    }
    free(h);
}

static uint64_t id_hash(const dlock__hold_kind *kind, const char *bytes, size_t len)
{
    return dlock__hash(bytes, len) ^ (uint64_t)(uintptr_t)kind;
}

static held *find(dlock__watchdog *wd, const dlock__hold_id *id)
{
    char stackbuf[512] = {0};   /* quiets -Wmaybe-uninitialized through join_id */
    size_t klen;
    char *k = join_id(id, stackbuf, sizeof(stackbuf), &klen);
    if (!k)
        return NULL;
    lookup l = {id->kind, k};
    held *h = (held *)dlock__map_find(&wd->map, id_hash(id->kind, k, klen), &l, klen);
    if (k != stackbuf)
        free(k);
    return h;
}

/* Takes h out of the table; frees it unless a batch still points at it.
 * Caller holds mu. Returns 1 when the caller must free it. */
static int unlink_held(dlock__watchdog *wd, held *h)
{
    dlock__map_remove(&wd->map, &h->hn);
    dlock__list_remove(&h->all);
    dlock__wd_track_unlink(wd, h);
    if (h->inflight) {
        h->dead = 1;
        return 0;
    }
    return 1;
}

/* --------------------------------------------------------- user threads */

int dlock__watchdog_add(dlock__watchdog *wd, const dlock__hold_id *id, int64_t sent_ms,
                        dlock_lost_fn fn, void *ud)
{
    return dlock__watchdog_add_limited(wd, id, sent_ms, 0, fn, ud);
}

int dlock__watchdog_add_limited(dlock__watchdog *wd, const dlock__hold_id *id, int64_t sent_ms,
                                int64_t max_hold_ms, dlock_lost_fn fn, void *ud)
{
    int64_t limit_at = max_hold_ms > 0 ? sent_ms + max_hold_ms : INT64_MAX;
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    if (h) {
        /* Reentry: the acquire reset the TTL too (never past the limit: the
         * script set the timeout, which a limit shorter than it cuts at the
         * next dlock__wd_tick, reported on time either way). A reentry's own limit
         * may only come sooner. */
        if (sent_ms > h->renewed_at)
            h->renewed_at = sent_ms;
        /* Not a short hold: registered by the next pass, however often it is
         * re-entered (each reentry moves renewed_at, its age, forward). */
        h->fresh = 0;
        if (limit_at < h->limit_at)
            h->limit_at = limit_at;
        h->holds++;
        h->fn = fn;
        h->ud = ud;
        int kick = h->limit_at != INT64_MAX;
        h->recap |= kick;
        pthread_mutex_unlock(&wd->mu);
        if (kick)
            dlock__loop_post(wd->lp, &wd->kick_job);
        return DLOCK_OK;
    }
    size_t klen = 0;
    int n = nparts(id->kind), opart = DLOCK__HOLD_PARTS;
    for (int i = 0; i < n; i++) {
        klen += id->len[i] + 1;
        if (opart == DLOCK__HOLD_PARTS && id->len[i] == id->olen &&
            memcmp(id->part[i], id->owner, id->olen) == 0)
            opart = i;   /* kept once */
    }
    size_t dlen = klen - (opart < DLOCK__HOLD_PARTS ? id->len[opart] + 1 : 0);
    h = malloc(sizeof(*h) + dlen);
    wowner *own = h ? owner_ref(wd, id->owner, id->olen) : NULL;
    if (!own) {
        pthread_mutex_unlock(&wd->mu);
        free(h);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    memset(h, 0, sizeof(*h));
    h->own = own;
    h->renewed_at = sent_ms;
    h->limit_at = limit_at;
    h->holds = 1;
    h->fn = fn;
    h->ud = ud;
    h->kind = id->kind;
    char *p = h->data;
    for (int i = 0; i < n; i++) {
        h->len[i] = (uint32_t)id->len[i];
        if (i == opart)
            continue;
        memcpy(p, id->part[i], id->len[i]);
        p += id->len[i];
        *p++ = '\0';
    }
    h->klen = (uint32_t)klen;
    h->opart = (uint8_t)opart;
    char stackbuf[512] = {0};
    size_t jlen;
    char *k = join_id(id, stackbuf, sizeof(stackbuf), &jlen);
    if (k) {
        h->hn.hash = id_hash(id->kind, k, klen);
        if (k != stackbuf)
            free(k);
    }
    if (!k || dlock__map_insert(&wd->map, &h->hn) != 0) {
        held_free(wd, h);
        pthread_mutex_unlock(&wd->mu);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    dlock__list_push_back(&wd->all, &h->all);
    dlock__wd_track_link(wd, h);
    /* Renewed once when it is DLOCK__WD_REGISTER_AGE_MS old, so that Redis
     * tracks it from then on (and the listener is started with the first
     * hold): a hold released sooner costs Redis nothing more. The io thread is
     * woken only when no registering pass is due already: an acquisition's
     * hot path does not hop through it each time. */
    int post = 0;
    if (wd->track && !wd->track_refused) {
        if (wd->track_live) {
            dlock__wd_mark_recheck(wd, h);
            h->fresh = 1;
        }
        post = !wd->reg_armed;
        wd->reg_armed = 1;
    }
    pthread_mutex_unlock(&wd->mu);
    if (post)
        dlock__loop_post(wd->lp, &wd->recheck_job);
    return DLOCK_OK;
}

void dlock__watchdog_lease_reentry(dlock__watchdog *wd, const dlock__hold_id *id,
                                   int64_t sent_ms, int64_t lease_ms)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    if (h) {
        /* The key now expires after the lease: keep the loss deadline honest;
         * the next tick renews it to the watchdog timeout again. */
        h->holds++;
        int64_t as_if = sent_ms + lease_ms - wd->ctx->cfg->watchdog_ms;
        if (lease_ms >= 0 && as_if < h->renewed_at)
            h->renewed_at = as_if;
    }
    pthread_mutex_unlock(&wd->mu);
}

int64_t dlock__watchdog_limit_left(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    int64_t left = h && h->limit_at != INT64_MAX ? h->limit_at - dlock__now_ms() : INT64_MAX;
    pthread_mutex_unlock(&wd->mu);
    return left;
}

int dlock__watchdog_renews(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    int n = h ? (h->holds > 0 ? h->holds : 1) : 0;
    pthread_mutex_unlock(&wd->mu);
    return n;
}

int dlock__watchdog_release_begin(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    if (h)
        h->releasing++;
    pthread_mutex_unlock(&wd->mu);
    return h != NULL;
}

static void note_lost(dlock__watchdog *wd, held *h, dlock_lost_reason why, lost_note **notes);

void dlock__watchdog_release_abort(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    if (h && h->releasing > 0)
        h->releasing--;
    pthread_mutex_unlock(&wd->mu);
}

/* One dead hold awaited by an asynchronous release (in wd->settles). A hold
 * goes dead once, by one release: it has one node at most. */
typedef struct settle_node {
    dlock__list link;
    held *h;
    dlock__wd_settle *s;
} settle_node;

/* On the io thread: h (dead) is awaited by the asynchronous release
 * collecting now, if any. A blocking release made from a callback collects
 * none: it cannot wait for the io thread, which answers the renewal.
 * Without memory the release does not wait. Caller holds mu. */
static void settle_add(dlock__watchdog *wd, held *h)
{
    dlock__wd_settle *s = wd->collect;
    settle_node *n = s ? malloc(sizeof(*n)) : NULL;
    if (!n)
        return;
    n->h = h;
    n->s = s;
    dlock__list_push_back(&wd->settles, &n->link);
    h->awaited |= AW_ASYNC;
    s->pending++;
}

/* h's renewal was answered: its asynchronous release, the last of its
 * renewals answered, is told. Caller holds mu (io thread). */
static void settle_answered(dlock__watchdog *wd, held *h)
{
    for (dlock__list *it = wd->settles.next; it != &wd->settles; it = it->next) {
        settle_node *n = DLOCK__CONTAINER_OF(it, settle_node, link);
        if (n->h != h)
            continue;
        dlock__list_remove(&n->link);
        h->awaited &= (uint8_t)~AW_ASYNC;
        if (--n->s->pending == 0)
            n->s->fn(n->s->arg);
        free(n);
        return;
    }
}

void dlock__watchdog_collect(dlock__watchdog *wd, dlock__wd_settle *s)
{
    s->pending = 0;
    wd->collect = s;
}

int dlock__watchdog_collect_end(dlock__watchdog *wd, dlock__wd_settle *s)
{
    wd->collect = NULL;
    return s->pending;
}

void dlock__watchdog_unsettle(dlock__watchdog *wd, dlock__wd_settle *s)
{
    if (s->pending == 0)
        return;
    pthread_mutex_lock(&wd->mu);
    for (dlock__list *it = wd->settles.next; it != &wd->settles;) {
        settle_node *n = DLOCK__CONTAINER_OF(it, settle_node, link);
        it = it->next;
        if (n->s != s)
            continue;
        dlock__list_remove(&n->link);
        n->h->awaited &= (uint8_t)~AW_ASYNC;   /* its batch frees it */
        free(n);
    }
    s->pending = 0;
    pthread_mutex_unlock(&wd->mu);
}

/* A released hold whose renewal is still in flight (h dead): waits for that
 * renewal's answer, so that it cannot land after the release returns and
 * stretch the owner's next hold of the same name (a fixed lease, say) to
 * the watchdog timeout. Bounded by the command timeout (and a margin). On
 * the io thread, which answers it, an asynchronous release awaits it
 * instead (settle_add) and this returns at once. Caller holds mu; h is
 * freed here or by its batch. */
static void await_renewal(dlock__watchdog *wd, held *h)
{
    if (dlock__loop_on_io_thread(wd->lp)) {
        settle_add(wd, h);
        return;
    }
    const int64_t until = dlock__now_ms() + wd->ctx->cfg->command_timeout_ms + 1000;
    h->awaited |= AW_THREAD;
    while (h->inflight && dlock__now_ms() < until) {
        struct timespec ts;
        dlock__abstime(until, &ts);
        pthread_cond_timedwait(&wd->answered, &wd->mu, &ts);
    }
    h->awaited &= (uint8_t)~AW_THREAD;
    if (!h->inflight)
        held_free(wd, h);   /* answered: its batch left it to us */
}

void dlock__watchdog_release_end(dlock__watchdog *wd, const dlock__hold_id *id, int outcome)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    int do_free = 0, post = 0;
    if (h) {
        if (h->releasing > 0)
            h->releasing--;
        if (outcome == DLOCK__RELEASE_NOT_HELD) {
            /* We renewed it, nobody released it here: it was lost. Report it
             * like a renewal would have, from the io thread. */
            note_lost(wd, h, DLOCK_LOST_GONE, &wd->pending);
            post = 1;
        } else if (outcome == DLOCK__RELEASE_GONE || --h->holds <= 0) {
            /* Released; or a release attempt (answered or not) took the last
             * hold this process knows of: renewing on would keep a lock its
             * owner let go of alive forever. */
            do_free = unlink_held(wd, h);
            if (!do_free)
                await_renewal(wd, h);
        }
    }
    if (do_free)
        held_free(wd, h);
    pthread_mutex_unlock(&wd->mu);
    if (post)
        dlock__loop_post(wd->lp, &wd->flush_job);
}

size_t dlock__watchdog_count(dlock__watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    size_t n = wd->map.count;
    pthread_mutex_unlock(&wd->mu);
    return n;
}

/* ------------------------------------------------------------ io thread */

void dlock__wd_tick(dlock__watchdog *wd);
static void on_timer(uv_timer_t *t);

static int64_t period_ms(const dlock__watchdog *wd) { return wd->ctx->cfg->watchdog_ms / 3; }

void dlock__wd_report(dlock__watchdog *wd, lost_note *notes)
{
    const dlock_config *cfg = wd->ctx->cfg;
    while (notes) {
        lost_note *n = notes;
        notes = n->next;
        const char *owner = n->key + n->nlen + 1;
        dlock_lost_fn fn = n->fn ? n->fn : cfg->lost_fn;
        void *ud = n->fn ? n->ud : cfg->lost_ud;
        if (n->reason > 0 && n->reason < DLOCK_STATS_LOST_REASONS)
            dlock__stats_count(wd->ctx->stats, DLOCK__ST_LOST + (int)n->reason, 1);
        dlock_lost_cause cause = n->reason == DLOCK_LOST_GONE ? n->cause
                                 : n->reason == DLOCK_LOST_UNREACHABLE ? DLOCK_CAUSE_UNREACHABLE
                                 : n->reason == DLOCK_LOST_PAUSED      ? DLOCK_CAUSE_PAUSED
                                 : n->reason == DLOCK_LOST_REPLICAS    ? DLOCK_CAUSE_REPLICAS
                                                                       : DLOCK_CAUSE_MAX_HOLD;
        dlock__log(cfg, DLOCK_LOG_WARN, "%s '%s' held by %s lost: %s%s%s", n->what, n->key,
                   owner,
                   n->reason == DLOCK_LOST_GONE       ? "it was gone when renewed or released"
                   : n->reason == DLOCK_LOST_PAUSED   ? "this process was paused past the lease"
                   : n->reason == DLOCK_LOST_MAX_HOLD ? "held as long as its hold limit allows"
                   : n->reason == DLOCK_LOST_REPLICAS
                       ? "its renewal was acknowledged by too few replicas"
                       : "Redis unreachable until the lease ran out",
                   n->reason == DLOCK_LOST_GONE ? ": " : "",
                   n->reason == DLOCK_LOST_GONE ? dlock_lost_cause_str(cause) : "");
        dlock__set_lost_cause(cause);
        if (fn)
            fn(n->key, owner, n->reason, ud);
        dlock__set_lost_cause(DLOCK_CAUSE_UNKNOWN);
        free(n);
    }
}

static void flush_pending(void *arg)
{
    dlock__watchdog *wd = arg;
    pthread_mutex_lock(&wd->mu);
    lost_note *notes = wd->pending;
    wd->pending = NULL;
    pthread_mutex_unlock(&wd->mu);
    dlock__wd_report(wd, notes);
}

/* Takes h out of the schedule (freeing it, or leaving it to its in-flight
 * batch) and queues its callback. Caller holds mu. */
static void note_lost(dlock__watchdog *wd, held *h, dlock_lost_reason why, lost_note **notes)
{
    size_t nlen = h->len[0], olen = h->own->len;
    lost_note *n = malloc(sizeof(*n) + nlen + 1 + olen + 1);
    if (n) {
        n->fn = h->fn;
        n->ud = h->ud;
        n->reason = why;
        n->cause = h->failover && why == DLOCK_LOST_GONE ? DLOCK_CAUSE_FAILOVER
                                                          : DLOCK_CAUSE_UNKNOWN;
        n->late = dlock__now_ms() - h->renewed_at >= wd->ctx->cfg->watchdog_ms;
        n->what = h->kind->what;
        n->nlen = (uint32_t)nlen;
        memcpy(n->key, h_part(h, 0), nlen + 1);
        memcpy(n->key + nlen + 1, h->own->id, olen + 1);
        n->next = *notes;
        *notes = n;
    }
    /* Without memory for the note the loss goes unreported, but the entry
     * still leaves the schedule. */
    if (unlink_held(wd, h))
        held_free(wd, h);
}

int dlock__reply_renew(const redisReply *r, size_t n, unsigned char *renewed)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return DLOCK_EPROTO;
    for (size_t i = 0; i < n; i++)
        renewed[i] = r->element[i]->type == REDIS_REPLY_INTEGER && r->element[i]->integer == 1;
    return DLOCK_OK;
}


static void on_promoted(void *arg, dlock__node *n)
{
    (void)n;
    dlock__watchdog *wd = arg;
    dlock__loop_post(wd->lp, &wd->kick_job);
}

static void batch_done(dlock__watchdog *wd, batch *b, const redisReply *r, int ok)
{
    if (ok && dlock__reply_renew(r, (size_t)b->n, b->renewed) != DLOCK_OK)
        ok = 0;
    if (b->ack) {
        b->ok = ok;   /* the WAIT's answer decides */
        return;
    }
    dlock__wd_batch_finish(wd, b, ok, b->renewed, 0);
}

/* unacked: the renewals were not acknowledged by enough replicas and the
 * policy gives such holds up (reported lost, no longer renewed). */
void dlock__wd_batch_finish(dlock__watchdog *wd, batch *b, int ok, const unsigned char *renewed,
                            int unacked)
{
    b->wc->inflight--;
    lost_note *notes = NULL;
    int again = 0;
    /* When the node that answered became a primary, if it did; and whether
     * the batch's keys live elsewhere now (a new primary seen meanwhile). */
    const int64_t promoted_at = dlock__node_promoted_at(b->wc->node);
    const int moved = b->n > 0 && dlock__router_node(wd->router, h_part(b->e[0], 0),
                                                     b->e[0]->len[0]) != b->wc->node;
    if (b->recheck)
        wd->rechecks_out--;
    pthread_mutex_lock(&wd->mu);
    wd->batches_out--;
    for (int i = 0; i < b->n; i++) {
        held *h = b->e[i];
        h->inflight = 0;
        if (h->dead) {
            if (h->awaited & AW_ASYNC)
                settle_answered(wd, h);
            if (h->awaited & AW_THREAD)
                pthread_cond_broadcast(&wd->answered);   /* its release frees it */
            else
                held_free(wd, h);
            continue;
        }
        if (!ok)
            continue;
        if (renewed[i] && unacked) {
            if (h->releasing == 0)
                note_lost(wd, h, DLOCK_LOST_REPLICAS, &notes);
        } else if (renewed[i]) {
            dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWALS, 1);
            if (moved)
                again = 1;   /* renewed where it lived: checked where it lives now, at
                                once rather than a period later */
            else if (b->sent_at > promoted_at)
                h->failover = 0;   /* found on the new primary */
            if (b->sent_at > h->renewed_at)
                h->renewed_at = b->sent_at;
        } else if (h->releasing == 0) {
            note_lost(wd, h, DLOCK_LOST_GONE, &notes);
        }
    }
    int more = !dlock__list_empty(&wd->recheck);
    pthread_mutex_unlock(&wd->mu);
    if (again)
        dlock__loop_post(wd->lp, &wd->kick_job);
    cause_sample before = b->before;
    wconn *wc = b->wc;
    free((void *)b);
    dlock__wd_explain(wd, wc, &before, notes);
    if (more && ok)
        dlock__wd_recheck(wd);   /* holds whose key changed while their renewal was in flight */
    else if (more)
        dlock__wd_recheck_later(wd);   /* not at once against a failing server */
}

static int send_batch(dlock__watchdog *wd, batch *b);
static void schedule(dlock__watchdog *wd, int64_t at);

static void on_load_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    wconn *wc = ud;
    wc->loading = 0;   /* answered either way: a later NOSCRIPT loads again */
    if (r && r->type == REDIS_REPLY_ERROR)
        dlock__log(wc->wd->ctx->cfg, DLOCK_LOG_ERROR,
                   "SCRIPT LOAD of a renewal script on %s failed: %s",
                   dlock__node_addr(wc->node), r->str);
}

static void on_batch_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    batch *b = ud;
    dlock__watchdog *wd = b->wd;
    wconn *wc = b->wc;
    /* Renewals are idempotent, and retried by the schedule itself. */
    dlock__try t = {.sent = r ? DLOCK__SENT_OK : DLOCK__MAYBE_RAN,
                    .timed_out = status == DLOCK_ECMDTIMEOUT};
    if (r && r->type == REDIS_REPLY_ERROR)
        t.err = dlock__redis_classify(r->str);
    dlock__verdict v = dlock__call_policy(&t, DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY, 0,
                                          b->reloaded || wd->stopping, wd->ctx->cfg);
    if (v.next == DLOCK__NEXT_RELOAD) {
        /* Redis lost its script cache (restart): load once, resend this batch.
         * Replies arrive in order, so the load runs before every resend. The
         * resend's answer comes after the WAIT's: it is not acknowledged. */
        b->reloaded = 1;
        if (b->ack) {
            for (int i = 0; i < b->ack->n; i++)
                if (b->ack->b[i] == b)
                    b->ack->b[i] = NULL;
            b->ack = NULL;
        }
        if (!wc->loading) {
            const dlock__script *s = &dlock__scripts[b->kind->script];
            const char *av[] = {"SCRIPT", "LOAD", s->body};
            size_t lens[] = {6, 4, s->len};
            if (dlock__aconn_send(ac, 3, av, lens, 1, on_load_reply, wc) == DLOCK_OK)
                wc->loading = 1;
        }
        if (send_batch(wd, b) == DLOCK_OK)
            return;
    }
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)b->n;
    if (ok) {
        wc->failing = 0;
    } else {
        wc->failing = 1;
        /* A slot that moved (MOVED, failover): the router's map is read again,
         * and the retry goes where it says. */
        if (t.err == DLOCK__RERR_READONLY)
            dlock__router_demoted(wd->router, wc->node);   /* the next tick renews anew */
        else if (!r || v.next == DLOCK__NEXT_REROUTE)
            dlock__router_stale(wd->router);
        dlock__log(wd->ctx->cfg, DLOCK_LOG_WARN, "%s renewal on %s failed: %s", b->kind->what,
                   dlock__node_addr(wc->node),
                   !r ? dlock_strerror(status)
                      : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    batch_done(wd, b, r, ok);
    if (!ok && !wd->stopping)
        schedule(wd, dlock__now_ms() + wd->ctx->cfg->retry_delay_ms);
}

/* EVALSHA sha nkeys, every hold's keys, the lease, every hold's arguments.
 * While tracking is on: EVALSHA sha 0, the lease, the number of keys, the
 * keys, the arguments (see lock/renew.lua), then EXISTS of the tracked keys. */
static int send_batch(dlock__watchdog *wd, batch *b)
{
    const dlock__hold_kind *k = b->kind;
    const int track = wd->track_live && k->track >= 0;
    int argc = 4 + b->n * nparts(k) + track;
    const char **av = malloc((size_t)argc * sizeof(*av));
    size_t *lens = malloc((size_t)argc * sizeof(*lens));
    if (!av || !lens) {
        free(av);
        free(lens);
        return DLOCK_ENOMEM;
    }
    char nk[16], lease[24];
    int i = 0;
    av[i] = "EVALSHA";
    lens[i++] = 7;
    av[i] = dlock__scripts[k->script].sha;
    lens[i++] = 40;
    if (track) {
        av[i] = "0";
        lens[i++] = 1;
        av[i] = lease;
        lens[i++] = dlock__fmt_i64(lease, b->lease);
    }
    av[i] = nk;
    lens[i++] = dlock__fmt_i64(nk, (int64_t)b->n * k->nkeys);
    for (int e = 0; e < b->n; e++)
        for (int p = 0; p < k->nkeys; p++) {
            av[i] = h_part(b->e[e], p);
            lens[i++] = b->e[e]->len[p];
        }
    if (!track) {
        av[i] = lease;
        lens[i++] = dlock__fmt_i64(lease, b->lease);
    }
    for (int e = 0; e < b->n; e++)
        for (int p = k->nkeys; p < nparts(k); p++) {
            av[i] = h_part(b->e[e], p);
            lens[i++] = b->e[e]->len[p];
        }
    int rc = dlock__aconn_send(b->wc->conn, i, av, lens, 1, on_batch_reply, b);
    if (rc == DLOCK_OK)
        dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWAL_RTTS, 1);
    free(av);
    free(lens);
    if (rc == DLOCK_OK && track)
        dlock__wd_send_track(wd, b);   /* not sent: the next renewal tracks the key */
    return rc;
}


/* Brings the timer forward to `at` if it is due later. */
static void schedule(dlock__watchdog *wd, int64_t at)
{
    if (wd->stopping || !wd->timer_inited)
        return;
    int64_t now = dlock__now_ms();
    uint64_t delay = (uint64_t)(at > now ? at - now : 0);
    if (uv_is_active((uv_handle_t *)&wd->timer) && uv_timer_get_due_in(&wd->timer) <= delay)
        return;
    uv_timer_start(&wd->timer, on_timer, delay, 0);
}


static void on_timer(uv_timer_t *t) { dlock__wd_tick(t->data); }

/* Batches a write holds at most: a pass over 100 000 holds on one node is
 * ~11 MB of scripts, which one write would first gather in the client's
 * memory; slices of 128 (~1.4 MB) go to the socket as they are made. Up to
 * 12 800 holds per node still go in one write. */
#define SLICE_BATCHES 128

/* Sends a pass's batches: its scripts for one node in as few writes as
 * slices allow, then the WAIT of each node's batches when replicas must
 * acknowledge. */
void dlock__wd_send_all(dlock__watchdog *wd, tick_batches *tb)
{
    const dlock_config *cfg = wd->ctx->cfg;
    if (tb->n > 0) {
        pthread_mutex_lock(&wd->mu);
        wd->batches_out += (int)tb->n;
        pthread_mutex_unlock(&wd->mu);
        for (size_t c = 0; c < wd->nconns; c++)
            dlock__aconn_cork(wd->conns[c]->conn);
    }
    size_t sent = 0;
    for (size_t c = 0; c < wd->nconns; c++)
        wd->conns[c]->wrote = 0;
    for (size_t i = 0; i < tb->n; i++) {
        wconn *wc = tb->v[i]->wc;
        if (send_batch(wd, tb->v[i]) != DLOCK_OK) {
            wc->failing = 1;
            batch_done(wd, tb->v[i], NULL, 0);
            continue;
        }
        tb->v[sent++] = tb->v[i];
        if (++wc->wrote == SLICE_BATCHES) {   /* this slice's write */
            dlock__aconn_uncork(wc->conn);
            dlock__aconn_cork(wc->conn);
            dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWAL_WRITES, 1);
            wc->wrote = 0;
        }
    }
    for (size_t c = 0; c < wd->nconns; c++)
        if (wd->conns[c]->wrote)
            dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWAL_WRITES, 1);
    if (cfg->ack_replicas > 0 && !cfg->ack_all && sent > 0)
        for (size_t c = 0; c < wd->nconns; c++)
            dlock__wd_ask_acks(wd, wd->conns[c], tb->v, sent);
    for (size_t c = 0; c < wd->nconns; c++)
        if (wd->conns[c]->wrote)
            dlock__wd_cause_sample(wd, wd->conns[c]);
    if (tb->n > 0)
        for (size_t c = 0; c < wd->nconns; c++)
            dlock__aconn_uncork(wd->conns[c]->conn);
    if (tb->v != tb->stack)
        free(tb->v);
    if (tb->open != tb->open_st)
        free(tb->open);
}

/* One pass: report losses whose deadline passed, renew what is due, and set
 * the timer for the next renewal or deadline, whichever comes first. */
void dlock__wd_tick(dlock__watchdog *wd)
{
    if (wd->stopping)
        return;
    const dlock_config *cfg = wd->ctx->cfg;
    const int64_t now = dlock__now_ms();
    const int64_t timeout = cfg->watchdog_ms, period = period_ms(wd);
    /* Report a loss a little before the lease would run out, so that a late
     * timer or a busy machine cannot push the report past Redis's expiry. */
    const int64_t early = timeout / 20 < 500 ? timeout / 20 : 500;
    const int64_t retry = cfg->retry_delay_ms < period ? cfg->retry_delay_ms : period;
    int failing = 0;
    for (size_t i = 0; i < wd->nconns; i++)
        failing |= wd->conns[i]->failing;
    int64_t next = now + (failing ? retry : period);
    const int cluster = dlock__router_is_cluster(wd->router);
    /* Ticks come at least every period; one much later means this process
     * did not run meanwhile, and the losses found now are its own pause. */
    const int paused = now - wd->last_tick > period + period / 2 + 250;
    wd->last_tick = now;
    lost_note *notes = NULL;
    tick_batches tb;
    tb_init(&tb);
    int any = 0;

    pthread_mutex_lock(&wd->mu);
    dlock__list *it = wd->all.next;
    while (it != &wd->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        it = it->next;
        any = 1;
        /* The key expires at renewed_at + timeout, or at the hold's limit:
         * no TTL is ever set beyond it. */
        const int limited = h->limit_at <= h->renewed_at + timeout;
        const int64_t deadline = (limited ? h->limit_at : h->renewed_at + timeout) - early;
        if (now >= deadline) {
            note_lost(wd, h,
                      limited  ? DLOCK_LOST_MAX_HOLD
                      : paused ? DLOCK_LOST_PAUSED
                               : DLOCK_LOST_UNREACHABLE,
                      &notes);
            continue;
        }
        if (deadline < next)
            next = deadline;
        /* The node that serves the hold's keys now (the router's map, read
         * without I/O), and its renewal connection. */
        dlock__node *node = dlock__router_node(wd->router, h_part(h, 0), h->len[0]);
        /* Its node became a primary after the hold's last renewal was sent
         * (the router's hook kicks a tick at once): renewed there now, so
         * that a hold it lacks is found and reported at once, with cause
         * "failover". */
        const int64_t promoted = node ? dlock__node_promoted_at(node) : 0;
        if (promoted > 0 && promoted >= h->renewed_at)
            h->failover = 1;
        if (h->inflight)
            continue;
        /* A hold whose key lives to its limit is not renewed any more. */
        if (!h->recap && !h->failover && (limited || now - h->renewed_at < period / 2))
            continue;
        wconn *wc = dlock__wd_conn_for(wd, node);
        if (!wc)
            break;
        wc->used = 1;
        if (!dlock__aconn_ready(wc->conn)) {
            dlock__aconn_start(wc->conn);   /* on_conn_ready ticks again */
            continue;
        }
        h->recap = 0;
        dlock__list_remove(&h->rlink);
        const int64_t lease = h->limit_at - now < timeout ? h->limit_at - now : timeout;
        int slot = cluster ? dlock__key_slot(h_part(h, 0), h->len[0]) : 0;
        batch *b = dlock__wd_batch_for(wd, &tb, h->kind, wc, slot, lease, now);
        if (!b)
            break;
        h->inflight = 1;
        b->e[b->n++] = h;
    }
    pthread_mutex_unlock(&wd->mu);
    dlock__wd_send_all(wd, &tb);

    if (any && wd->track) {
        /* Tracking needs the renewal connection up before any hold is due
         * (a new hold is registered 3 ms after it is taken): the single
         * server's. */
        wconn *wc = dlock__wd_conn_for(wd, dlock__router_node(wd->router, NULL, 0));
        if (wc) {
            wc->used = 1;
            if (!dlock__aconn_ready(wc->conn))
                dlock__aconn_start(wc->conn);
        }
        dlock__tracking_start(wd->track);   /* no-op once connected */
    }
    dlock__wd_drop_unused(wd);

    dlock__wd_report(wd, notes);
    if (!wd->stopping)
        uv_timer_start(&wd->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

static void on_timer_closed(uv_handle_t *h) {}

/* Stop hook (io thread): the timer and the renewal connection go. */
static void on_stop(void *arg)
{
    dlock__watchdog *wd = arg;
    wd->stopping = 1;
    dlock__netctx_on_promoted(wd->ctx, DLOCK__HOOK_WATCHDOG, NULL, NULL);
    if (wd->timer_inited) {
        uv_timer_stop(&wd->timer);
        uv_close((uv_handle_t *)&wd->timer, on_timer_closed);
        uv_timer_stop(&wd->reg_timer);
        uv_close((uv_handle_t *)&wd->reg_timer, on_timer_closed);
    }
    for (size_t i = 0; i < wd->nconns; i++) {
        dlock__aconn_close(wd->conns[i]->conn, NULL, NULL);
        free(wd->conns[i]);   /* its batches were failed by the close */
    }
    free(wd->conns);
    wd->conns = NULL;
    wd->nconns = 0;
    dlock__tracking_stop(wd->track);
}

/* ------------------------------------------------------------ lifecycle */

static void kick_job(void *arg)
{
    dlock__watchdog *wd = arg;
    if (wd->timer_inited)
        dlock__wd_tick(wd);
}

/* First job on the io thread: the timer. */
static void start_job(void *arg)
{
    dlock__watchdog *wd = arg;
    if (wd->stopping)
        return;
    int rc = uv_timer_init(dlock__loop_uv(wd->lp), &wd->timer);
    if (rc == 0 && (rc = uv_timer_init(dlock__loop_uv(wd->lp), &wd->reg_timer)) < 0)
        uv_close((uv_handle_t *)&wd->timer, on_timer_closed);
    if (rc < 0) {
        dlock__log(wd->ctx->cfg, DLOCK_LOG_ERROR, "cannot create the watchdog timer: %s",
                   uv_strerror(rc));
        return;
    }
    wd->timer.data = wd;
    wd->reg_timer.data = wd;
    wd->timer_inited = 1;
    uv_timer_start(&wd->timer, on_timer, (uint64_t)period_ms(wd), 0);
}

int dlock__watchdog_new(dlock__watchdog **out, dlock__loop *lp, dlock__netctx *ctx,
                        dlock__router *router)
{
    dlock__watchdog *wd = calloc(1, sizeof(*wd));
    if (!wd)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    wd->ctx = ctx;
    wd->lp = lp;
    wd->router = router;
    dlock__job_init(&wd->flush_job, flush_pending, wd);
    dlock__job_init(&wd->start_job, start_job, wd);
    dlock__job_init(&wd->kick_job, kick_job, wd);
    dlock__job_init(&wd->recheck_job, dlock__wd_recheck_job, wd);
    /* The schedule starts now: a process stopped before the io thread first
     * ran still has its pause seen. */
    wd->last_tick = dlock__now_ms();
    pthread_mutex_init(&wd->mu, NULL);
    if (dlock__cond_init(&wd->answered) != 0) {
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return dlock__fail(DLOCK_ENOMEM, "cannot create a condition variable");
    }
    dlock__map_init(&wd->map, h_eq);
    dlock__list_init(&wd->all);
    dlock__map_init(&wd->tkeys, dlock__wd_tk_eq);
    dlock__map_init(&wd->owners, o_eq);
    dlock__list_init(&wd->recheck);
    dlock__list_init(&wd->settles);
    int rc = DLOCK_OK;
    /* Revocation on one server only: on a sentinel or cluster deployment the
     * keys' node changes (and a cluster would need a listener per node), so
     * there a loss is found by the renewals. */
    if (!ctx->cfg->revocation_off && !dlock__router_dynamic(router)) {
        dlock__tracking_cbs cbs = {dlock__wd_on_track_id, dlock__wd_on_invalidate, wd};
        rc = dlock__tracking_new(&wd->track, dlock__loop_uv(lp), ctx, router, NULL, &cbs);
    }
    if (rc == DLOCK_OK)
        rc = dlock__loop_on_stop(lp, on_stop, wd);
    if (rc != DLOCK_OK) {
        dlock__tracking_free(wd->track);
        pthread_cond_destroy(&wd->answered);
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return rc;
    }
    dlock__netctx_on_promoted(ctx, DLOCK__HOOK_WATCHDOG, on_promoted, wd);
    dlock__loop_post(lp, &wd->start_job);
    *out = wd;
    return DLOCK_OK;
}

void dlock__watchdog_free(dlock__watchdog *wd)
{
    if (!wd)
        return;
    dlock__netctx_on_promoted(wd->ctx, DLOCK__HOOK_WATCHDOG, NULL, NULL);
    while (wd->pending) {   /* losses found after the io thread stopped */
        lost_note *n = wd->pending;
        wd->pending = n->next;
        free(n);
    }
    while (!dlock__list_empty(&wd->settles)) {   /* none: their calls ended first */
        dlock__list *it = wd->settles.next;
        dlock__list_remove(it);
        free(DLOCK__CONTAINER_OF(it, settle_node, link));
    }
    while (!dlock__list_empty(&wd->all)) {
        held *h = DLOCK__CONTAINER_OF(wd->all.next, held, all);
        dlock__list_remove(&h->all);
        dlock__wd_track_unlink(wd, h);
        held_free(wd, h);
    }
    dlock__map_free(&wd->map);
    dlock__map_free(&wd->tkeys);
    dlock__map_free(&wd->owners);
    dlock__tracking_free(wd->track);
    pthread_cond_destroy(&wd->answered);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
}
