/* The shared connection: the requests of every calling thread on one
 * connection per node, pipelined (docs/internals/mux.md).
 *
 * A caller appends its command to the output buffer and a slot to the FIFO
 * of requests in flight, then waits for its own reply. There is no thread of
 * its own: the callers take turns at the two jobs. Whoever appends while
 * nobody writes becomes the writer and writes what has gathered until the
 * buffer is empty (what others append meanwhile goes out in its next write;
 * while callers just answered have yet to return, it is left for the last
 * of them, so that a wave of requests goes out in writes of up to DEFER);
 * a caller waiting while nobody reads becomes the reader, reads what has come
 * and hands each reply to the oldest slot (Redis answers in order), until its
 * own reply is in; it then wakes the next caller still waiting to read on.
 *
 * Every request keeps its own deadline. One that passes unanswered ends that
 * request only when all its bytes have reached the server (written, and
 * acknowledged by its TCP stack: a reset could not keep it from running
 * anyway): its slot stays, its reply is dropped when it comes, so the others
 * keep their replies; the connection takes no new requests and is reset once
 * nobody waits on it. Otherwise (bytes still queued in this kernel) the
 * connection is reset at once, as the pool does, so that they never reach
 * Redis late; every request then in flight ends as after a dropped
 * connection: written ones may have run, the others were not sent.
 *
 * Locks: mu guards the buffer, the FIFO and the flags; io_mu the transport
 * and the reply reader (OpenSSL's objects are not for two threads at once),
 * taken around each non-blocking read or write, never while waiting on the
 * socket; mu may be held when io_mu is taken, never the other way round. */
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "net/net.h"

#define BATCH 64   /* replies read before they are handed out */
#define DEFER 8    /* requests left in the buffer at most (see the writer) */

static const char PING[] = "*1\r\n$4\r\nPING\r\n";

/* A waiting caller's state, the word it sleeps on (a futex: its waker
 * needs no lock the sleeper must take again, so a reply handed out wakes its
 * caller straight into its result instead of into the reader's mutex).
 * W_SLEEP: asleep, or about to be (the only state that needs a wake-up);
 * W_POKED: to read on. Changed only under mu, but by its caller's sleep. */
enum { W_WAIT, W_SLEEP, W_POKED, W_DONE };

/* What a waiting caller learns: a record of the mux's (not on the caller's
 * stack), so that a wake-up sent after its caller returned still targets
 * memory of the mux's, and no other caller's word. Written under mu; once
 * state is W_DONE (stored last, with release) the rest is final and its
 * caller may read it without mu. refs: its caller's, and one per wake-up
 * put off (wakes); the last to let go gives it back (put_wait). */
typedef struct mwait {
    atomic_int state;
    atomic_int refs;
    int64_t deadline;        /* ms */
    dlock__sent sent;
    int timed_out;
    redisReply *r;
    struct mwait *next;      /* in a free list */
    struct mwait *all;       /* every record of the mux, freed with it */
} mwait;

/* A request in flight, in the order written. */
typedef struct mslot {
    mwait *w;                /* NULL once its caller stopped waiting */
    uint64_t end;            /* offset in the byte stream just past its command */
    int left;                /* replies still to come (2 with a PING first) */
} mslot;

struct dlock__mux {
    dlock__conn *c;
    dlock__stats *stats;
    int64_t timeout_ms;      /* the command timeout */
    int tcp;                 /* bytes unacknowledged by the peer can be counted */
    uint64_t gen;            /* the connection name it was opened with */
    int refs;                /* the node's and its callers' (under the node's mutex) */
    atomic_int retired;      /* takes no new request */

    pthread_mutex_t mu;
    pthread_mutex_t io_mu;
    char *obuf;              /* appended, not taken by the writer yet */
    size_t olen, ocap;
    char *wbuf;              /* the writer's (spare while nobody writes) */
    size_t wcap;
    uint64_t appended;       /* bytes appended since the connection opened */
    uint64_t written;        /* ... and written (updated after each write) */
    mslot *ring;
    uint64_t head, tail;     /* slots in flight: head .. tail - 1 */
    size_t cap;              /* a power of two */
    int writing, reading;
    atomic_int answered;     /* callers handed a reply, not returned yet */
    atomic_int deferred;     /* appended, left for the last of them to write */
    int queued;              /* requests in obuf */
    int dead;                /* failed: every request on it is ended */
    int oom;                 /* ... for want of memory (reading a reply) */
    char err[320];           /* why it failed */
    mwait *free_w;           /* records to reuse (mu) */
    _Atomic(mwait *) back_w; /* ... given back without mu (pushed only) */
    mwait *all_w;            /* every record (mu) */
};

static mslot *slot_at(dlock__mux *m, uint64_t i) { return &m->ring[i & (m->cap - 1)]; }

int dlock__mux_open(dlock__netctx *ctx, const dlock__endpoint *ep, const char *addr,
                    dlock__mux **out)
{
    dlock__mux *m = calloc(1, sizeof(*m));
    if (!m || !(m->ring = malloc(16 * sizeof(*m->ring)))) {
        free(m);
        return dlock__fail(DLOCK_ENOMEM, "out of memory opening a connection");
    }
    m->cap = 16;
    int rc = dlock__conn_open(ctx, ep, addr, &m->c, &m->gen);
    if (rc != DLOCK_OK) {
        free(m->ring);
        free(m);
        return rc;
    }
    m->stats = ctx->stats;
    m->timeout_ms = ctx->cfg->command_timeout_ms;
    m->tcp = ep->path == NULL;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->io_mu, NULL);
    *out = m;
    return DLOCK_OK;
}

void dlock__mux_free(dlock__mux *m)
{
    if (!m)
        return;
    /* Reset unless it ended well: nothing it still holds may reach Redis. */
    if (m->dead || atomic_load(&m->retired))
        dlock__conn_abort(m->c);
    else
        dlock__conn_close(m->c);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->io_mu);
    for (mwait *w = m->all_w, *nx; w; w = nx) {
        nx = w->all;
        free(w);
    }
    free(m->obuf);
    free(m->wbuf);
    free(m->ring);
    free(m);
}

int dlock__mux_usable(const dlock__mux *m, uint64_t gen)
{
    return m->gen == gen && !atomic_load(&m->retired);
}

int dlock__mux_ref(dlock__mux *m, int delta)
{
    m->refs += delta;
    return m->refs;
}

/* ------------------------------------------------------------ endings */

/* Callers to wake once mu is released: one woken while its waker holds mu
 * would, on a busy CPU, run at once and block on mu for its next request.
 * Each holds a reference to its record until its wake-up went out. */
typedef struct wakes {
    mwait *w[BATCH + 2];
    int n;
} wakes;

/* A record for a new request (mu held): NULL when out of memory. */
static mwait *take_wait(dlock__mux *m, int64_t deadline)
{
    if (!m->free_w)
        m->free_w = atomic_exchange_explicit(&m->back_w, NULL, memory_order_acquire);
    mwait *w = m->free_w;
    if (w) {
        m->free_w = w->next;
    } else {
        if (!(w = malloc(sizeof(*w))))
            return NULL;
        w->all = m->all_w;
        m->all_w = w;
    }
    atomic_init(&w->state, W_WAIT);
    atomic_init(&w->refs, 1);
    w->deadline = deadline;
    w->sent = DLOCK__NOT_SENT;
    w->timed_out = 0;
    w->r = NULL;
    return w;
}

/* Lets go of a reference to w, mu held or not; the last one gives it back
 * (a push onto back_w, which only take_wait empties, all at once: no ABA). */
static void put_wait(dlock__mux *m, mwait *w)
{
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1)
        return;
    mwait *h = atomic_load_explicit(&m->back_w, memory_order_relaxed);
    do
        w->next = h;
    while (!atomic_compare_exchange_weak_explicit(&m->back_w, &h, w, memory_order_release,
                                                  memory_order_relaxed));
}

/* Wakes the caller sleeping on w, if it still does (its record stays the
 * mux's while this reference is held), and lets go of the reference. */
static void wake(dlock__mux *m, mwait *w)
{
    syscall(SYS_futex, &w->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    put_wait(m, w);
}

/* Sleeps while *word is still seen, until deadline (ms, monotonic; -1:
 * none), or a spurious wake-up. */
static void sleep_on(atomic_int *word, int seen, int64_t deadline)
{
    struct timespec ts;
    if (deadline >= 0)
        dlock__abstime(deadline, &ts);
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, seen, deadline >= 0 ? &ts : NULL, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

static int is_done(mwait *w)
{
    return atomic_load_explicit(&w->state, memory_order_acquire) == W_DONE;
}

/* Sets w's state; when its caller sleeps, wakes it now (l NULL, or full)
 * or once mu is released. The reference for the wake-up is taken before the
 * state is seen: a caller seeing W_DONE may return at once. mu held. */
static void set_state(dlock__mux *m, mwait *w, int state, wakes *l)
{
    atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
    if (atomic_exchange_explicit(&w->state, state, memory_order_acq_rel) != W_SLEEP)
        put_wait(m, w);
    else if (l && l->n < (int)(sizeof(l->w) / sizeof(l->w[0])))
        l->w[l->n++] = w;
    else
        wake(m, w);
}

/* The wake-ups put off: mu not held. */
static void wake_now(dlock__mux *m, wakes *l)
{
    for (int i = 0; i < l->n; i++)
        wake(m, l->w[i]);
    l->n = 0;
}

/* Ends w's wait; its wake-up (if it sleeps) goes to l, or now when l is
 * NULL. mu held. */
static void finish(dlock__mux *m, mwait *w, dlock__sent sent, redisReply *r, wakes *l)
{
    w->sent = sent;
    w->r = r;
    set_state(m, w, W_DONE, l);
}

/* No new request goes on it; counted once as a connection lost. mu held. */
static void retire(dlock__mux *m)
{
    if (!atomic_exchange(&m->retired, 1))
        dlock__stats_count(m->stats, DLOCK__ST_RECONNECTS, 1);
}

void dlock__mux_retire(dlock__mux *m)
{
    pthread_mutex_lock(&m->mu);
    retire(m);
    pthread_mutex_unlock(&m->mu);
}

/* Ends the requests of a failed connection as far as can be known: one whose
 * bytes all went out may have run; one not (wholly) written cannot have,
 * and is ended once the writer knows how far it got. mu held. */
static void settle(dlock__mux *m)
{
    while (m->head != m->tail) {
        mslot *s = slot_at(m, m->head);
        int out = s->end <= m->written;
        if (!out && m->writing)
            break;
        if (s->w)
            finish(m, s->w, out ? DLOCK__MAYBE_RAN : DLOCK__NOT_SENT, NULL, NULL);
        m->head++;
    }
}

/* The connection failed: every request on it ends (settle), and a thread
 * reading or writing on it is woken. mu held. */
static void fail_all(dlock__mux *m, const char *why)
{
    if (m->dead)
        return;
    m->dead = 1;
    snprintf(m->err, sizeof(m->err), "%s", why);
    retire(m);
    if (m->reading || m->writing)
        shutdown(dlock__conn_transport(m->c)->fd, SHUT_RD);
    settle(m);
}

/* Bytes written that the server's TCP stack has not acknowledged yet. */
static int unacked(dlock__mux *m)
{
    int queued = 0;
    if (!m->tcp)
        return 0;   /* a unix socket's bytes are the server's once written */
    if (ioctl(dlock__conn_transport(m->c)->fd, SIOCOUTQ, &queued) != 0)
        return 1;
    return queued > 0;
}

/* Requests whose deadline passed unanswered. mu held. */
static void expire(dlock__mux *m, int64_t now)
{
    for (uint64_t i = m->head; i != m->tail && !m->dead; i++) {
        mslot *s = slot_at(m, i);
        if (!s->w || s->w->deadline > now)
            continue;
        s->w->timed_out = 1;
        if (s->end > m->written || unacked(m)) {
            /* Some of it may still be on its way: reset now (fail_all). */
            fail_all(m, "no reply within the command timeout");
            return;
        }
        /* Redis has it: whether it runs no longer depends on us. Its reply
         * will be read and dropped; the others keep theirs. */
        finish(m, s->w, DLOCK__MAYBE_RAN, NULL, NULL);
        s->w = NULL;
        retire(m);
    }
}

/* Wakes the oldest caller still waiting, to read on (its wake-up to l).
 * mu held. */
static void handoff(dlock__mux *m, wakes *l)
{
    if (m->reading || m->dead)
        return;
    for (uint64_t i = m->head; i != m->tail; i++) {
        mslot *s = slot_at(m, i);
        if (s->w && !is_done(s->w)) {
            set_state(m, s->w, W_POKED, l);
            return;
        }
    }
}

/* ------------------------------------------------------------ writing */

/* Writes the buffer until it is empty (what others append meanwhile too).
 * mu held, m->writing set by the caller; cleared here. */
static void write_out(dlock__mux *m)
{
    dlock__transport *t = dlock__conn_transport(m->c);
    while (m->olen > 0 && !m->dead) {
        atomic_store(&m->deferred, 0);
        m->queued = 0;
        char *buf = m->obuf;
        size_t len = m->olen, cap = m->ocap;
        m->obuf = m->wbuf;
        m->ocap = m->wcap;
        m->olen = 0;
        m->wbuf = buf;
        m->wcap = cap;
        pthread_mutex_unlock(&m->mu);
        int64_t deadline = dlock__now_ms() + m->timeout_ms;
        size_t off = 0;
        char why[sizeof(m->err)] = "";
        while (off < len) {
            pthread_mutex_lock(&m->io_mu);
            ssize_t k = t->vt->write(t, buf + off, len - off);
            short want = t->want;
            if (k < 0 && k != DLOCK__IO_AGAIN)
                snprintf(why, sizeof(why), "%s", t->err[0] ? t->err : "write failed");
            pthread_mutex_unlock(&m->io_mu);
            if (k > 0) {
                off += (size_t)k;
                continue;
            }
            if (k == DLOCK__IO_AGAIN) {
                /* The socket is full: Redis is not reading. Woken early by
                 * fail_all's shutdown (read hang-up). */
                if (dlock__transport_wait(t, (short)(want | POLLRDHUP), deadline) == DLOCK_OK)
                    continue;
                snprintf(why, sizeof(why), "write timeout");
            }
            break;
        }
        pthread_mutex_lock(&m->mu);
        m->written += off;
        if (off < len)
            fail_all(m, why);
        if (m->wcap > 65536) {   /* a big burst: do not keep its buffer */
            free(m->wbuf);
            m->wbuf = NULL;
            m->wcap = 0;
        }
    }
    m->writing = 0;
    if (m->dead)
        settle(m);
}

/* Writes what was left for the last caller handed its reply to write
 * (unless somebody writes already). mu not held. */
static void flush(dlock__mux *m)
{
    pthread_mutex_lock(&m->mu);
    if (!m->writing && m->olen > 0 && !m->dead) {
        m->writing = 1;
        write_out(m);
    }
    pthread_mutex_unlock(&m->mu);
}

/* Room for n more bytes in the output buffer (mu held): 0, or -1 out of
 * memory. */
static int reserve(dlock__mux *m, size_t n)
{
    if (m->olen + n <= m->ocap)
        return 0;
    size_t cap = m->ocap ? m->ocap : 1024;
    while (cap < m->olen + n)
        cap *= 2;
    char *nb = realloc(m->obuf, cap);
    if (!nb)
        return -1;
    m->obuf = nb;
    m->ocap = cap;
    return 0;
}

/* A free slot at the tail (mu held): NULL when out of memory. */
static mslot *push_slot(dlock__mux *m)
{
    if (m->tail - m->head == m->cap) {
        size_t cap = m->cap * 2;
        mslot *v = malloc(cap * sizeof(*v));
        if (!v)
            return NULL;
        for (uint64_t i = m->head; i != m->tail; i++)
            v[i & (cap - 1)] = *slot_at(m, i);
        free(m->ring);
        m->ring = v;
        m->cap = cap;
    }
    return slot_at(m, m->tail++);
}

/* 0 when nothing says the server closed it. An idle connection is peeked
 * at as the pool does (a TLS record read); a busy one only asked whether
 * the peer shut it (its replies may be waiting to be read). mu held. */
static int closed_by_server(dlock__mux *m)
{
    if (m->head == m->tail && !m->reading && !m->writing) {
        pthread_mutex_lock(&m->io_mu);
        int alive = dlock__conn_alive(m->c);
        pthread_mutex_unlock(&m->io_mu);
        return !alive;
    }
    struct pollfd p = {dlock__conn_transport(m->c)->fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0;
}

/* ------------------------------------------------------------ reading */

/* Replies read (up to max into v), waiting for bytes until the deadline:
 * > 0, 0 when the deadline passed first, -1 when the connection failed (why
 * set), -2 when it failed for want of memory. Runs without mu, by the one
 * reader. */
static int read_some(dlock__mux *m, int64_t deadline, redisReply **v, int max, char *why,
                     size_t wsize)
{
    dlock__transport *t = dlock__conn_transport(m->c);
    redisReader *rd = dlock__conn_reader(m->c);
    short want = POLLIN;
    for (;;) {
        int n = 0;
        pthread_mutex_lock(&m->io_mu);
        while (n < max) {
            void *r = NULL;
            if (redisReaderGetReply(rd, &r) != REDIS_OK) {
                snprintf(why, wsize, "protocol error: %s", rd->errstr);
                int oom = rd->err == REDIS_ERR_OOM;
                pthread_mutex_unlock(&m->io_mu);
                return oom ? -2 : -1;
            }
            if (!r)
                break;
            v[n++] = r;
        }
        int pending = n == 0 && want == POLLIN && t->vt->pending(t);
        pthread_mutex_unlock(&m->io_mu);
        if (n > 0)
            return n;
        if (!pending) {
            dlock__errto prev = dlock__err_into(why, wsize);
            int rc = dlock__transport_wait(t, want, deadline);
            dlock__err_reset(prev);
            if (rc == DLOCK_ECMDTIMEOUT)
                return 0;
            if (rc != DLOCK_OK)
                return -1;
        }
        pthread_mutex_lock(&m->io_mu);
        ssize_t k = dlock__conn_feed(m->c);
        want = k == DLOCK__IO_AGAIN ? t->want : POLLIN;
        if (k == 0)
            snprintf(why, wsize, "connection closed by the server");
        else if (k < 0 && k != DLOCK__IO_AGAIN)
            snprintf(why, wsize, "%s",
                     k == DLOCK__IO_ERR ? t->err : "out of memory reading a reply");
        pthread_mutex_unlock(&m->io_mu);
        if (k == DLOCK__IO_NOMEM)
            return -2;
        if (k == 0 || (k < 0 && k != DLOCK__IO_AGAIN))
            return -1;
    }
}

/* Hands the replies out in order (their callers' wake-ups to l). mu held. */
static void hand_out(dlock__mux *m, redisReply **v, int n, wakes *l)
{
    for (int i = 0; i < n; i++) {
        if (m->dead || m->head == m->tail) {
            /* Ended meanwhile (its requests settled), or a reply nobody asked
             * for: the stream cannot be trusted. */
            fail_all(m, "a reply came that no request was waiting for");
            for (; i < n; i++)
                freeReplyObject(v[i]);
            return;
        }
        mslot *s = slot_at(m, m->head);
        if (--s->left > 0 || !s->w) {
            freeReplyObject(v[i]);   /* a PING's, or one whose caller gave up */
        } else {
            atomic_fetch_add(&m->answered, 1);   /* before its caller can return */
            finish(m, s->w, DLOCK__SENT_OK, v[i], l);
        }
        if (s->left == 0)
            m->head++;
    }
}

/* The earliest deadline of a caller still waiting (mu held; one is: me). */
static int64_t next_deadline(dlock__mux *m, const mwait *me)
{
    int64_t d = me->deadline;
    for (uint64_t i = m->head; i != m->tail; i++) {
        mslot *s = slot_at(m, i);
        if (s->w && s->w->deadline < d)
            d = s->w->deadline;
    }
    return d;
}

/* Reads for everyone until me is answered (or ended). mu held, m->reading
 * set by the caller; cleared here, and the role passed on. The wake-ups of
 * the callers answered go out while mu is free; those of the last round are
 * left in l. */
static void read_for(dlock__mux *m, mwait *me, wakes *l)
{
    redisReply *v[BATCH];
    char why[sizeof(m->err)];
    while (!is_done(me) && !m->dead) {
        int64_t deadline = next_deadline(m, me);
        pthread_mutex_unlock(&m->mu);
        wake_now(m, l);
        int n = read_some(m, deadline, v, BATCH, why, sizeof(why));
        pthread_mutex_lock(&m->mu);
        if (n > 0)
            hand_out(m, v, n, l);
        else if (n == 0)
            expire(m, dlock__now_ms());
        else {
            m->oom |= n == -2;
            fail_all(m, why);
        }
    }
    m->reading = 0;
    handoff(m, l);
}

/* ------------------------------------------------------------ a request */

dlock__sent dlock__mux_roundtrip(dlock__mux *m, int argc, const char *const *argv,
                                 const size_t *lens, int ping_first, redisReply **out,
                                 int *timed_out, int *oom, char *why, size_t wsize)
{
    *out = NULL;
    *timed_out = 0;
    *oom = 0;
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, (const char **)argv, lens);
    if (len < 0) {
        *oom = 1;   /* hiredis fails only for want of memory */
        snprintf(why, wsize, "out of memory writing a request");
        return DLOCK__NOT_SENT;
    }
    int64_t deadline = dlock__now_ms() + m->timeout_ms * (ping_first ? 2 : 1);
    size_t n = (ping_first ? sizeof(PING) - 1 : 0) + (size_t)len;
    int64_t t0 = dlock__now_us();
    pthread_mutex_lock(&m->mu);
    if (!m->dead && !atomic_load(&m->retired) && closed_by_server(m)) {
        /* Idle: reset it now. Busy: the reader reads what came before the end. */
        if (m->head == m->tail && !m->reading && !m->writing)
            fail_all(m, "connection closed by the server");
        retire(m);
    }
    mwait *w = NULL;
    mslot *s = NULL;
    if (m->dead || atomic_load(&m->retired)) {
        snprintf(why, wsize, "%s", m->dead ? m->err : "connection given up");
    } else if (!(w = take_wait(m, deadline)) || reserve(m, n) != 0 || !(s = push_slot(m))) {
        *oom = 1;
        snprintf(why, wsize, "out of memory writing a request");
    }
    wakes l = {.n = 0};
    if (!s) {
        if (w)
            put_wait(m, w);
        handoff(m, &l);
        pthread_mutex_unlock(&m->mu);
        wake_now(m, &l);
        free(cmd);
        return DLOCK__NOT_SENT;
    }
    if (ping_first)
        memcpy(m->obuf + m->olen, PING, sizeof(PING) - 1);
    memcpy(m->obuf + m->olen + n - (size_t)len, cmd, (size_t)len);
    free(cmd);
    m->olen += n;
    m->appended += n;
    *s = (mslot){w, m->appended, ping_first ? 2 : 1};
    dlock__roundtrips++;
    /* Callers just handed their replies are about to send again (their
     * threads' next request): left for the last of them to write, the
     * requests of a wave go out in writes of DEFER instead of one each
     * (in one write Redis would idle while the client ran the whole wave).
     * Bounded by those threads' running, not by any reply. deferred is
     * stored before answered is read, as they do the other way round
     * (flush). */
    m->queued++;
    if (!m->writing) {
        atomic_store(&m->deferred, 1);
        if (atomic_load(&m->answered) == 0 || m->queued >= DEFER) {
            m->writing = 1;
            write_out(m);
        }
    }
    int locked = 1;
    while (!is_done(w)) {
        if (!m->reading && !m->dead) {
            m->reading = 1;
            read_for(m, w, &l);
            continue;
        }
        /* Asleep until answered, poked to read on, or the deadline (none
         * when the connection failed: the writer settles it). A poke that
         * came before is moot: somebody reads. */
        int64_t until = m->dead ? -1 : w->deadline;
        atomic_store(&w->state, W_SLEEP);
        pthread_mutex_unlock(&m->mu);
        wake_now(m, &l);
        sleep_on(&w->state, W_SLEEP, until);
        if (is_done(w) && w->sent == DLOCK__SENT_OK) {
            locked = 0;   /* a reply handed out: nothing else to do under mu */
            break;
        }
        pthread_mutex_lock(&m->mu);
        if (is_done(w))
            continue;
        atomic_store(&w->state, W_WAIT);
        if (!m->dead && dlock__now_ms() >= w->deadline)
            expire(m, dlock__now_ms());
    }
    if (locked) {
        if (w->sent != DLOCK__SENT_OK) {
            snprintf(why, wsize, "%s", m->dead ? m->err : "no reply within the command timeout");
            *oom |= m->dead && m->oom;   /* the connection failed for want of memory */
        }
        handoff(m, &l);
        pthread_mutex_unlock(&m->mu);
        wake_now(m, &l);
    }
    dlock__sent sent = w->sent;
    *out = w->r;
    *timed_out = w->timed_out;
    put_wait(m, w);
    if (sent == DLOCK__SENT_OK && atomic_fetch_sub(&m->answered, 1) == 1 &&
        atomic_load(&m->deferred))
        flush(m);
    if (sent == DLOCK__SENT_OK)
        dlock__stats_rtt(m->stats, dlock__now_us() - t0);
    return sent;
}
