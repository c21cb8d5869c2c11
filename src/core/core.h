/* The core layer: errors and logging, clocks and helpers, containers, the
 * config and its URL parser, cancellation. Knows nothing of connections,
 * the io thread or locks; every other layer builds on it. Not installed. */
#ifndef DLOCK_CORE_H
#define DLOCK_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "dlock/dlock.h"
#include "core/list.h"
#include "core/map.h"

#define DLOCK__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define DLOCK__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ----------------------------------------------------------------- errors */

/* The longest detailed message (dlock_last_error's buffer), with its NUL. */
#define DLOCK__MSG_MAX 512
/* Formats a failure's message where the calling thread's failures go now
 * (dlock__err_into: the result being filled; by default dlock_last_error's
 * buffer) and returns `code`. */
int dlock__fail(int code, const char *fmt, ...) DLOCK__PRINTF(2, 3);
/* Where a failure's message goes: a result carries its code and message,
 * so a driver or a caller that records an outcome points the calling
 * thread's failures at the record's buffer while the work for it runs, and
 * back after (buf NULL: dlock_last_error's, the C API's, the default). The
 * message is written where it belongs; nothing reads it back from the
 * thread's. Nested: each dlock__err_into is undone by one dlock__err_reset
 * with what it returned, before user code (a callback) runs. */
typedef struct dlock__errto {
    char *buf;
    size_t size;
} dlock__errto;
dlock__errto dlock__err_into(char *buf, size_t size);
void dlock__err_reset(dlock__errto prev);
/* Work after a failure whose own failures are not the call's (a cleanup, a
 * give-back, a best-effort request): run between dlock__aside_begin and
 * dlock__aside_end (which returns code), its messages go to the aside's
 * buffer, and the failure's own words stay where they were written. */
typedef struct dlock__aside {
    dlock__errto prev;
    char msg[DLOCK__MSG_MAX];
} dlock__aside;
void dlock__aside_begin(dlock__aside *a);
int dlock__aside_end(dlock__aside *a, int code);
/* Clears where the calling thread's failures go now (at the start of a
 * public call: dlock_last_error's). */
void dlock__clear_error(void);
/* Sets what dlock_last_lost_cause() says on this thread (the watchdog, around
 * a lost callback). */
void dlock__set_lost_cause(dlock_lost_cause cause);
/* A lost callback in either form: cfn (the cause as an argument) when set,
 * else fn; none when both are NULL. */
typedef struct dlock__lost_cb {
    dlock_lost_fn fn;
    dlock_lost_cause_fn cfn;
    void *ud;
} dlock__lost_cb;
/* Calls cb (a no-op when it has no function), dlock_last_lost_cause() set
 * to cause meanwhile (kept for the callbacks of the first form). */
void dlock__lost_call(const dlock__lost_cb *cb, const char *name, const char *owner,
                      dlock_lost_reason reason, dlock_lost_cause cause);
/* What a Redis error reply says, classified once where replies are read
 * (dlock__redis_classify); every decision about a refusal (retry, reload the
 * script, go to another node, drop an optional key, the status code) is
 * taken on the class, never on the text. */
typedef enum dlock__rerr {
    DLOCK__RERR_NONE = 0,      /* not a refusal */
    DLOCK__RERR_OTHER,         /* no rule of its own: DLOCK_EREDIS */
    DLOCK__RERR_WRONGTYPE,     /* the key holds another type (Redis's, or a script's words) */
    DLOCK__RERR_ARG,           /* dlock's own scripts refuse an argument ("EINVAL ...") */
    DLOCK__RERR_AUTH,          /* credentials or database refused */
    DLOCK__RERR_NOPERM,        /* an ACL refuses a command or a channel */
    DLOCK__RERR_NOPERM_KEY,    /* an ACL refuses a key (before the script ran) */
    DLOCK__RERR_UNKNOWN_CMD,   /* a command the server does not know (or renamed away) */
    DLOCK__RERR_NOSCRIPT,      /* the script cache lacks the script: load it, send again */
    /* The node does not serve the key (now): answered before anything ran. */
    DLOCK__RERR_MOVED,
    DLOCK__RERR_ASK,
    DLOCK__RERR_READONLY,
    DLOCK__RERR_CLUSTERDOWN,
    /* Transient server states: the same request again after a pause. */
    DLOCK__RERR_TRYAGAIN,
    DLOCK__RERR_LOADING,
    DLOCK__RERR_BUSY,
    DLOCK__RERR_MASTERDOWN,
    /* dlock's own scripts' refusals of a count, by the first words below
     * (DLOCK_EREDIS as any other; the operation that sent the script words
     * its message, from the text after the word if it likes): */
    DLOCK__RERR_OVER_BOUND,    /* a write would take a count past the bound the
                                  caller gave (DLOCK__OVER_BOUND_ERR) */
    DLOCK__RERR_OVER_TOTAL,    /* more asked than the key holds in all, taken or
                                  not: never served as it stands (DLOCK__OVER_TOTAL_ERR) */
    /* dlock's own: the node is a new primary in its failover quarantine:
     * not sent (DLOCK__CALL_QUARANTINE: the text is the ms left), or an
     * acquire script read the quarantine recorded there (the text is
     * DLOCK__QUARANTINE_ERR, then the ms left). */
    DLOCK__RERR_QUARANTINE,
    /* a non-reentrant lock's acquisition by its holder (scripts answer
     * "DLOCKREENTRY ...") */
    DLOCK__RERR_REENTRY,
    /* a rate limiter's scripts: it has no rate ("DLOCKNOTFOUND ...") */
    DLOCK__RERR_NOTFOUND
} dlock__rerr;
#define DLOCK__QUARANTINE_ERR "DLOCKQUARANTINE "
/* The first words of dlock's own scripts' refusals (redis.error_reply), here
 * and in the scripts only: the core knows no type's wording. "EINVAL" (an
 * argument refused: DLOCK__RERR_ARG, DLOCK_EINVAL), the quarantine's word
 * above, DLOCKREENTRY and DLOCKNOTFOUND are the others. */
#define DLOCK__OVER_BOUND_ERR "DLOCKOVERBOUND "
#define DLOCK__OVER_TOTAL_ERR "DLOCKOVERTOTAL "

/* The class of a Redis error reply's text (NULL: DLOCK__RERR_OTHER). */
dlock__rerr dlock__redis_classify(const char *text);
/* 1 when an ACL's reason (ACL DRYRUN's answer, "... access the 'x' key")
 * names a key or a channel rather than a command. */
int dlock__acl_reason_names(const char *reason);
/* The status code of a class (DLOCK_OK for DLOCK__RERR_NONE). */
int dlock__rerr_code(dlock__rerr e);
/* The text after an error reply's first word ("WRONGTYPE the key holds a
 * lock": "the key holds a lock"), "" when there is none: for messages. */
const char *dlock__redis_error_detail(const char *text);
/* Redis's error text (NULL: "") into out (size bytes) without what Lua adds
 * to it: the " script: <sha>, on @user_script:<line>." that ends a command's
 * error inside a script, the "user_script:<line>: " before a script's own
 * error, and Redis 6's "Error running script (call to f_<sha>): ". */
void dlock__redis_error_text(const char *text, char *out, size_t size);
/* The node a MOVED or ASK reply names ("MOVED 3999 host:port"): host into
 * buf (size bytes), *port; 0, or -1 when the text names none. */
int dlock__redis_redirect_to(const char *text, char *host, size_t size, int *port);

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
/* *dst = a copy of src, or NULL when src is NULL; -1 when out of memory. */
int dlock__dup_opt(char **dst, const char *src);
/* Decimal formatting without printf on hot paths; returns the length. */
size_t dlock__fmt_i64(char *buf, int64_t v);
/* A hex digit's value (either case), or -1. */
int dlock__hexval(int ch);
/* Overwrites a string that may hold a password, then frees it (NULL: no-op). */
void dlock__free_secret(char *s);
/* The value of `field` in the text of an INFO answer (lines "field:value\r\n")
 * into buf (size bytes, NUL-terminated): 1; 0, and buf "", when no line
 * starts with the field or its value does not fit. The one reader of INFO:
 * run_id, the counters, maxmemory_policy, ... */
int dlock__info_field(const char *info, const char *field, char *buf, size_t size);

/* --------------------------------------------------------------- endpoint */

typedef struct dlock__endpoint {
    char *host;      /* NULL for unix sockets */
    int port;
    char *path;      /* unix socket path, or NULL */
    int db;
    int tls;         /* rediss://: TLS over TCP */
    char *user;      /* may be NULL */
    char *pass;      /* may be NULL; never printed */
    int sentinel;    /* a sentinel (for the credentials callback) */
} dlock__endpoint;

/* How a TLS connection verifies the server and presents itself. Strings are
 * owned (NULL: not set). */
typedef struct dlock__tls_opts {
    char *ca_file;       /* PEM bundle of trusted CAs; NULL with ca_dir NULL: the system's */
    char *ca_dir;        /* directory of hashed CA certificates (c_rehash) */
    char *cert_file;     /* client certificate (PEM), with key_file */
    char *key_file;
    char *server_name;   /* SNI and the name verified; NULL: the URL's host */
    int verify;          /* 1 verify the server (default), 0 not; -1 (a URL's): not given */
} dlock__tls_opts;

int dlock__tls_opts_copy(dlock__tls_opts *dst, const dlock__tls_opts *src);
void dlock__tls_opts_clear(dlock__tls_opts *o);
/* 1 when any option differs from the defaults (a file, a name, verify off). */
int dlock__tls_opts_set(const dlock__tls_opts *o);

/* "host:port" or "unix:/path" into buf; never credentials. */
const char *dlock__endpoint_str(const dlock__endpoint *ep, char *buf, size_t size);
int dlock__endpoint_copy(dlock__endpoint *dst, const dlock__endpoint *src);
void dlock__endpoint_clear(dlock__endpoint *ep);
/* Parses a URL into ep (cleared first on success only). TLS parameters of a
 * rediss:// URL (?cacert=&cacertdir=&cert=&key=&sni=&insecure) go into *tls
 * when tls is not NULL (its strings NULL and verify -1 for those not given;
 * the caller clears it), and are checked and dropped otherwise. */
int dlock__parse_url(const char *url, dlock__endpoint *ep);
/* A printable excerpt of s[0..n) for messages ("..." when cut); never used
 * on credentials. Returns buf. */
const char *dlock__excerpt(const char *s, size_t n, char *buf, size_t size);
int dlock__parse_url_tls(const char *url, dlock__endpoint *ep, dlock__tls_opts *tls);

/* ------------------------------------------------------------- deployment */

typedef enum {
    DLOCK__DEPLOY_SINGLE = 0,   /* redis:// or unix://: one server (ep) */
    DLOCK__DEPLOY_SENTINEL,     /* redis-sentinel://: the primary named by the sentinels */
    DLOCK__DEPLOY_CLUSTER,      /* redis-cluster://: seed nodes of a Redis Cluster */
    DLOCK__DEPLOY_REPLICATED    /* redis-replicated://: a primary and replicas, found by ROLE */
} dlock__deploy_kind;

/* One ?map=HOST:PORT=HOST:PORT entry of a deployment URL. */
typedef struct dlock__addr_map {
    char *from, *to;
    int from_port, to_port;
} dlock__addr_map;

/* What a URL says beyond one endpoint (deploy.c). The data nodes'
 * credentials and database stay in the config's ep; its host and port are
 * the first seed's, for messages. */
typedef struct dlock__deploy {
    dlock__deploy_kind kind;
    dlock__endpoint *seeds;   /* sentinels, cluster seeds or replicated nodes: host and port
                                 only */
    size_t nseeds;
    char *master;             /* sentinel: the master name */
    char *sentinel_user;      /* sentinel credentials (dlock_config_set_sentinel_password) */
    char *sentinel_pass;
    dlock__addr_map *maps;    /* the URL's ?map= entries (announced -> reachable) */
    size_t nmaps;
} dlock__deploy;

/* Parses any URL a config takes (redis://, rediss://, unix://,
 * redis[s]-sentinel://, redis[s]-cluster://) into ep and d, and its TLS
 * parameters into *opts (as dlock__parse_url_tls; opts may be NULL); on
 * error ep and d do not change. Sentinel credentials in d are kept. */
int dlock__parse_deploy_url(const char *url, dlock__endpoint *ep, dlock__deploy *d,
                            dlock__tls_opts *opts);
/* 1 for redis[s]-sentinel:// and redis[s]-cluster:// URLs. */
int dlock__is_deploy_url(const char *url);
int dlock__deploy_copy(dlock__deploy *dst, const dlock__deploy *src);
/* The URL's map entry for host:port into host_out (DLOCK_HOST_MAX) and
 * *port_out: 1 when one names it, 0 (nothing written) otherwise. */
int dlock__deploy_map(const dlock__deploy *d, const char *host, int port, char *host_out,
                      int *port_out);
/* Appends entries ("HOST:PORT=HOST:PORT[,...]", the URL's map= syntax) to
 * d's map: all of them, or none with DLOCK_EINVAL / DLOCK_ENOMEM. */
int dlock__add_maps(dlock__deploy *d, const char *entries);
/* Frees the seeds and names, keeps nothing (credentials included). */
void dlock__deploy_clear(dlock__deploy *d);

/* ----------------------------------------------------------------- config */

struct dlock_config {
    dlock__endpoint ep;
    dlock__tls_opts tls;         /* used when ep.tls */
    dlock__deploy deploy;
    int64_t watchdog_ms;
    int64_t command_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t retry_delay_ms;
    int64_t scan_interval_ms;    /* redis-replicated://: how often ROLE is asked */
    int retry_attempts;
    int pool_size;
    int64_t priority_after_ms;   /* DLOCK_PRIORITY_OFF: never reserve */
    int64_t fair_wait_ms;        /* a fair-lock waiter's slot (Redisson's fairLockWaitTimeout) */
    int64_t max_hold_ms;         /* hold limit of watchdog holds, 0 = none */
    int64_t lock_delay_ms;       /* lock-delay after an involuntary loss, 0 = off */
    int64_t clock_jump_ms;       /* server clock jump allowance, DLOCK_CLOCK_JUMP_OFF = off */
#define DLOCK__LOCK_DELAY_MAX 86400000LL   /* 1 day */
    int quarantine_mode;         /* dlock_quarantine */
    int64_t quarantine_ms;       /* ON: the duration; AUTO: a floor */
    int revocation_off;          /* no client tracking: losses found by renewals only */
    int writer_first;            /* read-write locks: waiting writers go before new readers */
    size_t inspect_max;          /* holders and queue entries a snapshot reads per name (0: all) */
#define DLOCK__INSPECT_MAX 10000000
    int ack_replicas;            /* WAIT for so many replicas after acquisitions (0: off) */
    int64_t ack_timeout_ms;
    int ack_policy;              /* dlock_ack_policy */
    int ack_all;                 /* DLOCK_REPLICAS_ALL: WAIT for every connected replica,
                                    ack_replicas 1 (fail when none acknowledged) */
    char *client_name;
    dlock__lost_cb lost;            /* the client's lost callback */
    dlock_log_fn log_fn;
    void *log_ud;
    dlock_credentials_fn cred_fn;   /* asked at every connect (NULL: the static ones) */
    void *cred_ud;
    dlock__deploy added_maps;       /* dlock_config_add_address_map's entries (maps only;
                                       kept when the URL changes) */
    dlock_address_map_fn map_fn;    /* announced address -> reachable one (NULL: none) */
    void *map_ud;
    dlock_log_level log_level;
    void *uv_loop;               /* a program's libuv loop that runs dlock's (NULL: a thread) */
};

int dlock__config_copy(dlock_config *dst, const dlock_config *src);
/* A hold limit in ms: 1..DLOCK__MAX_HOLD_MAX, 0, or (none_ok) DLOCK_MAX_HOLD_NONE;
 * DLOCK_EINVAL with a message otherwise. */
#define DLOCK__MAX_HOLD_MAX (365LL * 24 * 3600 * 1000)
int dlock__check_max_hold(int64_t ms, int none_ok, int64_t *out);
/* A client label: NULL, "", or 1..128 bytes of printable ASCII without spaces. */
int dlock__check_label(const char *label);
void dlock__config_clear(dlock_config *cfg);
/* An address a sentinel or the cluster announced, through the config's
 * address map (if any) into host_out (DLOCK_HOST_MAX) and *port_out; an
 * unusable answer keeps the announced one (logged). */
void dlock__map_address(const dlock_config *cfg, const char *host, int port, char *host_out,
                        int *port_out);

/* Writes the log line to the config's log callback, if any (cfg may be NULL). */
void dlock__log(const dlock_config *cfg, dlock_log_level lvl, const char *fmt, ...)
    DLOCK__PRINTF(3, 4);

/* ------------------------------------------------------------------ stats */

/* A client's counters (dlock_client_stats): relaxed atomics, bumped from any
 * thread by whichever layer sees the event; the layers get a pointer to them
 * (NULL: not counted). */
enum {
    DLOCK__ST_ACQUISITIONS,
    DLOCK__ST_WAITS,
    DLOCK__ST_WAKEUPS,
    DLOCK__ST_WAKEUPS_TAKEN,
    DLOCK__ST_RENEWALS,
    DLOCK__ST_RENEWAL_RTTS,
    DLOCK__ST_RECONNECTS,
    DLOCK__ST_CONNECTS,
    DLOCK__ST_ROUNDTRIPS,
    DLOCK__ST_RENEWAL_WRITES,
    DLOCK__ST_ACALL_WRITES,  /* writes of the asynchronous calls' command connections (one
                                per node per turn of the io loop; not in dlock_stats) */
    DLOCK__ST_LOST,          /* + reason: DLOCK__ST_LOST + DLOCK_LOST_GONE, ... */
    DLOCK__ST_COUNT = DLOCK__ST_LOST + DLOCK_STATS_LOST_REASONS
};
enum { DLOCK__H_ACQUIRE_WAIT, DLOCK__H_HANDOFF_GAP, DLOCK__H_ROUNDTRIP, DLOCK__H_COUNT };

typedef struct dlock__hist {
    atomic_uint_fast64_t bucket[DLOCK_STATS_BUCKETS];
    atomic_uint_fast64_t sum_us;
} dlock__hist;

typedef struct dlock__stats {
    atomic_uint_fast64_t n[DLOCK__ST_COUNT];
    dlock__hist h[DLOCK__H_COUNT];
} dlock__stats;

void dlock__stats_init(dlock__stats *s);
static inline void dlock__stats_count(dlock__stats *s, int which, uint64_t n)
{
    if (s)
        atomic_fetch_add_explicit(&s->n[which], n, memory_order_relaxed);
}
/* Records a duration in microseconds into histogram h. */
void dlock__stats_time(dlock__stats *s, int h, int64_t us);
/* A round trip of us microseconds (counted, and timed). */
static inline void dlock__stats_rtt(dlock__stats *s, int64_t us)
{
    if (s) {
        atomic_fetch_add_explicit(&s->n[DLOCK__ST_ROUNDTRIPS], 1, memory_order_relaxed);
        dlock__stats_time(s, DLOCK__H_ROUNDTRIP, us);
    }
}
/* Fills the public snapshot. */
void dlock__stats_read(const dlock__stats *s, dlock_stats *out);

/* ----------------------------------------------------------------- cancel */

/* A waiting thread registers the mutex and condition variable it sleeps on;
 * firing the token broadcasts every registered one. The waiter must check
 * dlock_cancel_fired() under `mu` before each wait. */
typedef struct dlock__cancel_reg {
    dlock__list link;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    void (*fn)(void *arg);   /* set: firing calls fn(arg) instead (an asynchronous call) */
    void *arg;
} dlock__cancel_reg;
void dlock__cancel_attach(dlock_cancel *t, dlock__cancel_reg *reg, pthread_mutex_t *mu,
                          pthread_cond_t *cv);
/* For a waiter that does not sleep (an asynchronous call): firing the token
 * calls fn(arg), under the token's mutex, from the firing thread; fn must
 * only note it and return (post a job). No call after detach returns. */
void dlock__cancel_attach_fn(dlock_cancel *t, dlock__cancel_reg *reg, void (*fn)(void *arg),
                             void *arg);
void dlock__cancel_detach(dlock_cancel *t, dlock__cancel_reg *reg);
/* Sleeps ms, or less when t (may be NULL) fires: DLOCK_OK or DLOCK_ECANCELED. */
int dlock__cancel_sleep(dlock_cancel *t, int64_t ms);

#endif
