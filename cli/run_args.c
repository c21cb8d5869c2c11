/* dlock run and dlock elect: their arguments (run.h: run_args), with the
 * lock-delay a run holds by default. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

#define DEFAULT_KILL_AFTER_MS 10000
/* The lock-delay covers the kill sequence (--kill-after) and this much more:
 * a lost hold is not taken by anyone while its tree may still run. */
#define DELAY_MARGIN_MS 2000
#define DELAY_MAX_MS 86400000

static const cli_dur_rule wait_rule = {1, "no limit", 0, 0, NULL};

static int parse_wait(const cli_opts *o, const char *opt, const char *val, int64_t *ms)
{
    if (cli_duration_opt(o, "run", opt, val, &wait_rule, ms) != 0)
        return -1;
    if (*ms == CLI_DUR_INF)
        *ms = DLOCK_WAIT_FOREVER;
    return 0;
}

/* --lost-exit-code N (0..255) or "command" (CMD's own status). */
static int parse_lost_code(const cli_opts *o, const char *val, int *code)
{
    if (strcmp(val, "command") == 0) {
        *code = -1;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || *end || end == val || v < 0 || v > 255) {
        cli_usage_error(o, "run", "--lost-exit-code '%s': a number in 0..255, or command (the "
                                  "command's own status)", val);
        return -1;
    }
    *code = (int)v;
    return 0;
}

/* A NAME, of the kind a --fair / --read / --write / --spin just before it says. */
static int add_name(const cli_opts *o, run_args *ra, const char *name)
{
    if (ra->nnames == RUN_MAX_NAMES) {
        cli_usage_error(o, "run", "at most %d lock names", RUN_MAX_NAMES);
        return -1;
    }
    run_kind k = !ra->pending                          ? RUN_LOCK
                 : strcmp(ra->pending, "--fair") == 0  ? RUN_FAIR
                 : strcmp(ra->pending, "--read") == 0  ? RUN_READ
                 : strcmp(ra->pending, "--spin") == 0  ? RUN_SPIN
                                                       : RUN_WRITE;
    ra->pending = NULL;
    ra->names[ra->nnames] = name;
    ra->kinds[ra->nnames++] = k;
    return 0;
}

/* A name given twice is one lock taken twice: said here, in the options'
 * words (the multi-lock would refuse it in its own). */
static int check_names(const cli_opts *o, const run_args *ra)
{
    for (int i = 0; i < ra->nnames; i++) {
        for (int j = i + 1; j < ra->nnames; j++) {
            if (strcmp(ra->names[i], ra->names[j]) != 0)
                continue;
            char nm[200];
            cli_esc(ra->names[i], nm, sizeof(nm));
            if (ra->kinds[i] != ra->kinds[j] && (ra->kinds[i] == RUN_READ || ra->kinds[i] ==
                                                 RUN_WRITE) &&
                (ra->kinds[j] == RUN_READ || ra->kinds[j] == RUN_WRITE))
                cli_usage_error(o, "run", "'%s' is given with --read and with --write: they are "
                                          "two sides of one read-write lock (--write alone also "
                                          "lets the command read)", nm);
            else
                cli_usage_error(o, "run", "'%s' is named twice: each lock once", nm);
            return -1;
        }
    }
    return 0;
}

int run_parse_args(cli_opts *o, int argc, char **argv, run_args *ra)
{
    memset(ra, 0, sizeof(*ra));
    ra->wait_ms = DLOCK_WAIT_FOREVER;
    ra->lease_ms = DLOCK_WATCHDOG;
    ra->conflict_code = EXIT_NOTACQUIRED;
    ra->on_lost_term = 1;
    ra->lost_code = EXIT_LOST;
    ra->kill_after_ms = DEFAULT_KILL_AFTER_MS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if (strcmp(a, "--") == 0) {
            if (!ra->nnames && !ra->semaphore) {   /* dlock run -- NAME -- CMD: a NAME that
                                                    * begins with '-' */
                if (i + 1 >= argc) {
                    cli_usage_error(o, "run", "missing lock NAME");
                    return -1;
                }
                if (add_name(o, ra, argv[++i]) < 0)
                    return -1;
                if (i + 1 >= argc || strcmp(argv[i + 1], "--") != 0) {
                    cli_usage_error(o, "run", "after '-- NAME' comes '-- CMD'");
                    return -1;
                }
                i++;
            }
            ra->cmd = argv + i + 1;
            if (!ra->cmd[0]) {
                cli_usage_error(o, "run", "no command after --");
                return -1;
            }
            break;
        }
        if (strcmp(a, "-n") == 0 || strcmp(a, "--nonblock") == 0) {
            ra->wait_ms = 0;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            ra->verbose = 1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--wait", "-w", &val)) != 0 ||
                   (r = cli_opt_value(o, "run", argc, argv, &i, "--timeout", NULL, &val)) != 0) {
            if (r < 0 || parse_wait(o, a, val, &ra->wait_ms) < 0)
                return -1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--lease", NULL, &val)) != 0) {
            if (r < 0)
                return -1;
            static const cli_dur_rule lease = {0, "renewed by the watchdog, the default", 0, 0,
                                               NULL};
            if (cli_duration_opt(o, "run", "--lease", val, &lease, &ra->lease_ms) != 0)
                return -1;
            if (ra->lease_ms == CLI_DUR_INF)
                ra->lease_ms = DLOCK_WATCHDOG;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--max-hold", NULL, &val)) != 0) {
            if (r < 0)
                return -1;
            static const cli_dur_rule max_hold = {0, "no limit, the default", 0, 0, NULL};
            if (cli_duration_opt(o, "run", "--max-hold", val, &max_hold, &ra->max_hold_ms) != 0)
                return -1;
            if (ra->max_hold_ms == CLI_DUR_INF)
                ra->max_hold_ms = 0;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--lock-delay", NULL, &val)) !=
                   0) {
            if (r < 0)
                return -1;
            static const cli_dur_rule delay = {1, NULL, 0, 86400000, "0 to 1d"};
            if (cli_duration_opt(o, "run", "--lock-delay", val, &delay, &ra->lock_delay_ms) != 0)
                return -1;
            ra->lock_delay_given = 1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--conflict-exit-code", "-E",
                                      &val)) != 0) {
            if (r < 0)
                return -1;
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (errno || *end || end == val || v < 0 || v > 255) {
                cli_usage_error(o, "run", "--conflict-exit-code '%s' is not a number in 0..255",
                                val);
                return -1;
            }
            ra->conflict_code = (int)v;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--lost-exit-code", NULL,
                                      &val)) != 0) {
            if (r < 0 || parse_lost_code(o, val, &ra->lost_code) < 0)
                return -1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--kill-after", NULL, &val)) !=
                   0) {
            if (r < 0)
                return -1;
            static const cli_dur_rule grace = {1, NULL, 0, 0, NULL};
            if (cli_duration_opt(o, "run", "--kill-after", val, &grace, &ra->kill_after_ms) != 0)
                return -1;
        } else if (strcmp(a, "--kill-orphans") == 0) {
            ra->kill_orphans = 1;
        } else if (strcmp(a, "--keep-env-secrets") == 0) {
            ra->keep_env_secrets = 1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--on-lost", NULL, &val)) != 0) {
            if (r < 0)
                return -1;
            if (strcmp(val, "term") == 0 || strcmp(val, "ignore") == 0) {
                ra->on_lost_term = val[0] == 't';
            } else {
                cli_usage_error(o, "run", "--on-lost '%s': use term or ignore", val);
                return -1;
            }
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--on-revoke", NULL, &val)) !=
                   0) {
            if (r < 0)
                return -1;
            if (strcmp(val, "term") == 0) {
                ra->on_revoke = RUN_REVOKE_TERM;
            } else if (strcmp(val, "ignore") == 0) {
                ra->on_revoke = RUN_REVOKE_IGNORE;
            } else if (val[0]) {
                ra->on_revoke = RUN_REVOKE_CMD;
                ra->on_revoke_cmd = val;
            } else {
                cli_usage_error(o, "run", "--on-revoke '': use term, ignore or a command");
                return -1;
            }
        } else if (strcmp(a, "--fair") == 0 || strcmp(a, "--read") == 0 ||
                   strcmp(a, "--write") == 0 || strcmp(a, "--spin") == 0) {
            /* The kind of the next NAME. */
            if (ra->pending) {
                cli_usage_error(o, "run", "%s after %s: one kind per NAME", a, ra->pending);
                return -1;
            }
            ra->pending = a;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--semaphore", NULL, &val)) !=
                   0) {
            if (r < 0)
                return -1;
            if (ra->semaphore) {
                cli_usage_error(o, "run", "one --semaphore per run");
                return -1;
            }
            ra->semaphore = val;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--permits", NULL, &val)) != 0) {
            if (r < 0 || run_sem_parse_permits(o, val, &ra->permits) < 0)
                return -1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--rate", NULL, &val)) != 0) {
            if (r < 0 || run_rate_parse(o, val, ra) < 0)
                return -1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--stripes", NULL, &val)) != 0) {
            if (r < 0 || run_stripes_parse(o, val, &ra->stripes) < 0)
                return -1;
        } else if ((r = cli_opt_value(o, "run", argc, argv, &i, "--name", NULL, &val)) != 0) {
            if (r < 0 || add_name(o, ra, val) < 0)
                return -1;
        } else if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return -1;
        } else if (a[0] == '-' && a[1] != '\0' && strspn(a + 1, "0123456789") != strlen(a + 1)) {
            /* "-3" is no option: a NAME, or a --stripes KEY */
            cli_usage_error(o, "run", "unknown option '%s'", a);
            return -1;
        } else if (add_name(o, ra, a) < 0) {
            return -1;
        }
    }
    if (ra->pending) {
        cli_usage_error(o, "run", "%s needs a NAME after it", ra->pending);
        return -1;
    }
    if (run_sem_check_args(o, ra) < 0 || run_stripes_check_args(o, ra) < 0 ||
        run_rate_check_args(o, ra) < 0)
        return -1;
    if (!ra->nnames) {
        cli_usage_error(o, "run", "missing lock NAME");
        return -1;
    }
    for (int i = 0; i < ra->nnames && ra->nnames > 1 && !ra->stripes; i++)
        if (ra->kinds[i] == RUN_SPIN) {
            /* A multi-lock's waits sleep on its locks' channels. */
            cli_usage_error(o, "run", "--spin takes one NAME: several names are one multi-lock, "
                                      "whose waiters subscribe");
            return -1;
        }
    if (!ra->cmd) {
        cli_usage_error(o, "run", "missing -- CMD");
        return -1;
    }
    if (check_names(o, ra) < 0)
        return -1;
    if (ra->max_hold_ms && ra->lease_ms != DLOCK_WATCHDOG) {
        cli_usage_error(o, "run", "--max-hold limits a hold renewed by the watchdog; with "
                                  "--lease the lease is the limit: give one of them");
        return -1;
    }
    ra->watchdog_ms = o->watchdog_ms ? o->watchdog_ms : 30000;
    /* The delay is the holder's (every dlock acquirer honours it): by default
     * long enough that a lost hold's tree is gone (TERM, KILL after
     * --kill-after) before anybody else may take the lock; the release at
     * the end clears it, so a lock is free at once after a normal run, and
     * as soon as the tree is gone after a loss. --lock-delay 0: none. */
    if (!ra->lock_delay_given || ra->lock_delay_ms > 0) {
        int64_t cover = ra->kill_after_ms + DELAY_MARGIN_MS;
        if (cover > DELAY_MAX_MS)
            cover = DELAY_MAX_MS;
        if (ra->lock_delay_ms < cover)
            ra->lock_delay_ms = cover;
    }
    /* Messages name the lock, or "a + b + c" for a multi-lock. */
    ra->name = ra->names[0];
    if (ra->nnames > 1) {
        size_t off = 0;
        for (int k = 0; k < ra->nnames && off < sizeof(ra->display); k++)
            off += (size_t)snprintf(ra->display + off, sizeof(ra->display) - off, "%s%s",
                                    k ? " + " : "", ra->names[k]);
        ra->name = ra->display;
    }
    return 0;
}
