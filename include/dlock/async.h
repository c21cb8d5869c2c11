/* dlock asynchronous API: every call that waits or makes a round trip, in a
 * form that returns at once and completes through a callback.
 *
 *     #include <dlock/async.h>     (includes <dlock/dlock.h>)
 *
 * For event-loop programs (libuv, libevent, epoll loops): thousands of
 * pending acquisitions from one thread, no thread per waiter. A pending wait
 * sleeps on pub/sub exactly as a blocking one does: no polling.
 *
 * Rules (libuv's):
 *   - A call that returns DLOCK_OK has accepted the request: its callback
 *     runs exactly once, later, never inside the call. A call that returns an
 *     error has not: its callback never runs, and dlock_last_error() says why.
 *   - Callbacks run on the client's io thread (or on the thread of the
 *     program's libuv loop: dlock_config_set_uv_loop), one at a time, with no
 *     library lock held. The result and its message are valid only during
 *     the callback: copy what you keep.
 *   - dlock_client_close() with calls pending: each pending callback runs
 *     exactly once, with DLOCK_ECLOSED, before close returns (on the io
 *     thread). Do not start calls while close runs, and never call
 *     dlock_client_close() from a callback.
 *   - The lock handle (and the cancel token, if any) must stay alive until
 *     the callback has run; the callback itself may free them.
 *
 * Deployments: every one the blocking calls work on. Each request goes to
 * the node that serves its name (behind Sentinel the primary of the moment;
 * on a cluster the owner of the name's slot), one connection per node, and
 * a node that answers MOVED, ASK, READONLY or CLUSTERDOWN has the request
 * sent again, routed afresh, after the retry delay (within the retry
 * budget), as the blocking calls do.
 *
 * Ownership. Work moves between callbacks, not threads, so an asynchronous
 * call acts for an explicit owner id: the handle must come from
 * dlock_lock_get_as() (or dlock_fair_lock_get_as(), dlock_read_lock_get_as(), dlock_write_lock_get_as()).
 * A handle that acts for the calling thread gets DLOCK_EINVAL. A hold taken
 * asynchronously may be released by the blocking call and the other way
 * round: the owner id is what counts.
 *
 *     char owner[DLOCK_OWNER_BUFSIZE];
 *     dlock_client_new_owner_id(c, owner, sizeof(owner));   // one per request
 *     dlock_lock *l;
 *     dlock_lock_get_as(c, "order:42", owner, &l);
 *     dlock_wait_opts o = {.wait_ms = 5000};               // lease: the watchdog
 *     dlock_lock_acquire_async(l, &o, on_locked, req);
 *
 *     static void on_locked(const dlock_async_result *res, void *ud) {
 *         if (dlock_async_status(res) != DLOCK_OK) { ...dlock_async_message(res)...; return; }
 *         ...work, then: dlock_lock_release_async(l, on_released, ud);
 *     }
 *
 * What a callback may call: every asynchronous call (it is queued and runs
 * after the callback returns), every call that makes no round trip
 * (handles, owner ids, cancel tokens, dlock_lock_free of a handle with no
 * call pending but this one). Blocking calls with a wait are refused there
 * (DLOCK_EINVAL); other blocking calls work but hold up every pending call
 * and the watchdog for a round trip: prefer the asynchronous form.
 *
 * Cancellation: dlock_cancel_fire() from any thread ends the pending waits
 * that carry the token with DLOCK_ECANCELED (a round trip already written
 * ends first: if it took the lock, the result is DLOCK_OK).
 */
#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The outcome of an asynchronous call, valid during its callback only. */
typedef struct dlock_async_result dlock_async_result;

/* A completion callback: res is never NULL; ud is the caller's. */
typedef void (*dlock_async_fn)(const dlock_async_result *res, void *ud);

/* The call's status: DLOCK_OK or an error code (as the blocking form's). */
DLOCK_API int dlock_async_status(const dlock_async_result *res);
/* Its detail message ("" when DLOCK_OK); valid during the callback. */
DLOCK_API const char *dlock_async_message(const dlock_async_result *res);
/* The fencing token of a fenced acquisition (options with a token; 0
 * otherwise). */
DLOCK_API uint64_t dlock_async_token(const dlock_async_result *res);
/* The yes/no answer of a call that has one (a force release's "was locked",
 * is locked, is held, a try-set's "was set", a delete's "existed", a
 * try-release's "released"; 0 for the others). */
DLOCK_API int dlock_async_flag(const dlock_async_result *res);
/* A count the call answers (a hold count, a TTL, a semaphore's available or
 * new count, a drain's permits, a latch's count; -1 for calls without one). */
DLOCK_API int64_t dlock_async_count(const dlock_async_result *res);
/* An acquired permit's id (32 hex characters; "" for other calls), valid
 * during the callback: copy it (DLOCK_PERMIT_ID_BUFSIZE bytes). */
DLOCK_API const char *dlock_async_permit_id(const dlock_async_result *res);

/* The i-th permit id (0-based) of an n-permit acquisition
 * (dlock_permit_semaphore_acquire_n_async: dlock_async_count() is n), 32 hex
 * characters, valid during the callback: copy them; "" for i >= n and for
 * other calls. dlock_async_permit_id() is the first. */
DLOCK_API const char *dlock_async_permit_ids(const dlock_async_result *res, size_t i);

/* dlock_lock_acquire_opts() asynchronously, for any lock type (reentrant,
 * fair, read, write). The options (NULL: one attempt, the watchdog) are
 * copied at the call; o->cancel and o->token must stay valid until the
 * callback has run, and a fenced acquisition's token is written to
 * *o->token before it runs (dlock_async_token() gives it too). The
 * callback's status: DLOCK_OK, DLOCK_ETIMEDOUT, DLOCK_ECANCELED,
 * DLOCK_ECLOSED, DLOCK_EDEADLK (a reader asking for the write lock),
 * DLOCK_EUNKNOWN (sent, no answer), or the blocking call's other errors.
 * Returns DLOCK_OK (accepted) or DLOCK_EINVAL (NULL lock or fn, bad options,
 * a thread-owner handle), DLOCK_ECLOSED, DLOCK_ENOMEM. Any thread. */
DLOCK_API int dlock_lock_acquire_async(dlock_lock *l, const dlock_wait_opts *o,
                                       dlock_async_fn fn, void *ud);
/* dlock_lock_release() asynchronously: one hold of the handle's owner.
 * Status DLOCK_OK, DLOCK_ENOTOWNER, or a connection error (a lost reply is
 * resent under the same unlock latch, so a release never counts twice).
 * A successful release of a watchdog hold whose renewal is on its way calls
 * fn once that renewal is answered (at most the command timeout + 1 s
 * later), as dlock_lock_release() returns; other releases are not held up.
 * A hold of unknown outcome (an acquisition that ended DLOCK_EUNKNOWN) is
 * released with the owner's last known one, as dlock_lock_release() does,
 * before fn runs. Any thread. */
DLOCK_API int dlock_lock_release_async(dlock_lock *l, dlock_async_fn fn, void *ud);
/* dlock_lock_force_release() asynchronously: dlock_async_flag() tells
 * whether it was held. Not resent after a lost reply. Any thread. */
DLOCK_API int dlock_lock_force_release_async(dlock_lock *l, dlock_async_fn fn, void *ud);

/* dlock_lock_request_revoke() asynchronously: dlock_async_flag() is 1 when
 * the lock was held (holders were asked), dlock_async_count() the
 * listeners that heard it. Any handle (a thread-owner one too: the request
 * acts for no owner). Not resent after a lost reply. Any thread. */
DLOCK_API int dlock_lock_request_revoke_async(dlock_lock *l, const char *note, dlock_async_fn fn,
                                              void *ud);

/* The lock queries asynchronously (same rules: an explicit-owner handle):
 * is locked (flag), is held by the handle's owner (flag), its hold count
 * (count), the key's TTL in ms (count: -1 no expiry, -2 no key). Any thread. */
DLOCK_API int dlock_lock_is_locked_async(dlock_lock *l, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_lock_is_held_async(dlock_lock *l, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_lock_hold_count_async(dlock_lock *l, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_lock_ttl_async(dlock_lock *l, dlock_async_fn fn, void *ud);
/* dlock_lock_get_token() asynchronously: the token in dlock_async_token()
 * (0 when none was given). Any handle, any owner form. Any thread. */
DLOCK_API int dlock_lock_get_token_async(dlock_lock *l, dlock_async_fn fn, void *ud);
/* dlock_lock_extend() asynchronously (an explicit-owner handle): status
 * DLOCK_OK, DLOCK_ENOTOWNER, DLOCK_EINVAL (a watchdog hold, in the
 * callback), DLOCK_EWRONGTYPE or a connection error; the call itself
 * returns DLOCK_EINVAL for a bad lease or handle type. Any thread. */
DLOCK_API int dlock_lock_extend_async(dlock_lock *l, int64_t lease_ms, dlock_async_fn fn,
                                      void *ud);
/* dlock_lock_transfer() and dlock_lock_adopt() asynchronously (an
 * explicit-owner handle); the new owner id is copied at the call. Status as
 * the blocking calls'; the adoption's hold count in dlock_async_count(). The
 * call itself returns DLOCK_EINVAL for bad arguments or handle type. Any
 * thread. */
DLOCK_API int dlock_lock_transfer_async(dlock_lock *l, const char *new_owner,
                                        dlock_async_fn fn, void *ud);
DLOCK_API int dlock_lock_adopt_async(dlock_lock *l, int64_t lease_ms, dlock_async_fn fn,
                                     void *ud);

/* dlock_semaphore_acquire_opts() asynchronously: n permits (1 ..
 * DLOCK_COUNT_MAX), the options copied at the call (NULL: one try; o->cancel
 * must stay valid until the callback has run). Status DLOCK_OK,
 * DLOCK_ETIMEDOUT, DLOCK_ECANCELED, DLOCK_ECLOSED, ... Semaphores have no
 * owner: any handle. Any thread. */
DLOCK_API int dlock_semaphore_acquire_async(dlock_semaphore *s, int64_t n,
                                            const dlock_wait_opts *o, dlock_async_fn fn,
                                            void *ud);
/* dlock_semaphore_release() asynchronously (n permits back, waiters woken).
 * Not resent after a lost reply (DLOCK_EUNKNOWN then). Any thread. */
DLOCK_API int dlock_semaphore_release_async(dlock_semaphore *s, int64_t n, dlock_async_fn fn,
                                            void *ud);
/* The semaphore's other calls, asynchronously (one round trip each, the
 * blocking calls' rules and retries): set (DLOCK_OK), try-set (flag: 1 when
 * it was unset and is now set), add (count: the new count; waiters woken),
 * available (count), drain (count: the permits taken). Bad arguments are
 * refused at the call, as the blocking forms do. Any thread. */
DLOCK_API int dlock_semaphore_set_permits_async(dlock_semaphore *s, int64_t permits,
                                                dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_try_set_permits_async(dlock_semaphore *s, int64_t permits,
                                                    dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_add_permits_async(dlock_semaphore *s, int64_t delta,
                                                dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_available_async(dlock_semaphore *s, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_drain_async(dlock_semaphore *s, dlock_async_fn fn, void *ud);
/* The semaphore's lifecycle asynchronously (dlock.h gives each contract):
 * delete (flag: it existed), expire (flag: the key exists), TTL (count: ms,
 * -1 none, -2 no key), try set permits with a TTL (flag: set), release if
 * exists (flag: released). Any thread. */
DLOCK_API int dlock_semaphore_delete_async(dlock_semaphore *s, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_expire_async(dlock_semaphore *s, int64_t ttl_ms,
                                           dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_ttl_async(dlock_semaphore *s, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_semaphore_try_set_permits_ttl_async(dlock_semaphore *s, int64_t permits,
                                                        int64_t ttl_ms, dlock_async_fn fn,
                                                        void *ud);
DLOCK_API int dlock_semaphore_release_if_exists_async(dlock_semaphore *s, int64_t n,
                                                      dlock_async_fn fn, void *ud);
/* dlock_permit_semaphore_acquire_opts() asynchronously, the options copied
 * at the call (NULL: one try, the watchdog): the permit's id is
 * dlock_async_permit_id() in the callback; o->lease_ms > 0 or DLOCK_WATCHDOG
 * (renewed until released). Any thread. */
DLOCK_API int dlock_permit_semaphore_acquire_async(dlock_permit_semaphore *p,
                                                   const dlock_wait_opts *o, dlock_async_fn fn,
                                                   void *ud);
/* dlock_permit_semaphore_try_n() asynchronously: n permits (1 ..
 * DLOCK_COUNT_MAX), all or none, in one script per attempt, the options
 * copied at the call (NULL: one try, the watchdog; o->cancel must stay valid
 * until the callback has run). On DLOCK_OK dlock_async_count() is n and
 * dlock_async_permit_ids(res, 0..n-1) the ids; DLOCK_ETIMEDOUT,
 * DLOCK_ECANCELED, DLOCK_ECLOSED (none held then), DLOCK_EINVAL in the
 * callback for n above the semaphore's total, or the blocking call's other
 * errors. The call returns DLOCK_EINVAL (n < 1, bad options, NULL p or fn),
 * DLOCK_ECLOSED, DLOCK_ENOMEM. Any thread. */
DLOCK_API int dlock_permit_semaphore_acquire_n_async(dlock_permit_semaphore *p, int64_t n,
                                                     const dlock_wait_opts *o,
                                                     dlock_async_fn fn, void *ud);
/* dlock_permit_semaphore_try_release_list() asynchronously: DLOCK_OK with
 * dlock_async_count() = the number released (n, or 0 when one id was not
 * held: nothing released then) and dlock_async_flag() = released > 0. The
 * ids are copied at the call; bad lists are refused there (DLOCK_EINVAL, as
 * the blocking form). Not resent after a lost answer. Any thread. */
DLOCK_API int dlock_permit_semaphore_try_release_list_async(dlock_permit_semaphore *p,
                                                            const char *const *ids, size_t n,
                                                            dlock_async_fn fn, void *ud);
/* dlock_permit_semaphore_release_list() asynchronously: as the try form, but
 * DLOCK_ENOTOWNER in the callback when nothing was released. Any thread. */
DLOCK_API int dlock_permit_semaphore_release_list_async(dlock_permit_semaphore *p,
                                                        const char *const *ids, size_t n,
                                                        dlock_async_fn fn, void *ud);
/* dlock_permit_semaphore_acquired() and dlock_permit_semaphore_permits()
 * asynchronously: dlock_async_count() = the permits held under a lease, or
 * available + held, after expired permits went back. Any thread. */
DLOCK_API int dlock_permit_semaphore_acquired_async(dlock_permit_semaphore *p,
                                                    dlock_async_fn fn, void *ud);
DLOCK_API int dlock_permit_semaphore_permits_async(dlock_permit_semaphore *p, dlock_async_fn fn,
                                                   void *ud);
/* dlock_permit_semaphore_release() asynchronously: DLOCK_OK, or
 * DLOCK_ENOTOWNER (unknown or expired permit). id is copied. Any thread. */
DLOCK_API int dlock_permit_semaphore_release_async(dlock_permit_semaphore *p, const char *id,
                                                   dlock_async_fn fn, void *ud);
/* dlock_permit_semaphore_try_release() asynchronously: DLOCK_OK, and the
 * flag says whether it was held (released now). Any thread. */
DLOCK_API int dlock_permit_semaphore_try_release_async(dlock_permit_semaphore *p,
                                                       const char *id, dlock_async_fn fn,
                                                       void *ud);
/* dlock_permit_semaphore_force_release() asynchronously: DLOCK_OK, and the
 * flag says whether it was held. Any thread. */
DLOCK_API int dlock_permit_semaphore_force_release_async(dlock_permit_semaphore *p,
                                                         const char *id, dlock_async_fn fn,
                                                         void *ud);
/* dlock_permit_semaphore_update_lease() asynchronously: DLOCK_OK or
 * DLOCK_ENOTOWNER; DLOCK_WATCHDOG puts the permit under renewal, a lease
 * takes it off. Any thread. */
DLOCK_API int dlock_permit_semaphore_update_lease_async(dlock_permit_semaphore *p,
                                                        const char *id, int64_t lease_ms,
                                                        dlock_async_fn fn, void *ud);
/* The permit semaphore's pool, asynchronously: set the total, try-set (flag), add
 * (count: the new count), available (count; the permits held:
 * dlock_permit_semaphore_acquired_async). Any thread. */
DLOCK_API int dlock_permit_semaphore_set_total_async(dlock_permit_semaphore *p,
                                                     int64_t permits, dlock_async_fn fn,
                                                     void *ud);
DLOCK_API int dlock_permit_semaphore_try_set_permits_async(dlock_permit_semaphore *p,
                                                           int64_t permits, dlock_async_fn fn,
                                                           void *ud);
DLOCK_API int dlock_permit_semaphore_add_permits_async(dlock_permit_semaphore *p, int64_t delta,
                                                       dlock_async_fn fn, void *ud);
DLOCK_API int dlock_permit_semaphore_available_async(dlock_permit_semaphore *p,
                                                     dlock_async_fn fn, void *ud);
/* dlock_permit_semaphore_lease_time() asynchronously: count = the ms left
 * (-1: no lease); DLOCK_ENOTOWNER for a permit not held. And the lifecycle
 * calls: delete (flag: existed), expire (flag: the key exists), TTL
 * (count). Any thread. */
DLOCK_API int dlock_permit_semaphore_lease_time_async(dlock_permit_semaphore *p, const char *id,
                                                      dlock_async_fn fn, void *ud);
DLOCK_API int dlock_permit_semaphore_delete_async(dlock_permit_semaphore *p, dlock_async_fn fn,
                                                  void *ud);
DLOCK_API int dlock_permit_semaphore_expire_async(dlock_permit_semaphore *p, int64_t ttl_ms,
                                                  dlock_async_fn fn, void *ud);
DLOCK_API int dlock_permit_semaphore_ttl_async(dlock_permit_semaphore *p, dlock_async_fn fn,
                                               void *ud);
/* dlock_latch_await_opts() asynchronously, the options copied at the call
 * (NULL: check once): DLOCK_OK once the count is zero, DLOCK_ETIMEDOUT,
 * DLOCK_ECANCELED, DLOCK_ECLOSED. Any thread. */
DLOCK_API int dlock_latch_await_async(dlock_latch *l, const dlock_wait_opts *o,
                                      dlock_async_fn fn, void *ud);
/* dlock_latch_count_down() asynchronously; dlock_async_count() is the count
 * left. Any thread. */
DLOCK_API int dlock_latch_count_down_async(dlock_latch *l, dlock_async_fn fn, void *ud);
/* The latch's other calls, asynchronously: try-set (flag: 1 when it was
 * unset and now counts `count`), delete (flag: 1 when it existed; awaiters
 * woken), count (count). Any thread. */
DLOCK_API int dlock_latch_try_set_count_async(dlock_latch *l, int64_t count, dlock_async_fn fn,
                                              void *ud);
DLOCK_API int dlock_latch_delete_async(dlock_latch *l, dlock_async_fn fn, void *ud);
DLOCK_API int dlock_latch_count_async(dlock_latch *l, dlock_async_fn fn, void *ud);

/* ---------------------------------------------------------- rate limiter */

/* dlock_rate_limiter_acquire_opts() asynchronously: the same wait (a timer
 * on the io thread until the oldest grant frees its permits);
 * dlock_async_token() is the grant's time on the server's clock (and
 * *o->token, when given, is set before the callback). Any thread. */
DLOCK_API int dlock_rate_limiter_acquire_async(dlock_rate_limiter *r, int64_t permits,
                                               const dlock_wait_opts *o, dlock_async_fn fn,
                                               void *ud);
/* The rate limiter's other calls, asynchronously: try-set-rate and set-rate
 * (dlock_async_flag(): set), available (dlock_async_count()), release
 * (permits >= 1; dlock_async_count(): the count left). Any thread. */
DLOCK_API int dlock_rate_limiter_try_set_rate_async(dlock_rate_limiter *r,
                                                    const dlock_rate_config *cfg,
                                                    dlock_async_fn fn, void *ud);
DLOCK_API int dlock_rate_limiter_set_rate_async(dlock_rate_limiter *r,
                                                const dlock_rate_config *cfg, int keep_state,
                                                dlock_async_fn fn, void *ud);
DLOCK_API int dlock_rate_limiter_available_async(dlock_rate_limiter *r, dlock_async_fn fn,
                                                 void *ud);
DLOCK_API int dlock_rate_limiter_release_async(dlock_rate_limiter *r, int64_t permits,
                                               dlock_async_fn fn, void *ud);

/* ---------------------------------------------------- multi-lock, RedLock */

/* dlock_multilock_acquire_opts() asynchronously, for a multi-lock or a
 * RedLock whose locks are all explicit-owner handles (dlock_lock_get_as and
 * the like; another gets DLOCK_EINVAL at the call): the blocking call's
 * rounds, decision and wait, the same code. All or nothing: in rounds,
 * every lock tried at once (the one waited on as a waiting acquire, the
 * others with no wait); all taken (a RedLock: a majority, within its
 * validity: the lease less the round's time and the clock drift), DLOCK_OK;
 * else what was taken is released before anything else, and the call waits
 * on one busy lock (pub/sub, never polling; a RedLock looks again within
 * 50..100 ms), then the next round. Nothing is held while waiting, nor when
 * the callback's status is not DLOCK_OK: DLOCK_ETIMEDOUT, DLOCK_ECANCELED
 * (o->cancel), DLOCK_ECLOSED, or a lock's error (a RedLock: errors on more
 * servers than its margin). The options are copied at the call (NULL: one
 * round, the watchdog; o->token must be NULL). The multi-lock, its locks and
 * the cancel token must stay alive until the callback has run. The locks may
 * be on several clients: each lock's attempts run on its own client's io
 * thread, a round is decided where its last answer came, and the callback
 * runs on the io thread of one of those clients (on the program's loop
 * thread when the first lock's client is embedded: dlock_config_set_uv_loop);
 * none of them may be closed while the call is pending. A multi-lock's
 * attempts have their clients' retries; a RedLock's attempts (and releases)
 * get one connection attempt and no retry, as the blocking RedLock's: a
 * server that is down fails its lock's attempt (DLOCK_ECONN) as soon as its
 * connection is refused, at most that client's connect timeout later (a
 * server that drops packets), and the quorum of the others decides. Any
 * thread. */
DLOCK_API int dlock_multilock_acquire_async(dlock_multilock *ml, const dlock_wait_opts *o,
                                            dlock_async_fn fn, void *ud);
/* dlock_multilock_release() asynchronously: every lock released at once.
 * A multi-lock: DLOCK_OK, or the first error answered; a RedLock: DLOCK_OK
 * when a majority was released, else an error. Any thread. */
DLOCK_API int dlock_multilock_release_async(dlock_multilock *ml, dlock_async_fn fn, void *ud);

/* ------------------------------------------------------------ election */

/* The text a call answers, valid during the callback (copy it): the
 * leader's "host pid owner" for dlock_election_leader_async and
 * dlock_election_await_change_async ("" when none, and for other calls). */
DLOCK_API const char *dlock_async_text(const dlock_async_result *res);

/* dlock_election_campaign() asynchronously (any election handle: each
 * campaigns as an owner id of its own): the election's lock taken (fenced), then the new
 * term announced, two steps the callback follows; the term is
 * dlock_async_token(). Options copied at the call (NULL: one try; o->token
 * must be NULL here: the term comes in the result; o->cancel must stay
 * valid until the callback has run). Status DLOCK_OK, DLOCK_ETIMEDOUT,
 * DLOCK_ECANCELED, DLOCK_ECLOSED, or the blocking call's errors; an
 * announcement that fails gives the lock back first (nothing held then).
 * Already leading: the same term, after one round trip. The election handle
 * must stay alive until the callback has run. Any thread. */
DLOCK_API int dlock_election_campaign_async(dlock_election *e, const dlock_wait_opts *o,
                                            dlock_async_fn fn, void *ud);
/* dlock_election_resign() asynchronously: the term ends at the call (the
 * call returns DLOCK_ENOTOWNER when the handle does not lead), then the lock
 * is released and "0" published; the status is the release's. Any thread. */
DLOCK_API int dlock_election_resign_async(dlock_election *e, dlock_async_fn fn, void *ud);
/* dlock_election_leader() asynchronously: dlock_async_token() = the term (0:
 * no leader), dlock_async_text() = who. Any handle. Any thread. */
DLOCK_API int dlock_election_leader_async(dlock_election *e, dlock_async_fn fn, void *ud);
/* dlock_election_await_change() asynchronously: DLOCK_OK once the term
 * differs from `known` (token and text as the leader's), DLOCK_ETIMEDOUT,
 * DLOCK_ECANCELED, DLOCK_ECLOSED; waits on the election's channel, never
 * polling. o->lease_ms must be 0. Any handle. Any thread. */
DLOCK_API int dlock_election_await_change_async(dlock_election *e, uint64_t known,
                                                const dlock_wait_opts *o, dlock_async_fn fn,
                                                void *ud);

/* -------------------------------------------------------- double barrier */

/* dlock_barrier_enter() asynchronously, the options copied at the call
 * (o->cancel must stay valid until the callback has run): DLOCK_OK once the
 * round opened with the member, dlock_async_token() = the round's id,
 * dlock_async_count() = N; the blocking call's errors otherwise (a member
 * that gives up has its withdrawal sent before the callback runs, not
 * awaited: a status read at once may still count it). The handle must stay
 * alive until the callback has run. Any thread. */
DLOCK_API int dlock_barrier_enter_async(dlock_barrier *b, const dlock_wait_opts *o,
                                        dlock_async_fn fn, void *ud);
/* dlock_barrier_leave() asynchronously: DLOCK_OK once every member of the
 * round has gone (dlock_async_token() = the round's id); DLOCK_ETIMEDOUT or
 * DLOCK_ECANCELED after the member went (dlock_async_count() is not set
 * then: the message counts those still in). Any thread. */
DLOCK_API int dlock_barrier_leave_async(dlock_barrier *b, const dlock_wait_opts *o,
                                        dlock_async_fn fn, void *ud);
/* dlock_barrier_status() asynchronously: dlock_async_count() = the members,
 * dlock_async_flag() = open, dlock_async_token() = the round's id (0: no
 * round). Any thread. */
DLOCK_API int dlock_barrier_status_async(dlock_barrier *b, dlock_async_fn fn, void *ud);

/* ------------------------------------------------ the program's own loop */

struct uv_loop_s;   /* libuv's uv_loop_t: include <uv.h> to use this */

/* Runs the client on the program's libuv loop instead of a thread of its
 * own: dlock's connections (pub/sub, renewals, asynchronous calls) and
 * timers are driven by `loop` (NULL: back to the default, a thread), and
 * every callback (completions, lost holds, log lines) runs on the thread
 * that runs it. The client then needs that loop running to make progress,
 * blocking calls from other threads included.
 *
 * Rules: dlock_client_open() and dlock_client_close() are called on the
 * loop's thread (close not from a dlock callback; from the program's own
 * callbacks, or while the loop is not running, is fine: it finishes dlock's
 * part of the loop before it returns, pending callbacks getting
 * DLOCK_ECLOSED). Blocking calls that wait are refused on the loop's thread
 * (DLOCK_EINVAL): they would stall it. dlock keeps two handles on the loop
 * while the client is open (a poll and a timer), so uv_run() does not
 * return before dlock_client_close(). Returns DLOCK_OK or DLOCK_EINVAL (cfg
 * NULL). */
DLOCK_API int dlock_config_set_uv_loop(dlock_config *cfg, struct uv_loop_s *loop);

/* Asynchronous calls accepted and not yet completed (callbacks not yet
 * returned), for diagnostics. Any thread. */
DLOCK_API size_t dlock_client_async_pending(dlock_client *c);

#ifdef __cplusplus
}
#endif

#endif
