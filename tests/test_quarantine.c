/* The quarantine after failover (issue 25, dlock_config_set_failover_quarantine)
 * on a primary and two replicas named by redis-replicated://, whose roles the
 * test swaps with REPLICAOF as a failover would:
 *
 *   - with the quarantine on, an acquisition after the switch waits it out,
 *     sending nothing (a try with no wait says so), then succeeds on the new
 *     primary; the asynchronous one too; auto waits the longest lease the
 *     client has acquired with;
 *   - the quarantine is recorded on the new primary: a client with it off,
 *     and one opened after the switch, are refused every kind of acquisition
 *     there until it ends (a waiter gets the lock then);
 *   - a hold the new primary never received (its replica was cut off from
 *     the old primary when it was granted) is reported lost, cause
 *     "failover", about when the client sees the switch, not a watchdog
 *     period later. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdatomic.h>

#include "dlock/async.h"
#include "harness.h"
#include "sync/sync.h"

/* The key of the quarantine's record for a lock name. */
static const char *qkey_of(const char *name)
{
    size_t len;
    return dlock__quarantine_slot_key(dlock__key_slot(name, strlen(name)), &len);
}

#define SCAN_MS 200

/* The quarantine recorded on the servers by an earlier test (armed records
 * live an hour, and keep the longest quarantine a client asked for): gone,
 * so that each test sees only its own clients'. */
static void forget_records(void)
{
    redisReply *r = th_cmd(th_rs.cur, "EVAL %s 0",
                           "for _, k in ipairs(redis.call('keys', 'dlock_quarantine:*')) do "
                           "redis.call('del', k) end");
    if (r)
        freeReplyObject(r);
}

/* Makes np the primary and the others its replicas. */
static void promote(th_redis *np)
{
    if (th_replset_promote(&th_rs.set, np) != 0 || th_replset_await(np) != 0)
        fail_msg("cannot make %d the primary", np->port);
    th_rs.cur = np;
}

static char url[256];

static const char *replicated_url(void)
{
    snprintf(url, sizeof(url), "redis-replicated://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             th_rs_server(0)->port, th_rs_server(1)->port, th_rs_server(2)->port);
    return url;
}

static dlock_client *open_client(dlock_quarantine mode, int64_t q_ms, int64_t wd)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, replicated_url()), DLOCK_OK);
    assert_int_equal(dlock_config_set_scan_interval(cfg, SCAN_MS), DLOCK_OK);
    if (wd)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, wd), DLOCK_OK);
    assert_int_equal(dlock_config_set_failover_quarantine(cfg, mode, q_ms), DLOCK_OK);
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, cfg);
    dlock_config_free(cfg);
    if (rc != DLOCK_OK)
        fail_msg("open %s: %s", url, dlock_last_error());
    return c;
}

/* Bad input: a clear refusal, the setting unchanged. */
static void test_bad_input(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_failover_quarantine(NULL, DLOCK_QUARANTINE_ON, 10),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_failover_quarantine(cfg, (dlock_quarantine)7, 10),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "mode"));
    assert_int_equal(dlock_config_set_failover_quarantine(cfg, DLOCK_QUARANTINE_ON, 0),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_failover_quarantine(cfg, DLOCK_QUARANTINE_ON, -5),
                     DLOCK_EINVAL);
    assert_int_equal(
        dlock_config_set_failover_quarantine(cfg, DLOCK_QUARANTINE_AUTO, 86400001), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_failover_quarantine(cfg, DLOCK_QUARANTINE_AUTO, 0),
                     DLOCK_OK);
    assert_int_equal(dlock_config_set_failover_quarantine(cfg, DLOCK_QUARANTINE_OFF, -1),
                     DLOCK_OK);   /* ms ignored when off */
    dlock_config_free(cfg);
}

static _Atomic int async_rc = 1;
static char async_msg[256];

static void on_async(const dlock_async_result *res, void *ud)
{
    (void)ud;
    snprintf(async_msg, sizeof(async_msg), "%s", dlock_async_message(res));
    atomic_store(&async_rc, dlock_async_status(res));
}

/* A try with no wait (lease 10 s) of a lock or a multi-lock. */
typedef int (*try_fn)(void *obj);
static int try_lock(void *l) { return dlock_lock_try(l, 0, 10000); }
static int try_multilock(void *m) { return dlock_multilock_try(m, 0, 10000); }

/* A client with a quarantine of q ms, after a switch begun at t_swap: tries
 * until refused naming the quarantine (never taken); returns when. */
static int64_t await_quarantine(const char *what, try_fn fn, void *obj, int64_t q,
                                int64_t t_swap)
{
    int rc = DLOCK_OK;
    for (int64_t until = th_now_ms() + 5000 * th_slack(); th_now_ms() < until; th_sleep_ms(10)) {
        rc = fn(obj);
        if (rc == DLOCK_ETIMEDOUT && strstr(dlock_last_error(), "quarantine")) {
            const int64_t t_seen = th_now_ms();
            printf("# %s: switch begun -> quarantine seen: %lld ms; message: %s\n", what,
                   (long long)(t_seen - t_swap), dlock_last_error());
            return t_seen;
        }
        if (rc == DLOCK_OK)
            fail_msg("%s taken %lld ms after the switch began, within the quarantine (%lld ms)",
                     what, (long long)(th_now_ms() - t_swap), (long long)q);
    }
    fail_msg("no quarantine seen: last %d (%s)", rc, dlock_last_error());
    return -1;
}

/* Waits for the asynchronous call's callback; fails unless it says want. */
static void await_async(int want, const char *what)
{
    for (int64_t until = th_now_ms() + 10000 * th_slack();
         atomic_load(&async_rc) == 1 && th_now_ms() < until;)
        th_sleep_ms(5);
    if (atomic_load(&async_rc) != want)
        fail_msg("%s: %d (%s)", what, atomic_load(&async_rc), async_msg);
}

/* The quarantine's records the client that saw the switch starts on np (a
 * few scripts of many keys) are written: the scripts counted from now on are
 * the acquisitions'. */
static void await_records(th_redis *np, const char *name)
{
    for (int64_t until = th_now_ms() + 3000 * th_slack(); th_now_ms() < until; th_sleep_ms(5))
        if (th_int(np, "PTTL %s", qkey_of(name)) > 0)
            break;
    th_calls_settled(np, 2000 * th_slack());
}

/* After waiting out a quarantine of q ms (the switch began at t_swap, was
 * seen at t_seen, the acquisitions done at t_ok, `sent` scripts sent to
 * the new primary meanwhile, at most `most`). */
static void check_waited(const char *what, int64_t q, int64_t t_swap, int64_t t_seen,
                         int64_t t_ok, long long sent, long long most)
{
    printf("# %s: switch begun -> acquired: %lld ms (quarantine %lld ms); scripts sent "
           "meanwhile: %lld\n",
           what, (long long)(t_ok - t_swap), (long long)q, sent);
    /* The quarantine began after the switch did: the acquisition cannot come
     * sooner than q after the switch began... */
    assert_true(t_ok - t_swap >= q);
    /* ...nor much later than q after the client saw it. */
    assert_true(t_ok - t_seen <= q + 1500 * th_slack());
    /* Nothing was tried during the wait (polling every retry delay would
     * send dozens). */
    assert_true(sent <= most);
}

/* After a switch: the quarantined client waits out the quarantine, sending
 * nothing, then acquires. */
static void test_acquisition_waits_out_the_quarantine(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), q = 2000 * slack;
    dlock_client *qc = open_client(DLOCK_QUARANTINE_ON, q, 0);
    char qname[64], aname[64];
    th_name(qname, sizeof(qname), "q-wait");
    th_name(aname, sizeof(aname), "q-async");
    dlock_lock *ql, *al;
    assert_int_equal(dlock_lock_get(qc, qname, &ql), DLOCK_OK);
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(qc, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(qc, aname, owner, &al), DLOCK_OK);
    /* Before any failover: no quarantine (and both names' records armed). */
    assert_int_equal(dlock_lock_try(ql, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(ql), DLOCK_OK);
    assert_int_equal(dlock_lock_try(al, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(al), DLOCK_OK);

    th_redis *np = th_rs_next();
    const int64_t t_swap = th_now_ms();
    promote(np);

    /* The quarantined client, once it has seen the switch, refuses a try
     * with no wait, naming the quarantine. */
    const int64_t t_seen = await_quarantine("lock", try_lock, ql, q, t_swap);
    int rc;
    /* Waiting sends nothing to the new primary: no script while it sleeps. */
    await_records(np, qname);
    long long before = th_calls(np, "evalsha");
    atomic_store(&async_rc, 1);
    rc = dlock_lock_acquire_async(
        al, &(dlock_wait_opts){.wait_ms = 30000 * slack, .lease_ms = 10000}, on_async, NULL);
    if (rc != DLOCK_OK)
        fail_msg("asynchronous acquire: %d (%s)", rc, dlock_last_error());
    rc = dlock_lock_try(ql, 30000 * slack, 10000);
    const int64_t t_ok = th_now_ms();
    if (rc != DLOCK_OK)
        fail_msg("after the quarantine: %d (%s)", rc, dlock_last_error());
    await_async(DLOCK_OK, "asynchronous acquisition");
    /* Two acquisitions, one script each, or two after a NOSCRIPT; a few more
     * each when the record on the server (written a round trip after this
     * client's quarantine began) ends a few ms after it: not the dozens a
     * poll would send. */
    check_waited("lock", q, t_swap, t_seen, t_ok, th_calls(np, "evalsha") - before, 8);
    assert_int_equal(th_int(np, "EXISTS %s", qname), 1);
    assert_int_equal(th_int(np, "EXISTS %s", aname), 1);
    assert_int_equal(dlock_lock_release(ql), DLOCK_OK);
    assert_int_equal(dlock_lock_release(al), DLOCK_OK);
    dlock_lock_free(ql);
    dlock_lock_free(al);
    dlock_client_close(qc);
}

/* The quarantine is recorded on the new primary by the client that has it
 * on: a client without it (open before the switch) and one opened after the
 * switch are refused there, every kind, blocking and asynchronous, naming
 * it; a waiter gets the lock once it ends; before the record (the
 * quarantined client has not seen the switch yet) nothing stops them. */
static void test_recorded_on_server(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), q = 3000 * slack;
    dlock_client *qc = open_client(DLOCK_QUARANTINE_ON, q, 0);
    dlock_client *oc = open_client(DLOCK_QUARANTINE_OFF, 0, 0);
    char name[64];
    th_name(name, sizeof(name), "q-rec");
    dlock_lock *ql, *ol;
    assert_int_equal(dlock_lock_get(qc, name, &ql), DLOCK_OK);
    assert_int_equal(dlock_lock_get(oc, name, &ol), DLOCK_OK);
    th_redis *np = th_rs_next();
    const int64_t t_swap = th_now_ms();
    promote(np);
    const int64_t t_seen = await_quarantine("quarantined client", try_lock, ql, q, t_swap);
    /* Its record on the new primary, once written. */
    long long left = 0;
    for (int64_t until = th_now_ms() + 3000 * slack; th_now_ms() < until; th_sleep_ms(5))
        if ((left = th_int(np, "PTTL %s", qkey_of(name))) > 0)
            break;
    if (left <= 0)
        fail_msg("no quarantine recorded on the new primary %d", np->port);
    redisReply *v = th_cmd(np, "GET %s", qkey_of(name));
    printf("# switch seen -> recorded: %lld ms (%s; quarantine %lld ms)\n",
           (long long)(th_now_ms() - t_seen), v && v->str ? v->str : "?", (long long)q);
    if (v)
        freeReplyObject(v);
    /* The client without the quarantine, once it sees the switch itself. */
    int rc = DLOCK_OK;
    for (int64_t until = th_now_ms() + 3000 * slack; th_now_ms() < until; th_sleep_ms(10)) {
        if ((rc = dlock_lock_try(ol, 0, 10000)) == DLOCK_ETIMEDOUT)
            break;
        if (rc == DLOCK_OK)
            fail_msg("taken by a client without the quarantine during the recorded one");
    }
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "recorded on the server"))
        fail_msg("a client without the quarantine: %d (%s)", rc, dlock_last_error());
    /* A client opened after the switch, every kind. */
    dlock_client *lc = open_client(DLOCK_QUARANTINE_OFF, 0, 0);
    char other[64], sname[64], pname[64];
    th_name(other, sizeof(other), "q-rec-other");
    th_name(sname, sizeof(sname), "q-rec-sem");
    th_name(pname, sizeof(pname), "q-rec-permits");
    dlock_lock *k[4];
    assert_int_equal(dlock_lock_get(lc, name, &k[0]), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(lc, other, &k[1]), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get(lc, other, &k[2]), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(lc, name, &k[3]), DLOCK_OK);
    for (int i = 0; i < 4; i++) {
        rc = dlock_lock_try(k[i], 0, 10000);
        if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "quarantine"))
            fail_msg("kind %d opened after the switch: %d (%s)", i, rc, dlock_last_error());
    }
    dlock_permit_semaphore *ps;
    dlock_semaphore *sem;
    char id[DLOCK_PERMIT_ID_BUFSIZE];
    int set = 0;
    assert_int_equal(dlock_permit_semaphore_get(lc, pname, &ps), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try_set_permits(ps, 1, &set), DLOCK_OK);
    rc = dlock_permit_semaphore_try(ps, 0, 10000, id, sizeof(id));
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "quarantine"))
        fail_msg("a permit: %d (%s)", rc, dlock_last_error());
    assert_int_equal(dlock_semaphore_get(lc, sname, &sem), DLOCK_OK);
    assert_int_equal(dlock_semaphore_try_set_permits(sem, 1, &set), DLOCK_OK);
    rc = dlock_semaphore_try(sem, 1, 0);
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "quarantine"))
        fail_msg("a semaphore: %d (%s)", rc, dlock_last_error());
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *al;
    assert_int_equal(dlock_client_new_owner_id(lc, owner, sizeof(owner)), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(lc, name, owner, &al), DLOCK_OK);
    atomic_store(&async_rc, 1);
    assert_int_equal(dlock_lock_acquire_async(al, &(dlock_wait_opts){.lease_ms = 10000},
                                              on_async, NULL),
                     DLOCK_OK);
    await_async(DLOCK_ETIMEDOUT, "asynchronous acquisition during the recorded quarantine");
    assert_non_null(strstr(async_msg, "quarantine"));
    /* A waiter gets it when the record ends, not before. */
    rc = dlock_lock_try(k[0], 30000 * slack, 10000);
    const int64_t t_ok = th_now_ms();
    if (rc != DLOCK_OK)
        fail_msg("after the recorded quarantine: %d (%s)", rc, dlock_last_error());
    printf("# switch begun -> taken by a client opened after it: %lld ms (quarantine %lld)\n",
           (long long)(t_ok - t_swap), (long long)q);
    assert_true(t_ok - t_seen >= q - 200 * slack);
    assert_int_equal(dlock_lock_release(k[0]), DLOCK_OK);
    for (int i = 0; i < 4; i++)
        dlock_lock_free(k[i]);
    dlock_lock_free(al);
    dlock_permit_semaphore_free(ps);
    dlock_semaphore_free(sem);
    dlock_lock_free(ql);
    dlock_lock_free(ol);
    dlock_client_close(lc);
    dlock_client_close(oc);
    dlock_client_close(qc);
}

/* Frees the multi-lock with its locks. */
static void ml_free(dlock_multilock *ml, dlock_lock **l, size_t n)
{
    dlock_multilock_free(ml);
    for (size_t i = 0; i < n; i++)
        dlock_lock_free(l[i]);
}

/* A multi-lock of two names (blocking and asynchronous) and an election's
 * campaign wait out the quarantine as a lock does, sending nothing, then
 * succeed; a wait shorter than the quarantine ends naming it, with nothing
 * held. (Clients without the quarantine: test_recorded_on_server.) */
static void test_multilock_and_election_wait_out_the_quarantine(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), q = 2000 * slack;
    dlock_client *qc = open_client(DLOCK_QUARANTINE_ON, q, 0);
    char n[4][64], en[64];
    static const char *const tag[4] = {"qm-a", "qm-b", "qm-async-a", "qm-async-b"};
    dlock_lock *l[4];
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_new_owner_id(qc, owner, sizeof(owner)), DLOCK_OK);
    for (int i = 0; i < 4; i++) {
        th_name(n[i], sizeof(n[i]), tag[i]);
        if (i < 2)
            assert_int_equal(dlock_lock_get(qc, n[i], &l[i]), DLOCK_OK);
        else
            assert_int_equal(dlock_lock_get_as(qc, n[i], owner, &l[i]), DLOCK_OK);
    }
    dlock_multilock *qm, *am;
    assert_int_equal(dlock_multilock_new(l, 2, &qm), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(l + 2, 2, &am), DLOCK_OK);
    th_name(en, sizeof(en), "qe");
    dlock_election *qe;
    assert_int_equal(dlock_election_get(qc, en, &qe), DLOCK_OK);
    const dlock_wait_opts now = {.wait_ms = 0};
    /* Each taken once before the failover: their records armed (counted
     * apart from the waits' scripts below). */
    assert_int_equal(dlock_multilock_try(qm, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(qm), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(am, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(am), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(qe, &now), DLOCK_OK);
    assert_int_equal(dlock_election_resign(qe), DLOCK_OK);

    th_redis *np = th_rs_next();
    const int64_t t_swap = th_now_ms();
    promote(np);

    /* With it: once the switch is seen, a try names the quarantine. */
    const int64_t t_seen = await_quarantine("multi-lock", try_multilock, qm, q, t_swap);
    int rc = dlock_election_campaign(qe, &now);
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "quarantine"))
        fail_msg("campaign in the quarantine: %d (%s)", rc, dlock_last_error());
    /* A short wait ends naming it, nothing held (all or nothing). */
    rc = dlock_multilock_try(qm, 100, 10000);
    if (rc != DLOCK_ETIMEDOUT || !strstr(dlock_last_error(), "quarantine"))
        fail_msg("short wait: %d (%s)", rc, dlock_last_error());
    atomic_store(&async_rc, 1);
    assert_int_equal(dlock_multilock_acquire_async(
                         am, &(dlock_wait_opts){.wait_ms = 100, .lease_ms = 10000}, on_async, NULL),
                     DLOCK_OK);
    await_async(DLOCK_ETIMEDOUT, "short asynchronous wait");
    if (!strstr(async_msg, "quarantine"))
        fail_msg("short asynchronous wait: %s", async_msg);
    assert_int_equal(th_int(np, "EXISTS %s %s %s %s %s", n[0], n[1], n[2], n[3], en), 0);

    /* Long waits: sleeping, sending nothing, then all taken. */
    await_records(np, n[0]);
    long long before = th_calls(np, "evalsha");
    atomic_store(&async_rc, 1);
    assert_int_equal(dlock_multilock_acquire_async(
                         am, &(dlock_wait_opts){.wait_ms = 30000 * slack, .lease_ms = 10000},
                         on_async, NULL),
                     DLOCK_OK);
    rc = dlock_multilock_try(qm, 30000 * slack, 10000);
    const int64_t t_ok = th_now_ms();
    if (rc != DLOCK_OK)
        fail_msg("multi-lock after the quarantine: %d (%s)", rc, dlock_last_error());
    uint64_t term = 0;
    rc = dlock_election_campaign(qe, &(dlock_wait_opts){.wait_ms = 30000 * slack,
                                                        .token = &term});
    if (rc != DLOCK_OK)
        fail_msg("campaign after the quarantine: %d (%s)", rc, dlock_last_error());
    await_async(DLOCK_OK, "asynchronous multi-lock");
    /* Four locks, the election's lock and its announcement, each once (twice
     * after a NOSCRIPT, once more when the record on the server ends a few ms
     * after this client's quarantine). */
    check_waited("multi-lock, election", q, t_swap, t_seen, t_ok,
                 th_calls(np, "evalsha") - before, 24);
    assert_int_equal(th_int(np, "EXISTS %s %s %s %s %s", n[0], n[1], n[2], n[3], en), 5);
    assert_true(term > 0);
    assert_int_equal(dlock_election_resign(qe), DLOCK_OK);
    dlock_election_free(qe);
    assert_int_equal(dlock_multilock_release(qm), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(am), DLOCK_OK);
    ml_free(qm, l, 2);
    ml_free(am, l + 2, 2);
    dlock_client_close(qc);
}

/* auto: the longest lease an earlier holder may believe it has, here the
 * fixed lease this client acquired with (longer than its watchdog timeout). */
static void test_auto_covers_the_longest_lease(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 500 * slack, lease = 1500 * slack;
    dlock_client *c = open_client(DLOCK_QUARANTINE_AUTO, 0, wd);
    char name[64], other[64];
    th_name(name, sizeof(name), "q-auto");
    th_name(other, sizeof(other), "q-auto2");
    dlock_lock *l, *o;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, other, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, lease), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    const int64_t t_swap = th_now_ms();
    promote(th_rs_next());
    int rc = dlock_lock_try(o, 30000 * slack, 5000);
    const int64_t t_ok = th_now_ms();
    if (rc != DLOCK_OK)
        fail_msg("after the quarantine: %d (%s)", rc, dlock_last_error());
    printf("# auto (watchdog %lld ms, longest lease %lld ms): switch begun -> acquired %lld ms\n",
           (long long)wd, (long long)lease, (long long)(t_ok - t_swap));
    /* Not the watchdog timeout: the lease, which is longer. */
    assert_true(t_ok - t_swap >= lease);
    assert_true(t_ok - t_swap <= lease + 5000 * slack);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(o);
    dlock_client_close(c);
}

/* A hold granted while the next primary was cut off from the old one: the
 * new primary never had it. It is reported lost, cause "failover", about
 * when the client sees the switch (the watchdog's period is 30 s here). */
static void test_hold_absent_on_new_primary(void **state)
{
    (void)state;
    const int64_t slack = th_slack();
    dlock_client *c = open_client(DLOCK_QUARANTINE_OFF, 0, 90000);
    char name[64];
    th_name(name, sizeof(name), "q-absent");
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    dlock_lock_set_lost_callback(l, th_on_lost, NULL);
    atomic_store(&th_lost_reason, 0);
    atomic_store(&th_lost_cause, -1);

    th_redis *np = th_rs_next();
    /* Cut np off: a replica of a port nobody listens on (still a replica,
     * so the client sees one primary). */
    int dead = th_free_port();
    assert_true(dead > 0);
    redisReply *x = th_cmd(np, "REPLICAOF 127.0.0.1 %d", dead);
    assert_true(x && x->type == REDIS_REPLY_STATUS);
    freeReplyObject(x);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(th_int(th_rs.cur, "EXISTS %s", name), 1);
    assert_int_equal(th_int(np, "EXISTS %s", name), 0);

    const int64_t t_swap = th_now_ms();
    promote(np);   /* the old primary resyncs from np: the hold is gone everywhere */
    for (int64_t until = th_now_ms() + 10000 * slack;
         atomic_load(&th_lost_reason) == 0 && th_now_ms() < until;)
        th_sleep_ms(5);
    const int64_t t_lost = th_now_ms();
    assert_int_equal(atomic_load(&th_lost_reason), DLOCK_LOST_GONE);
    printf("# switch begun -> hold reported lost: %lld ms (cause %s)\n",
           (long long)(t_lost - t_swap), dlock_lost_cause_str(atomic_load(&th_lost_cause)));
    assert_int_equal(atomic_load(&th_lost_cause), DLOCK_CAUSE_FAILOVER);
    /* Found by the renewal the switch set off, not by the next periodic one
     * (30 s away: the watchdog timeout is 90 s). */
    assert_true(t_lost - t_swap <= 5000 * slack);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Armed before the failover by a client with the quarantine on (its
 * acquisition there), replicated: after the switch the first dlock
 * acquisition on the new primary, by a client without the quarantine and
 * before the quarantined client has seen the switch at all, starts the
 * quarantine and is refused. */
static void test_armed_record_starts_on_new_primary(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), q = 3000 * slack;
    dlock_client *qc = open_client(DLOCK_QUARANTINE_ON, q, 0);
    dlock_client *oc = open_client(DLOCK_QUARANTINE_OFF, 0, 0);
    char name[64];
    th_name(name, sizeof(name), "q-armed");
    dlock_lock *ql, *ol;
    assert_int_equal(dlock_lock_get(qc, name, &ql), DLOCK_OK);
    assert_int_equal(dlock_lock_get(oc, name, &ol), DLOCK_OK);
    assert_int_equal(dlock_lock_try(ql, 0, 10000), DLOCK_OK);   /* arms the record */
    assert_int_equal(dlock_lock_release(ql), DLOCK_OK);
    th_redis *np = th_rs_next();
    long long armed = 0;
    for (int64_t until = th_now_ms() + 3000 * slack; th_now_ms() < until; th_sleep_ms(5))
        if ((armed = th_int(np, "EXISTS %s", qkey_of(name))) == 1)
            break;   /* replicated to the next primary */
    assert_int_equal(armed, 1);
    dlock_client_close(qc);   /* it will never see the switch */
    const int64_t t_swap = th_now_ms();
    promote(np);
    int rc = DLOCK_OK;
    for (int64_t until = th_now_ms() + 5000 * slack; th_now_ms() < until; th_sleep_ms(10)) {
        rc = dlock_lock_try(ol, 0, 10000);
        if (rc == DLOCK_OK)
            fail_msg("taken on the new primary %lld ms after the switch, in its quarantine",
                     (long long)(th_now_ms() - t_swap));
        if (rc == DLOCK_ETIMEDOUT && strstr(dlock_last_error(), "recorded on the server"))
            break;
    }
    printf("# switch begun -> a client without the quarantine refused: %lld ms (%s)\n",
           (long long)(th_now_ms() - t_swap), dlock_last_error());
    assert_int_equal(rc, DLOCK_ETIMEDOUT);
    rc = dlock_lock_try(ol, 30000 * slack, 10000);
    const int64_t t_ok = th_now_ms();
    if (rc != DLOCK_OK)
        fail_msg("after the quarantine: %d (%s)", rc, dlock_last_error());
    printf("# switch begun -> taken: %lld ms (quarantine %lld ms)\n", (long long)(t_ok - t_swap),
           (long long)q);
    assert_true(t_ok - t_swap >= q);
    assert_int_equal(dlock_lock_release(ol), DLOCK_OK);
    dlock_lock_free(ql);
    dlock_lock_free(ol);
    dlock_client_close(oc);
}

static int fresh(void **state)
{
    (void)state;
    forget_records();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_bad_input, fresh),
        cmocka_unit_test_setup(test_acquisition_waits_out_the_quarantine, fresh),
        cmocka_unit_test_setup(test_recorded_on_server, fresh),
        cmocka_unit_test_setup(test_armed_record_starts_on_new_primary, fresh),
        cmocka_unit_test_setup(test_multilock_and_election_wait_out_the_quarantine, fresh),
        cmocka_unit_test_setup(test_auto_covers_the_longest_lease, fresh),
        cmocka_unit_test_setup(test_hold_absent_on_new_primary, fresh),
    };
    return cmocka_run_group_tests(tests, th_rs_setup, th_rs_teardown);
}
