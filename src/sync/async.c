/* The asynchronous driver (include/dlock/async.h). A call is an `aop`: made
 * and checked on the caller's thread (the operation's state copied in and
 * set up there), registered with the client's table of pending calls, then
 * run on the io thread by its own job (`kick`), which every event posts; it
 * steps through the wait loop (wait.c) as the blocking driver does, state by
 * state. docs/internals/async.md describes the states (START, SENT, JOINING,
 * SLEEPING, GIVING_BACK, SETTLING, COMPOSING, DECIDED), the timer heap, a
 * call's references and the close. A composite's rounds: async_composite.c. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sync/async_int.h"

static void on_kick(void *arg);
static void send_attempt(aop *op, int again);
static void on_gave_back(int status, dlock__res *res, void *ud);
static void finish(aop *op, int rc);
static void settled(aop *op);
static void settled_fn(void *arg);

/* ------------------------------------------------------------- lifetime */


/* A composite's round of parts is out (its end may come on any thread). */
static int parts_out(aop *op)
{
    pthread_mutex_lock(&dlock__aop_client(op)->async->mu);
    int out = op->composing;
    pthread_mutex_unlock(&dlock__aop_client(op)->async->mu);
    return out;
}

/* A round of op's parts goes out: COMPOSING (a completed call stays done)
 * until the round ends, which holds a reference. Under the table's mutex. */
void dlock__aop_mark_out(aop *op)
{
    op->composing = 1;
    atomic_fetch_add(&op->refs, 1);
    if (op->state != S_DONE)
        op->state = S_COMPOSING;
}

/* Any thread: the last reference frees it. */
void dlock__aop_unref(aop *op)
{
    if (atomic_fetch_sub(&op->refs, 1) == 1) {
        if (op->parts)
            dlock__parts_destroy(op->parts);
        free(op->parts);
        free(op->back);
        free(op);
    }
}

/* An entry of the io thread for op (a job, an answer, its timer, the
 * close): op's failures are written into the entry's buffer buf (first: a
 * failed round trip's message, or NULL) until leave; op lives until then. */
static dlock__errto enter(aop *op, char *buf, const char *first)
{
    atomic_fetch_add(&op->refs, 1);
    snprintf(buf, DLOCK__MSG_MAX, "%s", first ? first : "");
    op->msg = buf;
    return dlock__err_into(buf, DLOCK__MSG_MAX);
}

static void leave(aop *op, dlock__errto prev)
{
    dlock__err_reset(prev);
    op->msg = NULL;
    dlock__aop_unref(op);
}

/* ---------------------------------------------------------------- timers */

static void on_timer(uv_timer_t *timer);

/* The libuv timer follows the heap's earliest deadline. */
static void rearm(dlock__async *t)
{
    dlock__tentry *e = dlock__theap_top(&t->heap);
    if (!e) {
        uv_timer_stop(&t->timer);
        return;
    }
    int64_t now = dlock__now_ms();
    uint64_t delay = e->at == INT64_MAX ? UINT64_MAX / 2 : (uint64_t)(e->at > now ? e->at - now : 0);
    uv_timer_start(&t->timer, on_timer, delay, 0);
}

static void stop_timer(aop *op)
{
    dlock__async *t = dlock__aop_client(op)->async;
    int top = op->te.idx == 0;
    dlock__theap_remove(&t->heap, &op->te);
    if (top)
        rearm(t);
}

/* Wakes op at `at` (ms, monotonic) unless something else comes first. */
static void arm_timer(aop *op, int64_t at)
{
    dlock__async *t = dlock__aop_client(op)->async;
    stop_timer(op);
    op->w.until = at;
    if (dlock__theap_add(&t->heap, &op->te, at) != 0) {
        /* No room: poll instead of sleeping (the waiter still wakes it). */
        dlock__loop_post(dlock__aop_client(op)->loop, &op->kick);
        return;
    }
    if (op->te.idx == 0)
        rearm(t);
}

/* Any thread, under the waiter table's or the token's mutex: just post. */
static void notify(void *arg)
{
    aop *op = arg;
    dlock__loop_post(dlock__aop_client(op)->loop, &op->kick);
}

/* ---------------------------------------------------------- round trips */

static void ignore_reply(int status, dlock__res *res, void *ud)
{
    (void)status;
    (void)ud;
    if (res->r)
        freeReplyObject(res->r);
}

/* Sends o on the io thread's command connection; cb(status, res, ud). The
 * optional keys follow the client's level and the ACL fallback
 * (dlock__op_req); op (may be NULL) learns which went along. */
static int send_req(dlock_client *c, const dlock__op *o, aop *op, dlock__acall_fn cb, void *ud)
{
    if (o->bad)
        return dlock__fail(DLOCK_EINVAL, "internal: a request was built wrong");
    const char *av[DLOCK__OP_MAX];
    size_t ln[DLOCK__OP_MAX];
    dlock__req req;
    unsigned with = dlock__op_req(c, o, op ? op->cap : DLOCK__OWN_ALL, NULL, &req, av, ln);
    /* Before the send: a request refused as it is written (a quarantine)
     * is answered inside dlock__acall_send. */
    if (op) {
        atomic_fetch_add(&op->refs, 1);   /* until the answer */
        op->with = (unsigned char)with;
    }
    int rc = dlock__acall_send(c->acall, &req, cb, ud);
    if (rc != DLOCK_OK && op)
        atomic_fetch_sub(&op->refs, 1);   /* never answered; op holds its own */
    return rc;
}

/* Sends o once, best effort, its answer ignored (its failure aside). */
static void best_effort(dlock_client *c, dlock__op *o)
{
    dlock__aside aside;
    dlock__aside_begin(&aside);
    o->flags |= DLOCK__CALL_NO_RETRY;
    send_req(c, o, NULL, ignore_reply, NULL);
    dlock__aside_end(&aside, DLOCK_OK);
}

/* A round trip's answer for op: 1 when op is still running (the caller goes
 * on), 0 when it completed meanwhile (the answer is dropped). */
static int answered(aop *op, dlock__res *res)
{
    if (op->state != S_DONE) {
        atomic_fetch_sub(&op->refs, 1);   /* op keeps its own reference while running */
        return 1;
    }
    if (res->r)
        freeReplyObject(res->r);
    dlock__aop_unref(op);
    return 0;
}

/* The ACL fallback's answer to a send: 1 when op must go again without a
 * class of its optional keys; else the client learns whether to keep
 * sending them. */
static int key_fallback(aop *op, int status, const dlock__res *res)
{
    if (status != DLOCK_OK && dlock__op_key_refused(op->with, res)) {
        op->cap &= (unsigned char)~dlock__op_key_shed(op->with);
        return 1;
    }
    dlock__op_key_dropped(dlock__aop_client(op), DLOCK__OWN_ALL & ~(unsigned)op->cap, res);
    op->cap = DLOCK__OWN_ALL;
    return 0;
}

/* ------------------------------------------------------------- the table */

int dlock__async_new(dlock__async **out, dlock__loop *lp)
{
    dlock__async *t = calloc(1, sizeof(*t));
    if (!t)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->idle, NULL);
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
    dlock__theap_free(&t->heap);
    pthread_cond_destroy(&t->idle);
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
    while (t->claims > 0)   /* a call decided elsewhere ends there (claim) */
        pthread_cond_wait(&t->idle, &t->mu);
    while (!dlock__list_empty(&t->ops)) {
        dlock__list *it = t->ops.next;
        dlock__list_remove(it);
        dlock__list_push_back(&all, it);
    }
    pthread_mutex_unlock(&t->mu);
    while (!dlock__list_empty(&all)) {
        aop *op = DLOCK__CONTAINER_OF(all.next, aop, reg);
        char msg[DLOCK__MSG_MAX];
        dlock__errto prev = enter(op, msg, NULL);
        dlock__fail(DLOCK_ECLOSED, "client closed with the call pending");
        finish(op, DLOCK_ECLOSED);   /* takes it out of `all` */
        leave(op, prev);
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

/* How a call registered goes on (launch). */
enum { POST, COMPOSED, HERE };

/* Registers op and posts its start (POST), or marks its first round out
 * (COMPOSED), or neither (HERE: the caller, on op's io thread, starts it).
 * Under the table's mutex, so that a stop hook running meanwhile either sees
 * it or refuses it. */
static int launch(aop *op, int how)
{
    dlock__async *t = dlock__aop_client(op)->async;
    pthread_mutex_lock(&t->mu);
    if (t->stopped) {
        pthread_mutex_unlock(&t->mu);
        return dlock__fail(DLOCK_ECLOSED, "client is closing");
    }
    dlock__list_push_back(&t->ops, &op->reg);
    t->n++;
    if (how == COMPOSED)
        dlock__aop_mark_out(op);
    else if (how == POST)
        dlock__loop_post(dlock__aop_client(op)->loop, &op->kick);
    pthread_mutex_unlock(&t->mu);
    return DLOCK_OK;
}

int dlock__async_run(const dlock__handle *h, const dlock__op_type *t, const void *st,
                     size_t size, const dlock__wait_spec *spec, const dlock__via *via, int here)
{
    if (!via->fn)
        return dlock__fail(DLOCK_EINVAL, "callback is NULL");
    /* The wait was checked with the caller's other options (dlock__check_opts). */
    int rc;
    aop *op = calloc(1, sizeof(aop) + size);
    if (op && t->compose && (!(op->parts = malloc(sizeof(composite))) ||
                             dlock__parts_init(op->parts) != DLOCK_OK)) {
        free(op->parts);
        free(op);
        op = NULL;
    }
    if (!op)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__list_init(&op->reg);
    op->fn = via->fn;
    op->ud = via->ud;
    op->busy = via->busy;
    atomic_init(&op->refs, 1);
    op->te.idx = -1;
    op->cap = DLOCK__OWN_ALL;
    op->state = S_START;
    dlock__job_init(&op->kick, on_kick, op);
    op->settle.fn = settled_fn;
    op->settle.arg = op;
    memcpy(op->st, st, size);
    if (t->setup && (rc = t->setup(op->st)) != DLOCK_OK) {
        dlock__aop_unref(op);
        return rc;
    }
    dlock__wait_init(&op->w, h, t, op->st, spec);
    int composed = t->compose && dlock__aop_first_round(op);
    here = here && !composed && dlock__loop_running_here(h->c->loop);
    if ((rc = launch(op, composed ? COMPOSED : here ? HERE : POST)) != DLOCK_OK) {
        dlock__aside aside;
        dlock__aside_begin(&aside);
        if (composed)
            dlock__parts_refuse(op->parts, rc, "client is closing");   /* none was sent */
        if (t->done)
            t->done(op->st, 0);
        dlock__aop_unref(op);
        return dlock__aside_end(&aside, rc);
    }
    if (composed)   /* op lives until the round ends (launch's reference) */
        dlock__parts_run(op->parts, dlock__aop_parts_done, op);
    else if (here)
        on_kick(op);   /* as its job would, now */
    return DLOCK_OK;
}

/* Ends op with rc and its message msg (when not DLOCK_OK): leaves the
 * channel (and sends the operation's give-up), takes op out of the table
 * and the job queue, then runs the callback. Exactly once. */
void dlock__aop_finish_with(aop *op, int rc, const char *msg)
{
    if (op->state == S_DONE)
        return;
    dlock_client *c = dlock__aop_client(op);
    op->state = S_DONE;
    dlock__watchdog_unsettle(c->wd, &op->settle);   /* ended first (closed) */
    int out = parts_out(op);   /* a composite's round is out: the close */
    dlock__op give_up;
    const dlock__op_type *t = op->w.t;
    /* What follows fails aside: msg stays the call's. */
    dlock__aside aside;
    dlock__aside_begin(&aside);
    if (dlock__wait_end(&op->w, rc, &give_up)) {
        best_effort(c, &give_up);
    } else if (t->compose && rc != DLOCK_OK && op->w.seen_busy && !out) {
        /* A composite's give-up: its parts, best effort; done once they end. */
        op->parts->give_up = rc;
        op->parts->round = 0;
        dlock__busy b = {.ttl = -1};
        if (t->compose(op->st, 0, op->parts, &b) == DLOCK__MORE)
            dlock__aop_launch_parts(op);
    }
    dlock__result res = {.count = -1, .busied = op->busied};
    char pid[DLOCK_PERMIT_ID_BUFSIZE] = "";
    if (rc == DLOCK_OK && t->result) {
        t->result(op->st, &res);
        if (res.permit_id) {
            snprintf(pid, sizeof(pid), "%s", res.permit_id);
            res.permit_id = pid;
        }
    }
    if (out)
        op->read = 0;   /* that round's outcome is never read */
    pthread_mutex_lock(&c->async->mu);
    op->finished = 1;
    int later = op->composing;   /* done comes when its parts have ended */
    if (!dlock__list_empty(&op->reg)) {
        dlock__list_remove(&op->reg);
        c->async->n--;
    }
    pthread_mutex_unlock(&c->async->mu);
    if (!later && t->done)
        t->done(op->st, op->read);
    dlock__loop_unpost(c->loop, &op->kick);
    stop_timer(op);
    res.status = rc;
    res.message = rc == DLOCK_OK ? "" : msg && msg[0] ? msg : dlock_strerror(rc);
    /* The caller's code: its failures go where the C API's do. */
    dlock__err_reset((dlock__errto){NULL, 0});
    op->fn(&res, op->ud);
    dlock__aside_end(&aside, rc);
    free(res.owned);
    dlock__aop_unref(op);
}

/* Ends op with rc, whose message its entry's failure wrote (op->msg). */
static void finish(aop *op, int rc) { dlock__aop_finish_with(op, rc, op->msg); }

/* ------------------------------------------------------------ the loop */

static void waiter_event(aop *op, int timeout);

/* Does what the wait loop said: next, with the call's status rc. */
void dlock__aop_step(aop *op, int next, int rc)
{
    dlock__wait *w = &op->w;
    switch (next) {
    case DLOCK__W_ATTEMPT:
        send_attempt(op, 0);
        return;
    case DLOCK__W_JOIN: {
        int64_t now = dlock__now_ms();
        rc = dlock__wait_join_async(w, notify, op);
        if (dlock__wait_joined(w, &rc) == DLOCK__W_DONE) {
            finish(op, rc);
            return;
        }
        /* The subscription is awaited at most the command timeout: then
         * attempts poll. */
        op->state = S_JOINING;
        int64_t until = now + dlock__aop_client(op)->cfg.command_timeout_ms;
        arm_timer(op, until < w->deadline ? until : w->deadline);
        break;
    }
    case DLOCK__W_SLEEP:
        op->state = S_SLEEPING;
        arm_timer(op, w->until);
        break;
    default:
        finish(op, rc);
        return;
    }
    /* A wake-up may have come during the round trip. */
    waiter_event(op, 0);
}

/* A waiting call's waiter has news, or its timer is due (timeout: 1). */
static void waiter_event(aop *op, int timeout)
{
    dlock__wait *w = &op->w;
    int ready = 0;
    int ev = dlock__waiter_poll(w->at->pubsub, &w->w, &ready);
    if (!ev && (timeout || (op->state == S_JOINING && ready)))
        ev = DLOCK__WAKE_TIMEOUT;   /* its time, or subscribed: the attempt */
    if (ev) {
        stop_timer(op);
        int rc = DLOCK_OK;
        int next = dlock__wait_woke(w, ev, &rc);
        dlock__aop_step(op, next, rc);
        return;
    }
    if (op->state == S_SLEEPING && !w->w.subscribed) {
        /* The subscription dropped: poll at the retry delay meanwhile. */
        int64_t poll = dlock__now_ms() + dlock__aop_client(op)->cfg.retry_delay_ms;
        if (poll < w->until)
            arm_timer(op, poll);
    }
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
        dlock__tentry *e;
        while (n < DLOCK__ARRAY_LEN(due) && (e = dlock__theap_top(&t->heap)) && e->at <= now) {
            aop *op = DLOCK__CONTAINER_OF(e, aop, te);
            dlock__theap_remove(&t->heap, e);
            atomic_fetch_add(&op->refs, 1);   /* kept while in the batch */
            due[n++] = op;
        }
        for (size_t i = 0; i < n; i++) {
            char msg[DLOCK__MSG_MAX];
            dlock__errto prev = enter(due[i], msg, NULL);
            if (due[i]->state == S_JOINING || due[i]->state == S_SLEEPING)
                waiter_event(due[i], 1);
            else if (due[i]->state == S_SETTLING)
                settled(due[i]);   /* its time is up */
            leave(due[i], prev);
            dlock__aop_unref(due[i]);
        }
        if (n < DLOCK__ARRAY_LEN(due))
            break;
    }
    rearm(t);
}

/* The watchdog (io thread, under its mutex): every renewal op awaited is
 * answered. */
static void settled_fn(void *arg)
{
    aop *op = arg;
    dlock__loop_post(dlock__aop_client(op)->loop, &op->kick);
}

/* SETTLING ends: its renewals answered, or its time is up (then it awaits
 * them no longer). */
static void settled(aop *op)
{
    stop_timer(op);
    dlock__watchdog_unsettle(dlock__aop_client(op)->wd, &op->settle);
    int rc = DLOCK_OK;
    dlock__busy b = {.ttl = -1};
    int next = dlock__wait_attempted(&op->w, &rc, &b);   /* before rc is read */
    dlock__aop_step(op, next, rc);
}

/* An attempt's outcome rc: a busy answer is noted (dlock__via.busy). */
int dlock__aop_answered_busy(aop *op, int rc, const dlock__busy *b)
{
    op->busied = rc == DLOCK__BUSY;
    if (op->busied && op->busy)
        *op->busy = *b;
    return rc;
}

/* What an attempt's answer comes to (dlock__answer), then the next step. */
static void attempt_answered(aop *op, int status, dlock__res *res)
{
    const dlock__op_type *t = op->w.t;
    dlock__busy b = {.ttl = -1};
    if (dlock__quarantine_met(op->w.h, t, status, res, &b)) {
        int rc = dlock__aop_answered_busy(op, DLOCK__BUSY, &b);
        int next = dlock__wait_attempted(&op->w, &rc, &b);   /* before rc is read */
        dlock__aop_step(op, next, rc);
        return;
    }
    op->read = 1;
    int back_;
    dlock__watchdog *wd = dlock__aop_client(op)->wd;
    if (t->releases)   /* the holds it takes out whose renewal is in flight */
        dlock__watchdog_collect(wd, &op->settle);
    int rc = dlock__answer(op->w.h, t, op->st, status, res, op->sent, &b, &back_);
    rc = dlock__aop_answered_busy(op, rc, &b);
    if (t->releases && dlock__watchdog_collect_end(wd, &op->settle) > 0) {
        if (!back_ && rc == DLOCK_OK) {
            op->state = S_SETTLING;
            op->settle_until =
                dlock__now_ms() + dlock__aop_client(op)->cfg.command_timeout_ms + 1000;
            arm_timer(op, op->settle_until);
            return;
        }
        dlock__watchdog_unsettle(wd, &op->settle);   /* a failed release does not wait */
    }
    if (!back_) {
        int next = dlock__wait_attempted(&op->w, &rc, &b);
        dlock__aop_step(op, next, rc);
        return;
    }
    /* Held, but not to stand: given back first, then the call fails (rc's
     * message kept with it until then). */
    size_t n = strlen(op->msg);
    dlock__op o;
    if ((op->back = malloc(sizeof(*op->back) + n + 1))) {
        op->back->rc = rc;
        op->back->acks = res->acks;
        memcpy(op->back->msg, op->msg, n + 1);
        dlock__aside aside;
        dlock__aside_begin(&aside);
        int sent = 0;
        if (t->give_back && t->give_back(op->st, &o)) {
            op->state = S_GIVING_BACK;   /* first: its answer may come inside the send */
            sent = send_req(dlock__aop_client(op), &o, op, on_gave_back, op) == DLOCK_OK;
        }
        dlock__aside_end(&aside, DLOCK_OK);
        if (sent)
            return;
    }
    finish(op, dlock__given_back(op->w.h, rc, res->acks, DLOCK_ENOTOWNER));
}

static void on_gave_back(int status, dlock__res *res, void *ud)
{
    aop *op = ud;
    if (!answered(op, res))
        return;
    char msg[DLOCK__MSG_MAX];
    dlock__errto prev = enter(op, msg, NULL);
    const dlock__op_type *t = op->w.t;
    dlock__aside aside;
    dlock__aside_begin(&aside);
    int rrc = status;
    if (t->gave_back)
        rrc = t->gave_back(op->st, status, res);
    else if (res->r)
        freeReplyObject(res->r);
    dlock__aside_end(&aside, DLOCK_OK);
    back *k = op->back;
    if (k->rc != DLOCK_EREPLICAS)
        dlock__aop_finish_with(op, k->rc, k->msg);
    else
        finish(op, dlock__given_back(op->w.h, k->rc, k->acks, rrc));
    leave(op, prev);
}

static void on_attempt(int status, dlock__res *res, void *ud)
{
    aop *op = ud;
    if (!answered(op, res))
        return;
    char msg[DLOCK__MSG_MAX];
    dlock__errto prev = enter(op, msg, status != DLOCK_OK ? res->msg : NULL);
    key_fallback(op, status, res) ? send_attempt(op, 1) : attempt_answered(op, status, res);
    leave(op, prev);
}

/* again: the same attempt, sent again (with fewer of dlock's own keys). */
static void send_attempt(aop *op, int again)
{
    const dlock__op_type *t = op->w.t;
    dlock__busy qb = {.ttl = -1};
    if (dlock__quarantined(op->w.h, t, &qb)) {
        int rc = dlock__aop_answered_busy(op, DLOCK__BUSY, &qb);
        (void)dlock__wait_waited(&op->w, again);
        int next = dlock__wait_attempted(&op->w, &rc, &qb);   /* before rc is read */
        dlock__aop_step(op, next, rc);
        return;
    }
    if (t->compose) {
        dlock__aop_compose_step(op, 1, dlock__wait_waited(&op->w, again));
        return;
    }
    dlock__op o;
    op->sent = dlock__request(op->w.h, t, op->st, op->w.waits, dlock__wait_waited(&op->w, again),
                              &o);
    op->state = S_SENT;
    int rc = send_req(dlock__aop_client(op), &o, op, on_attempt, op);
    if (rc != DLOCK_OK) {
        dlock__res res;
        dlock__res_init(&res);
        attempt_answered(op, rc, &res);   /* as a blocking call that could not send it */
    }
}

/* ------------------------------------------------------------ the job */

static void on_kick(void *arg)
{
    aop *op = arg;
    char msg[DLOCK__MSG_MAX];
    dlock__errto prev = enter(op, msg, NULL);
    switch (op->state) {
    case S_START:
        send_attempt(op, 0);
        break;
    case S_JOINING:
    case S_SLEEPING:
        waiter_event(op, 0);
        break;
    case S_COMPOSING:
        if (!parts_out(op))
            dlock__aop_compose_step(op, 0, 0);   /* else a wake-up stays in the waiter until then */
        break;
    case S_DECIDED:
        dlock__aop_decided(op);
        break;
    case S_SETTLING:
        if (op->settle.pending == 0 || dlock__now_ms() >= op->settle_until)
            settled(op);
        else if (op->te.idx < 0)
            arm_timer(op, op->settle_until);   /* its timer could not be armed: polls */
        break;
    default:
        break;   /* SENT: a wake-up stays in the waiter until the answer */
    }
    leave(op, prev);
}
