/* dlock run --on-revoke term|ignore|CMD: what the running command gets when
 * somebody asks the run's lock back (dlock revoke NAME, or a program's
 * dlock_lock_request_revoke). The run's lock handles have a revoke handler
 * (on the library's io thread) that writes one byte per request to a pipe
 * supervise() polls; the note of the last request is kept for CMD's
 * environment. term ends CMD's tree as a lost lock does (SIGTERM, SIGKILL
 * after --kill-after), but the lock is released normally at the end; ignore
 * says so and carries on; a CMD is started (/bin/sh -c CMD) once per
 * request, and dlock waits for the ones still running before it exits. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

extern char **environ;

#define MAX_PENDING 64

static int revoke_pipe[2] = {-1, -1};
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_note[DLOCK_REVOKE_NOTE_MAX + 1];
static pid_t pending[MAX_PENDING];
static int npending;

/* io thread: one byte per request heard. */
static void on_revoke(const char *name, const char *owner, const char *note, void *ud)
{
    (void)name;
    (void)owner;
    (void)ud;
    pthread_mutex_lock(&note_mu);
    snprintf(last_note, sizeof(last_note), "%s", note);
    pthread_mutex_unlock(&note_mu);
    char b = 'R';
    ssize_t w = write(revoke_pipe[1], &b, 1);
    (void)w;
}

int run_revoke_listen(const cli_opts *o, dlock_lock *const *l, int n)
{
    if (revoke_pipe[0] < 0 && pipe2(revoke_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_err(o, "cannot set up revoke requests: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    for (int i = 0; i < n; i++) {
        int rc = dlock_lock_set_revoke_handler(l[i], on_revoke, NULL);
        if (rc != DLOCK_OK)
            return cli_fail(o, rc, "listening for revoke requests");
    }
    return 0;
}

int run_revoke_fd(void) { return revoke_pipe[0]; }

int run_revoke_take(void)
{
    char b[64];
    ssize_t n = revoke_pipe[0] >= 0 ? read(revoke_pipe[0], b, sizeof(b)) : 0;
    return n > 0 ? (int)n : 0;
}

void run_revoke_spawn(const cli_opts *o, const run_args *ra)
{
    run_revoke_reap(0);
    if (npending == MAX_PENDING) {
        cli_err(o, "revoke request: %d --on-revoke commands still run; not starting another",
                MAX_PENDING);
        return;
    }
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = malloc((ne + 3) * sizeof(*env));
    char *note_var = malloc(sizeof(last_note) + 32);
    char *name_var = malloc(strlen(ra->names[0]) + 16);
    if (!env || !note_var || !name_var) {
        cli_err(o, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&note_mu);
    sprintf(note_var, "DLOCK_REVOKE_NOTE=%s", last_note);
    pthread_mutex_unlock(&note_mu);
    sprintf(name_var, "DLOCK_NAME=%s", ra->names[0]);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "DLOCK_REVOKE_NOTE=", 18) != 0 &&
            strncmp(environ[i], "DLOCK_NAME=", 11) != 0)
            env[k++] = environ[i];
    env[k++] = name_var;
    env[k++] = note_var;
    env[k] = NULL;
    char *argv[] = {"/bin/sh", "-c", (char *)ra->on_revoke_cmd, NULL};
    pid_t pid;
    /* The signals supervise() reads are blocked here: the command gets the
     * default mask. */
    posix_spawnattr_t at;
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int err = posix_spawn(&pid, "/bin/sh", NULL, &at, argv, env);
    posix_spawnattr_destroy(&at);
    if (err != 0)
        cli_err(o, "revoke request: cannot start --on-revoke command: %s", strerror(err));
    else
        pending[npending++] = pid;
out:
    free(env);
    free(note_var);
    free(name_var);
}

void run_revoke_reap(int block)
{
    for (int i = 0; i < npending;) {
        int st;
        pid_t r = waitpid(pending[i], &st, block ? 0 : WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR)) {
            i++;
            continue;
        }
        pending[i] = pending[--npending];
    }
}
