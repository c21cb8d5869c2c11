/* Read-only views of locks: one lock's snapshot (status) and a SCAN walk over
 * the database (listings). The snapshot of holders, TTL and token comes from
 * one script, so it is consistent; the waiter count is a second call. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

#define SCAN_COUNT "200"

struct dlock_info {
    char *name;
    int64_t ttl;
    uint64_t token;
    int64_t waiters;
    size_t nholders;
    char **owners;
    int64_t *counts;
};

void dlock_info_free(dlock_info *info)
{
    if (!info)
        return;
    for (size_t i = 0; i < info->nholders; i++)
        free(info->owners[i]);
    free(info->owners);
    free(info->counts);
    free(info->name);
    free(info);
}

const char *dlock_info_name(const dlock_info *i) { return i ? i->name : ""; }
int dlock_info_locked(const dlock_info *i) { return i && i->nholders > 0; }
size_t dlock_info_holders(const dlock_info *i) { return i ? i->nholders : 0; }
int64_t dlock_info_ttl(const dlock_info *i) { return i ? i->ttl : -2; }
uint64_t dlock_info_token(const dlock_info *i) { return i ? i->token : 0; }
int64_t dlock_info_waiters(const dlock_info *i) { return i ? i->waiters : -1; }

const char *dlock_info_owner(const dlock_info *i, size_t k)
{
    return i && k < i->nholders ? i->owners[k] : NULL;
}

int64_t dlock_info_hold_count(const dlock_info *i, size_t k)
{
    return i && k < i->nholders ? i->counts[k] : 0;
}

static int parse_count(const redisReply *r, int64_t *out)
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
    return v > 0 ? 0 : -1;
}

/* Builds an info from one script entry {type, pttl, token, f1, v1, ...}.
 * Returns DLOCK_OK, DLOCK_EWRONGTYPE (not a lock: `what` says what it is),
 * DLOCK_EPROTO or DLOCK_ENOMEM. */
int dlock__info_from_entry(const char *name, size_t nlen, const redisReply *e, dlock_info **out,
                           const char **what)
{
    *what = "?";
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        (e->element[0]->type != REDIS_REPLY_STATUS && e->element[0]->type != REDIS_REPLY_STRING) ||
        e->element[1]->type != REDIS_REPLY_INTEGER)
        return DLOCK_EPROTO;
    const char *type = e->element[0]->str;
    *what = type;
    if (strcmp(type, "none") != 0 && strcmp(type, "hash") != 0)
        return DLOCK_EWRONGTYPE;
    size_t nf = (e->elements - 3) / 2;
    dlock_info *info = calloc(1, sizeof(*info));
    if (!info)
        return DLOCK_ENOMEM;
    info->name = dlock__strndup(name, nlen);
    info->owners = calloc(nf ? nf : 1, sizeof(char *));
    info->counts = calloc(nf ? nf : 1, sizeof(int64_t));
    if (!info->name || !info->owners || !info->counts) {
        dlock_info_free(info);
        return DLOCK_ENOMEM;
    }
    info->ttl = e->element[1]->integer;
    info->waiters = -1;
    const redisReply *tok = e->element[2];
    if (tok->type == REDIS_REPLY_STRING)
        info->token = strtoull(tok->str, NULL, 10);
    for (size_t k = 0; k < nf; k++) {
        const redisReply *f = e->element[3 + 2 * k], *v = e->element[4 + 2 * k];
        int64_t count;
        /* Owner ids are "<uuid>:<thread>"; counts positive integers. Anything
         * else is a hash that is not a lock. */
        if (f->type != REDIS_REPLY_STRING || !memchr(f->str, ':', f->len) ||
            parse_count(v, &count) != 0) {
            *what = "hash that is not a lock";
            dlock_info_free(info);
            return DLOCK_EWRONGTYPE;
        }
        if (!(info->owners[k] = dlock__strndup(f->str, f->len))) {
            dlock_info_free(info);
            return DLOCK_ENOMEM;
        }
        info->counts[k] = count;
        info->nholders = k + 1;
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
    dlock_client *c = dlock__lock_client(l);
    const char *name = dlock_lock_name(l);
    size_t nlen = strlen(name), tlen, clen;
    char *tok = dlock__prefixed("redisson_lock_token", name, nlen, "", &tlen);
    if (!tok)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const char *argv[] = {name, tok};
    const size_t lens[] = {nlen, tlen};
    dlock__req req = {.script = DLOCK__SCRIPT_LOCK_INSPECT, .nkeys = 2, .argc = 2, .argv = argv,
                      .lens = lens, .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    int rc = dlock__call(c, &req, &r);
    free(tok);
    if (rc != DLOCK_OK)
        return rc;
    dlock_info *info = NULL;
    const char *what_in_reply = "?";
    char what[64];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1)
        rc = DLOCK_EPROTO;
    else
        rc = dlock__info_from_entry(name, nlen, r->element[0], &info, &what_in_reply);
    snprintf(what, sizeof(what), "%s", what_in_reply);   /* it points into r */
    freeReplyObject(r);
    if (rc == DLOCK_EWRONGTYPE)
        return dlock__fail(rc, "key '%s' holds a %s, not a lock", name, what);
    if (rc != DLOCK_OK)
        return dlock__fail(rc, "cannot read lock '%s': %s", name, dlock_strerror(rc));

    const char *ch = dlock__lock_channel(l, &clen);
    const char *av2[] = {"PUBSUB", "NUMSUB", ch};
    const size_t l2[] = {6, 6, clen};
    dlock__req req2 = {.script = -1, .argc = 3, .argv = av2, .lens = l2,
                       .flags = DLOCK__CALL_IDEMPOTENT};
    if ((rc = dlock__call(c, &req2, &r)) != DLOCK_OK) {
        dlock_info_free(info);
        return rc;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        info->waiters = r->element[1]->integer;
    freeReplyObject(r);
    *out = info;
    return DLOCK_OK;
}

/* Inspects one SCAN batch of hash keys; calls fn for the ones that are locks.
 * Returns DLOCK_OK, 1 when fn asked to stop, or an error. */
static int inspect_batch(dlock_client *c, const redisReply *keys, dlock_scan_fn fn, void *ud)
{
    size_t n = keys->elements;
    if (n == 0)
        return DLOCK_OK;
    const char **argv = calloc(2 * n, sizeof(*argv));
    size_t *lens = calloc(2 * n, sizeof(*lens));
    char **toks = calloc(n, sizeof(*toks));
    int rc = DLOCK_OK;
    if (!argv || !lens || !toks) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING) {
            rc = dlock__fail(DLOCK_EPROTO, "SCAN returned a non-string key");
            goto out;
        }
        if (!(toks[i] = dlock__prefixed("redisson_lock_token", k->str, k->len, "", &lens[2 * i + 1]))) {
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
            goto out;
        }
        argv[2 * i] = k->str;
        lens[2 * i] = k->len;
        argv[2 * i + 1] = toks[i];
    }
    dlock__req req = {.script = DLOCK__SCRIPT_LOCK_INSPECT, .nkeys = (int)(2 * n),
                      .argc = (int)(2 * n), .argv = argv, .lens = lens,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    if ((rc = dlock__call(c, &req, &r)) != DLOCK_OK)
        goto out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
        freeReplyObject(r);
        rc = dlock__fail(DLOCK_EPROTO, "unexpected reply to a lock listing");
        goto out;
    }
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        dlock_info *info = NULL;
        const char *what;
        int erc = dlock__info_from_entry(keys->element[i]->str, keys->element[i]->len,
                                         r->element[i], &info, &what);
        if (erc == DLOCK_ENOMEM)
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        else if (erc == DLOCK_OK && info->nholders > 0 && fn(info, ud) != 0)
            rc = 1;
        dlock_info_free(info);
    }
    freeReplyObject(r);
out:
    if (toks)
        for (size_t i = 0; i < n; i++)
            free(toks[i]);
    free(toks);
    free(argv);
    free(lens);
    return rc;
}

int dlock_client_scan(dlock_client *c, const char *pattern, dlock_scan_fn fn, void *ud)
{
    dlock__clear_error();
    if (!c || !fn)
        return dlock__fail(DLOCK_EINVAL, "client or callback is NULL");
    if (!pattern || !*pattern)
        pattern = "*";
    char cursor[24] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT, "TYPE", "hash"};
        dlock__req req = {.script = -1, .argc = 8, .argv = argv, .flags = DLOCK__CALL_IDEMPOTENT};
        redisReply *r;
        int rc = dlock__call(c, &req, &r);
        if (rc != DLOCK_OK)
            return rc;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof(cursor) ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return dlock__fail(DLOCK_EPROTO, "unexpected reply to SCAN");
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        rc = inspect_batch(c, r->element[1], fn, ud);
        freeReplyObject(r);
        if (rc == 1)
            return DLOCK_OK;
        if (rc != DLOCK_OK)
            return rc;
    } while (strcmp(cursor, "0") != 0);
    return DLOCK_OK;
}

int dlock_client_list_connections(dlock_client *c, char **out)
{
    dlock__clear_error();
    if (!c || !out)
        return dlock__fail(DLOCK_EINVAL, "client or out is NULL");
    *out = NULL;
    const char *av[] = {"CLIENT", "LIST"};
    dlock__req req = {.script = -1, .argc = 2, .argv = av, .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    int rc = dlock__call(c, &req, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) {
        freeReplyObject(r);
        return dlock__fail(DLOCK_EPROTO, "CLIENT LIST answered something other than text");
    }
    *out = dlock__strndup(r->str, r->len);
    freeReplyObject(r);
    return *out ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
}
