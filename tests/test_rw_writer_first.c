/* Writer-first read-write locks (dlock_lock_set_writer_first,
 * dlock_config_set_writer_first): off by default (a reader joins held reads
 * while a writer waits); on, a new reader queues behind a waiting writer
 * while readers that hold re-enter, the writer gets in when the reads end,
 * a writer that gives up or dies lets the readers in, Redisson's readers are
 * not held back, asynchronous calls honour it, bad input, and an ACL that
 * refuses the intents' key. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock/async.h"
#include "rwlock_util.h"

/* ------------------------------------------------------------- helpers */

static dlock_lock *wf(dlock_lock *l)
{
    assert_int_equal(dlock_lock_set_writer_first(l, 1), DLOCK_OK);
    return l;
}

/* Intents recorded for the name (ZCARD of dlock_write_intent:{name}). */
static long long intents(const char *name)
{
    return th_int(&srv, "ZCARD dlock_write_intent:{%s}", name);
}

static int intent_key_exists(const char *name)
{
    return (int)th_int(&srv, "EXISTS dlock_write_intent:{%s}", name);
}

/* 1 when the name has n intents within the time (x slack). */
static int await_intents(const char *name, long long n, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (th_now_ms() < end) {
        if (intents(name) == n)
            return 1;
        th_sleep_ms(5);
    }
    return intents(name) == n;
}

/* One acquisition in a thread, with a cancel token; when it returned. */
typedef struct attempt {
    dlock_lock *l;
    int64_t wait_ms;
    dlock_cancel *cancel;
    int rc;
    char msg[256];
    _Atomic int64_t returned_at;
    pthread_t t;
} attempt;

static void *attempt_main(void *arg)
{
    attempt *a = arg;
    dlock_wait_opts o = {.wait_ms = a->wait_ms, .lease_ms = DLOCK_WATCHDOG, .cancel = a->cancel};
    a->rc = dlock_lock_acquire_opts(a->l, &o);
    snprintf(a->msg, sizeof(a->msg), "%s", dlock_last_error());
    a->returned_at = th_now_ms();
    return NULL;
}

static void start_attempt(attempt *a, dlock_lock *l, int64_t wait_ms, dlock_cancel *cancel)
{
    memset(a, 0, sizeof(*a));
    a->l = l;
    a->wait_ms = wait_ms;
    a->cancel = cancel;
    pthread_create(&a->t, NULL, attempt_main, a);
}

/* ------------------------------------------------------------- the mode */

/* Off by default: a reader joins the held reads while a writer waits, and no
 * intent is written. The sides decide apart: a writer-first writer's intent
 * holds back writer-first readers only (a reader with the mode off joins, as
 * Redisson's do), and a writer-first reader is not held back by a writer
 * with the mode off. */
static void test_off_by_default(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-off");
    dlock_lock *r1 = rd(cli, name, "r:1"), *r2 = rd(cli, name, "r:2");
    dlock_lock *r3 = wf(rd(cli, name, "r:3")), *w = wr(cli, name, "w:1");
    dlock_lock *w2 = wf(wr(cli, name, "w:2"));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);

    taker k;
    start_taker(&k, w, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_waiters(cli, name, 1, 5000));
    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_OK);   /* joins: today's rule */
    assert_int_equal(dlock_lock_try(r3, 0, 5000), DLOCK_OK);   /* no intent to honour */
    assert_int_equal(intent_key_exists(name), 0);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r3), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    assert_int_equal(k.release_rc, DLOCK_OK);

    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    start_taker(&k, w2, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_intents(name, 1, 5000));
    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_OK);   /* mode off: joins */
    assert_int_equal(dlock_lock_try(r3, 0, 5000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "a writer waits"));
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    assert_int_equal(intent_key_exists(name), 0);   /* its acquisition took it out */
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(r3);
    dlock_lock_free(w);
    dlock_lock_free(w2);
}

/* A client with the mode on: every read and write handle of it is
 * writer-first; a handle may turn it off. */
static void test_client_setting(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-client");
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_writer_first(cfg, 1), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *r1 = rd(c, name, "r:1"), *r2 = rd(c, name, "r:2"), *w = wr(c, name, "w:1");
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    taker k;
    start_taker(&k, w, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_intents(name, 1, 5000));
    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_set_writer_first(r2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* ------------------------------------------------------------ the order */

/* With the mode on: a new reader waits behind the waiting writer (a try with
 * no wait and one of 200 ms both fail); the reader that holds re-enters; the
 * writer gets in as soon as the held reads end, its intent gone with its
 * acquisition, and the reader that queued comes in after the writer's
 * release, woken by it. */
static void test_new_reader_queues_behind_writer(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-queue");
    dlock_lock *r1 = wf(rd(cli, name, "r:1")), *r2 = wf(rd(cli, name, "r:2"));
    dlock_lock *w = wf(wr(cli, name, "w:1"));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    taker kw;
    start_taker(&kw, w, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 300);
    assert_true(await_intents(name, 1, 5000));

    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "a writer waits"));
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_try(r2, 200, 5000), DLOCK_ETIMEDOUT);
    assert_true(th_now_ms() - t0 >= 190);
    assert_int_equal(dlock_lock_try(r1, 0, 5000), DLOCK_OK);   /* the holder re-enters */
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(count(r1), 3);

    taker kr;
    start_taker(&kr, r2, DLOCK_WAIT_FOREVER, 5000, 0);
    th_sleep_ms(100);
    assert_int_equal(kr.acquired_at, 0);
    assert_int_equal(kw.acquired_at, 0);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    int64_t t_rel = th_now_ms();
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);   /* the reads end */
    int64_t end = th_now_ms() + 2000 * th_slack();
    while (kw.acquired_at == 0 && th_now_ms() < end)
        th_sleep_ms(2);
    assert_true(kw.acquired_at != 0);
    assert_true(kw.acquired_at - t_rel < 1000 * th_slack());
    assert_int_equal(intent_key_exists(name), 0);
    assert_int_equal(kr.acquired_at, 0);   /* the writer holds */
    pthread_join(kw.t, NULL);
    assert_int_equal(kw.rc, DLOCK_OK);
    assert_int_equal(kw.release_rc, DLOCK_OK);
    pthread_join(kr.t, NULL);
    assert_int_equal(kr.rc, DLOCK_OK);
    assert_true(kr.acquired_at >= kw.acquired_at + 250);
    assert_true(kr.acquired_at - kw.released_at < 1000 * th_slack());
    assert_true(kr.attempts <= 6);   /* woken by the releases, no polling */
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
}

/* Readers that keep re-acquiring with overlapping holds (four threads, 100 ms
 * each, staggered): the writer gets in within about one read hold, and the
 * readers go on after it. */
typedef struct stream {
    dlock_lock *l;
    atomic_int *stop;
    atomic_long *grants;
    int64_t hold_ms, delay_ms;
    int bad;
    pthread_t t;
} stream;

static void *stream_main(void *arg)
{
    stream *s = arg;
    th_sleep_ms(s->delay_ms);
    while (!atomic_load(s->stop)) {
        if (dlock_lock_acquire(s->l, DLOCK_WATCHDOG) != DLOCK_OK) {
            s->bad = 1;
            break;
        }
        atomic_fetch_add(s->grants, 1);
        th_sleep_ms(s->hold_ms);
        if (dlock_lock_release(s->l) != DLOCK_OK)
            s->bad = 1;
    }
    return NULL;
}

static void test_stream_of_readers(void **state)
{
    (void)state;
    char name[128], owner[32];
    th_name(name, sizeof(name), "wf-stream");
    enum { N = 4, HOLD = 100 };
    atomic_int stop = 0;
    atomic_long grants = 0;
    stream s[N];
    for (int i = 0; i < N; i++) {
        snprintf(owner, sizeof(owner), "r:%d", i);
        s[i] = (stream){.l = wf(rd(cli, name, owner)), .stop = &stop, .grants = &grants,
                        .hold_ms = HOLD, .delay_ms = i * HOLD / N};
        pthread_create(&s[i].t, NULL, stream_main, &s[i]);
    }
    th_sleep_ms(300);
    assert_true(atomic_load(&grants) >= N);
    dlock_lock *w = wf(wr(cli, name, "w:1"));
    for (int round = 0; round < 3; round++) {
        int64_t t0 = th_now_ms();
        assert_int_equal(dlock_lock_try(w, 5000 * th_slack(), DLOCK_WATCHDOG), DLOCK_OK);
        int64_t waited = th_now_ms() - t0;
        if (waited > (HOLD + 300) * th_slack())
            fail_msg("round %d: the writer waited %lld ms (read holds of %d ms)", round,
                     (long long)waited, HOLD);
        long g = atomic_load(&grants);
        th_sleep_ms(20);
        assert_int_equal(atomic_load(&grants), g);   /* nobody reads beside it */
        assert_int_equal(dlock_lock_release(w), DLOCK_OK);
        th_sleep_ms(150);
        assert_true(atomic_load(&grants) > g);   /* the readers go on */
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < N; i++) {
        pthread_join(s[i].t, NULL);
        assert_false(s[i].bad);
        dlock_lock_free(s[i].l);
    }
    dlock_lock_free(w);
}

/* ------------------------------------------------------------- giving up */

/* A writer whose wait runs out takes its intent out and the reader it held
 * back comes in at once; cancelled while waiting without limit (its intent
 * would live a watchdog timeout, 30 s), likewise: its give-up publishes "1". */
static void test_writer_gives_up(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-giveup");
    dlock_lock *r1 = wf(rd(cli, name, "r:1")), *r2 = wf(rd(cli, name, "r:2"));
    dlock_lock *w = wf(wr(cli, name, "w:1"));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);

    attempt aw, ar;
    start_attempt(&aw, w, 600, NULL);
    assert_true(await_intents(name, 1, 5000));
    start_attempt(&ar, r2, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_waiters(cli, name, 2, 5000));
    pthread_join(aw.t, NULL);
    assert_int_equal(aw.rc, DLOCK_ETIMEDOUT);
    assert_int_equal(intent_key_exists(name), 0);
    pthread_join(ar.t, NULL);
    assert_int_equal(ar.rc, DLOCK_OK);
    assert_true(ar.returned_at - aw.returned_at < 300 * th_slack());
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);

    dlock_cancel *tok = NULL;
    assert_int_equal(dlock_cancel_new(&tok), DLOCK_OK);
    start_attempt(&aw, w, DLOCK_WAIT_FOREVER, tok);
    assert_true(await_intents(name, 1, 5000));
    start_attempt(&ar, r2, DLOCK_WAIT_FOREVER, NULL);
    assert_true(await_waiters(cli, name, 2, 5000));
    th_sleep_ms(200);
    assert_int_equal(ar.returned_at, 0);   /* held back */
    int64_t t0 = th_now_ms();
    dlock_cancel_fire(tok);
    pthread_join(aw.t, NULL);
    assert_int_equal(aw.rc, DLOCK_ECANCELED);
    assert_int_equal(intent_key_exists(name), 0);
    pthread_join(ar.t, NULL);
    assert_int_equal(ar.rc, DLOCK_OK);
    assert_true(ar.returned_at - t0 < 500 * th_slack());
    assert_true(held(r1));   /* the holder never noticed */
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    dlock_cancel_free(tok);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
}

/* A waiting writer killed (SIGKILL, another process, watchdog timeout 1 s):
 * its intent holds new readers back until it lapses, one watchdog timeout
 * after its last renewal at most, and not for ever. */
static void test_killed_writer_intent_lapses(void **state)
{
    (void)state;
    char name[128], line[64];
    th_name(name, sizeof(name), "wf-killed");
    enum { WD = 1000 };
    dlock_lock *r1 = wf(rd(cli, name, "r:1")), *r2 = wf(rd(cli, name, "r:2"));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    int fd = -1;
    pid_t pid = th_spawn(&fd, DLOCK_TEST_WORKER, "write-wait", srv.url, name, "1000", NULL);
    assert_true(pid > 0);
    assert_int_equal(th_read_line(fd, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "waiting");
    assert_true(await_intents(name, 1, 5000));
    th_sleep_ms(WD / 2);   /* renewed at least once */
    assert_int_equal(intents(name), 1);
    kill(pid, SIGKILL);
    int64_t t_kill = th_now_ms();
    assert_true(th_wait(pid, 5000) >= 0);
    close(fd);
    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_ETIMEDOUT);   /* still there */
    attempt ar;
    start_attempt(&ar, r2, 10000 * th_slack(), NULL);
    pthread_join(ar.t, NULL);
    assert_int_equal(ar.rc, DLOCK_OK);
    int64_t after = ar.returned_at - t_kill;
    if (after > WD + 500 * th_slack())
        fail_msg("the dead writer's intent held readers back %lld ms after its kill",
                 (long long)after);
    assert_int_equal(intent_key_exists(name), 0);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
}

/* ------------------------------------------------------------- Redisson */

/* A Redisson reader (played with Redis commands in Redisson's layout: its
 * field, its timeout key) knows nothing of intents: it joins the read holds
 * while a dlock writer-first writer waits (documented), and the writer then
 * waits for it too; its release (DEL, PUBLISH "0") lets the writer in at
 * once. The lock's hash holds Redisson's fields only. */
static void test_redisson_reader_not_held_back(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-redisson");
    const char *rid = "9b2f0c3e-0000-4000-8000-000000000002:9";
    dlock_lock *r1 = wf(rd(cli, name, "r:1")), *w = wf(wr(cli, name, "w:1"));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    taker kw;
    start_taker(&kw, w, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_intents(name, 1, 5000));
    /* Redisson's read acquire in mode read: HINCRBY, its timeout key, PEXPIRE. */
    assert_int_equal(th_int(&srv, "HINCRBY %s %s 1", name, rid), 1);
    freeReplyObject(th_cmd(&srv, "SET {%s}:%s:rwlock_timeout:1 1 PX 30000", name, rid));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 30000", name));
    assert_int_equal(th_int(&srv, "HLEN %s", name), 3);   /* mode, r:1, Redisson's */
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    th_sleep_ms(200);
    assert_int_equal(kw.acquired_at, 0);   /* Redisson's reader still reads */
    /* Redisson's read release, the last: HDEL, DEL its key and the lock, "0". */
    freeReplyObject(th_cmd(&srv, "DEL {%s}:%s:rwlock_timeout:1 %s", name, rid, name));
    int64_t t0 = th_now_ms();
    char ch[200];
    snprintf(ch, sizeof(ch), "redisson_rwlock:{%s}", name);
    th_publish(&srv, ch, "0");
    pthread_join(kw.t, NULL);
    assert_int_equal(kw.rc, DLOCK_OK);
    assert_true(kw.acquired_at - t0 < 1000 * th_slack());
    assert_int_equal(intent_key_exists(name), 0);
    dlock_lock_free(r1);
    dlock_lock_free(w);
}

/* ---------------------------------------------------------- asynchronous */

typedef struct done {
    pthread_mutex_t mu;
    int n, rc;
} done;

static void on_done(const dlock_async_result *res, void *ud)
{
    done *d = ud;
    pthread_mutex_lock(&d->mu);
    d->rc = dlock_async_status(res);
    d->n++;
    pthread_mutex_unlock(&d->mu);
}

static int done_n(done *d)
{
    pthread_mutex_lock(&d->mu);
    int n = d->n;
    pthread_mutex_unlock(&d->mu);
    return n;
}

static int await_done(done *d, int64_t within_ms)
{
    int64_t end = th_now_ms() + within_ms * th_slack();
    while (done_n(d) == 0 && th_now_ms() < end)
        th_sleep_ms(2);
    return done_n(d);
}

/* The asynchronous acquire honours the mode as the blocking one does: a
 * writer's intent, a reader queued behind it, the writer in when the read
 * ends, the reader after the writer's release; a writer whose wait runs out
 * gives its intent up. */
static void test_async(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-async");
    dlock_lock *r1 = wf(rd(cli, name, "r:1")), *r2 = wf(rd(cli, name, "r:2"));
    dlock_lock *w = wf(wr(cli, name, "w:1"));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    done dw = {PTHREAD_MUTEX_INITIALIZER, 0, -1}, dr = {PTHREAD_MUTEX_INITIALIZER, 0, -1};
    dlock_wait_opts o = {.wait_ms = DLOCK_WAIT_FOREVER, .lease_ms = DLOCK_WATCHDOG};
    assert_int_equal(dlock_lock_acquire_async(w, &o, on_done, &dw), DLOCK_OK);
    assert_true(await_intents(name, 1, 5000));
    assert_int_equal(dlock_lock_acquire_async(r2, &o, on_done, &dr), DLOCK_OK);
    assert_true(await_waiters(cli, name, 2, 5000));
    th_sleep_ms(100);
    assert_int_equal(done_n(&dr), 0);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    assert_int_equal(await_done(&dw, 2000), 1);
    assert_int_equal(dw.rc, DLOCK_OK);
    th_sleep_ms(100);
    assert_int_equal(done_n(&dr), 0);   /* the writer holds */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(await_done(&dr, 2000), 1);
    assert_int_equal(dr.rc, DLOCK_OK);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);

    /* An asynchronous writer whose wait runs out takes its intent out and
     * wakes the reader it held back. */
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    done dw2 = {PTHREAD_MUTEX_INITIALIZER, 0, -1}, dr2 = {PTHREAD_MUTEX_INITIALIZER, 0, -1};
    dlock_wait_opts o2 = {.wait_ms = 300, .lease_ms = DLOCK_WATCHDOG};
    assert_int_equal(dlock_lock_acquire_async(w, &o2, on_done, &dw2), DLOCK_OK);
    assert_true(await_intents(name, 1, 5000));
    assert_int_equal(dlock_lock_acquire_async(r2, &o, on_done, &dr2), DLOCK_OK);
    assert_int_equal(await_done(&dw2, 3000), 1);
    assert_int_equal(dw2.rc, DLOCK_ETIMEDOUT);
    assert_int_equal(await_done(&dr2, 1000), 1);
    assert_int_equal(dr2.rc, DLOCK_OK);
    assert_int_equal(intent_key_exists(name), 0);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
}

/* ------------------------------------------------------------ bad input */

static void test_bad_input(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "wf-bad");
    assert_int_equal(dlock_lock_set_writer_first(NULL, 1), DLOCK_EINVAL);
    dlock_lock *plain = NULL, *fair = NULL, *r = rd(cli, name, NULL);
    assert_int_equal(dlock_lock_get(cli, name, &plain), DLOCK_OK);
    assert_int_equal(dlock_lock_set_writer_first(plain, 1), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "no writer-first mode"));
    assert_int_equal(dlock_fair_lock_get(cli, name, &fair), DLOCK_OK);
    assert_int_equal(dlock_lock_set_writer_first(fair, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_set_writer_first(r, 2), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "not 2"));
    assert_int_equal(dlock_lock_set_writer_first(r, -1), DLOCK_EINVAL);
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_writer_first(cfg, 7), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_writer_first(NULL, 1), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_writer_first(cfg, 1), DLOCK_OK);
    dlock_config_free(cfg);
    /* The intents' key holding somebody's data: left alone, named. */
    dlock_lock *w = wf(wr(cli, name, "w:1")), *r1 = rd(cli, name, "r:1");
    freeReplyObject(th_cmd(&srv, "SET dlock_write_intent:{%s} data", name));
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_try(w, 100, DLOCK_WATCHDOG), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_try(wf(r), 0, DLOCK_WATCHDOG), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    assert_int_equal(dlock_lock_try(w, 100, DLOCK_WATCHDOG), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);   /* nothing written */
    freeReplyObject(th_cmd(&srv, "DEL dlock_write_intent:{%s}", name));
    dlock_lock_free(plain);
    dlock_lock_free(fair);
    dlock_lock_free(r);
    dlock_lock_free(r1);
    dlock_lock_free(w);
}

/* ------------------------------------------------------------------ ACL */

typedef struct log_sink {
    pthread_mutex_t mu;
    int intents;
} log_sink;

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    (void)level;
    log_sink *s = ud;
    pthread_mutex_lock(&s->mu);
    if (strstr(msg, "dlock_write_intent"))
        s->intents++;
    pthread_mutex_unlock(&s->mu);
}

/* A Redis user whose ACL allows every key but the intents' goes on without
 * them (warned once): the writer still gets the lock when the reads end,
 * and a writer-first reader is not held back. */
static void test_acl_refuses_intents(void **state)
{
    (void)state;
    if (th_deployed(&srv) || th_acl_mode() || th_tls_mode())
        skip();   /* one plain server, its own user */
    char name[128], url[200];
    th_name(name, sizeof(name), "wfacl");
    freeReplyObject(th_cmd(&srv, "ACL SETUSER nointent on >pw &* +@all ~wfacl* ~{wfacl* "
                                 "~redisson_* ~dlock_lock_delay:* ~dlock_read_delay:* "
                                 "~dlock_quarantine:* ~dlock_lock_next:*"));
    snprintf(url, sizeof(url), "redis://nointent:pw@127.0.0.1:%d", srv.port);
    log_sink sink = {PTHREAD_MUTEX_INITIALIZER, 0};
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_writer_first(cfg, 1), DLOCK_OK);
    assert_int_equal(dlock_config_set_log_callback(cfg, on_log, &sink, DLOCK_LOG_WARN), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_lock *r1 = rd(c, name, "r:1"), *r2 = rd(c, name, "r:2"), *w = wr(c, name, "w:1");
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    taker k;
    start_taker(&k, w, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_waiters(c, name, 1, 5000));
    assert_int_equal(dlock_lock_try(r2, 0, 5000), DLOCK_OK);   /* no intent: joins */
    assert_int_equal(intent_key_exists(name), 0);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    assert_int_equal(k.release_rc, DLOCK_OK);
    assert_int_equal(sink.intents, 1);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c);
    freeReplyObject(th_cmd(&srv, "ACL DELUSER nointent"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_by_default),
        cmocka_unit_test(test_client_setting),
        cmocka_unit_test(test_new_reader_queues_behind_writer),
        cmocka_unit_test(test_stream_of_readers),
        cmocka_unit_test(test_writer_gives_up),
        cmocka_unit_test(test_killed_writer_intent_lapses),
        cmocka_unit_test(test_redisson_reader_not_held_back),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_acl_refuses_intents),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
