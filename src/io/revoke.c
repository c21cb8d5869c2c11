/* Revocation heard at once: the watchdog's side of client tracking (see the
 * header comment of watchdog.c and tracking.c). Holds are indexed by the key
 * whose change may end them; a reported change, a new hold, or tracking
 * coming (back) on puts holds on the recheck list, and a recheck pass renews
 * them at once (at most RECHECK_WINDOW scripts in flight). */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/watchdog_int.h"

int dlock__wd_tk_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const held *h = DLOCK__CONTAINER_OF(n, held, tn);
    int k = h->kind->track;
    return h->len[k] == len && memcmp(h_part(h, k), key, len) == 0;
}

/* Indexes h under the key its kind tracks. Without memory (the map's first
 * bucket array) it goes unindexed: its loss is then found by its renewal.
 * Caller holds mu. */
void dlock__wd_track_link(dlock__watchdog *wd, held *h)
{
    int k = h->kind->track;
    dlock__list_init(&h->rlink);
    h->tracked = 0;
    if (k < 0 || !wd->track)
        return;
    h->tn.hash = dlock__hash(h_part(h, k), h->len[k]);
    h->tracked = dlock__map_insert(&wd->tkeys, &h->tn) == 0;
}

void dlock__wd_track_unlink(dlock__watchdog *wd, held *h)
{
    dlock__list_remove(&h->rlink);
    if (h->tracked)
        dlock__map_remove(&wd->tkeys, &h->tn);
    h->tracked = 0;
}

void dlock__wd_mark_recheck(dlock__watchdog *wd, held *h)
{
    h->fresh = 0;
    if (h->rlink.next == &h->rlink)
        dlock__list_push_back(&wd->recheck, &h->rlink);
}

int dlock__watchdog_tracking(dlock__watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    int live = !wd->track_live                                         ? 0
               : dlock__list_empty(&wd->recheck) && wd->batches_out == 0 ? 2
                                                                         : 1;
    pthread_mutex_unlock(&wd->mu);
    return live;
}

static void on_exists_reply(dlock__aconn *ac, redisReply *r, int status, void *ud) {}

/* EXISTS of the keys the batch's holds are tracked by, after their renewal
 * wrote them: Redis tracks a key this connection read after its own last
 * write to it. */
int dlock__wd_send_track(dlock__watchdog *wd, batch *b)
{
    int t = b->kind->track;
    const char *av[1 + DLOCK__RENEW_BATCH];
    size_t lens[1 + DLOCK__RENEW_BATCH];
    av[0] = "EXISTS";
    lens[0] = 6;
    for (int e = 0; e < b->n; e++) {
        av[1 + e] = h_part(b->e[e], t);
        lens[1 + e] = b->e[e]->len[t];
    }
    return dlock__aconn_send(b->wc->conn, 1 + b->n, av, lens, 1, on_exists_reply, NULL);
}

/* ------------------------------------------------------- revocation */

/* Renews at once the holds due a recheck (those whose key Redis reported
 * changed, new ones come of age); one in flight waits for its answer
 * (batch_done comes back here), since it may have read the key before the
 * change. At most
 * RECHECK_WINDOW recheck scripts are in flight: under a burst of acquisitions
 * the others wait for their answers and fill batches of up to 100 meanwhile,
 * instead of queueing thousands of small scripts ahead of the renewals. */
#define RECHECK_WINDOW 2

static void on_reg_timer(uv_timer_t *t);

void dlock__wd_recheck(dlock__watchdog *wd)
{
    wconn *wc = dlock__wd_track_conn(wd);
    if (wd->stopping || !wc || !dlock__aconn_ready(wc->conn) || wd->rechecks_out >= RECHECK_WINDOW)
        return;
    const int64_t now = dlock__now_ms(), timeout = wd->ctx->cfg->watchdog_ms;
    const int room = (RECHECK_WINDOW - wd->rechecks_out) * DLOCK__RENEW_BATCH;
    int n = 0;
    int64_t young = INT64_MAX;   /* when the next new hold comes of age */
    tick_batches tb;
    tb_init(&tb);
    pthread_mutex_lock(&wd->mu);
    dlock__list *it = wd->recheck.next;
    while (wd->track_live && it != &wd->recheck && n < room) {
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
        /* A hold at its limit is the tick's to report; a renewal never sets a
         * TTL past the limit. */
        const int64_t lease = h->limit_at - now < timeout ? h->limit_at - now : timeout;
        if (lease <= 0)
            continue;
        batch *b = dlock__wd_batch_for(wd, &tb, h->kind, wc, 0, lease, now);
        if (!b)
            break;
        h->inflight = 1;
        b->e[b->n++] = h;
        n++;
    }
    if (young != INT64_MAX)
        wd->reg_armed = 1;   /* a pass is due: holds added meanwhile need not post */
    pthread_mutex_unlock(&wd->mu);
    if (young != INT64_MAX && !uv_is_active((uv_handle_t *)&wd->reg_timer))
        uv_timer_start(&wd->reg_timer, on_reg_timer, (uint64_t)(young > now ? young - now : 0), 0);
    for (size_t i = 0; i < tb.n; i++)
        tb.v[i]->recheck = 1;
    wd->rechecks_out += (int)tb.n;
    dlock__wd_send_all(wd, &tb);
}

/* A new hold came of age (or the first one's wait ended, or a failed recheck
 * is tried again). */
static void on_reg_timer(uv_timer_t *t)
{
    dlock__watchdog *wd = t->data;
    pthread_mutex_lock(&wd->mu);
    wd->reg_armed = 0;   /* holds added from now on wake the io thread again */
    pthread_mutex_unlock(&wd->mu);
    dlock__wd_recheck(wd);
}

/* New holds: each registered (renewed once, so that Redis tracks its key)
 * when it is DLOCK__WD_REGISTER_AGE_MS old, by a pass that takes every hold
 * of age then, so that a burst of acquisitions costs one script per 100
 * holds rather than one per hold, and a hold released before costs none. A
 * change before is found by the registering renewal itself. */
void dlock__wd_recheck_later(dlock__watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    wd->reg_armed = 1;
    pthread_mutex_unlock(&wd->mu);
    int64_t delay = wd->ctx->cfg->retry_delay_ms;
    if (delay < DLOCK__WD_REGISTER_AGE_MS)
        delay = DLOCK__WD_REGISTER_AGE_MS;
    if (!uv_is_active((uv_handle_t *)&wd->reg_timer))   /* else a pass comes sooner */
        uv_timer_start(&wd->reg_timer, on_reg_timer, (uint64_t)delay, 0);
}

void dlock__wd_recheck_job(void *arg)
{
    dlock__watchdog *wd = arg;
    if (wd->stopping || !wd->timer_inited)
        return;
    wconn *wc = dlock__wd_track_conn(wd);
    if (!wc || !dlock__aconn_ready(wc->conn) || !wd->track_id) {
        /* Tracking not on yet: when it is, every hold is marked. */
        pthread_mutex_lock(&wd->mu);
        wd->reg_armed = 0;
        pthread_mutex_unlock(&wd->mu);
        dlock__wd_tick(wd);   /* connects the renewal connection and the listener */
        return;
    }
    if (!uv_is_active((uv_handle_t *)&wd->reg_timer))
        uv_timer_start(&wd->reg_timer, on_reg_timer, DLOCK__WD_REGISTER_AGE_MS, 0);
}

/* Marks every hold for a recheck: tracking (re)starts, or Redis reported
 * every key changed (FLUSHALL). Caller holds mu. */
static void mark_all(dlock__watchdog *wd)
{
    dlock__list *it;
    DLOCK__LIST_FOREACH(it, &wd->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        if (h->tracked)
            dlock__wd_mark_recheck(wd, h);
    }
}

void dlock__wd_track_set_live(dlock__watchdog *wd, int live)
{
    pthread_mutex_lock(&wd->mu);
    wd->track_live = live;
    if (live)
        mark_all(wd);   /* changes made while it was off were missed */
    pthread_mutex_unlock(&wd->mu);
    if (live)
        dlock__wd_recheck(wd);
}

static void on_tracking_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    dlock__watchdog *wd = ud;
    wconn *wc = dlock__wd_track_conn(wd);
    if (!r || !wc || ac != wc->conn)
        return;   /* the connection went: enabled again when it is back */
    if (r->type == REDIS_REPLY_STATUS) {
        dlock__wd_track_set_live(wd, 1);
        return;
    }
    dlock__log(wd->ctx->cfg, DLOCK_LOG_WARN,
               "CLIENT TRACKING refused (%s): a lock deleted by someone else is found at its "
               "next renewal only", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    pthread_mutex_lock(&wd->mu);
    wd->track_refused = 1;
    pthread_mutex_unlock(&wd->mu);
    dlock__tracking_stop(wd->track);
}

/* Turns tracking on for the renewal connection, redirected to the listener,
 * when both are up. */
void dlock__wd_track_enable(dlock__watchdog *wd)
{
    wconn *wc = dlock__wd_track_conn(wd);
    if (!wd->track || !wd->track_id || wd->stopping || !wc || !dlock__aconn_ready(wc->conn))
        return;
    pthread_mutex_lock(&wd->mu);
    int refused = wd->track_refused;
    pthread_mutex_unlock(&wd->mu);
    if (refused)
        return;
    char id[24];
    const char *av[] = {"CLIENT", "TRACKING", "ON", "REDIRECT", id, "NOLOOP"};
    size_t lens[] = {6, 8, 2, 8, 0, 6};
    lens[4] = dlock__fmt_i64(id, wd->track_id);
    dlock__aconn_send(wc->conn, 6, av, lens, 1, on_tracking_reply, wd);
}

void dlock__wd_on_track_id(int64_t id, void *ud)
{
    dlock__watchdog *wd = ud;
    wd->track_id = id > 0 ? id : 0;
    if (id < 0) {
        pthread_mutex_lock(&wd->mu);
        wd->track_refused = 1;
        pthread_mutex_unlock(&wd->mu);
    }
    if (id <= 0)
        dlock__wd_track_set_live(wd, 0);   /* Redis drops what it would have told us */
    else
        dlock__wd_track_enable(wd);        /* a new listener: redirect to it */
}

void dlock__wd_on_invalidate(const redisReply *keys, void *ud)
{
    dlock__watchdog *wd = ud;
    pthread_mutex_lock(&wd->mu);
    if (!keys) {
        wd->flushes++;   /* a loss found now was flushed (cause.c) */
        mark_all(wd);
    } else {
        for (size_t i = 0; i < keys->elements; i++) {
            const redisReply *k = keys->element[i];
            if (k->type != REDIS_REPLY_STRING)
                continue;
            uint64_t hash = dlock__hash(k->str, k->len);
            for (dlock__hnode *n = dlock__map_find(&wd->tkeys, hash, k->str, k->len); n;
                 n = dlock__map_find_next(&wd->tkeys, n, hash, k->str, k->len)) {
                held *h = DLOCK__CONTAINER_OF(n, held, tn);
                /* A release under way made the change (or will report it). */
                if (h->releasing == 0)
                    dlock__wd_mark_recheck(wd, h);
            }
        }
    }
    pthread_mutex_unlock(&wd->mu);
    dlock__wd_recheck(wd);
}

