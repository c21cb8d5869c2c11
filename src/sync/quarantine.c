/* The failover quarantine recorded on the server (docs/safety.md, "A
 * lagging replica"). A client with the quarantine on
 * (dlock_config_set_failover_quarantine) that sees a new primary keeps its
 * own acquisitions off that shard (wait.c: dlock__quarantined), and records
 * the quarantine on the new primary for everybody else: a string
 * dlock_quarantine:{<tag>} per slot the primary took over on a cluster (the
 * tag chosen so that the key falls in that slot, so that a lock's own
 * acquire script can read it), dlock_quarantine:{*} on one primary, each
 * living as long as the quarantine (scripts/quarantine/record.lua). Every
 * dlock acquisition passes its slot's record to its script, which refuses
 * while it lives (include/quarantine.lua): no extra round trip, and clients
 * without the setting, or started after the switch, honour it too.
 *
 * The records are written from the io thread through the asynchronous
 * calls' connections (routed by key: each goes to the node that serves its
 * slot), for every node the net layer says was promoted. A MOVED can tell
 * of a promotion before the slot map knows the node's slots: the record is
 * then written once the map has them (tried again every RETRY_MS). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "sync/sync.h"

#define QKEY_MAX 24          /* "dlock_quarantine:{" + a tag of 4 at most + "}" + NUL */
#define RETRY_MS 200
#define RETRIES 25           /* 5 s for the map to name the new primary's slots */

static const char one_key[] = "dlock_quarantine:{*}";
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

static const char *slot_key(int slot, size_t *len)
{
    pthread_once(&slot_keys_once, build_slot_keys);
    *len = strlen(slot_keys[slot]);
    return slot_keys[slot];
}

void dlock__quarantine_key(const dlock__handle *h, dlock__op *op)
{
    size_t len = sizeof(one_key) - 1;
    const char *k = one_key;
    if (dlock__router_is_cluster(h->c->router))
        k = slot_key(dlock__key_slot(h->name, h->nlen), &len);
    dlock__op_key_optional(op, DLOCK__OWN_QUARANTINE, k, len);
}

/* ------------------------------------------------------------ recording */

typedef struct pending {
    dlock__node *node;
    int tries;
} pending;

struct dlock__qrec {
    dlock_client *c;
    dlock__job job;
    uv_timer_t retry;
    int timer_inited, stopping;
    pthread_mutex_t mu;      /* guards in, nin, cap (filled by any thread) */
    pending *in;
    size_t nin, cap;
    pending *later;          /* io thread: nodes whose slots the map did not name yet */
    size_t nlater, caplater;
};

static void ignore_reply(int status, dlock__res *res, void *ud)
{
    (void)status;
    (void)ud;
    if (res->r)
        freeReplyObject(res->r);
}

static void record(dlock__qrec *q, const char *key, size_t len, const char *ms)
{
    const char *av[] = {key, ms};
    size_t lens[] = {len, strlen(ms)};
    dlock__req req = {.script = DLOCK__SCRIPT_QUARANTINE_RECORD, .nkeys = 1, .argc = 2,
                      .argv = av, .lens = lens, .flags = DLOCK__CALL_IDEMPOTENT};
    dlock__acall_send(q->c->acall, &req, ignore_reply, NULL);
}

/* Writes n's records; 0 when the map names none of its slots yet. */
static int record_node(dlock__qrec *q, dlock__node *n, int64_t ms)
{
    dlock_client *c = q->c;
    char arg[24];
    snprintf(arg, sizeof(arg), "%lld", (long long)ms);
    if (!dlock__router_is_cluster(c->router)) {
        record(q, one_key, sizeof(one_key) - 1, arg);
        return 1;
    }
    int found = 0;
    for (int s = 0; s < DLOCK__SLOTS; s++) {
        size_t len;
        const char *k = slot_key(s, &len);
        if (dlock__router_node(c->router, k, len) == n) {
            record(q, k, len, arg);
            found = 1;
        }
    }
    if (!found)
        dlock__router_stale(c->router);   /* read the map again: the retry finds them */
    dlock__log(&c->cfg, DLOCK_LOG_INFO,
               found ? "%s: failover quarantine of %lld ms recorded on the server"
                     : "%s: no slot of the new primary known yet: its quarantine is recorded "
                       "once the slot map names them",
               dlock__node_addr(n), (long long)ms);
    return found;
}

static void on_retry(uv_timer_t *t);

static void on_job(void *arg)
{
    dlock__qrec *q = arg;
    pthread_mutex_lock(&q->mu);
    pending *in = q->in;
    size_t nin = q->nin;
    q->in = NULL;
    q->nin = q->cap = 0;
    pthread_mutex_unlock(&q->mu);
    int64_t ms = dlock__netctx_quarantine_ms(&q->c->net);
    for (size_t i = 0; i < nin && !q->stopping && ms > 0; i++) {
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
    if (dlock__netctx_quarantine_ms(&q->c->net) <= 0)
        return;
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
    q->in[q->nin++] = (pending){n, 0};
    pthread_mutex_unlock(&q->mu);
    dlock__loop_post(q->c->loop, &q->job);
}

/* Stop hook (io thread). */
static void on_stop(void *arg)
{
    dlock__qrec *q = arg;
    q->stopping = 1;
    dlock__netctx_on_promoted(&q->c->net, DLOCK__HOOK_QUARANTINE, NULL, NULL);
    if (q->timer_inited) {
        uv_timer_stop(&q->retry);
        uv_close((uv_handle_t *)&q->retry, NULL);
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
