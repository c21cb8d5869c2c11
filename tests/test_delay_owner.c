/* The lock-delay is the holder's (issue 39): a holder with a delay that
 * loses its hold without a release keeps every other dlock acquirer out
 * until its delay ends, whatever the acquirer's own setting (none here:
 * the fixture's client), for every kind, blocking and asynchronous; and the
 * lost holder ends its delay early by saying it has stopped (its release,
 * answered DLOCK_ENOTOWNER): the lock is free at once. The delay keys
 * outlive a volatile-* eviction of the locks. A Redis user whose
 * ACL refuses dlock's delay keys still acquires (without honouring them). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/async.h"
#include "fixture.h"

#define DELAY_MS 60000   /* the holder's delay: far longer than any test */

static dlock_client *holder_client(void)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_lock_delay(cfg, DELAY_MS), DLOCK_OK);
    dlock_client *c;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

static void refused_for_delay(int rc, const char *what)
{
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "lock-delay"))
        fail_msg("%s during another holder's lock-delay: %s (%s), expected DLOCK_ETIMEDOUT "
                 "naming the lock-delay",
                 what, dlock_errname(rc), dlock_last_error());
}

/* ------------------------------------------------ one asynchronous call */

typedef struct arec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status;
    char msg[512];
} arec;

static void on_done(const dlock_async_result *res, void *ud)
{
    arec *r = ud;
    pthread_mutex_lock(&r->mu);
    r->status = dlock_async_status(res);
    snprintf(r->msg, sizeof(r->msg), "%s", dlock_async_message(res));
    r->done = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void arec_init(arec *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

/* Waits for the callback; its status, the message in dlock_last_error()'s
 * place for refused_for_delay (through r->msg). */
static int arec_wait(arec *r, int started)
{
    assert_int_equal(started, DLOCK_OK);
    int64_t until = th_now_ms() + 10000 * th_slack();
    pthread_mutex_lock(&r->mu);
    while (!r->done && th_now_ms() < until) {
        pthread_mutex_unlock(&r->mu);
        th_sleep_ms(2);
        pthread_mutex_lock(&r->mu);
    }
    int done = r->done, st = r->status;
    pthread_mutex_unlock(&r->mu);
    assert_true(done);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    return st;
}

static void async_refused(int status, const arec *r, const char *what)
{
    if (status != DLOCK_ETIMEDOUT || !strstr(r->msg, "lock-delay"))
        fail_msg("%s (asynchronous) during another holder's lock-delay: %s (%s)", what,
                 dlock_errname(status), r->msg);
}

/* ------------------------------------------------------ the lock family */

typedef int (*lock_getter)(dlock_client *, const char *, dlock_lock **);
typedef int (*lock_getter_as)(dlock_client *, const char *, const char *, dlock_lock **);

/* A holder (client with the delay) takes `hold` on a fresh name with the
 * watchdog; an operator deletes the lock (its hold ends without a release).
 * The fixture's client, with no delay, is refused `take` there, blocking and
 * asynchronously, until the holder's release (DLOCK_ENOTOWNER: it lost the
 * lock) ends the delay: then it gets it at once. */
static void lost_then_told(lock_getter hold, lock_getter take, lock_getter_as take_as,
                           const char *prefix, const char *what)
{
    dlock_client *hc = holder_client();
    char name[96], marker[160];
    th_name(name, sizeof(name), prefix);
    snprintf(marker, sizeof(marker), "dlock_lock_delay:{%s}", name);
    dlock_lock *h, *t, *ta;
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(cli, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(hold(hc, name, &h), DLOCK_OK);
    assert_int_equal(take(cli, name, &t), DLOCK_OK);
    assert_int_equal(take_as(cli, name, owner, &ta), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);   /* lost: no release */

    refused_for_delay(dlock_lock_try(t, 0, 10000), what);
    arec r;
    arec_init(&r);
    int st = arec_wait(&r, dlock_lock_acquire_async(ta, &(dlock_wait_opts){.lease_ms = 10000},
                                                    on_done, &r));
    async_refused(st, &r, what);
    /* A wait sends nothing while the delay lasts and does not end it. */
    refused_for_delay(dlock_lock_try(t, 200, 10000), what);

    /* The holder learns of its loss and says it has stopped. */
    assert_int_equal(dlock_lock_release(h), DLOCK_ENOTOWNER);
    int64_t t0 = th_now_ms();
    int rc = dlock_lock_try(t, 0, 10000);
    if (rc != DLOCK_OK)
        fail_msg("%s after the lost holder's release: %s (%s)", what, dlock_errname(rc),
                 dlock_last_error());
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(dlock_lock_release(t), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(t);
    dlock_lock_free(ta);
    dlock_client_close(hc);
}

static void test_lock(void **state)
{
    (void)state;
    lost_then_told(dlock_lock_get, dlock_lock_get, dlock_lock_get_as, "do-lock", "lock");
}

static void test_fenced(void **state)
{
    (void)state;
    lost_then_told(dlock_lock_get, dlock_fenced_lock_get, dlock_fenced_lock_get_as, "do-fenced",
                   "fenced lock");
}

static void test_fair(void **state)
{
    (void)state;
    lost_then_told(dlock_fair_lock_get, dlock_fair_lock_get, dlock_fair_lock_get_as, "do-fair",
                   "fair lock");
}

static void test_write_after_writer(void **state)
{
    (void)state;
    lost_then_told(dlock_write_lock_get, dlock_write_lock_get, dlock_write_lock_get_as,
                   "do-ww", "write lock after a lost writer");
}

static void test_read_after_writer(void **state)
{
    (void)state;
    lost_then_told(dlock_write_lock_get, dlock_read_lock_get, dlock_read_lock_get_as, "do-wr",
                   "read lock after a lost writer");
}

static void test_write_after_reader(void **state)
{
    (void)state;
    lost_then_told(dlock_read_lock_get, dlock_write_lock_get, dlock_write_lock_get_as,
                   "do-rw", "write lock after a lost reader");
}

/* A lost reader delays writers only: a plain reader comes in at once. */
static void test_reader_does_not_delay_readers(void **state)
{
    (void)state;
    dlock_client *hc = holder_client();
    char name[96];
    th_name(name, sizeof(name), "do-rr");
    dlock_lock *h, *t;
    assert_int_equal(dlock_read_lock_get(hc, name, &h), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(cli, name, &t), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    assert_int_equal(dlock_lock_try(t, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(t), DLOCK_OK);
    assert_int_equal(dlock_lock_release(h), DLOCK_ENOTOWNER);
    dlock_lock_free(h);
    dlock_lock_free(t);
    dlock_client_close(hc);
}

/* A multi-lock's part and an election's campaign are acquisitions too. */
static void test_multilock_and_election(void **state)
{
    (void)state;
    dlock_client *hc = holder_client();
    char name[96], other[96];
    th_name(name, sizeof(name), "do-ml");
    th_name(other, sizeof(other), "do-ml-other");
    dlock_lock *h, *a, *b;
    assert_int_equal(dlock_lock_get(hc, name, &h), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, other, &a), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, name, &b), DLOCK_OK);
    dlock_lock *parts[] = {a, b};
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(parts, 2, &ml), DLOCK_OK);
    dlock_election *e;
    assert_int_equal(dlock_election_get(cli, name, &e), DLOCK_OK);

    assert_int_equal(dlock_lock_acquire(h, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(&srv, "DEL %s", name), 1);
    refused_for_delay(dlock_multilock_try(ml, 0, 10000), "multi-lock");
    assert_int_equal(th_int(&srv, "EXISTS %s", other), 0);   /* all or nothing */
    refused_for_delay(dlock_election_campaign(e, NULL), "election campaign");
    assert_int_equal(dlock_lock_release(h), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_multilock_try(ml, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(e, NULL), DLOCK_OK);
    assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    dlock_election_free(e);
    dlock_multilock_free(ml);
    dlock_lock_free(h);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(hc);
}

/* ----------------------------------------- the permit-expirable semaphore */

/* A permit lost unreleased (its lease ran out) is not given to a plain
 * acquirer, blocking or asynchronous, one permit or n, until its holder's
 * release (the permit had expired) ends the delay. */
static void test_permit(void **state)
{
    (void)state;
    const int64_t lease = 300 * th_slack();
    dlock_client *hc = holder_client();
    char name[96];
    th_name(name, sizeof(name), "do-permit");
    dlock_permit_semaphore *h, *t;
    assert_int_equal(dlock_permit_semaphore_get(hc, name, &h), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_get(cli, name, &t), DLOCK_OK);
    int set = 0;
    assert_int_equal(dlock_permit_semaphore_try_set_permits(t, 1, &set), DLOCK_OK);
    assert_true(set);
    char lost[DLOCK_PERMIT_ID_BUFSIZE], id[DLOCK_PERMIT_ID_BUFSIZE];
    char ids[1][DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_permit_semaphore_try(h, 0, lease, lost, sizeof(lost)), DLOCK_OK);
    th_sleep_ms(lease + 50);   /* never released: its lease runs out */

    refused_for_delay(dlock_permit_semaphore_try(t, 0, 10000, id, sizeof(id)), "permit");
    refused_for_delay(dlock_permit_semaphore_try_n(t, 1, 0, 10000, ids), "n permits");
    arec r;
    arec_init(&r);
    int st = arec_wait(&r, dlock_permit_semaphore_acquire_async(
                               t, &(dlock_wait_opts){.lease_ms = 10000}, on_done, &r));
    async_refused(st, &r, "permit");

    assert_int_not_equal(dlock_permit_semaphore_release(h, lost), DLOCK_OK);   /* expired */
    assert_int_equal(dlock_permit_semaphore_try(t, 0, 10000, id, sizeof(id)), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(t, id), DLOCK_OK);
    dlock_permit_semaphore_free(h);
    dlock_permit_semaphore_free(t);
    dlock_client_close(hc);
}

/* ---------------------------------------------------------- an eviction */

/* Evicts every key with a TTL (volatile-lru, maxmemory cut to 1 byte for a
 * moment) until none of the `n` keys is left, then sets the server back. */
static void evict_volatile(const char *const *keys, int n)
{
    freeReplyObject(th_cmd(&srv, "CONFIG SET maxmemory-policy volatile-lru"));
    freeReplyObject(th_cmd(&srv, "CONFIG SET maxmemory 1"));
    int left = n;
    for (int i = 0; i < 1000 && left > 0; i++) {
        freeReplyObject(th_cmd(&srv, "SET do-evict:poke x"));   /* refused (OOM), evicts */
        left = 0;
        for (int k = 0; k < n; k++)
            left += th_int(&srv, "EXISTS %s", keys[k]) != 0;
    }
    freeReplyObject(th_cmd(&srv, "CONFIG SET maxmemory 0"));
    freeReplyObject(th_cmd(&srv, "CONFIG SET maxmemory-policy noeviction"));
    assert_int_equal(left, 0);
}

/* The delay keys have no TTL: a volatile-* policy that evicts the held locks
 * (their keys have the lease as TTL) leaves them, and the holders' delays
 * still keep every plain acquirer out (a lock, a writer's lock and a
 * reader's, and a permit whose lease then ran out) until each holder says
 * it has stopped. */
static void test_evicted_lock_keeps_delay(void **state)
{
    (void)state;
    if (th_deployed(&srv) || th_acl_mode())
        skip();   /* one server of our own: its eviction policy is ours to change */
    dlock_client *hc = holder_client();
    char ln[96], wn[96], rn[96], pn[96];
    th_name(ln, sizeof(ln), "do-ev-lock");
    th_name(wn, sizeof(wn), "do-ev-write");
    th_name(rn, sizeof(rn), "do-ev-read");
    th_name(pn, sizeof(pn), "do-ev-permit");
    dlock_lock *hl, *hw, *hr, *tl, *tw, *tr;
    assert_int_equal(dlock_lock_get(hc, ln, &hl), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(hc, wn, &hw), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(hc, rn, &hr), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, ln, &tl), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(cli, wn, &tw), DLOCK_OK);   /* after a writer */
    assert_int_equal(dlock_write_lock_get(cli, rn, &tr), DLOCK_OK);  /* after a reader */
    dlock_permit_semaphore *hp, *tp;
    assert_int_equal(dlock_permit_semaphore_get(hc, pn, &hp), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_get(cli, pn, &tp), DLOCK_OK);
    int set = 0;
    assert_int_equal(dlock_permit_semaphore_try_set_permits(tp, 1, &set), DLOCK_OK);
    char pid[DLOCK_PERMIT_ID_BUFSIZE], id[DLOCK_PERMIT_ID_BUFSIZE];
    assert_int_equal(dlock_lock_acquire(hl, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(hw, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(hr, DLOCK_WATCHDOG), DLOCK_OK);
    const int64_t lease = 300 * th_slack(), t0 = th_now_ms();
    assert_int_equal(dlock_permit_semaphore_try(hp, 0, lease, pid, sizeof(pid)), DLOCK_OK);
    const char *keys[] = {ln, wn, rn};
    evict_volatile(keys, 3);
    if (th_now_ms() - t0 < lease + 50)   /* the permit, never released: its lease runs out */
        th_sleep_ms(lease + 50 - (th_now_ms() - t0));
    refused_for_delay(dlock_lock_try(tl, 0, 10000), "lock after an eviction");
    refused_for_delay(dlock_lock_try(tw, 0, 10000), "read lock after an evicted writer");
    refused_for_delay(dlock_lock_try(tr, 0, 10000), "write lock after an evicted reader");
    refused_for_delay(dlock_permit_semaphore_try(tp, 0, 10000, id, sizeof(id)),
                      "permit after a lost one");

    assert_int_equal(dlock_lock_release(hl), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_release(hw), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_release(hr), DLOCK_ENOTOWNER);
    assert_int_not_equal(dlock_permit_semaphore_release(hp, pid), DLOCK_OK);
    assert_int_equal(dlock_lock_try(tl, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(tw, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_try(tr, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(tp, 0, 10000, id, sizeof(id)), DLOCK_OK);
    assert_int_equal(dlock_lock_release(tl), DLOCK_OK);
    assert_int_equal(dlock_lock_release(tw), DLOCK_OK);
    assert_int_equal(dlock_lock_release(tr), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_release(tp, id), DLOCK_OK);
    dlock_lock *all[] = {hl, hw, hr, tl, tw, tr};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        dlock_lock_free(all[i]);
    dlock_permit_semaphore_free(hp);
    dlock_permit_semaphore_free(tp);
    dlock_client_close(hc);
}

/* ------------------------------------------------------------ an ACL */

/* A user whose ACL allows Redisson's keys only: a plain acquisition still
 * works (the delay keys go, with a warning); a holder with a delay of its own
 * is refused the marker it must write (DLOCK_ENOPERM names it). */
static void test_acl_without_delay_keys(void **state)
{
    (void)state;
    if (th_deployed(&srv) || th_tls_mode() || th_acl_mode())
        skip();   /* one server of our own, plain */
    char name[96];
    th_name(name, sizeof(name), "do-acl");
    redisReply *r = th_cmd(&srv,
                           "ACL SETUSER do-acl on >pw resetkeys ~%s ~redisson_* ~{%s}* "
                           "resetchannels &* +@all",
                           name, name);
    assert_non_null(r);
    freeReplyObject(r);
    char url[256];
    snprintf(url, sizeof(url), "redis://do-acl:pw@127.0.0.1:%d", th_client_port(&srv));
    dlock_client *c = th_client_url(url, 0);
    assert_non_null(c);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    int rc = dlock_lock_try(l, 0, 10000);
    if (rc != DLOCK_OK)
        fail_msg("plain acquisition under a Redisson-keys ACL: %s (%s)", dlock_errname(rc),
                 dlock_last_error());
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);   /* the client goes on without */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock *d;
    assert_int_equal(dlock_lock_get(c, name, &d), DLOCK_OK);
    assert_int_equal(dlock_lock_set_lock_delay(d, 1000), DLOCK_OK);
    rc = dlock_lock_try(d, 0, 10000);
    assert_int_not_equal(rc, DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_lock_free(d);
    dlock_client_close(c);
    r = th_cmd(&srv, "ACL DELUSER do-acl");
    freeReplyObject(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock),
        cmocka_unit_test(test_fenced),
        cmocka_unit_test(test_fair),
        cmocka_unit_test(test_write_after_writer),
        cmocka_unit_test(test_read_after_writer),
        cmocka_unit_test(test_write_after_reader),
        cmocka_unit_test(test_reader_does_not_delay_readers),
        cmocka_unit_test(test_multilock_and_election),
        cmocka_unit_test(test_permit),
        cmocka_unit_test(test_evicted_lock_keeps_delay),
        cmocka_unit_test(test_acl_without_delay_keys),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
