/* dlock run --rate N/DUR NAME -- CMD: at most N starts of CMD per DUR across
 * every machine (Redisson's RRateLimiter, OVERALL). The run takes one permit
 * of the rate limiter NAME, waiting as -w says, and then becomes CMD: a
 * permit is not held (it comes back DUR after it was taken, whatever CMD
 * does), so there is nothing to guard, renew or release. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

int run_rate_parse(const cli_opts *o, const char *val, run_args *ra)
{
    const char *slash = strchr(val, '/');
    char num[32], e[80];
    int64_t n = 0, ms = 0;
    int ok = slash && (size_t)(slash - val) < sizeof(num);
    if (ok) {
        memcpy(num, val, (size_t)(slash - val));
        num[slash - val] = '\0';
        char *end;
        errno = 0;
        long long v = strtoll(num, &end, 10);
        ok = !errno && end != num && !*end && v >= 1 && v <= 2147483647LL;
        n = v;
    }
    if (ok)
        ok = cli_parse_duration(slash + 1, &ms) == 0 && ms >= 1;
    if (!ok) {
        cli_usage_error(o, "run", "--rate '%s': N/DUR, at most N starts (1..2147483647) per "
                                  "duration DUR (e.g. 10/1m, 1/500ms)",
                        cli_esc(val, e, sizeof(e)));
        return -1;
    }
    ra->rate_n = n;
    ra->rate_ms = ms;
    return 0;
}

int run_rate_check_args(const cli_opts *o, const run_args *ra)
{
    if (!ra->rate_n)
        return 0;
    if (ra->semaphore || ra->stripes || ra->nnames != 1 || ra->kinds[0] != RUN_LOCK) {
        cli_usage_error(o, "run", "--rate takes one rate limiter NAME (no --semaphore, "
                                  "--stripes, --fair, --read, --write, --spin, or other names)");
        return -1;
    }
    if (ra->lease_ms != DLOCK_WATCHDOG || ra->max_hold_ms || ra->lock_delay_given) {
        cli_usage_error(o, "run", "--rate holds nothing while CMD runs: no --lease, --max-hold "
                                  "or --lock-delay");
        return -1;
    }
    return 0;
}

/* The limiter has N per DUR, set now or before; another rate is an error
 * (runs that disagree cannot both be kept). Returns 0 or an exit code. */
static int open_limiter(const cli_opts *o, dlock_client *c, const run_args *ra,
                        dlock_rate_limiter **r)
{
    const char *name = ra->names[0];
    char nm[200];
    cli_esc(name, nm, sizeof(nm));
    dlock_rate_config want = {DLOCK_RATE_OVERALL, ra->rate_n, ra->rate_ms, 0}, got;
    int rc = dlock_rate_limiter_get(c, name, r);
    if (rc == DLOCK_OK)
        rc = dlock_rate_limiter_try_set_rate(*r, &want, NULL);
    if (rc == DLOCK_OK)
        rc = dlock_rate_limiter_config(*r, &got);
    if (rc != DLOCK_OK)
        return cli_fail_key(o, c, rc, "rate limiter", name, DLOCK_KIND_RATE, "a rate limiter");
    if (got.rate != want.rate || got.interval_ms != want.interval_ms ||
        got.type != DLOCK_RATE_OVERALL) {
        cli_err(o, "rate limiter '%s' exists with %lld per %lld ms%s, not --rate %lld per %lld "
                   "ms; dlock leaves it as it is (to change it, delete it: redis-cli DEL '%s')",
                nm, (long long)got.rate, (long long)got.interval_ms,
                got.type == DLOCK_RATE_PER_CLIENT ? " per client" : "", (long long)want.rate,
                (long long)want.interval_ms, nm);
        return EXIT_DATAERR;
    }
    return 0;
}

int run_rate(cli_opts *o, const run_args *ra)
{
    dlock_client *c;
    o->label = "run-waiting";
    if (ra->wait_ms != DLOCK_WAIT_FOREVER)
        o->connect_bound_ms = ra->wait_ms > 0 ? ra->wait_ms : 1;
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    dlock_rate_limiter *r = NULL;
    code = open_limiter(o, c, ra, &r);
    char nm[200];
    cli_esc(ra->names[0], nm, sizeof(nm));
    if (!code && ra->verbose) {
        int64_t left = 0;
        if (dlock_rate_limiter_available(r, &left) == DLOCK_OK)
            cli_err(o, "rate limiter '%s': %lld of %lld starts left in this %lld ms window", nm,
                    (long long)left, (long long)ra->rate_n, (long long)ra->rate_ms);
    }
    if (!code) {
        int rc = dlock_rate_limiter_try_acquire(r, 1, ra->wait_ms);
        if (rc == DLOCK_ETIMEDOUT) {
            cli_err(o, "not started: %s", dlock_last_error());
            code = ra->conflict_code;
        } else if (rc != DLOCK_OK) {
            code = cli_fail(o, rc, "rate limiter");
        }
    }
    dlock_rate_limiter_free(r);
    dlock_client_close(c);
    if (code)
        return code;
    /* CMD in this process's place, without Redis credentials (unless kept)
     * and with DLOCK_NAME. */
    char *extra[8], *url_var = NULL;
    int ne = ra->keep_env_secrets ? 0 : guard_env_scrub(extra, &url_var);
    for (int k = 0; k < ne; k++) {
        char *eq = strchr(extra[k], '=');
        if (!eq) {
            unsetenv(extra[k]);
        } else {
            *eq = '\0';
            setenv(extra[k], eq + 1, 1);
            *eq = '=';
        }
    }
    setenv("DLOCK_NAME", ra->names[0], 1);
    execvp(ra->cmd[0], ra->cmd);
    int err = errno;
    cli_err(o, "cannot run '%s': %s", ra->cmd[0], strerror(err));
    free(url_var);
    return err == ENOENT ? 127 : 126;
}
