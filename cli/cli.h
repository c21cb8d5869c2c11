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
    EXIT_NOINPUT = 66,      /* EX_NOINPUT: --password-file cannot be read */
    EXIT_UNAVAILABLE = 69,  /* EX_UNAVAILABLE: Redis unreachable */
    EXIT_SOFTWARE = 70,     /* EX_SOFTWARE: any other failure */
    EXIT_OSERR = 71,        /* EX_OSERR: the exporter cannot listen on its address */
    EXIT_NOTACQUIRED = 75,  /* EX_TEMPFAIL: lock not acquired in time */
    EXIT_LOST = 76,         /* the lock was lost while the command ran */
    EXIT_NOPERM = 77,       /* EX_NOPERM: password or ACL refused */
    EXIT_CONFIG = 78,       /* EX_CONFIG: $DLOCK_URL unusable, database out of range */
    EXIT_FENCED = 79,       /* a fenced write refused: a newer token has written */
    EXIT_TLS = 80,          /* TLS failed: certificate, name, handshake, TLS files */
    EXIT_CANTEXEC = 126,    /* the command could not be run */
    EXIT_CANTRUN = 127      /* the command was not found */
};

/* The connect timeout when --connect-timeout is not given (the library's). */
#define CLI_CONNECT_TIMEOUT_MS 10000
/* The least a -w wait leaves the connect (-w 0 still needs one). */
#define CLI_CONNECT_FLOOR_MS 1000

/* A duration of "inf" or "forever". */
#define CLI_DUR_INF INT64_MAX

typedef struct cli_opts {
    const char *url;          /* --url, else $DLOCK_URL, else the default */
    char *url_copy;           /* --url's value before its password was masked (owned) */
    int url_from_env;         /* the URL came from $DLOCK_URL */
    const char *password_file;/* --password-file */
    const char *password_command; /* --password-command: run at every connect */
    const char *maps[64];     /* --map FROM=TO, as given */
    int nmaps;
    int64_t watchdog_ms;      /* --watchdog, 0 = library default */
    int64_t command_timeout_ms; /* --command-timeout, 0 = default */
    int quarantine_mode;      /* --failover-quarantine: dlock_quarantine (0: off, the default) */
    int64_t quarantine_ms;    /* its duration (on) */
    int64_t connect_timeout_ms; /* --connect-timeout, 0 = default (CLI_CONNECT_TIMEOUT_MS) */
    int64_t connect_bound_ms;   /* a command's wait (-w) that also bounds the connect, 0: none */
    int retry_attempts;       /* -1 = library default (watch sets 0) */
    int quiet;                /* -q */
    int replica_ack;          /* replicas WAIT is asked for (doctor --replicas), 0: off */
    size_t inspect_max;       /* holders read per object (exporter --max-holders), 0: all */
    const char *prefix;       /* --prefix, else $DLOCK_PREFIX: the names' prefix, or NULL */
    const char *label;        /* the client's connection label ("status", ...) */
    char *args;               /* this process's argument strings, one area (ps shows */
    size_t args_len;          /* it): run's guard writes its own name over it */
} cli_opts;

/* ------------------------------------------------------------- util.c */

/* Parses a duration: "500ms", "10s", "1m30s", "2h30m", "1d", a bare number of
 * seconds ("1.5"), or "inf"/"forever" (*ms = CLI_DUR_INF). Units go from large
 * to small. At most a year. Returns 0 and *ms, -1 when it is not a duration,
 * -2 when it is longer than a year. */
int cli_parse_duration(const char *s, int64_t *ms);
/* A count of permits or a latch's count: a whole decimal number in
 * 1..DLOCK_COUNT_MAX, nothing else (no sign, no blanks). Returns 0 and *n, or -1. */
int cli_parse_count(const char *s, int64_t *n);
/* "1.5 s", "250 ms", "3 m 20 s", "forever" into buf. */
const char *cli_fmt_duration(int64_t ms, char *buf, size_t size);
/* Monotonic clock, ms. */
int64_t mono_ms(void);
/* 1 when s is valid UTF-8. */
int cli_utf8_valid(const char *s);
/* s with control characters, terminal escapes, bidi overrides, invalid UTF-8
 * and backslashes written as \n, \t, \r, \xHH, \\: safe to print. Malloc'd
 * (NULL when out of memory). */
char *cli_escape(const char *s);
/* 1 when s holds what cli_escape writes as \xHH or \t, \r: invalid UTF-8,
 * control characters (C0 but newline, DEL, C1: ESC and CSI included),
 * bidirectional overrides. */
int cli_has_unsafe(const char *s);
/* The same into buf, cut with "..." when longer; for messages. */
const char *cli_esc(const char *s, char *buf, size_t size);
/* Cuts s (UTF-8, one column a code point) to fit a line of `cols` columns
 * without touching the last one (a terminal would wrap): "..." ends what was
 * cut. cols < 4: left as it is. */
void cli_fit(char *s, size_t cols);
/* Writes s as a JSON string literal (quotes included); invalid UTF-8 bytes
 * become U+FFFD. */
void cli_json_string(FILE *f, const char *s);
/* Writes "key":"s", and "key_base64":"..." (the exact bytes) when s is not
 * valid UTF-8, so that any byte string round-trips. */
void cli_json_field(FILE *f, const char *key, const char *s);

/* ------------------------------------------------------------- main.c */

/* Opens a client per the options; on failure prints one line and returns the
 * exit code (69 unreachable, 77 refused credentials, 78 bad $DLOCK_URL or
 * database...), else 0. */
int cli_open(const cli_opts *o, dlock_client **out, dlock_lost_cause_fn lost, void *lost_ud);
/* The exit code of a library status (with the detail text it came with). */
int cli_exit_code(int rc, const char *detail);
/* Maps a library status to an exit code and prints its message unless quiet. */
int cli_fail(const cli_opts *o, int rc, const char *what);
void cli_err(const cli_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_usage_error(const cli_opts *o, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A duration option's value, checked: what it may be, and the message of a
 * usage error when it is not. */
typedef struct cli_dur_rule {
    int zero_ok;          /* 0 is a value (try once, no grace...) */
    const char *inf;      /* what inf means here ("no limit"), NULL: refused */
    int64_t min_ms, max_ms;   /* 0: no bound but a year */
    const char *range;    /* the bounds in words, "30ms to 1d", for the message */
} cli_dur_rule;
/* Parses val per the rule into *ms (CLI_DUR_INF for inf). Returns 0, or -1
 * after a usage error naming opt for cmd (NULL: a global option). */
int cli_duration_opt(const cli_opts *o, const char *cmd, const char *opt, const char *val,
                     const cli_dur_rule *rule, int64_t *ms);

/* url without the password of its userinfo ("redis://u:pw@h" gives
 * "redis://u@h"), malloc'd; NULL when it has none (or out of memory). */
char *cli_url_without_password(const char *url);

/* The pattern of list, watch, check and exporter without one: the
 * configured prefix (--prefix, $DLOCK_PREFIX) and '*', its glob characters
 * escaped; NULL without a prefix (every name, "*"). A user whose ACL reaches
 * only its prefix can list nothing else. */
const char *cli_default_pattern(const cli_opts *o);
/* After a listing refused by the ACL: a hint at the prefix (stderr). */
void cli_prefix_hint(const cli_opts *o, int rc, const char *pattern);

/* Global options, accepted before and after the command name. Returns 1 when
 * argv[*i] was one (its value consumed), 0 when not, -1 on a usage error. */
int cli_global_opt(cli_opts *o, int argc, char **argv, int *i);
/* What every command's argument loop takes first: "--" (sets *dashdash:
 * what follows is positional) and the global options. Returns 1 when
 * argv[*i] was one of them, 0 when not (or after "--"), -1 on a usage error. */
int cli_common_arg(cli_opts *o, int argc, char **argv, int *i, int *dashdash);
/* An option with a value: "--opt VAL", "--opt=VAL", or for a one-letter short
 * form "-o VAL" / "-oVAL". Returns 1 and *val, 0 when argv[*i] is not it, -1
 * (message printed) when the value is missing. */
int cli_opt_value(const cli_opts *o, const char *cmd, int argc, char **argv, int *i,
                  const char *lng, const char *shrt, const char **val);

/* Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and the threads
 * it starts from now on) and returns a signalfd that reads them (-1 on
 * failure): a long-running command's way to end cleanly. */
int cli_stop_signals(void);

/* The connect timeout cli_open gives the library: --connect-timeout, or a
 * shorter wait of the command's (at least CLI_CONNECT_FLOOR_MS). */
int64_t cli_connect_timeout(const cli_opts *o);

/* ---------------------------------------------------------- explain.c */

/* What `name` holds, as a phrase for messages ("a string", "a read-write
 * lock", "a count (a semaphore's or a latch's)", "a rate limiter",
 * "nothing") into what[size].
 * Returns its dlock_kind, -1 for a key no dlock kind reads (a list, a string
 * that is not a number, ...), -2 when it could not be read. */
int cli_key_kind(dlock_client *c, const char *name, char *what, size_t size);
/* After a DLOCK_EWRONGTYPE on `name`: when name holds something other than
 * `want` (a dlock_kind; want_noun: "a lock", ...), prints "key 'k' holds a
 * string, not a lock" (the same line from every command) and returns 1; 0 when name
 * holds what is wanted (another name of the call is the culprit) or nothing. */
int cli_wrong_type(const cli_opts *o, dlock_client *c, const char *name, int want,
                   const char *want_noun);
/* For a snapshot of other data (DLOCK_KIND_OTHER, from dlock_client_inspect):
 * prints cli_wrong_type's line and returns 1 (the caller exits 65); else 0. */
int cli_not_other(const cli_opts *o, const dlock_info *info, const char *want_noun);
/* cli_fail, and for DLOCK_EWRONGTYPE the line of cli_wrong_type (exit 65). */
int cli_fail_key(const cli_opts *o, dlock_client *c, int rc, const char *what, const char *name,
                 int want, const char *want_noun);
/* The library's detail text in the command's words into buf: a MOVED answer
 * to a single-server URL points to redis-cluster://; a connect timeout names
 * the option that set it. */
const char *cli_detail(const cli_opts *o, const char *detail, char *buf, size_t size);

/* ------------------------------------------------------------- show.c */

/* A rate limiter's rate as "4 per 10.0 s", into buf. */
const char *cli_rate_text(const dlock_rate_config *rc, char *buf, size_t size);
/* A rate limiter's snapshot: its permits left as text, "2", or "-" (a
 * PER_CLIENT one: each client has its own), or "unreadable" (its keys hold
 * other data). */
const char *cli_rate_left(const dlock_info *info, char *buf, size_t size);

/* ---------------------------------------------------------- holders.c */

/* Who the holders are, from one CLIENT LIST (see holders.c). */
typedef struct holder_map holder_map;

typedef struct holder_info {
    int dlock;               /* a dlock connection carries the owner's uuid */
    const char *host;        /* from that connection's name (valid with the map) */
    long pid;
    const char *addr;        /* ip:port of the connection */
    const char *label;
    int run;                 /* a dlock run's (label run:<ms>:...) */
    char *command;           /* its command, when known (its note), else NULL */
    int64_t acquired_ms;     /* a dlock run's acquisition, unix ms (its clock) */
    int64_t held_ms;         /* since then, by ours */
} holder_info;

/* Wall clock, unix ms. */
int64_t wall_ms(void);
/* The label a dlock run gives its client once it holds the lock:
 * run:<acquired unix ms>:, a semaphore run's run:<ms>:#<permit id>: (CLIENT
 * LIST shows it to every user allowed to list: no command in it). */
void run_label(int64_t acquired_ms, const char *permit, char *buf, size_t size);
/* The command as a shell would take it back (words quoted with '...' where
 * needed), at most DLOCK_NOTE_MAX bytes: the note a dlock run writes beside
 * its lock. Malloc'd, NULL when out of memory. */
char *run_command_text(char **cmd);
/* Reads CLIENT LIST. NULL only when out of memory; a refused CLIENT LIST
 * gives a map that knows nobody (holder_map_error says why). The map reads
 * the runs' notes with c (which must outlive it). */
holder_map *holder_map_load(dlock_client *c);
void holder_map_free(holder_map *m);
const char *holder_map_error(const holder_map *m);
/* 1 and *out when a dlock connection carries the owner's uuid (or, for a
 * permit id, names the permit in its run label), 0 when none does, -1 when
 * the map knows nothing. For a dlock run holding `name` (NULL: not asked),
 * its command from its note on name. Free with holder_info_free. */
int holder_lookup(const holder_map *m, const char *name, const char *owner, holder_info *out);
void holder_info_free(holder_info *h);
/* One phrase: "dlock run on web1, pid 42 (10.0.0.5:5123), for 3 s: make",
 * or "not a dlock client (Redisson or other; ...)"; brief: "web1:42 [make]
 * 3 s" / "not dlock". "" when the map knows nothing. name: the lock held
 * (its holders' notes), or NULL. */
const char *holder_describe(const holder_map *m, const char *name, const char *owner, int brief,
                            char *buf, size_t size);
/* The same, naming the command that holds it `runner` ("dlock elect")
 * instead of "dlock run" (both label their client alike). */
const char *holder_describe_as(const holder_map *m, const char *name, const char *owner,
                               int brief, const char *runner, char *buf, size_t size);
/* The JSON fields about the owner's client (",\"client\":..."), or none. */
void holder_json(FILE *f, const holder_map *m, const char *name, const char *owner);

/* ------------------------------------------------------------- help.c */

/* Prints the usage of `cmd` (NULL: the whole command) to f. Returns 0, or -1
 * when there is no such command. */
int cli_help(FILE *f, const char *cmd);

/* ----------------------------------------------------------- commands */

int cmd_run(cli_opts *o, int argc, char **argv);
int cmd_status(cli_opts *o, int argc, char **argv);
int cmd_list(cli_opts *o, int argc, char **argv);
int cmd_watch(cli_opts *o, int argc, char **argv);
int cmd_unlock(cli_opts *o, int argc, char **argv);
int cmd_revoke(cli_opts *o, int argc, char **argv);
int cmd_fence(cli_opts *o, int argc, char **argv);
int cmd_elect(cli_opts *o, int argc, char **argv);
int cmd_leader(cli_opts *o, int argc, char **argv);
int cmd_latch(cli_opts *o, int argc, char **argv);
int cmd_barrier(cli_opts *o, int argc, char **argv);
int cmd_check(cli_opts *o, int argc, char **argv);
int cmd_exporter(cli_opts *o, int argc, char **argv);
int cmd_doctor(cli_opts *o, int argc, char **argv);

#endif
