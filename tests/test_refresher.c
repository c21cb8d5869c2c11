/* The topology backends' background thread (net/refresher.c), alone: a
 * round when due, one soon after a poke whatever the period, a stop that
 * does not wait for the period, and a round that waits by itself (the
 * sentinel watcher's, returning 0) stopped between two of its slices. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"
#include "net/backend.h"

typedef struct counter {
    _Atomic int rounds, poked;
    int64_t every, sleep_ms;   /* what a round returns; how long it works */
} counter;

static int64_t round_fn(void *ud, int poked)
{
    counter *c = ud;
    if (poked)
        atomic_fetch_add(&c->poked, 1);
    if (c->sleep_ms)
        th_sleep_ms(c->sleep_ms);
    atomic_fetch_add(&c->rounds, 1);
    return c->every;
}

/* Waits up to ms x th_slack() for *v to reach want; 1 when it did. */
static int await_at_least(_Atomic int *v, int want, int64_t ms)
{
    for (int64_t until = th_now_ms() + ms * th_slack(); th_now_ms() < until; th_sleep_ms(2))
        if (atomic_load(v) >= want)
            return 1;
    return atomic_load(v) >= want;
}

/* A period of a minute: nothing before it but what a poke asks for, at once;
 * the stop returns at once too. */
static void test_poke_and_stop_do_not_wait_for_the_period(void **state)
{
    (void)state;
    counter c = {.every = 60000};
    dlock__refresher *r = NULL;
    assert_int_equal(dlock__refresher_start(&r, 60000, round_fn, &c, "test"), DLOCK_OK);
    th_sleep_ms(100);
    assert_int_equal(atomic_load(&c.rounds), 0);   /* the first round is a minute away */
    int64_t t0 = th_now_ms();
    dlock__refresher_poke(r);
    assert_true(await_at_least(&c.rounds, 1, 500));
    assert_true(th_now_ms() - t0 < 500 * th_slack());
    assert_int_equal(atomic_load(&c.poked), 1);
    /* The period counts again from that round: none follows it soon. */
    th_sleep_ms(100);
    assert_int_equal(atomic_load(&c.rounds), 1);
    t0 = th_now_ms();
    dlock__refresher_stop(r);
    assert_true(th_now_ms() - t0 < 500 * th_slack());
    dlock__refresher_stop(NULL);   /* nothing to stop */
    dlock__refresher_poke(NULL);
}

/* Rounds come every period (counted from each round's start), unpoked. */
static void test_rounds_every_period(void **state)
{
    (void)state;
    counter c = {.every = 50};
    dlock__refresher *r = NULL;
    assert_int_equal(dlock__refresher_start(&r, 0, round_fn, &c, "test"), DLOCK_OK);
    assert_true(await_at_least(&c.rounds, 5, 2000));
    dlock__refresher_stop(r);
    int n = atomic_load(&c.rounds);
    th_sleep_ms(120);
    assert_int_equal(atomic_load(&c.rounds), n);   /* none after the stop */
    assert_int_equal(atomic_load(&c.poked), 0);
}

/* A round that waits by itself (20 ms slices, next at once): a poke is seen
 * at the next round, the stop after the round under way. */
static void test_round_that_waits_by_itself(void **state)
{
    (void)state;
    counter c = {.every = 0, .sleep_ms = 20};
    dlock__refresher *r = NULL;
    assert_int_equal(dlock__refresher_start(&r, 0, round_fn, &c, "test"), DLOCK_OK);
    assert_true(await_at_least(&c.rounds, 3, 2000));
    dlock__refresher_poke(r);
    assert_true(await_at_least(&c.poked, 1, 500));
    int64_t t0 = th_now_ms();
    dlock__refresher_stop(r);
    assert_true(th_now_ms() - t0 < 200 * th_slack());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poke_and_stop_do_not_wait_for_the_period),
        cmocka_unit_test(test_rounds_every_period),
        cmocka_unit_test(test_round_that_waits_by_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
