/* A holder's note beside its hold (dlock_client_set_note, dlock_client_note):
 * {name}:dlock_note:<owner>, a string with the hold's TTL. */
#include <stdlib.h>
#include <string.h>

#include "sync/inspect.h"

/* The key of owner's note on name (*key malloc'd, *len), after checking
 * both. DLOCK_OK or the error. */
static int note_key(const char *name, const char *owner, char **key, size_t *len)
{
    size_t nlen, olen = owner ? strlen(owner) : 0;
    int rc = dlock__check_name(name, &nlen);
    if (rc != DLOCK_OK)
        return rc;
    if (olen == 0 || olen > DLOCK_OWNER_MAX)
        return dlock__fail(DLOCK_EINVAL, "a note's owner is 1 to %d bytes", DLOCK_OWNER_MAX);
    char tail[sizeof(DLOCK__NOTE_TAG) + DLOCK_OWNER_MAX];
    snprintf(tail, sizeof(tail), DLOCK__NOTE_TAG "%s", owner);
    *key = dlock__suffixed(name, nlen, tail, len);
    return *key ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
}

int dlock_client_set_note(dlock_client *c, const char *name, const char *owner, const char *text,
                          size_t len, int64_t ttl_ms)
{
    dlock__clear_error();
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    if (text && (len > DLOCK_NOTE_MAX || ttl_ms <= 0))
        return dlock__fail(DLOCK_EINVAL, "a note holds at most %d bytes and needs a TTL above 0 "
                                         "(%zu bytes, TTL %lld ms)", DLOCK_NOTE_MAX, len,
                           (long long)ttl_ms);
    size_t klen;
    char *key;
    int rc = note_key(name, owner, &key, &klen);
    if (rc != DLOCK_OK)
        return rc;
    char px[24];
    const char *av[] = {text ? "SET" : "DEL", key, text, "PX", px};
    size_t lens[] = {3, klen, len, 2, 0};
    lens[4] = (size_t)snprintf(px, sizeof(px), "%lld", (long long)ttl_ms);
    /* One try: a note is best effort, written again within its TTL; a
     * server gone must not hold up whoever ends a hold. */
    dlock__req req = {.script = -1, .argc = text ? 5 : 2, .argv = av, .lens = lens,
                      .flags = DLOCK__CALL_IDEMPOTENT | DLOCK__CALL_NO_RETRY};
    redisReply *r;
    rc = dlock__call(c, &req, &r);
    free(key);
    if (rc == DLOCK_OK)
        freeReplyObject(r);
    return rc;
}

int dlock_client_note(dlock_client *c, const char *name, const char *owner, char **text,
                      size_t *len)
{
    dlock__clear_error();
    if (!c || !text)
        return dlock__fail(DLOCK_EINVAL, "client or text is NULL");
    *text = NULL;
    if (len)
        *len = 0;
    size_t klen;
    char *key;
    int rc = note_key(name, owner, &key, &klen);
    if (rc != DLOCK_OK)
        return rc;
    const char *av[] = {"GET", key};
    size_t lens[] = {3, klen};
    dlock__req req = {.script = -1, .argc = 2, .argv = av, .lens = lens,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    rc = dlock__call(c, &req, &r);
    free(key);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type == REDIS_REPLY_STRING) {
        if (!(*text = dlock__strndup(r->str, r->len)))
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        else if (len)
            *len = r->len;
    }
    freeReplyObject(r);
    return rc;
}
