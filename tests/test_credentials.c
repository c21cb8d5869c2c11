/* Credentials that rotate (issue 23): dlock_config_set_credentials is asked
 * at every connect and reconnect, so a password changed on the server (ACL
 * SETUSER, CONFIG SET requirepass) is picked up by new connections; a refused
 * one is DLOCK_EAUTH naming the node, without a storm of retries; a callback
 * that fails or gives nothing is a clear error, nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fixture.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char cur_user[64], cur_pass[64];
static int cb_result;              /* what the callback returns */
static _Atomic int cb_calls;
static char cb_addr[128];

static int creds(const char *addr, int sentinel, char *user, char *password, void *ud)
{
    (void)sentinel;
    (void)ud;
    atomic_fetch_add(&cb_calls, 1);
    pthread_mutex_lock(&mu);
    snprintf(cb_addr, sizeof(cb_addr), "%s", addr);
    snprintf(user, DLOCK_CREDENTIAL_MAX, "%s", cur_user);
    snprintf(password, DLOCK_CREDENTIAL_MAX, "%s", cur_pass);
    int rc = cb_result;
    pthread_mutex_unlock(&mu);
    return rc;
}

static void set_creds(const char *user, const char *pass, int result)
{
    pthread_mutex_lock(&mu);
    snprintf(cur_user, sizeof(cur_user), "%s", user);
    snprintf(cur_pass, sizeof(cur_pass), "%s", pass);
    cb_result = result;
    pthread_mutex_unlock(&mu);
}

static int open_client(int64_t wd, dlock_client **out)
{
    dlock_config *cfg = dlock_config_new();
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.port);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_credentials(cfg, creds, NULL), DLOCK_OK);
    if (wd)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, wd), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 2, 100), DLOCK_OK);
    *out = NULL;
    int rc = dlock_client_open(out, cfg);
    dlock_config_free(cfg);
    return rc;
}

static void acl(const char *fmt, const char *arg)
{
    redisReply *r = th_cmd(&srv, fmt, arg);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("%s: %s", fmt, r->str);
    freeReplyObject(r);
}

/* ACL SETUSER changes the password between connects: the connections cut
 * (CLIENT KILL USER) come back with the new one, the watchdog's included:
 * the hold is renewed past its lease, and new calls work. */
static void test_rotated_acl_password(void **state)
{
    (void)state;
    int64_t slack = th_slack(), wd = 1500 * slack;
    acl("ACL SETUSER rot on resetpass >%s ~* &* +@all", "pw-one");
    set_creds("rot", "pw-one", 0);
    atomic_store(&cb_calls, 0);
    dlock_client *c;
    assert_int_equal(open_client(wd, &c), DLOCK_OK);
    char name[64], other[64];
    dlock_lock *l, *o;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "cr-held"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(other, sizeof(other), "cr-new"), &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    int before = atomic_load(&cb_calls);
    assert_true(before >= 1);
    char want[128];
    snprintf(want, sizeof(want), "127.0.0.1:%d", srv.port);
    char seen[128];
    pthread_mutex_lock(&mu);   /* the io thread's connections ask too */
    snprintf(seen, sizeof(seen), "%s", cb_addr);
    pthread_mutex_unlock(&mu);
    assert_string_equal(seen, want);

    acl("ACL SETUSER rot resetpass >%s", "pw-two");
    set_creds("rot", "pw-two", 0);
    acl("CLIENT KILL USER %s", "rot");
    th_sleep_ms(2 * wd + 500);
    assert_true(th_int(&srv, "PTTL %s", name) > 0);   /* renewed over a new connection */
    assert_int_equal(dlock_lock_try(o, 0, 30000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    assert_true(atomic_load(&cb_calls) > before);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_lock_free(o);
    dlock_client_close(c);
}

/* The server's password changed and the callback still gives the old one:
 * DLOCK_EAUTH naming the node, and only a few AUTH tries, not a storm. */
static void test_refused_credential(void **state)
{
    (void)state;
    acl("ACL SETUSER rot on resetpass >%s ~* &* +@all", "pw-three");
    set_creds("rot", "pw-wrong", 0);
    dlock_client *c;
    int rc = open_client(0, &c);
    assert_int_equal(rc, DLOCK_EAUTH);
    assert_null(c);
    char want[128];
    snprintf(want, sizeof(want), "authentication refused by 127.0.0.1:%d", srv.port);
    printf("# refused: %s\n", dlock_last_error());
    assert_non_null(strstr(dlock_last_error(), want));
    assert_null(strstr(dlock_last_error(), "pw-wrong"));   /* never the password */

    /* An open client whose password is rotated away: its calls fail with
     * DLOCK_EAUTH, a handful of AUTHs at most. */
    set_creds("rot", "pw-three", 0);
    assert_int_equal(open_client(0, &c), DLOCK_OK);
    acl("ACL SETUSER rot resetpass >%s", "pw-four");
    acl("CLIENT KILL USER %s", "rot");
    long long auths = th_calls(&srv, "auth");
    char name[64];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "cr-refused"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 30000), DLOCK_EAUTH);
    assert_non_null(strstr(dlock_last_error(), want));
    long long tries = th_calls(&srv, "auth") - auths;
    printf("# AUTH tries for one refused call: %lld\n", tries);
    assert_true(tries <= 3);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A callback that fails, or gives no password: DLOCK_EAUTH, said plainly;
 * DLOCK_CREDENTIALS_NONE: no AUTH at all (the default user). */
static void test_callback_fails(void **state)
{
    (void)state;
    dlock_client *c;
    set_creds("rot", "whatever", -1);
    assert_int_equal(open_client(0, &c), DLOCK_EAUTH);
    char want[128];
    snprintf(want, sizeof(want), "the credentials callback failed for 127.0.0.1:%d", srv.port);
    assert_non_null(strstr(dlock_last_error(), want));
    set_creds("rot", "", 0);
    assert_int_equal(open_client(0, &c), DLOCK_EAUTH);
    assert_non_null(strstr(dlock_last_error(), "returned no password"));
    set_creds("", "", DLOCK_CREDENTIALS_NONE);
    assert_int_equal(open_client(0, &c), DLOCK_OK);
    dlock_client_close(c);
}

/* CONFIG SET requirepass between connects: the default user's password,
 * given without a user name. */
static void test_rotated_requirepass(void **state)
{
    (void)state;
    set_creds("", "rp-one", 0);
    acl("CONFIG SET requirepass %s", "rp-one");
    dlock_client *c;
    assert_int_equal(open_client(0, &c), DLOCK_OK);
    char name[64];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "cr-rp"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 30000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* The admin connection authenticates as the default user too now. */
    redisContext *ac = th_admin(&srv);
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "AUTH rp-one");
    freeReplyObject(r);
    r = redisCommand(ac, "CONFIG SET requirepass rp-two");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    set_creds("", "rp-two", 0);
    r = redisCommand(ac, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject(r);
    assert_int_equal(dlock_lock_try(l, 0, 30000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    r = redisCommand(ac, "CONFIG SET requirepass %s", "");
    freeReplyObject(r);
    redisFree(ac);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rotated_acl_password),
        cmocka_unit_test(test_refused_credential),
        cmocka_unit_test(test_callback_fails),
        cmocka_unit_test(test_rotated_requirepass),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
