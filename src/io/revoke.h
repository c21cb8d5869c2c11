/* Revocation by tracking (revoke.c, watchdog.md "Revocation heard at
 * once"): holds indexed by the key whose change may end them; a reported
 * change, a new hold coming of age, or tracking coming (back) on puts holds
 * on the recheck list, and a recheck pass renews them at once through the
 * per-node batches. Above the per-node batches, beside the losses: the
 * schedule (watchdog.c) calls it, and it reaches the schedule only through
 * the hook it was given (a pass now). Not installed. */
#ifndef DLOCK_IO_REVOKE_H
#define DLOCK_IO_REVOKE_H

#include "io/wdnode.h"

typedef struct dlock__wd_revoke {
    dlock__netctx *ctx;
    dlock__loop *lp;
    pthread_mutex_t *mu;     /* the watchdog's: guards the holds and what says "under mu" */
    dlock__wd_nodes *nodes;  /* where rechecks are sent */
    dlock__list *all;        /* the watchdog's holds (held.all), under mu */
    void (*tick)(void *ud);  /* the schedule's hook: a pass now (it connects the renewal
                                connection and the listener) */
    void *ud;
    dlock__job reg_job;      /* posted by an acquisition: new holds to register */
    dlock__tracking *track;  /* the listener, NULL when configured off or on a sentinel,
                                replicated or cluster deployment (one server only) */
    int64_t track_id;        /* io thread: its client id, 0 while it is not listening */
    dlock__map tkeys;        /* under mu: tracked key -> its holds (held.tn) */
    dlock__list recheck;     /* under mu: holds to renew at once (held.rlink) */
    int track_live;          /* under mu (written on the io thread): tracking is on for
                                the (single server's) renewal connection */
    int track_refused;       /* under mu: Redis refused tracking: renewal-time detection only */
    int reg_armed;           /* under mu: the io thread will register new holds soon */
    int rechecks_out;        /* io thread: recheck batches awaiting their answer */
    uint64_t flushes;        /* io thread: invalidations of every key (FLUSHALL) heard */
    uv_timer_t reg_timer;    /* the next registering pass: when the oldest new hold
                                not yet registered comes of age */
    int timer_inited;
} dlock__wd_revoke;

/* Sets rv up, and its listener unless revocation is off (the config) or the
 * router is dynamic. tick(ud): the schedule's pass. */
int dlock__wd_revoke_init(dlock__wd_revoke *rv, dlock__netctx *ctx, dlock__loop *lp,
                          dlock__router *router, pthread_mutex_t *mu, dlock__wd_nodes *nodes,
                          dlock__list *all, void (*tick)(void *ud), void *ud);
/* Io thread: the registering timer (0, or libuv's error). */
int dlock__wd_revoke_start(dlock__wd_revoke *rv);
/* Io thread, at the stop (after the renewal connections closed): the timer
 * and the listener go. */
void dlock__wd_revoke_stop(dlock__wd_revoke *rv);
void dlock__wd_revoke_free(dlock__wd_revoke *rv);

/* Indexes h under the key its kind tracks / takes it out (and off the
 * recheck list); caller holds mu. */
void dlock__wd_track_link(dlock__wd_revoke *rv, held *h);
void dlock__wd_track_unlink(dlock__wd_revoke *rv, held *h);
/* A new hold (h): registered when DLOCK__WD_REGISTER_AGE_MS old. Caller
 * holds mu; 1 when it must call dlock__wd_revoke_wake after unlocking. */
int dlock__wd_revoke_added(dlock__wd_revoke *rv, held *h);
void dlock__wd_revoke_wake(dlock__wd_revoke *rv);
/* Tracking is on (the schedule's batches then take the tracking form). Io
 * thread (which alone writes it). */
static inline int dlock__wd_revoke_live(const dlock__wd_revoke *rv) { return rv->track_live; }
/* h is being renewed by the schedule: off the recheck list. Caller holds mu. */
static inline void dlock__wd_revoke_unmark(held *h) { dlock__list_remove(&h->rlink); }

/* Io thread. The schedule's pass saw holds: the renewal connection and the
 * listener are up or coming. */
void dlock__wd_revoke_keep_up(dlock__wd_revoke *rv);
/* The renewal connection came up (tracking is off until enabled on it), or
 * went down. */
void dlock__wd_revoke_conn_up(dlock__wd_revoke *rv);
void dlock__wd_revoke_conn_down(dlock__wd_revoke *rv);
/* A recheck batch answered (before its holds are looked at). */
void dlock__wd_revoke_answered(dlock__wd_revoke *rv);
/* Holds are due a recheck; caller holds mu. */
int dlock__wd_revoke_due(const dlock__wd_revoke *rv);
/* After a batch answered with rechecks due: a recheck pass at once (ok), or
 * after the retry delay (a failed batch: not at once against a failing
 * server). */
void dlock__wd_revoke_resume(dlock__wd_revoke *rv, int ok);
/* dlock__watchdog_tracking's answer (takes mu). */
int dlock__wd_revoke_state(dlock__wd_revoke *rv);

#endif
