/* The hold record (wdhold.h): its identity (kind and parts), its owner id
 * kept once per owner, its allocation: one per hold, and nothing else. The
 * maps are the table's (watchdog.c), under its mutex. */
#include <stdlib.h>
#include <string.h>

#include "io/wdhold.h"

/* The identity of a hold: its parts joined by NULs, into buf (or malloc'd
 * when it does not fit; NULL when out of memory). */
static char *join_id(const dlock__hold_id *id, char *buf, size_t size, size_t *out_len)
{
    size_t len = 0;
    int n = h_nparts(id->kind);
    for (int i = 0; i < n; i++)
        len += id->len[i] + 1;
    char *k = len <= size ? buf : malloc(len);
    if (!k)
        return NULL;
    char *p = k;
    for (int i = 0; i < n; i++) {
        memcpy(p, id->part[i], id->len[i]);
        p += id->len[i];
        *p++ = '\0';
    }
    *out_len = len;
    return k;
}

typedef struct lookup {
    const dlock__hold_kind *kind;
    const char *bytes;
} lookup;

static int hold_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const held *h = (const held *)n;
    const lookup *l = key;
    if (h->kind != l->kind || h->klen != len)
        return 0;
    /* Part by part, each with its NUL (no part holds one: the join is
     * unambiguous). */
    const char *b = l->bytes;
    for (int i = 0; i < h_nparts(h->kind); i++) {
        if (memcmp(h_part(h, i), b, h->len[i] + 1) != 0)
            return 0;
        b += h->len[i] + 1;
    }
    return 1;
}

static int owner_eq(const dlock__hnode *n, const void *key, size_t len)
{
    const wowner *o = (const wowner *)n;
    return o->len == len && memcmp(o->id, key, len) == 0;
}

/* The owner id's shared copy, one more hold naming it; NULL when out of
 * memory. */
static wowner *owner_ref(dlock__map *owners, const char *id, size_t len)
{
    uint64_t hash = dlock__hash(id, len);
    wowner *o = (wowner *)dlock__map_find(owners, hash, id, len);
    if (!o) {
        o = malloc(sizeof(*o) + len + 1);
        if (!o)
            return NULL;
        o->hn.hash = hash;
        o->refs = 0;
        o->len = (uint32_t)len;
        memcpy(o->id, id, len);
        o->id[len] = '\0';
        if (dlock__map_insert(owners, &o->hn) != 0) {
            free(o);
            return NULL;
        }
    }
    o->refs++;
    return o;
}

void dlock__wd_hold_free(dlock__map *owners, held *h)
{
    wowner *o = h->own;
    if (o && --o->refs == 0) {
        dlock__map_remove(owners, &o->hn);
        free(o);
    }
    free(h);
}

static uint64_t id_hash(const dlock__hold_kind *kind, const char *bytes, size_t len)
{
    return dlock__hash(bytes, len) ^ (uint64_t)(uintptr_t)kind;
}

held *dlock__wd_hold_find(const dlock__map *map, const dlock__hold_id *id)
{
    char stackbuf[512] = {0};   /* quiets -Wmaybe-uninitialized through join_id */
    size_t klen;
    char *k = join_id(id, stackbuf, sizeof(stackbuf), &klen);
    if (!k)
        return NULL;
    lookup l = {id->kind, k};
    held *h = (held *)dlock__map_find(map, id_hash(id->kind, k, klen), &l, klen);
    if (k != stackbuf)
        free(k);
    return h;
}

held *dlock__wd_hold_new(dlock__map *owners, const dlock__hold_id *id)
{
    size_t klen = 0;
    int n = h_nparts(id->kind), opart = DLOCK__HOLD_PARTS;
    for (int i = 0; i < n; i++) {
        klen += id->len[i] + 1;
        if (opart == DLOCK__HOLD_PARTS && id->len[i] == id->olen &&
            memcmp(id->part[i], id->owner, id->olen) == 0)
            opart = i;   /* kept once */
    }
    size_t dlen = klen - (opart < DLOCK__HOLD_PARTS ? id->len[opart] + 1 : 0);
    held *h = malloc(sizeof(*h) + dlen);
    wowner *own = h ? owner_ref(owners, id->owner, id->olen) : NULL;
    if (!own) {
        free(h);
        return NULL;
    }
    memset(h, 0, sizeof(*h));
    h->own = own;
    h->kind = id->kind;
    char *p = h->data;
    for (int i = 0; i < n; i++) {
        h->len[i] = (uint32_t)id->len[i];
        if (i == opart)
            continue;
        memcpy(p, id->part[i], id->len[i]);
        p += id->len[i];
        *p++ = '\0';
    }
    h->klen = (uint32_t)klen;
    h->opart = (uint8_t)opart;
    char stackbuf[512] = {0};
    size_t jlen;
    char *k = join_id(id, stackbuf, sizeof(stackbuf), &jlen);
    if (!k) {
        dlock__wd_hold_free(owners, h);
        return NULL;
    }
    h->hn.hash = id_hash(id->kind, k, klen);
    if (k != stackbuf)
        free(k);
    return h;
}

void dlock__wd_holds_init(dlock__map *map, dlock__map *owners)
{
    dlock__map_init(map, hold_eq);
    dlock__map_init(owners, owner_eq);
}
