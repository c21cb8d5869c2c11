/* Allocation failures: one run of a scenario that touches every type (open,
 * the reentrant lock three ways, the fair lock, the read-write lock, a
 * contended wait, the semaphore, the permit semaphore, the latch, an
 * election, an inspection, close) counts K allocations of dlock and hiredis
 * (nomem_hook.c); then for every N from 1 to K a forked child runs it again
 * with the Nth allocation failing. Each child checks:
 *   - every call answers DLOCK_OK or DLOCK_ENOMEM; a call that may have run
 *     on Redis before the failure (an allocation while reading its answer)
 *     may answer DLOCK_EUNKNOWN, as documented for a lost answer
 *   - nothing is left held that the caller was not told of: every lock,
 *     permit, count and leadership is as the answers say (after a
 *     DLOCK_EUNKNOWN: at most one lease, not renewed)
 *   - nothing leaks: every block allocated in the run is freed by close
 *     (and under ASan, LeakSanitizer at the child's exit)
 *   - nothing crashes (a signal ends the child: reported with N).
 * Prints K, the runs, the answers seen and the distinct places whose
 * allocation failed. Exit 0 when every run held. NOMEM_FROM and NOMEM_TO in
 * the environment limit the runs to a range of N. */
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nomem_hook.h"

#define LEASE 4000
#define WD 3000
#define MAX_SITES 4096

static th_redis srv;
static int problems, unknowns, enomems;

/* What the answers say is held: checked against Redis once the run is over. */
typedef struct expect {
    int lock, fair, rw_w, rw_r, busy_other, elect;   /* held (1), free (0), may be (-1) */
    int sem_taken;       /* permits of nm:sem taken and not given back, -1: 0 or 1 */
    int sem_set;         /* nm:sem's permits were set (1), maybe (-1) */
    int psem_set;        /* the same for nm:psem */
    int psem_held;       /* nm:psem permits held, -1: 0 or 1 */
    char psem_id[DLOCK_PERMIT_ID_BUFSIZE];   /* the permit held */
    int latch;           /* nm:latch count: 0, 1, or -1 (either) */
} expect;

/* Every answer of the run, "line:name" each, printed with a problem. */
static char trail[4096];
static size_t trail_len;

static int check(const char *what, int rc, int may_be_unknown, int line)
{
    if (trail_len < sizeof(trail) - 40)
        trail_len += (size_t)snprintf(trail + trail_len, sizeof(trail) - trail_len, " %d:%s", line,
                                      rc == DLOCK_OK ? "ok" : dlock_errname(rc));
    if (rc == DLOCK_ENOMEM)
        enomems++;
    if (rc == DLOCK_EUNKNOWN && may_be_unknown)
        unknowns++;
    if (rc == DLOCK_OK || rc == DLOCK_ENOMEM || (rc == DLOCK_EUNKNOWN && may_be_unknown))
        return rc;
    fprintf(stderr, "  line %d: %s answered %s: %s\n", line, what, dlock_errname(rc),
            dlock_last_error());
    problems++;
    return rc;
}
#define CALL(expr, unk) check(#expr, (expr), (unk), __LINE__)

/* After an acquisition answered rc: held (OK), free (ENOMEM), maybe (UNKNOWN). */
static int held_after(int rc) { return rc == DLOCK_OK ? 1 : rc == DLOCK_EUNKNOWN ? -1 : 0; }
/* After a release answered rc by a holder: free (OK), still held (ENOMEM). */
static int held_after_release(int rc, int before)
{
    return rc == DLOCK_OK ? 0 : rc == DLOCK_ENOMEM ? before : -1;
}

/* The reentrant lock: a watchdog hold, a lease, a fenced lease, an inspection. */
static void locks(dlock_client *c, expect *e, dlock_lock **keep)
{
    dlock_lock *l;
    if (CALL(dlock_lock_get(c, "nm:lock", &l), 0) != DLOCK_OK)
        return;
    *keep = l;
    e->lock = held_after(CALL(dlock_lock_acquire(l, DLOCK_WATCHDOG), 1));
    if (e->lock == 1)
        e->lock = held_after_release(CALL(dlock_lock_release(l), 0), 1);
    if (e->lock == 0) {
        e->lock = held_after(CALL(dlock_lock_try(l, 0, LEASE), 1));
        if (e->lock == 1)
            e->lock = held_after_release(CALL(dlock_lock_release(l), 0), 1);
    }
    uint64_t token = 0;
    if (e->lock == 0) {
        e->lock = held_after(CALL(
            dlock_lock_acquire_opts(l, &(dlock_wait_opts){.lease_ms = LEASE, .token = &token}), 1));
        dlock_info *info = NULL;
        if (CALL(dlock_lock_inspect(l, &info), 0) == DLOCK_OK)
            dlock_info_free(info);
        if (e->lock == 1)
            e->lock = held_after_release(CALL(dlock_lock_release(l), 0), 1);
    }
}

/* The fair lock and the read-write lock (write, then read as the same owner). */
static void family(dlock_client *c, expect *e, dlock_lock **fair, dlock_lock **w,
                   dlock_lock **r)
{
    if (CALL(dlock_fair_lock_get(c, "nm:fair", fair), 0) == DLOCK_OK) {
        e->fair = held_after(CALL(dlock_lock_try(*fair, 0, LEASE), 1));
        if (e->fair == 1)
            e->fair = held_after_release(CALL(dlock_lock_release(*fair), 0), 1);
    }
    if (CALL(dlock_write_lock_get(c, "nm:rw", w), 0) != DLOCK_OK ||
        CALL(dlock_read_lock_get(c, "nm:rw", r), 0) != DLOCK_OK)
        return;
    e->rw_w = held_after(CALL(dlock_lock_try(*w, 0, LEASE), 1));
    if (e->rw_w != 1)
        return;
    e->rw_r = held_after(CALL(dlock_lock_try(*r, 0, LEASE), 1));
    if (e->rw_r == 1)
        e->rw_r = held_after_release(CALL(dlock_lock_release(*r), 0), 1);
    e->rw_w = held_after_release(CALL(dlock_lock_release(*w), 0), 1);
}

/* A wait for a lock another owner holds: subscription, then the deadline. */
static void contended(dlock_client *c, expect *e, dlock_lock **other)
{
    dlock_lock *mine;
    if (CALL(dlock_lock_get_as(c, "nm:busy", "nomem-other:1", other), 0) != DLOCK_OK)
        return;
    e->busy_other = held_after(CALL(dlock_lock_try(*other, 0, LEASE), 1));
    if (e->busy_other != 1 || CALL(dlock_lock_get(c, "nm:busy", &mine), 0) != DLOCK_OK)
        return;
    int rc = dlock_lock_try(mine, 20, LEASE);
    if (rc != DLOCK_ETIMEDOUT)
        CALL(rc, 1);
    dlock_lock_free(mine);
    e->busy_other = held_after_release(CALL(dlock_lock_release(*other), 0), 1);
}

static void counts(dlock_client *c, expect *e, dlock_semaphore **s, dlock_permit_semaphore **p,
                   dlock_latch **l)
{
    if (CALL(dlock_semaphore_get(c, "nm:sem", s), 0) == DLOCK_OK) {
        int rc = CALL(dlock_semaphore_try_set_permits(*s, 2, NULL), 1);
        e->sem_set = rc == DLOCK_OK ? 1 : rc == DLOCK_EUNKNOWN ? -1 : 0;
        if (e->sem_set == 1) {
            e->sem_taken = held_after(CALL(dlock_semaphore_try(*s, 1, 0), 1));
            if (e->sem_taken == 1)
                e->sem_taken = held_after_release(CALL(dlock_semaphore_release(*s, 1), 1), 1);
        }
    }
    if (CALL(dlock_permit_semaphore_get(c, "nm:psem", p), 0) == DLOCK_OK) {
        int rc = CALL(dlock_permit_semaphore_try_set_permits(*p, 2, NULL), 1);
        e->psem_set = rc == DLOCK_OK ? 1 : rc == DLOCK_EUNKNOWN ? -1 : 0;
    }
    if (e->psem_set == 1) {
        e->psem_held = held_after(
            CALL(dlock_permit_semaphore_try(*p, 0, LEASE, e->psem_id, sizeof(e->psem_id)), 1));
        if (e->psem_held == 1)
            e->psem_held =
                held_after_release(CALL(dlock_permit_semaphore_release(*p, e->psem_id), 1), 1);
    }
    if (CALL(dlock_latch_get(c, "nm:latch", l), 0) == DLOCK_OK) {
        int rc = CALL(dlock_latch_try_set_count(*l, 1, NULL), 1);
        e->latch = rc == DLOCK_OK ? 1 : rc == DLOCK_EUNKNOWN ? -1 : 0;
        if (e->latch == 1) {
            rc = CALL(dlock_latch_count_down(*l), 1);
            e->latch = rc == DLOCK_OK ? 0 : rc == DLOCK_EUNKNOWN ? -1 : 1;
        }
        if (e->latch == 0) {
            rc = dlock_latch_await(*l, 0);
            if (rc != DLOCK_OK)
                CALL(rc, 0);
        }
    }
}

static void election(dlock_client *c, expect *e, dlock_election **el)
{
    if (CALL(dlock_election_get(c, "nm:elect", el), 0) != DLOCK_OK)
        return;
    uint64_t term = 0;
    e->elect =
        held_after(CALL(dlock_election_campaign(*el, &(dlock_wait_opts){.token = &term}), 1));
    if (e->elect == 1)
        e->elect = held_after_release(CALL(dlock_election_resign(*el), 0), 1);
}

/* A lock's handle as the answers say (held 1, free 0, maybe -1): its
 * owner's count agrees, and what is still held is given back now
 * (allocations go through again). */
static void give_back(dlock_lock *l, int held, const char *what)
{
    int64_t n = 0;
    if (!l || dlock_lock_hold_count(l, &n) != DLOCK_OK)
        return;
    if (held != -1 && (held == 1) != (n > 0)) {
        fprintf(stderr, "  %s: the answers say held=%d, its owner's count is %" PRId64 "\n", what,
                held, n);
        problems++;
    }
    while (n-- > 0)
        if (dlock_lock_release(l) != DLOCK_OK) {
            fprintf(stderr, "  %s: release after the run: %s\n", what, dlock_last_error());
            problems++;
        }
}

/* Then key is gone from Redis; after an answer that was lost (maybe held),
 * it may be there for at most `lease`, not renewed. */
static void key_gone(const char *key, int maybe, int64_t lease)
{
    long long ttl = th_int(&srv, "PTTL %s", key);
    if (ttl == -2 || (maybe && ttl > 0 && ttl <= lease))
        return;
    fprintf(stderr, "  %s: left in Redis (PTTL %lld)%s\n", key, ttl,
            maybe ? " after a lost answer" : "");
    problems++;
}

static void settle(expect *e, dlock_lock *lock, dlock_lock *fair, dlock_lock *w, dlock_lock *r,
                   dlock_lock *other, dlock_semaphore *s, dlock_permit_semaphore *p,
                   dlock_latch *l, dlock_election *el)
{
    give_back(lock, e->lock, "nm:lock");
    give_back(fair, e->fair, "nm:fair");
    give_back(r, e->rw_r, "nm:rw (read)");
    give_back(w, e->rw_w, "nm:rw (write)");
    give_back(other, e->busy_other, "nm:busy");
    /* The lock's lost answer may be its watchdog acquisition's: WD. */
    key_gone("nm:lock", e->lock == -1, WD > LEASE ? WD : LEASE);
    key_gone("nm:fair", e->fair == -1, LEASE);
    key_gone("redisson_lock_queue:{nm:fair}", 0, 0);   /* a try without a wait never queues */
    key_gone("nm:rw", e->rw_w == -1 || e->rw_r == -1, LEASE);
    key_gone("nm:busy", e->busy_other == -1, LEASE);
    /* Permits still taken are given back; then all are there. */
    if (s && e->sem_taken == 1 && dlock_semaphore_release(s, 1) != DLOCK_OK)
        problems++;
    if (p && e->psem_held == 1 && dlock_permit_semaphore_release(p, e->psem_id) != DLOCK_OK) {
        fprintf(stderr, "  nm:psem: the permit the answers say is held: %s\n", dlock_last_error());
        problems++;
    }
    int64_t v = 0;
    if (s && e->sem_set == 1 && e->sem_taken != -1 && dlock_semaphore_available(s, &v) == DLOCK_OK &&
        v != 2) {
        fprintf(stderr, "  nm:sem: %" PRId64 " permits available, the answers say %d taken\n", v,
                e->sem_taken);
        problems++;
    }
    if (p && e->psem_set == 1 && e->psem_held != -1 &&
        dlock_permit_semaphore_available(p, &v, NULL) == DLOCK_OK && v != 2) {
        fprintf(stderr, "  nm:psem: %" PRId64 " permits available, the answers say %d held\n", v,
                e->psem_held);
        problems++;
    }
    if (l && e->latch != -1 && dlock_latch_count(l, &v) == DLOCK_OK && v != e->latch) {
        fprintf(stderr, "  nm:latch: count %" PRId64 ", the answers say %d\n", v, e->latch);
        problems++;
    }
    uint64_t term = 0;
    if (el && e->elect != -1 && dlock_election_leader(el, &term, NULL, 0) == DLOCK_OK &&
        (term != 0) != (e->elect == 1)) {
        fprintf(stderr, "  nm:elect: the leader's term is %" PRIu64 ", the answers say leader=%d\n",
                term, e->elect);
        problems++;
    }
    if (el && e->elect == 1)
        dlock_election_resign(el);
}

/* The scenario, allocations failing as armed; then the check. */
static void scenario(void)
{
    expect e;
    memset(&e, 0, sizeof(e));
    dlock_lock *lock = NULL, *fair = NULL, *w = NULL, *r = NULL, *other = NULL;
    dlock_semaphore *s = NULL;
    dlock_permit_semaphore *p = NULL;
    dlock_latch *l = NULL;
    dlock_election *el = NULL;
    dlock_client *c = NULL;
    dlock_config *cfg = dlock_config_new();
    if (cfg && CALL(dlock_config_set_url(cfg, srv.url), 0) == DLOCK_OK &&
        CALL(dlock_config_set_watchdog_timeout(cfg, WD), 0) == DLOCK_OK &&
        CALL(dlock_client_open(&c, cfg), 0) == DLOCK_OK) {
        locks(c, &e, &lock);
        family(c, &e, &fair, &w, &r);
        contended(c, &e, &other);
        counts(c, &e, &s, &p, &l);
        election(c, &e, &el);
    }
    nomem_disarm();
    dlock_config_free(cfg);
    if (c)
        settle(&e, lock, fair, w, r, other, s, p, l, el);
    dlock_lock_free(lock);
    dlock_lock_free(fair);
    dlock_lock_free(w);
    dlock_lock_free(r);
    dlock_lock_free(other);
    dlock_semaphore_free(s);
    dlock_permit_semaphore_free(p);
    dlock_latch_free(l);
    dlock_election_free(el);
    dlock_client_close(c);
}

/* One run in a child: 0 held and the Nth allocation failed, 10 held and
 * fewer than N allocations were made, 1 a problem. The failed allocation's
 * site goes to fd. */
static int child(long n, int fd)
{
    nomem_track(1);
    nomem_arm(n);
    scenario();
    nomem_disarm();
    nomem_track(0);
    size_t live = nomem_live();
    if (live) {
        fprintf(stderr, "  %zu blocks allocated in the run were not freed\n", live);
        problems++;
    }
    char line[96];
    int len = snprintf(line, sizeof(line), "%ld %p %d %d %d\n", nomem_counted(),
                       nomem_failed_site(), enomems, unknowns, problems);
    if (write(fd, line, (size_t)len) != len)
        return 1;
    if (problems) {
        fprintf(stderr, "  answers (line:code):%s\n", trail);
        return 1;
    }
    return nomem_failures() ? 0 : 10;
}

typedef struct run {
    int status;   /* the child's exit status, or 128 + signal */
    long counted;
    void *site;
    int enomems, unknowns;
} run;

static int run_once(long n, run *out)
{
    memset(out, 0, sizeof(*out));
    /* Every run from the same start: no keys, and no scripts (the first
     * call of each loads it: NOSCRIPT, SCRIPT LOAD, again). */
    const char *reset[] = {"FLUSHALL", "SCRIPT FLUSH"};
    for (int i = 0; i < 2; i++) {
        redisReply *rep = th_cmd(&srv, reset[i]);
        if (rep)
            freeReplyObject(rep);
    }
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        exit(child(n, fds[1]));
    }
    close(fds[1]);
    char buf[128] = "";
    ssize_t k = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    if (k > 0) {
        buf[k] = '\0';
        int p;
        sscanf(buf, "%ld %p %d %d %d", &out->counted, &out->site, &out->enomems, &out->unknowns,
               &p);
    }
    out->status = th_wait(pid, 30000);   /* a run takes well under a second */
    if (out->status == -1) {   /* hung (a deadlock): stopped by its pid */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return 0;
}

/* The distinct failed sites, as function names (addr2line), to stdout. */
static void print_sites(void *const *sites, int n)
{
    uintptr_t base = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    char exe[512] = "", line[1024];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el > 0)
        exe[el] = '\0';
    while (maps && fgets(line, sizeof(line), maps))
        if (strstr(line, exe) && sscanf(line, "%" SCNxPTR, &base) == 1)
            break;
    if (maps)
        fclose(maps);
    char cmd[64 + MAX_SITES * 20];
    int off = snprintf(cmd, sizeof(cmd), "addr2line -f -s -e /proc/%d/exe", (int)getpid());
    for (int i = 0; i < n && off < (int)sizeof(cmd) - 24; i++)
        off += snprintf(cmd + off, sizeof(cmd) - (size_t)off, " %#" PRIxPTR,
                        (uintptr_t)sites[i] - base - 1);
    off += snprintf(cmd + off, sizeof(cmd) - (size_t)off,
                    " 2>/dev/null | paste - - | sort | uniq -c | sort -rn");
    printf("allocation sites whose failure was exercised (calls, function, file:line):\n");
    fflush(stdout);
    if (system(cmd) != 0)
        printf("  (addr2line not available)\n");
}

int main(void)
{
    if (strcmp(th_deploy_name(), "single") != 0 || th_tls_mode() || th_acl_mode()) {
        printf("test_nomem: one plain server only\n");
        return 77;
    }
    if (th_redis_start(&srv, NULL) != 0)
        return 1;
    run r;
    run_once(0, &r);   /* nothing fails: how many allocations a run makes */
    if (r.status != 10) {
        fprintf(stderr, "the run without failures did not hold (status %d)\n", r.status);
        th_redis_destroy(&srv);
        return 1;
    }
    long total = r.counted;
    printf("a run makes %ld allocations (dlock and hiredis)\n", total);
    static void *sites[MAX_SITES];
    int nsites = 0, bad = 0, misses = 0, enomem_runs = 0, unknown_runs = 0;
    /* NOMEM_FROM / NOMEM_TO: a range of N only (to look at one failure). */
    long n = getenv("NOMEM_FROM") ? atol(getenv("NOMEM_FROM")) : 1;
    long last = getenv("NOMEM_TO") ? atol(getenv("NOMEM_TO")) : -1;
    long first = n;
    /* Threads make the order vary a little: go on until two runs in a row
     * end before their Nth allocation. */
    for (; misses < 2 && (last < 0 || n <= last); n++) {
        run_once(n, &r);
        if (r.status == 10) {
            misses++;
            continue;
        }
        misses = 0;
        if (r.status != 0) {
            bad++;
            fprintf(stderr, "allocation %ld failing: %s %d\n", n,
                    r.status == -1    ? "hung, stopped after 30 s x slack; was"
                    : r.status >= 128 ? "killed by signal"
                                      : "exit status",
                    r.status >= 128 ? r.status - 128 : r.status);
            if (bad >= 20)
                break;
        }
        enomem_runs += r.enomems > 0;
        unknown_runs += r.unknowns > 0;
        int known = 0;
        for (int i = 0; i < nsites && !known; i++)
            known = sites[i] == r.site;
        if (!known && r.site && nsites < MAX_SITES)
            sites[nsites++] = r.site;
    }
    printf("%ld runs with one allocation failing: %d with a problem; %d answered DLOCK_ENOMEM, "
           "%d DLOCK_EUNKNOWN (a call that had been sent); %d distinct allocation sites\n",
           n - first - misses, bad, enomem_runs, unknown_runs, nsites);
    print_sites(sites, nsites);
    th_redis_destroy(&srv);
    return bad ? 1 : 0;
}
