/* dlock run: what run.c (acquire, release) and child.c (the guard process,
 * supervision) share. */
#ifndef DLOCK_CLI_RUN_H
#define DLOCK_CLI_RUN_H

#include <sys/types.h>

#include "cli.h"

/* --on-revoke: SIGTERM to CMD's tree (the default), nothing, or a command. */
enum { RUN_REVOKE_TERM = 0, RUN_REVOKE_IGNORE, RUN_REVOKE_CMD };

/* What kind of lock a name of a run is. */
typedef enum run_kind { RUN_LOCK = 0, RUN_FAIR, RUN_READ, RUN_WRITE, RUN_SPIN } run_kind;

#define RUN_MAX_NAMES 32   /* a run over several names takes them as one multi-lock */

typedef struct run_args {
    int64_t wait_ms;       /* DLOCK_WAIT_FOREVER by default */
    int64_t lease_ms;      /* DLOCK_WATCHDOG by default */
    int64_t watchdog_ms;   /* the lease a watchdog hold has (for pause detection) */
    int64_t max_hold_ms;   /* --max-hold, 0 = none */
    int64_t lock_delay_ms; /* the hold's lock-delay: at least --kill-after + a margin,
                              unless --lock-delay 0 (then none); --lock-delay DUR a floor */
    int lock_delay_given;  /* --lock-delay was given (0 included) */
    int conflict_code;
    int on_lost_term;
    int on_revoke;         /* a revoke request while CMD runs: RUN_REVOKE_* */
    const char *on_revoke_cmd;   /* RUN_REVOKE_CMD: the shell command */
    int lost_code;         /* exit code when the hold was lost (76), -1: CMD's status */
    int64_t kill_after_ms; /* --kill-after: SIGTERM, then SIGKILL this much later */
    int kill_orphans;      /* --kill-orphans: end what CMD leaves running */
    int keep_env_secrets;  /* --keep-env-secrets: CMD inherits DLOCK_PASSWORD & co. */
    int verbose;
    const char *name;      /* for messages: the name, or "a + b + c" for several */
    const char *names[RUN_MAX_NAMES];
    run_kind kinds[RUN_MAX_NAMES];
    int nnames;
    const char *pending;   /* a --fair/--read/--write waiting for its NAME */
    const char *semaphore; /* --semaphore NAME: a permit instead of locks */
    int64_t permits;       /* --permits N: the semaphore's total (0: not given) */
    int64_t rate_n;        /* --rate N/DUR: at most N starts per DUR (0: not given) */
    int64_t rate_ms;
    const char *noun;      /* "lock", "permit of semaphore" or "leadership of election" */
    char display[512];
    char **cmd;
    int elect;             /* dlock elect: the name is an election, DLOCK_TERM */
    int stripes;           /* --stripes N: names[0] NAME, names[1] KEY become one */
    char stripe_name[DLOCK_NAME_MAX + 1];   /* the stripe's lock name */
} run_args;

/* --------------------------------------------------------------- run_rate.c */

/* --rate N/DUR: N in 1..2^31-1, DUR a duration; else a usage message and -1. */
int run_rate_parse(const cli_opts *o, const char *val, run_args *ra);
/* A --rate run takes one NAME and none of the lock's options. */
int run_rate_check_args(const cli_opts *o, const run_args *ra);
/* Takes one permit of rate limiter NAME (set to N per DUR when it has no
 * rate; one with another rate is refused, exit 65), then becomes CMD (exec:
 * nothing is held while it runs). Returns an exit code when CMD was not
 * started. */
int run_rate(cli_opts *o, const run_args *ra);

/* Why a hold was lost: the library's dlock_lost_reason values, and ours. */
enum {
    LOST_LEASE = 100,      /* a --lease ran out while CMD ran */
    LOST_AT_RELEASE = 101  /* the release found it gone */
};

/* The guard: a process forked before dlock starts any thread, named
 * dlock-guard (process name dlk-guard). It starts CMD as its child (parent-death signal SIGKILL) and
 * is the subreaper of everything CMD starts: it tells dlock when CMD ended and
 * when nothing CMD started is left, signals them all on request, and kills
 * them all when dlock dies (see child.c). */
typedef struct guard guard;

/* Forks the guard, which will run `cmd`. Must be called while the process has
 * one thread, with the signals dlock handles already blocked. Returns 0, or an
 * exit code. */
int guard_start(const cli_opts *o, char **cmd, guard **out);
/* Starts CMD with the environment plus `extra` (NULL-terminated "K=V"
 * strings that replace inherited ones; a "K" without '=' removes K).
 * Returns 0, or an exit code (126/127, message printed). */
int guard_exec(const cli_opts *o, guard *g, const char *cmd0, char *const *extra);
/* The entries of guard_exec's extra that keep Redis credentials out of
 * CMD's environment: DLOCK_PASSWORD and REDISCLI_AUTH removed, DLOCK_URL
 * without the password of its userinfo (*url_var, malloc'd: free it). Into
 * v (room for 4, NULL-terminated); returns how many. */
int guard_env_scrub(char **v, char **url_var);
/* Ends the guard (what CMD started, if any still runs, is killed) and frees it. */
void guard_stop(guard *g);
/* Sends one message to the guard (child.c's protocol); -1 when it is gone. */
int guard_send(guard *g, char op, int32_t v);
/* Reads one message from the guard; -1 when it is gone. */
int guard_read(guard *g, char *op, int32_t *v);
/* The descriptor guard_read reads, for poll. */
int guard_fd(const guard *g);

/* ------------------------------------------------------------- tree.c */

/* sig to every live (not zombie) descendant of this process, found in /proc,
 * except those in process group skip_group (> 0); a SIGCONT follows every
 * signal but SIGKILL, so that stopped processes act on it. sig 0: count
 * only. Returns how many there are. */
size_t tree_signal(int sig, pid_t skip_group);
/* tree_reap's flags */
enum { TREE_WATCHED = 1, TREE_EMPTY = 2 };
/* Reaps every child that ended: TREE_WATCHED when `watched` (> 0) was one
 * (*status = its wait status), TREE_EMPTY when this process has no child
 * left (for a subreaper: no descendant). */
int tree_reap(pid_t watched, int *status);
/* SIGKILL to every descendant, round after round, until none is left. */
void tree_kill_all(void);

/* -------------------------------------------------------- supervise.c */

/* A hold while CMD runs: what tells of its loss. */
typedef struct run_hold {
    dlock_client *c;
    int sfd;                 /* the signals dlock handles (signalfd) */
    int lost_fd;             /* the lost callback's pipe: a byte per loss, the reason */
    int64_t lease_deadline;  /* monotonic ms when a --lease runs out, -1: watchdog */
    uint64_t reconnects;     /* the client's reconnects when the hold began */
    int revoke_fd;           /* a byte per revoke request heard (run_revoke.c), or -1 */
} run_hold;

/* Waits until CMD and everything it started are gone, passing signals on and
 * ending them on a lost hold (see child.c). Returns CMD's wait status, or -1
 * when the guard failed (what CMD started is killed then); *lost = the reason
 * if the hold was lost, else 0. */
int supervise(const cli_opts *o, const run_args *ra, guard *g, run_hold *h, int *lost);
/* The words for a loss reason ("a renewal found it gone: ..."), taking into
 * account a pause of this process that supervise() saw and whether the
 * client had to reconnect since the hold began (Redis restarted, failed
 * over). */
const char *lost_why(const run_hold *h, int reason, char *buf, size_t size);
/* The cause the library gave for the last loss (dlock_lost_cause). */
int run_lost_cause(void);

/* run_args.c: parses run's (and elect's) arguments into *ra; 0, or -1 with
 * the usage error said. */
int run_parse_args(cli_opts *o, int argc, char **argv, run_args *ra);

/* run_owner.c: the owner id a run acts as into owner (size bytes): a run
 * around this one that holds one of its names (*reentry = 1), else a new
 * one. 0, or an exit code. "DLOCK_OWNERS=<owner> <inherited...>" for the
 * command (malloc'd; NULL when out of memory). */
int run_choose_owner(const cli_opts *o, dlock_client *c, const run_args *ra, char *owner,
                     size_t size, int *reentry);
char *run_owners_var(const char *owner);

/* --------------------------------------------------------- run_revoke.c */

/* Sets the revoke handler of the run's n lock handles: each request heard
 * writes a byte to run_revoke_fd(). 0, or an exit code (message printed). */
int run_revoke_listen(const cli_opts *o, dlock_lock *const *l, int n);
int run_revoke_fd(void);
/* The requests heard since the last call (the pipe drained). */
int run_revoke_take(void);
/* --on-revoke CMD: /bin/sh -c CMD with DLOCK_NAME and DLOCK_REVOKE_NOTE (the
 * request's note), not waited for. */
void run_revoke_spawn(const cli_opts *o, const run_args *ra);
/* Reaps the --on-revoke commands that ended (block: waits for them all). */
void run_revoke_reap(int block);

/* ----------------------------------------------------------- run_note.c */

/* The note beside each of the n names a run holds as `owner` (a permit's
 * id for a semaphore run): its command, for dlock status (see run_note.c).
 * Written now with ttl_ms, and again every third of it when `renew` (a
 * watchdog hold) until run_note_stop, which deletes it when `delete` (the
 * hold was not lost). NULL when out of memory (no note). names and owner
 * must outlive it. */
typedef struct run_note run_note;
run_note *run_note_start(const cli_opts *o, dlock_client *c, const char *const *names, int n,
                         const char *owner, char **cmd, int64_t ttl_ms, int renew);
void run_note_stop(run_note *rn, int delete);

/* -------------------------------------------------------- run_stripes.c */

/* --stripes N: 1..DLOCK_STRIPES_MAX, else a usage message and -1. */
int run_stripes_parse(const cli_opts *o, const char *val, int *n);
/* A --stripes run: NAME and KEY (the two names given) become the one lock
 * name of KEY's stripe. 0, or -1 (message printed). */
int run_stripes_check_args(const cli_opts *o, run_args *ra);

/* ------------------------------------------------------------ run_sem.c */

/* --permits N: 1..DLOCK_COUNT_MAX, else a usage message and -1. */
int run_sem_parse_permits(const cli_opts *o, const char *val, int64_t *n);
/* Checks a --semaphore run's arguments (no lock names, --permits given, no
 * --lease) and makes the semaphore the run's one name. 0, or -1 (message
 * printed). Sets ra->noun for every run. */
int run_sem_check_args(const cli_opts *o, run_args *ra);
/* A handle on the run's semaphore with its total established: created with
 * N permits when absent, else it must have N in all. Returns 0, or an exit
 * code (message printed; *out may need freeing). */
int run_sem_open(const cli_opts *o, dlock_client *c, const run_args *ra,
                 dlock_permit_semaphore **out);
/* Why no permit was had: "out of permits (2 held, 2 in all)". */
void run_sem_describe(dlock_permit_semaphore *ps, int64_t permits, int lock_delay, char *buf,
                      size_t size);

#endif
