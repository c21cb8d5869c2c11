/* Walks over the database (dlock.h's dlock_client_scan, _scan_counts,
 * _walk, _list_connections): SCAN in batches on every primary, each batch's
 * names read by lock/inspect.lua in one call per slot (inspect.c's
 * snapshot), skipping the keys the family keeps beside its objects. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/cluster.h"
#include "sync/inspect.h"

#define SCAN_COUNT 200      /* SCAN COUNT unless the caller gives one */
#define SCAN_COUNT_MAX 100000
#define KEYS_PER DLOCK__INSPECT_KEYS     /* a name's keys in a batch's argv */
#define OWN_PER DLOCK__INSPECT_OWN_KEYS  /* ... of them allocated */

/* Keys the family keeps beside its objects that hold whole numbers too: a
 * fencing-token counter, an unlock latch, a read lock's per-holder timeout.
 * A listing of counts skips them. */
static int auxiliary(const char *k, size_t len)
{
    static const char *const prefixes[] = {"redisson_lock_token:", "redisson_unlock_latch:"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t pl = strlen(prefixes[i]);
        if (len >= pl && memcmp(k, prefixes[i], pl) == 0)
            return 1;
    }
    /* A read lock's timeout, a holder's note (whose text may be a number). */
    static const char *const infixes[] = {":rwlock_timeout:", ":" DLOCK__NOTE_TAG};
    for (size_t n = 0; n < sizeof(infixes) / sizeof(infixes[0]); n++) {
        size_t il = strlen(infixes[n]);
        for (size_t i = 0; i + il <= len; i++)
            if (memcmp(k + i, infixes[n], il) == 0)
                return 1;
    }
    return 0;
}

/* Inspects m of a SCAN batch's keys (which: their indexes in the batch, argv
 * and lens: their KEYS_PER keys each) in one script; calls fn for the
 * wanted ones. DLOCK_OK, 1 when fn asked to stop, or an error. */
static int inspect_run(dlock_client *c, const redisReply *keys, const size_t *which,
                       const char **argv, size_t *lens, size_t m, unsigned kinds, dlock_scan_fn fn,
                       void *ud)
{
    redisReply *r;
    int rc = dlock__inspect_call(c, argv, lens, m, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != m) {
        freeReplyObject(r);
        return dlock__fail(DLOCK_EPROTO, "unexpected reply to a listing");
    }
    for (size_t j = 0; j < m && rc == DLOCK_OK; j++) {
        dlock_info *info = NULL;
        const char *what;
        const redisReply *k = keys->element[which[j]];
        int erc = dlock__info_from_entry(k->str, k->len, r->element[j], &info, &what);
        if (erc == DLOCK_ENOMEM)
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        else if (erc == DLOCK_OK) {
            dlock_kind kind = dlock_info_kind(info);
            int is_count = kind == DLOCK_KIND_COUNT || kind == DLOCK_KIND_PERMITS;
            int wanted = is_count ? (kinds & DLOCK_WALK_COUNTS) && !auxiliary(k->str, k->len)
                         : kind == DLOCK_KIND_RATE ? (kinds & DLOCK_WALK_RATES) != 0
                                                   : (kinds & DLOCK_WALK_LOCKS) &&
                                                         dlock_info_locked(info);
            if (wanted && fn(info, ud) != 0)
                rc = 1;
        }
        dlock_info_free(info);
    }
    freeReplyObject(r);
    return rc;
}

/* On a cluster, a name whose companions hash to another slot than its own
 * (a '{' that no '}' closes): no object of the family can live there (every
 * call on it is refused), and no script can read it with them. */
static int split_slots(const char **keys, const size_t *lens)
{
    int slot = dlock__key_slot(keys[0], lens[0]);
    for (int j = 1; j < KEYS_PER; j++)
        if (dlock__key_slot(keys[j], lens[j]) != slot)
            return 1;
    return 0;
}

/* Inspects one SCAN batch of keys; calls fn for the ones of `kinds`
 * (DLOCK_WALK_*: held locks, counts, rate limiters). Returns DLOCK_OK, 1 when fn asked to
 * stop, or an error. */
static int inspect_batch(dlock_client *c, const redisReply *keys, unsigned kinds,
                         dlock_scan_fn fn, void *ud)
{
    size_t n = keys->elements;
    if (n == 0)
        return DLOCK_OK;
    const char **argv = calloc(KEYS_PER * n, sizeof(*argv));
    size_t *lens = calloc(KEYS_PER * n, sizeof(*lens));
    char **own = calloc(OWN_PER * n, sizeof(*own));
    size_t *which = calloc(n, sizeof(*which));   /* the batch's keys that are looked at */
    size_t m = 0;
    int rc = DLOCK_OK, cluster = dlock__router_is_cluster(c->router);
    if (!argv || !lens || !own || !which) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING) {
            rc = dlock__fail(DLOCK_EPROTO, "SCAN returned a non-string key");
            goto out;
        }
        if (kinds == DLOCK_WALK_COUNTS && auxiliary(k->str, k->len))   /* not even looked at */
            continue;
        if (dlock__inspect_keys_of(k->str, k->len, cluster, argv + KEYS_PER * m,
                    lens + KEYS_PER * m, own + OWN_PER * m) != DLOCK_OK) {
            m++;   /* its keys are freed below */
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
            goto out;
        }
        if (cluster && split_slots(argv + KEYS_PER * m, lens + KEYS_PER * m)) {
            for (size_t j = OWN_PER * m; j < OWN_PER * (m + 1); j++) {
                free(own[j]);
                own[j] = NULL;
            }
            continue;   /* skipped */
        }
        which[m++] = i;
    }
    /* One script for the batch; on a cluster one per run of keys in one slot
     * (a script's keys must share one). */
    for (size_t from = 0, to; from < m && rc == DLOCK_OK; from = to) {
        to = m;
        if (cluster) {
            int slot = dlock__key_slot(argv[KEYS_PER * from], lens[KEYS_PER * from]);
            for (to = from + 1; to < m && dlock__key_slot(argv[KEYS_PER * to],
                                                          lens[KEYS_PER * to]) == slot;)
                to++;
        }
        rc = inspect_run(c, keys, which + from, argv + KEYS_PER * from,
                         lens + KEYS_PER * from, to - from, kinds, fn, ud);
    }
out:
    if (own)
        for (size_t i = 0; i < OWN_PER * m; i++)
            free(own[i]);
    free(own);
    free(which);
    free(argv);
    free(lens);
    return rc;
}

/* What a walk looks for and how. */
typedef struct walk {
    const char *pattern;
    const char *type;        /* SCAN's TYPE filter, or NULL: every key */
    unsigned kinds;          /* DLOCK_WALK_* */
    char count[24];          /* SCAN's COUNT */
    dlock_scan_fn fn;
    void *ud;
} walk;

/* SCAN over the keys on one node (NULL: the primary, failovers followed),
 * each batch inspected. 1 when fn asked to stop. */
static int scan_node(dlock_client *c, dlock__node *node, const walk *wk)
{
    char cursor[24] = "0";
    do {
        const char *argv[] = {"SCAN",      cursor,    "MATCH", wk->pattern,
                              "COUNT",     wk->count, "TYPE",  wk->type};
        dlock__req req = {.script = -1, .argc = wk->type ? 8 : 6, .argv = argv,
                          .flags = DLOCK__CALL_IDEMPOTENT};
        dlock__res res;
        int rc = node ? dlock__node_call(node, &req, &res)
                      : dlock__router_call(c->router, &req, &res);
        if (rc != DLOCK_OK)
            return rc;
        redisReply *r = res.r;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof(cursor) ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return dlock__fail(DLOCK_EPROTO, "unexpected reply to SCAN");
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        rc = inspect_batch(c, r->element[1], wk->kinds, wk->fn, wk->ud);
        freeReplyObject(r);
        if (rc != DLOCK_OK)
            return rc;
    } while (strcmp(cursor, "0") != 0);
    return DLOCK_OK;
}

/* One walk (SCAN, each batch inspected): on a cluster, every primary's
 * keys in turn. type: SCAN's TYPE filter (NULL: every key); count: SCAN's
 * COUNT (0: the default). */
static int scan_walk(dlock_client *c, const char *pattern, const char *type, unsigned kinds,
                     int count, dlock_scan_fn fn, void *ud)
{
    dlock__clear_error();
    if (!c || !fn)
        return dlock__fail(DLOCK_EINVAL, "client or callback is NULL");
    if (kinds == 0 ||
        (kinds & ~(unsigned)(DLOCK_WALK_LOCKS | DLOCK_WALK_COUNTS | DLOCK_WALK_RATES)))
        return dlock__fail(DLOCK_EINVAL, "kinds %#x: use DLOCK_WALK_LOCKS, DLOCK_WALK_COUNTS, "
                                         "DLOCK_WALK_RATES or several of them", kinds);
    if (count < 0 || count > SCAN_COUNT_MAX)
        return dlock__fail(DLOCK_EINVAL, "count %d: use 0 (the default, %d) or 1..%d", count,
                           SCAN_COUNT, SCAN_COUNT_MAX);
    walk wk = {.pattern = pattern && *pattern ? pattern : "*", .type = type, .kinds = kinds,
               .fn = fn, .ud = ud};
    snprintf(wk.count, sizeof(wk.count), "%d", count ? count : SCAN_COUNT);
    int rc = DLOCK_OK;
    if (!dlock__router_is_cluster(c->router)) {
        rc = scan_node(c, NULL, &wk);
    } else {
        size_t max = dlock__router_primaries(c->router, NULL, 0) + 8;   /* room for a change */
        dlock__node **nodes = malloc(max * sizeof(*nodes));
        if (!nodes)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        size_t n = dlock__router_primaries(c->router, nodes, max);
        for (size_t i = 0; i < n && i < max && rc == DLOCK_OK; i++)
            rc = scan_node(c, nodes[i], &wk);
        free(nodes);
    }
    return rc == 1 ? DLOCK_OK : rc;
}

int dlock_client_scan(dlock_client *c, const char *pattern, dlock_scan_fn fn, void *ud)
{
    return scan_walk(c, pattern, "hash", DLOCK_WALK_LOCKS, 0, fn, ud);
}

int dlock_client_scan_counts(dlock_client *c, const char *pattern, dlock_scan_fn fn, void *ud)
{
    return scan_walk(c, pattern, "string", DLOCK_WALK_COUNTS, 0, fn, ud);
}

int dlock_client_walk(dlock_client *c, const char *pattern, unsigned kinds, int count,
                      dlock_scan_fn fn, void *ud)
{
    /* Kinds of one Redis type: SCAN filters by it (locks and rate limiters
     * are hashes, counts strings). */
    const char *type = !(kinds & DLOCK_WALK_COUNTS) ? "hash"
                       : kinds == DLOCK_WALK_COUNTS ? "string"
                                                    : NULL;
    return scan_walk(c, pattern, type, kinds, count, fn, ud);
}

int dlock_client_list_connections(dlock_client *c, char **out)
{
    dlock__clear_error();
    if (!c || !out)
        return dlock__fail(DLOCK_EINVAL, "client or out is NULL");
    *out = NULL;
    const char *av[] = {"CLIENT", "LIST"};
    dlock__req req = {.script = -1, .argc = 2, .argv = av, .flags = DLOCK__CALL_IDEMPOTENT};
    redisReply *r;
    int rc = dlock__call(c, &req, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) {
        freeReplyObject(r);
        return dlock__fail(DLOCK_EPROTO, "CLIENT LIST answered something other than text");
    }
    *out = dlock__strndup(r->str, r->len);
    freeReplyObject(r);
    return *out ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
}
