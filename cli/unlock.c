/* dlock unlock --force NAME [--permit ID]: frees NAME whoever holds it, for
 * every kind a snapshot finds there, and wakes the waiters of that kind:
 *   - a lock: deleted, its waiters woken (Redisson's forceUnlock);
 *   - a fair lock (a lock with a queue): deleted, the head of its queue
 *     woken (the fair lock's own forceUnlock; the queue stays);
 *   - a read-write lock: deleted in the mode it is held in (read or write),
 *     its waiters woken;
 *   - a permit semaphore: the permit --permit ID given back, a waiter woken
 *     (its permits are named: the one to free must be said).
 * A count (a plain semaphore's or a latch's) belongs to nobody: nothing to
 * unlock. Another type is left alone (65). */
#include <stdlib.h>
#include <string.h>

#include "show.h"

#define FORCE_TRIES 3   /* a read-write lock that changed mode in between */

typedef struct unlock_args {
    const char *name;
    const char *permit;
} unlock_args;

static int parse_unlock(cli_opts *o, int argc, char **argv, unlock_args *ua)
{
    show_args sa;
    if (parse_show(o, "unlock", argc, argv, F_FORCE | F_NAME | F_PERMIT, &sa) != 0)
        return -1;
    if (sa.npos != 1) {
        cli_usage_error(o, "unlock", "missing lock NAME");
        return -1;
    }
    if (!sa.force) {
        cli_usage_error(o, "unlock", "only 'unlock --force NAME' exists: it frees the lock "
                                     "whoever holds it");
        return -1;
    }
    ua->name = sa.pos;
    ua->permit = sa.permit;
    return 0;
}

/* The term of election NAME when its recorded leader holds the lock NAME
 * now (the lock is the election's), else 0. */
static uint64_t leader_term(dlock_client *c, const char *name)
{
    dlock_election *e = NULL;
    uint64_t term = 0;
    if (dlock_election_get(c, name, &e) != DLOCK_OK ||
        dlock_election_leader(e, &term, NULL, 0) != DLOCK_OK)
        term = 0;
    dlock_election_free(e);
    return term;
}

/* " by A (who), B (who)" for the holders of a snapshot (at most four); the
 * leader of an election (term > 0) as such. */
static void describe_holders(dlock_client *c, const dlock_info *info, uint64_t term, char *buf,
                             size_t size)
{
    size_t n = dlock_info_holders(info), off = 0;
    holder_map *map = n ? holder_map_load(c) : NULL;
    buf[0] = '\0';
    for (size_t i = 0; i < n && i < 4 && off < size; i++) {
        char e[120], d[400];
        const char *owner = dlock_info_owner(info, i);
        const char *role = dlock_info_kind(info) != DLOCK_KIND_RWLOCK ? ""
                           : dlock_info_holder_writes(info, i)     ? "writer "
                                                                   : "reader ";
        char lead[300] = "", nm[200];
        if (term > 0)
            snprintf(lead, sizeof(lead), "leader of election '%s', term %llu",
                     cli_esc(dlock_info_name(info), nm, sizeof(nm)), (unsigned long long)term);
        holder_describe_as(map, dlock_info_name(info), owner, 0,
                           term > 0 ? "dlock elect" : "dlock run", d, sizeof(d));
        off += (size_t)snprintf(buf + off, size - off, "%s%s%s%s%s%s%s%s", i ? ", " : " by ",
                                role, cli_esc(owner, e, sizeof(e)), lead[0] || d[0] ? " (" : "",
                                lead, lead[0] && d[0] ? ": " : "", d,
                                lead[0] || d[0] ? ")" : "");
    }
    if (n > 4 && off < size)
        snprintf(buf + off, size - off, " and %zu more", n - 4);
    holder_map_free(map);
}

/* Frees a lock of any kind (the snapshot says which). *was: something was
 * deleted. Returns a dlock status. */
static int force_lock(dlock_client *c, const char *name, const dlock_info *info, int *was)
{
    dlock_lock *l = NULL;
    int rc;
    if (dlock_info_kind(info) == DLOCK_KIND_RWLOCK)
        rc = strcmp(dlock_info_mode(info), "write") == 0 ? dlock_write_lock_get(c, name, &l)
                                                         : dlock_read_lock_get(c, name, &l);
    else if (dlock_info_queued(info))
        rc = dlock_fair_lock_get(c, name, &l);   /* wakes the head of the queue */
    else
        rc = dlock_lock_get(c, name, &l);
    if (rc == DLOCK_OK)
        rc = dlock_lock_force_release(l, was);
    dlock_lock_free(l);
    return rc;
}

/* --permit ID of permit semaphore NAME: given back. */
static int force_permit(const cli_opts *o, dlock_client *c, const unlock_args *ua,
                        const char *nm)
{
    char pid[80], who[400] = "";
    cli_esc(ua->permit, pid, sizeof(pid));
    holder_map *map = holder_map_load(c);
    holder_describe(map, ua->name, ua->permit, 0, who, sizeof(who));
    holder_map_free(map);
    dlock_permit_semaphore *ps = NULL;
    int released = 0;
    int rc = dlock_permit_semaphore_get(c, ua->name, &ps);
    if (rc == DLOCK_OK)
        rc = dlock_permit_semaphore_force_release(ps, ua->permit, &released);
    dlock_permit_semaphore_free(ps);
    if (rc == DLOCK_EINVAL) {
        cli_usage_error(o, "unlock", "--permit '%s' is not a permit id (32 hex characters, as "
                                     "'dlock status %s' lists them)", pid, nm);
        return EXIT_USAGE;
    }
    if (rc != DLOCK_OK)
        return cli_fail(o, rc, "unlock");
    if (o->quiet)
        return 0;
    if (released)
        printf("%s: permit %s was held%s%s; released, a waiter woken\n", nm, pid,
               who[0] ? " by " : "", who);
    else
        printf("%s: permit %s was not held (released already, or its lease ran out)\n", nm,
               pid);
    return 0;
}

/* Frees NAME per what it holds; prints what was done. */
static int unlock_name(const cli_opts *o, dlock_client *c, const unlock_args *ua, const char *nm)
{
    for (int tries = 0;; tries++) {
        dlock_info *info = NULL;
        int rc = dlock_client_inspect(c, ua->name, &info);
        if (rc != DLOCK_OK)
            return cli_fail_key(o, c, rc, "unlock", ua->name, DLOCK_KIND_LOCK, "a lock");
        if (cli_not_other(o, info, "a lock")) {
            dlock_info_free(info);
            return EXIT_DATAERR;
        }
        dlock_kind kind = dlock_info_kind(info);
        if (kind == DLOCK_KIND_RATE) {
            dlock_info_free(info);
            cli_err(o, "key '%s' holds a rate limiter, not a lock: its grants belong to nobody "
                       "and age out on their own, there is nothing to unlock", nm);
            return EXIT_DATAERR;
        }
        if (kind == DLOCK_KIND_PERMITS || kind == DLOCK_KIND_COUNT || ua->permit) {
            size_t held = dlock_info_holders(info);
            dlock_info_free(info);
            /* (A permit semaphore with no permit held is a bare count.) */
            if ((kind == DLOCK_KIND_PERMITS || kind == DLOCK_KIND_COUNT) && ua->permit)
                return force_permit(o, c, ua, nm);
            if (kind == DLOCK_KIND_PERMITS) {
                cli_usage_error(o, "unlock", "'%s' is a permit semaphore with %zu permit%s held: "
                                             "say which to free with --permit ID ('dlock status "
                                             "%s' lists them)", nm, held, held == 1 ? "" : "s",
                                nm);
                return EXIT_USAGE;
            }
            if (kind == DLOCK_KIND_COUNT) {
                cli_err(o, "key '%s' holds a count (a semaphore's or a latch's), not a lock: its "
                           "permits belong to nobody, there is nothing to unlock", nm);
                return EXIT_DATAERR;
            }
            cli_usage_error(o, "unlock", "--permit is for a permit semaphore; '%s' holds %s", nm,
                            kind == DLOCK_KIND_NONE ? "nothing" : "a lock");
            return EXIT_USAGE;
        }
        char who[2000] = "", what[120] = "";
        if (dlock_info_locked(info))
            describe_holders(c, info,
                             kind == DLOCK_KIND_LOCK && !dlock_info_queued(info)
                                 ? leader_term(c, ua->name)
                                 : 0,
                             who, sizeof(who));
        if (kind == DLOCK_KIND_RWLOCK)
            snprintf(what, sizeof(what), " (read-write lock, held for %s)",
                     strcmp(dlock_info_mode(info), "write") == 0 ? "writing" : "reading");
        else if (dlock_info_queued(info))
            snprintf(what, sizeof(what), " (fair lock, %zu in its queue)",
                     dlock_info_queued(info));
        int was = 0, locked = dlock_info_locked(info);
        int queued = dlock_info_queued(info) > 0;
        rc = locked ? force_lock(c, ua->name, info, &was) : DLOCK_OK;
        dlock_info_free(info);
        if (rc != DLOCK_OK)
            return cli_fail_key(o, c, rc, "unlock", ua->name, DLOCK_KIND_LOCK, "a lock");
        if (!was && locked && tries + 1 < FORCE_TRIES)
            continue;   /* released, or the mode changed, in between: look again */
        if (!o->quiet && was)
            printf("%s: was held%s%s; released, %s\n", nm, who, what,
                   queued ? "the first in its queue woken" : "waiters woken");
        else if (!o->quiet)
            printf("%s: was not held%s\n", nm, what);
        return 0;
    }
}

int cmd_unlock(cli_opts *o, int argc, char **argv)
{
    unlock_args ua;
    if (parse_unlock(o, argc, argv, &ua) != 0)
        return EXIT_USAGE;
    dlock_client *c;
    o->label = "unlock";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    char nm[300];
    cli_esc(ua.name, nm, sizeof(nm));
    code = unlock_name(o, c, &ua, nm);
    dlock_client_close(c);
    return code;
}
