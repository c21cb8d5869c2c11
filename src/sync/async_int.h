/* The asynchronous driver's own (async.c, and async_composite.c for a
 * composite's rounds): a call (aop), the client's table of pending calls,
 * and what the two files call of each other. Not for other modules: they
 * use dlock__async_run (sync.h). docs/internals/async.md. */
#ifndef DLOCK_SYNC_ASYNC_INT_H
#define DLOCK_SYNC_ASYNC_INT_H

#include <stddef.h>

#include "core/theap.h"
#include "sync/sync.h"

enum {
    S_START,
    S_SENT,
    S_COMPOSING,
    S_DECIDED,
    S_JOINING,
    S_SLEEPING,
    S_GIVING_BACK,
    S_SETTLING,
    S_DONE
};

/* SETTLING: a release done, waiting until the renewals in flight of the
 * holds it took out are answered (the watchdog calls settled_fn, which posts
 * the call's job), at most the command timeout + 1 s (its timer), so that
 * none lands on the caller's next hold of the name. */

/* A composite's rounds, and (DECIDED) the outcome a round's end decided on
 * another thread, which its io thread goes on from (on_kick). */
typedef struct composite {
    dlock__parts k;          /* first: freed as op->parts */
    int rc;
    dlock__busy b;
} composite;

/* A give-back in flight: how the call then ends (msg: rc's message, kept
 * until the give-back's answer). */
typedef struct back {
    int rc, acks;
    char msg[];
} back;

typedef struct aop {
    dlock__list reg;         /* in the client's table while pending */
    dlock_async_fn fn;
    void *ud;
    unsigned char state;
    unsigned char read;      /* the operation's read ran */
    unsigned char with;      /* the ACL fallback: the classes of dlock's own keys the last
                                request carried (dlock__op_req) */
    unsigned char cap;       /* ... the classes the next may carry */
    unsigned char busied;    /* the last attempt answered busy: b */
    /* A composite's (dlock__parts): under the table's mutex, as its parts end
     * on any thread. composing: a round is out (it holds a reference);
     * finished: the call completed (then the round's end runs done). */
    unsigned char composing, finished;
    atomic_int refs;
    dlock__tentry te;        /* in the timer heap (its deadline: w.until) */
    int64_t sent;            /* the last attempt's, before it was sent */
    int64_t settle_until;    /* SETTLING: ends by then whatever the watchdog says */
    dlock__wd_settle settle; /* SETTLING: what it awaits (settle.pending > 0) */
    dlock__job kick;
    back *back;              /* GIVING_BACK */
    dlock__parts *parts;     /* a composite's rounds (COMPOSING) */
    dlock__busy *busy;       /* where each busy answer is copied (dlock__via), or NULL */
    char *msg;               /* while an entry of the io thread runs it (enter): where its
                                failures are written, the message finish reports; else
                                NULL */
    dlock__wait w;           /* its handle, operation and state; the wait */
    /* The operation's state. */
    _Alignas(max_align_t) unsigned char st[];
} aop;

/* The client's table of pending calls. */
struct dlock__async {
    pthread_mutex_t mu;
    dlock__list ops;
    size_t n;
    int stopped;
    /* Calls decided on another client's io thread right now (claimed by a
     * round's end): the stop hook waits for none to be left (idle). */
    unsigned claims;
    pthread_cond_t idle;
    /* io thread only: the sleeping calls' deadlines */
    uv_timer_t timer;
    dlock__theap heap;
};

static inline dlock_client *dlock__aop_client(const aop *op) { return op->w.h->c; }

/* async.c */

/* Any thread: the last reference frees it. */
void dlock__aop_unref(aop *op);
/* A round of op's parts goes out: COMPOSING (a completed call stays done)
 * until the round ends, which holds a reference. Under the table's mutex. */
void dlock__aop_mark_out(aop *op);
/* Ends op with rc and its message msg (when not DLOCK_OK), exactly once. */
void dlock__aop_finish_with(aop *op, int rc, const char *msg);
/* Does what the wait loop said: next, with the call's status rc (io thread). */
void dlock__aop_step(aop *op, int next, int rc);
/* An attempt's outcome rc: a busy answer is noted (dlock__via.busy). */
int dlock__aop_answered_busy(aop *op, int rc, const dlock__busy *b);

/* async_composite.c */

/* A composite's first round, set on the calling thread: 1 when its parts
 * are set (then registered as out, and run), 0 when the io thread starts it. */
int dlock__aop_first_round(aop *op);
/* The round compose set in op->parts goes out (COMPOSING until it ends). */
void dlock__aop_launch_parts(aop *op);
/* A composite's attempt (first: its start), or its next step once a round
 * of its parts has ended (io thread). */
void dlock__aop_compose_step(aop *op, int first, int64_t waited);
/* DECIDED: the outcome a round's end decided elsewhere, gone on from here
 * (io thread). */
void dlock__aop_decided(aop *op);
/* A round's end (dlock__parts_run's notify), on any thread. */
void dlock__aop_parts_done(void *arg);

#endif
