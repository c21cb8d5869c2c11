/* The network layer: connections to Redis servers and the requests sent on
 * them. Knows nothing of locks, waiters or the io thread's other work.
 * dlock's own connections: hiredis only formats commands and parses replies.
 *
 *   transport.c  sockets (TCP, unix): non-blocking connect, read, write
 *   tls.c        TLS over a TCP transport (OpenSSL)
 *   handshake.c  the commands every new connection sends first (ONE list,
 *                used by the blocking and the libuv connections alike)
 *   conn.c       a blocking connection: open, one round trip, liveness, abort
 *   mux.c        the shared connection: every thread's requests pipelined on it
 *   pool.c       a node: one server seen through its shared connection and a
 *                pool of blocking connections
 *   policy.c     the call policy: what a try came to, and what comes next
 *   call.c       a request on a node: EVALSHA + NOSCRIPT, retries, idempotence,
 *                the unlock latch guard (by the policy)
 *   aconn.c      an asynchronous connection on a libuv loop (its thread only)
 *   acall.c      requests on a libuv loop, by the same policy, on any deployment
 *   single.c     one address whose server may be demoted (READONLY): new
 *                connections, the name resolved again
 *   router.c     which node serves a key, by the deployment behind it
 *                (backend.h: one address, single.c; a sentinel-managed
 *                primary, sentinel.c; a primary found by ROLE, replicated.c;
 *                a Redis Cluster, slot.c and cluster.c)
 * Not installed. */
#ifndef DLOCK_NET_H
#define DLOCK_NET_H

#include <sys/socket.h>
#include <sys/types.h>

#include <hiredis/read.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "core/core.h"
#include "scripts.h"

/* Longest connection name (CLIENT SETNAME) with its NUL. */
#define DLOCK__CONN_NAME_MAX 256

typedef struct dlock__tls dlock__tls;
typedef struct dlock__transport dlock__transport;

/* Redis Cluster's key slots (slot.c): CRC16-CCITT (XMODEM), and a key's
 * slot: CRC16 of the hash tag (the bytes between the first '{' and the next
 * '}', when that is not empty), else of the whole key, mod 16384. Pure. */
#define DLOCK__SLOTS 16384
uint16_t dlock__crc16(const char *buf, size_t len);
int dlock__key_slot(const char *key, size_t len);

typedef struct dlock__node dlock__node;

enum { DLOCK__HOOK_WATCHDOG = 0, DLOCK__HOOK_QUARANTINE = 1, DLOCK__HOOKS = 2 };

/* What the network layer needs from the client that owns it. */
typedef struct dlock__netctx {
    const dlock_config *cfg;   /* timeouts, retries, pool size, log callback */
    dlock__tls *tls;           /* a rediss:// endpoint's TLS context, else NULL */
    dlock__stats *stats;       /* the client's counters (may be NULL) */
    pthread_mutex_t name_mu;
    char conn_name[DLOCK__CONN_NAME_MAX];   /* CLIENT SETNAME of every connection, or ""; under
                                               name_mu */
    atomic_uint_fast64_t name_gen;          /* bumped when conn_name changes */
    atomic_int name_refused;                /* Redis refused CLIENT SETNAME (logged once) */
    /* The failover quarantine (dlock_config_set_failover_quarantine). */
    _Atomic int64_t longest_lease;          /* the longest fixed lease acquired with (ms) */
    pthread_mutex_t hook_mu;
    /* Under hook_mu: told of each new primary (DLOCK__HOOK_*: the watchdog,
     * the quarantine's record); never block, any thread. */
    void (*on_promoted[DLOCK__HOOKS])(void *ud, dlock__node *n);
    void *promoted_ud[DLOCK__HOOKS];
    /* Under hook_mu: told of a node whose clock jumped forward (the
     * quarantine's record); never blocks, any thread. */
    void (*on_jumped)(void *ud, dlock__node *n, int64_t ms);
    void *jumped_ud;
} dlock__netctx;

/* Sets up TLS for a rediss:// endpoint (its files are loaded now: DLOCK_ETLS
 * naming a file that cannot be) and logs, once, a warning when its
 * certificate checks are off. */
int dlock__netctx_init(dlock__netctx *ctx, const dlock_config *cfg, dlock__stats *stats);
void dlock__netctx_clear(dlock__netctx *ctx);
/* Sets the connection name (any thread): connections opened from now on use it;
 * open ones are renamed as they are next used (see pool.c and aconn.c). */
void dlock__netctx_set_name(dlock__netctx *ctx, const char *name);
/* Copies the current name into buf (size DLOCK__CONN_NAME_MAX); returns its
 * generation. */
uint64_t dlock__netctx_name(dlock__netctx *ctx, char *buf);
/* A fixed lease was acquired with (any thread): the auto quarantine covers it. */
void dlock__netctx_note_lease(dlock__netctx *ctx, int64_t lease_ms);
/* The quarantine a new primary seen now gets (ms; 0 when off). */
int64_t dlock__netctx_quarantine_ms(dlock__netctx *ctx);
/* One lease: the longest a holder may still believe it holds (the watchdog
 * timeout, or the longest fixed lease acquired with), ms. */
int64_t dlock__netctx_lease_ms(dlock__netctx *ctx);
/* Sets the hook told of a node whose clock jumped forward, with the
 * quarantine it gets (NULL: none); any thread. */
void dlock__netctx_on_jumped(dlock__netctx *ctx, void (*fn)(void *ud, dlock__node *n, int64_t ms),
                             void *ud);
/* Sets hook `which` (DLOCK__HOOK_*), told of every new primary (NULL:
 * none); any thread. */
void dlock__netctx_on_promoted(dlock__netctx *ctx, int which,
                               void (*fn)(void *ud, dlock__node *n), void *ud);
static inline uint64_t dlock__netctx_gen(dlock__netctx *ctx)
{
    return atomic_load_explicit(&ctx->name_gen, memory_order_acquire);
}

/* -------------------------------------------------------------- handshake */

/* One command of a new connection's handshake. */
typedef struct dlock__hs_step {
    int argc;
    const char *argv[3];
    const char *what;       /* "authentication", ... for messages */
    int credentials;        /* a refusal means bad credentials (DLOCK_EAUTH) */
    int optional;           /* refused by an ACL or unknown: the connection goes on */
    char buf[DLOCK__CONN_NAME_MAX];   /* storage for the database number or the name */
    char user[DLOCK_CREDENTIAL_MAX];  /* the credentials callback's answer (AUTH) */
    char secret[DLOCK_CREDENTIAL_MAX];
} dlock__hs_step;

#define DLOCK__HS_MAX 4
/* The commands a new connection sends before anything else: AUTH, SELECT,
 * CLIENT SETNAME as they apply, or a PING when none does (so that a
 * connection the kernel completed for a server that is going away fails
 * here, before a request that cannot be resent goes out on it). Returns how
 * many (1..DLOCK__HS_MAX), or DLOCK_EAUTH (message set) when the credentials
 * callback failed or answered nothing usable. The AUTH arguments may come
 * from the callback: dlock__handshake_wipe once they are sent. */
int dlock__handshake_steps(dlock__netctx *ctx, const dlock__endpoint *ep,
                           dlock__hs_step out[DLOCK__HS_MAX], uint64_t *name_gen);
/* Clears the credentials the steps hold. */
void dlock__handshake_wipe(dlock__hs_step *steps, int n);
/* What the reply to step s means: DLOCK_OK, or a status with the calling
 * thread's message set (naming addr). A CLIENT SETNAME refused by an ACL
 * (NOPERM) or unknown to the server is not fatal: the connection goes on
 * unnamed, and the client logs a warning once. */
int dlock__handshake_check(dlock__netctx *ctx, const dlock__hs_step *s, const redisReply *r,
                           const char *addr);
/* A connection that failed before step `what` was answered: DLOCK_ETLS
 * (tls_error) or DLOCK_ECONN, with the message "connection to ADDR failed
 * during WHAT: WHY", and a hint when a plain connection was closed unanswered
 * (a TLS port behind redis://). */
int dlock__handshake_io_fail(const dlock__transport *t, const char *addr, const char *what,
                             int tls);

/* -------------------------------------------------------------- transport */

/* How a connection's bytes travel: a non-blocking socket (TCP or unix), or
 * TLS over a TCP one. The blocking connection waits on it with poll(), the
 * libuv one with uv_poll: one transport for both. */
#define DLOCK__IO_ERR (-1)     /* failed: t->err says why */
#define DLOCK__IO_AGAIN (-2)   /* would block: wait for t->want, then call again */
#define DLOCK__IO_NOMEM (-3)   /* out of memory (dlock__conn_feed) */

typedef struct dlock__transport_vt {
    const char *name;
    /* Advances the transport's own handshake (TLS): DLOCK_OK when done,
     * DLOCK__IO_AGAIN or DLOCK__IO_ERR. */
    int (*handshake)(dlock__transport *t);
    /* Bytes read (> 0), 0 when the server closed, or DLOCK__IO_AGAIN / _ERR. */
    ssize_t (*read)(dlock__transport *t, char *buf, size_t n);
    /* Bytes written (> 0), or DLOCK__IO_AGAIN / DLOCK__IO_ERR. */
    ssize_t (*write)(dlock__transport *t, const char *buf, size_t n);
    /* 1 when bytes are readable without waiting for the socket (TLS buffers). */
    int (*pending)(const dlock__transport *t);
    void (*close)(dlock__transport *t, int reset);
} dlock__transport_vt;

struct dlock__transport {
    const dlock__transport_vt *vt;
    int fd;
    short want;              /* after DLOCK__IO_AGAIN: POLLIN or POLLOUT */
    int eof;                 /* the server closed its side */
    int hung_up;             /* the last failure: the server closed or reset the connection */
    int tls_error;           /* the last failure came from TLS (DLOCK_ETLS) */
    int cert_asked;          /* TLS: the server asked for a client certificate and the
                                client has none */
    int err_no;              /* errno of the last failure, or 0 */
    char err[320];           /* the last failure, for messages */
    void *ssl;               /* TLS only */
};

void dlock__transport_init(dlock__transport *t);
/* Starts a non-blocking connect: DLOCK_OK (connected), DLOCK__IO_AGAIN (wait
 * for POLLOUT, then dlock__transport_connected) or DLOCK__IO_ERR. */
int dlock__transport_connect(dlock__transport *t, const struct sockaddr *sa, socklen_t len);
int dlock__transport_connected(dlock__transport *t);
/* Resolves and connects, waiting up to deadline_ms: DLOCK_OK or DLOCK_ECONN
 * with the thread's message naming addr. */
int dlock__transport_open(dlock__transport *t, const dlock__endpoint *ep, const char *addr,
                          int64_t deadline_ms);
/* Waits until the socket is ready for `events`: DLOCK_OK, DLOCK_ECMDTIMEOUT
 * at the deadline (no message), DLOCK_ESYS. */
int dlock__transport_wait(dlock__transport *t, short events, int64_t deadline_ms);
/* Writes n bytes by the deadline: DLOCK_OK, DLOCK__IO_ERR or
 * DLOCK_ECMDTIMEOUT (t->err set); *written (may be NULL) = bytes written. */
int dlock__transport_write_all(dlock__transport *t, const char *buf, size_t n,
                               int64_t deadline_ms, size_t *written);
/* Closes the socket (and TLS); reset: with an RST, dropping unsent data. */
void dlock__transport_close(dlock__transport *t, int reset);
/* Records errno err in t->err ("what: strerror"); returns DLOCK__IO_ERR. */
int dlock__io_fail(dlock__transport *t, int err, const char *what);

/* -------------------------------------------------------------------- tls */

/* A client's TLS settings, loaded: DLOCK_ETLS naming a file (and addr) that
 * cannot be loaded, DLOCK_ENOMEM. */
int dlock__tls_new(dlock__tls **out, const dlock__tls_opts *o, const char *addr);
void dlock__tls_free(dlock__tls *tls);
/* Puts TLS on a connected TCP transport; its handshake then runs through
 * t->vt->handshake. DLOCK_OK or DLOCK__IO_ERR (t->err). */
int dlock__tls_attach(dlock__transport *t, dlock__tls *tls, const dlock__endpoint *ep);

/* ------------------------------------------------------------- blocking */

typedef struct dlock__conn dlock__conn;

/* Opens a blocking connection: connect, TLS, then the handshake, under the
 * connect timeout; the command timeout applies afterwards. */
int dlock__conn_open(dlock__netctx *ctx, const dlock__endpoint *ep, const char *addr,
                     dlock__conn **out, uint64_t *name_gen);
/* Closes with a reset: data still queued in the socket is dropped, not sent. */
void dlock__conn_abort(dlock__conn *c);
/* Closes cleanly (TLS: close_notify). */
void dlock__conn_close(dlock__conn *c);
/* 1 when an idle connection has nothing to read and is not closed. */
int dlock__conn_alive(dlock__conn *c);
/* 1 once a request on it failed: it must not be reused. */
int dlock__conn_broken(const dlock__conn *c);
/* 1 once a request on it failed for want of memory (writing or reading). */
int dlock__conn_oom(const dlock__conn *c);
/* The last failure's text. */
const char *dlock__conn_error(const dlock__conn *c);

typedef enum { DLOCK__SENT_OK, DLOCK__NOT_SENT, DLOCK__MAYBE_RAN } dlock__sent;
/* Writes the commands (a PING first when ping_first) and reads the replies;
 * *out gets the last one. A failure while writing means Redis cannot have run
 * them; a failure while reading means it may have. *timed_out tells which
 * read failure. */
dlock__sent dlock__conn_roundtrip(dlock__conn *c, int argc, const char *const *argv,
                                  const size_t *lens, int ping_first, redisReply **out,
                                  int *timed_out);
/* k commands in one write (a PING first when ping_first), then their replies
 * in order: one round trip. out[0..*nread) get the replies read before a
 * failure (the PING's is dropped); the outcome is as dlock__conn_roundtrip's,
 * for the commands from *nread on. lens may be NULL (strlen of each). */
dlock__sent dlock__conn_pipeline(dlock__conn *c, size_t k, const int *argc,
                                 const char *const *const *argv, const size_t *const *lens,
                                 int ping_first, redisReply **out, size_t *nread, int *timed_out);
/* Waits up to timeout_ms for a reply nobody asked for (a pub/sub message on
 * a subscribed connection): DLOCK_OK with *out, DLOCK_ETIMEDOUT when nothing
 * came (the connection stays usable), or a failure (then it is broken). */
int dlock__conn_wait_reply(dlock__conn *c, int64_t timeout_ms, redisReply **out);
/* Writes (round trips) made by the calling thread, for tests and the bench. */
extern _Thread_local uint64_t dlock__roundtrips;

/* Its transport and reply reader, for the shared connection (mux.c), which
 * serializes their use itself. */
dlock__transport *dlock__conn_transport(dlock__conn *c);
redisReader *dlock__conn_reader(dlock__conn *c);
/* One read of what the transport has, fed to the reply reader: bytes read
 * (> 0), 0 when the server closed, DLOCK__IO_AGAIN, DLOCK__IO_ERR (t->err)
 * or DLOCK__IO_NOMEM. */
ssize_t dlock__conn_feed(dlock__conn *c);

/* ------------------------------------------------------------------- mux */

/* The shared connection (mux.c, docs/internals/mux.md): any thread's
 * requests on one connection, pipelined, each caller waiting for its own
 * reply (they come in order). Callers take turns writing and reading: no
 * thread of its own. A node has one at a time (pool.c). */
typedef struct dlock__mux dlock__mux;

/* Opens one (dlock__conn_open). */
int dlock__mux_open(dlock__netctx *ctx, const dlock__endpoint *ep, const char *addr,
                    dlock__mux **out);
/* Once nobody uses it: reset when it failed or was given up, else closed. */
void dlock__mux_free(dlock__mux *m);
/* 1 while it takes requests and carries connection name generation gen. */
int dlock__mux_usable(const dlock__mux *m, uint64_t gen);
/* Takes no new request from now on (its server is no primary any more, say):
 * the next caller opens a new one; it is reset once nobody uses it. */
void dlock__mux_retire(dlock__mux *m);
/* Its users' count, changed by delta (under the node's mutex): the new count. */
int dlock__mux_ref(dlock__mux *m, int delta);
/* One request (a PING first when ping_first), answered in order with the
 * others on the connection; as dlock__conn_roundtrip: SENT_OK with *out
 * the reply; NOT_SENT (it cannot have run: the connection was found closed
 * or given up, or out of memory); MAYBE_RAN (written, no reply: the
 * connection failed, or *timed_out: its command timeout passed, counted from
 * the call). *oom: it failed for want of memory (its own, or its connection
 * failed reading for want of it). why (wsize bytes) says what failed. */
dlock__sent dlock__mux_roundtrip(dlock__mux *m, int argc, const char *const *argv,
                                 const size_t *lens, int ping_first, redisReply **out,
                                 int *timed_out, int *oom, char *why, size_t wsize);

/* ------------------------------------------------------------------- node */

/* One Redis server seen through a pool of blocking connections. */
typedef struct dlock__node dlock__node;

int dlock__node_new(dlock__node **out, dlock__netctx *ctx, const dlock__endpoint *ep);
void dlock__node_free(dlock__node *n);
/* Node n became the primary of its shard in place of another (a failover
 * seen by the router; any thread, never blocks): its quarantine starts now
 * (dlock_config_set_failover_quarantine), its promotion time is kept and the
 * context's hook told. */
void dlock__node_promoted(dlock__node *n);
/* When n was last promoted (ms, dlock__now_ms), or 0: never. Set before
 * the context's hook is told. */
int64_t dlock__node_promoted_at(const dlock__node *n);
/* Ms left of n's failover quarantine (0: none). No I/O, any thread. */
int64_t dlock__node_quarantine_left(const dlock__node *n);
/* n's clock jumped forward (the watchdog saw it): this client's acquisitions
 * there wait ms, and the hook records the quarantine for every client. */
void dlock__node_clock_jumped(dlock__node *n, int64_t ms);
/* Opens one connection now and PINGs it (to report an unreachable server at open). */
int dlock__node_check(dlock__node *n);
const dlock__endpoint *dlock__node_endpoint(const dlock__node *n);
/* Printable address, never credentials. */
const char *dlock__node_addr(const dlock__node *n);
dlock__netctx *dlock__node_ctx(const dlock__node *n);
/* Takes an idle connection, or opens one if the pool has room, or waits for
 * one up to the command timeout; idle_only: an idle one or DLOCK_ECONN at
 * once. *fresh = 1 when newly opened. An idle connection opened under an older
 * connection name is closed instead of used. */
int dlock__node_get_conn(dlock__node *n, dlock__conn **out, uint64_t *gen, int *fresh,
                         int idle_only);
/* Gives a connection back (with the name generation get_conn gave); a broken
 * one is aborted. */
void dlock__node_put_conn(dlock__node *n, dlock__conn *c, uint64_t gen, int broken);
/* The node's shared connection, opened when it has none usable (callers
 * that come meanwhile wait for that open, and share its failure); idle_only:
 * the one open now or DLOCK_ECONN. *fresh = 1 when opened for this call. */
int dlock__node_get_mux(dlock__node *n, dlock__mux **out, int *fresh, int idle_only);
/* Done with it. */
void dlock__node_put_mux(dlock__node *n, dlock__mux *m);

/* ------------------------------------------------------------------- call */

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
    DLOCK__CALL_IDLE_ONLY = 8,
    /* After a successful answer, WAIT for the config's replica count on the
     * same connection (the result's acks get the count reached; 0 when WAIT
     * could not be asked). No-op when the acknowledgement is off. */
    DLOCK__CALL_WAIT_ACK = 16,
    /* An acquisition: not sent to a node in its failover quarantine
     * (dlock__quarantine_refusal), even when the router moves it to a new
     * primary on its way. */
    DLOCK__CALL_QUARANTINE = 32
};

/* A call's outcome beyond its status. */
typedef struct dlock__res {
    redisReply *r;           /* DLOCK_OK: the answer (the caller frees it); else NULL */
    int acks;                /* replicas that acknowledged it (DLOCK__CALL_WAIT_ACK), -1: not
                                asked */
    dlock__rerr err;         /* Redis refused it: the refusal's class; else DLOCK__RERR_NONE */
    char text[256];          /* ... and its text (cut), for messages and a redirection's node */
    const char *msg;         /* an asynchronous round trip's failure (net/acall.c): its
                                message, valid during the callback; else NULL */
} dlock__res;

static inline void dlock__res_init(dlock__res *res)
{
    res->r = NULL;
    res->acks = -1;
    res->err = DLOCK__RERR_NONE;
    res->text[0] = '\0';
    res->msg = NULL;
}
/* Replica acknowledgement (dlock_config_set_replica_ack), shared by the
 * blocking call and the asynchronous one: */
/* the replicas a ROLE answer lists as connected, or -1 (not a primary's
 * answer, or an error: ROLE refused); */
int dlock__role_replicas(const redisReply *r);
/* the count to WAIT for, given the connected replicas (ROLE's count, -1:
 * unknown; only read under DLOCK_REPLICAS_ALL): every connected one, 1 when
 * unknown, and -1 (do not ask: acks -1) for a primary without replicas; */
int dlock__ack_want(const dlock_config *cfg, int connected);
/* WAIT's answer as a count (0 for anything but an integer); */
int dlock__ack_count(const redisReply *r);
/* and WAIT <want> <the ack timeout>, its arguments in w. */
typedef struct dlock__wait_cmd_t {
    const char *av[3];
    size_t lens[3];
    char n[24], t[24];
} dlock__wait_cmd_t;
void dlock__wait_cmd(dlock__wait_cmd_t *w, const dlock_config *cfg, int want);

/* DLOCK_OK when a request with `flags` may go to n now; else DLOCK_ETIMEDOUT
 * with res->err DLOCK__RERR_QUARANTINE, res->text the ms left in decimal,
 * and the message (an acquisition, DLOCK__CALL_QUARANTINE, and n in its
 * failover quarantine). */
int dlock__quarantine_refusal(const dlock__node *n, unsigned flags, dlock__res *res);
/* Records refusal r (an error reply) in res and sets the calling thread's
 * message "addr: <its text>"; returns its status code. */
int dlock__res_refused(dlock__res *res, const char *addr, const redisReply *r);

/* ----------------------------------------------------------------- policy */

/* The one call policy (policy.c): what a try of a request came to, and what
 * comes next. The blocking call, the batch, the asynchronous call, the
 * cluster and sentinel routers and the watchdog's renewals all ask it. */
typedef struct dlock__try {
    int conn_rc;             /* no connection could be had: its status (else DLOCK_OK) */
    dlock__sent sent;        /* answered; not written (cannot have run); written, no answer */
    int timed_out;           /* MAYBE_RAN by the command timeout (else the connection failed) */
    int fresh;               /* NOT_SENT on a connection opened for it (else an idle one that
                                had died: another is tried at once) */
    dlock__rerr err;         /* answered with a refusal: its class */
    int oom;                 /* NOT_SENT for want of memory (cannot have run; no pause helps) */
} dlock__try;

typedef enum {
    DLOCK__NEXT_DONE,        /* answered */
    DLOCK__NEXT_RELOAD,      /* load the script, send again at once */
    DLOCK__NEXT_REROUTE,     /* the node does not serve the keys: ask the topology, send again
                                where it says (after after_ms) */
    DLOCK__NEXT_RETRY,       /* send again after after_ms */
    DLOCK__NEXT_FAIL         /* give up with rc */
} dlock__next;

typedef struct dlock__verdict {
    dlock__next next;
    int rc;                  /* the status should the call end here */
    int64_t after_ms;        /* RETRY, REROUTE: the pause first */
    int counts;              /* RETRY: spends one of the request's retries */
} dlock__verdict;

/* Pure. flags: the request's DLOCK__CALL_*; failures: retries spent so far;
 * reloaded: its script was loaded for it once already. A retry needs the
 * budget (failures < retry_attempts, no DLOCK__CALL_NO_RETRY); a request
 * that may have run goes again only when idempotent (else DLOCK_EUNKNOWN). */
dlock__verdict dlock__call_policy(const dlock__try *t, unsigned flags, int failures, int reloaded,
                                  const dlock_config *cfg);
/* The message and status of a try not answered (t->sent NOT_SENT or
 * MAYBE_RAN): "addr: why" (ECONN), "no reply within the command timeout"
 * (ECMDTIMEOUT), or DLOCK_EUNKNOWN for a request that may have run and is
 * not idempotent. */
int dlock__call_lost(const char *addr, const dlock__try *t, const char *why, unsigned flags);
/* The unlock latch's guard: 0 when a request first written at first_write
 * (ms; < 0: never) with a latch of latch_ms (<= 0: none) could be answered
 * after its latch if written now, its answer due within answer_ms. */
int dlock__latch_allows(int64_t first_write, int64_t latch_ms, int64_t answer_ms, int64_t now);

/* A request: either a plain command (script < 0) or EVALSHA of a script. For
 * a script, argv holds keys then args, nkeys of them keys. */
typedef struct dlock__req {
    int script;              /* DLOCK__SCRIPT_* or -1 */
    int nkeys;
    int argc;
    const char *const *argv;
    const size_t *lens;      /* NULL: strlen of each */
    unsigned flags;
    dlock_cancel *cancel;    /* interrupts retry pauses; may be NULL */
    int64_t latch_ms;        /* > 0: lifetime of the request's latch; no write may be
                                answered after first write + latch_ms */
} dlock__req;

/* DLOCK_EINVAL (with the message) when a script request's key and argument
 * counts disagree with its header; DLOCK_OK otherwise. */
int dlock__req_check(const dlock__req *req);
/* Runs the request with the call policy's retries (policy.c). DLOCK_OK:
 * res->r is the answer (the caller frees it with freeReplyObject) and
 * res->acks the replicas that acknowledged it (DLOCK__CALL_WAIT_ACK). A
 * refusal is a status code, its class and text in res (the message says
 * "addr: text"); a refusal that asks for another node (MOVED, ASK, READONLY,
 * CLUSTERDOWN) is the router's to follow. A script request whose key and
 * argument counts disagree with its header (KEYS[n] / ARGV[n] lines, counted
 * at build time) is refused with DLOCK_EINVAL before anything is sent. */
int dlock__node_call(dlock__node *n, const dlock__req *req, dlock__res *res);

/* Several requests on one node, written together and answered in order: one
 * round trip for all (a multi-lock's attempts or releases). Each request
 * keeps dlock__node_call's rules, by its own flags and latch: after a failed
 * read, only an idempotent request is sent again (the others end with
 * DLOCK_EUNKNOWN), a latched one is never written when its answer could come
 * after its latch, NOSCRIPT loads the script and sends again at once, and a
 * failure before the write is retried, an acquisition (DLOCK__CALL_QUARANTINE)
 * is not sent to a node in its quarantine (no WAIT follows: a request with
 * DLOCK__CALL_WAIT_ACK gets no acks). The batch's `flags` may hold
 * DLOCK__CALL_NO_RETRY and DLOCK__CALL_IDLE_ONLY; a PING goes first when any
 * request asks for it; `cancel` interrupts the pauses. For each request,
 * rc[i] is its status and res[i] its outcome as dlock__node_call's (a
 * refusal's class and text in res[i]); the calling thread's message names
 * the batch's last failure. */
void dlock__node_call_many(dlock__node *n, const dlock__req *reqs, size_t k, unsigned flags,
                           dlock_cancel *cancel, dlock__res *res, int *rc);

/* ----------------------------------------------------------------- router */

/* Which node serves a key: one address (whose server may be replaced behind
 * it: single.c), a sentinel-managed primary, or a cluster. Every request goes
 * through it. */
typedef struct dlock__router dlock__router;

int dlock__router_new(dlock__router **out, dlock__netctx *ctx, const dlock__endpoint *ep);
void dlock__router_free(dlock__router *r);
/* Proves the deployment reachable now (one connection, PING). */
int dlock__router_check(dlock__router *r);
/* The node that serves `key` (any node when key is NULL), from what the
 * router knows: no I/O, so the io thread may ask. */
dlock__node *dlock__router_node(dlock__router *r, const char *key, size_t len);
/* Every node that holds keys now (the primary; on a cluster each primary
 * serving slots), from what the router knows (no I/O): up to max into out;
 * returns how many there are (may exceed max). For walks over every key
 * (SCAN). */
size_t dlock__router_primaries(dlock__router *r, dlock__node **out, size_t max);
/* Runs req on the node that serves its keys (any node for a keyless command). */
int dlock__router_call(dlock__router *r, const dlock__req *req, dlock__res *res);
/* 1 on a Redis Cluster: keys live on several nodes. */
int dlock__router_is_cluster(const dlock__router *r);
/* 1 when pub/sub is sharded (a cluster of Redis 7 nodes): waiters
 * SSUBSCRIBE on the node that serves the channel's slot, and the scripts
 * publish with SPUBLISH (Redisson's default on a cluster). */
int dlock__router_sharded(const dlock__router *r);
/* The script to send for `script` (DLOCK__SCRIPT_*): its SPUBLISH variant
 * when pub/sub is sharded. dlock__router_call applies it; a caller that
 * sends scripts to a node itself (dlock__node_call_many) must too. */
int dlock__router_script(const dlock__router *r, int script);
/* A node answered that it no longer serves a key (MOVED, READONLY): the
 * topology is read again soon. Never blocks: the io thread calls it. */
void dlock__router_stale(dlock__router *r);
/* Node n answered READONLY (it is a replica now; never blocks, any thread):
 * on one address, connections are opened afresh from now on, the name
 * resolved again, under a new node (single.c); elsewhere as
 * dlock__router_stale. */
void dlock__router_demoted(dlock__router *r, const dlock__node *n);
/* 1 when keys may move between nodes (sentinel, cluster). */
int dlock__router_dynamic(const dlock__router *r);
/* Bumped whenever a key may have moved to another node (a new slot map, a
 * new primary): holders of node pointers look again. No I/O. */
uint64_t dlock__router_generation(dlock__router *r);

/* ------------------------------------------------------------------ aconn */

/* An asynchronous Redis connection on a libuv loop. hiredis formats the
 * commands and parses the replies (redisFormatCommandArgv, redisReader);
 * libuv does the I/O and the timers. The connection reconnects by itself,
 * with a growing pause up to the retry delay, until it is closed. Every
 * function here runs on the loop's thread only. */
typedef struct dlock__aconn dlock__aconn;

/* A reply to one command, or r == NULL with status < 0 when the connection
 * failed (DLOCK_ECONN, DLOCK_ECMDTIMEOUT, DLOCK_ECLOSED) first. A command that
 * expects n replies (SUBSCRIBE a b c) gets n calls; on failure, one. The reply
 * is freed after the call. */
typedef void (*dlock__aconn_reply_fn)(dlock__aconn *ac, redisReply *r, int status, void *ud);

typedef struct dlock__aconn_cbs {
    void (*on_ready)(dlock__aconn *ac, void *ud);               /* handshake done */
    void (*on_down)(dlock__aconn *ac, int status, void *ud);    /* lost; will reconnect */
    void (*on_push)(dlock__aconn *ac, redisReply *r, void *ud); /* pub/sub message */
    void *ud;
} dlock__aconn_cbs;

/* pubsub: the connection will SUBSCRIBE; "message"/"smessage" arrays go to
 * on_push, and so does a "sunsubscribe" the server sends by itself (a
 * sharded channel's slot moved away); it PINGs now and then so a dead peer is
 * noticed. */
int dlock__aconn_new(dlock__aconn **out, uv_loop_t *uv, dlock__netctx *ctx,
                     const dlock__endpoint *ep, int pubsub, const dlock__aconn_cbs *cbs);
/* Starts connecting (no-op when already connecting or connected). */
void dlock__aconn_start(dlock__aconn *ac);
int dlock__aconn_ready(const dlock__aconn *ac);
/* Queues a command expecting `expect` replies. DLOCK_ECONN when not ready. A
 * connection whose name changed since its handshake queues CLIENT SETNAME
 * first. */
int dlock__aconn_send(dlock__aconn *ac, int argc, const char **argv, const size_t *lens,
                      int expect, dlock__aconn_reply_fn fn, void *ud);
/* While corked, commands are buffered; uncork writes them in one write. */
void dlock__aconn_cork(dlock__aconn *ac);
void dlock__aconn_uncork(dlock__aconn *ac);
/* Fails pending callbacks with DLOCK_ECLOSED, closes handles, frees itself once
 * libuv has released them, then calls done(arg) (may be NULL). */
void dlock__aconn_close(dlock__aconn *ac, void (*done)(void *), void *arg);

/* ------------------------------------------------------------------ acall */

/* Round trips on a libuv loop, for the asynchronous calls (acall.c): a
 * command connection per node, with dlock__node_call's rules (the call
 * policy: EVALSHA and NOSCRIPT, retries of what may be retried, the latch
 * guard), on every deployment (requests follow the router). The loop's
 * thread only, except new and free. */
typedef struct dlock__acall dlock__acall;

/* status DLOCK_OK: res->r is the answer (never an error reply; the callee
 * frees it). Otherwise res->r is NULL and the loop thread's message says why
 * (a refusal by Redis: "addr: its error text", with its code; its class and
 * text in res). res->acks: as dlock__node_call's (DLOCK__CALL_WAIT_ACK: WAIT,
 * and ROLE first under DLOCK_REPLICAS_ALL, on the same connection after the
 * answer), else -1. */
typedef void (*dlock__acall_fn)(int status, dlock__res *res, void *ud);

/* Before the loop runs; its owner calls dlock__acall_stop when the loop
 * stops (every request then ends with DLOCK_ECLOSED, and its handles close). */
int dlock__acall_new(dlock__acall **out, uv_loop_t *uv, dlock__netctx *ctx,
                     dlock__router *router);
void dlock__acall_stop(dlock__acall *x);
/* After the loop stopped. */
void dlock__acall_free(dlock__acall *x);
/* Sends req (its bytes are copied; req->cancel is ignored). DLOCK_OK: fn runs
 * exactly once, later (never inside this call); an error: fn never runs. */
int dlock__acall_send(dlock__acall *x, const dlock__req *req, dlock__acall_fn fn, void *ud);

#endif
