/* Intrusive chained hash map keyed by byte strings. The caller embeds a
 * dlock__hnode in its struct and supplies the key when inserting/looking up;
 * the node keeps only the hash, and `eq` compares a node with a key. */
#ifndef DLOCK_MAP_H
#define DLOCK_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct dlock__hnode {
    struct dlock__hnode *next;
    uint64_t hash;
} dlock__hnode;

typedef int (*dlock__map_eq)(const dlock__hnode *n, const void *key, size_t len);

typedef struct dlock__map {
    dlock__hnode **buckets;
    size_t nbuckets;   /* power of two, or 0 before the first insert */
    size_t count;
    dlock__map_eq eq;
} dlock__map;

uint64_t dlock__hash(const void *key, size_t len);

void dlock__map_init(dlock__map *m, dlock__map_eq eq);
void dlock__map_free(dlock__map *m);   /* frees the bucket array only */
dlock__hnode *dlock__map_find(const dlock__map *m, uint64_t hash, const void *key, size_t len);
/* The next node after `from` (NULL: the first) that matches the key: a map
 * may hold several nodes under one key. */
dlock__hnode *dlock__map_find_next(const dlock__map *m, const dlock__hnode *from, uint64_t hash,
                                   const void *key, size_t len);
/* Inserts n (n->hash must be set). -1, with nothing inserted, only when the
 * first bucket array cannot be allocated. */
int dlock__map_insert(dlock__map *m, dlock__hnode *n);
void dlock__map_remove(dlock__map *m, dlock__hnode *n);

#endif
