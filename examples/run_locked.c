/* The run-under-lock helper: the callback runs while the lock is held, and the
 * lock is released afterwards whatever the callback returned. */
/* POSIX calls (nanosleep, pthreads, sockets) under plain cc -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

struct job {
    const char *what;
    int done;
};

static int do_job(void *ud)
{
    struct job *j = ud;
    char ts[16];
    printf("%s running '%s' under the lock\n", example_now(ts, sizeof(ts)), j->what);
    j->done = 1;
    return 42;
}

int main(int argc, char **argv)
{
    dlock_client *c = example_open(argc, argv, 0);
    dlock_lock *l;
    if (dlock_lock_get(c, "example:run-locked", &l) != DLOCK_OK)
        return 1;
    struct job j = {"rotate the logs", 0};
    int result = 0;
    int rc = dlock_lock_run(l, &(dlock_wait_opts){.wait_ms = 1000}, do_job, &j, &result);
    int locked = -1;
    dlock_lock_is_locked(l, &locked);
    printf("run: %s, job returned %d, lock still held afterwards: %s\n", dlock_strerror(rc),
           result, locked ? "yes" : "no");
    dlock_lock_free(l);
    dlock_client_close(c);
    return rc == DLOCK_OK && j.done ? 0 : 1;
}
