"""The machinery every type shares: C objects owned by Python objects, the
three ways a call that waits runs, and the completion of asynchronous calls.

A wait runs one of three ways, always as the same C call with a dlock_cancel
token (docs/async.md, include/dlock/dlock.h):
  - a thread other than the main one calls the blocking C function itself
    (ctypes releases the GIL): Python runs signal handlers in the main
    thread only, so nothing there needs interrupting, and Client.close()
    fires the token to end it;
  - the main thread hands the blocking call to a helper thread and waits on
    a lock, which a signal interrupts: on KeyboardInterrupt (or any
    exception a signal handler raises) it fires the token, waits until the
    helper's call has returned (nothing the call uses is freed before: see
    CPython gh-90882, where a KeyboardInterrupt in Thread.join() marked a
    running thread stopped), gives back what the call took if it took it
    anyway, and re-raises. The helper acts for the main thread's owner id
    (every handle has an explicit owner), so ownership is unchanged;
  - a coroutine starts the asynchronous C call (dlock_*_async) with a
    callback that runs on the client's io thread and hands the result to
    the event loop with call_soon_threadsafe; a task cancelled meanwhile
    fires the token, and a grant that arrives for a task that is gone is
    given back.
Before any of them a call that may wait tries once without waiting, on the
calling thread: the uncontended path costs one C call and no thread hop.
"""

import _thread
import itertools
import logging
import math
import os
import queue
import sys
import threading
from ctypes import byref, c_void_p

from . import _lib
from ._errors import ClosedError, ForkError, InvalidArgument
from ._lib import ECANCELED, ETIMEDOUT, OK, lib

log = logging.getLogger("dlock")

_seq = itertools.count(1)          # next() is atomic under the GIL

# ------------------------------------------------------------------- fork

# Incremented in a child after fork(): a client remembers the generation it
# was opened in, and refuses to work in another (its io thread and its
# connections are the parent's).
_fork = [0]
_main_ident = [threading.main_thread().ident]


def _after_fork_in_child():
    global _jobs, _pending, _idle_mu
    _fork[0] += 1
    _main_ident[0] = threading.main_thread().ident
    _jobs = queue.SimpleQueue()
    _idle[0] = 0
    _idle_mu = _thread.allocate_lock()
    _pending = {}


def fork_generation():
    return _fork[0]


def check_fork(gen, pid):
    if gen != _fork[0]:
        raise ForkError(
            "this dlock.Client was opened in process %d, before fork(); this is process "
            "%d, which has none of its threads and must not use its connections: open "
            "a new Client in the child" % (pid, os.getpid()))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

# ------------------------------------------------------------ conversions


def ms(seconds, what, minimum=0):
    """Seconds (int or float) to whole milliseconds, rounded up."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidArgument("%s must be a number of seconds, not %r" % (what, seconds))
    if seconds != seconds or seconds < minimum or seconds == math.inf:
        raise InvalidArgument("%s must be a finite number of seconds >= %s, not %r"
                              % (what, minimum, seconds))
    return int(math.ceil(seconds * 1000))


def wait_ms(blocking=True, timeout=None):
    """threading's (blocking, timeout) as a C wait: None or -1 waits for
    ever, 0 tries once."""
    if not blocking:
        if timeout not in (None, -1):
            raise InvalidArgument("can't specify a timeout for a non-blocking call")
        return 0
    if timeout is None or (not isinstance(timeout, bool) and timeout == -1):
        return _lib.WAIT_FOREVER
    return ms(timeout, "timeout")


def lease_ms(lease):
    """None: the watchdog; else a positive number of seconds."""
    if lease is None:
        return _lib.WATCHDOG
    v = ms(lease, "lease")
    if v <= 0:
        raise InvalidArgument("lease must be positive (None: held by the watchdog), not %r"
                              % (lease,))
    return v


NO_EXPIRY = math.inf


def permit_lease_ms(lease):
    """A permit's lease: as lease_ms, or NO_EXPIRY (math.inf): a permit that
    never expires and is not renewed (Redisson's leaseTime -1)."""
    if lease is not None and not isinstance(lease, bool) and lease == math.inf:
        return _lib.NO_EXPIRY
    return lease_ms(lease)


def ttl_seconds(v):
    """A key's TTL in ms as Redis's PTTL answers it, in seconds: None when
    the key does not exist (-2), math.inf when it has no expiry (-1)."""
    if v == -2:
        return None
    return math.inf if v == -1 else v / 1000.0


def expire_ms(ttl):
    """An expire call's TTL: positive seconds, or None for none (0 in C:
    Redisson's clearExpire)."""
    if ttl is None:
        return 0
    v = ms(ttl, "ttl")
    if v <= 0:
        raise InvalidArgument("ttl must be positive (None: no expiry), not %r" % (ttl,))
    return v


def opts(wait, lease=0, cancel=None, token=None):
    o = _lib.WaitOpts()
    o.wait_ms = wait
    o.lease_ms = lease
    o.cancel = cancel
    if token is not None:
        o.token = token
    return o

# ------------------------------------------------------------- C objects


class Ptr:
    """A C object owned by Python: freed when the last reference goes, never
    in a child process after fork() (the parent's), never twice."""

    __slots__ = ("ptr", "_free", "_gen", "keep", "__weakref__")

    def __init__(self, ptr, free, keep=None):
        self.ptr = ptr
        self._free = free
        self._gen = _fork[0]
        self.keep = keep          # what must outlive the C object (its client)

    def __del__(self):
        p, self.ptr = self.ptr, None
        if p and self._gen == _fork[0]:
            try:
                self._free(p)
            except Exception:     # interpreter shutdown: the library may be gone
                pass


class Cancel(Ptr):
    """A dlock_cancel token."""

    __slots__ = ()

    def __init__(self):
        p = c_void_p()
        _lib.check(lib.dlock_cancel_new(byref(p)))
        super().__init__(p.value, lib.dlock_cancel_free)

    def fire(self):
        if self.ptr:
            lib.dlock_cancel_fire(self.ptr)

# ----------------------------------------------- the main thread's helpers

QUEUED, RUNNING, DONE, ABANDONED = range(4)


class _Job:
    __slots__ = ("fn", "state", "result", "done", "mu")

    def __init__(self, fn):
        self.fn = fn
        self.state = QUEUED
        self.result = None
        self.mu = _thread.allocate_lock()
        self.done = _thread.allocate_lock()
        self.done.acquire()


_jobs = queue.SimpleQueue()
_idle = [0]
_idle_mu = _thread.allocate_lock()


def _helper():
    while True:
        with _idle_mu:
            _idle[0] += 1
        job = _jobs.get()
        with _idle_mu:
            _idle[0] -= 1
        with job.mu:
            if job.state == ABANDONED:
                continue
            job.state = RUNNING
        try:
            job.result = job.fn()
        except BaseException as e:   # handed to the waiting thread
            job.result = e
        with job.mu:
            job.state = DONE
        job.done.release()


def _uninterrupted(fn):
    """fn() to its end, however many signals arrive meanwhile: the first
    exception a signal handler raised is returned for re-raising."""
    first = None
    while True:
        try:
            return fn(), first
        except BaseException as e:
            first = first or e


def on_main_thread():
    return _thread.get_ident() == _main_ident[0]


def run_in_helper(fn, cancel, undo):
    """fn() on a helper thread while the calling (main) thread waits,
    interruptibly. fn returns (rc, value, error). On an exception in the
    wait: the cancel token is fired, the call awaited, undo(value) run when
    it succeeded anyway, and the exception re-raised."""
    job = _Job(fn)
    try:
        if _idle[0] <= 0:
            _thread.start_new_thread(_helper, ())
        _jobs.put(job)
        job.done.acquire()
    except BaseException:
        def settle():        # may be interrupted and run again: never waits twice on done
            with job.mu:
                if job.state == QUEUED:
                    job.state = ABANDONED
                    return None
            cancel.fire()
            while True:
                with job.mu:
                    if job.state == DONE:    # set before done is released
                        return job.result
                if job.done.acquire(timeout=0.1):
                    job.done.release()
        res, _ = _uninterrupted(settle)
        if isinstance(res, tuple) and res[0] == OK and undo is not None:
            _uninterrupted(lambda: undo(res[1]))
        raise
    if isinstance(job.result, BaseException):
        raise job.result
    return job.result

# ------------------------------------------------------- asynchronous calls


class Op:
    """One asynchronous C call in flight: what it keeps alive (until its
    callback has run), where its result goes (an event loop's futures, or
    nowhere for a give-back nobody waits for), and how to give back what it
    took: undo(value) -> (start, keep) of the asynchronous call that does."""

    __slots__ = ("client", "client_key", "keep", "extract", "undo", "loop", "fut", "done",
                 "status", "msg", "value", "cleanup")

    def __init__(self, client, keep, extract=None, undo=None, loop=None):
        self.client = client
        self.client_key = getattr(client, "_key", None)
        self.keep = keep
        self.extract = extract
        self.undo = undo
        self.loop = loop
        self.fut = self.done = None
        if loop is not None:
            self.fut = loop.create_future()    # the waiter's (cancelled with its task)
            self.done = loop.create_future()   # completion, whatever became of the waiter
        self.status = None
        self.msg = ""
        self.value = None
        self.cleanup = False                   # the cancelled waiter gives back itself


_pending = {}
_cb_state = threading.local()


def in_callback():
    return getattr(_cb_state, "active", False)


def _give_back(op):
    """What op took, given back (once) by an asynchronous call nobody waits for."""
    undo, op.undo = op.undo, None
    if op.status != OK or undo is None:
        return
    try:
        start_async(op.client, *undo(op.value))
    except Exception as e:
        log.warning("dlock: could not give back what an abandoned call took: %s", e)


def _resolve(op):
    """On the event loop's thread, the one place that decides: the result to
    the waiter, or given back when the waiter is gone (its task cancelled)
    and not cleaning up itself."""
    if not op.done.done():
        op.done.set_result(None)
    if op.cleanup:
        return
    if not op.fut.done():
        op.fut.set_result(op)
    else:
        _give_back(op)


# The last completed Op of each io thread (by OS thread id: ctypes gives a
# foreign thread a new Python thread state per callback): kept until that
# thread's next callback, or its client's close, so that no C object an Op
# keeps (a handle, a multi-lock, a cancel token) is freed inside the
# callback of its own call, whose C frame still runs after the Python one.
_last_op = {}


def forget_ops(client_key):
    """Drops the kept Ops of a client whose io thread has stopped."""
    for ident, op in list(_last_op.items()):
        k = op.client_key
        if k == client_key or (isinstance(k, frozenset) and client_key in k):
            _last_op.pop(ident, None)


def _on_async(res, key):
    _cb_state.active = True
    try:
        op = _pending.pop(key, None)
        if op is None:
            return
        prev, _last_op[threading.get_ident()] = _last_op.get(threading.get_ident()), op
        del prev            # the previous callback of this thread has returned: freed here
        st = lib.dlock_async_status(res)
        op.status = st
        if st == OK:
            op.value = op.extract(res) if op.extract is not None else True
        else:
            m = lib.dlock_async_message(res)
            op.msg = m.decode("utf-8", "replace") if m else ""
        if op.loop is None:
            return
        try:
            op.loop.call_soon_threadsafe(_resolve, op)
        except RuntimeError:          # the loop is closed: nobody will take it
            _give_back(op)
    except BaseException:             # never into C
        log.exception("dlock: an asynchronous completion failed")
    finally:
        _cb_state.active = False


ASYNC_CB = _lib.ASYNC_FN(_on_async)   # lives as long as the module


def start_async(client, start, keep, extract=None, undo=None, loop=None):
    """Starts an asynchronous C call: start(fn, key) -> status. Returns the
    Op (registered before the call: its callback may run at once)."""
    op = Op(client, keep, extract, undo, loop)
    key = next(_seq)
    _pending[key] = op
    k = client._enter()
    try:
        rc = start(ASYNC_CB, key)
        err = _lib.last_error(rc) if rc != OK else None
    finally:
        client._leave(k)
    if err is not None:
        _pending.pop(key, None)
        raise err
    return op


async def wait_async(client, start, keep, extract=None, undo=None, cancel=None, barrier=()):
    """Runs an asynchronous C call from a coroutine; returns its Op once
    completed. When the task is cancelled meanwhile, the cancel token is
    fired and the cancellation waits (a bounded time) until the C call has
    ended and what it took anyway is given back; interrupted again, it
    leaves that to the loop. A wait's give-up (leaving a fair lock's queue,
    handing back a reserved turn) is sent by the C library as the call ends,
    unanswered: `barrier` lists (start, keep) of round trips that follow it
    on the same connection, awaited so that it has reached Redis before the
    cancellation goes on (a process that exits at once would close the
    client before)."""
    import asyncio
    op = start_async(client, start, keep, extract, undo, asyncio.get_running_loop())
    try:
        return await op.fut
    except BaseException as e:
        if cancel is not None:
            cancel.fire()
        op.fut.cancel()                  # (resolved already: ours to give back below)
        if isinstance(e, asyncio.CancelledError):
            op.cleanup = True
            bound = client._cmd_timeout * 2 + 1
            try:
                await asyncio.wait_for(asyncio.shield(op.done), bound)
                give, op.undo = op.undo, None
                if op.status == OK and give is not None:
                    await asyncio.wait_for(wait_async(client, *give(op.value)), bound)
                elif op.status != OK:
                    for b in barrier:
                        await asyncio.wait_for(wait_async(client, *b), bound)
            except BaseException:
                pass
        op.cleanup = False               # not completed yet: _resolve gives it back
        if op.done.done():
            _give_back(op)
        raise


def answer(op, timeout_value=False):
    """A completed asynchronous call's outcome: its value (True when it has
    none), timeout_value when its wait ran out, else its error raised."""
    if op.status == OK:
        return op.value
    if op.status == ETIMEDOUT:
        return timeout_value
    raise _lib.make_error(op.status, op.msg)


def closed_error():
    return ClosedError("the dlock client is closed", _lib.ECLOSED, "DLOCK_ECLOSED")


def run_wait(client, wait, direct, undo, tried=False):
    """A call that may wait: one try on the calling thread (unless the
    caller made it: tried), then, when the object is taken and wait (ms)
    allows, the blocking call with a cancel token, on this thread or (the
    main thread) on a helper. direct(wait_ms, cancel_ptr) makes the C call
    and returns (rc, value). Returns (True, value) or (False, None) at the
    deadline; raises the other errors."""
    if not tried:
        k = client._enter()
        try:
            rc, value = direct(0, None)
            if rc == OK:
                return True, value
            if rc != ETIMEDOUT:
                raise _lib.last_error(rc)
        finally:
            client._leave(k)
    if wait == 0:
        return False, None
    cancel = Cancel()

    def blocking():
        k = client._enter(cancel)
        try:
            rc, value = direct(wait, cancel.ptr)
            err = _lib.last_error(rc) if rc not in (OK, ETIMEDOUT) else None
        finally:
            client._leave(k)
        return rc, value, err

    if on_main_thread():
        rc, value, err = run_in_helper(blocking, cancel, undo)
    else:
        rc, value, err = blocking()
    if rc == OK:
        return True, value
    if rc == ETIMEDOUT:
        return False, None
    if rc == ECANCELED and client._closing:
        raise closed_error()
    raise err


def call(client, fn, *args):
    """A call that does not wait: raises on failure."""
    k = client._enter()
    try:
        rc = fn(*args)
        if rc != OK:
            raise _lib.last_error(rc)
    finally:
        client._leave(k)


def owner_context(client):
    """The owner of the calling context, per client: the running asyncio
    task, else the calling thread (as Redisson's owner is the thread)."""
    aio = sys.modules.get("asyncio")
    if aio is not None:
        loop = aio._get_running_loop()
        if loop is not None:
            task = aio.current_task(loop)
            if task is not None:
                o = client._task_owners.get(task)
                if o is None:
                    o = client._task_owners[task] = client._new_owner()
                return o
    o = getattr(client._tls, "owner", None)
    if o is None:
        o = client._tls.owner = client._new_owner()
    return o


class Owner:
    """An owner id of one client, for one thread or one task; the handles
    acting for it are keyed on this object and go with it."""

    __slots__ = ("id", "client", "__weakref__")

    def __init__(self, client, oid):
        self.id = oid
        self.client = client

