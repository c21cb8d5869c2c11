/* Revocation heard at once (revoke.h; watchdog.md; tracking.c listens):
 * holds are indexed by the key whose change may end them; a reported change,
 * a new hold, or tracking coming (back) on puts holds on the recheck list,
 * and a recheck pass renews them at once (at most RECHECK_WINDOW scripts in
 * flight) through the per-node batches. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/revoke.h"

static int tk_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const held *h = DLOCK__CONTAINER_OF(n, held, tn);
    int k = h->kind->track;
    return h->len[k] == len && memcmp(h_part(h, k), key, len) == 0;
}

/* The renewal connection tracking runs on (one server only: its one node
 * keeps its connection), NULL when there is none (yet) or tracking is off. */
static wconn *track_conn(const dlock__wd_revoke *rv)
{
    return rv->track && rv->nodes->nconns > 0 ? rv->nodes->conns[0] : NULL;
}

/* Indexes h under the key its kind tracks. Without memory (the map's first
 * bucket array) it goes unindexed: its loss is then found by its renewal.
 * Caller holds mu. */
void dlock__wd_track_link(dlock__wd_revoke *rv, held *h)
{
    int k = h->kind->track;
    dlock__list_init(&h->rlink);
    h->tracked = 0;
    if (k < 0 || !rv->track)
        return;
    h->tn.hash = dlock__hash(h_part(h, k), h->len[k]);
    h->tracked = dlock__map_insert(&rv->tkeys, &h->tn) == 0;
}

void dlock__wd_track_unlink(dlock__wd_revoke *rv, held *h)
{
    dlock__list_remove(&h->rlink);
    if (h->tracked)
        dlock__map_remove(&rv->tkeys, &h->tn);
    h->tracked = 0;
}

/* Puts h on the recheck list, due at once (a new hold's registration comes
 * due now too: its key was reported changed); caller holds mu. */
static void mark_recheck(dlock__wd_revoke *rv, held *h)
{
    h->fresh = 0;
    if (h->rlink.next == &h->rlink)
        dlock__list_push_back(&rv->recheck, &h->rlink);
}

int dlock__wd_revoke_added(dlock__wd_revoke *rv, held *h)
{
    /* Renewed once when it is DLOCK__WD_REGISTER_AGE_MS old, so that Redis
     * tracks it from then on (and the listener is started with the first
     * hold): a hold released sooner costs Redis nothing more. The io thread is
     * woken only when no registering pass is due already: an acquisition's
     * hot path does not hop through it each time. */
    if (!rv->track || rv->track_refused)
        return 0;
    if (rv->track_live) {
        mark_recheck(rv, h);
        h->fresh = 1;
    }
    int post = !rv->reg_armed;
    rv->reg_armed = 1;
    return post;
}

void dlock__wd_revoke_wake(dlock__wd_revoke *rv) { dlock__loop_post(rv->lp, &rv->reg_job); }

int dlock__wd_revoke_state(dlock__wd_revoke *rv)
{
    pthread_mutex_lock(rv->mu);
    int live = !rv->track_live                                                   ? 0
               : dlock__list_empty(&rv->recheck) && rv->nodes->batches_out == 0 ? 2
                                                                                 : 1;
    pthread_mutex_unlock(rv->mu);
    return live;
}

int dlock__wd_revoke_due(const dlock__wd_revoke *rv) { return !dlock__list_empty(&rv->recheck); }

void dlock__wd_revoke_answered(dlock__wd_revoke *rv) { rv->rechecks_out--; }

/* ------------------------------------------------------- revocation */

/* Renews at once the holds due a recheck (those whose key Redis reported
 * changed, new ones come of age); one in flight waits for its answer (the
 * schedule comes back here when it answers), since it may have read the key
 * before the change. At most RECHECK_WINDOW recheck scripts are in flight:
 * under a burst of acquisitions the others wait for their answers and fill
 * batches of up to 100 meanwhile, instead of queueing thousands of small
 * scripts ahead of the renewals. */
#define RECHECK_WINDOW 2

static void on_reg_timer(uv_timer_t *t);

static void recheck(dlock__wd_revoke *rv)
{
    wconn *wc = track_conn(rv);
    if (rv->nodes->stopping || !wc || !dlock__aconn_ready(wc->conn) ||
        rv->rechecks_out >= RECHECK_WINDOW)
        return;
    const int64_t now = dlock__now_ms(), timeout = rv->ctx->cfg->watchdog_ms;
    const int room = (RECHECK_WINDOW - rv->rechecks_out) * DLOCK__RENEW_BATCH;
    int n = 0;
    int64_t young = INT64_MAX;   /* when the next new hold comes of age */
    tick_batches tb;
    dlock__wd_tb_init(&tb, rv->track_live);
    pthread_mutex_lock(rv->mu);
    dlock__list *it = rv->recheck.next;
    while (rv->track_live && it != &rv->recheck && n < room) {
        held *h = DLOCK__CONTAINER_OF(it, held, rlink);
        it = it->next;
        if (h->inflight)
            continue;
        if (h->fresh && now - h->renewed_at < DLOCK__WD_REGISTER_AGE_MS) {
            if (h->renewed_at + DLOCK__WD_REGISTER_AGE_MS < young)
                young = h->renewed_at + DLOCK__WD_REGISTER_AGE_MS;
            continue;
        }
        h->fresh = 0;
        dlock__list_remove(&h->rlink);
        /* A hold at its limit is the schedule's to report; a renewal never
         * sets a TTL past the limit. */
        const int64_t lease = h->limit_at - now < timeout ? h->limit_at - now : timeout;
        if (lease <= 0)
            continue;
        batch *b = dlock__wd_batch_for(&tb, h->kind, wc, 0, lease, now);
        if (!b)
            break;
        h->inflight = 1;
        b->e[b->n++] = h;
        n++;
    }
    if (young != INT64_MAX)
        rv->reg_armed = 1;   /* a pass is due: holds added meanwhile need not post */
    pthread_mutex_unlock(rv->mu);
    if (young != INT64_MAX && !uv_is_active((uv_handle_t *)&rv->reg_timer))
        uv_timer_start(&rv->reg_timer, on_reg_timer, (uint64_t)(young > now ? young - now : 0), 0);
    for (size_t i = 0; i < tb.n; i++)
        tb.v[i]->recheck = 1;
    rv->rechecks_out += (int)tb.n;
    dlock__wd_send_all(rv->nodes, &tb);
}

/* A new hold came of age (or the first one's wait ended, or a failed recheck
 * is tried again). */
static void on_reg_timer(uv_timer_t *t)
{
    dlock__wd_revoke *rv = t->data;
    pthread_mutex_lock(rv->mu);
    rv->reg_armed = 0;   /* holds added from now on wake the io thread again */
    pthread_mutex_unlock(rv->mu);
    recheck(rv);
}

/* New holds: each registered (renewed once, so that Redis tracks its key)
 * when it is DLOCK__WD_REGISTER_AGE_MS old, by a pass that takes every hold
 * of age then, so that a burst of acquisitions costs one script per 100
 * holds rather than one per hold, and a hold released before costs none. A
 * change before is found by the registering renewal itself. */
static void recheck_later(dlock__wd_revoke *rv)
{
    pthread_mutex_lock(rv->mu);
    rv->reg_armed = 1;
    pthread_mutex_unlock(rv->mu);
    int64_t delay = rv->ctx->cfg->retry_delay_ms;
    if (delay < DLOCK__WD_REGISTER_AGE_MS)
        delay = DLOCK__WD_REGISTER_AGE_MS;
    if (!uv_is_active((uv_handle_t *)&rv->reg_timer))   /* else a pass comes sooner */
        uv_timer_start(&rv->reg_timer, on_reg_timer, (uint64_t)delay, 0);
}

void dlock__wd_revoke_resume(dlock__wd_revoke *rv, int ok)
{
    if (ok)
        recheck(rv);   /* holds whose key changed while their renewal was in flight */
    else
        recheck_later(rv);
}

static void reg_job(void *arg)
{
    dlock__wd_revoke *rv = arg;
    if (rv->nodes->stopping || !rv->timer_inited)
        return;
    wconn *wc = track_conn(rv);
    if (!wc || !dlock__aconn_ready(wc->conn) || !rv->track_id) {
        /* Tracking not on yet: when it is, every hold is marked. */
        pthread_mutex_lock(rv->mu);
        rv->reg_armed = 0;
        pthread_mutex_unlock(rv->mu);
        rv->tick(rv->ud);   /* connects the renewal connection and the listener */
        return;
    }
    if (!uv_is_active((uv_handle_t *)&rv->reg_timer))
        uv_timer_start(&rv->reg_timer, on_reg_timer, DLOCK__WD_REGISTER_AGE_MS, 0);
}

/* Marks every hold for a recheck: tracking (re)starts, or Redis reported
 * every key changed (FLUSHALL). Caller holds mu. */
static void mark_all(dlock__wd_revoke *rv)
{
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, rv->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        if (h->tracked)
            mark_recheck(rv, h);
    }
}

static void set_live(dlock__wd_revoke *rv, int live)
{
    pthread_mutex_lock(rv->mu);
    rv->track_live = live;
    if (live)
        mark_all(rv);   /* changes made while it was off were missed */
    pthread_mutex_unlock(rv->mu);
    if (live)
        recheck(rv);
}

static void on_tracking_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    dlock__wd_revoke *rv = ud;
    wconn *wc = track_conn(rv);
    if (!r || !wc || ac != wc->conn)
        return;   /* the connection went: enabled again when it is back */
    if (r->type == REDIS_REPLY_STATUS) {
        set_live(rv, 1);
        return;
    }
    dlock__log(rv->ctx->cfg, DLOCK_LOG_WARN,
               "CLIENT TRACKING refused (%s): a lock deleted by someone else is found at its "
               "next renewal only", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    pthread_mutex_lock(rv->mu);
    rv->track_refused = 1;
    pthread_mutex_unlock(rv->mu);
    dlock__tracking_stop(rv->track);
}

/* Turns tracking on for the renewal connection, redirected to the listener,
 * when both are up. */
static void track_enable(dlock__wd_revoke *rv)
{
    wconn *wc = track_conn(rv);
    if (!rv->track || !rv->track_id || rv->nodes->stopping || !wc ||
        !dlock__aconn_ready(wc->conn))
        return;
    pthread_mutex_lock(rv->mu);
    int refused = rv->track_refused;
    pthread_mutex_unlock(rv->mu);
    if (refused)
        return;
    char id[24];
    const char *av[] = {"CLIENT", "TRACKING", "ON", "REDIRECT", id, "NOLOOP"};
    size_t lens[] = {6, 8, 2, 8, 0, 6};
    lens[4] = dlock__fmt_i64(id, rv->track_id);
    dlock__aconn_send(wc->conn, 6, av, lens, 1, on_tracking_reply, rv);
}

void dlock__wd_revoke_conn_up(dlock__wd_revoke *rv)
{
    if (!rv->track)
        return;
    set_live(rv, 0);   /* a new connection: tracking is off until enabled */
    track_enable(rv);
}

void dlock__wd_revoke_conn_down(dlock__wd_revoke *rv)
{
    if (rv->track)
        set_live(rv, 0);
}

void dlock__wd_revoke_keep_up(dlock__wd_revoke *rv)
{
    if (!rv->track)
        return;
    /* Tracking needs the renewal connection up before any hold is due (a
     * new hold is registered 3 ms after it is taken): the single server's. */
    wconn *wc = dlock__wd_conn_for(rv->nodes, dlock__router_node(rv->nodes->router, NULL, 0));
    if (wc) {
        wc->used = 1;
        if (!dlock__aconn_ready(wc->conn))
            dlock__aconn_start(wc->conn);
    }
    dlock__tracking_start(rv->track);   /* no-op once connected */
}

/* ------------------------------------------------- the listener's side */

static void on_track_id(int64_t id, void *ud)
{
    dlock__wd_revoke *rv = ud;
    rv->track_id = id > 0 ? id : 0;
    if (id < 0) {
        pthread_mutex_lock(rv->mu);
        rv->track_refused = 1;
        pthread_mutex_unlock(rv->mu);
    }
    if (id <= 0)
        set_live(rv, 0);   /* Redis drops what it would have told us */
    else
        track_enable(rv);  /* a new listener: redirect to it */
}

static void on_invalidate(const redisReply *keys, void *ud)
{
    dlock__wd_revoke *rv = ud;
    pthread_mutex_lock(rv->mu);
    if (!keys) {
        rv->flushes++;   /* a loss found now was flushed (cause.c) */
        mark_all(rv);
    } else {
        for (size_t i = 0; i < keys->elements; i++) {
            const redisReply *k = keys->element[i];
            if (k->type != REDIS_REPLY_STRING)
                continue;
            uint64_t hash = dlock__hash(k->str, k->len);
            for (dlock__hnode *n = dlock__map_find(&rv->tkeys, hash, k->str, k->len); n;
                 n = dlock__map_find_next(&rv->tkeys, n, hash, k->str, k->len)) {
                held *h = DLOCK__CONTAINER_OF(n, held, tn);
                /* A release under way made the change (or will report it). */
                if (h->releasing == 0)
                    mark_recheck(rv, h);
            }
        }
    }
    pthread_mutex_unlock(rv->mu);
    recheck(rv);
}

/* ------------------------------------------------------------ lifecycle */

int dlock__wd_revoke_init(dlock__wd_revoke *rv, dlock__netctx *ctx, dlock__loop *lp,
                          dlock__router *router, pthread_mutex_t *mu, dlock__wd_nodes *nodes,
                          dlock__list *all, void (*tick)(void *ud), void *ud)
{
    memset(rv, 0, sizeof(*rv));
    rv->ctx = ctx;
    rv->lp = lp;
    rv->mu = mu;
    rv->nodes = nodes;
    rv->all = all;
    rv->tick = tick;
    rv->ud = ud;
    dlock__job_init(&rv->reg_job, reg_job, rv);
    dlock__map_init(&rv->tkeys, tk_eq);
    dlock__list_init(&rv->recheck);
    /* Revocation on one server only: on a sentinel or cluster deployment the
     * keys' node changes (and a cluster would need a listener per node), so
     * there a loss is found by the renewals. */
    if (ctx->cfg->revocation_off || dlock__router_dynamic(router))
        return DLOCK_OK;
    dlock__tracking_cbs cbs = {on_track_id, on_invalidate, rv};
    return dlock__tracking_new(&rv->track, dlock__loop_uv(lp), ctx, router, NULL, &cbs);
}

int dlock__wd_revoke_start(dlock__wd_revoke *rv)
{
    int rc = uv_timer_init(dlock__loop_uv(rv->lp), &rv->reg_timer);
    if (rc == 0) {
        rv->reg_timer.data = rv;
        rv->timer_inited = 1;
    }
    return rc;
}

static void on_timer_closed(uv_handle_t *h) { (void)h; }

void dlock__wd_revoke_stop(dlock__wd_revoke *rv)
{
    if (rv->timer_inited) {
        uv_timer_stop(&rv->reg_timer);
        uv_close((uv_handle_t *)&rv->reg_timer, on_timer_closed);
    }
    dlock__tracking_stop(rv->track);
}

void dlock__wd_revoke_free(dlock__wd_revoke *rv)
{
    dlock__map_free(&rv->tkeys);
    dlock__tracking_free(rv->track);
}
