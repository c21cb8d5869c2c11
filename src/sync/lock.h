/* The lock family inside the sync layer: one handle (dlock_lock) for every
 * lock type that has an owner, and the table of what differs per type.
 *
 * lock.c holds the handle, every public dlock_lock_* call, and what they
 * share: owner ids, the wait (wait.c), the watchdog's bookkeeping, the unlock
 * latch, the queries. A type (lock.c's reentrant lock, fair_lock.c, rwlock.c)
 * brings its keys, its channel, its scripts and how to read their answers.
 * Not installed. */
#ifndef DLOCK_SYNC_LOCK_H
#define DLOCK_SYNC_LOCK_H

#include "sync/sync.h"

typedef struct dlock__lock_type dlock__lock_type;

#define DLOCK__LOCK_KEYS 3   /* a type's own keys beyond the name, token and latch */

struct dlock_lock {
    dlock_client *c;
    const dlock__lock_type *type;
    char *name;
    size_t nlen;
    char *channel;           /* the type's channel (a fair lock's: the prefix of each
                                waiter's own channel) */
    size_t clen;
    char *token_key;         /* redisson_lock_token:{name} */
    size_t tlen;
    char *latch_prefix;      /* redisson_unlock_latch:{name}: */
    size_t lplen;
    char *key[DLOCK__LOCK_KEYS];   /* the type's own keys (reservation, queue, ...) */
    size_t klen[DLOCK__LOCK_KEYS];
    char *owner;             /* explicit owner id, or NULL for the calling thread */
    size_t olen;
    atomic_int heard;        /* the last release through this handle woke some client */
    pthread_mutex_t mu;      /* guards fn, ud */
    dlock_lost_fn fn;
    void *ud;
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
    char fbuf[DLOCK_OWNER_MAX + 16];   /* the field (id + suffix); a thread owner's id */
} dlock__owner;

/* One acquisition, from its first attempt to its end. */
typedef struct dlock__acq {
    dlock_lock *l;
    dlock__owner o;
    int64_t wait;            /* the caller's wait: 0, ms, or DLOCK_WAIT_FOREVER */
    int64_t lease;           /* ms, or DLOCK_WATCHDOG */
    int64_t lease_ms;        /* the TTL the script sets: lease, or the watchdog timeout */
    int fenced;
    dlock_cancel *cancel;
    int64_t sent;            /* before the last attempt was sent (the watchdog's origin) */
    uint64_t token;
    int state;               /* the type's: reservation state (lock), why busy (fair) */
    int queued;              /* the type registered the caller as a waiter in Redis */
    int streak;              /* the type's: busy answers of one kind in a row (fair) */
} dlock__acq;

struct dlock__lock_type {
    const char *what;        /* "lock", "fair lock", "read lock", "write lock" */
    const char *suffix;      /* the owner's field = owner id + suffix */
    const dlock__hold_kind *hold;
    /* 1 when a lease acquisition never shortens the key's TTL (a read lock
     * keeps the longest; a write reentry adds the lease): a renewed hold's
     * loss deadline then stays where it is. */
    int lease_keeps_ttl;
    /* Builds the handle's channel and own keys (l->key[]). */
    int (*init)(dlock_lock *l);
    /* The owner's per-type key into o->aux (may be NULL: none). */
    int (*owner_key)(const dlock_lock *l, dlock__owner *o);
    /* The hold as the watchdog sees it (parts point into l and o). */
    void (*hold_id)(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id);
    /* The channel this owner's waits listen on. */
    const char *(*wait_channel)(const dlock_lock *l, const dlock__owner *o, size_t *len);
    /* One attempt, in two halves so that several can share a round trip (a
     * multi-lock pipelines them): the request, then what its answer means
     * (wait.c's contract): DLOCK_OK (a->token set when fenced), DLOCK__BUSY
     * with *b, or an error. attempt_reply frees r. waited_ms: -1 on the first
     * attempt, then how long the call has waited. */
    void (*attempt_op)(dlock__acq *a, int64_t waited_ms, dlock__op *op);
    int (*attempt_reply)(dlock__acq *a, redisReply *r, dlock__busy *b);
    int (*busy_error)(dlock__acq *a, const dlock__busy *b);
    /* The clean-up of a wait that ends with rc after a busy answer (a
     * reservation handed back, a queue entry left): 1 with *op and *flags to
     * send once, best effort (its answer ignored), or 0 for none. May be NULL. */
    int (*give_up_op)(dlock__acq *a, int rc, dlock__op *op, unsigned *flags);
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
     * its answer (rc: the call's status; r freed): *locked = 1 when held. */
    void (*locked_op)(const dlock_lock *l, dlock__op *op);
    int (*locked_end)(dlock_lock *l, int rc, redisReply *r, int *locked);
};

extern const dlock__lock_type dlock__reentrant_type;
extern const dlock__lock_type dlock__fair_type;
extern const dlock__lock_type dlock__read_type;    /* rwlock.c */
extern const dlock__lock_type dlock__write_type;

/* Shared by the types whose holds are one hash field (reentrant, fair, write):
 * the watchdog kind (scripts/lock/renew.lua) and the hold's bytes. */
extern const dlock__hold_kind dlock__lock_hold;
void dlock__lock_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id);
/* The handle's channel, the same for every owner. */
const char *dlock__lock_shared_channel(const dlock_lock *l, const dlock__owner *o, size_t *len);
/* locked_op / locked_end for the types held as a hash of owner fields. */
void dlock__lock_hash_op(const dlock_lock *l, dlock__op *op);
int dlock__lock_hash_end(dlock_lock *l, int rc, redisReply *r, int *locked);
/* The queries (is locked, is held, hold count, TTL) in halves, for both
 * forms: the request (o: the handle's owner, for is held and hold count),
 * then its answer into *v. */
enum { DLOCK__Q_LOCKED, DLOCK__Q_HELD, DLOCK__Q_COUNT, DLOCK__Q_TTL };
void dlock__lock_query_op(const dlock_lock *l, const dlock__owner *o, int q, dlock__op *op);
int dlock__lock_query_end(dlock_lock *l, int q, int rc, redisReply *r, int64_t *v);
/* The owner a call of l acts for (dlock__lock_owner_done frees what it holds). */
int dlock__lock_owner(const dlock_lock *l, dlock__owner *o);
void dlock__lock_owner_done(dlock__owner *o);

/* A handle of a type; owner NULL: the calling thread. */
int dlock__lock_new(dlock_client *c, const dlock__lock_type *type, const char *name,
                    const char *owner, dlock_lock **out);
/* A script's answer of the wrong shape: frees r, sets the message. */
int dlock__lock_proto(const dlock_lock *l, const char *what, redisReply *r);
/* The verdict for a key that is not this type, with Redis's words for it. */
int dlock__lock_wrong_type(const dlock_lock *l);
/* The standard busy message ("held by another owner (expires in N ms)"). */
int dlock__lock_busy(const dlock_lock *l, int64_t ttl);
/* Sets an acquisition up (owner, lease) for l; DLOCK_OK or an error.
 * dlock__acq_done frees what it holds. */
int dlock__acq_init(dlock__acq *a, dlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                    dlock_cancel *cancel, int fenced);
void dlock__acq_done(dlock__acq *a);
/* One whole attempt: op, round trip, answer, and on success the watchdog's
 * bookkeeping (dlock__acq_acquired). */
int dlock__acq_attempt(dlock__acq *a, int64_t waited_ms, dlock__busy *b);
/* After an attempt answered DLOCK_OK: a DLOCK_WATCHDOG hold is renewed from
 * now on (if that cannot be scheduled, it is released and the error
 * returned); a lease acquisition moves a renewed hold's loss deadline. */
int dlock__acq_acquired(dlock__acq *a);
/* dlock__acq_acquired without the release on failure: the caller gives the
 * hold back its own way (an asynchronous release). */
int dlock__acq_hold(dlock__acq *a);
/* A wait's give-up (the type's give_up_op, sent once on the pool, best
 * effort, the caller's message kept). */
void dlock__acq_give_up(dlock__acq *a, int rc);
/* A force release's outcome from its call's status and reply (freed): the
 * type's verdicts, and the watchdog stops renewing the caller's own hold. */
int dlock__lock_force_end(dlock_lock *l, int rc, redisReply *r, int *was_locked);
/* One release of the owner's hold, in halves so that several can share a
 * round trip: dlock__rel_init builds the request (a fresh unlock latch, the
 * TTL to keep) and tells the watchdog a release is under way; the caller runs
 * x->op with x->flags and the client's latch_px; dlock__rel_end reads its
 * outcome (the call's status and reply, which it frees; for an error reply,
 * the calling thread's message must be set first) and tells the watchdog.
 * After a successful init, exactly one end. x must not move in between. */
typedef struct dlock__rel {
    dlock_lock *l;
    dlock__owner o;
    dlock__hold_id id;
    dlock__op op;
    unsigned flags;
    char *latch;
    size_t latch_len;
    char lbuf[256];
} dlock__rel;
int dlock__rel_init(dlock__rel *x, dlock_lock *l);
int dlock__rel_end(dlock__rel *x, int rc, redisReply *r);
/* A give-up's clean-up (a reservation handed back, a queue entry left): one
 * try with `flags` (DLOCK__CALL_NO_RETRY at least), its answer and any error
 * ignored, the caller's status `code` and its message kept. Should it fail,
 * what it meant to remove lapses by itself. */
void dlock__lock_best_effort(dlock_lock *l, const dlock__op *op, unsigned flags, int code);
/* Runs an op for the handle, mapping WRONGTYPE to the type's verdict. */
int dlock__lock_call(dlock_lock *l, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                     redisReply **r);

#endif
