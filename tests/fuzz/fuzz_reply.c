/* libFuzzer target: reading every script's and command's answer. The input is
 * a RESP stream (parsed by hiredis's reader, as on a real connection); each
 * reply is handed to every reader, which must return a code and never read
 * past the reply. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const redisReply *r)
{
    int64_t v = 0;
    uint64_t token = 0;
    int flag = 0, outcome = 0, heard = 0;
    int resv = 0;
    int rc = dlock__reply_acquire(r, 0, &v, &token, &resv);
    if (rc != DLOCK_OK && rc != DLOCK__BUSY && rc != DLOCK_EPROTO)
        abort();
    if (rc == DLOCK__BUSY && resv == DLOCK__RESV_OTHER && v < 0)
        abort();   /* a reservation on a free lock always has a time left */
    rc = dlock__reply_acquire(r, 1, &v, &token, &resv);
    if (rc == DLOCK_OK && token == 0)
        abort();   /* a fenced acquisition always has a token */
    int why = 0;
    rc = dlock__reply_rw_acquire(r, 1, &v, &token, &why);
    if ((rc == DLOCK_OK && token == 0) || (why && rc != DLOCK__BUSY))
        abort();
    if (rc == DLOCK__BUSY && why == DLOCK__RW_DELAYED && v < 0)
        abort();   /* a lock-delay always has a time left */
    if (dlock__reply_release(r, &outcome, &heard) == DLOCK_OK &&
        ((outcome != DLOCK__RELEASE_GONE && outcome != DLOCK__RELEASE_KEPT &&
          outcome != DLOCK__RELEASE_NOT_HELD) ||
         (heard && outcome != DLOCK__RELEASE_GONE)))
        abort();
    if (dlock__reply_flag(r, &flag) == DLOCK_OK && flag != 0 && flag != 1)
        abort();
    dlock__reply_integer(r, &v);
    dlock__reply_type_locked(r, &flag);
    if (dlock__reply_count(r, &v) == DLOCK_OK && v < 0)
        abort();
    rc = dlock__reply_take(r, &v);
    if (rc != DLOCK_OK && rc != DLOCK__BUSY && rc != DLOCK_EPROTO)
        abort();
    rc = dlock__reply_signed(r, &v);
    if (rc != DLOCK_OK && rc != DLOCK_EWRONGTYPE && rc != DLOCK_EPROTO)
        abort();
    int64_t w = 0;
    dlock__reply_pair(r, &v, &w);
    int64_t ints[4];
    size_t nints = 0;
    if (dlock__reply_ints(r, ints, 4, &nints) == DLOCK_OK && (nints < 1 || nints > 4))
        abort();
    unsigned char held[DLOCK__RENEW_BATCH];
    for (size_t n = 1; n <= 3; n++)
        dlock__reply_renew(r, n, held);
    if (r->type == REDIS_REPLY_ARRAY && r->elements <= DLOCK__RENEW_BATCH)
        dlock__reply_renew(r, r->elements, held);
    int written = 0;
    const redisReply *value = NULL;
    uint64_t highest = 0;
    if (dlock__reply_fence(r, &written, &value, &highest) == DLOCK_OK &&
        ((written && !value) || (!written && highest == 0)))
        abort();
    dlock_info *info = NULL;
    const char *what;
    if (dlock__info_from_entry("fuzz", 4, r, &info, &what) == DLOCK_OK) {
        for (size_t i = 0; i < dlock_info_holders(info); i++)
            if (!dlock_info_owner(info, i) || dlock_info_hold_count(info, i) <= 0)
                abort();
        dlock_info_free(info);
    }
}

/* hiredis 0.14's reader allocates an aggregate's element array from the
 * declared count before any element arrives (*888888888 asks for 7 GB): a
 * known limit of that reader (docs/c-guide.md, Limits), not of dlock's code. Inputs
 * declaring more than a million elements are skipped. */
static int huge_aggregate(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d[i] != '*' && d[i] != '$')
            continue;
        size_t j = i + 1, digits = 0;
        while (j < n && d[j] >= '0' && d[j] <= '9' && digits < 32)
            j++, digits++;
        if (digits > 6)
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (huge_aggregate(data, size))
        return 0;
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return 0;
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        for (int i = 0; i < 64; i++) {
            void *r = NULL;
            if (redisReaderGetReply(rd, &r) != REDIS_OK || !r)
                break;
            check(r);
            freeReplyObject(r);
        }
    }
    redisReaderFree(rd);
    return 0;
}
