/* dlock run --stripes N NAME KEY: the run's lock is the stripe of KEY among
 * N segments of NAME (dlock_stripe_name: NAME:segment:<KEY % N> for an
 * integer KEY, <crc32(KEY) % N> otherwise), of the kind --fair, --read or
 * --write before NAME says. The rest of the run is run.c's, on that name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

int run_stripes_parse(const cli_opts *o, const char *val, int *n)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || val[0] == '+' || val[0] == ' ' || v < 1 ||
        v > DLOCK_STRIPES_MAX) {
        char e[80];
        cli_usage_error(o, "run", "--stripes '%s': give a whole number of stripes, 1 to %d",
                        cli_esc(val, e, sizeof(e)), DLOCK_STRIPES_MAX);
        return -1;
    }
    *n = (int)v;
    return 0;
}

int run_stripes_check_args(const cli_opts *o, run_args *ra)
{
    if (!ra->stripes)
        return 0;
    if (ra->semaphore) {
        cli_usage_error(o, "run", "--stripes splits a lock, not a --semaphore");
        return -1;
    }
    if (ra->nnames != 2) {
        cli_usage_error(o, "run", "--stripes N takes a lock NAME and a KEY: %s",
                        ra->nnames < 2 ? "one is missing" : "one of each");
        return -1;
    }
    if (ra->kinds[1] != RUN_LOCK) {
        cli_usage_error(o, "run", "--fair, --read, --write and --spin go before NAME, not KEY");
        return -1;
    }
    int rc = dlock_stripe_name(ra->names[0], ra->names[1], ra->stripes, ra->stripe_name,
                               sizeof(ra->stripe_name));
    if (rc != DLOCK_OK) {
        cli_usage_error(o, "run", "%s", dlock_last_error());
        return -1;
    }
    ra->names[0] = ra->stripe_name;
    ra->nnames = 1;
    return 0;
}
