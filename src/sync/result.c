/* What an asynchronous call's callback reads of its result (include/dlock/
 * async.h): the drivers fill a dlock__result (sync.h), a NULL one reads as
 * empty. */
#include "sync/sync.h"

int dlock_async_status(const dlock_async_result *res) { return res ? res->status : DLOCK_EINVAL; }

const char *dlock_async_message(const dlock_async_result *res)
{
    return res && res->message ? res->message : "";
}

uint64_t dlock_async_token(const dlock_async_result *res) { return res ? res->token : 0; }

int dlock_async_flag(const dlock_async_result *res) { return res ? res->flag : 0; }

int64_t dlock_async_count(const dlock_async_result *res) { return res ? res->count : -1; }

const char *dlock_async_permit_id(const dlock_async_result *res)
{
    return res && res->permit_id ? res->permit_id : "";
}

const char *dlock_async_permit_ids(const dlock_async_result *res, size_t i)
{
    return res && res->permit_ids && i < res->n_ids ? res->permit_ids[i] : "";
}

const char *dlock_async_text(const dlock_async_result *res)
{
    return res && res->text ? res->text : "";
}
