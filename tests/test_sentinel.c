/* Sentinel: a primary with 2 replicas and 3 sentinels started by the
 * harness. Locks through redis-sentinel://, the sentinels' own credentials,
 * bad input, and a failover with the primary killed: holds survive and are
 * renewed on the new primary, waiters are woken there, new acquisitions work
 * soon after the switch, and a client with a failover quarantine waits it out
 * first. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "dlock/async.h"
#include "harness.h"
#include "sync/sync.h"

#define MASTER "dlockmaster"

static th_replset rs;
static th_sentinels ss;

static int setup(void **state)
{
    (void)state;
    return th_sentinel_deploy_start(&rs, &ss, MASTER);
}

static int teardown(void **state)
{
    (void)state;
    th_sentinel_deploy_destroy(&rs, &ss);
    return 0;
}

/* The server that is the primary now, as the sentinels say. */
static th_redis *primary(void) { return th_sentinel_primary(&rs, &ss.s[0], MASTER); }

static void test_locks_on_the_primary(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(ss.url, 0);
    char name[64], owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_owner_id(c, owner, sizeof(owner)), DLOCK_OK);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "sen"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    redisReply *r = th_cmd(primary(), "HGET %s %s", name, owner);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_int(primary(), "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static int open_cfg(dlock_config *cfg)
{
    dlock_config_set_connect_timeout(cfg, 1000);
    dlock_config_set_retry(cfg, 0, 100);
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, cfg);
    dlock_client_close(c);
    return rc;
}

/* The sentinels get their own credentials (here an ACL user that only the
 * sentinels have), the data nodes the URL's (none): each side refuses the
 * other's. */
static void test_sentinel_credentials(void **state)
{
    (void)state;
    for (int i = 0; i < TH_SENTINELS; i++) {
        redisReply *r = th_cmd(&ss.s[i], "ACL SETUSER watcher on >w4tch +@all");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_sentinel_password(cfg, "watcher", "w4tch"), DLOCK_OK);
    assert_int_equal(dlock_config_set_url(cfg, ss.url), DLOCK_OK);   /* kept across URLs */
    assert_int_equal(open_cfg(cfg), DLOCK_OK);
    /* The wrong sentinel password: the sentinels refuse, and say so. */
    assert_int_equal(dlock_config_set_sentinel_password(cfg, "watcher", "wrong"), DLOCK_OK);
    assert_int_not_equal(open_cfg(cfg), DLOCK_OK);
    assert_non_null(strstr(dlock_last_error(), "no sentinel told"));
    assert_null(strstr(dlock_last_error(), "wrong"));   /* never the password */
    /* The sentinels' user given as the data nodes' instead: the primary refuses. */
    assert_int_equal(dlock_config_set_sentinel_password(cfg, NULL, NULL), DLOCK_OK);
    char url[600];
    const char *hosts = strstr(ss.url, "://") + 3;   /* redis- or rediss-sentinel:// */
    snprintf(url, sizeof(url), "%.*swatcher:w4tch@%s", (int)(hosts - ss.url), ss.url, hosts);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(open_cfg(cfg), DLOCK_EAUTH);
    dlock_config_free(cfg);
}

static void test_bad_input(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    char url[600];
    /* A master name no sentinel knows. */
    snprintf(url, sizeof(url), "%.*s#nosuchmaster", (int)(strchr(ss.url, '#') - ss.url), ss.url);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(open_cfg(cfg), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "no sentinel knows master 'nosuchmaster'"));
    dlock_config_free(cfg);   /* without the TLS settings a rediss URL left */
    cfg = dlock_config_new();
    /* No sentinel answers. */
    th_redis gone;
    assert_int_equal(th_redis_start(&gone, NULL), 0);
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d#%s", gone.port, MASTER);
    th_redis_destroy(&gone);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(open_cfg(cfg), DLOCK_ECONN);
    assert_non_null(strstr(dlock_last_error(), "no sentinel told where master"));
    /* A data node named as a sentinel: it does not know SENTINEL. */
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d#%s", rs.primary.port, MASTER);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_not_equal(open_cfg(cfg), DLOCK_OK);
    assert_non_null(strstr(dlock_last_error(), "no sentinel told where master"));
    /* Mixed schemes. */
    assert_int_equal(dlock_config_set_url(cfg, "redis-sentinel://a:1,redis://b:2#m"),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "mixes schemes"));
    dlock_config_free(cfg);
}

/* ------------------------------------------------------ acknowledgement */

static dlock_client *ack_client(int replicas, dlock_ack_policy policy, int64_t watchdog_ms)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, ss.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_replica_ack(cfg, replicas, 500, policy), DLOCK_OK);
    if (watchdog_ms)
        assert_int_equal(dlock_config_set_watchdog_timeout(cfg, watchdog_ms), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}


/* Redisson's rule (DLOCK_REPLICAS_ALL, checkLockSyncedSlaves): every
 * connected replica is asked; one of two acknowledging is enough (dlock's
 * count of 2 refuses it), none of two is a failure: given back under
 * RELEASE, kept and reported under KEEP. Replicas are frozen (SIGSTOP), so
 * the primary still counts them connected. */
static void test_replica_ack_redisson(void **state)
{
    (void)state;
    th_redis *p = primary();
    th_redis *reps[3];
    size_t nr = 0;
    th_redis *all[] = {&rs.primary, &rs.replica[0], &rs.replica[1]};
    for (size_t i = 0; i < 3; i++)
        if (all[i]->port != p->port)
            reps[nr++] = all[i];
    assert_int_equal(nr, 2);
    dlock_client *red = ack_client(DLOCK_REPLICAS_ALL, DLOCK_ACK_RELEASE, 0);
    dlock_client *redk = ack_client(DLOCK_REPLICAS_ALL, DLOCK_ACK_KEEP, 0);
    dlock_client *two = ack_client(2, DLOCK_ACK_RELEASE, 0);
    char name[64], msg[512];
    dlock_lock *l, *lk, *l2;
    assert_int_equal(dlock_lock_get(red, th_name(name, sizeof(name), "ack-all"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(redk, name, &lk), DLOCK_OK);
    assert_int_equal(dlock_lock_get(two, name, &l2), DLOCK_OK);
    /* all up: both asked, both acknowledge */
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), 2);
    assert_int_equal(dlock_lock_replica_acks(l), 2);   /* the handle's, read anywhere */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);

    /* one frozen: enough for Redisson's rule, not for a count of 2 */
    kill(reps[0]->pid, SIGSTOP);
    int rc1 = dlock_lock_try(l, 0, 10000), acks1 = dlock_last_replica_acks();
    int rel1 = rc1 == DLOCK_OK ? dlock_lock_release(l) : -1;
    int rc2 = dlock_lock_try(l2, 0, 10000), acks2 = dlock_last_replica_acks();
    int hacks1 = dlock_lock_replica_acks(l), hacks2 = dlock_lock_replica_acks(l2);
    /* both frozen: none acknowledged */
    kill(reps[1]->pid, SIGSTOP);
    int rc3 = dlock_lock_try(l, 0, 10000), acks3 = dlock_last_replica_acks();
    snprintf(msg, sizeof(msg), "%s", dlock_last_error());
    long long exists3 = th_int(p, "EXISTS %s", name);
    int rc4 = dlock_lock_try(lk, 0, 10000), acks4 = dlock_last_replica_acks();
    long long exists4 = th_int(p, "EXISTS %s", name);
    kill(reps[0]->pid, SIGCONT);
    kill(reps[1]->pid, SIGCONT);

    assert_int_equal(rc1, DLOCK_OK);
    assert_int_equal(acks1, 1);
    assert_int_equal(rel1, DLOCK_OK);
    assert_int_equal(rc2, DLOCK_EREPLICAS);
    assert_int_equal(acks2, 1);
    assert_int_equal(hacks1, 1);
    assert_int_equal(hacks2, 1);
    assert_int_equal(rc3, DLOCK_EREPLICAS);
    assert_int_equal(acks3, 0);
    assert_non_null(strstr(msg, "0 of the connected replicas"));
    assert_int_equal(exists3, 0);
    assert_int_equal(rc4, DLOCK_OK);
    assert_int_equal(acks4, 0);
    assert_int_equal(exists4, 1);
    assert_int_equal(dlock_lock_release(lk), DLOCK_OK);

    /* thawed: acknowledged again (within a few tries: their links resume) */
    int rc = DLOCK_EREPLICAS;
    for (int64_t until = th_now_ms() + 10000 * th_slack(); rc != DLOCK_OK && th_now_ms() < until;)
        if ((rc = dlock_lock_try(l, 0, 10000)) != DLOCK_OK)
            th_sleep_ms(50);
    assert_int_equal(rc, DLOCK_OK);
    assert_true(dlock_last_replica_acks() >= 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);

    dlock_config *bad = dlock_config_new();
    assert_int_equal(dlock_config_set_replica_ack(bad, -2, 10, DLOCK_ACK_RELEASE), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_replica_ack(bad, DLOCK_REPLICAS_ALL, 0, DLOCK_ACK_RELEASE),
                     DLOCK_EINVAL);
    dlock_config_free(bad);
    dlock_lock_free(l);
    dlock_lock_free(lk);
    dlock_lock_free(l2);
    dlock_client_close(red);
    dlock_client_close(redk);
    dlock_client_close(two);
}

/* A callback's status and message, awaited by the test's thread. */
typedef struct acb {
    pthread_mutex_t mu;
    int done, status;
    char msg[512];
} acb;

static void on_acb(const dlock_async_result *res, void *ud)
{
    acb *a = ud;
    pthread_mutex_lock(&a->mu);
    a->status = dlock_async_status(res);
    snprintf(a->msg, sizeof(a->msg), "%s", dlock_async_message(res));
    a->done = 1;
    pthread_mutex_unlock(&a->mu);
}

static int acb_wait(acb *a)
{
    int64_t end = th_now_ms() + 10000 * th_slack();
    int rc = -1000;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        if (a->done) {
            rc = a->status;
            a->done = 0;
        }
        pthread_mutex_unlock(&a->mu);
        if (rc != -1000 || th_now_ms() >= end)
            return rc;
        th_sleep_ms(2);
    }
}

/* Asynchronous acquisitions WAIT for replicas as the blocking ones do: with
 * one replica of two frozen, dlock's count of 2 gives the lock and the
 * semaphore's permit back (DLOCK_EREPLICAS), KEEP keeps them, and Redisson's
 * rule (one of the connected acknowledged) takes them. */
static void test_replica_ack_async(void **state)
{
    (void)state;
    th_redis *p = primary();
    th_redis *all[] = {&rs.primary, &rs.replica[0], &rs.replica[1]};
    th_redis *rep = NULL;
    for (size_t i = 0; i < 3 && !rep; i++)
        if (all[i]->port != p->port)
            rep = all[i];
    dlock_client *rel = ack_client(2, DLOCK_ACK_RELEASE, 0);
    dlock_client *keep = ack_client(2, DLOCK_ACK_KEEP, 0);
    dlock_client *red = ack_client(DLOCK_REPLICAS_ALL, DLOCK_ACK_RELEASE, 0);
    char name[64], sname[64], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "ack-async");
    th_name(sname, sizeof(sname), "ack-async-sem");
    dlock_client_new_owner_id(rel, owner, sizeof(owner));
    dlock_lock *l[3];
    dlock_semaphore *s[3];
    dlock_client *cs[3] = {rel, keep, red};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_get_as(cs[i], name, owner, &l[i]), DLOCK_OK);
        assert_int_equal(dlock_semaphore_get(cs[i], sname, &s[i]), DLOCK_OK);
    }
    assert_int_equal(dlock_semaphore_set_permits(s[0], 3), DLOCK_OK);
    acb a = {.mu = PTHREAD_MUTEX_INITIALIZER};
    dlock_wait_opts o = {.lease_ms = 10000};
    /* all up: acknowledged by both */
    assert_int_equal(dlock_lock_acquire_async(l[0], &o, on_acb, &a), DLOCK_OK);
    assert_int_equal(acb_wait(&a), DLOCK_OK);
    assert_int_equal(dlock_lock_release_async(l[0], on_acb, &a), DLOCK_OK);
    assert_int_equal(acb_wait(&a), DLOCK_OK);

    kill(rep->pid, SIGSTOP);
    int rc[6];
    long long ex[3];
    int64_t av[3] = {-1, -1, -1};
    char msg[512];
    for (int i = 0; i < 3; i++) {
        rc[i] = dlock_lock_acquire_async(l[i], &o, on_acb, &a) == DLOCK_OK ? acb_wait(&a) : -1;
        if (i == 0)
            snprintf(msg, sizeof(msg), "%s", a.msg);
        ex[i] = th_int(p, "EXISTS %s", name);
        if (rc[i] == DLOCK_OK && dlock_lock_release_async(l[i], on_acb, &a) == DLOCK_OK)
            acb_wait(&a);
        rc[3 + i] = dlock_semaphore_acquire_async(s[i], 1, NULL, on_acb, &a) == DLOCK_OK
                        ? acb_wait(&a)
                        : -1;
        dlock_semaphore_available(s[i], &av[i]);
    }
    kill(rep->pid, SIGCONT);

    assert_int_equal(rc[0], DLOCK_EREPLICAS);
    assert_non_null(strstr(msg, "1 of 2 replicas"));
    assert_int_equal(ex[0], 0);
    assert_int_equal(rc[1], DLOCK_OK);
    assert_int_equal(ex[1], 1);
    assert_int_equal(rc[2], DLOCK_OK);
    assert_int_equal(ex[2], 1);
    assert_int_equal(rc[3], DLOCK_EREPLICAS);
    assert_int_equal(av[0], 3);
    assert_int_equal(rc[4], DLOCK_OK);
    assert_int_equal(av[1], 2);
    assert_int_equal(rc[5], DLOCK_OK);
    assert_int_equal(av[2], 1);
    for (int i = 0; i < 3; i++) {
        dlock_lock_free(l[i]);
        dlock_semaphore_free(s[i]);
    }
    dlock_client_close(rel);
    dlock_client_close(keep);
    dlock_client_close(red);
}

/* Revocation is one server only: on a sentinel client (revocation asked for,
 * the default) tracking stays off, and a lock deleted by someone else is
 * found by its next renewal: DLOCK_LOST_GONE within a period or so. */
static void test_revocation_falls_back(void **state)
{
    (void)state;
    int64_t slack = th_slack();
    dlock_client *c = th_client_url(ss.url, 1500 * slack);
    char name[64];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "sen-rev"), &l), DLOCK_OK);
    atomic_store(&th_lost_reason, 0);
    dlock_lock_set_lost_callback(l, th_on_lost, NULL);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(700 * slack);   /* a renewal has run: tracking would be on by now */
    assert_int_equal(dlock__watchdog_tracking(c->wd), 0);
    assert_int_equal(th_int(primary(), "DEL %s", name), 1);
    for (int64_t until = th_now_ms() + 5000 * slack;
         atomic_load(&th_lost_reason) == 0 && th_now_ms() < until;)
        th_sleep_ms(10);
    assert_int_equal(atomic_load(&th_lost_reason), DLOCK_LOST_GONE);
    /* The primary's counters were sampled before: a deletion, by elimination. */
    assert_int_equal(atomic_load(&th_lost_cause), DLOCK_CAUSE_DELETED);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* WAIT after acquisitions and renewals: with both replicas up every hold is
 * acknowledged; with one stopped, "release" gives the acquisition back
 * (DLOCK_EREPLICAS) and gives a renewed hold up (lost callback), "keep"
 * keeps it and reports 1. */
static void test_replica_ack(void **state)
{
    (void)state;
    dlock_config *bad = dlock_config_new();
    assert_int_equal(dlock_config_set_replica_ack(bad, 2, 3000, DLOCK_ACK_RELEASE),
                     DLOCK_EINVAL);   /* not below the command timeout (3 s) */
    assert_int_equal(dlock_config_set_replica_ack(bad, -2, 10, DLOCK_ACK_RELEASE), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_replica_ack(bad, 1, 10, (dlock_ack_policy)7), DLOCK_EINVAL);
    dlock_config_free(bad);

    th_redis *p = primary();
    th_redis *rep = p == &rs.replica[1] ? &rs.replica[0] : &rs.replica[1];
    dlock_client *rel = ack_client(2, DLOCK_ACK_RELEASE, 3000);
    dlock_client *keep = ack_client(2, DLOCK_ACK_KEEP, 0);
    char name[64], renewed[64];
    dlock_lock *l, *lk, *lr;
    assert_int_equal(dlock_lock_get(rel, th_name(name, sizeof(name), "ack"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_get(keep, name, &lk), DLOCK_OK);
    assert_int_equal(dlock_lock_get(rel, th_name(renewed, sizeof(renewed), "ack-wd"), &lr),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_set_lost_callback(lr, th_on_lost, NULL);
    atomic_store(&th_lost_reason, 0);
    assert_int_equal(dlock_lock_acquire(lr, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), 2);

    th_redis_stop(rep);
    /* Release policy: refused and given back. */
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_EREPLICAS);
    assert_int_equal(dlock_last_replica_acks(), 1);
    assert_non_null(strstr(dlock_last_error(), "1 of 2 replicas"));
    assert_int_equal(th_int(p, "EXISTS %s", name), 0);
    /* Keep policy: held, 1 reported. */
    assert_int_equal(dlock_lock_try(lk, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), 1);
    assert_int_equal(th_int(p, "EXISTS %s", name), 1);
    assert_int_equal(dlock_lock_release(lk), DLOCK_OK);
    /* The same for semaphore permits and expirable permits: given back, or
     * kept and reported. */
    char sname[64], pname[64], id[DLOCK_PERMIT_ID_BUFSIZE];
    dlock_semaphore *sr, *sk;
    assert_int_equal(dlock_semaphore_get(rel, th_name(sname, sizeof(sname), "ack-sem"), &sr),
                     DLOCK_OK);
    assert_int_equal(dlock_semaphore_get(keep, sname, &sk), DLOCK_OK);
    assert_int_equal(dlock_semaphore_set_permits(sr, 2), DLOCK_OK);
    assert_int_equal(dlock_semaphore_try(sr, 1, 0), DLOCK_EREPLICAS);
    assert_int_equal(dlock_last_replica_acks(), 1);
    int64_t avail = -1;
    assert_int_equal(dlock_semaphore_available(sr, &avail), DLOCK_OK);
    assert_int_equal(avail, 2);
    assert_int_equal(dlock_semaphore_try(sk, 1, 0), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), 1);
    assert_int_equal(dlock_semaphore_available(sk, &avail), DLOCK_OK);
    assert_int_equal(avail, 1);
    dlock_semaphore_free(sr);
    dlock_semaphore_free(sk);
    dlock_permit_semaphore *pr, *pk;
    assert_int_equal(dlock_permit_semaphore_get(rel, th_name(pname, sizeof(pname), "ack-pst"),
                                                &pr),
                     DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_get(keep, pname, &pk), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_set_total(pr, 1), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_try(pr, 0, DLOCK_WATCHDOG, id, sizeof(id)),
                     DLOCK_EREPLICAS);
    assert_int_equal(dlock_last_replica_acks(), 1);
    assert_int_equal(dlock_permit_semaphore_available(pr, &avail, NULL), DLOCK_OK);
    assert_int_equal(avail, 1);
    assert_int_equal(dlock_permit_semaphore_try(pk, 0, 10000, id, sizeof(id)), DLOCK_OK);
    assert_int_equal(dlock_last_replica_acks(), 1);
    assert_int_equal(dlock_permit_semaphore_available(pk, &avail, NULL), DLOCK_OK);
    assert_int_equal(avail, 0);
    assert_int_equal(dlock_permit_semaphore_release(pk, id), DLOCK_OK);
    dlock_permit_semaphore_free(pr);
    dlock_permit_semaphore_free(pk);
    /* The renewed hold: its next renewal is not acknowledged: given up. */
    for (int64_t until = th_now_ms() + 5000 * th_slack();
         atomic_load(&th_lost_reason) == 0 && th_now_ms() < until;)
        th_sleep_ms(20);
    assert_int_equal(atomic_load(&th_lost_reason), DLOCK_LOST_REPLICAS);
    dlock_lock_release(lr);

    /* The replica back, in sync. */
    assert_int_equal(th_redis_restart(rep), 0);
    redisReply *r = th_cmd(rep, "REPLICAOF 127.0.0.1 %d", p->port);
    assert_non_null(r);
    freeReplyObject(r);
    for (int64_t until = th_now_ms() + 20000 * th_slack(); th_now_ms() < until;) {
        r = th_cmd(rep, "INFO replication");
        int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
        if (r)
            freeReplyObject(r);
        if (up)
            break;
        th_sleep_ms(50);
    }
    /* ... and known to the primary as acknowledging (its first ACK). */
    redisContext *probe = th_admin(p);
    int64_t t_up = th_now_ms(), acked = 0;
    for (int64_t until = th_now_ms() + 20000 * th_slack(); th_now_ms() < until;) {
        redisReply *x = redisCommand(probe, "SET dlock-probe 1");
        if (x)
            freeReplyObject(x);
        x = redisCommand(probe, "WAIT 2 500");
        acked = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -1;
        if (x)
            freeReplyObject(x);
        if (acked == 2)
            break;
    }
    fprintf(stderr, "# replica acknowledging %lld ms after its link was up\n",
            (long long)(th_now_ms() - t_up));
    redisFree(probe);
    int rc = dlock_lock_try(l, 0, 10000);
    if (rc != DLOCK_OK)
        fail_msg("after the replica came back: %s", dlock_last_error());
    assert_int_equal(dlock_last_replica_acks(), 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(lk);
    dlock_lock_free(lr);
    dlock_client_close(rel);
    dlock_client_close(keep);
}

/* ------------------------------------------------------------ failover */

struct waiter_arg {
    dlock_client *c;
    const char *name;
    int rc;
};

static void *waiter(void *arg)
{
    struct waiter_arg *w = arg;
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(w->c, w->name, &l), DLOCK_OK);
    w->rc = dlock_lock_try(l, 60000 * th_slack(), 5000);   /* outlasts a failover */
    if (w->rc == DLOCK_OK)
        dlock_lock_release(l);
    dlock_lock_free(l);
    return NULL;
}

/* An asynchronous acquire (wait 10 s, lease 30 s) or release of l, waited
 * for; its status (message in async_msg). */
static char async_msg[256];
static _Atomic int async_rc;

static void on_async_done(const dlock_async_result *res, void *ud)
{
    (void)ud;
    snprintf(async_msg, sizeof(async_msg), "%s", dlock_async_message(res));
    atomic_store(&async_rc, dlock_async_status(res));
}

static int async_call(dlock_lock *l, int acquire)
{
    atomic_store(&async_rc, 1);
    int rc =
        acquire
            ? dlock_lock_acquire_async(
                  l, &(dlock_wait_opts){.wait_ms = 30000 * th_slack(), .lease_ms = 30000},
                  on_async_done, NULL)
            : dlock_lock_release_async(l, on_async_done, NULL);
    if (rc != DLOCK_OK) {
        snprintf(async_msg, sizeof(async_msg), "%s", dlock_last_error());
        return rc;
    }
    for (int64_t until = th_now_ms() + 40000 * th_slack();
         atomic_load(&async_rc) == 1 && th_now_ms() < until;)
        th_sleep_ms(5);
    return atomic_load(&async_rc);
}

static void test_failover_primary_killed(void **state)
{
    (void)state;
    /* A watchdog timeout longer than the failover takes (down after 1 s, then
     * the election, however slowed): the hold can outlive it. */
    int64_t wd = 6000 * th_slack();
    dlock_client *a = th_client_url(ss.url, wd), *b = th_client_url(ss.url, 0);
    char held[64], blocked[64], fresh[64];
    th_name(held, sizeof(held), "fo-held");
    th_name(blocked, sizeof(blocked), "fo-blocked");
    th_name(fresh, sizeof(fresh), "fo-fresh");
    dlock_lock *lh, *lb, *lf;
    assert_int_equal(dlock_lock_get(a, held, &lh), DLOCK_OK);
    assert_int_equal(dlock_lock_get(a, blocked, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_get(b, fresh, &lf), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    /* Only a message frees it (the lease outlasts the test). */
    assert_int_equal(dlock_lock_try(lb, 0, 60000 * th_slack()), DLOCK_OK);
    struct waiter_arg w = {b, blocked, -99};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    th_await_lock_waiter(b, blocked);
    th_redis *old = primary();
    assert_non_null(old);
    assert_int_equal(th_int(old, "WAIT 2 2000"), 2);   /* both replicas have the locks */
    /* An asynchronous call before the failover: its connection goes to the
     * old primary. */
    char owner[DLOCK_OWNER_BUFSIZE], async_name[64];
    assert_int_equal(dlock_client_new_owner_id(a, owner, sizeof(owner)), DLOCK_OK);
    dlock_lock *la;
    assert_int_equal(dlock_lock_get_as(a, th_name(async_name, sizeof(async_name), "fo-async"),
                                       owner, &la),
                     DLOCK_OK);
    assert_int_equal(async_call(la, 1), DLOCK_OK);
    assert_int_equal(async_call(la, 0), DLOCK_OK);

    /* A client with a failover quarantine (ON, q): its first acquisition
     * after the switch comes q after it saw the switch, not before. */
    const int64_t q = 2000 * th_slack();
    dlock_config *qcfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(qcfg, ss.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_failover_quarantine(qcfg, DLOCK_QUARANTINE_ON, q), DLOCK_OK);
    dlock_client *qc = NULL;
    assert_int_equal(dlock_client_open(&qc, qcfg), DLOCK_OK);
    dlock_config_free(qcfg);
    char qname[64];
    dlock_lock *lq;
    assert_int_equal(dlock_lock_get(qc, th_name(qname, sizeof(qname), "fo-quarantine"), &lq),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_try(lq, 0, 5000), DLOCK_OK);   /* no quarantine before */
    assert_int_equal(dlock_lock_release(lq), DLOCK_OK);

    const int64_t t_kill = th_now_ms();
    th_redis_stop(old);
    int64_t t_switch = -1;
    for (int64_t until = th_now_ms() + 30000 * th_slack(); th_now_ms() < until;) {
        th_redis *p = primary();
        if (p && p != old) {
            t_switch = th_now_ms();
            break;
        }
        th_sleep_ms(20);
    }
    assert_true(t_switch > 0);
    /* A new acquisition works soon after the switch is announced. */
    int64_t first_ok = -1;
    while (th_now_ms() - t_switch < 10000 * th_slack()) {
        if (dlock_lock_try(lf, 0, 5000 * th_slack()) == DLOCK_OK) {
            first_ok = th_now_ms();
            break;
        }
        th_sleep_ms(10);
    }
    assert_true(first_ok > 0);
    printf("# switch seen by the test -> first acquire: %lld ms\n",
           (long long)(first_ok - t_switch));
    /* Released at once: its lease (5 s x slack) would not outlast the
     * asynchronous calls below, which may wait up to 30 s x slack for the
     * new primary (released after them, it was found expired now and then:
     * DLOCK_ENOTOWNER). */
    int lrc = dlock_lock_release(lf);
    if (lrc != DLOCK_OK)
        fail_msg("release after the failover: %s (%s)", dlock_errname(lrc), dlock_last_error());
    /* The asynchronous calls follow the new primary too. */
    int arc = async_call(la, 1);
    if (arc != DLOCK_OK)
        fail_msg("async acquire after the failover: %d (%s)", arc, async_msg);
    assert_int_equal(th_int(primary(), "EXISTS %s", async_name), 1);
    assert_int_equal(async_call(la, 0), DLOCK_OK);
    dlock_lock_free(la);
    /* The quarantined client: waits, then acquires on the new primary. */
    int qrc = dlock_lock_try(lq, 60000 * th_slack(), 5000);
    const int64_t q_ok = th_now_ms();
    if (qrc != DLOCK_OK)
        fail_msg("quarantined acquisition: %d (%s)", qrc, dlock_last_error());
    printf("# primary killed -> quarantined acquisition: %lld ms (quarantine %lld ms, switch "
           "seen by the test after %lld ms)\n",
           (long long)(q_ok - t_kill), (long long)q, (long long)(t_switch - t_kill));
    assert_true(q_ok - t_kill >= q);
    assert_true(q_ok - t_switch <= q + 5000 * th_slack());
    assert_int_equal(th_int(primary(), "EXISTS %s", qname), 1);
    assert_int_equal(dlock_lock_release(lq), DLOCK_OK);
    dlock_lock_free(lq);
    dlock_client_close(qc);
    /* The hold survived and is renewed on the new primary: it outlives a
     * whole timeout there. */
    th_sleep_ms(wd + 500);
    th_redis *now = primary();
    assert_true(th_int(now, "PTTL %s", held) > 0);
    int64_t count = 0;
    assert_int_equal(dlock_lock_hold_count(lh, &count), DLOCK_OK);
    assert_int_equal(count, 1);
    /* The waiter, resubscribed on the new primary, is woken by the release. */
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(th_now_ms() - t0 < 5000 * th_slack());
    assert_int_equal(dlock_lock_release(lh), DLOCK_OK);
    assert_int_equal(th_int(now, "EXISTS %s", held), 0);
    dlock_lock_free(lh);
    dlock_lock_free(lb);
    dlock_lock_free(lf);
    dlock_client_close(a);
    dlock_client_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locks_on_the_primary),
        cmocka_unit_test(test_sentinel_credentials),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_replica_ack),
        cmocka_unit_test(test_replica_ack_redisson),
        cmocka_unit_test(test_replica_ack_async),
        cmocka_unit_test(test_revocation_falls_back),
        cmocka_unit_test(test_failover_primary_killed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
