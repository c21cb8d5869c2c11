/* Redis Cluster: key slots against the servers' own CLUSTER KEYSLOT, the
 * slot map read from CLUSTER SLOTS, and (from the router on) locks on a
 * cluster of 3 primaries with a replica each, started by the harness. */
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

#include "dlock/async.h"
#include "harness.h"
#include "net/cluster.h"
#include "sync/sync.h"

static th_cluster cl;

static int setup(void **state)
{
    (void)state;
    return th_cluster_start(&cl);
}

static int teardown(void **state)
{
    (void)state;
    th_cluster_destroy(&cl);
    return 0;
}

/* Known values from the Redis Cluster specification, then every kind of key
 * shape checked against a live node's CLUSTER KEYSLOT. */
static void test_key_slot(void **state)
{
    (void)state;
    assert_int_equal(dlock__crc16("123456789", 9), 0x31C3);   /* the spec's check value */
    assert_int_equal(dlock__key_slot("foo", 3), 12182);
    assert_int_equal(dlock__key_slot("{user1000}.following", 20),
                     dlock__key_slot("{user1000}.followers", 20));
    const char *keys[] = {"", "a", "foo", "bar", "lock:x", "{}", "{}x", "x{}", "{{}}", "a{b}c",
                          "a{b}{c}", "{b", "b}", "}{b}", "redisson_lock__channel:{res}", "res",
                          "{res}:next", "dlock_lock_next:{res}", "\xff\x01{\xfe}", "{a}{b}",
                          "really long key with spaces and {a tag} in the middle of it"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        redisReply *r = th_cmd(&cl.node[0], "CLUSTER KEYSLOT %b", keys[i], strlen(keys[i]));
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        if (dlock__key_slot(keys[i], strlen(keys[i])) != r->integer)
            fail_msg("slot of '%s': dlock %d, Redis %lld", keys[i],
                     dlock__key_slot(keys[i], strlen(keys[i])), r->integer);
        freeReplyObject(r);
    }
    char key[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "k%d{%d}", i, i % 7 ? i : -i);
        if (i % 3 == 0)
            snprintf(key, sizeof(key), "key:%d", i * 7919);
        long long want = th_int(&cl.node[i % TH_CLUSTER_NODES], "CLUSTER KEYSLOT %s", key);
        assert_int_equal(dlock__key_slot(key, strlen(key)), want);
    }
}

static void test_slot_map(void **state)
{
    (void)state;
    redisReply *r = th_cmd(&cl.node[1], "CLUSTER SLOTS");
    dlock__slotmap m;
    assert_int_equal(dlock__slotmap_parse(r, "127.0.0.1", &m), DLOCK_OK);
    assert_int_equal(m.covered, DLOCK__SLOTS);
    assert_int_equal(m.naddr, 3);
    /* Each key's owner is the node the cluster sends it to. */
    const char *keys[] = {"a", "b", "c", "lock:1", "lock:2", "{x}y"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        th_redis *n = th_cluster_node_for(&cl, keys[i]);
        assert_non_null(n);
        int slot = dlock__key_slot(keys[i], strlen(keys[i]));
        assert_int_equal(m.addr[m.owner[slot]].port, n->port);
    }
    dlock__slotmap_clear(&m);
    freeReplyObject(r);

    /* Answers of the wrong shape are refused, not read past. */
    redisReply bad = {.type = REDIS_REPLY_STRING, .str = "x", .len = 1};
    assert_int_equal(dlock__slotmap_parse(&bad, "h", &m), DLOCK_EPROTO);
    redisReply lo = {.type = REDIS_REPLY_INTEGER, .integer = 100};
    redisReply hi = {.type = REDIS_REPLY_INTEGER, .integer = 50};   /* end before start */
    redisReply host = {.type = REDIS_REPLY_STRING, .str = "", .len = 0};
    redisReply port = {.type = REDIS_REPLY_INTEGER, .integer = 7000};
    redisReply *pe[] = {&host, &port};
    redisReply prim = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = pe};
    redisReply *ee[] = {&lo, &hi, &prim};
    redisReply ent = {.type = REDIS_REPLY_ARRAY, .elements = 3, .element = ee};
    redisReply *le[] = {&ent};
    redisReply list = {.type = REDIS_REPLY_ARRAY, .elements = 1, .element = le};
    assert_int_equal(dlock__slotmap_parse(&list, "h", &m), DLOCK_EPROTO);
    hi.integer = 200;   /* now fine; the empty host becomes the node asked */
    assert_int_equal(dlock__slotmap_parse(&list, "10.1.1.1", &m), DLOCK_OK);
    assert_int_equal(m.covered, 101);
    assert_string_equal(m.addr[m.owner[150]].host, "10.1.1.1");
    assert_int_equal(m.owner[99], DLOCK__NO_NODE);
    dlock__slotmap_clear(&m);
}

/* ---------------------------------------------------------------- locks */

#define NAMES 24

/* Lock names spread over every primary: each key lands on the node that
 * serves its slot, in Redisson's layout, and goes when released. */
struct found {
    int seen[NAMES];
    dlock_lock **l;
    int n;
};

static int count_found(const dlock_info *info, void *ud)
{
    struct found *f = ud;
    for (int i = 0; i < f->n; i++)
        if (strcmp(dlock_info_name(info), dlock_lock_name(f->l[i])) == 0)
            f->seen[i]++;
    return 0;
}

static void test_locks_on_every_node(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(cl.url, 0);
    dlock_lock *l[NAMES];
    char name[64];
    int on_node[TH_CLUSTER_NODES] = {0};
    char owner[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_owner_id(c, owner, sizeof(owner)), DLOCK_OK);
    for (int i = 0; i < NAMES; i++) {
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "spread"), &l[i]),
                         DLOCK_OK);
        assert_int_equal(dlock_lock_try(l[i], 0, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_try(l[i], 0, DLOCK_WATCHDOG), DLOCK_OK);   /* reentry */
        th_redis *n = th_cluster_node_for(&cl, dlock_lock_name(l[i]));
        assert_non_null(n);
        on_node[n - cl.node]++;
        redisReply *r = th_cmd(n, "HGET %s %s", dlock_lock_name(l[i]), owner);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, "2");
        freeReplyObject(r);
        int64_t count = 0;
        assert_int_equal(dlock_lock_hold_count(l[i], &count), DLOCK_OK);
        assert_int_equal(count, 2);
    }
    int nodes = 0;
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        nodes += on_node[i] > 0;
    assert_int_equal(nodes, 3);   /* 24 names: every primary got some */
    /* A listing walks every primary: each held name found once. */
    struct found f = {{0}, l, NAMES};
    char pattern[80];
    snprintf(pattern, sizeof(pattern), "%.*s*", (int)(strrchr(name, ':') - name), name);
    if (dlock_client_scan(c, pattern, count_found, &f) != DLOCK_OK)
        fail_msg("scan: %s", dlock_last_error());
    for (int i = 0; i < NAMES; i++)
        if (f.seen[i] != 1)
            fail_msg("%s (node %td) listed %d times", dlock_lock_name(l[i]),
                     th_cluster_node_for(&cl, dlock_lock_name(l[i])) - cl.node, f.seen[i]);
    for (int i = 0; i < NAMES; i++) {
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_ENOTOWNER);
        th_redis *n = th_cluster_node_for(&cl, dlock_lock_name(l[i]));
        assert_int_equal(th_int(n, "EXISTS %s", dlock_lock_name(l[i])), 0);
        dlock_lock_free(l[i]);
    }
    dlock_client_close(c);
}

struct waiter_arg {
    dlock_client *c;
    const char *name;
    int rc;
    int64_t waited;
};

static void *waiter(void *arg)
{
    struct waiter_arg *w = arg;
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(w->c, w->name, &l), DLOCK_OK);
    int64_t t0 = th_now_ms();
    w->rc = dlock_lock_try(l, 40000 * th_slack(), 5000);   /* outlasts a failover */
    w->waited = th_now_ms() - t0;
    if (w->rc != DLOCK_OK) {
        /* Seen once (EUNKNOWN) under TSan over TLS at load 10: say why. */
        fprintf(stderr, "waiter on %s: %d after %lld ms: %s\n", w->name, w->rc,
                (long long)w->waited, dlock_last_error());
        th_client_log_dump(w->c);
    }
    if (w->rc == DLOCK_OK)
        dlock_lock_release(l);
    dlock_lock_free(l);
    return NULL;
}

/* A waiter in another client sleeps on the lock's channel and is woken by
 * the release, wherever the lock's node and its pub/sub connection are. */
static void test_waiter_woken(void **state)
{
    (void)state;
    dlock_client *a = th_client_url(cl.url, 0), *b = th_client_url(cl.url, 0);
    for (int round = 0; round < 6; round++) {
        char name[64];
        th_name(name, sizeof(name), "wake");
        dlock_lock *l;
        assert_int_equal(dlock_lock_get(a, name, &l), DLOCK_OK);
        assert_int_equal(dlock_lock_try(l, 0, 60000), DLOCK_OK);
        struct waiter_arg w = {b, name, -99, 0};
        pthread_t t;
        pthread_create(&t, NULL, waiter, &w);
        /* The waiter is subscribed once its client counts it on the channel. */
        th_await_lock_waiter(b, name);
        th_sleep_ms(100);
        /* Inspection counts the waiter: a shard subscriber on the lock's node. */
        dlock_info *info = NULL;
        assert_int_equal(dlock_lock_inspect(l, &info), DLOCK_OK);
        assert_int_equal(dlock_info_waiters(info), 1);
        dlock_info_free(info);
        int64_t t0 = th_now_ms();
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, DLOCK_OK);
        /* Woken by the message, not by the 60 s lease running out. */
        assert_true(th_now_ms() - t0 < 3000 * th_slack());
        dlock_lock_free(l);
    }
    dlock_client_close(a);
    dlock_client_close(b);
}

/* The watchdog renews holds on every node, one connection per node. */
static void test_watchdog_renews_on_every_node(void **state)
{
    (void)state;
    int64_t slack = th_slack();   /* renewals in time on a slowed machine too */
    dlock_client *c = th_client_url(cl.url, 900 * slack);
    dlock_lock *l[NAMES];
    char name[64];
    for (int i = 0; i < NAMES; i++) {
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "renew"), &l[i]),
                         DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l[i], DLOCK_WATCHDOG), DLOCK_OK);
    }
    th_sleep_ms(3000 * slack);   /* more than 3 leases */
    /* One script per key slot, but one write per node per pass: 24 names in
     * 24 slots over 3 nodes make 8 times as many batches as writes. */
    dlock_stats s;
    assert_int_equal(dlock_client_stats(c, &s, sizeof(s)), DLOCK_OK);
    print_message("    %llu renewals, %llu batches, %llu writes\n",
                  (unsigned long long)s.renewals, (unsigned long long)s.renewal_roundtrips,
                  (unsigned long long)s.renewal_writes);
    assert_true(s.renewal_writes >= 3 * 3);   /* >= 3 passes on each of 3 nodes */
    assert_true(s.renewal_roundtrips >= 4 * s.renewal_writes);
    for (int i = 0; i < NAMES; i++) {
        th_redis *n = th_cluster_node_for(&cl, dlock_lock_name(l[i]));
        long long ttl = th_int(n, "PTTL %s", dlock_lock_name(l[i]));
        if (ttl <= 0)
            fail_msg("%s on port %d: PTTL %lld after 3 leases", dlock_lock_name(l[i]), n->port,
                     ttl);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        dlock_lock_free(l[i]);
    }
    dlock_client_close(c);
}

static _Atomic int lost_why[NAMES];

static void on_lost_idx(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    atomic_store(&lost_why[(intptr_t)ud], (int)reason);
}

/* The hold limit and the revocation fallback on a cluster: limited holds are
 * renewed on their node up to the limit, then reported DLOCK_LOST_MAX_HOLD and
 * let go by Redis; client tracking stays off (one server only), so a lock
 * deleted by someone else is found by its next renewal (DLOCK_LOST_GONE). */
static void test_limit_and_revocation_fallback(void **state)
{
    (void)state;
    int64_t slack = th_slack();
    dlock_client *c = th_client_url(cl.url, 900 * slack);
    dlock_lock *l[NAMES];
    char name[64];
    for (int i = 0; i < NAMES; i++) {
        atomic_store(&lost_why[i], 0);
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "limit"), &l[i]),
                         DLOCK_OK);
        dlock_lock_set_lost_callback(l[i], on_lost_idx, (void *)(intptr_t)i);
        if (i % 2 == 0)
            assert_int_equal(dlock_lock_set_max_hold(l[i], 2000 * slack), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l[i], DLOCK_WATCHDOG), DLOCK_OK);
    }
    th_sleep_ms(300);
    assert_int_equal(dlock__watchdog_tracking(c->wd), 0);   /* revocation off here */
    const char *gone = dlock_lock_name(l[1]);
    assert_int_equal(th_int(th_cluster_node_for(&cl, gone), "DEL %s", gone), 1);
    for (int64_t until = th_now_ms() + 3000 * th_slack();
         atomic_load(&lost_why[1]) == 0 && th_now_ms() < until;)
        th_sleep_ms(10);
    assert_int_equal(atomic_load(&lost_why[1]), DLOCK_LOST_GONE);

    for (int i = 0; i < NAMES; i += 2) {
        for (int64_t until = th_now_ms() + 5000 * slack * th_slack();
             atomic_load(&lost_why[i]) == 0 && th_now_ms() < until;)
            th_sleep_ms(10);
        assert_int_equal(atomic_load(&lost_why[i]), DLOCK_LOST_MAX_HOLD);
    }
    /* Past the limit: the limited keys expire, the others are still renewed. */
    th_sleep_ms(500);
    for (int i = 0; i < NAMES; i++) {
        th_redis *n = th_cluster_node_for(&cl, dlock_lock_name(l[i]));
        long long exists = th_int(n, "EXISTS %s", dlock_lock_name(l[i]));
        if (i % 2 == 0 || i == 1) {
            for (int64_t until = th_now_ms() + 3000 * th_slack(); exists && th_now_ms() < until;) {
                th_sleep_ms(20);
                exists = th_int(n, "EXISTS %s", dlock_lock_name(l[i]));
            }
            assert_int_equal(exists, 0);
        } else {
            assert_int_equal(exists, 1);
            assert_int_equal(atomic_load(&lost_why[i]), 0);
            assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        }
        dlock_lock_free(l[i]);
    }
    dlock_client_close(c);
}

/* --------------------------------------------------------------- interop */

/* Redisson on a cluster publishes and subscribes with sharded pub/sub by
 * default: a Redisson waiter (SSUBSCRIBE on the channel's node) hears dlock's
 * release, and a Redisson holder's release (DEL + SPUBLISH) wakes a dlock
 * waiter. A plain SUBSCRIBE hears nothing: the scripts SPUBLISH. */
static void test_sharded_interop(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(cl.url, 0);
    char name[64], ch[128];
    th_name(name, sizeof(name), "interop");
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    th_redis *n = th_cluster_node_for(&cl, name);
    assert_non_null(n);

    /* Redisson's waiter, and a plain subscriber, on the channel's node. */
    redisContext *ss = th_admin(n), *plain = th_admin(n);
    redisReply *r = redisCommand(ss, "SSUBSCRIBE %s", ch);
    assert_non_null(r);
    freeReplyObject(r);
    r = redisCommand(plain, "SUBSCRIBE %s", ch);
    assert_non_null(r);
    freeReplyObject(r);
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    r = NULL;
    assert_int_equal(redisGetReply(ss, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_string_equal(r->element[0]->str, "smessage");
    assert_string_equal(r->element[1]->str, ch);
    assert_string_equal(r->element[2]->str, "0");
    freeReplyObject(r);
    struct timeval tv = {0, 300000};
    redisSetTimeout(plain, tv);
    r = NULL;
    assert_int_not_equal(redisGetReply(plain, (void **)&r), REDIS_OK);   /* nothing came */
    assert_null(r);
    redisFree(ss);
    redisFree(plain);

    /* Redisson's holder: its hash, then its release. */
    r = th_cmd(n, "HSET %s 6f1c4e0e-0000-4000-8000-000000000001:1 1", name);
    freeReplyObject(r);
    r = th_cmd(n, "PEXPIRE %s 60000", name);
    freeReplyObject(r);
    struct waiter_arg w = {c, name, -99, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    th_await_lock_waiter(c, name);
    th_sleep_ms(200);
    assert_int_equal(th_int(n, "DEL %s", name), 1);
    assert_int_equal(th_int(n, "SPUBLISH %s 0", ch), 1);   /* dlock's connection heard it */
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.waited < 5000 * th_slack());
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ------------------------------------------------------------ bad input */

/* The asynchronous calls route by key: names on every primary, taken and
 * released from one thread's callbacks; a waiter woken by another client's
 * release on the node of its name (sharded pub/sub). */
typedef struct acount {
    atomic_int done, ok;
    char msg[256];
} acount;

static void on_acount(const dlock_async_result *res, void *ud)
{
    acount *a = ud;
    if (dlock_async_status(res) == DLOCK_OK)
        atomic_fetch_add(&a->ok, 1);
    else
        snprintf(a->msg, sizeof(a->msg), "%s", dlock_async_message(res));
    atomic_fetch_add(&a->done, 1);
}

static int await_count(acount *a, int n)
{
    for (int64_t until = th_now_ms() + 10000 * th_slack();
         atomic_load(&a->done) < n && th_now_ms() < until;)
        th_sleep_ms(5);
    return atomic_load(&a->ok);
}

static void test_async_on_every_node(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(cl.url, 0);
    char owner[DLOCK_OWNER_BUFSIZE], name[NAMES][64];
    assert_int_equal(dlock_client_new_owner_id(c, owner, sizeof(owner)), DLOCK_OK);
    dlock_lock *l[NAMES];
    int on_node[TH_CLUSTER_NODES] = {0};
    acount acq = {0}, rel = {0};
    for (int i = 0; i < NAMES; i++) {
        assert_int_equal(dlock_lock_get_as(c, th_name(name[i], sizeof(name[i]), "async"), owner,
                                           &l[i]),
                         DLOCK_OK);
        on_node[th_cluster_node_for(&cl, name[i]) - cl.node]++;
        assert_int_equal(
            dlock_lock_acquire_async(l[i], &(dlock_wait_opts){.lease_ms = 30000}, on_acount, &acq),
            DLOCK_OK);
    }
    if (await_count(&acq, NAMES) != NAMES)
        fail_msg("%d of %d async acquisitions: %s", atomic_load(&acq.ok), NAMES, acq.msg);
    int nodes = 0;
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        nodes += on_node[i] > 0;
    assert_int_equal(nodes, 3);
    for (int i = 0; i < NAMES; i++)
        assert_int_equal(th_int(th_cluster_node_for(&cl, name[i]), "EXISTS %s", name[i]), 1);
    for (int i = 0; i < NAMES; i++)
        assert_int_equal(dlock_lock_release_async(l[i], on_acount, &rel), DLOCK_OK);
    if (await_count(&rel, NAMES) != NAMES)
        fail_msg("%d of %d async releases: %s", atomic_load(&rel.ok), NAMES, rel.msg);
    for (int i = 0; i < NAMES; i++)
        assert_int_equal(th_int(th_cluster_node_for(&cl, name[i]), "EXISTS %s", name[i]), 0);
    /* A pending waiter, woken by another client's release. */
    dlock_client *other = th_client_url(cl.url, 0);
    dlock_lock *held;
    assert_int_equal(dlock_lock_get(other, name[0], &held), DLOCK_OK);
    assert_int_equal(dlock_lock_try(held, 0, 60000), DLOCK_OK);
    acount w = {0};
    assert_int_equal(dlock_lock_acquire_async(
                         l[0], &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = 30000},
                         on_acount, &w),
                     DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(atomic_load(&w.done), 0);
    assert_int_equal(dlock_lock_release(held), DLOCK_OK);
    if (await_count(&w, 1) != 1)
        fail_msg("the async waiter: %s", w.msg[0] ? w.msg : "not woken");
    acount r1 = {0};
    assert_int_equal(dlock_lock_release_async(l[0], on_acount, &r1), DLOCK_OK);
    assert_int_equal(await_count(&r1, 1), 1);
    dlock_lock_free(held);
    dlock_client_close(other);
    for (int i = 0; i < NAMES; i++)
        dlock_lock_free(l[i]);
    dlock_client_close(c);
}


static void test_cross_slot_request_refused(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(cl.url, 0);
    /* Two keys of one request in different slots: refused before sending. */
    const char *av[] = {"a", "b", "x"};
    dlock__req req = {.script = DLOCK__SCRIPT_LOCK_INSPECT, .nkeys = 2, .argc = 3, .argv = av};
    redisReply *r = NULL;
    assert_int_equal(dlock__call(c, &req, &r), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "different cluster slots"));
    assert_null(r);
    dlock_client_close(c);
}

/* Redis's own count of an error answer (INFO errorstats), or -1. */
static long long errorstat(const th_redis *n, const char *what)
{
    redisReply *r = th_cmd(n, "INFO errorstats");
    long long v = -1;
    char want[64];
    snprintf(want, sizeof(want), "errorstat_%s:count=", what);
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, want);
        v = p ? atoll(p + strlen(want)) : 0;
    }
    if (r)
        freeReplyObject(r);
    return v;
}

/* A multi-lock's batch sent on a stale slot map: the slot of one name moved
 * to another primary after the client read the map, the old node answers
 * MOVED, and that op goes again through the router, which follows it. */
static void test_multilock_follows_moved(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(cl.url, 0);   /* reads the map now */
    char names[3][64], other[64];
    dlock_lock *l[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_get(c, th_name(names[i], sizeof(names[i]), "moved"), &l[i]),
                         DLOCK_OK);
    th_redis *src = th_cluster_node_for(&cl, names[0]), *dst;
    assert_non_null(src);
    do
        dst = th_cluster_node_for(&cl, th_name(other, sizeof(other), "moved-dst"));
    while (dst == src);
    assert_non_null(dst);
    long long slot = th_int(src, "CLUSTER KEYSLOT %s", names[0]);
    assert_int_equal(th_int(src, "CLUSTER COUNTKEYSINSLOT %lld", slot), 0);
    redisReply *id = th_cmd(dst, "CLUSTER MYID");
    assert_true(id && id->type == REDIS_REPLY_STRING);
    /* The (empty) slot handed to dst: dst first, then every other node. */
    redisReply *r = th_cmd(dst, "CLUSTER SETSLOT %lld NODE %s", slot, id->str);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        if (&cl.node[i] != dst)
            freeReplyObject(th_cmd(&cl.node[i], "CLUSTER SETSLOT %lld NODE %s", slot, id->str));
    freeReplyObject(id);
    assert_int_equal(th_cluster_wait_ok(&cl, 20000), 0);
    assert_ptr_equal(th_cluster_node_for(&cl, names[0]), dst);
    long long moved0 = errorstat(src, "MOVED");
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    int rc = dlock_multilock_try(ml, 0, 30000);
    if (rc != DLOCK_OK)
        fail_msg("multi-lock on a stale slot map: %d (%s)", rc, dlock_last_error());
    assert_true(errorstat(src, "MOVED") > moved0);   /* it was sent there first */
    assert_int_equal(th_int(dst, "EXISTS %s", names[0]), 1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(th_int(th_cluster_node_for(&cl, names[i]), "EXISTS %s", names[i]), 0);
    dlock_multilock_free(ml);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(l[i]);
    dlock_client_close(c);
}

static int open_url(const char *url)
{
    dlock_config *cfg = dlock_config_new();
    int rc = dlock_config_set_url(cfg, url);
    if (rc == DLOCK_OK) {
        dlock_config_set_connect_timeout(cfg, 1000);
        dlock_config_set_retry(cfg, 0, 100);
        dlock_client *c = NULL;
        rc = dlock_client_open(&c, cfg);
        dlock_client_close(c);
    }
    dlock_config_free(cfg);
    return rc;
}

typedef struct doc_seen {
    int primaries_seen[TH_CLUSTER_NODES];
    int findings, eviction, clock_notes;
    char evict_node[64];
} doc_seen;

static void on_doctor(dlock_doctor_level level, const char *node, const char *check,
                      const char *finding, const char *fix, void *ud)
{
    doc_seen *d = ud;
    (void)fix;
    print_message("    %d %s %s: %s\n", (int)level, node, check, finding);
    if (level == DLOCK_DOCTOR_NOTE && strcmp(check, "clock") == 0 &&
        strstr(finding, "offset") && strstr(finding, "round trip"))
        d->clock_notes++;   /* each primary's clock offset, for the record */
    if (level == DLOCK_DOCTOR_NOTE)
        return;
    d->findings++;
    if (strcmp(check, "eviction") == 0) {
        d->eviction++;
        snprintf(d->evict_node, sizeof(d->evict_node), "%s", node);
    }
}

/* dlock_client_doctor asks every primary on its own: one primary with an
 * evicting policy is the one finding, named by its address; the cluster as
 * started (primaries with replicas, noeviction) has none. */
static void test_doctor_every_primary(void **state)
{
    (void)state;
    dlock_client *c = th_client_url(cl.url, 0);
    doc_seen d;
    memset(&d, 0, sizeof(d));
    assert_int_equal(dlock_client_doctor(c, "doc:x", on_doctor, &d), DLOCK_DOCTOR_NOTE);
    assert_int_equal(d.findings, 0);
    assert_int_equal(d.clock_notes, 3);   /* one per primary */
    th_redis *p = th_cluster_node_for(&cl, "doc:x");
    assert_non_null(p);
    freeReplyObject(th_cmd(p, "CONFIG SET maxmemory 64mb"));
    freeReplyObject(th_cmd(p, "CONFIG SET maxmemory-policy volatile-ttl"));
    memset(&d, 0, sizeof(d));
    int rc = dlock_client_doctor(c, NULL, on_doctor, &d);
    freeReplyObject(th_cmd(p, "CONFIG SET maxmemory-policy noeviction"));
    freeReplyObject(th_cmd(p, "CONFIG SET maxmemory 0"));
    assert_int_equal(rc, DLOCK_DOCTOR_UNSAFE);
    assert_int_equal(d.eviction, 1);
    char port[16];
    snprintf(port, sizeof(port), ":%d", th_client_port(p));
    assert_non_null(strstr(d.evict_node, port));
    dlock_client_close(c);
}

static void test_bad_deployments(void **state)
{
    (void)state;
    /* URLs */
    const char *bad[] = {"redis-cluster://",
                         "redis-cluster://a:1,,b:2",
                         "redis-cluster://a:1,redis://b:2",
                         "redis-cluster://h:1/3",
                         "redis-cluster://h:1#master",
                         "redis-cluster://h:99999",
                         "redis-sentinel://h:26379",
                         "redis-sentinel://h:26379#",
                         "redis-sentinel://h:1,redis-cluster://x:2#m"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dlock_config *cfg = dlock_config_new();
        assert_int_equal(dlock_config_set_url(cfg, "redis://keep:1"), DLOCK_OK);
        if (dlock_config_set_url(cfg, bad[i]) != DLOCK_EINVAL)
            fail_msg("accepted %s", bad[i]);
        assert_non_null(strstr(dlock_last_error(), "invalid URL"));
        dlock_config_free(cfg);
    }
    /* No seed answers: each seed's failure is named. */
    th_redis gone;
    assert_int_equal(th_redis_start(&gone, NULL), 0);
    char url[128];
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", gone.port,
             gone.port);
    th_redis_stop(&gone);
    assert_int_equal(open_url(url), DLOCK_ECONN);
    assert_non_null(strstr(dlock_last_error(), "no cluster node answered"));
    th_redis_destroy(&gone);
    /* A server that is not a cluster. */
    th_redis plain;
    assert_int_equal(th_redis_start(&plain, NULL), 0);
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d", plain.port);
    assert_int_equal(open_url(url), DLOCK_EREDIS);
    assert_non_null(strstr(dlock_last_error(), "cluster support disabled"));
    th_redis_destroy(&plain);
    /* A cluster node that serves no slot, then only some. */
    th_redis lone;
    assert_int_equal(th_cluster_node_start(&lone), 0);
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d", lone.port);
    assert_int_equal(open_url(url), DLOCK_ECONN);
    assert_non_null(strstr(dlock_last_error(), "serves no slots"));
    redisReply *r = th_cmd(&lone, "CLUSTER ADDSLOTSRANGE 0 99");
    assert_non_null(r);
    freeReplyObject(r);
    assert_int_equal(open_url(url), DLOCK_ECONN);
    assert_non_null(strstr(dlock_last_error(), "16284 of 16384 slots have no primary"));
    th_redis_destroy(&lone);
}

/* ------------------------------------------------------------ failover */

/* p's replica: the node whose INFO replication names p's port (its TLS
 * port when replication is over TLS). Fails the test when there is none. */
static th_redis *replica_of(const th_redis *p)
{
    th_redis *rep = NULL;
    for (int i = 0; i < TH_CLUSTER_NODES && !rep; i++) {
        redisReply *r = th_cmd(&cl.node[i], "INFO replication");
        char want[32];
        snprintf(want, sizeof(want), "master_port:%d\r", th_client_port(p));
        if (r && r->type == REDIS_REPLY_STRING && strstr(r->str, want))
            rep = &cl.node[i];
        if (r)
            freeReplyObject(r);
    }
    assert_non_null(rep);
    return rep;
}

/* Runs CLUSTER FAILOVER on rep, then waits until the cluster names it the
 * primary of key's slot and agrees. */
static void failover_to(th_redis *rep, const char *key)
{
    redisReply *r = th_cmd(rep, "CLUSTER FAILOVER");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    for (int64_t until = th_now_ms() + 20000 * th_slack();
         th_cluster_node_for(&cl, key) != rep && th_now_ms() < until;)
        th_sleep_ms(50);
    assert_ptr_equal(th_cluster_node_for(&cl, key), rep);
    assert_int_equal(th_cluster_wait_ok(&cl, 20000), 0);
}

/* CLUSTER FAILOVER: a replica takes over its primary's slots. A lock held
 * there survives (the replica had it) and is renewed on the new primary;
 * calls follow MOVED; new acquisitions work; a client with a failover
 * quarantine waits it out on that shard only. */
static void test_cluster_failover(void **state)
{
    (void)state;
    int64_t slack = th_slack();
    dlock_client *c = th_client_url(cl.url, 1500 * slack);
    char name[64];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "fo"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_redis *old = th_cluster_node_for(&cl, name);
    assert_non_null(old);
    /* A waiter on another lock of that node, subscribed there (sharded: the
     * node drops the subscription when its slots go). */
    char blocked[64];
    do
        th_name(blocked, sizeof(blocked), "fo-blocked");
    while (th_cluster_node_for(&cl, blocked) != old);
    dlock_client *b = th_client_url(cl.url, 0);
    dlock_lock *lb;
    assert_int_equal(dlock_lock_get(c, blocked, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lb, 0, 60000 * th_slack()), DLOCK_OK);
    struct waiter_arg w = {b, blocked, -99, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    th_await_lock_waiter(b, blocked);
    th_sleep_ms(100);
    assert_int_equal(th_int(old, "WAIT 1 2000"), 1);
    th_redis *rep = replica_of(old);
    /* A client with a failover quarantine (ON, q), on a lock of that shard
     * and one of another primary's, both taken once before the failover. */
    const int64_t q = 3000 * slack;
    dlock_config *qcfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(qcfg, cl.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_failover_quarantine(qcfg, DLOCK_QUARANTINE_ON, q), DLOCK_OK);
    dlock_client *qc = NULL;
    assert_int_equal(dlock_client_open(&qc, qcfg), DLOCK_OK);
    dlock_config_free(qcfg);
    char qname[64], oname[64];
    do
        th_name(qname, sizeof(qname), "fo-q");
    while (th_cluster_node_for(&cl, qname) != old);
    do
        th_name(oname, sizeof(oname), "fo-q-other");
    while (th_cluster_node_for(&cl, oname) == old || th_cluster_node_for(&cl, oname) == rep);
    dlock_lock *lq, *lo;
    assert_int_equal(dlock_lock_get(qc, qname, &lq), DLOCK_OK);
    assert_int_equal(dlock_lock_get(qc, oname, &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lq, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(lq), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lo, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(lo), DLOCK_OK);
    /* A client without the quarantine, on another lock of that shard. */
    char dname[64];
    do
        th_name(dname, sizeof(dname), "fo-d");
    while (th_cluster_node_for(&cl, dname) != old);
    dlock_lock *ld;
    assert_int_equal(dlock_lock_get(c, dname, &ld), DLOCK_OK);
    const int64_t t_fo = th_now_ms();
    failover_to(rep, name);
    /* The quarantined client records its quarantine on the new primary, for
     * each slot it took over: the client without one is refused there too
     * (it may take the lock before the record is written: then it lets go).
     * A try of the quarantined client's has it see the switch (MOVED). */
    if (dlock_lock_try(lq, 0, 5000) == DLOCK_OK)
        fail_msg("taken by the quarantined client just after the failover");
    int drc = DLOCK_OK;
    for (int64_t until = th_now_ms() + 5000 * slack; th_now_ms() < until; th_sleep_ms(10)) {
        if ((drc = dlock_lock_try(ld, 0, 5000)) == DLOCK_OK)
            assert_int_equal(dlock_lock_release(ld), DLOCK_OK);
        else if (drc == DLOCK_ETIMEDOUT && strstr(dlock_last_error(), "recorded on the server"))
            break;
    }
    if (drc != DLOCK_ETIMEDOUT)
        fail_msg("a client without the quarantine, on the shard that failed over: %d (%s)", drc,
                 dlock_last_error());
    printf("# CLUSTER FAILOVER -> a client without the quarantine refused: %lld ms (%s)\n",
           (long long)(th_now_ms() - t_fo), dlock_last_error());
    dlock_lock_free(ld);
    /* The quarantined client: the shard that failed over waits q, the
     * other primary's does not. */
    int qrc = dlock_lock_try(lq, 60000 * slack, 5000);
    const int64_t q_ok = th_now_ms();
    if (qrc != DLOCK_OK)
        fail_msg("quarantined acquisition: %d (%s)", qrc, dlock_last_error());
    printf("# CLUSTER FAILOVER -> quarantined acquisition: %lld ms (quarantine %lld ms)\n",
           (long long)(q_ok - t_fo), (long long)q);
    assert_true(q_ok - t_fo >= q);
    assert_int_equal(th_int(rep, "EXISTS %s", qname), 1);
    assert_int_equal(dlock_lock_release(lq), DLOCK_OK);
    if (dlock_lock_try(lo, 0, 5000) != DLOCK_OK)
        fail_msg("another primary's lock, after the failover: %s", dlock_last_error());
    assert_int_equal(dlock_lock_release(lo), DLOCK_OK);
    dlock_lock_free(lq);
    dlock_lock_free(lo);
    dlock_client_close(qc);
    /* Renewed on the new primary for several leases. */
    th_sleep_ms(3500 * slack);
    long long ttl = th_int(rep, "PTTL %s", name);
    assert_true(ttl > 0);
    int64_t count = 0;
    assert_int_equal(dlock_lock_hold_count(l, &count), DLOCK_OK);
    assert_int_equal(count, 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(th_int(rep, "EXISTS %s", name), 0);
    assert_int_equal(dlock_lock_try(l, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* The waiter, subscribed again on the new primary, is woken by the release. */
    th_sleep_ms(500);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(th_now_ms() - t0 < 5000 * th_slack());
    dlock_lock_free(lb);
    dlock_client_close(b);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A hold the new primary never had (deleted on the replica alone, as a
 * write the replica never received would be): after CLUSTER FAILOVER it is
 * reported lost, cause "failover", about when the client sees the switch,
 * not at the watchdog's next periodic renewal (200 s away). */
static void test_cluster_failover_hold_absent(void **state)
{
    (void)state;
    const int64_t slack = th_slack(), wd = 600000;   /* renewed every 200 s */
    dlock_client *c = th_client_url(cl.url, wd);
    char name[64];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "fo-absent"), &l), DLOCK_OK);
    dlock_lock_set_lost_callback(l, th_on_lost, NULL);
    atomic_store(&th_lost_reason, 0);
    atomic_store(&th_lost_cause, -1);
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_redis *p = th_cluster_node_for(&cl, name);
    assert_non_null(p);
    assert_int_equal(th_int(p, "WAIT 1 2000"), 1);
    th_redis *rep = replica_of(p);
    assert_int_equal(th_int(rep, "EXISTS %s", name), 1);
    redisReply *r = th_cmd(rep, "CONFIG SET replica-read-only no");
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    assert_int_equal(th_int(rep, "DEL %s", name), 1);
    r = th_cmd(rep, "CONFIG SET replica-read-only yes");
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    th_sleep_ms(200);
    assert_int_equal(atomic_load(&th_lost_reason), 0);   /* the primary still has it */
    const int64_t t_fo = th_now_ms();
    failover_to(rep, name);
    for (int64_t until = th_now_ms() + 10000 * slack;
         atomic_load(&th_lost_reason) == 0 && th_now_ms() < until;)
        th_sleep_ms(5);
    const int64_t t_lost = th_now_ms();
    assert_int_equal(atomic_load(&th_lost_reason), DLOCK_LOST_GONE);
    printf("# CLUSTER FAILOVER -> hold absent on the new primary reported lost: %lld ms "
           "(cause %s)\n",
           (long long)(t_lost - t_fo), dlock_lost_cause_str(atomic_load(&th_lost_cause)));
    assert_int_equal(atomic_load(&th_lost_cause), DLOCK_CAUSE_FAILOVER);
    assert_true(t_lost - t_fo < wd / 3);   /* not the periodic renewal */
    assert_int_equal(th_int(rep, "EXISTS %s", name), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A primary killed: its replica is promoted (node timeout 2 s). A hold
 * there with a watchdog timeout longer than the promotion survives and is
 * renewed on the new primary; a waiter on a lock there is resubscribed and
 * woken; calls reach the new primary without an error once it is there. */
static void test_cluster_primary_killed(void **state)
{
    (void)state;
    /* The lease outlasts the promotion and the reconnection, however slowed. */
    int64_t wd = 8000 * th_slack();
    dlock_client *a = th_client_url(cl.url, wd), *b = th_client_url(cl.url, 0);
    char held[64], blocked[64];
    th_redis *victim = NULL;
    /* Two names on the same primary. */
    th_name(held, sizeof(held), "kill-held");
    victim = th_cluster_node_for(&cl, held);
    assert_non_null(victim);
    do
        th_name(blocked, sizeof(blocked), "kill-blocked");
    while (th_cluster_node_for(&cl, blocked) != victim);
    dlock_lock *lh, *lb;
    assert_int_equal(dlock_lock_get(a, held, &lh), DLOCK_OK);
    assert_int_equal(dlock_lock_get(a, blocked, &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_try(lb, 0, 60000 * th_slack()), DLOCK_OK);
    struct waiter_arg w = {b, blocked, -99, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    th_await_lock_waiter(b, blocked);
    assert_int_equal(th_int(victim, "WAIT 1 2000"), 1);
    th_redis_stop(victim);
    th_redis *now = NULL;
    for (int64_t until = th_now_ms() + 30000 * th_slack(); th_now_ms() < until;) {
        now = th_cluster_node_for(&cl, held);
        if (now && now != victim)
            break;
        th_sleep_ms(50);
    }
    assert_non_null(now);
    assert_ptr_not_equal(now, victim);
    assert_int_equal(th_cluster_wait_ok(&cl, 20000), 0);
    /* Outlives a whole timeout on the new primary: renewed there. */
    th_sleep_ms(wd + 500);
    assert_true(th_int(now, "PTTL %s", held) > 0);
    int64_t count = 0;
    assert_int_equal(dlock_lock_hold_count(lh, &count), DLOCK_OK);
    assert_int_equal(count, 1);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(th_now_ms() - t0 < 5000 * th_slack());
    assert_int_equal(dlock_lock_release(lh), DLOCK_OK);
    dlock_lock_free(lh);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_slot),
        cmocka_unit_test(test_slot_map),
        cmocka_unit_test(test_locks_on_every_node),
        cmocka_unit_test(test_waiter_woken),
        cmocka_unit_test(test_watchdog_renews_on_every_node),
        cmocka_unit_test(test_limit_and_revocation_fallback),
        cmocka_unit_test(test_sharded_interop),
        cmocka_unit_test(test_cross_slot_request_refused),
        cmocka_unit_test(test_multilock_follows_moved),
        cmocka_unit_test(test_async_on_every_node),
        cmocka_unit_test(test_doctor_every_primary),
        cmocka_unit_test(test_bad_deployments),
        cmocka_unit_test(test_cluster_failover),
        cmocka_unit_test(test_cluster_failover_hold_absent),
        cmocka_unit_test(test_cluster_primary_killed),   /* last: a node stays down */
    };
    if (getenv("TH_ONLY"))   /* TH_ONLY='*pattern*': those tests only */
        cmocka_set_test_filter(getenv("TH_ONLY"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
