/* The server clock check (clock.h): TIME on the renewal connection after
 * each pass's batches, its answer kept with the monotonic times it was sent
 * and answered, each answer compared with the one before. Io thread only. */
#include <stdlib.h>

#include "io/clock.h"

int64_t dlock__clock_jump_us(const wd_clock *a, const wd_clock *b, int64_t allow_ms)
{
    if (!a->have || !b->have)
        return 0;
    const int64_t ds = b->server_us - a->server_us;
    /* a's read came between a->sent and a->got, b's between b->sent and
     * b->got: between them passed at least lo and at most hi. */
    const int64_t lo = b->sent_us - a->got_us, hi = b->got_us - a->sent_us;
    const int64_t allow = allow_ms * 1000 + hi / 100 * DLOCK__CLOCK_DRIFT_PCT;
    if (ds > hi + allow)
        return ds - hi;
    if (ds < lo - allow)
        return ds - lo;
    return 0;
}

/* A TIME asked for: what its answer needs. */
typedef struct time_ask {
    const dlock__wd_clock *ck;
    wconn *wc;
    int64_t sent_us;
} time_ask;

/* TIME's answer: [seconds, microseconds] as strings. */
static int parse_time(const redisReply *r, int64_t *us)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return 0;
    for (int i = 0; i < 2; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING)
            return 0;
    *us = strtoll(r->element[0]->str, NULL, 10) * 1000000 + strtoll(r->element[1]->str, NULL, 10);
    return 1;
}

static void on_time(dlock__aconn *ac, redisReply *r, int status, void *ud)
{
    time_ask *a = ud;
    wconn *wc = a->wc;
    const dlock__wd_clock *ck = a->ck;
    const int64_t got = dlock__now_us();
    wc->inflight--;
    wc->clock_asked = 0;
    wd_clock now = {1, 0, a->sent_us, got};
    free(a);
    if (status < 0 || ac != wc->conn || !parse_time(r, &now.server_us))
        return;
    const int64_t allow = ck->ctx->cfg->clock_jump_ms;
    const int64_t jump = allow < 0 ? 0 : dlock__clock_jump_us(&wc->clock, &now, allow);
    wc->clock = now;
    if (jump != 0)
        ck->jumped(ck->ud, wc, jump);
}

void dlock__wd_clock_sample(const dlock__wd_clock *ck, wconn *wc)
{
    if (ck->ctx->cfg->clock_jump_ms < 0 || wc->nodes->stopping || wc->clock_asked ||
        !dlock__aconn_ready(wc->conn))
        return;
    time_ask *a = malloc(sizeof(*a));
    if (!a)
        return;   /* not sampled: the next pass compares with the last one */
    a->ck = ck;
    a->wc = wc;
    a->sent_us = dlock__now_us();
    const char *av[] = {"TIME"};
    size_t lens[] = {4};
    if (dlock__aconn_send(wc->conn, 1, av, lens, 1, on_time, a) == DLOCK_OK) {
        wc->inflight++;   /* keeps wc while the answer is due */
        wc->clock_asked = 1;
    } else {
        free(a);
    }
}

void dlock__wd_clock_reset(wconn *wc) { wc->clock.have = 0; }
