/* The watchdog's hold record (watchdog.md): the one type every part of the
 * watchdog reads, and nothing else. Its fields belong to the parts named
 * beside them; watchdog.c owns the table they live in and the mutex (`mu`)
 * that guards them. Io layer only; not installed.
 *
 * The watchdog's files, each importing only the ones below it:
 *   watchdog.c  the table of holds and the renewal schedule (user threads add
 *               and remove holds; the io thread's pass)
 *   revoke.c    revocation by tracking (revoke.h): rechecks of changed keys,
 *               a new hold's registration
 *   cause.c     losses (cause.h): a loss's cause, its report
 *   wdnode.c    per-node batches (wdnode.h): a renewal connection per node,
 *               the scripts sent and answered, replica acknowledgement
 *   wdhold.c    this record: a hold's identity, its owner id, its allocation */
#ifndef DLOCK_IO_WDHOLD_H
#define DLOCK_IO_WDHOLD_H

#include "io/io.h"

/* held.awaited */
enum { AW_THREAD = 1, AW_ASYNC = 2 };

/* An owner id, kept once for all its holds (a lock's hold names it twice:
 * as its owner and as its field; a thread's holds share it). Under mu. */
typedef struct wowner {
    dlock__hnode hn;         /* in the watchdog's owners */
    uint32_t refs;           /* holds naming it */
    uint32_t len;
    char id[];               /* NUL-terminated */
} wowner;

/* One hold (100 000 held locks are 100 000 of these: kept small; no other
 * allocation per hold). Under mu. */
typedef struct held {
    dlock__hnode hn;         /* in the table (watchdog.c), by identity */
    dlock__hnode tn;         /* revoke.c: in its tracked keys, by the key the kind tracks
                                (several holds of one key: several nodes) when tracked */
    dlock__list all;         /* in the table's list while in the table */
    dlock__list rlink;       /* revoke.c: on its recheck list while a recheck is due (else
                                self-linked) */
    int64_t renewed_at;      /* ms, before the request that last set the TTL was sent */
    int64_t limit_at;        /* ms: the hold limit, INT64_MAX when none */
    union {                  /* its lost callback, of the form cause_form says */
        dlock_lost_fn fn;
        dlock_lost_cause_fn cfn;
    } cb;
    void *ud;
    const dlock__hold_kind *kind;
    wowner *own;             /* the owner id */
    int32_t releasing;       /* releases in progress for this owner */
    int32_t holds;           /* acquisitions seen; each release attempt takes one, and the
                                renewal stops at zero whatever the release answered */
    uint32_t len[DLOCK__HOLD_PARTS];
    uint32_t klen;           /* identity bytes: every part with its NUL */
    uint8_t inflight;        /* in a batch awaiting its reply */
    uint8_t recap;           /* a reentry of a limited hold may have set a TTL past its
                                limit (a write lock adds the lease): renew it now */
    uint8_t dead;            /* out of the table; freed when its batch answers */
    uint8_t awaited;         /* dead, and its release waits for that answer: AW_THREAD (a
                                blocking release, which then frees it) or AW_ASYNC (an
                                asynchronous release's settle) */
    uint8_t tracked;         /* revoke.c: tn is in its tracked keys */
    uint8_t fresh;           /* revoke.c: on the recheck list as a new hold: registered once
                                it is DLOCK__WD_REGISTER_AGE_MS old, unless its key is
                                reported changed first */
    uint8_t opart;           /* the part equal to the owner id (a lock's field often
                                is: not kept in data), or DLOCK__HOLD_PARTS */
    uint8_t failover : 1;    /* its node is a new primary (a failover) and no renewal sent
                                since has answered: a loss now is cause "failover" */
    uint8_t cause_form : 1;  /* cb is a dlock_lost_cause_fn */
    char data[];             /* part0 NUL part1 NUL ..., but part opart */
} held;

static inline int h_nparts(const dlock__hold_kind *k) { return k->nkeys + k->nargs; }

/* Part i (NUL-terminated). */
static inline const char *h_part(const held *h, int i)
{
    if (i == h->opart)
        return h->own->id;
    const char *p = h->data;
    for (int k = 0; k < i; k++)
        if (k != h->opart)
            p += h->len[k] + 1;
    return p;
}

/* The table's maps (watchdog.c keeps them, under its mutex): the holds by
 * identity (held.hn), the owner ids (wowner). */
void dlock__wd_holds_init(dlock__map *map, dlock__map *owners);
/* The hold of id's identity in map, or NULL. */
held *dlock__wd_hold_find(const dlock__map *map, const dlock__hold_id *id);
/* A new hold of id's identity (zeroed but for its identity, its owner id
 * shared through owners; hn.hash set, in no map yet), or NULL when out of
 * memory. */
held *dlock__wd_hold_new(dlock__map *owners, const dlock__hold_id *id);
/* Frees h, and its owner id with the last hold naming it. */
void dlock__wd_hold_free(dlock__map *owners, held *h);

#endif
