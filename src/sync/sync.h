/* The sync layer: the client, and the lock and synchronizer types on top of
 * the io and net layers.
 *
 *   client.c   opens and closes a client (the composition of every layer)
 *   op.c       a request built key by key, argument by argument
 *   names.c    Redisson's key and channel names
 *   wait.c     the wait loop every waiting type uses: attempt, join the
 *              channel, retry, sleep until a message or the holder's TTL
 *   lock.c     the lock handle and every dlock_lock_* call (lock.h: the
 *              type table; reentrant.c, fair_lock.c, rwlock.c: the types)
 *   multilock.c several lock handles as one: multi-lock and RedLock
 *   semaphore.c          the semaphore (Redisson's RSemaphore)
 *   permit_semaphore.c   the permit-expirable semaphore (RPermitExpirableSemaphore)
 *   latch.c              the count-down latch (RCountDownLatch)
 *   reply.c    pure readers of the scripts' answers (fuzzed)
 *   inspect.c  read-only snapshots and SCAN listings
 *   fence.c    fenced writes: a write to a key of data done only when the
 *              caller's token is not lower than the key's guard has seen
 * Not installed. */
#ifndef DLOCK_SYNC_H
#define DLOCK_SYNC_H

#include "dlock/async.h"
#include "io/io.h"

/* ----------------------------------------------------------------- client */

/* The client's table of pending asynchronous calls (async.c). */
typedef struct dlock__async dlock__async;

struct dlock_client {
    dlock_config cfg;
    dlock__netctx net;                 /* what the net layer sees of the client */
    dlock__stats stats;                /* dlock_client_stats */
    char uuid[37];
    dlock__router *router;
    dlock__loop *loop;
    dlock__pubsub *pubsub;
    dlock__watchdog *wd;
    dlock__acall *acall;               /* the asynchronous calls' round trips */
    dlock__async *async;               /* the asynchronous calls pending */
    atomic_uint_fast64_t next_owner;   /* for dlock_client_new_owner_id */
    atomic_int own_keys;               /* scripts get dlock's own optional keys (the
                                          reservation of the next turn) */
    int64_t latch_px;                  /* lifetime of an unlock latch */
    char evict_policy[48];             /* maxmemory-policy read at open, or "" */
    int evict_risky;                   /* it may evict keys with a TTL */
};

/* Before the loop runs. */
int dlock__async_new(dlock__async **out, dlock__loop *lp);
void dlock__async_free(dlock__async *t);
/* The loop's stop hook (arg: the client): every pending call ends with
 * DLOCK_ECLOSED. */
void dlock__async_stop(void *arg);

/* Writes "<uuid>:<tid>" for the calling thread; returns the length. */
size_t dlock__owner_of_thread(const dlock_client *c, char buf[DLOCK_OWNER_BUFSIZE]);
/* Runs a request on the node that serves its first key. */
int dlock__call(dlock_client *c, const dlock__req *req, redisReply **out);

/* --------------------------------------------------------------------- op */

/* A request being built: keys first, then arguments. Strings are not copied:
 * they must outlive the call; numbers are formatted into the op itself. */
#define DLOCK__OP_MAX 16
#define DLOCK__OP_NUMS 6
typedef struct dlock__op {
    int script;              /* DLOCK__SCRIPT_* or -1 for a plain command */
    int nkeys, argc;
    int bad;                 /* built wrong: the call refuses it */
    int optional;            /* index of a key of dlock's own that may be left out, or -1 */
    int nnum;
    const char *argv[DLOCK__OP_MAX];
    size_t lens[DLOCK__OP_MAX];
    char num[DLOCK__OP_NUMS][24];
} dlock__op;

void dlock__op_init(dlock__op *op, int script);
void dlock__op_key(dlock__op *op, const char *s, size_t n);
/* A key of dlock's own (not Redisson's) that the script works without: left
 * out when the client does not use it, or when Redis refuses it (see
 * dlock__op_call). At most one per op, and the op's last key. */
void dlock__op_key_optional(dlock__op *op, const char *s, size_t n);
void dlock__op_arg(dlock__op *op, const char *s, size_t n);
void dlock__op_args(dlock__op *op, const char *s);   /* a NUL-terminated argument */
void dlock__op_argi(dlock__op *op, int64_t v);
/* The request of op as the client sends it: an optional key goes along
 * while the client uses dlock's own keys (c->own_keys) unless `without`
 * (av, ln: room for the shortened request). Returns 1 when it carries the
 * optional key. */
int dlock__op_req(dlock_client *c, const dlock__op *op, int without, unsigned flags,
                  dlock_cancel *cancel, int64_t latch_ms, dlock__req *req, const char **av,
                  size_t *ln);
/* The ACL fallback, for both drivers: an answer that refuses the optional
 * key of a request that carried it (`with`; an ACL that allows Redisson's
 * keys only: NOPERM, answered before the script ran) means the request
 * goes again without it (dlock__op_req's `without`); the answer to that,
 * unless refused too, makes the client stop sending such keys
 * (dlock__op_key_dropped; logged once). */
int dlock__op_key_refused(int with, const dlock__res *res);
void dlock__op_key_dropped(dlock_client *c, const char *key, size_t len, const dlock__res *res);
/* Runs the op (dlock__node_call's flags, cancel and latch) with the ACL
 * fallback; res as dlock__router_call's. */
int dlock__op_call_res(dlock_client *c, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                       int64_t latch_ms, dlock__res *res);
/* As dlock__op_call_res, the answer into *out. */
int dlock__op_call(dlock_client *c, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                   int64_t latch_ms, redisReply **out);
/* Several ops on node n (every key of every op served by n) in one round
 * trip: dlock__node_call_many's rules and results (rc[i], res[i] for
 * ops[i]), with `flags` and `latch_ms` for each. An optional key is handled
 * as dlock__op_call does (an op whose key Redis refuses goes again alone),
 * and so is an op the node redirects (MOVED, ASK, CLUSTERDOWN, READONLY on a
 * deployment whose keys move: sent again alone through the router). */
void dlock__op_call_many(dlock_client *c, dlock__node *n, const dlock__op *ops, size_t k,
                         unsigned flags, dlock_cancel *cancel, int64_t latch_ms,
                         dlock__res *res, int *rc);
/* Replica acknowledgement of acquisitions (dlock_config_set_replica_ack).
 * Before an acquisition sent with DLOCK__CALL_WAIT_ACK: dlock__acks_reset;
 * once it succeeded: dlock__acks_record(its result's acks)
 * (dlock_last_replica_acks's answer), then dlock__acks_check: DLOCK_OK when
 * enough replicas acknowledged it (or none were asked for, or the policy
 * keeps it: logged), else give_back(ud) undoes the acquisition and
 * DLOCK_EREPLICAS with the message. */
void dlock__acks_reset(void);
void dlock__acks_record(int acks);
int dlock__acks_check(dlock_client *c, const char *what, const char *name,
                      int (*give_back)(void *ud), void *ud);

/* dlock__op_call for object `name` of kind `what` ("semaphore", ...): a
 * WRONGTYPE answer becomes dlock__wrong_type's verdict. */
int dlock__op_run(dlock_client *c, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                  const char *what, const char *name, redisReply **out);
/* The verdict for a key that is not a `what`, with Redis's (or the
 * script's) words for it from the calling thread's message. */
int dlock__wrong_type(const char *what, const char *name);
/* An answer of the wrong shape to operation `op`: frees r, sets the message. */
int dlock__proto(const char *what, const char *name, const char *op, redisReply *r);

/* ------------------------------------------------------------------ names */

/* Redisson's naming: "prefix:{name}", or "prefix:name" when the name already
 * has a '{' (its own hash tag); `tail` is appended as is. NULL when out of memory. */
char *dlock__prefixed(const char *prefix, const char *name, size_t nlen, const char *tail,
                      size_t *out_len);
/* Redisson's suffix naming: "{name}:tail", or "name:tail" when the name
 * already has a '{'. NULL when out of memory. */
char *dlock__suffixed(const char *name, size_t nlen, const char *tail, size_t *out_len);
/* Validates a lock name: DLOCK_EINVAL / DLOCK_ENAMETOOLONG with a message. */
int dlock__check_name(const char *name, size_t *len);
/* A getter's arguments (dlock_*_get(c, name, out)): clears the thread's
 * message, then checks out, the client and the name; *nlen = its length. */
int dlock__get_args(const dlock_client *c, const char *name, const void *out, size_t *nlen);
/* Validates an owner id likewise. */
int dlock__check_owner(const char *owner, size_t *len);

/* ------------------------------------------------------------------- wait */

/* An attempt's answer "held by somebody else", returned as DLOCK__BUSY. */
#define DLOCK__BUSY 1

/* What a busy attempt learnt. */
typedef struct dlock__busy {
    int64_t ttl;             /* sleep at most this long before the next attempt (ms);
                                < 0: until a message */
    int first;               /* this waiter goes first among its channel's local waiters */
    /* Where the next wake-up comes, when not on the spec's channel: a
     * multi-lock waits on whichever of its locks answered busy. NULL channel:
     * the spec's. */
    dlock_client *c;
    const char *channel;
    size_t clen;
    int64_t pass;            /* units this waiter saw but cannot use (a semaphore's count
                                below its need): offered to the channel's other local
                                waiters when a wake-up brought it here */
} dlock__busy;

/* A waiting operation, as the wait loop sees it. */
typedef struct dlock__wait_ops {
    /* One attempt. waited_ms: -1 for the first one, then how long the call has
     * waited so far. Returns DLOCK_OK, DLOCK__BUSY (*b filled) or an error. */
    int (*attempt)(void *ud, int64_t waited_ms, dlock__busy *b);
    /* The status (and message) for a busy answer when waiting is over: a wait
     * of 0, or the deadline. */
    int (*busy_error)(void *ud, const dlock__busy *b);
    /* The wait ends with status rc (not DLOCK_OK) after a busy answer: a type
     * that registered itself in Redis to wait (a reservation, a queue entry)
     * takes it back. It must keep the caller's message. May be NULL. */
    void (*give_up)(void *ud, int rc);
    void *ud;
} dlock__wait_ops;

typedef struct dlock__wait_spec {
    const char *name;        /* the object's name, for messages */
    const char *channel;     /* where its wake-ups come */
    size_t clen;
    dlock__wake_policy wake; /* NULL: the locks' policy */
    int64_t need;            /* this waiter's part of a message's budget (0: 1) */
    int settles;             /* a DLOCK__WAKE_ALL_DONE message ends the wait: DLOCK_OK */
    int awaits;              /* waits for a state (the latch), acquires nothing: not
                                counted in the acquisitions statistics */
    int64_t wait_ms;         /* 0: one attempt; DLOCK_WAIT_FOREVER: no limit */
    dlock_cancel *cancel;    /* may be NULL */
} dlock__wait_spec;

/* Attempts; while busy, subscribes to the channel first, then retries, then
 * sleeps until a message, the busy answer's TTL or the deadline. A busy
 * answer that names another channel (b->channel) moves the wait there: it
 * subscribes to that one, then retries at once. Returns
 * DLOCK_OK, or the busy error at the deadline, DLOCK_ECANCELED,
 * DLOCK_ECLOSED, DLOCK_EINVAL (a wait asked for on the io thread), or the
 * attempt's error. */
int dlock__wait(dlock_client *c, const dlock__wait_spec *spec, const dlock__wait_ops *ops);

/* Acquire attempts (scripts sent) by the calling thread, for diagnostics: a
 * long wait with many attempts lost races (the lock is not fair); one with
 * few slept through wake-ups. */
extern _Thread_local uint64_t dlock__attempts;
/* Wake-ups by a message that the calling thread's waits used, and those whose
 * next attempt found the object taken again (for a fair lock, where only the
 * head is woken, there should be none). Diagnostics and benchmarks. */
extern _Thread_local uint64_t dlock__wakeups;
extern _Thread_local uint64_t dlock__wakeups_wasted;

/* ------------------------------------------------------------------ async */

/* What an asynchronous call reports; include/dlock/async.h reads it. */
struct dlock_async_result {
    int status;
    const char *message;
    uint64_t token;          /* a fenced acquisition's */
    int flag;                /* a force release: was locked; a try-release: released; ... */
    int64_t count;           /* a count the call answers, or -1 */
    const char *permit_id;   /* an acquired permit's id */
};

/* A waiting call in halves, so that the asynchronous engine (async.c) can
 * run its round trips from the io thread: the type brings its request and
 * what the answer means, the engine wait.c's loop. `st` is the call's own
 * state, made in place by the type (dlock__async_wait_new). */
typedef struct dlock__await_type {
    /* The attempt's request (waited_ms as for dlock__wait_ops.attempt); *flags
     * are the call's (0 unless set). Strings must live in st or the handle. */
    void (*attempt_op)(void *st, int64_t waited_ms, dlock__op *op, unsigned *flags);
    /* The attempt's outcome from the call's status (WRONGTYPE included) and
     * reply (freed; NULL unless rc is DLOCK_OK): DLOCK_OK, DLOCK__BUSY with
     * *b, or an error with the io thread's message set. sent_ms: when the
     * request was sent. */
    int (*attempt_end)(void *st, int rc, redisReply *r, int64_t sent_ms, dlock__busy *b);
    /* After DLOCK_OK: the watchdog's bookkeeping (may be NULL). On an error
     * the engine sends give_back_op (if any) and fails the call. */
    int (*keep)(void *st);
    int (*give_back_op)(void *st, dlock__op *op, unsigned *flags);
    int (*busy_error)(void *st, const dlock__busy *b);
    /* A wait that ends with rc after a busy answer: the clean-up, sent once,
     * best effort (1 with *op), or 0. May be NULL. */
    int (*give_up_op)(void *st, int rc, dlock__op *op, unsigned *flags);
    /* Fills the result of a successful call (token, permit id). May be NULL. */
    void (*result)(void *st, dlock_async_result *res);
    /* Frees what st holds, once, whatever the outcome. May be NULL. */
    void (*done)(void *st);
} dlock__await_type;

/* A call of one round trip. */
typedef struct dlock__call_type {
    /* The request: *scratch filled, or one kept in st; flags and latch. */
    const dlock__op *(*op)(void *st, dlock__op *scratch, unsigned *flags, int64_t *latch_ms);
    /* Its outcome from the call's status and reply (freed; NULL unless
     * DLOCK_OK); fills res (count, flag). */
    int (*end)(void *st, int rc, redisReply *r, dlock_async_result *res);
    /* Once, whatever the outcome; ended = 0 when end never ran (closed first). */
    void (*done)(void *st, int ended);
} dlock__call_type;

/* Makes an asynchronous call of client c: returns its state (size bytes,
 * zeroed) for the type to set up in place, or NULL when out of memory.
 * Then exactly one of start or discard. */
void *dlock__async_wait_new(dlock_client *c, const dlock__await_type *t, size_t size,
                            dlock_async_fn fn, void *ud);
void *dlock__async_call_new(dlock_client *c, const dlock__call_type *t, size_t size,
                            dlock_async_fn fn, void *ud);
/* Starts it (the spec's strings must live in st or the handle; spec->name
 * names the object in messages). DLOCK_OK: the callback will run once;
 * otherwise the call is discarded (its done hook run) and the callback never
 * runs. */
int dlock__async_wait_start(void *st, const dlock__wait_spec *spec);
int dlock__async_call_start(void *st);
/* Frees a call never started (done hooks not run). */
void dlock__async_discard(void *st);

/* ------------------------------------------------------------------- lock */

/* The handle's client and channel (for inspection). */
dlock_client *dlock__lock_client(const dlock_lock *l);
const char *dlock__lock_channel(const dlock_lock *l, size_t *len);

/* ------------------------------------------------------------- semaphores */

/* The semaphores' wake policy: a message is a count of permits; it wakes
 * waiters whose needs (their permits asked) fit in it, none when it is 0 or
 * negative, all when it is not a count. */
int dlock__wake_permits(const char *msg, size_t len);
/* DLOCK_EINVAL (naming `what`) unless min <= n <= DLOCK_COUNT_MAX. */
int dlock__check_count(int64_t n, int64_t min, const char *what);
/* Adds delta to the available count of semaphore `name` (either kind: the
 * same string key, the same channel) and wakes waiters the new count can
 * serve (scripts/semaphore/add.lua). *count (may be NULL) = the new count,
 * *heard (may be NULL) = 1 when some client heard the message. A count that
 * would leave +-DLOCK_COUNT_MAX: DLOCK_EINVAL, unchanged. */
/* Its halves: the request (KEYS: semaphore, channel; ARGV: delta, bound),
 * and its answer (rc: the call's status; r freed), for the asynchronous form. */
void dlock__semaphore_add_op(dlock__op *op, const char *name, size_t nlen, const char *channel,
                             size_t clen, int64_t delta);
int dlock__semaphore_add_end(const char *what, const char *name, int rc, redisReply *r,
                             int64_t *count, int *heard);
int dlock__semaphore_add(dlock_client *c, const char *what, const char *name, size_t nlen,
                         const char *channel, size_t clen, int64_t delta, unsigned flags,
                         int64_t *count, int *heard);

/* ------------------------------------------------------------------ reply */

/* Reading script and command answers (reply.c). Each returns DLOCK_OK,
 * DLOCK__BUSY (acquire only), DLOCK_EWRONGTYPE (TYPE only) or DLOCK_EPROTO. */
/* Reservation state in a busy acquire answer (see scripts/lock/acquire.lua). */
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
/* A fair-lock acquire: DLOCK_OK (token when fenced), or DLOCK__BUSY with
 * *sleep (ms) and *why (0 held, 1 free but an earlier waiter goes first). */
int dlock__reply_fair_acquire(const redisReply *r, int fenced, int64_t *sleep, uint64_t *token,
                              int *why);
/* A read-write lock's acquire: DLOCK_OK (token when fenced), or DLOCK__BUSY
 * with *ttl, and *deadlock = 1 when the caller holds read holds of the lock
 * it asks to write (scripts/rw/write_acquire.lua). */
int dlock__reply_rw_acquire(const redisReply *r, int fenced, int64_t *ttl, uint64_t *token,
                            int *deadlock);
int dlock__reply_release(const redisReply *r, int *outcome, int *heard);
int dlock__reply_flag(const redisReply *r, int *flag);
int dlock__reply_integer(const redisReply *r, int64_t *v);
int dlock__reply_type_locked(const redisReply *r, int *locked);
int dlock__reply_count(const redisReply *r, int64_t *count);
/* A take (semaphore acquire): nil = DLOCK_OK; an integer = DLOCK__BUSY with
 * it in *v (the count available, or the ms to sleep). */
int dlock__reply_take(const redisReply *r, int64_t *v);
/* A count kept as a string (GET of a semaphore or latch): nil = 0, a decimal
 * integer (may be negative) = its value; another string = DLOCK_EWRONGTYPE
 * (somebody's data, not a count); anything else = DLOCK_EPROTO. */
int dlock__reply_signed(const redisReply *r, int64_t *v);
/* {a, b}: two integers. */
int dlock__reply_pair(const redisReply *r, int64_t *a, int64_t *b);
/* A fenced write's answer (scripts/fence/write.lua): written, with the
 * command's own reply in *value (pointing into r); or refused, with the
 * guard's highest token. */
int dlock__reply_fence(const redisReply *r, int *written, const redisReply **value,
                       uint64_t *highest);
/* A lock snapshot from one lock/inspect.lua entry; DLOCK_EWRONGTYPE names
 * what the key is in *what (pointing into r). */
int dlock__info_from_entry(const char *name, size_t nlen, const redisReply *e, dlock_info **out,
                           const char **what);

#endif
