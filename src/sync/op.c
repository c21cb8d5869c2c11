/* A request: a script (or a plain command) and its arguments, built key by
 * key and argument by argument, so a call site reads like the script's
 * header; how it is sent, with the ACL fallback for dlock's own keys; and
 * the verdicts every type gives a key of another type, or an answer of the
 * wrong shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

void dlock__op_init(dlock__op *op, int script)
{
    op->script = script;
    op->nkeys = 0;
    op->argc = 0;
    op->nnum = 0;
    op->bad = 0;
    op->optional = -1;
    op->flags = 0;
    op->latch_ms = 0;
}

static void add(dlock__op *op, const char *s, size_t n)
{
    if (op->argc == DLOCK__OP_MAX) {
        op->bad = 1;
        return;
    }
    op->argv[op->argc] = s;
    op->lens[op->argc++] = n;
}

static void key(dlock__op *op, const char *s, size_t n)
{
    if (op->nkeys != op->argc)
        op->bad = 1;   /* keys come first */
    add(op, s, n);
    op->nkeys++;
}

void dlock__op_key(dlock__op *op, const char *s, size_t n)
{
    if (op->optional >= 0)
        op->bad = 1;   /* optional keys last */
    key(op, s, n);
}

void dlock__op_key_optional(dlock__op *op, unsigned cls, const char *s, size_t n)
{
    if (op->optional < 0)
        op->optional = op->nkeys;
    if (op->nkeys < DLOCK__OP_MAX)
        op->cls[op->nkeys] = (unsigned char)cls;
    key(op, s, n);
}

void dlock__op_arg(dlock__op *op, const char *s, size_t n) { add(op, s, n); }

void dlock__op_args(dlock__op *op, const char *s) { add(op, s, strlen(s)); }

void dlock__op_cmd(dlock__op *op, const char *cmd, const char *key, size_t klen,
                   const char *arg, size_t alen)
{
    dlock__op_init(op, -1);
    dlock__op_args(op, cmd);
    dlock__op_arg(op, key, klen);
    if (arg)
        dlock__op_arg(op, arg, alen);
}

void dlock__op_argi(dlock__op *op, int64_t v)
{
    if (op->nnum == DLOCK__OP_NUMS) {
        op->bad = 1;
        return;
    }
    char *b = op->num[op->nnum++];
    add(op, b, dlock__fmt_i64(b, v));
}

unsigned dlock__op_req(dlock_client *c, const dlock__op *op, unsigned cap, dlock_cancel *cancel,
                       dlock__req *req, const char **av, size_t *ln)
{
    *req = (dlock__req){.script = op->script, .nkeys = op->nkeys, .argc = op->argc,
                        .argv = op->argv, .lens = op->lens, .flags = op->flags,
                        .cancel = cancel, .latch_ms = op->latch_ms};
    if (op->optional < 0)
        return 0;
    unsigned use = atomic_load_explicit(&c->own_keys, memory_order_relaxed) & cap, with = 0;
    int k = 0, nkeys = 0;
    for (int i = 0; i < op->argc; i++) {
        if (i >= op->optional && i < op->nkeys) {
            if (!(op->cls[i] & use))
                continue;
            with |= op->cls[i];
        }
        av[k] = op->argv[i];
        ln[k++] = op->lens[i];
        if (i < op->nkeys)
            nkeys++;
    }
    if (k == op->argc)
        return with;
    req->nkeys = nkeys;
    req->argc = k;
    req->argv = av;
    req->lens = ln;
    return with;
}

int dlock__op_key_refused(unsigned with, const dlock__res *res)
{
    return with != 0 && res->err == DLOCK__RERR_NOPERM_KEY;
}

unsigned dlock__op_key_shed(unsigned with)
{
    static const unsigned order[] = {DLOCK__OWN_INTENT, DLOCK__OWN_QUARANTINE, DLOCK__OWN_RESERVE,
                                     DLOCK__OWN_DELAY};
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(order); i++)
        if (with & order[i])
            return order[i];
    return with;
}

/* dlock's own keys of each class, and what a client loses without them. */
static const struct {
    unsigned cls;
    const char *what;
} own_lost[] = {
    {DLOCK__OWN_INTENT, "the writers' intents (~dlock_write_intent:*): writer-first read-write "
                        "locks no longer hold new readers back for waiting writers"},
    {DLOCK__OWN_QUARANTINE, "the failover quarantine's record (~dlock_quarantine:*): acquisitions "
                            "no longer honour a quarantine other clients recorded"},
    {DLOCK__OWN_RESERVE, "the reservation of the next turn (~dlock_lock_next:*): waiters no "
                         "longer reserve turns"},
    {DLOCK__OWN_DELAY, "the lock-delay markers (~dlock_lock_delay:*, ~dlock_read_delay:*, "
                       "~dlock_permit_delay:*): acquisitions no longer honour other holders' "
                       "lock-delays"},
};

void dlock__op_key_dropped(dlock_client *c, unsigned dropped, const dlock__res *res)
{
    /* Refused for another reason than a key: the keys were the trouble. */
    if (res->err == DLOCK__RERR_NOPERM || res->err == DLOCK__RERR_NOPERM_KEY || !dropped)
        return;
    unsigned was = atomic_fetch_and(&c->own_keys, ~dropped);
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(own_lost); i++)
        if (was & dropped & own_lost[i].cls)
            dlock__log(&c->cfg, DLOCK_LOG_WARN,
                       "Redis refuses dlock's own keys to this user (ACL), going on without %s",
                       own_lost[i].what);
}

int dlock__op_call(dlock_client *c, const dlock__op *op, dlock_cancel *cancel, dlock__res *res)
{
    dlock__res_init(res);
    if (op->bad)
        return dlock__fail(DLOCK_EINVAL, "internal: a request was built wrong (too many "
                                         "arguments, or a key after an argument)");
    const char *av[DLOCK__OP_MAX];
    size_t ln[DLOCK__OP_MAX];
    dlock__req req;
    unsigned cap = DLOCK__OWN_ALL;
    unsigned with = dlock__op_req(c, op, cap, cancel, &req, av, ln);
    int rc = dlock__router_call(c->router, &req, res);
    while (dlock__op_key_refused(with, res)) {
        /* The same request without one class of dlock's own keys. */
        cap &= ~dlock__op_key_shed(with);
        with = dlock__op_req(c, op, cap, cancel, &req, av, ln);
        rc = dlock__router_call(c->router, &req, res);
    }
    dlock__op_key_dropped(c, DLOCK__OWN_ALL & ~cap, res);
    return rc;
}

/* Request op alone, through the router: its failure written into msg
 * (DLOCK__MSG_MAX bytes). */
static int call_alone(dlock_client *c, const dlock__op *op, dlock__res *res, char *msg)
{
    msg[0] = '\0';
    dlock__errto prev = dlock__err_into(msg, DLOCK__MSG_MAX);
    int rc = dlock__op_call(c, op, NULL, res);
    dlock__err_reset(prev);
    return rc;
}

void dlock__op_call_many(dlock_client *c, dlock__node *n, dlock__op *const *ops, size_t k,
                         dlock__res *res, int *rc, char *const *msg)
{
    dlock__req *reqs = malloc(k * sizeof(*reqs));
    const char *(*av)[DLOCK__OP_MAX] = malloc(k * sizeof(*av));
    size_t (*ln)[DLOCK__OP_MAX] = malloc(k * sizeof(*ln));
    size_t *at = malloc(k * sizeof(*at));
    unsigned *with = malloc(k * sizeof(*with));
    dlock__res *rres = malloc(k * sizeof(*rres));
    int *rrc = malloc(k * sizeof(*rrc));
    size_t m = 0;
    unsigned all = DLOCK__CALL_NO_RETRY;
    int mem = reqs && av && ln && at && with && rres && rrc;
    for (size_t i = 0; i < k; i++) {
        const dlock__op *op = ops[i];
        if (!mem || op->bad || op->nkeys == 0 ||
            dlock__router_node(c->router, op->argv[0], op->lens[0]) != n) {
            rc[i] = call_alone(c, op, &res[i], msg[i]);
            continue;
        }
        with[m] = dlock__op_req(c, op, DLOCK__OWN_ALL, NULL, &reqs[m], av[m], ln[m]);
        reqs[m].script = dlock__router_script(c->router, op->script);
        all &= op->flags;
        at[m++] = i;
    }
    char batch[DLOCK__MSG_MAX] = "";
    if (m > 0) {
        dlock__errto prev = dlock__err_into(batch, sizeof(batch));
        dlock__node_call_many(n, reqs, m, all, NULL, rres, rrc);
        dlock__err_reset(prev);
    }
    for (size_t j = 0; j < m; j++) {
        size_t i = at[j];
        dlock__try t = {.sent = DLOCK__SENT_OK, .err = rres[j].err};
        /* Refused before it ran (MOVED, ASK, READONLY, CLUSTERDOWN). */
        int reroute = rrc[j] != DLOCK_OK && dlock__call_policy(&t, reqs[j].flags, 0, 1,
                                                               &c->cfg).next == DLOCK__NEXT_REROUTE;
        if (reroute && dlock__router_dynamic(c->router))
            dlock__router_stale(c->router);   /* the map or the primary is read again */
        if (reroute || dlock__op_key_refused(with[j], &rres[j])) {
            /* Alone, through the router: it follows the redirection, or goes
             * without the own keys an ACL refused. */
            rc[i] = call_alone(c, ops[i], &res[i], msg[i]);
            continue;
        }
        res[i] = rres[j];
        rc[i] = rrc[j];
        if (rc[i] != DLOCK_OK && res[i].err != DLOCK__RERR_NONE)   /* as dlock__res_refused says it */
            snprintf(msg[i], DLOCK__MSG_MAX, "%s: %s", dlock__node_addr(n), res[i].text);
        else if (rc[i] != DLOCK_OK)
            snprintf(msg[i], DLOCK__MSG_MAX, "%s", batch);
    }
    free(reqs);
    free(av);
    free(ln);
    free(at);
    free(with);
    free(rres);
    free(rrc);
}

static int wrong_type(const dlock__handle *h, const dlock__res *res)
{
    /* The scripts say "WRONGTYPE the key holds a read-write lock", "... a
     * hash that is not a lock", "key holds a list, not a lock"; Redis itself
     * "WRONGTYPE Operation against a key holding ...". A reason that says
     * "not a <what the handle is>" already is the message: not said twice. */
    const char *why = res ? dlock__redis_error_detail(res->text) : "";
    if (strncmp(why, "the key holds ", 14) == 0)
        why += 8;
    else if (strncmp(why, "key holds ", 10) == 0)
        why += 4;
    char not_what[64];
    snprintf(not_what, sizeof(not_what), "not a %s", h->what);
    if (strncmp(why, "holds ", 6) == 0 && strstr(why, not_what))
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' %s", h->name, why);
    if (strncmp(why, "holds ", 6) == 0)
        return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: it %s", h->name,
                           h->what, why);
    return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s: %s", h->name, h->what,
                       why[0] ? why : "it holds another type");
}

int dlock__refused(const dlock__handle *h, int rc, const dlock__res *res)
{
    return rc == DLOCK_EWRONGTYPE ? wrong_type(h, res) : rc;
}

int dlock__proto(const dlock__handle *h, const char *op, redisReply *r)
{
    int type = r ? r->type : -1;
    if (r)
        freeReplyObject(r);
    return dlock__fail(DLOCK_EPROTO, "unexpected reply type %d to %s of %s '%s'", type, op,
                       h->what, h->name);
}
