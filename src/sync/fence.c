/* Fenced writes: the check a fencing token needs, shipped for data kept in
 * Redis. A write command on one key runs only when the caller's token is not
 * lower than the highest token the key's guard has seen, and raises the guard
 * to it, in one script (scripts/fence/write.lua); a refusal is
 * DLOCK_EFENCED. The guard is a string beside the key, in its cluster slot:
 * dlock_fence:<key> when the key has a hash tag, else dlock_fence:{<key>}. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sync/sync.h"

#define GUARD_PREFIX "dlock_fence:"
#define FENCE_ARGS_MAX 1024

/* The writes dlock fences: single-key commands whose key is their first
 * argument. The script holds the same list (and refuses anything else). */
static const char *const allowed[] = {
    "SET",     "SETEX",       "PSETEX", "SETNX",   "GETDEL", "APPEND",       "SETRANGE",
    "INCR",    "INCRBY",      "INCRBYFLOAT", "DECR", "DECRBY", "DEL",        "UNLINK",
    "EXPIRE",  "PEXPIRE",     "PERSIST", "HSET",   "HSETNX", "HDEL",         "HINCRBY",
    "HINCRBYFLOAT", "LPUSH",  "RPUSH",  "LPOP",    "RPOP",   "LSET",         "LTRIM",
    "SADD",    "SREM",        "ZADD",   "ZREM",    "ZINCRBY", "XADD",        "XDEL",
    "XTRIM",
};

static const char *allowed_cmd(const char *s, size_t n)
{
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(allowed); i++)
        if (strlen(allowed[i]) == n && strncasecmp(allowed[i], s, n) == 0)
            return allowed[i];
    return NULL;
}

/* The key's hash tag as Redis Cluster reads it: the bytes between the first
 * '{' and the first '}' after it, when there are any. */
static int has_tag(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (!open)
        return 0;
    const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    return close && close > open + 1;
}

/* The guard's name, in the key's slot, into *out (malloc'd). */
static int guard_key(const char *key, size_t len, char **out, size_t *glen)
{
    size_t pl = strlen(GUARD_PREFIX);
    int tag = has_tag(key, len);
    if (!tag && memchr(key, '}', len)) {
        /* Its slot hashes the whole key, '}' included: no tag can name it. */
        return dlock__fail(DLOCK_EINVAL, "key '%.*s' has a '}' but no hash tag: no other key "
                                         "can share its cluster slot, so it can have no guard; "
                                         "give it a hash tag ({...})",
                           (int)(len > 200 ? 200 : len), key);
    }
    *glen = pl + len + (tag ? 0 : 2);
    char *g = malloc(*glen + 1);
    if (!g)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *p = g;
    memcpy(p, GUARD_PREFIX, pl);
    p += pl;
    if (!tag)
        *p++ = '{';
    memcpy(p, key, len);
    p += len;
    if (!tag)
        *p++ = '}';
    *p = '\0';
    *out = g;
    return DLOCK_OK;
}

/* The command's reply as text: malloc'd (NUL-terminated), or NULL for nil. */
static int reply_text(const redisReply *v, char **out, size_t *out_len)
{
    char num[32];
    const char *src = NULL;
    size_t n = 0;
    switch (v->type) {
    case REDIS_REPLY_NIL:
        *out = NULL;
        *out_len = 0;
        return DLOCK_OK;
    case REDIS_REPLY_INTEGER:
        n = dlock__fmt_i64(num, v->integer);
        src = num;
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        src = v->str;
        n = v->len;
        break;
    case REDIS_REPLY_ARRAY: {
        /* LPOP/RPOP with a count: the elements, one per line. */
        size_t total = 0;
        for (size_t i = 0; i < v->elements; i++) {
            if (v->element[i]->type != REDIS_REPLY_STRING)
                return DLOCK_EPROTO;
            total += v->element[i]->len + 1;
        }
        char *s = malloc(total + 1);
        if (!s)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        size_t off = 0;
        for (size_t i = 0; i < v->elements; i++) {
            memcpy(s + off, v->element[i]->str, v->element[i]->len);
            off += v->element[i]->len;
            if (i + 1 < v->elements)
                s[off++] = '\n';
        }
        s[off] = '\0';
        *out = s;
        *out_len = off;
        return DLOCK_OK;
    }
    default:
        return DLOCK_EPROTO;
    }
    char *s = malloc(n + 1);
    if (!s)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    memcpy(s, src, n);
    s[n] = '\0';
    *out = s;
    *out_len = n;
    return DLOCK_OK;
}

/* The checks, done before anything is sent. */
static int check_args(dlock_client *c, uint64_t token, int argc, const char *const *argv,
                      const size_t *lens, const char **cmd)
{
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    if (token == 0)
        return dlock__fail(DLOCK_EINVAL, "fencing token 0: pass the token an acquisition "
                                         "returned (they start far above 0)");
    if (!argv || argc < 2)
        return dlock__fail(DLOCK_EINVAL, "a fenced write needs a command and its key");
    if (argc > FENCE_ARGS_MAX)
        return dlock__fail(DLOCK_EINVAL, "a fenced write takes %d arguments at most (%d given)",
                           FENCE_ARGS_MAX, argc);
    for (int i = 0; i < argc; i++)
        if (!argv[i])
            return dlock__fail(DLOCK_EINVAL, "argument %d is NULL", i);
    size_t cl = lens ? lens[0] : strlen(argv[0]);
    if (!(*cmd = allowed_cmd(argv[0], cl)))
        return dlock__fail(DLOCK_EINVAL, "'%.*s' is not a write dlock fences (SET, HSET, INCRBY, "
                                         "DEL, XADD and others: see dlock.h)",
                           (int)(cl > 40 ? 40 : cl), argv[0]);
    if ((strcmp(*cmd, "DEL") == 0 || strcmp(*cmd, "UNLINK") == 0) && argc != 2)
        return dlock__fail(DLOCK_EINVAL, "a fenced %s deletes one key", *cmd);
    if ((lens ? lens[1] : strlen(argv[1])) == 0)
        return dlock__fail(DLOCK_EINVAL, "the key is empty");
    return DLOCK_OK;
}

int dlock_fence_command(dlock_client *c, uint64_t token, int argc, const char *const *argv,
                        const size_t *argvlen, char **reply, size_t *reply_len)
{
    dlock__clear_error();
    const char *cmd = NULL;
    int rc = check_args(c, token, argc, argv, argvlen, &cmd);
    if (rc != DLOCK_OK)
        return rc;
    size_t klen = argvlen ? argvlen[1] : strlen(argv[1]);
    size_t glen;
    char *guard;
    if ((rc = guard_key(argv[1], klen, &guard, &glen)) != DLOCK_OK)
        return rc;
    /* KEYS: data, guard; ARGV: token, command, its arguments after the key. */
    int n = argc + 2;
    const char **av = malloc((size_t)n * sizeof(*av));
    size_t *lens = malloc((size_t)n * sizeof(*lens));
    if (!av || !lens) {
        free(av);
        free(lens);
        free(guard);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    char tok[24];
    av[0] = argv[1];
    lens[0] = klen;
    av[1] = guard;
    lens[1] = glen;
    av[2] = tok;
    lens[2] = (size_t)snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    av[3] = cmd;
    lens[3] = strlen(cmd);
    for (int i = 2; i < argc; i++) {
        av[i + 2] = argv[i];
        lens[i + 2] = argvlen ? argvlen[i] : strlen(argv[i]);
    }
    /* Not resent after a lost reply: an INCRBY, an XADD, must not run twice. */
    dlock__req req = {.script = DLOCK__SCRIPT_FENCE_WRITE, .nkeys = 2, .argc = n, .argv = av,
                      .lens = lens};
    dlock__res res;
    rc = dlock__router_call(c->router, &req, &res);
    redisReply *r = res.r;
    free(av);
    free(lens);
    if (rc != DLOCK_OK) {
        if (rc == DLOCK_EWRONGTYPE)   /* the refusal's words, with what was refused */
            rc = dlock__fail(rc, "fenced %s on '%.*s' (or its guard %s): %s", cmd,
                             (int)(klen > 200 ? 200 : klen), argv[1], guard, res.text);
        free(guard);
        return rc;
    }
    int written = 0;
    const redisReply *value = NULL;
    uint64_t highest = 0;
    if (dlock__reply_fence(r, &written, &value, &highest) != DLOCK_OK) {
        freeReplyObject(r);
        free(guard);
        return dlock__fail(DLOCK_EPROTO, "unexpected reply to a fenced write");
    }
    if (!written) {
        freeReplyObject(r);
        rc = dlock__fail(DLOCK_EFENCED, "fenced %s on '%.*s' refused: token %llu is lower than "
                                        "%llu, the highest its guard %s has seen (a newer "
                                        "holder wrote)", cmd, (int)(klen > 200 ? 200 : klen),
                         argv[1], (unsigned long long)token, (unsigned long long)highest, guard);
        free(guard);
        return rc;
    }
    free(guard);
    char *text = NULL;
    size_t tlen = 0;
    rc = reply && reply_len ? reply_text(value, &text, &tlen) : DLOCK_OK;
    freeReplyObject(r);
    if (rc == DLOCK_EPROTO)
        return dlock__fail(rc, "unexpected reply to a fenced %s (it was written)", cmd);
    if (rc != DLOCK_OK)
        return rc;
    if (reply) {
        *reply = text;
        *reply_len = tlen;
    }
    return DLOCK_OK;
}

int dlock_fence_set(dlock_client *c, uint64_t token, const char *key, const char *value,
                    size_t vlen, int64_t px_ms)
{
    if (!value || px_ms < 0) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, !value ? "value is NULL"
                                                : "px_ms %lld: use 0 (no expiry) or a positive TTL",
                           (long long)px_ms);
    }
    char px[24];
    const char *av[] = {"SET", key, value, "PX", px};
    size_t lens[] = {3, key ? strlen(key) : 0, vlen, 2, 0};
    lens[4] = dlock__fmt_i64(px, px_ms);
    return dlock_fence_command(c, token, px_ms > 0 ? 5 : 3, av, key ? lens : NULL, NULL, NULL);
}

/* A fenced command whose answer is an integer (DEL, INCRBY): into *value
 * when the call succeeds (0 for no answer). */
static int fence_integer(dlock_client *c, uint64_t token, int argc, const char *const *argv,
                         int64_t *value)
{
    char *out = NULL;
    size_t n = 0;
    int rc = dlock_fence_command(c, token, argc, argv, NULL, &out, &n);
    if (rc == DLOCK_OK)
        *value = out ? strtoll(out, NULL, 10) : 0;
    free(out);
    return rc;
}

int dlock_fence_del(dlock_client *c, uint64_t token, const char *key, int *deleted)
{
    const char *av[] = {"DEL", key};
    int64_t n = 0;
    int rc = fence_integer(c, token, 2, av, &n);
    if (rc == DLOCK_OK && deleted)
        *deleted = n == 1;
    return rc;
}

int dlock_fence_incrby(dlock_client *c, uint64_t token, const char *key, int64_t by,
                       int64_t *value)
{
    char num[24];
    dlock__fmt_i64(num, by);
    const char *av[] = {"INCRBY", key, num};
    int64_t v = 0;
    int rc = fence_integer(c, token, 3, av, &v);
    if (rc == DLOCK_OK && value)
        *value = v;
    return rc;
}

int dlock_fence_guard(dlock_client *c, const char *key, uint64_t *highest)
{
    dlock__clear_error();
    if (!c || !key || !*key || !highest)
        return dlock__fail(DLOCK_EINVAL, "client, key or out-parameter is NULL (or the key empty)");
    size_t glen;
    char *guard;
    int rc = guard_key(key, strlen(key), &guard, &glen);
    if (rc != DLOCK_OK)
        return rc;
    const char *av[] = {"GET", guard};
    size_t lens[] = {3, glen};
    dlock__req req = {.script = -1, .argc = 2, .argv = av, .lens = lens,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r = NULL;
    rc = dlock__call(c, &req, &r);
    if (rc == DLOCK_OK) {
        uint64_t h = 0;
        if (r->type == REDIS_REPLY_STRING) {
            char *end;
            h = strtoull(r->str, &end, 10);
            if (*end || r->len == 0)
                rc = dlock__fail(DLOCK_EWRONGTYPE, "guard %s holds '%.40s', not a token", guard,
                                 r->str);
        } else if (r->type != REDIS_REPLY_NIL) {
            rc = dlock__fail(DLOCK_EPROTO, "unexpected reply reading guard %s", guard);
        }
        if (rc == DLOCK_OK)
            *highest = h;
        freeReplyObject(r);
    }
    free(guard);
    return rc;
}
