/* Allocation failure injection (nomem_hook.c), for a program linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=free. */
#ifndef DLOCK_TEST_NOMEM_HOOK_H
#define DLOCK_TEST_NOMEM_HOOK_H

#include <stddef.h>
#include <stdint.h>

/* From now on the n-th allocation fails (n >= 1; counting starts at 0). */
void nomem_arm(long n);
/* Allocations go through again (the count stops). */
void nomem_disarm(void);
/* Remember (on = 1) every block allocated from now on until it is freed. */
void nomem_track(int on);
/* Allocations counted since nomem_arm; failures made (0 or 1); the return
 * address of the failed allocation's caller (NULL: none failed). */
long nomem_counted(void);
long nomem_failures(void);
void *nomem_failed_site(void);
/* Blocks allocated while tracking and not freed yet. */
size_t nomem_live(void);

#endif
