/* The double barrier (dlock's own: Curator's DistributedDoubleBarrier, the
 * etcd recipe; Redisson has none): N parties enter and go on together once
 * the N-th has entered, then leave and go on together once the last has
 * left (scripts/barrier/, docs/wire-format.md).
 *
 * A round is a hash dlock_barrier:{name} (parties, round id, open) and its
 * members, dlock_barrier:{name}:members, each scored by the server time its
 * lease ends. A member is a watchdog hold from the first answer that counts
 * it until its leave: renewed in the client's batches (barrier/renew.lua)
 * while the process lives, dropped by the next script once its lease has
 * run out. Every script drops the members whose lease ran out first, so a
 * dead party is gone for the others as soon as anybody looks after its
 * lease; a round left with nobody ends (its keys go, "0" is published).
 *
 * Both waits are the shared wait loop's, on the barrier's channel: an
 * entrant sleeps until a message ("1" opens the round, "0" ends one), a
 * leaver until a message or the first remaining member's lease end (a dead
 * member publishes nothing). Both watch the state key, so a round whose keys
 * vanish (a restart without persistence, a DEL) wakes them at once.
 *
 * The handle is one party; its phase (out, entering, in, leaving) and the
 * round it entered are kept under its mutex, so its enter and leave cannot
 * overlap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

static const char WHAT[] = "barrier";

/* A member's renewal: KEYS = (state, members), ARGV = its id
 * (scripts/barrier/renew.lua). The lost callback gets the state key's name
 * and the member id. Not tracked: the members key changes with every
 * member's renewal. */
static const dlock__hold_kind member_hold = {"barrier member", DLOCK__SCRIPT_BARRIER_RENEW, 2, 1,
                                             -1};

struct dlock_barrier {
    dlock__handle h;         /* channel: dlock_barrier__channel:{name} */
    char *state;             /* dlock_barrier:{name} */
    size_t slen;
    char *members;           /* dlock_barrier:{name}:members */
    size_t mlen;
    char member[DLOCK_OWNER_MAX + 1];
    size_t melen;
    int64_t parties;
    pthread_mutex_t mu;      /* guards phase, round */
    int phase;               /* dlock_barrier_phase */
    int64_t round;           /* the round entered (in, leaving), or the last one; 0: none */
};

static int bad_handle(const void *b) { return dlock__check_handle(b, "barrier"); }

static int get(dlock_client *c, const char *name, int64_t parties, const char *member,
               dlock_barrier **out)
{
    dlock__handle *h;
    if (out)
        *out = NULL;
    size_t mlen = 0;
    int rc = DLOCK_OK;
    if (parties < 1 || parties > DLOCK_BARRIER_PARTIES_MAX) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "parties %lld: a barrier is for 1..%d parties",
                           (long long)parties, DLOCK_BARRIER_PARTIES_MAX);
    }
    if (member && (dlock__clear_error(), rc = dlock__check_owner(member, &mlen)) != DLOCK_OK)
        return rc;
    rc = dlock__handle_new(c, name, out, sizeof(dlock_barrier), WHAT, "dlock_barrier__channel:", 1,
                           &h);
    if (rc != DLOCK_OK)
        return rc;
    dlock_barrier *b = (dlock_barrier *)h;
    pthread_mutex_init(&b->mu, NULL);
    b->parties = parties;
    b->state = dlock__braced("dlock_barrier:", h->name, h->nlen, &b->slen);
    b->members = b->state ? malloc(b->slen + sizeof(":members")) : NULL;
    if (!b->members) {
        dlock_barrier_free(b);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    b->mlen = (size_t)sprintf(b->members, "%s:members", b->state);
    /* One member id per handle: enter and leave may come from any thread. */
    if (member)
        memcpy(b->member, member, mlen + 1);
    else if ((rc = dlock_client_new_owner_id(c, b->member, sizeof(b->member))) != DLOCK_OK) {
        dlock_barrier_free(b);
        return rc;
    }
    b->melen = strlen(b->member);
    *out = b;
    return DLOCK_OK;
}

int dlock_barrier_get(dlock_client *c, const char *name, int64_t parties, dlock_barrier **out)
{
    return get(c, name, parties, NULL, out);
}

int dlock_barrier_get_as(dlock_client *c, const char *name, int64_t parties, const char *member,
                         dlock_barrier **out)
{
    if (!member) {
        if (out)
            *out = NULL;
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "member id is NULL");
    }
    return get(c, name, parties, member, out);
}

static void hold_of(const dlock_barrier *b, dlock__hold_id *id)
{
    memset(id, 0, sizeof(*id));
    id->kind = &member_hold;
    id->part[0] = b->state;
    id->len[0] = b->slen;
    id->part[1] = b->members;
    id->len[1] = b->mlen;
    id->part[2] = b->member;
    id->len[2] = b->melen;
    id->owner = b->member;
    id->olen = b->melen;
}

/* The watchdog renews this member no more, and reports no loss: its lease
 * ends it (a freed handle, an enter that failed). */
static void unwatch(const dlock_barrier *b, int begun)
{
    dlock__hold_id id;
    hold_of(b, &id);
    if (!begun)
        dlock__watchdog_release_begin(b->h.c->wd, &id);
    dlock__watchdog_release_end(b->h.c->wd, &id, DLOCK__RELEASE_KEPT);
}

void dlock_barrier_free(dlock_barrier *b)
{
    if (!b)
        return;
    if (b->members && (b->phase == DLOCK_BARRIER_IN || b->phase == DLOCK_BARRIER_LEAVING))
        unwatch(b, 0);
    free(b->state);
    free(b->members);
    pthread_mutex_destroy(&b->mu);
    dlock__handle_free(&b->h);
}

const char *dlock_barrier_name(const dlock_barrier *b) { return b ? b->h.name : ""; }

const char *dlock_barrier_member(const dlock_barrier *b) { return b ? b->member : ""; }

int64_t dlock_barrier_parties(const dlock_barrier *b) { return b ? b->parties : 0; }

int dlock_barrier_phase(dlock_barrier *b)
{
    if (!b)
        return DLOCK_BARRIER_OUT;
    pthread_mutex_lock(&b->mu);
    int p = b->phase;
    pthread_mutex_unlock(&b->mu);
    return p;
}

uint64_t dlock_barrier_round(dlock_barrier *b)
{
    if (!b)
        return 0;
    pthread_mutex_lock(&b->mu);
    int64_t r = b->round;
    pthread_mutex_unlock(&b->mu);
    return (uint64_t)r;
}

/* ---------------------------------------------------------------- calls */

enum { BQ_ENTER, BQ_LEAVE, BQ_STATUS };

/* One call's state: an enter, a leave or a status read. */
typedef struct bcall {
    dlock_barrier *b;
    int kind;
    int64_t round;           /* enter: the round joined (0: none yet); leave: the one left */
    int64_t count;           /* members now (the last answer) */
    int64_t parties;         /* status: the round's N; enter: another round's N (refused) */
    int open;                /* status */
    int64_t sent_ms;         /* the last request's, for the watchdog */
    unsigned char watched;   /* enter: the member is renewed by the watchdog */
    unsigned char entered;   /* enter: in an open round */
    unsigned char begun;     /* the watchdog was told of the member's end */
    unsigned char left;      /* leave: the member went (or was gone already) */
    unsigned char dropped;   /* no longer a member: its lease ran out */
} bcall;

static void keys(const dlock_barrier *b, dlock__op *op, int script, int channel)
{
    dlock__op_init(op, script);
    dlock__op_key(op, b->state, b->slen);
    dlock__op_key(op, b->members, b->mlen);
    if (channel)
        dlock__op_key(op, b->h.channel, b->h.clen);
}

/* The member goes (leave.lua with 1): a leave's first try, an entrant's
 * withdrawal. */
static void leave_request(const bcall *q, int go, dlock__op *op)
{
    keys(q->b, op, DLOCK__SCRIPT_BARRIER_LEAVE, 1);
    dlock__op_arg(op, q->b->member, q->b->melen);
    dlock__op_argi(op, q->round);
    dlock__op_args(op, go ? "1" : "0");
}

static void request(void *st, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    bcall *q = st;
    const dlock_barrier *b = q->b;
    q->sent_ms = dlock__now_ms();
    if (q->kind == BQ_STATUS) {
        keys(b, op, DLOCK__SCRIPT_BARRIER_STATUS, 0);
        op->flags = DLOCK__CALL_IDEMPOTENT;
    } else if (q->kind == BQ_ENTER) {
        /* Sent again after a lost answer: the same member joining the same
         * round twice is one member. */
        keys(b, op, DLOCK__SCRIPT_BARRIER_ENTER, 1);
        dlock__op_arg(op, b->member, b->melen);
        dlock__op_argi(op, b->h.c->cfg.watchdog_ms);
        dlock__op_argi(op, b->parties);
        dlock__op_argi(op, q->round);
        op->flags = DLOCK__CALL_IDEMPOTENT;
    } else {
        /* The leave itself is not resent after a lost answer (a retry would
         * find the member gone and call it dropped); the looks after it are. */
        leave_request(q, !q->left, op);
        if (q->left)
            op->flags = DLOCK__CALL_IDEMPOTENT;
    }
}

/* The answer as integers, or the verdicts every call shares. */
static int answer(bcall *q, int rc, dlock__res *res, const char *op, int64_t *v, size_t *n)
{
    const dlock__handle *h = &q->b->h;
    if (rc != DLOCK_OK)
        return dlock__refused(h, rc, res);
    if (dlock__reply_ints(res->r, v, 4, n) != DLOCK_OK)
        return dlock__proto(h, op, res->r);
    freeReplyObject(res->r);
    return DLOCK_OK;
}

static int dropped(bcall *q, const char *while_)
{
    const dlock_barrier *b = q->b;
    q->dropped = 1;
    return dlock__fail(DLOCK_ENOTOWNER,
                       "member %s of barrier '%s' was dropped %s: its lease ran out (the "
                       "process stopped, or could not reach Redis, for longer than the watchdog "
                       "timeout) or the barrier's keys were deleted; round %lld went on without "
                       "it",
                       b->member, b->h.name, while_, (long long)q->round);
}

/* ---------------------------------------------------------------- enter */

static int enter_setup(void *st)
{
    bcall *q = st;
    dlock_barrier *b = q->b;
    pthread_mutex_lock(&b->mu);
    int p = b->phase;
    if (p == DLOCK_BARRIER_OUT)
        b->phase = DLOCK_BARRIER_ENTERING;
    pthread_mutex_unlock(&b->mu);
    if (p == DLOCK_BARRIER_OUT)
        return DLOCK_OK;
    return dlock__fail(DLOCK_EINVAL, "barrier '%s': member %s %s", b->h.name, b->member,
                       p == DLOCK_BARRIER_ENTERING ? "is entering already (a call in progress)"
                                                   : "has entered already: leave first");
}

/* The member counts from this answer on: renewed until it leaves. */
static int watch(bcall *q)
{
    if (q->watched)
        return DLOCK_OK;
    dlock__hold_id id;
    hold_of(q->b, &id);
    int rc = dlock__watchdog_add(q->b->h.c->wd, &id, q->sent_ms, NULL);
    q->watched = rc == DLOCK_OK;
    return rc;
}

static int enter_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    bcall *q = st;
    const dlock_barrier *br = q->b;
    int64_t v[4];
    size_t n = 0;
    if ((rc = answer(q, rc, res, "enter", v, &n)) != DLOCK_OK)
        return rc;
    if (v[0] == 1 && n == 2 && v[1] > 0) {
        q->round = v[1];
        q->count = br->parties;
        if ((rc = watch(q)) != DLOCK_OK)
            return rc;
        q->entered = 1;
        return DLOCK_OK;
    }
    if (v[0] == 0 && n == 4 && v[1] >= 0 && v[2] >= 0 && v[3] >= -1) {
        if (q->round != 0 && v[1] != q->round)
            return dlock__fail(DLOCK_EPROTO, "barrier '%s': an answer for round %lld to a "
                                             "member of round %lld",
                               br->h.name, (long long)v[1], (long long)q->round);
        q->count = v[2];
        if (v[1] != 0) {
            q->round = v[1];
            if ((rc = watch(q)) != DLOCK_OK)
                return rc;
        }
        b->ttl = v[3];
        b->watch = br->state;   /* its keys gone (a restart, a DEL): look at once */
        b->wlen = br->slen;
        return DLOCK__BUSY;
    }
    if (v[0] == -1 && n == 1)
        return dropped(q, "while it waited to enter");
    if (v[0] == -2 && n == 2) {
        q->parties = v[1];
        return dlock__fail(DLOCK_EINVAL, "barrier '%s' is in use by a round of %lld parties; "
                                         "this handle is for %lld: every party must give the "
                                         "same number (nothing written)",
                           br->h.name, (long long)v[1], (long long)br->parties);
    }
    return dlock__fail(DLOCK_EPROTO, "unexpected answer to enter of barrier '%s'", br->h.name);
}

static int enter_busy(void *st, const dlock__busy *b)
{
    (void)b;
    const bcall *q = st;
    const dlock_barrier *br = q->b;
    if (q->round == 0)
        return dlock__fail(DLOCK_ETIMEDOUT,
                           "barrier '%s' not entered: a round of %lld members is in progress "
                           "(entered, not all left); a newcomer waits for the next one",
                           br->h.name, (long long)q->count);
    return dlock__fail(DLOCK_ETIMEDOUT,
                       "barrier '%s' not entered: %lld of %lld parties in round %lld (member %s "
                       "withdrew)",
                       br->h.name, (long long)q->count, (long long)br->parties,
                       (long long)q->round, br->member);
}

/* A wait given up (deadline, cancellation, error) withdraws the member.
 * Should the round have opened meanwhile, counting it, the withdrawal is
 * its leave: the others go on, and nobody waits for it. */
static int enter_give_up(void *st, int rc, dlock__op *op)
{
    (void)rc;
    bcall *q = st;
    if (q->round == 0 || q->dropped)
        return 0;
    if (q->watched) {
        dlock__hold_id id;
        hold_of(q->b, &id);
        dlock__watchdog_release_begin(q->b->h.c->wd, &id);
        q->begun = 1;
    }
    leave_request(q, 1, op);
    return 1;
}

/* An enter's or a leave's result: the round's id, the members counted. */
static void round_result(void *st, dlock__result *res)
{
    const bcall *q = st;
    res->token = (uint64_t)q->round;
    res->count = q->count;
}

static void enter_done(void *st, int read)
{
    (void)read;
    bcall *q = st;
    dlock_barrier *b = q->b;
    if (q->watched && !q->entered)
        unwatch(b, q->begun);
    pthread_mutex_lock(&b->mu);
    b->phase = q->entered ? DLOCK_BARRIER_IN : DLOCK_BARRIER_OUT;
    if (q->entered)
        b->round = q->round;
    pthread_mutex_unlock(&b->mu);
}

static const dlock__op_type enter_type = {.setup = enter_setup,
                                          .request = request,
                                          .read = enter_read,
                                          .busy_error = enter_busy,
                                          .give_up = enter_give_up,
                                          .result = round_result,
                                          .done = enter_done};

/* ---------------------------------------------------------------- leave */

static int leave_setup(void *st)
{
    bcall *q = st;
    dlock_barrier *b = q->b;
    pthread_mutex_lock(&b->mu);
    int p = b->phase;
    if (p == DLOCK_BARRIER_IN) {
        b->phase = DLOCK_BARRIER_LEAVING;
        q->round = b->round;
    }
    pthread_mutex_unlock(&b->mu);
    if (p != DLOCK_BARRIER_IN)
        return dlock__fail(DLOCK_EINVAL, "barrier '%s': member %s %s", b->h.name, b->member,
                           p == DLOCK_BARRIER_LEAVING ? "is leaving already (a call in progress)"
                                                      : "has not entered: nothing to leave");
    dlock__hold_id id;
    hold_of(b, &id);
    dlock__watchdog_release_begin(b->h.c->wd, &id);
    return DLOCK_OK;
}

/* The first answer ends the watchdog's renewal: the member went, or was
 * gone (reported lost, unless a renewal did already); an error before it
 * went keeps it renewed, and in. */
static void leave_told(bcall *q, int rc)
{
    dlock__hold_id id;
    hold_of(q->b, &id);
    if (rc != DLOCK_OK && !q->dropped)
        dlock__watchdog_release_abort(q->b->h.c->wd, &id);
    else
        dlock__watchdog_release_end(q->b->h.c->wd, &id,
                                    q->dropped ? DLOCK__RELEASE_NOT_HELD : DLOCK__RELEASE_GONE);
}

static int leave_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    bcall *q = st;
    const dlock_barrier *br = q->b;
    int first = !q->left;
    int64_t v[4];
    size_t n = 0;
    rc = answer(q, rc, res, "leave", v, &n);
    if (rc == DLOCK_OK && v[0] == -1 && n == 1 && first)
        rc = dropped(q, "before it left");
    else if (rc == DLOCK_OK && !((v[0] == 1 && n == 1) ||
                                 (v[0] == 0 && n == 3 && v[1] >= -1 && v[2] > 0)))
        rc = dlock__fail(DLOCK_EPROTO, "unexpected answer to leave of barrier '%s'",
                         br->h.name);
    if (first)
        leave_told(q, rc);
    if (rc != DLOCK_OK)
        return rc;
    q->left = 1;
    if (v[0] == 1) {
        q->count = 0;
        return DLOCK_OK;
    }
    q->count = v[2];
    b->ttl = v[1];   /* the first of their leases: a dead member publishes nothing */
    b->watch = br->state;
    b->wlen = br->slen;
    return DLOCK__BUSY;
}

static int leave_busy(void *st, const dlock__busy *b)
{
    (void)b;
    const bcall *q = st;
    return dlock__fail(DLOCK_ETIMEDOUT,
                       "barrier '%s': member %s left, but %lld member(s) of round %lld had not "
                       "left within the wait",
                       q->b->h.name, q->b->member, (long long)q->count, (long long)q->round);
}

static void leave_done(void *st, int read)
{
    bcall *q = st;
    dlock_barrier *b = q->b;
    if (!read && !q->left) {
        /* Never sent, or the client closed with it in flight: still in, as
         * far as this handle knows (a leave may be tried again). */
        dlock__hold_id id;
        hold_of(b, &id);
        dlock__watchdog_release_abort(b->h.c->wd, &id);
    }
    pthread_mutex_lock(&b->mu);
    b->phase = q->left || q->dropped ? DLOCK_BARRIER_OUT : DLOCK_BARRIER_IN;
    pthread_mutex_unlock(&b->mu);
}

static const dlock__op_type leave_type = {.setup = leave_setup,
                                          .request = request,
                                          .read = leave_read,
                                          .busy_error = leave_busy,
                                          .result = round_result,
                                          .done = leave_done};

/* ---------------------------------------------------------------- status */

static int status_read(void *st, int rc, dlock__res *res, dlock__busy *b)
{
    (void)b;
    bcall *q = st;
    int64_t v[4];
    size_t n = 0;
    if ((rc = answer(q, rc, res, "status", v, &n)) != DLOCK_OK)
        return rc;
    if (n != 4 || v[0] < 0 || (v[1] != 0 && v[1] != 1) || v[2] < 0 || v[3] < 0)
        return dlock__fail(DLOCK_EPROTO, "unexpected answer to status of barrier '%s'",
                           q->b->h.name);
    q->parties = v[0];
    q->open = (int)v[1];
    q->count = v[2];
    q->round = v[3];
    return DLOCK_OK;
}

static void status_result(void *st, dlock__result *res)
{
    const bcall *q = st;
    res->count = q->count;
    res->flag = q->open;
    res->token = (uint64_t)q->round;
}

static const dlock__op_type status_type = {
    .request = request, .read = status_read, .result = status_result};

/* ----------------------------------------------------------------- runs */

static int run(dlock_barrier *b, int kind, const dlock_wait_opts *opts, const dlock__via *via,
               bcall *q)
{
    int rc = bad_handle(b);
    dlock_wait_opts o;
    if (rc == DLOCK_OK && kind != BQ_STATUS)
        rc = dlock__check_opts(opts, 0, "a barrier", &o);
    if (rc != DLOCK_OK)
        return rc;
    *q = (bcall){.b = b, .kind = kind};
    if (kind == BQ_STATUS)
        return dlock__start(&b->h, &status_type, q, sizeof(*q), NULL, via, NULL);
    dlock__wait_spec spec = {.wake = dlock__wake_all, .need = 1, .awaits = 1,
                             .wait_ms = o.wait_ms, .cancel = o.cancel};
    return dlock__start(&b->h, kind == BQ_ENTER ? &enter_type : &leave_type, q, sizeof(*q),
                        &spec, via, NULL);
}

int dlock_barrier_enter(dlock_barrier *b, const dlock_wait_opts *o)
{
    bcall q;
    return run(b, BQ_ENTER, o, NULL, &q);
}

int dlock_barrier_leave(dlock_barrier *b, const dlock_wait_opts *o)
{
    bcall q;
    return run(b, BQ_LEAVE, o, NULL, &q);
}

int dlock_barrier_status(dlock_barrier *b, int64_t *members, int64_t *parties, int *open)
{
    bcall q;
    int rc = run(b, BQ_STATUS, NULL, NULL, &q);
    if (rc != DLOCK_OK)
        return rc;
    if (members)
        *members = q.count;
    if (parties)
        *parties = q.parties;
    if (open)
        *open = q.open;
    return DLOCK_OK;
}

int dlock_barrier_enter_async(dlock_barrier *b, const dlock_wait_opts *o, dlock_async_fn fn,
                              void *ud)
{
    bcall q;
    return run(b, BQ_ENTER, o, &(dlock__via){fn, ud, 0}, &q);
}

int dlock_barrier_leave_async(dlock_barrier *b, const dlock_wait_opts *o, dlock_async_fn fn,
                              void *ud)
{
    bcall q;
    return run(b, BQ_LEAVE, o, &(dlock__via){fn, ud, 0}, &q);
}

int dlock_barrier_status_async(dlock_barrier *b, dlock_async_fn fn, void *ud)
{
    bcall q;
    return run(b, BQ_STATUS, NULL, &(dlock__via){fn, ud, 0}, &q);
}
