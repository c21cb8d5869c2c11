/* What the benchmarks and the tests may see of a client beyond the public
 * API: counters and states they measure or wait for, nothing to act on.
 * Implemented in sync/hooks.c; includes the public header only, so a
 * program that uses it does not see the client's insides. Not installed. */
#ifndef DLOCK_SYNC_HOOKS_H
#define DLOCK_SYNC_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

/* The calling thread's counters since it started (each only grows): round
 * trips written on pooled connections, acquire attempts (scripts sent by
 * waiting calls), and wake-ups whose attempt found the object taken again. */
uint64_t dlock__hook_roundtrips(void);
uint64_t dlock__hook_attempts(void);
uint64_t dlock__hook_wakeups_wasted(void);
/* The writes of c's io thread for its asynchronous round trips (one per node
 * per turn of its loop): a multi-lock's attempts go there, blocking call or
 * not. */
uint64_t dlock__hook_async_writes(dlock_client *c);

/* Holds the client's watchdog renews now. */
size_t dlock__hook_held(dlock_client *c);
/* Revocation's state: 0 off, 1 coming up (some hold's key not tracked yet),
 * 2 on with every hold's key tracked. */
int dlock__hook_tracking(dlock_client *c);
/* The primaries the client knows that hold keys (one but on a cluster). */
size_t dlock__hook_primaries(dlock_client *c);
/* This process's waiters on l's channel (its client's waiter table). */
size_t dlock__hook_lock_waiters(const dlock_lock *l);

/* The acquire script's body (scripts/lock/acquire.lua), for a reference
 * loop that runs it without dlock: *len its length. */
const char *dlock__hook_acquire_script(size_t *len);
/* The first server a URL names (a cluster URL: its first seed): host and
 * port, or a unix socket's path (host ""). DLOCK_OK or DLOCK_EINVAL. */
int dlock__hook_server(const char *url, char *host, size_t hsize, int *port, char *path,
                       size_t psize);

#endif
