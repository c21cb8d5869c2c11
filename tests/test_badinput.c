/* Bad input at every public entry point, table-driven: each row is a call and
 * the code it must return. After every row the server must hold exactly what
 * it held before (nothing written, no key of another type touched), an error
 * must come with a message, and nothing may crash or leak (ASan, valgrind). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"

static dlock_lock *ok_lock;          /* a valid handle on a free lock */
static dlock_lock *typed[5];         /* handles on keys of other types */
static char *mib;                    /* 1 MiB of 'n' */
static char *big_owner;              /* DLOCK_OWNER_MAX + 1 bytes */
static char *big_name;               /* DLOCK_NAME_MAX + 1 bytes */
static dlock_config *cfg;

static const char *type_keys[5] = {"bad:string", "bad:list", "bad:set", "bad:zset", "bad:hash"};

static int setup(void **state)
{
    if (th_setup(state) != 0)
        return -1;
    mib = malloc(1 << 20);
    memset(mib, 'n', (1 << 20) - 1);
    mib[(1 << 20) - 1] = '\0';
    big_owner = calloc(1, DLOCK_OWNER_MAX + 2);
    memset(big_owner, 'o', DLOCK_OWNER_MAX + 1);
    big_name = calloc(1, DLOCK_NAME_MAX + 2);
    memset(big_name, 'x', DLOCK_NAME_MAX + 1);
    cfg = dlock_config_new();
    dlock_lock_get(cli, "bad:free", &ok_lock);
    freeReplyObject(th_cmd(&srv, "SET bad:string v"));
    freeReplyObject(th_cmd(&srv, "RPUSH bad:list a"));
    freeReplyObject(th_cmd(&srv, "SADD bad:set a"));
    freeReplyObject(th_cmd(&srv, "ZADD bad:zset 1 a"));
    freeReplyObject(th_cmd(&srv, "HSET bad:hash color blue"));   /* a hash that is not a lock */
    for (int i = 0; i < 5; i++)
        dlock_lock_get(cli, type_keys[i], &typed[i]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++)
        dlock_lock_free(typed[i]);
    dlock_lock_free(ok_lock);
    dlock_config_free(cfg);
    free(mib);
    free(big_owner);
    free(big_name);
    return th_teardown(state);
}

/* What the server holds: every key with its type and value, as one string. */
static char *snapshot(void)
{
    redisReply *r = th_cmd(&srv, "EVAL %s 0",
                           "local out = {} "
                           "for _, k in ipairs(redis.call('keys', '*')) do "
                           "  if not string.find(k, 'redisson_unlock_latch') then "
                           "    out[#out + 1] = k .. '=' .. redis.call('type', k).ok .. "
                           "      ':' .. redis.call('dump', k) "
                           "  end "
                           "end table.sort(out) return table.concat(out, '|')");
    char *s = strdup(r && r->str ? r->str : "?");
    if (r)
        freeReplyObject(r);
    return s;
}

typedef struct row {
    const char *what;
    int want;
    int (*call)(void);
} row;

#define ROW(want, expr) {#expr, want, NULL}

/* The calls, each a small function so the table stays readable. */
static int flag;
static int64_t i64;
static char buf[DLOCK_OWNER_BUFSIZE];
static dlock_lock *l_out;
static dlock_info *info_out;
static dlock_client *c_out;

static int noop_fn(void *ud) { return ud ? 1 : 0; }
static int scan_fn(const dlock_info *i, void *ud) { return i && ud; }

#define CALL(name, body) static int name(void) { body; }
CALL(c_url_null, return dlock_config_set_url(cfg, NULL))
CALL(c_url_mib, return dlock_config_set_url(cfg, mib))
CALL(c_url_nonutf8, return dlock_config_set_url(cfg, "redis://h\xff\xfe:1"))
CALL(c_url_crlf, return dlock_config_set_url(cfg, "redis://h\r\nFLUSHALL\r\n:6379"))
CALL(c_url_nul_pct, return dlock_config_set_url(cfg, "redis://u:%00@h"))
CALL(c_url_port_neg, return dlock_config_set_url(cfg, "redis://h:-1"))
CALL(c_url_port_huge, return dlock_config_set_url(cfg, "redis://h:99999999999999999999"))
CALL(c_url_db_huge, return dlock_config_set_url(cfg, "redis://h/99999999999"))
CALL(c_url_two_at, return dlock_config_set_url(cfg, "redis://a@b@"))
CALL(c_url_unix_rel, return dlock_config_set_url(cfg, "unix://../etc/passwd"))
CALL(c_url_unix_long, return dlock_config_set_url(cfg, "unix:///aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
CALL(c_url_scheme, return dlock_config_set_url(cfg, "javascript:alert(1)"))
CALL(c_wd_neg, return dlock_config_set_watchdog_timeout(cfg, -1))
CALL(c_wd_min, return dlock_config_set_watchdog_timeout(cfg, INT64_MIN))
CALL(c_wd_max, return dlock_config_set_watchdog_timeout(cfg, INT64_MAX))
CALL(c_wd_small, return dlock_config_set_watchdog_timeout(cfg, 29))
CALL(c_cmd_neg, return dlock_config_set_command_timeout(cfg, -5))
CALL(c_cmd_max, return dlock_config_set_command_timeout(cfg, INT64_MAX))
CALL(c_conn_neg, return dlock_config_set_connect_timeout(cfg, INT64_MIN))
CALL(c_retry_neg, return dlock_config_set_retry(cfg, -1, 100))
CALL(c_retry_max, return dlock_config_set_retry(cfg, INT_MAX, 100))
CALL(c_retry_delay, return dlock_config_set_retry(cfg, 1, -100))
CALL(c_pool_neg, return dlock_config_set_pool_size(cfg, -1))
CALL(c_pool_max, return dlock_config_set_pool_size(cfg, INT_MAX))
CALL(c_prio_neg, return dlock_config_set_priority_after(cfg, INT64_MIN))
CALL(c_prio_max, return dlock_config_set_priority_after(cfg, INT64_MAX))
CALL(c_name_crlf, return dlock_config_set_client_name(cfg, "a\r\nFLUSHALL"))
CALL(c_name_mib, return dlock_config_set_client_name(cfg, mib))
CALL(c_log_level, return dlock_config_set_log_callback(cfg, NULL, NULL, (dlock_log_level)-1))
CALL(c_null_cfg, return dlock_config_set_pool_size(NULL, 1))
CALL(o_null_out, return dlock_client_open(NULL, cfg))
CALL(o_null_cfg, return dlock_client_open(&c_out, NULL))
CALL(i_null_client, return dlock_client_owner_id(NULL, buf, sizeof(buf)))
CALL(i_small_buf, return dlock_client_owner_id(cli, buf, 5))
CALL(i_null_buf, return dlock_client_new_owner_id(cli, NULL, 64))
CALL(i_ping_null, return dlock_client_ping(NULL))
CALL(k_cancel_null, return dlock_cancel_new(NULL))
CALL(g_null_client, return dlock_lock_get(NULL, "x", &l_out))
CALL(g_null_name, return dlock_lock_get(cli, NULL, &l_out))
CALL(g_empty_name, return dlock_lock_get(cli, "", &l_out))
CALL(g_mib_name, return dlock_lock_get(cli, mib, &l_out))
CALL(g_max1_name, return dlock_lock_get(cli, big_name, &l_out))
CALL(g_null_out, return dlock_lock_get(cli, "x", NULL))
CALL(g_as_null, return dlock_lock_get_as(cli, "x", NULL, &l_out))
CALL(g_as_empty, return dlock_lock_get_as(cli, "x", "", &l_out))
CALL(g_as_big, return dlock_lock_get_as(cli, "x", big_owner, &l_out))
CALL(g_as_mib, return dlock_lock_get_as(cli, "x", mib, &l_out))
CALL(g_as_nocolon, return dlock_lock_get_as(cli, "x", "worker-7", &l_out))
CALL(a_null, return dlock_lock_acquire(NULL, DLOCK_WATCHDOG))
CALL(a_lease_old_wd, return dlock_lock_acquire(ok_lock, -1))
CALL(a_lease_neg, return dlock_lock_try(ok_lock, 0, -2))
CALL(a_lease_min, return dlock_lock_try(ok_lock, 0, INT64_MIN))
CALL(a_lease_huge, return dlock_lock_try(ok_lock, 0, INT64_MAX))
CALL(a_wait_neg, return dlock_lock_try(ok_lock, -2, 1000))
CALL(a_wait_min, return dlock_lock_try(ok_lock, INT64_MIN, 1000))
CALL(a_reserved,
     return dlock_lock_acquire_opts(ok_lock, &(dlock_wait_opts){.reserved = {0, 0, 0, 1}}))
CALL(a_opts_wait, return dlock_lock_acquire_opts(ok_lock, &(dlock_wait_opts){.wait_ms = -2}))
CALL(a_opts_lease, return dlock_lock_acquire_opts(ok_lock, &(dlock_wait_opts){.lease_ms = -5}))
CALL(r_null, return dlock_lock_release(NULL))
CALL(r_not_held, return dlock_lock_release(ok_lock))
CALL(f_null, return dlock_lock_force_release(NULL, &flag))
CALL(q_locked_null, return dlock_lock_is_locked(NULL, &flag))
CALL(q_locked_out, return dlock_lock_is_locked(ok_lock, NULL))
CALL(q_held_out, return dlock_lock_is_held(ok_lock, NULL))
CALL(q_heldby_null, return dlock_lock_is_held_by(ok_lock, NULL, &flag))
CALL(q_heldby_big, return dlock_lock_is_held_by(ok_lock, big_owner, &flag))
CALL(q_count_out, return dlock_lock_hold_count(ok_lock, NULL))
CALL(q_ttl_out, return dlock_lock_ttl(ok_lock, NULL))
CALL(u_run_fn,
     return dlock_lock_run(ok_lock, &(dlock_wait_opts){.lease_ms = 1000}, NULL, NULL, NULL))
CALL(u_run_lock,
     return dlock_lock_run(NULL, &(dlock_wait_opts){.lease_ms = 1000}, noop_fn, NULL, NULL))
CALL(u_run_lease,
     return dlock_lock_run(ok_lock, &(dlock_wait_opts){.lease_ms = -1}, noop_fn, NULL, NULL))
CALL(n_inspect_null, return dlock_lock_inspect(NULL, &info_out))
CALL(n_inspect_out, return dlock_lock_inspect(ok_lock, NULL))
CALL(s_scan_null, return dlock_client_scan(NULL, "*", scan_fn, NULL))
CALL(s_scan_fn, return dlock_client_scan(cli, "*", NULL, NULL))
CALL(s_scan_pattern, return dlock_client_scan(cli, "[unbalanced", scan_fn, NULL))

/* Wrong key types, every operation on every type. */
#define FENCED (&(dlock_wait_opts){.lease_ms = 1000, .token = &(uint64_t){0}})
#define TYPED(i)                                                                       \
    CALL(t_acq_##i, return dlock_lock_try(typed[i], 0, 1000))                          \
    CALL(t_wait_##i, return dlock_lock_try(typed[i], 100, 1000))                       \
    CALL(t_fenced_##i, return dlock_lock_acquire_opts(typed[i], FENCED))               \
    CALL(t_rel_##i, return dlock_lock_release(typed[i]))                               \
    CALL(t_force_##i, return dlock_lock_force_release(typed[i], &flag))                \
    CALL(t_locked_##i, return dlock_lock_is_locked(typed[i], &flag))                   \
    CALL(t_count_##i, return dlock_lock_hold_count(typed[i], &i64))                    \
    CALL(t_inspect_##i, int rc = dlock_lock_inspect(typed[i], &info_out); dlock_info_free(info_out); info_out = NULL; return rc)
TYPED(0) TYPED(1) TYPED(2) TYPED(3) TYPED(4)

#define R(w, f) {#f, w, f}
#define RT(i)                                                                          \
    R(DLOCK_EWRONGTYPE, t_acq_##i), R(DLOCK_EWRONGTYPE, t_wait_##i),                   \
    R(DLOCK_EWRONGTYPE, t_fenced_##i), R(DLOCK_EWRONGTYPE, t_rel_##i),                 \
    R(DLOCK_EWRONGTYPE, t_force_##i), R(DLOCK_EWRONGTYPE, t_inspect_##i)

    static const row rows[] = {
        R(DLOCK_EINVAL, c_url_null),
        R(DLOCK_EINVAL, c_url_mib),
        R(DLOCK_EINVAL, c_url_nonutf8),
        R(DLOCK_EINVAL, c_url_crlf),
        R(DLOCK_EINVAL, c_url_nul_pct),
        R(DLOCK_EINVAL, c_url_port_neg),
        R(DLOCK_EINVAL, c_url_port_huge),
        R(DLOCK_EINVAL, c_url_db_huge),
        R(DLOCK_EINVAL, c_url_two_at),
        R(DLOCK_EINVAL, c_url_unix_rel),
        R(DLOCK_EINVAL, c_url_unix_long),
        R(DLOCK_EINVAL, c_url_scheme),
        R(DLOCK_EINVAL, c_wd_neg),
        R(DLOCK_EINVAL, c_wd_min),
        R(DLOCK_EINVAL, c_wd_max),
        R(DLOCK_EINVAL, c_wd_small),
        R(DLOCK_EINVAL, c_cmd_neg),
        R(DLOCK_EINVAL, c_cmd_max),
        R(DLOCK_EINVAL, c_conn_neg),
        R(DLOCK_EINVAL, c_retry_neg),
        R(DLOCK_EINVAL, c_retry_max),
        R(DLOCK_EINVAL, c_retry_delay),
        R(DLOCK_EINVAL, c_pool_neg),
        R(DLOCK_EINVAL, c_pool_max),
        R(DLOCK_EINVAL, c_prio_neg),
        R(DLOCK_EINVAL, c_prio_max),
        R(DLOCK_EINVAL, c_name_crlf),
        R(DLOCK_EINVAL, c_name_mib),
        R(DLOCK_EINVAL, c_log_level),
        R(DLOCK_EINVAL, c_null_cfg),
        R(DLOCK_EINVAL, o_null_out),
        R(DLOCK_EINVAL, o_null_cfg),
        R(DLOCK_EINVAL, i_null_client),
        R(DLOCK_EINVAL, i_small_buf),
        R(DLOCK_EINVAL, i_null_buf),
        R(DLOCK_EINVAL, i_ping_null),
        R(DLOCK_EINVAL, k_cancel_null),
        R(DLOCK_EINVAL, g_null_client),
        R(DLOCK_EINVAL, g_null_name),
        R(DLOCK_EINVAL, g_empty_name),
        R(DLOCK_ENAMETOOLONG, g_mib_name),
        R(DLOCK_ENAMETOOLONG, g_max1_name),
        R(DLOCK_EINVAL, g_null_out),
        R(DLOCK_EINVAL, g_as_null),
        R(DLOCK_EINVAL, g_as_empty),
        R(DLOCK_ENAMETOOLONG, g_as_big),
        R(DLOCK_ENAMETOOLONG, g_as_mib),
        R(DLOCK_EINVAL, g_as_nocolon),
        R(DLOCK_EINVAL, a_null),
        R(DLOCK_EINVAL, a_lease_old_wd),
        R(DLOCK_EINVAL, a_lease_neg),
        R(DLOCK_EINVAL, a_lease_min),
        R(DLOCK_EINVAL, a_lease_huge),
        R(DLOCK_EINVAL, a_wait_neg),
        R(DLOCK_EINVAL, a_wait_min),
        R(DLOCK_EINVAL, a_reserved),
        R(DLOCK_EINVAL, a_opts_wait),
        R(DLOCK_EINVAL, a_opts_lease),
        R(DLOCK_EINVAL, r_null),
        R(DLOCK_ENOTOWNER, r_not_held),
        R(DLOCK_EINVAL, f_null),
        R(DLOCK_EINVAL, q_locked_null),
        R(DLOCK_EINVAL, q_locked_out),
        R(DLOCK_EINVAL, q_held_out),
        R(DLOCK_EINVAL, q_heldby_null),
        R(DLOCK_ENAMETOOLONG, q_heldby_big),
        R(DLOCK_EINVAL, q_count_out),
        R(DLOCK_EINVAL, q_ttl_out),
        R(DLOCK_EINVAL, u_run_fn),
        R(DLOCK_EINVAL, u_run_lock),
        R(DLOCK_EINVAL, u_run_lease),
        R(DLOCK_EINVAL, n_inspect_null),
        R(DLOCK_EINVAL, n_inspect_out),
        R(DLOCK_EINVAL, s_scan_null),
        R(DLOCK_EINVAL, s_scan_fn),
        R(DLOCK_OK, s_scan_pattern),
        RT(0),
        RT(1),
        RT(2),
        RT(3),
        /* A hash that is not a lock: held by "someone else" for acquire and
     * release, refused by force release and inspection, never touched. */
        /* A hash that is not a lock: one verdict everywhere, from the acquire too
     * (it used to wait as if the lock were held). */
        R(DLOCK_EWRONGTYPE, t_acq_4),
        R(DLOCK_EWRONGTYPE, t_wait_4),
        R(DLOCK_EWRONGTYPE, t_fenced_4),
        R(DLOCK_ENOTOWNER, t_rel_4),
        R(DLOCK_EWRONGTYPE, t_force_4),
        R(DLOCK_EWRONGTYPE, t_inspect_4),
        R(DLOCK_OK, t_locked_4),
        R(DLOCK_OK, t_count_4),
        /* is_locked and hold_count: a string, list, set or zset is not a lock; a
     * hash of other fields answers as Redis's TYPE and HGET do. */
        R(DLOCK_EWRONGTYPE, t_locked_0),
        R(DLOCK_EWRONGTYPE, t_locked_1),
        R(DLOCK_EWRONGTYPE, t_locked_2),
        R(DLOCK_EWRONGTYPE, t_locked_3),
        R(DLOCK_EWRONGTYPE, t_count_0),
        R(DLOCK_EWRONGTYPE, t_count_1),
        R(DLOCK_EWRONGTYPE, t_count_2),
        R(DLOCK_EWRONGTYPE, t_count_3),
};

/* Occurrences of w in s. */
static int count_of(const char *s, const char *w)
{
    int n = 0;
    for (const char *p = strstr(s, w); p; p = strstr(p + 1, w))
        n++;
    return n;
}

/* A message says what the user needs once, without the Lua internals that
 * Redis appends to an error inside a script ("script: <sha>, on
 * @user_script:<line>."). */
static int message_is_clean(const char *msg)
{
    return !strstr(msg, "user_script") && !strstr(msg, " script: ") &&
           count_of(msg, "not a ") <= 1;
}

static void test_table(void **state)
{
    (void)state;
    char *before = snapshot();
    int bad = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int got = rows[i].call();
        if (got != rows[i].want) {
            fprintf(stderr, "%s: got %s, want %s (%s)\n", rows[i].what, dlock_errname(got),
                    dlock_errname(rows[i].want), dlock_last_error());
            bad++;
        } else if (got != DLOCK_OK && dlock_last_error()[0] == '\0') {
            fprintf(stderr, "%s: %s without a message\n", rows[i].what, dlock_errname(got));
            bad++;
        } else if (got != DLOCK_OK && !message_is_clean(dlock_last_error())) {
            fprintf(stderr, "%s: message '%s'\n", rows[i].what, dlock_last_error());
            bad++;
        }
        char *after = snapshot();
        if (strcmp(before, after) != 0) {
            fprintf(stderr, "%s changed the server's data\n", rows[i].what);
            bad++;
        }
        free(after);
    }
    free(before);
    assert_int_equal(bad, 0);
}

/* One check of the wait options for every type: each refuses, naming the
 * field, what it has no use for (a lease, a token), and every type refuses a
 * reserved field, a bad wait, a negative lease; nothing reaches Redis. */
static void test_wait_opts_per_type(void **state)
{
    (void)state;
    dlock_semaphore *s;
    dlock_permit_semaphore *p;
    dlock_latch *l;
    dlock_election *e;
    dlock_multilock *ml;
    assert_int_equal(dlock_semaphore_get(cli, "bad:opts:sem", &s), DLOCK_OK);
    assert_int_equal(dlock_permit_semaphore_get(cli, "bad:opts:psem", &p), DLOCK_OK);
    assert_int_equal(dlock_latch_get(cli, "bad:opts:latch", &l), DLOCK_OK);
    assert_int_equal(dlock_election_get(cli, "bad:opts:elect", &e), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(&ok_lock, 1, &ml), DLOCK_OK);
    char *before = snapshot();
    uint64_t tok = 0, term = 0;
    char id[DLOCK_PERMIT_ID_BUFSIZE];
    const dlock_wait_opts lease = {.lease_ms = 1000}, token = {.token = &tok},
                          reserved = {.reserved = {0, 0, 3, 0}}, wait = {.wait_ms = -9},
                          neg = {.lease_ms = -1};
    struct {
        const char *what, *names;
        int rc;
    } got[] = {
        {"semaphore lease", "lease_ms", dlock_semaphore_acquire_opts(s, 1, &lease)},
        {"semaphore token", "token", dlock_semaphore_acquire_opts(s, 1, &token)},
        {"semaphore reserved", "reserved[2]", dlock_semaphore_acquire_opts(s, 1, &reserved)},
        {"semaphore wait", "wait_ms", dlock_semaphore_acquire_opts(s, 1, &wait)},
        {"permit token", "token", dlock_permit_semaphore_acquire_opts(p, &token, id, sizeof(id))},
        {"permit lease", "lease_ms", dlock_permit_semaphore_acquire_opts(p, &neg, id, sizeof(id))},
        {"permit reserved", "reserved[2]",
         dlock_permit_semaphore_acquire_opts(p, &reserved, id, sizeof(id))},
        {"latch lease", "lease_ms", dlock_latch_await_opts(l, &lease)},
        {"latch token", "token", dlock_latch_await_opts(l, &token)},
        {"latch wait", "wait_ms", dlock_latch_await_opts(l, &wait)},
        {"multi-lock token", "token", dlock_multilock_acquire_opts(ml, &token)},
        {"multi-lock lease", "lease_ms", dlock_multilock_acquire_opts(ml, &neg)},
        {"multi-lock reserved", "reserved[2]", dlock_multilock_acquire_opts(ml, &reserved)},
        {"campaign lease", "lease_ms", dlock_election_campaign(e, &lease)},
        {"campaign reserved", "reserved[2]", dlock_election_campaign(e, &reserved)},
        {"watch token", "token", dlock_election_await_change(e, 0, &token, &term, NULL, 0)},
        {"watch lease", "lease_ms", dlock_election_await_change(e, 0, &lease, &term, NULL, 0)},
        {"lock reserved", "reserved[2]", dlock_lock_acquire_opts(ok_lock, &reserved)},
        {"run lease", "lease_ms", dlock_lock_run(ok_lock, &neg, noop_fn, NULL, NULL)},
    };
    /* The messages were overwritten by the next call: ask each again. */
    for (size_t i = 0; i < sizeof(got) / sizeof(got[0]); i++)
        if (got[i].rc != DLOCK_EINVAL)
            fail_msg("%s: got %s, want DLOCK_EINVAL", got[i].what, dlock_errname(got[i].rc));
    assert_int_equal(dlock_semaphore_acquire_opts(s, 1, &lease), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lease_ms"));
    assert_non_null(strstr(dlock_last_error(), "semaphore"));
    assert_int_equal(dlock_latch_await_opts(l, &token), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "token"));
    assert_int_equal(dlock_election_campaign(e, &reserved), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "reserved[2]"));
    assert_int_equal(dlock_multilock_acquire_opts(ml, &token), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "multi-lock"));
    assert_int_equal(tok, 0);
    assert_int_equal(dlock_election_term(e), 0);
    char *after = snapshot();
    assert_string_equal(before, after);
    free(before);
    free(after);
    dlock_multilock_free(ml);
    dlock_election_free(e);
    dlock_latch_free(l);
    dlock_permit_semaphore_free(p);
    dlock_semaphore_free(s);
}

/* NULL-safe calls that return no code. */
static void test_null_safe(void **state)
{
    (void)state;
    dlock_config_free(NULL);
    dlock_client_close(NULL);
    dlock_lock_free(NULL);
    dlock_info_free(NULL);
    dlock_cancel_free(NULL);
    dlock_cancel_fire(NULL);
    dlock_cancel_reset(NULL);
    assert_int_equal(dlock_cancel_fired(NULL), 0);
    dlock_lock_set_lost_callback(NULL, NULL, NULL);
    assert_string_equal(dlock_lock_name(NULL), "");
    assert_string_equal(dlock_client_id(NULL), "");
    assert_string_equal(dlock_info_name(NULL), "");
    assert_int_equal(dlock_info_holders(NULL), 0);
    assert_null(dlock_info_owner(NULL, 0));
    assert_int_equal(dlock_info_ttl(NULL), -2);
    assert_int_equal(dlock_info_waiters(NULL), -1);
    assert_non_null(dlock_strerror(INT_MIN));
    assert_non_null(dlock_strerror(INT_MAX));
    assert_non_null(dlock_errname(INT_MIN));
    /* Out-of-range snapshot indices. */
    dlock_info *info = NULL;
    assert_int_equal(dlock_lock_inspect(ok_lock, &info), DLOCK_OK);
    assert_null(dlock_info_owner(info, 0));
    assert_null(dlock_info_owner(info, SIZE_MAX));
    assert_int_equal(dlock_info_hold_count(info, SIZE_MAX), 0);
    dlock_info_free(info);
}

/* The scripts' KEYS/ARGV counts come from their header comments at build time
 * (cmake/embed_scripts.cmake); a request that disagrees is refused before
 * anything is sent, so C and Lua cannot drift apart unnoticed. */
static void test_script_counts(void **state)
{
    (void)state;
    const dlock__script *s = &dlock__scripts[DLOCK__SCRIPT_LOCK_ACQUIRE];
    assert_string_equal(s->name, "lock/acquire");
    assert_int_equal(s->keys_min, 2);   /* KEYS[3..5] are marked (optional) */
    assert_int_equal(s->keys_max, 5);   /* dlock's own: marker, quarantine, reservation */
    assert_int_equal(s->args_min, 5);
    assert_int_equal(s->args_max, 7);   /* ARGV[6]: the lock-delay, ARGV[7]: no reentry; optional */
    s = &dlock__scripts[DLOCK__SCRIPT_LOCK_RENEW];   /* KEYS[i], ARGV[1], ARGV[i+1] */
    assert_int_equal(s->keys_min, 0);
    assert_int_equal(s->keys_max, -1);
    assert_int_equal(s->args_min, 1);
    assert_int_equal(s->args_max, -1);

    freeReplyObject(th_cmd(&srv, "CONFIG RESETSTAT"));
    const char *argv[] = {"bad:free", "30000", "owner:1"};
    dlock__req req = {.script = DLOCK__SCRIPT_LOCK_ACQUIRE, .nkeys = 1, .argc = 3, .argv = argv};
    redisReply *r = NULL;
    assert_int_equal(dlock__call(cli, &req, &r), DLOCK_EINVAL);
    assert_null(r);
    assert_non_null(strstr(dlock_last_error(), "lock/acquire"));
    redisReply *st = th_cmd(&srv, "INFO commandstats");
    assert_non_null(st);
    assert_null(strstr(st->str, "cmdstat_evalsha"));   /* nothing was sent */
    freeReplyObject(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_script_counts),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_null_safe),
        cmocka_unit_test(test_wait_opts_per_type),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
