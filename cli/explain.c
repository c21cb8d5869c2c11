/* The library's failures in the command's words: what a key holds when it
 * is not what a command wants ("key 'k' holds a string, not a lock", the same
 * line from every command), a MOVED answer to a plain redis:// URL, a connect
 * timeout named by the option that sets it. */
#include <string.h>

#include "cli.h"

/* "a lock", "a read-write lock", ... for a snapshot's kind. */
static const char *kind_noun(int kind)
{
    switch (kind) {
    case DLOCK_KIND_LOCK:
        return "a lock";
    case DLOCK_KIND_RWLOCK:
        return "a read-write lock";
    case DLOCK_KIND_COUNT:
        return "a count (a semaphore's or a latch's)";
    case DLOCK_KIND_PERMITS:
        return "a permit semaphore";
    case DLOCK_KIND_RATE:
        return "a rate limiter";
    default:
        return "nothing";
    }
}

/* What a snapshot's key holds, as a phrase: its kind's, or for other data
 * the Redis type the library names ("a list", "a hash of other fields"),
 * followed by ", not a lock" in the messages: said once. */
static void holds_what(const dlock_info *info, char *what, size_t size)
{
    const char *type = dlock_info_redis_type(info);
    if (dlock_info_kind(info) != DLOCK_KIND_OTHER)
        snprintf(what, size, "%s", kind_noun((int)dlock_info_kind(info)));
    else if (strcmp(type, "hash") == 0)
        snprintf(what, size, "a hash of other fields");
    else
        snprintf(what, size, "a %s", type);
}

int cli_key_kind(dlock_client *c, const char *name, char *what, size_t size)
{
    dlock_info *info = NULL;
    if (dlock_client_inspect(c, name, &info) != DLOCK_OK) {
        snprintf(what, size, "?");
        return -2;
    }
    int kind = (int)dlock_info_kind(info);
    holds_what(info, what, size);
    dlock_info_free(info);
    return kind == DLOCK_KIND_OTHER ? -1 : kind;
}

int cli_not_other(const cli_opts *o, const dlock_info *info, const char *want_noun)
{
    if (dlock_info_kind(info) != DLOCK_KIND_OTHER)
        return 0;
    char what[120], nm[200];
    holds_what(info, what, sizeof(what));
    cli_err(o, "key '%s' holds %s, not %s", cli_esc(dlock_info_name(info), nm, sizeof(nm)), what,
            want_noun);
    return 1;
}

int cli_wrong_type(const cli_opts *o, dlock_client *c, const char *name, int want,
                   const char *want_noun)
{
    char what[120], nm[200];
    int kind = cli_key_kind(c, name, what, sizeof(what));
    if (kind == want || kind == DLOCK_KIND_NONE || kind == -2)
        return 0;   /* not this name (or it changed meanwhile) */
    cli_err(o, "key '%s' holds %s, not %s", cli_esc(name, nm, sizeof(nm)), what, want_noun);
    return 1;
}

int cli_fail_key(const cli_opts *o, dlock_client *c, int rc, const char *what, const char *name,
                 int want, const char *want_noun)
{
    if (rc == DLOCK_EWRONGTYPE && cli_wrong_type(o, c, name, want, want_noun))
        return EXIT_DATAERR;
    return cli_fail(o, rc, what);
}

/* 1 when the URL's scheme reaches one server, not a cluster. */
static int single_server_url(const char *url)
{
    return strncmp(url, "redis://", 8) == 0 || strncmp(url, "rediss://", 9) == 0 ||
           strncmp(url, "unix://", 7) == 0;
}

const char *cli_detail(const cli_opts *o, const char *detail, char *buf, size_t size)
{
    char d[32];
    if ((strstr(detail, "MOVED ") || strstr(detail, "ASK ")) && single_server_url(o->url)) {
        snprintf(buf, size, "%s: this server is a node of a Redis Cluster: give every node's "
                            "address as --url %s://HOST:PORT", detail,
                 strncmp(o->url, "rediss://", 9) == 0 ? "rediss-cluster" : "redis-cluster");
    } else if (strstr(detail, "within the connect timeout")) {
        int64_t t = cli_connect_timeout(o);
        int64_t ct = o->connect_timeout_ms ? o->connect_timeout_ms : CLI_CONNECT_TIMEOUT_MS;
        snprintf(buf, size, "%s of %s (%s)", detail, cli_fmt_duration(t, d, sizeof(d)),
                 t < ct ? "the command's -w wait, which bounds it" : "--connect-timeout");
    } else {
        snprintf(buf, size, "%s", detail);
    }
    return buf;
}
