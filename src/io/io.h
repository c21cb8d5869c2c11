/* The io layer: the client's io thread (a libuv loop that names no module:
 * work reaches it by posted jobs, modules register what to do when it
 * stops) and what runs on it: the waiter table and the pub/sub connections
 * that feed it, and the watchdog with its per-node renewals and client
 * tracking. It sees a hold only as bytes and a kind, a wake-up only as a
 * message and a channel's wake policy: no lock protocol. Each module's file
 * says what it holds; docs/internals/ (waiting.md, watchdog.md, threads.md)
 * say how they work together. Not installed. */
#ifndef DLOCK_IO_H
#define DLOCK_IO_H

#include "net/net.h"

/* ------------------------------------------------------------------ loop */

typedef struct dlock__loop dlock__loop;

/* A unit of work for the io thread. Embedded in its owner; posting a job that
 * is already queued does nothing, so a burst of posts runs it once. */
typedef struct dlock__job {
    dlock__list link;
    void (*fn)(void *arg);
    void *arg;
    int queued;              /* under the loop's queue lock */
} dlock__job;

void dlock__job_init(dlock__job *j, void (*fn)(void *arg), void *arg);

/* Creates the loop; the modules then set themselves up on it (their handles,
 * their stop hooks), and dlock__loop_run starts the thread. */
int dlock__loop_start(dlock__loop **out, const dlock_config *cfg);
int dlock__loop_run(dlock__loop *lp);
/* Runs every stop hook on the io thread (last registered first), lets libuv
 * close what they closed, joins the thread and frees the loop. */
void dlock__loop_stop(dlock__loop *lp);
/* As dlock__loop_stop for a loop whose thread never ran (a failed open). */
void dlock__loop_abandon(dlock__loop *lp);
/* Queues j for the io thread and wakes it; any thread. Ignored once the loop
 * is stopping: then 0 (j will not run), else 1 (queued, or queued already). */
int dlock__loop_post(dlock__loop *lp, dlock__job *j);
/* Takes j out of the queue if it is queued (any thread; the io thread uses
 * it before freeing the owner of a job that may still be queued). */
void dlock__loop_unpost(dlock__loop *lp, dlock__job *j);
/* Registers a hook run on the io thread when the loop stops: it must close the
 * module's libuv handles. Call before dlock__loop_run. Fails (DLOCK_EINVAL)
 * only past the few modules a client has. */
int dlock__loop_on_stop(dlock__loop *lp, void (*fn)(void *arg), void *arg);
/* 1 when called on this loop's io thread (inside a dlock callback). */
int dlock__loop_on_io_thread(dlock__loop *lp);
/* 1 when the calling thread runs some client's loop right now (its io
 * thread, or a program's thread inside dlock's turn of its loop). */
int dlock__loop_on_some_io_thread(void);
/* 1 when the calling thread runs lp right now: what it starts is written on
 * this turn of lp (on the program's thread outside dlock's turn, a job must
 * be posted, which wakes lp). */
int dlock__loop_running_here(const dlock__loop *lp);
/* 1 when lp is embedded in a program's libuv loop (dlock_config_set_uv_loop):
 * its callbacks run on the program's thread. */
int dlock__loop_hosted(const dlock__loop *lp);
/* The io thread's libuv loop: only the io thread may use it, except from a
 * module's setup before its first post. */
uv_loop_t *dlock__loop_uv(dlock__loop *lp);

/* ---------------------------------------------------------------- pubsub */

typedef struct dlock__pubsub dlock__pubsub;
typedef struct dlock__channel dlock__channel;

/* How many of a channel's local waiters a message wakes: DLOCK__WAKE_ALL, 0
 * (none), or a budget >= 1. Each waiter has a need (1 unless it joined with
 * more: a semaphore waiter's permits); a budget wakes waiters in join order
 * whose need fits what is left of it, so a message that says "3 permits"
 * wakes waiters for 3 permits in all, skipping one that needs more than is
 * left. */
#define DLOCK__WAKE_ALL (-1)
/* As DLOCK__WAKE_ALL, and the message settles the wait of every waiter that
 * joined with `settle` and was waiting when the message was published (a
 * latch's zero): those get DLOCK__WAKE_DONE instead of a retry. "Was
 * waiting": a PING sent on the pub/sub connection after the waiter joined
 * was answered before the message came (one connection keeps Redis's
 * order); a message that came earlier may predate the wait (a zero before
 * the count was set again) and only wakes. */
#define DLOCK__WAKE_ALL_DONE (-2)
typedef int (*dlock__wake_policy)(const char *msg, size_t len);

/* A thread waiting for messages on one channel. Lives on the waiting thread's
 * stack between dlock__waiter_join and dlock__waiter_leave. */
typedef struct dlock__waiter {
    dlock__list link;        /* in channel->waiters */
    dlock__channel *ch;
    pthread_cond_t cv;
    int woken;               /* a wake-up arrived and was not consumed yet */
    int subscribed;          /* the channel was subscribed when last checked */
    int64_t woken_us;        /* when the message that woke it arrived (the handoff gap);
                                under mu */
    int64_t took_us;         /* woken_us of the wake-up dlock__waiter_wait (or _poll) last returned:
                                the waiting thread's own copy, read without mu */
    int pins;                /* io thread signals of cv in flight outside mu */
    int first;               /* goes first when a message wakes fewer than all (a lock's
                                reserved turn) */
    int settle;              /* a DLOCK__WAKE_ALL_DONE message may end its wait */
    int settled;             /* ... and one did */
    int64_t need;            /* units of a message's budget this waiter takes (>= 1) */
    uint64_t join_seq;       /* barrier PINGs sent on join_pc before it joined */
    const void *join_pc;     /* the channel's pub/sub connection then, or NULL */
    dlock_cancel *cancel;
    dlock__cancel_reg creg;
    /* An asynchronous waiter (no thread sleeps): every wake-up, state change,
     * cancellation or close calls notify(arg) instead of signalling cv, from
     * whichever thread caused it, under the table's mutex; it must only post
     * a job. The waiter then asks dlock__waiter_poll what happened. */
    void (*notify)(void *arg);
    void *notify_arg;
    const char *watch;       /* the key it watches (dlock__waiter_watch), or NULL: the
                                caller's, alive while it is joined */
    size_t wlen;
    /* A listener's (dlock__waiter_listen): each message of its channel, handed
     * over on the io thread under the table's mutex before the wake-up; it
     * must only copy it and post a job. NULL for a waiter. */
    void (*on_msg)(const char *msg, size_t len, void *arg);
} dlock__waiter;

/* Wait outcomes. */
enum { DLOCK__WAKE_MESSAGE = 1, DLOCK__WAKE_TIMEOUT = 2, DLOCK__WAKE_DONE = 3 };

int dlock__pubsub_new(dlock__pubsub **out, dlock__loop *lp, dlock__netctx *ctx,
                      dlock__router *router);
/* One address: the requests that ask the server's ROLE while waiters wait
 * go through x (so a demotion that keeps the pub/sub connection open is
 * seen). Before the loop runs; x outlives ps's use of it. */
void dlock__pubsub_use_acall(dlock__pubsub *ps, dlock__acall *x);
/* Ends every wait with DLOCK_ECLOSED and refuses new ones (before the loop stops). */
void dlock__pubsub_shutdown(dlock__pubsub *ps);
/* After the loop stopped. */
void dlock__pubsub_free(dlock__pubsub *ps);

/* Registers w on `channel` (wake policy `wake`, used when the channel is
 * created, NULL: every message wakes every waiter; `need` >= 1, see
 * dlock__wake_policy; `settle`: see
 * DLOCK__WAKE_ALL_DONE) and waits until the channel is subscribed, the command timeout passes (then w->subscribed = 0 and the
 * caller polls at the retry delay), or `deadline_ms`. Returns DLOCK_OK, DLOCK_ECANCELED, DLOCK_ECLOSED,
 * DLOCK_ENOMEM. On error w is not registered. */
int dlock__waiter_join(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                       dlock__wake_policy wake, int64_t need, int settle,
                       int64_t deadline_ms, dlock_cancel *cancel);
/* As dlock__waiter_join for an asynchronous waiter: registers w and returns
 * at once (DLOCK_OK, DLOCK_ECLOSED, DLOCK_ENOMEM; on error w is not
 * registered). notify(arg): see dlock__waiter. w must not move until leave. */
int dlock__waiter_join_async(dlock__pubsub *ps, dlock__waiter *w, const char *channel,
                             size_t len, dlock__wake_policy wake, int64_t need, int settle,
                             dlock_cancel *cancel, void (*notify)(void *arg), void *arg);
/* As dlock__waiter_join_async (no cancel token, every message wakes it), for a
 * listener that reads what is published rather than waits: on_msg(msg, len,
 * arg) gets each message of the channel (see dlock__waiter); notify(arg) as
 * an asynchronous waiter's (the subscription confirmed, dropped, a message
 * came). It stays joined until dlock__waiter_leave. */
int dlock__waiter_listen(dlock__pubsub *ps, dlock__waiter *w, const char *channel, size_t len,
                         void (*on_msg)(const char *msg, size_t len, void *arg),
                         void (*notify)(void *arg), void *arg);
/* What an asynchronous waiter has to act on now: DLOCK_ECLOSED,
 * DLOCK_ECANCELED, DLOCK__WAKE_DONE or DLOCK__WAKE_MESSAGE (the wake-up is
 * consumed), or 0 (nothing). *ready = 1 once the channel's subscription is
 * confirmed or was refused (the join is over); w->subscribed as for
 * dlock__waiter_wait (0: the caller polls at the retry delay). */
int dlock__waiter_poll(dlock__pubsub *ps, dlock__waiter *w, int *ready);
/* Sleeps until a wake-up, until_ms, cancellation or close. Returns
 * DLOCK__WAKE_MESSAGE, DLOCK__WAKE_DONE (a settling message: the wait is
 * over), DLOCK__WAKE_TIMEOUT, DLOCK_ECANCELED or DLOCK_ECLOSED. */
int dlock__waiter_wait(dlock__pubsub *ps, dlock__waiter *w, int64_t until_ms);
/* Marks w as going first among its channel's local waiters (on = 1: a message
 * that wakes one wakes it), or no longer (on = 0). */
void dlock__waiter_set_first(dlock__pubsub *ps, dlock__waiter *w, int on);
/* A waiter woken by a budget found less than it needs (others took some
 * first): it offers what it saw, `budget` units, to the channel's other
 * waiters whose needs fit, as a message would. */
void dlock__waiter_pass_budget(dlock__pubsub *ps, dlock__waiter *w, int64_t budget);
/* pass_wake: hand a wake-up to another waiter even if this one used its own
 * (it was woken, then failed before learning whether the lock was free). */
void dlock__waiter_leave(dlock__pubsub *ps, dlock__waiter *w, int pass_wake);
/* While w sleeps, `key` (NULL: none) is watched for it: deleted by anyone (a
 * release, an operator's DEL, expiry, eviction, FLUSHALL), it wakes every
 * waiter of w's channel unless a message on the channel came with the change
 * (keywatch.c). The key is one the waiter's last attempt found present (the
 * lock held, the marker alive): a key absent when first read wakes at once.
 * Costs nothing when key is what w already watches; the waiting thread only,
 * while joined; leave stops it. The key is not copied: it must stay as it is
 * until then (a handle's name). */
void dlock__waiter_watch(dlock__pubsub *ps, dlock__waiter *w, const char *key, size_t len);
/* Wake-ups the key watch made (tests). */
uint64_t dlock__pubsub_keywatch_wakes(dlock__pubsub *ps);
/* Number of local waiters on a channel (tests). */
size_t dlock__pubsub_waiters(dlock__pubsub *ps, const char *channel, size_t len);

/* -------------------------------------------------------------- watchdog */

/* Renewal batches: at most this many holds per script call (Redisson's figure). */
#define DLOCK__RENEW_BATCH 100

/* A kind of renewable hold, registered by the sync layer: the script that
 * renews a batch of them, and how many keys and arguments each hold brings.
 * The script gets KEYS = each hold's keys in turn, ARGV[1] = the lease in ms,
 * then each hold's arguments in turn, and answers one integer per hold: 1
 * renewed, 0 gone (reported lost). All keys of a hold share a slot. */
typedef struct dlock__hold_kind {
    const char *what;        /* "lock", "read lock": for log lines */
    int script;              /* DLOCK__SCRIPT_* */
    int nkeys;               /* keys per hold (>= 1; the first is the name reported) */
    int nargs;               /* arguments per hold */
    int track;               /* the key (index into the hold's keys) whose change by
                                someone else may end the hold: rechecked at once when
                                Redis reports it changed; -1: none */
} dlock__hold_kind;

#define DLOCK__HOLD_PARTS 5
/* One hold as the watchdog sees it: its kind, its keys then its arguments
 * (bytes), and the owner id the lost callback names. */
typedef struct dlock__hold_id {
    const dlock__hold_kind *kind;
    const char *part[DLOCK__HOLD_PARTS];
    size_t len[DLOCK__HOLD_PARTS];
    const char *owner;
    size_t olen;
} dlock__hold_id;

typedef struct dlock__watchdog dlock__watchdog;

int dlock__watchdog_new(dlock__watchdog **out, dlock__loop *lp, dlock__netctx *ctx,
                        dlock__router *router);
/* After the loop stopped. */
void dlock__watchdog_free(dlock__watchdog *wd);
/* A watchdog hold taken at `sent_ms` (measured before the acquire was sent);
 * a hold already scheduled counts one acquisition more. */
int dlock__watchdog_add(dlock__watchdog *wd, const dlock__hold_id *id, int64_t sent_ms,
                        const dlock__lost_cb *cb);
/* As dlock__watchdog_add, for a hold that must end max_hold_ms after sent_ms
 * (0: no limit): renewals never set a TTL beyond that moment, and the loss
 * (DLOCK_LOST_MAX_HOLD) is reported before it, as any loss. A hold already
 * scheduled keeps the sooner of its limit and this one. */
int dlock__watchdog_add_limited(dlock__watchdog *wd, const dlock__hold_id *id, int64_t sent_ms,
                                int64_t max_hold_ms, const dlock__lost_cb *cb);
/* How long until the scheduled hold's limit (ms, may be <= 0), or INT64_MAX
 * when it is not scheduled or has no limit: an acquisition that would set a
 * TTL past it (a reentry) sets this instead. */
int64_t dlock__watchdog_limit_left(dlock__watchdog *wd, const dlock__hold_id *id);
/* When the watchdog renews the hold (it is scheduled): how many of its
 * owner's acquisitions it counts (each release attempt takes one), >= 1; 0
 * when not. */
int dlock__watchdog_renews(dlock__watchdog *wd, const dlock__hold_id *id);
/* A lease acquisition by an owner the watchdog renews (reentry with a lease):
 * counted as one more acquisition, and the loss deadline comes no later than
 * the lease; lease_ms < 0: the acquisition did not shorten the key's TTL
 * (counted only). */
void dlock__watchdog_lease_reentry(dlock__watchdog *wd, const dlock__hold_id *id,
                                   int64_t sent_ms, int64_t lease_ms);
/* Before a release: returns 1 when the hold is renewed by the watchdog, and
 * keeps a renewal that finds the key gone meanwhile from being reported lost. */
int dlock__watchdog_release_begin(dlock__watchdog *wd, const dlock__hold_id *id);
/* Release outcomes for dlock__watchdog_release_end. */
enum {
    DLOCK__RELEASE_KEPT = 0,      /* holds remain, or the outcome is unknown */
    DLOCK__RELEASE_GONE = 1,      /* the last hold was released */
    DLOCK__RELEASE_NOT_HELD = 2   /* the owner held nothing: a watchdog hold was lost */
};
/* After a release attempt. GONE takes the entry out of the schedule; NOT_HELD
 * does too and reports the loss (lost callback, on the io thread); KEPT (holds
 * remain, or the attempt failed) counts one hold less and stops renewing when
 * none is left. An entry taken out while its renewal is in flight: off the io
 * thread, the call waits for that renewal's answer (at most the command
 * timeout + 1 s), so that it cannot land on the owner's next hold of the
 * name. On the io thread it returns at once: the entry is awaited by the
 * dlock__wd_settle collecting there (dlock__watchdog_collect), if any; a
 * blocking release made from a callback collects none and does not wait. */
void dlock__watchdog_release_end(dlock__watchdog *wd, const dlock__hold_id *id, int outcome);
/* A release begun (dlock__watchdog_release_begin) that did not touch this
 * hold after all (a list release refused for another permit): renewals and
 * their loss reports go on as before. */
void dlock__watchdog_release_abort(dlock__watchdog *wd, const dlock__hold_id *id);

/* An asynchronous release's wait for the in-flight renewals of the holds it
 * took out, for the reason dlock__watchdog_release_end waits. Embedded in its
 * owner; io thread only. */
typedef struct dlock__wd_settle {
    /* Called once, on the io thread, under the watchdog's mutex, when the last
     * awaited renewal is answered: it must only post a job. */
    void (*fn)(void *arg);
    void *arg;
    int pending;             /* renewals still awaited */
} dlock__wd_settle;
/* Io thread: until dlock__watchdog_collect_end, each entry that
 * dlock__watchdog_release_end takes out while its renewal is in flight is
 * awaited by s (s->pending counts them; fn and arg set by the caller). */
void dlock__watchdog_collect(dlock__watchdog *wd, dlock__wd_settle *s);
/* Io thread: ends the collection; returns s->pending. 0: nothing awaited, fn
 * is never called. Else fn(arg) comes once all of them are answered, unless
 * dlock__watchdog_unsettle is called first. */
int dlock__watchdog_collect_end(dlock__watchdog *wd, dlock__wd_settle *s);
/* Io thread: s waits no longer (its time is up, or its call ended): fn is not
 * called; s->pending is 0 after. Nothing when s awaits nothing. */
void dlock__watchdog_unsettle(dlock__watchdog *wd, dlock__wd_settle *s);
/* How many holds are scheduled (tests). */
size_t dlock__watchdog_count(dlock__watchdog *wd);
/* A new hold is registered (renewed once, so that Redis tracks its key) once
 * it is this old: one released sooner costs Redis nothing, and a change
 * before is found by that renewal. */
#define DLOCK__WD_REGISTER_AGE_MS 3
/* 0 while client tracking is off; 2 while it is on and every hold's key is
 * tracked (no recheck or renewal awaiting its answer); 1 in between (tests). */
int dlock__watchdog_tracking(dlock__watchdog *wd);
/* A renewal script's answer for n holds: held[i] = 1 when renewed. DLOCK_OK
 * or DLOCK_EPROTO; never reads past what the reply holds (fuzzed). */
int dlock__reply_renew(const redisReply *r, size_t n, unsigned char *held);


/* -------------------------------------------------------------- tracking */

typedef struct dlock__tracking dlock__tracking;

typedef struct dlock__tracking_cbs {
    /* The listener's client id, once it is subscribed (the REDIRECT target);
     * 0 when it went down (tracking is off until it is back), -1 when Redis
     * refused it (off for good). */
    void (*on_id)(int64_t id, void *ud);
    /* Keys some client changed (an array of strings), or NULL: every key
     * (FLUSHALL, FLUSHDB, an overflowing tracking table). */
    void (*on_invalidate)(const redisReply *keys, void *ud);
    void *ud;
} dlock__tracking_cbs;

/* A listener on `node` (NULL: the router's node for no key). */
int dlock__tracking_new(dlock__tracking **out, uv_loop_t *uv, dlock__netctx *ctx,
                        dlock__router *router, dlock__node *node, const dlock__tracking_cbs *cbs);
/* Connects (again) if not connected; io thread. */
void dlock__tracking_start(dlock__tracking *t);
/* Closes the connection (the owner's stop hook); io thread. */
void dlock__tracking_stop(dlock__tracking *t);
/* After the loop stopped. */
void dlock__tracking_free(dlock__tracking *t);

#endif
