/* Losses (cause.h): their report, and the cause of a lost hold
 * (dlock_lost_cause): what Redis can tell. A hold found gone is reported one
 * round trip later, after an INFO on its renewal connection, whose
 * evicted_keys, expired_keys and run_id are compared with the node's
 * counters as sampled before the loss (an INFO after a renewal pass, at most
 * once a second per node, and every explaining INFO). A FLUSHALL is heard
 * through client tracking (an invalidation of every key: revoke.c counts
 * them). Io thread only. */
#include <stdlib.h>
#include <string.h>

#include "io/cause.h"

/* At most one sampling INFO per node in this many ms. */
#define SAMPLE_EVERY_MS 1000

/* Reads INFO's answer into *s; s->have stays 0 when it lacks a counter. */
static void parse(const dlock__wd_losses *ls, const redisReply *r, wd_sample *s)
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
    s->flushes = *ls->flushes;
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

/* A sample asked for: what its answer needs. */
typedef struct sample_ask {
    const dlock__wd_losses *ls;
    wconn *wc;
} sample_ask;

static void on_sample(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    sample_ask *a = ud;
    wconn *wc = a->wc;
    (void)status;
    wc->inflight--;
    if (r && ac == wc->conn) {
        wd_sample s;
        parse(a->ls, r, &s);
        if (s.have)
            wc->sample = s;
    }
    free(a);
}

void dlock__wd_cause_sample(const dlock__wd_losses *ls, wconn *wc)
{
    const int64_t now = dlock__now_ms();
    if (wc->nodes->stopping || now - wc->sample_asked_at < SAMPLE_EVERY_MS ||
        !dlock__aconn_ready(wc->conn))
        return;
    sample_ask *a = malloc(sizeof(*a));
    if (!a)
        return;   /* not sampled: a loss found next is explained against the last one */
    a->ls = ls;
    a->wc = wc;
    if (send_info(wc, on_sample, a) == DLOCK_OK)
        wc->sample_asked_at = now;
    else
        free(a);
}

/* What the counters say of a hold that was gone. */
static dlock_lost_cause decide(const wd_sample *before, const wd_sample *now, int late)
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
    const dlock__wd_losses *ls;
    wconn *wc;
    wd_sample before;
    lost_note *notes;
} explain;

static void on_explain(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    explain *x = ud;
    (void)status;
    x->wc->inflight--;
    wd_sample now;
    parse(x->ls, r, &now);
    if (now.have) {
        for (lost_note *n = x->notes; n; n = n->next)
            if (n->reason == DLOCK_LOST_GONE && n->cause == DLOCK_CAUSE_UNKNOWN)
                n->cause = decide(&x->before, &now, n->late);
        if (ac == x->wc->conn)
            x->wc->sample = now;
    }
    dlock__wd_report(x->ls, x->notes);
    free(x);
}

void dlock__wd_explain(const dlock__wd_losses *ls, wconn *wc, const wd_sample *before,
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
    if (!gone || !before->have || !wc || wc->nodes->stopping || !dlock__aconn_ready(wc->conn)) {
        dlock__wd_report(ls, notes);
        return;
    }
    explain *x = malloc(sizeof(*x));
    if (x) {
        x->ls = ls;
        x->wc = wc;
        x->before = *before;
        x->notes = notes;
        if (send_info(wc, on_explain, x) == DLOCK_OK)
            return;
        free(x);
    }
    dlock__wd_report(ls, notes);
}

void dlock__wd_report(const dlock__wd_losses *ls, lost_note *notes)
{
    const dlock_config *cfg = ls->ctx->cfg;
    while (notes) {
        lost_note *n = notes;
        notes = n->next;
        const char *owner = n->key + n->nlen + 1;
        const dlock__lost_cb *cb = n->cb.fn || n->cb.cfn ? &n->cb : &cfg->lost;
        if (n->reason > 0 && n->reason < DLOCK_STATS_LOST_REASONS)
            dlock__stats_count(ls->ctx->stats, DLOCK__ST_LOST + (int)n->reason, 1);
        dlock_lost_cause cause = n->reason == DLOCK_LOST_GONE ? n->cause
                                 : n->reason == DLOCK_LOST_UNREACHABLE ? DLOCK_CAUSE_UNREACHABLE
                                 : n->reason == DLOCK_LOST_PAUSED      ? DLOCK_CAUSE_PAUSED
                                 : n->reason == DLOCK_LOST_REPLICAS    ? DLOCK_CAUSE_REPLICAS
                                                                       : DLOCK_CAUSE_MAX_HOLD;
        dlock__log(cfg, DLOCK_LOG_WARN, "%s '%s' held by %s lost: %s%s%s", n->what, n->key,
                   owner,
                   n->reason == DLOCK_LOST_GONE       ? "it was gone when renewed or released"
                   : n->reason == DLOCK_LOST_PAUSED   ? "this process was paused past the lease"
                   : n->reason == DLOCK_LOST_MAX_HOLD ? "held as long as its hold limit allows"
                   : n->reason == DLOCK_LOST_REPLICAS
                       ? "its renewal was acknowledged by too few replicas"
                       : "Redis unreachable until the lease ran out",
                   n->reason == DLOCK_LOST_GONE ? ": " : "",
                   n->reason == DLOCK_LOST_GONE ? dlock_lost_cause_str(cause) : "");
        dlock__lost_call(cb, n->key, owner, n->reason, cause);
        free(n);
    }
}
