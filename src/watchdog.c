/* The watchdog: renews locks taken without a lease, in batches.
 *
 * Every watchdog hold is an entry keyed by (name, owner), guarded by wd->mu
 * (user threads add and remove entries; the io thread renews them). A timer on
 * the io thread ticks every timeout / 3 and renews each entry whose last
 * renewal is at least half a period old, up to DLOCK__RENEW_BATCH locks per
 * EVALSHA, all of a tick's scripts in one pipelined write. So an entry is
 * renewed between 0.5 and 1.5 periods after its last renewal, well inside the
 * timeout, and 100 000 held locks cost 1 000 scripts per period.
 *
 * Loss. renewed_at is taken before the request that set the key's TTL was sent,
 * so renewed_at + timeout is never later than the expiry Redis applies. When a
 * renewal answers 0 the lock is gone (DLOCK_LOST_GONE). When renewals keep
 * failing (Redis unreachable, partitioned) the timer fires at the earliest
 * renewed_at + timeout - timeout/20 (at most 500 ms early) and reports
 * DLOCK_LOST_UNREACHABLE: the holder learns of the loss before the moment
 * Redis may hand the lock to someone else, with a margin for a late timer.
 * Each loss is reported once, then the entry is gone.
 *
 * A release in progress (releasing > 0) keeps a renewal that finds the key
 * already deleted from being reported as a loss: the release deleted it. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "aconn.h"
#include "internal.h"

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
    uint32_t nlen, olen;
    char key[];              /* name NUL owner NUL */
} held;

typedef struct batch {
    dlock__watchdog *wd;
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
    uint32_t nlen;
    char key[];              /* name NUL owner NUL */
} lost_note;

struct dlock__watchdog {
    dlock_client *c;
    pthread_mutex_t mu;
    dlock__map map;
    dlock__list all;

    struct lost_note *pending;   /* under mu: losses found by releases, for the io thread */

    /* io thread only */
    uv_timer_t timer;
    int timer_inited;
    dlock__aconn *conn;
    int failing;             /* the last renewal attempt failed */
    int stopping;
    int loading;             /* SCRIPT LOAD queued on the current connection */
    int closes;
    void (*done)(void *);
    void *done_arg;
};

static const char *h_owner(const held *h) { return h->key + h->nlen + 1; }

static int h_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const held *h = (const held *)n;
    /* key is the joined "name\0owner" form. */
    return (size_t)h->nlen + 1 + h->olen == len && memcmp(h->key, key, len) == 0;
}

static held *find(dlock__watchdog *wd, const char *name, size_t nlen, const char *owner,
                  size_t olen)
{
    char stackbuf[512];
    size_t klen = nlen + 1 + olen;
    char *k = klen <= sizeof(stackbuf) ? stackbuf : malloc(klen);
    if (!k)
        return NULL;
    memcpy(k, name, nlen);
    k[nlen] = '\0';
    memcpy(k + nlen + 1, owner, olen);
    held *h = (held *)dlock__map_find(&wd->map, dlock__hash2(name, nlen, owner, olen), k, klen);
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

int dlock__watchdog_new(dlock__watchdog **out, dlock_client *c)
{
    dlock__watchdog *wd = calloc(1, sizeof(*wd));
    if (!wd)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    wd->c = c;
    pthread_mutex_init(&wd->mu, NULL);
    dlock__map_init(&wd->map, h_eq);
    dlock__list_init(&wd->all);
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

/* --------------------------------------------------------- user threads */

int dlock__watchdog_add(dlock__watchdog *wd, const char *name, size_t nlen, const char *owner,
                        size_t olen, int64_t sent_ms, dlock_lost_fn fn, void *ud)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, name, nlen, owner, olen);
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
    h = malloc(sizeof(*h) + nlen + 1 + olen + 1);
    if (!h) {
        pthread_mutex_unlock(&wd->mu);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    memset(h, 0, sizeof(*h));
    h->renewed_at = sent_ms;
    h->holds = 1;
    h->fn = fn;
    h->ud = ud;
    h->nlen = (uint32_t)nlen;
    h->olen = (uint32_t)olen;
    memcpy(h->key, name, nlen);
    h->key[nlen] = '\0';
    memcpy(h->key + nlen + 1, owner, olen);
    h->key[nlen + 1 + olen] = '\0';
    h->hn.hash = dlock__hash2(name, nlen, owner, olen);
    if (dlock__map_insert(&wd->map, &h->hn) != 0) {
        pthread_mutex_unlock(&wd->mu);
        free(h);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    dlock__list_push_back(&wd->all, &h->all);
    pthread_mutex_unlock(&wd->mu);
    return DLOCK_OK;
}

void dlock__watchdog_lease_reentry(dlock__watchdog *wd, const char *name, size_t nlen,
                                   const char *owner, size_t olen, int64_t sent_ms,
                                   int64_t lease_ms)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, name, nlen, owner, olen);
    if (h) {
        /* The key now expires after the lease: keep the loss deadline honest;
         * the next tick renews it to the watchdog timeout again. */
        h->holds++;
        int64_t as_if = sent_ms + lease_ms - wd->c->cfg.watchdog_ms;
        if (as_if < h->renewed_at)
            h->renewed_at = as_if;
    }
    pthread_mutex_unlock(&wd->mu);
}

int dlock__watchdog_release_begin(dlock__watchdog *wd, const char *name, size_t nlen,
                                  const char *owner, size_t olen)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, name, nlen, owner, olen);
    if (h)
        h->releasing++;
    pthread_mutex_unlock(&wd->mu);
    return h != NULL;
}

static void note_lost(dlock__watchdog *wd, held *h, dlock_lost_reason why, lost_note **notes);

void dlock__watchdog_release_end(dlock__watchdog *wd, const char *name, size_t nlen,
                                 const char *owner, size_t olen, int outcome)
{
    pthread_mutex_lock(&wd->mu);
    held *h = find(wd, name, nlen, owner, olen);
    int do_free = 0, kick = 0;
    if (h) {
        if (h->releasing > 0)
            h->releasing--;
        if (outcome == DLOCK__RELEASE_NOT_HELD) {
            /* We renewed it, nobody released it here: it was lost. Report it
             * like a renewal would have, from the io thread. */
            note_lost(wd, h, DLOCK_LOST_GONE, &wd->pending);
            kick = 1;
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
    if (kick)
        dlock__loop_kick(wd->c->loop);
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

static int64_t period_ms(const dlock__watchdog *wd) { return wd->c->cfg.watchdog_ms / 3; }

static void report(dlock__watchdog *wd, lost_note *notes)
{
    while (notes) {
        lost_note *n = notes;
        notes = n->next;
        const char *owner = n->key + n->nlen + 1;
        dlock_lost_fn fn = n->fn ? n->fn : wd->c->cfg.lost_fn;
        void *ud = n->fn ? n->ud : wd->c->cfg.lost_ud;
        dlock__log(wd->c, DLOCK_LOG_WARN, "lock '%s' held by %s lost: %s", n->key, owner,
                   n->reason == DLOCK_LOST_GONE ? "it was gone when renewed or released"
                                                : "Redis unreachable until the lease ran out");
        if (fn)
            fn(n->key, owner, n->reason, ud);
        free(n);
    }
}

void dlock__watchdog_flush(dlock__watchdog *wd)
{
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
    size_t klen = (size_t)h->nlen + 1 + h->olen + 1;
    lost_note *n = malloc(sizeof(*n) + klen);
    if (n) {
        n->fn = h->fn;
        n->ud = h->ud;
        n->reason = why;
        n->nlen = h->nlen;
        memcpy(n->key, h->key, klen);
        n->next = *notes;
        *notes = n;
    }
    /* Without memory for the note the loss goes unreported, but the entry
     * still leaves the schedule. */
    if (unlink_held(wd, h))
        free(h);
}

/* Brings the timer forward to `at` if it is due later. */
static void schedule(dlock__watchdog *wd, int64_t at)
{
    if (wd->stopping)
        return;
    int64_t now = dlock__now_ms();
    uint64_t delay = (uint64_t)(at > now ? at - now : 0);
    if (uv_is_active((uv_handle_t *)&wd->timer) && uv_timer_get_due_in(&wd->timer) <= delay)
        return;
    uv_timer_start(&wd->timer, on_timer, delay, 0);
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

static void on_load_reply(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    dlock__watchdog *wd = ud;
    wd->loading = 0;   /* answered either way: a later NOSCRIPT loads again */
    if (r && r->type == REDIS_REPLY_ERROR)
        dlock__log(wd->c, DLOCK_LOG_ERROR, "SCRIPT LOAD of the renewal script failed: %s", r->str);
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
            const dlock__script *s = &dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW];
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
        dlock__log(wd->c, DLOCK_LOG_WARN, "lock renewal failed: %s",
                   !r ? dlock_strerror(status)
                      : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    batch_done(wd, b, r, ok);
    if (!ok && !wd->stopping)
        schedule(wd, dlock__now_ms() + wd->c->cfg.retry_delay_ms);
}

static int send_batch(dlock__watchdog *wd, batch *b)
{
    const char *av[3 + 2 * DLOCK__RENEW_BATCH + 1];
    size_t lens[3 + 2 * DLOCK__RENEW_BATCH + 1];
    char nk[8], lease[24];
    int argc = 0;
    av[argc] = "EVALSHA";
    lens[argc++] = 7;
    av[argc] = dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW].sha;
    lens[argc++] = 40;
    av[argc] = nk;
    lens[argc++] = dlock__fmt_i64(nk, b->n);
    for (int i = 0; i < b->n; i++) {
        av[argc] = b->e[i]->key;
        lens[argc++] = b->e[i]->nlen;
    }
    av[argc] = lease;
    lens[argc++] = dlock__fmt_i64(lease, wd->c->cfg.watchdog_ms);
    for (int i = 0; i < b->n; i++) {
        av[argc] = h_owner(b->e[i]);
        lens[argc++] = b->e[i]->olen;
    }
    return dlock__aconn_send(wd->conn, argc, av, lens, 1, on_batch_reply, b);
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

static batch *new_batch(dlock__watchdog *wd, int64_t now)
{
    batch *b = malloc(sizeof(*b));
    if (b) {
        b->wd = wd;
        b->sent_at = now;
        b->n = 0;
        b->reloaded = 0;
    }
    return b;
}

/* One pass: report losses whose deadline passed, renew what is due, and set
 * the timer for the next renewal or deadline, whichever comes first. */
static void tick(dlock__watchdog *wd)
{
    if (wd->stopping)
        return;
    const int64_t now = dlock__now_ms();
    const int64_t timeout = wd->c->cfg.watchdog_ms, period = period_ms(wd);
    /* Report a loss a little before the lease would run out, so that a late
     * timer or a busy machine cannot push the report past Redis's expiry. */
    const int64_t early = timeout / 20 < 500 ? timeout / 20 : 500;
    const int64_t retry = wd->c->cfg.retry_delay_ms < period ? wd->c->cfg.retry_delay_ms : period;
    const int ready = wd->conn && dlock__aconn_ready(wd->conn);
    int64_t next = now + (wd->failing ? retry : period);
    lost_note *notes = NULL;
    batch *stack_bv[64];
    batch **bv = stack_bv;
    size_t nb = 0, capb = DLOCK__ARRAY_LEN(stack_bv);
    batch *cur = NULL;
    int any = 0;

    pthread_mutex_lock(&wd->mu);
    dlock__list *it = wd->all.next;
    while (it != &wd->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        it = it->next;
        any = 1;
        int64_t deadline = h->renewed_at + timeout - early;
        if (now >= deadline) {
            note_lost(wd, h, DLOCK_LOST_UNREACHABLE, &notes);
            continue;
        }
        if (deadline < next)
            next = deadline;
        if (!ready || h->inflight || now - h->renewed_at < period / 2)
            continue;
        if (!cur || cur->n == DLOCK__RENEW_BATCH) {
            if (nb == capb) {
                batch **grown = malloc(capb * 2 * sizeof(*grown));
                if (!grown)
                    break;
                memcpy(grown, bv, nb * sizeof(*grown));
                if (bv != stack_bv)
                    free(bv);
                bv = grown;
                capb *= 2;
            }
            if (!(cur = new_batch(wd, now)))
                break;
            bv[nb++] = cur;
        }
        h->inflight = 1;
        cur->e[cur->n++] = h;
    }
    pthread_mutex_unlock(&wd->mu);

    /* All of this tick's scripts leave in one write. */
    if (nb > 0)
        dlock__aconn_cork(wd->conn);
    for (size_t i = 0; i < nb; i++)
        if (send_batch(wd, bv[i]) != DLOCK_OK) {
            wd->failing = 1;
            batch_done(wd, bv[i], NULL, 0);
        }
    if (nb > 0)
        dlock__aconn_uncork(wd->conn);
    if (bv != stack_bv)
        free(bv);

    if (any && !wd->conn) {
        dlock__aconn_cbs cbs = {on_conn_ready, on_conn_down, NULL, wd};
        if (dlock__aconn_new(&wd->conn, wd->timer.loop, wd->c, dlock__node_endpoint(wd->c->node),
                             0, &cbs) != DLOCK_OK)
            wd->conn = NULL;
    }
    if (any && wd->conn && !ready)
        dlock__aconn_start(wd->conn);

    report(wd, notes);
    if (!wd->stopping)
        uv_timer_start(&wd->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

int dlock__watchdog_start(dlock__watchdog *wd, struct uv_loop_s *uv)
{
    int rc = uv_timer_init(uv, &wd->timer);
    if (rc < 0)
        return dlock__fail(DLOCK_ESYS, "cannot create the watchdog timer: %s", uv_strerror(rc));
    wd->timer.data = wd;
    wd->timer_inited = 1;
    uv_timer_start(&wd->timer, on_timer, (uint64_t)period_ms(wd), 0);
    return DLOCK_OK;
}

static void on_closed(void *arg)
{
    dlock__watchdog *wd = arg;
    if (--wd->closes == 0 && wd->done)
        wd->done(wd->done_arg);
}

static void on_timer_closed(uv_handle_t *h) { on_closed(h->data); }

void dlock__watchdog_stop(dlock__watchdog *wd, void (*done)(void *), void *arg)
{
    wd->stopping = 1;
    wd->done = done;
    wd->done_arg = arg;
    wd->closes = 1;   /* held until both closes below are queued */
    if (wd->timer_inited) {
        wd->closes++;
        uv_timer_stop(&wd->timer);
        uv_close((uv_handle_t *)&wd->timer, on_timer_closed);
    }
    if (wd->conn) {
        wd->closes++;
        dlock__aconn_close(wd->conn, on_closed, wd);
        wd->conn = NULL;
    }
    on_closed(wd);
}
