/* The lock family inside the sync layer: one handle (dlock_lock) for every
 * lock type that has an owner, and the table of what differs per type.
 *
 * lock.c holds the handle, every public dlock_lock_* call (blocking and
 * asynchronous) as operations (sync.h: dlock__op_type), and what they share:
 * owner ids, the watchdog's bookkeeping, the unlock latch, the queries. A
 * type (reentrant.c, fair_lock.c, rwlock.c) brings its keys, its channel,
 * its scripts and how to read their answers. Not installed. */
#ifndef DLOCK_SYNC_LOCK_H
#define DLOCK_SYNC_LOCK_H

#include "sync/sync.h"

typedef struct dlock__lock_type dlock__lock_type;
typedef struct dlock__rq_listener dlock__rq_listener;

#define DLOCK__LOCK_KEYS 4   /* a type's own keys beyond the name, token and latch */
#define DLOCK__K_DELAY 2     /* key[]: the lock-delay marker (every lock type) */

struct dlock_lock {
    dlock__handle h;         /* the type's channel (a fair lock's: the prefix of each
                                waiter's own channel), in names; what: the type's */
    const dlock__lock_type *type;
    char *names;             /* one allocation: the names below and h.channel, each
                                NUL-terminated (lock.c: derive_names) */
    const char *token_key;   /* redisson_lock_token:{name} */
    size_t tlen;
    const char *latch_prefix;   /* redisson_unlock_latch:{name}: */
    size_t lplen;
    const char *key[DLOCK__LOCK_KEYS];   /* the type's own keys (reservation, queue, ...) */
    size_t klen[DLOCK__LOCK_KEYS];
    char *owner;             /* explicit owner id, or NULL for the calling thread */
    size_t olen;
    atomic_int heard;        /* the last release through this handle woke some client */
    pthread_mutex_t mu;      /* guards lost, max_hold */
    dlock__lost_cb lost;     /* its lost callback (none: the client's) */
    int64_t max_hold;        /* ms; 0: the client's; DLOCK_MAX_HOLD_NONE: none */
    int fence_all;           /* a fenced lock (Redisson's RFencedLock): every acquisition
                                counts a token (lock_kinds.c) */
    int no_reentry;          /* a non-reentrant lock (Redisson's RedissonNonReentrantLock and
                                ...FairLock): its holder's acquisition is refused,
                                DLOCK_EREENTRY (lock_kinds.c) */
    int spin;                /* a spin lock (Redisson's RedissonSpinLock): waits subscribe to
                                nothing and try again after each back-off step (backoff,
                                under mu; lock_kinds.c) */
    dlock_backoff backoff;
    int64_t lock_delay;      /* ms, 0 off; fixed by the first acquisition */
    atomic_int writer_first; /* a read or write lock's writer-first mode (rwlock.c): read
                                by each attempt */
    atomic_int attempted;    /* an acquisition was attempted through it */
    char delay_arg[24];      /* lock_delay in decimal: the renewal's argument */
    dlock__rq_listener *rq;  /* under mu: the revoke handler's subscription, or NULL
                                (revoke_request.c) */
};

/* The owner a call acts for, and what the type derives from it. */
typedef struct dlock__owner {
    const char *id;          /* "<uuid>:<n>" */
    size_t len;
    const char *field;       /* its field in the lock's hash: id + the type's suffix */
    size_t flen;
    char *aux;               /* the type's per-owner key (fair: the waiter's channel; read:
                                the hold's timeout prefix), or NULL */
    size_t alen;
    char *fheap;             /* the field when it does not fit fbuf (a long explicit id),
                                or NULL */
    /* The field (id + suffix); a thread owner's id. Sized for the usual ids
     * (a pending call's size is budgeted, test_async); longer: fheap. */
    char fbuf[DLOCK_OWNER_BUFSIZE + 16];
} dlock__owner;

/* One release of the owner's hold (dlock__rel_init .. dlock__rel_end): the
 * request (a fresh unlock latch, the TTL to keep, its flags and latch), the
 * watchdog told a release is under way. */
typedef struct dlock__rel {
    dlock_lock *l;
    dlock__owner o;
    dlock__hold_id id;
    dlock__op op;
    char *latch;
    size_t latch_len;
    int open;                /* init done, end not yet */
    int call;                /* 0: a give-back; 1: a release call's (lock.c: release_type),
                                which may release again for a hold of unknown outcome;
                                2: such a repeat */
    int again;               /* the answer owes one more release (call only) */
    char lbuf[256];
} dlock__rel;

/* One acquisition, from its first attempt to its end: the state of the
 * acquire operation (dlock__acquire_type). The caller sets l, wait, lease,
 * cancel, fenced and token_out (the rest zeroed); setup does the rest. */
typedef struct dlock__acq {
    dlock_lock *l;
    int64_t wait;            /* the caller's wait: 0, ms, or DLOCK_WAIT_FOREVER */
    int64_t asked_lease;     /* the caller's lease: ms, or DLOCK_WATCHDOG */
    dlock_cancel *cancel;
    uint64_t *token_out;     /* where the result writes the token (NULL: nowhere) */
    dlock__owner o;
    int64_t lease_ms;        /* the TTL the script sets: asked_lease, or the watchdog timeout
                                (either cut to what a hold limit leaves) */
    int64_t max_hold;        /* the hold limit of a watchdog acquisition, ms (0: none) */
    uint64_t token;
    int fenced;
    int state;               /* the type's: reservation state (lock), why busy (fair) */
    int queued;              /* the type registered the caller as a waiter in Redis */
    int streak;              /* the type's: busy answers of one kind in a row (fair) */
    int64_t intent_ms;       /* a writer-first writer's attempt: the life of the intent it
                                records (0: none; rwlock.c) */
    dlock__rel *back;        /* a give-back's release, while one runs */
} dlock__acq;

struct dlock__lock_type {
    const char *what;        /* "lock", "fair lock", "read lock", "write lock" */
    const char *suffix;      /* the owner's field = owner id + suffix */
    const dlock__hold_kind *hold;
    /* 1 when a lease acquisition never shortens the key's TTL (a read lock
     * keeps the longest; a write reentry adds the lease): a renewed hold's
     * loss deadline then stays where it is. */
    int lease_keeps_ttl;
    /* The handle's names, each "<prefix>:{name}" (lock.c derives them): the
     * channel's prefix, and the type's own keys' in l->key[] (NULL: no key;
     * "": the {name} alone). */
    const char *channel;
    const char *keys[DLOCK__LOCK_KEYS];
    /* Sets up what else the handle needs; may be NULL. */
    int (*init)(dlock_lock *l);
    /* The owner's per-type key into o->aux (may be NULL: none). */
    int (*owner_key)(const dlock_lock *l, dlock__owner *o);
    /* The hold as the watchdog sees it (parts point into l and o). */
    void (*hold_id)(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id);
    /* The same for a handle without a lock-delay (whatever l's): the entry of
     * the owner's holds that the client keeps no record of (holds.c). */
    void (*plain_hold_id)(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id);
    /* The channel this owner's waits listen on. */
    const char *(*wait_channel)(const dlock_lock *l, const dlock__owner *o, size_t *len);
    /* One attempt, in two halves: the request, then what its answer means:
     * DLOCK_OK (a->token set when fenced), DLOCK__BUSY with *b, or an error.
     * attempt_reply frees r. waited_ms: -1 on the first attempt, then how
     * long the call has waited. */
    void (*attempt_op)(dlock__acq *a, int64_t waited_ms, dlock__op *op);
    int (*attempt_reply)(dlock__acq *a, redisReply *r, dlock__busy *b);
    /* The a->state of a busy answer that found the lock free but in its
     * lock-delay (its error is dlock__delay_busy's, for every type). */
    int delayed;
    /* What a sleeping waiter watches (dlock__busy.watch): the lock after a
     * busy answer whose a->state is in held_states (bit 1 << state: the
     * lock's key exists); the marker after a `delayed` one when
     * watch_marker (the marker alone keeps the lock shut); else nothing. */
    unsigned held_states;
    int watch_marker;
    /* The error of a wait that ends busy in another state; NULL: the
     * standard one (dlock__lock_busy). */
    int (*busy_error)(dlock__acq *a, const dlock__busy *b);
    /* The clean-up of a wait that ends with rc after a busy answer (a
     * reservation handed back, a queue entry left): 1 with *op to send once,
     * best effort (its answer ignored), or 0 for none. May be NULL. */
    int (*give_up_op)(dlock__acq *a, int rc, dlock__op *op);
    /* The release of one hold: an op whose answer is nil (not held), 0 (holds
     * remain), 1 (the owner's last hold went, nobody woken) or 2 (went, and
     * somebody heard). `renew_ms` is the TTL to set while holds remain (0:
     * keep the current one). */
    void (*release_op)(const dlock_lock *l, const dlock__owner *o, const char *latch,
                       size_t latch_len, int64_t renew_ms, dlock__op *op);
    /* The error for a release that found the owner holding nothing (a
     * DLOCK_ENOTOWNER with the type's own words); NULL: the standard one. */
    int (*not_held)(dlock_lock *l, const dlock__owner *o);
    /* Delete whoever holds it, and wake; an answer 1 (was held) or 0. */
    void (*force_op)(const dlock_lock *l, dlock__op *op);
    /* Whether it is held in this type's sense, in halves: the request, then
     * its answer (rc: the call's status; res->r freed): *locked = 1 when held.
     * NULL (both): held when the key is a hash (reentrant, fair). */
    void (*locked_op)(const dlock_lock *l, dlock__op *op);
    int (*locked_end)(dlock_lock *l, int rc, dlock__res *res, int *locked);
};

extern const dlock__lock_type dlock__reentrant_type;
extern const dlock__lock_type dlock__fair_type;
extern const dlock__lock_type dlock__read_type;    /* rwlock.c */
extern const dlock__lock_type dlock__write_type;

/* The acquire operation (lock.c), whose hooks a multi-lock's parts call
 * (multilock_round.c): each lock's attempt is its type's own. */
extern const dlock__op_type dlock__acquire_type;

/* Shared by the types whose holds are one hash field (reentrant, fair, write):
 * the watchdog kind (scripts/lock/renew.lua) and the hold's bytes. */
extern const dlock__hold_kind dlock__lock_hold;
void dlock__lock_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id);
/* dlock_lock_set_lock_delay: any lock type's, before its first acquisition. */
int dlock__lock_set_delay(dlock_lock *l, int64_t ms);
/* The lock-delay shared by every lock type (reentrant.c): init takes the
 * client's delay (the marker dlock_lock_delay:{name}, key[DLOCK__K_DELAY], is
 * among the type's names); with a delay, delay_key adds the marker to a
 * script's KEYS and delay_arg the delay to its ARGV (nothing without one);
 * hold_id renews the marker with the lock (scripts/lock/renew_delay.lua; a
 * read hold has its own, rwlock.c); delay_busy is the
 * DLOCK_ETIMEDOUT of a free lock still in its delay, for `left` ms more. */
int dlock__delay_init(dlock_lock *l);
void dlock__delay_key(const dlock_lock *l, dlock__op *op);
void dlock__delay_arg(const dlock_lock *l, dlock__op *op);
/* An acquire script's last ARGV (reentrant and fair locks): a
 * non-reentrant handle's delay (always) and its flag "1", else the delay
 * as dlock__delay_arg adds it. */
void dlock__acquire_tail_args(const dlock_lock *l, dlock__op *op);
void dlock__delay_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id);
int dlock__delay_busy(const dlock_lock *l, int64_t left);
/* An acquire script's answer read by the type's reader (dlock__reply_acquire,
 * dlock__reply_fair_acquire: its ms, a->state, a->token when fenced): its
 * status, DLOCK_EPROTO reported with the reply. On DLOCK__BUSY, b->ttl is the
 * reader's ms and b->first 0, for the type to adjust. Frees r. */
typedef int (*dlock__acq_reader)(const redisReply *r, int fenced, int64_t *ms, uint64_t *token,
                                 int *state);
int dlock__acq_read(dlock__acq *a, redisReply *r, dlock__acq_reader read, dlock__busy *b);
/* The handle's channel, the same for every owner. */
const char *dlock__lock_shared_channel(const dlock_lock *l, const dlock__owner *o, size_t *len);

/* The standard busy message ("held by another owner (expires in N ms)"). */
int dlock__lock_busy(const dlock_lock *l, int64_t ttl);
/* A release of l's hold for the calling thread or its owner, in halves (a
 * multi-lock's give-back runs them as a part): dlock__rel_init builds the request;
 * the caller runs x->op; dlock__rel_end reads its outcome (the call's status
 * and res, whose reply it frees; for an error reply, the calling thread's
 * message must be set first) and tells the watchdog. After a successful
 * init, exactly one end. x must not move in between. */
int dlock__rel_init(dlock__rel *x, dlock_lock *l);
int dlock__rel_end(dlock__rel *x, int rc, dlock__res *res);
/* dlock__rel_init for the owner of an acquisition (its id), on any thread. */
int dlock__rel_init_as(dlock__rel *x, dlock_lock *l, const dlock__owner *as);
/* A release begun and never answered (the client closed first): ended as
 * an attempt of unknown outcome (the watchdog, the holds); the thread's
 * message kept. Nothing when ended already. */
void dlock__rel_closed(dlock__rel *x);
/* The same for an acquisition's give-back (a->back) in flight. */
void dlock__acq_closed(dlock__acq *a);

/* The client's per-owner record (holds.c; dlock__holds in sync.h), keyed by
 * l's name and o's field: an acquisition answered (unknown 0) or ended
 * DLOCK_EUNKNOWN (unknown 1), with the lease it asked (ms, no shorter than
 * the TTL it set, or DLOCK_WATCHDOG: a renewed hold); a release's outcome (answered 0: the call
 * failed; else a DLOCK__RELEASE_* outcome). dlock__holds_released returns 1
 * when the release ended the owner's last known hold, holds remain, and an
 * acquisition of unknown outcome is owed a release (counted off): only when
 * may_repeat (the release's call: 0 a give-back, 1 the caller's, 2 such a repeat,
 * which takes no known hold off). */
void dlock__holds_acquired(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                           int unknown, int64_t lease_ms);
int dlock__holds_released(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                          int answered, int outcome, int may_repeat);
/* Before an extension of the owner's lease hold is sent (it may run): the
 * record is kept until that lease could end. */
void dlock__holds_extend(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                         int64_t lease_ms);

/* The owner a call on l acts for (the handle's, or the calling thread's),
 * with its field and per-owner key; dlock__lock_owner_done frees what it
 * allocated. For the calls outside lock.c (lock_query.c, lock_hold.c). */
int dlock__lock_owner(const dlock_lock *l, dlock__owner *o);
/* The same for owner `by` (blen bytes; NULL: the handle's or the calling
 * thread's). */
int dlock__lock_owner_by(const dlock_lock *l, const char *by, size_t blen, dlock__owner *o);
/* A lock call's first checks: the handle, and for an asynchronous call (via)
 * an explicit owner, since a callback does not run on the thread that asked. */
int dlock__lock_check_call(const dlock_lock *l, const dlock__via *via);
void dlock__lock_owner_done(dlock__owner *o);
/* A new handle of a type for the calling thread (owner NULL) or an explicit
 * owner (checked), as the dlock_*lock_get calls make them. */
int dlock__lock_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                    const char *owner, dlock_lock **out);

/* The hold limit a watchdog hold through l gets now (the handle's, else
 * the client's), ms; 0: none. */
int64_t dlock__lock_hold_limit(dlock_lock *l);

/* dlock_lock_free's: the revoke handler's subscription stopped, if any. */
void dlock__lock_rq_free(dlock_lock *l);

/* dlock_lock_release_async with the caller's completion (a multi-lock
 * giving back what a round whose outcome it never read took). */
int dlock__lock_release_via(dlock_lock *l, const dlock__via *via);

#endif
