/* The asynchronous calls (include/dlock/async.h; docs/internals/async.md).
 *
 * A call is an `aop`: made and checked on the caller's thread, registered
 * with the client's table of pending calls, then run on the io thread by its
 * own job (`kick`), which every event posts: its start, a wake-up, a change
 * of its channel, a cancellation, the close. Nothing blocks there:
 *
 *   START -> SENT (a round trip on the io thread's command connection)
 *   SENT  -> done | busy: JOINING (a callback waiter on the channel, until
 *            the subscription is confirmed) -> SENT (the retry) -> SLEEPING
 *            (until a wake-up, the busy answer's TTL or the deadline) -> SENT ...
 *
 * It is wait.c's loop, state by state: subscribe before the retry, sleep at
 * most the holder's TTL, poll at the retry delay while pub/sub is down, pass
 * on a wake-up used by a call that then failed, give up cleanly (the type's
 * give-up op, sent best effort). A success does the watchdog's bookkeeping
 * exactly as the blocking call (dlock__acq_hold, dlock__rel_end).
 *
 * Lifetime: an aop is freed when its references are gone: its own (until it
 * completes), one per round trip in flight, one while its timer handle is
 * open. Its job is taken out of the loop's queue when it completes, after
 * which nothing can post it (the waiter has left, the token is detached).
 * The client's close completes every call still in the table with
 * DLOCK_ECLOSED (the stop hook), before the command connection fails the
 * round trips in flight (their answers then find the call done). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/async.h"
#include "sync/lock.h"

enum { S_START, S_SENT, S_JOINING, S_SLEEPING, S_DONE };
enum { K_ACQUIRE, K_RELEASE, K_FORCE };

#define MSG_MAX 512

struct dlock_async_result {
    int status;
    const char *message;
    uint64_t token;
    int was_locked;
};

typedef struct aop {
    dlock__list reg;         /* in the client's table while pending */
    dlock_client *c;
    dlock_lock *l;
    dlock_async_fn fn;       /* NULL: a call of the library's own (a give-back) */
    void *ud;
    unsigned char kind, state;
    unsigned char seen_busy, joined, used_wake, first, timer_open, was_locked;
    int refs;
    dlock__job kick;
    uv_timer_t timer;
    int64_t start, deadline, until;
    int64_t waited;          /* of the attempt in flight */
} aop;

/* What each kind carries beyond the common part: only that is allocated, so
 * a pending waiter costs the acquire's part alone. */
typedef struct acq_op {
    aop h;
    dlock__acq a;
    dlock__waiter w;
} acq_op;

typedef struct rel_op {
    aop h;
    dlock__rel x;
} rel_op;

#define ACQ(op) ((acq_op *)(op))
#define REL(op) ((rel_op *)(op))

/* The client's table of pending calls. */
struct dlock__async {
    pthread_mutex_t mu;
    dlock__list ops;
    size_t n;
    int stopped;
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

int dlock_async_was_locked(const dlock_async_result *res) { return res ? res->was_locked : 0; }

/* ------------------------------------------------------------- lifetime */

static void unref(aop *op)
{
    if (--op->refs == 0)
        free(op);
}

static void on_timer_closed(uv_handle_t *h) { unref(h->data); }

static void on_timer(uv_timer_t *t);

static void arm_timer(aop *op, int64_t at)
{
    if (!op->timer_open) {
        uv_timer_init(dlock__loop_uv(op->c->loop), &op->timer);
        op->timer.data = op;
        op->timer_open = 1;
        op->refs++;
    }
    op->until = at;
    int64_t now = dlock__now_ms();
    uint64_t delay = at == INT64_MAX ? UINT64_MAX / 2 : (uint64_t)(at > now ? at - now : 0);
    uv_timer_start(&op->timer, on_timer, delay, 0);
}

static void stop_timer(aop *op)
{
    if (op->timer_open)
        uv_timer_stop(&op->timer);
}

/* Any thread, under the waiter table's or the token's mutex: just post. */
static void notify(void *arg)
{
    aop *op = arg;
    dlock__loop_post(op->c->loop, &op->kick);
}

static void ignore_reply(int status, redisReply *r, void *ud)
{
    (void)status;
    (void)ud;
    if (r)
        freeReplyObject(r);
}

static int refused_key(int rc)
{
    return rc == DLOCK_EAUTH && strstr(dlock_last_error(), "NOPERM") &&
           strstr(dlock_last_error(), "key");
}

/* Sends o on the io thread's command connection; cb(status, reply, ud). The
 * optional key follows the client's choice (dlock__op_call's rule). */
static int send_req(dlock_client *c, const dlock__op *o, unsigned flags, int64_t latch_ms,
                    dlock__acall_fn cb, void *ud)
{
    if (o->bad)
        return dlock__fail(DLOCK_EINVAL, "internal: a request was built wrong");
    dlock__req req = {.script = o->script, .nkeys = o->nkeys, .argc = o->argc, .argv = o->argv,
                      .lens = o->lens, .flags = flags, .latch_ms = latch_ms};
    const char *av[DLOCK__OP_MAX];
    size_t ln[DLOCK__OP_MAX];
    if (o->optional >= 0 && !atomic_load_explicit(&c->own_keys, memory_order_relaxed)) {
        int k = 0;
        for (int i = 0; i < o->argc; i++)
            if (i != o->optional) {
                av[k] = o->argv[i];
                ln[k++] = o->lens[i];
            }
        req.nkeys--;
        req.argc = k;
        req.argv = av;
        req.lens = ln;
    }
    return dlock__acall_send(c->acall, &req, cb, ud);
}

/* A refusal of dlock's own optional key: the client stops sending such keys
 * (logged once); the caller sends again. 1 when that is the case. */
static int drop_own_keys(dlock_client *c, int rc)
{
    if (!refused_key(rc) || !atomic_exchange(&c->own_keys, 0))
        return 0;
    dlock__log(&c->cfg, DLOCK_LOG_WARN,
               "Redis refuses dlock's own keys to this user (ACL): waiters no longer reserve "
               "turns (allow ~dlock_lock_next:* to keep them)");
    return 1;
}

/* ------------------------------------------------------------- the table */

int dlock__async_new(dlock__async **out)
{
    dlock__async *t = calloc(1, sizeof(*t));
    if (!t)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    dlock__list_init(&t->ops);
    *out = t;
    return DLOCK_OK;
}

void dlock__async_free(dlock__async *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

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
        dlock__list_remove(&op->reg);
        dlock__list_push_back(&all, &op->reg);   /* finish takes it out */
        dlock__fail(DLOCK_ECLOSED, "client closed with the call pending");
        if (op->kind == K_RELEASE && op->state != S_DONE) {
            /* Not answered: the watchdog counts the attempt (outcome unknown). */
            dlock__rel_end(&REL(op)->x, DLOCK_ECLOSED, NULL);
            dlock__fail(DLOCK_ECLOSED, "client closed with the call pending");
        }
        finish(op, DLOCK_ECLOSED);
    }
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

static aop *new_op(dlock_lock *l, int kind, dlock_async_fn fn, void *ud)
{
    size_t size = kind == K_ACQUIRE   ? sizeof(acq_op)
                  : kind == K_RELEASE ? sizeof(rel_op)
                                      : sizeof(aop);
    aop *op = calloc(1, size);
    if (!op)
        return NULL;
    dlock__list_init(&op->reg);
    op->c = l->c;
    op->l = l;
    op->kind = (unsigned char)kind;
    op->fn = fn;
    op->ud = ud;
    op->refs = 1;
    op->state = S_START;
    dlock__job_init(&op->kick, on_kick, op);
    return op;
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

/* Ends op with rc (the io thread's message, when not DLOCK_OK, says why):
 * leaves the channel, takes op out of the table and the job queue, then
 * runs the callback. Exactly once. */
static void finish(aop *op, int rc)
{
    if (op->state == S_DONE)
        return;
    char msg[MSG_MAX];
    snprintf(msg, sizeof(msg), "%s", rc == DLOCK_OK ? "" : dlock_last_error());
    dlock_client *c = op->c;
    op->state = S_DONE;
    uint64_t token = 0;
    if (op->kind == K_ACQUIRE) {
        if (op->joined)
            dlock__waiter_leave(c->pubsub, &ACQ(op)->w, rc != DLOCK_OK && op->used_wake);
        op->joined = 0;
        token = ACQ(op)->a.token;
        dlock__acq_done(&ACQ(op)->a);
    }
    pthread_mutex_lock(&c->async->mu);
    if (!dlock__list_empty(&op->reg)) {
        dlock__list_remove(&op->reg);
        c->async->n--;
    }
    pthread_mutex_unlock(&c->async->mu);
    dlock__loop_unpost(c->loop, &op->kick);
    if (op->timer_open) {
        uv_timer_stop(&op->timer);
        uv_close((uv_handle_t *)&op->timer, on_timer_closed);
    }
    if (op->fn) {
        dlock_async_result res = {rc, msg, rc == DLOCK_OK ? token : 0, op->was_locked};
        op->fn(&res, op->ud);
    }
    unref(op);
}

/* Run a call of the library's own (no callback) from the io thread. */
static void launch_here(aop *op)
{
    if (launch(op) != DLOCK_OK) {
        if (op->kind == K_RELEASE)
            dlock__rel_end(&REL(op)->x, DLOCK_ECLOSED, NULL);
        free(op);
    }
}

/* ------------------------------------------------------------- acquire */

static int end_error(aop *op, int rc)
{
    return dlock__fail(rc, "wait for '%s' %s", op->l->name,
                       rc == DLOCK_ECANCELED ? "cancelled" : "ended: client closing");
}

/* The type's clean-up after a busy answer, sent best effort; the caller's
 * message is kept. */
static void fail_acquire(aop *op, int rc)
{
    dlock__acq *a = &ACQ(op)->a;
    dlock__op o;
    unsigned flags = 0;
    if (op->seen_busy && a->l->type->give_up_op && a->l->type->give_up_op(a, rc, &o, &flags)) {
        char msg[MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        send_req(op->c, &o, flags | DLOCK__CALL_NO_RETRY, 0, ignore_reply, NULL);
        dlock__fail(rc, "%s", msg);
    }
    finish(op, rc);
}

/* Held, but the watchdog could not take it: give it back, as the blocking
 * call does, by a release of the library's own. */
static void give_back(aop *op)
{
    aop *r = new_op(op->l, K_RELEASE, NULL, NULL);
    if (!r)
        return;   /* the hold lapses at its TTL */
    if (dlock__rel_init(&REL(r)->x, op->l) != DLOCK_OK) {
        free(r);
        return;
    }
    launch_here(r);
}

static void check_waiter(aop *op)
{
    int ready = 0;
    int ev = dlock__waiter_poll(op->c->pubsub, &ACQ(op)->w, &ready);
    if (ev == DLOCK_ECLOSED || ev == DLOCK_ECANCELED) {
        fail_acquire(op, end_error(op, ev));
        return;
    }
    if (ev == DLOCK__WAKE_DONE) {
        finish(op, DLOCK_OK);
        return;
    }
    if (ev == DLOCK__WAKE_MESSAGE || (op->state == S_JOINING && ready)) {
        op->used_wake = ev == DLOCK__WAKE_MESSAGE;
        stop_timer(op);
        send_attempt(op, dlock__now_ms() - op->start);
        return;
    }
    if (op->state == S_SLEEPING && !ACQ(op)->w.subscribed) {
        /* The subscription dropped: poll at the retry delay meanwhile. */
        int64_t poll = dlock__now_ms() + op->c->cfg.retry_delay_ms;
        if (poll < op->until)
            arm_timer(op, poll);
    }
}

static void on_timer(uv_timer_t *t)
{
    aop *op = t->data;
    if (op->state != S_JOINING && op->state != S_SLEEPING)
        return;
    int ready = 0;
    int ev = dlock__waiter_poll(op->c->pubsub, &ACQ(op)->w, &ready);
    if (ev == DLOCK_ECLOSED || ev == DLOCK_ECANCELED) {
        fail_acquire(op, end_error(op, ev));
        return;
    }
    if (ev == DLOCK__WAKE_DONE) {
        finish(op, DLOCK_OK);
        return;
    }
    /* The TTL, the deadline, the poll, or the subscription's wait is over. */
    op->used_wake = ev == DLOCK__WAKE_MESSAGE;
    send_attempt(op, dlock__now_ms() - op->start);
}

/* A busy answer: join and retry, sleep, or give up. */
static void after_busy(aop *op, const dlock__busy *b)
{
    dlock__acq *a = &ACQ(op)->a;
    dlock_lock *l = op->l;
    int64_t now = dlock__now_ms();
    if (!op->seen_busy) {
        op->seen_busy = 1;
        if (a->wait == 0) {
            fail_acquire(op, l->type->busy_error(a, b));
            return;
        }
        if (dlock_cancel_fired(a->cancel)) {
            fail_acquire(op, end_error(op, DLOCK_ECANCELED));
            return;
        }
        size_t clen;
        const char *ch = l->type->wait_channel(l, &a->o, &clen);
        int rc = dlock__waiter_join_async(op->c->pubsub, &ACQ(op)->w, ch, clen, NULL, 1, 0,
                                          a->cancel, notify, op);
        if (rc != DLOCK_OK) {
            fail_acquire(op, rc);
            return;
        }
        op->joined = 1;
        op->state = S_JOINING;
        /* Wait for the subscription at most the command timeout, then poll. */
        int64_t until = now + op->c->cfg.command_timeout_ms;
        arm_timer(op, until < op->deadline ? until : op->deadline);
        check_waiter(op);
        return;
    }
    dlock__waiter *w = &ACQ(op)->w;
    if (op->used_wake && b->pass > 0)
        dlock__waiter_pass_budget(op->c->pubsub, w, b->pass);
    op->used_wake = 0;
    if (now >= op->deadline) {
        fail_acquire(op, l->type->busy_error(a, b));
        return;
    }
    if (!!b->first != op->first) {
        op->first = !!b->first;
        dlock__waiter_set_claimant(op->c->pubsub, w, op->first);
    }
    int64_t until = op->deadline;
    if (b->ttl >= 0 && now + b->ttl + 1 < until)
        until = now + b->ttl + 1;
    if (!w->subscribed && now + op->c->cfg.retry_delay_ms < until)
        until = now + op->c->cfg.retry_delay_ms;
    op->state = S_SLEEPING;
    arm_timer(op, until);
    check_waiter(op);   /* a wake-up that came during the round trip */
}

static void on_attempt(int status, redisReply *r, void *ud)
{
    aop *op = ud;
    op->refs--;   /* the round trip's; op itself still holds one unless done */
    if (op->state == S_DONE) {
        if (r)
            freeReplyObject(r);
        op->refs++;
        unref(op);
        return;
    }
    dlock__acq *a = &ACQ(op)->a;
    if (status != DLOCK_OK) {
        if (drop_own_keys(op->c, status)) {
            send_attempt(op, op->waited);
            return;
        }
        fail_acquire(op, status == DLOCK_EWRONGTYPE ? dlock__lock_wrong_type(op->l) : status);
        return;
    }
    dlock__busy b = {.ttl = -1};
    int rc = op->l->type->attempt_reply(a, r, &b);
    if (rc == DLOCK_OK) {
        rc = dlock__acq_hold(a);
        if (rc != DLOCK_OK) {
            char msg[MSG_MAX];
            snprintf(msg, sizeof(msg), "%s", dlock_last_error());
            give_back(op);
            dlock__fail(rc, "%s", msg);
        }
        finish(op, rc);
        return;
    }
    if (rc == DLOCK__BUSY) {
        after_busy(op, &b);
        return;
    }
    fail_acquire(op, rc);
}

static void send_attempt(aop *op, int64_t waited)
{
    dlock__acq *a = &ACQ(op)->a;
    dlock__op o;
    op->waited = waited;
    op->l->type->attempt_op(a, waited, &o);
    a->sent = dlock__now_ms();   /* before sending: the watchdog's origin */
    int rc = send_req(op->c, &o, 0, 0, on_attempt, op);
    if (rc != DLOCK_OK) {
        fail_acquire(op, rc);
        return;
    }
    op->refs++;
    op->state = S_SENT;
}

/* ------------------------------------------------------- release, force */

static void on_release(int status, redisReply *r, void *ud)
{
    aop *op = ud;
    op->refs--;
    if (op->state == S_DONE) {
        if (r)
            freeReplyObject(r);
        op->refs++;
        unref(op);
        return;
    }
    dlock__rel *x = &REL(op)->x;
    if (status != DLOCK_OK && drop_own_keys(op->c, status)) {
        int rc = send_req(op->c, &x->op, x->flags, op->c->latch_px, on_release, op);
        if (rc == DLOCK_OK) {
            op->refs++;
            return;
        }
        status = rc;
    }
    finish(op, dlock__rel_end(x, status, r));
}

static void on_force(int status, redisReply *r, void *ud)
{
    aop *op = ud;
    op->refs--;
    if (op->state == S_DONE) {
        if (r)
            freeReplyObject(r);
        op->refs++;
        unref(op);
        return;
    }
    int was = 0;
    int rc = dlock__lock_force_end(op->l, status, r, &was);
    op->was_locked = (unsigned char)was;
    finish(op, rc);
}

/* ------------------------------------------------------------ the job */

static void start(aop *op)
{
    dlock_client *c = op->c;
    int rc;
    switch (op->kind) {
    case K_ACQUIRE:
        send_attempt(op, -1);
        return;
    case K_RELEASE: {
        dlock__rel *x = &REL(op)->x;
        rc = send_req(c, &x->op, x->flags, c->latch_px, on_release, op);
        if (rc != DLOCK_OK) {
            finish(op, dlock__rel_end(x, rc, NULL));
            return;
        }
        break;
    }
    default: {
        dlock__op o;
        op->l->type->force_op(op->l, &o);
        /* Not resent after a lost reply (see dlock_lock_force_release). */
        rc = send_req(c, &o, 0, 0, on_force, op);
        if (rc != DLOCK_OK) {
            finish(op, rc);
            return;
        }
        break;
    }
    }
    op->refs++;
    op->state = S_SENT;
}

static void on_kick(void *arg)
{
    aop *op = arg;
    switch (op->state) {
    case S_START:
        start(op);
        break;
    case S_JOINING:
    case S_SLEEPING:
        check_waiter(op);
        break;
    default:
        break;   /* SENT: a wake-up stays in the waiter until the answer */
    }
}

/* ------------------------------------------------------------- public */

static int check_handle(dlock_lock *l, dlock_async_fn fn)
{
    if (!l)
        return dlock__fail(DLOCK_EINVAL, "lock is NULL");
    if (!fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (!l->owner)
        return dlock__fail(DLOCK_EINVAL,
                           "asynchronous calls need a handle with an explicit owner id "
                           "(dlock_lock_get_as and the other *_get_as): '%s' acts for the "
                           "calling thread, and callbacks do not run on it",
                           l->name);
    return DLOCK_OK;
}

static int acquire_async(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, dlock_cancel *cancel,
                         int fenced, dlock_async_fn fn, void *ud)
{
    dlock__clear_error();
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    aop *op = new_op(l, K_ACQUIRE, fn, ud);
    if (!op)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    rc = dlock__acq_init(&ACQ(op)->a, l, wait_ms, lease_ms, cancel, fenced);
    if (rc != DLOCK_OK) {
        dlock__acq_done(&ACQ(op)->a);
        free(op);
        return rc;
    }
    op->start = dlock__now_ms();
    op->deadline = wait_ms == DLOCK_WAIT_FOREVER || wait_ms > INT64_MAX - op->start
                       ? INT64_MAX
                       : op->start + wait_ms;
    rc = launch(op);
    if (rc != DLOCK_OK) {
        dlock__acq_done(&ACQ(op)->a);
        free(op);
    }
    return rc;
}

int dlock_lock_acquire_async(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                             dlock_cancel *cancel, dlock_async_fn fn, void *ud)
{
    return acquire_async(l, wait_ms, lease_ms, cancel, 0, fn, ud);
}

int dlock_lock_acquire_fenced_async(dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                                    dlock_cancel *cancel, dlock_async_fn fn, void *ud)
{
    return acquire_async(l, wait_ms, lease_ms, cancel, 1, fn, ud);
}

int dlock_lock_release_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    dlock__clear_error();
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    aop *op = new_op(l, K_RELEASE, fn, ud);
    if (!op)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    rc = dlock__rel_init(&REL(op)->x, l);
    if (rc != DLOCK_OK) {
        free(op);
        return rc;
    }
    rc = launch(op);
    if (rc != DLOCK_OK) {
        char msg[MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", dlock_last_error());
        dlock__rel_end(&REL(op)->x, rc, NULL);
        free(op);
        dlock__fail(rc, "%s", msg);
    }
    return rc;
}

int dlock_lock_force_release_async(dlock_lock *l, dlock_async_fn fn, void *ud)
{
    dlock__clear_error();
    int rc = check_handle(l, fn);
    if (rc != DLOCK_OK)
        return rc;
    aop *op = new_op(l, K_FORCE, fn, ud);
    if (!op)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    rc = launch(op);
    if (rc != DLOCK_OK)
        free(op);
    return rc;
}
