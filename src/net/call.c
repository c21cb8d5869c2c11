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

/* Where a request goes: the node's shared connection (pipelined with the
 * other threads' requests), or a pooled connection of its own. */
typedef struct chan {
    dlock__node *n;
    dlock__mux *m;           /* shared */
    dlock__conn *c;          /* its own */
    uint64_t gen;
    int fresh;               /* opened for this call */
    int oom;                 /* the last try failed for want of memory */
    char why[320];           /* the last try's failure */
} chan;

/* own: a connection of its own. A request whose replicas are to
 * acknowledge it needs one: WAIT counts the writes of its connection, so on
 * the shared one it would count other callers' writes too, and hold their
 * replies behind it (docs/internals/mux.md). */
static int link_get(chan *k, unsigned flags, int own)
{
    int idle = (flags & DLOCK__CALL_IDLE_ONLY) != 0;
    k->m = NULL;
    k->c = NULL;
    return own ? dlock__node_get_conn(k->n, &k->c, &k->gen, &k->fresh, idle)
               : dlock__node_get_mux(k->n, &k->m, &k->fresh, idle);
}

static dlock__sent link_roundtrip(chan *k, int argc, const char *const *av, const size_t *lens,
                                  int ping, redisReply **r, int *timed_out)
{
    k->oom = 0;
    if (k->m)
        return dlock__mux_roundtrip(k->m, argc, av, lens, ping, r, timed_out, &k->oom, k->why,
                                    sizeof(k->why));
    dlock__sent sent = dlock__conn_roundtrip(k->c, argc, av, lens, ping, r, timed_out);
    k->oom = dlock__conn_oom(k->c);
    if (sent != DLOCK__SENT_OK)
        snprintf(k->why, sizeof(k->why), "%s", dlock__conn_error(k->c));
    return sent;
}

/* Gives it back; broken: a connection that must not be reused (the shared
 * one takes no new request then). */
static void link_put(chan *k, int broken)
{
    if (k->m && broken)
        dlock__mux_retire(k->m);
    if (k->m)
        dlock__node_put_mux(k->n, k->m);
    else if (k->c)
        dlock__node_put_conn(k->n, k->c, k->gen, broken);
    k->m = NULL;
    k->c = NULL;
}

/* 0 loaded, -1 refused, -2 not answered (not written, or the answer lost). */
static int load_script(chan *k, int script)
{
    const dlock__script *s = &dlock__scripts[script];
    const char *av[] = {"SCRIPT", "LOAD", s->body};
    size_t lens[] = {6, 4, s->len};
    redisReply *r;
    int timed_out;
    if (link_roundtrip(k, 3, av, lens, 0, &r, &timed_out) != DLOCK__SENT_OK)
        return -2;
    int ok = r->type == REDIS_REPLY_STRING && r->len == 40 && memcmp(r->str, s->sha, 40) == 0;
    if (!ok)
        dlock__log(dlock__node_ctx(k->n)->cfg, DLOCK_LOG_ERROR,
                   "SCRIPT LOAD of %s on %s failed: %s", s->name, dlock__node_addr(k->n),
                   r->type == REDIS_REPLY_ERROR ? r->str : "unexpected digest");
    freeReplyObject(r);
    return ok ? 0 : -1;
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

int dlock__role_replicas(const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
        r->element[2]->type == REDIS_REPLY_ARRAY)
        return (int)r->element[2]->elements;
    return -1;
}

int dlock__ack_want(const dlock_config *cfg, int connected)
{
    if (!cfg->ack_all)
        return cfg->ack_replicas;
    if (connected == 0)
        return -1;
    return connected > 0 ? connected : 1;
}

int dlock__ack_count(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : 0;
}

void dlock__wait_cmd(dlock__wait_cmd_t *w, const dlock_config *cfg, int want)
{
    w->av[0] = "WAIT";
    w->av[1] = w->n;
    w->av[2] = w->t;
    w->lens[0] = 4;
    w->lens[1] = dlock__fmt_i64(w->n, want);
    w->lens[2] = dlock__fmt_i64(w->t, cfg->ack_timeout_ms);
}

/* The replicas connected to the primary behind k (ROLE: the third
 * element lists them), or -1 when it cannot be asked. */
static int connected_replicas(chan *k)
{
    const char *av[] = {"ROLE"};
    size_t lens[] = {4};
    redisReply *r = NULL;
    int timed_out = 0;
    if (link_roundtrip(k, 1, av, lens, 0, &r, &timed_out) != DLOCK__SENT_OK)
        return -1;
    int n = dlock__role_replicas(r);
    freeReplyObject(r);
    return n;
}

/* WAIT <replicas> <timeout> on the connection (its own) that just wrote: the count of
 * replicas that have its writes (0 when it cannot be asked); -1 when a
 * primary without replicas is not asked under DLOCK_REPLICAS_ALL
 * (dlock__ack_want). */
static int wait_acks(const dlock_config *cfg, chan *k)
{
    int want = dlock__ack_want(cfg, cfg->ack_all ? connected_replicas(k) : 0);
    if (want < 0)
        return -1;
    dlock__wait_cmd_t w;
    dlock__wait_cmd(&w, cfg, want);
    redisReply *r = NULL;
    int timed_out = 0;
    if (link_roundtrip(k, 3, w.av, w.lens, 0, &r, &timed_out) != DLOCK__SENT_OK)
        return 0;
    int acks = dlock__ack_count(r);
    freeReplyObject(r);
    return acks;
}

/* The command that line `line` of the script with this SHA1 calls
 * (redis.call('cmd', ...)), into cmd; 0 when not found. */
static int script_call_at(const char *sha, size_t sha_len, long line, char *cmd, size_t size)
{
    for (size_t i = 0; i < 2 * DLOCK__SCRIPT_COUNT; i++) {
        const dlock__script *s = &dlock__scripts[i];
        if (sha_len != 40 || strncmp(s->sha, sha, 40) != 0)
            continue;
        const char *p = s->body, *end = s->body + s->len;
        for (long l = 1; l < line && p < end; l++) {
            p = memchr(p, '\n', (size_t)(end - p));
            p = p ? p + 1 : end;
        }
        const char *eol = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        size_t n = (size_t)((eol ? eol : end) - p);
        for (size_t k = 0; k + 12 < n; k++) {
            size_t skip = strncmp(p + k, "redis.call(", 11) == 0    ? 11
                          : k + 13 < n && strncmp(p + k, "redis.pcall(", 12) == 0 ? 12
                                                                                 : 0;
            if (!skip || (p[k + skip] != '\'' && p[k + skip] != '"'))
                continue;
            const char *c = p + k + skip + 1;
            size_t cl = 0;
            while (c + cl < p + n && c[cl] != p[k + skip] && cl + 1 < size)
                cl++;
            for (size_t j = 0; j < cl; j++)
                cmd[j] = (char)(c[j] >= 'A' && c[j] <= 'Z' ? c[j] + 32 : c[j]);
            cmd[cl] = '\0';
            return cl > 0;
        }
        return 0;
    }
    return 0;
}

/* Redis 7 refuses a script's call the user's ACL does not allow with "ERR
 * The user executing the script can't run this command or subcommand
 * script: <sha>, on @user_script:<line>." (or "can't publish to the channel
 * mentioned in the command", "can't access at least one of the keys"): a
 * refusal of the ACL (NOPERM), said with the command's name (found in the
 * script's text). 1 when the text was such a refusal (rewritten into
 * res->text). */
static int script_acl_refusal(dlock__res *res, const char *text)
{
    if (!text || !strstr(text, "The user executing the script can't"))
        return 0;
    res->err = DLOCK__RERR_NOPERM;
    const char *sha = strstr(text, "script: "), *at = strstr(text, "@user_script:");
    char cmd[48];
    if (strstr(text, "can't publish to the channel"))
        snprintf(res->text, sizeof(res->text), "NOPERM this user has no permissions to publish "
                 "on the channel a dlock script publishes on (the ACL rule needs the lock's "
                 "channel pattern, &...)");
    else if (strstr(text, "can't run this command") && sha && at &&
             script_call_at(sha + 8, strcspn(sha + 8, ", "), strtol(at + 13, NULL, 10), cmd,
                            sizeof(cmd)))
        snprintf(res->text, sizeof(res->text), "NOPERM this user has no permissions to run the "
                 "'%s' command (a dlock script calls it: the ACL rule needs +%s)", cmd, cmd);
    else
        snprintf(res->text, sizeof(res->text), "NOPERM %s",
                 text + (strncmp(text, "ERR ", 4) ? 0 : 4));
    return 1;
}

/* Refusal r recorded (dlock__res_refused). A script refused for one of its
 * keys (NOPERM before it ran): the message names the keys it was given, for
 * the user to see which pattern the ACL lacks (Redis does not say which). */
static int refused(const dlock__req *req, dlock__res *res, const char *addr,
                   const redisReply *r)
{
    int rc = dlock__res_refused(res, addr, r);
    if (res->err != DLOCK__RERR_NOPERM_KEY || req->script < 0 || req->nkeys <= 0)
        return rc;
    char msg[700];
    size_t off = (size_t)snprintf(msg, sizeof(msg), "%s: %s", addr, res->text);
    for (int i = 0; i < req->nkeys && off + 8 < sizeof(msg); i++) {
        size_t len = req->lens ? req->lens[i] : strlen(req->argv[i]);
        int n = snprintf(msg + off, sizeof(msg) - off, "%s%.*s", i ? ", " : " (its keys: ",
                         (int)(len > 120 ? 120 : len), req->argv[i]);
        off += n > 0 ? (size_t)n : 0;
        if (i + 1 == req->nkeys && off + 1 < sizeof(msg))
            memcpy(msg + off, ")", 2);
    }
    if (off >= sizeof(msg) - 8)
        memcpy(msg + sizeof(msg) - 5, "...)", 5);
    return dlock__fail(DLOCK_EAUTH, "%s", msg);
}

int dlock__res_refused(dlock__res *res, const char *addr, const redisReply *r)
{
    res->err = dlock__redis_classify(r->str);
    if (res->err != DLOCK__RERR_OTHER || !script_acl_refusal(res, r->str))
        dlock__redis_error_text(r->str, res->text, sizeof(res->text));
    return dlock__fail(dlock__rerr_code(res->err), "%s: %s", addr, res->text);
}

static int latch_refusal(const char *addr)
{
    return dlock__fail(DLOCK_ECMDTIMEOUT, "%s: no answer, and retrying now could release twice",
                       addr);
}

int dlock__node_call(dlock__node *n, const dlock__req *req, dlock__res *res)
{
    const dlock_config *cfg = dlock__node_ctx(n)->cfg;
    const char *addr = dlock__node_addr(n);
    const char *av_stack[ARGV_STACK];
    size_t len_stack[ARGV_STACK];
    const char *const *av = req->argv;
    const size_t *lens = req->lens;
    int argc = req->argc;
    char nk[16];

    dlock__res_init(res);
    if (dlock__quarantine_refusal(n, req->flags, res) != DLOCK_OK)
        return DLOCK_ETIMEDOUT;
    if (req->script >= 0) {
        int rc = dlock__req_check(req);
        if (rc == DLOCK_OK)
            rc = evalsha_argv(req, nk, av_stack, len_stack, &av, (size_t **)&lens);
        if (rc != DLOCK_OK)
            return rc;
        argc = req->argc + 3;
    }
    /* A PING first is a second read, each under the command timeout. */
    const int ping = (req->flags & DLOCK__CALL_PING_FIRST) != 0;
    const int64_t answer_within = cfg->command_timeout_ms * (ping ? 2 : 1);
    const int own = (req->flags & DLOCK__CALL_WAIT_ACK) && cfg->ack_replicas > 0;
    int rc = DLOCK_OK, failures = 0, reloaded = 0;
    int64_t first_write = -1;
    chan k = {.n = n};   /* kept across a script's load: it goes again on it */
    int linked = 0;
    for (;;) {
        dlock__try t = {.conn_rc = DLOCK_OK};
        redisReply *r = NULL;
        if (!linked)
            t.conn_rc = link_get(&k, req->flags, own);
        linked = t.conn_rc == DLOCK_OK;
        if (linked) {
            int64_t now = dlock__now_ms();
            if (!dlock__latch_allows(first_write, req->latch_ms, answer_within, now)) {
                /* Its reply could come after the latch is gone: a retry that then ran
                 * would release a second hold. Give up. */
                link_put(&k, 0);
                rc = latch_refusal(addr);
                break;
            }
            if (first_write < 0)
                first_write = now;
            t.fresh = k.fresh;
            t.sent = link_roundtrip(&k, argc, av, lens, ping && !reloaded, &r, &t.timed_out);
            t.oom = t.sent == DLOCK__NOT_SENT && k.oom;
            if (t.sent == DLOCK__SENT_OK && r->type == REDIS_REPLY_ERROR)
                t.err = dlock__redis_classify(r->str);
        }
        dlock__verdict v = dlock__call_policy(&t, req->flags, failures, reloaded, cfg);
        if (v.next == DLOCK__NEXT_RELOAD) {
            /* The server's script cache is empty (restart, SCRIPT FLUSH). */
            freeReplyObject(r);
            r = NULL;
            reloaded = 1;
            int lrc = load_script(&k, req->script);
            if (lrc == 0)
                continue;   /* loaded: the same request again on the same connection */
            if (lrc == -1) {
                link_put(&k, 0);
                rc = dlock__fail(DLOCK_EREDIS, "cannot load script %s on %s",
                                 dlock__scripts[req->script].name, addr);
                break;
            }
            /* The load was not written (out of memory, or the shared
             * connection was given up meanwhile) or its answer was lost. The
             * request itself
             * was refused (NOSCRIPT), so it has not run: it may go again like
             * one never sent, and load the script again if it must. */
            reloaded = 0;
            t = (dlock__try){.sent = DLOCK__NOT_SENT, .fresh = 1, .oom = k.oom};
            v = dlock__call_policy(&t, req->flags, failures, reloaded, cfg);
        }
        if (v.next == DLOCK__NEXT_DONE) {
            if (own)
                res->acks = wait_acks(cfg, &k);
            link_put(&k, 0);
            res->r = r;
            rc = DLOCK_OK;
            break;
        }
        if (t.conn_rc != DLOCK_OK) {
            rc = t.conn_rc;   /* get_conn set the message */
        } else if (t.sent == DLOCK__SENT_OK) {
            /* A server that is not (or not yet) a primary: the connection is
             * not kept, so the next one is opened afresh (behind a name, the
             * primary may be another server now). */
            link_put(&k, t.err == DLOCK__RERR_READONLY || t.err == DLOCK__RERR_LOADING);
            rc = refused(req, res, addr, r);
            freeReplyObject(r);
        } else {
            rc = dlock__call_lost(addr, &t, k.why, req->flags);
            link_put(&k, !k.m);   /* the shared one knows its own state */
        }
        linked = 0;
        if (v.next != DLOCK__NEXT_RETRY)
            break;   /* REROUTE: the router's to follow */
        failures += v.counts;
        if (v.after_ms > 0) {
            int prc = dlock__cancel_sleep(req->cancel, v.after_ms);
            if (prc != DLOCK_OK) {
                rc = prc;
                break;
            }
        }
    }
    if (av != req->argv && av != av_stack) {
        free((void *)av);
        free((void *)lens);
    }
    return rc;
}

/* ------------------------------------------------------------ pipelined */

/* One request of a batch, in the form it is written. */
typedef struct prepared {
    int argc;
    const char *const *av;
    size_t *lens;
    int noscript;            /* answered NOSCRIPT: load its script, then resend (2: done) */
    int reloaded;            /* its script was loaded for it */
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

/* A batch in flight: what every step of dlock__node_call_many shares. */
typedef struct batch {
    dlock__node *n;
    const dlock_config *cfg;
    const dlock__req *reqs;
    prepared *p;
    size_t *pend;            /* the requests still to send, in order */
    size_t np;
    unsigned flags;          /* the batch's */
    int failures;
    dlock__res *res;
    int *rc;
} batch;

/* The policy for request i after try t. */
static dlock__verdict judge(const batch *b, size_t i, const dlock__try *t)
{
    return dlock__call_policy(t, b->reqs[i].flags | (b->flags & DLOCK__CALL_NO_RETRY),
                              b->failures, b->p[i].reloaded, b->cfg);
}

/* Pending requests whose answer could now come after their latch expires are
 * given up (as dlock__node_call does). */
static void drop_late(batch *b, int64_t first_write, int64_t answer_within)
{
    size_t keep = 0;
    int64_t now = dlock__now_ms();
    for (size_t j = 0; j < b->np; j++) {
        size_t i = b->pend[j];
        if (!dlock__latch_allows(first_write, b->reqs[i].latch_ms, answer_within, now))
            b->rc[i] = latch_refusal(dlock__node_addr(b->n));
        else
            b->pend[keep++] = i;
    }
    b->np = keep;
}

/* Reads one written batch's answers into res/rc; keeps in pend (in order)
 * what is to be sent again. Sets *again / *noscript when a request is to go
 * again after the pause / after its script is loaded. */
static void sort_replies(batch *b, redisReply **rep, size_t nread, const dlock__try *lost_try,
                         const char *why, int *again, int *noscript)
{
    const char *addr = dlock__node_addr(b->n);
    size_t keep = 0;
    for (size_t j = 0; j < b->np; j++) {
        size_t i = b->pend[j];
        dlock__try t = {.sent = DLOCK__SENT_OK};
        redisReply *r = NULL;
        if (j < nread) {
            r = rep[j];
            if (r->type == REDIS_REPLY_ERROR)
                t.err = dlock__redis_classify(r->str);
        } else {
            t = *lost_try;   /* written and not answered: it may have run */
        }
        dlock__verdict v = judge(b, i, &t);
        if (v.next == DLOCK__NEXT_DONE) {
            b->res[i].r = r;
            b->rc[i] = DLOCK_OK;
            continue;
        }
        if (v.next == DLOCK__NEXT_RELOAD) {
            freeReplyObject(r);   /* not run: load, then send again */
            b->p[i].noscript = *noscript = 1;
            b->pend[keep++] = i;
            continue;
        }
        if (r) {
            b->rc[i] = dlock__res_refused(&b->res[i], addr, r);
            freeReplyObject(r);
        } else {
            b->rc[i] = dlock__call_lost(addr, &t, why, b->reqs[i].flags);
        }
        if (v.next == DLOCK__NEXT_RETRY) {
            *again = 1;
            b->pend[keep++] = i;
        }
    }
    b->np = keep;
}

/* Loads the scripts that answered NOSCRIPT on ctx, each once; a request
 * whose script cannot be loaded is done (DLOCK_EREDIS). */
static void load_missing(batch *b, dlock__conn *ctx)
{
    prepared *p = b->p;
    for (size_t j = 0; j < b->np; j++) {
        size_t i = b->pend[j];
        if (p[i].noscript != 1)
            continue;
        int s = b->reqs[i].script;
        chan k = {.n = b->n, .c = ctx};
        int ok = load_script(&k, s) == 0;
        for (size_t m = j; m < b->np; m++) {   /* every request of that script */
            size_t q = b->pend[m];
            if (p[q].noscript != 1 || b->reqs[q].script != s)
                continue;
            p[q].noscript = ok ? 0 : 2;
            p[q].reloaded = 1;
            if (!ok)
                b->rc[q] = dlock__fail(DLOCK_EREDIS, "cannot load script %s on %s",
                                       dlock__scripts[s].name, dlock__node_addr(b->n));
        }
    }
    size_t keep = 0;
    for (size_t j = 0; j < b->np; j++)
        if (p[b->pend[j]].noscript != 2)
            b->pend[keep++] = b->pend[j];
    b->np = keep;
}

void dlock__node_call_many(dlock__node *n, const dlock__req *reqs, size_t k, unsigned flags,
                           dlock_cancel *cancel, dlock__res *res, int *rc)
{
    batch b = {.n = n, .cfg = dlock__node_ctx(n)->cfg, .reqs = reqs, .flags = flags,
               .res = res, .rc = rc};
    for (size_t i = 0; i < k; i++) {
        dlock__res_init(&res[i]);
        rc[i] = DLOCK_ENOMEM;
    }
    b.p = calloc(k, sizeof(*b.p));
    b.pend = malloc(k * sizeof(*b.pend));
    int *argc = malloc(k * sizeof(*argc));
    const char *const **av = malloc(k * sizeof(*av));
    const size_t **lens = malloc(k * sizeof(*lens));
    redisReply **rep = malloc(k * sizeof(*rep));
    int ping_first = 0;
    if (!b.p || !b.pend || !argc || !av || !lens || !rep) {
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        k = 0;
    }
    for (size_t i = 0; i < k; i++) {
        if ((rc[i] = dlock__quarantine_refusal(n, reqs[i].flags, &res[i])) != DLOCK_OK)
            continue;   /* as dlock__node_call: not sent */
        rc[i] = prepare(&reqs[i], &b.p[i]);
        if (rc[i] == DLOCK_OK) {
            b.pend[b.np++] = i;
            ping_first |= (reqs[i].flags & DLOCK__CALL_PING_FIRST) != 0;
        }
    }
    /* A PING first is a second read, each under the command timeout. */
    int64_t answer_within = b.cfg->command_timeout_ms * (ping_first ? 2 : 1);
    int loads = 0;
    int64_t first_write = -1;
    while (b.np > 0) {
        dlock__conn *ctx;
        uint64_t gen;
        dlock__try t = {.conn_rc = DLOCK_OK};
        int again = 0, noscript = 0;
        t.conn_rc = dlock__node_get_conn(n, &ctx, &gen, &t.fresh,
                                         (flags & DLOCK__CALL_IDLE_ONLY) != 0);
        if (t.conn_rc == DLOCK_OK && first_write >= 0) {
            drop_late(&b, first_write, answer_within);
            if (b.np == 0) {
                dlock__node_put_conn(n, ctx, gen, 0);
                break;
            }
        }
        if (t.conn_rc == DLOCK_OK) {
            if (first_write < 0)
                first_write = dlock__now_ms();
            for (size_t j = 0; j < b.np; j++) {
                argc[j] = b.p[b.pend[j]].argc;
                av[j] = b.p[b.pend[j]].av;
                lens[j] = b.p[b.pend[j]].lens;
            }
            size_t nread = 0;
            t.sent = dlock__conn_pipeline(ctx, b.np, argc, av, lens, ping_first, rep, &nread,
                                          &t.timed_out);
            const char *why = dlock__conn_error(ctx);
            t.oom = t.sent == DLOCK__NOT_SENT && dlock__conn_oom(ctx);
            if (t.sent == DLOCK__NOT_SENT) {
                int crc = dlock__call_lost(dlock__node_addr(n), &t, why, 0);
                dlock__node_put_conn(n, ctx, gen, 1);
                for (size_t j = 0; j < b.np; j++)
                    rc[b.pend[j]] = crc;
            } else {
                sort_replies(&b, rep, nread, &t, why, &again, &noscript);
                if (noscript && t.sent == DLOCK__SENT_OK)
                    load_missing(&b, ctx);
                dlock__node_put_conn(n, ctx, gen,
                                     t.sent != DLOCK__SENT_OK || dlock__conn_broken(ctx));
                if (b.np == 0)
                    break;
                if (noscript && !again && t.sent == DLOCK__SENT_OK && loads++ < 2)
                    continue;   /* the scripts are loaded now: send again at once */
            }
        } else {
            for (size_t j = 0; j < b.np; j++)
                rc[b.pend[j]] = t.conn_rc;
        }
        /* What is left goes again: each request was judged to (a retry of its
         * own); a batch not written at all is judged as a whole. */
        dlock__verdict v = {DLOCK__NEXT_RETRY, DLOCK_OK, b.cfg->retry_delay_ms, 1};
        if (t.conn_rc != DLOCK_OK || t.sent == DLOCK__NOT_SENT)
            v = dlock__call_policy(&t, flags, b.failures, 0, b.cfg);
        if (v.next != DLOCK__NEXT_RETRY)
            break;
        b.failures += v.counts;
        if (v.after_ms > 0) {
            int prc = dlock__cancel_sleep(cancel, v.after_ms);
            if (prc != DLOCK_OK) {
                for (size_t j = 0; j < b.np; j++)
                    rc[b.pend[j]] = prc;
                break;
            }
        }
    }
    for (size_t i = 0; b.p && i < k; i++)
        unprepare(&reqs[i], &b.p[i]);
    free(b.p);
    free(b.pend);
    free(argc);
    free(av);
    free(lens);
    free(rep);
}
