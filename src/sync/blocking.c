/* The blocking driver: an operation run on the calling thread, its waits
 * through the wait loop (wait.c); and what an attempt's answer comes to,
 * which the asynchronous driver (async.c) shares (docs/internals/operations.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

/* The replicas asked for, for messages: "2", or "the connected"
 * (DLOCK_REPLICAS_ALL). */
static const char *replicas_asked(const dlock_config *cfg, char *buf, size_t size)
{
    if (cfg->ack_all)
        return "the connected";
    snprintf(buf, size, "%d", cfg->ack_replicas);
    return buf;
}

/* dlock_last_replica_acks's answer, kept for compatibility: set by the
 * blocking driver, on the thread of the blocking call; the handle keeps its
 * own (dlock__handle_acks), whichever driver ran the acquisition. */
static _Thread_local int last_acks = -1;

int dlock_last_replica_acks(void) { return last_acks; }

void dlock__handle_acks(const dlock__handle *h, int acks)
{
    /* A handle is never const where it lives: the count is its one mutable
     * record beside the drivers. */
    atomic_store_explicit((atomic_int *)&h->acks, acks, memory_order_relaxed);
}

int dlock__handle_acks_of(const dlock__handle *h)
{
    return h ? atomic_load_explicit(&h->acks, memory_order_relaxed) : -1;
}

/* ------------------------------------------------------------- answers */

int dlock__answer(const dlock__handle *h, const dlock__op_type *t, void *st, int rc,
                  dlock__res *res, int64_t sent_ms, dlock__busy *b, int *back)
{
    *back = 0;
    rc = t->read(st, rc, res, b);
    res->r = NULL;   /* read freed it */
    if (t->acquires)
        dlock__handle_acks(h, rc == DLOCK_OK ? res->acks : -1);
    if (rc != DLOCK_OK)
        return rc;
    if (t->keep && (rc = t->keep(st, sent_ms)) != DLOCK_OK) {
        /* Held but not kept (renewable): given back rather than left to lapse
         * unseen. */
        *back = 1;
        return rc;
    }
    const dlock_config *cfg = &h->c->cfg;
    if (!t->acquires || cfg->ack_replicas <= 0 || res->acks < 0 ||
        res->acks >= cfg->ack_replicas)
        return DLOCK_OK;
    if (cfg->ack_policy == DLOCK_ACK_KEEP) {
        char of[32];
        dlock__log(cfg, DLOCK_LOG_WARN,
                   "%s '%s' acquired; %d of %s replicas acknowledged it within %lld ms (kept)",
                   h->what, h->name, res->acks, replicas_asked(cfg, of, sizeof(of)),
                   (long long)cfg->ack_timeout_ms);
        return DLOCK_OK;
    }
    *back = 1;
    return DLOCK_EREPLICAS;
}

int dlock__given_back(const dlock__handle *h, int why, int acks, int rrc)
{
    if (why != DLOCK_EREPLICAS)
        return why;
    const dlock_config *cfg = &h->c->cfg;
    char of[32];
    return dlock__fail(DLOCK_EREPLICAS,
                       "%s '%s' acquired, but %d of %s replicas acknowledged it within %lld ms: "
                       "%s",
                       h->what, h->name, acks, replicas_asked(cfg, of, sizeof(of)),
                       (long long)cfg->ack_timeout_ms,
                       rrc == DLOCK_OK ? "given back"
                                       : "giving it back failed too (a lease ends it; a "
                                         "plain semaphore's permits stay taken)");
}

/* ------------------------------------------------------------- blocking */

/* Sends op once, best effort (its answer and any failure aside). */
static void best_effort(dlock_client *c, dlock__op *op)
{
    dlock__aside aside;
    dlock__aside_begin(&aside);
    op->flags |= DLOCK__CALL_NO_RETRY;
    dlock__res res;
    if (dlock__op_call(c, op, NULL, &res) == DLOCK_OK)
        freeReplyObject(res.r);
    dlock__aside_end(&aside, DLOCK_OK);
}

/* Gives a success back (dlock__answer's *back): what gave_back said (its
 * failures aside: the call's message is the failure that gave it back). */
static int give_back(const dlock__handle *h, const dlock__op_type *t, void *st)
{
    dlock__op op;
    if (!t->give_back || !t->give_back(st, &op))
        return DLOCK_ENOTOWNER;
    dlock__aside aside;
    dlock__aside_begin(&aside);
    dlock__res res;
    int rc = dlock__op_call(h->c, &op, NULL, &res);
    rc = t->gave_back ? t->gave_back(st, rc, &res) : rc;
    return dlock__aside_end(&aside, rc);
}

/* A composite attempt (or, give_up set, its give-up): its rounds of parts,
 * each run while the calling thread waits, until compose has the outcome. */
static int compose(const dlock__op_type *t, void *st, int64_t waited, dlock__busy *b,
                   int give_up)
{
    dlock__parts k;
    int rc = dlock__parts_init(&k);
    if (rc != DLOCK_OK)
        return rc;
    k.give_up = give_up;
    while ((rc = t->compose(st, waited, &k, b)) == DLOCK__MORE) {
        dlock__parts_run(&k, NULL, NULL);
        if (give_up)
            break;   /* one round, its outcome not read */
        k.round++;
    }
    dlock__parts_destroy(&k);
    return rc;
}

int64_t dlock__request(const dlock__handle *h, const dlock__op_type *t, void *st, int waits,
                       int64_t waited, dlock__op *op)
{
    t->request(st, waited, op);
    if (t->acquires) {
        op->flags |= DLOCK__CALL_WAIT_ACK | DLOCK__CALL_QUARANTINE;
        dlock__handle_acks(h, -1);
    }
    if (waits)
        dlock__attempts++;
    return dlock__now_ms();
}

/* An attempt's request (not a composite's) on the calling thread: 1 with
 * *op to send and *sent, or 0 when a failover quarantine answers first
 * (busy, in *b). */
static int request(const dlock__handle *h, const dlock__op_type *t, void *st, dlock__wait *w,
                   int64_t waited, dlock__busy *b, dlock__op *op, int64_t *sent)
{
    if (dlock__quarantined(h, t, b))
        return 0;
    *sent = dlock__request(h, t, st, w->waits, waited, op);
    if (t->acquires)
        last_acks = -1;
    return 1;
}

/* What the answer (rc, res) to an attempt sent at `sent` comes to. */
static int answer(const dlock__handle *h, const dlock__op_type *t, void *st, int rc,
                  dlock__res *res, int64_t sent, dlock__busy *b)
{
    if (dlock__quarantine_met(h, t, rc, res, b))
        return DLOCK__BUSY;
    int back;
    rc = dlock__answer(h, t, st, rc, res, sent, b, &back);
    if (t->acquires && (rc == DLOCK_OK || back))
        last_acks = res->acks;
    if (back)
        rc = dlock__given_back(h, rc, res->acks, give_back(h, t, st));
    return rc;
}

/* One attempt on the calling thread: request, round trip, answer. */
static int attempt(const dlock__handle *h, const dlock__op_type *t, void *st, dlock__wait *w,
                   dlock__busy *b)
{
    int64_t waited = dlock__wait_waited(w, 0);
    if (t->compose)
        return dlock__quarantined(h, t, b) ? DLOCK__BUSY : compose(t, st, waited, b, 0);
    dlock__op op;
    int64_t sent;
    if (!request(h, t, st, w, waited, b, &op, &sent))
        return DLOCK__BUSY;
    dlock__res res;
    int rc = dlock__op_call(h->c, &op, w->spec.cancel, &res);
    return answer(h, t, st, rc, &res, sent, b);
}

/* The call after its first attempt (rc, *b): its waits and further
 * attempts, its end. */
static int run_on(const dlock__handle *h, const dlock__op_type *t, void *st, dlock__wait *w,
                  int rc, dlock__busy *b, dlock__result *res, dlock__busy *busy)
{
    int busied = rc == DLOCK__BUSY;   /* the last attempt answered busy */
    if (busied && busy)
        *busy = *b;
    int next = dlock__wait_attempted(w, &rc, b);
    while (next != DLOCK__W_DONE) {
        if (next == DLOCK__W_ATTEMPT) {
            dlock__busy nb = {.ttl = -1};
            rc = attempt(h, t, st, w, &nb);
            if ((busied = rc == DLOCK__BUSY) && busy)
                *busy = nb;
            next = dlock__wait_attempted(w, &rc, &nb);
        } else if (next == DLOCK__W_JOIN) {
            rc = dlock__wait_join(w);
            next = dlock__wait_joined(w, &rc);
        } else {
            next = dlock__wait_woke(w, dlock__wait_sleep(w), &rc);
        }
    }
    dlock__op op;
    if (dlock__wait_end(w, rc, &op)) {
        best_effort(h->c, &op);
    } else if (t->compose && rc != DLOCK_OK && w->seen_busy) {
        dlock__aside aside;
        dlock__aside_begin(&aside);
        dlock__busy gb = {.ttl = -1};
        compose(t, st, 0, &gb, rc);   /* best effort */
        dlock__aside_end(&aside, rc);
    }
    if (res) {
        *res = (dlock__result){.count = -1, .busied = busied};
        if (rc == DLOCK_OK && t->result)
            t->result(st, res);
    }
    if (t->done)
        t->done(st, 1);
    return rc;
}

int dlock__run(const dlock__handle *h, const dlock__op_type *t, void *st,
               const dlock__wait_spec *spec, dlock__result *res, dlock__busy *busy)
{
    /* The wait was checked with the caller's other options (dlock__check_opts). */
    if (spec && spec->wait_ms != 0 && dlock__loop_on_io_thread(h->c->loop))
        return dlock__fail(DLOCK_EINVAL, "a wait from a dlock callback would stall the io "
                                         "thread: use a wait of 0 there");
    if (t->setup) {
        int rc = t->setup(st);
        if (rc != DLOCK_OK)
            return rc;
    }
    dlock__wait w;
    dlock__wait_init(&w, h, t, st, spec);
    dlock__busy b = {.ttl = -1};
    int rc = attempt(h, t, st, &w, &b);
    return run_on(h, t, st, &w, rc, &b, res, busy);
}

/* A part of dlock__run_batch: its call's state, its request. */
typedef struct one {
    dlock__wait w;
    dlock__busy b;
    dlock__op op;
    int64_t sent;
    int rc;                  /* DLOCK_OK: its request goes out; else its first attempt's outcome */
} one;

void dlock__run_batch(dlock__node *n, dlock__part *const *p, size_t k,
                      void (*ended)(dlock__part *p, int rc, const dlock__result *res))
{
    one *o = malloc(k * sizeof(*o));
    dlock__op **ops = malloc(k * sizeof(*ops));
    char **msg = malloc(k * sizeof(*msg));
    int *rc = malloc(k * sizeof(*rc));
    dlock__res *res = malloc(k * sizeof(*res));
    dlock__errto prev;
    if (!o || !ops || !msg || !rc || !res) {
        for (size_t i = 0; i < k; i++) {   /* one after another */
            dlock__result r;
            p[i]->msg[0] = '\0';
            prev = dlock__err_into(p[i]->msg, sizeof(p[i]->msg));
            int prc = dlock__run(p[i]->h, p[i]->t, p[i]->st, NULL, &r, &p[i]->b);
            dlock__err_reset(prev);
            ended(p[i], prc, &r);
        }
        goto out;
    }
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        const dlock__op_type *t = p[i]->t;
        p[i]->msg[0] = '\0';
        prev = dlock__err_into(p[i]->msg, sizeof(p[i]->msg));
        o[i].b = (dlock__busy){.ttl = -1};
        o[i].rc = t->setup ? t->setup(p[i]->st) : DLOCK_OK;
        if (o[i].rc != DLOCK_OK) {
            dlock__err_reset(prev);
            ended(p[i], o[i].rc, &(dlock__result){.count = -1});
            continue;
        }
        dlock__wait_init(&o[i].w, p[i]->h, t, p[i]->st, NULL);
        int64_t waited = dlock__wait_waited(&o[i].w, 0);
        o[i].rc = DLOCK__BUSY;
        if (request(p[i]->h, t, p[i]->st, &o[i].w, waited, &o[i].b, &o[i].op, &o[i].sent)) {
            o[i].rc = DLOCK_OK;
            ops[m] = &o[i].op;
            msg[m++] = p[i]->msg;
        }
        dlock__err_reset(prev);
    }
    if (m > 0)
        dlock__op_call_many(p[0]->h->c, n, ops, m, res, rc, msg);
    for (size_t i = 0, j = 0; i < k; i++) {
        const dlock__handle *h = p[i]->h;
        const dlock__op_type *t = p[i]->t;
        int arc = o[i].rc;
        if (arc != DLOCK_OK && arc != DLOCK__BUSY)
            continue;   /* its setup failed: ended above */
        /* Its failures into its record; a failed request's message is
         * there already (dlock__op_call_many wrote msg[j], its buffer). */
        prev = dlock__err_into(p[i]->msg, sizeof(p[i]->msg));
        if (arc == DLOCK_OK) {   /* sent: its answer, as attempt() reads it */
            arc = answer(h, t, p[i]->st, rc[j], &res[j], o[i].sent, &o[i].b);
            j++;
        }
        dlock__result r;
        arc = run_on(h, t, p[i]->st, &o[i].w, arc, &o[i].b, &r, &p[i]->b);
        dlock__err_reset(prev);
        ended(p[i], arc, &r);
    }
out:
    free(o);
    free(ops);
    free(msg);
    free(rc);
    free(res);
}

int dlock__start(const dlock__handle *h, const dlock__op_type *t, void *st, size_t size,
                 const dlock__wait_spec *spec, const dlock__via *via, dlock__result *res)
{
    return via ? dlock__async_run(h, t, st, size, spec, via, 0)
               : dlock__run(h, t, st, spec, res, NULL);
}
