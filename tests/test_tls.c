/* TLS (rediss://) against redis-server's own TLS port, with certificates the
 * harness makes: every connection of a client goes over TLS, and each way TLS
 * can go wrong at open is a clear error naming the address, never a hang. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static th_redis srv;   /* TLS port (client certificates required) beside the plain one */
static const char *dir;

static int setup(void **state)
{
    (void)state;
    if (th_redis_start_tls(&srv, NULL) != 0)
        return -1;
    dir = th_tls_dir();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_redis_destroy(&srv);
    return 0;
}

/* A config for the TLS port with the test CA and client certificate. */
static dlock_config *tls_config(const char *host, int port)
{
    char url[160], ca[300], cert[300], key[300];
    snprintf(url, sizeof(url), "rediss://%s:%d", host, port);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(cert, sizeof(cert), "%s/client.crt", dir);
    snprintf(key, sizeof(key), "%s/client.key", dir);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_tls_ca(cfg, ca, NULL), DLOCK_OK);
    assert_int_equal(dlock_config_set_tls_cert(cfg, cert, key), DLOCK_OK);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, 1000 * th_slack()), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 0, 10), DLOCK_OK);
    return cfg;
}

/* Opens and expects failure `want` within a few connect timeouts, the message
 * naming the address and containing `mention`. */
static void open_fails(dlock_config *cfg, int want, int port, const char *mention)
{
    dlock_client *c = (dlock_client *)1;
    int64_t t0 = th_now_ms();
    int rc = dlock_client_open(&c, cfg);
    int64_t took = th_now_ms() - t0;
    if (rc != want || !strstr(dlock_last_error(), mention))
        fail_msg("open: %s (%s), expected %s mentioning '%s'", dlock_errname(rc),
                 dlock_last_error(), dlock_errname(want), mention);
    assert_null(c);
    print_message("    %s after %lld ms: %s\n", dlock_errname(rc), (long long)took,
                  dlock_last_error());
    char where[32];
    snprintf(where, sizeof(where), "127.0.0.1:%d", port);
    if (!strstr(dlock_last_error(), where))
        fail_msg("the message does not name %s: %s", where, dlock_last_error());
    assert_true(took < 3000 * th_slack());
    dlock_config_free(cfg);
}

/* Counts the connections CLIENT LIST shows on the TLS port, and all. */
static int count_laddr(int port, int *all)
{
    redisReply *r = th_cmd(&srv, "CLIENT LIST");
    assert_non_null(r);
    char want[48];
    snprintf(want, sizeof(want), "laddr=127.0.0.1:%d ", port);
    int n = 0;
    *all = 0;
    for (char *line = strtok(r->str, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "name=dlock|")) {
            (*all)++;
            n += strstr(line, want) != NULL;
        }
    }
    freeReplyObject(r);
    return n;
}

static void *hold_then_release(void *arg)
{
    dlock_lock *l = arg;
    th_sleep_ms(200);
    return (void *)(intptr_t)dlock_lock_release(l);
}

/* Locks, a waiter woken by the release (pub/sub), a watchdog renewal: every
 * connection the client opened is on the TLS port. */
static void test_every_connection_over_tls(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("127.0.0.1", srv.tls_port);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, 300 * th_slack()), DLOCK_OK);
    dlock_client *a, *b;
    assert_int_equal(dlock_client_open(&a, cfg), DLOCK_OK);
    assert_int_equal(dlock_client_open(&b, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char name[128];
    th_name(name, sizeof(name), "tls");
    dlock_lock *la, *lb;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(a, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(a, name, owner, &la), DLOCK_OK);   /* released elsewhere */
    assert_int_equal(dlock_lock_get(b, name, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(400 * th_slack());   /* renewed over TLS */
    pthread_t t;
    pthread_create(&t, NULL, hold_then_release, la);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(lb, 10000, 5000), DLOCK_OK);   /* woken by the message */
    assert_true(th_now_ms() - t0 < 2000 * th_slack());
    void *released;
    pthread_join(t, &released);
    assert_int_equal((intptr_t)released, DLOCK_OK);
    int all, on_tls = count_laddr(srv.tls_port, &all);
    assert_true(all >= 4);   /* pooled, renewal (a), pooled, pub/sub (b) */
    assert_int_equal(on_tls, all);
    dlock_stats st;
    assert_int_equal(dlock_client_stats(a, &st, sizeof(st)), DLOCK_OK);
    assert_true(st.renewals >= 1);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* A host name checked against the certificate's DNS name (localhost). */
static void test_host_name_verified(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("localhost", srv.tls_port);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    assert_int_equal(dlock_client_ping(c), DLOCK_OK);
    dlock_client_close(c);
    dlock_config_free(cfg);
}

static void test_untrusted_certificate(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("127.0.0.1", srv.tls_port);
    char other[300];
    snprintf(other, sizeof(other), "%s/other-ca.crt", dir);
    assert_int_equal(dlock_config_set_tls_ca(cfg, other, NULL), DLOCK_OK);
    open_fails(cfg, DLOCK_ETLS, srv.tls_port, "certificate was refused");
}

static void test_wrong_server_name(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("127.0.0.1", srv.tls_port);
    assert_int_equal(dlock_config_set_tls_server_name(cfg, "wrong.example"), DLOCK_OK);
    open_fails(cfg, DLOCK_ETLS, srv.tls_port, "mismatch");
}

static void test_client_certificate_required(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("127.0.0.1", srv.tls_port);
    assert_int_equal(dlock_config_set_tls_cert(cfg, NULL, NULL), DLOCK_OK);
    open_fails(cfg, DLOCK_ETLS, srv.tls_port, "client certificate");
}

/* A plain server behind rediss:// never answers the TLS hello (it waits for
 * a line): the open ends at the connect timeout, saying what is likely. */
static void test_plain_server_behind_rediss(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("127.0.0.1", srv.port);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, 500), DLOCK_OK);
    open_fails(cfg, DLOCK_ECONN, srv.port, "plain port");
}

/* A TLS port behind redis:// resets the connection: the message says to use
 * rediss://. */
static void test_tls_server_behind_redis(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.tls_port);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, 1000), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 0, 10), DLOCK_OK);
    open_fails(cfg, DLOCK_ECONN, srv.tls_port, "rediss://");
}

static void test_unloadable_files(void **state)
{
    (void)state;
    char notpem[300];
    snprintf(notpem, sizeof(notpem), "%s/ext.cnf", dir);   /* exists, not a certificate */
    dlock_config *cfg = tls_config("127.0.0.1", srv.tls_port);
    assert_int_equal(dlock_config_set_tls_ca(cfg, notpem, NULL), DLOCK_OK);
    open_fails(cfg, DLOCK_ETLS, srv.tls_port, notpem);

    char cert[300], wrong_key[300];
    snprintf(cert, sizeof(cert), "%s/client.crt", dir);
    snprintf(wrong_key, sizeof(wrong_key), "%s/server.key", dir);
    cfg = tls_config("127.0.0.1", srv.tls_port);
    assert_int_equal(dlock_config_set_tls_cert(cfg, cert, wrong_key), DLOCK_OK);
    open_fails(cfg, DLOCK_ETLS, srv.tls_port, "does not match");
}

typedef struct log_sink {
    pthread_mutex_t mu;
    int warnings, about_verify;
} log_sink;

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    log_sink *s = ud;
    pthread_mutex_lock(&s->mu);
    s->warnings += level <= DLOCK_LOG_WARN;
    s->about_verify += strstr(msg, "does not verify") != NULL;
    pthread_mutex_unlock(&s->mu);
}

/* Verification off is explicit (insecure) and said once: any certificate is
 * accepted, the link still encrypted. */
static void test_verify_off_warns_once(void **state)
{
    (void)state;
    char url[400];
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d?cacert=%s/other-ca.crt&cert=%s/client.crt"
             "&key=%s/client.key&insecure", srv.tls_port, dir, dir, dir);
    log_sink sink = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_log_callback(cfg, on_log, &sink, DLOCK_LOG_WARN), DLOCK_OK);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, "tls:insecure", &l), DLOCK_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dlock_lock_acquire(l, 2000), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    assert_int_equal(sink.about_verify, 1);
}

/* The server restarts: pooled, pub/sub and renewal connections come back
 * over TLS. */
static void test_reconnects_over_tls(void **state)
{
    (void)state;
    dlock_config *cfg = tls_config("127.0.0.1", srv.tls_port);
    assert_int_equal(dlock_config_set_retry(cfg, 10, 100), DLOCK_OK);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, "tls:restart", &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_redis_restart(&srv), 0);
    assert_int_equal(dlock_lock_acquire(l, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_stats st;
    assert_int_equal(dlock_client_stats(c, &st, sizeof(st)), DLOCK_OK);
    assert_true(st.reconnects >= 1);   /* the pooled connection found dead */
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_connection_over_tls),
        cmocka_unit_test(test_host_name_verified),
        cmocka_unit_test(test_untrusted_certificate),
        cmocka_unit_test(test_wrong_server_name),
        cmocka_unit_test(test_client_certificate_required),
        cmocka_unit_test(test_plain_server_behind_rediss),
        cmocka_unit_test(test_tls_server_behind_redis),
        cmocka_unit_test(test_unloadable_files),
        cmocka_unit_test(test_verify_off_warns_once),
        cmocka_unit_test(test_reconnects_over_tls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
