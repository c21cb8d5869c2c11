/* Allocation failure injection for test_nomem: this program is linked with
 * -Wl,--wrap for malloc, calloc, realloc, strdup and free, so every
 * allocation of the objects linked in (dlock's, and hiredis's: its static
 * archive is linked in whole) comes here. While armed, the Nth allocation
 * fails (returns NULL) and the others go through; every block allocated while
 * tracking is on is remembered until freed, so that a run can tell what it
 * leaked. Thread-safe: the io thread allocates too. */
#include "nomem_hook.h"

#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);

static _Atomic int armed, tracking;
static _Atomic long fail_at, counted, failures;
static _Atomic(void *) failed_site;

/* Blocks allocated while tracking: open addressing, deleted slots marked. */
#define SLOTS (1 << 16)
#define GONE ((void *)1)
static void *table[SLOTS];
static size_t live;
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(const void *p) { return ((uintptr_t)p >> 4) * 2654435761u % SLOTS; }

static void remember(void *p)
{
    pthread_mutex_lock(&table_mu);
    for (size_t i = slot_of(p), k = 0; k < SLOTS; i = (i + 1) % SLOTS, k++)
        if (!table[i] || table[i] == GONE) {
            table[i] = p;
            live++;
            break;
        }
    pthread_mutex_unlock(&table_mu);
}

static void forget(void *p)
{
    pthread_mutex_lock(&table_mu);
    for (size_t i = slot_of(p), k = 0; k < SLOTS && table[i]; i = (i + 1) % SLOTS, k++)
        if (table[i] == p) {
            table[i] = GONE;
            live--;
            break;
        }
    pthread_mutex_unlock(&table_mu);
}

/* Counts an allocation; 1 when it is the one to fail. */
static int fail_now(void *site)
{
    if (!atomic_load(&armed))
        return 0;
    long k = atomic_fetch_add(&counted, 1) + 1;
    if (k != atomic_load(&fail_at))
        return 0;
    atomic_fetch_add(&failures, 1);
    atomic_store(&failed_site, site);
    return 1;
}

static void *kept(void *p)
{
    if (p && atomic_load(&tracking))
        remember(p);
    return p;
}

void *__wrap_malloc(size_t n)
{
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    return kept(__real_malloc(n));
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    return kept(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_now(__builtin_return_address(0)))
        return NULL;   /* p stays as it was */
    void *q = __real_realloc(p, n);
    if (q && p)
        forget(p);
    return kept(q);
}

char *__wrap_strdup(const char *s)
{
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = __real_malloc(n);
    if (p)
        memcpy(p, s, n);
    return kept(p);
}

void __wrap_free(void *p)
{
    if (p)
        forget(p);
    __real_free(p);
}

void nomem_track(int on)
{
    atomic_store(&tracking, on);
}

void nomem_arm(long n)
{
    atomic_store(&counted, 0);
    atomic_store(&failures, 0);
    atomic_store(&failed_site, NULL);
    atomic_store(&fail_at, n);
    atomic_store(&armed, 1);
}

void nomem_disarm(void)
{
    atomic_store(&armed, 0);
}

long nomem_counted(void) { return atomic_load(&counted); }
long nomem_failures(void) { return atomic_load(&failures); }
void *nomem_failed_site(void) { return atomic_load(&failed_site); }

size_t nomem_live(void)
{
    pthread_mutex_lock(&table_mu);
    size_t n = live;
    pthread_mutex_unlock(&table_mu);
    return n;
}
