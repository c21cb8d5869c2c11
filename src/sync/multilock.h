/* Multi-lock and RedLock inside the sync layer (docs/internals/multilock.md):
 * the handle (multilock.c: made, checked, the public calls) and the two
 * composite operations both drivers run (multilock_round.c: the rounds of
 * lock attempts, the decision, the give-back, the release). Not installed. */
#ifndef DLOCK_SYNC_MULTILOCK_H
#define DLOCK_SYNC_MULTILOCK_H

#include "sync/lock.h"

struct dlock_multilock {
    /* What the drivers see: the first lock's client (an asynchronous call
     * runs on its io thread) and channel (a wait's until a busy lock names
     * its own); the name is the label. */
    dlock__handle h;
    int red;                 /* RedLock: a quorum, not all */
    size_t n;
    size_t quorum;
    dlock_lock **locks;
    char label[160];         /* for messages: "multi-lock a, b, c" */
};

/* One lock of a call (multilock_round.c), and its size. */
typedef struct dlock__ml_slot dlock__ml_slot;
extern const size_t dlock__ml_slot_size;

/* A call's state (either operation's): the caller fills ml and, for an
 * acquisition, o; setup allocates the rest, done frees it. Copied as it is
 * into an asynchronous call: what it points to is the call's own. */
typedef struct dlock__ml_call {
    const dlock_multilock *ml;
    dlock_wait_opts o;       /* the caller's wait, lease and cancel token */
    dlock__ml_slot *s;       /* ml->n */
    dlock__part **sel;       /* a round's parts */
    size_t ready;            /* slots whose acquisition is set up */
    int phase;               /* the round out: its attempts, or its give-back */
    size_t target;           /* the lock waited on, or (size_t)-1 */
    int64_t lease;           /* the shortest TTL the attempts set (ms) */
    int64_t started;         /* the round's first part sent (ms) */
    int64_t took_ms;         /* how long the last round took */
    int stale;               /* it took all (a quorum) too late to use */
    size_t taken, failed;    /* what the last round took, and how many failed */
    size_t back_err;         /* the first lock whose give-back failed (its message in its
                                slot), or (size_t)-1 */
    int back_rc;             /* ... and its status */
} dlock__ml_call;

/* Acquire (wait spec: the caller's) and release (no wait). */
extern const dlock__op_type dlock__ml_acquire_type;
extern const dlock__op_type dlock__ml_release_type;

#endif
