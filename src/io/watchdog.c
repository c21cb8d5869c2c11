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

typedef struct batch {
    dlock__watchdog *wd;
    const dlock__hold_kind *kind;
    int64_t sent_at;
    int n;
    int reloaded;            /* resent once after NOSCRIPT */
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
    dlock__aconn *conn;
    int failing;             /* the last renewal attempt failed */
    int64_t last_tick;       /* when the last tick ran, or the timer started (ms) */
    int stopping;
    int loading;             /* SCRIPT LOAD queued on the current connection */
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

static void batch_done(dlock__watchdog *wd, batch *b, const redisReply *r, int ok)
{
    lost_note *notes = NULL;
    unsigned char renewed[DLOCK__RENEW_BATCH];
    if (ok && dlock__reply_renew(r, (size_t)b->n, renewed) != DLOCK_OK)
        ok = 0;
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
        if (renewed[i]) {
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
    dlock__watchdog *wd = ud;
    wd->loading = 0;   /* answered either way: a later NOSCRIPT loads again */
    if (r && r->type == REDIS_REPLY_ERROR)
        dlock__log(wd->ctx->cfg, DLOCK_LOG_ERROR, "SCRIPT LOAD of a renewal script failed: %s",
                   r->str);
}

static void on_batch_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    batch *b = ud;
    dlock__watchdog *wd = b->wd;
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 &&
        !b->reloaded && !wd->stopping) {
        /* Redis lost its script cache (restart): load once, resend this batch.
         * Replies arrive in order, so the load runs before every resend. */
        b->reloaded = 1;
        if (!wd->loading) {
            const dlock__script *s = &dlock__scripts[b->kind->script];
            const char *av[] = {"SCRIPT", "LOAD", s->body};
            size_t lens[] = {6, 4, s->len};
            if (dlock__aconn_send(ac, 3, av, lens, 1, on_load_reply, wd) == DLOCK_OK)
                wd->loading = 1;
        }
        if (send_batch(wd, b) == DLOCK_OK)
            return;
    }
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)b->n;
    if (ok) {
        wd->failing = 0;
    } else {
        wd->failing = 1;
        dlock__log(wd->ctx->cfg, DLOCK_LOG_WARN, "%s renewal failed: %s", b->kind->what,
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
    int rc = dlock__aconn_send(wd->conn, argc, av, lens, 1, on_batch_reply, b);
    if (rc == DLOCK_OK)
        dlock__stats_count(wd->ctx->stats, DLOCK__ST_RENEWAL_RTTS, 1);
    free(av);
    free(lens);
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

static void on_conn_ready(dlock__aconn *ac, void *ud)
{
    dlock__watchdog *wd = ud;
    wd->loading = 0;
    tick(wd);   /* renew whatever waited for the connection */
}

static void on_conn_down(dlock__aconn *ac, int status, void *ud)
{
    dlock__watchdog *wd = ud;
    wd->loading = 0;
    wd->failing = 1;
}

static void on_timer(uv_timer_t *t) { tick(t->data); }

static batch *new_batch(dlock__watchdog *wd, const dlock__hold_kind *kind, int64_t now)
{
    batch *b = malloc(sizeof(*b));
    if (b) {
        b->wd = wd;
        b->kind = kind;
        b->sent_at = now;
        b->n = 0;
        b->reloaded = 0;
    }
    return b;
}

/* The batches of one tick: every full batch, and the one being filled per kind. */
typedef struct tick_batches {
    batch *stack[64];
    batch **v;
    size_t n, cap;
} tick_batches;

/* The batch of h's kind with room left, or a new one; NULL when out of memory. */
static batch *batch_for(dlock__watchdog *wd, tick_batches *tb, const dlock__hold_kind *kind,
                        int64_t now)
{
    /* Few kinds exist: the open batch of a kind is its last one. */
    for (size_t i = tb->n; i-- > 0;)
        if (tb->v[i]->kind == kind) {
            if (tb->v[i]->n < DLOCK__RENEW_BATCH)
                return tb->v[i];
            break;
        }
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
    batch *b = new_batch(wd, kind, now);
    if (b)
        tb->v[tb->n++] = b;
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
    const int ready = wd->conn && dlock__aconn_ready(wd->conn);
    int64_t next = now + (wd->failing ? retry : period);
    /* Ticks come at least every period; one much later means this process
     * did not run meanwhile, and the losses found now are its own pause. */
    const int paused = now - wd->last_tick > period + period / 2 + 250;
    wd->last_tick = now;
    lost_note *notes = NULL;
    tick_batches tb;
    tb.v = tb.stack;
    tb.n = 0;
    tb.cap = DLOCK__ARRAY_LEN(tb.stack);
    int any = 0;

    pthread_mutex_lock(&wd->mu);
    dlock__list *it = wd->all.next;
    while (it != &wd->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        it = it->next;
        any = 1;
        int64_t deadline = h->renewed_at + timeout - early;
        if (now >= deadline) {
            note_lost(wd, h, paused ? DLOCK_LOST_PAUSED : DLOCK_LOST_UNREACHABLE, &notes);
            continue;
        }
        if (deadline < next)
            next = deadline;
        if (!ready || h->inflight || now - h->renewed_at < period / 2)
            continue;
        batch *b = batch_for(wd, &tb, h->kind, now);
        if (!b)
            break;
        h->inflight = 1;
        b->e[b->n++] = h;
    }
    pthread_mutex_unlock(&wd->mu);

    /* All of this tick's scripts leave in one write. */
    if (tb.n > 0)
        dlock__aconn_cork(wd->conn);
    for (size_t i = 0; i < tb.n; i++)
        if (send_batch(wd, tb.v[i]) != DLOCK_OK) {
            wd->failing = 1;
            batch_done(wd, tb.v[i], NULL, 0);
        }
    if (tb.n > 0)
        dlock__aconn_uncork(wd->conn);
    if (tb.v != tb.stack)
        free(tb.v);

    if (any && !wd->conn) {
        dlock__aconn_cbs cbs = {on_conn_ready, on_conn_down, NULL, wd};
        const dlock__endpoint *ep = dlock__node_endpoint(dlock__router_node(wd->router, NULL, 0));
        if (dlock__aconn_new(&wd->conn, dlock__loop_uv(wd->lp), wd->ctx, ep, 0, &cbs) != DLOCK_OK)
            wd->conn = NULL;
    }
    if (any && wd->conn && !ready)
        dlock__aconn_start(wd->conn);

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
    if (wd->conn) {
        dlock__aconn_close(wd->conn, NULL, NULL);
        wd->conn = NULL;
    }
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
