/* URL parsing and option validation: every bad value is refused with a message
 * that names the bad part, never shows a password, and keeps the old value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sync/sync.h"

static void test_redis_urls(void **state)
{
    (void)state;
    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    assert_int_equal(dlock__parse_url("redis://example.com", &ep), DLOCK_OK);
    assert_string_equal(ep.host, "example.com");
    assert_int_equal(ep.port, 6379);
    assert_int_equal(ep.db, 0);
    assert_null(ep.user);
    assert_null(ep.pass);

    assert_int_equal(dlock__parse_url("redis://alice:s%40cret@10.0.0.1:7000/5", &ep), DLOCK_OK);
    assert_string_equal(ep.host, "10.0.0.1");
    assert_int_equal(ep.port, 7000);
    assert_int_equal(ep.db, 5);
    assert_string_equal(ep.user, "alice");
    assert_string_equal(ep.pass, "s@cret");

    assert_int_equal(dlock__parse_url("redis://:pw@[::1]:6380", &ep), DLOCK_OK);
    assert_string_equal(ep.host, "::1");
    assert_int_equal(ep.port, 6380);
    assert_null(ep.user);
    assert_string_equal(ep.pass, "pw");

    assert_int_equal(dlock__parse_url("redis://h/", &ep), DLOCK_OK);
    assert_int_equal(ep.db, 0);

    char buf[128];
    assert_string_equal(dlock__endpoint_str(&ep, buf, sizeof(buf)), "h:6379");
    dlock__endpoint_clear(&ep);
}

static void test_unix_urls(void **state)
{
    (void)state;
    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    assert_int_equal(dlock__parse_url("unix:///run/redis.sock?db=2", &ep), DLOCK_OK);
    assert_string_equal(ep.path, "/run/redis.sock");
    assert_null(ep.host);
    assert_int_equal(ep.db, 2);
    assert_int_equal(dlock__parse_url("unix:///tmp/r.sock", &ep), DLOCK_OK);
    assert_int_equal(ep.db, 0);
    char buf[128];
    assert_string_equal(dlock__endpoint_str(&ep, buf, sizeof(buf)), "unix:/tmp/r.sock");
    dlock__endpoint_clear(&ep);
}

/* rediss:// and its TLS parameters (redis-cli's option names). */
static void test_tls_urls(void **state)
{
    (void)state;
    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    dlock__tls_opts t;
    memset(&t, 0, sizeof(t));
    assert_int_equal(dlock__parse_url_tls("rediss://u:pw@h:6380/2?cacert=/etc/my%20ca.pem&"
                                          "cacertdir=/etc/cas&cert=/c.pem&key=/k.pem&"
                                          "sni=redis.example&insecure",
                                          &ep, &t),
                     DLOCK_OK);
    assert_int_equal(ep.tls, 1);
    assert_string_equal(ep.host, "h");
    assert_int_equal(ep.port, 6380);
    assert_int_equal(ep.db, 2);
    assert_string_equal(t.ca_file, "/etc/my ca.pem");
    assert_string_equal(t.ca_dir, "/etc/cas");
    assert_string_equal(t.cert_file, "/c.pem");
    assert_string_equal(t.key_file, "/k.pem");
    assert_string_equal(t.server_name, "redis.example");
    assert_int_equal(t.verify, 0);
    /* Parameters not given come back unset. */
    assert_int_equal(dlock__parse_url_tls("rediss://h", &ep, &t), DLOCK_OK);
    assert_int_equal(ep.tls, 1);
    assert_int_equal(ep.port, 6379);
    assert_null(t.ca_file);
    assert_int_equal(t.verify, -1);
    assert_int_equal(dlock__parse_url_tls("rediss://h?insecure=yes", &ep, &t), DLOCK_OK);
    assert_int_equal(t.verify, 0);
    assert_int_equal(dlock__parse_url("redis://h", &ep), DLOCK_OK);
    assert_int_equal(ep.tls, 0);
    dlock__tls_opts_clear(&t);
    dlock__endpoint_clear(&ep);

    /* The config: a URL's parameters replace those settings, the others stay. */
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(cfg->tls.verify, 1);
    assert_int_equal(dlock_config_set_tls_ca(cfg, "/ca.pem", NULL), DLOCK_OK);
    assert_int_equal(dlock_config_set_tls_cert(cfg, "/c.pem", "/k.pem"), DLOCK_OK);
    assert_int_equal(dlock_config_set_url(cfg, "rediss://h?sni=name.example"), DLOCK_OK);
    assert_string_equal(cfg->tls.ca_file, "/ca.pem");
    assert_string_equal(cfg->tls.server_name, "name.example");
    assert_int_equal(dlock_config_set_url(cfg, "rediss://h?cacert=/other.pem"), DLOCK_OK);
    assert_string_equal(cfg->tls.ca_file, "/other.pem");
    assert_string_equal(cfg->tls.cert_file, "/c.pem");
    assert_int_equal(cfg->tls.verify, 1);
    assert_int_equal(dlock_config_set_tls_cert(cfg, "/c.pem", NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "key"));
    assert_int_equal(dlock_config_set_tls_server_name(cfg, "no spaces"), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_tls_verify(cfg, 0), DLOCK_OK);
    assert_int_equal(cfg->tls.verify, 0);
    assert_int_equal(dlock_config_set_tls_ca(NULL, NULL, NULL), DLOCK_EINVAL);
    /* TLS settings with a plain URL: refused at open, before any connection. */
    assert_int_equal(dlock_config_set_url(cfg, "redis://127.0.0.1:1"), DLOCK_OK);
    dlock_client *c = (dlock_client *)1;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_EINVAL);
    assert_null(c);
    assert_non_null(strstr(dlock_last_error(), "rediss://"));
    /* A CA file that cannot be read: DLOCK_ETLS naming it. */
    assert_int_equal(dlock_config_set_url(cfg, "rediss://127.0.0.1:1"), DLOCK_OK);
    assert_int_equal(dlock_config_set_tls_ca(cfg, "/nonexistent/ca.pem", NULL), DLOCK_OK);
    assert_int_equal(dlock_config_set_tls_cert(cfg, NULL, NULL), DLOCK_OK);
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_ETLS);
    assert_non_null(strstr(dlock_last_error(), "/nonexistent/ca.pem"));
    assert_non_null(strstr(dlock_last_error(), "127.0.0.1:1"));
    dlock_config_free(cfg);
}

/* Each bad URL: the code, a word the message must contain, and the previous
 * endpoint must survive. */
static void test_bad_urls(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        const char *mentions;
    } bad[] = {
        {"", "empty"},
        {"http://x", "scheme"},
        {"rediss://h?foo=1", "unknown parameter"},
        {"redis://h?cacert=/ca.pem", "rediss://"},
        {"rediss://h?cacert=", "empty"},
        {"rediss://h?cacert=/a b", "space"},
        {"rediss://h?insecure=maybe", "insecure"},
        {"rediss://h?sni=bad%2Fname", "sni"},
        {"rediss://h?sni=x#frag", "unexpected"},
        {"redis://", "host is empty"},
        {"redis://:6379", "host is empty"},
        {"redis://h:0", "port"},
        {"redis://h:65536", "port"},
        {"redis://h:12ab", "port"},
        {"redis://h:", "port"},
        {"redis://h/x", "database"},
        {"redis://h/-1", "database"},
        {"redis://h/99999999999", "database"},
        {"redis://h?x=1", "rediss://"},
        {"redis://ho st", "host"},
        {"redis://h\x01", "host"},
        {"redis://[::1", "IPv6"},
        {"redis://[zz]:1", "IPv6"},
        {"redis://[::1]x", "port"},
        {"redis://u:p%zz@h", "percent"},
        {"redis://u:p%4@h", "percent"},
        {"redis://u:p%00@h", "percent"},
        {"redis://user@h", "password"},
        {"unix://relative.sock", "absolute"},
        {"unix://", "absolute"},
        {"unix:///s?db=x", "database"},
        {"unix:///s?foo=1", "unknown parameter"},
    };
    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    assert_int_equal(dlock__parse_url("redis://keep:1234", &ep), DLOCK_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = dlock__parse_url(bad[i].url, &ep);
        if (rc != DLOCK_EINVAL || !strstr(dlock_last_error(), bad[i].mentions))
            fail_msg("url '%s': rc %d, message '%s' (expected it to mention '%s')", bad[i].url,
                     rc, dlock_last_error(), bad[i].mentions);
        assert_string_equal(ep.host, "keep");
        assert_int_equal(ep.port, 1234);
    }
    dlock__endpoint_clear(&ep);
    assert_int_equal(dlock__parse_url(NULL, &ep), DLOCK_EINVAL);

    /* An unknown scheme's message names every scheme a URL may have, each
     * accepted by dlock_config_set_url. */
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, "http://x"), DLOCK_EINVAL);
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    int named = 0;
    for (char *p = strstr(msg, "://"); p; p = strstr(p + 3, "://")) {
        char *b = p;
        while (b > msg && (b[-1] == '-' || (b[-1] >= 'a' && b[-1] <= 'z')))
            b--;
        char url[128];
        snprintf(url, sizeof(url), "%.*s://%s", (int)(p - b), b,
                 strncmp(b, "unix", 4) == 0             ? "/tmp/r.sock"
                 : strstr(b, "sentinel") && strstr(b, "sentinel") < p ? "h:26379#m"
                                                                      : "h:6379");
        if (strncmp(b, "http", 4) == 0)
            continue;
        if (dlock_config_set_url(cfg, url) != DLOCK_OK)
            fail_msg("'%s', named by '%s', is refused: %s", url, msg, dlock_last_error());
        named++;
    }
    assert_int_equal(named, 9);
    dlock_config_free(cfg);

    /* A long unix path and a 1 MiB URL. */
    char *huge = malloc(1 << 20);
    memset(huge, 'a', (1 << 20) - 1);
    huge[(1 << 20) - 1] = '\0';
    memcpy(huge, "unix:///", 8);
    assert_int_equal(dlock__parse_url(huge, &ep), DLOCK_EINVAL);
    memcpy(huge, "redis://", 8);
    assert_int_equal(dlock__parse_url(huge, &ep), DLOCK_EINVAL);
    free(huge);
}

static void test_password_never_in_messages(void **state)
{
    (void)state;
    static const char *urls[] = {
        "redis://u:hunter2%zz@h", "redis://u:hunter2@h:99999", "redis://u:hunter2@h/zz",
        "redis://:hunter2@ho st", "redis://u:hunter2 x@h", "redis://u:hunter2@h?db=1",
    };
    dlock__endpoint ep;
    memset(&ep, 0, sizeof(ep));
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        assert_int_equal(dlock__parse_url(urls[i], &ep), DLOCK_EINVAL);
        if (strstr(dlock_last_error(), "hunter2"))
            fail_msg("password leaked for '%s': %s", urls[i], dlock_last_error());
    }
    dlock__endpoint_clear(&ep);
}

static void test_options(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_non_null(cfg);
    assert_int_equal(cfg->watchdog_ms, 30000);
    assert_int_equal(cfg->command_timeout_ms, 3000);
    assert_int_equal(cfg->retry_attempts, 3);
    assert_int_equal(cfg->retry_delay_ms, 1500);
    assert_int_equal(cfg->pool_size, 64);

    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 1500), DLOCK_OK);
    assert_int_equal(cfg->watchdog_ms, 1500);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 0), DLOCK_OK);
    assert_int_equal(cfg->watchdog_ms, 30000);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 10), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "watchdog timeout"));
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, -5), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, INT64_MAX), DLOCK_EINVAL);
    assert_int_equal(cfg->watchdog_ms, 30000);

    assert_int_equal(dlock_config_set_command_timeout(cfg, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_retry(cfg, -1, 10), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_retry(cfg, 101, 10), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_retry(cfg, 2, -10), DLOCK_EINVAL);
    assert_int_equal(cfg->retry_attempts, 3);
    assert_int_equal(dlock_config_set_retry(cfg, 0, 10), DLOCK_OK);
    assert_int_equal(cfg->retry_attempts, 0);
    assert_int_equal(dlock_config_set_pool_size(cfg, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_pool_size(cfg, 10001), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_pool_size(cfg, 4), DLOCK_OK);

    assert_int_equal(cfg->priority_after_ms, 100);
    assert_int_equal(dlock_config_set_priority_after(cfg, -2), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "DLOCK_PRIORITY_OFF"));
    assert_int_equal(dlock_config_set_priority_after(cfg, INT64_MAX), DLOCK_EINVAL);
    assert_int_equal(cfg->priority_after_ms, 100);
    assert_int_equal(dlock_config_set_priority_after(cfg, DLOCK_PRIORITY_OFF), DLOCK_OK);
    assert_int_equal(cfg->priority_after_ms, DLOCK_PRIORITY_OFF);
    assert_int_equal(dlock_config_set_priority_after(cfg, 0), DLOCK_OK);
    assert_int_equal(cfg->priority_after_ms, 100);
    assert_int_equal(dlock_config_set_priority_after(cfg, 250), DLOCK_OK);
    assert_int_equal(cfg->priority_after_ms, 250);

    assert_int_equal(dlock_config_set_client_name(cfg, "has space"), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_client_name(cfg, "caf\xc3\xa9"), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_client_name(cfg, "worker-1"), DLOCK_OK);
    assert_string_equal(cfg->client_name, "worker-1");
    assert_int_equal(dlock_config_set_client_name(cfg, NULL), DLOCK_OK);
    assert_null(cfg->client_name);
    assert_int_equal(dlock_config_set_log_callback(cfg, NULL, NULL, (dlock_log_level)9),
                     DLOCK_EINVAL);

    assert_int_equal(dlock_config_set_url(NULL, "redis://h"), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_watchdog_timeout(NULL, 1000), DLOCK_EINVAL);
    dlock_config_free(cfg);
    dlock_config_free(NULL);
}

/* dlock_config_set_password: replaces the URL's credentials, never echoes them. */
static void test_set_password(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_non_null(cfg);
    assert_int_equal(dlock_config_set_url(cfg, "redis://u:old@h:7000/3"), DLOCK_OK);
    assert_int_equal(dlock_config_set_password(cfg, NULL, "s3cret"), DLOCK_OK);
    assert_null(cfg->ep.user);
    assert_string_equal(cfg->ep.pass, "s3cret");
    assert_string_equal(cfg->ep.host, "h");
    assert_int_equal(cfg->ep.db, 3);
    assert_int_equal(dlock_config_set_password(cfg, "ops", "pw with spaces"), DLOCK_OK);
    assert_string_equal(cfg->ep.user, "ops");
    assert_string_equal(cfg->ep.pass, "pw with spaces");

    char big[600];
    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(dlock_config_set_password(cfg, NULL, big), DLOCK_EINVAL);
    assert_null(strstr(dlock_last_error(), "kkkk"));
    assert_int_equal(dlock_config_set_password(cfg, "ops", ""), DLOCK_EINVAL);
    assert_string_equal(cfg->ep.pass, "pw with spaces");   /* unchanged */
    assert_int_equal(dlock_config_set_password(cfg, NULL, NULL), DLOCK_OK);
    assert_null(cfg->ep.user);
    assert_null(cfg->ep.pass);
    assert_int_equal(dlock_config_set_password(NULL, NULL, "x"), DLOCK_EINVAL);
    dlock_config_free(cfg);
}

static void test_open_bad_args(void **state)
{
    (void)state;
    dlock_client *c = (dlock_client *)1;
    assert_int_equal(dlock_client_open(&c, NULL), DLOCK_EINVAL);
    assert_null(c);
    assert_int_equal(dlock_client_open(NULL, NULL), DLOCK_EINVAL);
    dlock_client_close(NULL);
}

/* Deployment URLs: every host of the list, the data nodes' credentials and
 * database apart, the sentinel port by default, the master name. */
/* cfg maps host:port to want_host:want_port (unmapped: the same). */
static void assert_maps_to(const dlock_config *cfg, const char *host, int port,
                           const char *want_host, int want_port)
{
    char out[DLOCK_HOST_MAX];
    int out_port;
    dlock__map_address(cfg, host, port, out, &out_port);
    assert_string_equal(out, want_host);
    assert_int_equal(out_port, want_port);
}

/* Address map lists that do not parse, in a URL's map= or given as text. */
static const char *const bad_maps[] = {
    "10.0.0.5:6379",            /* no '=' */
    "10.0.0.5=127.0.0.1:7001",  /* no port announced */
    "a:1=b",                    /* no port to reach */
    "a:x=b:1",                  /* not a number */
    "a:1=b:70000",              /* out of range */
    "a:1=b:2,,c:3=d:4",         /* an empty entry */
    "a:1=b:2,",                 /* a trailing comma */
    "u@a:1=b:2",                /* userinfo */
    "a:1=b:2/3",                /* a path */
    "a:1=b:2=c:3",              /* two '=' */
    "[::1:1=b:2",               /* '[' not closed */
    "bad%20host:1=b:2",         /* percent-encoding */
};

/* The URL list form of the address map: ?map=HOST:PORT=HOST:PORT,... on the
 * deployment URLs (with the TLS parameters on rediss-*), each entry checked. */
static void test_deploy_url_map(void **state)
{
    (void)state;
    dlock__endpoint ep;
    dlock__deploy d;
    dlock__tls_opts t;
    memset(&ep, 0, sizeof(ep));
    memset(&d, 0, sizeof(d));
    memset(&t, 0, sizeof(t));
    assert_int_equal(dlock__parse_deploy_url("redis-sentinel://s1:26379/1?map=10.0.0.5:6379=127.0.0.1:"
                                             "7001,[fd00::6]:6379=[::1]:7002&map=Node-3:7=n3.local:"
                                             "6379#mymaster",
                                             &ep, &d, NULL),
                     DLOCK_OK);
    assert_int_equal(d.kind, DLOCK__DEPLOY_SENTINEL);
    assert_string_equal(d.master, "mymaster");
    assert_int_equal(ep.db, 1);
    assert_int_equal(d.nmaps, 3);
    char host[DLOCK_HOST_MAX];
    int port = 0;
    assert_int_equal(dlock__deploy_map(&d, "10.0.0.5", 6379, host, &port), 1);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 7001);
    assert_int_equal(dlock__deploy_map(&d, "fd00::6", 6379, host, &port), 1);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7002);
    assert_int_equal(dlock__deploy_map(&d, "node-3", 7, host, &port), 1);   /* names: any case */
    assert_string_equal(host, "n3.local");
    assert_int_equal(port, 6379);
    assert_int_equal(dlock__deploy_map(&d, "10.0.0.5", 6380, host, &port), 0);   /* other port */
    /* A copy keeps them; one server's URL drops them. */
    dlock__deploy c;
    assert_int_equal(dlock__deploy_copy(&c, &d), DLOCK_OK);
    assert_int_equal(dlock__deploy_map(&c, "10.0.0.5", 6379, host, &port), 1);
    dlock__deploy_clear(&c);
    assert_int_equal(dlock__parse_deploy_url("redis://h:1", &ep, &d, NULL), DLOCK_OK);
    assert_int_equal(d.nmaps, 0);

    /* With TLS parameters, in any order. */
    t.verify = -1;
    assert_int_equal(dlock__parse_deploy_url("rediss-cluster://n1:7000?insecure&map=a:1=b:2&sni=x",
                                             &ep, &d, &t),
                     DLOCK_OK);
    assert_int_equal(d.nmaps, 1);
    assert_int_equal(t.verify, 0);
    assert_string_equal(t.server_name, "x");
    dlock__tls_opts_clear(&t);
    assert_int_equal(dlock__parse_deploy_url("redis-replicated://n1,n2?map=a:1=b:2", &ep, &d, NULL),
                     DLOCK_OK);
    assert_int_equal(d.nmaps, 1);

    /* Bad entries: DLOCK_EINVAL naming the entry and the syntax; the URL before stays. */
    for (size_t i = 0; i < sizeof(bad_maps) / sizeof(bad_maps[0]); i++) {
        char url[128];
        snprintf(url, sizeof(url), "redis-cluster://n1?map=%s", bad_maps[i]);
        assert_int_equal(dlock__parse_deploy_url(url, &ep, &d, NULL), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "map entry"));
        assert_non_null(strstr(dlock_last_error(), "HOST:PORT=HOST:PORT"));
        assert_int_equal(d.kind, DLOCK__DEPLOY_REPLICATED);   /* unchanged */
        assert_int_equal(d.nmaps, 1);
    }
    assert_int_equal(dlock__parse_deploy_url("redis-cluster://n1?map=", &ep, &d, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "map= is empty"));
    /* Other parameters still need TLS; one server takes no map. */
    assert_int_equal(dlock__parse_deploy_url("redis-cluster://n1?map=a:1=b:2&cacert=/c", &ep, &d,
                                             NULL),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "rediss-cluster://"));
    assert_int_equal(dlock__parse_deploy_url("redis://h:1?map=a:1=b:2", &ep, &d, NULL),
                     DLOCK_EINVAL);
    /* Through the config: the URL's entry is applied before the callback. */
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, "redis-cluster://n1?map=a:1=b:2"), DLOCK_OK);
    assert_maps_to(cfg, "a", 1, "b", 2);
    assert_maps_to(cfg, "c", 3, "c", 3);
    assert_int_equal(dlock_config_set_url(cfg, "redis-cluster://n1?map=a:1"), DLOCK_EINVAL);
    dlock_config_free(cfg);
    dlock__endpoint_clear(&ep);
    dlock__deploy_clear(&d);
}

/* The map as text (dlock_config_add_address_map, the CLI's --map): the
 * URL's syntax and parser, its own message; all of a list or none of it;
 * after the URL's entries, kept when the URL changes. */
static void test_added_address_map(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_add_address_map(cfg, "a:1=b:2,[fd00::6]:6379=[::1]:7002"),
                     DLOCK_OK);
    assert_int_equal(dlock_config_add_address_map(cfg, "Node-3:7=n3.local:8"), DLOCK_OK);
    for (size_t i = 0; i < sizeof(bad_maps) / sizeof(bad_maps[0]); i++) {
        char list[128];   /* a good entry first: not added either */
        snprintf(list, sizeof(list), "x:9=y:9,%s", bad_maps[i]);
        assert_int_equal(dlock_config_add_address_map(cfg, list), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_last_error(), "address map entry '"));
        assert_non_null(strstr(dlock_last_error(), "does not parse: give HOST:PORT=HOST:PORT"));
        assert_null(strstr(dlock_last_error(), "URL"));
        assert_maps_to(cfg, "x", 9, "x", 9);
    }
    assert_int_equal(dlock_config_add_address_map(cfg, ""), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "the address map is empty"));
    assert_int_equal(dlock_config_add_address_map(cfg, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_config_add_address_map(NULL, "a:1=b:2"), DLOCK_EINVAL);
    /* The URL's entries first; the added ones survive a new URL. */
    assert_int_equal(dlock_config_set_url(cfg, "redis-cluster://n1?map=a:1=z:9"), DLOCK_OK);
    assert_maps_to(cfg, "a", 1, "z", 9);
    assert_maps_to(cfg, "fd00::6", 6379, "::1", 7002);
    assert_int_equal(dlock_config_set_url(cfg, "redis-cluster://n1"), DLOCK_OK);
    assert_maps_to(cfg, "a", 1, "b", 2);
    assert_maps_to(cfg, "node-3", 7, "n3.local", 8);   /* names: any case */
    /* 64 entries in all. */
    int rc = DLOCK_OK, n = 3;
    for (; rc == DLOCK_OK && n < 70; n++) {
        char e[32];
        snprintf(e, sizeof(e), "h%d:1=g:1", n);
        rc = dlock_config_add_address_map(cfg, e);
    }
    assert_int_equal(rc, DLOCK_EINVAL);
    assert_int_equal(n, 65);
    assert_non_null(strstr(dlock_last_error(), "more than 64 address map entries"));
    dlock_config_free(cfg);
}

static void test_deploy_urls(void **state)
{
    (void)state;
    dlock__endpoint ep;
    dlock__deploy d;
    memset(&ep, 0, sizeof(ep));
    memset(&d, 0, sizeof(d));
    assert_int_equal(dlock__parse_deploy_url("redis-sentinel://al%40ce:s3c@s1,[::1]:26380,s3:7/2#mymaster",
                                             &ep, &d, NULL),
                     DLOCK_OK);
    assert_int_equal(d.kind, DLOCK__DEPLOY_SENTINEL);
    assert_int_equal(d.nseeds, 3);
    assert_string_equal(d.seeds[0].host, "s1");
    assert_int_equal(d.seeds[0].port, 26379);
    assert_string_equal(d.seeds[1].host, "::1");
    assert_int_equal(d.seeds[1].port, 26380);
    assert_int_equal(d.seeds[2].port, 7);
    assert_null(d.seeds[0].pass);   /* the sentinels get their own */
    assert_string_equal(d.master, "mymaster");
    assert_string_equal(ep.user, "al@ce");
    assert_string_equal(ep.pass, "s3c");
    assert_int_equal(ep.db, 2);

    assert_int_equal(dlock__parse_deploy_url("redis-cluster://:pw@n1:7000,n2", &ep, &d, NULL), DLOCK_OK);
    assert_int_equal(d.kind, DLOCK__DEPLOY_CLUSTER);
    assert_int_equal(d.nseeds, 2);
    assert_int_equal(d.seeds[1].port, 6379);
    assert_null(d.master);
    assert_string_equal(ep.pass, "pw");
    assert_int_equal(ep.db, 0);

    /* Back to one server; a bad URL changes nothing. */
    assert_int_equal(dlock__parse_deploy_url("redis://h:1", &ep, &d, NULL), DLOCK_OK);
    assert_int_equal(d.kind, DLOCK__DEPLOY_SINGLE);
    assert_int_equal(d.nseeds, 0);
    assert_int_equal(dlock__parse_deploy_url("redis-cluster://h:0", &ep, &d, NULL), DLOCK_EINVAL);
    assert_int_equal(d.kind, DLOCK__DEPLOY_SINGLE);
    assert_string_equal(ep.host, "h");
    /* A password in a bad URL is never shown. */
    assert_int_equal(dlock__parse_deploy_url("redis-cluster://u:Secr3t@h:1,bad host", &ep, &d, NULL),
                     DLOCK_EINVAL);
    assert_null(strstr(dlock_last_error(), "Secr3t"));

    /* Over TLS: every seed and the data nodes are TLS; the TLS parameters
     * come after the hosts (and the database), before a master's name. */
    dlock__tls_opts t;
    memset(&t, 0, sizeof(t));
    assert_int_equal(dlock__parse_deploy_url("rediss-sentinel://:pw@s1,s2:26380/1?cacert=/c/ca.pem"
                                             "&sni=redis.example#mymaster",
                                             &ep, &d, &t),
                     DLOCK_OK);
    assert_int_equal(d.kind, DLOCK__DEPLOY_SENTINEL);
    assert_int_equal(d.nseeds, 2);
    assert_int_equal(d.seeds[0].tls + d.seeds[1].tls, 2);
    assert_int_equal(d.seeds[0].port, 26379);
    assert_int_equal(ep.tls, 1);
    assert_int_equal(ep.db, 1);
    assert_string_equal(ep.pass, "pw");
    assert_string_equal(d.master, "mymaster");
    assert_string_equal(t.ca_file, "/c/ca.pem");
    assert_string_equal(t.server_name, "redis.example");
    dlock__tls_opts_clear(&t);
    assert_int_equal(dlock__parse_deploy_url("rediss-cluster://n1:7000,n2:7001?insecure", &ep, &d,
                                             &t),
                     DLOCK_OK);
    assert_int_equal(d.kind, DLOCK__DEPLOY_CLUSTER);
    assert_int_equal(d.seeds[0].tls + d.seeds[1].tls, 2);
    assert_int_equal(d.seeds[1].port, 7001);
    assert_int_equal(ep.tls, 1);
    assert_int_equal(t.verify, 0);
    dlock__tls_opts_clear(&t);
    /* Without TLS there are no parameters; a TLS parameter that is not one is refused. */
    assert_int_equal(dlock__parse_deploy_url("redis-cluster://n1?cacert=/c", &ep, &d, NULL),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "rediss-cluster://"));
    assert_int_equal(dlock__parse_deploy_url("rediss-cluster://n1?colour=red", &ep, &d, NULL),
                     DLOCK_EINVAL);
    assert_int_equal(d.kind, DLOCK__DEPLOY_CLUSTER);
    assert_int_equal(ep.tls, 1);
    assert_string_equal(ep.host, "n1");
    dlock__endpoint_clear(&ep);
    dlock__deploy_clear(&d);
}

/* Redis's error text in messages, without what Lua adds to it (Redis 7 and
 * Redis 6 forms); other text as it is. */
static void test_redis_error_text(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"WRONGTYPE Operation against a key holding the wrong kind of value script: "
         "1fa04356a4dd209a8c70760bcf456da12f11a58c, on @user_script:226.",
         "WRONGTYPE Operation against a key holding the wrong kind of value"},
        {"ERR user_script:1: boom script: 82903a0434f1503e152f89c03c9acd881a0e8150, on "
         "@user_script:1.",
         "ERR boom"},
        {"ERR Error running script (call to f_1fa04356a4dd209a8c70760bcf456da12f11a58c): "
         "@user_script:226: WRONGTYPE Operation against a key holding the wrong kind of value",
         "ERR WRONGTYPE Operation against a key holding the wrong kind of value"},
        {"ERR Error running script (call to f_82903a0434f1503e152f89c03c9acd881a0e8150): "
         "@user_script:1: user_script:1: boom",
         "ERR boom"},
        {"WRONGTYPE the key holds a hash that is not a lock",
         "WRONGTYPE the key holds a hash that is not a lock"},
        {"NOPERM this user has no permissions to run the 'evalsha' command",
         "NOPERM this user has no permissions to run the 'evalsha' command"},
        {"ERR my script: notes, on @user_script:x", "ERR my script: notes, on @user_script:x"},
        {"", ""},
    };
    char out[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dlock__redis_error_text(cases[i][0], out, sizeof(out));
        assert_string_equal(out, cases[i][1]);
    }
    dlock__redis_error_text(NULL, out, sizeof(out));
    assert_string_equal(out, "");
    dlock__redis_error_text(cases[0][0], out, 10);   /* cut to fit */
    assert_string_equal(out, "WRONGTYPE");
}

static void test_strerror(void **state)
{
    (void)state;
    for (int code = 0; code >= DLOCK_ENOTFOUND; code--) {
        assert_non_null(dlock_strerror(code));
        assert_string_not_equal(dlock_strerror(code), "unknown dlock status");
        assert_memory_equal(dlock_errname(code), "DLOCK_", 6);
    }
    assert_string_equal(dlock_strerror(-999), "unknown dlock status");
    assert_string_equal(dlock_strerror(DLOCK_ENOTOWNER), "lock not held by the caller");
    assert_string_equal(dlock_errname(DLOCK_ENOTOWNER), "DLOCK_ENOTOWNER");
    assert_string_equal(dlock_version(), DLOCK_VERSION_STRING);
}

/* INFO's "field:value" lines, read in one place (core/util.c) by the
 * loss causes, the pub/sub watch, the eviction check and the doctor. */
static void test_info_field(void **state)
{
    (void)state;
    const char *info = "# Server\r\nredis_version:7.2.4\r\nrun_id:0123abcd\r\n"
                       "master_run_id:ffff\r\n\r\n# Memory\r\nused_memory:1024\r\n"
                       "maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n"
                       "# Stats\r\nevicted_keys:12\r\nexpired_keys:0";
    char buf[32];
    assert_int_equal(dlock__info_field(info, "run_id", buf, sizeof(buf)), 1);
    assert_string_equal(buf, "0123abcd");   /* not master_run_id's */
    assert_int_equal(dlock__info_field(info, "maxmemory", buf, sizeof(buf)), 1);
    assert_string_equal(buf, "0");          /* the line of that field, not of a longer one */
    assert_int_equal(dlock__info_field(info, "maxmemory_policy", buf, sizeof(buf)), 1);
    assert_string_equal(buf, "allkeys-lru");
    assert_int_equal(dlock__info_field(info, "expired_keys", buf, sizeof(buf)), 1);
    assert_string_equal(buf, "0");          /* the last line, without its CRLF */
    assert_int_equal(dlock__info_field(info, "redis_version", buf, sizeof(buf)), 1);
    assert_string_equal(buf, "7.2.4");
    /* absent, part of a name, a section header, a value that does not fit */
    assert_int_equal(dlock__info_field(info, "aof_enabled", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    assert_int_equal(dlock__info_field(info, "memory", buf, sizeof(buf)), 0);
    assert_int_equal(dlock__info_field(info, "# Server", buf, sizeof(buf)), 0);
    assert_int_equal(dlock__info_field(info, "maxmemory_policy", buf, 11), 0);
    assert_string_equal(buf, "");
    assert_int_equal(dlock__info_field(info, "maxmemory_policy", buf, 12), 1);
    assert_int_equal(dlock__info_field("", "run_id", buf, sizeof(buf)), 0);
    assert_int_equal(dlock__info_field("run_id:\n", "run_id", buf, sizeof(buf)), 1);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_urls),
        cmocka_unit_test(test_unix_urls),
        cmocka_unit_test(test_tls_urls),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_password_never_in_messages),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_set_password),
        cmocka_unit_test(test_open_bad_args),
        cmocka_unit_test(test_deploy_urls),
        cmocka_unit_test(test_deploy_url_map),
        cmocka_unit_test(test_added_address_map),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_info_field),
        cmocka_unit_test(test_redis_error_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
