/* The watchdog's per-node side (see watchdog.c): a renewal connection per
 * node that serves held keys (a sentinel's primary, each cluster primary, or
 * the one server), the batches of a pass keyed by (kind, lease, node, slot)
 * so that every script's keys share a slot, and the WAIT that follows each
 * node's batches when replicas must acknowledge (dlock_config_set_replica_ack).
 * Io thread only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/watchdog_int.h"

static void on_ack_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    ackwait *aw = ud;
    dlock__watchdog *wd = aw->wd;
    const dlock_config *cfg = wd->ctx->cfg;
    int acks = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : 0;
    int unacked = acks < cfg->ack_replicas;
    if (unacked)
        dlock__log(cfg, DLOCK_LOG_WARN,
                   "renewals acknowledged by %d of %d replicas within %lld ms%s", acks,
                   cfg->ack_replicas, (long long)cfg->ack_timeout_ms,
                   cfg->ack_policy == DLOCK_ACK_KEEP ? " (kept)" : ": those holds are given up");
    for (int i = 0; i < aw->n; i++) {
        batch *b = aw->b[i];
        if (!b)
            continue;   /* resent after NOSCRIPT: finishes alone */
        b->ack = NULL;
        dlock__wd_batch_finish(wd, b, b->ok, b->renewed,
                               unacked && r && cfg->ack_policy == DLOCK_ACK_RELEASE);
    }
    free(aw);
}

/* WAIT after wc's batches of this pass (in the same write): their answers
 * wait for its count. */
void dlock__wd_ask_acks(dlock__watchdog *wd, wconn *wc, batch **v, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i]->wc == wc;
    if (k == 0)
        return;
    ackwait *aw = malloc(sizeof(*aw) + (size_t)k * sizeof(batch *));
    if (!aw)
        return;   /* not asked: the renewals stand unacknowledged */
    aw->wd = wd;
    aw->n = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i]->wc == wc)
            aw->b[aw->n++] = v[i];
    const dlock_config *cfg = wd->ctx->cfg;
    char rn[24], to[24];
    const char *av[] = {"WAIT", rn, to};
    size_t lens[] = {4, dlock__fmt_i64(rn, cfg->ack_replicas),
                     dlock__fmt_i64(to, cfg->ack_timeout_ms)};
    if (dlock__aconn_send(wc->conn, 3, av, lens, 1, on_ack_reply, aw) != DLOCK_OK) {
        free(aw);
        return;
    }
    for (int i = 0; i < aw->n; i++)
        aw->b[i]->ack = aw;
}

static void on_conn_ready(dlock__aconn *ac, void *ud)
{
    wconn *wc = ud;
    dlock__watchdog *wd = wc->wd;
    wc->loading = 0;
    if (wd->track) {
        dlock__wd_track_set_live(wd, 0);   /* a new connection: tracking is off until enabled */
        dlock__wd_track_enable(wd);
    }
    dlock__wd_tick(wd);   /* renew whatever waited for the connection */
    /* A first sample of the node's counters, for a loss found by the first
     * renewal; after a reconnection the old one stays (its run_id tells a
     * failover). */
    if (!wc->sample.have)
        dlock__wd_cause_sample(wd, wc);
}

static void on_conn_down(dlock__aconn *ac, int status, void *ud)
{
    wconn *wc = ud;
    wc->loading = 0;
    wc->failing = 1;
    if (wc->wd->track)
        dlock__wd_track_set_live(wc->wd, 0);
    /* The node may be gone for good (a failover): the router looks again,
     * and the next tick renews where it then says. */
    if (dlock__router_dynamic(wc->wd->router))
        dlock__router_stale(wc->wd->router);
}

/* Where keys move between nodes, connections no hold needed this tick and
 * with nothing in flight are closed: after a failover their node may be gone
 * for good (an open connection would keep reconnecting to it). On one
 * address, only the connection of a retired node closes so. */
void dlock__wd_drop_unused(dlock__watchdog *wd)
{
    size_t keep = 0;
    int dynamic = dlock__router_dynamic(wd->router);
    for (size_t i = 0; i < wd->nconns; i++) {
        wconn *wc = wd->conns[i];
        /* On one address, the connection of a node retired by a READONLY
         * answer (single.c) goes too. */
        if (wc->used || wc->inflight > 0 ||
            (!dynamic && wc->node == dlock__router_node(wd->router, NULL, 0))) {
            wc->used = 0;
            wd->conns[keep++] = wc;
        } else {
            dlock__aconn_close(wc->conn, NULL, NULL);
            free(wc);
        }
    }
    wd->nconns = keep;
}

/* The renewal connection to node n, created (not yet started) when new;
 * NULL when out of memory. */
wconn *dlock__wd_conn_for(dlock__watchdog *wd, dlock__node *n)
{
    for (size_t i = 0; i < wd->nconns; i++)
        if (wd->conns[i]->node == n)
            return wd->conns[i];
    wconn **a = realloc(wd->conns, (wd->nconns + 1) * sizeof(*a));
    if (!a)
        return NULL;
    wd->conns = a;
    wconn *wc = calloc(1, sizeof(*wc));
    if (!wc)
        return NULL;
    wc->wd = wd;
    wc->node = n;
    dlock__aconn_cbs cbs = {on_conn_ready, on_conn_down, NULL, wc};
    if (dlock__aconn_new(&wc->conn, dlock__loop_uv(wd->lp), wd->ctx, dlock__node_endpoint(n), 0,
                         &cbs) != DLOCK_OK) {
        free(wc);
        return NULL;
    }
    wd->conns[wd->nconns++] = wc;
    return wc;
}

static batch *new_batch(dlock__watchdog *wd, wconn *wc, int slot, const dlock__hold_kind *kind,
                        int64_t lease,
                        int64_t now)
{
    batch *b = malloc(sizeof(*b));
    if (b)
        *b = (batch){.wd = wd, .wc = wc, .slot = slot, .kind = kind, .lease = lease,
                     .sent_at = now, .before = wc->sample};
    return b;
}

static size_t open_hash(const dlock__hold_kind *kind, const wconn *wc, int slot,
                        int64_t lease, size_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)kind * 0x9E3779B97F4A7C15ULL ^
                 (uint64_t)(uintptr_t)wc * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)slot ^
                 (uint64_t)lease * 0x165667B19E3779F9ULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* The open batch's place for (kind, wc, slot, lease): its entry or an empty
 * one. A lease other than the timeout comes only near a hold limit. */
static batch **open_find(tick_batches *tb, const dlock__hold_kind *kind, const wconn *wc,
                         int slot, int64_t lease)
{
    size_t mask = tb->nopen - 1;
    for (size_t i = open_hash(kind, wc, slot, lease, mask);; i = (i + 1) & mask) {
        batch *b = tb->open[i];
        if (!b || (b->kind == kind && b->wc == wc && b->slot == slot && b->lease == lease))
            return &tb->open[i];
    }
}

/* Keeps the open table at most half full; 0, or -1 when out of memory. */
static int open_grow(tick_batches *tb)
{
    if ((tb->used + 1) * 2 <= tb->nopen)
        return 0;
    size_t n = tb->nopen * 2;
    batch **old = tb->open, **grown = calloc(n, sizeof(*grown));
    if (!grown)
        return -1;
    size_t oldn = tb->nopen;
    tb->open = grown;
    tb->nopen = n;
    for (size_t i = 0; i < oldn; i++)
        if (old[i])
            *open_find(tb, old[i]->kind, old[i]->wc, old[i]->slot, old[i]->lease) = old[i];
    if (old != tb->open_st)
        free(old);
    return 0;
}

batch *dlock__wd_batch_for(dlock__watchdog *wd, tick_batches *tb, const dlock__hold_kind *kind,
                           wconn *wc, int slot, int64_t lease, int64_t now)
{
    if (open_grow(tb) != 0)
        return NULL;
    batch **place = open_find(tb, kind, wc, slot, lease);
    if (*place && (*place)->n < DLOCK__RENEW_BATCH)
        return *place;
    if (tb->n == tb->cap) {
        batch **grown = malloc(tb->cap * 2 * sizeof(*grown));
        if (!grown)
            return NULL;
        memcpy(grown, tb->v, tb->n * sizeof(*grown));
        if (tb->v != tb->stack)
            free(tb->v);
        tb->v = grown;
        tb->cap *= 2;
    }
    batch *b = new_batch(wd, wc, slot, kind, lease, now);
    if (b) {
        wc->inflight++;
        tb->v[tb->n++] = b;
        if (!*place)
            tb->used++;
        *place = b;   /* a full one is replaced by its successor */
    }
    return b;
}

wconn *dlock__wd_track_conn(dlock__watchdog *wd)
{
    /* Tracking runs on one server only, whose one node keeps its connection. */
    return wd->track && wd->nconns > 0 ? wd->conns[0] : NULL;
}
