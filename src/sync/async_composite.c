/* A composite call's rounds, for the asynchronous driver (async.c): its
 * first round set on the calling thread, each round's end on whatever
 * thread ended it, and there, on another client's io thread, the call
 * claimed and decided (docs/internals/async.md, "Composite operations"). */
#include "sync/async_int.h"

/* A composite's first round, set on the calling thread (not an io thread):
 * its parts then go from there to their clients' io threads, with no hop
 * to op's own first. 0 when it cannot (a quarantine; a round 0 with no
 * parts, which the io thread asks for again: sync.h, compose). */
int dlock__aop_first_round(aop *op)
{
    const dlock__op_type *t = op->w.t;
    dlock__busy b = {.ttl = -1};
    if (dlock__loop_on_some_io_thread() || dlock__quarantined(op->w.h, t, &b))
        return 0;
    op->parts->round = 0;
    dlock__aside aside;
    dlock__aside_begin(&aside);
    int more = t->compose(op->st, -1, op->parts, &b) == DLOCK__MORE;   /* -1: the first */
    dlock__aside_end(&aside, DLOCK_OK);
    if (more)
        (void)dlock__wait_waited(&op->w, 0);   /* the attempt is made: counted */
    return more;
}

/* A composite attempt's outcome rc (not DLOCK__MORE), b its busy answer:
 * the next step. */
static void composed(aop *op, int rc, dlock__busy *b)
{
    op->read = 1;
    rc = dlock__aop_answered_busy(op, rc, b);
    int next = dlock__wait_attempted(&op->w, &rc, b);   /* before rc is read */
    dlock__aop_step(op, next, rc);
}

/* A composite's attempt (first: its start), or its next step once a round
 * of its parts has ended: the next round, or the attempt's outcome. */
void dlock__aop_compose_step(aop *op, int first, int64_t waited)
{
    dlock__parts *k = op->parts;
    k->round = first ? 0 : k->round + 1;
    dlock__busy b = {.ttl = -1};
    int rc = op->w.t->compose(op->st, waited, k, &b);
    if (rc == DLOCK__MORE)
        dlock__aop_launch_parts(op);
    else
        composed(op, rc, &b);
}

/* A round's end claimed the call on another client's io thread: it is
 * decided here, as its own io thread would (on_kick, compose_step), with no
 * wake-up of that thread: the next round goes out from here, or the call
 * ends here (its callback runs here), or, when it must wait (a busy answer),
 * its io thread goes on from the outcome (DECIDED). The round's reference
 * keeps op alive, and is carried on or dropped here. Nothing else runs the
 * call meanwhile: it is COMPOSING with no waiter joined (no wake-up, no
 * cancel reaches it), no timer, and the stop hook waits for the claim to
 * end. Not an entry (enter): the io thread that sent the round may still be
 * leaving its own, so op->msg is not this thread's; failures go to msg. */
static void decide_here(aop *op)
{
    dlock__async *t = dlock__aop_client(op)->async;
    composite *cm = (composite *)op->parts;
    cm->k.round++;
    char msg[DLOCK__MSG_MAX] = "";
    dlock__errto prev = dlock__err_into(msg, sizeof(msg));
    cm->b = (dlock__busy){.ttl = -1};
    cm->rc = op->w.t->compose(op->st, 0, &cm->k, &cm->b);
    int more = cm->rc == DLOCK__MORE;
    int wait = cm->rc == DLOCK__BUSY || (cm->rc == DLOCK_OK && op->w.t->again);
    if (!more && !wait) {
        pthread_mutex_lock(&t->mu);
        op->composing = 0;   /* the round is over: finish reads it */
        pthread_mutex_unlock(&t->mu);
        op->read = 1;
        int rc = dlock__aop_answered_busy(op, cm->rc, &cm->b);
        /* Neither busy nor to go again: the wait says done (its counts kept). */
        (void)dlock__wait_attempted(&op->w, &rc, &cm->b);
        dlock__aop_finish_with(op, rc, msg);
    }
    dlock__err_reset(prev);
    pthread_mutex_lock(&t->mu);
    if (wait) {
        op->composing = 0;
        op->state = S_DECIDED;
        dlock__loop_post(dlock__aop_client(op)->loop, &op->kick);
    }
    t->claims--;
    pthread_cond_broadcast(&t->idle);
    pthread_mutex_unlock(&t->mu);
    if (more)   /* still COMPOSING, with this round's reference */
        dlock__parts_run(op->parts, dlock__aop_parts_done, op);
    else
        dlock__aop_unref(op);
}

/* Any thread (the last part's): the round has ended. Once the call has
 * completed (closed meanwhile, or this was its give-up), its done runs here.
 * Else its own io thread is told; or, on another client's io thread, the
 * call is claimed and decided right here (decide_here): not a give-up's
 * round, nor a call whose waiter is joined, nor once the client stops. */
void dlock__aop_parts_done(void *arg)
{
    aop *op = arg;
    dlock_client *c = dlock__aop_client(op);
    dlock__async *t = c->async;
    int elsewhere = !op->parts->give_up && dlock__loop_on_some_io_thread() &&
                    !dlock__loop_on_io_thread(c->loop) && !dlock__loop_hosted(c->loop);
    pthread_mutex_lock(&t->mu);
    int completed = op->finished;
    int claim = elsewhere && !completed && !t->stopped && !op->w.joined;
    if (claim) {
        t->claims++;
    } else {
        op->composing = 0;
        if (!completed && !op->parts->give_up)
            dlock__loop_post(c->loop, &op->kick);
    }
    pthread_mutex_unlock(&t->mu);
    if (claim) {
        decide_here(op);
        return;
    }
    if (completed && op->w.t->done)
        op->w.t->done(op->st, op->read);
    dlock__aop_unref(op);
}

/* The round compose set in op->parts goes out (COMPOSING until it ends). */
void dlock__aop_launch_parts(aop *op)
{
    pthread_mutex_lock(&dlock__aop_client(op)->async->mu);
    dlock__aop_mark_out(op);
    pthread_mutex_unlock(&dlock__aop_client(op)->async->mu);
    dlock__parts_run(op->parts, dlock__aop_parts_done, op);
}

/* DECIDED, on the call's own io thread: the outcome decide_here stored. */
void dlock__aop_decided(aop *op)
{
    composite *cm = (composite *)op->parts;
    composed(op, cm->rc, &cm->b);
}
