/* The config object: defaults, setters, copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "dlock/async.h"

#define DEFAULT_URL_HOST "127.0.0.1"
#define DEFAULT_PORT 6379
#define DEFAULT_WATCHDOG_MS 30000
#define DEFAULT_COMMAND_TIMEOUT_MS 3000
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_RETRY_ATTEMPTS 3
#define DEFAULT_RETRY_DELAY_MS 1500
#define DEFAULT_CLOCK_JUMP_MS 250
#define DEFAULT_POOL_SIZE 64
#define DEFAULT_SCAN_INTERVAL_MS 1000
#define DEFAULT_PRIORITY_AFTER_MS 100
#define DEFAULT_FAIR_WAIT_MS (5 * 60000)   /* Redisson's fairLockWaitTimeout */
#define MAX_DURATION_MS (24LL * 3600 * 1000)
#define MAX_CLIENT_NAME 128

/* ---------------------------------------------------------------- config */

dlock_config *dlock_config_new(void)
{
    dlock_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return NULL;
    cfg->ep.host = dlock__strndup(DEFAULT_URL_HOST, strlen(DEFAULT_URL_HOST));
    if (!cfg->ep.host) {
        free(cfg);
        return NULL;
    }
    cfg->ep.port = DEFAULT_PORT;
    cfg->tls.verify = 1;
    cfg->watchdog_ms = DEFAULT_WATCHDOG_MS;
    cfg->command_timeout_ms = DEFAULT_COMMAND_TIMEOUT_MS;
    cfg->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    cfg->retry_attempts = DEFAULT_RETRY_ATTEMPTS;
    cfg->retry_delay_ms = DEFAULT_RETRY_DELAY_MS;
    cfg->clock_jump_ms = DEFAULT_CLOCK_JUMP_MS;
    cfg->pool_size = DEFAULT_POOL_SIZE;
    cfg->scan_interval_ms = DEFAULT_SCAN_INTERVAL_MS;
    cfg->priority_after_ms = DEFAULT_PRIORITY_AFTER_MS;
    cfg->fair_wait_ms = DEFAULT_FAIR_WAIT_MS;
    cfg->log_level = DLOCK_LOG_WARN;
    return cfg;
}

void dlock__config_clear(dlock_config *cfg)
{
    dlock__endpoint_clear(&cfg->ep);
    dlock__deploy_clear(&cfg->deploy);
    dlock__deploy_clear(&cfg->added_maps);
    dlock__tls_opts_clear(&cfg->tls);
    free(cfg->client_name);
    cfg->client_name = NULL;
}

void dlock_config_free(dlock_config *cfg)
{
    if (!cfg)
        return;
    dlock__config_clear(cfg);
    free(cfg);
}

int dlock__config_copy(dlock_config *dst, const dlock_config *src)
{
    *dst = *src;
    dst->client_name = NULL;
    memset(&dst->deploy, 0, sizeof(dst->deploy));
    memset(&dst->added_maps, 0, sizeof(dst->added_maps));
    memset(&dst->tls, 0, sizeof(dst->tls));
    if (dlock__endpoint_copy(&dst->ep, &src->ep) != DLOCK_OK ||
        dlock__deploy_copy(&dst->deploy, &src->deploy) != DLOCK_OK ||
        dlock__deploy_copy(&dst->added_maps, &src->added_maps) != DLOCK_OK ||
        dlock__tls_opts_copy(&dst->tls, &src->tls) != DLOCK_OK ||
        dlock__dup_opt(&dst->client_name, src->client_name) != 0) {
        dlock__endpoint_clear(&dst->ep);
        dlock__deploy_clear(&dst->deploy);
        dlock__deploy_clear(&dst->added_maps);
        dlock__tls_opts_clear(&dst->tls);
        free(dst->client_name);
        dst->client_name = NULL;
        return dlock__fail(DLOCK_ENOMEM, "out of memory copying the config");
    }
    return DLOCK_OK;
}

#define NEED_CFG(cfg)                                                   \
    do {                                                                \
        dlock__clear_error();                                           \
        if (!(cfg))                                                     \
            return dlock__fail(DLOCK_EINVAL, "config is NULL");         \
    } while (0)

int dlock_config_set_uv_loop(dlock_config *cfg, struct uv_loop_s *loop)
{
    NEED_CFG(cfg);
    cfg->uv_loop = loop;
    return DLOCK_OK;
}

/* Moves *from into *to when it was given (a URL's TLS parameter). */
static void take_opt(char **to, char **from)
{
    if (*from) {
        free(*to);
        *to = *from;
        *from = NULL;
    }
}

int dlock_config_set_url(dlock_config *cfg, const char *url)
{
    NEED_CFG(cfg);
    dlock__tls_opts t;
    memset(&t, 0, sizeof(t));
    t.verify = -1;
    int rc = dlock__parse_deploy_url(url, &cfg->ep, &cfg->deploy, &t);
    if (rc != DLOCK_OK) {
        dlock__tls_opts_clear(&t);
        return rc;
    }
    /* The URL's TLS parameters replace those settings; the others stay. */
    take_opt(&cfg->tls.ca_file, &t.ca_file);
    take_opt(&cfg->tls.ca_dir, &t.ca_dir);
    take_opt(&cfg->tls.cert_file, &t.cert_file);
    take_opt(&cfg->tls.key_file, &t.key_file);
    take_opt(&cfg->tls.server_name, &t.server_name);
    if (t.verify >= 0)
        cfg->tls.verify = t.verify;
    dlock__tls_opts_clear(&t);
    return DLOCK_OK;
}

/* ------------------------------------------------------------------ TLS */

#define MAX_TLS_PATH 4096

/* A file or directory name for a TLS option: NULL/"" (unset) or 1..4096 bytes. */
static int set_path(char **field, const char *v, const char *what)
{
    if (v && strlen(v) > MAX_TLS_PATH)
        return dlock__fail(DLOCK_EINVAL, "%s is longer than %d bytes", what, MAX_TLS_PATH);
    char *d = NULL;
    if (v && *v && !(d = dlock__strndup(v, strlen(v))))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    free(*field);
    *field = d;
    return DLOCK_OK;
}

int dlock_config_set_tls_ca(dlock_config *cfg, const char *ca_file, const char *ca_dir)
{
    NEED_CFG(cfg);
    if ((ca_file && strlen(ca_file) > MAX_TLS_PATH) || (ca_dir && strlen(ca_dir) > MAX_TLS_PATH))
        return dlock__fail(DLOCK_EINVAL, "a CA path is longer than %d bytes", MAX_TLS_PATH);
    int rc = set_path(&cfg->tls.ca_file, ca_file, "the CA file");
    return rc == DLOCK_OK ? set_path(&cfg->tls.ca_dir, ca_dir, "the CA directory") : rc;
}

int dlock_config_set_tls_cert(dlock_config *cfg, const char *cert_file, const char *key_file)
{
    NEED_CFG(cfg);
    int has_cert = cert_file && *cert_file, has_key = key_file && *key_file;
    if (has_cert != has_key)
        return dlock__fail(DLOCK_EINVAL, "a client certificate needs its key, and a key its "
                                         "certificate (give both, or neither)");
    if ((has_cert && strlen(cert_file) > MAX_TLS_PATH) ||
        (has_key && strlen(key_file) > MAX_TLS_PATH))
        return dlock__fail(DLOCK_EINVAL, "a certificate path is longer than %d bytes",
                           MAX_TLS_PATH);
    int rc = set_path(&cfg->tls.cert_file, cert_file, "the certificate file");
    return rc == DLOCK_OK ? set_path(&cfg->tls.key_file, key_file, "the key file") : rc;
}

int dlock_config_set_tls_server_name(dlock_config *cfg, const char *name)
{
    NEED_CFG(cfg);
    if (name && *name) {
        size_t n = strlen(name);
        int ok = n <= 255;
        for (size_t i = 0; ok && i < n; i++)
            ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                 (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '-' ||
                 name[i] == '_';
        if (!ok)
            return dlock__fail(DLOCK_EINVAL, "TLS server name: 1..255 bytes of letters, digits, "
                                             "'.', '-' and '_'");
    }
    return set_path(&cfg->tls.server_name, name, "the server name");
}

int dlock_config_set_tls_verify(dlock_config *cfg, int verify)
{
    NEED_CFG(cfg);
    cfg->tls.verify = verify != 0;
    return DLOCK_OK;
}

/* The URL parser's limit on a user or password (url.c). */
#define MAX_CRED_LEN 512

/* A user (may be none) and password into *u and *p, or neither when the
 * password is NULL or empty; `who` prefixes the messages ("", "sentinel "). */
static int set_credentials(char **u, char **p, const char *user, const char *password,
                           const char *who)
{
    char *nu = NULL, *np = NULL;
    if (password && *password) {
        size_t plen = strlen(password), ulen = user ? strlen(user) : 0;
        if (plen > MAX_CRED_LEN || ulen > MAX_CRED_LEN)
            return dlock__fail(DLOCK_EINVAL, "the %s%s is longer than %d bytes", who,
                               plen > MAX_CRED_LEN ? "password" : "user", MAX_CRED_LEN);
        np = dlock__strndup(password, plen);
        nu = ulen ? dlock__strndup(user, ulen) : NULL;
        if (!np || (ulen && !nu)) {
            dlock__free_secret(np);
            free(nu);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
    } else if (user && *user) {
        return dlock__fail(DLOCK_EINVAL, "a %suser needs a password", who);
    }
    free(*u);
    dlock__free_secret(*p);
    *u = nu;
    *p = np;
    return DLOCK_OK;
}

int dlock_config_set_password(dlock_config *cfg, const char *user, const char *password)
{
    NEED_CFG(cfg);
    return set_credentials(&cfg->ep.user, &cfg->ep.pass, user, password, "");
}

int dlock_config_set_address_map(dlock_config *cfg, dlock_address_map_fn fn, void *ud)
{
    NEED_CFG(cfg);
    cfg->map_fn = fn;
    cfg->map_ud = fn ? ud : NULL;
    return DLOCK_OK;
}

int dlock_config_add_address_map(dlock_config *cfg, const char *entries)
{
    NEED_CFG(cfg);
    return dlock__add_maps(&cfg->added_maps, entries);
}

void dlock__map_address(const dlock_config *cfg, const char *host, int port, char *host_out,
                        int *port_out)
{
    /* The URL's entries first, then those added; the callback for the
     * addresses they do not name. */
    if (dlock__deploy_map(&cfg->deploy, host, port, host_out, port_out) ||
        dlock__deploy_map(&cfg->added_maps, host, port, host_out, port_out))
        return;
    snprintf(host_out, DLOCK_HOST_MAX, "%s", host);
    *port_out = port;
    if (!cfg->map_fn)
        return;
    int rc = cfg->map_fn(host, port, host_out, port_out, cfg->map_ud);
    host_out[DLOCK_HOST_MAX - 1] = '\0';
    if (rc == 0 && host_out[0] && *port_out > 0 && *port_out <= 65535)
        return;
    dlock__log(cfg, DLOCK_LOG_WARN, "the address map %s for %s:%d: the address is used as "
               "announced", rc != 0 ? "failed" : "gave an unusable address", host, port);
    snprintf(host_out, DLOCK_HOST_MAX, "%s", host);
    *port_out = port;
}

int dlock_config_set_credentials(dlock_config *cfg, dlock_credentials_fn fn, void *ud)
{
    NEED_CFG(cfg);
    cfg->cred_fn = fn;
    cfg->cred_ud = fn ? ud : NULL;
    return DLOCK_OK;
}

int dlock_config_set_sentinel_password(dlock_config *cfg, const char *user, const char *password)
{
    NEED_CFG(cfg);
    return set_credentials(&cfg->deploy.sentinel_user, &cfg->deploy.sentinel_pass, user,
                           password, "sentinel ");
}

int dlock_config_set_replica_ack(dlock_config *cfg, int replicas, int64_t timeout_ms,
                                 dlock_ack_policy policy)
{
    NEED_CFG(cfg);
    int all = replicas == DLOCK_REPLICAS_ALL;
    if (all)
        replicas = 1;   /* the threshold: one acknowledgement (when there are replicas) */
    if (replicas < 0 || replicas > 1000)
        return dlock__fail(DLOCK_EINVAL, "replicas %d: use 0 (off) .. 1000, or "
                                         "DLOCK_REPLICAS_ALL", replicas);
    if (policy != DLOCK_ACK_RELEASE && policy != DLOCK_ACK_KEEP)
        return dlock__fail(DLOCK_EINVAL, "unknown replica acknowledgement policy %d", (int)policy);
    if (replicas > 0 && (timeout_ms < 1 || timeout_ms >= cfg->command_timeout_ms))
        return dlock__fail(DLOCK_EINVAL,
                           "replica acknowledgement timeout %lld ms: use 1 .. %lld (below the "
                           "command timeout, which bounds the wait for WAIT's answer)",
                           (long long)timeout_ms, (long long)cfg->command_timeout_ms - 1);
    cfg->ack_replicas = replicas;
    cfg->ack_timeout_ms = replicas > 0 ? timeout_ms : 0;
    cfg->ack_policy = policy;
    cfg->ack_all = all;
    return DLOCK_OK;
}

static int set_duration(int64_t *field, int64_t ms, int64_t def, int64_t lo, const char *what)
{
    if (ms == 0) {
        *field = def;
        return DLOCK_OK;
    }
    if (ms < lo || ms > MAX_DURATION_MS)
        return dlock__fail(DLOCK_EINVAL, "%s %lld ms is out of range %lld..%lld", what,
                           (long long)ms, (long long)lo, (long long)MAX_DURATION_MS);
    *field = ms;
    return DLOCK_OK;
}

int dlock_config_set_watchdog_timeout(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    return set_duration(&cfg->watchdog_ms, ms, DEFAULT_WATCHDOG_MS, 30, "watchdog timeout");
}

int dlock_config_set_command_timeout(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    return set_duration(&cfg->command_timeout_ms, ms, DEFAULT_COMMAND_TIMEOUT_MS, 1,
                        "command timeout");
}

int dlock_config_set_inspect_limit(dlock_config *cfg, size_t max_holders)
{
    NEED_CFG(cfg);
    if (max_holders > DLOCK__INSPECT_MAX)
        return dlock__fail(DLOCK_EINVAL, "inspect limit %zu: use 0 (no limit) or 1..%d",
                           max_holders, DLOCK__INSPECT_MAX);
    cfg->inspect_max = max_holders;
    return DLOCK_OK;
}

int dlock_config_set_connect_timeout(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    return set_duration(&cfg->connect_timeout_ms, ms, DEFAULT_CONNECT_TIMEOUT_MS, 1,
                        "connect timeout");
}

int dlock_config_set_scan_interval(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    return set_duration(&cfg->scan_interval_ms, ms, DEFAULT_SCAN_INTERVAL_MS, 10,
                        "scan interval");
}

int dlock_config_set_retry(dlock_config *cfg, int attempts, int64_t delay_ms)
{
    NEED_CFG(cfg);
    if (attempts < 0 || attempts > 100)
        return dlock__fail(DLOCK_EINVAL, "retry attempts %d is out of range 0..100", attempts);
    int64_t d = 0;
    int rc = set_duration(&d, delay_ms, DEFAULT_RETRY_DELAY_MS, 1, "retry delay");
    if (rc != DLOCK_OK)
        return rc;
    cfg->retry_attempts = attempts;
    cfg->retry_delay_ms = d;
    return DLOCK_OK;
}

int dlock_config_set_priority_after(dlock_config *cfg, int64_t after_ms)
{
    NEED_CFG(cfg);
    if (after_ms == DLOCK_PRIORITY_OFF) {
        cfg->priority_after_ms = DLOCK_PRIORITY_OFF;
        return DLOCK_OK;
    }
    if (after_ms < 0)
        return dlock__fail(DLOCK_EINVAL,
                           "priority after %lld ms: use a positive time, 0 (default) or "
                           "DLOCK_PRIORITY_OFF", (long long)after_ms);
    return set_duration(&cfg->priority_after_ms, after_ms, DEFAULT_PRIORITY_AFTER_MS, 1,
                        "priority after");
}

int dlock_config_set_fair_wait_timeout(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    return set_duration(&cfg->fair_wait_ms, ms, DEFAULT_FAIR_WAIT_MS, 2, "fair wait timeout");
}

int dlock_config_set_max_hold(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    return dlock__check_max_hold(ms, 0, &cfg->max_hold_ms);
}

int dlock_config_set_clock_jump(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    if (ms != DLOCK_CLOCK_JUMP_OFF && (ms < 0 || ms > DLOCK__LOCK_DELAY_MAX))
        return dlock__fail(DLOCK_EINVAL,
                           "clock jump allowance: 1 to %lld ms (1 day; 0: the default, %d), or "
                           "DLOCK_CLOCK_JUMP_OFF, not %lld",
                           (long long)DLOCK__LOCK_DELAY_MAX, DEFAULT_CLOCK_JUMP_MS, (long long)ms);
    cfg->clock_jump_ms = ms == 0 ? DEFAULT_CLOCK_JUMP_MS : ms;
    return DLOCK_OK;
}

int dlock_config_set_lock_delay(dlock_config *cfg, int64_t ms)
{
    NEED_CFG(cfg);
    if (ms < 0 || ms > DLOCK__LOCK_DELAY_MAX)
        return dlock__fail(DLOCK_EINVAL, "lock-delay: 0 (off) to %lld ms (1 day), not %lld",
                           (long long)DLOCK__LOCK_DELAY_MAX, (long long)ms);
    cfg->lock_delay_ms = ms;
    return DLOCK_OK;
}

int dlock_config_set_failover_quarantine(dlock_config *cfg, dlock_quarantine mode, int64_t ms)
{
    NEED_CFG(cfg);
    if (mode != DLOCK_QUARANTINE_OFF && mode != DLOCK_QUARANTINE_ON &&
        mode != DLOCK_QUARANTINE_AUTO)
        return dlock__fail(DLOCK_EINVAL,
                           "failover quarantine: mode DLOCK_QUARANTINE_OFF, _ON or _AUTO, not %d",
                           (int)mode);
    if (mode == DLOCK_QUARANTINE_OFF)
        ms = 0;
    else if (ms < (mode == DLOCK_QUARANTINE_ON) || ms > DLOCK__LOCK_DELAY_MAX)
        return dlock__fail(DLOCK_EINVAL, "failover quarantine: %s to %lld ms (1 day), not %lld",
                           mode == DLOCK_QUARANTINE_ON ? "1" : "0",
                           (long long)DLOCK__LOCK_DELAY_MAX, (long long)ms);
    cfg->quarantine_mode = (int)mode;
    cfg->quarantine_ms = ms;
    return DLOCK_OK;
}

int dlock_config_set_revocation(dlock_config *cfg, int on)
{
    NEED_CFG(cfg);
    if (on != 0 && on != 1)
        return dlock__fail(DLOCK_EINVAL, "revocation: 1 (on, the default) or 0 (off), not %d",
                           on);
    cfg->revocation_off = !on;
    return DLOCK_OK;
}

int dlock_config_set_writer_first(dlock_config *cfg, int on)
{
    NEED_CFG(cfg);
    if (on != 0 && on != 1)
        return dlock__fail(DLOCK_EINVAL, "writer-first: 1 (on) or 0 (off, the default), not %d",
                           on);
    cfg->writer_first = on;
    return DLOCK_OK;
}

int dlock__check_max_hold(int64_t ms, int none_ok, int64_t *out)
{
    if (ms == 0 || (none_ok && ms == DLOCK_MAX_HOLD_NONE)) {
        *out = ms;
        return DLOCK_OK;
    }
    if (ms < 1 || ms > DLOCK__MAX_HOLD_MAX)
        return dlock__fail(DLOCK_EINVAL, "hold limit %lld ms is out of range 1..%lld (0: %s%s)",
                           (long long)ms, (long long)DLOCK__MAX_HOLD_MAX,
                           none_ok ? "the client's" : "none",
                           none_ok ? ", DLOCK_MAX_HOLD_NONE: none" : "");
    *out = ms;
    return DLOCK_OK;
}

int dlock_config_set_pool_size(dlock_config *cfg, int size)
{
    NEED_CFG(cfg);
    if (size < 0 || size > 10000)
        return dlock__fail(DLOCK_EINVAL, "pool size %d is out of range 1..10000", size);
    cfg->pool_size = size ? size : DEFAULT_POOL_SIZE;
    return DLOCK_OK;
}

int dlock__check_label(const char *name)
{
    if (!name || !*name)
        return DLOCK_OK;
    size_t n = strlen(name);
    if (n > MAX_CLIENT_NAME)
        return dlock__fail(DLOCK_EINVAL, "client label longer than %d bytes", MAX_CLIENT_NAME);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] <= ' ' || (unsigned char)name[i] > '~')
            return dlock__fail(DLOCK_EINVAL, "client label may only hold printable ASCII "
                                             "without spaces (byte %zu is not)", i);
    return DLOCK_OK;
}

int dlock_config_set_client_name(dlock_config *cfg, const char *name)
{
    NEED_CFG(cfg);
    int rc = dlock__check_label(name);
    if (rc != DLOCK_OK)
        return rc;
    char *d = NULL;
    if (name && *name && !(d = dlock__strndup(name, strlen(name))))
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    free(cfg->client_name);
    cfg->client_name = d;
    return DLOCK_OK;
}

int dlock_config_set_lost_callback(dlock_config *cfg, dlock_lost_fn fn, void *ud)
{
    NEED_CFG(cfg);
    cfg->lost = (dlock__lost_cb){.fn = fn, .ud = ud};
    return DLOCK_OK;
}

int dlock_config_set_lost_cause_callback(dlock_config *cfg, dlock_lost_cause_fn fn, void *ud)
{
    NEED_CFG(cfg);
    cfg->lost = (dlock__lost_cb){.cfn = fn, .ud = ud};
    return DLOCK_OK;
}

int dlock_config_set_log_callback(dlock_config *cfg, dlock_log_fn fn, void *ud,
                                  dlock_log_level max_level)
{
    NEED_CFG(cfg);
    if ((int)max_level < DLOCK_LOG_ERROR || (int)max_level > DLOCK_LOG_DEBUG)
        return dlock__fail(DLOCK_EINVAL, "log level %d is out of range 0..3", (int)max_level);
    cfg->log_fn = fn;
    cfg->log_ud = ud;
    cfg->log_level = max_level;
    return DLOCK_OK;
}
