/* One worker process of the demo: takes the lock ROUNDS times, holds it a
 * little, and says so with a timestamp.  turns URL NAME WORKER ROUNDS HOLD_MS */
/* POSIX calls (nanosleep, pthreads, sockets) under plain cc -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include "common.h"

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: turns URL NAME WORKER ROUNDS HOLD_MS\n");
        return 64;
    }
    dlock_client *c = example_open(2, argv, 0);
    const char *who = argv[3];
    int rounds = atoi(argv[4]), hold = atoi(argv[5]);
    dlock_lock *l;
    if (dlock_lock_get(c, argv[2], &l) != DLOCK_OK)
        return 1;
    char ts[16];
    for (int i = 1; i <= rounds; i++) {
        printf("%s %-8s waits\n", example_now(ts, sizeof(ts)), who);
        fflush(stdout);
        uint64_t token = 0;
        if (dlock_lock_acquire_opts(l, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER,
                                                          .token = &token}) != DLOCK_OK) {
            fprintf(stderr, "%s: %s\n", who, dlock_last_error());
            return 1;
        }
        printf("%s %-8s HOLDS the lock (round %d/%d, fencing token %llu)\n",
               example_now(ts, sizeof(ts)), who, i, rounds, (unsigned long long)token);
        fflush(stdout);
        example_sleep_ms(hold);
        printf("%s %-8s releases\n", example_now(ts, sizeof(ts)), who);
        fflush(stdout);
        dlock_lock_release(l);
        example_sleep_ms(50);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    return 0;
}
