/* An operation: a script (or a plain command) and its arguments, built key by
 * key and argument by argument, so a call site reads like the script's
 * header. The reply is read by the caller's pure parser (reply.c); the
 * verdicts every type gives a key of another type, or an answer of the wrong
 * shape, are here too. */
#include <stdio.h>
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

void dlock__op_key(dlock__op *op, const char *s, size_t n)
{
    if (op->nkeys != op->argc)
        op->bad = 1;   /* keys come first */
    add(op, s, n);
    op->nkeys++;
}

void dlock__op_key_optional(dlock__op *op, const char *s, size_t n)
{
    if (op->optional >= 0)
        op->bad = 1;
    op->optional = op->nkeys;
    dlock__op_key(op, s, n);
}

void dlock__op_arg(dlock__op *op, const char *s, size_t n)
{
    if (op->optional >= 0 && op->optional != op->nkeys - 1)
        op->bad = 1;   /* the optional key must be the last key */
    add(op, s, n);
}

void dlock__op_args(dlock__op *op, const char *s) { add(op, s, strlen(s)); }

void dlock__op_argi(dlock__op *op, int64_t v)
{
    if (op->nnum == DLOCK__OP_NUMS) {
        op->bad = 1;
        return;
    }
    char *b = op->num[op->nnum++];
    add(op, b, dlock__fmt_i64(b, v));
}

static int refused_key(int rc)
{
    return rc == DLOCK_EAUTH && strstr(dlock_last_error(), "NOPERM") &&
           strstr(dlock_last_error(), "key");
}

int dlock__op_call(dlock_client *c, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                   int64_t latch_ms, redisReply **out)
{
    if (op->bad)
        return dlock__fail(DLOCK_EINVAL, "internal: a request was built wrong (too many "
                                         "arguments, or a key after an argument)");
    dlock__req req = {.script = op->script, .nkeys = op->nkeys, .argc = op->argc,
                      .argv = op->argv, .lens = op->lens, .flags = flags, .cancel = cancel,
                      .latch_ms = latch_ms};
    int on = atomic_load_explicit(&c->own_keys, memory_order_relaxed);
    if (op->optional < 0 || on) {
        int rc = dlock__call(c, &req, out);
        if (op->optional < 0 || !refused_key(rc))
            return rc;
    }
    /* The same request without the optional key (the last key). */
    const char *av[DLOCK__OP_MAX];
    size_t ln[DLOCK__OP_MAX];
    int k = 0;
    for (int i = 0; i < op->argc; i++)
        if (i != op->optional) {
            av[k] = op->argv[i];
            ln[k++] = op->lens[i];
        }
    req.nkeys = op->nkeys - 1;
    req.argc = k;
    req.argv = av;
    req.lens = ln;
    int rc = dlock__call(c, &req, out);
    /* Through, or refused for another reason than a key: the key was the trouble. */
    int still_refused = rc == DLOCK_EAUTH && strstr(dlock_last_error(), "NOPERM");
    if (on && !still_refused && atomic_exchange(&c->own_keys, 0))
        dlock__log(&c->cfg, DLOCK_LOG_WARN,
                   "Redis refuses the key %.*s to this user (ACL): waiters no longer reserve "
                   "turns (allow ~dlock_lock_next:* to keep them)",
                   (int)op->lens[op->optional], op->argv[op->optional]);
    return rc;
}

int dlock__wrong_type(const char *what, const char *name)
{
    /* The scripts say "WRONGTYPE the key holds a read-write lock", ...;
     * Redis itself "WRONGTYPE Operation against a key holding ...". */
    const char *why = strstr(dlock_last_error(), "WRONGTYPE");
    char detail[200];
    snprintf(detail, sizeof(detail), "%s", why ? why + 9 : "");
    return dlock__fail(DLOCK_EWRONGTYPE, "key '%s' exists and is not a %s:%s", name, what,
                       detail[0] ? detail : " it holds another type");
}

int dlock__proto(const char *what, const char *name, const char *op, redisReply *r)
{
    int type = r ? r->type : -1;
    if (r)
        freeReplyObject(r);
    return dlock__fail(DLOCK_EPROTO, "unexpected reply type %d to %s of %s '%s'", type, op, what,
                       name);
}

int dlock__op_run(dlock_client *c, const dlock__op *op, unsigned flags, dlock_cancel *cancel,
                  const char *what, const char *name, redisReply **out)
{
    int rc = dlock__op_call(c, op, flags, cancel, 0, out);
    return rc == DLOCK_EWRONGTYPE ? dlock__wrong_type(what, name) : rc;
}
