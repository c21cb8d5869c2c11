/* The server clock check (clock.c): TIME asked of each node with each
 * renewal pass, and the server's progress compared with this process's
 * monotonic clock (dlock_config_set_clock_jump, docs/safety.md). Beside
 * cause.c, above the per-node batches; the schedule (watchdog.c) asks and
 * is told of a jump through the hook it gives. Io thread only. Not
 * installed. */
#ifndef DLOCK_IO_CLOCK_H
#define DLOCK_IO_CLOCK_H

#include "io/wdnode.h"

/* The relative allowance: clocks that differ by less than 1% of the time
 * between two samples are drift (NTP slews at 0.05% at most). */
#define DLOCK__CLOCK_DRIFT_PCT 1

/* How far the server's clock jumped between samples a and b (a first), in
 * µs: 0 when the server's progress is within this process's, widened by the
 * round trips (the server read its clock between sending and answering) and
 * by the allowance (allow_ms + DLOCK__CLOCK_DRIFT_PCT of the time between);
 * else the part beyond that window, positive forward, negative backward.
 * 0 when either sample is missing. Pure. */
int64_t dlock__clock_jump_us(const wd_clock *a, const wd_clock *b, int64_t allow_ms);

/* What the schedule hears: wc's node's clock jumped by jump_us (see above),
 * forward or backward. */
typedef void (*dlock__wd_jumped_fn)(void *ud, wconn *wc, int64_t jump_us);

typedef struct dlock__wd_clock {
    dlock__netctx *ctx;      /* the allowance (cfg), the log */
    dlock__wd_jumped_fn jumped;
    void *ud;
} dlock__wd_clock;

/* After a pass's batches on wc: asks the node for TIME (one at a time), and
 * compares its answer with the last. Off with DLOCK_CLOCK_JUMP_OFF. */
void dlock__wd_clock_sample(const dlock__wd_clock *ck, wconn *wc);
/* wc's connection came up or went down: the next sample starts afresh (the
 * server behind it may be another). */
void dlock__wd_clock_reset(wconn *wc);

#endif
