/* An asynchronous Redis connection on the io thread's libuv loop.
 *
 * hiredis formats the commands and parses the replies (redisFormatCommandArgv,
 * redisReader); libuv does the I/O and the timers. The connection reconnects by
 * itself, with a growing pause up to the retry delay, until it is closed.
 *
 * Every function here runs on the io thread only. */
#ifndef DLOCK_ACONN_H
#define DLOCK_ACONN_H

#include <uv.h>

#include "internal.h"

typedef struct dlock__aconn dlock__aconn;

/* A reply to one command, or r == NULL with status < 0 when the connection
 * failed (DLOCK_ECONN, DLOCK_ECMDTIMEOUT, DLOCK_ECLOSED) first. A command that
 * expects n replies (SUBSCRIBE a b c) gets n calls; on failure, one. The reply
 * is freed after the call. */
typedef void (*dlock__aconn_reply_fn)(dlock__aconn *ac, redisReply *r, int status, void *ud);

typedef struct dlock__aconn_cbs {
    void (*on_ready)(dlock__aconn *ac, void *ud);               /* handshake done */
    void (*on_down)(dlock__aconn *ac, int status, void *ud);    /* lost; will reconnect */
    void (*on_push)(dlock__aconn *ac, redisReply *r, void *ud); /* pub/sub message */
    void *ud;
} dlock__aconn_cbs;

/* pubsub: the connection will SUBSCRIBE; "message"/"smessage" arrays go to
 * on_push, and it PINGs now and then so a dead peer is noticed. */
int dlock__aconn_new(dlock__aconn **out, uv_loop_t *uv, dlock_client *c,
                     const dlock__endpoint *ep, int pubsub, const dlock__aconn_cbs *cbs);
/* Starts connecting (no-op when already connecting or connected). */
void dlock__aconn_start(dlock__aconn *ac);
int dlock__aconn_ready(const dlock__aconn *ac);
/* Queues a command expecting `expect` replies. DLOCK_ECONN when not ready. */
int dlock__aconn_send(dlock__aconn *ac, int argc, const char **argv, const size_t *lens,
                      int expect, dlock__aconn_reply_fn fn, void *ud);
/* While corked, commands are buffered; uncork writes them in one write. */
void dlock__aconn_cork(dlock__aconn *ac);
void dlock__aconn_uncork(dlock__aconn *ac);
/* Fails pending callbacks with DLOCK_ECLOSED, closes handles, frees itself once
 * libuv has released them, then calls done(arg) (may be NULL). */
void dlock__aconn_close(dlock__aconn *ac, void (*done)(void *), void *arg);

#endif
