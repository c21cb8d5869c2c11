/* Two threads take turns on one lock: each increments a shared counter five
 * times, holding the lock around a deliberately slow read-modify-write. */
/* POSIX calls (nanosleep, pthreads, sockets) under plain cc -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <unistd.h>

#include "common.h"

static dlock_lock *lock;
static int counter;   /* guarded by the distributed lock, for the demonstration */

static void *worker(void *arg)
{
    const char *who = arg;
    char ts[16];
    for (int i = 0; i < 5; i++) {
        if (dlock_lock_acquire(lock, DLOCK_WATCHDOG) != DLOCK_OK) {
            fprintf(stderr, "%s: %s\n", who, dlock_last_error());
            return NULL;
        }
        int seen = counter;
        example_sleep_ms(20);
        counter = seen + 1;
        printf("%s %s set counter to %d\n", example_now(ts, sizeof(ts)), who, counter);
        dlock_lock_release(lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    dlock_client *c = example_open(argc, argv, 0);
    if (dlock_lock_get(c, "example:two-threads", &lock) != DLOCK_OK)
        return 1;
    pthread_t a, b;
    pthread_create(&a, NULL, worker, "thread A");
    pthread_create(&b, NULL, worker, "thread B");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter = %d (expected 10)\n", counter);
    dlock_lock_free(lock);
    dlock_client_close(c);
    return counter == 10 ? 0 : 1;
}
