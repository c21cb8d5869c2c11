/* A client's statistics: counters and latency histograms, kept as relaxed
 * atomics so that any thread may count and read at any time without a lock.
 * A snapshot reads each value atomically, not all of them at one instant. */
#include <string.h>

#include "core/core.h"

void dlock__stats_init(dlock__stats *s)
{
    for (int i = 0; i < DLOCK__ST_COUNT; i++)
        atomic_init(&s->n[i], 0);
    for (int h = 0; h < DLOCK__H_COUNT; h++) {
        for (int b = 0; b < DLOCK_STATS_BUCKETS; b++)
            atomic_init(&s->h[h].bucket[b], 0);
        atomic_init(&s->h[h].sum_us, 0);
    }
}

/* Bucket b holds durations d with 2^(b-1) <= d < 2^b microseconds (bucket 0:
 * d < 1 us); the last bucket holds everything longer. */
static int bucket_of(int64_t us)
{
    if (us <= 0)
        return 0;
    int b = 64 - __builtin_clzll((unsigned long long)us);   /* bits: 1 -> 1, 2..3 -> 2 */
    return b < DLOCK_STATS_BUCKETS ? b : DLOCK_STATS_BUCKETS - 1;
}

void dlock__stats_time(dlock__stats *s, int h, int64_t us)
{
    if (!s)
        return;
    if (us < 0)
        us = 0;
    atomic_fetch_add_explicit(&s->h[h].bucket[bucket_of(us)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->h[h].sum_us, (uint64_t)us, memory_order_relaxed);
}

static void read_hist(const dlock__hist *h, dlock_histogram *out)
{
    out->count = 0;
    for (int b = 0; b < DLOCK_STATS_BUCKETS; b++) {
        out->bucket[b] = atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
        out->count += out->bucket[b];
    }
    out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

void dlock__stats_read(const dlock__stats *s, dlock_stats *out)
{
    memset(out, 0, sizeof(*out));
#define LOAD(i) atomic_load_explicit(&s->n[i], memory_order_relaxed)
    out->acquisitions = LOAD(DLOCK__ST_ACQUISITIONS);
    out->waits = LOAD(DLOCK__ST_WAITS);
    out->wakeups = LOAD(DLOCK__ST_WAKEUPS);
    out->wakeups_taken = LOAD(DLOCK__ST_WAKEUPS_TAKEN);
    out->renewals = LOAD(DLOCK__ST_RENEWALS);
    out->renewal_roundtrips = LOAD(DLOCK__ST_RENEWAL_RTTS);
    out->reconnects = LOAD(DLOCK__ST_RECONNECTS);
    out->connects = LOAD(DLOCK__ST_CONNECTS);
    out->roundtrips = LOAD(DLOCK__ST_ROUNDTRIPS);
    out->renewal_writes = LOAD(DLOCK__ST_RENEWAL_WRITES);
    for (int r = 0; r < DLOCK_STATS_LOST_REASONS; r++)
        out->lost[r] = LOAD(DLOCK__ST_LOST + r);
#undef LOAD
    read_hist(&s->h[DLOCK__H_ACQUIRE_WAIT], &out->acquire_wait);
    read_hist(&s->h[DLOCK__H_HANDOFF_GAP], &out->handoff_gap);
    read_hist(&s->h[DLOCK__H_ROUNDTRIP], &out->roundtrip);
}

uint64_t dlock_stats_bucket_limit_us(int b)
{
    if (b < 0 || b >= DLOCK_STATS_BUCKETS - 1)
        return UINT64_MAX;
    return 1ULL << b;
}
