/* The watchdog: renews holds taken without a lease, in batches, and reports
 * their loss before Redis can let them go (docs/internals/watchdog.md: the
 * schedule, loss deadlines, hold limits, per-node renewals, revocation).
 * This file keeps the table of holds (user threads add and remove entries
 * under wd->mu) and the schedule: the io thread's pass, and what a batch's
 * answer means for its holds. It imports the other parts, none of which
 * imports it (wdhold.h): the per-node batches (wdnode.c) and revocation
 * (revoke.c) call it back only through the hooks it gives them; losses
 * (cause.c) are handed their notes. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/cause.h"
#include "io/clock.h"
#include "io/revoke.h"

struct dlock__watchdog {
    dlock__netctx *ctx;
    dlock__loop *lp;
    dlock__router *router;
    dlock__job flush_job;    /* delivers the losses found by releases */
    dlock__job start_job;    /* sets the timer up on the io thread */
    dlock__job kick_job;     /* a pass now: a limited hold to cut back to its limit */
    pthread_mutex_t mu;
    pthread_cond_t answered; /* a renewal that a release awaits was answered */
    dlock__list settles;     /* under mu (io thread only): awaits of dead holds by
                                asynchronous releases (`settle_node`) */
    dlock__wd_settle *collect;   /* io thread only: the release collecting now, or NULL */
    dlock__map map;          /* the holds, by identity (held.hn) */
    dlock__list all;         /* the holds (held.all) */
    dlock__map owners;       /* owner ids (wowner) */
    struct lost_note *pending;   /* under mu: losses found by releases, for the io thread */

    /* io thread only */
    uv_timer_t timer;
    int timer_inited;
    int64_t last_tick;       /* when the last pass ran, or the timer started (ms) */

    dlock__wd_nodes nodes;   /* the per-node batches (wdnode.c); nodes.stopping */
    dlock__wd_revoke rv;     /* revocation by tracking (revoke.c) */
    dlock__wd_losses losses; /* loss causes and reports (cause.c) */
    dlock__wd_clock clock;   /* the server clock check (clock.c) */
};


/* Takes h out of the table; frees it unless a batch still points at it.
 * Caller holds mu. Returns 1 when the caller must free it. */
static int unlink_held(dlock__watchdog *wd, held *h)
{
    dlock__map_remove(&wd->map, &h->hn);
    dlock__list_remove(&h->all);
    dlock__wd_track_unlink(&wd->rv, h);
    if (h->inflight) {
        h->dead = 1;
        return 0;
    }
    return 1;
}

/* --------------------------------------------------------- user threads */

int dlock__watchdog_add(dlock__watchdog *wd, const dlock__hold_id *id, int64_t sent_ms,
                        const dlock__lost_cb *cb)
{
    return dlock__watchdog_add_limited(wd, id, sent_ms, 0, cb);
}

/* The hold's lost callback (none: the client's). */
static void set_cb(held *h, const dlock__lost_cb *cb)
{
    h->cause_form = cb && cb->cfn;
    if (h->cause_form)
        h->cb.cfn = cb->cfn;
    else
        h->cb.fn = cb ? cb->fn : NULL;
    h->ud = cb ? cb->ud : NULL;
}

int dlock__watchdog_add_limited(dlock__watchdog *wd, const dlock__hold_id *id, int64_t sent_ms,
                                int64_t max_hold_ms, const dlock__lost_cb *cb)
{
    int64_t limit_at = max_hold_ms > 0 ? sent_ms + max_hold_ms : INT64_MAX;
    pthread_mutex_lock(&wd->mu);
    held *h = dlock__wd_hold_find(&wd->map, id);
    if (h) {
        /* Reentry: the acquire reset the TTL too (never past the limit: the
         * script set the timeout, which a limit shorter than it cuts at the
         * next pass, reported on time either way). A reentry's own limit
         * may only come sooner. */
        if (sent_ms > h->renewed_at)
            h->renewed_at = sent_ms;
        /* Not a short hold: registered by the next pass, however often it is
         * re-entered (each reentry moves renewed_at, its age, forward). */
        h->fresh = 0;
        if (limit_at < h->limit_at)
            h->limit_at = limit_at;
        h->holds++;
        set_cb(h, cb);
        int kick = h->limit_at != INT64_MAX;
        h->recap |= kick;
        pthread_mutex_unlock(&wd->mu);
        if (kick)
            dlock__loop_post(wd->lp, &wd->kick_job);
        return DLOCK_OK;
    }
    h = dlock__wd_hold_new(&wd->owners, id);
    if (h) {
        h->renewed_at = sent_ms;
        h->limit_at = limit_at;
        h->holds = 1;
        set_cb(h, cb);
    }
    if (!h || dlock__map_insert(&wd->map, &h->hn) != 0) {
        if (h)
            dlock__wd_hold_free(&wd->owners, h);
        pthread_mutex_unlock(&wd->mu);
        return dlock__fail(DLOCK_ENOMEM, "out of memory scheduling the renewal");
    }
    dlock__list_push_back(&wd->all, &h->all);
    dlock__wd_track_link(&wd->rv, h);
    /* Registered with tracking soon (revoke.c). */
    int post = dlock__wd_revoke_added(&wd->rv, h);
    pthread_mutex_unlock(&wd->mu);
    if (post)
        dlock__wd_revoke_wake(&wd->rv);
    return DLOCK_OK;
}

void dlock__watchdog_lease_reentry(dlock__watchdog *wd, const dlock__hold_id *id,
                                   int64_t sent_ms, int64_t lease_ms)
{
    pthread_mutex_lock(&wd->mu);
    held *h = dlock__wd_hold_find(&wd->map, id);
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
    held *h = dlock__wd_hold_find(&wd->map, id);
    int64_t left = h && h->limit_at != INT64_MAX ? h->limit_at - dlock__now_ms() : INT64_MAX;
    pthread_mutex_unlock(&wd->mu);
    return left;
}

int dlock__watchdog_renews(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = dlock__wd_hold_find(&wd->map, id);
    int n = h ? (h->holds > 0 ? h->holds : 1) : 0;
    pthread_mutex_unlock(&wd->mu);
    return n;
}

int dlock__watchdog_release_begin(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = dlock__wd_hold_find(&wd->map, id);
    if (h)
        h->releasing++;
    pthread_mutex_unlock(&wd->mu);
    return h != NULL;
}

static void note_lost(dlock__watchdog *wd, held *h, dlock_lost_reason why, lost_note **notes);

void dlock__watchdog_release_abort(dlock__watchdog *wd, const dlock__hold_id *id)
{
    pthread_mutex_lock(&wd->mu);
    held *h = dlock__wd_hold_find(&wd->map, id);
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
        dlock__wd_hold_free(&wd->owners, h);   /* answered: its batch left it to us */
}

void dlock__watchdog_release_end(dlock__watchdog *wd, const dlock__hold_id *id, int outcome)
{
    pthread_mutex_lock(&wd->mu);
    held *h = dlock__wd_hold_find(&wd->map, id);
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
        dlock__wd_hold_free(&wd->owners, h);
    pthread_mutex_unlock(&wd->mu);
    if (post)
        dlock__loop_post(wd->lp, &wd->flush_job);
}

int dlock__watchdog_tracking(dlock__watchdog *wd) { return dlock__wd_revoke_state(&wd->rv); }

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

static void flush_pending(void *arg)
{
    dlock__watchdog *wd = arg;
    pthread_mutex_lock(&wd->mu);
    lost_note *notes = wd->pending;
    wd->pending = NULL;
    pthread_mutex_unlock(&wd->mu);
    dlock__wd_report(&wd->losses, notes);
}

/* Takes h out of the schedule (freeing it, or leaving it to its in-flight
 * batch) and queues its callback. Caller holds mu. */
static void note_lost(dlock__watchdog *wd, held *h, dlock_lost_reason why, lost_note **notes)
{
    size_t nlen = h->len[0], olen = h->own->len;
    lost_note *n = malloc(sizeof(*n) + nlen + 1 + olen + 1);
    if (n) {
        n->cb = h->cause_form ? (dlock__lost_cb){.cfn = h->cb.cfn, .ud = h->ud}
                              : (dlock__lost_cb){.fn = h->cb.fn, .ud = h->ud};
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
        dlock__wd_hold_free(&wd->owners, h);
}

static void on_promoted(void *arg, dlock__node *n)
{
    (void)n;
    dlock__watchdog *wd = arg;
    dlock__loop_post(wd->lp, &wd->kick_job);
}

/* Hook (wdnode.c): a batch answered; what it means for its holds.
 * unacked: the renewals were not acknowledged by enough replicas and the
 * policy gives such holds up (reported lost, no longer renewed). */
static void on_answered(void *ud, batch *b, int ok, const unsigned char *renewed, int unacked)
{
    dlock__watchdog *wd = ud;
    lost_note *notes = NULL;
    int again = 0;
    /* When the node that answered became a primary, if it did; and whether
     * the batch's keys live elsewhere now (a new primary seen meanwhile). */
    const int64_t promoted_at = dlock__node_promoted_at(b->wc->node);
    const int moved = b->n > 0 && dlock__router_node(wd->router, h_part(b->e[0], 0),
                                                     b->e[0]->len[0]) != b->wc->node;
    if (b->recheck)
        dlock__wd_revoke_answered(&wd->rv);
    pthread_mutex_lock(&wd->mu);
    for (int i = 0; i < b->n; i++) {
        held *h = b->e[i];
        h->inflight = 0;
        if (h->dead) {
            if (h->awaited & AW_ASYNC)
                settle_answered(wd, h);
            if (h->awaited & AW_THREAD)
                pthread_cond_broadcast(&wd->answered);   /* its release frees it */
            else
                dlock__wd_hold_free(&wd->owners, h);
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
    int more = dlock__wd_revoke_due(&wd->rv);
    pthread_mutex_unlock(&wd->mu);
    if (again)
        dlock__loop_post(wd->lp, &wd->kick_job);
    dlock__wd_explain(&wd->losses, b->wc, &b->before, notes);
    if (more)   /* holds whose key changed while their renewal was in flight */
        dlock__wd_revoke_resume(&wd->rv, ok);
}

/* Brings the timer forward to `at` if it is due later. */
static void schedule(dlock__watchdog *wd, int64_t at)
{
    if (wd->nodes.stopping || !wd->timer_inited)
        return;
    int64_t now = dlock__now_ms();
    uint64_t delay = (uint64_t)(at > now ? at - now : 0);
    if (uv_is_active((uv_handle_t *)&wd->timer) && uv_timer_get_due_in(&wd->timer) <= delay)
        return;
    uv_timer_start(&wd->timer, on_timer, delay, 0);
}


static void on_timer(uv_timer_t *t) { tick(t->data); }

/* Hook (wdnode.c): a renewal failed; the pass comes again after the retry
 * delay. */
static void on_failed(void *ud)
{
    dlock__watchdog *wd = ud;
    schedule(wd, dlock__now_ms() + wd->ctx->cfg->retry_delay_ms);
}

/* Hook (wdnode.c): wc's connection is up: a first sample of the node's
 * counters, for a loss found by the first renewal (after a reconnection the
 * old one stays: its run_id tells a failover), tracking on it (revoke.c),
 * and the holds that waited for it renewed. The sample goes first: the pass
 * may close wc (dlock__wd_drop_unused, when no hold needs its node any more,
 * as after a failover) and wc must not be used after it. */
static void on_up(void *ud, wconn *wc)
{
    dlock__watchdog *wd = ud;
    dlock__wd_clock_reset(wc);
    if (!wc->sample.have)
        dlock__wd_cause_sample(&wd->losses, wc);
    dlock__wd_revoke_conn_up(&wd->rv);
    tick(wd);
}

static void on_down(void *ud, wconn *wc)
{
    dlock__wd_clock_reset(wc);
    dlock__wd_revoke_conn_down(&((dlock__watchdog *)ud)->rv);
}

/* Hook (wdnode.c): wc wrote a pass's batches: a sample of its counters goes
 * in the same write (at most once a second), and a TIME (clock.c). */
static void on_wrote(void *ud, wconn *wc)
{
    dlock__watchdog *wd = ud;
    dlock__wd_cause_sample(&wd->losses, wc);
    dlock__wd_clock_sample(&wd->clock, wc);
}

/* Hook (clock.c): wc's node's clock jumped. Forward, Redis may have expired
 * its keys early: every hold on that node is reported lost (cause "server
 * clock jumped"), whether or not its key is still there, and the node is
 * quarantined for one lease (the record every dlock acquisition honours),
 * so that the holders of other clients hear of it at their next pass before
 * anybody new takes what they held. Backward, keys live longer: logged. */
static void on_clock_jump(void *ud, wconn *wc, int64_t jump_us)
{
    dlock__watchdog *wd = ud;
    const char *addr = dlock__node_addr(wc->node);
    const long long jump_ms = (long long)((jump_us < 0 ? -jump_us : jump_us) / 1000);
    if (jump_us < 0) {
        dlock__log(wd->ctx->cfg, DLOCK_LOG_WARN,
                   "%s: the server's clock jumped about %lld ms backward: its keys live "
                   "longer than their leases (no hold is lost)", addr, jump_ms);
        return;
    }
    const int64_t lease = dlock__netctx_lease_ms(wd->ctx);
    dlock__log(wd->ctx->cfg, DLOCK_LOG_WARN,
               "%s: the server's clock jumped about %lld ms forward: Redis may have expired "
               "keys early; every hold on it is reported lost, and acquisitions there wait "
               "%lld ms (one lease)", addr, jump_ms, (long long)lease);
    lost_note *notes = NULL;
    pthread_mutex_lock(&wd->mu);
    dlock__list *it = wd->all.next;
    while (it != &wd->all) {
        held *h = DLOCK__CONTAINER_OF(it, held, all);
        it = it->next;
        if (h->releasing ||
            dlock__router_node(wd->router, h_part(h, 0), h->len[0]) != wc->node)
            continue;
        lost_note *was = notes;
        note_lost(wd, h, DLOCK_LOST_GONE, &notes);
        if (notes != was)
            notes->cause = DLOCK_CAUSE_CLOCK_JUMP;
    }
    pthread_mutex_unlock(&wd->mu);
    dlock__node_clock_jumped(wc->node, lease);
    dlock__wd_report(&wd->losses, notes);
}

/* One pass: report losses whose deadline passed, renew what is due, and set
 * the timer for the next renewal or deadline, whichever comes first. */
static void tick(dlock__watchdog *wd)
{
    if (wd->nodes.stopping)
        return;
    const dlock_config *cfg = wd->ctx->cfg;
    const int64_t now = dlock__now_ms();
    const int64_t timeout = cfg->watchdog_ms, period = period_ms(wd);
    /* Report a loss a little before the lease would run out, so that a late
     * timer or a busy machine cannot push the report past Redis's expiry. */
    const int64_t early = timeout / 20 < 500 ? timeout / 20 : 500;
    const int64_t retry = cfg->retry_delay_ms < period ? cfg->retry_delay_ms : period;
    int failing = 0;
    for (size_t i = 0; i < wd->nodes.nconns; i++)
        failing |= wd->nodes.conns[i]->failing;
    int64_t next = now + (failing ? retry : period);
    const int cluster = dlock__router_is_cluster(wd->router);
    /* Ticks come at least every period; one much later means this process
     * did not run meanwhile, and the losses found now are its own pause. */
    const int paused = now - wd->last_tick > period + period / 2 + 250;
    wd->last_tick = now;
    lost_note *notes = NULL;
    tick_batches tb;
    dlock__wd_tb_init(&tb, dlock__wd_revoke_live(&wd->rv));
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
        wconn *wc = dlock__wd_conn_for(&wd->nodes, node);
        if (!wc)
            break;
        wc->used = 1;
        if (!dlock__aconn_ready(wc->conn)) {
            dlock__aconn_start(wc->conn);   /* on_conn_ready ticks again */
            continue;
        }
        h->recap = 0;
        dlock__wd_revoke_unmark(h);
        const int64_t lease = h->limit_at - now < timeout ? h->limit_at - now : timeout;
        int slot = cluster ? dlock__key_slot(h_part(h, 0), h->len[0]) : 0;
        batch *b = dlock__wd_batch_for(&tb, h->kind, wc, slot, lease, now);
        if (!b)
            break;
        h->inflight = 1;
        b->e[b->n++] = h;
    }
    pthread_mutex_unlock(&wd->mu);
    dlock__wd_send_all(&wd->nodes, &tb);

    if (any)
        dlock__wd_revoke_keep_up(&wd->rv);
    dlock__wd_drop_unused(&wd->nodes);

    dlock__wd_report(&wd->losses, notes);
    if (!wd->nodes.stopping)
        uv_timer_start(&wd->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

static void on_timer_closed(uv_handle_t *h) {}

/* Stop hook (io thread): the timer and the renewal connection go. */
static void on_stop(void *arg)
{
    dlock__watchdog *wd = arg;
    wd->nodes.stopping = 1;
    dlock__netctx_on_promoted(wd->ctx, DLOCK__HOOK_WATCHDOG, NULL, NULL);
    if (wd->timer_inited) {
        uv_timer_stop(&wd->timer);
        uv_close((uv_handle_t *)&wd->timer, on_timer_closed);
    }
    dlock__wd_nodes_close(&wd->nodes);
    dlock__wd_revoke_stop(&wd->rv);
}

/* ------------------------------------------------------------ lifecycle */

static void kick_job(void *arg)
{
    dlock__watchdog *wd = arg;
    if (wd->timer_inited)
        tick(wd);
}

/* Revocation's hook: a pass now. */
static void revoke_tick(void *ud) { tick(ud); }

/* First job on the io thread: the timer. */
static void start_job(void *arg)
{
    dlock__watchdog *wd = arg;
    if (wd->nodes.stopping)
        return;
    int rc = uv_timer_init(dlock__loop_uv(wd->lp), &wd->timer);
    if (rc == 0 && (rc = dlock__wd_revoke_start(&wd->rv)) < 0)
        uv_close((uv_handle_t *)&wd->timer, on_timer_closed);
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
    dlock__job_init(&wd->kick_job, kick_job, wd);
    /* The schedule starts now: a process stopped before the io thread first
     * ran still has its pause seen. */
    wd->last_tick = dlock__now_ms();
    pthread_mutex_init(&wd->mu, NULL);
    if (dlock__cond_init(&wd->answered) != 0) {
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return dlock__fail(DLOCK_ENOMEM, "cannot create a condition variable");
    }
    dlock__wd_holds_init(&wd->map, &wd->owners);
    dlock__list_init(&wd->all);
    dlock__list_init(&wd->settles);
    const dlock__wd_node_hooks hooks = {on_answered, on_failed, on_up, on_down, on_wrote, wd};
    dlock__wd_nodes_init(&wd->nodes, ctx, lp, router, &wd->mu, &hooks);
    int rc = dlock__wd_revoke_init(&wd->rv, ctx, lp, router, &wd->mu, &wd->nodes, &wd->all,
                                   revoke_tick, wd);
    wd->losses = (dlock__wd_losses){ctx, &wd->rv.flushes};
    wd->clock = (dlock__wd_clock){ctx, on_clock_jump, wd};
    if (rc == DLOCK_OK)
        rc = dlock__loop_on_stop(lp, on_stop, wd);
    if (rc != DLOCK_OK) {
        dlock__wd_revoke_free(&wd->rv);
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
        dlock__wd_track_unlink(&wd->rv, h);
        dlock__wd_hold_free(&wd->owners, h);
    }
    dlock__map_free(&wd->map);
    dlock__map_free(&wd->owners);
    dlock__wd_revoke_free(&wd->rv);
    pthread_cond_destroy(&wd->answered);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
}
