/* The permit-expirable semaphore inside the sync layer: its handle and
 * what its three files share. permit_semaphore.c: the handle, its keys and
 * permit ids, and the queries (the counts, a lease left, a lease updated);
 * permit_acquire.c: one permit or n at once; permit_release.c: one permit or
 * a list, whose operations a give-back uses too. Not installed. */
#ifndef DLOCK_SYNC_PERMIT_H
#define DLOCK_SYNC_PERMIT_H

#include "sync/sync.h"

struct dlock_permit_semaphore {
    dlock__handle h;         /* channel: redisson_sc:{name} */
    char *leases;            /* {name}:timeout */
    size_t llen;
    char *pdelay;            /* dlock_permit_delay:{name}, the lock-delay's set */
    size_t plen;
    int64_t lock_delay;      /* ms, 0 off; fixed by the first acquisition */
    atomic_int attempted;    /* an acquisition was attempted through it */
    char delay_arg[24];      /* lock_delay in decimal */
    atomic_int heard;        /* the last release through this handle woke some client */
    pthread_mutex_t mu;      /* guards lost */
    dlock__lost_cb lost;     /* its lost callback (none: the client's) */
};

/* A permit id: what the caller sees (32 lowercase hex) and what Redis keeps
 * (the 16 bytes), as Redisson does since 3.17. */
typedef struct dlock__permit_id {
    char hex[DLOCK_PERMIT_ID_BUFSIZE];
    unsigned char raw[16];
} dlock__permit_id;

/* A new random id. */
void dlock__permit_new_id(dlock__permit_id *id);
/* The ids' raw bytes, one after the other: raw[16 * n] (NULL: out of memory). */
unsigned char *dlock__permit_raw(const dlock__permit_id *ids, size_t n);
/* The calls' first checks: the handle, and the permit id s when the call
 * takes one (id not NULL: parsed into it). DLOCK_EINVAL with the message. */
int dlock__permit_check(const dlock_permit_semaphore *p, const char *s, dlock__permit_id *id);
/* Parses one id (32 hex characters, either case). */
int dlock__permit_parse_id(const char *s, dlock__permit_id *id);
/* The permit as the watchdog sees it. */
void dlock__permit_hold(const dlock_permit_semaphore *p, const dlock__permit_id *id,
                        dlock__hold_id *h);
/* Renew permit id from now on; its lease was set at sent_ms or later. */
int dlock__permit_watch(dlock_permit_semaphore *p, const dlock__permit_id *id, int64_t sent_ms);
/* A script's request: its three keys (semaphore, leases, channel), the
 * lock-delay's set and the quarantine's record as the script takes them;
 * keys_id then the permit id as the first argument; delay_arg the delay as
 * the last (with a delay only). */
void dlock__permit_keys(dlock__op *op, int script, const dlock_permit_semaphore *p);
void dlock__permit_keys_id(dlock__op *op, int script, const dlock_permit_semaphore *p,
                           const dlock__permit_id *id);
void dlock__permit_delay_arg(const dlock_permit_semaphore *p, dlock__op *op);

/* permit_release.c: the release of one permit (release.lua's answer in
 * outcome: DLOCK__GONE_*), and of n at once (released: n, or 0 when one was
 * not held). An acquisition's give-back runs them too: setup, request, read. */
enum { DLOCK__GONE_UNKNOWN = 0, DLOCK__GONE_RELEASED = 1, DLOCK__GONE_EXPIRED = 2 };

typedef struct dlock__permit_drop {
    dlock_permit_semaphore *p;
    dlock__permit_id id;
    int try_only;            /* a try-release: not held is no error (flag 0) */
    int force;               /* by an operator: the holder's lock-delay stays */
    int outcome;             /* DLOCK__GONE_* */
} dlock__permit_drop;

typedef struct dlock__permit_drops {
    dlock_permit_semaphore *p;
    const char *const *list; /* the caller's ids (parsed by setup) */
    size_t n;
    dlock__permit_id *ids;   /* owned (n) once set up, unless borrowed */
    unsigned char *raw;      /* owned (16 n), likewise */
    int borrowed;            /* ids and raw are an acquisition's (a give-back) */
    int try_only;
    int64_t released;
} dlock__permit_drops;

int dlock__permit_drop_setup(void *st);
void dlock__permit_drop_request(void *st, int64_t waited_ms, dlock__op *op);
int dlock__permit_drop_read(void *st, int rc, dlock__res *res, dlock__busy *b);
int dlock__permit_drops_setup(void *st);
void dlock__permit_drops_request(void *st, int64_t waited_ms, dlock__op *op);
int dlock__permit_drops_read(void *st, int rc, dlock__res *res, dlock__busy *b);

#endif
