/* The least-privilege ACL of docs/acl-rule.txt with a real prefix: a user
 * limited to the rule for names under "app:" uses every kind of object (and
 * each of its companion keys and channels) without one refusal in the
 * server's ACL LOG, and a name outside the prefix is refused with a clear
 * error, nothing written. */
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

static th_redis srv;
static dlock_client *cli;

#define PW "acl-test-pw"

static int setup(void **state)
{
    (void)state;
    if (th_redis_start(&srv, NULL) != 0)
        return -1;
    if (th_acl_user(&srv, "app", PW, "app:") != 0)
        return -1;
    /* The URL of the mode (TLS or not) with this user instead. */
    char url[600], base[600];
    th_url_port(&srv, th_client_port(&srv), base, sizeof(base));
    const char *rest = strstr(base, "://") + 3;
    const char *at = strchr(rest, '@');
    snprintf(url, sizeof(url), "%.*sapp:" PW "@%s", (int)(rest - base), base, at ? at + 1 : rest);
    dlock_config *cfg = dlock_config_new();
    if (dlock_config_set_url(cfg, url) != DLOCK_OK ||
        dlock_config_set_watchdog_timeout(cfg, 600) != DLOCK_OK ||
        dlock_config_set_client_name(cfg, "acl-test") != DLOCK_OK ||
        dlock_client_open(&cli, cfg) != DLOCK_OK) {
        fprintf(stderr, "open as app: %s\n", dlock_last_error());
        dlock_config_free(cfg);
        return -1;
    }
    dlock_config_free(cfg);
    freeReplyObject(th_cmd(&srv, "ACL LOG RESET"));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(cli);
    th_redis_destroy(&srv);
    return 0;
}

/* The server's ACL LOG entries so far, printed; their number. */
static size_t acl_log(void)
{
    redisReply *r = th_cmd(&srv, "ACL LOG");
    assert_non_null(r);
    size_t n = r->elements;
    for (size_t i = 0; i < n; i++) {
        redisReply *e = r->element[i];
        for (size_t k = 0; k + 1 < e->elements; k += 2)
            if (e->element[k + 1]->type == REDIS_REPLY_STRING)
                print_message("    acl log: %s=%s\n", e->element[k]->str, e->element[k + 1]->str);
    }
    freeReplyObject(r);
    return n;
}

typedef struct later {
    int64_t ms;
    int (*fn)(void *);
    void *arg;
    int rc;
    pthread_t t;
} later;

static void *later_main(void *arg)
{
    later *l = arg;
    th_sleep_ms(l->ms);
    l->rc = l->fn(l->arg);
    return NULL;
}

static void run_later(later *l, int64_t ms, int (*fn)(void *), void *arg)
{
    l->ms = ms;
    l->fn = fn;
    l->arg = arg;
    pthread_create(&l->t, NULL, later_main, l);
}

static int release_lock(void *l) { return dlock_lock_release(l); }
static int release_sem(void *s) { return dlock_semaphore_release(s, 1); }
static int count_down(void *l) { return dlock_latch_count_down(l); }

/* Lock: acquire with the watchdog (renewed), a fenced token, a waiter woken
 * by the release's message (which claims the next turn after 100 ms: the
 * reservation key), queries and inspect. */
static void test_lock_family(void **state)
{
    (void)state;
    dlock_lock *a, *b;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(cli, "app:lock", owner, &a), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, "app:lock", &b), DLOCK_OK);
    uint64_t token = 0;
    assert_int_equal(dlock_lock_acquire_opts(
                         a, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .token = &token}),
                     DLOCK_OK);
    assert_true(token > 0);
    th_sleep_ms(450);   /* renewed at 200 and 400 ms */
    int locked = 0;
    assert_int_equal(dlock_lock_is_locked(b, &locked), DLOCK_OK);
    assert_int_equal(locked, 1);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_ttl(b, &ttl), DLOCK_OK);
    assert_true(ttl > 0);
    dlock_info *info;
    assert_int_equal(dlock_lock_inspect(b, &info), DLOCK_OK);
    assert_int_equal(dlock_info_locked(info), 1);
    dlock_info_free(info);
    later rel;
    run_later(&rel, 300, release_lock, a);   /* the waiter reserves its turn first */
    assert_int_equal(dlock_lock_try(b, 10000, 5000), DLOCK_OK);
    pthread_join(rel.t, NULL);
    assert_int_equal(rel.rc, DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    char *list = NULL;
    assert_int_equal(dlock_client_list_connections(cli, &list), DLOCK_OK);
    assert_non_null(strstr(list, "acl-test"));
    free(list);
    dlock_lock_free(a);
    dlock_lock_free(b);
    assert_int_equal(acl_log(), 0);
}

/* Fair lock: the queue, the deadlines and a waiter's own channel. */
static void test_fair_lock(void **state)
{
    (void)state;
    dlock_lock *a, *b;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(cli, "app:fair", owner, &a), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(cli, "app:fair", &b), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, DLOCK_WATCHDOG), DLOCK_OK);
    later rel;
    run_later(&rel, 200, release_lock, a);
    assert_int_equal(dlock_lock_try(b, 10000, 5000), DLOCK_OK);
    pthread_join(rel.t, NULL);
    assert_int_equal(rel.rc, DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    assert_int_equal(acl_log(), 0);
}

/* Read-write lock: two readers' hold timeouts, a writer woken by the read
 * releases, a multi-lock over a write and a plain lock. */
static void test_rwlock_and_multilock(void **state)
{
    (void)state;
    dlock_lock *r1, *w, *plain;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get_as(cli, "app:rw", owner, &r1), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(cli, "app:rw", &w), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r1, 5000), DLOCK_OK);
    th_sleep_ms(250);   /* read holds renewed */
    later rel;
    run_later(&rel, 200, release_lock, r1);
    assert_int_equal(dlock_lock_try(w, 0, 5000), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);   /* the second hold */
    pthread_join(rel.t, NULL);
    assert_int_equal(rel.rc, DLOCK_OK);
    assert_int_equal(dlock_lock_try(w, 10000, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);

    assert_int_equal(dlock_lock_get(cli, "app:plain", &plain), DLOCK_OK);
    dlock_lock *both[] = {w, plain};
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(both, 2, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    dlock_multilock_free(ml);
    dlock_lock_free(r1);
    dlock_lock_free(w);
    dlock_lock_free(plain);
    assert_int_equal(acl_log(), 0);
}

/* Semaphore, permit-expirable semaphore (its leases, renewed), latch. */
static void test_synchronizers(void **state)
{
    (void)state;
    dlock_semaphore *s;
    assert_int_equal(dlock_semaphore_get(cli, "app:sem", &s), DLOCK_OK);
    assert_int_equal(dlock_semaphore_set_permits(s, 1), DLOCK_OK);
    assert_int_equal(dlock_semaphore_acquire(s, 1), DLOCK_OK);
    later rel;
    run_later(&rel, 200, release_sem, s);
    assert_int_equal(dlock_semaphore_try(s, 1, 10000), DLOCK_OK);
    pthread_join(rel.t, NULL);
    assert_int_equal(rel.rc, DLOCK_OK);
    int64_t n = -1;
    assert_int_equal(dlock_semaphore_available(s, &n), DLOCK_OK);
    assert_int_equal(n, 0);
    dlock_semaphore_free(s);

    dlock_permit_semaphore *p;
    char id[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_get(cli, "app:permits", &p), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(p, 1), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_acquire(p, DLOCK_WATCHDOG, id, sizeof(id)), DLOCK_OK);
    th_sleep_ms(450);   /* renewed */
    assert_int_equal(dlock_permit_semaphore_release(p, id), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_available(p, &n, NULL), DLOCK_OK);
    assert_int_equal(n, 1);
    dlock_permit_semaphore_free(p);

    dlock_latch *l;
    assert_int_equal(dlock_latch_get(cli, "app:latch", &l), DLOCK_OK);
    int set = 0;
    assert_int_equal(dlock_latch_try_set_count(l, 1, &set), DLOCK_OK);
    assert_int_equal(set, 1);
    run_later(&rel, 200, count_down, l);
    assert_int_equal(dlock_latch_await(l, 10000), DLOCK_OK);
    pthread_join(rel.t, NULL);
    assert_int_equal(rel.rc, DLOCK_OK);
    dlock_latch_free(l);
    assert_int_equal(acl_log(), 0);
}

/* A name outside the prefix: refused with DLOCK_EAUTH naming the ACL,
 * nothing written. */
static void test_outside_prefix_refused(void **state)
{
    (void)state;
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, "other:lock", &l), DLOCK_OK);
    int rc = dlock_lock_try(l, 0, 5000);
    print_message("    %s: %s\n", dlock_errname(rc), dlock_last_error());
    assert_int_equal(rc, DLOCK_EAUTH);
    assert_non_null(strstr(dlock_last_error(), "NOPERM"));
    assert_int_equal(th_int(&srv, "EXISTS other:lock"), 0);
    dlock_lock_free(l);
    dlock_semaphore *s;
    assert_int_equal(dlock_semaphore_get(cli, "other:sem", &s), DLOCK_OK);
    assert_int_equal(dlock_semaphore_set_permits(s, 3), DLOCK_EAUTH);
    assert_int_equal(th_int(&srv, "EXISTS other:sem"), 0);
    dlock_semaphore_free(s);
    assert_true(acl_log() > 0);
    freeReplyObject(th_cmd(&srv, "ACL LOG RESET"));
}

/* A holder's note (dlock run's command) is read by the lock's own users, not
 * by a user of another prefix, who sees the connection's name in CLIENT LIST
 * with no command in it. */
static void test_note_stays_with_the_prefix(void **state)
{
    (void)state;
    assert_int_equal(th_acl_user(&srv, "other", PW, "other:"), 0);
    char url[600], base[600];
    th_url_port(&srv, th_client_port(&srv), base, sizeof(base));
    const char *rest = strstr(base, "://") + 3;
    const char *at = strchr(rest, '@');
    snprintf(url, sizeof(url), "%.*sother:" PW "@%s", (int)(rest - base), base, at ? at + 1 : rest);
    dlock_client *other = th_client_url(url, 0);
    assert_int_equal(dlock_client_set_note(cli, "app:noted", "o:1", "secret-cmd", 10, 10000),
                     DLOCK_OK);
    char *text = NULL;
    assert_int_equal(dlock_client_note(cli, "app:noted", "o:1", &text, NULL), DLOCK_OK);
    assert_string_equal(text, "secret-cmd");
    free(text);
    assert_int_equal(dlock_client_note(other, "app:noted", "o:1", &text, NULL), DLOCK_EAUTH);
    assert_null(text);
    char *list = NULL;
    assert_int_equal(dlock_client_list_connections(other, &list), DLOCK_OK);
    assert_non_null(strstr(list, "acl-test"));   /* app's client, named */
    assert_null(strstr(list, "secret-cmd"));
    free(list);
    assert_int_equal(dlock_client_set_note(cli, "app:noted", "o:1", NULL, 0, 0), DLOCK_OK);
    dlock_client_close(other);
    freeReplyObject(th_cmd(&srv, "ACL LOG RESET"));
}

/* A command a script calls and the user may not run: DLOCK_EAUTH, the
 * command named (Redis says only "can't run this command"), nothing
 * written. */
static void test_script_refusal_named(void **state)
{
    (void)state;
    freeReplyObject(th_cmd(&srv, "ACL SETUSER app -hincrby"));
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(cli, "app:refused", &l), DLOCK_OK);
    int rc = dlock_lock_try(l, 0, 5000);
    print_message("    %s: %s\n", dlock_errname(rc), dlock_last_error());
    assert_int_equal(rc, DLOCK_EAUTH);
    assert_non_null(strstr(dlock_last_error(), "NOPERM"));
    assert_non_null(strstr(dlock_last_error(), "'hincrby'"));
    assert_non_null(strstr(dlock_last_error(), "+hincrby"));
    assert_int_equal(th_int(&srv, "EXISTS app:refused"), 0);
    dlock_lock_free(l);
    freeReplyObject(th_cmd(&srv, "ACL SETUSER app +hincrby"));
    freeReplyObject(th_cmd(&srv, "ACL LOG RESET"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_family),
        cmocka_unit_test(test_fair_lock),
        cmocka_unit_test(test_rwlock_and_multilock),
        cmocka_unit_test(test_synchronizers),
        cmocka_unit_test(test_outside_prefix_refused),
        cmocka_unit_test(test_note_stays_with_the_prefix),
        cmocka_unit_test(test_script_refusal_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
