/* A request on a node, with the retry policy (docs/internals/retries.md).
 *
 * A failure before the request could reach Redis (connect refused, a write
 * that failed) is retried up to retry_attempts times. Once the request is
 * written, any failure to read the reply (timeout, reset, EOF) means it may
 * have run: it is retried only for idempotent requests, otherwise the call
 * returns DLOCK_EUNKNOWN, so that an acquire is never counted twice. A request
 * guarded by a latch (release) is never written when its reply could come
 * after the latch expires: a retry landing after that would count a second
 * release. Scripts go by EVALSHA; NOSCRIPT loads the script and resends. */
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

#define ARGV_STACK 24

/* Transient server states worth a retry after the pause. */
static int transient_error(const char *s)
{
    return strncmp(s, "LOADING", 7) == 0 || strncmp(s, "BUSY", 4) == 0 ||
           strncmp(s, "TRYAGAIN", 8) == 0 || strncmp(s, "MASTERDOWN", 10) == 0;
}

/* 0 loaded, -1 refused, -2 no answer (the load may have run). */
static int load_script(dlock__node *n, dlock__conn *c, int script)
{
    const dlock__script *s = &dlock__scripts[script];
    const char *av[] = {"SCRIPT", "LOAD", s->body};
    size_t lens[] = {6, 4, s->len};
    redisReply *r;
    int timed_out;
    if (dlock__conn_roundtrip(c, 3, av, lens, 0, &r, &timed_out) != DLOCK__SENT_OK)
        return -2;
    int ok = r->type == REDIS_REPLY_STRING && r->len == 40 && memcmp(r->str, s->sha, 40) == 0;
    if (!ok)
        dlock__log(dlock__node_ctx(n)->cfg, DLOCK_LOG_ERROR, "SCRIPT LOAD of %s on %s failed: %s",
                   s->name, dlock__node_addr(n),
                   r->type == REDIS_REPLY_ERROR ? r->str : "unexpected digest");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One attempt on one connection, reloading the script after NOSCRIPT. */
static dlock__sent send_once(dlock__node *n, dlock__conn *ctx, int script, int argc,
                             const char *const *argv, const size_t *lens, int ping_first,
                             redisReply **out, int *timed_out)
{
    redisReply *r;
    dlock__sent o = dlock__conn_roundtrip(ctx, argc, argv, lens, ping_first, &r, timed_out);
    if (o == DLOCK__SENT_OK && script >= 0 && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* The server's script cache is empty (restart, SCRIPT FLUSH): load and resend. */
        freeReplyObject(r);
        int lrc = load_script(n, ctx, script);
        if (lrc != 0) {
            *out = NULL;
            /* The request itself did not run (NOSCRIPT): when the load got
             * no answer, it may be sent again like one never sent. */
            return lrc == -2 ? DLOCK__NOT_SENT : DLOCK__SENT_OK;
        }
        o = dlock__conn_roundtrip(ctx, argc, argv, lens, 0, &r, timed_out);
    }
    *out = r;
    return o;
}

/* A script request must match the KEYS/ARGV its header declares: a mismatch
 * is a bug in the caller, caught before anything is sent. */
int dlock__req_check(const dlock__req *req)
{
    if (req->script < 0)
        return DLOCK_OK;
    const dlock__script *s = &dlock__scripts[req->script];
    int nargs = req->argc - req->nkeys;
    if (req->nkeys < s->keys_min || (s->keys_max >= 0 && req->nkeys > s->keys_max) ||
        nargs < s->args_min || (s->args_max >= 0 && nargs > s->args_max))
        return dlock__fail(DLOCK_EINVAL,
                           "script %s called with %d keys and %d arguments; its header "
                           "declares %d..%d keys and %d..%d arguments (-1: no limit)",
                           s->name, req->nkeys, nargs, s->keys_min, s->keys_max, s->args_min,
                           s->args_max);
    return DLOCK_OK;
}

/* EVALSHA <sha> <nkeys> keys... args... into a (stack arrays when they fit). */
static int evalsha_argv(const dlock__req *req, char nk[16], const char **st_a, size_t *st_l,
                        const char *const **av, size_t **lens)
{
    int argc = req->argc + 3;
    const char **a = st_a;
    size_t *l = st_l;
    if (argc > ARGV_STACK) {
        a = malloc(sizeof(*a) * (size_t)argc);
        l = malloc(sizeof(*l) * (size_t)argc);
        if (!a || !l) {
            free(a);
            free(l);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
    }
    a[0] = "EVALSHA";
    l[0] = 7;
    a[1] = dlock__scripts[req->script].sha;
    l[1] = 40;
    a[2] = nk;
    l[2] = dlock__fmt_i64(nk, req->nkeys);
    for (int i = 0; i < req->argc; i++) {
        a[i + 3] = req->argv[i];
        l[i + 3] = req->lens ? req->lens[i] : strlen(req->argv[i]);
    }
    *av = a;
    *lens = l;
    return DLOCK_OK;
}

_Thread_local int dlock__acks = -1;

/* WAIT <replicas> <timeout> on the connection that just wrote: the count of
 * replicas that have its writes (0 when it cannot be asked). */
static int wait_acks(const dlock_config *cfg, dlock__conn *ctx)
{
    char n[24], t[24];
    const char *av[] = {"WAIT", n, t};
    size_t lens[] = {4, dlock__fmt_i64(n, cfg->ack_replicas),
                     dlock__fmt_i64(t, cfg->ack_timeout_ms)};
    redisReply *r = NULL;
    int timed_out = 0;
    if (dlock__conn_roundtrip(ctx, 3, av, lens, 0, &r, &timed_out) != DLOCK__SENT_OK)
        return 0;
    int acks = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : 0;
    freeReplyObject(r);
    return acks;
}

int dlock__node_call(dlock__node *n, const dlock__req *req, redisReply **out)
{
    const dlock_config *cfg = dlock__node_ctx(n)->cfg;
    const char *addr = dlock__node_addr(n);
    const char *av_stack[ARGV_STACK];
    size_t len_stack[ARGV_STACK];
    const char *const *av = req->argv;
    const size_t *lens = req->lens;
    int argc = req->argc;
    char nk[16];

    if (req->script >= 0) {
        int rc = dlock__req_check(req);
        if (rc == DLOCK_OK)
            rc = evalsha_argv(req, nk, av_stack, len_stack, &av, (size_t **)&lens);
        if (rc != DLOCK_OK)
            return rc;
        argc = req->argc + 3;
    }

    int rc = DLOCK_OK;
    int failures = 0;
    int64_t first_write = -1;
    for (;;) {
        dlock__conn *ctx;
        uint64_t gen;
        int fresh, timed_out = 0;
        redisReply *r = NULL;
        rc = dlock__node_get_conn(n, &ctx, &gen, &fresh, (req->flags & DLOCK__CALL_IDLE_ONLY) != 0);
        /* A PING first is a second read, each under the command timeout. */
        int64_t answer_within =
            cfg->command_timeout_ms * ((req->flags & DLOCK__CALL_PING_FIRST) ? 2 : 1);
        if (rc == DLOCK_OK && req->latch_ms > 0 && first_write >= 0 &&
            dlock__now_ms() + answer_within + 500 > first_write + req->latch_ms) {
            /* Its reply could come after the latch is gone: a retry that then ran
             * would release a second hold. Give up with the last error. */
            dlock__node_put_conn(n, ctx, gen, 0);
            rc = dlock__fail(DLOCK_ECMDTIMEOUT,
                             "%s: no answer, and retrying now could release twice", addr);
            break;
        }
        if (rc == DLOCK_OK) {
            if (first_write < 0)
                first_write = dlock__now_ms();
            dlock__sent o = send_once(n, ctx, req->script, argc, av, lens,
                                      (req->flags & DLOCK__CALL_PING_FIRST) != 0, &r,
                                      &timed_out);
            if (o == DLOCK__SENT_OK) {
                if ((req->flags & DLOCK__CALL_WAIT_ACK) && cfg->ack_replicas > 0 && r &&
                    r->type != REDIS_REPLY_ERROR)
                    dlock__acks = wait_acks(cfg, ctx);
                dlock__node_put_conn(n, ctx, gen, 0);
                if (!r) {
                    rc = dlock__fail(DLOCK_EREDIS, "cannot load script %s on %s",
                                     dlock__scripts[req->script].name, addr);
                    break;
                }
                if (r->type != REDIS_REPLY_ERROR) {
                    *out = r;
                    rc = DLOCK_OK;
                    break;
                }
                rc = dlock__fail(dlock__redis_error_code(r->str), "%s: %s", addr, r->str);
                int again = transient_error(r->str);
                freeReplyObject(r);
                if (!again)
                    break;
            } else {
                const char *why = dlock__conn_error(ctx);
                /* Out of memory before the request went out: it did not run. */
                rc = dlock__fail(o == DLOCK__NOT_SENT && dlock__conn_oom(ctx) ? DLOCK_ENOMEM
                                 : timed_out                                 ? DLOCK_ECMDTIMEOUT
                                                                             : DLOCK_ECONN,
                                 "%s: %s", addr,
                                 timed_out ? "no reply within the command timeout" : why);
                dlock__node_put_conn(n, ctx, gen, 1);
                if (o == DLOCK__MAYBE_RAN && !(req->flags & DLOCK__CALL_IDEMPOTENT)) {
                    rc = dlock__fail(DLOCK_EUNKNOWN,
                                     "%s: %s after the request was sent; it may have run",
                                     addr, timed_out ? "no reply in time" : "connection lost");
                    break;
                }
                if (o == DLOCK__NOT_SENT && !fresh)
                    continue;   /* a connection that died idle: try another at once */
            }
        }
        if (rc == DLOCK_ENOMEM || rc == DLOCK_EAUTH || rc == DLOCK_ESYS || rc == DLOCK_ETLS ||
            (req->flags & DLOCK__CALL_NO_RETRY))
            break;
        if (failures++ >= cfg->retry_attempts)
            break;
        int prc = dlock__cancel_sleep(req->cancel, cfg->retry_delay_ms);
        if (prc != DLOCK_OK) {
            rc = prc;
            break;
        }
    }
    if (av != req->argv && av != av_stack) {
        free((void *)av);
        free((void *)lens);
    }
    return rc;
}

/* ------------------------------------------------------------ pipelined */

int dlock__node_fail_reply(const dlock__node *n, redisReply *r)
{
    int rc = dlock__fail(dlock__redis_error_code(r->str), "%s: %s", dlock__node_addr(n), r->str);
    freeReplyObject(r);
    return rc;
}

/* One request of a batch, in the form it is written. */
typedef struct prepared {
    int argc;
    const char *const *av;
    size_t *lens;
    int noscript;            /* answered NOSCRIPT: load its script, then resend */
    char nk[16];
    const char *av_st[ARGV_STACK];
    size_t len_st[ARGV_STACK];
} prepared;

static int prepare(const dlock__req *req, prepared *p)
{
    p->argc = req->argc;
    p->av = req->argv;
    p->lens = (size_t *)req->lens;
    if (req->script < 0)
        return DLOCK_OK;
    int rc = dlock__req_check(req);
    if (rc == DLOCK_OK)
        rc = evalsha_argv(req, p->nk, p->av_st, p->len_st, &p->av, &p->lens);
    p->argc = req->argc + 3;
    return rc;
}

static void unprepare(const dlock__req *req, prepared *p)
{
    if (p->av && p->av != req->argv && p->av != p->av_st) {
        free((void *)p->av);
        free(p->lens);
    }
}

/* Pending requests whose answer could now come after their latch expires are
 * given up (as dlock__node_call does); returns how many stay pending. */
static size_t drop_late(const dlock__node *n, const dlock__req *reqs, size_t *pend, size_t np,
                        int64_t first_write, int64_t answer_within, int *rc)
{
    size_t keep = 0;
    int64_t now = dlock__now_ms();
    for (size_t j = 0; j < np; j++) {
        const dlock__req *q = &reqs[pend[j]];
        if (q->latch_ms > 0 && now + answer_within + 500 > first_write + q->latch_ms)
            rc[pend[j]] = dlock__fail(DLOCK_ECMDTIMEOUT,
                                      "%s: no answer, and retrying now could release twice",
                                      dlock__node_addr(n));
        else
            pend[keep++] = pend[j];
    }
    return keep;
}

/* Reads one written batch's answers into out/rc; keeps in pend (in order)
 * what is to be sent again. Sets *transient / *noscript when a reply asks for
 * a resend after the pause / after loading a script. */
static size_t sort_replies(dlock__node *n, const dlock__req *reqs, prepared *p, size_t *pend,
                           size_t np, redisReply **rep, size_t nread, dlock__sent o,
                           int timed_out, const char *why, redisReply **out, int *rc,
                           int *transient, int *noscript)
{
    const char *addr = dlock__node_addr(n);
    size_t keep = 0;
    for (size_t j = 0; j < nread; j++) {
        size_t i = pend[j];
        redisReply *r = rep[j];
        if (r->type != REDIS_REPLY_ERROR) {
            rc[i] = DLOCK_OK;
            out[i] = r;
        } else if (reqs[i].script >= 0 && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            freeReplyObject(r);   /* not run: load, then send again */
            p[i].noscript = *noscript = 1;
            pend[keep++] = i;
        } else if (transient_error(r->str)) {
            rc[i] = dlock__node_fail_reply(n, r);
            *transient = 1;
            pend[keep++] = i;
        } else {
            rc[i] = dlock__redis_error_code(r->str);
            out[i] = r;
        }
    }
    if (o != DLOCK__MAYBE_RAN)
        return keep;
    /* The rest were written and not answered: they may have run. */
    int code = dlock__fail(timed_out ? DLOCK_ECMDTIMEOUT : DLOCK_ECONN, "%s: %s", addr,
                           timed_out ? "no reply within the command timeout" : why);
    int unknown = 0;
    for (size_t j = nread; j < np; j++) {
        size_t i = pend[j];
        if (reqs[i].flags & DLOCK__CALL_IDEMPOTENT) {
            rc[i] = code;
            pend[keep++] = i;
        } else {
            rc[i] = DLOCK_EUNKNOWN;
            unknown = 1;
        }
    }
    if (unknown)
        dlock__fail(DLOCK_EUNKNOWN, "%s: %s after the request was sent; it may have run", addr,
                    timed_out ? "no reply in time" : "connection lost");
    return keep;
}

/* Loads the scripts that answered NOSCRIPT on ctx; a request whose script
 * cannot be loaded is done (DLOCK_EREDIS). Returns how many stay pending. */
static size_t load_missing(dlock__node *n, dlock__conn *ctx, const dlock__req *reqs,
                           prepared *p, size_t *pend, size_t np, int *rc)
{
    size_t keep = 0;
    for (size_t j = 0; j < np; j++) {
        size_t i = pend[j];
        if (p[i].noscript) {
            int s = reqs[i].script, ok = 1;
            for (size_t m = 0; m < j; m++)   /* loaded for an earlier request already? */
                if (reqs[pend[m]].script == s && p[pend[m]].noscript)
                    ok = 0;
            if (ok && load_script(n, ctx, s) != 0) {
                for (size_t m = j; m < np; m++)
                    if (reqs[pend[m]].script == s && p[pend[m]].noscript) {
                        rc[pend[m]] = dlock__fail(DLOCK_EREDIS, "cannot load script %s on %s",
                                                  dlock__scripts[s].name, dlock__node_addr(n));
                        p[pend[m]].noscript = 2;   /* done */
                    }
            }
        }
        if (p[i].noscript != 2) {
            p[i].noscript = 0;
            pend[keep++] = i;
        }
    }
    return keep;
}

void dlock__node_call_many(dlock__node *n, const dlock__req *reqs, size_t k, unsigned flags,
                           dlock_cancel *cancel, redisReply **out, int *rc)
{
    const dlock_config *cfg = dlock__node_ctx(n)->cfg;
    for (size_t i = 0; i < k; i++) {
        out[i] = NULL;
        rc[i] = DLOCK_ENOMEM;
    }
    prepared *p = calloc(k, sizeof(*p));
    size_t *pend = malloc(k * sizeof(*pend));
    int *argc = malloc(k * sizeof(*argc));
    const char *const **av = malloc(k * sizeof(*av));
    const size_t **lens = malloc(k * sizeof(*lens));
    redisReply **rep = malloc(k * sizeof(*rep));
    size_t np = 0;
    int ping_first = 0;
    if (!p || !pend || !argc || !av || !lens || !rep) {
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        k = 0;
    }
    for (size_t i = 0; i < k; i++) {
        rc[i] = prepare(&reqs[i], &p[i]);
        if (rc[i] == DLOCK_OK) {
            pend[np++] = i;
            ping_first |= (reqs[i].flags & DLOCK__CALL_PING_FIRST) != 0;
        }
    }
    /* A PING first is a second read, each under the command timeout. */
    int64_t answer_within = cfg->command_timeout_ms * (ping_first ? 2 : 1);
    int failures = 0, loads = 0;
    int64_t first_write = -1;
    while (np > 0) {
        dlock__conn *ctx;
        uint64_t gen;
        int fresh, timed_out = 0, transient = 0, noscript = 0;
        int crc = dlock__node_get_conn(n, &ctx, &gen, &fresh,
                                       (flags & DLOCK__CALL_IDLE_ONLY) != 0);
        if (crc == DLOCK_OK && first_write >= 0 &&
            (np = drop_late(n, reqs, pend, np, first_write, answer_within, rc)) == 0) {
            dlock__node_put_conn(n, ctx, gen, 0);
            break;
        }
        if (crc == DLOCK_OK) {
            if (first_write < 0)
                first_write = dlock__now_ms();
            for (size_t j = 0; j < np; j++) {
                argc[j] = p[pend[j]].argc;
                av[j] = p[pend[j]].av;
                lens[j] = p[pend[j]].lens;
            }
            size_t nread = 0;
            dlock__sent o = dlock__conn_pipeline(ctx, np, argc, av, lens, ping_first, rep, &nread,
                                                 &timed_out);
            const char *why = dlock__conn_error(ctx);
            if (o == DLOCK__NOT_SENT) {
                crc = dlock__fail(DLOCK_ECONN, "%s: %s", dlock__node_addr(n), why);
                dlock__node_put_conn(n, ctx, gen, 1);
                for (size_t j = 0; j < np; j++)
                    rc[pend[j]] = crc;
                if (!fresh)
                    continue;   /* a connection that died idle: try another at once */
            } else {
                np = sort_replies(n, reqs, p, pend, np, rep, nread, o, timed_out, why, out, rc,
                                  &transient, &noscript);
                if (noscript && o == DLOCK__SENT_OK)
                    np = load_missing(n, ctx, reqs, p, pend, np, rc);
                dlock__node_put_conn(n, ctx, gen, o != DLOCK__SENT_OK || dlock__conn_broken(ctx));
                if (np == 0)
                    break;
                if (noscript && !transient && o == DLOCK__SENT_OK && loads++ < 2)
                    continue;   /* the scripts are loaded now: send again at once */
            }
        } else {
            for (size_t j = 0; j < np; j++)
                rc[pend[j]] = crc;
        }
        if (crc == DLOCK_ENOMEM || crc == DLOCK_EAUTH || crc == DLOCK_ESYS || crc == DLOCK_ETLS ||
            (flags & DLOCK__CALL_NO_RETRY) || failures++ >= cfg->retry_attempts)
            break;
        int prc = dlock__cancel_sleep(cancel, cfg->retry_delay_ms);
        if (prc != DLOCK_OK) {
            for (size_t j = 0; j < np; j++)
                rc[pend[j]] = prc;
            break;
        }
    }
    for (size_t i = 0; p && i < k; i++)
        unprepare(&reqs[i], &p[i]);
    free(p);
    free(pend);
    free(argc);
    free(av);
    free(lens);
    free(rep);
}
