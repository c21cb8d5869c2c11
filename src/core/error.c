/* Status codes, their text, and the calling thread's detailed message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

/* Thread-local: concurrent calls on one client each keep their own message.
 * The C API's one channel (dlock_last_error); a failure inside is written
 * into the result it belongs to (dlock__err_into). */
static _Thread_local char tls_msg[DLOCK__MSG_MAX];
static _Thread_local dlock__errto tls_to;
/* The cause of the loss a lost callback on this thread is reporting. */
static _Thread_local dlock_lost_cause tls_cause;

void dlock__set_lost_cause(dlock_lost_cause cause) { tls_cause = cause; }

dlock_lost_cause dlock_last_lost_cause(void) { return tls_cause; }

void dlock__lost_call(const dlock__lost_cb *cb, const char *name, const char *owner,
                      dlock_lost_reason reason, dlock_lost_cause cause)
{
    dlock_lost_cause was = tls_cause;
    tls_cause = cause;
    if (cb->cfn)
        cb->cfn(name, owner, reason, cause, cb->ud);
    else if (cb->fn)
        cb->fn(name, owner, reason, cb->ud);
    tls_cause = was;
}

const char *dlock_lost_cause_str(dlock_lost_cause cause)
{
    static const char *const words[] = {
        [DLOCK_CAUSE_UNKNOWN] = "gone",         [DLOCK_CAUSE_EVICTED] = "evicted",
        [DLOCK_CAUSE_EXPIRED] = "expired",      [DLOCK_CAUSE_DELETED] = "deleted by another client",
        [DLOCK_CAUSE_FLUSHED] = "flushed",      [DLOCK_CAUSE_FAILOVER] = "failover",
        [DLOCK_CAUSE_UNREACHABLE] = "unreachable", [DLOCK_CAUSE_PAUSED] = "paused",
        [DLOCK_CAUSE_REPLICAS] = "replicas",    [DLOCK_CAUSE_MAX_HOLD] = "max hold",
        [DLOCK_CAUSE_CLOCK_JUMP] = "server clock jumped"};
    if ((unsigned)cause >= sizeof(words) / sizeof(words[0]))
        return words[0];
    return words[cause];
}

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
    {DLOCK_EREENTRY, "DLOCK_EREENTRY", "non-reentrant lock already held by the caller"},
    {DLOCK_ENOTFOUND, "DLOCK_ENOTFOUND", "object not set up (a rate limiter without a rate)"},
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

dlock__errto dlock__err_into(char *buf, size_t size)
{
    dlock__errto prev = tls_to;
    tls_to = (dlock__errto){buf, size};
    return prev;
}

void dlock__err_reset(dlock__errto prev) { tls_to = prev; }

static char *target(size_t *size)
{
    if (tls_to.buf) {
        *size = tls_to.size;
        return tls_to.buf;
    }
    *size = sizeof(tls_msg);
    return tls_msg;
}

void dlock__clear_error(void)
{
    size_t size;
    char *buf = target(&size);
    if (size)
        buf[0] = '\0';
}

int dlock__fail(int code, const char *fmt, ...)
{
    size_t size;
    char *buf = target(&size);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return code;
}

void dlock__aside_begin(dlock__aside *a)
{
    a->msg[0] = '\0';
    a->prev = dlock__err_into(a->msg, sizeof(a->msg));
}

int dlock__aside_end(dlock__aside *a, int code)
{
    dlock__err_reset(a->prev);
    return code;
}

void dlock__log(const dlock_config *cfg, dlock_log_level lvl, const char *fmt, ...)
{
    if (!cfg || !cfg->log_fn || lvl > cfg->log_level)
        return;
    char buf[DLOCK__MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    cfg->log_fn(lvl, buf, cfg->log_ud);
}

/* --------------------------------------------------------- Redis refusals */

/* An error reply starts with its kind, one upper-case word (Redis's own:
 * "-WRONGTYPE ...", "-MOVED 3999 host:port"; the scripts' error_reply
 * keeps the form). Reading that word, and the few texts whose kind is
 * "ERR" or NOPERM, happens here only: every other place decides on the
 * class. */
static int first_word(const char *s, const char *w)
{
    size_t n = strlen(w);
    return strncmp(s, w, n) == 0 && (s[n] == ' ' || s[n] == '\0');
}

dlock__rerr dlock__redis_classify(const char *text)
{
    static const struct {
        const char *word;
        dlock__rerr kind;
    } words[] = {
        {"NOSCRIPT", DLOCK__RERR_NOSCRIPT},     {"MOVED", DLOCK__RERR_MOVED},
        {"ASK", DLOCK__RERR_ASK},               {"READONLY", DLOCK__RERR_READONLY},
        {"CLUSTERDOWN", DLOCK__RERR_CLUSTERDOWN}, {"TRYAGAIN", DLOCK__RERR_TRYAGAIN},
        {"LOADING", DLOCK__RERR_LOADING},       {"BUSY", DLOCK__RERR_BUSY},
        {"MASTERDOWN", DLOCK__RERR_MASTERDOWN}, {"WRONGTYPE", DLOCK__RERR_WRONGTYPE},
        /* dlock's own scripts refuse an argument this way (no Redis error
         * starts so). */
        {"EINVAL", DLOCK__RERR_ARG},            {"NOAUTH", DLOCK__RERR_AUTH},
        {"WRONGPASS", DLOCK__RERR_AUTH},
        /* dlock's own words (core.h): the quarantine's refusal, a count's */
        {"DLOCKQUARANTINE", DLOCK__RERR_QUARANTINE},
        {"DLOCKOVERBOUND", DLOCK__RERR_OVER_BOUND},
        {"DLOCKOVERTOTAL", DLOCK__RERR_OVER_TOTAL},
        /* a non-reentrant lock's acquire scripts: the caller holds it */
        {"DLOCKREENTRY", DLOCK__RERR_REENTRY},
        /* a rate limiter's scripts: no rate set */
        {"DLOCKNOTFOUND", DLOCK__RERR_NOTFOUND},
    };
    if (!text)
        return DLOCK__RERR_OTHER;
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(words); i++)
        if (first_word(text, words[i].word))
            return words[i].kind;
    if (first_word(text, "NOPERM"))
        /* Redis 6.2: "... one of the keys used as arguments"; 7: "... a key". */
        return strstr(text, " key") ? DLOCK__RERR_NOPERM_KEY : DLOCK__RERR_NOPERM;
    if (first_word(text, "ERR")) {
        if (strncasecmp(text + 4, "unknown command", 15) == 0 ||
            strncasecmp(text + 4, "unknown subcommand", 18) == 0)
            return DLOCK__RERR_UNKNOWN_CMD;
        if (strstr(text, "invalid password") || strstr(text, "DB index is out of range"))
            return DLOCK__RERR_AUTH;
    }
    return DLOCK__RERR_OTHER;
}

int dlock__acl_reason_names(const char *reason)
{
    return reason && (strstr(reason, " key") || strstr(reason, " channel"));
}

int dlock__rerr_code(dlock__rerr e)
{
    switch (e) {
    case DLOCK__RERR_NONE:
        return DLOCK_OK;
    case DLOCK__RERR_WRONGTYPE:
        return DLOCK_EWRONGTYPE;
    case DLOCK__RERR_ARG:
        return DLOCK_EINVAL;
    case DLOCK__RERR_AUTH:
    case DLOCK__RERR_NOPERM:
    case DLOCK__RERR_NOPERM_KEY:
        return DLOCK_EAUTH;
    case DLOCK__RERR_QUARANTINE:
        return DLOCK_ETIMEDOUT;
    case DLOCK__RERR_REENTRY:
        return DLOCK_EREENTRY;
    case DLOCK__RERR_NOTFOUND:
        return DLOCK_ENOTFOUND;
    default:
        return DLOCK_EREDIS;
    }
}

const char *dlock__redis_error_detail(const char *text)
{
    const char *sp = text ? strchr(text, ' ') : NULL;
    return sp ? sp + 1 : "";
}

/* Removes s[from, to) from the string s. */
static void cut(char *s, size_t from, size_t to)
{
    memmove(s + from, s + to, strlen(s + to) + 1);
}

/* The length of "[@]user_script:[ ]<digits>: " at s, or 0. */
static size_t script_line_len(const char *s)
{
    const char *p = s + (*s == '@');
    if (strncmp(p, "user_script:", 12) != 0)
        return 0;
    p += 12;
    if (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p[0] != ':' || p[1] != ' ')
        return 0;
    return (size_t)(p + 2 - s);
}

void dlock__redis_error_text(const char *text, char *out, size_t size)
{
    if (size == 0)
        return;
    snprintf(out, size, "%s", text ? text : "");
    /* Redis 7: "<error> script: <sha>, on @user_script:<line>." ends a
     * command's error raised inside a script. */
    for (char *p = strstr(out, " script: "); p; p = strstr(p + 1, " script: ")) {
        const char *h = p + 9;
        size_t n = strspn(h, "0123456789abcdef");
        if (n == 40 && strncmp(h + n, ", on @user_script:", 18) == 0) {
            *p = '\0';
            break;
        }
    }
    /* Redis 6: "ERR Error running script (call to f_<sha>): @user_script:<line>: ". */
    char *e = strstr(out, "Error running script (call to f_");
    char *end = e ? strstr(e, "): ") : NULL;
    if (end)
        cut(out, (size_t)(e - out), (size_t)(end + 3 - out));
    /* A script's own error, and Redis 6's again: "user_script:<line>: ". */
    for (size_t i = 0; out[i];) {
        size_t n = script_line_len(out + i);
        if (n)
            cut(out, i, i + n);
        else
            i++;
    }
}

int dlock__redis_redirect_to(const char *text, char *host, size_t size, int *port)
{
    if (!first_word(text, "MOVED") && !first_word(text, "ASK"))
        return -1;
    const char *p = strchr(dlock__redis_error_detail(text), ' ');   /* past the slot */
    if (!p)
        return -1;
    p++;
    const char *colon = strrchr(p, ':');
    if (!colon || colon == p || (size_t)(colon - p) >= size)
        return -1;
    size_t hl = (size_t)(colon - p);
    if (p[0] == '[' && hl >= 2 && p[hl - 1] == ']') {   /* [ipv6]:port */
        p++;
        hl -= 2;
    }
    memcpy(host, p, hl);
    host[hl] = '\0';
    *port = atoi(colon + 1);
    return *port > 0 && *port <= 65535 ? 0 : -1;
}
