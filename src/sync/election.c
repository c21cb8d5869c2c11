/* Leader election (dlock's own, on Redisson's lock layout).
 *
 * Leading = holding the reentrant lock `name` with the watchdog, taken with a
 * fencing token: the token is the term, so terms only grow (the counter's
 * clock floor keeps that across lost counters) and a leader's term fences its
 * writes like any token. The leader's lease is the watchdog's and is lost
 * like any hold (its lost callback; at once when someone else deletes it).
 * After taking the lock the new leader records itself in
 * dlock_election:{name} (term, owner, who) and PUBLISHes the term on
 * dlock_election__channel:{name} (scripts/election/announce.lua); resigning
 * releases the lock and publishes "0". Observers read the record and the
 * lock together (leader.lua) and sleep on that channel between changes, no
 * longer than the lock's TTL (a dead leader publishes nothing: its lock
 * expires), never polling. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync/sync.h"

static const char WHAT[] = "election";

struct dlock_election {
    dlock__handle h;         /* channel: dlock_election__channel:{name} */
    dlock_lock *lock;
    char *record;            /* dlock_election:{name} */
    size_t rlen;
    char owner[DLOCK_OWNER_MAX + 1];
    pthread_mutex_t mu;
    uint64_t term;           /* under mu: the term this handle leads in, 0 when not */
    dlock__lost_cb lost;     /* under mu: its lost callback (none: the client's) */
};

static int bad_handle(const void *e) { return dlock__check_handle(e, "election"); }

/* The lock's loss ends the term, then the user's callback runs. */
static void on_lost(const char *name, const char *owner, dlock_lost_reason reason,
                    dlock_lost_cause cause, void *ud)
{
    dlock_election *e = ud;
    pthread_mutex_lock(&e->mu);
    e->term = 0;
    dlock__lost_cb cb = e->lost.fn || e->lost.cfn ? e->lost : e->h.c->cfg.lost;
    pthread_mutex_unlock(&e->mu);
    dlock__lost_call(&cb, name, owner, reason, cause);
}

static int get(dlock_client *c, const char *name, const char *owner, dlock_election **out);

int dlock_election_get(dlock_client *c, const char *name, dlock_election **out)
{
    return get(c, name, NULL, out);
}

int dlock_election_get_as(dlock_client *c, const char *name, const char *owner,
                          dlock_election **out)
{
    dlock__clear_error();
    if (!owner)
        return dlock__fail(DLOCK_EINVAL, "owner id is NULL");
    if (strlen(owner) > DLOCK_OWNER_MAX)
        return dlock__fail(DLOCK_ENAMETOOLONG, "owner id longer than %d bytes", DLOCK_OWNER_MAX);
    return get(c, name, owner, out);
}

static int get(dlock_client *c, const char *name, const char *owner, dlock_election **out)
{
    dlock__handle *h;
    int rc = dlock__handle_new(c, name, out, sizeof(dlock_election), WHAT,
                               "dlock_election__channel:", 1, &h);
    if (out)
        *out = NULL;
    if (rc != DLOCK_OK)
        return rc;
    dlock_election *e = (dlock_election *)h;
    pthread_mutex_init(&e->mu, NULL);
    if (!(e->record = dlock__braced("dlock_election:", h->name, h->nlen, &e->rlen))) {
        dlock_election_free(e);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    /* One owner id per handle: campaign and resign may come from any thread. */
    if (owner)
        snprintf(e->owner, sizeof(e->owner), "%s", owner);
    else
        rc = dlock_client_new_owner_id(c, e->owner, sizeof(e->owner));
    if (rc != DLOCK_OK || (rc = dlock_lock_get_as(c, name, e->owner, &e->lock)) != DLOCK_OK) {
        dlock_election_free(e);
        return rc;
    }
    dlock_lock_set_lost_cause_callback(e->lock, on_lost, e);
    *out = e;
    return DLOCK_OK;
}

void dlock_election_free(dlock_election *e)
{
    if (!e)
        return;
    dlock_lock_free(e->lock);
    free(e->record);
    pthread_mutex_destroy(&e->mu);
    dlock__handle_free(&e->h);
}

const char *dlock_election_name(const dlock_election *e) { return e ? e->h.name : ""; }

void dlock_election_set_lost_callback(dlock_election *e, dlock_lost_fn fn, void *ud)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->lost = (dlock__lost_cb){.fn = fn, .ud = ud};
    pthread_mutex_unlock(&e->mu);
}

void dlock_election_set_lost_cause_callback(dlock_election *e, dlock_lost_cause_fn fn, void *ud)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->lost = (dlock__lost_cb){.cfn = fn, .ud = ud};
    pthread_mutex_unlock(&e->mu);
}

int dlock_election_set_max_hold(dlock_election *e, int64_t ms)
{
    int rc = bad_handle(e);
    return rc != DLOCK_OK ? rc : dlock_lock_set_max_hold(e->lock, ms);
}

/* ------------------------------------------------------------ campaign */

static int lead(dlock_election *e, uint64_t t, uint64_t *term);

static int announce(dlock_election *e, uint64_t term)
{
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "?");
    char who[300];
    snprintf(who, sizeof(who), "%s %ld", host, (long)getpid());
    dlock__op op;
    dlock__op_init(&op, DLOCK__SCRIPT_ELECTION_ANNOUNCE);
    dlock__op_key(&op, e->h.name, e->h.nlen);
    dlock__op_key(&op, e->record, e->rlen);
    dlock__op_key(&op, e->h.channel, e->h.clen);
    dlock__op_args(&op, e->owner);
    dlock__op_argi(&op, (int64_t)term);
    dlock__op_args(&op, who);
    dlock__res res;
    int rc = dlock__op_call(e->h.c, &op, NULL, &res);
    if (rc != DLOCK_OK)
        return dlock__refused(&e->h, rc, &res);
    int64_t done = 0;
    if (dlock__reply_integer(res.r, &done) != DLOCK_OK)
        return dlock__proto(&e->h, "announce", res.r);
    freeReplyObject(res.r);
    if (!done)
        return dlock__fail(DLOCK_ENOTOWNER, "election '%s': leadership (term %llu) lost before "
                                            "it was announced", e->h.name,
                           (unsigned long long)term);
    return DLOCK_OK;
}

/* Already leading: *term (may be NULL) = the term, 1; else 0. */
static int leading(dlock_election *e, uint64_t *term)
{
    pthread_mutex_lock(&e->mu);
    uint64_t now = e->term;
    pthread_mutex_unlock(&e->mu);
    if (now && term)
        *term = now;
    return now != 0;
}

int dlock_election_campaign(dlock_election *e, const dlock_wait_opts *opts)
{
    int rc = bad_handle(e);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, DLOCK__TAKES_TOKEN, "an election", &o);
    if (rc != DLOCK_OK)
        return rc;
    uint64_t *term = o.token;
    if (leading(e, term))
        return DLOCK_OK;
    uint64_t t = 0;
    rc = dlock_lock_acquire_opts(e->lock, &(dlock_wait_opts){.wait_ms = o.wait_ms,
                                                             .cancel = o.cancel, .token = &t});
    if (rc != DLOCK_OK)
        return rc;
    return lead(e, t, term);
}

/* The handle holds the lock (one hold) with the fresh token t: its term
 * starts and is announced; on failure the hold is released. */
static int lead(dlock_election *e, uint64_t t, uint64_t *term)
{
    int rc;
    /* Terms are tokens; Lua compares them as decimal strings, C as int64. */
    if (t > (uint64_t)INT64_MAX) {
        dlock_lock_release(e->lock);
        return dlock__fail(DLOCK_EPROTO, "election '%s': term %llu out of range", e->h.name,
                           (unsigned long long)t);
    }
    pthread_mutex_lock(&e->mu);
    e->term = t;
    pthread_mutex_unlock(&e->mu);
    if ((rc = announce(e, t)) != DLOCK_OK) {
        dlock__aside aside;
        dlock__aside_begin(&aside);
        pthread_mutex_lock(&e->mu);
        e->term = 0;
        pthread_mutex_unlock(&e->mu);
        dlock_lock_release(e->lock);
        return dlock__aside_end(&aside, rc);
    }
    if (term)
        *term = t;
    return DLOCK_OK;
}

/* ------------------------------------------------------------ hand-over */

int dlock_election_handover(dlock_election *e, const char *successor)
{
    int rc = bad_handle(e);
    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&e->mu);
    uint64_t was = e->term;
    pthread_mutex_unlock(&e->mu);
    if (!was)
        return dlock__fail(DLOCK_ENOTOWNER, "election '%s': this handle does not lead",
                           e->h.name);
    rc = dlock_lock_transfer(e->lock, successor);
    if (rc == DLOCK_OK || rc == DLOCK_ENOTOWNER) {
        /* Handed over, or found lost: this handle's term is over. */
        pthread_mutex_lock(&e->mu);
        if (e->term == was)
            e->term = 0;
        pthread_mutex_unlock(&e->mu);
    }
    return rc;
}

int dlock_election_adopt(dlock_election *e, uint64_t *term)
{
    int rc = bad_handle(e);
    if (rc != DLOCK_OK)
        return rc;
    if (leading(e, term))
        return DLOCK_OK;
    if ((rc = dlock_lock_adopt(e->lock, DLOCK_WATCHDOG, NULL)) != DLOCK_OK)
        return rc;
    /* A new term: a fenced reentry (the next token, in acquisition order),
     * then that hold back. The lock is held throughout: nobody else can
     * lead in between. */
    uint64_t t = 0;
    rc = dlock_lock_acquire_opts(e->lock, &(dlock_wait_opts){.token = &t});
    if (rc == DLOCK_OK && (rc = dlock_lock_release(e->lock)) != DLOCK_OK)
        t = 0;
    if (rc != DLOCK_OK) {
        dlock__aside aside;
        dlock__aside_begin(&aside);
        dlock_lock_release(e->lock);   /* the hold adopted: not leading, let it go */
        return dlock__aside_end(&aside, rc);
    }
    return lead(e, t, term);
}

/* A resignation's first step: the handle's term ends, *was = the term it
 * had (DLOCK_ENOTOWNER when none). */
static int end_term(dlock_election *e, uint64_t *was)
{
    pthread_mutex_lock(&e->mu);
    *was = e->term;
    e->term = 0;
    pthread_mutex_unlock(&e->mu);
    if (!*was)
        return dlock__fail(DLOCK_ENOTOWNER, "election '%s': this handle does not lead",
                           e->h.name);
    return DLOCK_OK;
}

int dlock_election_resign(dlock_election *e)
{
    uint64_t was;
    int rc = bad_handle(e);
    if (rc != DLOCK_OK)
        return rc;
    if ((rc = end_term(e, &was)) != DLOCK_OK) {
        /* Not leading: a lost term's lock-delay ends here all the same (the
         * release finds nothing held and clears this owner's marker). */
        dlock__aside aside;
        dlock__aside_begin(&aside);
        dlock_lock_release(e->lock);
        return dlock__aside_end(&aside, rc);
    }
    rc = dlock_lock_release(e->lock);
    /* Observers learn at once (a lost release, or one that found the lock
     * gone, still ends this handle's term). */
    dlock__op op;
    dlock__op_cmd(&op, "PUBLISH", e->h.channel, e->h.clen, "0", 1);
    op.flags = DLOCK__CALL_IDEMPOTENT;
    dlock__res res;
    dlock__aside aside;
    dlock__aside_begin(&aside);
    if (dlock__op_call(e->h.c, &op, NULL, &res) == DLOCK_OK)
        freeReplyObject(res.r);
    if (dlock__aside_end(&aside, rc) != DLOCK_OK)
        return rc;
    dlock__clear_error();
    return DLOCK_OK;
}

int dlock_election_set_lock_delay(dlock_election *e, int64_t ms)
{
    int rc = bad_handle(e);
    return rc != DLOCK_OK ? rc : dlock_lock_set_lock_delay(e->lock, ms);
}

uint64_t dlock_election_term(dlock_election *e)
{
    if (!e)
        return 0;
    pthread_mutex_lock(&e->mu);
    uint64_t t = e->term;
    pthread_mutex_unlock(&e->mu);
    return t;
}

/* ------------------------------------------------------------ observe */

typedef struct seen {
    uint64_t term;
    int64_t pttl;
    char owner[DLOCK_OWNER_MAX + 1];
    char who[300];
} seen;

/* The leader's record and the lock together (scripts/election/leader.lua). */
static void leader_op(const dlock_election *e, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_ELECTION_LEADER);
    dlock__op_key(op, e->h.name, e->h.nlen);
    dlock__op_key(op, e->record, e->rlen);
    op->flags = DLOCK__CALL_IDEMPOTENT;
}

static int leader_read(const dlock_election *e, int rc, dlock__res *res, seen *s)
{
    if (rc != DLOCK_OK)
        return dlock__refused(&e->h, rc, res);
    redisReply *r = res->r;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[2]->type != REDIS_REPLY_STRING || r->element[3]->type != REDIS_REPLY_INTEGER)
        return dlock__proto(&e->h, "leader", r);
    char *end;
    s->term = strtoull(r->element[0]->str, &end, 10);
    s->pttl = r->element[3]->integer;
    snprintf(s->owner, sizeof(s->owner), "%.*s", (int)r->element[1]->len, r->element[1]->str);
    snprintf(s->who, sizeof(s->who), "%.*s", (int)r->element[2]->len, r->element[2]->str);
    int bad = *end != '\0';
    freeReplyObject(r);
    if (bad)
        return dlock__fail(DLOCK_EWRONGTYPE, "election '%s': %s holds no term", e->h.name,
                           e->record);
    return DLOCK_OK;
}

static void copy_out(const seen *s, char *who, size_t size)
{
    if (who && size)
        snprintf(who, size, "%s%s%s", s->who, s->term ? " " : "", s->term ? s->owner : "");
}

int dlock_election_leader(dlock_election *e, uint64_t *term, char *who, size_t size)
{
    int rc = bad_handle(e);
    if (rc != DLOCK_OK)
        return rc;
    if (!term)
        return dlock__fail(DLOCK_EINVAL, "term out-parameter is NULL");
    seen s;
    dlock__op op;
    leader_op(e, &op);
    dlock__res res;
    rc = dlock__op_call(e->h.c, &op, NULL, &res);
    if ((rc = leader_read(e, rc, &res, &s)) != DLOCK_OK)
        return rc;
    *term = s.term;
    copy_out(&s, who, size);
    return DLOCK_OK;
}

typedef struct watching {
    dlock_election *e;
    uint64_t known;
    seen s;
    char text[DLOCK_OWNER_MAX + 304];   /* the result's who (asynchronously) */
} watching;

static void watch_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    leader_op(((watching *)st)->e, op);
}

static int watch_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    watching *w = st;
    if ((rc = leader_read(w->e, rc, res, &w->s)) != DLOCK_OK)
        return rc;
    if (w->s.term != w->known)
        return DLOCK_OK;
    /* Unchanged: until a message, or the lock's TTL (a dead leader publishes
     * nothing; its lock expires). */
    b->ttl = w->s.pttl > 0 ? w->s.pttl : -1;
    b->first = 0;
    return DLOCK__BUSY;
}

static int watch_busy(void *st, const dlock__busy *b)
{
    (void)b;
    watching *w = st;
    return dlock__fail(DLOCK_ETIMEDOUT, "election '%s': still term %llu", w->e->h.name,
                       (unsigned long long)w->known);
}

/* Asynchronously: the term is the token, who the text (valid in the
 * callback: the call's state lives until it returns). */
static void watch_result(void *st, dlock__result *res)
{
    watching *w = st;
    copy_out(&w->s, w->text, sizeof(w->text));
    res->token = w->s.term;
    res->text = w->text;
}

static const dlock__op_type watch_type = {
    .request = watch_request, .read = watch_read, .busy_error = watch_busy,
    .result = watch_result};

/* A watch for a term other than `known`, blocking (via NULL: *w holds the
 * answer) or asynchronous. */
static int await_change(dlock_election *e, uint64_t known, const dlock_wait_opts *opts,
                        const dlock__via *via, watching *w)
{
    int rc = bad_handle(e);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, 0, "an election's watch", &o);
    if (rc != DLOCK_OK)
        return rc;
    *w = (watching){.e = e, .known = known};
    dlock__wait_spec spec = {.wake = dlock__wake_all, .need = 1, .wait_ms = o.wait_ms,
                             .cancel = o.cancel};
    return dlock__start(&e->h, &watch_type, w, sizeof(*w), &spec, via, NULL);
}

int dlock_election_await_change(dlock_election *e, uint64_t known, const dlock_wait_opts *opts,
                                uint64_t *term, char *who, size_t size)
{
    watching w;
    int rc = await_change(e, known, opts, NULL, &w);
    if (rc == DLOCK_OK) {
        if (term)
            *term = w.s.term;
        copy_out(&w.s, who, size);
    }
    return rc;
}

/* ------------------------------------------------------------ asynchronously
 *
 * The leader query and the watch are operations of their own (a watch waits
 * on the channel as the blocking one does). A campaign is a chain of
 * asynchronous steps, each started from the previous one's callback (on the
 * io thread): the lock's fenced acquire, then the announcement (given back
 * when it fails); a resignation: the lock's release, then the PUBLISH of
 * "0". The caller's callback runs once, after the last step. */

int dlock_election_leader_async(dlock_election *e, dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(e);
    if (rc != DLOCK_OK)
        return rc;
    watching w = {.e = e, .known = UINT64_MAX};   /* any term is a change: one read */
    return dlock__start(&e->h, &watch_type, &w, sizeof(w), NULL, &(dlock__via){fn, ud, 0}, NULL);
}

int dlock_election_await_change_async(dlock_election *e, uint64_t known,
                                      const dlock_wait_opts *opts, dlock_async_fn fn, void *ud)
{
    watching w;
    return await_change(e, known, opts, &(dlock__via){fn, ud, 0}, &w);
}

/* One request of a chain (the announcement, the PUBLISH), no waiting. */
typedef struct step_op {
    dlock_election *e;
    int kind;                /* STEP_ANNOUNCE, STEP_PUBLISH */
    uint64_t term;
    int64_t done;
    char who[300];
} step_op;

enum { STEP_ANNOUNCE, STEP_PUBLISH };

static void step_request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    step_op *s = st;
    dlock_election *e = s->e;
    if (s->kind == STEP_PUBLISH) {
        dlock__op_cmd(op, "PUBLISH", e->h.channel, e->h.clen, "0", 1);
        op->flags = DLOCK__CALL_IDEMPOTENT;
        return;
    }
    dlock__op_init(op, DLOCK__SCRIPT_ELECTION_ANNOUNCE);
    dlock__op_key(op, e->h.name, e->h.nlen);
    dlock__op_key(op, e->record, e->rlen);
    dlock__op_key(op, e->h.channel, e->h.clen);
    dlock__op_args(op, e->owner);
    dlock__op_argi(op, (int64_t)s->term);
    dlock__op_args(op, s->who);
}

static int step_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    step_op *s = st;
    if (rc != DLOCK_OK)
        return dlock__refused(&s->e->h, rc, res);
    if (s->kind == STEP_PUBLISH) {
        freeReplyObject(res->r);
        return DLOCK_OK;
    }
    if (dlock__reply_integer(res->r, &s->done) != DLOCK_OK)
        return dlock__proto(&s->e->h, "announce", res->r);
    freeReplyObject(res->r);
    if (!s->done)
        return dlock__fail(DLOCK_ENOTOWNER, "election '%s': leadership (term %llu) lost before "
                                            "it was announced", s->e->h.name,
                           (unsigned long long)s->term);
    return DLOCK_OK;
}

static const dlock__op_type step_type = {.request = step_request, .read = step_read};

/* A chain in flight. */
typedef struct chain {
    dlock_election *e;
    dlock_async_fn fn;
    void *ud;
    uint64_t term;
    int rc;                  /* the outcome so far (a resignation's release) */
    char msg[DLOCK__MSG_MAX];
} chain;

/* Ends the chain: the caller's callback, then the chain is freed. */
/* A chain for the caller's callback, unless rc (the call's checks so far)
 * or fn says no: DLOCK_OK with *out, or the error. */
static int chain_new(dlock_election *e, int rc, dlock_async_fn fn, void *ud, chain **out)
{
    if (rc == DLOCK_OK && !fn)
        rc = dlock__fail(DLOCK_EINVAL, "callback is NULL");
    if (rc != DLOCK_OK)
        return rc;
    if (!(*out = calloc(1, sizeof(**out))))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    **out = (chain){.e = e, .fn = fn, .ud = ud};
    return DLOCK_OK;
}

static void chain_end(chain *ch, int rc, const char *msg)
{
    dlock__result res = {.status = rc, .message = rc == DLOCK_OK ? "" : msg, .count = -1,
                         .token = rc == DLOCK_OK ? ch->term : 0};
    dlock_async_fn fn = ch->fn;
    void *ud = ch->ud;
    free(ch);
    fn(&res, ud);
}

static int chain_step(chain *ch, int kind, dlock_async_fn next)
{
    step_op s = {.e = ch->e, .kind = kind, .term = ch->term};
    if (kind == STEP_ANNOUNCE) {
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) != 0)
            snprintf(host, sizeof(host), "?");
        snprintf(s.who, sizeof(s.who), "%s %ld", host, (long)getpid());
    }
    return dlock__start(&ch->e->h, &step_type, &s, sizeof(s), NULL, &(dlock__via){next, ch, 0},
                        NULL);
}

/* A last step whose own outcome does not count (the lock given back after a
 * failed announcement, a resignation published): the chain ends with the
 * status and message kept in it. */
static void on_last_step(const dlock_async_result *res, void *ud)
{
    (void)res;
    chain *ch = ud;
    chain_end(ch, ch->rc, ch->msg);
}

static void on_announced(const dlock_async_result *res, void *ud)
{
    chain *ch = ud;
    int rc = dlock_async_status(res);
    if (rc == DLOCK_OK) {
        chain_end(ch, DLOCK_OK, "");
        return;
    }
    /* Not announced: the term ends and the lock goes back, then the error. */
    ch->rc = rc;
    snprintf(ch->msg, sizeof(ch->msg), "%s", dlock_async_message(res));
    dlock_election *e = ch->e;
    pthread_mutex_lock(&e->mu);
    if (e->term == ch->term)
        e->term = 0;
    pthread_mutex_unlock(&e->mu);
    if (dlock_lock_release_async(e->lock, on_last_step, ch) != DLOCK_OK)
        chain_end(ch, ch->rc, ch->msg);
}

static void on_campaign_locked(const dlock_async_result *res, void *ud)
{
    chain *ch = ud;
    int rc = dlock_async_status(res);
    if (rc != DLOCK_OK) {
        chain_end(ch, rc, dlock_async_message(res));
        return;
    }
    ch->term = dlock_async_token(res);
    dlock_election *e = ch->e;
    if (ch->term > (uint64_t)INT64_MAX) {
        ch->rc = DLOCK_EPROTO;
        snprintf(ch->msg, sizeof(ch->msg), "election '%s': term %llu out of range", e->h.name,
                 (unsigned long long)ch->term);
        if (dlock_lock_release_async(e->lock, on_last_step, ch) != DLOCK_OK)
            chain_end(ch, ch->rc, ch->msg);
        return;
    }
    pthread_mutex_lock(&e->mu);
    e->term = ch->term;
    pthread_mutex_unlock(&e->mu);
    char why[DLOCK__MSG_MAX];   /* a refused step ends as an answered one */
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int src = chain_step(ch, STEP_ANNOUNCE, on_announced);
    dlock__err_reset(prev);
    if (src != DLOCK_OK) {
        dlock__result r = {.status = src, .message = why, .count = -1};
        on_announced(&r, ch);
    }
}

/* Already leading: one read of the record, then the same term. */
static void on_still_leading(const dlock_async_result *res, void *ud)
{
    chain *ch = ud;
    int rc = dlock_async_status(res);
    chain_end(ch, rc, dlock_async_message(res));
}

int dlock_election_campaign_async(dlock_election *e, const dlock_wait_opts *opts,
                                  dlock_async_fn fn, void *ud)
{
    int rc = bad_handle(e);
    dlock_wait_opts o;
    if (rc == DLOCK_OK)
        rc = dlock__check_opts(opts, 0, "an election's asynchronous campaign (the term: "
                                        "dlock_async_token)", &o);
    chain *ch;
    if ((rc = chain_new(e, rc, fn, ud, &ch)) != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&e->mu);
    ch->term = e->term;
    pthread_mutex_unlock(&e->mu);
    if (ch->term) {
        watching w = {.e = e, .known = UINT64_MAX};
        rc = dlock__start(&e->h, &watch_type, &w, sizeof(w), NULL,
                          &(dlock__via){on_still_leading, ch, 0}, NULL);
    } else {
        rc = dlock_lock_acquire_async(e->lock, &(dlock_wait_opts){.wait_ms = o.wait_ms,
                                                                  .cancel = o.cancel,
                                                                  .token = &ch->term},
                                      on_campaign_locked, ch);
    }
    if (rc != DLOCK_OK)
        free(ch);
    return rc;
}

static void on_resigned(const dlock_async_result *res, void *ud)
{
    chain *ch = ud;
    ch->rc = dlock_async_status(res);
    snprintf(ch->msg, sizeof(ch->msg), "%s", dlock_async_message(res));
    /* Observers learn at once (a lost release, or one that found the lock
     * gone, still ends this handle's term). */
    if (chain_step(ch, STEP_PUBLISH, on_last_step) != DLOCK_OK)
        chain_end(ch, ch->rc, ch->msg);
}

int dlock_election_resign_async(dlock_election *e, dlock_async_fn fn, void *ud)
{
    chain *ch;
    int rc = chain_new(e, bad_handle(e), fn, ud, &ch);
    if (rc != DLOCK_OK)
        return rc;
    uint64_t was;
    if ((rc = end_term(e, &was)) != DLOCK_OK) {
        free(ch);
        return rc;
    }
    ch->term = was;
    if ((rc = dlock_lock_release_async(e->lock, on_resigned, ch)) != DLOCK_OK) {
        pthread_mutex_lock(&e->mu);
        if (!e->term)
            e->term = was;
        pthread_mutex_unlock(&e->mu);
        free(ch);
    }
    return rc;
}
