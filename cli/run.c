/* dlock run: acquire, run the command (child.c), release when it is gone.
 *
 * Signals INT, TERM, HUP, QUIT, CHLD and CONT are blocked in every thread and
 * read from a signalfd, in one poll loop with the lost-lock pipe and the timers:
 *   - while waiting for the lock, a signal cancels the wait (the acquire runs in
 *     its own thread) and dlock exits 128+signal without running anything;
 *   - while the command runs, see child.c.
 * A hold that was lost is not released (nothing to release; and with Redis
 * gone a release would only retry); otherwise the release decides: a lock
 * the release finds gone was lost while the command ran. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

#define VERBOSE_EVERY_MS 10000

static int lost_pipe[2] = {-1, -1};
/* The cause of the last loss (the callback's argument). */
static _Atomic int lost_cause;

int run_lost_cause(void) { return atomic_load(&lost_cause); }

/* io thread: one byte per loss, the reason. */
static void on_lost(const char *name, const char *owner, dlock_lost_reason reason,
                    dlock_lost_cause cause, void *ud)
{
    (void)name;
    (void)owner;
    (void)ud;
    atomic_store(&lost_cause, (int)cause);
    char b = (char)reason;
    ssize_t w = write(lost_pipe[1], &b, 1);
    (void)w;
}

/* ------------------------------------------------------------- waiting */

/* The locks of a run: one handle, or several taken as one multi-lock (all or
 * nothing), all acting for the run's owner id. */
typedef struct target {
    dlock_election *e;       /* dlock elect: campaign and resign (l[0] inspects) */
    dlock_lock *l[RUN_MAX_NAMES];
    const char *names[RUN_MAX_NAMES];
    int n;
    dlock_multilock *ml;
    dlock_permit_semaphore *ps;   /* --semaphore: one permit of it instead */
    int64_t permits;              /* its total */
    char permit[DLOCK_PERMIT_ID_BUFSIZE];
    int lock_delay;               /* a lock-delay: a free permit may be in one */
} target;

static void target_free(target *t)
{
    dlock_permit_semaphore_free(t->ps);
    dlock_multilock_free(t->ml);
    dlock_election_free(t->e);
    for (int i = 0; i < t->n; i++)
        dlock_lock_free(t->l[i]);
    memset(t, 0, sizeof(*t));
}

static int target_open(const cli_opts *o, dlock_client *c, const run_args *ra, const char *owner,
                       target *t)
{
    memset(t, 0, sizeof(*t));
    if (ra->semaphore) {
        int code = run_sem_open(o, c, ra, &t->ps);
        if (code) {
            target_free(t);
            return code;
        }
        t->permits = ra->permits;
        t->lock_delay = ra->lock_delay_ms > 0;
        t->names[0] = ra->semaphore;
        return 0;
    }
    int rc = DLOCK_OK;
    for (int i = 0; i < ra->nnames && rc == DLOCK_OK; i++) {
        const char *nm = ra->names[i];
        switch (ra->kinds[i]) {
        case RUN_FAIR:
            rc = dlock_fair_lock_get_as(c, nm, owner, &t->l[i]);
            break;
        case RUN_READ:
            rc = dlock_read_lock_get_as(c, nm, owner, &t->l[i]);
            break;
        case RUN_WRITE:
            rc = dlock_write_lock_get_as(c, nm, owner, &t->l[i]);
            break;
        case RUN_SPIN:   /* waits on the back-off, subscribed to nothing */
            rc = dlock_spin_lock_get_as(c, nm, owner, &t->l[i]);
            break;
        default:
            rc = dlock_lock_get_as(c, nm, owner, &t->l[i]);
        }
        if (rc == DLOCK_OK)
            t->names[t->n++] = nm;
    }
    for (int i = 0; i < t->n && rc == DLOCK_OK && ra->max_hold_ms; i++)
        rc = dlock_lock_set_max_hold(t->l[i], ra->max_hold_ms);
    for (int i = 0; i < t->n && rc == DLOCK_OK && ra->lock_delay_ms; i++)
        rc = dlock_lock_set_lock_delay(t->l[i], ra->lock_delay_ms);
    t->lock_delay = ra->lock_delay_ms > 0;
    if (rc == DLOCK_OK && ra->elect)
        rc = dlock_election_get_as(c, ra->names[0], owner, &t->e);
    if (rc == DLOCK_OK && t->e && ra->max_hold_ms)
        rc = dlock_election_set_max_hold(t->e, ra->max_hold_ms);
    if (rc == DLOCK_OK && t->e && ra->lock_delay_ms)
        rc = dlock_election_set_lock_delay(t->e, ra->lock_delay_ms);
    if (rc == DLOCK_OK && t->n > 1)
        rc = dlock_multilock_new(t->l, (size_t)t->n, &t->ml);
    if (rc != DLOCK_OK) {
        int code = cli_fail(o, rc, t->n > 1 ? "bad lock names" : "bad lock name");
        target_free(t);
        return code;
    }
    return 0;
}

/* Takes every lock (a fencing token for a single lock only). */
static int target_acquire(target *t, int64_t wait_ms, int64_t lease_ms, dlock_cancel *cancel,
                          uint64_t *token)
{
    *token = 0;
    dlock_wait_opts o = {.wait_ms = wait_ms, .lease_ms = lease_ms, .cancel = cancel};
    if (t->ml)
        return dlock_multilock_acquire_opts(t->ml, &o);
    if (t->ps)   /* the watchdog's: a runner that dies gives it back (run_sem.c) */
        return dlock_permit_semaphore_acquire_opts(t->ps, &o, t->permit, sizeof(t->permit));
    o.token = token;
    return t->e ? dlock_election_campaign(t->e, &o) : dlock_lock_acquire_opts(t->l[0], &o);
}

static int target_release(target *t)
{
    if (t->e)
        return dlock_election_resign(t->e);
    if (t->ps)
        return dlock_permit_semaphore_release(t->ps, t->permit);
    return t->ml ? dlock_multilock_release(t->ml) : dlock_lock_release(t->l[0]);
}

/* The shortest TTL of the locks (what a --lease leaves), -1 when unknown. */
static int64_t target_ttl(target *t)
{
    int64_t least = -1;
    for (int i = 0; i < t->n; i++) {
        int64_t ttl;
        if (dlock_lock_ttl(t->l[i], &ttl) == DLOCK_OK && ttl >= 0 && (least < 0 || ttl < least))
            least = ttl;
    }
    return least;
}

typedef struct acquirer {
    target *t;
    int64_t wait_ms, lease_ms;
    dlock_cancel *cancel;
    uint64_t token;
    int rc;
    char err[512];
    int done_fd;
} acquirer;

static void *acquire_main(void *arg)
{
    acquirer *a = arg;
    a->rc = target_acquire(a->t, a->wait_ms, a->lease_ms, a->cancel, &a->token);
    snprintf(a->err, sizeof(a->err), "%s", dlock_last_error());   /* thread-local */
    char b = 1;
    ssize_t w = write(a->done_fd, &b, 1);
    (void)w;
    return NULL;
}

/* "held by <owner> (dlock run on web1, pid 42 (...), for 3 s: make), 12.3 s left"
 * for the first of the run's locks that somebody holds ("'b' is held by ..."
 * when the run has several). */
static void describe_holder(dlock_client *c, target *t, char *buf, size_t size)
{
    if (t->ps) {
        run_sem_describe(t->ps, t->permits, t->lock_delay, buf, size);
        return;
    }
    dlock_info *info = NULL;
    int k = 0;
    for (; k < t->n; k++) {
        if (dlock_lock_inspect(t->l[k], &info) == DLOCK_OK && dlock_info_locked(info))
            break;
        dlock_info_free(info);
        info = NULL;
    }
    if (!info) {
        /* Refused while free: the lock-delay of a holder that lost it, the
         * next turn reserved for a long waiter, or earlier fair-lock waiters
         * going first (or the holder let go just now). */
        snprintf(buf, size, "free, but not to be taken yet: in the lock-delay of a holder "
                            "that lost it without releasing (its command may still run), or "
                            "a turn reserved for another waiter (earlier waiters of a fair "
                            "lock go first)");
        return;
    }
    char ttl[32], left[48], who[120], d[300], holds[32] = "", which[240] = "", nm[200];
    int64_t tt = dlock_info_ttl(info);
    long long n = (long long)dlock_info_hold_count(info, 0);
    if (tt >= 0)
        snprintf(left, sizeof(left), "%s left", cli_fmt_duration(tt, ttl, sizeof(ttl)));
    else
        snprintf(left, sizeof(left), "with no expiry");
    cli_esc(dlock_info_owner(info, 0), who, sizeof(who));
    holder_map *map = holder_map_load(c);
    holder_describe(map, t->names[k], dlock_info_owner(info, 0), 0, d, sizeof(d));
    holder_map_free(map);
    if (n > 1)
        snprintf(holds, sizeof(holds), ", %lld holds", n);
    if (t->n > 1)
        snprintf(which, sizeof(which), "'%s' ", cli_esc(t->names[k], nm, sizeof(nm)));
    snprintf(buf, size, "%sheld by %s (%s%s), %s", which, who, d[0] ? d : "?", holds, left);
    dlock_info_free(info);
}

/* -v: a line when the wait starts and every 10 s; on a terminal, one line
 * rewritten every second. */
typedef struct progress {
    int on, tty, shown;
    int64_t start, next;
} progress;

static void progress_tick(const cli_opts *o, progress *pg, dlock_client *c, target *t,
                          const char *nm)
{
    char who[600], so_far[32];
    int64_t now = mono_ms();
    describe_holder(c, t, who, sizeof(who));
    cli_fmt_duration(now - pg->start, so_far, sizeof(so_far));
    if (pg->tty) {
        /* One line, rewritten: longer than the terminal it would wrap and
         * scroll at every update. */
        char line[900];
        struct winsize ws;
        snprintf(line, sizeof(line), "dlock: waiting for '%s' (%s so far): %s", nm, so_far, who);
        if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
            cli_fit(line, ws.ws_col);
        fprintf(stderr, "\r\033[K%s", line);
    }
    else if (!pg->shown)
        cli_err(o, "waiting for '%s': %s", nm, who);
    else
        cli_err(o, "still waiting for '%s' (%s so far): %s", nm, so_far, who);
    fflush(stderr);
    pg->shown = 1;
    pg->next = now + (pg->tty ? 1000 : VERBOSE_EVERY_MS);
}

/* After DLOCK_EWRONGTYPE: "key 'k' holds a string, not a lock" for the name
 * that holds something else. 0 when none does (any more). */
static int say_wrong_type(const cli_opts *o, const run_args *ra, dlock_client *c,
                          const target *tg)
{
    if (tg->ps)
        return cli_wrong_type(o, c, ra->semaphore, DLOCK_KIND_PERMITS, "a permit semaphore");
    for (int k = 0; k < ra->nnames; k++) {
        int rw = ra->kinds[k] == RUN_READ || ra->kinds[k] == RUN_WRITE;
        if (cli_wrong_type(o, c, ra->names[k], rw ? DLOCK_KIND_RWLOCK : DLOCK_KIND_LOCK,
                           rw ? "a read-write lock" : "a lock"))
            return 1;
    }
    return 0;
}

/* Waits for the lock while watching for signals. Returns 1 when acquired
 * (*token set), else 0 and *code = the exit code (which may be 0: -E 0). */
static int acquire_watching(const cli_opts *o, const run_args *ra, dlock_client *c,
                            target *tg, int sfd, uint64_t *token, int *code)
{
    int done[2];
    dlock_cancel *cancel = NULL;
    if (pipe2(done, O_CLOEXEC) != 0 || dlock_cancel_new(&cancel) != DLOCK_OK) {
        cli_err(o, "cannot set up the wait: %s", strerror(errno));
        *code = EXIT_SOFTWARE;
        return 0;
    }
    acquirer a = {tg, ra->wait_ms, ra->lease_ms, cancel, 0, 0, "", done[1]};
    pthread_t t;
    if (pthread_create(&t, NULL, acquire_main, &a) != 0) {
        cli_err(o, "cannot start a thread");
        *code = EXIT_SOFTWARE;
        return 0;
    }
    char nm[200];
    cli_esc(ra->name, nm, sizeof(nm));
    progress pg = {ra->verbose && !o->quiet, isatty(STDERR_FILENO), 0, mono_ms(), 0};
    pg.next = pg.start + 100;   /* not acquired at once: it is a wait */
    int sig = 0;
    for (;;) {
        int64_t left = pg.next - mono_ms();
        struct pollfd p[2] = {{done[0], POLLIN, 0}, {sfd, POLLIN, 0}};
        int n = poll(p, 2, pg.on && !sig ? (int)(left > 0 ? left : 0) : -1);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && p[0].revents)
            break;
        if (n > 0 && p[1].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD &&
                si.ssi_signo != SIGCONT && !sig) {
                sig = (int)si.ssi_signo;
                dlock_cancel_fire(cancel);
            }
        }
        if (n == 0 && pg.on)
            progress_tick(o, &pg, c, tg, nm);
    }
    pthread_join(t, NULL);
    close(done[0]);
    close(done[1]);
    dlock_cancel_free(cancel);
    if (pg.tty && pg.shown)
        fputs("\r\033[K", stderr);
    if (a.rc == DLOCK_OK) {
        if (sig) {
            /* Acquired just as the signal came: give it back and leave. */
            target_release(tg);
            *code = 128 + sig;
            return 0;
        }
        if (pg.on) {
            char took[32];
            if (tg->ps)
                cli_err(o, "acquired a permit of '%s' after %s (permit %s)", nm,
                        cli_fmt_duration(mono_ms() - pg.start, took, sizeof(took)), tg->permit);
            else if (tg->ml)
                cli_err(o, "acquired '%s' after %s", nm,
                        cli_fmt_duration(mono_ms() - pg.start, took, sizeof(took)));
            else
                cli_err(o, "acquired '%s' after %s (fencing token %llu)", nm,
                        cli_fmt_duration(mono_ms() - pg.start, took, sizeof(took)),
                        (unsigned long long)a.token);
        }
        *token = a.token;
        return 1;
    }
    if (a.rc == DLOCK_ECANCELED) {
        cli_err(o, "interrupted (%s) while waiting for '%s'", strsignal(sig), nm);
        *code = 128 + sig;
        return 0;
    }
    if (a.rc == DLOCK_ETIMEDOUT && strstr(dlock_last_error(), "failover quarantine")) {
        char waited[32];
        cli_err(o, "%s; not acquired within %s", dlock_last_error(),
                cli_fmt_duration(ra->wait_ms, waited, sizeof(waited)));
        *code = ra->conflict_code;
        return 0;
    }
    if (a.rc == DLOCK_ETIMEDOUT) {
        char who[600], waited[32];
        describe_holder(c, tg, who, sizeof(who));
        cli_err(o, "'%s' is %s; not acquired within %s", nm, who,
                cli_fmt_duration(ra->wait_ms, waited, sizeof(waited)));
        *code = ra->conflict_code;
        return 0;
    }
    if (a.rc == DLOCK_EWRONGTYPE) {
        if (!say_wrong_type(o, ra, c, tg))
            cli_err(o, "cannot acquire '%s': a key of it holds another type; dlock leaves it as "
                       "it is", nm);
        *code = EXIT_DATAERR;
        return 0;
    }
    char d[700];
    cli_err(o, "cannot acquire '%s': %s", nm,
            a.err[0] ? cli_detail(o, a.err, d, sizeof(d)) : dlock_strerror(a.rc));
    *code = cli_exit_code(a.rc, a.err);
    return 0;
}

/* ----------------------------------------------------------------- run */

/* The hold ended: release it unless it was lost. Returns the loss reason
 * (LOST_AT_RELEASE when the release found it gone), else 0. */
static int finish_hold(const cli_opts *o, const run_args *ra, target *t, int lost,
                       const run_hold *h)
{
    int64_t lease_deadline = h->lease_deadline;
    char nm[200], c0[200], why[200];
    cli_esc(ra->name, nm, sizeof(nm));
    cli_esc(ra->cmd[0], c0, sizeof(c0));
    if (lost) {
        /* Nothing to release, but the hold's lock-delay ends here: every
         * process of the tree is gone, so the lock may reopen now rather than
         * when the delay runs out. Not with Redis unreachable: a release
         * would only wait; the delay runs out by itself. */
        if (lost != DLOCK_LOST_UNREACHABLE)
            target_release(t);
        return lost;
    }
    int64_t at = mono_ms();
    int rc = target_release(t);
    if (rc == DLOCK_OK)
        return 0;
    if (rc != DLOCK_ENOTOWNER) {
        char e[300];
        cli_err(o, "warning: cannot release '%s' (%s); it ends with its lease", nm,
                cli_esc(dlock_last_error(), e, sizeof(e)));
        return 0;
    }
    if (lease_deadline >= 0 && at >= lease_deadline) {
        cli_err(o, "warning: the --lease of '%s' ran out as '%s' ended", nm, c0);
        return 0;
    }
    lost_why(h, LOST_AT_RELEASE, why, sizeof(why));
    if (ra->on_lost_term)
        cli_err(o, "%s '%s' was lost while '%s' ran (%s)", ra->noun, nm, c0, why);
    else
        cli_err(o, "warning: %s '%s' was lost while '%s' ran (%s) (--on-lost ignore)", ra->noun,
                nm, c0, why);
    return LOST_AT_RELEASE;
}

/* One line on stderr (not with -q) when the server's maxmemory-policy may
 * evict what the run holds, as status and doctor say it. */
static void warn_eviction(const cli_opts *o, const run_args *ra, dlock_client *c)
{
    char policy[64] = "";
    int risky = 0;
    if (o->quiet || dlock_client_eviction_policy(c, policy, sizeof(policy), &risky) != DLOCK_OK ||
        !risky)
        return;
    cli_err(o, "warning: Redis's maxmemory-policy is %s: when its memory is full it may evict "
               "the %s this run holds while the command runs, and another take it; use "
               "noeviction (dlock doctor)",
            policy, ra->semaphore ? "permit" : ra->elect ? "leadership" : "lock");
}

static int run_locked(cli_opts *o, const run_args *ra, guard *g, int sfd)
{
    dlock_client *c;
    o->label = "run-waiting";
    /* A wait given with -w bounds the connect too: a server that accepts and
     * never answers costs that wait, not the connect timeout. */
    if (ra->wait_ms != DLOCK_WAIT_FOREVER)
        o->connect_bound_ms = ra->wait_ms > 0 ? ra->wait_ms : 1;
    int code = cli_open(o, &c, on_lost, NULL);
    if (code)
        return code;
    warn_eviction(o, ra, c);
    /* The wait runs in a thread and the release on this one: act as one
     * explicit owner id for both, not as two thread ids. */
    char owner[DLOCK_OWNER_MAX + 1] = "";
    target tg;
    memset(&tg, 0, sizeof(tg));
    int reentry = 0;
    /* A permit belongs to no owner (its id names it): nothing to re-enter. */
    code = ra->semaphore ? 0 : run_choose_owner(o, c, ra, owner, sizeof(owner), &reentry);
    if (code == 0)
        code = target_open(o, c, ra, owner, &tg);
    /* Revoke requests are heard for the run's locks (a semaphore's permit and
     * an election's leadership have none). */
    if (code == 0 && !ra->semaphore && !ra->elect)
        code = run_revoke_listen(o, tg.l, tg.n);
    uint64_t token = 0;
    if (code == 0 && reentry && ra->verbose) {
        char nm[200];
        cli_err(o, "re-entering '%s': a dlock run around this one holds it (owner %s)",
                cli_esc(ra->name, nm, sizeof(nm)), owner);
    }
    if (code != 0 || !acquire_watching(o, ra, c, &tg, sfd, &token, &code)) {
        target_free(&tg);
        dlock_client_close(c);
        return code;
    }
    /* Who holds it, for status and list: this host and pid (the connection
     * name), since when (its label), and what for: the command, in a note
     * beside the lock that only its readers read (CLIENT LIST shows labels
     * to every user allowed to list). A re-entry keeps the outer run's. */
    char label[80];
    run_label(wall_ms(), tg.ps ? tg.permit : NULL, label, sizeof(label));
    dlock_client_set_label(c, label);
    run_note *note = reentry ? NULL
                             : run_note_start(o, c, tg.names, tg.ps ? 1 : tg.n,
                                              tg.ps ? tg.permit : owner, ra->cmd,
                                              ra->lease_ms != DLOCK_WATCHDOG ? ra->lease_ms
                                                                             : ra->watchdog_ms,
                                              ra->lease_ms == DLOCK_WATCHDOG);
    /* A --lease is renewed by nobody: the lock is gone when its TTL runs out
     * (the first of them to go, for several). Counting the TTL read just now
     * from before the read errs early. */
    run_hold hold = {c, sfd, lost_pipe[0], -1, 0, run_revoke_fd()};
    if (ra->lease_ms != DLOCK_WATCHDOG) {
        int64_t before = mono_ms(), ttl = target_ttl(&tg);
        hold.lease_deadline = before + (ttl >= 0 ? ttl : 0);
    }
    dlock_stats st;
    if (dlock_client_stats(c, &st, sizeof(st)) == DLOCK_OK)
        hold.reconnects = st.reconnects;
    /* DLOCK_NAME: the name (the first, for several; DLOCK_NAMES lists them
     * all, one per line). DLOCK_TOKEN: a single lock's fencing token. */
    size_t all = 16;
    for (int k = 0; k < ra->nnames; k++)
        all += strlen(ra->names[k]) + 1;
    char tok[40], term[40], own[DLOCK_OWNER_MAX + 16];
    char *name_var = malloc(strlen(ra->names[0]) + 12);
    char *names_var = malloc(all);
    /* A semaphore run passes the owners of the runs around it on as they are
     * (its command may re-enter their locks) and names its permit instead. */
    char *owners = ra->semaphore ? NULL : run_owners_var(owner);
    char permit_var[DLOCK_PERMIT_ID_BUFSIZE + 16];
    snprintf(permit_var, sizeof(permit_var), "DLOCK_PERMIT=%s", tg.permit);
    snprintf(tok, sizeof(tok), "DLOCK_TOKEN=%llu", (unsigned long long)token);
    /* DLOCK_TERM: an election's term (its lock's token). */
    snprintf(term, sizeof(term), "DLOCK_TERM=%llu", (unsigned long long)token);
    snprintf(own, sizeof(own), "DLOCK_OWNER=%s", owner);
    int lost = 0, status = 0;
    if (!name_var || !names_var || (!owners && !ra->semaphore)) {
        cli_err(o, "out of memory");
        code = EXIT_SOFTWARE;
    } else {
        sprintf(name_var, "DLOCK_NAME=%s", ra->names[0]);
        size_t off = (size_t)sprintf(names_var, "DLOCK_NAMES=");
        for (int k = 0; k < ra->nnames; k++)
            off += (size_t)sprintf(names_var + off, "%s%s", k ? "\n" : "", ra->names[k]);
        char *set[] = {name_var, names_var, tg.ml || tg.ps ? "DLOCK_TOKEN=" : tok,
                       tg.ps ? permit_var : own, owners, ra->elect ? term : NULL};
        /* Redis credentials stay out of CMD's environment unless asked. */
        char *extra[sizeof(set) / sizeof(set[0]) + 4], *url_var = NULL;
        int ne = ra->keep_env_secrets ? 0 : guard_env_scrub(extra, &url_var);
        for (size_t k = 0; k < sizeof(set) / sizeof(set[0]); k++)
            if (set[k])
                extra[ne++] = set[k];
        extra[ne] = NULL;
        code = guard_exec(o, g, ra->cmd[0], extra);
        free(url_var);
    }
    free(name_var);
    free(names_var);
    free(owners);
    if (code == 0) {
        status = supervise(o, ra, g, &hold, &lost);
        if (status < 0)
            code = EXIT_SOFTWARE;
    }
    run_note_stop(note, !lost);
    lost = finish_hold(o, ra, &tg, lost, &hold);
    target_free(&tg);
    dlock_client_close(c);
    if (code)
        return code;
    /* A lost hold says so in the exit status, --on-lost ignore included:
     * with -q a cron job still tells (--lost-exit-code picks another). */
    if (lost && ra->lost_code >= 0)
        return ra->lost_code;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_SOFTWARE;
}

static int run_main(cli_opts *o, run_args *ra);

int cmd_run(cli_opts *o, int argc, char **argv)
{
    run_args ra;
    if (run_parse_args(o, argc, argv, &ra) != 0)
        return EXIT_USAGE;
    return ra.rate_n ? run_rate(o, &ra) : run_main(o, &ra);
}

/* dlock elect NAME -- CMD: a run whose lock is election NAME's, taken by
 * campaigning (announced to observers), resigned at the end, DLOCK_TERM. */
int cmd_elect(cli_opts *o, int argc, char **argv)
{
    run_args ra;
    if (run_parse_args(o, argc, argv, &ra) != 0)
        return EXIT_USAGE;
    if (ra.nnames != 1 || ra.kinds[0] != RUN_LOCK || ra.stripes || ra.semaphore || ra.rate_n) {
        cli_usage_error(o, "elect", "one election NAME (no --fair, --read, --write, --stripes, "
                                    "--semaphore, --rate)");
        return EXIT_USAGE;
    }
    if (ra.lease_ms != DLOCK_WATCHDOG) {
        cli_usage_error(o, "elect", "a leader is kept by the watchdog: no --lease");
        return EXIT_USAGE;
    }
    ra.elect = 1;
    ra.noun = "leadership of election";
    return run_main(o, &ra);
}

static int run_main(cli_opts *o, run_args *rap)
{
    run_args ra = *rap;
    /* Block before any thread exists (the io thread and the guard inherit the
     * mask); a write to a guard that died must not kill us. */
    sigset_t mask;
    sigemptyset(&mask);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGCONT};
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaddset(&mask, sigs[k]);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Should the guard die, what CMD started comes to us, to be ended. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    guard *g;
    int code = guard_start(o, ra.cmd, &g);
    if (code)
        return code;
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0 || pipe2(lost_pipe, O_CLOEXEC) != 0) {
        cli_err(o, "cannot set up signals: %s", strerror(errno));
        guard_stop(g);
        return EXIT_SOFTWARE;
    }
    code = run_locked(o, &ra, g, sfd);
    guard_stop(g);
    close(sfd);
    return code;
}
