/* Key slots and the slot map (pure: no I/O). */
#include <stdlib.h>
#include <string.h>

#include "net/cluster.h"

/* CRC16-CCITT, polynomial 0x1021, initial value 0 (XMODEM): Redis Cluster's
 * key hash. A table built once per call site would cost more than the
 * bitwise loop on the short keys locks use. */
uint16_t dlock__crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int dlock__key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return dlock__crc16(open + 1, (size_t)(close - open - 1)) & (DLOCK__SLOTS - 1);
    }
    return dlock__crc16(key, len) & (DLOCK__SLOTS - 1);
}

void dlock__slotmap_clear(dlock__slotmap *m)
{
    free(m->addr);
    m->addr = NULL;
    m->naddr = 0;
}

static int find_or_add(dlock__slotmap *m, const char *host, size_t hlen, int port, size_t *idx)
{
    for (size_t i = 0; i < m->naddr; i++)
        if (m->addr[i].port == port && strlen(m->addr[i].host) == hlen &&
            memcmp(m->addr[i].host, host, hlen) == 0) {
            *idx = i;
            return DLOCK_OK;
        }
    if (m->naddr >= DLOCK__NO_NODE)
        return dlock__fail(DLOCK_EPROTO, "CLUSTER SLOTS names too many nodes");
    dlock__slot_addr *a = realloc(m->addr, (m->naddr + 1) * sizeof(*a));
    if (!a)
        return dlock__fail(DLOCK_ENOMEM, "out of memory reading the slot map");
    m->addr = a;
    memcpy(a[m->naddr].host, host, hlen);
    a[m->naddr].host[hlen] = '\0';
    a[m->naddr].port = port;
    *idx = m->naddr++;
    return DLOCK_OK;
}

int dlock__slotmap_parse(const redisReply *r, const char *asked_host, dlock__slotmap *m)
{
    memset(m, 0, sizeof(*m));
    for (size_t s = 0; s < DLOCK__SLOTS; s++)
        m->owner[s] = DLOCK__NO_NODE;
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return dlock__fail(DLOCK_EPROTO, "CLUSTER SLOTS answered something other than a list");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            goto bad;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        const redisReply *p = e->element[2];
        if (lo < 0 || hi >= DLOCK__SLOTS || lo > hi || p->element[0]->type != REDIS_REPLY_STRING ||
            p->element[1]->type != REDIS_REPLY_INTEGER || p->element[1]->integer < 1 ||
            p->element[1]->integer > 65535)
            goto bad;
        const char *host = p->element[0]->str;
        size_t hlen = p->element[0]->len;
        if (hlen == 0 || (hlen == 1 && host[0] == '?')) {
            host = asked_host;
            hlen = strlen(asked_host);
        }
        if (hlen >= sizeof(m->addr->host) || memchr(host, '\0', hlen))
            goto bad;
        size_t idx = 0;
        int rc = find_or_add(m, host, hlen, (int)p->element[1]->integer, &idx);
        if (rc != DLOCK_OK) {
            dlock__slotmap_clear(m);
            return rc;
        }
        for (long long s = lo; s <= hi; s++) {
            if (m->owner[s] == DLOCK__NO_NODE)
                m->covered++;
            m->owner[s] = (uint16_t)idx;
        }
    }
    return DLOCK_OK;
bad:
    dlock__slotmap_clear(m);
    return dlock__fail(DLOCK_EPROTO, "CLUSTER SLOTS answered an entry of an unexpected shape");
}
