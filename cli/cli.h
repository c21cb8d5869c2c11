/* The dlock command: shared declarations. */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <dlock/dlock.h>

/* Exit codes (sysexits.h values where one fits). */
enum {
    EXIT_OKAY = 0,
    EXIT_USAGE = 64,        /* EX_USAGE: bad arguments */
    EXIT_DATAERR = 65,      /* EX_DATAERR: the key is not a lock */
    EXIT_UNAVAILABLE = 69,  /* EX_UNAVAILABLE: Redis unreachable */
    EXIT_SOFTWARE = 70,     /* EX_SOFTWARE: any other failure */
    EXIT_CANTRUN = 127,     /* the command could not be started */
    EXIT_NOTACQUIRED = 75,  /* EX_TEMPFAIL: lock not acquired in time */
    EXIT_LOST = 76          /* the lock was lost while the command ran */
};

typedef struct cli_opts {
    const char *url;         /* --url, else $DLOCK_URL, else the default */
    int64_t watchdog_ms;     /* --watchdog, 0 = library default */
    int64_t timeout_ms;      /* --timeout (command timeout), 0 = default */
    int quiet;               /* -q */
    const char *prog;        /* argv[0] basename, for messages */
} cli_opts;

/* Parses "500ms", "10s", "2m", "1h", "1.5" (seconds). Returns 0 and *ms, or -1. */
int cli_parse_duration(const char *s, int64_t *ms);
/* "1.5 s", "250 ms", "3 m 20 s" into buf. */
const char *cli_fmt_duration(int64_t ms, char *buf, size_t size);
/* Writes s as a JSON string literal (quotes included); invalid UTF-8 bytes and
 * control characters are escaped as \u00XX. */
void cli_json_string(FILE *f, const char *s);

/* Opens a client per the options; on failure prints one line and returns the
 * exit code (69 when Redis is unreachable), else 0. */
int cli_open(const cli_opts *o, dlock_client **out, dlock_lost_fn lost, void *lost_ud);
/* Maps a library status to an exit code and prints its message unless quiet. */
int cli_fail(const cli_opts *o, int rc, const char *what);
void cli_err(const cli_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_usage_error(const cli_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Global options, accepted before and after the command name. Returns 1 when
 * argv[*i] was one (its value consumed), 0 when not, -1 on a usage error. */
int cli_global_opt(cli_opts *o, int argc, char **argv, int *i);

int cmd_run(cli_opts *o, int argc, char **argv);
int cmd_status(cli_opts *o, int argc, char **argv);
int cmd_list(cli_opts *o, int argc, char **argv);
int cmd_watch(cli_opts *o, int argc, char **argv);
int cmd_unlock(cli_opts *o, int argc, char **argv);

#endif
