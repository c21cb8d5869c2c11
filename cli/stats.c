/* dlock status --stats: a client's statistics (dlock_client_stats), as text
 * or JSON, and the server's eviction policy as the client read it at open. */
#include <stdio.h>
#include <string.h>

#include "show.h"

static const char *const lost_names[] = {"", "gone", "unreachable", "paused", "replicas"};
#define NREASONS ((int)(sizeof(lost_names) / sizeof(lost_names[0])))

/* The upper bound (us) of the bucket where the q-quantile falls, 0 if empty. */
static uint64_t quantile_us(const dlock_histogram *h, double q)
{
    if (!h->count)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->count + 0.5), seen = 0;
    if (want == 0)
        want = 1;
    for (int b = 0; b < DLOCK_STATS_BUCKETS; b++) {
        seen += h->bucket[b];
        if (seen >= want)
            return dlock_stats_bucket_limit_us(b);
    }
    return UINT64_MAX;
}

static const char *fmt_us(uint64_t us, char *buf, size_t size)
{
    if (us == UINT64_MAX)
        snprintf(buf, size, "longer");
    else if (us >= 1000000)
        snprintf(buf, size, "%.1f s", (double)us / 1e6);
    else if (us >= 1000)
        snprintf(buf, size, "%.1f ms", (double)us / 1e3);
    else
        snprintf(buf, size, "%llu us", (unsigned long long)us);
    return buf;
}

static void print_hist(FILE *f, const char *what, const dlock_histogram *h)
{
    char a[32], b[32], c[32];
    if (!h->count) {
        fprintf(f, "  %-13s none\n", what);
        return;
    }
    fprintf(f, "  %-13s %llu, mean %s, p50 < %s, p99 < %s\n", what,
            (unsigned long long)h->count, fmt_us(h->sum_us / h->count, a, sizeof(a)),
            fmt_us(quantile_us(h, 0.5), b, sizeof(b)), fmt_us(quantile_us(h, 0.99), c, sizeof(c)));
}

void cli_print_stats(FILE *f, const dlock_stats *s)
{
    fprintf(f, "stats:   this command's own client\n");
    fprintf(f, "  acquisitions %llu, waits %llu, wake-ups %llu (%llu found it taken again)\n",
            (unsigned long long)s->acquisitions, (unsigned long long)s->waits,
            (unsigned long long)s->wakeups, (unsigned long long)s->wakeups_taken);
    fprintf(f, "  renewals %llu in %llu batches, %llu writes; lost:",
            (unsigned long long)s->renewals, (unsigned long long)s->renewal_roundtrips,
            (unsigned long long)s->renewal_writes);
    int any = 0;
    for (int r = 1; r < DLOCK_STATS_LOST_REASONS; r++)
        if (s->lost[r]) {
            fprintf(f, "%s %s %llu", any ? "," : "",
                    r < (int)(sizeof(lost_names) / sizeof(lost_names[0])) ? lost_names[r] : "?",
                    (unsigned long long)s->lost[r]);
            any = 1;
        }
    fprintf(f, "%s\n", any ? "" : " none");
    fprintf(f, "  connections %llu opened, %llu reconnects; round trips %llu\n",
            (unsigned long long)s->connects, (unsigned long long)s->reconnects,
            (unsigned long long)s->roundtrips);
    print_hist(f, "round trip", &s->roundtrip);
    print_hist(f, "acquire wait", &s->acquire_wait);
    print_hist(f, "handoff gap", &s->handoff_gap);
}

static void json_hist(FILE *f, const char *name, const dlock_histogram *h)
{
    fprintf(f, ",\"%s\":{\"count\":%llu,\"sum_us\":%llu,\"buckets\":[", name,
            (unsigned long long)h->count, (unsigned long long)h->sum_us);
    /* [le_us, count] pairs of the non-empty buckets; le -1 for the last. */
    int first = 1;
    for (int b = 0; b < DLOCK_STATS_BUCKETS; b++) {
        if (!h->bucket[b])
            continue;
        uint64_t le = dlock_stats_bucket_limit_us(b);
        fprintf(f, "%s[%lld,%llu]", first ? "" : ",",
                le == UINT64_MAX ? -1LL : (long long)le, (unsigned long long)h->bucket[b]);
        first = 0;
    }
    fputs("]}", f);
}

void cli_json_stats(FILE *f, const dlock_stats *s)
{
    fprintf(f, "{\"acquisitions\":%llu,\"waits\":%llu,\"wakeups\":%llu,\"wakeups_taken\":%llu,"
               "\"renewals\":%llu,\"renewal_roundtrips\":%llu,\"renewal_writes\":%llu,\"lost\":{",
            (unsigned long long)s->acquisitions, (unsigned long long)s->waits,
            (unsigned long long)s->wakeups, (unsigned long long)s->wakeups_taken,
            (unsigned long long)s->renewals, (unsigned long long)s->renewal_roundtrips,
            (unsigned long long)s->renewal_writes);
    for (int r = 1; r < NREASONS; r++)
        fprintf(f, "%s\"%s\":%llu", r > 1 ? "," : "", lost_names[r],
                (unsigned long long)s->lost[r]);
    fprintf(f, "},\"connects\":%llu,\"reconnects\":%llu,\"roundtrips\":%llu",
            (unsigned long long)s->connects, (unsigned long long)s->reconnects,
            (unsigned long long)s->roundtrips);
    json_hist(f, "roundtrip", &s->roundtrip);
    json_hist(f, "acquire_wait", &s->acquire_wait);
    json_hist(f, "handoff_gap", &s->handoff_gap);
    fputc('}', f);
}
