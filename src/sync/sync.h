/* The sync layer: the client, and the lock and synchronizer types on top of
 * the io and net layers (docs/internals/operations.md).
 *
 * Every call of every type is an operation (dlock__op_type): how to build its
 * request, what its answer means, what the client keeps of a success and how
 * to give it back, how to give up a wait, what it returns. Two drivers run
 * them: the blocking one (blocking.c) on the calling thread, the asynchronous one
 * (async.c) on the io thread; both wait with one wait loop (wait.c). A type
 * brings its handle (a dlock__handle first), its keys, its scripts and its
 * operations, nothing else. Not installed. */
#ifndef DLOCK_SYNC_H
#define DLOCK_SYNC_H

#include "dlock/async.h"
#include "io/io.h"

/* ----------------------------------------------------------------- client */

/* The client's table of pending asynchronous calls (async.c). */
typedef struct dlock__async dlock__async;

/* The lock family's per-owner record of holds known and of unknown outcome
 * (holds.c; the calls on it are in lock.h): a table guarded by mu. */
#define DLOCK__HOLD_BUCKETS 256
typedef struct dlock__hold_rec dlock__hold_rec;
typedef struct dlock__holds {
    pthread_mutex_t mu;
    atomic_long records;     /* how many there are (read without mu: 0 skips it) */
    dlock__hold_rec *bucket[DLOCK__HOLD_BUCKETS];
} dlock__holds;
int dlock__holds_init(dlock__holds *t);
void dlock__holds_clear(dlock__holds *t);

typedef struct dlock__qrec dlock__qrec;

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
    dlock__qrec *qrec;                 /* writes the failover quarantine on new primaries */
    atomic_uint_fast64_t next_owner;   /* for dlock_client_new_owner_id */
    atomic_uint own_keys;              /* the classes of dlock's own optional keys scripts
                                          get (DLOCK__OWN_*, dlock__op_key_optional) */
    int64_t latch_px;                  /* lifetime of an unlock latch */
    char evict_policy[48];             /* maxmemory-policy read at open, or "" */
    int evict_risky;                   /* it may evict keys with a TTL */
    dlock__holds holds;                /* the lock family's per-owner record */
    int holds_ready;                   /* holds initialised (and rq_mu) */
    pthread_mutex_t rq_mu;             /* guards rq_list */
    dlock__list rq_list;               /* the revoke request listeners (revoke_request.c) */
};

/* Stops every revoke request listener of the client, before its loop stops
 * (revoke_request.c): their handles may be freed after the close. */
void dlock__rq_close_all(dlock_client *c);

/* Before the loop runs. */
int dlock__async_new(dlock__async **out, dlock__loop *lp);
void dlock__async_free(dlock__async *t);
/* The loop's stop hook (arg: the client): every pending call ends with
 * DLOCK_ECLOSED. */
void dlock__async_stop(void *arg);

/* Writes "<uuid>:<tid>" for the calling thread; returns the length. */
size_t dlock__owner_of_thread(const dlock_client *c, char buf[DLOCK_OWNER_BUFSIZE]);
/* Runs a request on the node that serves its first key; *out: the answer. */
int dlock__call(dlock_client *c, const dlock__req *req, redisReply **out);

/* ----------------------------------------------------------------- handle */

/* What every handle (lock, semaphore, permit semaphore, latch, election)
 * starts with: the drivers and the messages need no more of it. */
typedef struct dlock__handle {
    dlock_client *c;
    const char *what;        /* "lock", "semaphore", ...: for messages */
    char *name;
    size_t nlen;
    char *channel;           /* where its wake-ups come (a fair lock: each waiter's own
                                channel's prefix) */
    size_t clen;
    atomic_int acks;         /* replicas that acknowledged its last acquisition, -1: not
                                asked (dlock_lock_replica_acks); set by both drivers */
} dlock__handle;

/* A getter's work (dlock_*_get(c, name, out)): clears the thread's message,
 * checks out, the client and the name, then allocates `size` bytes (zeroed)
 * that start with a dlock__handle, with the name copied and the channel
 * named `prefix`:{name} (Redisson's dlock__prefixed; `braced`: always
 * `prefix`{name}), or none when prefix is NULL. *h NULL on error. */
int dlock__handle_new(dlock_client *c, const char *name, const void *out, size_t size,
                      const char *what, const char *prefix, int braced, dlock__handle **h);
/* Frees what dlock__handle_new allocated, the handle included (NULL: no-op). */
void dlock__handle_free(dlock__handle *h);
/* The replicas that acknowledged h's last acquisition (an attempt's start:
 * -1), and the getters' read of it (h NULL: -1). */
void dlock__handle_acks(const dlock__handle *h, int acks);
int dlock__handle_acks_of(const dlock__handle *h);

/* The argument checks every type shares. Each returns DLOCK_OK or
 * DLOCK_EINVAL with the message. */
/* Clears the thread's message; "<what> is NULL" when h is NULL. */
int dlock__check_handle(const void *h, const char *what);
/* A lease: positive (up to 2^50 ms) or DLOCK_WATCHDOG. */
int dlock__check_lease(int64_t lease_ms);
/* A handle's lock-delay setter (a lock's, a permit semaphore's): ms checked
 * (0..DLOCK__LOCK_DELAY_MAX) and refused once *attempted, else stored in
 * *delay and, in decimal, in arg[size] (the scripts' argument). DLOCK_OK or
 * DLOCK_EINVAL with a message. */
int dlock__delay_set(int64_t *delay, char *arg, size_t size, const atomic_int *attempted,
                     int64_t ms);
/* The one check of a call's dlock_wait_opts (o NULL: the zeroed struct),
 * copied into *out. `takes`: the fields the call accepts beyond the wait and
 * the cancel token (DLOCK__TAKES_*); `what` names the call's object in the
 * message when it is given one it does not take ("a semaphore has no
 * lease"). DLOCK_EINVAL naming the field: a bad wait, a bad lease, a lease
 * or token the call does not take, a reserved field not zero. */
#define DLOCK__TAKES_LEASE 1u
#define DLOCK__TAKES_TOKEN 2u
#define DLOCK__TAKES_NO_EXPIRY 4u   /* a lease of DLOCK_NO_EXPIRY (permits) */
int dlock__check_opts(const dlock_wait_opts *o, unsigned takes, const char *what,
                      dlock_wait_opts *out);
/* min <= n <= DLOCK_COUNT_MAX (naming `what`). */
int dlock__check_count(int64_t n, int64_t min, const char *what);
/* A change of a count: non-zero, within +-DLOCK_COUNT_MAX. */
int dlock__check_delta(int64_t delta);

/* --------------------------------------------------------------------- op */

/* A request being built: keys first, then arguments, then how it is sent.
 * Strings are not copied: they must outlive the call; numbers are formatted
 * into the op itself. */
#define DLOCK__OP_MAX 16
#define DLOCK__OP_NUMS 6
typedef struct dlock__op {
    int script;              /* DLOCK__SCRIPT_* or -1 for a plain command */
    int nkeys, argc;
    int bad;                 /* built wrong: the call refuses it */
    int optional;            /* index of the first key of dlock's own that may be left out
                                (it and every key after it), or -1 */
    unsigned char cls[DLOCK__OP_MAX];   /* each optional key's DLOCK__OWN_* class */
    int nnum;
    unsigned flags;          /* DLOCK__CALL_*: 0 unless set */
    int64_t latch_ms;        /* an unlock latch's lifetime, or 0 */
    const char *argv[DLOCK__OP_MAX];
    size_t lens[DLOCK__OP_MAX];
    char num[DLOCK__OP_NUMS][24];
} dlock__op;

void dlock__op_init(dlock__op *op, int script);
void dlock__op_key(dlock__op *op, const char *s, size_t n);
/* Keys of dlock's own (not Redisson's) that a script works without, in
 * classes: a request carries its optional keys of the classes its client
 * uses (c->own_keys), and an ACL that refuses one (the fallback below) makes
 * the client drop a class at a time: the writers' intents first, then the
 * quarantine's record, then the reservation of the next turn, then the
 * lock-delay markers. The
 * markers (and the record) go to every acquisition, which honours them
 * whatever its own setting; a client with DLOCK_PRIORITY_OFF never sends the
 * reservation, and only writer-first read-write lock handles send the
 * writers' intents. Scripts know each optional key by its prefix
 * (include/own_keys.lua), so they come after every plain key, in any order. */
#define DLOCK__OWN_DELAY 1u        /* dlock_lock_delay:, dlock_read_delay:, dlock_permit_delay: */
#define DLOCK__OWN_RESERVE 2u      /* dlock_lock_next: */
#define DLOCK__OWN_QUARANTINE 4u   /* dlock_quarantine: */
#define DLOCK__OWN_INTENT 8u       /* dlock_write_intent: */
#define DLOCK__OWN_ALL 15u
void dlock__op_key_optional(dlock__op *op, unsigned cls, const char *s, size_t n);
void dlock__op_arg(dlock__op *op, const char *s, size_t n);
void dlock__op_args(dlock__op *op, const char *s);   /* a NUL-terminated argument */
void dlock__op_argi(dlock__op *op, int64_t v);
/* A plain command on one key: cmd key [arg] (arg may be NULL). */
void dlock__op_cmd(dlock__op *op, const char *cmd, const char *key, size_t klen,
                   const char *arg, size_t alen);

/* The request of op as the client sends it: its optional keys of the
 * classes in the client's c->own_keys and in `cap` (DLOCK__OWN_ALL for a
 * first try) go along (av, ln: room for the shortened request). Returns the
 * classes it carries (0: none). */
unsigned dlock__op_req(dlock_client *c, const dlock__op *op, unsigned cap, dlock_cancel *cancel,
                       dlock__req *req, const char **av, size_t *ln);
/* The ACL fallback, once for both drivers: an answer that refuses a key of
 * a request that carried optional keys of the classes `with` (an ACL that
 * allows Redisson's keys only: NOPERM, answered before the script ran)
 * means the request goes again without the class dlock__op_key_shed picks
 * (with & ~shed); the answer to that, unless refused too, makes the client
 * stop sending the classes shed so far, `dropped` (dlock__op_key_dropped,
 * logged once per class). */
int dlock__op_key_refused(unsigned with, const dlock__res *res);
unsigned dlock__op_key_shed(unsigned with);
void dlock__op_key_dropped(dlock_client *c, unsigned dropped, const dlock__res *res);
/* Runs op on the node that serves its keys (its flags and latch), with the
 * ACL fallback; res as dlock__router_call's. */
int dlock__op_call(dlock_client *c, const dlock__op *op, dlock_cancel *cancel, dlock__res *res);

/* Requests ops[0..k) of client c whose keys node n serves, written together
 * on one connection of n and answered in order (dlock__node_call_many: one
 * round trip for all, each request with its own flags and latch); the
 * others, and any a refusal sends elsewhere (a redirection, the ACL
 * fallback), each alone as dlock__op_call. Request i's status in rc[i], its
 * outcome in res[i] and, when it failed, its message in msg[i]
 * (DLOCK__MSG_MAX bytes). No WAIT follows (DLOCK__CALL_WAIT_ACK is not
 * honoured: a caller that needs replicas' acknowledgements calls alone). */
void dlock__op_call_many(dlock_client *c, dlock__node *n, dlock__op *const *ops, size_t k,
                         dlock__res *res, int *rc, char *const *msg);

/* The verdicts every type gives. An answer of the wrong shape to operation
 * `op`: frees r, sets the message. */
int dlock__proto(const dlock__handle *h, const char *op, redisReply *r);
/* A call's status, mapped for h: WRONGTYPE (a key that is not a h->what)
 * becomes DLOCK_EWRONGTYPE with Redis's (or the script's) words for it from
 * res (may be NULL); anything else stays. */
int dlock__refused(const dlock__handle *h, int rc, const dlock__res *res);

/* ------------------------------------------------------------------ names */

/* Redisson's naming: "prefix:{name}", or "prefix:name" when the name already
 * has a '{' (its own hash tag); `tail` is appended as is. NULL when out of memory. */
char *dlock__prefixed(const char *prefix, const char *name, size_t nlen, const char *tail,
                      size_t *out_len);
/* The same name written into dst (room for the length returned + 1 for the
 * NUL), or with dst NULL only its length; an empty prefix gives "{name}" +
 * tail (no ':' before it). */
size_t dlock__prefixed_to(char *dst, const char *prefix, const char *name, size_t nlen,
                          const char *tail);
/* Redisson's suffix naming: "{name}:tail", or "name:tail" when the name
 * already has a '{'. NULL when out of memory. */
char *dlock__suffixed(const char *name, size_t nlen, const char *tail, size_t *out_len);
/* "prefix{name}", braces whatever the name holds (a latch's channel, the
 * election's keys). NULL when out of memory. */
char *dlock__braced(const char *prefix, const char *name, size_t nlen, size_t *out_len);
/* Validates a lock name: DLOCK_EINVAL / DLOCK_ENAMETOOLONG with a message. */
int dlock__check_name(const char *name, size_t *len);
/* Validates an owner id likewise. */
int dlock__check_owner(const char *owner, size_t *len);

/* -------------------------------------------------------------- operation */

/* An attempt's answer "held by somebody else", returned as DLOCK__BUSY. */
#define DLOCK__BUSY 1
/* A composite attempt's "its next parts are set: run them" (compose). */
#define DLOCK__MORE 2

/* What a busy attempt learnt. */
typedef struct dlock__busy {
    int64_t ttl;             /* sleep at most this long before the next attempt (ms);
                                < 0: until a message */
    int first;               /* this waiter goes first among its channel's local waiters */
    /* Where the next wake-up comes, when not on the operation's channel: a
     * multi-lock waits on whichever of its locks answered busy. NULL
     * channel: the operation's. */
    dlock_client *c;
    const char *channel;
    size_t clen;
    int64_t pass;            /* units this waiter saw but cannot use (a semaphore's count
                                below its need): offered to the channel's other local
                                waiters when a wake-up brought it here */
    const char *quarantine;  /* not sent: the new primary (its address) is in its failover
                                quarantine for ttl ms more (dlock__quarantined) */
    int qserver;             /* ... as recorded on the server (by another client) */
    /* A key the attempt found present whose deletion, by anyone, may end the
     * wait (the lock held, the lock-delay marker alive): watched while the
     * waiter sleeps (dlock__waiter_watch); NULL: none. On the channel's
     * client (c above, or the operation's). */
    const char *watch;
    size_t wlen;
} dlock__busy;

/* What a call reports; include/dlock/async.h reads it, the blocking calls
 * take their outputs from it. */
struct dlock_async_result {
    int status;
    const char *message;
    uint64_t token;          /* a fenced acquisition's */
    int flag;                /* a force release: was locked; a try-release: released; ... */
    int64_t count;           /* a count the call answers, or -1 */
    const char *permit_id;   /* an acquired permit's id */
    const char (*permit_ids)[DLOCK_PERMIT_ID_BUFSIZE];   /* n permits' ids (count: n) */
    size_t n_ids;
    void *owned;             /* freed by the asynchronous driver after the callback */
    const char *text;        /* an election's leader ("host pid owner"), or NULL */
    /* Internal (a composite's parts): the call ended after a busy answer
     * (whatever the status: a wait of 0 ends busy with the type's error),
     * the one the driver copied where it was told (dlock__via.busy,
     * dlock__run's busy). */
    int busied;
};
typedef dlock_async_result dlock__result;

/* A composite operation's parts (parts.c): what its attempt is made of when
 * it is not one request (a multi-lock's round over several locks, each on
 * its own client). A part is one attempt of another operation on its own
 * handle, with no wait: t's hooks on state st (size bytes; copied when the
 * part runs asynchronously, so it holds pointers to what lives elsewhere).
 * Both drivers run a composite's parts alike: each on its handle's client's
 * io thread by the asynchronous driver, all of a round at once (those of one
 * client in one write per node), and, only when the caller blocks on that
 * very io thread (a dlock callback, a program's loop), by the blocking
 * driver right there. No thread is started. */
#define DLOCK__PART_MSG DLOCK__MSG_MAX
typedef struct dlock__op_type dlock__op_type;
typedef struct dlock__part {
    const dlock__handle *h;
    const dlock__op_type *t;
    void *st;
    size_t size;
    /* Its outcome: the status and message; busied, b: it ended after a busy
     * answer, this one. */
    int rc;
    int busied;
    dlock__busy b;
    char msg[DLOCK__PART_MSG];
    /* the runner's */
    struct dlock__parts *k;
    struct dlock__part *next;   /* the round's next part on the same client */
    dlock__job job;
} dlock__part;

typedef struct dlock__parts {
    dlock__part **part;      /* the parts to run: set by compose */
    size_t n;
    int round;               /* 0 at an attempt's start, then counted by the driver */
    int give_up;             /* a wait ended with this status after a busy answer: the
                                give-up's parts (best effort) */
    /* the runner's */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;
    void (*notify)(void *arg);
    void *arg;
} dlock__parts;

int dlock__parts_init(dlock__parts *k);
void dlock__parts_destroy(dlock__parts *k);
/* Ends each part of k's round with rc and msg, none of them run (the
 * caller could not send them). */
void dlock__parts_refuse(dlock__parts *k, int rc, const char *msg);
/* Runs the parts k->part[0..k->n) (each part's outcome set when it ends).
 * notify NULL (the blocking driver): returns once every part has ended.
 * Else returns at once, and notify(arg) runs once when the last part has
 * ended, on that part's thread (any io thread, or this one): it must only
 * post a job. Each part's failure is written into its record (p->msg); the
 * calling thread's message is not touched. */
void dlock__parts_run(dlock__parts *k, void (*notify)(void *arg), void *arg);

/* One operation of a type (acquire, release, a query, ...), the same for
 * both drivers. `st` is the call's state, the type's own struct: on the
 * caller's stack for a blocking call, copied into the call for an
 * asynchronous one (then set up there). Hooks may be NULL unless said. */
typedef struct dlock__op_type {
    /* Sets the state up where it lives (owner ids, an unlock latch, the
     * watchdog told of a release): on error nothing is left to undo. */
    int (*setup)(void *st);
    /* Required (unless attempt): an attempt's request. waited_ms: -1 for the
     * first attempt, then how long the call has waited. */
    void (*request)(void *st, int64_t waited_ms, dlock__op *op);
    /* Required (unless attempt): what its answer means, from the call's
     * status rc and res (res->r the answer when rc is DLOCK_OK; read frees
     * it): DLOCK_OK, DLOCK__BUSY with *b, or an error with the message. */
    int (*read)(void *st, int rc, dlock__res *res, dlock__busy *b);
    /* After DLOCK_OK: what the client keeps of it (the watchdog's
     * schedule); sent_ms was taken before the request was sent. */
    int (*keep)(void *st, int64_t sent_ms);
    /* Undoing a success that cannot stand (keep failed, too few replicas
     * acknowledged it): 1 with the request, or 0; then what its answer did
     * (DLOCK_OK: given back). */
    int (*give_back)(void *st, dlock__op *op);
    int (*gave_back)(void *st, int rc, dlock__res *res);
    /* Required for a waiting operation: the status and message of a busy
     * answer when waiting is over (a wait of 0, or the deadline). */
    int (*busy_error)(void *st, const dlock__busy *b);
    /* A wait that ends with rc after a busy answer (a reservation handed
     * back, a queue entry left): 1 with the request, sent once, best effort,
     * or 0. */
    int (*give_up)(void *st, int rc, dlock__op *op);
    /* The channel its waits listen on when not the handle's. */
    const char *(*channel)(void *st, size_t *len);
    /* After an attempt read DLOCK_OK: 1 to make one more attempt (its request
     * built anew by request) whose answer is the call's, 0 to end. May be
     * NULL (never). */
    int (*again)(void *st);
    /* Fills the result of a successful call (token, count, flag, permit id). */
    void (*result)(void *st, dlock__result *res);
    /* Once after a successful setup, whatever the outcome; read = 0 when no
     * answer was read (the client closed with the request in flight). */
    void (*done)(void *st, int read);
    /* A composite operation (a multi-lock over locks on several clients),
     * instead of request, read and keep: an attempt is made of parts
     * (dlock__parts), which the driver runs. compose is called at the
     * attempt's start (k->round 0; waited_ms as request's), then each time
     * the parts it set in k have all ended: DLOCK__MORE with the next parts,
     * or the attempt's outcome, DLOCK_OK, DLOCK__BUSY with *b, or an error
     * with the message. When a wait ends with an error after a busy answer,
     * it is called with k->give_up set to that status: DLOCK__MORE with the
     * give-up's parts (their outcome is not read), or DLOCK_OK when none.
     * Its done hook's read = 0: a round's outcome was never read (the client
     * closed with its parts out); what they took is the type's to give back.
     * The asynchronous driver may call round 0 on the calling thread: one
     * that does not answer DLOCK__MORE must leave st as it found it (it is
     * called again on the io thread). */
    int (*compose)(void *st, int64_t waited_ms, dlock__parts *k, dlock__busy *b);
    /* An acquisition: replicas acknowledge it (dlock_config_set_replica_ack),
     * and the client's statistics count it. */
    int acquires;
    /* A release of a hold the watchdog may renew: the asynchronous driver
     * ends a successful one only once the renewals in flight of the holds it
     * took out are answered (dlock__watchdog_collect), as the blocking
     * release waits. */
    int releases;
} dlock__op_type;

/* An acquisition (t->acquires) routed to a node in its failover quarantine
 * (dlock_config_set_failover_quarantine): 1 with *b as a busy answer whose
 * ttl is what is left, and nothing is to be sent; else 0. No I/O. */
int dlock__quarantined(const dlock__handle *h, const dlock__op_type *t, dlock__busy *b);
/* After an attempt's round trip: 1 when the router refused it on its way
 * because its node turned out to be a new primary in quarantine (rc, res:
 * the call's, DLOCK__RERR_QUARANTINE), with *b a busy answer for what is
 * left (res->r is NULL then: nothing to free). */
/* quarantine.c: the record of a failover quarantine on the server. Every
 * acquisition's script gets its slot's record, one of dlock's own optional
 * keys (DLOCK__OWN_QUARANTINE); the script refuses
 * while it lives (an error the call reads as DLOCK__RERR_QUARANTINE, with
 * the ms left). dlock__qrec writes it on every new primary this client sees
 * while its quarantine is on (created once the loop and the asynchronous
 * calls exist; stopped with the loop, freed after). */
void dlock__quarantine_key(const dlock__handle *h, dlock__op *op);
/* The record of a slot (tests, docs). */
const char *dlock__quarantine_slot_key(int slot, size_t *len);
int dlock__qrec_new(dlock__qrec **out, dlock_client *c);
void dlock__qrec_free(dlock__qrec *q);
int dlock__quarantine_met(const dlock__handle *h, const dlock__op_type *t, int rc,
                          const dlock__res *res, dlock__busy *b);

/* How an operation waits while busy. */
typedef struct dlock__wait_spec {
    dlock__wake_policy wake; /* how many of the channel's local waiters a message wakes */
    int64_t need;            /* this waiter's part of a message's budget (0: 1) */
    int64_t wait_ms;         /* 0: one attempt; DLOCK_WAIT_FOREVER: no limit */
    dlock_cancel *cancel;    /* may be NULL */
    /* (the ints together: a pending call's size is budgeted, test_async) */
    int settles;             /* a DLOCK__WAKE_ALL_DONE message ends the wait: DLOCK_OK */
    int awaits;              /* waits for a state (the latch), acquires nothing: not
                                counted in the acquisitions statistics */
    int backoff_mult;        /* quiet: see backoff_max_ms */
    int quiet;               /* subscribes to nothing: sleeps until the busy answer's TTL,
                                the back-off's next step or the deadline (the spin lock,
                                the rate limiter); only a cancellation or the client
                                closing cuts a sleep short */
    int64_t backoff_ms;      /* quiet: the first sleep after a busy answer (0: none, the
                                busy answer's TTL alone) */
    int64_t backoff_max_ms;  /* ... growing by backoff_mult (plus a jitter of up to one
                                ms per failed attempt) up to this */
} dlock__wait_spec;

/* An asynchronous call's completion (NULL where a call takes one: blocking). */
typedef struct dlock__via {
    dlock_async_fn fn;
    void *ud;
    dlock__busy *busy;       /* where each busy answer is copied, or NULL (a composite's
                                part: the last one says where to wait) */
} dlock__via;

/* Runs operation t on handle h: one attempt, and while busy the wait of
 * spec (NULL: a call that does not wait). Blocking (via NULL): st is used in
 * place, *res (may be NULL) gets the result, and the call's status is
 * returned. Asynchronous: st (size bytes) is copied into the call and set
 * up there, and DLOCK_OK means via->fn runs exactly once, later, on the io
 * thread; an error means it never runs. Either way a bad wait or callback
 * is refused (DLOCK_EINVAL) before the state is set up, and a blocking wait
 * from a dlock callback too (it would stall the io thread). h and the
 * strings the state points to must outlive the call. */
int dlock__start(const dlock__handle *h, const dlock__op_type *t, void *st, size_t size,
                 const dlock__wait_spec *spec, const dlock__via *via, dlock__result *res);
/* The blocking driver alone (blocking.c); busy as dlock__via's (may be NULL). */
int dlock__run(const dlock__handle *h, const dlock__op_type *t, void *st,
               const dlock__wait_spec *spec, dlock__result *res, dlock__busy *busy);
/* The blocking driver, for parts p[0..k) (none composite) of one client
 * whose keys node n serves, each run as dlock__run(p->h, p->t, p->st, NULL,
 * &res, &p->b) would run it, on the calling thread, but their first
 * attempts' requests written together (dlock__op_call_many: one round trip
 * for all). ended(p, rc, &res) runs as each part ends, its failure written
 * into p->msg. */
void dlock__run_batch(dlock__node *n, dlock__part *const *p, size_t k,
                      void (*ended)(dlock__part *p, int rc, const dlock__result *res));
/* The asynchronous driver alone (async.c). here (a composite's part, whose
 * callback may run inside the call): on its client's io thread the call
 * starts right there, not from a job posted to that thread. */
int dlock__async_run(const dlock__handle *h, const dlock__op_type *t, const void *st,
                     size_t size, const dlock__wait_spec *spec, const dlock__via *via, int here);

/* An attempt's request, the same for both drivers (blocking.c): op filled
 * by the type, an acquisition's flags set and the handle's replica count
 * reset, the attempt counted when the call waits; returns the time taken
 * before sending (the watchdog's origin: never later than Redis's). */
int64_t dlock__request(const dlock__handle *h, const dlock__op_type *t, void *st, int waits,
                       int64_t waited, dlock__op *op);
/* What an attempt's answer comes to, the same for both drivers (blocking.c):
 * read, then keep, then the replicas' acknowledgement (acks: the result's;
 * -1, not asked, passes). DLOCK_OK, DLOCK__BUSY, an error; or, with *back =
 * 1, a success that must be given back (type->give_back), the returned
 * status being the one the call then ends with. */
int dlock__answer(const dlock__handle *h, const dlock__op_type *t, void *st, int rc,
                  dlock__res *res, int64_t sent_ms, dlock__busy *b, int *back);
/* The end of a give-back: the call's status and message. why: the status
 * dlock__answer returned (its message where the call's failures go: the
 * give-back ran aside), acks: the result's, rrc: what gave_back said. Only
 * DLOCK_EREPLICAS gets a message of its own. */
int dlock__given_back(const dlock__handle *h, int why, int acks, int rrc);

/* ------------------------------------------------------------------- wait */

/* The wait loop (wait.c): attempt -> busy -> join the channel -> attempt ->
 * sleep -> attempt ..., as a state machine both drivers step through. Each
 * step says what the driver does next; the driver does it its own way
 * (block, or a callback and a timer) and reports back. */
enum { DLOCK__W_ATTEMPT, DLOCK__W_JOIN, DLOCK__W_SLEEP, DLOCK__W_DONE };

typedef struct dlock__wait {
    const dlock__handle *h;
    const dlock__op_type *t;
    void *st;
    dlock__wait_spec spec;
    dlock__waiter w;
    dlock_client *at;        /* where it is (to be) joined: client, channel */
    const char *channel;
    size_t clen;
    unsigned char waits;     /* the operation has a wait spec */
    unsigned char attempts, seen_busy, joined, used_wake, first;
    uint16_t fails;          /* a quiet wait's busy answers so far (saturates; its jitter) */
    int64_t start_us, deadline;
    int64_t until;           /* W_SLEEP: until when */
    int64_t next_sleep;      /* a quiet wait's back-off: its next sleep (ms) */
} dlock__wait;

/* spec NULL: a call that does not wait. */
void dlock__wait_init(dlock__wait *w, const dlock__handle *h, const dlock__op_type *t, void *st,
                      const dlock__wait_spec *spec);
/* For the next attempt: -1 for the first, then how long the call has
 * waited (again: the same attempt, sent again). */
int64_t dlock__wait_waited(dlock__wait *w, int again);
/* After an attempt that returned *rc (DLOCK__BUSY: with *b). At W_DONE,
 * *rc is the call's status. */
int dlock__wait_attempted(dlock__wait *w, int *rc, const dlock__busy *b);
/* W_JOIN, blocking: joins the channel and waits for its subscription (at
 * most the command timeout); or asynchronously (returns at once; notify, see
 * dlock__waiter). Then dlock__wait_joined with the status. */
int dlock__wait_join(dlock__wait *w);
int dlock__wait_join_async(dlock__wait *w, void (*notify)(void *arg), void *arg);
int dlock__wait_joined(dlock__wait *w, int *rc);
/* W_SLEEP, blocking: sleeps until a wake-up, w->until, a cancellation or the
 * close; returns the event (dlock__waiter_wait's). */
int dlock__wait_sleep(dlock__wait *w);
/* After a sleep (or a poll, or the timer: DLOCK__WAKE_TIMEOUT) ended with ev. */
int dlock__wait_woke(dlock__wait *w, int ev, int *rc);
/* The end, with the call's status: leaves the channel (passing on a wake-up
 * it used when it failed), counts the statistics; 1 with *op when the
 * operation's give-up is due (the driver sends it, best effort). */
int dlock__wait_end(dlock__wait *w, int rc, dlock__op *op);

/* Every message wakes every waiter. */
int dlock__wake_all(const char *msg, size_t len);
/* The locks' wake policy (reentrant.c): "0" (an unlock) wakes one waiter,
 * anything else (a read-write lock's "1", a count) wakes every waiter. */
int dlock__wake_lock(const char *msg, size_t len);

/* Acquire attempts (scripts sent) by the calling thread, for diagnostics: a
 * long wait with many attempts lost races (the lock is not fair); one with
 * few slept through wake-ups. */
extern _Thread_local uint64_t dlock__attempts;
/* Wake-ups by a message that the calling thread's waits used, and those whose
 * next attempt found the object taken again (for a fair lock, where only the
 * head is woken, there should be none). Diagnostics and benchmarks. */
extern _Thread_local uint64_t dlock__wakeups;
extern _Thread_local uint64_t dlock__wakeups_wasted;

/* ------------------------------------------------------------------- lock */

/* The handle's client and channel (for inspection). */
dlock_client *dlock__lock_client(const dlock_lock *l);
const char *dlock__lock_channel(const dlock_lock *l, size_t *len);

/* ------------------------------------------------------------- semaphores */

/* The semaphores' wake policy: a message is a count of permits; it wakes
 * waiters whose needs (their permits asked) fit in it, none when it is 0 or
 * negative, all when it is not a count. */
int dlock__wake_permits(const char *msg, size_t len);

/* The calls on a semaphore's available count, either kind (the same string
 * key, the same channel: semaphore.c): set (idempotent), set if unset, add
 * a delta (waking the waiters the new count can serve), read, drain (plain
 * semaphore only). A permit semaphore passes its leases key: set and read
 * then use its scripts (scripts/permits/), which give expired permits back
 * first. Blocking (via NULL): *v = 1/0 (set), the new count (add), the
 * count (available; *held: the permits held, a permit semaphore's), the
 * permits drained; asynchronously the result's flag or count. */
enum { DLOCK__COUNT_SET, DLOCK__COUNT_TRY_SET, DLOCK__COUNT_ADD, DLOCK__COUNT_AVAILABLE,
       DLOCK__COUNT_DRAIN, DLOCK__COUNT_HELD, DLOCK__COUNT_TOTAL };
int dlock__count_call(const dlock__handle *h, const char *leases, size_t llen, int kind,
                      int64_t arg, const dlock__via *via, int64_t *v, int64_t *held);

/* ------------------------------------------------------------------ reply */

/* Reading script and command answers (reply.c). Each returns DLOCK_OK,
 * DLOCK__BUSY (acquire only), DLOCK_EWRONGTYPE (TYPE only) or DLOCK_EPROTO. */
/* Reservation state in a busy acquire answer (see scripts/lock/acquire.lua). */
enum {
    DLOCK__RESV_NONE = 0,   /* held by another; no reservation for the caller */
    DLOCK__RESV_MINE = 1,   /* held by another; the next turn is the caller's */
    DLOCK__RESV_OTHER = 2,  /* free, but reserved for another waiter */
    DLOCK__RESV_DELAYED = 3 /* free, but in the lock-delay of a holder that lost it */
};
/* Grace of a reservation on a free lock in ms, as the scripts take it. */
#define DLOCK__RESERVE_GRACE_ARG "50"
int dlock__reply_acquire(const redisReply *r, int fenced, int64_t *ttl, uint64_t *token,
                         int *resv);
/* A fair-lock acquire: DLOCK_OK (token when fenced), or DLOCK__BUSY with
 * *sleep (ms) and *why (0 held, 1 free but an earlier waiter goes first, 2 free
 * but in its lock-delay). */
int dlock__reply_fair_acquire(const redisReply *r, int fenced, int64_t *sleep, uint64_t *token,
                              int *why);
/* A read-write lock's acquire: DLOCK_OK (token when fenced), or DLOCK__BUSY
 * with *ttl and *why: 0 held in the other mode, DLOCK__RW_DEADLOCK when the
 * caller holds read holds of the lock it asks to write, DLOCK__RW_DELAYED
 * when free but in its lock-delay for *ttl ms (scripts/rw/write_acquire.lua),
 * DLOCK__RW_INTENT when a writer-first reader finds a writer waiting, whose
 * intent lives *ttl ms more (scripts/rw/read_acquire.lua). */
enum { DLOCK__RW_DEADLOCK = 1, DLOCK__RW_DELAYED = 2, DLOCK__RW_INTENT = 3 };
int dlock__reply_rw_acquire(const redisReply *r, int fenced, int64_t *ttl, uint64_t *token,
                            int *why);
/* *heard = 1 when the last hold went and some client heard the unlock message. */
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
/* {a, b, ...}: 1..max integers into v[0..*n-1] (a double barrier's answers). */
int dlock__reply_ints(const redisReply *r, int64_t *v, size_t max, size_t *n);
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
