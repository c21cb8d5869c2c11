/* The call policy (docs/internals/retries.md): from what one try of a
 * request came to, what comes next. Pure: the callers (the blocking call and
 * its batch, the asynchronous call, the cluster and sentinel routers, the
 * watchdog) carry the verdict out each its own way (a sleep, a timer, a new
 * node), so that "is this transient, reload the script, go elsewhere" is
 * decided in one place, on classes (core/error.c), never on text.
 *
 * A failure before the request could reach Redis is retried after the pause
 * (at once when it was an idle pooled connection that had died). Once
 * written, a lost answer means it may have run: only an idempotent request
 * goes again, any other ends with DLOCK_EUNKNOWN, so an acquisition is never
 * counted twice. NOSCRIPT loads the script and sends again at once, once. A
 * node that does not serve the keys (MOVED, ASK, READONLY, CLUSTERDOWN)
 * answered before anything ran: the request goes again where the topology
 * says. Transient server states (LOADING, BUSY, TRYAGAIN, MASTERDOWN) are
 * retried after the pause. */
#include "net/net.h"

static dlock__verdict verdict(dlock__next next, int rc, int64_t after_ms, int counts)
{
    return (dlock__verdict){next, rc, after_ms, counts};
}

/* A retry after the pause when the budget allows, else the end with rc. */
static dlock__verdict retry_or_fail(int rc, unsigned flags, int failures, const dlock_config *cfg)
{
    if ((flags & DLOCK__CALL_NO_RETRY) || failures >= cfg->retry_attempts)
        return verdict(DLOCK__NEXT_FAIL, rc, 0, 0);
    return verdict(DLOCK__NEXT_RETRY, rc, cfg->retry_delay_ms, 1);
}

dlock__verdict dlock__call_policy(const dlock__try *t, unsigned flags, int failures, int reloaded,
                                  const dlock_config *cfg)
{
    if (t->conn_rc != DLOCK_OK) {
        int rc = t->conn_rc;
        if (rc == DLOCK_ENOMEM || rc == DLOCK_EAUTH || rc == DLOCK_ESYS || rc == DLOCK_ETLS)
            return verdict(DLOCK__NEXT_FAIL, rc, 0, 0);   /* no pause makes these go away */
        return retry_or_fail(rc, flags, failures, cfg);
    }
    if (t->sent == DLOCK__NOT_SENT && t->oom)
        return verdict(DLOCK__NEXT_FAIL, DLOCK_ENOMEM, 0, 0);
    if (t->sent == DLOCK__NOT_SENT)
        return t->fresh ? retry_or_fail(DLOCK_ECONN, flags, failures, cfg)
                        : verdict(DLOCK__NEXT_RETRY, DLOCK_ECONN, 0, 0);
    if (t->sent == DLOCK__MAYBE_RAN) {
        if (!(flags & DLOCK__CALL_IDEMPOTENT))
            return verdict(DLOCK__NEXT_FAIL, DLOCK_EUNKNOWN, 0, 0);
        return retry_or_fail(t->timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, flags, failures,
                             cfg);
    }
    int rc = dlock__rerr_code(t->err);
    switch (t->err) {
    case DLOCK__RERR_NONE:
        return verdict(DLOCK__NEXT_DONE, DLOCK_OK, 0, 0);
    case DLOCK__RERR_NOSCRIPT:
        return reloaded ? verdict(DLOCK__NEXT_FAIL, rc, 0, 0)
                        : verdict(DLOCK__NEXT_RELOAD, rc, 0, 0);
    case DLOCK__RERR_MOVED:
    case DLOCK__RERR_ASK:
        return verdict(DLOCK__NEXT_REROUTE, rc, 0, 0);
    case DLOCK__RERR_READONLY:
    case DLOCK__RERR_CLUSTERDOWN:
        /* A failover under way: the new primary may not be known yet. */
        return verdict(DLOCK__NEXT_REROUTE, rc, cfg->retry_delay_ms, 0);
    case DLOCK__RERR_TRYAGAIN:
    case DLOCK__RERR_LOADING:
    case DLOCK__RERR_BUSY:
    case DLOCK__RERR_MASTERDOWN:
        return retry_or_fail(rc, flags, failures, cfg);
    default:
        return verdict(DLOCK__NEXT_FAIL, rc, 0, 0);
    }
}

int dlock__latch_allows(int64_t first_write, int64_t latch_ms, int64_t answer_ms, int64_t now)
{
    /* A margin of 500 ms for the clocks of two machines and a late timer. */
    return latch_ms <= 0 || first_write < 0 || now + answer_ms + 500 <= first_write + latch_ms;
}

int dlock__call_lost(const char *addr, const dlock__try *t, const char *why, unsigned flags)
{
    if (t->sent == DLOCK__NOT_SENT && t->oom)
        return dlock__fail(DLOCK_ENOMEM, "%s: out of memory before the request was sent", addr);
    int rc = dlock__fail(t->timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, "%s: %s", addr,
                         t->timed_out ? "no reply within the command timeout" : why);
    if (t->sent == DLOCK__MAYBE_RAN && !(flags & DLOCK__CALL_IDEMPOTENT))
        rc = dlock__fail(DLOCK_EUNKNOWN, "%s: %s after the request was sent; it may have run",
                         addr, t->timed_out ? "no reply in time" : "connection lost");
    return rc;
}
