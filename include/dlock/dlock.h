/*
 * dlock: Redisson's distributed locks for C, on Redis.
 *
 * A dlock_client talks to one Redis deployment. A dlock_lock is a handle on one
 * named reentrant lock stored in Redis exactly as Redisson's RLock stores it, so a
 * C process and a Java process using Redisson can take turns on the same lock.
 * dlock_semaphore, dlock_permit_semaphore and dlock_latch are Redisson's
 * RSemaphore, RPermitExpirableSemaphore and RCountDownLatch, likewise.
 *
 * Conventions used by every call below:
 *   - Calls return DLOCK_OK (0) or a negative dlock_status. dlock_strerror()
 *     gives the short text of a code; dlock_last_error() gives the detailed
 *     message of the calling thread's last failed call (Redis's own error text
 *     included). A password never appears in any message or log line.
 *   - Out-parameters are written only when the call returns DLOCK_OK, except
 *     the object a *_open / *_get / *_new / *_inspect call creates, which is
 *     set to NULL on failure.
 *   - *_free(NULL) and dlock_client_close(NULL) are no-ops.
 *   - Durations are milliseconds (int64_t).
 *   - The library never calls abort() or exit() and never writes to stdout or
 *     stderr; it reports through return codes and the optional log callback.
 *
 * Threads: a dlock_config is not thread-safe (build it in one thread, then hand
 * it to dlock_client_open, which copies it). A dlock_client and its dlock_lock
 * handles may be used from any number of threads at once; the exceptions are
 * named at each call (handle free, client close). The owner of a lock is the
 * calling OS thread, unless the handle was made with dlock_lock_get_as().
 */
#ifndef DLOCK_DLOCK_H
#define DLOCK_DLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 2
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.2.0"

#if defined(DLOCK_BUILDING) && defined(__GNUC__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif

/* ------------------------------------------------------------------ errors */

/* Stable status codes. New codes may be added; existing values never change. */
typedef enum dlock_status {
    DLOCK_OK = 0,
    DLOCK_EINVAL = -1,        /* an argument is invalid (the message names it) */
    DLOCK_ENOMEM = -2,        /* out of memory */
    DLOCK_ETIMEDOUT = -3,     /* the lock was not acquired within the wait */
    DLOCK_ENOTOWNER = -4,     /* the caller does not hold the lock */
    DLOCK_ECANCELED = -5,     /* the wait was cancelled with dlock_cancel_fire() */
    DLOCK_ECONN = -6,         /* Redis could not be reached, or the connection dropped */
    DLOCK_ECMDTIMEOUT = -7,   /* Redis did not answer within the command timeout */
    DLOCK_EREDIS = -8,        /* Redis answered with an error (text in dlock_last_error) */
    DLOCK_EWRONGTYPE = -9,    /* the key exists but holds another type (not a lock) */
    DLOCK_EPROTO = -10,       /* Redis answered something a script cannot have returned */
    DLOCK_EAUTH = -11,        /* authentication or database selection was refused */
    DLOCK_ECLOSED = -12,      /* the client is closing */
    DLOCK_ENAMETOOLONG = -13, /* a name or owner id is longer than its maximum */
    DLOCK_ESYS = -14,         /* an operating-system call failed (errno text in the message) */
    DLOCK_EUNKNOWN = -15,     /* the outcome is unknown: sent, then no answer (see acquire) */
    DLOCK_EDEADLK = -16,      /* the request can never be granted to this caller: it holds the
                                 read lock of the write lock it asks for */
    DLOCK_ETLS = -17,         /* TLS failed: the handshake, the server's certificate (not
                                 trusted, wrong name, expired), the client's certificate, or
                                 TLS files that cannot be loaded (the message says which) */
    DLOCK_EREPLICAS = -18,    /* fewer replicas acknowledged an acquisition than the config
                                 asks for (dlock_config_set_replica_ack): it was released */
    DLOCK_EFENCED = -19,      /* a fenced write was refused: its token is lower than the highest
                                 token the key's guard has seen (a newer holder wrote) */
    DLOCK_EREENTRY = -20,     /* the caller already holds this non-reentrant lock (Redisson's
                                 IllegalMonitorStateException): nothing was written */
    DLOCK_ENOTFOUND = -21     /* the object is not set up: a rate limiter with no rate (Redisson's
                                 "RateLimiter is not initialized"): nothing was written */
} dlock_status;

/* Short English text for a status code ("lock not held by the caller", ...).
 * Never NULL; unknown codes give "unknown dlock status". Any thread. */
DLOCK_API const char *dlock_strerror(int code);

/* The code's symbolic name ("DLOCK_ENOTOWNER"). Never NULL. Any thread. */
DLOCK_API const char *dlock_errname(int code);

/* Detailed message of the calling thread's last failed dlock call, or "" when
 * there was none. Thread-local: valid until this thread's next dlock call. */
DLOCK_API const char *dlock_last_error(void);

/* The library's version string, e.g. "0.2.0". */
DLOCK_API const char *dlock_version(void);

/* ----------------------------------------------------------------- limits */

/* Longest lock name accepted, in bytes (the Redis keys built from it add a few
 * dozen bytes of prefix). Longer names get DLOCK_ENAMETOOLONG. */
#define DLOCK_NAME_MAX 4096
/* Longest owner id accepted, in bytes. */
#define DLOCK_OWNER_MAX 256
/* Size of a buffer that holds any owner id this library makes, with its NUL:
 * 36-char uuid, ':', up to 20 digits. */
#define DLOCK_OWNER_BUFSIZE 64

/* Lease value: hold the lock with the watchdog (renewed while the process
 * lives). 0, so that a zeroed dlock_wait_opts means the watchdog (it was -1
 * before 0.2.0: a negative lease is now DLOCK_EINVAL). */
#define DLOCK_WATCHDOG ((int64_t)0)
/* Wait value: wait as long as it takes. */
#define DLOCK_WAIT_FOREVER ((int64_t)-1)
/* Lease value of a permit-expirable semaphore's acquisitions only: a permit
 * that never expires and is not renewed (Redisson's leaseTime -1: stored
 * with the score 922337203685477; dlock_permit_semaphore_lease_time answers
 * -1). It stays taken until released (or the semaphore deleted), whatever
 * becomes of its holder. Every other call refuses it (DLOCK_EINVAL). Not
 * Redisson's -1: that was DLOCK_WATCHDOG before 0.2.0, and a program written
 * then must keep getting DLOCK_EINVAL, not a permit that never comes back. */
#define DLOCK_NO_EXPIRY INT64_MIN

/* ------------------------------------------------------------- callbacks */

/* Why a lock was reported lost. */
typedef enum dlock_lost_reason {
    DLOCK_LOST_GONE = 1,       /* a renewal, or the owner's release, found the lock no longer
                                  held by its owner */
    DLOCK_LOST_UNREACHABLE = 2, /* Redis stayed unreachable until (1/20 of the watchdog timeout,
                                   at most 500 ms, before) the lease would have run out */
    DLOCK_LOST_PAUSED = 3,      /* this process did not run (stopped by SIGSTOP or a debugger,
                                   suspended, starved of CPU) until past the lease: its
                                   renewals could not be sent in time */
    DLOCK_LOST_REPLICAS = 4,    /* a renewal was acknowledged by fewer replicas than the config
                                   asks for, under DLOCK_ACK_RELEASE: no longer renewed */
    DLOCK_LOST_MAX_HOLD = 5     /* the hold reached its limit (dlock_config_set_max_hold,
                                   dlock_lock_set_max_hold): the watchdog stopped renewing
                                   it, and Redis lets it go when the limit ends */
} dlock_lost_reason;

/* Called once per lost hold, on the client's io thread. `name` and `owner` are
 * valid during the call only. The callback should return quickly: renewals
 * and wake-ups wait while it runs. It may call dlock functions of its client
 * that do not wait (a try with wait 0, release, queries); an acquire or try
 * that would wait returns DLOCK_EINVAL there, and dlock_client_close() must
 * not be called. */
typedef void (*dlock_lost_fn)(const char *name, const char *owner,
                              dlock_lost_reason reason, void *ud);

/* What ended a lost hold, as far as Redis can tell: a refinement of the
 * reason (DLOCK_LOST_GONE's causes first, then one per other reason). */
typedef enum dlock_lost_cause {
    DLOCK_CAUSE_UNKNOWN = 0,     /* outside a lost callback; or gone and Redis could not say
                                    why (found by a release; no sample of the node's counters
                                    before the loss, as on a cluster node just failed over to) */
    DLOCK_CAUSE_EVICTED = 1,     /* evicted: the node's evicted_keys moved since the last
                                    sample before the loss (maxmemory-policy, dlock doctor) */
    DLOCK_CAUSE_EXPIRED = 2,     /* expired: its lease had run out (a renewal too late) and
                                    the node's expired_keys moved */
    DLOCK_CAUSE_DELETED = 3,     /* deleted or overwritten by another client (a force unlock,
                                    a DEL, Redisson's forceUnlock): gone with no eviction,
                                    expiry, flush or new server seen */
    DLOCK_CAUSE_FLUSHED = 4,     /* FLUSHALL / FLUSHDB, heard through client tracking (one
                                    server with revocation on; elsewhere it shows as DELETED) */
    DLOCK_CAUSE_FAILOVER = 5,    /* the node's run_id changed: it restarted, or another server
                                    took its place (Sentinel), without the lock; or the client
                                    saw a new primary for the hold's shard and the hold was
                                    absent there (checked at once when the switch is seen) */
    DLOCK_CAUSE_UNREACHABLE = 6, /* DLOCK_LOST_UNREACHABLE */
    DLOCK_CAUSE_PAUSED = 7,      /* DLOCK_LOST_PAUSED */
    DLOCK_CAUSE_REPLICAS = 8,    /* DLOCK_LOST_REPLICAS */
    DLOCK_CAUSE_MAX_HOLD = 9,    /* DLOCK_LOST_MAX_HOLD */
    DLOCK_CAUSE_CLOCK_JUMP = 10  /* (reason DLOCK_LOST_GONE) the node's clock jumped forward:
                                    its TIME moved further than this process's monotonic
                                    clock between two renewal passes, by more than the
                                    allowance (dlock_config_set_clock_jump). Redis expires
                                    keys by that clock, so the lease may have ended early:
                                    every watchdog hold on the node is reported so, and new
                                    acquisitions there are refused for one lease (the
                                    quarantine record, docs/safety.md) */
} dlock_lost_cause;

/* The lost callback's second form: the same call with the cause of the loss
 * as an argument. For DLOCK_LOST_GONE the watchdog asks the node (INFO)
 * once more before it calls back, one round trip after the renewal that
 * found the hold gone, and compares evicted_keys, expired_keys and run_id
 * with a sample it took before (INFO after a renewal pass, at most once a
 * second per node). Set with dlock_config_set_lost_cause_callback,
 * dlock_lock_set_lost_cause_callback,
 * dlock_permit_semaphore_set_lost_cause_callback or
 * dlock_election_set_lost_cause_callback; a setter of either form replaces
 * the callback of the other form it overrides (one callback per client,
 * per handle). Same rules as dlock_lost_fn. */
typedef void (*dlock_lost_cause_fn)(const char *name, const char *owner,
                                    dlock_lost_reason reason, dlock_lost_cause cause, void *ud);

/* In a lost callback of either form (on the io thread, during the call):
 * the cause of the loss being reported; elsewhere DLOCK_CAUSE_UNKNOWN.
 * Thread-local, kept for compatibility (callbacks of the first form read
 * it): dlock_lost_cause_fn gets the cause as an argument. */
DLOCK_API dlock_lost_cause dlock_last_lost_cause(void);
/* "evicted", "expired", "deleted by another client", "flushed", "failover",
 * "unreachable", "paused", "replicas", "max hold", "server clock jumped"; "gone" for
 * DLOCK_CAUSE_UNKNOWN and values this version does not define. */
DLOCK_API const char *dlock_lost_cause_str(dlock_lost_cause cause);

typedef enum dlock_log_level {
    DLOCK_LOG_ERROR = 0,
    DLOCK_LOG_WARN = 1,
    DLOCK_LOG_INFO = 2,
    DLOCK_LOG_DEBUG = 3
} dlock_log_level;

/* Log sink. Called from any thread (user threads and the io thread), possibly
 * at the same time from several; `msg` is valid during the call only. */
typedef void (*dlock_log_fn)(dlock_log_level level, const char *msg, void *ud);

/* ----------------------------------------------------------------- config */

typedef struct dlock_config dlock_config;

/* A config with every option at its default:
 *   url                 redis://127.0.0.1:6379
 *   watchdog timeout    30000 ms  (renewal every timeout / 3)
 *   command timeout     3000 ms
 *   connect timeout     10000 ms
 *   retry attempts      3, retry delay 1500 ms
 *   pool size           64 blocking connections
 *   priority after      100 ms
 *   fair wait timeout   300000 ms (5 minutes)
 *   hold limit          none
 *   client label        none
 * Returns NULL only when out of memory. */
DLOCK_API dlock_config *dlock_config_new(void);
DLOCK_API void dlock_config_free(dlock_config *cfg);

/* Where Redis is:
 *   redis://[user[:password]@]host[:port][/db]     host may be [ipv6]; port 1..65535
 *   rediss://[user[:password]@]host[:port][/db][?TLS parameters]   the same over TLS
 *   unix:///path/to.sock[?db=N]
 *   redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#MASTERNAME
 *       the primary named MASTERNAME, as the sentinels listed say (port
 *       26379 by default); followed across failovers
 *   redis-cluster://[user[:password]@]host[:port][,host[:port]...]
 *       seed nodes of a Redis Cluster (database 0); the rest is discovered
 *   redis-replicated://[user[:password]@]host[:port][,host[:port]...][/db]
 *       a primary and its replicas without Sentinel (a managed Redis, a
 *       static primary/replica set): the node whose ROLE is master takes
 *       every request, asked every scan interval (dlock_config_set_scan_interval)
 *       and after every READONLY. At open, DLOCK_ECONN when no node is a
 *       primary within the connect timeout (the roles seen listed); while two
 *       say they are, requests are refused (DLOCK_ECONN naming both)
 *   rediss-sentinel://...[?TLS parameters]#MASTERNAME
 *   rediss-cluster://...[?TLS parameters]
 *   rediss-replicated://...[?TLS parameters]
 *       the same over TLS: the sentinels, the data nodes and every node
 *       learnt from them (the TLS settings below apply to each)
 * user and password may be percent-encoded; they are the data nodes' (see
 * dlock_config_set_sentinel_password for the sentinels'). One URL names one
 * deployment: a list mixing schemes is refused. DLOCK_EINVAL names the bad
 * part (never echoing the password) and leaves the previous URL in place.
 * A rediss:// URL may carry TLS parameters, redis-cli's option names, each
 * the same as the dlock_config_set_tls_* call named: cacert=FILE and
 * cacertdir=DIR (_ca), cert=FILE&key=FILE (_cert), sni=NAME (_server_name),
 * insecure (_verify 0). Values are percent-encoded where needed
 * (?cacert=/etc/my%20ca.pem). The parameters a URL gives replace those
 * settings; the ones it does not give keep their values. So may a
 * rediss-sentinel:// or rediss-cluster:// URL, after the hosts (and the
 * database), before the master's name; redis-sentinel://, redis-cluster://
 * and redis-replicated:// take no TLS parameters.
 * Every deployment URL (sentinel, cluster, replicated, with or without TLS)
 * may carry the address map as a list, among the parameters:
 *   ?map=HOST:PORT=HOST:PORT[,HOST:PORT=HOST:PORT...]   (map= may repeat)
 * each entry the address a sentinel or the cluster announces, then the one
 * to reach it at (hosts as in the URL, [ipv6] in brackets, ports required;
 * host names compared in any case), e.g.
 *   redis-sentinel://s1:26379?map=10.0.0.5:6379=127.0.0.1:7001,10.0.0.6:6379=127.0.0.1:7002#mymaster
 * An entry that does not parse is DLOCK_EINVAL ("map entry '...' does not
 * parse: give map=HOST:PORT=HOST:PORT..."). The URL's entries apply first;
 * addresses they do not name go to dlock_config_set_address_map's callback. */
DLOCK_API int dlock_config_set_url(dlock_config *cfg, const char *url);

/* replicas for dlock_config_set_replica_ack: Redisson's rule (every
 * connected replica asked, a failure only when none acknowledged). */
#define DLOCK_REPLICAS_ALL (-1)

/* What an acquisition or renewal does when fewer replicas acknowledge it
 * than asked for. */
typedef enum dlock_ack_policy {
    DLOCK_ACK_RELEASE = 0,   /* fail and give the hold back: the acquire returns
                                DLOCK_EREPLICAS; a renewal stops and the hold is reported
                                lost (DLOCK_LOST_REPLICAS) */
    DLOCK_ACK_KEEP = 1       /* keep the hold and report the number reached
                                (dlock_last_replica_acks; a warning in the log) */
} dlock_ack_policy;

/* Replica acknowledgement (Redisson's sync-slaves option): after every lock
 * acquisition (lock, fair lock, read and write locks, election terms), every
 * semaphore and expirable-permit acquisition, and every watchdog renewal,
 * WAIT for `replicas` replicas of the primary that took it, up to
 * timeout_ms (1 .. the command timeout - 1; set the command timeout first),
 * on the same connection. replicas 0 (the default) turns it off. Applies to
 * a primary with replicas, behind Sentinel or not, and to each primary of a
 * cluster. DLOCK_EINVAL (nothing changed) for a negative count (other than
 * DLOCK_REPLICAS_ALL), a timeout out of range or an unknown policy.
 *
 * Two ways to count:
 *   - dlock's own: replicas = N (1..1000), the policy applying whenever fewer
 *     than N acknowledged within the timeout (a replica down is a failure).
 *   - Redisson's (checkLockSyncedSlaves): replicas = DLOCK_REPLICAS_ALL. Every
 *     acquisition WAITs for every replica the primary has connected at that
 *     moment (asked with ROLE: one more round trip), and the policy applies
 *     only when the primary has replicas and none acknowledged; a primary
 *     without replicas is not asked (dlock_last_replica_acks() -1). With
 *     DLOCK_ACK_RELEASE this is what a Redisson client does by default
 *     (NoSyncedSlavesException), except that dlock gives the hold back.
 *     Watchdog renewals are not acknowledged in this mode (Redisson's are,
 *     the same way). Asynchronous acquisitions are acknowledged as the
 *     blocking ones, in either mode (their callback gets DLOCK_EREPLICAS
 *     after the give-back), on a connection per node of their own.
 * The default is neither (replicas 0, off), unlike Redisson, whose check is on:
 * a WAIT adds a round trip, up to the timeout, to every acquisition, and
 * acknowledgement by replicas does not make a lock safe across a failover
 * anyway (a replica may still be promoted without the write, Redis'
 * replication being asynchronous); it narrows that window. A program that
 * wants Redisson's behaviour, or a stricter count, asks for it. */
DLOCK_API int dlock_config_set_replica_ack(dlock_config *cfg, int replicas, int64_t timeout_ms,
                                          dlock_ack_policy policy);
/* (A latch's count-down and a semaphore's release are not acquisitions: they
 * cannot be taken back, so they are not acknowledged.) */

/* Replicas that acknowledged the calling thread's last blocking acquisition
 * (set when the blocking call returns), or -1 when none was asked for
 * (acknowledgement off, or the acquisition failed first). Thread-local,
 * kept for compatibility: the handle's own count (dlock_lock_replica_acks,
 * dlock_semaphore_replica_acks, dlock_permit_semaphore_replica_acks) covers
 * the asynchronous acquisitions too and may be read on any thread. */
DLOCK_API int dlock_last_replica_acks(void);

/* Credentials fetched afresh for every connection (short-lived tokens, a
 * rotated password): called before each connect and reconnect, to any node
 * (data nodes, sentinels, cluster nodes, replicated nodes), on the thread
 * opening it (a caller's thread or the client's io thread: keep it short,
 * e.g. return a cached token). `addr` is the node's "host:port" (no
 * credentials), `sentinel` 1 for a sentinel. Write the user (may be left
 * "": the default user) and the password, NUL-terminated, into the buffers
 * (DLOCK_CREDENTIAL_MAX bytes each), and return:
 *   0                      AUTH with them (an empty password is an error)
 *   DLOCK_CREDENTIALS_NONE this node takes no AUTH
 *   anything else          failure: the connection is not made, and the
 *                          call that needed it fails with DLOCK_EAUTH
 *                          ("the credentials callback failed for ADDR")
 * A password the server refuses is DLOCK_EAUTH naming the node that refused
 * (never retried at once: connections to it back off). While set, the
 * callback's answers replace the URL's and dlock_config_set_password's /
 * dlock_config_set_sentinel_password's credentials. NULL fn: back to them. */
#define DLOCK_CREDENTIAL_MAX 512
#define DLOCK_CREDENTIALS_NONE 1
typedef int (*dlock_credentials_fn)(const char *addr, int sentinel, char *user,
                                    char *password, void *ud);
DLOCK_API int dlock_config_set_credentials(dlock_config *cfg, dlock_credentials_fn fn,
                                           void *ud);

/* Addresses the servers announce that are not where they are reached (NAT,
 * containers): fn is called for every address a sentinel names (the
 * primary) and every node CLUSTER SLOTS or a MOVED/ASK names, before it is
 * connected to. host_out (DLOCK_HOST_MAX bytes) and *port_out come filled
 * with the announced address: change them to map it, leave them to keep
 * it, and return 0; any other return keeps the announced address and logs a
 * warning. Called on the thread that reads the topology (no I/O needed:
 * keep it short). NULL fn: none. The URL's ?map= list (dlock_config_set_url)
 * is applied before fn: fn sees only the addresses the list does not name. */
#define DLOCK_HOST_MAX 256
typedef int (*dlock_address_map_fn)(const char *host, int port, char *host_out, int *port_out,
                                    void *ud);
DLOCK_API int dlock_config_set_address_map(dlock_config *cfg, dlock_address_map_fn fn,
                                           void *ud);
/* The address map as text, the syntax of the URL's ?map= (without "map="):
 *   HOST:PORT=HOST:PORT[,HOST:PORT=HOST:PORT...]
 * appended to the entries given before (at most 64 in all); may be called
 * again. The entries apply after the URL's and before fn above, and are kept
 * when the URL changes. Returns DLOCK_OK; DLOCK_EINVAL when cfg or entries is
 * NULL or an entry does not parse ("address map entry '...' does not parse:
 * give HOST:PORT=HOST:PORT..."), then none of entries is added; DLOCK_ENOMEM.
 * entries is copied. Not thread-safe on one config, as every setter. */
DLOCK_API int dlock_config_add_address_map(dlock_config *cfg, const char *entries);

/* Credentials for the sentinels of a redis-sentinel:// URL when they differ
 * from the data nodes' (the sentinels' requirepass or ACL user). Same rules
 * as dlock_config_set_password; kept when the URL changes. NULL or empty
 * password: the sentinels get no AUTH. */
DLOCK_API int dlock_config_set_sentinel_password(dlock_config *cfg, const char *user,
                                                 const char *password);

/* TLS (a rediss://, rediss-sentinel:// or rediss-cluster:// URL). dlock
 * speaks TLS itself (OpenSSL), on every
 * connection of the client: the blocking pool, the pub/sub and the renewal
 * connections. The server's certificate is verified by default: it must
 * chain to a trusted CA and name the server (the URL's host, or the server
 * name below; an IP address host is matched against the certificate's IP
 * addresses). These settings are used only with rediss://: a client opened
 * with any of them and a redis:// or unix:// URL fails with DLOCK_EINVAL.
 * Files are read when the client opens: one that cannot be loaded fails the
 * open with DLOCK_ETLS naming it. Every TLS failure at open (an untrusted or
 * expired certificate, a wrong name, a server that wants a client
 * certificate, a plain server behind rediss://) is DLOCK_ETLS, or
 * DLOCK_ECONN / DLOCK_ECMDTIMEOUT when the server said nothing, with a
 * message naming the address, and is never retried. */

/* Trusted CAs: a PEM file of certificates (NULL or "" for none) and/or a
 * directory of hashed certificates (openssl rehash; NULL or "" for none).
 * Both unset (the default): the system's trust store. DLOCK_EINVAL for a
 * path longer than 4096 bytes. */
DLOCK_API int dlock_config_set_tls_ca(dlock_config *cfg, const char *ca_file,
                                      const char *ca_dir);
/* A client certificate and its private key (PEM files), for servers that
 * ask for one (Redis's tls-auth-clients). Both or neither (NULL/""):
 * DLOCK_EINVAL otherwise. */
DLOCK_API int dlock_config_set_tls_cert(dlock_config *cfg, const char *cert_file,
                                        const char *key_file);
/* The name sent as SNI and expected in the server's certificate, when it is
 * not the URL's host (connecting by IP address or through a tunnel to a
 * server whose certificate names its DNS name). NULL or "": the URL's host
 * (an IP address host sends no SNI). DLOCK_EINVAL unless 1..255 bytes of
 * letters, digits, '.', '-' and '_'. */
DLOCK_API int dlock_config_set_tls_server_name(dlock_config *cfg, const char *name);
/* verify = 0 turns off every check of the server's certificate (any server
 * that speaks TLS is accepted: the link is encrypted, not authenticated).
 * The client logs a warning saying so, once, when it opens. 1 (the
 * default) checks. */
DLOCK_API int dlock_config_set_tls_verify(dlock_config *cfg, int verify);

/* Credentials apart from the URL (a URL on a command line shows in `ps`).
 * password: 1..512 bytes, any bytes but NUL; user: NULL or "" for AUTH
 * <password> (the default user), else AUTH <user> <password> (Redis 6 ACL
 * users, 1..512 bytes). They replace the URL's user and password; a later
 * dlock_config_set_url replaces them in turn. A NULL or empty password removes
 * both. The password is never logged nor shown in any message. DLOCK_EINVAL
 * (nothing changed) for a user without a password or a value too long. */
DLOCK_API int dlock_config_set_password(dlock_config *cfg, const char *user,
                                        const char *password);

/* Lease used for locks taken with DLOCK_WATCHDOG, in ms (>= 30; 0 = default).
 * The watchdog renews such locks every timeout / 3. */
DLOCK_API int dlock_config_set_watchdog_timeout(dlock_config *cfg, int64_t ms);
/* Longest wait for one Redis reply, in ms (> 0; 0 = default). */
DLOCK_API int dlock_config_set_command_timeout(dlock_config *cfg, int64_t ms);
/* The most holders (a lock's hash fields, a semaphore's permits) and fair
 * queue entries a snapshot reads of one name (dlock_lock_inspect,
 * dlock_client_inspect, the walks of dlock_client_scan and
 * dlock_client_walk): a name with more is read in part, and
 * dlock_info_holders_total says how many it has. Bounds the time and memory
 * a lock with a huge number of holders (or a hash of somebody's data under a
 * lock's pattern) costs Redis and the reader. 0 (the default): everything;
 * up to 10 000 000. A name past the limit is read with HSCAN, HLEN and ZCARD
 * (in docs/acl-rule.txt). DLOCK_EINVAL for more. */
DLOCK_API int dlock_config_set_inspect_limit(dlock_config *cfg, size_t max_holders);
/* Longest wait for a TCP/unix connection and its handshake, in ms (0 = default). */
DLOCK_API int dlock_config_set_connect_timeout(dlock_config *cfg, int64_t ms);
/* redis-replicated:// (and rediss-replicated://): how often each node listed
 * is asked its ROLE, to find the primary, in ms (>= 10; 0 = default 1000).
 * A READONLY answer asks at once as well. DLOCK_EINVAL out of range. */
DLOCK_API int dlock_config_set_scan_interval(dlock_config *cfg, int64_t ms);
/* How often a command is retried after a connection failure (0..100; 0 = never)
 * and the pause between tries in ms (0 = default). */
DLOCK_API int dlock_config_set_retry(dlock_config *cfg, int attempts, int64_t delay_ms);
/* A fair-lock waiter's slot, in ms (>= 2; 0 = default 300000, Redisson's
 * fairLockWaitTimeout): how long a waiter that died at the head of a fair
 * lock's queue delays the others at most once the lock is free, and so the
 * grace a head (a Redisson waiter included) is owed before a newcomer may
 * pass it: this timeout after the lock is found free, or the head's own
 * deadline if sooner, never the newcomer's wait. A try with a positive wait
 * uses its wait as its own slot (its place in the deadlines) instead. */
DLOCK_API int dlock_config_set_fair_wait_timeout(dlock_config *cfg, int64_t ms);
/* Most blocking connections open at once (1..10000; 0 = default). A call that
 * finds them all busy waits up to the command timeout for one. */
DLOCK_API int dlock_config_set_pool_size(dlock_config *cfg, int size);
/* Turn order among waiters. The lock is not fair (neither is Redisson's RLock):
 * after a release, the first retry to reach Redis wins, and a waiter can lose
 * many races in a row. A dlock waiter that has waited `after_ms` (1.., 0 =
 * default 100 ms) and still finds the lock held reserves the next turn, if no
 * other waiter has: the next time the lock is free, other dlock waiters are
 * turned away until it comes, for at most 50 ms (should it have died).
 * Redisson clients do not know of reservations and may still take the lock
 * first. A waiter that gives up (deadline, cancellation) hands its reservation
 * back. While a free lock is reserved for another, a try with wait 0 answers
 * DLOCK_ETIMEDOUT (the message says so) though dlock_lock_is_locked says free.
 * The reservation is the string key dlock_lock_next:{name}, with a TTL; a Redis
 * user whose ACL allows Redisson's keys only is refused it: the client then
 * logs a warning once and goes on without reservations.
 * DLOCK_PRIORITY_OFF: the client neither reserves nor honours reservations and
 * never touches that key (it races as a Redisson client does). */
#define DLOCK_PRIORITY_OFF ((int64_t)-1)
DLOCK_API int dlock_config_set_priority_after(dlock_config *cfg, int64_t after_ms);
/* Every connection of a client is named (CLIENT SETNAME)
 *   dlock|<client uuid>|<host name>|<pid>|<label>
 * so that whoever looks at a lock (dlock status, CLIENT LIST) can tell which
 * process holds it: an owner id's part before the last ':' is its client's
 * uuid. This sets the label: NULL or "" for none, else 1..128 bytes of
 * printable ASCII without spaces (DLOCK_EINVAL otherwise). A server that
 * refuses CLIENT SETNAME (an ACL without client|setname) is not an error: the
 * connections stay unnamed and the log callback gets a warning, once. */
DLOCK_API int dlock_config_set_client_name(dlock_config *cfg, const char *name);
/* The hold limit: the longest a lock taken with DLOCK_WATCHDOG stays held, in
 * ms from the acquisition that started the hold (1..31536000000, a year; 0 =
 * no limit, the default). A holder that is stuck (a hung thread, a lost
 * release) keeps the lock that long at most: the watchdog renews it up to the
 * limit and no further (the last renewal sets what is left, so Redis expires
 * the key when the limit ends), and reports it lost, DLOCK_LOST_MAX_HOLD,
 * shortly before (as every loss: 1/20 of the watchdog timeout, at most
 * 500 ms). Reentries count as the same hold and do not extend it. Releasing
 * in time is not a loss. Applies to every lock of the client (reentrant,
 * fair, read, write); dlock_lock_set_max_hold overrides it per handle. A
 * lease acquisition (no watchdog) ends with its lease, which is its limit;
 * one that re-enters a limited watchdog hold is cut to what the limit leaves.
 * Redisson has no such limit: it renews while the process lives. */
DLOCK_API int dlock_config_set_max_hold(dlock_config *cfg, int64_t ms);
/* The server clock check (dlock's own; docs/safety.md, "A server clock that
 * jumps"). Redis expires keys by its wall clock: one that steps forward (an
 * NTP step, a VM restored) ends every lease early. The watchdog sends TIME
 * to each node it renews on with each renewal pass and compares the
 * server's progress with this process's monotonic clock: a difference larger
 * than `ms` + 1% of the time between the two samples, beyond the round
 * trips' uncertainty, is a jump. A forward jump reports every watchdog hold
 * on that node lost (DLOCK_LOST_GONE, cause DLOCK_CAUSE_CLOCK_JUMP) and
 * records a quarantine of one lease (the watchdog timeout, or the longest
 * fixed lease acquired with if longer) on the node, which every dlock
 * acquisition honours; a backward jump is logged (WARN) only: keys then live
 * longer, not shorter. ms: 1..86400000 (default 250, 0 restores it), or
 * DLOCK_CLOCK_JUMP_OFF: not checked. */
#define DLOCK_CLOCK_JUMP_OFF ((int64_t)-1)
DLOCK_API int dlock_config_set_clock_jump(dlock_config *cfg, int64_t ms);
/* Lock-delay (Consul's LockDelay, Chubby's lock-delay; dlock's own): after
 * a lock ends without a release (its holder died, was paused or
 * cut off, and its lease ran out; it was evicted, deleted or forced open), no
 * other owner can take it for `ms` more, so that the lost holder has heard of
 * its loss (its lost callback: the watchdog reports a loss 1/20 of the
 * timeout, at most 500 ms, before the lease ends) and stopped before the next
 * holder starts. A lock released normally is free at once. The delay is the
 * holder's: it is kept in Redis beside the lock, a marker
 * dlock_lock_delay:{name} holding the holder's owner id and the server time
 * its delay ends (the lease's end + ms), written by every acquisition and
 * renewal of a holder with a delay (the watchdog renews it with the lock)
 * and deleted by its last release. The delay keys have no TTL, so that an
 * eviction policy volatile-* (which evicts keys with a TTL only) may evict
 * a held lock but never its delay (allkeys-* may evict anything: use
 * noeviction); one left by a holder killed together with its process's
 * guard stays until the next acquisition of the name deletes it. Every dlock acquisition (every kind, blocking and
 * asynchronous, whatever its own delay setting, a client without one
 * included) is refused while it lives with another owner's id; waiters sleep
 * until it ends, sending nothing, and wake as soon as it is deleted (a try
 * with no wait fails at once: DLOCK_ETIMEDOUT, whose message says so). A
 * holder that learns of its loss (its lost callback, or DLOCK_ENOTOWNER from
 * a release) and has stopped its work ends its delay early by releasing: the
 * release answers DLOCK_ENOTOWNER and deletes the marker, and the lock is
 * free at once (dlock run does so once the command's whole tree is gone).
 * Redisson clients, which do not know the marker, neither write nor honour
 * it: they may take the lock at once. A Redis user whose ACL refuses the
 * marker's keys (~dlock_lock_delay:*, ~dlock_read_delay:*,
 * ~dlock_permit_delay:*) acquires without honouring other holders' delays
 * (the log callback warns once), and cannot hold with a delay (its
 * acquisitions fail DLOCK_ENOPERM). Trade-off: a crashed holder's lock stays
 * unavailable for its lease + ms. Choose ms at least the time a paused or
 * cut-off holder needs to learn of its loss and stop. 0 (the default) turns it
 * off for this client's holds; up to 86 400 000 (1 day); DLOCK_EINVAL
 * otherwise. Every lock kind: the
 * reentrant (and fenced) and fair locks (a fair lock in its delay counts as
 * held: waiters keep their queue order, and the head's turn starts when the
 * delay ends), and the read-write lock, where a writer's loss delays readers
 * and writers (the same marker, holding its field <owner>:write) and a
 * reader's loss delays writers only (readers never conflict with readers;
 * each reader with a delay has an entry in the sorted set
 * dlock_read_delay:{name}, owner id -> the server time its delay ends,
 * renewed with its holds and removed by its last release), and the
 * permit-expirable semaphore: a permit whose lease ran out unreleased goes
 * back to the count (as Redisson's does) but is not given out by dlock for
 * ms more, while the other permits are (each permit taken with a delay has
 * an entry in the sorted set dlock_permit_delay:{name}, permit id -> the
 * server time its delay ends, renewed with the permit by the watchdog or an
 * update of its lease and removed by its release, also when the release
 * finds the permit expired; an n-permit acquire waits until n are out of any
 * delay). A multi-lock's parts and an election's campaign are acquisitions
 * too. The plain semaphore has no leases, hence no involuntary loss: it has
 * no delay. dlock_lock_set_lock_delay, dlock_permit_semaphore_set_lock_delay
 * and dlock_election_set_lock_delay set it per handle. */
DLOCK_API int dlock_config_set_lock_delay(dlock_config *cfg, int64_t ms);
/* How long acquisitions wait after a failover (dlock_config_set_failover_quarantine). */
typedef enum dlock_quarantine {
    DLOCK_QUARANTINE_OFF = 0,   /* no wait (the default; Redisson's behaviour) */
    DLOCK_QUARANTINE_ON = 1,    /* a fixed duration: ms */
    DLOCK_QUARANTINE_AUTO = 2   /* the longest lease a previous holder could still believe it
                                   has: the longest of the watchdog timeout, the longest
                                   fixed lease this client has acquired with, and ms */
} dlock_quarantine;
/* Quarantine after failover (dlock's own; Redisson has none). Redis
 * replicates asynchronously: a primary that fails right after a grant may
 * be replaced by a replica that never saw it, and that replica grants the
 * lock again while the first holder still works. When this client sees a new
 * primary for a shard (a Sentinel +switch-master, a replica promoted in a
 * cluster, a node found by ROLE in redis-replicated://, the server behind
 * one address turned replica and replaced), acquisitions (reentrant, fair
 * and read-write locks, semaphores and permit semaphores, multi-locks and
 * RedLocks, an election's campaign, blocking and asynchronous, a try with no
 * wait included) routed to that shard wait until the quarantine ends,
 * sleeping and sending nothing; a wait shorter than what is left ends with
 * DLOCK_ETIMEDOUT, whose message names the quarantine. A multi-lock or
 * RedLock is taken only once none of its locks' shards is in quarantine
 * (each lock per its own client's setting): it sends nothing to a shard that
 * is (the blocking form nothing at all while it waits), and holds none of
 * its locks when it fails. Every hold the watchdog renews is renewed at once on the
 * new primary, and one found absent there is reported lost,
 * DLOCK_LOST_GONE with cause DLOCK_CAUSE_FAILOVER. Releases, renewals and
 * queries are never held back. The quarantine runs from when this client
 * sees the switch (which is after the failover: never shorter than asked).
 * It is also recorded on the servers, for every dlock client: this client
 * arms a record (dlock_quarantine:{<tag>}, one per cluster slot, named so
 * that it falls in that slot, whatever the deployment) in each slot it
 * acquires in, holding the primary's replication id and the quarantine's
 * length (once per 15 minutes; an armed record lives an hour and keeps the
 * longest quarantine asked for). Replicas receive it; on a replica promoted
 * since (or a primary restarted) the replication id differs, and the first
 * dlock acquisition there, by any client, starts the quarantine; this client
 * also starts it when it sees the switch. While it runs, every dlock
 * acquisition's script in that slot refuses (DLOCK_ETIMEDOUT, the message
 * naming the quarantine "recorded on the server"; waiters sleep it out),
 * reentries included (a hold there may be one released on the old primary):
 * clients with the quarantine off, and clients started after the failover,
 * wait too, with no extra round trip. Redisson clients do not know the
 * record and do not wait. A Redis user whose ACL refuses ~dlock_quarantine:*
 * neither records nor honours it (the log callback says so once).
 * WAIT acknowledgement (dlock_config_set_replica_ack) protects grants that
 * reached a replica; the quarantine protects those that did not
 * (docs/safety.md). mode DLOCK_QUARANTINE_OFF (ms ignored), ON (ms 1 to
 * 86 400 000) or AUTO (ms 0 to 86 400 000: a floor); DLOCK_EINVAL otherwise.
 * Default: off, because it makes every failover cost the locks of that shard
 * up to a lease (30 s with the default watchdog) of unavailability, which a
 * deployment that uses locks for efficiency rather than correctness would
 * not want; a deployment that relies on mutual exclusion across failovers
 * turns it on (AUTO). */
DLOCK_API int dlock_config_set_failover_quarantine(dlock_config *cfg, dlock_quarantine mode,
                                                   int64_t ms);
/* Revocation heard at once (on = 1, the default): when a key of a hold the
 * watchdog renews is deleted or changed by someone else (a force unlock, a
 * Redisson forceUnlock, an operator's DEL, expiry, eviction, FLUSHALL), the
 * hold is checked at once and, when gone, reported lost (DLOCK_LOST_GONE)
 * within a round trip or two, instead of at its next renewal (up to a third
 * of the watchdog timeout later). It uses Redis's client-side tracking
 * (Redis 6+): the renewal connection runs CLIENT TRACKING ON REDIRECT <id>
 * NOLOOP towards one more connection of the client, subscribed to
 * __redis__:invalidate, and each hold still held 3 ms after it is taken is
 * renewed once then so that Redis tracks its key (a change within those 3 ms
 * is found by that renewal). Cost: one connection; in Redis, about 100
 * bytes of tracking table per held key; one renewal per hold kept 3 ms or
 * more and per change made to a held key by another connection (our own
 * releases and reentries included). A server that refuses CLIENT TRACKING (older than 6,
 * an ACL) is logged once and the client falls back to renewal-time
 * detection, as it does while either connection is down (every hold is
 * rechecked when both are back). Lease holds (no watchdog) are not tracked.
 * One server only: on a sentinel or cluster client (whose keys move between
 * nodes) the setting is accepted and has no effect, and losses are found by
 * the renewals (per node) as with on = 0.
 * on = 0: renewal-time detection only. DLOCK_EINVAL for other values. */
DLOCK_API int dlock_config_set_revocation(dlock_config *cfg, int on);
/* Writer-first read-write locks (dlock's own): on = 1 makes every read and
 * write lock handle of the client writer-first (see
 * dlock_lock_set_writer_first, which also sets it per handle): a waiting
 * writer keeps new readers out, so that a stream of overlapping readers
 * cannot keep it waiting for ever. on = 0 (the default): Redisson's rules,
 * readers join whenever the lock is read-held. DLOCK_EINVAL for other
 * values. */
DLOCK_API int dlock_config_set_writer_first(dlock_config *cfg, int on);
/* Lost callback for every lock of the client (a lock's own callback, set with
 * dlock_lock_set_lost_callback, takes precedence). NULL fn = none. */
DLOCK_API int dlock_config_set_lost_callback(dlock_config *cfg, dlock_lost_fn fn, void *ud);
/* The same, in the form with the cause as an argument (dlock_lost_cause_fn);
 * it replaces the dlock_lost_fn one, and the other way round. */
DLOCK_API int dlock_config_set_lost_cause_callback(dlock_config *cfg, dlock_lost_cause_fn fn,
                                                   void *ud);
/* Log callback and the most verbose level passed to it. NULL fn = none. */
DLOCK_API int dlock_config_set_log_callback(dlock_config *cfg, dlock_log_fn fn, void *ud,
                                            dlock_log_level max_level);

/* ----------------------------------------------------------------- client */

typedef struct dlock_client dlock_client;

/* Connects to Redis (one blocking connection, to prove it reachable and the
 * credentials right) and starts the client's io thread. `cfg` is copied and
 * may be freed afterwards. On failure *out is NULL and dlock_last_error()
 * says why: DLOCK_ECONN (names the address, never the password), DLOCK_EAUTH,
 * DLOCK_ECMDTIMEOUT, DLOCK_ESYS, DLOCK_ENOMEM, DLOCK_EINVAL. */
DLOCK_API int dlock_client_open(dlock_client **out, const dlock_config *cfg);

/* Stops renewals, closes connections, stops the io thread and frees the client.
 * Locks it still holds are not released: they expire after their lease (the
 * watchdog timeout for watchdog locks). Every other call on this client and its
 * lock handles must have returned first (use dlock_cancel to end waits); lock
 * handles must be freed before or right after, without other calls. Must not
 * be called from a lost or log callback of the same client. */
DLOCK_API void dlock_client_close(dlock_client *c);

/* The client's random UUID (36 chars), the first half of its owner ids. */
DLOCK_API const char *dlock_client_id(const dlock_client *c);

/* Writes the calling thread's owner id, "<uuid>:<thread id>", into buf.
 * DLOCK_EINVAL if size < DLOCK_OWNER_BUFSIZE would not fit it. Any thread. */
DLOCK_API int dlock_client_owner_id(const dlock_client *c, char *buf, size_t size);

/* Writes a fresh owner id of this client that no thread id uses
 * ("<uuid>:<n>", n >= 2^32), for work that moves between threads: pass it to
 * dlock_lock_get_as(). Any thread. */
DLOCK_API int dlock_client_new_owner_id(dlock_client *c, char *buf, size_t size);

/* Changes the client's label (see dlock_config_set_client_name) while it
 * runs: connections opened from now on carry it, idle pooled ones are
 * replaced as they come up, the renewal connection is renamed with its next
 * renewal, and one pooled connection is opened (or checked) under the new name
 * before the call returns (one try, no retry: DLOCK_OK even when Redis does not
 * answer, the label being set for the connections to come). The pub/sub connection keeps the
 * name it was opened with (Redis refuses CLIENT SETNAME to a subscriber).
 * Any thread. */
DLOCK_API int dlock_client_set_label(dlock_client *c, const char *label);

/* One PING round trip on the blocking pool. DLOCK_OK when Redis answers. */
DLOCK_API int dlock_client_ping(dlock_client *c);

/* The server's maxmemory-policy, as read (INFO memory) when the client
 * opened: "noeviction", "allkeys-lru", ... into buf (size >= 32 holds every
 * policy Redis has), "" when it could not be read (an ACL without +info, a
 * server that does not say). *risky (may be NULL) = 1 for a policy that lets
 * Redis evict keys when memory is full: allkeys-* evicts any key, volatile-*
 * keys with a TTL, and every held lock has one; an evicted lock is free to
 * the next caller while its holder still believes it holds it
 * (docs/safety.md, Eviction). The client says so once, as a warning through the log
 * callback, when it opens. DLOCK_EINVAL for NULL c or buf, or a size too
 * small for the policy (the message gives the size needed). Any thread. */
DLOCK_API int dlock_client_eviction_policy(dlock_client *c, char *buf, size_t size, int *risky);

/* How bad a finding of dlock_client_doctor is. */
typedef enum dlock_doctor_level {
    DLOCK_DOCTOR_NOTE = 0,     /* for information: a check that could not be made (a command
                                  the server or the ACL refused), a feature unavailable, a
                                  node's clock offset */
    DLOCK_DOCTOR_WARN = 1,     /* safe while everything runs, unsafe after a fault (a restart
                                  forgets the locks, a failover loses grants), or calls that
                                  will fail (ACL, WAIT, foreign keys under the prefixes) */
    DLOCK_DOCTOR_UNSAFE = 2    /* held locks can vanish, and a second holder get in, while
                                  everything runs: an eviction policy that drops them */
} dlock_doctor_level;

/* One finding: the level, the node ("host:port"), the check ("eviction",
 * "persistence", "wait", "replicas", "clock", "acl", "keys", "info"), what
 * was found and its fix (NULL for a note). Strings valid during the call. */
typedef void (*dlock_doctor_fn)(dlock_doctor_level level, const char *node, const char *check,
                                const char *finding, const char *fix, void *ud);

/* One pass over the deployment (each primary: a single server, the primary
 * behind Sentinel, every primary of a cluster) for what makes locks unsafe,
 * each finding passed to fn on the calling thread:
 *   eviction     maxmemory-policy other than noeviction (volatile-* evict
 *                locks too: they carry TTLs): UNSAFE, or WARN while no
 *                maxmemory is set;
 *   persistence  no append-only file and no replica: WARN (a restart forgets
 *                the locks, RDB snapshots or not, while their holders go on);
 *   wait         WAIT refused: WARN when the config asks for replica
 *                acknowledgement (dlock_config_set_replica_ack), else a note;
 *   replicas     with acknowledgement asked for: fewer replicas connected
 *                than asked, min-replicas-to-write 0: WARN;
 *   clock        TIME against this host's clock, apart by more than the
 *                drift allowance (1 % of the watchdog timeout + 2 ms, the
 *                round trip's half aside): WARN; else a note giving the
 *                offset and the round trip (every node's, so they can be
 *                compared);
 *   acl          ACL DRYRUN, as the connection's user, of the commands a
 *                lock needs (its scripts' calls included), for `name`'s keys
 *                and channels when name is given (else commands only): WARN
 *                naming what is missing; a user who may not run ACL DRYRUN
 *                gets a note;
 *   keys         keys under the family's companion prefixes
 *                (redisson_lock_token:, redisson_lock_queue:, dlock_lock_next:,
 *                ...) of another type than the family writes there, up to
 *                1000 examined per node: WARN.
 * Nothing is written. Returns the worst level found (DLOCK_DOCTOR_NOTE, 0,
 * when healthy), or a negative status: DLOCK_EINVAL for NULL c or fn or a
 * bad name, the connection's errors when the deployment does not answer a
 * PING. Any thread; the pass takes a few round trips per node, plus the
 * SCANs of the keys starting with redisson_ and dlock_. */
DLOCK_API int dlock_client_doctor(dlock_client *c, const char *name, dlock_doctor_fn fn,
                                  void *ud);

/* ------------------------------------------------------------------ stats */

/* Latency histograms have DLOCK_STATS_BUCKETS buckets of powers of two
 * microseconds: bucket[0] counts durations under 1 us, bucket[b] (1 <= b <
 * DLOCK_STATS_BUCKETS - 1) durations d with 2^(b-1) <= d < 2^b us, and the
 * last bucket everything from 2^(DLOCK_STATS_BUCKETS-2) us (about 67 s) up.
 * dlock_stats_bucket_limit_us(b) gives bucket b's exclusive upper limit, 2^b
 * (UINT64_MAX for the last): a Prometheus "le" bound, cumulated. */
#define DLOCK_STATS_BUCKETS 28
typedef struct dlock_histogram {
    uint64_t count;                        /* sum of the buckets */
    uint64_t sum_us;                       /* sum of the durations, us */
    uint64_t bucket[DLOCK_STATS_BUCKETS];
} dlock_histogram;

/* Room for lost-hold reasons, indexed by dlock_lost_reason (entry 0 and those
 * of reasons this version does not define stay 0). */
#define DLOCK_STATS_LOST_REASONS 8

/* A client's statistics since it opened, all of its threads together. */
typedef struct dlock_stats {
    uint64_t acquisitions;       /* acquire / try calls that succeeded: every lock kind (a
                                    multi-lock counts once, reentries count) and semaphore
                                    permits (latch awaits do not) */
    uint64_t waits;              /* calls (whatever their end) that found the object taken (a
                                    lock held, too few permits, a latch above zero) and waited */
    uint64_t wakeups;            /* wake-ups by a message (unlock, release, count) that a
                                    waiter used */
    uint64_t wakeups_taken;      /* of those, the ones whose next attempt found the object
                                    taken again (another client was quicker) */
    uint64_t renewals;           /* holds renewed by the watchdog (each hold of a batch) */
    uint64_t renewal_roundtrips; /* renewal scripts sent: one batch per node per pass on a
                                    single server; on a cluster one per key slot, a node's
                                    batches pipelined in one write (see renewal_writes) */
    uint64_t lost[DLOCK_STATS_LOST_REASONS]; /* holds reported lost, by dlock_lost_reason */
    uint64_t reconnects;         /* connections lost (closed, reset, timed out) and replaced */
    uint64_t connects;           /* connections opened (pooled, pub/sub, renewal), with their
                                    handshake */
    uint64_t roundtrips;         /* requests written and answered: on the pool (a pipeline
                                    counts once), on the renewal and pub/sub connections */
    dlock_histogram acquire_wait; /* call to acquisition, of every successful acquisition */
    dlock_histogram handoff_gap;  /* an unlock message's arrival to the acquisition by the
                                     waiter it woke (in this client) */
    dlock_histogram roundtrip;    /* each of `roundtrips`: write to the last reply */
    uint64_t renewal_writes;      /* writes carrying renewals: one per node per watchdog pass
                                     (its batches share it, and one round trip) */
} dlock_stats;

/* Copies the client's statistics into *out: at most `size` bytes, so that a
 * program built against an older, shorter dlock_stats keeps working (fields
 * are only ever appended). Pass sizeof(dlock_stats). Cheap (no I/O, no lock:
 * every value is read atomically, not all at one instant); any thread.
 * DLOCK_EINVAL for NULL arguments. */
DLOCK_API int dlock_client_stats(dlock_client *c, dlock_stats *out, size_t size);
/* The exclusive upper limit of histogram bucket b in us (2^b), UINT64_MAX for
 * the last bucket and out of range. */
DLOCK_API uint64_t dlock_stats_bucket_limit_us(int b);

/* ----------------------------------------------------------------- cancel */

/* A cancellation token: another thread fires it to end a wait early. One token
 * may serve many waits, in sequence or at once. All calls: any thread. */
typedef struct dlock_cancel dlock_cancel;

DLOCK_API int dlock_cancel_new(dlock_cancel **out);
/* Makes every wait using this token return DLOCK_ECANCELED promptly (a round
 * trip in flight finishes first), and every later wait, until reset. */
DLOCK_API void dlock_cancel_fire(dlock_cancel *t);
DLOCK_API void dlock_cancel_reset(dlock_cancel *t);
DLOCK_API int dlock_cancel_fired(const dlock_cancel *t);
/* No wait may be using the token any more. */
DLOCK_API void dlock_cancel_free(dlock_cancel *t);

/* ------------------------------------------------------------ wait options */

/* How a call waits, the same for every call that can wait (lock, semaphore,
 * permit semaphore, latch, multi-lock, election; blocking and asynchronous).
 * A NULL pointer is the zeroed struct: one attempt, the watchdog, not
 * cancellable, no token. Initialize it zeroed and set the fields you need:
 *     dlock_wait_opts o = {.wait_ms = 5000, .cancel = tok};
 * The call reads it before it returns (an asynchronous call copies it), so
 * it may live on the caller's stack; `cancel` and `token` are pointers the
 * call keeps until it ends (an asynchronous call: until its callback has
 * run). Every call checks it the same way: DLOCK_EINVAL, nothing sent and
 * the message naming the field, for a wait below DLOCK_WAIT_FOREVER, a
 * negative lease or one above 2^50 ms, a lease or a token given to a call
 * that has none, and a reserved field that is not zero. */
typedef struct dlock_wait_opts {
    int64_t wait_ms;       /* 0 (the default): one attempt; > 0: up to that long;
                              DLOCK_WAIT_FOREVER: as long as it takes */
    int64_t lease_ms;      /* DLOCK_WATCHDOG (0, the default): held while the client lives,
                              renewed by its watchdog; > 0: a fixed lease, never renewed.
                              Calls that take nothing with a lease (semaphore, latch,
                              election) require 0 */
    dlock_cancel *cancel;  /* NULL: not cancellable; else dlock_cancel_fire() ends the wait
                              with DLOCK_ECANCELED */
    uint64_t *token;       /* NULL: no fencing token; else the acquisition is fenced and the
                              token is written here on DLOCK_OK (an asynchronous call: before
                              its callback runs). Locks and dlock_lock_run; an election's
                              campaign writes its term. Other calls require NULL */
    int64_t reserved[4];   /* must be zero: room for options to come */
} dlock_wait_opts;

/* ------------------------------------------------------------------- lock */

/* A reentrant lock, Redisson's RLock:
 *   key `name`, a hash: field "<owner id>" = hold count, PEXPIRE = lease;
 *   wake-ups on channel `redisson_lock__channel:{name}` (message "0");
 *   fencing tokens in `redisson_lock_token:{name}`.
 * A handle is cheap (no round trip) and may be shared between threads. */
typedef struct dlock_lock dlock_lock;

/* A handle on lock `name` (1..DLOCK_NAME_MAX bytes, any bytes but NUL) that acts
 * for the calling thread: each call's owner is "<client uuid>:<thread id>".
 * DLOCK_EINVAL for NULL/empty, DLOCK_ENAMETOOLONG above the maximum. */
DLOCK_API int dlock_lock_get(dlock_client *c, const char *name, dlock_lock **out);

/* A handle that acts for the explicit owner id `owner` (1..DLOCK_OWNER_MAX bytes
 * of the form "<id>:<n>", normally from dlock_client_new_owner_id; without a
 * ':' it is DLOCK_EINVAL, since every client tells a lock from other data by
 * its owner fields), whichever thread calls. For event-loop programs whose
 * work moves between threads. */
DLOCK_API int dlock_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                dlock_lock **out);

/* A fair lock (Redisson's RFairLock) on `name`: the same handle, and every
 * dlock_lock_* call works on it, but waiters take their turns in arrival
 * order, across processes and machines, Redisson's waiters included:
 *   the lock       hash `name` (as a reentrant lock's);
 *   the queue      list `redisson_lock_queue:{name}` of owner ids;
 *   deadlines      sorted set `redisson_lock_timeout:{name}` (owner id, ms);
 *   wake-ups       each waiter on its own channel
 *                  `redisson_lock__channel:{name}:<owner id>`: a release
 *                  wakes the head of the queue only.
 * A waiter that gives up (deadline, cancellation) leaves the queue at once; a
 * dead one (its process killed) at the head delays the others by the fair
 * wait timeout at most once the lock is free (or by the wait it gave, if
 * shorter; dlock_config_set_fair_wait_timeout, 5 minutes by default as in
 * Redisson). A head keeps its turn for that grace: a newcomer's try(wait) is
 * refused meanwhile, whatever its wait. A live dlock waiter is never dropped
 * from the queue, however long it waits: it keeps its entry fresh (it tries
 * again at least every half slot). A try with a wait of 0 never queues: it
 * takes the lock only when it is free and nobody waits. Reentrant as the
 * lock is; renewed by the same watchdog. Not mixable with a reentrant lock
 * handle on the same name (those ignore the queue). */
DLOCK_API int dlock_fair_lock_get(dlock_client *c, const char *name, dlock_lock **out);
/* As dlock_fair_lock_get, acting for an explicit owner id (see dlock_lock_get_as). */
DLOCK_API int dlock_fair_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                     dlock_lock **out);

/* A non-reentrant lock (Redisson 4.4's getNonReentrantLock) on `name`: the
 * reentrant lock's keys, channel, watchdog, leases and waits, but an
 * acquisition by the owner that holds it already (lock, try with any wait,
 * blocking or asynchronous) is refused at once, DLOCK_EREENTRY, and writes
 * nothing (Redisson throws IllegalMonitorStateException there; as
 * std::mutex, which may not be locked twice by one thread). Other owners wait
 * as for the reentrant lock, woken by its unlock message; a release by a
 * non-owner is DLOCK_ENOTOWNER. Redis holds it as a reentrant lock with a
 * hold count of 1, so Redisson's RLock and non-reentrant lock clients share
 * it (and dlock status shows it as a lock). Same returns as dlock_lock_get. */
DLOCK_API int dlock_nonreentrant_lock_get(dlock_client *c, const char *name, dlock_lock **out);
/* As dlock_nonreentrant_lock_get, acting for an explicit owner id. */
DLOCK_API int dlock_nonreentrant_lock_get_as(dlock_client *c, const char *name,
                                             const char *owner, dlock_lock **out);
/* A non-reentrant fair lock (Redisson's RedissonNonReentrantFairLock): the
 * fair lock's queue and order (dlock_fair_lock_get), the holder's own
 * acquisition refused as dlock_nonreentrant_lock_get's. */
DLOCK_API int dlock_nonreentrant_fair_lock_get(dlock_client *c, const char *name,
                                               dlock_lock **out);
/* As dlock_nonreentrant_fair_lock_get, acting for an explicit owner id. */
DLOCK_API int dlock_nonreentrant_fair_lock_get_as(dlock_client *c, const char *name,
                                                  const char *owner, dlock_lock **out);

/* The spin lock's back-off (Redisson's LockOptions.ExponentialBackOff): after
 * a busy answer a waiter sleeps initial_ms, then each sleep is the last one
 * times multiplier plus a jitter of up to one ms per busy answer so far, up
 * to max_ms, where it stays. multiplier 1 with initial_ms == max_ms is
 * Redisson's ConstantBackOff. Each field >= 1, initial_ms <= max_ms, max_ms
 * at most an hour. */
typedef struct dlock_backoff {
    int64_t initial_ms;      /* Redisson's default: 1 */
    int64_t max_ms;          /* 128 */
    int multiplier;          /* 2 */
} dlock_backoff;

/* A spin lock (Redisson 3.16's getSpinLock) on `name`: the reentrant lock's
 * keys, hold counts, watchdog, leases and release (dlock_lock_get), shared
 * with Redisson's RLock and spin lock clients, but a waiter subscribes to
 * nothing: it tries again after each back-off step (dlock_backoff; Redisson's
 * default 1 ms doubling to 128 ms unless dlock_lock_set_backoff says
 * otherwise), or when the holder's TTL ends if that comes first. So ten
 * thousand waiters on ten thousand names cost no subscriptions and no
 * pub/sub connection at all, and a waiter learns of a release up to one
 * back-off step late (make bench: spin). The cost is Redis commands while
 * waiting: one attempt per step, about 8 per second per waiter at the 128 ms
 * maximum. A release still publishes Redisson's unlock message (a
 * subscribed RLock waiter of the same name wakes at once). Its wait also
 * does not watch the key (dlock_lock_try's wake on a DEL or an eviction):
 * the next step finds it. Same returns as dlock_lock_get. */
DLOCK_API int dlock_spin_lock_get(dlock_client *c, const char *name, dlock_lock **out);
/* As dlock_spin_lock_get, acting for an explicit owner id. */
DLOCK_API int dlock_spin_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                     dlock_lock **out);
/* Sets the back-off of a spin lock handle's later waits (NULL: Redisson's
 * default). Thread-safe; a wait under way keeps the one it started with.
 * DLOCK_EINVAL, naming the field, for a value out of range or a handle that
 * is not a spin lock's (a pub/sub waiter has no back-off). */
DLOCK_API int dlock_lock_set_backoff(dlock_lock *l, const dlock_backoff *b);

/* A fenced lock (Redisson's RFencedLock) on `name`: a reentrant lock handle
 * (the same keys, the same holders) on which every acquisition, reentrant
 * ones included, raises the fencing token `redisson_lock_token:{name}` in
 * the acquiring script, as a fenced acquisition (dlock_wait_opts's token)
 * does: by dlock_lock_acquire, dlock_lock_try and every other acquire call
 * alike. Read the token of the hold just taken with dlock_lock_get_token
 * (while the caller holds the lock nobody else can raise it), or take it
 * directly with dlock_lock_acquire_opts and a token pointer. Shares the lock with Redisson's RLock and
 * RFencedLock clients. Same returns as dlock_lock_get; *out is NULL on
 * failure; the handle may be shared between threads. */
DLOCK_API int dlock_fenced_lock_get(dlock_client *c, const char *name, dlock_lock **out);
/* As dlock_fenced_lock_get, acting for an explicit owner id (see dlock_lock_get_as). */
DLOCK_API int dlock_fenced_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                       dlock_lock **out);

/* A read-write lock (Redisson's RReadWriteLock) on `name`: two handles, the
 * read lock and the write lock, on which every dlock_lock_* call works
 * (acquire with the watchdog or a lease, try, the options, fenced, release,
 * force release, queries, run, lost callback). Many owners may hold the read
 * lock at once; the write lock excludes every other owner, readers and
 * writers. Both are reentrant, and the owner of the write lock may also take
 * the read lock (its read holds may outlast its write holds). The order is
 * not fair: readers join whenever the lock is read-held, so a steady stream
 * of readers can keep a writer waiting (as Redisson's), unless the handles
 * are writer-first (dlock_lock_set_writer_first).
 *   the lock       hash `name`: field "mode" = "read" or "write", each
 *                  reader's field "<owner id>" = its read hold count, the
 *                  writer's field "<owner id>:write" = its write hold count;
 *   read holds     one string key per reentrant read hold k = 1..count,
 *                  `{name}:<owner id>:rwlock_timeout:<k>` (`name:...` when
 *                  the name has a '{'), each with its own TTL (the lease, or
 *                  the watchdog timeout renewed with the client's other
 *                  holds); the hash lives as long as the longest of them;
 *   wake-ups       channel `redisson_rwlock:{name}`: "0" when a read release
 *                  frees the lock (wakes one waiter), "1" after the last
 *                  write hold goes (wakes every waiter; also when the writer
 *                  keeps read holds, which Redisson does not publish: the
 *                  waiting readers come in at once).
 * Differences with the reentrant lock's calls:
 *   - The write acquire (acquire, try, the options form, run) by an owner
 *     that holds read holds of the same name returns DLOCK_EDEADLK at once,
 *     whatever the wait: a reader can never be granted the write lock
 *     (Redisson's waits forever there).
 *   - Reentry of the write lock sets the TTL to the current TTL + the lease
 *     (as Redisson); a read acquire raises the TTL to the lease, never lowers.
 *   - dlock_lock_release on the handle of the side the owner does not hold
 *     (write handle, owner only reads; or the reverse) is DLOCK_ENOTOWNER and
 *     the message names the side it holds.
 *   - dlock_lock_force_release deletes the lock only when held in the
 *     handle's mode (a read handle deletes a read-held lock, "0"; a write
 *     handle a write-held one, "1"); *was_locked = 0 otherwise.
 *   - dlock_lock_is_locked: write handle, held for writing; read handle, held
 *     for reading, or for writing by a writer that also holds read holds.
 *     dlock_lock_hold_count and dlock_lock_is_held count the handle's side.
 *   - A name holding a reentrant or fair lock (a hash without "mode"), or
 *     another type, is DLOCK_EWRONGTYPE, and nothing is written; a reentrant
 *     or fair lock handle refuses a read-write lock's hash likewise.
 * Handles are cheap (no round trip) and may be shared between threads. */
DLOCK_API int dlock_read_lock_get(dlock_client *c, const char *name, dlock_lock **out);
DLOCK_API int dlock_write_lock_get(dlock_client *c, const char *name, dlock_lock **out);
/* As dlock_read_lock_get / dlock_write_lock_get, acting for an explicit owner
 * id (see dlock_lock_get_as). A read and a write handle made for the same
 * owner id are the same owner: its write hold lets it take the read lock. */
DLOCK_API int dlock_read_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                     dlock_lock **out);
DLOCK_API int dlock_write_lock_get_as(dlock_client *c, const char *name, const char *owner,
                                      dlock_lock **out);
/* Writer-first (dlock's own; by default the client's setting,
 * dlock_config_set_writer_first, itself off by default). In Redisson's
 * read-write lock readers join whenever the lock is read-held, so readers
 * whose holds overlap can keep a waiting writer out for ever. Writer-first:
 *   - a write acquisition that may wait (a wait other than 0) and finds the
 *     lock held (or in a lock-delay) records its intent in Redis, the sorted
 *     set dlock_write_intent:{name}: member its field "<owner id>:write",
 *     score the server time (ms) at which the intent lapses unless renewed,
 *     one watchdog timeout after the attempt (dlock_config_set_watchdog_timeout)
 *     or the end of its wait if sooner. The waiting writer tries again at
 *     least every third of that, which renews it; its acquisition removes it.
 *     A wait that ends without the lock (its deadline, a cancellation, an
 *     error) removes it and, unless another writer's intent lives, publishes
 *     "1" on the lock's channel: the readers it held back try again at once.
 *     A writer that dies while waiting holds new readers back until its
 *     intent lapses: one watchdog timeout at most, as a dead holder keeps
 *     its lock.
 *   - a read acquisition through a writer-first handle, by an owner that
 *     holds no read hold of the name, is refused while another writer's
 *     intent lives: it waits (sleeping until a message or the intent's
 *     lapse; a try with no wait answers DLOCK_ETIMEDOUT, whose message says
 *     a writer waits). An owner that already reads re-enters as before, and
 *     so does the writer's own read acquisition: readers that hold keep
 *     holding, and the writer gets in when their holds end (the last read
 *     release's "0" wakes it before the client's other local waiters).
 * The sides decide apart: a writer-first write handle records intents, a
 * writer-first read handle honours them; set it on every client (or handle)
 * of the name. Writers are preferred, not ordered among themselves, and
 * while writers keep waiting new readers keep waiting (reader starvation, as
 * in any writer-preferring lock); an owner that holds the read lock and
 * waits for a read acquisition of another owner before releasing deadlocks
 * behind a waiting writer. Redisson clients ignore intents: their readers
 * join, their writers record none (a handle with writer-first off behaves as
 * they do). A Redis user whose ACL refuses ~dlock_write_intent:* goes on
 * without intents (the log callback warns once). on: 1 or 0. DLOCK_EINVAL
 * (nothing changed) for l NULL, another value, or a handle that is not a
 * read or write lock's. Any thread; each attempt of an acquisition reads
 * it. */
DLOCK_API int dlock_lock_set_writer_first(dlock_lock *l, int on);

/* Striped locks: a hot resource split into `nstripes` segments, each a lock of
 * its own, and a key (an order id, a user name) mapped to one of them, so
 * that work on different keys mostly takes different locks. The lock's name:
 *   base + ":segment:" + segment, where segment is
 *   - key % nstripes when key is an integer (an optional '-' and ASCII
 *     digits, any number of them; leading zeros allowed: "007" is 7). The
 *     remainder keeps the key's sign, as Java's % does: "-3" with 16 stripes
 *     is segment -3 (so signed keys use 2 * nstripes - 1 segments); "-16" is
 *     segment 0;
 *   - crc32(key) % nstripes otherwise: CRC-32 as zlib and java.util.zip.CRC32
 *     compute it, of the key's bytes (UTF-8 text as it is), as an unsigned
 *     32-bit number ("abc" gives 0x352441C2).
 * So a Java service locking redisson.getLock(base + ":segment:" + (id % 16))
 * shares these locks. The mapping is fixed: changing nstripes moves keys to
 * other segments, so every client of a resource must use the same count.
 * Pass an integer id as its decimal text. */
#define DLOCK_STRIPES_MAX 1048576
/* The stripe's lock name for `key` into buf[size]. DLOCK_EINVAL for a NULL or
 * empty base or key, nstripes outside 1..DLOCK_STRIPES_MAX, or a NULL buf;
 * DLOCK_ENAMETOOLONG when the name is longer than DLOCK_NAME_MAX or does not
 * fit in size (a buffer of DLOCK_NAME_MAX + 1 bytes always does). Pure: no
 * I/O; any thread. */
DLOCK_API int dlock_stripe_name(const char *base, const char *key, int nstripes, char *buf,
                                size_t size);
/* A handle on the stripe of `key` (dlock_stripe_name), as dlock_lock_get,
 * dlock_fair_lock_get, dlock_read_lock_get and dlock_write_lock_get give one
 * on a name: the same codes, the same threads; *out is NULL on failure. */
DLOCK_API int dlock_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                     int nstripes, dlock_lock **out);
DLOCK_API int dlock_fair_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                          int nstripes, dlock_lock **out);
DLOCK_API int dlock_read_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                          int nstripes, dlock_lock **out);
DLOCK_API int dlock_write_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                           int nstripes, dlock_lock **out);

/* Frees the handle; holds taken through it stay held (and renewed). No other
 * call may be using this handle. */
DLOCK_API void dlock_lock_free(dlock_lock *l);

DLOCK_API const char *dlock_lock_name(const dlock_lock *l);

/* Lost callback for holds taken through this handle from now on (overrides the
 * client's). NULL fn falls back to the client's. Any thread. */
DLOCK_API void dlock_lock_set_lost_callback(dlock_lock *l, dlock_lost_fn fn, void *ud);
/* The same with the cause as an argument (dlock_lost_cause_fn); it replaces
 * the handle's dlock_lost_fn one, and the other way round. */
DLOCK_API void dlock_lock_set_lost_cause_callback(dlock_lock *l, dlock_lost_cause_fn fn,
                                                  void *ud);
/* Replicas that acknowledged the last acquisition through this handle
 * (blocking or asynchronous; with several at once, the one answered last),
 * or -1 when none was asked for (acknowledgement off, none yet, or the
 * acquisition failed before). Any thread; -1 for NULL. See
 * dlock_config_set_replica_ack. */
DLOCK_API int dlock_lock_replica_acks(const dlock_lock *l);

/* ------------------------------------------------------ revoke requests */

/* Revocation on request (Curator's revocable lock): a waiter or an operator
 * asks the holders of a lock to let it go; a holder whose handle has a
 * revoke handler hears it and decides: it may release when it is safe, or
 * refuse by doing nothing. Nothing is forced, and the lock is not changed by
 * a request. dlock's own wire (docs/wire-format.md): a short-lived record
 * dlock_revoke_request:{name} and a message on the channel
 * dlock_revoke_request__channel:{name}; Redisson clients ignore both, and
 * a Redisson holder never hears a request. Not to be confused with
 * dlock_config_set_revocation (loss detection by client tracking). */

/* A request heard by a holder: `name` the lock, `owner` the holder's owner
 * id (the thread's "<uuid>:<n>" or the handle's explicit owner, as the lost
 * callback names it), `note` the asker's note ("" when none). All valid
 * during the call only. Called on the client's io thread (a client on the
 * program's loop, dlock_config_set_uv_loop: on that loop's thread), once per
 * request and per hold of the handle's owner (a thread handle: each of the
 * client's threads that holds the lock through any handle). The same rules
 * as the lost callback: return quickly (wake-ups and renewals wait); it may
 * call dlock functions of its client that do not wait: a release of an
 * explicit-owner handle (the thread that took a thread-owner hold is not
 * the io thread: tell that thread instead), a try with wait 0, queries, the
 * asynchronous calls, dlock_lock_set_revoke_handler; a call that would wait
 * returns DLOCK_EINVAL there, and dlock_client_close() must not be called. */
typedef void (*dlock_revoke_fn)(const char *name, const char *owner, const char *note,
                                void *ud);

/* Sets the revoke handler of this handle (NULL fn: none). While a handler
 * is set the handle listens for requests on its lock's name (one pub/sub
 * subscription per name and client, in the lock's slot on a cluster): a
 * request reaches it when it holds the lock (the request names the holders;
 * the handler runs for those of this handle's owner). A request published
 * while the subscription was down (being set up, a reconnect, a failover)
 * is read from its record when the subscription comes up, if made in the 10
 * s before. Handles without a handler cost nothing. Once this returns with
 * a NULL fn (or the handle is freed) the old handler is not running and
 * will not be called, except when called from inside that handler, which
 * then ends first. Any thread. DLOCK_OK, DLOCK_EINVAL (NULL handle),
 * DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_lock_set_revoke_handler(dlock_lock *l, dlock_revoke_fn fn, void *ud);

/* What a revoke request found. */
typedef struct dlock_revoke_answer {
    int holders;             /* owners that held the lock and were asked; 0: it was free
                                (nothing was sent) */
    int listeners;           /* clients that heard it: those with a revoke handler on this
                                name (the holder's among them when it set one; one whose
                                handler was removed a moment ago may still be counted: its
                                unsubscription goes out after that call returns); 0 with
                                holders > 0: nobody listening, the holder has no handler */
} dlock_revoke_answer;

/* The longest note of a revoke request, in bytes. */
#define DLOCK_REVOKE_NOTE_MAX 4096

/* Asks the holders of l's lock (any owner: the handle's own is not
 * special) to let it go, with an optional `note` (NULL or "": none; at most
 * DLOCK_REVOKE_NOTE_MAX bytes) passed to their handlers. One round trip; it
 * does not wait for an answer from the holder: wait for the lock as usual
 * (dlock_lock_try, or the asynchronous acquire) to see it let go. *out
 * (may be NULL) tells whether it was held and whether anyone heard.
 * DLOCK_OK when the request was made (whatever it found), DLOCK_EINVAL
 * (NULL handle, a note too long), DLOCK_EWRONGTYPE (the key is not a
 * lock), connection errors. Not resent after a lost reply (DLOCK_EUNKNOWN):
 * a holder may have heard it. Any thread (not a waiting call: allowed in
 * callbacks). Works on every lock type whose key is a lock hash: reentrant,
 * fair, read and write locks. */
DLOCK_API int dlock_lock_request_revoke(dlock_lock *l, const char *note,
                                        dlock_revoke_answer *out);

/* The hold limit of watchdog holds taken through this handle from now on (see
 * dlock_config_set_max_hold): ms > 0 a limit of its own, 0 the client's (the
 * default), DLOCK_MAX_HOLD_NONE no limit even if the client has one. The
 * limit is read when an acquisition succeeds, so set it before acquiring: one
 * handle per limit, or set it before each acquisition for a limit per
 * acquisition (a handle shared by threads shares its setting). DLOCK_EINVAL
 * (nothing changed) for l NULL or ms out of range. Any thread. */
#define DLOCK_MAX_HOLD_NONE ((int64_t)-1)
DLOCK_API int dlock_lock_set_max_hold(dlock_lock *l, int64_t ms);
/* This handle's lock-delay (see dlock_config_set_lock_delay; the client's by
 * default): ms 0 (off) to 86 400 000. Set it before the handle's first
 * acquisition, from one thread: after one, DLOCK_EINVAL (a hold's renewals
 * keep the setting it was taken with). DLOCK_EINVAL (nothing changed) for l
 * NULL or ms out of range. Every lock kind (reentrant, fair, read, write); a
 * read and a write handle of one name each have their own setting, used by
 * the acquisitions through it. */
DLOCK_API int dlock_lock_set_lock_delay(dlock_lock *l, int64_t ms);

/* Acquires, as the options say (NULL: one attempt, with the watchdog):
 *   o->wait_ms   0: one attempt; > 0: up to that long; DLOCK_WAIT_FOREVER.
 *                Waiting sleeps on the lock's channel until an unlock message
 *                or the holder's TTL, never on a fixed poll; a lock freed
 *                without a message (an operator's DEL, a force unlock by
 *                another tool, expiry, eviction, FLUSHALL, a lost holder's
 *                lock-delay ended) wakes it too, within a round trip or two:
 *                the client reads the lock's key once with client tracking
 *                (Redis 6+), for all its waiters on it, and once more after
 *                each change to it (a holder's renewal: once per third of
 *                its watchdog timeout); the waiting threads send nothing.
 *   o->lease_ms  > 0: the key expires after the lease and is never renewed;
 *                DLOCK_WATCHDOG (0): held with the watchdog timeout and
 *                renewed every timeout / 3 until released or the client closes.
 *   o->cancel    fired from another thread: the wait ends with DLOCK_ECANCELED
 *                (Redisson's lockInterruptibly).
 *   o->token     non-NULL: the acquisition is fenced and *o->token receives the
 *                lock's fencing token: INCR of `redisson_lock_token:{name}`
 *                (Redisson's RFencedLock counter), done in the same script as
 *                the acquisition (reentry included), and raised to the
 *                server's clock in microseconds when below it, so tokens are
 *                strictly increasing per name even across a restart that lost
 *                the counter. The counter expires after 7 days without a
 *                fenced acquisition of the name (the clock floor keeps the next
 *                token above every earlier one). Give the token to the resource
 *                you guard, which refuses lower tokens; for data in Redis,
 *                dlock_fence_* (below) are that check.
 * Reentrant: an owner that holds the lock gets it again (hold count + 1; the
 * lease is reset).
 * Returns DLOCK_OK, or DLOCK_ETIMEDOUT (still held by another owner when the
 * wait ended, or free but reserved for a long waiter: see
 * dlock_config_set_priority_after), DLOCK_ECANCELED, DLOCK_EWRONGTYPE (the
 * key is not a lock), DLOCK_EDEADLK (a reader asking for the write lock),
 * DLOCK_ECONN, DLOCK_ECMDTIMEOUT, DLOCK_EUNKNOWN (the request was written and
 * no answer came, by timeout or a dropped connection: it is not resent, since
 * that could count a hold twice; the lock may be held (renewed only with the
 * owner's known holds) until the owner's release that ends its last known
 * hold, or for up to one lease: see
 * dlock_lock_release), DLOCK_EINVAL (bad options, see dlock_wait_opts; also a
 * wait asked for inside a dlock callback). Any thread: the owner is the
 * calling thread, or the handle's explicit owner. */
DLOCK_API int dlock_lock_acquire_opts(dlock_lock *l, const dlock_wait_opts *o);

/* Redisson's lock(lease): dlock_lock_acquire_opts with wait_ms
 * DLOCK_WAIT_FOREVER and this lease (DLOCK_WATCHDOG or > 0). */
DLOCK_API int dlock_lock_acquire(dlock_lock *l, int64_t lease_ms);

/* Redisson's tryLock(wait, lease): dlock_lock_acquire_opts with this wait and
 * lease. */
DLOCK_API int dlock_lock_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms);

/* The last fencing token given for the lock's name (Redisson's getToken): a
 * GET of `redisson_lock_token:{name}`, without taking the lock; *token = 0
 * when none was ever given (or the counter expired, 7 days after the last
 * fenced acquisition). Any lock handle (reentrant, fair, fenced, read,
 * write). Returns DLOCK_OK, DLOCK_EINVAL (l or token NULL), DLOCK_EWRONGTYPE
 * (the counter's key holds something else), or a connection error. Any
 * thread. */
DLOCK_API int dlock_lock_get_token(dlock_lock *l, uint64_t *token);

/* Extends a hold taken with a fixed lease: the lock's TTL becomes lease_ms
 * from now (longer or shorter than what is left), in one script that checks
 * the caller (the handle's owner) holds it. The hold count and the fencing
 * token are unchanged. For reentrant, fair and fenced locks.
 * Returns DLOCK_OK; DLOCK_ENOTOWNER when the caller does not hold the lock
 * (never held, released, expired); DLOCK_EINVAL, nothing sent, for l NULL, a
 * lease not positive (or DLOCK_WATCHDOG), a read or write lock handle, or a
 * hold the watchdog renews (its renewals would undo the lease; release and
 * take it with a lease instead); DLOCK_EWRONGTYPE when the key is not a lock
 * (nothing changed); a connection error. Safe to retry: sent again after a
 * lost reply it sets the same TTL. Any thread (as the handle's owner). */
DLOCK_API int dlock_lock_extend(dlock_lock *l, int64_t lease_ms);

/* Hands the caller's hold over to the owner id `new_owner` (another thread's,
 * or another process's that was given the id; dlock_client_new_owner_id
 * makes them), in one script, so that nobody else can take the lock in
 * between (dlock's own; Redisson has none). The whole hold count moves; the
 * lock's TTL is raised to the watchdog timeout when shorter, never lowered,
 * so that the receiver has a full lease to adopt it in (dlock_lock_adopt);
 * the fencing token and the lock-delay (its marker names the receiver after)
 * go with it. Nothing is published: no waiter wakes, since the lock stays
 * held. The caller's watchdog stops renewing the hold, reporting nothing.
 * The caller's hold limit does not follow: the receiver's own applies from
 * its adoption. For reentrant locks (plain, fenced, spin, non-reentrant).
 * Returns DLOCK_OK; DLOCK_ENOTOWNER when the caller holds nothing (a
 * renewed hold found gone is reported to the lost callback, as by a
 * release); DLOCK_EINVAL, nothing sent, for l NULL, a fair, read or write
 * lock handle, a new owner that is NULL, empty, without ':' or the caller
 * itself; DLOCK_ENAMETOOLONG for a new owner longer than DLOCK_OWNER_MAX; DLOCK_EWRONGTYPE when the key is not a lock; a connection
 * error. Not resent after a lost reply (DLOCK_EUNKNOWN): a hand-over that
 * ran would be answered "not held"; the caller's next renewal then finds
 * out, and reports a loss if it went. Any thread (as the handle's owner). */
DLOCK_API int dlock_lock_transfer(dlock_lock *l, const char *new_owner);

/* Adopts a hold handed over to the handle's owner (dlock_lock_transfer;
 * dlock_lock_get_as for another thread's or process's id): checks that the
 * owner holds the lock, and sets its TTL to lease_ms from now, or with
 * DLOCK_WATCHDOG to the watchdog timeout, and this client's watchdog renews
 * it from now on (the lost callback and hold limit are the handle's, as for
 * an acquisition). *count (may be NULL) = the hold count adopted: that many
 * releases free the lock. Until adopted, a hold handed over lives the TTL
 * the transfer left it. Works on any hold the owner has (one acquired by
 * the same owner id through another client, too). Returns DLOCK_OK;
 * DLOCK_ENOTOWNER when the owner holds nothing (not handed over yet,
 * expired, released); DLOCK_EINVAL, nothing sent, for l NULL, a bad lease, a
 * fair, read or write lock handle, or a hold this client's watchdog renews
 * already (acquired or adopted: adopting it again would count it twice);
 * DLOCK_EWRONGTYPE; a connection error. Safe to retry. Any thread (as the
 * handle's owner). */
DLOCK_API int dlock_lock_adopt(dlock_lock *l, int64_t lease_ms, int64_t *count);

/* Releases one hold. At hold count 0 the key is deleted and waiters (dlock's and
 * Redisson's) are woken. DLOCK_ENOTOWNER when the caller holds nothing (never
 * held, released already, expired, or lost; a watchdog hold found gone is also
 * reported to the lost callback). A release retried after a lost reply answers
 * what the first attempt did (Redisson 4's unlock latch); no retry is sent
 * whose answer could come after that latch expires (see docs/c-guide.md, Limits).
 * Whatever the answer, even an error, the watchdog stops renewing a hold once
 * every acquisition of it has seen a release attempt, as Redisson's does.
 * When that hold's renewal is on its way, the call returns once it is
 * answered (at most the command timeout + 1 s later), so that it cannot land
 * on the owner's next hold of the name and stretch it to the watchdog
 * timeout. Called from a dlock callback (the io thread, which reads that
 * answer) it does not wait and keeps that window: there, release with
 * dlock_lock_release_async and take the next hold in its callback.
 * After an acquisition by this owner ended DLOCK_EUNKNOWN: when this release
 * ends the owner's last hold that the client knows of and Redis answers that
 * holds remain, that acquisition ran; the call releases again (a request of
 * its own, at most once per such acquisition) until the owner holds nothing,
 * and returns DLOCK_OK whatever those extra releases answer (a failed one
 * leaves that hold to its lease, with a warning in the log). */
DLOCK_API int dlock_lock_release(dlock_lock *l);

/* Deletes the lock whoever holds it and wakes its waiters (Redisson's
 * forceUnlock). *was_locked (may be NULL) = 1 if something was deleted. The
 * caller's own watchdog renewal stops; holds of other owners of this client
 * that it destroyed are reported lost by their next renewal. Not resent after
 * a lost reply (DLOCK_EUNKNOWN): its wake-up may already have handed the lock
 * to a waiter. */
DLOCK_API int dlock_lock_force_release(dlock_lock *l, int *was_locked);

/* *locked = 1 when any owner holds the lock. DLOCK_EWRONGTYPE for a non-lock key. */
DLOCK_API int dlock_lock_is_locked(dlock_lock *l, int *locked);
/* *held = 1 when the handle's owner (calling thread, or explicit owner) holds it. */
DLOCK_API int dlock_lock_is_held(dlock_lock *l, int *held);
/* *held = 1 when owner id `owner` holds it. */
DLOCK_API int dlock_lock_is_held_by(dlock_lock *l, const char *owner, int *held);
/* *count = the handle's owner's hold count (0 when not held). */
DLOCK_API int dlock_lock_hold_count(dlock_lock *l, int64_t *count);
/* *ttl_ms = remaining time to live in ms; -2 when the lock does not exist,
 * -1 when it has no expiry. */
DLOCK_API int dlock_lock_ttl(dlock_lock *l, int64_t *ttl_ms);

/* Runs fn(ud) while holding the lock and always releases afterwards
 * (Redisson's executeInLock). Acquires as dlock_lock_acquire_opts(l, o) (a
 * fenced run has its token in *o->token before fn runs); when that fails fn
 * is not called and its code is returned. Otherwise *fn_result (may be NULL)
 * receives fn's return value, and the call returns the release's status:
 * DLOCK_OK, or DLOCK_ENOTOWNER when the lock expired or was lost while fn
 * ran. DLOCK_EINVAL for a NULL fn. */
typedef int (*dlock_run_fn)(void *ud);
DLOCK_API int dlock_lock_run(dlock_lock *l, const dlock_wait_opts *o, dlock_run_fn fn, void *ud,
                             int *fn_result);

/* ------------------------------------------------------------- multilock */

/* Several locks taken as one: a multi-lock (Redisson's RedissonMultiLock),
 * held when every lock is held, or a RedLock (RedissonRedLock, the Redis
 * RedLock algorithm), held when a majority is. Built from lock handles of any
 * type (dlock_lock_get, dlock_fair_lock_get, their _as forms, ...) on one
 * client or several; the handles stay the caller's, unchanged, and must
 * outlive the multi-lock. Nothing new is stored in Redis: each lock is held
 * exactly as its handle holds it, so Redisson sees (and contends for) each
 * one as the lock it is.
 *
 * Owner: each lock is taken and released for its handle's owner: the calling
 * thread, or the handle's explicit owner id. So the thread that acquires must
 * be the one that releases, unless every handle is an explicit-owner handle.
 * Reentrant as the locks are: acquiring again takes each lock once more, and
 * each acquire needs a release.
 *
 * Threads: a multi-lock is immutable once made: any number of threads may use
 * it at once (each for its own owner). dlock_multilock_free must be the last
 * call on it. */
typedef struct dlock_multilock dlock_multilock;

/* A multi-lock of the n handles in `locks` (the array is copied; the handles
 * are not). DLOCK_EINVAL, with a message naming the culprit, for: out NULL,
 * locks NULL or n == 0, a NULL handle, a handle appearing twice, two handles
 * naming the same lock (the same name on the same server, whatever their
 * types). */
DLOCK_API int dlock_multilock_new(dlock_lock *const *locks, size_t n, dlock_multilock **out);

/* A RedLock over n >= 3 handles, each on its own client connected to its own
 * independent Redis server (see docs/c-types.md, "RedLock"): held when a majority,
 * n/2 + 1, is taken within the validity time. DLOCK_EINVAL as
 * dlock_multilock_new, and for n < 3 and for two handles on the same client
 * or on the same server (same address, port and database). The same calls
 * below serve both kinds; the differences are named at each. */
DLOCK_API int dlock_redlock_new(dlock_lock *const *locks, size_t n, dlock_multilock **out);

/* Takes every lock (a RedLock: a majority), all or nothing, waiting as long
 * as it takes; lease_ms as dlock_lock_acquire's: a positive lease applied to
 * every lock (each key expires lease_ms after the round that took it), or
 * DLOCK_WATCHDOG (each lock renewed by its client's watchdog).
 * How: every lock is attempted at once, in one round trip per server (the
 * attempts to one server written together, the servers in parallel). When
 * some lock is held by another owner, whatever was taken is given back
 * (released in one round trip per server), and the call sleeps on that busy
 * lock's channel until it is released (or its TTL, the deadline, a
 * cancellation), then tries them all again: nothing is held while waiting,
 * so multi-locks over the same names in any order cannot deadlock. The busy
 * lock is waited on as a single acquire waits (a fair lock queues the caller;
 * a reentrant lock may reserve its next turn); the others are tried as a
 * try with no wait would be.
 * A RedLock attempts each server once per round (no retry: a server that
 * refuses the connection counts as failed at once; one that accepts and does
 * not answer, after the command timeout: give RedLock clients short connect
 * and command timeouts). It succeeds when a majority was taken and the
 * validity, lease - (time the round took) - (lease / 100 + 2 ms of clock
 * drift), is positive; with DLOCK_WATCHDOG the lease in that sum is the
 * watchdog timeout, and afterwards each server's hold is renewed by its own
 * client. The caller may rely on holding it until (the time it called) +
 * lease - drift. A majority taken too late is released and tried again after
 * a short random pause, within the wait. When more servers failed than a
 * majority can spare, the call fails at once.
 * Returns DLOCK_OK, or: DLOCK_ETIMEDOUT (a try: still busy at the deadline;
 * a RedLock: also a majority taken past its validity), DLOCK_ECANCELED,
 * DLOCK_EINVAL (bad options, or a wait inside a dlock callback), or the
 * error of a lock (a multi-lock: the first in the array's order; a RedLock:
 * of its servers, when too many failed), DLOCK_ECONN, DLOCK_EWRONGTYPE, ...,
 * the message naming the lock. On every failure, whatever the call took has
 * been given back, except: DLOCK_EUNKNOWN (a multi-lock: an attempt was
 * written and no answer came) leaves that one lock as dlock_lock_acquire
 * does (maybe held, for one lease at most, not renewed); a RedLock sends a
 * release to such a server too. Should giving back fail (Redis unreachable
 * meanwhile), the call returns that error and the lock expires with its
 * lease. */
DLOCK_API int dlock_multilock_acquire(dlock_multilock *ml, int64_t lease_ms);

/* As dlock_multilock_acquire, for up to wait_ms (0 = one round, no waiting;
 * DLOCK_WAIT_FOREVER = no limit). */
DLOCK_API int dlock_multilock_try(dlock_multilock *ml, int64_t wait_ms, int64_t lease_ms);

/* As dlock_multilock_acquire, with the options' wait (NULL: one round) and
 * lease, and a wait that ends with DLOCK_ECANCELED, nothing held, when
 * o->cancel is fired from another thread. A multi-lock has no single
 * fencing token: o->token must be NULL (DLOCK_EINVAL). */
DLOCK_API int dlock_multilock_acquire_opts(dlock_multilock *ml, const dlock_wait_opts *o);

/* Releases one hold of every lock (the releases to one server in one round
 * trip, the servers in parallel), each as dlock_lock_release does, and tries
 * them all whatever happens to some. A multi-lock returns DLOCK_OK, or the
 * first error in the array's order (DLOCK_ENOTOWNER: that lock was not held,
 * e.g. its lease ran out). A RedLock sends each release once (no retry) and
 * returns DLOCK_OK when a majority was released; otherwise DLOCK_ENOTOWNER
 * (the locks had expired) or the first error. */
DLOCK_API int dlock_multilock_release(dlock_multilock *ml);

/* Frees the multi-lock (not its handles, nor any hold). No other call may be
 * using it. */
DLOCK_API void dlock_multilock_free(dlock_multilock *ml);

/* ---------------------------------------------------------- fenced writes */

/* A fencing token helps only where the resource checks it. For data kept in
 * Redis, these calls are the check: a write command on one key runs only when
 * the caller's token is not lower than the highest token the key's guard has
 * seen, and the guard is raised to the token, atomically (one Lua script). A
 * holder that lost its lock without knowing (paused past its lease, cut off,
 * its lock forced open) and writes late is refused once a newer holder, with
 * a higher token, has written: DLOCK_EFENCED, and nothing is written. The
 * same token may write any number of times; tokens need not be consecutive.
 *
 * The token: what a fenced acquisition (dlock_wait_opts.token) or a leader's
 * term gives (or DLOCK_TOKEN in `dlock run`). Use one source of tokens per
 * key: tokens of two lock names (or a lock and an election) are not ordered
 * between them.
 *
 * The guard: a string key beside the data, in its cluster slot,
 * dlock_fence:<key> when the key has a hash tag ({...}), else
 * dlock_fence:{<key>}, holding the highest token written. It lives as long as
 * the data: no TTL while the key has none, the key's TTL + 7 days when it has
 * one, 7 days once the key is gone (a fenced DEL, or its TTL), so a deletion
 * is remembered for a week. Past that a write with any token is taken. Writes
 * to the key by other means (plain SET) are neither checked nor seen; a
 * change of its TTL by other means leaves the guard's as it was.
 *
 * The writes fenced (single-key commands, any case): SET SETEX PSETEX SETNX
 * GETDEL APPEND SETRANGE INCR INCRBY INCRBYFLOAT DECR DECRBY DEL UNLINK
 * EXPIRE PEXPIRE PERSIST HSET HSETNX HDEL HINCRBY HINCRBYFLOAT LPUSH RPUSH
 * LPOP RPOP LSET LTRIM SADD SREM ZADD ZREM ZINCRBY XADD XDEL XTRIM. DEL and
 * UNLINK take the one key. A command the server lacks (GETDEL before 6.2) is
 * its DLOCK_EREDIS.
 *
 * Returns (every call): DLOCK_OK (written), DLOCK_EFENCED (refused; the
 * message gives both tokens), DLOCK_EINVAL (nothing sent: NULL client or
 * argument, token 0, a command not in the list, no key or an empty one, a
 * DEL of several keys, more than 1024 arguments, or a key with a '}' and no
 * hash tag, which no guard can share a slot with), DLOCK_EWRONGTYPE (the key,
 * or its guard, holds another type), DLOCK_EREDIS (Redis refused the command:
 * a syntax error, a value that is not a number; nothing written), or a
 * connection error. A write whose reply is lost is not resent
 * (DLOCK_EUNKNOWN: it may have run). Any thread. */

/* The write argv[0] (the command) on key argv[1] with arguments argv[2..],
 * argc of them in all; argvlen: their lengths (NULL: each is a C string).
 * reply (may be NULL): the command's reply as text, malloc'd and
 * NUL-terminated (free it with free()): a status or a string as is, an
 * integer in decimal, a list (LPOP with a count) one element per line; NULL
 * for a nil reply (SET NX that did not set). reply_len: its length. */
DLOCK_API int dlock_fence_command(dlock_client *c, uint64_t token, int argc,
                                  const char *const *argv, const size_t *argvlen, char **reply,
                                  size_t *reply_len);
/* SET key value (vlen bytes) [PX px_ms] fenced; px_ms 0: no expiry. */
DLOCK_API int dlock_fence_set(dlock_client *c, uint64_t token, const char *key,
                              const char *value, size_t vlen, int64_t px_ms);
/* DEL key fenced; *deleted (may be NULL) = 1 when the key existed. The guard
 * stays 7 days, so a late writer with an older token is still refused. */
DLOCK_API int dlock_fence_del(dlock_client *c, uint64_t token, const char *key, int *deleted);
/* INCRBY key by fenced; *value (may be NULL) = the new value. */
DLOCK_API int dlock_fence_incrby(dlock_client *c, uint64_t token, const char *key, int64_t by,
                                 int64_t *value);
/* *highest = the highest token key's guard has seen, 0 when it has none. */
DLOCK_API int dlock_fence_guard(dlock_client *c, const char *key, uint64_t *highest);

/* ------------------------------------------------------------ election */

/* Leader election on a name. Leading = holding the reentrant lock `name`
 * with the watchdog (so a leader is renewed while its process lives, lost
 * like any hold: the lost callback, at once when someone deletes it, and
 * kept at most the hold limit when one is set), taken fenced: the term is
 * the lock's fencing token, so terms only grow, a new leader's term is above
 * every earlier one, and a term fences writes (dlock_fence_*) like a token.
 * A new leader records itself (dlock_election:{name}: term, owner, who =
 * "host pid") and PUBLISHes its term on dlock_election__channel:{name};
 * resigning releases the lock and publishes 0. Observers sleep on that
 * channel between changes, no longer than the leader's TTL (a leader that
 * died publishes nothing: its lock expires within the watchdog timeout and
 * the next campaigner, woken by the lock's own expiry, takes over), never
 * polling. A handle has its own owner id: campaign, resign and the term may
 * be used from any thread. */
typedef struct dlock_election dlock_election;

/* A handle on election `name`; errors as dlock_lock_get. */
DLOCK_API int dlock_election_get(dlock_client *c, const char *name, dlock_election **out);
/* As dlock_election_get, campaigning as an explicit owner id (see
 * dlock_lock_get_as). */
DLOCK_API int dlock_election_get_as(dlock_client *c, const char *name, const char *owner,
                                    dlock_election **out);
/* Frees the handle (no other call may be using it). A term it leads is not
 * resigned: resign first, or it ends with the client (its lease). */
DLOCK_API void dlock_election_free(dlock_election *e);
DLOCK_API const char *dlock_election_name(const dlock_election *e);
/* Called (io thread) when this handle's leadership is lost: its lock found
 * gone, Redis unreachable, paused, hold limit; see dlock_lost_fn. The term is
 * over before it is called. NULL fn: the client's lost callback. Any
 * thread. */
DLOCK_API void dlock_election_set_lost_callback(dlock_election *e, dlock_lost_fn fn, void *ud);
/* The same with the cause as an argument (dlock_lost_cause_fn); it replaces
 * the handle's dlock_lost_fn one, and the other way round. */
DLOCK_API void dlock_election_set_lost_cause_callback(dlock_election *e, dlock_lost_cause_fn fn,
                                                      void *ud);
/* The longest a term may last (see dlock_lock_set_max_hold): then it is lost,
 * DLOCK_LOST_MAX_HOLD. */
DLOCK_API int dlock_election_set_max_hold(dlock_election *e, int64_t ms);
/* Campaigns: waits up to o->wait_ms (NULL o or 0: one try;
 * DLOCK_WAIT_FOREVER) to lead, asleep (woken by the lock's release, or its
 * expiry), and writes the term to *o->token (may be NULL: dlock_election_term
 * gives it too). o->cancel ends the wait (DLOCK_ECANCELED). A leader is kept
 * by the watchdog: o->lease_ms must be 0. A handle that leads already gets
 * its term again. Returns DLOCK_OK, DLOCK_ETIMEDOUT (someone else leads),
 * DLOCK_ECANCELED, DLOCK_ENOTOWNER (elected, then lost before announcing:
 * not leading), DLOCK_EWRONGTYPE, DLOCK_EINVAL (bad options), connection
 * errors. */
DLOCK_API int dlock_election_campaign(dlock_election *e, const dlock_wait_opts *o);
/* Resigns: releases the lock, tells the observers. DLOCK_ENOTOWNER when this
 * handle does not lead (never did, resigned, or lost it); after a loss the
 * call still ends the handle's lock-delay (dlock_election_set_lock_delay),
 * so call it once the work the term guarded has stopped. */
DLOCK_API int dlock_election_resign(dlock_election *e);
/* Hands leadership over to a chosen successor: the owner id of its
 * election handle (dlock_election_get_as; dlock_client_new_owner_id makes
 * one), with dlock_lock_transfer on the election's lock, so that no other
 * campaign can win in between. This handle's term ends (a term it led in
 * is over: the successor's will be above it). Until the successor adopts
 * (dlock_election_adopt, within the watchdog timeout), observers see
 * nobody leading (term 0). Returns DLOCK_OK; DLOCK_ENOTOWNER when this
 * handle does not lead (or found its lock lost: the term ends too);
 * DLOCK_EINVAL / DLOCK_ENAMETOOLONG for a bad successor id (still
 * leading); connection errors. */
DLOCK_API int dlock_election_handover(dlock_election *e, const char *successor);
/* The successor's one call: adopts the lock handed over to this handle's
 * owner (this client's watchdog renews it), takes a new term (the next
 * token, above every earlier term) and announces it as a campaign does;
 * *term (may be NULL) = the term. A handle that leads already gets its term
 * again. Returns DLOCK_OK; DLOCK_ENOTOWNER when nothing was handed to this
 * owner (or it expired); DLOCK_EINVAL when this client's watchdog renews
 * the hold already; connection errors (the hold is then let go). */
DLOCK_API int dlock_election_adopt(dlock_election *e, uint64_t *term);
/* The lock-delay of this handle's terms (see dlock_config_set_lock_delay;
 * the client's by default): a leader lost without resigning keeps every
 * other campaign out for ms more. Set before the first campaign. */
DLOCK_API int dlock_election_set_lock_delay(dlock_election *e, int64_t ms);
/* The term this handle leads in, 0 when it does not (as this process knows:
 * a loss is known at once when Redis reports the change, else at the next
 * renewal). */
DLOCK_API uint64_t dlock_election_term(dlock_election *e);
/* Who leads now, read atomically: *term (0: nobody, or a new leader not yet
 * announced) and, when who != NULL, "host pid owner-id" into who[size]
 * (truncated). */
DLOCK_API int dlock_election_leader(dlock_election *e, uint64_t *term, char *who, size_t size);
/* Blocks until the leader's term differs from `known` (a new leader; 0 when
 * the leader resigned or its lock ended), up to o->wait_ms (NULL o or 0:
 * check once; DLOCK_WAIT_FOREVER), o->cancel ending it early, and gives the
 * new term and who as dlock_election_leader. o->lease_ms must be 0 and
 * o->token NULL (the term comes in *term). Returns DLOCK_OK, DLOCK_ETIMEDOUT,
 * DLOCK_ECANCELED, DLOCK_EINVAL, connection errors. */
DLOCK_API int dlock_election_await_change(dlock_election *e, uint64_t known,
                                          const dlock_wait_opts *o, uint64_t *term, char *who,
                                          size_t size);

/* --------------------------------------------------------- double barrier */

/* A double barrier (dlock's own; Curator's DistributedDoubleBarrier, the
 * etcd recipe; Redisson has none): N parties enter, and all go on once the
 * N-th has entered; later they leave, and all go on once the last has left.
 * A handle is one party (one member id). Reusable: once every member of a
 * round has left, the next N may enter. In Redis, dlock's own keys, all in
 * the name's cluster slot (docs/wire-format.md):
 *   `dlock_barrier:{name}`          hash: parties (N), round (its id: the
 *                                   server's time in microseconds when it
 *                                   began), open ("1" once all N entered)
 *   `dlock_barrier:{name}:members`  sorted set: member id -> when its lease
 *                                   ends (the server's clock, epoch ms)
 *   wake-ups on channel `dlock_barrier__channel:{name}`: "1" when a round
 *   opens, "0" when one ends.
 * A member lives by a lease, the client's watchdog timeout, renewed by the
 * client's watchdog from the first answer that counts it until its leave: a
 * member whose process dies (or is stopped, or cut off from Redis) for
 * longer than that is dropped, so no party waits for ever on a dead one:
 *   - enter needs N members at once: a round opens when the N-th joins it.
 *     A member that dies while its round gathers is dropped after its lease
 *     (its place goes to the next party that comes; the others wait on,
 *     within their waits). One that dies after its round opened was counted.
 *   - leave waits for the members still in: those that have not left and
 *     whose lease has not run out. A dead member holds the others' leave up
 *     to its lease after its death, no longer.
 *   - a party that comes while a round is open (entered, not all left)
 *     waits for that round to end and joins the next.
 *   - every party of a round must give the same N: a round with another N
 *     refuses the enter (DLOCK_EINVAL, nothing written). A barrier with no
 *     round in progress takes the N of the first to enter.
 *   - the lost callback (the client's, dlock_config_set_lost_callback) is
 *     called when the watchdog finds a member dropped while its handle
 *     thought it in: name = the key `dlock_barrier:{name}`, owner = the
 *     member id.
 * Waits sleep on the channel, and a leave no longer than the first
 * remaining member's lease (a dead member publishes nothing): no polling.
 * Every call refuses keys of another type (DLOCK_EWRONGTYPE, nothing
 * written). Threads: a handle may be used from any thread, but it is one
 * party: its enter and leave do not overlap (the second, while one is in
 * progress, is refused with DLOCK_EINVAL); status and the accessors may be
 * called at any time. Distinct parties need distinct handles. */
typedef struct dlock_barrier dlock_barrier;

/* The most parties a barrier takes. */
#define DLOCK_BARRIER_PARTIES_MAX 100000

/* Where a handle's party stands (dlock_barrier_phase). */
typedef enum dlock_party_phase {
    DLOCK_BARRIER_OUT = 0,       /* not entered (never, or left, or its enter failed) */
    DLOCK_BARRIER_ENTERING = 1,  /* an enter in progress */
    DLOCK_BARRIER_IN = 2,        /* entered: its round opened; not left */
    DLOCK_BARRIER_LEAVING = 3    /* a leave in progress */
} dlock_party_phase;

/* A handle on barrier `name` (1..DLOCK_NAME_MAX bytes) for `parties` parties
 * (1..DLOCK_BARRIER_PARTIES_MAX), acting as a member id of its own
 * (dlock_client_new_owner_id's). No round trip. DLOCK_EINVAL for parties out
 * of range or a NULL/empty name, DLOCK_ENAMETOOLONG, DLOCK_ENOMEM. */
DLOCK_API int dlock_barrier_get(dlock_client *c, const char *name, int64_t parties,
                                dlock_barrier **out);
/* As dlock_barrier_get, acting as member id `member` (1..DLOCK_OWNER_MAX
 * bytes of the form "<id>:<n>", as dlock_client_new_owner_id makes; else
 * DLOCK_EINVAL). Every party of a round needs its own: two handles with one
 * id are one member. */
DLOCK_API int dlock_barrier_get_as(dlock_client *c, const char *name, int64_t parties,
                                   const char *member, dlock_barrier **out);
/* Frees the handle (no call may be using it, an asynchronous one included).
 * A member still in is not left: its renewal stops, and its lease ends it
 * (leave first). */
DLOCK_API void dlock_barrier_free(dlock_barrier *b);
DLOCK_API const char *dlock_barrier_name(const dlock_barrier *b);
/* The handle's member id. */
DLOCK_API const char *dlock_barrier_member(const dlock_barrier *b);
/* The N the handle was made for. */
DLOCK_API int64_t dlock_barrier_parties(const dlock_barrier *b);

/* Enters: joins the round being gathered and waits until it has N members,
 * up to o->wait_ms (NULL o or 0: one try; DLOCK_WAIT_FOREVER), o->cancel
 * ending it early; o->lease_ms must be 0 (the member lives by the watchdog)
 * and o->token NULL. DLOCK_OK: the round opened with this member in it
 * (every member's enter returns); the handle is then in
 * (DLOCK_BARRIER_IN) until it leaves. A wait that ends otherwise withdraws
 * the member (one more round trip); should the round have opened in that
 * instant, counting it, the withdrawal is its leave. Returns DLOCK_OK,
 * DLOCK_ETIMEDOUT (the message counts the parties in), DLOCK_ECANCELED,
 * DLOCK_ENOTOWNER (the member was dropped while it waited: its lease ran
 * out, its process stopped or cut off longer than the watchdog timeout, or
 * the barrier's keys were deleted; the round went on without it),
 * DLOCK_EINVAL (a round with another N in progress, nothing written; the
 * handle in or entering already; a wait from a dlock callback; bad
 * options), DLOCK_EWRONGTYPE, connection errors. An enter whose answer is
 * lost is sent again (the same member joining twice is one member). */
DLOCK_API int dlock_barrier_enter(dlock_barrier *b, const dlock_wait_opts *o);
/* Leaves: the member goes, then the call waits until every member of its
 * round has gone (left, or dropped after its lease), up to o->wait_ms (NULL
 * o or 0: no wait), o->cancel ending it early; o->lease_ms 0, o->token
 * NULL. The last to go ends the round. The member has gone once the first
 * round trip is answered, whatever the wait says: DLOCK_OK (all gone),
 * DLOCK_ETIMEDOUT or DLOCK_ECANCELED (gone, others still in: the message
 * counts them) leave the handle out (DLOCK_BARRIER_OUT), free to enter the
 * next round. DLOCK_ENOTOWNER: the member was no longer in its round
 * (dropped after its lease ran out, or the keys were deleted: the others may
 * have gone on); the handle is out. DLOCK_EINVAL: the handle has not
 * entered (or is leaving already). An error before the member went
 * (connection, DLOCK_EUNKNOWN: the answer was lost, not resent) leaves it
 * in and renewed: leave again (a member that had gone then answers
 * DLOCK_ENOTOWNER). */
DLOCK_API int dlock_barrier_leave(dlock_barrier *b, const dlock_wait_opts *o);
/* What the barrier is now (one round trip; any handle on the name): *members
 * = the members whose lease has not run out, *parties = the N of the round
 * in progress (0: none), *open = 1 when it has opened (all entered, not all
 * left). Each out-parameter may be NULL. */
DLOCK_API int dlock_barrier_status(dlock_barrier *b, int64_t *members, int64_t *parties,
                                   int *open);
/* The handle's phase (a dlock_party_phase); no round trip. */
DLOCK_API int dlock_barrier_phase(dlock_barrier *b);
/* The id of the round the handle entered last (0: none yet): every member
 * of a round sees the same, and rounds never share one. No round trip. */
DLOCK_API uint64_t dlock_barrier_round(dlock_barrier *b);

/* ------------------------------------------------------------- inspect */

/* A snapshot of one lock of any kind, read atomically: who holds it, for how
 * long, its fencing token, a fair lock's queue, a reserved next turn, and how
 * many wait (dlock's and Redisson's waiters alike; a dlock client counts once
 * per channel however many of its threads wait on it). Opaque; read it with
 * the accessors below, which never fail on a valid snapshot. Strings live as
 * long as the snapshot. */
typedef struct dlock_info dlock_info;

/* What a name holds, as a snapshot sees it. */
typedef enum dlock_kind {
    DLOCK_KIND_NONE = 0,   /* no key: free (a fair lock may still have a queue) */
    DLOCK_KIND_LOCK = 1,   /* a reentrant or fair lock's hash (the same layout) */
    DLOCK_KIND_RWLOCK = 2, /* a read-write lock's hash (field "mode") */
    DLOCK_KIND_COUNT = 3,  /* a string holding a whole number: a semaphore's available
                            * permits or a latch's count (Redis stores both alike; the
                            * waiters of each are counted apart) */
    DLOCK_KIND_PERMITS = 4, /* a count with a sorted set {name}:timeout beside it: a
                             * permit-expirable semaphore (holders are its permits) */
    DLOCK_KIND_OTHER = 5,  /* other data (a list, a string that is not a whole number, a
                            * hash that is not a lock, ...): dlock_info_redis_type says
                            * which; only dlock_client_inspect gives it */
    DLOCK_KIND_RATE = 6    /* a rate limiter's configuration hash (only the fields rate,
                            * interval, type and keepAliveTime, the first three set:
                            * dlock_rate_limiter_get): dlock_info_rate reads it,
                            * dlock_info_count gives the permits left */
} dlock_kind;

/* Takes a snapshot of the handle's name, whatever kind of lock the handle is
 * (the snapshot reads what is there). DLOCK_EWRONGTYPE when the key holds
 * something that is not a lock (a count or a rate limiter included). The
 * caller frees it with dlock_info_free. */
DLOCK_API int dlock_lock_inspect(dlock_lock *l, dlock_info **out);
/* Takes a snapshot of whatever name `name` holds: a lock of any kind (as
 * dlock_lock_inspect), a count (DLOCK_KIND_COUNT: a semaphore or a latch), a
 * permit-expirable semaphore (DLOCK_KIND_PERMITS), a rate limiter
 * (DLOCK_KIND_RATE: its configuration, the permits left, its TTL; waiters
 * not counted, -1: they wait without a channel), nothing
 * (DLOCK_KIND_NONE), or other data (DLOCK_KIND_OTHER, with its Redis type in
 * dlock_info_redis_type and its TTL; no holders, waiters not counted: a
 * string that is not a whole number, a list, a hash that is not a lock, a
 * rate limiter's own count {X}:value[:<client id>]...).
 * DLOCK_EINVAL / DLOCK_ENAMETOOLONG for a bad name. Read-only: expired
 * permits and a rate limiter's grants older than its interval are counted
 * as available, not given back. */
DLOCK_API int dlock_client_inspect(dlock_client *c, const char *name, dlock_info **out);
DLOCK_API void dlock_info_free(dlock_info *info);

DLOCK_API const char *dlock_info_name(const dlock_info *info);
/* 1 when held by at least one owner. */
DLOCK_API int dlock_info_locked(const dlock_info *info);
/* Number of owners holding it (1 for a reentrant lock that is held; the
 * permits held for DLOCK_KIND_PERMITS): those the snapshot read. */
DLOCK_API size_t dlock_info_holders(const dlock_info *info);
/* The holders the name has: dlock_info_holders, or more when the snapshot
 * read only part of them (dlock_config_set_inspect_limit). */
DLOCK_API size_t dlock_info_holders_total(const dlock_info *info);
/* Owner id and hold count of holder i (0 <= i < holders); NULL / 0 out of
 * range. For DLOCK_KIND_PERMITS: the permit's id (32 hex characters) and 1. */
DLOCK_API const char *dlock_info_owner(const dlock_info *info, size_t i);
DLOCK_API int64_t dlock_info_hold_count(const dlock_info *info, size_t i);
/* DLOCK_KIND_PERMITS: ms left on permit i's lease (-1 when it has none);
 * -2 for other kinds or out of range. */
DLOCK_API int64_t dlock_info_holder_ttl(const dlock_info *info, size_t i);
/* DLOCK_KIND_COUNT and DLOCK_KIND_PERMITS: the count (the available permits,
 * expired leases counted back; or a latch's count). DLOCK_KIND_RATE: the
 * permits a DLOCK_RATE_OVERALL limiter has left now, as its next call would
 * count them (dlock_rate_limiter_available's number, read without writing:
 * grants older than the interval counted back; the rate when nobody took
 * from it; never above the rate), or -1 for a DLOCK_RATE_PER_CLIENT one
 * (each client has its own count) or when its keys hold other data. 0 for
 * other kinds. */
DLOCK_API int64_t dlock_info_count(const dlock_info *info);
/* DLOCK_KIND_RATE: the rate limiter's configuration into *out (as
 * dlock_rate_limiter_config gives it). DLOCK_EINVAL for another kind or a
 * NULL argument (*out untouched). */
struct dlock_rate_config;   /* the rate limiter's section, below */
DLOCK_API int dlock_info_rate(const dlock_info *info, struct dlock_rate_config *out);
/* DLOCK_KIND_COUNT: subscribers of the latch channel of the name (a latch's
 * awaiters, dlock's and Redisson's, one per dlock client); -1 otherwise or
 * when not counted (dlock_client_scan_counts). dlock_info_waiters gives a
 * count's semaphore waiters (subscribers of redisson_sc:{name}). */
DLOCK_API int64_t dlock_info_latch_waiters(const dlock_info *info);
/* Remaining TTL in ms; -2 no key, -1 no expiry. */
DLOCK_API int64_t dlock_info_ttl(const dlock_info *info);
/* The last fencing token handed out for this name, 0 when none yet. */
DLOCK_API uint64_t dlock_info_token(const dlock_info *info);
/* Waiters when the snapshot was taken: subscribers of the lock's channel
 * (a read-write lock's for DLOCK_KIND_RWLOCK), plus the entries of a fair
 * lock's queue; -1 when the snapshot came from dlock_client_scan (not counted
 * there). */
DLOCK_API int64_t dlock_info_waiters(const dlock_info *info);
DLOCK_API dlock_kind dlock_info_kind(const dlock_info *info);
/* The key's type as Redis's TYPE names it ("none", "hash", "string", "list",
 * "set", "zset", "stream", a module's type): what a DLOCK_KIND_OTHER key
 * holds. "" for NULL. */
DLOCK_API const char *dlock_info_redis_type(const dlock_info *info);
/* A read-write lock's mode, "read" or "write"; NULL for other kinds. */
DLOCK_API const char *dlock_info_mode(const dlock_info *info);
/* 1 when holder i holds the write lock of a read-write lock (its owner id is
 * given without Redisson's ":write" suffix; a writer that also reads appears
 * twice, once as writer and once as reader). 0 otherwise. */
DLOCK_API int dlock_info_holder_writes(const dlock_info *info, size_t i);
/* A fair lock's queue, in order: how many waiters, each one's owner id, and
 * how long until its deadline in ms (0 when passed and not yet dropped; -1
 * when it has none). NULL / -1 out of range. */
DLOCK_API size_t dlock_info_queued(const dlock_info *info);
DLOCK_API const char *dlock_info_queued_owner(const dlock_info *info, size_t i);
DLOCK_API int64_t dlock_info_queued_deadline(const dlock_info *info, size_t i);
/* The owner id that has reserved the lock's next turn (dlock's own turn
 * order, see dlock_config_set_priority_after), or NULL; and its TTL in ms
 * (-2 when there is none). */
DLOCK_API const char *dlock_info_next_turn(const dlock_info *info);
DLOCK_API int64_t dlock_info_next_turn_ttl(const dlock_info *info);

/* Called for each lock found; a non-zero return stops the scan. `info` is
 * valid during the call only. */
typedef int (*dlock_scan_fn)(const dlock_info *info, void *ud);

/* Walks the locks in the database with SCAN (never KEYS), in batches, calling
 * fn for each key that holds a lock in Redisson's layout (a hash of
 * "<uuid>:<thread>" = count fields, or a read-write lock's; Redisson's own
 * locks included) and is held. `pattern`
 * is a Redis glob (NULL = "*"). Locks appearing or going during the walk may
 * or may not be seen, as with SCAN. Returns DLOCK_OK, or the first error. */
DLOCK_API int dlock_client_scan(dlock_client *c, const char *pattern, dlock_scan_fn fn, void *ud);

/* As dlock_client_scan, for counts: calls fn for each string key matching
 * `pattern` that holds a whole number (DLOCK_KIND_COUNT: a semaphore or a
 * latch, which Redis cannot tell apart; DLOCK_KIND_PERMITS when a permit
 * sorted set {name}:timeout is beside it). The family's own counters (fencing
 * tokens redisson_lock_token:*, unlock latches redisson_unlock_latch:*, read
 * locks' *:rwlock_timeout:* keys) are skipped; other whole numbers an
 * application keeps show up too: give a pattern to narrow the walk. Waiters
 * are not counted (-1). */
DLOCK_API int dlock_client_scan_counts(dlock_client *c, const char *pattern, dlock_scan_fn fn,
                                       void *ud);

/* One walk over every kind: dlock_client_scan's locks,
 * dlock_client_scan_counts' counts and the rate limiters in a single SCAN
 * of the keyspace (each key visited once), for tools that want several (a
 * monitor, an exporter). kinds: DLOCK_WALK_LOCKS, DLOCK_WALK_COUNTS,
 * DLOCK_WALK_RATES (each rate limiter, DLOCK_KIND_RATE, with its permits
 * left) or several of them; kinds of one Redis type (locks, rate limiters:
 * hashes; counts: strings) filter the SCAN by it, as those calls do. A rate
 * limiter's own count ({X}:value[:<client id>]) is no count to any walk; a
 * rate limiter is no lock to DLOCK_WALK_LOCKS. count: the SCAN's
 * COUNT, the keys Redis looks at per round trip (0: 200, the default of the
 * calls above; up to 100000): larger means fewer round trips, each holding
 * the server longer. fn, pattern and what is reported are those calls'.
 * DLOCK_EINVAL for NULL c or fn, no or unknown kinds, a count out of range.
 * Any thread. */
#define DLOCK_WALK_LOCKS 1u
#define DLOCK_WALK_COUNTS 2u
#define DLOCK_WALK_RATES 4u
DLOCK_API int dlock_client_walk(dlock_client *c, const char *pattern, unsigned kinds, int count,
                                dlock_scan_fn fn, void *ud);

/* The server's CLIENT LIST (one line of key=value fields per connection),
 * for tools that show who holds what: a dlock connection's name field is
 * dlock|<uuid>|<host>|<pid>|<label> (see dlock_config_set_client_name), and
 * the uuid is the first half of its owner ids. *out is malloc'd text; free it
 * with free(). DLOCK_EAUTH when an ACL refuses the command. Any thread. */
DLOCK_API int dlock_client_list_connections(dlock_client *c, char **out);

/* A holder's note: a short text about one hold (dlock run writes its
 * command), kept beside the lock in the key {name}:dlock_note:<owner>
 * (name:dlock_note:<owner> for a name with a '{'), so that exactly the users
 * whose ACL key patterns reach the lock's companions read it - unlike a
 * connection's name, which CLIENT LIST shows every user allowed to list.
 * dlock_client_set_note writes it (len <= DLOCK_NOTE_MAX bytes) to expire
 * after ttl_ms (> 0): a note kept as long as a hold is written again within
 * that time; text NULL deletes it. dlock_client_note reads it: *text
 * malloc'd and NUL-terminated (free it with free()), NULL when there is none;
 * *len (may be NULL) its length. owner: a holder's id as dlock_info_owner
 * gives it (an owner id, a permit's id), 1..DLOCK_OWNER_MAX bytes.
 * DLOCK_EINVAL for a bad name, owner, length or TTL; DLOCK_EAUTH when the
 * ACL refuses the key. One try, no retries (a note is best effort: a holder
 * writes it again within its TTL). Any thread. */
#define DLOCK_NOTE_MAX 4096
DLOCK_API int dlock_client_set_note(dlock_client *c, const char *name, const char *owner,
                                    const char *text, size_t len, int64_t ttl_ms);
DLOCK_API int dlock_client_note(dlock_client *c, const char *name, const char *owner,
                                char **text, size_t *len);

/* ------------------------------------------------------------ semaphore */

/* The largest permit count, permits per call, or latch count dlock accepts
 * or lets a semaphore reach (either sign): Redisson reads them as Java ints.
 * Beyond it: DLOCK_EINVAL, nothing changed. */
#define DLOCK_COUNT_MAX ((int64_t)2147483647)

/* A counting semaphore, Redisson's RSemaphore:
 *   key `name`, a string: the available permits (may be negative after
 *   permits were taken away);
 *   wake-ups on channel `redisson_sc:{name}`: the new count.
 * Permits belong to nobody: any thread or process may release them, and a
 * holder that dies keeps its permits out of the pool for good (see
 * dlock_permit_semaphore for permits that come back). Not fair: after a
 * release, the first retry to reach Redis wins.
 * A handle is cheap (no round trip) and may be shared between threads; every
 * call may be made from any thread. Calls that can wait return DLOCK_EINVAL
 * when asked to wait from a dlock callback (on the io thread). */
typedef struct dlock_semaphore dlock_semaphore;

/* A handle on semaphore `name` (1..DLOCK_NAME_MAX bytes). DLOCK_EINVAL for
 * NULL/empty, DLOCK_ENAMETOOLONG above the maximum, DLOCK_ENOMEM. */
DLOCK_API int dlock_semaphore_get(dlock_client *c, const char *name, dlock_semaphore **out);
/* Frees the handle (no other call may be using it); the semaphore stays. */
DLOCK_API void dlock_semaphore_free(dlock_semaphore *s);
DLOCK_API const char *dlock_semaphore_name(const dlock_semaphore *s);
/* As dlock_lock_replica_acks, for the last acquisition of permits through
 * this handle. */
DLOCK_API int dlock_semaphore_replica_acks(const dlock_semaphore *s);

/* Sets the available permits (0..DLOCK_COUNT_MAX) only when the semaphore
 * does not exist yet (Redisson's trySetPermits): *was_set (may be NULL) = 1
 * when set, 0 when it existed (unchanged). A positive count wakes waiters.
 * DLOCK_EWRONGTYPE when the key holds something that is not a permit count
 * (never modified); DLOCK_EUNKNOWN when the answer was lost (not resent). */
DLOCK_API int dlock_semaphore_try_set_permits(dlock_semaphore *s, int64_t permits, int *was_set);
/* Sets the available permits (0..DLOCK_COUNT_MAX) whatever they were. */
DLOCK_API int dlock_semaphore_set_permits(dlock_semaphore *s, int64_t permits);
/* Adds delta permits, or takes -delta away (the count may go negative:
 * acquirers then wait until releases bring it above their need). delta 0,
 * or a count that would leave +-DLOCK_COUNT_MAX: DLOCK_EINVAL, unchanged.
 * An absent semaphore starts at 0. Wakes waiters when the count is then
 * positive. DLOCK_EUNKNOWN when the answer was lost (not resent: that could
 * add twice). */
DLOCK_API int dlock_semaphore_add_permits(dlock_semaphore *s, int64_t delta);

/* Takes n permits (1..DLOCK_COUNT_MAX), waiting as long as it takes.
 * Waiting subscribes to the channel and sleeps until a message says enough
 * permits may be there (a release of k permits wakes this process's waiters
 * whose needs fit in the new count); it sends nothing to Redis meanwhile.
 * Returns DLOCK_OK, DLOCK_EINVAL (n out of range; bad options; a wait asked
 * for on the io thread), DLOCK_EWRONGTYPE, DLOCK_ECONN, DLOCK_ECMDTIMEOUT, DLOCK_EUNKNOWN
 * (the request was sent and no answer came: the permits may have been
 * taken; it is not resent, since that could take them twice). */
DLOCK_API int dlock_semaphore_acquire(dlock_semaphore *s, int64_t n);
/* As dlock_semaphore_acquire for at most wait_ms (0 = one try,
 * DLOCK_WAIT_FOREVER = no limit): DLOCK_ETIMEDOUT when fewer than n permits
 * were available by then (the message says how many). Redisson's
 * tryAcquire(n, wait). */
DLOCK_API int dlock_semaphore_try(dlock_semaphore *s, int64_t n, int64_t wait_ms);
/* As dlock_semaphore_try with the options' wait (NULL: one try), and the
 * wait ends with DLOCK_ECANCELED when o->cancel is fired from another
 * thread. Permits have no lease nor token: o->lease_ms must be 0 and
 * o->token NULL (DLOCK_EINVAL). */
DLOCK_API int dlock_semaphore_acquire_opts(dlock_semaphore *s, int64_t n,
                                           const dlock_wait_opts *o);
/* Gives n permits (1..DLOCK_COUNT_MAX) back and wakes waiters they can
 * serve. Anybody may release, whether or not it acquired (Redisson's
 * semantics; a release to an absent semaphore creates it). DLOCK_EINVAL when
 * the count would pass DLOCK_COUNT_MAX (unchanged); DLOCK_EUNKNOWN when the
 * answer was lost (not resent). */
DLOCK_API int dlock_semaphore_release(dlock_semaphore *s, int64_t n);
/* *n = the available permits (0 when the semaphore does not exist; negative
 * after permits were taken away). */
DLOCK_API int dlock_semaphore_available(dlock_semaphore *s, int64_t *n);
/* Takes every available permit (Redisson's drainPermits): the count becomes
 * 0 and *drained (may be NULL) = what there was (negative when permits had
 * been taken away: those are given back). DLOCK_EUNKNOWN when the answer was
 * lost (not resent). */
DLOCK_API int dlock_semaphore_drain(dlock_semaphore *s, int64_t *drained);
/* Sets the available permits (0..DLOCK_COUNT_MAX) with a time to live
 * (ttl_ms 1..2^50) only when the semaphore does not exist (Redisson's
 * trySetPermits(permits, timeToLive)): *was_set (may be NULL) = 1 when set,
 * 0 when it existed (unchanged). When set, the permits are published
 * whatever their number, so waiters on the missing semaphore try again.
 * DLOCK_EINVAL (nothing sent) for a bad count or TTL; DLOCK_EWRONGTYPE when
 * the key holds something else (unchanged); DLOCK_EUNKNOWN when the answer
 * was lost (not resent). */
DLOCK_API int dlock_semaphore_try_set_permits_ttl(dlock_semaphore *s, int64_t permits,
                                                  int64_t ttl_ms, int *was_set);
/* Releases n permits (0..DLOCK_COUNT_MAX) only when the semaphore exists
 * (Redisson's releaseIfExists): *released (may be NULL) = 1 when released
 * (the new count is published, waking waiters it can serve), 0 when the
 * semaphore does not exist (nothing is created), and 0 for n = 0 without a
 * round trip (Redisson's; the asynchronous form's callback still runs
 * once, on the io thread). DLOCK_EINVAL when n is out of range or the count would pass DLOCK_COUNT_MAX (unchanged);
 * DLOCK_EWRONGTYPE; DLOCK_EUNKNOWN when the answer was lost (not resent). */
DLOCK_API int dlock_semaphore_release_if_exists(dlock_semaphore *s, int64_t n, int *released);
/* Deletes the semaphore's key (Redisson's delete): *deleted (may be NULL) =
 * 1 when it existed. Its waiters keep waiting (a missing semaphore has no
 * permits); a later set or release wakes them. DLOCK_EWRONGTYPE, nothing
 * deleted, when the key holds something that is not a permit count. */
DLOCK_API int dlock_semaphore_delete(dlock_semaphore *s, int *deleted);
/* Gives the semaphore's key a time to live of ttl_ms (1..2^50), or removes
 * it (ttl_ms 0), as Redisson's expire / clearExpire: *existed (may be NULL)
 * = 1 when the key got the TTL (it exists), or, for 0, had one removed (a
 * key without a TTL answers 0, as Redis's PERSIST). DLOCK_EINVAL for a bad TTL; DLOCK_EWRONGTYPE,
 * nothing changed, for a key of another type. */
DLOCK_API int dlock_semaphore_expire(dlock_semaphore *s, int64_t ttl_ms, int *existed);
/* *ttl_ms = the key's time to live in ms; -1 with none, -2 when the
 * semaphore does not exist (Redis's PTTL, Redisson's remainTimeToLive). */
DLOCK_API int dlock_semaphore_ttl(dlock_semaphore *s, int64_t *ttl_ms);

/* ------------------------------------------------ permit-expirable semaphore */

/* Size of a buffer for a permit id with its NUL: 32 lowercase hex characters
 * (16 random bytes, Redisson's form). */
#define DLOCK_PERMIT_ID_BUFSIZE 33

/* A semaphore whose permits are named and leased, Redisson's
 * RPermitExpirableSemaphore:
 *   key `name`, a string: the available permits;
 *   key `{name}:timeout` (or `name:timeout` when the name holds a '{'), a
 *   sorted set: each held permit (member = its id's 16 bytes, score = the
 *   epoch ms its lease ends);
 *   wake-ups on channel `redisson_sc:{name}`.
 * A permit whose lease ends goes back to the pool by itself (the next
 * operation on the semaphore, by anybody, returns it and wakes waiters;
 * waiters sleep no longer than the earliest lease). Beyond Redisson, a permit
 * taken with DLOCK_WATCHDOG lives while its holder lives: the client's
 * watchdog renews it (in the same batched renewals as its locks), a lost one
 * is reported to the lost callback, and when the holder dies it is back in
 * the pool within the watchdog timeout.
 * A handle is cheap and may be shared between threads; any thread (or
 * process) that knows a permit's id may release it. */
typedef struct dlock_permit_semaphore dlock_permit_semaphore;

/* A handle on permit-expirable semaphore `name`; errors as dlock_semaphore_get. */
DLOCK_API int dlock_permit_semaphore_get(dlock_client *c, const char *name,
                                         dlock_permit_semaphore **out);
/* Frees the handle (no other call may be using it); watchdog permits taken
 * through it stay held and renewed. */
DLOCK_API void dlock_permit_semaphore_free(dlock_permit_semaphore *p);
DLOCK_API const char *dlock_permit_semaphore_name(const dlock_permit_semaphore *p);
/* As dlock_lock_replica_acks, for the last acquisition of permits through
 * this handle. */
DLOCK_API int dlock_permit_semaphore_replica_acks(const dlock_permit_semaphore *p);
/* Lost callback for watchdog permits taken through this handle from now on
 * (NULL fn: the client's). It is called with the semaphore's name and the
 * permit's id (as `owner`). Any thread. */
DLOCK_API void dlock_permit_semaphore_set_lost_callback(dlock_permit_semaphore *p,
                                                        dlock_lost_fn fn, void *ud);
/* The same with the cause as an argument (dlock_lost_cause_fn); it replaces
 * the handle's dlock_lost_fn one, and the other way round. */
DLOCK_API void dlock_permit_semaphore_set_lost_cause_callback(dlock_permit_semaphore *p,
                                                              dlock_lost_cause_fn fn, void *ud);
/* This handle's lock-delay (see dlock_config_set_lock_delay; the client's by
 * default): ms 0 (off) to 86 400 000. Permits acquired through the handle
 * then keep, when their lease runs out unreleased, out of every dlock
 * acquirer's reach (whatever its own setting) for ms more; released ones are
 * back at once. Set it before the handle's first acquisition, from one
 * thread: after one, DLOCK_EINVAL (a permit's renewals and release keep the
 * setting it was taken with). DLOCK_EINVAL (nothing changed) for p NULL or
 * ms out of range. */
DLOCK_API int dlock_permit_semaphore_set_lock_delay(dlock_permit_semaphore *p, int64_t ms);

/* Takes one permit, waiting as long as it takes, and writes its id (32 hex
 * characters and a NUL) into id[size], size >= DLOCK_PERMIT_ID_BUFSIZE.
 * lease_ms > 0: the permit goes back to the pool after the lease unless
 * released first. DLOCK_WATCHDOG: held with the watchdog timeout and renewed
 * every timeout / 3 until released, lost, or the client closes.
 * DLOCK_NO_EXPIRY: never expires, never renewed (Redisson's permits taken
 * without a lease; no lock-delay applies to it). Waiting
 * sleeps until a message or the earliest lease's end (a permit that expires
 * comes back without a message), never on a fixed poll. A lost answer is
 * resent safely (the id is fixed per call: a retry cannot take a second
 * permit). Returns DLOCK_OK, DLOCK_EINVAL (lease, options or buffer size; a
 * wait on the io thread), DLOCK_EWRONGTYPE, DLOCK_ECONN, DLOCK_ECMDTIMEOUT. */
DLOCK_API int dlock_permit_semaphore_acquire(dlock_permit_semaphore *p, int64_t lease_ms,
                                             char *id, size_t size);
/* As dlock_permit_semaphore_acquire for at most wait_ms (0 = one try,
 * DLOCK_WAIT_FOREVER = no limit): DLOCK_ETIMEDOUT when no permit came.
 * Redisson's tryAcquire(wait, lease). */
DLOCK_API int dlock_permit_semaphore_try(dlock_permit_semaphore *p, int64_t wait_ms,
                                         int64_t lease_ms, char *id, size_t size);
/* As dlock_permit_semaphore_try with the options' wait (NULL: one try) and
 * lease (0: DLOCK_WATCHDOG), and the wait ends with DLOCK_ECANCELED when
 * o->cancel is fired. A permit has no fencing token: o->token must be NULL
 * (DLOCK_EINVAL). */
DLOCK_API int dlock_permit_semaphore_acquire_opts(dlock_permit_semaphore *p,
                                                  const dlock_wait_opts *o, char *id,
                                                  size_t size);
/* Gives permit `id` back and wakes a waiter. DLOCK_EINVAL when id is not 32
 * hex characters; DLOCK_ENOTOWNER when no permit has this id (released
 * already, never acquired) or its lease had run out (the message says
 * which; a watchdog permit found so is also reported to the lost callback);
 * DLOCK_EUNKNOWN when the answer was lost (not resent). */
DLOCK_API int dlock_permit_semaphore_release(dlock_permit_semaphore *p, const char *id);
/* As dlock_permit_semaphore_release, but a permit that is unknown or expired
 * is an answer, not an error: *released = 1 when released, 0 otherwise
 * (Redisson's tryRelease). */
DLOCK_API int dlock_permit_semaphore_try_release(dlock_permit_semaphore *p, const char *id,
                                                 int *released);
/* As dlock_permit_semaphore_try_release (*was_held = 1 when it was held), for
 * somebody other than the permit's holder (an operator: dlock unlock --force
 * --permit): the holder did not let go, so the lock-delay its permit was
 * taken with (dlock_permit_semaphore_set_lock_delay) stays, as for a lock
 * forced open; the permit is back in the count, not given out by dlock until
 * that delay ends. was_held may be NULL. */
DLOCK_API int dlock_permit_semaphore_force_release(dlock_permit_semaphore *p, const char *id,
                                                   int *was_held);
/* Gives held permit `id` a new lease counted from now: lease_ms > 0 (a
 * watchdog permit then stops being renewed), or DLOCK_WATCHDOG (renewed by
 * this client's watchdog from now on). DLOCK_ENOTOWNER when no permit has
 * this id any more (released, expired); DLOCK_EINVAL for a bad id or lease. */
DLOCK_API int dlock_permit_semaphore_update_lease(dlock_permit_semaphore *p, const char *id,
                                                  int64_t lease_ms);
/* *n = the available permits, after expired permits went back (0 when the
 * semaphore does not exist); *held (may be NULL) = permits held under a
 * lease (Redisson's acquiredPermits). */
DLOCK_API int dlock_permit_semaphore_available(dlock_permit_semaphore *p, int64_t *n,
                                               int64_t *held);
/* Sets the available permits (0..DLOCK_COUNT_MAX) only when the semaphore
 * does not exist (Redisson's trySetPermits); *was_set (may be NULL). */
DLOCK_API int dlock_permit_semaphore_try_set_permits(dlock_permit_semaphore *p, int64_t permits,
                                                     int *was_set);
/* Sets the total (0..DLOCK_COUNT_MAX): available + held becomes `permits`
 * (Redisson's setPermits), so the available count is negative while more
 * are held than the new total. */
DLOCK_API int dlock_permit_semaphore_set_total(dlock_permit_semaphore *p, int64_t permits);
/* Adds delta permits to the available count, or takes -delta away; as
 * dlock_semaphore_add_permits. */
DLOCK_API int dlock_permit_semaphore_add_permits(dlock_permit_semaphore *p, int64_t delta);

/* Several permits in one call, all or none (Redisson's acquire(permits,
 * lease) and tryAcquire(permits, wait, lease)): takes n permits (1..
 * DLOCK_COUNT_MAX) with the same lease (ms > 0, DLOCK_WATCHDOG: each
 * renewed by the watchdog, or DLOCK_NO_EXPIRY), in one script, and writes their ids into
 * ids[0..n-1] (the caller's array of n buffers; each "" on failure). Waits
 * as long as it takes; a release of k permits wakes the waiters k can serve
 * (Redisson's waiters included). A lost answer is resent safely (the ids
 * are fixed per call). Returns DLOCK_OK; DLOCK_EINVAL, nothing changed, for
 * p or ids NULL, n < 1, a bad lease, or n larger than the semaphore's total
 * (available + held) when it exists (a missing semaphore has no permits yet:
 * the call waits for a set or a release); DLOCK_EWRONGTYPE; connection
 * errors. Any thread (asynchronously: dlock_permit_semaphore_acquire_n_async). */
DLOCK_API int dlock_permit_semaphore_acquire_n(dlock_permit_semaphore *p, int64_t n,
                                               int64_t lease_ms,
                                               char (*ids)[DLOCK_PERMIT_ID_BUFSIZE]);
/* As dlock_permit_semaphore_acquire_n for at most wait_ms (0 = one try,
 * DLOCK_WAIT_FOREVER = no limit): DLOCK_ETIMEDOUT when the n permits were
 * not free together within it (none is taken then). */
DLOCK_API int dlock_permit_semaphore_try_n(dlock_permit_semaphore *p, int64_t n,
                                                   int64_t wait_ms, int64_t lease_ms,
                                                   char (*ids)[DLOCK_PERMIT_ID_BUFSIZE]);
/* As dlock_permit_semaphore_try_n with the options' wait (NULL: one try) and
 * lease (0: DLOCK_WATCHDOG), and the wait ends with DLOCK_ECANCELED, none
 * taken, when o->cancel is fired. Permits have no fencing token: o->token
 * must be NULL (DLOCK_EINVAL). */
DLOCK_API int dlock_permit_semaphore_acquire_n_opts(dlock_permit_semaphore *p, int64_t n,
                                                    const dlock_wait_opts *o,
                                                    char (*ids)[DLOCK_PERMIT_ID_BUFSIZE]);
/* Gives the n permits ids[0..n-1] back in one script, all or nothing
 * (Redisson's tryRelease(List)): *released (may be NULL) = n when every id
 * was held and all are back, 0 when one is unknown (released already, never
 * acquired) or had expired, and then nothing is released. The number
 * released is published on the channel (Redisson's list release does; its
 * waiters wake that many of themselves). DLOCK_EINVAL, nothing sent, for p
 * or ids NULL, n = 0, an id that is not 32 hex characters, or an id given
 * twice; DLOCK_EWRONGTYPE; DLOCK_EUNKNOWN when the answer was lost (not
 * resent). Watchdog permits released stop being renewed; a refused one that
 * was lost is reported to the lost callback. Any thread. */
DLOCK_API int dlock_permit_semaphore_try_release_list(dlock_permit_semaphore *p,
                                                      const char *const *ids, size_t n,
                                                      int64_t *released);
/* As dlock_permit_semaphore_try_release_list, but releasing nothing is an
 * error (Redisson's release(List)): DLOCK_ENOTOWNER, the message naming the
 * first id not held and why (unknown or expired). */
DLOCK_API int dlock_permit_semaphore_release_list(dlock_permit_semaphore *p,
                                                  const char *const *ids, size_t n);
/* What is left of permit `id`'s lease (Redisson's getLeaseTime): *ms = the
 * ms left (>= 1), or -1 for a permit held without a lease (Redisson's
 * permits taken without one). DLOCK_ENOTOWNER when no permit has this id
 * (released, expired, never acquired); DLOCK_EINVAL for a bad id or ms
 * NULL. Expired permits go back to the pool first, as every call's. */
DLOCK_API int dlock_permit_semaphore_lease_time(dlock_permit_semaphore *p, const char *id,
                                                int64_t *ms);
/* *n = the permits held under a lease (Redisson's acquiredPermits), after
 * expired permits went back. */
DLOCK_API int dlock_permit_semaphore_acquired(dlock_permit_semaphore *p, int64_t *n);
/* *total = available + held (Redisson's getPermits), after expired permits
 * went back. */
DLOCK_API int dlock_permit_semaphore_permits(dlock_permit_semaphore *p, int64_t *total);
/* Deletes the semaphore's key and its leases `{name}:timeout` (Redisson's
 * delete): *deleted (may be NULL) = 1 when either existed. Waiters keep
 * waiting; a later set or release wakes them. Watchdog permits of the
 * deleted semaphore are reported lost by their next renewal.
 * DLOCK_EWRONGTYPE, nothing deleted, when either key holds another type. */
DLOCK_API int dlock_permit_semaphore_delete(dlock_permit_semaphore *p, int *deleted);
/* Gives both keys of the semaphore a time to live of ttl_ms (1..2^50), or
 * removes it (0), as Redisson's expire / clearExpire: *existed (may be NULL)
 * = 1 when either key got the TTL (or, for 0, had one removed): Redisson's
 * rule, so a semaphore whose count key is gone but whose leases live
 * answers 1. Errors as dlock_semaphore_expire. */
DLOCK_API int dlock_permit_semaphore_expire(dlock_permit_semaphore *p, int64_t ttl_ms,
                                            int *existed);
/* *ttl_ms = the semaphore key's time to live in ms; -1 with none, -2 when
 * it does not exist. */
DLOCK_API int dlock_permit_semaphore_ttl(dlock_permit_semaphore *p, int64_t *ttl_ms);

/* ---------------------------------------------------------- count-down latch */

/* A count-down latch, Redisson's RCountDownLatch:
 *   key `name`, a string: the remaining count; absent = zero;
 *   wake-ups on channel `redisson_countdownlatch__channel__{name}` (always
 *   wrapped in braces, even when the name holds a '{'): "0" when the count
 *   reaches zero, "1" when a count is set or the latch deleted.
 * A handle is cheap and may be shared between threads. */
typedef struct dlock_latch dlock_latch;

/* A handle on latch `name`; errors as dlock_semaphore_get. */
DLOCK_API int dlock_latch_get(dlock_client *c, const char *name, dlock_latch **out);
/* Frees the handle (no other call may be using it). */
DLOCK_API void dlock_latch_free(dlock_latch *l);
DLOCK_API const char *dlock_latch_name(const dlock_latch *l);

/* Sets the count (1..DLOCK_COUNT_MAX) only when the latch is at zero
 * (Redisson's trySetCount): *was_set (may be NULL) = 1 when set, 0 when it
 * still counts (unchanged). DLOCK_EWRONGTYPE when the key holds something
 * that is not a count (never modified); DLOCK_EUNKNOWN when the answer was
 * lost (not resent). */
DLOCK_API int dlock_latch_try_set_count(dlock_latch *l, int64_t count, int *was_set);
/* Counts down by one; at zero the key is deleted and every awaiter, in every
 * process (Redisson's too), is woken. At zero already: nothing happens.
 * DLOCK_EUNKNOWN when the answer was lost (not resent: that could count down
 * twice). */
DLOCK_API int dlock_latch_count_down(dlock_latch *l);
/* *count = the remaining count (0 when the latch does not exist). */
DLOCK_API int dlock_latch_count(dlock_latch *l, int64_t *count);
/* Waits until the count is zero, for at most wait_ms (0 = check once,
 * DLOCK_WAIT_FOREVER = no limit). Checks the count,
 * subscribes to the channel, checks again, then sleeps until the zero
 * message, which ends the wait without another command: nothing is sent
 * while it waits. DLOCK_OK at zero (also when the latch is deleted
 * meanwhile), DLOCK_ETIMEDOUT (the message gives the count),
 * DLOCK_EWRONGTYPE, DLOCK_EINVAL (a wait asked for on the io thread). Redisson's
 * await(timeout). */
DLOCK_API int dlock_latch_await(dlock_latch *l, int64_t wait_ms);
/* As dlock_latch_await with the options' wait (NULL: check once), and the
 * wait ends with DLOCK_ECANCELED when o->cancel is fired from another
 * thread. A latch has no lease nor token: o->lease_ms must be 0 and o->token
 * NULL (DLOCK_EINVAL). */
DLOCK_API int dlock_latch_await_opts(dlock_latch *l, const dlock_wait_opts *o);
/* Deletes the latch (it is then at zero) and wakes dlock's awaiters, which
 * return; *deleted (may be NULL) = 1 when there was one. A key that is not a
 * latch is refused (DLOCK_EWRONGTYPE) and left alone. */
DLOCK_API int dlock_latch_delete(dlock_latch *l, int *deleted);

/* ------------------------------------------------------------ rate limiter */

/* A rate limiter, Redisson's RRateLimiter: at most `rate` permits are
 * granted per `interval_ms`, across every client (DLOCK_RATE_OVERALL) or to
 * each client (DLOCK_RATE_PER_CLIENT: each dlock client, each Redisson
 * instance), in Redisson's keys, shared with its clients:
 *   `name`                           hash: rate, interval (ms), type ("0"
 *                                    OVERALL, "1" PER_CLIENT), keepAliveTime
 *   `{name}:value[:<client id>]`     the permits left in the window
 *   `{name}:permits[:<client id>]`   the grants: a sorted set scored by when
 *                                    each was made, in epoch ms
 * (the client id: dlock_client_id). A grant's permits come back `interval_ms`
 * after it was made (a sliding window). dlock scores its grants on the
 * server's clock, so dlock clients agree whatever their own clocks say;
 * Redisson scores its on each client's clock: a Java client whose clock is
 * behind the server's by d ms sees dlock's grants d ms younger (it waits
 * longer), and dlock sees its grants d ms older (they free their permits d ms
 * early: up to the rate more in that window). Keep clocks in sync (NTP) when
 * Java and dlock clients share a limiter. Redisson's GCRA limiter (Redis
 * 8.8's GCRA command) is not this object and not supported.
 * A handle is cheap and may be shared between threads; the calls are
 * thread-safe. Every call refuses a key of another type (a lock's hash, a
 * semaphore's count) with DLOCK_EWRONGTYPE and writes nothing. */
typedef struct dlock_rate_limiter dlock_rate_limiter;

typedef enum dlock_rate_type {
    DLOCK_RATE_OVERALL = 0,     /* one budget for every client (Redisson's RateType.OVERALL) */
    DLOCK_RATE_PER_CLIENT = 1   /* a budget per client (RateType.PER_CLIENT) */
} dlock_rate_type;

typedef struct dlock_rate_config {
    dlock_rate_type type;
    int64_t rate;            /* permits per interval: 1..2^31-1 */
    int64_t interval_ms;     /* 1..2^40 */
    int64_t keep_alive_ms;   /* 0: the keys live for ever; else (>= interval_ms) every key
                                expires that long after the last call that changed it */
} dlock_rate_config;

/* A handle on rate limiter `name`; errors as dlock_semaphore_get. */
DLOCK_API int dlock_rate_limiter_get(dlock_client *c, const char *name,
                                     dlock_rate_limiter **out);
/* Frees the handle (no other call may be using it). */
DLOCK_API void dlock_rate_limiter_free(dlock_rate_limiter *r);
DLOCK_API const char *dlock_rate_limiter_name(const dlock_rate_limiter *r);

/* Sets the rate when none is set (Redisson's trySetRate): *was_set (may be
 * NULL) = 1 when set, 0 when one was (left as it is). DLOCK_EINVAL naming a
 * field out of range. */
DLOCK_API int dlock_rate_limiter_try_set_rate(dlock_rate_limiter *r,
                                              const dlock_rate_config *cfg, int *was_set);
/* Sets the rate whatever was set (Redisson's setRate). keep_state 0: the
 * window starts afresh (every permit free); 1: the grants still in the
 * window count against the new rate (RateLimiterArgs.keepState). A change of
 * type drops the old type's state either way. */
DLOCK_API int dlock_rate_limiter_set_rate(dlock_rate_limiter *r, const dlock_rate_config *cfg,
                                          int keep_state);
/* As dlock_rate_limiter_set_rate, only when a rate is set (Redisson's
 * updateRate): *updated (may be NULL) = 1 when it was, 0 when none was. */
DLOCK_API int dlock_rate_limiter_update_rate(dlock_rate_limiter *r,
                                             const dlock_rate_config *cfg, int keep_state,
                                             int *updated);
/* The configuration (Redisson's getConfig); DLOCK_ENOTFOUND when no rate is
 * set. */
DLOCK_API int dlock_rate_limiter_config(dlock_rate_limiter *r, dlock_rate_config *out);

/* Takes `permits` (1..rate) when the window has them, waiting at most
 * wait_ms (0: no wait; DLOCK_WAIT_FOREVER: no limit) for the grants that
 * free them to age out (Redisson's tryAcquire(permits, timeout)). A waiter
 * sleeps exactly until the oldest grant frees its permits (the server says
 * when), then tries again: no subscription, no polling in between.
 * DLOCK_OK, DLOCK_ETIMEDOUT (the message says when permits come back),
 * DLOCK_ENOTFOUND (no rate set), DLOCK_EINVAL (permits out of range, or more
 * than the rate: never grantable), DLOCK_EWRONGTYPE, DLOCK_ECANCELED,
 * DLOCK_EUNKNOWN (the answer was lost: the permits may have been taken; not
 * resent). */
DLOCK_API int dlock_rate_limiter_try_acquire(dlock_rate_limiter *r, int64_t permits,
                                             int64_t wait_ms);
/* Takes `permits`, waiting as long as it takes (Redisson's acquire). */
DLOCK_API int dlock_rate_limiter_acquire(dlock_rate_limiter *r, int64_t permits);
/* As dlock_rate_limiter_try_acquire with the options' wait and cancel token
 * (NULL: no wait); o->token, when not NULL, gets the grant's time on the
 * server's clock (epoch ms). No lease: o->lease_ms must be 0. */
DLOCK_API int dlock_rate_limiter_acquire_opts(dlock_rate_limiter *r, int64_t permits,
                                              const dlock_wait_opts *o);
/* *permits = what the window has left now (Redisson's availablePermits; a
 * limiter nobody took from yet: the rate). DLOCK_ENOTFOUND when no rate is
 * set. */
DLOCK_API int dlock_rate_limiter_available(dlock_rate_limiter *r, int64_t *permits);
/* Gives permits back before their grant ages out (Redisson's release): the
 * count left rises by them, at most to the rate. 0: nothing, no round trip.
 * DLOCK_ENOTFOUND when no rate is set. */
DLOCK_API int dlock_rate_limiter_release(dlock_rate_limiter *r, int64_t permits);
/* Deletes the limiter's keys (its configuration, the overall state and this
 * client's own): *deleted (may be NULL) = 1 when any existed. */
DLOCK_API int dlock_rate_limiter_delete(dlock_rate_limiter *r, int *deleted);
/* Gives every key a time to live of ttl_ms (0: removes it; Redisson's expire
 * and clearExpire): *set (may be NULL) = 1 when any key changed. */
DLOCK_API int dlock_rate_limiter_expire(dlock_rate_limiter *r, int64_t ttl_ms, int *set);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_DLOCK_H */
