/* dlock run: the life of CMD's process tree while the lock is held (the
 * rules are in child.c's header), and the words for a lost hold. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

/* The last pause of this process long enough to count (stopped by SIGSTOP or
 * Ctrl-Z, or starved of CPU), measured on CLOCK_BOOTTIME around each poll:
 * what the poll slept beyond its timeout. */
static int64_t pause_ms, pause_at = -1, hold_lease_ms, hold_limit_ms;

static int64_t boot_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A pause is to blame for a loss when it came within a lease of it and was
 * long enough to let the lease run out between two renewals. */
static int paused_past_lease(void)
{
    return pause_at >= 0 && boot_ms() - pause_at <= hold_lease_ms + 2000 &&
           pause_ms >= hold_lease_ms / 2;
}

/* 1 when a connection of the client was lost and made again since the hold
 * began: a lock found gone then was most likely lost with the server's data. */
static int reconnected(const run_hold *h)
{
    dlock_stats st;
    return h && h->c && dlock_client_stats(h->c, &st, sizeof(st)) == DLOCK_OK &&
           st.reconnects > h->reconnects;
}

/* The library's cause of a hold found gone, in words; 0 when it could not
 * tell. */
static int gone_cause(char *buf, size_t size)
{
    const char *why;
    switch (run_lost_cause()) {
    case DLOCK_CAUSE_EVICTED:
        why = "evicted: Redis evicted it to free memory (its maxmemory-policy evicts locks; "
              "dlock doctor tells)";
        break;
    case DLOCK_CAUSE_DELETED:
        why = "deleted by another client (a force unlock, a DEL)";
        break;
    case DLOCK_CAUSE_FLUSHED:
        why = "flushed: FLUSHALL or FLUSHDB emptied Redis";
        break;
    case DLOCK_CAUSE_FAILOVER:
        why = "failover: Redis restarted or failed over without it (a new run_id)";
        break;
    case DLOCK_CAUSE_EXPIRED:
        why = "expired: its lease ran out before a renewal";
        break;
    case DLOCK_CAUSE_CLOCK_JUMP:
        /* Not found gone: its expiry can no longer be trusted. */
        snprintf(buf, size, "Redis's clock jumped forward (server clock jumped): it may "
                            "have expired the lock early; acquisitions there wait one lease");
        return 1;
    default:
        return 0;
    }
    snprintf(buf, size, "a renewal found it gone, %s", why);
    return 1;
}

const char *lost_why(const run_hold *h, int reason, char *buf, size_t size)
{
    char a[32], b[32];
    /* The library says DLOCK_LOST_PAUSED when its renewal tick came late; we
     * also measure our own poll loop, which sees a stop the io thread may
     * report as a renewal that found the lock gone. */
    if (reason == DLOCK_LOST_PAUSED ||
        (reason != LOST_LEASE && reason != DLOCK_LOST_MAX_HOLD && paused_past_lease())) {
        if (pause_at >= 0)
            snprintf(buf, size, "this process was paused (stopped, or starved of CPU) for %s or "
                                "more, past its lease of %s: Redis let the lock go",
                     cli_fmt_duration(pause_ms, a, sizeof(a)),
                     cli_fmt_duration(hold_lease_ms, b, sizeof(b)));
        else
            snprintf(buf, size, "this process was paused (stopped, or starved of CPU) past its "
                                "lease: Redis let the lock go");
        return buf;
    }
    switch (reason) {
    case DLOCK_LOST_GONE:
        if (gone_cause(buf, size))
            break;
        if (reconnected(h))
            snprintf(buf, size, "the connection to Redis was lost, and once made again a "
                                "renewal found the lock gone: Redis restarted or failed over "
                                "without it (or it was forced open meanwhile)");
        else
            snprintf(buf, size, "a renewal found it gone: forced open or deleted");
        break;
    case DLOCK_LOST_UNREACHABLE:
        snprintf(buf, size, "Redis was unreachable until the lease ran out");
        break;
    case DLOCK_LOST_REPLICAS:
        snprintf(buf, size, "a renewal was acknowledged by too few replicas: no longer renewed");
        break;
    case DLOCK_LOST_MAX_HOLD:
        snprintf(buf, size, "held for its --max-hold of %s: the watchdog stopped renewing it",
                 cli_fmt_duration(hold_limit_ms, a, sizeof(a)));
        break;
    case LOST_LEASE:
        snprintf(buf, size, "its --lease of %s ran out", cli_fmt_duration(hold_lease_ms, a,
                                                                         sizeof(a)));
        break;
    case LOST_AT_RELEASE:
        snprintf(buf, size, reconnected(h) ? "the release found it gone after a reconnect: "
                                             "Redis restarted or failed over without it (or "
                                             "it was forced open meanwhile)"
                                           : "the release found it gone: forced open, deleted "
                                             "or expired");
        break;
    default:
        snprintf(buf, size, "lost (reason %d)", reason);
    }
    return buf;
}

/* ------------------------------------------------------------ the tree */

typedef struct sup {
    const cli_opts *o;
    const run_args *ra;
    guard *g;
    run_hold *h;
    char nm[200], c0[200], grace[32], tree[240];
    int status, cmd_done, all_gone, lost;
    int revoked;       /* --on-revoke term: the tree was told to end */
    int64_t kill_at;   /* SIGKILL to the whole tree then; -1: not due */
} sup;

/* "'make' and everything it started", or "what 'make' left running". */
static const char *tree_words(sup *s)
{
    snprintf(s->tree, sizeof(s->tree), s->cmd_done ? "what '%s' left running"
                                                   : "'%s' and everything it started", s->c0);
    return s->tree;
}

/* sig to the tree ('S': every descendant; 'O': those outside our process
 * group, which the terminal did not reach), SIGKILL after the grace. */
static void end_tree(sup *s, char op, int sig)
{
    guard_send(s->g, op, sig);
    if (s->kill_at < 0)
        s->kill_at = mono_ms() + s->ra->kill_after_ms;
}

static void on_signal(sup *s, const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;
    if (sig == SIGCHLD || sig == SIGCONT)
        return;
    /* A signal a process sent to dlock is meant for what it runs. The
     * terminal's reached CMD's process group already: while CMD runs it is
     * CMD's business (an interactive program may carry on after Ctrl-C);
     * once CMD has ended it goes on to the leftovers outside the group. */
    int from_process = si->ssi_code <= 0;
    if (!from_process && !s->cmd_done)
        return;
    if (s->ra->verbose)
        cli_err(s->o, "SIG%s: passed on to %s; '%s' stays held until they are gone (SIGKILL "
                      "after %s)", sig == SIGINT ? "INT" : sig == SIGTERM ? "TERM"
                                   : sig == SIGHUP ? "HUP" : "QUIT",
                tree_words(s), s->nm, s->grace);
    end_tree(s, from_process ? 'S' : 'O', sig);
}

static void on_lost(sup *s, int reason)
{
    char why[200];
    s->lost = reason;
    lost_why(s->h, reason, why, sizeof(why));
    if (s->ra->on_lost_term) {
        cli_err(s->o, "%s '%s' lost while '%s' ran (%s): SIGTERM to %s, SIGKILL after %s",
                s->ra->noun, s->nm, s->c0, why, tree_words(s), s->grace);
        end_tree(s, 'S', SIGTERM);
    } else {
        cli_err(s->o, "warning: %s '%s' lost while '%s' ran (%s); carrying on (--on-lost "
                      "ignore)", s->ra->noun, s->nm, s->c0, why);
    }
}

/* n revoke requests heard (run_revoke.c): --on-revoke's answer. The lock
 * stays the run's: released as usual once the tree is gone. */
static void on_revoke(sup *s, int n)
{
    const run_args *ra = s->ra;
    if (ra->on_revoke == RUN_REVOKE_IGNORE) {
        cli_err(s->o, "warning: revoke requested for %s '%s' while '%s' ran; carrying on "
                      "(--on-revoke ignore)", ra->noun, s->nm, s->c0);
    } else if (ra->on_revoke == RUN_REVOKE_CMD) {
        if (ra->verbose)
            cli_err(s->o, "revoke requested for %s '%s': running the --on-revoke command",
                    ra->noun, s->nm);
        for (int i = 0; i < n; i++)
            run_revoke_spawn(s->o, ra);
    } else if (!s->revoked && !s->lost) {
        /* As for a lost lock (on_lost), but nothing was lost. */
        s->revoked = 1;
        cli_err(s->o, "revoke requested for %s '%s' while '%s' ran: SIGTERM to %s, SIGKILL "
                      "after %s; released once they are gone", ra->noun, s->nm, s->c0,
                tree_words(s), s->grace);
        end_tree(s, 'S', SIGTERM);
    }
}

/* One message from the guard; -1 when it is gone. */
static int on_guard(sup *s)
{
    char op;
    int32_t v;
    if (guard_read(s->g, &op, &v) != 0)
        return -1;
    if (op == 'W') {
        s->status = v;
        s->cmd_done = 1;
    } else if (op == 'R' && v > 0 && s->ra->kill_orphans) {
        if (s->ra->verbose)
            cli_err(s->o, "'%s' ended and left %d process%s running: SIGTERM to them "
                          "(--kill-orphans), SIGKILL after %s; '%s' is held until they end",
                    s->c0, v, v == 1 ? "" : "es", s->grace, s->nm);
        end_tree(s, 'S', SIGTERM);
    } else if (op == 'R' && v > 0 && s->ra->verbose) {
        cli_err(s->o, "'%s' ended and left %d process%s running: '%s' stays held until %s "
                      "(--kill-orphans ends them)", s->c0, v, v == 1 ? "" : "es", s->nm,
                v == 1 ? "it ends" : "they end");
    } else if (op == 'A') {
        s->all_gone = 1;
    }
    return 0;
}

int supervise(const cli_opts *o, const run_args *ra, guard *g, run_hold *h, int *lost)
{
    int64_t lease_deadline = h->lease_deadline;
    hold_lease_ms = ra->lease_ms != DLOCK_WATCHDOG ? ra->lease_ms : ra->watchdog_ms;
    hold_limit_ms = ra->max_hold_ms;
    int64_t tick = hold_lease_ms / 4;
    tick = tick < 50 ? 50 : tick > 1000 ? 1000 : tick;
    sup s;
    memset(&s, 0, sizeof(s));
    s.o = o;
    s.ra = ra;
    s.g = g;
    s.h = h;
    s.kill_at = -1;
    cli_esc(ra->name, s.nm, sizeof(s.nm));
    cli_esc(ra->cmd[0], s.c0, sizeof(s.c0));
    cli_fmt_duration(ra->kill_after_ms, s.grace, sizeof(s.grace));
    while (!s.all_gone) {
        int64_t now = mono_ms();
        if (s.kill_at >= 0 && now >= s.kill_at) {
            cli_err(o, "still running %s after SIGTERM: SIGKILL to %s", s.grace,
                    tree_words(&s));
            guard_send(g, 'K', 0);
            s.kill_at = -1;
        }
        int lost_now = 0;
        if (lease_deadline >= 0 && now >= lease_deadline) {
            lost_now = LOST_LEASE;
            lease_deadline = -1;
        }
        int64_t timeout = tick;
        if (s.kill_at >= 0 && s.kill_at - now < timeout)
            timeout = s.kill_at - now;
        if (lease_deadline >= 0 && lease_deadline - now < timeout)
            timeout = lease_deadline - now;
        if (lost_now || timeout < 0)
            timeout = 0;
        struct pollfd p[4] = {{h->sfd, POLLIN, 0}, {h->lost_fd, POLLIN, 0},
                              {guard_fd(g), POLLIN, 0}, {h->revoke_fd, POLLIN, 0}};
        int64_t t0 = boot_ms();
        int n = poll(p, 4, (int)timeout);
        int64_t over = boot_ms() - t0 - timeout;
        if (over >= 200) {
            pause_ms = over;
            pause_at = boot_ms();
        }
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0 && p[0].revents) {
            struct signalfd_siginfo si;
            if (read(h->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                on_signal(&s, &si);
        }
        if (n > 0 && p[1].revents) {
            char b;
            if (read(h->lost_fd, &b, 1) == 1 && !lost_now)
                lost_now = b;
        }
        if (n > 0 && p[2].revents && on_guard(&s) != 0) {
            /* Its orphans came to us (a subreaper too): none goes on alone. */
            cli_err(o, "the guard process of '%s' ended unexpectedly: SIGKILL to everything "
                       "'%s' started", s.c0, s.c0);
            tree_kill_all();
            *lost = s.lost;
            return -1;
        }
        if (lost_now && !s.lost)
            on_lost(&s, lost_now);
        int asked = n > 0 && p[3].revents ? run_revoke_take() : 0;
        if (asked)
            on_revoke(&s, asked);
        run_revoke_reap(0);
    }
    run_revoke_reap(1);   /* the --on-revoke commands still running */
    *lost = s.lost;
    return s.status;
}
