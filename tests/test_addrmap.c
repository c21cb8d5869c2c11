/* The address map (issue 23): a cluster whose nodes announce ports nobody
 * listens on (cluster-announce-port, as behind NAT or in containers) is
 * reached through dlock_config_set_address_map; without the map the
 * announced addresses cannot be reached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdatomic.h>

#include "harness.h"

static th_cluster cl;
static int announced[TH_CLUSTER_NODES];
static _Atomic int mapped;

static int setup(void **state)
{
    (void)state;
    if (th_cluster_start(&cl) != 0)
        return -1;
    /* Every node announces a port where nothing listens. */
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        announced[i] = th_free_port();
        redisReply *r = th_cmd(&cl.node[i], "CONFIG SET cluster-announce-port %d", announced[i]);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok)
            return -1;
    }
    /* Until every node's CLUSTER SLOTS shows the announced ports (gossip). */
    for (int64_t until = th_now_ms() + 20000 * th_slack(); th_now_ms() < until;
         th_sleep_ms(100)) {
        int seen = 0;
        for (int i = 0; i < TH_CLUSTER_NODES; i++) {
            redisReply *r = th_cmd(&cl.node[i], "CLUSTER SLOTS");
            int real = 0;
            for (size_t s = 0; r && r->type == REDIS_REPLY_ARRAY && s < r->elements; s++)
                for (size_t k = 2; k < r->element[s]->elements; k++)
                    for (int n = 0; n < TH_CLUSTER_NODES; n++)
                        real += r->element[s]->element[k]->element[1]->integer ==
                                cl.node[n].port;
            freeReplyObject(r);
            seen += real == 0;
        }
        if (seen == TH_CLUSTER_NODES)
            return 0;
    }
    return -1;
}

static int teardown(void **state)
{
    (void)state;
    th_cluster_destroy(&cl);
    return 0;
}

/* Announced port -> the node's real one (127.0.0.1). */
static int map(const char *host, int port, char *host_out, int *port_out, void *ud)
{
    (void)host;
    (void)ud;
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        if (announced[i] == port) {
            *port_out = cl.node[i].port;
            snprintf(host_out, DLOCK_HOST_MAX, "127.0.0.1");
            atomic_fetch_add(&mapped, 1);
            return 0;
        }
    return 0;
}

/* How many nodes hold key name (replicas answer MOVED: 0 or 1). */
static int holders(const char *name)
{
    int n = 0;
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        redisReply *r = th_cmd(&cl.node[i], "EXISTS %s", name);
        n += r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
    }
    return n;
}

/* query: appended to the URL ("" or "?map=..."); text: the map as text
 * (dlock_config_add_address_map, what the CLI's --map gives), or NULL. */
static int open_cluster(dlock_address_map_fn fn, const char *query, const char *text,
                        dlock_client **out)
{
    dlock_config *cfg = dlock_config_new();
    char url[512];
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d%s", cl.node[0].port, query);
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_address_map(cfg, fn, NULL), DLOCK_OK);
    if (text)
        assert_int_equal(dlock_config_add_address_map(cfg, text), DLOCK_OK);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, 500), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 1, 100), DLOCK_OK);
    *out = NULL;
    int rc = dlock_client_open(out, cfg);
    dlock_config_free(cfg);
    return rc;
}

/* Twelve locks taken and released, each seen on exactly one node. */
static void lock_each(dlock_client *c, const char *prefix)
{
    for (int i = 0; i < 12; i++) {
        char name[64];
        dlock_lock *l;
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), prefix), &l), DLOCK_OK);
        assert_int_equal(dlock_lock_try(l, 0, 30000), DLOCK_OK);
        assert_int_equal(holders(name), 1);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(holders(name), 0);
        dlock_lock_free(l);
    }
}

/* Through the map every key is served, on every primary. */
static void test_reached_through_the_map(void **state)
{
    (void)state;
    dlock_client *c;
    assert_int_equal(open_cluster(map, "", NULL, &c), DLOCK_OK);
    lock_each(c, "map");
    assert_true(atomic_load(&mapped) >= 3);
    dlock_client_close(c);
}

/* The same map as a list, HOST:PORT=HOST:PORT,... after prefix, into q. */
static const char *map_list(char *q, size_t size, const char *prefix)
{
    int n = snprintf(q, size, "%s", prefix);
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        n += snprintf(q + n, size - (size_t)n, "%s127.0.0.1:%d=127.0.0.1:%d", i ? "," : "",
                      announced[i], cl.node[i].port);
    assert_true(n < (int)size);
    return q;
}

/* The same map given in the URL (?map=HOST:PORT=HOST:PORT,...) or as text
 * (dlock_config_add_address_map, the CLI's --map), no callback. */
static void test_reached_through_the_url_map(void **state)
{
    (void)state;
    char q[400];
    for (int as_text = 0; as_text < 2; as_text++) {
        dlock_client *c;
        int before = atomic_load(&mapped);
        assert_int_equal(open_cluster(NULL, as_text ? "" : map_list(q, sizeof(q), "?map="),
                                      as_text ? map_list(q, sizeof(q), "") : NULL, &c),
                         DLOCK_OK);
        lock_each(c, as_text ? "textmap" : "urlmap");
        assert_int_equal(atomic_load(&mapped), before);   /* the callback played no part */
        dlock_client_close(c);
    }
}

/* Without it, the announced ports cannot be reached: a lock on a primary
 * other than the seed fails. */
static void test_unreachable_without_the_map(void **state)
{
    (void)state;
    dlock_client *c;
    int rc = open_cluster(NULL, "", NULL, &c);
    int failed = rc != DLOCK_OK;
    for (int i = 0; !failed && i < 12; i++) {
        char name[64];
        dlock_lock *l;
        assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "nomap"), &l), DLOCK_OK);
        failed = dlock_lock_try(l, 0, 30000) != DLOCK_OK;
        if (!failed)
            dlock_lock_release(l);
        dlock_lock_free(l);
    }
    printf("# without the map: %s\n", dlock_last_error());
    assert_true(failed);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reached_through_the_map),
        cmocka_unit_test(test_reached_through_the_url_map),
        cmocka_unit_test(test_unreachable_without_the_map),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
