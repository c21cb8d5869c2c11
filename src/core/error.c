/* Status codes, their text, and the calling thread's detailed message. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

#define MSG_MAX 512

/* Thread-local: concurrent calls on one client each keep their own message. */
static _Thread_local char tls_msg[MSG_MAX];

static const struct {
    int code;
    const char *name;
    const char *text;
} codes[] = {
    {DLOCK_OK, "DLOCK_OK", "success"},
    {DLOCK_EINVAL, "DLOCK_EINVAL", "invalid argument"},
    {DLOCK_ENOMEM, "DLOCK_ENOMEM", "out of memory"},
    {DLOCK_ETIMEDOUT, "DLOCK_ETIMEDOUT", "lock not acquired within the wait"},
    {DLOCK_ENOTOWNER, "DLOCK_ENOTOWNER", "lock not held by the caller"},
    {DLOCK_ECANCELED, "DLOCK_ECANCELED", "wait cancelled"},
    {DLOCK_ECONN, "DLOCK_ECONN", "cannot reach Redis"},
    {DLOCK_ECMDTIMEOUT, "DLOCK_ECMDTIMEOUT", "Redis did not answer in time"},
    {DLOCK_EREDIS, "DLOCK_EREDIS", "Redis returned an error"},
    {DLOCK_EWRONGTYPE, "DLOCK_EWRONGTYPE", "key holds a value that is not this kind of lock"},
    {DLOCK_EPROTO, "DLOCK_EPROTO", "unexpected reply from Redis"},
    {DLOCK_EAUTH, "DLOCK_EAUTH", "authentication or database selection refused"},
    {DLOCK_ECLOSED, "DLOCK_ECLOSED", "client is closing"},
    {DLOCK_ENAMETOOLONG, "DLOCK_ENAMETOOLONG", "name too long"},
    {DLOCK_ESYS, "DLOCK_ESYS", "system call failed"},
    {DLOCK_EUNKNOWN, "DLOCK_EUNKNOWN", "outcome unknown: request sent, no answer"},
    {DLOCK_EDEADLK, "DLOCK_EDEADLK", "never granted: the caller holds the read lock"},
    {DLOCK_ETLS, "DLOCK_ETLS", "TLS handshake or certificate refused"},
    {DLOCK_EREPLICAS, "DLOCK_EREPLICAS", "too few replicas acknowledged the acquisition"},
    {DLOCK_EFENCED, "DLOCK_EFENCED", "fenced write refused: a newer token has written"},
};

const char *dlock_strerror(int code)
{
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(codes); i++)
        if (codes[i].code == code)
            return codes[i].text;
    return "unknown dlock status";
}

const char *dlock_errname(int code)
{
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(codes); i++)
        if (codes[i].code == code)
            return codes[i].name;
    return "DLOCK_E?";
}

const char *dlock_last_error(void) { return tls_msg; }

const char *dlock_version(void) { return DLOCK_VERSION_STRING; }

void dlock__clear_error(void) { tls_msg[0] = '\0'; }

int dlock__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof(tls_msg), fmt, ap);
    va_end(ap);
    return code;
}

void dlock__log(const dlock_config *cfg, dlock_log_level lvl, const char *fmt, ...)
{
    if (!cfg || !cfg->log_fn || lvl > cfg->log_level)
        return;
    char buf[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    cfg->log_fn(lvl, buf, cfg->log_ud);
}

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

int dlock__redis_redirected(const char *text)
{
    return text && (has_prefix(text, "MOVED ") || has_prefix(text, "ASK ") ||
                    has_prefix(text, "READONLY") || has_prefix(text, "CLUSTERDOWN"));
}

int dlock__redis_error_code(const char *text)
{
    if (!text)
        return DLOCK_EREDIS;
    if (has_prefix(text, "WRONGTYPE"))
        return DLOCK_EWRONGTYPE;
    /* dlock's own scripts refuse an argument this way (no Redis error starts so). */
    if (has_prefix(text, "EINVAL "))
        return DLOCK_EINVAL;
    if (has_prefix(text, "NOAUTH") || has_prefix(text, "WRONGPASS") ||
        has_prefix(text, "NOPERM") || strstr(text, "invalid password") ||
        strstr(text, "DB index is out of range"))
        return DLOCK_EAUTH;
    return DLOCK_EREDIS;
}
