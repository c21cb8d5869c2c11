/* The asynchronous engine (include/dlock/async.h; docs/internals/async.md).
 *
 * A call is an `aop`: made and checked on the caller's thread (the type sets
 * its state up in place), registered with the client's table of pending
 * calls, then run on the io thread by its own job (`kick`), which every
 * event posts: its start, a wake-up, a change of its channel, a
 * cancellation, the close. Nothing blocks there. A waiting call:
 *
 *   START -> SENT (a round trip on the io thread's command connection)
 *   SENT  -> done | busy: JOINING (a callback waiter on the channel, until
 *            the subscription is confirmed) -> SENT (the retry) -> SLEEPING
 *            (until a wake-up, the busy answer's TTL or the deadline) -> SENT ...
 *
 * It is wait.c's loop, state by state: subscribe before the retry, sleep at
 * most the holder's TTL, poll at the retry delay while pub/sub is down, pass
 * on a wake-up used by a call that then failed, give up cleanly (the type's
 * give-up op, sent best effort). A call of one round trip is START -> SENT
 * -> done. The types (lock_async.c, semaphore.c, ...) bring the requests and
 * what the answers mean (sync.h: dlock__await_type, dlock__call_type).
 *
 * Timers: one libuv timer for the client's calls, over a heap of the calls
 * that sleep, ordered by (deadline, sequence); due calls are collected,
 * then run.
 *
 * Lifetime: an aop is freed when its references are gone: its own (until it
 * completes) and one per round trip in flight. Its job is taken out of the loop's queue when it completes, after
 * which nothing can post it (the waiter has left, the token is detached).
 * The client's close completes every call still in the table with
 * DLOCK_ECLOSED (the stop hook), before the command connection fails the
 * round trips in flight (their answers then find the call done). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

enum { S_START, S_SENT, S_JOINING, S_SLEEPING, S_DONE };
enum { K_WAIT, K_CALL };

#define MSG_MAX 512

typedef struct aop {
    dlock__list reg;         /* in the client's table while pending */
    dlock_client *c;
    dlock_async_fn fn;       /* NULL: a call of the library's own (a give-back) */
    void *ud;
    unsigned char kind, state, ended;
    unsigned char with, without;   /* the ACL fallback (dlock__op_req) */
    const char *optkey;      /* the optional key sent (for the log) */
    size_t optlen;
    int refs;
    int hidx;                /* in the timer heap, or -1 */
    uint64_t tseq;
    dlock__job kick;
    const void *type;        /* dlock__await_type or dlock__call_type */
    /* A waiting call's (a call of one round trip has them unused): */
    dlock__wait_spec spec;
    dlock__waiter w;
    unsigned char seen_busy, joined, used_wake, first;
    int64_t start, deadline, until, waited, sent;
    int64_t start_us;        /* for the client's statistics */
    /* The type's state. */
    _Alignas(max_align_t) unsigned char st[];
} aop;

/* One struct for both kinds, so that st finds its op (calls are short-lived:
 * the wait fields they do not use cost nothing that lasts). */
#define WOP(op) (op)
#define COP(op) (op)
#define AWT(op) ((const dlock__await_type *)(op)->type)
#define CLT(op) ((const dlock__call_type *)(op)->type)

/* The client's table of pending calls. */
struct dlock__async {
    pthread_mutex_t mu;
    dlock__list ops;
    size_t n;
    int stopped;
    /* io thread only: the sleeping calls' deadlines */
    uv_timer_t timer;
    aop **heap;
    size_t hn, hcap;
    uint64_t seq;
};

static void on_kick(void *arg);
static void send_attempt(aop *op, int64_t waited);
static void finish(aop *op, int rc);

/* -------------------------------------------------------------- results */

int dlock_async_status(const dlock_async_result *res) { return res ? res->status : DLOCK_EINVAL; }

const char *dlock_async_message(const dlock_async_result *res)
{
    return res && res->message ? res->message : "";
}

uint64_t dlock_async_token(const dlock_async_result *res) { return res ? res->token : 0; }

int dlock_async_was_locked(const dlock_async_result *res) { return res ? res->flag : 0; }

int dlock_async_flag(const dlock_async_result *res) { return res ? res->flag : 0; }

int64_t dlock_async_count(const dlock_async_result *res) { return res ? res->count : -1; }

const char *dlock_async_permit_id(const dlock_async_result *res)
{
    return res && res->permit_id ? res->permit_id : "";
}

/* ------------------------------------------------------------- lifetime */

static void unref(aop *op)
{
    if (--op->refs == 0)
        free(op);
}

/* ---------------------------------------------------------------- timers */

static int earlier(const aop *a, const aop *b)
{
    return a->until < b->until || (a->until == b->until && a->tseq < b->tseq);
}

static void heap_set(dlock__async *t, size_t i, aop *op)
{
    t->heap[i] = op;
    op->hidx = (int)i;
}

static void sift_up(dlock__async *t, size_t i)
{
    aop *op = t->heap[i];
    while (i > 0 && earlier(op, t->heap[(i - 1) / 2])) {
        heap_set(t, i, t->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(t, i, op);
}

static void sift_down(dlock__async *t, size_t i)
{
    aop *op = t->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= t->hn)
            break;
        if (c + 1 < t->hn && earlier(t->heap[c + 1], t->heap[c]))
            c++;
        if (!earlier(t->heap[c], op))
            break;
        heap_set(t, i, t->heap[c]);
        i = c;
    }
    heap_set(t, i, op);
}

static void on_timer(uv_timer_t *timer);

/* The libuv timer follows the heap's earliest deadline. */
static void rearm(dlock__async *t)
{
    if (t->hn == 0) {
        uv_timer_stop(&t->timer);
        return;
    }
    int64_t at = t->heap[0]->until, now = dlock__now_ms();
    uint64_t delay = at == INT64_MAX ? UINT64_MAX / 2 : (uint64_t)(at > now ? at - now : 0);
    uv_timer_start(&t->timer, on_timer, delay, 0);
}

static void stop_timer(aop *op)
{
    dlock__async *t = op->c->async;
    if (op->hidx < 0)
        return;
    size_t i = (size_t)op->hidx;
    op->hidx = -1;
    aop *last = t->heap[--t->hn];
    if (i < t->hn) {
        heap_set(t, i, last);
        sift_up(t, i);
        sift_down(t, (size_t)last->hidx);
    }
    if (i == 0)
        rearm(t);
}

/* Wakes op at `at` (ms, monotonic) unless something else comes first. */
static void arm_timer(aop *op, int64_t at)
{
    dlock__async *t = op->c->async;
    stop_timer(op);
    op->until = at;
    op->tseq = ++t->seq;
    if (t->hn == t->hcap) {
        size_t cap = t->hcap ? 2 * t->hcap : 64;
        aop **h = realloc(t->heap, cap * sizeof(*h));
        if (!h) {
            /* No room: poll instead of sleeping (the waiter still wakes it). */
            dlock__loop_post(op->c->loop, &op->kick);
            return;
        }
        t->heap = h;
        t->hcap = cap;
    }
    heap_set(t, t->hn++, op);
    sift_up(t, t->hn - 1);
    if (op->hidx == 0)
        rearm(t);
}

/* Any thread, under the waiter table's or the token's mutex: just post. */
static void notify(void *arg)
{
    aop *op = arg;
    dlock__loop_post(op->c->loop, &op->kick);
}

static void ignore_reply(int status, dlock__res *res, void *ud)
{
    (void)status;
    (void)ud;
    if (res->r)
        freeReplyObject(res->r);
}

/* Sends o on the io thread's command connection; cb(status, res, ud). The
 * optional key follows the client's choice and the ACL fallback
 * (dlock__op_req); *with (may be NULL) = 1 when it went along. */
static int send_req(dlock_client *c, const dlock__op *o, unsigned flags, int64_t latch_ms,
                    int without, int *with, dlock__acall_fn cb, void *ud)
{
    if (o->bad)
        return dlock__fail(DLOCK_EINVAL, "internal: a request was built wrong");
    const char *av[DLOCK__OP_MAX];
    size_t ln[DLOCK__OP_MAX];
    dlock__req req;
    int w = dlock__op_req(c, o, without, flags, NULL, latch_ms, &req, av, ln);
    if (with)
        *with = w;
    return dlock__acall_send(c->acall, &req, cb, ud);
}

/* The ACL fallback's answer to a send: 1 when op must go again without
 * dlock's optional key; else the client learns whether to keep sending it. */
static int key_fallback(aop *op, int status, const dlock__res *res)
{
    if (status != DLOCK_OK && dlock__op_key_refused(op->with, res)) {
        op->without = 1;
        return 1;
    }
    if (op->without)
        dlock__op_key_dropped(op->c, op->optkey, op->optlen, res);
    op->without = 0;
    return 0;
}

/* A round trip's answer for op: 1 when op is still running (the caller goes
 * on), 0 when it completed meanwhile (the answer is dropped). */
static int answered(aop *op, dlock__res *res)
{
    if (op->state != S_DONE) {
        op->refs--;   /* op keeps its own reference while running */
        return 1;
    }
    if (res->r)
        freeReplyObject(res->r);
    unref(op);
    return 0;
}

/* ------------------------------------------------------------- the table */

int dlock__async_new(dlock__async **out, dlock__loop *lp)
{
    dlock__async *t = calloc(1, sizeof(*t));
    if (!t)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    dlock__list_init(&t->ops);
    /* Before the io thread runs: the module's setup may use the loop. */
    uv_timer_init(dlock__loop_uv(lp), &t->timer);
    t->timer.data = t;
    *out = t;
    return DLOCK_OK;
}

void dlock__async_free(dlock__async *t)
{
    if (!t)
        return;
    free(t->heap);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static void on_timer_closed(uv_handle_t *h) { (void)h; }

/* Stop hook (io thread): every pending call ends with DLOCK_ECLOSED. */
void dlock__async_stop(void *arg)
{
    dlock_client *c = arg;
    dlock__async *t = c->async;
    dlock__list all;
    dlock__list_init(&all);
    pthread_mutex_lock(&t->mu);
    t->stopped = 1;
    while (!dlock__list_empty(&t->ops)) {
        dlock__list *it = t->ops.next;
        dlock__list_remove(it);
        dlock__list_push_back(&all, it);
    }
    pthread_mutex_unlock(&t->mu);
    while (!dlock__list_empty(&all)) {
        aop *op = DLOCK__CONTAINER_OF(all.next, aop, reg);
        dlock__fail(DLOCK_ECLOSED, "client closed with the call pending");
        finish(op, DLOCK_ECLOSED);   /* takes it out of `all` */
    }
    uv_timer_stop(&t->timer);
    uv_close((uv_handle_t *)&t->timer, on_timer_closed);
}

size_t dlock_client_async_pending(dlock_client *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->async->mu);
    size_t n = c->async->n;
    pthread_mutex_unlock(&c->async->mu);
    return n;
}

static aop *new_op(dlock_client *c, int kind, const void *type, size_t size, dlock_async_fn fn,
                   void *ud)
{
    aop *op = calloc(1, size);
    if (!op)
        return NULL;
    dlock__list_init(&op->reg);
    op->c = c;
    op->kind = (unsigned char)kind;
    op->type = type;
    op->fn = fn;
    op->ud = ud;
    op->refs = 1;
    op->hidx = -1;
    op->state = S_START;
    dlock__job_init(&op->kick, on_kick, op);
    return op;
}

static aop *op_of(void *st) { return (aop *)((char *)st - offsetof(aop, st)); }

void *dlock__async_wait_new(dlock_client *c, const dlock__await_type *t, size_t size,
                            dlock_async_fn fn, void *ud)
{
    aop *op = new_op(c, K_WAIT, t, sizeof(aop) + size, fn, ud);
    return op ? WOP(op)->st : NULL;
}

void *dlock__async_call_new(dlock_client *c, const dlock__call_type *t, size_t size,
                            dlock_async_fn fn, void *ud)
{
    aop *op = new_op(c, K_CALL, t, sizeof(aop) + size, fn, ud);
    return op ? COP(op)->st : NULL;
}

void dlock__async_discard(void *st)
{
    free(op_of(st));
}

/* Registers op and posts its start. Under the table's mutex, so that a stop
 * hook running meanwhile either sees it or refuses it. */
static int launch(aop *op)
{
    dlock__async *t = op->c->async;
    pthread_mutex_lock(&t->mu);
    if (t->stopped) {
        pthread_mutex_unlock(&t->mu);
        return dlock__fail(DLOCK_ECLOSED, "client is closing");
    }
    dlock__list_push_back(&t->ops, &op->reg);
    t->n++;
    dlock__loop_post(op->c->loop, &op->kick);
    pthread_mutex_unlock(&t->mu);
    return DLOCK_OK;
}

static void type_done(aop *op)
{
    if (op->kind == K_WAIT) {
        if (AWT(op)->done)
            AWT(op)->done(WOP(op)->st);
    } else if (CLT(op)->done) {
        CLT(op)->done(COP(op)->st, op->ended);
    }
}

/* A call that could not be launched: its hooks, then gone. */
static int not_launched(aop *op, int rc)
{
    char msg[MSG_MAX];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    type_done(op);
    free(op);
    return dlock__fail(rc, "%s", msg);
}

int dlock__async_wait_start(void *st, const dlock__wait_spec *spec)
{
    aop *op = op_of(st);
    aop *w = op;
    w->spec = *spec;
    w->start_us = dlock__now_us();
    w->start = w->start_us / 1000;
    w->deadline = spec->wait_ms == DLOCK_WAIT_FOREVER || spec->wait_ms > INT64_MAX - w->start
                      ? INT64_MAX
                      : w->start + spec->wait_ms;
    int rc = launch(op);
    return rc == DLOCK_OK ? rc : not_launched(op, rc);
}

int dlock__async_call_start(void *st)
{
    aop *op = op_of(st);
    int rc = launch(op);
    return rc == DLOCK_OK ? rc : not_launched(op, rc);
}

/* Ends op with rc (the io thread's message, when not DLOCK_OK, says why):
 * leaves the channel, takes op out of the table and the job queue, then
 * runs the callback. Exactly once. */
static void finish_res(aop *op, int rc, dlock_async_result *res)
{
    if (op->state == S_DONE)
        return;
    char msg[MSG_MAX];
    snprintf(msg, sizeof(msg), "%s", rc == DLOCK_OK ? "" : dlock_last_error());
    dlock_client *c = op->c;
    op->state = S_DONE;
    char pid[DLOCK_PERMIT_ID_BUFSIZE] = "";
    if (op->kind == K_WAIT) {
        aop *w = op;
        if (w->joined)
            dlock__waiter_leave(c->pubsub, &w->w, rc != DLOCK_OK && w->used_wake);
        w->joined = 0;
        if (rc == DLOCK_OK && AWT(op)->result) {
            AWT(op)->result(w->st, res);
            if (res->permit_id) {
                snprintf(pid, sizeof(pid), "%s", res->permit_id);
                res->permit_id = pid;
            }
        }
    }
    type_done(op);
    pthread_mutex_lock(&c->async->mu);
    if (!dlock__list_empty(&op->reg)) {
        dlock__list_remove(&op->reg);
        c->async->n--;
    }
    pthread_mutex_unlock(&c->async->mu);
    dlock__loop_unpost(c->loop, &op->kick);
    stop_timer(op);
    if (op->fn) {
        res->status = rc;
        res->message = msg;
        if (rc != DLOCK_OK)
            res->token = 0;
        op->fn(res, op->ud);
    }
    unref(op);
}

static void finish(aop *op, int rc)
{
    dlock_async_result res = {.count = -1};
    finish_res(op, rc, &res);
}

/* ------------------------------------------------------------ waiting */

static int end_error(aop *w, int rc)
{
    return dlock__fail(rc, "wait for '%s' %s", w->spec.name,
                       rc == DLOCK_ECANCELED ? "cancelled" : "ended: client closing");
}

/* The type's clean-up after a busy answer, sent best effort; the caller's
 * message is kept. */
static void fail_wait(aop *op, int rc)
{
    aop *w = op;
    const dlock__await_type *t = AWT(op);
    dlock__op o;
    unsigned flags = 0;
    if (w->seen_busy && t->give_up_op && t->give_up_op(w->st, rc, &o, &flags)) {
        char msg[MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        send_req(op->c, &o, flags | DLOCK__CALL_NO_RETRY, 0, 0, NULL, ignore_reply, NULL);
        dlock__fail(rc, "%s", msg);
    }
    finish(op, rc);
}

/* What the waiter has to act on; 1 when op went on (or ended). */
static int waiter_event(aop *op, int *ready)
{
    aop *w = op;
    int ev = dlock__waiter_poll(op->c->pubsub, &w->w, ready);
    if (ev == DLOCK_ECLOSED || ev == DLOCK_ECANCELED) {
        fail_wait(op, end_error(w, ev));
        return 1;
    }
    if (ev == DLOCK__WAKE_DONE) {
        finish(op, DLOCK_OK);   /* a settling message: no attempt needed */
        return 1;
    }
    w->used_wake = ev == DLOCK__WAKE_MESSAGE;
    if (w->used_wake)
        dlock__stats_count(&op->c->stats, DLOCK__ST_WAKEUPS, 1);
    return 0;
}

static void check_waiter(aop *op)
{
    aop *w = op;
    int ready = 0;
    if (waiter_event(op, &ready))
        return;
    if (w->used_wake || (op->state == S_JOINING && ready)) {
        stop_timer(op);
        send_attempt(op, dlock__now_ms() - w->start);
        return;
    }
    if (op->state == S_SLEEPING && !w->w.subscribed) {
        /* The subscription dropped: poll at the retry delay meanwhile. */
        int64_t poll = dlock__now_ms() + op->c->cfg.retry_delay_ms;
        if (poll < w->until)
            arm_timer(op, poll);
    }
}

static void timer_due(aop *op)
{
    if (op->state != S_JOINING && op->state != S_SLEEPING)
        return;
    int ready = 0;
    if (waiter_event(op, &ready))
        return;
    /* The TTL, the deadline, the poll, or the subscription's wait is over. */
    send_attempt(op, dlock__now_ms() - WOP(op)->start);
}

/* The client's timer: the due calls are collected (taken out of the heap),
 * then run; one may arm again, or end another. */
static void on_timer(uv_timer_t *timer)
{
    dlock__async *t = timer->data;
    int64_t now = dlock__now_ms();
    for (;;) {
        aop *due[64];
        size_t n = 0;
        while (n < DLOCK__ARRAY_LEN(due) && t->hn > 0 && t->heap[0]->until <= now) {
            aop *op = t->heap[0];
            stop_timer(op);
            op->refs++;   /* kept while in the batch */
            due[n++] = op;
        }
        for (size_t i = 0; i < n; i++) {
            if (due[i]->state != S_DONE)
                timer_due(due[i]);
            unref(due[i]);
        }
        if (n < DLOCK__ARRAY_LEN(due))
            break;
    }
    rearm(t);
}

/* A busy answer: join and retry, sleep, or give up. */
static void after_busy(aop *op, const dlock__busy *b)
{
    aop *w = op;
    const dlock__await_type *t = AWT(op);
    int64_t now = dlock__now_ms();
    if (!w->seen_busy) {
        w->seen_busy = 1;
        if (w->spec.wait_ms == 0) {
            fail_wait(op, t->busy_error(w->st, b));
            return;
        }
        if (dlock_cancel_fired(w->spec.cancel)) {
            fail_wait(op, end_error(w, DLOCK_ECANCELED));
            return;
        }
        dlock__stats_count(&op->c->stats, DLOCK__ST_WAITS, 1);
        int rc = dlock__waiter_join_async(op->c->pubsub, &w->w, w->spec.channel, w->spec.clen,
                                          w->spec.wake, w->spec.need, w->spec.settles,
                                          w->spec.cancel, notify, op);
        if (rc != DLOCK_OK) {
            fail_wait(op, rc);
            return;
        }
        w->joined = 1;
        op->state = S_JOINING;
        /* Wait for the subscription at most the command timeout, then poll. */
        int64_t until = now + op->c->cfg.command_timeout_ms;
        arm_timer(op, until < w->deadline ? until : w->deadline);
        check_waiter(op);
        return;
    }
    if (w->used_wake && b->pass > 0)
        dlock__waiter_pass_budget(op->c->pubsub, &w->w, b->pass);
    w->used_wake = 0;
    if (now >= w->deadline) {
        fail_wait(op, t->busy_error(w->st, b));
        return;
    }
    if (!!b->first != w->first) {
        w->first = !!b->first;
        dlock__waiter_set_claimant(op->c->pubsub, &w->w, w->first);
    }
    int64_t until = w->deadline;
    if (b->ttl >= 0 && now + b->ttl + 1 < until)
        until = now + b->ttl + 1;
    if (!w->w.subscribed && now + op->c->cfg.retry_delay_ms < until)
        until = now + op->c->cfg.retry_delay_ms;
    op->state = S_SLEEPING;
    arm_timer(op, until);
    check_waiter(op);   /* a wake-up that came during the round trip */
}

/* Held, but not kept (the watchdog could not take it): given back by a
 * request of the type's, best effort, and the call fails. */
static void give_back(aop *op, int rc)
{
    char msg[MSG_MAX];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    dlock__op o;
    unsigned flags = 0;
    if (AWT(op)->give_back_op && AWT(op)->give_back_op(WOP(op)->st, &o, &flags))
        send_req(op->c, &o, flags, 0, 0, NULL, ignore_reply, NULL);
    dlock__fail(rc, "%s", msg);
    finish(op, rc);
}

static void on_attempt(int status, dlock__res *res, void *ud)
{
    aop *op = ud;
    if (!answered(op, res))
        return;
    aop *w = op;
    const dlock__await_type *t = AWT(op);
    if (key_fallback(op, status, res)) {
        send_attempt(op, w->waited);
        return;
    }
    dlock__busy b = {.ttl = -1};
    int rc = t->attempt_end(w->st, status, res->r, w->sent, &b);
    dlock__stats *st = &op->c->stats;
    if (rc == DLOCK_OK) {
        if (t->keep && (rc = t->keep(w->st)) != DLOCK_OK) {
            give_back(op, rc);
            return;
        }
        /* The client's statistics, as the blocking calls keep them. */
        if (w->used_wake)
            dlock__stats_time(st, DLOCK__H_HANDOFF_GAP, dlock__now_us() - w->w.took_us);
        if (!w->spec.awaits) {
            dlock__stats_count(st, DLOCK__ST_ACQUISITIONS, 1);
            dlock__stats_time(st, DLOCK__H_ACQUIRE_WAIT, dlock__now_us() - w->start_us);
        }
        finish(op, DLOCK_OK);
        return;
    }
    if (rc == DLOCK__BUSY) {
        if (w->used_wake)
            dlock__stats_count(st, DLOCK__ST_WAKEUPS_TAKEN, 1);
        after_busy(op, &b);
        return;
    }
    fail_wait(op, rc);
}

static void send_attempt(aop *op, int64_t waited)
{
    aop *w = op;
    dlock__op o;
    unsigned flags = 0;
    w->waited = waited;
    AWT(op)->attempt_op(w->st, waited, &o, &flags);
    w->sent = dlock__now_ms();   /* before sending: the watchdog's origin */
    int with = 0;
    int rc = send_req(op->c, &o, flags, 0, op->without, &with, on_attempt, op);
    op->with = (unsigned char)with;
    if (with) {
        op->optkey = o.argv[o.optional];
        op->optlen = o.lens[o.optional];
    }
    if (rc != DLOCK_OK) {
        fail_wait(op, rc);
        return;
    }
    op->refs++;
    op->state = S_SENT;
}

/* ------------------------------------------------------------- calls */

static void send_call(aop *op);

static void on_call(int status, dlock__res *rr, void *ud)
{
    aop *op = ud;
    if (!answered(op, rr))
        return;
    if (key_fallback(op, status, rr)) {
        send_call(op);
        return;
    }
    dlock_async_result res = {.count = -1};
    op->ended = 1;
    int rc = CLT(op)->end(COP(op)->st, status, rr->r, &res);
    finish_res(op, rc, &res);
}

static void send_call(aop *op)
{
    dlock__op scratch;
    unsigned flags = 0;
    int64_t latch = 0;
    const dlock__op *o = CLT(op)->op(COP(op)->st, &scratch, &flags, &latch);
    int with = 0;
    int rc = send_req(op->c, o, flags, latch, op->without, &with, on_call, op);
    op->with = (unsigned char)with;
    if (with) {
        op->optkey = o->argv[o->optional];
        op->optlen = o->lens[o->optional];
    }
    if (rc != DLOCK_OK) {
        dlock_async_result res = {.count = -1};
        op->ended = 1;
        rc = CLT(op)->end(COP(op)->st, rc, NULL, &res);
        finish_res(op, rc, &res);
        return;
    }
    op->refs++;
    op->state = S_SENT;
}

/* ------------------------------------------------------------ the job */

static void on_kick(void *arg)
{
    aop *op = arg;
    switch (op->state) {
    case S_START:
        if (op->kind == K_WAIT)
            send_attempt(op, -1);
        else
            send_call(op);
        break;
    case S_JOINING:
    case S_SLEEPING:
        check_waiter(op);
        break;
    default:
        break;   /* SENT: a wake-up stays in the waiter until the answer */
    }
}
