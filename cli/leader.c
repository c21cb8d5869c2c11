/* dlock leader NAME [--watch]: who leads election NAME (term, host, pid,
 * owner id), and with --watch each change as it comes (woken by the
 * election's messages), until interrupted. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"

/* The thread that ends a --watch: a signal fires the cancel of its wait. */
typedef struct sig_watch {
    int sfd;
    int stop[2];   /* closed by the main thread: the watch is over */
    dlock_cancel *cancel;
} sig_watch;

static void *sig_main(void *arg)
{
    sig_watch *sw = arg;
    struct pollfd p[2] = {{sw->sfd, POLLIN, 0}, {sw->stop[0], POLLIN, 0}};
    while (poll(p, 2, -1) < 0 && errno == EINTR) {
    }
    if (p[0].revents)
        dlock_cancel_fire(sw->cancel);
    return NULL;
}

static void sig_watch_close(sig_watch *sw)
{
    if (sw->sfd >= 0)
        close(sw->sfd);
    for (int i = 0; i < 2; i++)
        if (sw->stop[i] >= 0)
            close(sw->stop[i]);
    dlock_cancel_free(sw->cancel);
}

/* Stops the thread (t NULL: none was started) and frees the rest. */
static void sig_watch_end(sig_watch *sw, pthread_t *t)
{
    if (t) {
        close(sw->stop[1]);
        sw->stop[1] = -1;
        pthread_join(*t, NULL);
    }
    sig_watch_close(sw);
}

static void show(const char *name, uint64_t term, const char *who)
{
    char nm[200];
    if (term)
        printf("%s: term %llu, %s\n", cli_esc(name, nm, sizeof(nm)), (unsigned long long)term,
               who);
    else
        printf("%s: no leader\n", cli_esc(name, nm, sizeof(nm)));
    fflush(stdout);
}

int cmd_leader(cli_opts *o, int argc, char **argv)
{
    const char *name = NULL;
    int watch = 0, r;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--watch") == 0 || strcmp(argv[i], "-w") == 0) {
            watch = 1;
        } else if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_usage_error(o, "leader", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else if (name) {
            cli_usage_error(o, "leader", "one election NAME");
            return EXIT_USAGE;
        } else {
            name = argv[i];
        }
    }
    if (!name) {
        cli_usage_error(o, "leader", "missing election NAME");
        return EXIT_USAGE;
    }
    /* --watch ends at SIGINT, SIGTERM or SIGHUP, also when started with them
     * ignored (a background job of a script): blocked in every thread (the
     * library's inherit the mask), read by one that cancels the wait. */
    sig_watch sw = {-1, {-1, -1}, NULL};
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    pthread_t t;
    int watching = 0;
    if (watch) {
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        if ((sw.sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0 || pipe2(sw.stop, O_CLOEXEC) != 0 ||
            dlock_cancel_new(&sw.cancel) != DLOCK_OK ||
            pthread_create(&t, NULL, sig_main, &sw) != 0) {
            cli_err(o, "cannot watch for signals: %s", strerror(errno));
            sig_watch_close(&sw);
            return EXIT_SOFTWARE;
        }
        watching = 1;
    }
    dlock_client *c;
    o->label = "leader";
    int code = cli_open(o, &c, NULL, NULL);
    if (code) {
        sig_watch_end(&sw, watching ? &t : NULL);
        return code;
    }
    dlock_election *e = NULL;
    int rc = dlock_election_get(c, name, &e);
    uint64_t term = 0;
    char who[600];
    if (rc == DLOCK_OK)
        rc = dlock_election_leader(e, &term, who, sizeof(who));
    if (rc == DLOCK_OK)
        show(name, term, who);
    while (rc == DLOCK_OK && watch) {
        dlock_wait_opts wo = {.wait_ms = DLOCK_WAIT_FOREVER, .cancel = sw.cancel};
        rc = dlock_election_await_change(e, term, &wo, &term, who, sizeof(who));
        if (rc == DLOCK_OK)
            show(name, term, who);
    }
    if (rc != DLOCK_OK && rc != DLOCK_ECANCELED)   /* a signal: the end asked for */
        code = cli_fail(o, rc, "leader");
    dlock_election_free(e);
    dlock_client_close(c);
    sig_watch_end(&sw, watching ? &t : NULL);
    return code;
}
