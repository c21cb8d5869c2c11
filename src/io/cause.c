/* The cause of a lost hold (dlock_lost_cause): what Redis can tell. A hold
 * found gone is reported one round trip later, after an INFO on its renewal
 * connection, whose evicted_keys, expired_keys and run_id are compared with
 * the node's counters as sampled before the loss (an INFO after a renewal
 * pass, at most once a second per node, and every explaining INFO). A
 * FLUSHALL is heard through client tracking (an invalidation of every key).
 * Io thread only. */
#include <stdlib.h>
#include <string.h>

#include "io/watchdog_int.h"

/* At most one sampling INFO per node in this many ms. */
#define SAMPLE_EVERY_MS 1000

/* Reads INFO's answer into *s; s->have stays 0 when it lacks a counter. */
static void parse(dlock__watchdog *wd, const redisReply *r, cause_sample *s)
{
    memset(s, 0, sizeof(*s));
    if (!r || r->type != REDIS_REPLY_STRING)   /* RESP3 answers verbatim text as a string */
        return;
    char evicted[24], expired[24];
    if (!dlock__info_field(r->str, "evicted_keys", evicted, sizeof(evicted)) ||
        !dlock__info_field(r->str, "expired_keys", expired, sizeof(expired)) ||
        !dlock__info_field(r->str, "run_id", s->run_id, sizeof(s->run_id)))
        return;
    s->evicted = strtoll(evicted, NULL, 10);
    s->expired = strtoll(expired, NULL, 10);
    s->flushes = wd->flushes;
    s->have = 1;
}

static int send_info(wconn *wc, void (*cb)(dlock__aconn *, redisReply *, int, void *), void *ud)
{
    /* The default sections hold run_id (server) and the counters (stats). */
    const char *av[] = {"INFO"};
    size_t lens[] = {4};
    int rc = dlock__aconn_send(wc->conn, 1, av, lens, 1, cb, ud);
    if (rc == DLOCK_OK)
        wc->inflight++;   /* keeps wc while the answer is due */
    return rc;
}

static void on_sample(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    wconn *wc = ud;
    (void)status;
    wc->inflight--;
    if (!r || ac != wc->conn)
        return;
    cause_sample s;
    parse(wc->wd, r, &s);
    if (s.have)
        wc->sample = s;
}

void dlock__wd_cause_sample(dlock__watchdog *wd, wconn *wc)
{
    const int64_t now = dlock__now_ms();
    if (wd->stopping || now - wc->sample_asked_at < SAMPLE_EVERY_MS ||
        !dlock__aconn_ready(wc->conn))
        return;
    if (send_info(wc, on_sample, wc) == DLOCK_OK)
        wc->sample_asked_at = now;
}

/* What the counters say of a hold that was gone. */
static dlock_lost_cause decide(const cause_sample *before, const cause_sample *now, int late)
{
    if (strcmp(before->run_id, now->run_id) != 0)
        return DLOCK_CAUSE_FAILOVER;
    if (now->evicted > before->evicted)
        return DLOCK_CAUSE_EVICTED;
    if (now->flushes > before->flushes)
        return DLOCK_CAUSE_FLUSHED;
    if (late && now->expired > before->expired)
        return DLOCK_CAUSE_EXPIRED;
    return DLOCK_CAUSE_DELETED;
}

typedef struct explain {
    dlock__watchdog *wd;
    wconn *wc;
    cause_sample before;
    lost_note *notes;
} explain;

static void on_explain(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    explain *x = ud;
    (void)status;
    x->wc->inflight--;
    cause_sample now;
    parse(x->wd, r, &now);
    if (now.have) {
        for (lost_note *n = x->notes; n; n = n->next)
            if (n->reason == DLOCK_LOST_GONE && n->cause == DLOCK_CAUSE_UNKNOWN)
                n->cause = decide(&x->before, &now, n->late);
        if (ac == x->wc->conn)
            x->wc->sample = now;
    }
    dlock__wd_report(x->wd, x->notes);
    free(x);
}

void dlock__wd_explain(dlock__watchdog *wd, wconn *wc, const cause_sample *before,
                       lost_note *notes)
{
    int gone = 0;
    for (lost_note *n = notes; n; n = n->next)
        gone |= n->reason == DLOCK_LOST_GONE;
    /* The batch's node had not answered a sample when the batch was made:
     * the one that came since (sent before the batch, so run before it). */
    if (wc && !before->have)
        before = &wc->sample;
    /* Without a sample from before there is nothing to compare with. */
    if (!gone || !before->have || !wc || wd->stopping || !dlock__aconn_ready(wc->conn)) {
        dlock__wd_report(wd, notes);
        return;
    }
    explain *x = malloc(sizeof(*x));
    if (x) {
        x->wd = wd;
        x->wc = wc;
        x->before = *before;
        x->notes = notes;
        if (send_info(wc, on_explain, x) == DLOCK_OK)
            return;
        free(x);
    }
    dlock__wd_report(wd, notes);
}
