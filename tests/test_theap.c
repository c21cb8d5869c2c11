/* The deadline heap of the asynchronous driver's sleeping calls
 * (core/theap.c): entries come out earliest first, equal times in the order
 * they were armed, and an entry taken out from anywhere is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/theap.h"

enum { N = 500 };

/* Takes every entry out, earliest first; each must come no earlier than the
 * one before (time, then arming order). Returns how many came out. */
static size_t drain(dlock__theap *h)
{
    size_t n = 0;
    int64_t at = INT64_MIN;
    uint64_t seq = 0;
    dlock__tentry *e;
    while ((e = dlock__theap_top(h))) {
        assert_true(e->at > at || (e->at == at && e->seq > seq));
        at = e->at;
        seq = e->seq;
        assert_int_equal(e->idx, 0);
        dlock__theap_remove(h, e);
        assert_int_equal(e->idx, -1);
        n++;
    }
    return n;
}

static void test_order_and_ties(void **state)
{
    (void)state;
    dlock__theap h = {0};
    dlock__tentry e[N];
    srand(7);
    for (int i = 0; i < N; i++) {
        e[i].idx = -1;
        assert_int_equal(dlock__theap_add(&h, &e[i], rand() % 50), 0);   /* many equal times */
    }
    /* Equal times come out in arming order: the one armed first, first. */
    dlock__tentry *top = dlock__theap_top(&h);
    for (int i = 0; i < N; i++)
        if (e[i].at == top->at) {
            assert_ptr_equal(top, &e[i]);
            break;
        }
    assert_int_equal(drain(&h), N);
    dlock__theap_free(&h);
}

static void test_remove_anywhere(void **state)
{
    (void)state;
    dlock__theap h = {0};
    dlock__tentry e[N];
    int in[N];
    srand(11);
    for (int i = 0; i < N; i++) {
        e[i].idx = -1;
        in[i] = 0;
    }
    /* Arm, re-arm and take out at random; the heap holds exactly what is in. */
    for (int step = 0; step < 20000; step++) {
        int i = rand() % N;
        if (in[i] && rand() % 2) {
            dlock__theap_remove(&h, &e[i]);
            in[i] = 0;
        } else {
            dlock__theap_remove(&h, &e[i]);   /* re-arming takes it out first */
            assert_int_equal(dlock__theap_add(&h, &e[i], rand() % 1000), 0);
            in[i] = 1;
        }
    }
    size_t held = 0;
    for (int i = 0; i < N; i++) {
        held += (size_t)in[i];
        if (in[i]) {
            assert_true(e[i].idx >= 0 && (size_t)e[i].idx < h.n);
            assert_ptr_equal(h.e[e[i].idx], &e[i]);
        } else {
            assert_int_equal(e[i].idx, -1);
        }
    }
    assert_int_equal(h.n, held);
    dlock__theap_remove(&h, &e[0]);   /* out already, or now: no harm either way */
    dlock__theap_remove(&h, &e[0]);
    assert_int_equal(drain(&h), held - (size_t)in[0]);
    assert_null(dlock__theap_top(&h));
    dlock__theap_free(&h);
    dlock__theap_free(&h);   /* twice: nothing left to free */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_ties),
        cmocka_unit_test(test_remove_anywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
