/* The watchdog: renews holds taken without a lease, in batches.
 *
 * A hold is bytes and a kind (io.h): the kind names the renewal script and
 * how many keys and arguments each hold brings, so every renewable type of
 * the sync layer (the locks, read holds, expirable permits) shares this
 * schedule. Every hold is an entry keyed by (kind, keys, arguments), guarded
 * by wd->mu (user threads add and remove entries; the io thread renews them).
 * A timer on the io thread ticks every timeout / 3 and renews each entry whose
 * last renewal is at least half a period old, up to DLOCK__RENEW_BATCH holds of
 * one kind per EVALSHA, all of a tick's scripts in one pipelined write. So an
 * entry is renewed between 0.5 and 1.5 periods after its last renewal, well
 * inside the timeout, and 100 000 held locks cost 1 000 scripts per period.
 *
 * Loss. renewed_at is taken before the request that set the key's TTL was sent,
 * so renewed_at + timeout is never later than the expiry Redis applies. When a
 * renewal answers 0 the lock is gone (DLOCK_LOST_GONE). When renewals keep
 * failing (Redis unreachable, partitioned) the timer fires at the earliest
 * renewed_at + timeout - timeout/20 (at most 500 ms early) and reports
 * DLOCK_LOST_UNREACHABLE: the holder learns of the loss before the moment
 * Redis may hand the lock to someone else, with a margin for a late timer.
 * When the tick that finds a deadline passed comes much later than any tick
 * should (the process was stopped, suspended or starved: no renewal could be
 * sent), the loss is DLOCK_LOST_PAUSED instead.
 * Each loss is reported once, then the entry is gone.
 *
 * A release in progress (releasing > 0) keeps a renewal that finds the key
 * already deleted from being reported as a loss: the release deleted it. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/io.h"
#include "net/cluster.h"

typedef struct held {
    dlock__hnode hn;
    dlock__list all;         /* in wd->all while in the table */
    int64_t renewed_at;      /* ms, before the request that last set the TTL was sent */
    int inflight;            /* in a batch awaiting its reply */
    int releasing;           /* releases in progress for this owner */
    int holds;               /* acquisitions seen; each release attempt takes one, and the
                                renewal stops at zero whatever the release answered */
    int dead;                /* out of the table; freed when its batch answers */
    dlock_lost_fn fn;
    void *ud;
    const dlock__hold_kind *kind;
    uint32_t len[DLOCK__HOLD_PARTS];
    uint32_t klen;           /* identity bytes: every part with its NUL */
    uint32_t olen;
    char data[];             /* part0 NUL part1 NUL ... then owner NUL */
} held;

/* The renewal connection to one node (io thread only). */
typedef struct wconn {
    dlock__watchdog *wd;
    dlock__node *node;       /* which server (the router's; lives as long as it) */
    dlock__aconn *conn;
    int failing;             /* the last renewal attempt on it failed */
    int loading;             /* SCRIPT LOAD queued on the current connection */
    int inflight;            /* batches sent and not answered */
    int used;                /* a hold needed it this tick */
} wconn;

typedef struct batch {
    dlock__watchdog *wd;
    wconn *wc;
    int slot;                /* every key of a script shares a slot (cluster) */
    const dlock__hold_kind *kind;
    int64_t sent_at;
    int n;
    int reloaded;            /* resent once after NOSCRIPT */
    struct ackwait *ack;     /* the WAIT that follows it, or NULL */
    int ok;                  /* answered (while its WAIT is awaited) */
    unsigned char renewed[DLOCK__RENEW_BATCH];
    held *e[DLOCK__RENEW_BATCH];
} batch;

/* A loss waiting for its callback. It carries copies of what the callback
 * needs, so it never points at an entry that a batch may free meanwhile. */
typedef struct lost_note {
    struct lost_note *next;
    dlock_lost_fn fn;
    void *ud;
    dlock_lost_reason reason;
    const char *what;
    uint32_t nlen;
    char key[];              /* name NUL owner NUL */
} lost_note;

struct dlock__watchdog {
    dlock__netctx *ctx;
    dlock__loop *lp;
    dlock__router *router;
    dlock__job flush_job;    /* delivers the losses found by releases */
    dlock__job start_job;    /* sets the timer up on the io thread */
    pthread_mutex_t mu;
    dlock__map map;
    dlock__list all;

    struct lost_note *pending;   /* under mu: losses found by releases, for the io thread */

    /* io thread only */
    uv_timer_t timer;
    int timer_inited;
    wconn **conns;           /* one per node that serves held keys */
    size_t nconns;
    int64_t last_tick;       /* when the last tick ran, or the timer started (ms) */
    int stopping;
};

static const char *h_part(const held *h, int i)
{
    const char *p = h->data;
    for (int k = 0; k < i; k++)
        p += h->len[k] + 1;
    return p;
}

static int nparts(const dlock__hold_kind *k) { return k->nkeys + k->nargs; }

static const char *h_owner(const held *h) { return h->data + h->klen; }

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
    return h->kind == l->kind && h->klen == len && memcmp(h->data, l->bytes, len) == 0;
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
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, id);
    if (h) {
        /* Reentry: the acquire reset the TTL too. */
        if (sent_ms > h->renewed_at)
            h->renewed_at = sent_ms;
        h->holds++;
        h->fn = fn;
        h->ud = ud;
        pthread_mutex_unlock(&wd->mu);
        return DLOCK_OK;
    }
    size_t klen = 0;
    int n = nparts(id->kind);
    for (int i = 0; i < n; i++)
        klen += id->len[i] + 1;
    h = malloc(sizeof(*h) + klen + id->olen + 1);
    if (!h) {
        pthread_mutex_unlock(&wd->mu);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    memset(h, 0, sizeof(*h));
    h->renewed_at = sent_ms;
    h->holds = 1;
    h->fn = fn;
    h->ud = ud;
    h->kind = id->kind;
    char *p = h->data;
    for (int i = 0; i < n; i++) {
        h->len[i] = (uint32_t)id->len[i];
        memcpy(p, id->part[i], id->len[i]);
        p += id->len[i];
        *p++ = '\0';
    }
    h->klen = (uint32_t)klen;
    h->olen = (uint32_t)id->olen;
    memcpy(p, id->owner, id->olen);
    p[id->olen] = '\0';
    h->hn.hash = id_hash(id->kind, h->data, klen);
    if (dlock__map_insert(&wd->map, &h->hn) != 0) {
        pthread_mutex_unlock(&wd->mu);
        free(h);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    dlock__list_push_back(&wd->all, &h->all);
    pthread_mutex_unlock(&wd->mu);
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
        }
    }
    pthread_mutex_unlock(&wd->mu);
    if (do_free)
        free(h);
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

static void tick(dlock__watchdog *wd);
static void on_timer(uv_timer_t *t);

static int64_t period_ms(const dlock__watchdog *wd) { return wd->ctx->cfg->watchdog_ms / 3; }

static void report(dlock__watchdog *wd, lost_note *notes)
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
        dlock__log(cfg, DLOCK_LOG_WARN, "%s '%s' held by %s lost: %s", n->what, n->key, owner,
                   n->reason == DLOCK_LOST_GONE     ? "it was gone when renewed or released"
                   : n->reason == DLOCK_LOST_PAUSED ? "this process was paused past the lease"
                   : n->reason == DLOCK_LOST_REPLICAS
                       ? "its renewal was acknowledged by too few replicas"
                                                    : "Redis unreachable until the lease ran out");
        if (fn)
            fn(n->key, owner, n->reason, ud);
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
    report(wd, notes);
}

/* Takes h out of the schedule (freeing it, or leaving it to its in-flight
 * batch) and queues its callback. Caller holds mu. */
static void note_lost(dlock__watchdog *wd, held *h, dlock_lost_reason why, lost_note **notes)
{
    size_t nlen = h->len[0];
    lost_note *n = malloc(sizeof(*n) + nlen + 1 + h->olen + 1);
    if (n) {
        n->fn = h->fn;
        n->ud = h->ud;
        n->reason = why;
        n->what = h->kind->what;
        n->nlen = (uint32_t)nlen;
        memcpy(n->key, h->data, nlen + 1);
        memcpy(n->key + nlen + 1, h_owner(h), h->olen + 1);
        n->next = *notes;
        *notes = n;
    }
    /* Without memory for the note the loss goes unreported, but the entry
     * still leaves the schedule. */
    if (unlink_held(wd, h))
        free(h);
}

int dlock__reply_renew(const redisReply *r, size_t n, unsigned char *renewed)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return DLOCK_EPROTO;
    for (size_t i = 0; i < n; i++)
        renewed[i] = r->element[i]->type == REDIS_REPLY_INTEGER && r->element[i]->integer == 1;
    return DLOCK_OK;
}

/* The WAIT written after one node's batches of a tick: their answers are
 * kept until it answers (replica acknowledgement). */
typedef struct ackwait {
    dlock__watchdog *wd;
    int n;
    batch *b[];
} ackwait;

static void batch_finish(dlock__watchdog *wd, batch *b, int ok, const unsigned char *renewed,
                         int unacked);

static void batch_done(dlock__watchdog *wd, batch *b, const redisReply *r, int ok)
{
    if (ok && dlock__reply_renew(r, (size_t)b->n, b->renewed) != DLOCK_OK)
        ok = 0;
    if (b->ack) {
        b->ok = ok;   /* the WAIT's answer decides */
        return;
    }
    batch_finish(wd, b, ok, b->renewed, 0);
}

/* unacked: the renewals were not acknowledged by enough replicas and the
 * policy gives such holds up (reported lost, no longer renewed). */
static void batch_finish(dlock__watchdog *wd, batch *b, int ok, const unsigned char *renewed,
                         int unacked)
{
    b->wc->inflight--;
    lost_note *notes = NULL;
    pthread_mutex_lock(&wd->mu);
    for (int i = 0; i < b->n; i++) {
        held *h = b->e[i];
        h->inflight = 0;
        if (h->dead) {
            free(h);
            continue;
        }
        if (!ok)
            continue;
        if (renewed[i] && unacked) {
            if (h->releasing == 0)
                note_lost(wd, h, DLOCK_LOST_REPLICAS, &notes);
        } else if (renewed[i]) {
            dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWALS, 1);
            if (b->sent_at > h->renewed_at)
                h->renewed_at = b->sent_at;
        } else if (h->releasing == 0) {
            note_lost(wd, h, DLOCK_LOST_GONE, &notes);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    free((void *)b);
    report(wd, notes);
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
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 &&
        !b->reloaded && !wd->stopping) {
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
        if (!r || (r->type == REDIS_REPLY_ERROR &&
                   (strncmp(r->str, "MOVED", 5) == 0 || strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
                    strncmp(r->str, "READONLY", 8) == 0)))
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

/* EVALSHA sha nkeys, every hold's keys, the lease, every hold's arguments. */
static int send_batch(dlock__watchdog *wd, batch *b)
{
    const dlock__hold_kind *k = b->kind;
    int argc = 4 + b->n * nparts(k);
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
    av[i] = nk;
    lens[i++] = dlock__fmt_i64(nk, (int64_t)b->n * k->nkeys);
    for (int e = 0; e < b->n; e++)
        for (int p = 0; p < k->nkeys; p++) {
            av[i] = h_part(b->e[e], p);
            lens[i++] = b->e[e]->len[p];
        }
    av[i] = lease;
    lens[i++] = dlock__fmt_i64(lease, wd->ctx->cfg->watchdog_ms);
    for (int e = 0; e < b->n; e++)
        for (int p = k->nkeys; p < nparts(k); p++) {
            av[i] = h_part(b->e[e], p);
            lens[i++] = b->e[e]->len[p];
        }
    int rc = dlock__aconn_send(b->wc->conn, argc, av, lens, 1, on_batch_reply, b);
    if (rc == DLOCK_OK)
        dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWAL_RTTS, 1);
    free(av);
    free(lens);
    return rc;
}

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
        batch_finish(wd, b, b->ok, b->renewed,
                     unacked && r && cfg->ack_policy == DLOCK_ACK_RELEASE);
    }
    free(aw);
}

/* WAIT after wc's batches of this tick (in the same write): their answers
 * wait for its count. */
static void ask_acks(dlock__watchdog *wd, wconn *wc, batch **v, size_t n)
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

static void on_conn_ready(dlock__aconn *ac, void *ud)
{
    wconn *wc = ud;
    wc->loading = 0;
    tick(wc->wd);   /* renew whatever waited for the connection */
}

static void on_conn_down(dlock__aconn *ac, int status, void *ud)
{
    wconn *wc = ud;
    wc->loading = 0;
    wc->failing = 1;
    /* The node may be gone for good (a failover): the router looks again,
     * and the next tick renews where it then says. */
    if (dlock__router_dynamic(wc->wd->router))
        dlock__router_stale(wc->wd->router);
}

/* Where keys move between nodes, connections no hold needed this tick and
 * with nothing in flight are closed: after a failover their node may be gone
 * for good (an open connection would keep reconnecting to it). */
static void drop_unused(dlock__watchdog *wd)
{
    size_t keep = 0;
    int dynamic = dlock__router_dynamic(wd->router);
    for (size_t i = 0; i < wd->nconns; i++) {
        wconn *wc = wd->conns[i];
        if (!dynamic || wc->used || wc->inflight > 0) {
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
static wconn *conn_for(dlock__watchdog *wd, dlock__node *n)
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

static void on_timer(uv_timer_t *t) { tick(t->data); }

static batch *new_batch(dlock__watchdog *wd, wconn *wc, int slot, const dlock__hold_kind *kind,
                        int64_t now)
{
    batch *b = malloc(sizeof(*b));
    if (b) {
        b->wd = wd;
        b->wc = wc;
        b->slot = slot;
        b->kind = kind;
        b->sent_at = now;
        b->n = 0;
        b->reloaded = 0;
        b->ack = NULL;
        b->ok = 0;
    }
    return b;
}

/* The batches of one tick: every full batch, and the one being filled per
 * (kind, node, slot); `open` finds the latter by hash (a cluster's holds
 * spread over thousands of slots). */
#define OPEN_SLOTS 256
typedef struct tick_batches {
    batch *stack[64];
    batch **v;
    size_t n, cap;
    batch *open_st[OPEN_SLOTS];
    batch **open;
    size_t nopen;            /* size of open (a power of 2) */
    size_t used;
} tick_batches;

static size_t open_hash(const dlock__hold_kind *kind, const wconn *wc, int slot, size_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)kind * 0x9E3779B97F4A7C15ULL ^
                 (uint64_t)(uintptr_t)wc * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)slot;
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* The open batch's place for (kind, wc, slot): its entry or an empty one. */
static batch **open_find(tick_batches *tb, const dlock__hold_kind *kind, const wconn *wc,
                         int slot)
{
    size_t mask = tb->nopen - 1;
    for (size_t i = open_hash(kind, wc, slot, mask);; i = (i + 1) & mask) {
        batch *b = tb->open[i];
        if (!b || (b->kind == kind && b->wc == wc && b->slot == slot))
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
            *open_find(tb, old[i]->kind, old[i]->wc, old[i]->slot) = old[i];
    if (old != tb->open_st)
        free(old);
    return 0;
}

/* The batch of h's kind, node and slot with room left, or a new one; NULL
 * when out of memory. */
static batch *batch_for(dlock__watchdog *wd, tick_batches *tb, const dlock__hold_kind *kind,
                        wconn *wc, int slot, int64_t now)
{
    if (open_grow(tb) != 0)
        return NULL;
    batch **place = open_find(tb, kind, wc, slot);
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
    batch *b = new_batch(wd, wc, slot, kind, now);
    if (b) {
        wc->inflight++;
        tb->v[tb->n++] = b;
        if (!*place)
            tb->used++;
        *place = b;   /* a full one is replaced by its successor */
    }
    return b;
}

/* One pass: report losses whose deadline passed, renew what is due, and set
 * the timer for the next renewal or deadline, whichever comes first. */
static void tick(dlock__watchdog *wd)
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
    tb.v = tb.stack;
    tb.n = 0;
    tb.cap = DLOCK__ARRAY_LEN(tb.stack);
    memset(tb.open_st, 0, sizeof(tb.open_st));
    tb.open = tb.open_st;
    tb.nopen = OPEN_SLOTS;
    tb.used = 0;

    pthread_mutex_lock(&wd->mu);
    dlock__list *it = wd->all.next;
    while (it != &wd->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        it = it->next;
        int64_t deadline = h->renewed_at + timeout - early;
        if (now >= deadline) {
            note_lost(wd, h, paused ? DLOCK_LOST_PAUSED : DLOCK_LOST_UNREACHABLE, &notes);
            continue;
        }
        if (deadline < next)
            next = deadline;
        if (h->inflight || now - h->renewed_at < period / 2)
            continue;
        /* The node that serves the hold's keys now (the router's map, read
         * without I/O), and its renewal connection. */
        wconn *wc = conn_for(wd, dlock__router_node(wd->router, h->data, h->len[0]));
        if (!wc)
            break;
        wc->used = 1;
        if (!dlock__aconn_ready(wc->conn)) {
            dlock__aconn_start(wc->conn);   /* on_conn_ready ticks again */
            continue;
        }
        int slot = cluster ? dlock__key_slot(h->data, h->len[0]) : 0;
        batch *b = batch_for(wd, &tb, h->kind, wc, slot, now);
        if (!b)
            break;
        h->inflight = 1;
        b->e[b->n++] = h;
    }
    pthread_mutex_unlock(&wd->mu);

    /* All of this tick's scripts for one node leave in one write. */
    for (size_t c = 0; c < wd->nconns; c++)
        dlock__aconn_cork(wd->conns[c]->conn);
    size_t sent = 0;
    for (size_t i = 0; i < tb.n; i++)
        if (send_batch(wd, tb.v[i]) != DLOCK_OK) {
            tb.v[i]->wc->failing = 1;
            batch_done(wd, tb.v[i], NULL, 0);
        } else {
            tb.v[sent++] = tb.v[i];
        }
    if (cfg->ack_replicas > 0)
        for (size_t c = 0; c < wd->nconns; c++)
            ask_acks(wd, wd->conns[c], tb.v, sent);
    for (size_t c = 0; c < wd->nconns; c++)
        dlock__aconn_uncork(wd->conns[c]->conn);
    if (tb.v != tb.stack)
        free(tb.v);
    if (tb.open != tb.open_st)
        free(tb.open);
    drop_unused(wd);

    report(wd, notes);
    if (!wd->stopping)
        uv_timer_start(&wd->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

static void on_timer_closed(uv_handle_t *h) {}

/* Stop hook (io thread): the timer and the renewal connection go. */
static void on_stop(void *arg)
{
    dlock__watchdog *wd = arg;
    wd->stopping = 1;
    if (wd->timer_inited) {
        uv_timer_stop(&wd->timer);
        uv_close((uv_handle_t *)&wd->timer, on_timer_closed);
    }
    for (size_t i = 0; i < wd->nconns; i++) {
        dlock__aconn_close(wd->conns[i]->conn, NULL, NULL);
        free(wd->conns[i]);   /* its batches were failed by the close */
    }
    free(wd->conns);
    wd->conns = NULL;
    wd->nconns = 0;
}

/* ------------------------------------------------------------ lifecycle */

/* First job on the io thread: the timer. */
static void start_job(void *arg)
{
    dlock__watchdog *wd = arg;
    if (wd->stopping)
        return;
    int rc = uv_timer_init(dlock__loop_uv(wd->lp), &wd->timer);
    if (rc < 0) {
        dlock__log(wd->ctx->cfg, DLOCK_LOG_ERROR, "cannot create the watchdog timer: %s",
                   uv_strerror(rc));
        return;
    }
    wd->timer.data = wd;
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
    /* The schedule starts now: a process stopped before the io thread first
     * ran still has its pause seen. */
    wd->last_tick = dlock__now_ms();
    pthread_mutex_init(&wd->mu, NULL);
    dlock__map_init(&wd->map, h_eq);
    dlock__list_init(&wd->all);
    int rc = dlock__loop_on_stop(lp, on_stop, wd);
    if (rc != DLOCK_OK) {
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return rc;
    }
    dlock__loop_post(lp, &wd->start_job);
    *out = wd;
    return DLOCK_OK;
}

void dlock__watchdog_free(dlock__watchdog *wd)
{
    if (!wd)
        return;
    while (wd->pending) {   /* losses found after the io thread stopped */
        lost_note *n = wd->pending;
        wd->pending = n->next;
        free(n);
    }
    while (!dlock__list_empty(&wd->all)) {
        held *h = DLOCK__CONTAINER_OF(wd->all.next, held, all);
        dlock__list_remove(&h->all);
        free(h);
    }
    dlock__map_free(&wd->map);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
}
