/* Redisson's naming of keys and channels, and the checks every name and
 * owner id passes. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

char *dlock__prefixed(const char *prefix, const char *name, size_t nlen, const char *tail,
                      size_t *out_len)
{
    int tagged = memchr(name, '{', nlen) != NULL;
    size_t plen = strlen(prefix), tl = strlen(tail);
    size_t len = plen + 1 + nlen + (tagged ? 0 : 2) + tl;
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    char *p = s;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, nlen);
    p += nlen;
    if (!tagged)
        *p++ = '}';
    memcpy(p, tail, tl);
    p += tl;
    *p = '\0';
    *out_len = len;
    return s;
}

char *dlock__suffixed(const char *name, size_t nlen, const char *tail, size_t *out_len)
{
    int tagged = memchr(name, '{', nlen) != NULL;
    size_t tl = strlen(tail);
    size_t len = nlen + (tagged ? 0 : 2) + 1 + tl;
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    char *p = s;
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, nlen);
    p += nlen;
    if (!tagged)
        *p++ = '}';
    *p++ = ':';
    memcpy(p, tail, tl + 1);
    *out_len = len;
    return s;
}

/* A byte string of 1..max bytes: DLOCK_EINVAL when NULL or empty,
 * DLOCK_ENAMETOOLONG above max; `what` names it in the message. */
static int check_bytes(const char *s, size_t max, const char *what, size_t *len)
{
    if (!s)
        return dlock__fail(DLOCK_EINVAL, "%s is NULL", what);
    size_t n = strnlen(s, max + 1);
    if (n == 0)
        return dlock__fail(DLOCK_EINVAL, "%s is empty", what);
    if (n > max)
        return dlock__fail(DLOCK_ENAMETOOLONG, "%s is longer than %zu bytes", what, max);
    *len = n;
    return DLOCK_OK;
}

int dlock__check_name(const char *name, size_t *len)
{
    return check_bytes(name, DLOCK_NAME_MAX, "lock name", len);
}

int dlock__get_args(const dlock_client *c, const char *name, const void *out, size_t *nlen)
{
    dlock__clear_error();
    if (!out)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    return dlock__check_name(name, nlen);
}

int dlock__check_owner(const char *owner, size_t *len)
{
    int rc = check_bytes(owner, DLOCK_OWNER_MAX, "owner id", len);
    /* Every client, Redisson's too, tells a lock's hash from other data by
     * fields of the form "<id>:<n>": an owner without ':' would make the lock
     * it holds look like somebody's hash to all the others. */
    if (rc == DLOCK_OK && !memchr(owner, ':', *len))
        rc = dlock__fail(DLOCK_EINVAL, "owner id '%.64s' has no ':' (the form is <id>:<n>, as "
                                       "dlock_client_new_owner_id makes)", owner);
    return rc;
}
