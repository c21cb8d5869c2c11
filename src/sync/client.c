/* Client lifecycle and owner ids: the client composes every layer (the
 * router and its nodes, the io loop, pub/sub, the watchdog) and hands each
 * module only what it needs. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync/sync.h"

/* Explicit owner ids start above every Linux thread id (pid_max <= 2^22). */
#define FIRST_EXPLICIT_OWNER (1ULL << 32)

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void) { pthread_atfork(NULL, NULL, dlock__atfork_child); }

/* Every connection is named "dlock|<uuid>|<host>|<pid>|<label>", so that
 * `dlock status` (or CLIENT LIST) can tell who holds a lock: the owner ids'
 * uuid part is the client's. Host bytes outside 0x21..0x7e, and '|', become
 * '_'; the label was checked when it was set. */
static void set_conn_name(dlock_client *c, const char *label)
{
    char host[65] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "?");
    for (char *p = host; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p > '~' || *p == '|')
            *p = '_';
    char name[DLOCK__CONN_NAME_MAX];
    snprintf(name, sizeof(name), "dlock|%s|%s|%ld|%s", c->uuid, host[0] ? host : "?",
             (long)getpid(), label ? label : "");
    dlock__netctx_set_name(&c->net, name);
}

/* Reads the server's maxmemory-policy (INFO memory: readable by a user
 * limited to dlock's ACL rule, unlike CONFIG GET) and warns, once, about one
 * that may evict held locks. Best effort: a server or ACL that does not tell
 * leaves the policy unknown, and the open goes on. */
static void check_eviction(dlock_client *c)
{
    const char *av[] = {"INFO", "memory"};
    dlock__req req = {.script = -1, .argc = 2, .argv = av, .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r = NULL;
    c->evict_policy[0] = '\0';
    char why[DLOCK__MSG_MAX];   /* not the open's: logged */
    dlock__errto prev = dlock__err_into(why, sizeof(why));
    int rc = dlock__call(c, &req, &r);
    dlock__err_reset(prev);
    if (rc == DLOCK_OK && r->type == REDIS_REPLY_STRING)
        dlock__info_field(r->str, "maxmemory_policy", c->evict_policy, sizeof(c->evict_policy));
    char addr[320];
    dlock__endpoint_str(&c->cfg.ep, addr, sizeof(addr));
    if (rc != DLOCK_OK)
        dlock__log(&c->cfg, DLOCK_LOG_INFO, "cannot read the maxmemory-policy of %s (%s): "
                   "not checked", addr, why);
    if (r)
        freeReplyObject(r);
    c->evict_risky = strncmp(c->evict_policy, "allkeys-", 8) == 0 ||
                     strncmp(c->evict_policy, "volatile-", 9) == 0;
    if (c->evict_risky)
        dlock__log(&c->cfg, DLOCK_LOG_WARN,
                   "%s has maxmemory-policy %s: when its memory is full Redis may evict held "
                   "locks (keys with a TTL), letting a second holder in; use noeviction for "
                   "locks", addr, c->evict_policy);
}

static void acall_stop(void *arg) { dlock__acall_stop(arg); }

/* Every module, once the loop is gone (or never ran). */
static void client_free(dlock_client *c)
{
    dlock__qrec_free(c->qrec);
    dlock__async_free(c->async);
    dlock__acall_free(c->acall);
    dlock__watchdog_free(c->wd);
    dlock__pubsub_free(c->pubsub);
    dlock__router_free(c->router);
    dlock__netctx_clear(&c->net);
    dlock__config_clear(&c->cfg);
    if (c->holds_ready) {
        dlock__holds_clear(&c->holds);
        pthread_mutex_destroy(&c->rq_mu);
    }
    free(c);
}

/* The asynchronous calls' round trips, stopped with the loop; the pub/sub's
 * ROLE watch on one address goes through them too. */
static int start_acall(dlock_client *c)
{
    int rc = dlock__acall_new(&c->acall, dlock__loop_uv(c->loop), &c->net, c->router);
    if (rc == DLOCK_OK)
        dlock__pubsub_use_acall(c->pubsub, c->acall);
    if (rc == DLOCK_OK && (rc = dlock__loop_on_stop(c->loop, acall_stop, c->acall)) != DLOCK_OK)
        dlock__acall_stop(c->acall);   /* the loop has not run: its handles close now */
    return rc;
}

int dlock_client_open(dlock_client **out, const dlock_config *cfg)
{
    pthread_once(&atfork_once, register_atfork);
    dlock__clear_error();
    if (!out)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!cfg)
        return dlock__fail(DLOCK_EINVAL, "config is NULL");
    dlock_client *c = calloc(1, sizeof(*c));
    if (!c)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__config_copy(&c->cfg, cfg);
    if (rc != DLOCK_OK) {
        free(c);
        return rc;
    }
    dlock__uuid(c->uuid);
    atomic_init(&c->next_owner, FIRST_EXPLICIT_OWNER);
    atomic_init(&c->own_keys, c->cfg.priority_after_ms != DLOCK_PRIORITY_OFF
                                  ? DLOCK__OWN_ALL
                                  : DLOCK__OWN_ALL & ~DLOCK__OWN_RESERVE);
    /* An unlock latch must outlive the retries of its release: the usual
     * schedule fits, and net/call.c refuses any write whose reply could come later. */
    c->latch_px = (c->cfg.command_timeout_ms + c->cfg.retry_delay_ms) *
                      (c->cfg.retry_attempts + 1) + 1000;

    if (c->cfg.ack_replicas > 0 && c->cfg.ack_timeout_ms >= c->cfg.command_timeout_ms) {
        dlock__config_clear(&c->cfg);
        free(c);
        return dlock__fail(DLOCK_EINVAL,
                           "the replica acknowledgement timeout (%lld ms) must be below the "
                           "command timeout (%lld ms)",
                           (long long)cfg->ack_timeout_ms, (long long)cfg->command_timeout_ms);
    }
    dlock__stats_init(&c->stats);
    if ((rc = dlock__holds_init(&c->holds)) != DLOCK_OK)
        goto fail;
    pthread_mutex_init(&c->rq_mu, NULL);
    dlock__list_init(&c->rq_list);
    c->holds_ready = 1;
    if ((rc = dlock__netctx_init(&c->net, &c->cfg, &c->stats)) != DLOCK_OK)
        goto fail;
    set_conn_name(c, c->cfg.client_name);
    if ((rc = dlock__router_new(&c->router, &c->net, &c->cfg.ep)) != DLOCK_OK)
        goto fail;
    if ((rc = dlock__router_check(c->router)) != DLOCK_OK)
        goto fail;
    check_eviction(c);
    if ((rc = dlock__loop_start(&c->loop, &c->cfg)) != DLOCK_OK)
        goto fail;
    if ((rc = dlock__pubsub_new(&c->pubsub, c->loop, &c->net, c->router)) != DLOCK_OK ||
        (rc = dlock__watchdog_new(&c->wd, c->loop, &c->net, c->router)) != DLOCK_OK ||
        (rc = start_acall(c)) != DLOCK_OK ||
        (rc = dlock__qrec_new(&c->qrec, c)) != DLOCK_OK ||
        (rc = dlock__async_new(&c->async, c->loop)) != DLOCK_OK ||
        /* Last registered, first run: pending calls end before the
         * connection fails their round trips. */
        (rc = dlock__loop_on_stop(c->loop, dlock__async_stop, c)) != DLOCK_OK ||
        (rc = dlock__loop_run(c->loop)) != DLOCK_OK) {
        dlock__loop_abandon(c->loop);
        goto fail;
    }
    char addr[320];
    dlock__log(&c->cfg, DLOCK_LOG_INFO, "client %s connected to %s", c->uuid,
               dlock__endpoint_str(&c->cfg.ep, addr, sizeof(addr)));
    *out = c;
    return DLOCK_OK;
fail:
    client_free(c);
    return rc;
}

void dlock_client_close(dlock_client *c)
{
    if (!c)
        return;
    dlock__rq_close_all(c);              /* revoke request listeners unsubscribe */
    dlock__pubsub_shutdown(c->pubsub);   /* waits end with DLOCK_ECLOSED */
    dlock__loop_stop(c->loop);           /* every module closes its handles; thread joined */
    client_free(c);
}

const char *dlock_client_id(const dlock_client *c) { return c ? c->uuid : ""; }

size_t dlock__owner_of_thread(const dlock_client *c, char buf[DLOCK_OWNER_BUFSIZE])
{
    memcpy(buf, c->uuid, 36);
    buf[36] = ':';
    return 37 + dlock__fmt_i64(buf + 37, (int64_t)dlock__tid());
}

int dlock_client_owner_id(const dlock_client *c, char *buf, size_t size)
{
    dlock__clear_error();
    if (!c || !buf)
        return dlock__fail(DLOCK_EINVAL, "client or buffer is NULL");
    char tmp[DLOCK_OWNER_BUFSIZE];
    size_t n = dlock__owner_of_thread(c, tmp);
    if (size <= n)
        return dlock__fail(DLOCK_EINVAL, "buffer of %zu bytes is too small (need %zu)", size,
                           n + 1);
    memcpy(buf, tmp, n + 1);
    return DLOCK_OK;
}

int dlock_client_new_owner_id(dlock_client *c, char *buf, size_t size)
{
    dlock__clear_error();
    if (!c || !buf)
        return dlock__fail(DLOCK_EINVAL, "client or buffer is NULL");
    char tmp[DLOCK_OWNER_BUFSIZE];
    memcpy(tmp, c->uuid, 36);
    tmp[36] = ':';
    uint64_t id = atomic_fetch_add(&c->next_owner, 1);
    size_t n = 37 + dlock__fmt_i64(tmp + 37, (int64_t)id);
    if (size <= n)
        return dlock__fail(DLOCK_EINVAL, "buffer of %zu bytes is too small (need %zu)", size,
                           n + 1);
    memcpy(buf, tmp, n + 1);
    return DLOCK_OK;
}

int dlock_client_set_label(dlock_client *c, const char *label)
{
    dlock__clear_error();
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    int rc = dlock__check_label(label);
    if (rc != DLOCK_OK)
        return rc;
    set_conn_name(c, label);
    /* One connection under the new name now (the idle ones named before are
     * dropped as they come up), so CLIENT LIST shows it at once. One try, no
     * retries: the label is set either way, and a caller that just took a
     * lock must not be held up by a server that went away meanwhile. */
    const char *av[] = {"PING"};
    dlock__req req = {.script = -1, .argc = 1, .argv = av, .flags = DLOCK__CALL_NO_RETRY};
    redisReply *r;
    if (dlock__call(c, &req, &r) == DLOCK_OK)
        freeReplyObject(r);
    dlock__clear_error();
    return DLOCK_OK;
}

int dlock_client_ping(dlock_client *c)
{
    dlock__clear_error();
    if (!c)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    const char *av[] = {"PING"};
    dlock__req req = {.script = -1, .argc = 1, .argv = av, .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    int rc = dlock__call(c, &req, &r);
    if (rc == DLOCK_OK)
        freeReplyObject(r);
    return rc;
}

int dlock_client_eviction_policy(dlock_client *c, char *buf, size_t size, int *risky)
{
    dlock__clear_error();
    if (!c || !buf)
        return dlock__fail(DLOCK_EINVAL, "client or buffer is NULL");
    size_t n = strlen(c->evict_policy);
    if (size <= n)
        return dlock__fail(DLOCK_EINVAL, "buffer of %zu bytes is too small (need %zu)", size,
                           n + 1);
    memcpy(buf, c->evict_policy, n + 1);
    if (risky)
        *risky = c->evict_risky;
    return DLOCK_OK;
}

int dlock_client_stats(dlock_client *c, dlock_stats *out, size_t size)
{
    dlock__clear_error();
    if (!c || !out)
        return dlock__fail(DLOCK_EINVAL, "client or out is NULL");
    dlock_stats s;
    dlock__stats_read(&c->stats, &s);
    memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
    return DLOCK_OK;
}

int dlock__call(dlock_client *c, const dlock__req *req, redisReply **out)
{
    dlock__res res;
    int rc = dlock__router_call(c->router, req, &res);
    *out = res.r;
    return rc;
}
