#include "core/map.h"

#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* A final avalanche so that the low bits used for buckets depend on every byte. */
static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

uint64_t dlock__hash(const void *key, size_t len)
{
    return mix(fnv1a(FNV_OFFSET, key, len));
}

void dlock__map_init(dlock__map *m, dlock__map_eq eq)
{
    memset(m, 0, sizeof(*m));
    m->eq = eq;
}

void dlock__map_free(dlock__map *m)
{
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

dlock__hnode *dlock__map_find(const dlock__map *m, uint64_t hash, const void *key, size_t len)
{
    return dlock__map_find_next(m, NULL, hash, key, len);
}

dlock__hnode *dlock__map_find_next(const dlock__map *m, const dlock__hnode *from, uint64_t hash,
                                   const void *key, size_t len)
{
    if (m->nbuckets == 0)
        return NULL;
    for (dlock__hnode *n = from ? from->next : m->buckets[hash & (m->nbuckets - 1)]; n;
         n = n->next)
        if (n->hash == hash && m->eq(n, key, len))
            return n;
    return NULL;
}

static int grow(dlock__map *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : 16;
    dlock__hnode **b = calloc(nb, sizeof(*b));
    if (!b)
        return -1;
    for (size_t i = 0; i < m->nbuckets; i++) {
        dlock__hnode *n = m->buckets[i];
        while (n) {
            dlock__hnode *next = n->next;
            size_t j = n->hash & (nb - 1);
            n->next = b[j];
            b[j] = n;
            n = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
    return 0;
}

int dlock__map_insert(dlock__map *m, dlock__hnode *n)
{
    /* A failed grow only leaves chains longer; it matters only when there is
     * no bucket array yet. */
    if (m->count >= m->nbuckets && grow(m) != 0 && m->nbuckets == 0)
        return -1;
    size_t j = n->hash & (m->nbuckets - 1);
    n->next = m->buckets[j];
    m->buckets[j] = n;
    m->count++;
    return 0;
}

void dlock__map_remove(dlock__map *m, dlock__hnode *n)
{
    if (m->nbuckets == 0)
        return;
    dlock__hnode **pp = &m->buckets[n->hash & (m->nbuckets - 1)];
    while (*pp) {
        if (*pp == n) {
            *pp = n->next;
            n->next = NULL;
            m->count--;
            return;
        }
        pp = &(*pp)->next;
    }
}
