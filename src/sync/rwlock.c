/* The read-write lock (Redisson's RReadWriteLock): two lock types on one
 * name, the read lock and the write lock, each a dlock_lock handle on which
 * every dlock_lock_* call works. Everything the lock types share is in
 * lock.c; here are the keys, the channel and the scripts (scripts/rw/).
 *
 * Layout (Redisson's): the hash `name` with field "mode" = read | write, each
 * reader's field <owner> = its read hold count, the writer's field
 * <owner>:write = its write hold count; one string key per read hold,
 * {name}:<owner>:rwlock_timeout:<k> (k = 1..count), each with its own TTL,
 * the hash living as long as the longest; wake-ups on redisson_rwlock:{name},
 * "0" when a read release frees the lock (wakes one waiter: a writer), "1"
 * when the last write hold goes (wakes every waiter: the readers may all come
 * in).
 *
 * Holds. A write hold is a field of the hash, renewed as a reentrant lock's
 * (dlock__lock_hold, field <owner>:write). A read hold lives in its timeout
 * keys: its own hold kind renews every timeout key of the owner and the lock
 * (scripts/rw/renew.lua), batched with the other read holds of the client.
 *
 * Beyond Redisson: a reader asking for the write lock of the same name (an
 * upgrade, which cannot succeed while it reads) gets DLOCK_EDEADLK at once
 * instead of waiting forever; a writer that keeps read holds wakes the
 * readers when it stops writing; the lock's TTL is never lowered below a
 * live hold's (see the scripts' headers and docs/wire-format.md).
 *
 * Lock-delay (dlock_lock_set_lock_delay): a write hold writes the reentrant
 * lock's marker (its field <owner>:write; renewed by lock/renew_delay.lua),
 * which keeps readers and writers out after an unreleased loss; a read hold
 * an entry in the sorted set dlock_read_delay:{name} (renewed by
 * rw/renew.lua in its three-key form), which keeps writers out only.
 *
 * Writer-first (dlock_lock_set_writer_first, dlock's own): a waiting writer
 * records its intent in the sorted set dlock_write_intent:{name} (its field
 * -> when the intent lapses, by the server's clock), renewed by each of its
 * attempts, which come at least every third of the intent's life; a new
 * reader through a writer-first handle is refused while another writer's
 * intent lives (scripts/include/intent.lua). Wake-ups: the last read
 * release's "0" wakes the writer before the client's other local waiters (it
 * goes first); its write release's "1" wakes the readers; a writer that gives
 * up removes its intent and publishes "1" (scripts/rw/write_leave.lua); a dead
 * writer's intent lapses, and the readers it held back wake then (their busy
 * answer's sleep is what is left of it). */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

/* l->key[]: {name}, the base of every timeout key; the read holds' lock-delay
 * set dlock_read_delay:{name}; the writer's lock-delay marker (reentrant.c);
 * the writers' intents dlock_write_intent:{name}. */
enum { K_PREFIX = 0, K_RDELAY = 1, K_DELAY = DLOCK__K_DELAY, K_INTENT = 3 };

/* How the watchdog renews a read hold: KEYS = the lock, the owner's timeout
 * prefix; ARGV = the owner's field (scripts/rw/renew.lua). With a lock-delay
 * the set is a third key and the delay a second argument. */
static const dlock__hold_kind read_hold = {"read lock", DLOCK__SCRIPT_RW_RENEW, 2, 1, 0};
static const dlock__hold_kind read_delay_hold = {"read lock", DLOCK__SCRIPT_RW_RENEW, 3, 2, 0};

/* ------------------------------------------------------------- handle */

/* The reader's timeout prefix, {name}:<owner>:rwlock_timeout, into o->aux;
 * the same owner's writer field, <owner>:write, is kept right after it (past
 * its NUL) for the read acquire, which must recognise the writer. */
static const char write_suffix[] = ":write";
#define WSUFFIX_LEN (sizeof(write_suffix) - 1)

static int read_owner_key(const dlock_lock *l, dlock__owner *o)
{
    static const char tail[] = ":rwlock_timeout";
    size_t pl = l->klen[K_PREFIX], tl = sizeof(tail) - 1;
    o->alen = pl + 1 + o->len + tl;
    if (!(o->aux = malloc(o->alen + 1 + o->len + WSUFFIX_LEN + 1)))
        return DLOCK_ENOMEM;
    char *p = o->aux;
    memcpy(p, l->key[K_PREFIX], pl);
    p += pl;
    *p++ = ':';
    memcpy(p, o->id, o->len);
    p += o->len;
    memcpy(p, tail, tl + 1);
    p += tl + 1;
    memcpy(p, o->id, o->len);
    memcpy(p + o->len, write_suffix, WSUFFIX_LEN + 1);
    return DLOCK_OK;
}

static const char *writer_field(const dlock__owner *o, size_t *len)
{
    *len = o->len + WSUFFIX_LEN;
    return o->aux + o->alen + 1;
}

static void read_plain_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id)
{
    memset(id, 0, sizeof(*id));
    id->kind = &read_hold;
    id->owner = o->id;
    id->olen = o->len;
    id->part[0] = l->h.name;
    id->len[0] = l->h.nlen;
    id->part[1] = o->aux;
    id->len[1] = o->alen;
    id->part[2] = o->field;
    id->len[2] = o->flen;
}

static void read_hold_id(const dlock_lock *l, const dlock__owner *o, dlock__hold_id *id)
{
    read_plain_hold_id(l, o, id);
    if (l->lock_delay <= 0)
        return;
    id->kind = &read_delay_hold;
    id->part[2] = l->key[K_RDELAY];
    id->len[2] = l->klen[K_RDELAY];
    id->part[3] = o->field;
    id->len[3] = o->flen;
    id->part[4] = l->delay_arg;
    id->len[4] = strlen(l->delay_arg);
}

/* The read holds' set to KEYS, as dlock__delay_key the marker. */
static void rdelay_key(const dlock_lock *l, dlock__op *op)
{
    if (l->lock_delay > 0)
        dlock__op_key(op, l->key[K_RDELAY], l->klen[K_RDELAY]);
    else
        dlock__op_key_optional(op, DLOCK__OWN_DELAY, l->key[K_RDELAY], l->klen[K_RDELAY]);
}

/* The marker and the read holds' set to KEYS: honoured by every
 * acquisition, written with a lock-delay (dlock__delay_key); then the
 * failover quarantine's record. */
static void delay_keys(const dlock_lock *l, dlock__op *op)
{
    dlock__delay_key(l, op);
    rdelay_key(l, op);
    dlock__quarantine_key(&l->h, op);
}

/* ------------------------------------------------------------ writer-first */

static int rw_init(dlock_lock *l)
{
    atomic_init(&l->writer_first, l->h.c->cfg.writer_first);
    return dlock__delay_init(l);
}

int dlock_lock_set_writer_first(dlock_lock *l, int on)
{
    int rc = dlock__check_handle(l, "lock");
    if (rc != DLOCK_OK)
        return rc;
    if (l->type != &dlock__read_type && l->type != &dlock__write_type)
        return dlock__fail(DLOCK_EINVAL,
                           "%s '%s' has no writer-first mode: only the read and the write lock "
                           "of a read-write lock have one",
                           l->h.what, l->h.name);
    if (on != 0 && on != 1)
        return dlock__fail(DLOCK_EINVAL, "writer-first: 1 (on) or 0 (off), not %d", on);
    atomic_store(&l->writer_first, on);
    return DLOCK_OK;
}

/* The writers' intents to KEYS (optional: a class of dlock's own keys). */
static void intent_key(const dlock_lock *l, dlock__op *op)
{
    dlock__op_key_optional(op, DLOCK__OWN_INTENT, l->key[K_INTENT], l->klen[K_INTENT]);
}

/* How long a waiting writer's intent lives from this attempt: one watchdog
 * timeout (a dead writer holds readers back as long as a dead holder keeps
 * its lock), or what is left of its wait if less. 0: it records none (not
 * writer-first, or a try that does not wait). */
static int64_t intent_life(const dlock__acq *a, int64_t waited_ms)
{
    const dlock_lock *l = a->l;
    if (a->wait == 0 || !atomic_load(&l->writer_first))
        return 0;
    int64_t life = l->h.c->cfg.watchdog_ms;
    if (a->wait > 0) {
        int64_t left = a->wait - (waited_ms > 0 ? waited_ms : 0);
        if (left < life)
            life = left > 1 ? left : 1;
    }
    return life;
}

/* ------------------------------------------------------------ acquire */

/* KEYS: lock, timeout prefix, token[, marker, set, quarantine, intents]; ARGV:
 * lease, owner, writer field, fenced[, delay] (scripts/rw/read_acquire.lua). */
static void read_attempt_op(dlock__acq *a, int64_t waited_ms, dlock__op *op)
{
    (void)waited_ms;
    dlock_lock *l = a->l;
    atomic_store(&l->attempted, 1);   /* the delay is fixed from now on */
    size_t wl;
    const char *wf = writer_field(&a->o, &wl);
    dlock__op_init(op, DLOCK__SCRIPT_RW_READ_ACQUIRE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, a->o.aux, a->o.alen);
    dlock__op_key(op, l->token_key, l->tlen);
    delay_keys(l, op);
    if (atomic_load(&l->writer_first))
        intent_key(l, op);   /* honoured: a new reader queues behind a waiting writer */
    dlock__op_argi(op, a->lease_ms);
    dlock__op_arg(op, a->o.field, a->o.flen);
    dlock__op_arg(op, wf, wl);
    dlock__op_args(op, a->fenced ? "1" : "0");
    dlock__delay_arg(l, op);
}

/* KEYS: lock, token[, marker, set, quarantine, intents]; ARGV: lease, writer
 * field, owner, fenced[, delay, intent life] (scripts/rw/write_acquire.lua). A
 * writer-first writer that waits records its intent with every attempt. */
static void write_attempt_op(dlock__acq *a, int64_t waited_ms, dlock__op *op)
{
    dlock_lock *l = a->l;
    atomic_store(&l->attempted, 1);
    a->intent_ms = intent_life(a, waited_ms);
    dlock__op_init(op, DLOCK__SCRIPT_RW_WRITE_ACQUIRE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->token_key, l->tlen);
    delay_keys(l, op);
    if (a->intent_ms > 0)
        intent_key(l, op);
    dlock__op_argi(op, a->lease_ms);
    dlock__op_arg(op, a->o.field, a->o.flen);
    dlock__op_arg(op, a->o.id, a->o.len);
    dlock__op_args(op, a->fenced ? "1" : "0");
    if (a->intent_ms > 0) {
        dlock__op_args(op, l->delay_arg);   /* the delay always (0: none), then the life */
        dlock__op_argi(op, a->intent_ms);
    } else {
        dlock__delay_arg(l, op);
    }
}

static int attempt_reply(dlock__acq *a, redisReply *r, dlock__busy *b)
{
    int64_t ttl = -1;
    int why = 0;
    int rc = dlock__reply_rw_acquire(r, a->fenced, &ttl, &a->token, &why);
    int writer = a->l->type == &dlock__write_type;
    if (rc == DLOCK_EPROTO || (why == DLOCK__RW_DEADLOCK && !writer) ||
        (why == DLOCK__RW_INTENT && writer))
        return dlock__proto(&a->l->h, "acquire", r);
    freeReplyObject(r);
    a->state = why;
    if (why == DLOCK__RW_DEADLOCK)
        /* Whatever the wait: its own read holds keep the write lock away. */
        return dlock__fail(DLOCK_EDEADLK,
                           "write lock '%s': its owner %s holds the read lock of the same name, "
                           "and a reader can never take the write lock (release every read "
                           "hold first)",
                           a->l->h.name, a->o.id);
    if (rc == DLOCK__BUSY) {
        b->ttl = ttl;
        b->first = 0;
    }
    if (rc == DLOCK__BUSY && a->intent_ms > 0) {
        /* Its intent is recorded: it is given up with the wait
         * (write_give_up_op); the last read release's "0" wakes this writer
         * before the client's other waiters (readers it holds back would
         * only be turned away); and it tries again before the intent
         * lapses, which renews it. */
        a->queued = 1;
        b->first = 1;
        int64_t renew = a->intent_ms / 3 > 0 ? a->intent_ms / 3 : 1;
        if (b->ttl < 0 || b->ttl > renew)
            b->ttl = renew;
    }
    return rc;
}

static int busy_error(dlock__acq *a, const dlock__busy *b)
{
    if (a->state == DLOCK__RW_INTENT)
        return dlock__fail(DLOCK_ETIMEDOUT,
                           "read lock '%s': a writer waits for it (writer-first: new readers "
                           "queue behind waiting writers; its intent lapses in %lld ms unless "
                           "renewed)",
                           a->l->h.name, (long long)b->ttl);
    const char *by = a->l->type == &dlock__read_type ? "write-locked by another owner"
                                                     : "read- or write-locked by other owners";
    if (b->ttl >= 0)
        return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is %s (expires in %lld ms)", a->l->h.name, by,
                           (long long)b->ttl);
    return dlock__fail(DLOCK_ETIMEDOUT, "'%s' is %s (no expiry)", a->l->h.name, by);
}

/* A writer-first writer that stops waiting removes its intent and, when no
 * other writer waits, wakes the readers it held back: KEYS: channel[,
 * intents]; ARGV: writer field (scripts/rw/write_leave.lua). Best effort:
 * should it fail, the intent lapses with its life. */
static int write_give_up_op(dlock__acq *a, int code, dlock__op *op)
{
    (void)code;
    if (!a->queued)
        return 0;
    dlock_lock *l = a->l;
    dlock__op_init(op, DLOCK__SCRIPT_RW_WRITE_LEAVE);
    dlock__op_key(op, l->h.channel, l->h.clen);
    intent_key(l, op);
    dlock__op_arg(op, a->o.field, a->o.flen);
    return 1;
}

/* ------------------------------------------------------------ release */

/* KEYS: lock, channel, latch, timeout prefix, key prefix[, set]; ARGV: owner,
 * latch lifetime[, delay] (scripts/rw/read_release.lua). A read hold's TTL is its timeout
 * key's (renewed by the watchdog): renew_ms is not needed. */
static void read_release_op(const dlock_lock *l, const dlock__owner *o, const char *latch,
                            size_t latch_len, int64_t renew_ms, dlock__op *op)
{
    (void)renew_ms;
    dlock__op_init(op, DLOCK__SCRIPT_RW_READ_RELEASE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_key(op, latch, latch_len);
    dlock__op_key(op, o->aux, o->alen);
    dlock__op_key(op, l->key[K_PREFIX], l->klen[K_PREFIX]);
    rdelay_key(l, op);
    dlock__op_arg(op, o->field, o->flen);
    dlock__op_argi(op, l->h.c->latch_px);
    dlock__delay_arg(l, op);
}

/* KEYS: lock, channel, latch, key prefix[, marker]; ARGV: writer field,
 * lease, latch lifetime[, delay] (scripts/rw/write_release.lua). */
static void write_release_op(const dlock_lock *l, const dlock__owner *o, const char *latch,
                             size_t latch_len, int64_t renew_ms, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_RW_WRITE_RELEASE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_key(op, latch, latch_len);
    dlock__op_key(op, l->key[K_PREFIX], l->klen[K_PREFIX]);
    dlock__delay_key(l, op);
    dlock__op_arg(op, o->field, o->flen);
    dlock__op_argi(op, renew_ms);
    dlock__op_argi(op, l->h.c->latch_px);
    dlock__delay_arg(l, op);
}

/* 1 when `field` exists in the lock's hash; 0 when not, or when that cannot
 * be learnt (the caller only words a message with it). */
static int has_field(dlock_lock *l, const char *field, size_t flen)
{
    dlock__op op;
    dlock__op_cmd(&op, "HEXISTS", l->h.name, l->h.nlen, field, flen);
    op.flags = DLOCK__CALL_IDEMPOTENT;
    dlock__res res;
    int yes = 0;
    if (dlock__op_call(l->h.c, &op, NULL, &res) == DLOCK_OK) {
        if (dlock__reply_flag(res.r, &yes) != DLOCK_OK)
            yes = 0;
        freeReplyObject(res.r);
    }
    return yes;
}

/* A release through the read handle by an owner that holds the write lock
 * only, or the other way round, says so: the handle is the wrong one. */
static int read_not_held(dlock_lock *l, const dlock__owner *o)
{
    size_t wl;
    const char *wf = writer_field(o, &wl);
    if (has_field(l, wf, wl))
        return dlock__fail(DLOCK_ENOTOWNER,
                           "read lock '%s' is not held by %s, which holds the write lock: "
                           "release that through a write lock handle", l->h.name, o->id);
    return dlock__fail(DLOCK_ENOTOWNER, "read lock '%s' is not held by %s", l->h.name, o->id);
}

static int write_not_held(dlock_lock *l, const dlock__owner *o)
{
    if (has_field(l, o->id, o->len))
        return dlock__fail(DLOCK_ENOTOWNER,
                           "write lock '%s' is not held by %s, which holds the read lock only: "
                           "release that through a read lock handle", l->h.name, o->id);
    return dlock__fail(DLOCK_ENOTOWNER, "write lock '%s' is not held by %s", l->h.name, o->id);
}

/* ------------------------------------------------------ force, queries */

/* KEYS: lock, channel; ARGV: mode, message (scripts/rw/force.lua): a forced
 * read lock wakes one waiter (a writer), a forced write lock every waiter. */
static void force_op(const dlock_lock *l, dlock__op *op)
{
    int read = l->type == &dlock__read_type;
    dlock__op_init(op, DLOCK__SCRIPT_RW_FORCE);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_key(op, l->h.channel, l->h.clen);
    dlock__op_args(op, read ? "read" : "write");
    dlock__op_args(op, read ? "0" : "1");
}

/* KEYS: lock; ARGV: mode (scripts/rw/locked.lua). */
static void locked_op(const dlock_lock *l, dlock__op *op)
{
    dlock__op_init(op, DLOCK__SCRIPT_RW_LOCKED);
    dlock__op_key(op, l->h.name, l->h.nlen);
    dlock__op_args(op, l->type == &dlock__read_type ? "read" : "write");
}

static int locked_end(dlock_lock *l, int rc, dlock__res *res, int *locked)
{
    if (rc != DLOCK_OK)
        return dlock__refused(&l->h, rc, res);
    if (dlock__reply_flag(res->r, locked) != DLOCK_OK)
        return dlock__proto(&l->h, "is locked", res->r);
    freeReplyObject(res->r);
    return DLOCK_OK;
}

const dlock__lock_type dlock__read_type = {
    .what = "read lock",
    .suffix = "",
    .hold = &read_hold,
    .lease_keeps_ttl = 1,
    .channel = "redisson_rwlock",
    .keys = {[K_PREFIX] = "",   /* Redisson's "{name}" (or the name when it has a '{') */
             [K_RDELAY] = "dlock_read_delay", [K_DELAY] = "dlock_lock_delay",
             [K_INTENT] = "dlock_write_intent"},
    .init = rw_init,
    .owner_key = read_owner_key,
    .hold_id = read_hold_id,
    .plain_hold_id = read_plain_hold_id,
    .wait_channel = dlock__lock_shared_channel,
    .attempt_op = read_attempt_op,
    .attempt_reply = attempt_reply,
    .delayed = DLOCK__RW_DELAYED,
    .held_states = 1u << 0,   /* the marker or a reader's entry: not told apart */
    .busy_error = busy_error,
    .give_up_op = NULL,
    .release_op = read_release_op,
    .not_held = read_not_held,
    .force_op = force_op,
    .locked_op = locked_op,
    .locked_end = locked_end,
};

const dlock__lock_type dlock__write_type = {
    .what = "write lock",
    .suffix = write_suffix,
    .hold = &dlock__lock_hold,
    .lease_keeps_ttl = 1,
    .channel = "redisson_rwlock",
    .keys = {[K_PREFIX] = "",   /* Redisson's "{name}" (or the name when it has a '{') */
             [K_RDELAY] = "dlock_read_delay", [K_DELAY] = "dlock_lock_delay",
             [K_INTENT] = "dlock_write_intent"},
    .init = rw_init,
    .owner_key = NULL,
    .hold_id = dlock__delay_hold_id,
    .plain_hold_id = dlock__lock_hold_id,
    .wait_channel = dlock__lock_shared_channel,
    .attempt_op = write_attempt_op,
    .attempt_reply = attempt_reply,
    .delayed = DLOCK__RW_DELAYED,
    .held_states = 1u << 0,   /* the marker or a reader's entry: not told apart */
    .busy_error = busy_error,
    .give_up_op = write_give_up_op,
    .release_op = write_release_op,
    .not_held = write_not_held,
    .force_op = force_op,
    .locked_op = locked_op,
    .locked_end = locked_end,
};
