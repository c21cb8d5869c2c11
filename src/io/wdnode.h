/* The watchdog's per-node batches (wdnode.c): a renewal connection per node
 * that serves held keys, the renewal scripts of a pass keyed by (kind,
 * lease, node, slot), sent one write per node and answered, and the WAIT
 * that follows a node's batches when replicas must acknowledge. It knows
 * the hold record (wdhold.h) and nothing above it: what a batch's answer
 * means for its holds, a connection coming up or going down, a node's write
 * of a pass, reach the schedule through the hooks it registered. Io thread
 * only, but for batches_out. Not installed. */
#ifndef DLOCK_IO_WDNODE_H
#define DLOCK_IO_WDNODE_H

#include <uv.h>

#include "io/wdhold.h"

/* What a node said of the counters that tell a loss's cause: read and
 * compared by cause.c, kept here per node and per batch (as of when it was
 * made) as data. */
typedef struct wd_sample {
    int have;                /* a sample was read */
    long long evicted, expired;
    uint64_t flushes;        /* invalidations of every key heard when it was read */
    char run_id[48];
} wd_sample;

/* One TIME asked of a node (clock.c): the server's answer and when, by
 * this process's monotonic clock, it was sent and answered: the server read
 * its clock somewhere between the two. */
typedef struct wd_clock {
    int have;
    int64_t server_us;       /* TIME's answer, µs */
    int64_t sent_us, got_us; /* monotonic µs */
} wd_clock;

typedef struct dlock__wd_nodes dlock__wd_nodes;

/* The renewal connection to one node. */
typedef struct wconn {
    dlock__wd_nodes *nodes;
    dlock__node *node;       /* which server (the router's; lives as long as it) */
    dlock__aconn *conn;
    int failing;             /* the last renewal attempt on it failed */
    int loading;             /* SCRIPT LOAD queued on the current connection */
    int inflight;            /* batches (and other answers a caller counts) due */
    int used;                /* a hold needed it this pass */
    int wrote;               /* batches of this pass's current write on it */
    wd_sample sample;        /* the node's latest counters (cause.c) */
    int64_t sample_asked_at; /* ms: when they were last asked for (cause.c) */
    wd_clock clock;          /* the node's latest TIME on this connection (clock.c) */
    int clock_asked;         /* a TIME is due on it */
} wconn;

typedef struct batch {
    wconn *wc;
    int slot;                /* every key of a script shares a slot (cluster) */
    const dlock__hold_kind *kind;
    int64_t lease;           /* the TTL the script sets: the timeout, or less near a limit */
    int64_t sent_at;
    int n;
    int reloaded;            /* resent once after NOSCRIPT */
    int track;               /* the tracking form: the script reads its keys after writing,
                                and EXISTS of the tracked keys follows */
    int recheck;             /* sent by a recheck pass (revoke.c counts them) */
    struct ackwait *ack;     /* the WAIT that follows it, or NULL */
    wd_sample before;        /* its node's counters when it was made: a loss it finds is
                                explained against them */
    int ok;                  /* answered (while its WAIT is awaited) */
    unsigned char renewed[DLOCK__RENEW_BATCH];
    held *e[DLOCK__RENEW_BATCH];
} batch;

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
    int track;               /* its batches of a tracked kind take the tracking form */
} tick_batches;

/* An empty pass; track: tracking is on (its batches take the tracking form). */
void dlock__wd_tb_init(tick_batches *tb, int track);

/* What the schedule hears (watchdog.c registers them; ud its own). */
typedef struct dlock__wd_node_hooks {
    /* A batch answered. ok: with a reply of the right shape, renewed[i] per
     * hold; unacked: too few replicas acknowledged it and the policy gives
     * such holds up. b is freed when it returns. */
    void (*answered)(void *ud, batch *b, int ok, const unsigned char *renewed, int unacked);
    /* A renewal script failed (not a NOSCRIPT resend): the schedule comes
     * again after the retry delay. */
    void (*failed)(void *ud);
    /* wc's connection is up (a new one), or went down. */
    void (*up)(void *ud, wconn *wc);
    void (*down)(void *ud, wconn *wc);
    /* wc wrote batches of a pass; its write is still open, so a command
     * sent now goes with them. */
    void (*wrote)(void *ud, wconn *wc);
    void *ud;
} dlock__wd_node_hooks;

struct dlock__wd_nodes {
    dlock__netctx *ctx;
    dlock__loop *lp;
    dlock__router *router;
    pthread_mutex_t *mu;     /* the watchdog's */
    dlock__wd_node_hooks hooks;
    wconn **conns;           /* one per node that serves held keys */
    size_t nconns;
    int batches_out;         /* under *mu: renewal scripts awaiting their answer */
    int stopping;            /* the io thread is stopping: nothing more is sent */
};

void dlock__wd_nodes_init(dlock__wd_nodes *ns, dlock__netctx *ctx, dlock__loop *lp,
                          dlock__router *router, pthread_mutex_t *mu,
                          const dlock__wd_node_hooks *hooks);
/* Stop: every connection closes (their batches fail: answered, not ok). */
void dlock__wd_nodes_close(dlock__wd_nodes *ns);
/* The renewal connection to node n, created (not started) when new; NULL
 * when out of memory. */
wconn *dlock__wd_conn_for(dlock__wd_nodes *ns, dlock__node *n);
/* Where keys move between nodes: closes the connections no hold needed this
 * pass, with nothing in flight. */
void dlock__wd_drop_unused(dlock__wd_nodes *ns);
/* The batch of a kind, lease, node and slot with room left in tb, or a new
 * one; NULL when out of memory. Caller holds mu. */
batch *dlock__wd_batch_for(tick_batches *tb, const dlock__hold_kind *kind, wconn *wc, int slot,
                           int64_t lease, int64_t now);
/* Sends a pass's batches, one write per node (and each node's WAIT), and
 * frees tb's tables. */
void dlock__wd_send_all(dlock__wd_nodes *ns, tick_batches *tb);

#endif
