/* The watchdog's per-node batches (wdnode.h): a renewal connection per node
 * that serves held keys (a sentinel's primary, each cluster primary, or the
 * one server), the batches of a pass keyed by (kind, lease, node, slot) so
 * that every script's keys share a slot, sent one write per node and
 * answered (NOSCRIPT: loaded and sent again; a refusal: the router told),
 * and the WAIT that follows each node's batches when replicas must
 * acknowledge (dlock_config_set_replica_ack). What an answer means for its
 * holds is the schedule's (the hooks). Io thread only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/wdnode.h"

void dlock__wd_tb_init(tick_batches *tb, int track)
{
    tb->v = tb->stack;
    tb->n = 0;
    tb->cap = DLOCK__ARRAY_LEN(tb->stack);
    memset(tb->open_st, 0, sizeof(tb->open_st));
    tb->open = tb->open_st;
    tb->nopen = DLOCK__WD_OPEN_SLOTS;
    tb->used = 0;
    tb->track = track;
}

void dlock__wd_nodes_init(dlock__wd_nodes *ns, dlock__netctx *ctx, dlock__loop *lp,
                          dlock__router *router, pthread_mutex_t *mu,
                          const dlock__wd_node_hooks *hooks)
{
    memset(ns, 0, sizeof(*ns));
    ns->ctx = ctx;
    ns->lp = lp;
    ns->router = router;
    ns->mu = mu;
    ns->hooks = *hooks;
}

/* ------------------------------------------------------------- answers */

int dlock__reply_renew(const redisReply *r, size_t n, unsigned char *renewed)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return DLOCK_EPROTO;
    for (size_t i = 0; i < n; i++)
        renewed[i] = r->element[i]->type == REDIS_REPLY_INTEGER && r->element[i]->integer == 1;
    return DLOCK_OK;
}

/* b answered: the schedule hears it, then b goes. */
static void finish(batch *b, int ok, const unsigned char *renewed, int unacked)
{
    wconn *wc = b->wc;
    dlock__wd_nodes *ns = wc->nodes;
    wc->inflight--;
    pthread_mutex_lock(ns->mu);
    ns->batches_out--;
    pthread_mutex_unlock(ns->mu);
    ns->hooks.answered(ns->hooks.ud, b, ok, renewed, unacked);
    free(b);
}

/* The WAIT written after one node's batches of a pass: their answers are
 * kept until it answers (replica acknowledgement). */
typedef struct ackwait {
    dlock__wd_nodes *ns;
    int n;
    batch *b[];
} ackwait;

static void on_ack_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    ackwait *aw = ud;
    const dlock_config *cfg = aw->ns->ctx->cfg;
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
        finish(b, b->ok, b->renewed, unacked && r && cfg->ack_policy == DLOCK_ACK_RELEASE);
    }
    free(aw);
}

/* WAIT after wc's batches of this pass (in the same write): their answers
 * wait for its count. */
static void ask_acks(dlock__wd_nodes *ns, wconn *wc, batch **v, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i]->wc == wc;
    if (k == 0)
        return;
    ackwait *aw = malloc(sizeof(*aw) + (size_t)k * sizeof(batch *));
    if (!aw)
        return;   /* not asked: the renewals stand unacknowledged */
    aw->ns = ns;
    aw->n = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i]->wc == wc)
            aw->b[aw->n++] = v[i];
    const dlock_config *cfg = ns->ctx->cfg;
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

static void batch_done(batch *b, const redisReply *r, int ok)
{
    if (ok && dlock__reply_renew(r, (size_t)b->n, b->renewed) != DLOCK_OK)
        ok = 0;
    if (b->ack) {
        b->ok = ok;   /* the WAIT's answer decides */
        return;
    }
    finish(b, ok, b->renewed, 0);
}

static int send_batch(batch *b);

static void on_load_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    wconn *wc = ud;
    wc->loading = 0;   /* answered either way: a later NOSCRIPT loads again */
    if (r && r->type == REDIS_REPLY_ERROR)
        dlock__log(wc->nodes->ctx->cfg, DLOCK_LOG_ERROR,
                   "SCRIPT LOAD of a renewal script on %s failed: %s",
                   dlock__node_addr(wc->node), r->str);
}

static void on_batch_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    batch *b = ud;
    wconn *wc = b->wc;
    dlock__wd_nodes *ns = wc->nodes;
    /* Renewals are idempotent, and retried by the schedule itself. */
    dlock__try t = {.sent = r ? DLOCK__SENT_OK : DLOCK__MAYBE_RAN,
                    .timed_out = status == DLOCK_ECMDTIMEOUT};
    if (r && r->type == REDIS_REPLY_ERROR)
        t.err = dlock__redis_classify(r->str);
    dlock__verdict v = dlock__call_policy(&t, DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY, 0,
                                          b->reloaded || ns->stopping, ns->ctx->cfg);
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
        if (send_batch(b) == DLOCK_OK)
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
            dlock__router_demoted(ns->router, wc->node);   /* the next pass renews anew */
        else if (!r || v.next == DLOCK__NEXT_REROUTE)
            dlock__router_stale(ns->router);
        dlock__log(ns->ctx->cfg, DLOCK_LOG_WARN, "%s renewal on %s failed: %s", b->kind->what,
                   dlock__node_addr(wc->node),
                   !r ? dlock_strerror(status)
                      : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    batch_done(b, r, ok);
    if (!ok && !ns->stopping)
        ns->hooks.failed(ns->hooks.ud);
}

/* ------------------------------------------------------------- sending */

static void on_exists_reply(dlock__aconn *ac, redisReply *r, int status, void *ud) {}

/* EXISTS of the keys the batch's holds are tracked by, after their renewal
 * wrote them: Redis tracks a key this connection read after its own last
 * write to it. */
static int send_track(batch *b)
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

/* EVALSHA sha nkeys, every hold's keys, the lease, every hold's arguments.
 * In the tracking form: EVALSHA sha 0, the lease, the number of keys, the
 * keys, the arguments (see lock/renew.lua), then EXISTS of the tracked keys. */
static int send_batch(batch *b)
{
    const dlock__hold_kind *k = b->kind;
    const int track = b->track;
    int argc = 4 + b->n * h_nparts(k) + track;
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
        for (int p = k->nkeys; p < h_nparts(k); p++) {
            av[i] = h_part(b->e[e], p);
            lens[i++] = b->e[e]->len[p];
        }
    int rc = dlock__aconn_send(b->wc->conn, i, av, lens, 1, on_batch_reply, b);
    if (rc == DLOCK_OK)
        dlock__stats_count(b->wc->nodes->ctx->stats, DLOCK__ST_RENEWAL_RTTS, 1);
    free(av);
    free(lens);
    if (rc == DLOCK_OK && track)
        send_track(b);   /* not sent: the next renewal tracks the key */
    return rc;
}

/* Batches a write holds at most: a pass over 100 000 holds on one node is
 * ~11 MB of scripts, which one write would first gather in the client's
 * memory; slices of 128 (~1.4 MB) go to the socket as they are made. Up to
 * 12 800 holds per node still go in one write. */
#define SLICE_BATCHES 128

/* Sends a pass's batches: its scripts for one node in as few writes as
 * slices allow, then the WAIT of each node's batches when replicas must
 * acknowledge, then whatever the schedule adds to each node's write. */
void dlock__wd_send_all(dlock__wd_nodes *ns, tick_batches *tb)
{
    const dlock_config *cfg = ns->ctx->cfg;
    if (tb->n > 0) {
        pthread_mutex_lock(ns->mu);
        ns->batches_out += (int)tb->n;
        pthread_mutex_unlock(ns->mu);
        for (size_t c = 0; c < ns->nconns; c++)
            dlock__aconn_cork(ns->conns[c]->conn);
    }
    size_t sent = 0;
    for (size_t c = 0; c < ns->nconns; c++)
        ns->conns[c]->wrote = 0;
    for (size_t i = 0; i < tb->n; i++) {
        wconn *wc = tb->v[i]->wc;
        if (send_batch(tb->v[i]) != DLOCK_OK) {
            wc->failing = 1;
            batch_done(tb->v[i], NULL, 0);
            continue;
        }
        tb->v[sent++] = tb->v[i];
        if (++wc->wrote == SLICE_BATCHES) {   /* this slice's write */
            dlock__aconn_uncork(wc->conn);
            dlock__aconn_cork(wc->conn);
            dlock__stats_count(ns->ctx->stats, DLOCK__ST_RENEWAL_WRITES, 1);
            wc->wrote = 0;
        }
    }
    for (size_t c = 0; c < ns->nconns; c++)
        if (ns->conns[c]->wrote)
            dlock__stats_count(ns->ctx->stats, DLOCK__ST_RENEWAL_WRITES, 1);
    if (cfg->ack_replicas > 0 && !cfg->ack_all && sent > 0)
        for (size_t c = 0; c < ns->nconns; c++)
            ask_acks(ns, ns->conns[c], tb->v, sent);
    for (size_t c = 0; c < ns->nconns; c++)
        if (ns->conns[c]->wrote)
            ns->hooks.wrote(ns->hooks.ud, ns->conns[c]);
    if (tb->n > 0)
        for (size_t c = 0; c < ns->nconns; c++)
            dlock__aconn_uncork(ns->conns[c]->conn);
    if (tb->v != tb->stack)
        free(tb->v);
    if (tb->open != tb->open_st)
        free(tb->open);
}

/* --------------------------------------------------------- connections */

static void on_conn_ready(dlock__aconn *ac, void *ud)
{
    wconn *wc = ud;
    wc->loading = 0;
    wc->nodes->hooks.up(wc->nodes->hooks.ud, wc);
}

static void on_conn_down(dlock__aconn *ac, int status, void *ud)
{
    wconn *wc = ud;
    dlock__wd_nodes *ns = wc->nodes;
    wc->loading = 0;
    wc->failing = 1;
    ns->hooks.down(ns->hooks.ud, wc);
    /* The node may be gone for good (a failover): the router looks again,
     * and the next pass renews where it then says. */
    if (dlock__router_dynamic(ns->router))
        dlock__router_stale(ns->router);
}

/* Where keys move between nodes, connections no hold needed this pass and
 * with nothing in flight are closed: after a failover their node may be gone
 * for good (an open connection would keep reconnecting to it). On one
 * address, only the connection of a retired node closes so. */
void dlock__wd_drop_unused(dlock__wd_nodes *ns)
{
    size_t keep = 0;
    int dynamic = dlock__router_dynamic(ns->router);
    for (size_t i = 0; i < ns->nconns; i++) {
        wconn *wc = ns->conns[i];
        /* On one address, the connection of a node retired by a READONLY
         * answer (single.c) goes too. */
        if (wc->used || wc->inflight > 0 ||
            (!dynamic && wc->node == dlock__router_node(ns->router, NULL, 0))) {
            wc->used = 0;
            ns->conns[keep++] = wc;
        } else {
            dlock__aconn_close(wc->conn, NULL, NULL);
            free(wc);
        }
    }
    ns->nconns = keep;
}

wconn *dlock__wd_conn_for(dlock__wd_nodes *ns, dlock__node *n)
{
    for (size_t i = 0; i < ns->nconns; i++)
        if (ns->conns[i]->node == n)
            return ns->conns[i];
    wconn **a = realloc(ns->conns, (ns->nconns + 1) * sizeof(*a));
    if (!a)
        return NULL;
    ns->conns = a;
    wconn *wc = calloc(1, sizeof(*wc));
    if (!wc)
        return NULL;
    wc->nodes = ns;
    wc->node = n;
    dlock__aconn_cbs cbs = {on_conn_ready, on_conn_down, NULL, wc};
    if (dlock__aconn_new(&wc->conn, dlock__loop_uv(ns->lp), ns->ctx, dlock__node_endpoint(n), 0,
                         &cbs) != DLOCK_OK) {
        free(wc);
        return NULL;
    }
    ns->conns[ns->nconns++] = wc;
    return wc;
}

void dlock__wd_nodes_close(dlock__wd_nodes *ns)
{
    for (size_t i = 0; i < ns->nconns; i++) {
        dlock__aconn_close(ns->conns[i]->conn, NULL, NULL);
        free(ns->conns[i]);   /* its batches were failed by the close */
    }
    free(ns->conns);
    ns->conns = NULL;
    ns->nconns = 0;
}

/* ------------------------------------------------------------- batches */

static batch *new_batch(const tick_batches *tb, wconn *wc, int slot,
                        const dlock__hold_kind *kind, int64_t lease, int64_t now)
{
    batch *b = malloc(sizeof(*b));
    if (b)
        *b = (batch){.wc = wc, .slot = slot, .kind = kind, .lease = lease, .sent_at = now,
                     .track = tb->track && kind->track >= 0, .before = wc->sample};
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

batch *dlock__wd_batch_for(tick_batches *tb, const dlock__hold_kind *kind, wconn *wc, int slot,
                           int64_t lease, int64_t now)
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
    batch *b = new_batch(tb, wc, slot, kind, lease, now);
    if (b) {
        wc->inflight++;
        tb->v[tb->n++] = b;
        if (!*place)
            tb->used++;
        *place = b;   /* a full one is replaced by its successor */
    }
    return b;
}
