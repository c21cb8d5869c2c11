/* The lock family's per-owner record (lock.h: dlock__holds): for each owner
 * field of a lock's hash that this client acquired, how many of its
 * acquisitions it knows of (answered DLOCK_OK) and how many ended
 * DLOCK_EUNKNOWN. An owner's holds taken under the watchdog through handles
 * without a lock-delay are counted by the watchdog's entry alone (no record:
 * a held lock costs no memory more) until a record is made for the owner (a
 * lease acquisition, one of unknown outcome, or one through a handle with a
 * delay, whose watchdog entry is another), which starts from that entry's
 * count. The watchdog counts such a hold before the record may (lock.c), so
 * that a record made meanwhile (an async call of the same owner) counts it
 * twice rather than never: a count too high lets an unknown hold outlive the
 * release (as without a record), one too low would release a known one. A
 * release that ends the owner's last known hold and is answered "holds
 * remain" releases again, at most once per unknown one, so that a hold of
 * unknown outcome that did run does not outlive it. A record whose holds all
 * had a lease is dropped once they all ended (a hold left to lapse is not
 * kept for ever), when its bucket is searched to add to it. */
#include <stdlib.h>
#include <string.h>

#include "sync/lock.h"

struct dlock__hold_rec {
    dlock__hold_rec *next;
    uint64_t hash;
    int64_t known;           /* acquisitions answered DLOCK_OK, not yet released */
    int64_t unknown;         /* acquisitions that ended DLOCK_EUNKNOWN */
    int64_t until;           /* when all had a lease: the dlock__now_ms() past which
                                none of them can be alive */
    int renewed;             /* 1: one may be renewed (a watchdog hold): no such end */
    size_t klen;
    char key[];              /* the lock's name, NUL, the owner's field */
};

int dlock__holds_init(dlock__holds *t)
{
    memset(t->bucket, 0, sizeof(t->bucket));
    atomic_init(&t->records, 0);
    return pthread_mutex_init(&t->mu, NULL) == 0 ? DLOCK_OK : DLOCK_ENOMEM;
}

void dlock__holds_clear(dlock__holds *t)
{
    for (size_t i = 0; i < DLOCK__HOLD_BUCKETS; i++) {
        while (t->bucket[i]) {
            dlock__hold_rec *e = t->bucket[i];
            t->bucket[i] = e->next;
            free(e);
        }
    }
    pthread_mutex_destroy(&t->mu);
}

/* Caller holds mu. */
static void drop(dlock__holds *t, dlock__hold_rec **at)
{
    dlock__hold_rec *e = *at;
    *at = e->next;
    free(e);
    atomic_fetch_sub(&t->records, 1);
}

/* The owner's record of l (FNV-1a over name, NUL, field), made when `make`
 * (NULL without memory), which first drops the bucket's records whose holds
 * all ended by `now` (dlock__now_ms()); *at: where it is linked. Caller
 * holds mu. */
static dlock__hold_rec *find(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                             int make, int64_t now, dlock__hold_rec ***at)
{
    size_t klen = l->h.nlen + 1 + o->flen;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < klen; i++) {
        unsigned char ch = i < l->h.nlen    ? (unsigned char)l->h.name[i]
                           : i == l->h.nlen ? 0
                                            : (unsigned char)o->field[i - l->h.nlen - 1];
        h = (h ^ ch) * 1099511628211ull;
    }
    dlock__hold_rec **p = &t->bucket[h % DLOCK__HOLD_BUCKETS];
    for (dlock__hold_rec **q = p; make && *q;) {
        if (!(*q)->renewed && (*q)->until < now)
            drop(t, q);
        else
            q = &(*q)->next;
    }
    for (; *p; p = &(*p)->next) {
        dlock__hold_rec *e = *p;
        if (e->hash == h && e->klen == klen && memcmp(e->key, l->h.name, l->h.nlen) == 0 &&
            memcmp(e->key + l->h.nlen + 1, o->field, o->flen) == 0) {
            *at = p;
            return e;
        }
    }
    if (!make)
        return NULL;
    dlock__hold_rec *e = calloc(1, sizeof(*e) + klen);
    if (!e)
        return NULL;
    e->hash = h;
    e->klen = klen;
    memcpy(e->key, l->h.name, l->h.nlen);
    memcpy(e->key + l->h.nlen + 1, o->field, o->flen);
    /* The owner's holds under the watchdog so far were counted by it only. */
    dlock__hold_id id;
    l->type->plain_hold_id(l, o, &id);
    e->known = dlock__watchdog_renews(l->h.c->wd, &id);
    e->renewed = e->known > 0;
    *p = e;
    *at = p;
    atomic_fetch_add(&t->records, 1);
    return e;
}

void dlock__holds_acquired(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                           int unknown, int64_t lease_ms)
{
    dlock__hold_rec **at;
    /* Counted by the watchdog's entry; by the owner's record too, if there
     * is one. */
    int plain = lease_ms == DLOCK_WATCHDOG && !unknown && l->lock_delay <= 0;
    if (plain && atomic_load(&t->records) == 0)
        return;
    int64_t now = dlock__now_ms();
    /* A known hold's TTL was set before its answer came (before now); one of
     * unknown outcome may run as late as a request is ever answered: that
     * margin (an unlock latch's lifetime) for both, and for clock drift. */
    int64_t until = now + lease_ms + l->h.c->latch_px;
    pthread_mutex_lock(&t->mu);
    /* Without memory nothing is recorded (find makes no record only when
     * there was none): a hold of unknown outcome then ends with its lease, as
     * it did before. (A known hold unrecorded while an unknown one is
     * recorded later could let a release repeat once too often: it needs an
     * allocation failing, then the next succeeding.) */
    dlock__hold_rec *e = find(t, l, o, !plain, now, &at);
    if (e) {
        /* A hold of unknown outcome is in no watchdog schedule: it ends with
         * its first TTL, unless the owner's known holds are renewed. */
        if (lease_ms == DLOCK_WATCHDOG && unknown)
            until = now + l->h.c->cfg.watchdog_ms + l->h.c->latch_px;
        if (lease_ms == DLOCK_WATCHDOG && !unknown)
            e->renewed = 1;
        else if (until > e->until)
            e->until = until;
        if (unknown)
            e->unknown++;
        else
            e->known++;
    }
    pthread_mutex_unlock(&t->mu);
}

int dlock__holds_released(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                          int answered, int outcome, int may_repeat)
{
    dlock__hold_rec **at;
    int again = 0;
    pthread_mutex_lock(&t->mu);
    dlock__hold_rec *e = find(t, l, o, 0, 0, &at);
    if (e && !answered && e->known <= 1 && e->renewed) {
        /* The owner's last known hold: its renewals stop with this attempt
         * whatever became of it, so the record can end by time (else an
         * outage's failed releases would keep records for ever). */
        int64_t until = dlock__now_ms() + l->h.c->cfg.watchdog_ms + l->h.c->latch_px;
        e->renewed = 0;
        if (until > e->until)
            e->until = until;
    }
    if (e && answered) {
        if (outcome != DLOCK__RELEASE_KEPT) {
            drop(t, at);   /* the owner holds nothing: an unknown one did not run, or lapsed */
        } else {
            /* A repeat answered "holds remain" released an unknown one. */
            if (e->known > 0 && may_repeat != 2)
                e->known--;
            /* Holds remain and none is known: one more release, while
             * unknown ones are owed (past them, what is left is not this
             * client's: the same owner id elsewhere). */
            if (e->known == 0 && e->unknown > 0 && may_repeat) {
                e->unknown--;
                again = 1;
            }
            if (e->known == 0 && e->unknown == 0)
                drop(t, at);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return again;
}

void dlock__holds_extend(dlock__holds *t, const dlock_lock *l, const dlock__owner *o,
                         int64_t lease_ms)
{
    dlock__hold_rec **at;
    int64_t until = dlock__now_ms() + lease_ms + l->h.c->latch_px;
    pthread_mutex_lock(&t->mu);
    dlock__hold_rec *e = find(t, l, o, 0, 0, &at);
    if (e && until > e->until)
        e->until = until;
    pthread_mutex_unlock(&t->mu);
}
