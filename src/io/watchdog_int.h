/* The watchdog's own parts, shared by watchdog.c (the schedule, renewals,
 * losses) and revoke.c (client tracking: revocation heard at once). Io
 * layer only; not installed. */
#ifndef DLOCK_IO_WATCHDOG_INT_H
#define DLOCK_IO_WATCHDOG_INT_H

#include <string.h>
#include <uv.h>

#include "io/io.h"
#include "net/cluster.h"

/* held.awaited */
enum { AW_THREAD = 1, AW_ASYNC = 2 };

/* An owner id, kept once for all its holds (a lock's hold names it twice:
 * as its owner and as its field; a thread's holds share it). Under mu. */
typedef struct wowner {
    dlock__hnode hn;         /* in wd->owners */
    uint32_t refs;           /* holds naming it */
    uint32_t len;
    char id[];               /* NUL-terminated */
} wowner;

/* One hold (100 000 held locks are 100 000 of these: kept small; no other
 * allocation per hold). */
typedef struct held {
    dlock__hnode hn;         /* in wd->map, by identity */
    dlock__hnode tn;         /* in wd->tkeys, by the key its kind tracks (several holds
                                of one key: several nodes) when tracked */
    dlock__list all;         /* in wd->all while in the table */
    dlock__list rlink;       /* in wd->recheck while a recheck is due (else self-linked) */
    int64_t renewed_at;      /* ms, before the request that last set the TTL was sent */
    int64_t limit_at;        /* ms: the hold limit, INT64_MAX when none */
    dlock_lost_fn fn;
    void *ud;
    const dlock__hold_kind *kind;
    wowner *own;             /* the owner id */
    int32_t releasing;       /* releases in progress for this owner */
    int32_t holds;           /* acquisitions seen; each release attempt takes one, and the
                                renewal stops at zero whatever the release answered */
    uint32_t len[DLOCK__HOLD_PARTS];
    uint32_t klen;           /* identity bytes: every part with its NUL */
    uint8_t inflight;        /* in a batch awaiting its reply */
    uint8_t recap;           /* a reentry of a limited hold may have set a TTL past its
                                limit (a write lock adds the lease): renew it now */
    uint8_t dead;            /* out of the table; freed when its batch answers */
    uint8_t awaited;         /* dead, and its release waits for that answer: AW_THREAD (a
                                blocking release, which then frees it) or AW_ASYNC (on
                                wd->settles) */
    uint8_t tracked;         /* tn is in wd->tkeys */
    uint8_t fresh;           /* on wd->recheck as a new hold: registered once it is
                                DLOCK__WD_REGISTER_AGE_MS old (revoke.c), unless its
                                key is reported changed first */
    uint8_t opart;           /* the part equal to the owner id (a lock's field often
                                is: not kept in data), or DLOCK__HOLD_PARTS */
    uint8_t failover;        /* its node is a new primary (a failover) and no renewal sent
                                since has answered: a loss now is cause "failover" */
    char data[];             /* part0 NUL part1 NUL ..., but part opart */
} held;

/* What a node said of the counters that tell a loss's cause (cause.c). */
typedef struct cause_sample {
    int have;                /* a sample was read */
    long long evicted, expired;
    uint64_t flushes;        /* wd->flushes when it was read */
    char run_id[48];
} cause_sample;

/* The renewal connection to one node (io thread only). */
typedef struct wconn {
    dlock__watchdog *wd;
    dlock__node *node;       /* which server (the router's; lives as long as it) */
    dlock__aconn *conn;
    int failing;             /* the last renewal attempt on it failed */
    int loading;             /* SCRIPT LOAD queued on the current connection */
    int inflight;            /* batches sent and not answered */
    int used;                /* a hold needed it this tick */
    int wrote;               /* batches of this pass's current write on it */
    cause_sample sample;     /* the node's latest counters (cause.c) */
    int64_t sample_asked_at; /* ms: when they were last asked for */
} wconn;

typedef struct batch {
    dlock__watchdog *wd;
    wconn *wc;
    int slot;                /* every key of a script shares a slot (cluster) */
    const dlock__hold_kind *kind;
    int64_t lease;           /* the TTL the script sets: the timeout, or less near a limit */
    int64_t sent_at;
    int n;
    int reloaded;            /* resent once after NOSCRIPT */
    int recheck;             /* sent by a recheck pass (counted in wd->rechecks_out) */
    struct ackwait *ack;     /* the WAIT that follows it, or NULL */
    cause_sample before;     /* its node's counters when it was made: a loss it finds is
                                explained against them */
    int ok;                  /* answered (while its WAIT is awaited) */
    unsigned char renewed[DLOCK__RENEW_BATCH];
    held *e[DLOCK__RENEW_BATCH];
} batch;

/* A loss waiting for its callback. It carries copies of what the callback
 * needs, so it never points at an entry that a batch may free meanwhile. */
typedef struct lost_note {
    struct lost_note *next;
    dlock_lost_fn fn;
    void *ud;
    dlock_lost_reason reason;
    dlock_lost_cause cause;  /* DLOCK_LOST_GONE: set by cause.c, else UNKNOWN */
    int late;                /* its lease had run out since its last renewal was sent */
    const char *what;
    uint32_t nlen;
    char key[];              /* name NUL owner NUL */
} lost_note;

struct dlock__watchdog {
    dlock__netctx *ctx;
    dlock__loop *lp;
    dlock__router *router;
    dlock__job flush_job;    /* delivers the losses found by releases */
    dlock__job start_job;    /* sets the timer up on the io thread */
    dlock__job kick_job;     /* a tick now: a limited hold to cut back to its limit */
    dlock__job recheck_job;  /* renew the holds due a recheck (new ones) now */
    pthread_mutex_t mu;
    pthread_cond_t answered; /* a renewal that a release awaits was answered */
    dlock__list settles;     /* under mu (io thread only): awaits of dead holds by
                                asynchronous releases (watchdog.c's `settle_node`) */
    dlock__wd_settle *collect;   /* io thread only: the release collecting now, or NULL */
    dlock__map map;
    dlock__list all;
    dlock__map tkeys;        /* tracked key -> its holds (held.tn) */
    dlock__map owners;       /* owner ids (wowner) */
    dlock__list recheck;     /* holds to renew at once */
    int track_live;          /* under mu: tracking is on for the (single server's) renewal
                                connection */
    int batches_out;         /* under mu: renewal scripts awaiting their answer */
    int reg_armed;           /* under mu: the io thread will register new holds soon */

    struct lost_note *pending;   /* under mu: losses found by releases, for the io thread */

    /* io thread only */
    uv_timer_t timer;
    uv_timer_t reg_timer;    /* the next registering pass: when the oldest new hold
                                not yet registered comes of age */
    int timer_inited;
    wconn **conns;           /* one per node that serves held keys */
    size_t nconns;
    int64_t last_tick;       /* when the last tick ran, or the timer started (ms) */
    int stopping;
    dlock__tracking *track;  /* the revocation listener, NULL when configured off or on a
                                sentinel/cluster deployment (one server only) */
    int64_t track_id;        /* its client id, 0 while it is not listening */
    int track_refused;       /* under mu: Redis refused tracking: renewal-time detection only */
    int rechecks_out;        /* recheck batches awaiting their answer */
    uint64_t flushes;        /* invalidations of every key (FLUSHALL) heard */
};

/* The batches of one pass: every full batch, and the one being filled per
 * (kind, lease, node, slot); `open` finds the latter by hash (a cluster's
 * holds spread over thousands of slots). */
#define DLOCK__WD_OPEN_SLOTS 256
typedef struct tick_batches {
    batch *stack[64];
    batch **v;
    size_t n, cap;
    batch *open_st[DLOCK__WD_OPEN_SLOTS];
    batch **open;
    size_t nopen;            /* size of open (a power of 2) */
    size_t used;
} tick_batches;

static inline void tb_init(tick_batches *tb)
{
    tb->v = tb->stack;
    tb->n = 0;
    tb->cap = DLOCK__ARRAY_LEN(tb->stack);
    memset(tb->open_st, 0, sizeof(tb->open_st));
    tb->open = tb->open_st;
    tb->nopen = DLOCK__WD_OPEN_SLOTS;
    tb->used = 0;
}

/* Part i (NUL-terminated). */
static inline const char *h_part(const held *h, int i)
{
    if (i == h->opart)
        return h->own->id;
    const char *p = h->data;
    for (int k = 0; k < i; k++)
        if (k != h->opart)
            p += h->len[k] + 1;
    return p;
}

/* The WAIT written after one node's batches of a pass: their answers are
 * kept until it answers (replica acknowledgement). */
typedef struct ackwait {
    dlock__watchdog *wd;
    int n;
    batch *b[];
} ackwait;

/* watchdog.c, wdnode.c */
/* A batch answered (ok: with a reply of the right shape, renewed[i] per
 * hold); unacked: too few replicas acknowledged it and the policy gives such
 * holds up. Frees b. */
void dlock__wd_batch_finish(dlock__watchdog *wd, batch *b, int ok, const unsigned char *renewed,
                            int unacked);
/* The batch of a kind, lease, node and slot with room left in tb, or a new
 * one; NULL when out of memory. Caller holds mu. */
batch *dlock__wd_batch_for(dlock__watchdog *wd, tick_batches *tb, const dlock__hold_kind *kind,
                           wconn *wc, int slot, int64_t lease, int64_t now);
/* The renewal connection tracking runs on (one server only: its node's),
 * NULL when there is none (yet) or tracking is off (io thread). */
wconn *dlock__wd_track_conn(dlock__watchdog *wd);
/* Sends a pass's batches, one write per node, and frees tb's tables (io thread). */
void dlock__wd_send_all(dlock__watchdog *wd, tick_batches *tb);
/* One pass of the schedule (io thread). */
void dlock__wd_tick(dlock__watchdog *wd);

/* wdnode.c */
/* The renewal connection to node n, created (not started) when new; NULL
 * when out of memory. */
wconn *dlock__wd_conn_for(dlock__watchdog *wd, dlock__node *n);
/* Where keys move between nodes: closes the connections no hold needed this
 * pass, with nothing in flight. */
void dlock__wd_drop_unused(dlock__watchdog *wd);
/* WAIT after wc's batches among v[0..n) (sent in the same write). */
void dlock__wd_ask_acks(dlock__watchdog *wd, wconn *wc, batch **v, size_t n);

/* revoke.c */
/* The tracked-key map's comparison. */
int dlock__wd_tk_eq(const dlock__hnode *n, const void *key, size_t len);
/* Indexes h under the key its kind tracks / takes it out (and off the
 * recheck list); caller holds mu. */
void dlock__wd_track_link(dlock__watchdog *wd, held *h);
void dlock__wd_track_unlink(dlock__watchdog *wd, held *h);
/* Puts h on the recheck list, due at once (a new hold's registration comes
 * due now too: its key was reported changed); caller holds mu. */
void dlock__wd_mark_recheck(dlock__watchdog *wd, held *h);
/* Renews the holds due a recheck (io thread). */
void dlock__wd_recheck(dlock__watchdog *wd);
/* The recheck pass again after the client's retry delay (a recheck batch
 * failed: not at once against a failing server). Io thread. */
void dlock__wd_recheck_later(dlock__watchdog *wd);
/* New holds to register (the job the watchdog posts). */
void dlock__wd_recheck_job(void *arg);
/* Turns tracking on for the renewal connection when the listener is up;
 * tracking on or off (io thread). */
void dlock__wd_track_enable(dlock__watchdog *wd);
void dlock__wd_track_set_live(dlock__watchdog *wd, int live);
/* EXISTS of the tracked keys of a batch just sent (io thread). */
int dlock__wd_send_track(dlock__watchdog *wd, batch *b);
/* The listener's callbacks (tracking.c). */
void dlock__wd_on_track_id(int64_t id, void *ud);
void dlock__wd_on_invalidate(const redisReply *keys, void *ud);

/* cause.c: the cause of a loss (dlock_lost_cause). */
/* After a pass's batches on wc: asks the node for its counters (INFO), at
 * most once a second; the answer becomes wc->sample. */
void dlock__wd_cause_sample(dlock__watchdog *wd, wconn *wc);
/* Reports the notes; those of holds found gone after one more INFO on wc,
 * their cause found by comparing it with `before`. wc may be NULL. */
void dlock__wd_explain(dlock__watchdog *wd, wconn *wc, const cause_sample *before,
                       lost_note *notes);
/* Calls each note's callback (and logs it) and frees the notes. */
void dlock__wd_report(dlock__watchdog *wd, lost_note *notes);

#endif
