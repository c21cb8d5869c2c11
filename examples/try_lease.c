/* tryLock(wait, lease): a lock held with a 1 s lease refuses a 200 ms try,
 * then expires by itself and a 2 s try gets it. */
/* POSIX calls (nanosleep, pthreads, sockets) under plain cc -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "common.h"

static dlock_lock *lock;

static void *contender(void *arg)
{
    (void)arg;
    char ts[16];
    int rc = dlock_lock_try(lock, 200, 5000);
    printf("%s contender, 200 ms try: %s\n", example_now(ts, sizeof(ts)), dlock_strerror(rc));
    rc = dlock_lock_try(lock, 2000, 5000);
    printf("%s contender, 2 s try:    %s\n", example_now(ts, sizeof(ts)), dlock_strerror(rc));
    if (rc == DLOCK_OK)
        dlock_lock_release(lock);
    return NULL;
}

int main(int argc, char **argv)
{
    dlock_client *c = example_open(argc, argv, 0);
    char ts[16];
    if (dlock_lock_get(c, "example:try-lease", &lock) != DLOCK_OK)
        return 1;
    if (dlock_lock_try(lock, 0, 1000) != DLOCK_OK) {
        fprintf(stderr, "%s\n", dlock_last_error());
        return 1;
    }
    printf("%s main holds the lock with a 1000 ms lease, and never releases it\n",
           example_now(ts, sizeof(ts)));
    pthread_t t;
    pthread_create(&t, NULL, contender, NULL);
    pthread_join(t, NULL);
    int rc = dlock_lock_release(lock);
    printf("%s main's late release: %s\n", example_now(ts, sizeof(ts)), dlock_strerror(rc));
    dlock_lock_free(lock);
    dlock_client_close(c);
    return 0;
}
