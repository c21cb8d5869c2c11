/* Internal declarations shared by the library's modules. Not installed. */
#ifndef DLOCK_INTERNAL_H
#define DLOCK_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"
#include "list.h"
#include "map.h"
#include "scripts.h"

#define DLOCK__HIDDEN __attribute__((visibility("hidden")))
#define DLOCK__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define DLOCK__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Renewal batches: at most this many locks per script call (Redisson's figure). */
#define DLOCK__RENEW_BATCH 100

/* ----------------------------------------------------------------- errors */

/* Formats the calling thread's detailed message and returns `code`. */
int dlock__fail(int code, const char *fmt, ...) DLOCK__PRINTF(2, 3);
/* Clears the calling thread's message (at the start of a public call). */
void dlock__clear_error(void);
/* Writes the log line to the client's log callback, if any. */
void dlock__log(const dlock_client *c, dlock_log_level lvl, const char *fmt, ...)
    DLOCK__PRINTF(3, 4);
/* Maps a Redis error reply text to a status code. */
int dlock__redis_error_code(const char *text);

/* ------------------------------------------------------------------ utils */

int64_t dlock__now_ms(void);   /* CLOCK_MONOTONIC, milliseconds */
int64_t dlock__now_us(void);   /* CLOCK_MONOTONIC, microseconds */
uint64_t dlock__tid(void);     /* OS thread id, cached per thread */
/* Fills buf with random bytes (getrandom; falls back to a seeded PRNG). */
void dlock__random(void *buf, size_t len);
/* Resets per-thread caches (thread id, random state) in a forked child; the
 * library registers it with pthread_atfork when the first client opens. */
void dlock__atfork_child(void);
/* Writes 32 lowercase hex chars of fresh randomness plus NUL (33 bytes). */
void dlock__random_hex32(char out[33]);
/* Writes a version-4 UUID in canonical form plus NUL (37 bytes). */
void dlock__uuid(char out[37]);
/* Monotonic deadline for a condition wait, as a timespec. */
void dlock__abstime(int64_t deadline_ms, struct timespec *ts);
/* Initialises a condition variable on CLOCK_MONOTONIC. */
int dlock__cond_init(pthread_cond_t *cv);
/* strdup / memdup that return NULL on failure. */
char *dlock__strndup(const char *s, size_t n);
/* Decimal formatting without printf on hot paths; returns the length. */
size_t dlock__fmt_i64(char *buf, int64_t v);

/* --------------------------------------------------------------- endpoint */

typedef struct dlock__endpoint {
    char *host;      /* NULL for unix sockets */
    int port;
    char *path;      /* unix socket path, or NULL */
    int db;
    char *user;      /* may be NULL */
    char *pass;      /* may be NULL; never printed */
} dlock__endpoint;

/* "host:port" or "unix:/path" into buf; never credentials. */
const char *dlock__endpoint_str(const dlock__endpoint *ep, char *buf, size_t size);
int dlock__endpoint_copy(dlock__endpoint *dst, const dlock__endpoint *src);
void dlock__endpoint_clear(dlock__endpoint *ep);
/* Parses a URL into ep (cleared first on success only). */
int dlock__parse_url(const char *url, dlock__endpoint *ep);

/* ----------------------------------------------------------------- config */

struct dlock_config {
    dlock__endpoint ep;
    int64_t watchdog_ms;
    int64_t command_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t retry_delay_ms;
    int retry_attempts;
    int pool_size;
    int64_t priority_after_ms;   /* DLOCK_PRIORITY_OFF: never reserve */
    char *client_name;
    dlock_lost_fn lost_fn;
    void *lost_ud;
    dlock_log_fn log_fn;
    void *log_ud;
    dlock_log_level log_level;
};

int dlock__config_copy(dlock_config *dst, const dlock_config *src);
void dlock__config_clear(dlock_config *cfg);

/* ------------------------------------------------------------------- node */

/* One Redis server seen through a pool of blocking hiredis connections. */
typedef struct dlock__node dlock__node;

/* Flags for dlock__node_call. */
enum {
    /* Resend after a failure that may have happened after Redis ran the
     * command (timeout, reset mid-reply): only for idempotent requests. */
    DLOCK__CALL_IDEMPOTENT = 1,
    /* Pipeline a PING before the request (its reply is read and dropped). A
     * release that will wake a waiter uses it: Redis then writes the unlock
     * message to the subscribers before the releaser's reply, instead of after
     * it, so the next holder's retry is not queued behind the releaser's
     * return on a busy client CPU (Redis 7 writes the clients with pending
     * replies newest first, and the PING makes the releaser's connection
     * pending before the script publishes). */
    DLOCK__CALL_PING_FIRST = 2,
    /* One try: no retry after a failure, no pause. */
    DLOCK__CALL_NO_RETRY = 4,
    /* Only on an idle pooled connection: never open one or wait for one. */
    DLOCK__CALL_IDLE_ONLY = 8
};

/* A request: either a plain command (script < 0) or EVALSHA of a script. For
 * a script, argv holds keys then args, nkeys of them keys. */
typedef struct dlock__req {
    int script;              /* DLOCK__SCRIPT_* or -1 */
    int nkeys;
    int argc;
    const char **argv;
    const size_t *lens;
    unsigned flags;
    dlock_cancel *cancel;    /* interrupts retry pauses; may be NULL */
    int64_t latch_ms;        /* > 0: lifetime of the request's latch; no write may be
                                answered after first write + latch_ms */
} dlock__req;

int dlock__node_new(dlock__node **out, dlock_client *c, const dlock__endpoint *ep);
void dlock__node_free(dlock__node *n);
/* Opens one connection now (to report an unreachable server at open). */
int dlock__node_check(dlock__node *n);
/* Runs the request with retries; *out receives the reply (caller frees with
 * freeReplyObject). Error replies are turned into codes and not returned. */
int dlock__node_call(dlock__node *n, const dlock__req *req, redisReply **out);
const dlock__endpoint *dlock__node_endpoint(const dlock__node *n);

/* ------------------------------------------------------------------ loop */

typedef struct dlock__loop dlock__loop;
typedef struct dlock__channel dlock__channel;

/* Cancellation. A waiting thread registers the mutex and condition variable it
 * sleeps on; firing the token broadcasts every registered one. The waiter must
 * check dlock_cancel_fired() under `mu` before each wait. */
typedef struct dlock__cancel_reg {
    dlock__list link;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
} dlock__cancel_reg;
void dlock__cancel_attach(dlock_cancel *t, dlock__cancel_reg *reg, pthread_mutex_t *mu,
                          pthread_cond_t *cv);
void dlock__cancel_detach(dlock_cancel *t, dlock__cancel_reg *reg);
/* Sleeps ms, or less when t (may be NULL) fires: DLOCK_OK or DLOCK_ECANCELED. */
int dlock__cancel_sleep(dlock_cancel *t, int64_t ms);

/* A thread waiting for messages on one channel. Lives on the waiting thread's
 * stack between dlock__waiter_join and dlock__waiter_leave. */
typedef struct dlock__waiter {
    dlock__list link;        /* in channel->waiters */
    dlock__channel *ch;
    pthread_cond_t cv;
    int woken;               /* a wake-up arrived and was not consumed yet */
    int subscribed;          /* the channel was subscribed when last checked */
    int pins;                /* io thread signals of cv in flight outside mu */
    int claimant;            /* holds the lock's reservation: woken first */
    dlock_cancel *cancel;
    dlock__cancel_reg creg;
} dlock__waiter;

/* Wait outcomes. */
enum { DLOCK__WAKE_MESSAGE = 1, DLOCK__WAKE_TIMEOUT = 2 };

int dlock__loop_start(dlock__loop **out, dlock_client *c);
void dlock__loop_stop(dlock__loop *lp);
/* Registers w on `channel` and waits until the channel is subscribed, the
 * command timeout passes (then w->subscribed = 0 and the caller polls at the
 * retry delay), or `deadline_ms`. Returns DLOCK_OK, DLOCK_ECANCELED,
 * DLOCK_ECLOSED, DLOCK_ENOMEM. On error w is not registered. */
int dlock__waiter_join(dlock__loop *lp, dlock__waiter *w, const char *channel, size_t len,
                       int64_t deadline_ms, dlock_cancel *cancel);
/* Sleeps until a wake-up, until_ms, cancellation or close. Returns
 * DLOCK__WAKE_MESSAGE, DLOCK__WAKE_TIMEOUT, DLOCK_ECANCELED or DLOCK_ECLOSED. */
int dlock__waiter_wait(dlock__loop *lp, dlock__waiter *w, int64_t until_ms);
/* Marks w as holding the lock's next turn (on = 1: unlock messages wake it
 * first), or no longer (on = 0). */
void dlock__waiter_set_claimant(dlock__loop *lp, dlock__waiter *w, int on);
/* pass_wake: hand a wake-up to another waiter even if this one used its own
 * (it was woken, then failed before learning whether the lock was free). */
void dlock__waiter_leave(dlock__loop *lp, dlock__waiter *w, int pass_wake);
/* 1 when called on this loop's io thread (inside a dlock callback). */
int dlock__loop_on_io_thread(dlock__loop *lp);
/* Number of local waiters on a channel (tests). */
size_t dlock__loop_waiters(dlock__loop *lp, const char *channel, size_t len);

/* Wakes the io thread. */
void dlock__loop_kick(dlock__loop *lp);
/* The io thread's libuv loop (watchdog timers live on it). */
struct uv_loop_s *dlock__loop_uv_loop(dlock__loop *lp);
/* --------------------------------------------------------------- watchdog */

typedef struct dlock__watchdog dlock__watchdog;

int dlock__watchdog_new(dlock__watchdog **out, dlock_client *c);
/* Runs on the io thread: starts its timer. */
int dlock__watchdog_start(dlock__watchdog *wd, struct uv_loop_s *uv);
/* Runs on the io thread: stops timers and closes connections; `done` is called
 * once every handle is closed. */
void dlock__watchdog_stop(dlock__watchdog *wd, void (*done)(void *), void *arg);
void dlock__watchdog_free(dlock__watchdog *wd);
/* A watchdog hold taken at `sent_ms` (measured before the acquire was sent). */
int dlock__watchdog_add(dlock__watchdog *wd, const char *name, size_t nlen, const char *owner,
                        size_t olen, int64_t sent_ms, dlock_lost_fn fn, void *ud);
/* A lease acquisition by an owner the watchdog renews (reentry with a lease). */
void dlock__watchdog_lease_reentry(dlock__watchdog *wd, const char *name, size_t nlen,
                                   const char *owner, size_t olen, int64_t sent_ms,
                                   int64_t lease_ms);
/* Before a release: returns 1 when (name, owner) is renewed by the watchdog,
 * and keeps a renewal that finds the key gone meanwhile from being reported lost. */
int dlock__watchdog_release_begin(dlock__watchdog *wd, const char *name, size_t nlen,
                                  const char *owner, size_t olen);
/* Release outcomes for dlock__watchdog_release_end. */
enum {
    DLOCK__RELEASE_KEPT = 0,      /* holds remain, or the outcome is unknown */
    DLOCK__RELEASE_GONE = 1,      /* the last hold was released */
    DLOCK__RELEASE_NOT_HELD = 2   /* the owner held nothing: a watchdog hold was lost */
};
/* After a release attempt. GONE takes the entry out of the schedule; NOT_HELD
 * does too and reports the loss (lost callback, on the io thread); KEPT (holds
 * remain, or the attempt failed) counts one hold less and stops renewing when
 * none is left. */
void dlock__watchdog_release_end(dlock__watchdog *wd, const char *name, size_t nlen,
                                 const char *owner, size_t olen, int outcome);
/* io thread: delivers the losses found by releases. */
void dlock__watchdog_flush(dlock__watchdog *wd);
/* How many holds are scheduled (tests). */
size_t dlock__watchdog_count(dlock__watchdog *wd);

/* ------------------------------------------------------------------- lock */

/* Redisson's naming: "prefix:{name}", or "prefix:name" when the name already
 * has a '{' (its own hash tag); `tail` is appended as is. NULL when out of memory. */
char *dlock__prefixed(const char *prefix, const char *name, size_t nlen, const char *tail,
                      size_t *out_len);
/* Acquire attempts (scripts sent) by the calling thread, for diagnostics: a
 * long wait with many attempts lost races (the lock is not fair); one with
 * few slept through wake-ups. */
extern _Thread_local uint64_t dlock__attempts;
/* Validates a lock name: DLOCK_EINVAL / DLOCK_ENAMETOOLONG with a message. */
int dlock__check_name(const char *name, size_t *len);
/* The handle's client and channel (for inspection). */
dlock_client *dlock__lock_client(const dlock_lock *l);
const char *dlock__lock_channel(const dlock_lock *l, size_t *len);

/* ------------------------------------------------------------------ reply */

/* Reading script and command answers (reply.c). Each returns DLOCK_OK,
 * DLOCK__BUSY (acquire only), DLOCK_EWRONGTYPE (TYPE only) or DLOCK_EPROTO. */
#define DLOCK__BUSY 1
/* Reservation state in a busy acquire answer (see lock_acquire.lua). */
enum {
    DLOCK__RESV_NONE = 0,   /* held by another; no reservation for the caller */
    DLOCK__RESV_MINE = 1,   /* held by another; the next turn is the caller's */
    DLOCK__RESV_OTHER = 2   /* free, but reserved for another waiter */
};
/* Grace of a reservation on a free lock in ms, as the scripts take it. */
#define DLOCK__RESERVE_GRACE_ARG "50"
int dlock__reply_acquire(const redisReply *r, int fenced, int64_t *ttl, uint64_t *token,
                         int *resv);
/* *heard = 1 when the last hold went and some client heard the unlock message. */
int dlock__reply_release(const redisReply *r, int *outcome, int *heard);
int dlock__reply_flag(const redisReply *r, int *flag);
int dlock__reply_integer(const redisReply *r, int64_t *v);
int dlock__reply_type_locked(const redisReply *r, int *locked);
int dlock__reply_count(const redisReply *r, int64_t *count);
/* A renewal batch's answer for n locks: held[i] = 1 when renewed. */
int dlock__reply_renew(const redisReply *r, size_t n, unsigned char *held);
/* A lock snapshot from one lock_inspect.lua entry; DLOCK_EWRONGTYPE names
 * what the key is in *what (pointing into r). */
int dlock__info_from_entry(const char *name, size_t nlen, const redisReply *e, dlock_info **out,
                           const char **what);

/* ----------------------------------------------------------------- client */

struct dlock_client {
    dlock_config cfg;
    char uuid[37];
    dlock__node *node;
    dlock__loop *loop;
    dlock__watchdog *wd;
    atomic_uint_fast64_t next_owner;   /* for dlock_client_new_owner_id */
    atomic_int reserve_on;             /* scripts get the reservation key (turn order) */
    int64_t latch_px;                  /* lifetime of an unlock latch */
};

/* Writes "<uuid>:<tid>" for the calling thread; returns the length. */
size_t dlock__owner_of_thread(const dlock_client *c, char buf[DLOCK_OWNER_BUFSIZE]);

#endif
