/* Losses (cause.c): a lost hold's note, its cause (dlock_lost_cause: what
 * Redis can tell), its report (the log line, the counters, the callback).
 * Above the per-node batches (it asks a node's renewal connection for
 * INFO), beside revocation: the schedule (watchdog.c) makes the notes and
 * hands them here. Io thread only. Not installed. */
#ifndef DLOCK_IO_CAUSE_H
#define DLOCK_IO_CAUSE_H

#include "io/wdnode.h"

/* A loss waiting for its callback. It carries copies of what the callback
 * needs, so it never points at a hold that a batch may free meanwhile. */
typedef struct lost_note {
    struct lost_note *next;
    dlock__lost_cb cb;       /* the hold's (none: the client's) */
    dlock_lost_reason reason;
    dlock_lost_cause cause;  /* DLOCK_LOST_GONE: found here, else UNKNOWN */
    int late;                /* its lease had run out since its last renewal was sent */
    const char *what;
    uint32_t nlen;
    char key[];              /* name NUL owner NUL */
} lost_note;

/* What the reports need. */
typedef struct dlock__wd_losses {
    dlock__netctx *ctx;          /* the log, the lost callback, the counters */
    const uint64_t *flushes;     /* invalidations of every key heard (revoke.c) */
} dlock__wd_losses;

/* After a pass's batches on wc: asks the node for its counters (INFO), at
 * most once a second; the answer becomes wc->sample. */
void dlock__wd_cause_sample(const dlock__wd_losses *ls, wconn *wc);
/* Reports the notes; those of holds found gone after one more INFO on wc,
 * their cause found by comparing it with `before`. wc may be NULL. */
void dlock__wd_explain(const dlock__wd_losses *ls, wconn *wc, const wd_sample *before,
                       lost_note *notes);
/* Calls each note's callback (and logs it) and frees the notes. */
void dlock__wd_report(const dlock__wd_losses *ls, lost_note *notes);

#endif
