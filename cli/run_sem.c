/* dlock run --semaphore NAME --permits N: the arguments, the semaphore's
 * total, and what a waiter is told. The rest of the run (waits, the guard,
 * losses, the exit code) is run.c's, as for a lock. */
#include <string.h>

#include "run.h"

/* --permits N: a whole number in 1..DLOCK_COUNT_MAX. */
int run_sem_parse_permits(const cli_opts *o, const char *val, int64_t *n)
{
    if (cli_parse_count(val, n) == 0)
        return 0;
    char e[80];
    cli_usage_error(o, "run", "--permits '%s' is not a whole number of permits in 1..%lld",
                    cli_esc(val, e, sizeof(e)), (long long)DLOCK_COUNT_MAX);
    return -1;
}

/* A --semaphore run takes one permit of NAME, and nothing else: no lock
 * names, no --lease (the permit is the watchdog's, so that a runner that dies
 * gives it back within the watchdog timeout). */
int run_sem_check_args(const cli_opts *o, run_args *ra)
{
    ra->noun = ra->semaphore ? "permit of semaphore" : "lock";
    if (!ra->semaphore) {
        if (ra->permits) {
            cli_usage_error(o, "run", "--permits goes with --semaphore NAME");
            return -1;
        }
        return 0;
    }
    if (ra->nnames || ra->pending) {
        cli_usage_error(o, "run", "--semaphore takes no lock NAME (nor --fair, --read, --write) "
                                  "beside it");
        return -1;
    }
    if (!ra->permits) {
        cli_usage_error(o, "run", "--semaphore NAME needs --permits N (how many may run at once)");
        return -1;
    }
    if (ra->lease_ms != DLOCK_WATCHDOG) {
        cli_usage_error(o, "run", "--lease is for locks: a semaphore's permit is held with the "
                                  "watchdog (--watchdog DUR sets its timeout)");
        return -1;
    }
    ra->names[0] = ra->semaphore;
    ra->kinds[0] = RUN_LOCK;
    ra->nnames = 1;
    return 0;
}

/* The semaphore's total is N: set to N when it does not exist (Redisson's
 * trySetPermits), else it must already be N (available + held, read in one
 * script). A different total is an error and the semaphore is left as it is:
 * two runs that disagree on N cannot both be right, and resizing it under
 * running commands is for whoever owns it to do. Returns 0 or an exit code. */
int run_sem_open(const cli_opts *o, dlock_client *c, const run_args *ra,
                 dlock_permit_semaphore **out)
{
    char nm[200];
    cli_esc(ra->semaphore, nm, sizeof(nm));
    int set = 0;
    int64_t avail = 0, held = 0;
    int rc = dlock_permit_semaphore_get(c, ra->semaphore, out);
    if (rc == DLOCK_OK && ra->lock_delay_ms)
        rc = dlock_permit_semaphore_set_lock_delay(*out, ra->lock_delay_ms);
    if (rc == DLOCK_OK)
        rc = dlock_permit_semaphore_try_set_permits(*out, ra->permits, &set);
    if (rc == DLOCK_OK && !set)
        rc = dlock_permit_semaphore_available(*out, &avail, &held);
    if (rc != DLOCK_OK)
        return cli_fail_key(o, c, rc, "semaphore", ra->semaphore, DLOCK_KIND_PERMITS,
                            "a permit semaphore");
    if (!set && avail + held != ra->permits) {
        /* Its leases key: "{name}:timeout", or "name:timeout" for a name with a '{'. */
        int tagged = strchr(ra->semaphore, '{') != NULL;
        cli_err(o, "semaphore '%s' exists with %lld permits in all (%lld free, %lld held), not "
                   "--permits %lld; dlock leaves it as it is (to change the total, delete it "
                   "while no run holds a permit: redis-cli DEL '%s' '%s%s%s:timeout')",
                nm, (long long)(avail + held), (long long)avail, (long long)held,
                (long long)ra->permits, nm, tagged ? "" : "{", nm, tagged ? "" : "}");
        return EXIT_DATAERR;
    }
    return 0;
}

void run_sem_describe(dlock_permit_semaphore *ps, int64_t permits, int lock_delay, char *buf,
                      size_t size)
{
    int64_t avail = 0, held = 0;
    if (dlock_permit_semaphore_available(ps, &avail, &held) != DLOCK_OK)
        snprintf(buf, size, "out of permits (%lld in all)", (long long)permits);
    else if (avail > 0 && lock_delay)
        snprintf(buf, size, "%lld of %lld permits free, but in a lock-delay: a holder lost its "
                            "permit without releasing it (or others took them first)",
                 (long long)avail, (long long)permits);
    else if (avail > 0)
        snprintf(buf, size, "%lld of %lld permits free just now (taken by others first)",
                 (long long)avail, (long long)permits);
    else
        snprintf(buf, size, "out of permits (%lld held, %lld in all)", (long long)held,
                 (long long)permits);
}
