/* Clocks, thread ids, randomness and small string helpers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

int64_t dlock__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t dlock__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static _Thread_local uint64_t tls_tid;

uint64_t dlock__tid(void)
{
    if (!tls_tid)
        tls_tid = (uint64_t)syscall(SYS_gettid);
    return tls_tid;
}

/* xorshift128+ per thread, seeded from getrandom: request ids need to be
 * unique, not secret, and getrandom per release would be a syscall per call. */
static _Thread_local uint64_t rng_s[2];

static void rng_seed(void)
{
    uint64_t seed[2] = {0, 0};
    if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
        seed[1] = dlock__tid() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
    }
    rng_s[0] = seed[0] | 1;
    rng_s[1] = seed[1] ^ 0x6a09e667f3bcc909ULL;
}

void dlock__atfork_child(void)
{
    /* The child's only thread is a new thread: its id differs, and a random
     * state copied from the parent would repeat the parent's request ids. */
    tls_tid = 0;
    rng_s[0] = rng_s[1] = 0;
}

static uint64_t rng_next(void)
{
    if (!rng_s[0] && !rng_s[1])
        rng_seed();
    uint64_t s1 = rng_s[0];
    const uint64_t s0 = rng_s[1];
    rng_s[0] = s0;
    s1 ^= s1 << 23;
    rng_s[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return rng_s[1] + s0;
}

void dlock__random(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            break;
        }
        p += n;
        len -= (size_t)n;
    }
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)rng_next();
}

static const char hexdig[] = "0123456789abcdef";

void dlock__random_hex32(char out[33])
{
    uint64_t a = rng_next(), b = rng_next();
    for (int i = 0; i < 16; i++) {
        out[i] = hexdig[(a >> (i * 4)) & 15];
        out[16 + i] = hexdig[(b >> (i * 4)) & 15];
    }
    out[32] = '\0';
}

void dlock__uuid(char out[37])
{
    unsigned char b[16];
    dlock__random(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
    char *o = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hexdig[b[i] >> 4];
        *o++ = hexdig[b[i] & 15];
    }
    *o = '\0';
}

void dlock__abstime(int64_t deadline_ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(deadline_ms / 1000);
    ts->tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
}

int dlock__cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc == 0 ? 0 : -1;
}

char *dlock__strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

int dlock__dup_opt(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = dlock__strndup(src, strlen(src));
    return *dst ? 0 : -1;
}

size_t dlock__fmt_i64(char *buf, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = 0;
    if (v < 0)
        buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    buf[len] = '\0';
    return len;
}

int dlock__hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

void dlock__free_secret(char *s)
{
    if (!s)
        return;
    /* Do not leave it lying in freed memory. */
    volatile char *p = s;
    while (*p)
        *p++ = 0;
    free(s);
}

int dlock__info_field(const char *info, const char *field, char *buf, size_t size)
{
    size_t fl = strlen(field);
    if (size > 0)
        buf[0] = '\0';
    for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, field, fl) != 0 || p[fl] != ':')
            continue;
        p += fl + 1;
        size_t n = strcspn(p, "\r\n");
        if (n >= size)
            return 0;
        memcpy(buf, p, n);
        buf[n] = '\0';
        return 1;
    }
    return 0;
}
