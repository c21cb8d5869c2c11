/* Striped locks: a key mapped to one of N lock names, so that a hot resource
 * is split into segments that are locked apart. The mapping is a contract
 * shared with other languages (docs/wire-format.md, "Striped locks"):
 *
 *   name    = base + ":segment:" + segment
 *   segment = key % N                 when key is an integer: an optional '-'
 *                                     and ASCII digits, leading zeros allowed
 *                                     (its value counts: "007" is 7); the
 *                                     remainder keeps the key's sign, as
 *                                     Java's and C's %: "-3" with N = 16 is
 *                                     -3 ("-16" is 0, never "-0")
 *           = crc32(key) % N          otherwise: CRC-32 (IEEE 802.3, zlib's
 *                                     and java.util.zip.CRC32's) of the key's
 *                                     bytes, an unsigned 32-bit number
 *
 * so a Java service computing base + ":segment:" + (id % 16) for a long id,
 * or (crc32.getValue() % 16) for a string, names the same locks. An integer
 * of any length is read exactly (its remainder is taken digit by digit). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "dlock/dlock.h"

static uint32_t crc32_ieee(const char *s)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        crc ^= *p;
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* The segment of `key` among n as text ("-3", "11") into seg. */
static void segment_of(const char *key, int n, char seg[16])
{
    const char *d = key[0] == '-' ? key + 1 : key;
    size_t nd = strspn(d, "0123456789");
    if (nd > 0 && d[nd] == '\0') {
        uint64_t rem = 0;
        for (size_t i = 0; i < nd; i++)
            rem = (rem * 10 + (uint64_t)(d[i] - '0')) % (uint64_t)n;
        /* rem < n <= 2^20: at most 7 digits (unsigned, for the compiler) */
        snprintf(seg, 16, "%s%u", d != key && rem ? "-" : "", (unsigned)rem);
        return;
    }
    snprintf(seg, 16, "%lu", (unsigned long)(crc32_ieee(key) % (uint32_t)n));
}

int dlock_stripe_name(const char *base, const char *key, int nstripes, char *buf, size_t size)
{
    dlock__clear_error();
    if (!base || !*base)
        return dlock__fail(DLOCK_EINVAL, "striped lock: the base name is NULL or empty");
    if (!key || !*key)
        return dlock__fail(DLOCK_EINVAL, "striped lock: the key is NULL or empty");
    if (nstripes < 1 || nstripes > DLOCK_STRIPES_MAX)
        return dlock__fail(DLOCK_EINVAL, "striped lock: %d stripes: give 1 to %d", nstripes,
                           DLOCK_STRIPES_MAX);
    if (!buf)
        return dlock__fail(DLOCK_EINVAL, "striped lock: the buffer is NULL");
    char seg[16];
    segment_of(key, nstripes, seg);
    size_t len = strlen(base) + strlen(":segment:") + strlen(seg);
    if (len > DLOCK_NAME_MAX)
        return dlock__fail(DLOCK_ENAMETOOLONG, "striped lock: the name would be %zu bytes, "
                                               "longer than %d", len, DLOCK_NAME_MAX);
    if (len >= size)
        return dlock__fail(DLOCK_ENAMETOOLONG, "striped lock: the name needs %zu bytes and "
                                               "its NUL, the buffer has %zu", len, size);
    snprintf(buf, size, "%s:segment:%s", base, seg);
    return DLOCK_OK;
}

typedef int (*get_fn)(dlock_client *c, const char *name, dlock_lock **out);

static int get_striped(get_fn get, dlock_client *c, const char *base, const char *key,
                       int nstripes, dlock_lock **out)
{
    if (out)
        *out = NULL;
    if (!c || !out) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "striped lock: client or out-parameter is NULL");
    }
    char name[DLOCK_NAME_MAX + 1];
    int rc = dlock_stripe_name(base, key, nstripes, name, sizeof(name));
    return rc == DLOCK_OK ? get(c, name, out) : rc;
}

int dlock_lock_get_striped(dlock_client *c, const char *base, const char *key, int nstripes,
                           dlock_lock **out)
{
    return get_striped(dlock_lock_get, c, base, key, nstripes, out);
}

int dlock_fair_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                int nstripes, dlock_lock **out)
{
    return get_striped(dlock_fair_lock_get, c, base, key, nstripes, out);
}

int dlock_read_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                int nstripes, dlock_lock **out)
{
    return get_striped(dlock_read_lock_get, c, base, key, nstripes, out);
}

int dlock_write_lock_get_striped(dlock_client *c, const char *base, const char *key,
                                 int nstripes, dlock_lock **out)
{
    return get_striped(dlock_write_lock_get, c, base, key, nstripes, out);
}
