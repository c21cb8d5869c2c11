/* What inspect.c, walk.c and notes.c share: the keys lock/inspect.lua reads
 * for a name, and its call. */
#ifndef DLOCK_SYNC_INSPECT_H
#define DLOCK_SYNC_INSPECT_H

#include "sync/sync.h"

#define DLOCK__INSPECT_KEYS 10      /* per name: scripts/lock/inspect.lua's */
#define DLOCK__INSPECT_OWN_KEYS 7   /* of them, allocated by dlock__inspect_keys_of */
#define DLOCK__NOTE_TAG "dlock_note:"   /* a holder's note: {name}:dlock_note:<owner> */

/* The DLOCK__INSPECT_KEYS keys lock/inspect.lua reads for a name, into
 * keys[] and lens[] (the name first; DLOCK__INSPECT_OWN_KEYS of them
 * allocated into own[], freed with dlock__inspect_free_keys). cluster: the
 * names of a cluster client (a name whose '{' no '}' closes is refused). */
int dlock__inspect_keys_of(const char *name, size_t nlen, int cluster, const char **keys,
                           size_t *lens, char **own);
void dlock__inspect_free_keys(char **own);
/* lock/inspect.lua over m names (their DLOCK__INSPECT_KEYS keys each in
 * argv and lens): its answer in *r, or the error. */
int dlock__inspect_call(dlock_client *c, const char **argv, const size_t *lens, size_t m,
                        redisReply **r);

#endif
