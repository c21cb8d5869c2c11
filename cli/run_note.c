/* dlock run: the note beside each lock a run holds (dlock_client_set_note):
 * its command, which dlock status, list and check show. It lives in
 * {name}:dlock_note:<owner>, under the lock's own key patterns: the users
 * who may read the lock read it, no other tenant does (a connection's name,
 * which CLIENT LIST shows any user allowed to list, says only since when a
 * run holds). Written once the lock is held, with the hold's TTL; written
 * again every third of it while the watchdog renews the hold (a thread of
 * its own); deleted when the hold ends. Best effort: a note Redis refuses
 * (an ACL without the lock's {PREFIX* pattern) is said once and the run goes
 * on without it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run.h"

struct run_note {
    const cli_opts *o;
    dlock_client *c;
    const char *const *names;
    int n;
    const char *owner;
    char *text;
    int64_t ttl_ms;
    int failed;            /* said once */
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int started;
};

/* Writes (text) or deletes (NULL) the note on every name. */
static void put(run_note *rn, const char *text)
{
    for (int i = 0; i < rn->n; i++) {
        int rc = dlock_client_set_note(rn->c, rn->names[i], rn->owner, text,
                                       text ? strlen(text) : 0, rn->ttl_ms);
        if (rc != DLOCK_OK && text && !rn->failed) {
            char nm[200], e[300];
            rn->failed = 1;
            cli_err(rn->o, "warning: cannot write the command beside '%s' for dlock status "
                           "(%s): status shows the holder without it",
                    cli_esc(rn->names[i], nm, sizeof(nm)),
                    cli_esc(dlock_last_error(), e, sizeof(e)));
        }
    }
}

static void *renewer(void *arg)
{
    run_note *rn = arg;
    pthread_mutex_lock(&rn->mu);
    while (!rn->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (rn->ttl_ms / 3 % 1000) * 1000000;
        ts.tv_sec += rn->ttl_ms / 3 / 1000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&rn->cv, &rn->mu, &ts);
        if (rn->stop)
            break;
        pthread_mutex_unlock(&rn->mu);
        put(rn, rn->text);
        pthread_mutex_lock(&rn->mu);
    }
    pthread_mutex_unlock(&rn->mu);
    return NULL;
}

run_note *run_note_start(const cli_opts *o, dlock_client *c, const char *const *names, int n,
                         const char *owner, char **cmd, int64_t ttl_ms, int renew)
{
    run_note *rn = calloc(1, sizeof(*rn));
    if (!rn || !(rn->text = run_command_text(cmd)) || ttl_ms <= 0) {
        if (rn)
            free(rn->text);
        free(rn);
        return NULL;
    }
    rn->o = o;
    rn->c = c;
    rn->names = names;
    rn->n = n;
    rn->owner = owner;
    rn->ttl_ms = ttl_ms;
    put(rn, rn->text);
    if (renew && !rn->failed) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&rn->cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&rn->mu, NULL);
        rn->started = pthread_create(&rn->th, NULL, renewer, rn) == 0;
        if (!rn->started) {
            pthread_cond_destroy(&rn->cv);
            pthread_mutex_destroy(&rn->mu);
        }
    }
    return rn;
}

void run_note_stop(run_note *rn, int delete)
{
    if (!rn)
        return;
    if (rn->started) {
        pthread_mutex_lock(&rn->mu);
        rn->stop = 1;
        pthread_cond_signal(&rn->cv);
        pthread_mutex_unlock(&rn->mu);
        pthread_join(rn->th, NULL);
        pthread_cond_destroy(&rn->cv);
        pthread_mutex_destroy(&rn->mu);
    }
    if (delete && !rn->failed)
        put(rn, NULL);
    free(rn->text);
    free(rn);
}
