/* dlock status, list, watch, unlock: the table of locks they share, and the
 * arguments of status, list and unlock. */
#ifndef DLOCK_CLI_SHOW_H
#define DLOCK_CLI_SHOW_H

#include "cli.h"

typedef struct row {
    char *raw;       /* the name as it is */
    char *name;      /* escaped for the terminal */
    char *holders;   /* "owner x2 (host:pid), ..." escaped */
    int64_t ttl;
    uint64_t token;
    int64_t waiters; /* -1: not counted */
} row;

typedef struct rows {
    row *v;
    size_t n, cap;
    int oom;
    FILE *json_out;   /* list --json: streamed, not kept */
    struct holder_map *map;   /* who each owner is (may be NULL) */
} rows;

/* The arguments of status, list and unlock: [global options] [--json]
 * [--stats] [--force] [--permit ID] [--name NAME] [positional] [-- positional];
 * `flags` says which of the command-specific ones a command takes. */
enum { F_JSON = 1, F_NAME = 4, F_STATS = 8, F_FORCE = 16, F_PERMIT = 32 };

typedef struct show_args {
    int json;
    int stats;
    int force;
    const char *permit;
    const char *pos;
    int npos;
} show_args;

/* 0, or -1 after a usage error (printed). */
int parse_show(cli_opts *o, const char *cmd, int argc, char **argv, unsigned flags,
               show_args *sa);

/* dlock_scan_fn: appends one lock (or streams its JSON). */
int rows_collect(const dlock_info *info, void *ud);
/* Replaces row i with a fresh snapshot (waiters counted). 0, or a dlock status. */
int rows_refresh(rows *rs, size_t i, const dlock_info *info);
void rows_sort(rows *rs);
void rows_free(rows *rs);
/* Prints the rows as a table; at most max_rows (0 = all). */
void rows_print(FILE *f, const rows *rs, size_t max_rows, int with_waiters);
/* One name's object as JSON (status --json, list --json): a lock's, a
 * count's or a rate limiter's fields. */
void show_json_info(FILE *f, const dlock_info *info, int with_waiters, const holder_map *map);
/* The URL without credentials, for display. */
const char *display_url(const char *url, char *buf, size_t size);

/* A client's statistics (status --stats), as text lines or a JSON object. */
void cli_print_stats(FILE *f, const dlock_stats *s);
void cli_json_stats(FILE *f, const dlock_stats *s);

#endif
