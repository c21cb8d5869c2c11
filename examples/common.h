/* Shared by the examples: open a client on argv[1], $DLOCK_URL or the default. */
#ifndef DLOCK_EXAMPLE_COMMON_H
#define DLOCK_EXAMPLE_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#include <dlock/dlock.h>

/* Sleeps ms milliseconds (nanosleep: POSIX, unlike usleep). */
static inline void example_sleep_ms(long long ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static dlock_client *example_open(int argc, char **argv, int64_t watchdog_ms)
{
    const char *url = argc > 1 ? argv[1] : getenv("DLOCK_URL");
    dlock_config *cfg = dlock_config_new();
    if (url && dlock_config_set_url(cfg, url) != DLOCK_OK) {
        fprintf(stderr, "bad URL: %s\n", dlock_last_error());
        exit(64);
    }
    if (watchdog_ms)
        dlock_config_set_watchdog_timeout(cfg, watchdog_ms);
    dlock_client *c;
    if (dlock_client_open(&c, cfg) != DLOCK_OK) {
        fprintf(stderr, "cannot open: %s\n", dlock_last_error());
        exit(69);
    }
    dlock_config_free(cfg);
    return c;
}

/* "12:34:56.789" */
static inline const char *example_now(char *buf, size_t size)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    snprintf(buf, size, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(tv.tv_usec / 1000));
    return buf;
}

#endif
