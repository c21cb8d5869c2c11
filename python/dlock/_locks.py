"""The lock types: Lock (reentrant, fair, fenced, read, write, spin,
non-reentrant, non-reentrant fair: one class, a kind picking the C handle),
ReadWriteLock, MultiLock (multi-lock and RedLock).

A lock object is cheap and may be shared by threads and tasks. Its owner is
the calling thread, or the running asyncio task: each (lock, owner) pair has
its own C handle made with the owner's id (dlock_*_get_as), created on first
use and freed when the lock object or the owner (thread, task) goes. A lock
object collected while held frees its handles only: the hold stays held and
watchdog-renewed, as dlock_lock_free leaves it, until that owner releases
it through any lock object of the same name and client (the owner is the
thread or task, not the object), the client closes (then it expires after
the watchdog timeout), or a lease ends it.

A new kind of lock with the reentrant lock's calls is one line in _KINDS
and a Client method.
"""

import collections
import weakref
from ctypes import byref, c_int, c_int64, c_uint64, c_void_p, pointer

from . import _core, _lib
from ._core import Cancel, Ptr, call, lease_ms, ms, opts, owner_context, run_wait
from ._core import answer, ttl_seconds, wait_async, wait_ms
from ._errors import InvalidArgument
from ._lib import ETIMEDOUT, OK, encode, last_error, lib

_lock_try, _lock_release = lib.dlock_lock_try, lib.dlock_lock_release
_FOREVER = _lib.WAIT_FOREVER

# kind -> the C getter of an explicit-owner handle
_KINDS = {
    "lock": lib.dlock_lock_get_as,
    "fair": lib.dlock_fair_lock_get_as,
    "fenced": lib.dlock_fenced_lock_get_as,
    "read": lib.dlock_read_lock_get_as,
    "write": lib.dlock_write_lock_get_as,
    "spin": lib.dlock_spin_lock_get_as,
    "nonreentrant": lib.dlock_nonreentrant_lock_get_as,
    "nonreentrant_fair": lib.dlock_nonreentrant_fair_lock_get_as,
}


class Backoff(collections.namedtuple("Backoff", "initial maximum multiplier",
                                     defaults=(0.001, 0.128, 2))):
    """A spin lock's back-off (dlock_backoff; Redisson's ExponentialBackOff):
    after a busy answer the waiter sleeps `initial` seconds, then each sleep
    is the last times `multiplier` (an int) plus up to a ms of jitter, up to
    `maximum`. Backoff(x, x, 1) is Redisson's ConstantBackOff. The defaults
    are Redisson's: 1 ms doubling to 128 ms."""

    __slots__ = ()

    def _c(self):
        m = self.multiplier
        if isinstance(m, bool) or not isinstance(m, int):
            raise InvalidArgument("backoff multiplier must be an int, not %r" % (m,))
        return _lib.Backoff(ms(self.initial, "backoff initial"),
                            ms(self.maximum, "backoff maximum"), m)


class _Handle(Ptr):
    """A C lock handle for one owner; `token`: the fencing token of that
    owner's last acquisition through it."""

    __slots__ = ("token",)

    def __init__(self, ptr, client):
        super().__init__(ptr, lib.dlock_lock_free, client)
        self.token = None


def _release_error_in_exit(what, exc_type, fn):
    """A release in __exit__: raised when the block ended normally; when it
    raised, the block's exception wins and the release's is logged."""
    if exc_type is None:
        fn()
        return
    try:
        fn()
    except Exception as e:
        _core.log.warning("dlock: releasing %s after an exception failed: %s", what, e)


class _LockLike:
    """acquire/release/with/async with, shared by Lock and MultiLock."""

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.release()
        else:
            _release_error_in_exit(self, exc_type, self.release)

    async def __aenter__(self):
        await self.acquire_async()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if exc_type is None:
            await self.release_async()
            return
        try:
            await self.release_async()
        except Exception as e:
            _core.log.warning("dlock: releasing %s after an exception failed: %s", self, e)


class Lock(_LockLike):
    """A lock of one kind on `name` (make it with Client.lock, fair_lock,
    fenced_lock, read_write_lock(...).read / .write).

    acquire(blocking=True, timeout=None, lease=None) -> bool, as
    threading.Lock's: timeout None (or -1) waits for ever, 0 tries once;
    lease None holds with the watchdog (renewed while the client lives),
    else the hold expires after `lease` seconds. release() raises
    NotOwnerError (a RuntimeError) when the caller holds nothing. Reentrant:
    each acquire needs a release; a non-reentrant kind refuses the holder's
    second acquire with ReentryError (a RuntimeError), writing nothing."""

    def __init__(self, client, name, kind, lease=None, lock_delay=None, max_hold=None,
                 fenced=False, backoff=None):
        self._client = client
        self._name = encode(name)
        self._kind = kind
        self._get = _KINDS[kind]
        self._fenced = kind == "fenced" or bool(fenced)
        self._lease = lease_ms(lease)
        self._delay = None if lock_delay is None else ms(lock_delay, "lock_delay")
        self._max_hold = None if max_hold is None else ms(max_hold, "max_hold")
        if backoff is not None and not isinstance(backoff, Backoff):
            backoff = Backoff(*backoff)
        self._backoff = None if backoff is None else backoff._c()
        self._handles = weakref.WeakKeyDictionary()
        self._last = (None, None)    # the last (owner, handle): the hot path's lookup
        self._handle()           # checks the name now, for the creating thread or task

    def _handle(self):
        o = owner_context(self._client)
        last = self._last
        if last[0] is o:
            return last[1]
        h = self._handles.get(o)
        if h is None:
            c = self._client
            p = c_void_p()
            call(c, self._get, c._ptr, self._name, o.id, byref(p))
            h = _Handle(p.value, c)
            if self._delay is not None:
                call(c, lib.dlock_lock_set_lock_delay, h.ptr, self._delay)
            if self._max_hold is not None:
                call(c, lib.dlock_lock_set_max_hold, h.ptr, self._max_hold)
            if self._backoff is not None:
                call(c, lib.dlock_lock_set_backoff, h.ptr, byref(self._backoff))
            self._handles[o] = h
        self._last = (o, h)
        return h

    @property
    def name(self):
        return self._name.decode("utf-8", "surrogateescape")

    @property
    def kind(self):
        return self._kind

    @property
    def client(self):
        return self._client

    @property
    def owner(self):
        """The owner id the calling thread (or task) acts for on this lock."""
        return owner_context(self._client).id.decode()

    def __repr__(self):
        return "<dlock %s %r>" % (self._kind, self.name)

    # ------------------------------------------------------------ blocking

    def acquire(self, blocking=True, timeout=None, lease=None):
        """Takes the lock for the calling thread (or task); True, or False
        when the wait ran out. Ctrl-C in the wait raises KeyboardInterrupt
        with nothing held and nothing left queued."""
        wait = _FOREVER if blocking is True and timeout is None else wait_ms(blocking, timeout)
        lease_v = self._lease if lease is None else lease_ms(lease)
        h = self._handle()
        hp = h.ptr
        if not self._fenced:    # the uncontended path: one C call, no closure
            c = self._client
            k = c._enter()
            try:
                rc = _lock_try(hp, 0, lease_v)
                if rc == OK:
                    return True
                if rc != ETIMEDOUT:
                    raise last_error(rc)
            finally:
                c._leave(k)
            if wait == 0:
                return False
        if self._fenced:
            tok = c_uint64()

            def direct(w, cancel):
                rc = lib.dlock_lock_acquire_opts(hp, byref(opts(w, lease_v, cancel,
                                                                pointer(tok))))
                if rc == OK:
                    h.token = tok.value
                return rc, None
        else:
            def direct(w, cancel):
                if cancel is None:
                    return lib.dlock_lock_try(hp, w, lease_v), None
                return lib.dlock_lock_acquire_opts(hp, byref(opts(w, lease_v, cancel))), None
        return run_wait(self._client, wait, direct, lambda _v: lib.dlock_lock_release(hp),
                        tried=not self._fenced)[0]

    def release(self):
        """Releases one hold of the calling thread (or task)."""
        hp = self._handle().ptr
        c = self._client
        k = c._enter()
        try:
            rc = _lock_release(hp)
            if rc != OK:
                raise last_error(rc)
        finally:
            c._leave(k)

    def transfer(self, new_owner):
        """Hands the calling thread's (or task's) whole hold over to owner
        id `new_owner` (dlock_lock_transfer): another thread's or task's
        (its Client.owner_id, read there) or another process's, in one step,
        so that nobody else can take the lock in between. The receiver calls
        adopt() within the watchdog timeout. Reentrant kinds only (lock,
        fenced, spin, non-reentrant)."""
        if isinstance(new_owner, bytes):
            to = new_owner
        elif isinstance(new_owner, str):
            to = new_owner.encode()
        else:
            raise InvalidArgument("new_owner must be an owner id (str), not %r" % (new_owner,))
        call(self._client, lib.dlock_lock_transfer, self._handle().ptr, to)

    def adopt(self, lease=None):
        """Adopts a hold handed over to the calling thread's (or task's)
        owner id (dlock_lock_adopt): from now on this client's watchdog
        renews it (lease None), or it expires after `lease` seconds. Returns
        the hold count adopted (that many releases free the lock); raises
        NotOwnerError when nothing was handed over (or it expired)."""
        count = c_int64()
        call(self._client, lib.dlock_lock_adopt, self._handle().ptr, lease_ms(lease),
             byref(count))
        return count.value

    def _query(self, fn, ctype):
        out = ctype()
        call(self._client, fn, self._handle().ptr, byref(out))
        return out.value

    def locked(self):
        """True when anybody holds it (Redisson's isLocked)."""
        return bool(self._query(lib.dlock_lock_is_locked, c_int))

    def held(self):
        """True when the calling thread (or task) holds it (isHeldByCurrentThread)."""
        return bool(self._query(lib.dlock_lock_is_held, c_int))

    @property
    def hold_count(self):
        """The calling thread's (or task's) hold count (getHoldCount)."""
        return self._query(lib.dlock_lock_hold_count, c_int64)

    @property
    def ttl(self):
        """Seconds the lock still lives (remainTimeToLive): None when it does
        not exist (free), math.inf when it has no expiry."""
        return ttl_seconds(self._query(lib.dlock_lock_ttl, c_int64))

    def inspect(self):
        """A snapshot of the lock (dlock.Info): holders, TTL, token, a fair
        lock's queue, the waiters, a reserved next turn."""
        from ._info import inspect
        return inspect(self._client, lib.dlock_lock_inspect, self._handle().ptr)

    def held_by(self, owner_id):
        """True when owner id `owner_id` (another thread's l.owner, a C
        program's or a Redisson client's id) holds it (isHeldByThread)."""
        out = c_int()
        call(self._client, lib.dlock_lock_is_held_by, self._handle().ptr,
             encode(owner_id, "owner id"), byref(out))
        return bool(out.value)

    @property
    def token(self):
        """The fencing token of the calling thread's (or task's) last
        acquisition through this object (a fenced lock, or any lock made
        with fenced=True: its acquisitions are fenced), else None."""
        return self._handle().token

    def last_token(self):
        """The last fencing token given for this name, held or not (getToken); 0: none."""
        return self._query(lib.dlock_lock_get_token, c_uint64)

    def force_release(self):
        """Deletes the lock whoever holds it (forceUnlock); True when it was held."""
        return bool(self._query(lib.dlock_lock_force_release, c_int))

    def extend(self, lease):
        """A hold taken with a lease gets `lease` seconds from now."""
        call(self._client, lib.dlock_lock_extend, self._handle().ptr, lease_ms(lease))

    # --------------------------------------------------------------- async

    async def acquire_async(self, timeout=None, lease=None, blocking=True):
        """acquire() for the running task, on dlock's asynchronous API (no
        thread per waiter). Cancelling the task ends the wait; a grant that
        arrives after is given back."""
        wait = wait_ms(blocking, timeout)
        lease_v = self._lease if lease is None else lease_ms(lease)
        h = self._handle()
        hp = h.ptr
        c = self._client
        cancel = Cancel()
        tok = c_uint64()
        o = opts(wait, lease_v, cancel.ptr, pointer(tok) if self._fenced else None)

        def undo(_v):
            return lambda fn, k: lib.dlock_lock_release_async(hp, fn, k), (h,)
        op = await wait_async(c, lambda fn, k: lib.dlock_lock_acquire_async(hp, byref(o), fn, k),
                              (h, cancel, tok, o), None, undo, cancel, [_barrier(h)])
        got = answer(op)
        if got and self._fenced:
            h.token = tok.value
        return got

    async def release_async(self):
        """release() for the running task, asynchronously."""
        h = self._handle()
        answer(await wait_async(self._client,
                                lambda fn, k: lib.dlock_lock_release_async(h.ptr, fn, k), (h,)))


def _barrier(h):
    """A round trip on h's node after a cancelled wait (see wait_async)."""
    return (lambda fn, k: lib.dlock_lock_is_locked_async(h.ptr, fn, k)), (h,)


class ReadWriteLock:
    """Redisson's RReadWriteLock: .read (shared) and .write (exclusive),
    each a Lock. A reader asking for the write lock gets DeadlockError."""

    def __init__(self, client, name, lease=None, lock_delay=None, max_hold=None, fenced=False):
        self.read = Lock(client, name, "read", lease, lock_delay, max_hold, fenced)
        self.write = Lock(client, name, "write", lease, lock_delay, max_hold, fenced)

    @property
    def name(self):
        return self.read.name

    def __repr__(self):
        return "<dlock read_write_lock %r>" % self.name


class MultiLock(_LockLike):
    """Several locks taken as one, all or none (red=False: Redisson's
    MultiLock), or a majority of >= 3 on independent servers (red=True:
    RedLock). Nothing is held while it waits. Owners are the members': the
    calling thread (or task) on each member's client."""

    def __init__(self, locks, red=False):
        locks = list(locks)
        if not locks or not all(isinstance(x, Lock) for x in locks):
            raise InvalidArgument("a multi-lock needs a list of dlock locks")
        self._locks = locks
        self._red = red
        self._clients = _Clients({id(x._client): x._client for x in locks}.values())
        self._handles = weakref.WeakKeyDictionary()
        self._handle()

    def _handle(self):
        o = owner_context(self._locks[0]._client)
        m = self._handles.get(o)
        if m is None:
            hs = [x._handle() for x in self._locks]
            arr = (c_void_p * len(hs))(*[h.ptr for h in hs])
            p = c_void_p()
            new = lib.dlock_redlock_new if self._red else lib.dlock_multilock_new
            call(self._clients, new, arr, len(hs), byref(p))
            m = Ptr(p.value, lib.dlock_multilock_free, hs)
            self._handles[o] = m
        return m

    @property
    def locks(self):
        return list(self._locks)

    def __repr__(self):
        return "<dlock %s %r>" % ("red_lock" if self._red else "multi_lock",
                                  [x.name for x in self._locks])

    def acquire(self, blocking=True, timeout=None, lease=None):
        wait = wait_ms(blocking, timeout)
        lease_v = lease_ms(lease)
        mp = self._handle().ptr

        def direct(w, cancel):
            return lib.dlock_multilock_acquire_opts(mp, byref(opts(w, lease_v, cancel))), None
        return run_wait(self._clients, wait, direct,
                        lambda _v: lib.dlock_multilock_release(mp))[0]

    def release(self):
        call(self._clients, lib.dlock_multilock_release, self._handle().ptr)

    async def acquire_async(self, timeout=None, lease=None, blocking=True):
        wait = wait_ms(blocking, timeout)
        m = self._handle()
        cancel = Cancel()
        o = opts(wait, lease_ms(lease), cancel.ptr)

        def undo(_v):
            return lambda fn, k: lib.dlock_multilock_release_async(m.ptr, fn, k), (m,)
        op = await wait_async(self._clients,
                              lambda fn, k: lib.dlock_multilock_acquire_async(m.ptr, byref(o),
                                                                              fn, k),
                              (m, cancel, o), None, undo, cancel,
                              [_barrier(h) for h in m.keep])
        return answer(op)

    async def release_async(self):
        m = self._handle()
        answer(await wait_async(self._clients,
                                lambda fn, k: lib.dlock_multilock_release_async(m.ptr, fn, k),
                                (m,)))


class _Clients:
    """The clients a multi-lock's call uses, entered and left together (so
    that none closes under it)."""

    def __init__(self, clients):
        self._all = list(clients)
        self._key = frozenset(c._key for c in self._all)

    @property
    def _closing(self):
        return any(c._closing for c in self._all)

    @property
    def _cmd_timeout(self):
        return max(c._cmd_timeout for c in self._all)

    def _enter(self, cancel=None):
        keys = []
        try:
            for c in self._all:
                keys.append((c, c._enter(cancel)))
        except BaseException:
            self._leave(keys)
            raise
        return keys

    def _leave(self, keys):
        for c, k in keys:
            c._leave(k)

