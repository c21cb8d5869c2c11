/* The checker's internals, shared by check.c (histories, exclusion, tokens,
 * counters, wake-ups, each fault's expectations), check_fair.c (fair order and
 * dead waiters) and check_print.c (the report). */
#ifndef DLOCK_SAFETY_CHECK_H
#define DLOCK_SAFETY_CHECK_H

#include <stddef.h>

#include "dlock/dlock.h"
#include "safety.h"

typedef struct hold {
    int w, t, name, side;   /* side: 'x' exclusive, 'r' read, 'w' write */
    unsigned long long token;
    long long t_call, t_acq, t_end, t_rel, lost_at, t_write, v1, v2;
    int read_ok, write_ok, release_rc, lost_reason, ended;
    long long end;         /* for overlap: t_end, or when a killed worker died */
    int handed, adopted;   /* type handover: E side h, S side a */
    long long held_until;  /* handed: when the hold stopped being the lock's (its
                              adoption, or the TTL the transfer left it) */
} hold;

/* A wait with an outcome (S or F record). */
typedef struct waitrec {
    int w, t, name, side, acquired, rc;
    int adopt;                          /* type handover: an adoption (F side a) */
    long long t_call, t_ret, wait_ms;   /* wait_ms: as given (-1 none), from the W record */
    unsigned long long token;           /* acquired: the hold's token */
} waitrec;

/* A W record (the wait's start), to find waits that never ended (killed). */
typedef struct callrec {
    int w, t, name, side, ended;
    long long t_call, wait_ms;
} callrec;

typedef struct fault {
    char kind;
    int w;
    long long a, b;
} fault;

typedef struct vec {
    void *v;
    size_t n, cap, size;
} vec;

extern vec holds, waits, calls, faults;

void *check_push(vec *x);
void check_problem(check_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
long long check_kill_time(int w);

/* A hold its holder lost (told, refused at release, or never ended). */
static inline int check_lost(const hold *h)
{
    return h->lost_at != 0 || h->release_rc == DLOCK_ENOTOWNER || !h->ended;
}

/* Two holds (or a hold and a wait) of one name exclude each other unless both
 * are read holds. */
static inline int check_conflicts(int side_a, int side_b)
{
    return !(side_a == 'r' && side_b == 'r');
}

/* check_tokens.c: types lock, fair and elect, holds sorted by name and
 * t_acq: later grants carry higher tokens (elect: never the same term). */
void check_token_order(const check_params *cp, check_report *rep);

/* check_rw.c (type rw). */
void check_rw_exclusion(check_report *rep);
void check_rw_tokens(check_report *rep);
/* When the lock became free for o after worker w was killed at `kill`: the
 * last release, before o, of a live hold that excluded o (other readers may
 * keep a writer out after a dead reader's hold expired). */
long long check_rw_free_for(const hold *o, int w, long long kill);
/* Type rw: reads admitted past a waiting writer (check_rw.c). */
void check_rw_writer_first(const check_params *cp, check_report *rep);

/* check_fair.c. Dead waiters: queue entries nobody speaks for any more (a
 * killed or stopped or cut-off worker's wait, a wait whose outcome is unknown
 * or whose leaving may have failed). Built once per check. */
void check_ghosts_build(const check_params *cp);
void check_ghosts_free(void);
/* Dead waiters of `name`, other than thread (w, t) (w = -1: any), that may
 * have sat in the queue during [a, b]. */
long long check_ghosts_in(int name, int w, int t, long long a, long long b);
/* The fair-order check (type fair). */
void check_fair_order(const check_params *cp, check_report *rep);

/* check_sem.c (types sem and latch). A line it reads (X, L, d, D, A
 * records): 1, else 0. */
int check_sem_line(const char *line);
void check_sem(const check_params *cp, check_report *rep);
void check_latch(const check_params *cp, check_report *rep);
void check_sem_free(void);

/* check_handover.c (type handover), holds sorted, their `end` set: each
 * handed hold's end becomes its adoption, or the TTL the transfer
 * guaranteed; an adoption refused without a fault to explain it is a lost
 * hand-over (the giver's hold then counts as lost). */
void check_handover(const check_params *cp, check_report *rep);

/* check_barrier.c (type barrier): its B and V records (1 when the line is
 * one), the checks of each round. */
int check_barrier_line(const char *line);
void check_barrier(const check_params *cp, check_report *rep);
void check_barrier_free(void);

/* check_revoke.c (type revoke): its Q and Y records, the requests heard. */
int check_revoke_line(const char *line);
void check_revoke(const check_params *cp, check_report *rep);
void check_revoke_free(void);

/* check_rate.c (type rate): its G and g records (1 when the line is one),
 * the check that no name has more starts in an interval than its rate. */
int check_rate_line(const char *line);
void check_rate(const check_params *cp, check_report *rep);
void check_rate_free(void);

#endif
