/* dlock run: whose hold a run is. A run inside a run's command re-enters the
 * locks of the runs around it (DLOCK_OWNERS, innermost first), else it is a
 * new owner. */
#include <stdlib.h>
#include <string.h>

#include "run.h"

#define OWNER_CHAIN_MAX 16   /* nested runs whose locks a run may re-enter */

/* 1 when an owner of the chain holds `name`: *owner = it. */
static int chain_holds(dlock_client *c, const char *chain, const char *name, char *owner,
                       size_t size)
{
    int found = 0;
    dlock_lock *probe;
    dlock_info *info = NULL;
    if (dlock_lock_get(c, name, &probe) == DLOCK_OK) {
        if (dlock_lock_inspect(probe, &info) != DLOCK_OK)
            info = NULL;
        dlock_lock_free(probe);
    }
    for (size_t i = 0; info && i < dlock_info_holders(info) && !found; i++) {
        const char *h = dlock_info_owner(info, i);
        size_t hl = strlen(h);
        for (const char *p = chain; *p && !found; p += strcspn(p, " ")) {
            p += strspn(p, " ");
            size_t n = strcspn(p, " ");
            if (n == hl && n < size && memcmp(p, h, n) == 0) {
                memcpy(owner, h, n + 1);
                found = 1;
            }
        }
    }
    dlock_info_free(info);
    return found;
}

/* A run inside a run's command finds the owner ids of the runs around it in
 * DLOCK_OWNERS (space-separated, innermost first). When one of them holds one
 * of the run's names, this run acts as that owner and re-enters its locks;
 * otherwise it is a new owner. Returns 0 or an exit code. */
int run_choose_owner(const cli_opts *o, dlock_client *c, const run_args *ra, char *owner,
                        size_t size, int *reentry)
{
    *reentry = 0;
    const char *chain = getenv("DLOCK_OWNERS");
    if (!chain || !*chain)
        chain = getenv("DLOCK_OWNER");
    for (int k = 0; chain && *chain && k < ra->nnames && !*reentry; k++)
        *reentry = chain_holds(c, chain, ra->names[k], owner, size);
    if (*reentry)
        return 0;
    int rc = dlock_client_new_owner_id(c, owner, size);
    return rc == DLOCK_OK ? 0 : cli_fail(o, rc, "owner id");
}

/* "DLOCK_OWNERS=<owner> <inherited...>", at most OWNER_CHAIN_MAX ids. */
char *run_owners_var(const char *owner)
{
    const char *chain = getenv("DLOCK_OWNERS");
    if (!chain || !*chain)
        chain = getenv("DLOCK_OWNER");
    if (!chain)
        chain = "";
    size_t size = strlen("DLOCK_OWNERS=") + strlen(owner) + strlen(chain) + 2;
    char *v = malloc(size);
    if (!v)
        return NULL;
    size_t off = (size_t)snprintf(v, size, "DLOCK_OWNERS=%s", owner);
    int count = 1;
    for (const char *p = chain; *p && count < OWNER_CHAIN_MAX; p += strcspn(p, " ")) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n == 0 || (n == strlen(owner) && memcmp(p, owner, n) == 0))
            continue;
        off += (size_t)snprintf(v + off, size - off, " %.*s", (int)n, p);
        count++;
    }
    return v;
}
