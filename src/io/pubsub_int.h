/* What the waiter table (waiters.c) and the subscription connections
 * (pubsub.c) share: the channels, the pub/sub connections, the pubsub
 * itself. Not installed. */
#ifndef DLOCK_IO_PUBSUB_INT_H
#define DLOCK_IO_PUBSUB_INT_H

#include "io/io.h"

enum { CH_NONE, CH_SUBSCRIBING, CH_SUBSCRIBED, CH_UNSUBSCRIBING };


/* The pub/sub connection to one node. One in all on a single server (and a
 * cluster without sharded pub/sub: a PUBLISH reaches every node); one per
 * node serving a waited-on channel's slot with sharded pub/sub. Created on
 * the io thread, freed with the pubsub; the fields marked mu are read by user
 * threads joining a channel. */
typedef struct dlock__psconn {
    dlock__pubsub *ps;
    dlock__node *node;
    dlock__aconn *ac;
    uint64_t barriers_sent;  /* under mu: barrier PINGs written */
    uint64_t barriers_acked; /* under mu: the highest one answered */
    int barrier_wanted;      /* under mu: a settling waiter joined since the last one */
    /* io thread: this sync's commands */
    const char **sub, **uns;
    size_t *sl, *ul;
    int ns, nu, cap;
#define DLOCK__RUN_ID_MAX 48
    char run_id[DLOCK__RUN_ID_MAX];   /* io thread: its server's (one address; "" unknown) */
} dlock__psconn;

struct dlock__channel {
    dlock__hnode hn;
    dlock__list waiters;
    dlock__list dirty_link;
    int dirty;
    int state;
    int nwaiters;
    int nfirst;              /* waiters with w->first set */
    int resync;
    int sub_failed;          /* Redis refused the SUBSCRIBE: waiters poll instead */
    int64_t msg_ms;          /* when its last message came (the key watch's test) */
    dlock__psconn *pc;              /* where it is (being) subscribed; NULL in CH_NONE */
    dlock__wake_policy wake;
    size_t len;
    char name[];
};

typedef struct dlock__keywatch dlock__keywatch;

struct dlock__pubsub {
    dlock__netctx *ctx;
    dlock__loop *lp;
    dlock__router *router;
    dlock__job sync_job;     /* sync_channels on the io thread */

    pthread_mutex_t mu;
    dlock__map channels;
    dlock__list dirty;
    dlock__list quiet;       /* under mu: waiters on no channel (dlock__waiter_join with
                                channel NULL): only a close or a cancellation wakes them */
    int closed;              /* under mu: waits return DLOCK_ECLOSED */
    dlock__keywatch *kw;     /* the keys sleeping waiters watch (keywatch.c) */
    uint64_t keywatch_wakes; /* under mu: wake-ups it made */

    int sharded;             /* SSUBSCRIBE on the channel's slot's node */
    int dynamic;             /* channels may move between nodes (sentinel, cluster) */
    uint64_t gen;            /* io thread: the router generation last looked at */

    /* io thread only (conns is read under mu too: it only grows, under mu) */
    int stopping;
    uv_timer_t retry;        /* channels left unsubscribed try again */
    int retry_inited;
    dlock__psconn **conns;
    size_t nconns;

    /* One address (not dynamic): while channels are subscribed, the address
     * is asked ROLE and INFO server every 10 s once the subscriptions have
     * not changed for 10 s (pubsub.c, WATCH_MS; through the asynchronous
     * calls' connection); a replica there, or a primary other than the
     * subscriptions' server, retires the address's node (single.c) and the
     * channels move to new connections. io thread only. */
    dlock__acall *acall;     /* NULL: no watch */
    uv_timer_t watch;        /* ticks every WATCH_TICK_MS */
    int watch_inited;
    int64_t subs_changed_ms; /* a SUBSCRIBE/UNSUBSCRIBE last went out */
    int64_t watch_asked_ms;  /* the watch last asked */
    int role_inflight;       /* a watch's requests are out */
    int role_off;            /* the server refused ROLE: not asked again */
    int run_id_moves;        /* moves for another run_id in a row */
    int run_id_off;          /* run_ids differ even after moves: ROLE alone */
};

/* waiters.c, for the io thread's side. Callers hold ps->mu (but for the
 * map's key test and dlock__ps_deliver). */
int dlock__ps_channel_eq(const dlock__hnode *n, const void *key, size_t len);
dlock__channel *dlock__ps_find(dlock__pubsub *ps, const char *name, size_t len);
void dlock__ps_free_channel(dlock__pubsub *ps, dlock__channel *ch);
/* Marks ch for the io thread's next sync. */
void dlock__ps_mark(dlock__pubsub *ps, dlock__channel *ch);
/* Tells every waiter of ch to look; set_woken: as a message would. */
void dlock__ps_wake_all(dlock__channel *ch, int set_woken);
/* A message for channel `chr` (the io thread; takes ps->mu itself): the
 * channel's wake policy decides whom it wakes. */
void dlock__ps_deliver(dlock__pubsub *ps, const char *chr, size_t clen, const redisReply *msg);

/* keywatch.c: created with the pubsub; its requests and timers run on the
 * io thread. moved: the router's topology changed (io thread). */
int dlock__keywatch_new(dlock__keywatch **out, dlock__pubsub *ps);
void dlock__keywatch_moved(dlock__keywatch *kw);
void dlock__keywatch_stop(dlock__keywatch *kw);
void dlock__keywatch_free(dlock__keywatch *kw);

#endif
