/* Reading the answers of the scripts and commands. Pure functions of a reply,
 * kept apart so they can be fuzzed (tests/fuzz/fuzz_reply.c): whatever Redis,
 * a proxy or a corrupted stream sends, they return a code and never read past
 * what the reply holds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

/* A successful acquisition: nil, or {token} when fenced. */
static int acquired(const redisReply *r, int fenced, uint64_t *token)
{
    if (!fenced)
        return r->type == REDIS_REPLY_NIL ? DLOCK_OK : DLOCK_EPROTO;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer < 1)
        return DLOCK_EPROTO;
    *token = (uint64_t)r->element[0]->integer;
    return DLOCK_OK;
}

int dlock__reply_acquire(const redisReply *r, int fenced, int64_t *ttl, uint64_t *token,
                         int *resv)
{
    *resv = DLOCK__RESV_NONE;
    if (r->type == REDIS_REPLY_INTEGER) {
        *ttl = r->integer;   /* held by another: its PTTL (-1 no expiry, -2 just gone) */
        return DLOCK__BUSY;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        /* {ttl, 1}: held, the next turn reserved for the caller;
         * {left, 0}: free, reserved for another waiter for left ms at most;
         * {left, 2}: free, in a lock-delay for left ms more. */
        const redisReply *a = r->element[0], *b = r->element[1];
        if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER ||
            b->integer < 0 || b->integer > 2 || (b->integer != 1 && a->integer < 0))
            return DLOCK_EPROTO;
        *ttl = a->integer;
        *resv = b->integer == 1 ? DLOCK__RESV_MINE
              : b->integer == 0 ? DLOCK__RESV_OTHER : DLOCK__RESV_DELAYED;
        return DLOCK__BUSY;
    }
    return acquired(r, fenced, token);
}

int dlock__reply_fair_acquire(const redisReply *r, int fenced, int64_t *sleep, uint64_t *token,
                              int *why)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        const redisReply *a = r->element[0], *b = r->element[1];
        if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER ||
            b->integer < 0 || b->integer > 2 || a->integer < -2)
            return DLOCK_EPROTO;
        *sleep = a->integer;
        *why = (int)b->integer;
        return DLOCK__BUSY;
    }
    return acquired(r, fenced, token);
}

int dlock__reply_rw_acquire(const redisReply *r, int fenced, int64_t *ttl, uint64_t *token,
                            int *why)
{
    *why = 0;
    if (r->type == REDIS_REPLY_INTEGER) {
        *ttl = r->integer;   /* held in the other mode: its PTTL */
        return DLOCK__BUSY;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        /* {pttl, 1}: the caller holds read holds and asks for the write lock;
         * {left, 2}: free, in a lock-delay for left ms more; {left, 3}: a
         * writer waits, its intent living left ms more */
        const redisReply *a = r->element[0], *b = r->element[1];
        if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER ||
            b->integer < DLOCK__RW_DEADLOCK || b->integer > DLOCK__RW_INTENT ||
            (b->integer != DLOCK__RW_DEADLOCK && a->integer < 0))
            return DLOCK_EPROTO;
        *ttl = a->integer;
        *why = (int)b->integer;
        return DLOCK__BUSY;
    }
    return acquired(r, fenced, token);
}

int dlock__reply_release(const redisReply *r, int *outcome, int *heard)
{
    *heard = 0;
    if (r->type == REDIS_REPLY_NIL) {
        *outcome = DLOCK__RELEASE_NOT_HELD;
        return DLOCK_OK;
    }
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer > 2)
        return DLOCK_EPROTO;
    *outcome = r->integer >= 1 ? DLOCK__RELEASE_GONE : DLOCK__RELEASE_KEPT;
    *heard = r->integer == 2;
    return DLOCK_OK;
}

int dlock__reply_flag(const redisReply *r, int *flag)
{
    if (r->type != REDIS_REPLY_INTEGER || (r->integer != 0 && r->integer != 1))
        return DLOCK_EPROTO;
    *flag = (int)r->integer;
    return DLOCK_OK;
}

int dlock__reply_integer(const redisReply *r, int64_t *v)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return DLOCK_EPROTO;
    *v = r->integer;
    return DLOCK_OK;
}

int dlock__reply_type_locked(const redisReply *r, int *locked)
{
    if (r->type != REDIS_REPLY_STATUS && r->type != REDIS_REPLY_STRING)
        return DLOCK_EPROTO;
    if (strcmp(r->str, "none") == 0)
        *locked = 0;
    else if (strcmp(r->str, "hash") == 0)
        *locked = 1;
    else
        return DLOCK_EWRONGTYPE;
    return DLOCK_OK;
}

int dlock__reply_count(const redisReply *r, int64_t *count)
{
    if (r->type == REDIS_REPLY_NIL) {
        *count = 0;
        return DLOCK_OK;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 18)
        return DLOCK_EPROTO;
    int64_t v = 0;
    for (size_t i = 0; i < r->len; i++) {
        if (r->str[i] < '0' || r->str[i] > '9')
            return DLOCK_EPROTO;
        v = v * 10 + (r->str[i] - '0');
    }
    *count = v;
    return DLOCK_OK;
}


int dlock__reply_take(const redisReply *r, int64_t *v)
{
    if (r->type == REDIS_REPLY_NIL)
        return DLOCK_OK;
    if (r->type != REDIS_REPLY_INTEGER)
        return DLOCK_EPROTO;
    *v = r->integer;
    return DLOCK__BUSY;
}

int dlock__reply_signed(const redisReply *r, int64_t *v)
{
    if (r->type == REDIS_REPLY_NIL) {
        *v = 0;
        return DLOCK_OK;
    }
    if (r->type != REDIS_REPLY_STRING)
        return DLOCK_EPROTO;
    size_t i = r->len > 0 && r->str[0] == '-' ? 1 : 0;
    /* 18 digits at most: no overflow; Redis's counts here stay far below. */
    if (r->len <= i || r->len - i > 18)
        return DLOCK_EWRONGTYPE;
    int64_t n = 0;
    for (size_t k = i; k < r->len; k++) {
        if (r->str[k] < '0' || r->str[k] > '9')
            return DLOCK_EWRONGTYPE;
        n = n * 10 + (r->str[k] - '0');
    }
    *v = i ? -n : n;
    return DLOCK_OK;
}

int dlock__reply_pair(const redisReply *r, int64_t *a, int64_t *b)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return DLOCK_EPROTO;
    *a = r->element[0]->integer;
    *b = r->element[1]->integer;
    return DLOCK_OK;
}

int dlock__reply_ints(const redisReply *r, int64_t *v, size_t max, size_t *n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->elements > max)
        return DLOCK_EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return DLOCK_EPROTO;
        v[i] = r->element[i]->integer;
    }
    *n = r->elements;
    return DLOCK_OK;
}

int dlock__reply_fence(const redisReply *r, int *written, const redisReply **value,
                       uint64_t *highest)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER)
        return DLOCK_EPROTO;
    const redisReply *v = r->element[1];
    if (r->element[0]->integer == 1) {
        *written = 1;
        *value = v;
        return DLOCK_OK;
    }
    if (r->element[0]->integer != 0 || v->type != REDIS_REPLY_STRING || v->len == 0 ||
        v->len > 20)
        return DLOCK_EPROTO;
    /* The guard's token: a decimal the script compared as such. */
    char buf[24];
    memcpy(buf, v->str, v->len);
    buf[v->len] = '\0';
    char *end;
    errno = 0;
    unsigned long long h = strtoull(buf, &end, 10);
    if (errno || *end || buf[0] < '1' || buf[0] > '9')
        return DLOCK_EPROTO;
    *written = 0;
    *highest = h;
    return DLOCK_OK;
}
