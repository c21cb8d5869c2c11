/* dlock_client_doctor: one pass over the deployment for what makes locks
 * unsafe (docs/cli.md, "dlock doctor"). Each primary is asked on its own: a
 * cluster's nodes may be configured apart. Every check is best effort: a
 * command the server or the ACL refuses turns the check into a note that
 * says it was not made, never into a failure of the whole pass. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sync/sync.h"

/* Keys examined per prefix and node (SCAN + TYPE each): enough to show a
 * pattern, bounded on a large keyspace. */
#define DOCTOR_KEYS_MAX 1000
/* Findings of foreign keys named per node and prefix; the rest counted. */
#define DOCTOR_KEYS_SHOWN 3

/* The clock drift allowed between nodes: RedLock's rule (1 % of the lease +
 * 2 ms) for the watchdog timeout, the longest lease a holder renews. */
static int64_t drift_ms(int64_t watchdog_ms) { return watchdog_ms / 100 + 2; }

typedef struct doctor {
    dlock_client *c;
    dlock__node *node;
    const char *addr;
    const char *name;          /* sample name for the ACL's key checks, or NULL */
    dlock_doctor_fn fn;
    void *ud;
    int worst;
} doctor;

static void say(doctor *d, dlock_doctor_level level, const char *check, const char *fix,
                const char *fmt, ...) DLOCK__PRINTF(5, 6);

static void say(doctor *d, dlock_doctor_level level, const char *check, const char *fix,
                const char *fmt, ...)
{
    char finding[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(finding, sizeof(finding), fmt, ap);
    va_end(ap);
    if ((int)level > d->worst)
        d->worst = (int)level;
    d->fn(level, d->addr, check, finding, fix, d->ud);
}

/* A check that could not be made: a warning naming the permission when the
 * ACL refused the command (the user could be given it; a check not made
 * must not read as healthy), a note when the server cannot answer it (a
 * managed service without the command). */
static void not_checked(doctor *d, int rc, const char *check, const char *perm,
                        const char *fmt, ...) DLOCK__PRINTF(5, 6);

static void not_checked(doctor *d, int rc, const char *check, const char *perm,
                        const char *fmt, ...)
{
    char what[400], fix[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (rc != DLOCK_EAUTH) {
        say(d, DLOCK_DOCTOR_NOTE, check, NULL, "%s", what);
        return;
    }
    snprintf(fix, sizeof(fix), "run dlock doctor as a user allowed %s (an administrator), or "
             "grant it to this one (docs/deployments.md says what it exposes)", perm);
    say(d, DLOCK_DOCTOR_WARN, check, fix, "%s; this user lacks %s (a check not made)",
        what, perm);
}

/* One command on the node. DLOCK_OK and *out (free it), else the status with
 * the refusal's text (or the failure's) in why. */
static int ask(doctor *d, int argc, const char **argv, redisReply **out, char *why, size_t wsize)
{
    dlock__req req = {.script = -1, .argc = argc, .argv = argv,
                      .flags = DLOCK__CALL_IDEMPOTENT};
    dlock__res res;
    dlock__res_init(&res);
    dlock__errto prev = dlock__err_into(why, wsize);
    int rc = dlock__node_call(d->node, &req, &res);
    dlock__err_reset(prev);
    *out = res.r;
    if (rc != DLOCK_OK && res.text[0])
        snprintf(why, wsize, "%s", res.text);   /* the refusal's words alone */
    return rc;
}

/* CONFIG GET of one parameter into buf: 1, 0 when refused (why says so,
 * *rc the status). */
static int config_get(doctor *d, const char *param, char *buf, size_t size, char *why,
                      size_t wsize, int *rc)
{
    const char *av[] = {"CONFIG", "GET", param};
    redisReply *r;
    if ((*rc = ask(d, 3, av, &r, why, wsize)) != DLOCK_OK)
        return 0;
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[1]->type == REDIS_REPLY_STRING;
    if (ok)
        snprintf(buf, size, "%s", r->element[1]->str);
    else
        snprintf(why, wsize, "CONFIG GET %s answered no value", param);
    freeReplyObject(r);
    return ok;
}

/* ------------------------------------------------------------ the checks */

static void check_eviction(doctor *d, const char *mem)
{
    char policy[48], maxmem[32];
    if (!dlock__info_field(mem, "maxmemory_policy", policy, sizeof(policy))) {
        say(d, DLOCK_DOCTOR_NOTE, "eviction", NULL, "INFO memory does not give the "
            "maxmemory-policy: not checked");
        return;
    }
    if (strcmp(policy, "noeviction") == 0)
        return;
    const char *fix = "CONFIG SET maxmemory-policy noeviction (and maxmemory-policy "
                      "noeviction in redis.conf): a full server then refuses writes, and "
                      "acquisitions fail, instead of dropping held locks";
    const char *which = strncmp(policy, "volatile-", 9) == 0
                            ? "evicts keys with a TTL (every held lock has one)"
                            : "evicts any key, held locks included";
    if (dlock__info_field(mem, "maxmemory", maxmem, sizeof(maxmem)) && strcmp(maxmem, "0") == 0)
        say(d, DLOCK_DOCTOR_WARN, "eviction", fix,
            "maxmemory-policy is %s, which %s, once a maxmemory is set (none is now)", policy,
            which);
    else
        say(d, DLOCK_DOCTOR_UNSAFE, "eviction", fix,
            "maxmemory-policy is %s: when memory is full Redis %s, and an evicted lock is free "
            "to the next caller while its holder goes on", policy, which);
}

static void check_persistence(doctor *d, const char *info)
{
    char aof[8], slaves[16], save[256], why[256];
    if (!dlock__info_field(info, "aof_enabled", aof, sizeof(aof)) ||
        !dlock__info_field(info, "connected_slaves", slaves, sizeof(slaves))) {
        say(d, DLOCK_DOCTOR_NOTE, "persistence", NULL, "INFO does not give aof_enabled and "
            "connected_slaves: not checked");
        return;
    }
    if (strcmp(aof, "1") == 0 || atoi(slaves) > 0)
        return;
    int rc;
    if (!config_get(d, "save", save, sizeof(save), why, sizeof(why), &rc)) {
        not_checked(d, rc, "persistence", "+config|get", "append-only file off and no replica; "
                    "RDB snapshots not known (%s)", why);
        return;
    }
    const char *fix = "appendonly yes (appendfsync always loses no grant), or replicas "
                      "with min-replicas-to-write and replica acknowledgement";
    if (save[0] == '\0')
        say(d, DLOCK_DOCTOR_WARN, "persistence", fix,
            "persistence is off (no append-only file, no RDB snapshots) and there is no "
            "replica: a restart forgets every held lock while its holders go on");
    else
        say(d, DLOCK_DOCTOR_WARN, "persistence", fix,
            "no append-only file and no replica, RDB snapshots only (save %s): a restart "
            "forgets the locks taken since the last snapshot while their holders go on", save);
}

static void check_replicas(doctor *d, const char *info)
{
    char buf[32], why[256];
    int wanted = d->c->cfg.ack_replicas;
    const char *av[] = {"WAIT", "0", "0"};
    redisReply *r;
    int rc = ask(d, 3, av, &r, why, sizeof(why));
    if (rc == DLOCK_OK)
        freeReplyObject(r);
    if (rc != DLOCK_OK && wanted > 0) {
        say(d, DLOCK_DOCTOR_WARN, "wait", "allow WAIT (+wait in the ACL rule; a managed "
            "service may not offer it) or turn replica acknowledgement off",
            "WAIT is refused (%s): with replica acknowledgement on, every acquisition fails",
            why);
    } else if (rc != DLOCK_OK) {
        say(d, DLOCK_DOCTOR_NOTE, "wait", NULL, "WAIT is refused (%s): replica "
            "acknowledgement (dlock_config_set_replica_ack) cannot be used here", why);
    }
    if (wanted <= 0)
        return;
    if (dlock__info_field(info, "connected_slaves", buf, sizeof(buf)) && atoi(buf) < wanted)
        say(d, DLOCK_DOCTOR_WARN, "replicas", "add replicas, or ask for fewer acknowledgements",
            "%d replica(s) connected, fewer than the %d acknowledgements asked for: "
            "acquisitions fail", atoi(buf), wanted);
    if (!config_get(d, "min-replicas-to-write", buf, sizeof(buf), why, sizeof(why), &rc)) {
        not_checked(d, rc, "replicas", "+config|get", "min-replicas-to-write not known (%s)",
                    why);
        return;
    }
    if (atoi(buf) == 0)
        say(d, DLOCK_DOCTOR_WARN, "replicas",
            "CONFIG SET min-replicas-to-write N (and min-replicas-max-lag 10)",
            "min-replicas-to-write is 0: a primary cut off from its replicas goes on granting "
            "locks that a failover then forgets, WAIT only tells afterwards");
}

/* TIME against this host's clock, the round trip's middle as the instant. */
static void check_clock(doctor *d)
{
    char why[256];
    const char *av[] = {"TIME"};
    redisReply *r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    int rc = ask(d, 1, av, &r, why, sizeof(why));
    clock_gettime(CLOCK_REALTIME, &t1);
    if (rc != DLOCK_OK) {
        not_checked(d, rc, "clock", "+time", "TIME refused (%s): clock not compared", why);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        say(d, DLOCK_DOCTOR_NOTE, "clock", NULL, "unexpected answer to TIME: not compared");
        return;
    }
    int64_t server_us = strtoll(r->element[0]->str, NULL, 10) * 1000000 +
                        strtoll(r->element[1]->str, NULL, 10);
    freeReplyObject(r);
    int64_t a = (int64_t)t0.tv_sec * 1000000 + t0.tv_nsec / 1000;
    int64_t b = (int64_t)t1.tv_sec * 1000000 + t1.tv_nsec / 1000;
    const int64_t off_us = server_us - (a + b) / 2, rtt_us = b - a;
    int64_t off_ms = off_us / 1000;
    int64_t allowance = drift_ms(d->c->cfg.watchdog_ms);
    int64_t abs_off = off_ms < 0 ? -off_ms : off_ms;
    if (abs_off > allowance + rtt_us / 2000)
        say(d, DLOCK_DOCTOR_WARN, "clock",
            "run NTP (chrony, systemd-timesyncd) on the server and the clients",
            "the server's clock is %" PRId64 " ms %s this host's (round trip %.1f ms), beyond "
            "the drift allowance of %" PRId64 " ms (1%% of the watchdog timeout + 2 ms): "
            "fencing tokens, multi-lock validity and hold ages disagree between nodes",
            abs_off, off_ms > 0 ? "ahead of" : "behind", (double)rtt_us / 1000, allowance);
    else   /* the offset, for the record: the clocks can be compared across nodes */
        say(d, DLOCK_DOCTOR_NOTE, "clock", NULL,
            "offset %+.2f ms from this host's clock (server TIME against the round trip's "
            "middle; round trip %.2f ms), within the drift allowance of %" PRId64 " ms",
            (double)off_us / 1000, (double)rtt_us / 1000, allowance);
}

/* The commands a lock, its wake-ups and its renewals need, as the family
 * sends them (the scripts' own calls included: Redis checks each against
 * the user's rule). KEY and CHAN stand for the sample name's key and
 * channel. */
static const char *const acl_probes[][5] = {
    {"ping"},
    {"script", "load", "return 1"},
    {"evalsha", "0000000000000000000000000000000000000000", "1", "KEY"},
    {"subscribe", "CHAN"},
    {"hincrby", "KEY", "o", "1"},
    {"hexists", "KEY", "o"},
    {"pexpire", "KEY", "1"},
    {"pttl", "KEY"},
    {"del", "KEY"},
    {"publish", "CHAN", "0"},
    {"incr", "TOKEN"},
    {"time"},
};

/* ACL DRYRUN of each probe as the connection's user (Redis 7). A user who
 * may not ask (no +acl) gets a note. */
static void check_acl(doctor *d)
{
    char why[256], user[128];
    const char *who[] = {"ACL", "WHOAMI"};
    redisReply *r;
    int rc = ask(d, 2, who, &r, why, sizeof(why));
    if (rc != DLOCK_OK) {
        not_checked(d, rc, "acl", "+acl|whoami and +acl|dryrun", "ACL WHOAMI refused (%s): "
                    "the permissions locks need were not checked", why);
        return;
    }
    int ok = (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
             r->len < sizeof(user);
    if (ok)
        memcpy(user, r->str, r->len + 1);
    freeReplyObject(r);
    if (!ok)
        return;
    const char *name = d->name ? d->name : "dlock-doctor";
    size_t nlen = strlen(name);
    const char *key = name;
    size_t len;
    char *chan = dlock__prefixed("redisson_lock__channel", name, nlen, "", &len);
    char *token = dlock__prefixed("redisson_lock_token", name, nlen, "", &len);
    if (!chan || !token) {
        free(chan), free(token);
        say(d, DLOCK_DOCTOR_NOTE, "acl", NULL, "out of memory: permissions not checked");
        return;
    }
    char missing[400] = "";
    size_t used = 0, nmissing = 0;
    int dryrun_refused = 0;
    for (size_t i = 0; i < sizeof(acl_probes) / sizeof(acl_probes[0]) && !dryrun_refused; i++) {
        const char *av[8] = {"ACL", "DRYRUN", user};
        int ac = 3;
        for (int k = 0; k < 5 && acl_probes[i][k]; k++) {
            const char *a = acl_probes[i][k];
            av[ac++] = strcmp(a, "KEY") == 0 ? key : strcmp(a, "CHAN") == 0 ? chan
                     : strcmp(a, "TOKEN") == 0 ? token : a;
        }
        if ((rc = ask(d, ac, av, &r, why, sizeof(why))) != DLOCK_OK) {
            not_checked(d, rc, "acl", "+acl|dryrun", "ACL DRYRUN refused (%s): the "
                        "permissions locks need were not checked", why);
            dryrun_refused = 1;
            break;
        }
        /* "OK", or the reason as a bulk string. */
        if (r->type == REDIS_REPLY_STRING && r->len && !(r->len == 2 && !memcmp(r->str, "OK", 2))) {
            /* Without a sample name only the commands count: the made-up
             * key says nothing of the application's names. */
            int about_names = dlock__acl_reason_names(r->str);
            if (d->name || !about_names) {
                nmissing++;
                int n = snprintf(missing + used, sizeof(missing) - used, "%s%s%s",
                                 used ? ", " : "", acl_probes[i][0],
                                 about_names ? " (its key or channel)" : "");
                if (n > 0 && (size_t)n < sizeof(missing) - used)
                    used += (size_t)n;
            }
        }
        freeReplyObject(r);
    }
    if (nmissing)
        say(d, DLOCK_DOCTOR_WARN, "acl", "apply docs/acl-rule.txt (docs/deployments.md, \"A "
            "least-privilege ACL\") to the user",
            "user %s may not run what locks need: %s%s%s: those calls fail with NOPERM", user,
            missing, d->name ? " for " : "", d->name ? name : "");
    free(chan), free(token);
}

/* Companion keys of the family and the type each must have. */
static const struct {
    const char *prefix;
    const char *type;
    const char *what;
} companions[] = {
    {"redisson_lock_token:", "string", "fencing token counter"},
    {"redisson_unlock_latch:", "string", "unlock retry latch"},
    {"redisson_lock_queue:", "list", "fair-lock queue"},
    {"redisson_lock_timeout:", "zset", "fair-lock deadlines"},
    {"dlock_lock_next:", "string", "reserved next turn"},
    {"dlock_lock_delay:", "string", "lock-delay marker"},
    {"dlock_read_delay:", "zset", "read holds' lock-delay"},
    {"dlock_permit_delay:", "zset", "permits' lock-delay"},
    {"dlock_election:", "hash", "election record"},
    {"dlock_fence:", "string", "fenced-write guard"},
};

/* A key name for a message: bytes outside printable ASCII as '?', cut with
 * "..." when longer than buf (size >= 8). */
static void printable(const char *s, size_t n, char *buf, size_t size)
{
    size_t room = size - 1, i = 0;
    int cut = n > room;
    if (cut)
        room -= 3;
    for (; i < n && i < room; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e ? '?' : s[i];
    if (cut) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
}

typedef struct foreign {
    size_t seen, found, hidden;
    char shown[DOCTOR_KEYS_SHOWN][160];
} foreign;

/* SCAN MATCH pattern on the node, each key of a companion prefix typed. */
static int scan_foreign(doctor *d, const char *pattern, foreign *fo, char *why, size_t wsize)
{
    char cursor[24] = "0";
    do {
        const char *av[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *r;
        int rc = ask(d, 6, av, &r, why, wsize);
        if (rc != DLOCK_OK)
            return rc;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof(cursor) ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            snprintf(why, wsize, "unexpected reply to SCAN");
            return DLOCK_EPROTO;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        for (size_t i = 0; i < r->element[1]->elements && fo->seen < DOCTOR_KEYS_MAX; i++) {
            const redisReply *k = r->element[1]->element[i];
            size_t j = 0;
            for (; j < sizeof(companions) / sizeof(companions[0]); j++)
                if (k->type == REDIS_REPLY_STRING &&
                    strncmp(k->str, companions[j].prefix, strlen(companions[j].prefix)) == 0)
                    break;
            if (j == sizeof(companions) / sizeof(companions[0]))
                continue;
            fo->seen++;
            const char *tv[] = {"TYPE", k->str};
            redisReply *t;
            if ((rc = ask(d, 2, tv, &t, why, wsize)) == DLOCK_EAUTH) {
                fo->hidden++;   /* another user's key: not this user's concern */
                continue;
            }
            if (rc != DLOCK_OK) {
                freeReplyObject(r);
                return rc;
            }
            int bad = (t->type == REDIS_REPLY_STATUS || t->type == REDIS_REPLY_STRING) &&
                      strcmp(t->str, "none") != 0 && strcmp(t->str, companions[j].type) != 0;
            if (bad && fo->found < DOCTOR_KEYS_SHOWN) {
                char esc[96];
                printable(k->str, k->len, esc, sizeof(esc));
                snprintf(fo->shown[fo->found], sizeof(fo->shown[0]), "'%s' (a %s, not the %s "
                         "%s)", esc, t->str, companions[j].what, companions[j].type);
            }
            fo->found += bad;
            freeReplyObject(t);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && fo->seen < DOCTOR_KEYS_MAX);
    return DLOCK_OK;
}

static void check_keys(doctor *d)
{
    foreign fo;
    memset(&fo, 0, sizeof(fo));
    char why[256];
    int rc = scan_foreign(d, "redisson_*", &fo, why, sizeof(why));
    if (rc == DLOCK_OK)
        rc = scan_foreign(d, "dlock_*", &fo, why, sizeof(why));
    if (rc != DLOCK_OK) {
        not_checked(d, rc, "keys", "+scan and +type", "keys under the family's prefixes not "
                    "checked (%s)", why);
        return;
    }
    if (fo.hidden)
        say(d, DLOCK_DOCTOR_NOTE, "keys", NULL, "%zu key(s) under the family's prefixes are "
            "outside this user's key patterns (other users' locks): not checked", fo.hidden);
    if (fo.found == 0)
        return;
    char list[3 * 170] = "";
    for (size_t i = 0; i < fo.found && i < DOCTOR_KEYS_SHOWN; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", fo.shown[i]);
    }
    say(d, DLOCK_DOCTOR_WARN, "keys", "rename or delete those keys; keep the application's "
        "own data away from the redisson_ and dlock_ prefixes",
        "%zu key(s) under the family's prefixes are not the family's: %s%s; the locks "
        "they belong to fail (WRONGTYPE) or lose a companion", fo.found, list,
        fo.found > DOCTOR_KEYS_SHOWN ? ", ..." : "");
}

/* ---------------------------------------------------------------- public */

static void doctor_node(doctor *d)
{
    char why[256];
    const char *av[] = {"INFO", "all"};
    redisReply *r;
    int rc = ask(d, 2, av, &r, why, sizeof(why));
    if (rc != DLOCK_OK || r->type != REDIS_REPLY_STRING) {
        not_checked(d, rc, "info", "+info", "INFO refused (%s): eviction, persistence and "
                    "replicas not checked", r ? "unexpected answer" : why);
        if (r)
            freeReplyObject(r);
    } else {
        check_eviction(d, r->str);
        check_persistence(d, r->str);
        check_replicas(d, r->str);
        freeReplyObject(r);
    }
    check_clock(d);
    check_acl(d);
    check_keys(d);
}

int dlock_client_doctor(dlock_client *c, const char *name, dlock_doctor_fn fn, void *ud)
{
    dlock__clear_error();
    if (!c || !fn)
        return dlock__fail(DLOCK_EINVAL, "client or callback is NULL");
    size_t nlen;
    int rc = name ? dlock__check_name(name, &nlen) : DLOCK_OK;
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock_client_ping(c);
    if (rc != DLOCK_OK)
        return rc;
    size_t max = dlock__router_primaries(c->router, NULL, 0) + 8;   /* room for a change */
    dlock__node **nodes = malloc(max * sizeof(*nodes));
    if (!nodes)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    size_t n = dlock__router_primaries(c->router, nodes, max);
    doctor d = {.c = c, .name = name, .fn = fn, .ud = ud, .worst = 0};
    for (size_t i = 0; i < n && i < max; i++) {
        d.node = nodes[i];
        d.addr = dlock__node_addr(nodes[i]);
        doctor_node(&d);
    }
    free(nodes);
    dlock__clear_error();
    return d.worst;
}
