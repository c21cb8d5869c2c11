/* Read-only views of locks, semaphores, latches and rate limiters: one
 * name's snapshot (status) and SCAN walks over the database (listings). The
 * snapshot of holders, TTL, token, or count and permits, or a rate limiter's
 * configuration and permits left, comes from one script, so it is
 * consistent; the waiter count is a second call. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/cluster.h"
#include "sync/inspect.h"


struct dlock_info {
    char *name;
    dlock_kind kind;
    const char *mode;        /* "read", "write" or NULL (static strings) */
    int64_t ttl;
    uint64_t token;
    int64_t waiters;
    size_t nholders;
    size_t total;            /* holders the key has (more than nholders when cut) */
    char **owners;
    int64_t *counts;
    unsigned char *writes;   /* holder i holds the write lock of a read-write lock */
    size_t nqueued;
    char **queued;
    int64_t *deadlines;
    char *next_turn;
    int64_t next_turn_ttl;
    int64_t count;           /* DLOCK_KIND_COUNT, DLOCK_KIND_PERMITS; RATE: permits left */
    dlock_rate_config rate;  /* DLOCK_KIND_RATE */
    int64_t *holder_ttls;    /* a permit's lease left, per holder (PERMITS) */
    int64_t latch_waiters;
    char rtype[32];          /* the key's type as Redis's TYPE names it */
};

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void dlock_info_free(dlock_info *info)
{
    if (!info)
        return;
    free_strings(info->owners, info->nholders);
    free(info->counts);
    free(info->writes);
    free(info->holder_ttls);
    free_strings(info->queued, info->nqueued);
    free(info->deadlines);
    free(info->next_turn);
    free(info->name);
    free(info);
}

const char *dlock_info_name(const dlock_info *i) { return i ? i->name : ""; }
dlock_kind dlock_info_kind(const dlock_info *i) { return i ? i->kind : DLOCK_KIND_NONE; }
const char *dlock_info_redis_type(const dlock_info *i) { return i ? i->rtype : ""; }
const char *dlock_info_mode(const dlock_info *i) { return i ? i->mode : NULL; }
int dlock_info_locked(const dlock_info *i) { return i && i->nholders > 0; }
size_t dlock_info_holders(const dlock_info *i) { return i ? i->nholders : 0; }
size_t dlock_info_holders_total(const dlock_info *i)
{
    return !i ? 0 : i->total > i->nholders ? i->total : i->nholders;
}
int64_t dlock_info_ttl(const dlock_info *i) { return i ? i->ttl : -2; }
uint64_t dlock_info_token(const dlock_info *i) { return i ? i->token : 0; }
int64_t dlock_info_waiters(const dlock_info *i) { return i ? i->waiters : -1; }
size_t dlock_info_queued(const dlock_info *i) { return i ? i->nqueued : 0; }
const char *dlock_info_next_turn(const dlock_info *i) { return i ? i->next_turn : NULL; }
int64_t dlock_info_count(const dlock_info *i)
{
    return i && (i->kind == DLOCK_KIND_COUNT || i->kind == DLOCK_KIND_PERMITS ||
                 i->kind == DLOCK_KIND_RATE)
               ? i->count
               : 0;
}
int dlock_info_rate(const dlock_info *i, dlock_rate_config *out)
{
    if (!i || !out || i->kind != DLOCK_KIND_RATE)
        return DLOCK_EINVAL;
    *out = i->rate;
    return DLOCK_OK;
}
int64_t dlock_info_latch_waiters(const dlock_info *i)
{
    return i && i->kind == DLOCK_KIND_COUNT ? i->latch_waiters : -1;
}
int64_t dlock_info_holder_ttl(const dlock_info *i, size_t k)
{
    return i && i->holder_ttls && k < i->nholders ? i->holder_ttls[k] : -2;
}
int64_t dlock_info_next_turn_ttl(const dlock_info *i)
{
    return i && i->next_turn ? i->next_turn_ttl : -2;
}

const char *dlock_info_owner(const dlock_info *i, size_t k)
{
    return i && k < i->nholders ? i->owners[k] : NULL;
}

int64_t dlock_info_hold_count(const dlock_info *i, size_t k)
{
    return i && k < i->nholders ? i->counts[k] : 0;
}

int dlock_info_holder_writes(const dlock_info *i, size_t k)
{
    return i && k < i->nholders ? i->writes[k] : 0;
}

const char *dlock_info_queued_owner(const dlock_info *i, size_t k)
{
    return i && k < i->nqueued ? i->queued[k] : NULL;
}

int64_t dlock_info_queued_deadline(const dlock_info *i, size_t k)
{
    return i && k < i->nqueued ? i->deadlines[k] : -1;
}

/* A string of 1 to 18 digits: 0 and *out, else -1. */
static int parse_digits(const redisReply *r, int64_t *out)
{
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 18)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < r->len; i++) {
        if (r->str[i] < '0' || r->str[i] > '9')
            return -1;
        v = v * 10 + (r->str[i] - '0');
    }
    *out = v;
    return 0;
}

static int parse_count(const redisReply *r, int64_t *out)
{
    return parse_digits(r, out) == 0 && *out > 0 ? 0 : -1;
}

static int is_str(const redisReply *r) { return r->type == REDIS_REPLY_STRING; }

/* 1 and *n when e's last pair from `first` on is (tag, an integer): a mark
 * lock/inspect.lua ends a hash's entry with (a field's value is a string: no
 * hash's own field reads so). */
static int mark_pair(const redisReply *e, size_t first, const char *tag, int64_t *n)
{
    size_t tl = strlen(tag);
    if (e->elements < first + 2)
        return 0;
    const redisReply *f = e->element[e->elements - 2], *v = e->element[e->elements - 1];
    if (!is_str(f) || f->len != tl || memcmp(f->str, tag, tl) != 0 ||
        v->type != REDIS_REPLY_INTEGER)
        return 0;
    *n = v->integer;
    return 1;
}

/* A hash's entry that a limit cut ends with the pair "#total", N: 1 and
 * *total when e's is. */
static int cut_marker(const redisReply *e, size_t first, size_t *total)
{
    int64_t n;
    if (!mark_pair(e, first, "#total", &n) || n < 0)
        return 0;
    *total = (size_t)n;
    return 1;
}

/* A rate limiter's entry (its fields, then "#rate", the permits left):
 * its configuration and count. DLOCK_EPROTO when a field is not one of
 * Redisson's or rate, interval or type is missing. */
static int read_rate(dlock_info *info, const redisReply *e, size_t first, int64_t left)
{
    static const char *const names[] = {"rate", "interval", "keepAliveTime", "type"};
    int64_t v[3] = {0, 0, 0};
    unsigned have = 0;
    for (size_t k = first; k + 2 < e->elements; k += 2) {
        const redisReply *f = e->element[k], *x = e->element[k + 1];
        size_t j = 0;
        while (j < 4 && !(is_str(f) && f->len == strlen(names[j]) &&
                          memcmp(f->str, names[j], f->len) == 0))
            j++;
        if (j == 4 || !is_str(x) || (j < 3 && parse_digits(x, &v[j]) != 0))
            return DLOCK_EPROTO;
        if (j == 3)   /* "1" PER_CLIENT, anything else OVERALL (as the limiter reads it) */
            info->rate.type = x->len == 1 && x->str[0] == '1' ? DLOCK_RATE_PER_CLIENT
                                                             : DLOCK_RATE_OVERALL;
        have |= 1u << j;
    }
    if ((have & 0xbu) != 0xbu || left < -1)
        return DLOCK_EPROTO;
    info->rate.rate = v[0];
    info->rate.interval_ms = v[1];
    info->rate.keep_alive_ms = v[2];
    info->count = left;
    info->kind = DLOCK_KIND_RATE;
    return DLOCK_OK;
}

/* The queue part of an entry: owner ids and their deadlines. */
static int read_queue(dlock_info *info, const redisReply *q, const redisReply *d)
{
    if (q->type != REDIS_REPLY_ARRAY || d->type != REDIS_REPLY_ARRAY ||
        q->elements != d->elements)
        return DLOCK_EPROTO;
    size_t n = q->elements;
    info->queued = calloc(n ? n : 1, sizeof(char *));
    info->deadlines = calloc(n ? n : 1, sizeof(int64_t));
    if (!info->queued || !info->deadlines)
        return DLOCK_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        const redisReply *o = q->element[k], *t = d->element[k];
        if (!is_str(o) || t->type != REDIS_REPLY_INTEGER)
            return DLOCK_EPROTO;
        if (!(info->queued[k] = dlock__strndup(o->str, o->len)))
            return DLOCK_ENOMEM;
        info->deadlines[k] = t->integer < 0 && t->integer != -1 ? 0 : t->integer;
        info->nqueued = k + 1;
    }
    return DLOCK_OK;
}

/* The hash part: holders (and a read-write lock's mode). Anything that is not
 * a lock's field is DLOCK_EWRONGTYPE ("a hash that is not a lock"). */
static int read_holders(dlock_info *info, const redisReply *e, size_t first, const char **what)
{
    size_t nf = (e->elements - first) / 2;
    if (cut_marker(e, first, &info->total))
        nf--;
    info->owners = calloc(nf ? nf : 1, sizeof(char *));
    info->counts = calloc(nf ? nf : 1, sizeof(int64_t));
    info->writes = calloc(nf ? nf : 1, 1);
    if (!info->owners || !info->counts || !info->writes)
        return DLOCK_ENOMEM;
    for (size_t k = 0; k < nf; k++) {
        const redisReply *f = e->element[first + 2 * k], *v = e->element[first + 2 * k + 1];
        if (!is_str(f) || !is_str(v)) {
            *what = "hash that is not a lock";
            return DLOCK_EWRONGTYPE;
        }
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            if (v->len == 4 && memcmp(v->str, "read", 4) == 0)
                info->mode = "read";
            else if (v->len == 5 && memcmp(v->str, "write", 5) == 0)
                info->mode = "write";
            else {
                *what = "hash that is not a lock";
                return DLOCK_EWRONGTYPE;
            }
            continue;
        }
        /* Owner ids are "<uuid>:<thread>" (a writer's with ":write" after it);
         * counts positive integers. */
        int64_t count;
        if (!memchr(f->str, ':', f->len) || parse_count(v, &count) != 0) {
            *what = "hash that is not a lock";
            return DLOCK_EWRONGTYPE;
        }
        size_t n = info->nholders, len = f->len;
        if (len > 6 && memcmp(f->str + len - 6, ":write", 6) == 0) {
            info->writes[n] = 1;
            len -= 6;
        }
        if (!(info->owners[n] = dlock__strndup(f->str, len)))
            return DLOCK_ENOMEM;
        info->counts[n] = count;
        info->nholders = n + 1;
    }
    info->kind = info->mode ? DLOCK_KIND_RWLOCK : DLOCK_KIND_LOCK;
    for (size_t k = 0; k < info->nholders; k++)
        if (info->writes[k] && !info->mode) {
            *what = "hash that is not a lock";   /* a writer field without a mode */
            return DLOCK_EWRONGTYPE;
        }
    return DLOCK_OK;
}

/* A string entry: {..., count, leases is a zset, id1, ttl1, ...}; holders are
 * the permits, by id in hex. */
static int info_from_count(const char *name, size_t nlen, const redisReply *e, dlock_info **out,
                           const char **what)
{
    if (e->elements < 9 || e->element[7]->type != REDIS_REPLY_INTEGER) {
        /* Not a whole number, or (false, "rate") a rate limiter's count of
         * permits left (a string named {X}:value[:<client id>] beside a rate
         * limiter's configuration). */
        int rate = e->elements == 9 && is_str(e->element[8]) && e->element[8]->len == 4 &&
                   memcmp(e->element[8]->str, "rate", 4) == 0;
        *what = rate ? "rate limiter's count of permits left" : "string";
        return e->elements >= 8 && e->element[7]->type == REDIS_REPLY_NIL ? DLOCK_EWRONGTYPE
                                                                           : DLOCK_EPROTO;
    }
    /* 2: the leases were read in part, their count next. */
    int cut = e->element[8]->type == REDIS_REPLY_INTEGER && e->element[8]->integer == 2;
    size_t first = cut ? 10 : 9;
    if (e->element[8]->type != REDIS_REPLY_INTEGER || e->elements < first ||
        (cut && e->element[9]->type != REDIS_REPLY_INTEGER) || (e->elements - first) % 2 != 0)
        return DLOCK_EPROTO;
    size_t np = (e->elements - first) / 2;
    size_t total = cut && e->element[9]->integer > 0 ? (size_t)e->element[9]->integer : 0;
    dlock_info *info = calloc(1, sizeof(*info));
    if (!info)
        return DLOCK_ENOMEM;
    info->name = dlock__strndup(name, nlen);
    info->owners = calloc(np ? np : 1, sizeof(char *));
    info->counts = calloc(np ? np : 1, sizeof(int64_t));
    info->writes = calloc(np ? np : 1, 1);
    info->holder_ttls = calloc(np ? np : 1, sizeof(int64_t));
    int rc = info->name && info->owners && info->counts && info->writes && info->holder_ttls
                 ? DLOCK_OK
                 : DLOCK_ENOMEM;
    info->kind = e->element[8]->integer ? DLOCK_KIND_PERMITS : DLOCK_KIND_COUNT;
    info->total = total;
    info->ttl = e->element[1]->integer;
    info->count = e->element[7]->integer;
    info->waiters = info->latch_waiters = -1;
    static const char hexd[] = "0123456789abcdef";
    for (size_t k = 0; k < np && rc == DLOCK_OK; k++) {
        const redisReply *id = e->element[first + 2 * k], *t = e->element[first + 1 + 2 * k];
        if (!is_str(id) || t->type != REDIS_REPLY_INTEGER) {
            rc = DLOCK_EPROTO;
            break;
        }
        /* Redisson's ids are 16 bytes: shown as the 32 hex characters callers
         * use; anything else (written by another tool) in hex too. */
        char *h = malloc(id->len * 2 + 1);
        if (!h) {
            rc = DLOCK_ENOMEM;
            break;
        }
        for (size_t j = 0; j < id->len; j++) {
            h[2 * j] = hexd[(unsigned char)id->str[j] >> 4];
            h[2 * j + 1] = hexd[(unsigned char)id->str[j] & 15];
        }
        h[id->len * 2] = '\0';
        info->owners[k] = h;
        info->counts[k] = 1;
        info->holder_ttls[k] = t->integer;
        info->nholders = k + 1;
    }
    if (rc != DLOCK_OK) {
        dlock_info_free(info);
        return rc;
    }
    *out = info;
    return DLOCK_OK;
}

/* Builds an info from one script entry {type, pttl, token, queue, deadlines,
 * reservation, reservation pttl, f1, v1, ...} (an entry a limit cut says so:
 * lock/inspect.lua). Returns DLOCK_OK,
 * DLOCK_EWRONGTYPE (not a lock: `what` says what it is), DLOCK_EPROTO or
 * DLOCK_ENOMEM. */
int dlock__info_from_entry(const char *name, size_t nlen, const redisReply *e, dlock_info **out,
                           const char **what)
{
    *what = "?";
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 7 ||
        (e->element[0]->type != REDIS_REPLY_STATUS && !is_str(e->element[0])) ||
        e->element[1]->type != REDIS_REPLY_INTEGER || e->element[6]->type != REDIS_REPLY_INTEGER)
        return DLOCK_EPROTO;
    const char *type = e->element[0]->str;
    *what = type;
    if (strcmp(type, "string") == 0) {
        int rc = info_from_count(name, nlen, e, out, what);
        if (rc == DLOCK_OK)
            snprintf((*out)->rtype, sizeof((*out)->rtype), "%s", type);
        return rc;
    }
    if ((e->elements - 7) % 2 != 0)
        return DLOCK_EPROTO;
    if (strcmp(type, "none") != 0 && strcmp(type, "hash") != 0)
        return DLOCK_EWRONGTYPE;
    dlock_info *info = calloc(1, sizeof(*info));
    if (!info)
        return DLOCK_ENOMEM;
    int rc = (info->name = dlock__strndup(name, nlen)) ? DLOCK_OK : DLOCK_ENOMEM;
    info->ttl = e->element[1]->integer;
    info->waiters = -1;
    const redisReply *tok = e->element[2], *resv = e->element[5];
    if (is_str(tok))
        info->token = strtoull(tok->str, NULL, 10);
    if (rc == DLOCK_OK)
        rc = read_queue(info, e->element[3], e->element[4]);
    if (rc == DLOCK_OK && is_str(resv)) {
        if (!(info->next_turn = dlock__strndup(resv->str, resv->len)))
            rc = DLOCK_ENOMEM;
        info->next_turn_ttl = e->element[6]->integer;
    }
    int64_t left;
    if (rc == DLOCK_OK && strcmp(type, "hash") == 0 && mark_pair(e, 7, "#rate", &left))
        rc = read_rate(info, e, 7, left);
    else if (rc == DLOCK_OK)
        rc = read_holders(info, e, 7, what);
    if (rc != DLOCK_OK) {
        dlock_info_free(info);
        return rc;
    }
    if (strcmp(type, "none") == 0)
        info->kind = DLOCK_KIND_NONE;
    snprintf(info->rtype, sizeof(info->rtype), "%s", type);
    *out = info;
    return DLOCK_OK;
}

/* A snapshot of a key that holds none of the family's types: its name, its
 * Redis type and TTL, nothing else. */
static int other_info(const char *name, size_t nlen, const char *type, int64_t ttl,
                      dlock_info **out)
{
    dlock_info *info = calloc(1, sizeof(*info));
    if (!info || !(info->name = dlock__strndup(name, nlen))) {
        free(info);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    info->kind = DLOCK_KIND_OTHER;
    info->ttl = ttl;
    info->waiters = info->latch_waiters = -1;
    snprintf(info->rtype, sizeof(info->rtype), "%s", type);
    *out = info;
    return DLOCK_OK;
}

/* The names of the rate limiters whose count of permits left a string named
 * k may be: k is P ":value" or P ":value:" <client id> (an id without ':'),
 * and the limiter is X for a P of "{X}" (X without a '{': its keys are
 * braced), or P itself when P has a '{' (a name with a brace keeps it: "{X}"
 * too). At most two, into c[] and cl[] (pointers into k); on a cluster only
 * those in k's slot (a script's keys share one). */
static size_t rate_owners(const char *k, size_t len, int cluster, const char **c, size_t *cl)
{
    static const char tag[] = ":value";
    const size_t tl = sizeof(tag) - 1;
    size_t end = len;   /* k[0..end) ends with the tag */
    if (len <= tl || memcmp(k + len - tl, tag, tl) != 0) {
        while (end > 0 && k[end - 1] != ':')
            end--;
        if (end == 0 || end == len)
            return 0;
        end--;   /* before the client id's colon */
        if (end <= tl || memcmp(k + end - tl, tag, tl) != 0)
            return 0;
    }
    size_t p = end - tl, n = 0;
    if (p == 0 || !memchr(k, '{', p))
        return 0;
    if (p >= 3 && k[0] == '{' && k[p - 1] == '}' && !memchr(k + 1, '{', p - 2)) {
        c[n] = k + 1;
        cl[n++] = p - 2;
    }
    c[n] = k;
    cl[n++] = p;
    size_t kept = 0;
    int slot = cluster ? dlock__key_slot(k, len) : 0;
    for (size_t i = 0; i < n; i++)
        if (!cluster || dlock__key_slot(c[i], cl[i]) == slot) {
            c[kept] = c[i];
            cl[kept++] = cl[i];
        }
    return kept;
}

/* The DLOCK__INSPECT_KEYS keys scripts/lock/inspect.lua reads for a name, into
 * keys[] (the name first; DLOCK__INSPECT_OWN_KEYS of them allocated, freed with
 * dlock__inspect_free_keys; the last two the name itself or parts of it). */
int dlock__inspect_keys_of(const char *name, size_t nlen, int cluster, const char **keys,
                           size_t *lens, char **own)
{
    static const char *const prefixes[] = {"redisson_lock_token", "redisson_lock_queue",
                                           "redisson_lock_timeout", "dlock_lock_next"};
    keys[0] = name;
    lens[0] = nlen;
    for (int k = 0; k < 4; k++) {
        own[k] = dlock__prefixed(prefixes[k], name, nlen, "", &lens[k + 1]);
        if (!own[k])
            return DLOCK_ENOMEM;
        keys[k + 1] = own[k];
    }
    static const char *const tails[] = {"timeout", "value", "permits"};
    for (int k = 0; k < 3; k++) {
        own[k + 4] = dlock__suffixed(name, nlen, tails[k], &lens[k + 5]);
        if (!own[k + 4])
            return DLOCK_ENOMEM;
        keys[k + 5] = own[k + 4];
    }
    const char *c[2];
    size_t cl[2], n = rate_owners(name, nlen, cluster, c, cl);
    for (size_t k = 0; k < 2; k++) {
        keys[8 + k] = k < n ? c[k] : name;
        lens[8 + k] = k < n ? cl[k] : nlen;
    }
    return DLOCK_OK;
}

void dlock__inspect_free_keys(char **own)
{
    for (int k = 0; k < DLOCK__INSPECT_OWN_KEYS; k++)
        free(own[k]);
}

/* Subscribers of the channel its kind's waiters listen on, plus the entries
 * of a fair queue (each fair waiter listens on a channel of its own). A count
 * may be a semaphore's or a latch's: both channels are counted, in one call. */
static int count_waiters(dlock_client *c, dlock_info *info)
{
    size_t clen, llen = 0;
    const char *prefix = info->kind == DLOCK_KIND_RWLOCK ? "redisson_rwlock"
                         : info->kind == DLOCK_KIND_COUNT || info->kind == DLOCK_KIND_PERMITS
                             ? "redisson_sc"
                             : "redisson_lock__channel";
    size_t nlen = strlen(info->name);
    char *ch = dlock__prefixed(prefix, info->name, nlen, "", &clen);
    /* The latch's channel is always braced, even around a name with a '{'. */
    char *lch = NULL;
    if (info->kind == DLOCK_KIND_COUNT) {
        llen = strlen("redisson_countdownlatch__channel__{}") + nlen;
        if ((lch = malloc(llen + 1)))
            snprintf(lch, llen + 1, "redisson_countdownlatch__channel__{%s}", info->name);
    }
    if (!ch || (info->kind == DLOCK_KIND_COUNT && !lch)) {
        free(ch);
        free(lch);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    /* Sharded (a Redis 7 cluster): the waiters are shard subscribers of the
     * channels' node (both channels carry the name's hash tag). */
    int sharded = dlock__router_sharded(c->router);
    const char *av[] = {"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB", ch, lch};
    const size_t lens[] = {6, sharded ? 11 : 6, clen, llen};
    dlock__req req = {.script = -1, .argc = lch ? 4 : 3, .argv = av, .lens = lens,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    int rc = dlock__call(c, &req, &r);
    free(ch);
    free(lch);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        info->waiters = r->element[1]->integer + (int64_t)info->nqueued;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
        r->element[3]->type == REDIS_REPLY_INTEGER)
        info->latch_waiters = r->element[3]->integer;
    freeReplyObject(r);
    return DLOCK_OK;
}

/* lock/inspect.lua over m names (their DLOCK__INSPECT_KEYS keys each in argv and
 * lens), with the client's limit of holders read per name when it has one
 * (dlock_config_set_inspect_limit). */
int dlock__inspect_call(dlock_client *c, const char **argv, const size_t *lens, size_t m,
                        redisReply **r)
{
    size_t nk = DLOCK__INSPECT_KEYS * m, limit = c->cfg.inspect_max;
    if (!limit) {
        dlock__req req = {.script = DLOCK__SCRIPT_LOCK_INSPECT, .nkeys = (int)nk,
                          .argc = (int)nk, .argv = argv, .lens = lens,
                          .flags = DLOCK__CALL_IDEMPOTENT};
        return dlock__call(c, &req, r);
    }
    const char **av = malloc((nk + 1) * sizeof(*av));
    size_t *ln = malloc((nk + 1) * sizeof(*ln));
    if (!av || !ln) {
        free(av);
        free(ln);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    char lim[24];
    memcpy(av, argv, nk * sizeof(*av));
    memcpy(ln, lens, nk * sizeof(*ln));
    av[nk] = lim;
    ln[nk] = (size_t)snprintf(lim, sizeof(lim), "%zu", limit);
    dlock__req req = {.script = DLOCK__SCRIPT_LOCK_INSPECT, .nkeys = (int)nk,
                      .argc = (int)nk + 1, .argv = av, .lens = ln,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    int rc = dlock__call(c, &req, r);
    free(av);
    free(ln);
    return rc;
}

/* One name's snapshot, waiters counted. Unless `counts` (a lock's
 * inspection), counts (semaphores, latches), rate limiters and other data
 * are refused with DLOCK_EWRONGTYPE; with it (any name's), other data is a
 * DLOCK_KIND_OTHER snapshot. */
static int inspect_name(dlock_client *c, const char *name, size_t nlen, int counts,
                        dlock_info **out)
{
    const char *keys[DLOCK__INSPECT_KEYS];
    size_t lens[DLOCK__INSPECT_KEYS];
    char *own[DLOCK__INSPECT_OWN_KEYS] = {NULL};
    int rc = dlock__inspect_keys_of(name, nlen, dlock__router_is_cluster(c->router), keys, lens,
                                    own);
    redisReply *r = NULL;
    if (rc == DLOCK_OK) {
        rc = dlock__inspect_call(c, keys, lens, 1, &r);
    } else {
        rc = dlock__fail(rc, "out of memory");
    }
    dlock__inspect_free_keys(own);
    if (rc != DLOCK_OK)
        return rc;
    dlock_info *info = NULL;
    const char *what_in_reply = "?";
    char what[64], type[32] = "";
    int64_t ttl = -2;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1)
        rc = DLOCK_EPROTO;
    else
        rc = dlock__info_from_entry(name, nlen, r->element[0], &info, &what_in_reply);
    snprintf(what, sizeof(what), "%s", what_in_reply);   /* it points into r */
    if (rc == DLOCK_EWRONGTYPE) {   /* the entry's shape was checked: {type, pttl, ...} */
        snprintf(type, sizeof(type), "%s", r->element[0]->element[0]->str);
        ttl = r->element[0]->element[1]->integer;
    }
    freeReplyObject(r);
    if (rc == DLOCK_EWRONGTYPE && counts)
        return other_info(name, nlen, type, ttl, out);
    if (rc == DLOCK_OK && !counts &&
        (info->kind == DLOCK_KIND_COUNT || info->kind == DLOCK_KIND_PERMITS)) {
        dlock_info_free(info);
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' holds a count (a semaphore's or a "
                                             "latch's), not a lock", name);
    }
    if (rc == DLOCK_OK && !counts && info->kind == DLOCK_KIND_RATE) {
        dlock_info_free(info);
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' holds a rate limiter, not a lock", name);
    }
    if (rc == DLOCK_EWRONGTYPE)   /* "hash that is not a lock" says it already */
        return dlock__fail(rc, "key '%s' holds a %s%s", name, what,
                           strstr(what, "not a lock") ? "" : ", not a lock");
    if (rc != DLOCK_OK)
        return dlock__fail(rc, "cannot read %s'%s': %s", counts ? "" : "lock ", name,
                           dlock_strerror(rc));
    /* A rate limiter's waiters sleep without a channel: not counted (-1). */
    if (info->kind != DLOCK_KIND_RATE && (rc = count_waiters(c, info)) != DLOCK_OK) {
        dlock_info_free(info);
        return rc;
    }
    *out = info;
    return DLOCK_OK;
}

int dlock_lock_inspect(dlock_lock *l, dlock_info **out)
{
    dlock__clear_error();
    if (!l || !out)
        return dlock__fail(DLOCK_EINVAL, "lock or out-parameter is NULL");
    *out = NULL;
    const char *name = dlock_lock_name(l);
    return inspect_name(dlock__lock_client(l), name, strlen(name), 0, out);
}

int dlock_client_inspect(dlock_client *c, const char *name, dlock_info **out)
{
    dlock__clear_error();
    if (!c || !out)
        return dlock__fail(DLOCK_EINVAL, "client or out-parameter is NULL");
    *out = NULL;
    size_t nlen;
    int rc = dlock__check_name(name, &nlen);
    if (rc != DLOCK_OK)
        return rc;
    return inspect_name(c, name, nlen, 1, out);
}
