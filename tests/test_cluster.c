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

#include "harness.h"
#include "net/cluster.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_slot),
        cmocka_unit_test(test_slot_map),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
