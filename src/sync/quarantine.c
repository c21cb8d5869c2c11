/* The failover quarantine recorded on the server (docs/safety.md, "A
 * lagging replica"). A client with the quarantine on
 * (dlock_config_set_failover_quarantine) that sees a new primary keeps its
 * own acquisitions off that shard (wait.c: dlock__quarantined). The record
 * makes every other dlock client wait too: a string
 * dlock_quarantine:{<tag>} per cluster slot (the tag chosen so that the key
 * falls in that slot, so that a lock's own acquire script can read it,
 * whatever the deployment) holding the replication id of the
 * primary it was written on, the quarantine's length and the end of the one
 * running (include/quarantine.lua). A client with the quarantine on arms the
 * record of each slot it acquires in (once per ARM_EVERY_MS), so that the
 * replicas hold it before any failover; on a promoted replica the id differs,
 * and the first dlock acquisition there starts the quarantine, for
 * everybody, with no extra round trip and no race with the clients that see
 * the switch first. A client with the quarantine on that sees a new primary
 * starts it there at once as well (for every slot the primary serves).
 *
 * Records are written from the io thread through the asynchronous calls'
 * connections (routed by key: each goes to the node that serves its slot).
 * A MOVED can tell of a promotion before the slot map knows the node's
 * slots: the quarantine is then started once the map has them (tried again
 * every RETRY_MS). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "sync/sync.h"

#define QKEY_MAX 24          /* "dlock_quarantine:{" + a tag of 4 at most + "}" + NUL */
#define RETRY_MS 200
#define RETRIES 25           /* 5 s for the map to name the new primary's slots */
#define ARM_LIFE_MS 3600000  /* an armed record lives an hour... */
#define ARM_EVERY_MS 900000  /* ...and is armed again by the next acquisition 15 min on */

static char slot_keys[DLOCK__SLOTS][QKEY_MAX];
static pthread_once_t slot_keys_once = PTHREAD_ONCE_INIT;

/* A key for each slot: the tags are the shortest base-62 numerals, taken in
 * order, each for the first slot its CRC16 falls in (about 160 000 tried). */
static void build_slot_keys(void)
{
    static const char digits[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t left = DLOCK__SLOTS;
    for (uint32_t n = 0; left > 0; n++) {
        char tag[8];
        size_t len = 0;
        for (uint32_t v = n; len == 0 || v > 0; v /= 62)
            tag[len++] = digits[v % 62];
        int s = dlock__crc16(tag, len) & (DLOCK__SLOTS - 1);
        if (slot_keys[s][0])
            continue;
        snprintf(slot_keys[s], QKEY_MAX, "dlock_quarantine:{%.*s}", (int)len, tag);
        left--;
    }
}

const char *dlock__quarantine_slot_key(int slot, size_t *len)
{
    pthread_once(&slot_keys_once, build_slot_keys);
    *len = strlen(slot_keys[slot]);
    return slot_keys[slot];
}

#define slot_key dlock__quarantine_slot_key

/* ------------------------------------------------------------ recording */

typedef struct pending {
    dlock__node *node;       /* a new primary, or a node whose clock jumped: start its
                                quarantine; NULL: arm `slot` */
    int slot;
    int tries;
    int64_t ms;              /* the quarantine, ms; 0: the failover quarantine's */
} pending;

struct dlock__qrec {
    dlock_client *c;
    dlock__job job;
    uv_timer_t retry, rearm;
    int timer_inited, rearm_inited, stopping;
    _Atomic uint64_t armed[DLOCK__SLOTS / 64];   /* slots armed in this period */
    pthread_mutex_t mu;      /* guards in, nin, cap (filled by any thread) */
    pending *in;
    size_t nin, cap;
    pending *later;          /* io thread: nodes whose slots the map did not name yet */
    size_t nlater, caplater;
};

static void push(dlock__qrec *q, pending p)
{
    pthread_mutex_lock(&q->mu);
    if (q->nin == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 4;
        pending *a = realloc(q->in, cap * sizeof(*a));
        if (!a) {
            pthread_mutex_unlock(&q->mu);
            return;   /* this client's own quarantine holds; the record is lost */
        }
        q->in = a;
        q->cap = cap;
    }
    q->in[q->nin++] = p;
    pthread_mutex_unlock(&q->mu);
    dlock__loop_post(q->c->loop, &q->job);
}

void dlock__quarantine_key(const dlock__handle *h, dlock__op *op)
{
    /* In the lock's own slot whatever the deployment: a script's keys all
     * share one slot (a cluster behind one address, a proxy). */
    dlock_client *c = h->c;
    size_t len;
    int slot = dlock__key_slot(h->name, h->nlen);
    const char *k = slot_key(slot, &len);
    dlock__op_key_optional(op, DLOCK__OWN_QUARANTINE, k, len);
    /* With the quarantine on: the slot's record armed, once per period. */
    dlock__qrec *q = c->qrec;
    if (!q || c->cfg.quarantine_mode == DLOCK_QUARANTINE_OFF)
        return;
    uint64_t bit = (uint64_t)1 << (slot % 64);
    if (!(atomic_load_explicit(&q->armed[slot / 64], memory_order_relaxed) & bit) &&
        !(atomic_fetch_or(&q->armed[slot / 64], bit) & bit))
        push(q, (pending){NULL, slot, 0, 0});
}

static void ignore_reply(int status, dlock__res *res, void *ud)
{
    (void)status;
    (void)ud;
    if (res->r)
        freeReplyObject(res->r);
}

/* quarantine/record.lua on the records of slots [from, to): `start` the
 * quarantine there, or arm them. */
static void record(dlock__qrec *q, int from, int to, int64_t ms, int start)
{
    enum { BATCH = 512 };
    const char *av[BATCH + 3];
    size_t lens[BATCH + 3];
    char arg[24], life[24];
    snprintf(arg, sizeof(arg), "%lld", (long long)ms);
    /* Started where it was not armed: it lives the quarantine alone. */
    snprintf(life, sizeof(life), "%lld", (long long)(start ? ms : ARM_LIFE_MS));
    while (from < to) {
        int n = 0;
        for (; from < to && n < BATCH; from++, n++)
            av[n] = slot_key(from, &lens[n]);
        av[n] = arg;
        lens[n] = strlen(arg);
        av[n + 1] = life;
        lens[n + 1] = strlen(life);
        av[n + 2] = start ? "1" : "0";
        lens[n + 2] = 1;
        dlock__req req = {.script = DLOCK__SCRIPT_QUARANTINE_RECORD, .nkeys = n,
                          .argc = n + 3, .argv = av, .lens = lens,
                          .flags = DLOCK__CALL_IDEMPOTENT};
        dlock__acall_send(q->c->acall, &req, ignore_reply, NULL);
    }
}

/* Starts n's quarantine on the records of its slots (on one primary every
 * slot's, a few scripts of many keys; on a cluster one script per slot the
 * node serves, since a script's keys share a slot there); 0 when the map
 * names none of its slots yet. */
static int record_node(dlock__qrec *q, dlock__node *n, int64_t ms)
{
    dlock_client *c = q->c;
    /* As long as this client's own (it began when it saw the switch): its
     * acquisitions are not refused again when it ends. */
    int64_t left = dlock__node_quarantine_left(n);
    if (left > 0 && left < ms)
        ms = left;
    if (!dlock__router_is_cluster(c->router)) {
        record(q, 0, DLOCK__SLOTS, ms, 1);
        return 1;
    }
    int found = 0;
    for (int s = 0; s < DLOCK__SLOTS; s++) {
        size_t len;
        const char *k = slot_key(s, &len);
        if (dlock__router_node(c->router, k, len) == n) {
            record(q, s, s + 1, ms, 1);
            found = 1;
        }
    }
    if (!found)
        dlock__router_stale(c->router);   /* read the map again: the retry finds them */
    dlock__log(&c->cfg, DLOCK_LOG_INFO,
               found ? "%s: quarantine of %lld ms recorded on the server"
                     : "%s: no slot of the new primary known yet: its quarantine is recorded "
                       "once the slot map names them",
               dlock__node_addr(n), (long long)ms);
    return found;
}

static void on_retry(uv_timer_t *t);

/* A new period: each slot's record is armed again by its next acquisition. */
static void on_rearm(uv_timer_t *t)
{
    dlock__qrec *q = t->data;
    for (size_t i = 0; i < DLOCK__SLOTS / 64; i++)
        atomic_store(&q->armed[i], 0);
}

static void on_job(void *arg)
{
    dlock__qrec *q = arg;
    pthread_mutex_lock(&q->mu);
    pending *in = q->in;
    size_t nin = q->nin;
    q->in = NULL;
    q->nin = q->cap = 0;
    pthread_mutex_unlock(&q->mu);
    const int64_t failover_ms = dlock__netctx_quarantine_ms(&q->c->net);
    if (nin && !q->stopping && !q->rearm_inited &&
        uv_timer_init(dlock__loop_uv(q->c->loop), &q->rearm) == 0) {
        q->rearm.data = q;
        q->rearm_inited = 1;
        uv_timer_start(&q->rearm, on_rearm, ARM_EVERY_MS, ARM_EVERY_MS);
    }
    for (size_t i = 0; i < nin && !q->stopping; i++) {
        const int64_t ms = in[i].ms > 0 ? in[i].ms : failover_ms;
        if (ms <= 0)
            continue;
        if (!in[i].node) {
            record(q, in[i].slot, in[i].slot + 1, ms, 0);
            continue;
        }
        if (record_node(q, in[i].node, ms) || in[i].tries >= RETRIES)
            continue;
        if (q->nlater == q->caplater) {
            size_t cap = q->caplater ? 2 * q->caplater : 4;
            pending *a = realloc(q->later, cap * sizeof(*a));
            if (!a)
                continue;
            q->later = a;
            q->caplater = cap;
        }
        q->later[q->nlater] = in[i];
        q->later[q->nlater++].tries++;
    }
    free(in);
    if (!q->nlater || q->stopping)
        return;
    if (!q->timer_inited) {
        if (uv_timer_init(dlock__loop_uv(q->c->loop), &q->retry) != 0)
            return;
        q->retry.data = q;
        q->timer_inited = 1;
    }
    if (!uv_is_active((uv_handle_t *)&q->retry))
        uv_timer_start(&q->retry, on_retry, RETRY_MS, 0);
}

/* The map may name the new primary's slots now: try those again. */
static void on_retry(uv_timer_t *t)
{
    dlock__qrec *q = t->data;
    pthread_mutex_lock(&q->mu);
    for (size_t i = 0; i < q->nlater; i++) {
        if (q->nin == q->cap) {
            size_t cap = q->cap ? 2 * q->cap : 4;
            pending *a = realloc(q->in, cap * sizeof(*a));
            if (!a)
                break;
            q->in = a;
            q->cap = cap;
        }
        q->in[q->nin++] = q->later[i];
    }
    q->nlater = 0;
    pthread_mutex_unlock(&q->mu);
    on_job(q);
}

/* The net layer's hook: any thread, never blocks. */
static void on_promoted(void *ud, dlock__node *n)
{
    dlock__qrec *q = ud;
    if (dlock__netctx_quarantine_ms(&q->c->net) > 0)
        push(q, (pending){n, 0, 0, 0});
}

/* The watchdog's hook: n's clock jumped forward; any thread, never blocks. */
static void on_jumped(void *ud, dlock__node *n, int64_t ms)
{
    push(ud, (pending){n, 0, 0, ms});
}

/* Stop hook (io thread). */
static void on_stop(void *arg)
{
    dlock__qrec *q = arg;
    q->stopping = 1;
    dlock__netctx_on_promoted(&q->c->net, DLOCK__HOOK_QUARANTINE, NULL, NULL);
    dlock__netctx_on_jumped(&q->c->net, NULL, NULL);
    if (q->timer_inited) {
        uv_timer_stop(&q->retry);
        uv_close((uv_handle_t *)&q->retry, NULL);
    }
    if (q->rearm_inited) {
        uv_timer_stop(&q->rearm);
        uv_close((uv_handle_t *)&q->rearm, NULL);
    }
}

int dlock__qrec_new(dlock__qrec **out, dlock_client *c)
{
    dlock__qrec *q = calloc(1, sizeof(*q));
    if (!q)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    q->c = c;
    pthread_mutex_init(&q->mu, NULL);
    dlock__job_init(&q->job, on_job, q);
    int rc = dlock__loop_on_stop(c->loop, on_stop, q);
    if (rc != DLOCK_OK) {
        dlock__qrec_free(q);
        return rc;
    }
    dlock__netctx_on_promoted(&c->net, DLOCK__HOOK_QUARANTINE, on_promoted, q);
    dlock__netctx_on_jumped(&c->net, on_jumped, q);
    *out = q;
    return DLOCK_OK;
}

void dlock__qrec_free(dlock__qrec *q)
{
    if (!q)
        return;
    free(q->in);
    free(q->later);
    pthread_mutex_destroy(&q->mu);
    free(q);
}
