/* Redisson's naming of keys and channels, the handle every type starts
 * with, and the argument checks every type shares. */
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

size_t dlock__prefixed_to(char *dst, const char *prefix, const char *name, size_t nlen,
                          const char *tail)
{
    int tagged = memchr(name, '{', nlen) != NULL;
    size_t plen = strlen(prefix), tl = strlen(tail);
    size_t len = (plen ? plen + 1 : 0) + nlen + (tagged ? 0 : 2) + tl;
    if (!dst)
        return len;
    char *p = dst;
    if (plen) {
        memcpy(p, prefix, plen);
        p += plen;
        *p++ = ':';
    }
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, nlen);
    p += nlen;
    if (!tagged)
        *p++ = '}';
    memcpy(p, tail, tl);
    p += tl;
    *p = '\0';
    return len;
}

char *dlock__prefixed(const char *prefix, const char *name, size_t nlen, const char *tail,
                      size_t *out_len)
{
    size_t len = dlock__prefixed_to(NULL, prefix, name, nlen, tail);
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    *out_len = dlock__prefixed_to(s, prefix, name, nlen, tail);
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

char *dlock__braced(const char *prefix, const char *name, size_t nlen, size_t *out_len)
{
    size_t pl = strlen(prefix);
    char *s = malloc(pl + nlen + 3);
    if (!s)
        return NULL;
    memcpy(s, prefix, pl);
    s[pl] = '{';
    memcpy(s + pl + 1, name, nlen);
    memcpy(s + pl + 1 + nlen, "}", 2);
    *out_len = pl + nlen + 2;
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

/* ----------------------------------------------------------------- handle */

int dlock__handle_new(dlock_client *c, const char *name, const void *out, size_t size,
                      const char *what, const char *prefix, int braced, dlock__handle **h)
{
    *h = NULL;
    dlock__clear_error();
    if (!out)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    size_t nlen = 0;
    int rc = dlock__check_name(name, &nlen);
    if (rc != DLOCK_OK)
        return rc;
    dlock__handle *n = calloc(1, size);
    if (!n)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    n->c = c;
    atomic_init(&n->acks, -1);
    n->what = what;
    n->nlen = nlen;
    n->name = dlock__strndup(name, nlen);
    if (prefix)
        n->channel = braced ? dlock__braced(prefix, name, nlen, &n->clen)
                            : dlock__prefixed(prefix, name, nlen, "", &n->clen);
    if (!n->name || (prefix && !n->channel)) {
        dlock__handle_free(n);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *h = n;
    return DLOCK_OK;
}

void dlock__handle_free(dlock__handle *h)
{
    if (!h)
        return;
    free(h->name);
    free(h->channel);
    free(h);
}

/* ------------------------------------------------------------------ checks */

int dlock__check_handle(const void *h, const char *what)
{
    dlock__clear_error();
    return h ? DLOCK_OK : dlock__fail(DLOCK_EINVAL, "%s is NULL", what);
}

static int check_wait(int64_t wait_ms)
{
    if (wait_ms < DLOCK_WAIT_FOREVER)
        return dlock__fail(DLOCK_EINVAL,
                           "wait_ms %lld: use 0 (try once), a positive wait or "
                           "DLOCK_WAIT_FOREVER (-1)",
                           (long long)wait_ms);
    return DLOCK_OK;
}

int dlock__check_lease(int64_t lease_ms)
{
    if ((lease_ms != DLOCK_WATCHDOG && lease_ms <= 0) || lease_ms > (int64_t)1 << 50)
        return dlock__fail(DLOCK_EINVAL, "lease_ms %lld: use a positive lease (up to 2^50 ms) or "
                                         "DLOCK_WATCHDOG (0)",
                           (long long)lease_ms);
    return DLOCK_OK;
}

int dlock__check_opts(const dlock_wait_opts *o, unsigned takes, const char *what,
                      dlock_wait_opts *out)
{
    *out = o ? *o : (dlock_wait_opts){0};
    for (size_t i = 0; i < sizeof(out->reserved) / sizeof(out->reserved[0]); i++)
        if (out->reserved[i])
            return dlock__fail(DLOCK_EINVAL, "wait options: reserved[%zu] is %lld, must be 0", i,
                               (long long)out->reserved[i]);
    int rc = check_wait(out->wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (!(takes & DLOCK__TAKES_LEASE) && out->lease_ms != 0)
        return dlock__fail(DLOCK_EINVAL, "lease_ms %lld: %s has no lease, leave it 0",
                           (long long)out->lease_ms, what);
    if ((takes & DLOCK__TAKES_LEASE) &&
        !((takes & DLOCK__TAKES_NO_EXPIRY) && out->lease_ms == DLOCK_NO_EXPIRY) &&
        (rc = dlock__check_lease(out->lease_ms)) != DLOCK_OK)
        return rc;
    if (!(takes & DLOCK__TAKES_TOKEN) && out->token)
        return dlock__fail(DLOCK_EINVAL, "token: %s gives no fencing token, leave it NULL",
                           what);
    return DLOCK_OK;
}

int dlock__check_count(int64_t n, int64_t min, const char *what)
{
    if (n < min || n > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "%s %lld: use %lld..%lld", what, (long long)n,
                           (long long)min, (long long)DLOCK_COUNT_MAX);
    return DLOCK_OK;
}

int dlock__check_delta(int64_t delta)
{
    if (delta == 0 || delta < -DLOCK_COUNT_MAX || delta > DLOCK_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "permits to add %lld: use a non-zero change within "
                                         "+-%lld",
                           (long long)delta, (long long)DLOCK_COUNT_MAX);
    return DLOCK_OK;
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
