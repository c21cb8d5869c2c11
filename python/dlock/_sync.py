"""The synchronizers without a per-thread owner: Semaphore, PermitSemaphore,
Latch, RateLimiter, and Election (whose handle campaigns as an owner id of
its own). One C handle per Python object, usable from any thread or task."""

import collections
from ctypes import (byref, c_char_p, c_int, c_int64, c_uint64, c_void_p,
                    create_string_buffer, pointer)

from . import _lib
from ._client import Leader
from ._core import (Cancel, Ptr, answer, call, lease_ms, ms, opts, permit_lease_ms, run_wait,
                    wait_async, wait_ms)
from ._core import expire_ms, ttl_seconds
from ._errors import InvalidArgument
from ._lib import OK, encode, lib

_ID = _lib.PERMIT_ID_BUFSIZE


def _int(v, what):
    if isinstance(v, bool) or not isinstance(v, int) or not -2**63 <= v < 2**63:
        raise InvalidArgument("%s must be an integer, not %r" % (what, v))
    return v


class _Single:
    """One C handle for the object's life."""

    _get = _free = None
    _what = ""

    def __init__(self, client, name):
        self._client = client
        self._name = encode(name)
        p = c_void_p()
        call(client, self._get, client._ptr, self._name, byref(p))
        self._h = Ptr(p.value, self._free, client)

    @property
    def name(self):
        return self._name.decode("utf-8", "surrogateescape")

    @property
    def client(self):
        return self._client

    def __repr__(self):
        return "<dlock %s %r>" % (self._what, self.name)

    def _q(self, fn, ctype, *args):
        out = ctype()
        call(self._client, fn, self._h.ptr, *args, byref(out))
        return out.value

    def _async(self, start, keep=(), extract=None, undo=None, cancel=None):
        return wait_async(self._client, start, (self._h,) + tuple(keep), extract, undo, cancel)


def _owner(v):
    """An owner id argument (str or bytes) for C."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    raise InvalidArgument("an owner id must be a str, not %r" % (v,))


def _wait_opts(w, cancel, lease=0, token=None):
    """NULL for one attempt, else the options (a pointer to them)."""
    if w == 0 and cancel is None and lease == 0 and token is None:
        return None
    return byref(opts(w, lease, cancel, token))


class _Counted(_Single):
    """acquire(permits, timeout) -> bool and release(permits), blocking and
    asynchronous, of a type whose permits nobody owns (a semaphore's, a rate
    limiter's): four C calls named by the class."""

    _acquire_opts = _release_c = _acquire_async = _release_async = None

    def acquire(self, permits=1, timeout=None, *, blocking=True):
        """Takes `permits` permits; True, or False when the wait ran out
        (timeout None waits as long as it takes, 0 tries once)."""
        wait, n, hp = wait_ms(blocking, timeout), _int(permits, "permits"), self._h.ptr
        acq, rel = self._acquire_opts, self._release_c

        def direct(w, cancel):
            return acq(hp, n, _wait_opts(w, cancel)), None
        return run_wait(self._client, wait, direct, lambda _v: rel(hp, n))[0]

    def release(self, permits=1):
        """Gives `permits` back."""
        call(self._client, self._release_c, self._h.ptr, _int(permits, "permits"))

    async def acquire_async(self, permits=1, timeout=None, *, blocking=True):
        wait, n, hp = wait_ms(blocking, timeout), _int(permits, "permits"), self._h.ptr
        acq, rel = self._acquire_async, self._release_async
        cancel = Cancel()
        o = opts(wait, 0, cancel.ptr)

        def undo(_v):
            return lambda fn, k: rel(hp, n, fn, k), (self._h,)
        op = await self._async(lambda fn, k: acq(hp, n, byref(o), fn, k), (cancel, o), None,
                               undo, cancel)
        return answer(op)

    async def release_async(self, permits=1):
        n, rel = _int(permits, "permits"), self._release_async
        answer(await self._async(lambda fn, k: rel(self._h.ptr, n, fn, k)))


class Semaphore(_Counted):
    """Redisson's RSemaphore: permits nobody owns (any thread or process may
    release). with s: takes and gives back one permit."""

    _get, _free, _what = lib.dlock_semaphore_get, lib.dlock_semaphore_free, "semaphore"
    _acquire_opts, _release_c = lib.dlock_semaphore_acquire_opts, lib.dlock_semaphore_release
    _acquire_async = lib.dlock_semaphore_acquire_async
    _release_async = lib.dlock_semaphore_release_async

    def try_set_permits(self, permits, ttl=None):
        """Sets the permits only when the semaphore does not exist; True when
        set. ttl: seconds the key then lives (trySetPermits(permits, ttl))."""
        if ttl is None:
            return bool(self._q(lib.dlock_semaphore_try_set_permits, c_int,
                                _int(permits, "permits")))
        return bool(self._q(lib.dlock_semaphore_try_set_permits_ttl, c_int,
                            _int(permits, "permits"), expire_ms(ttl)))

    def release_if_exists(self, permits=1):
        """release() only when the semaphore exists (releaseIfExists); True when released."""
        return bool(self._q(lib.dlock_semaphore_release_if_exists, c_int,
                            _int(permits, "permits")))

    def set_permits(self, permits):
        call(self._client, lib.dlock_semaphore_set_permits, self._h.ptr, _int(permits, "permits"))

    def add_permits(self, delta):
        call(self._client, lib.dlock_semaphore_add_permits, self._h.ptr, _int(delta, "delta"))

    def available(self):
        return self._q(lib.dlock_semaphore_available, c_int64)

    def drain(self):
        """Takes every available permit; how many there were."""
        return self._q(lib.dlock_semaphore_drain, c_int64)

    def delete(self):
        return bool(self._q(lib.dlock_semaphore_delete, c_int))

    def expire(self, ttl):
        """The key expires in `ttl` seconds (None: never, clearExpire); True when it exists."""
        return bool(self._q(lib.dlock_semaphore_expire, c_int, expire_ms(ttl)))

    @property
    def ttl(self):
        """Seconds the key still lives: None when absent, math.inf without expiry."""
        return ttl_seconds(self._q(lib.dlock_semaphore_ttl, c_int64))

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

    async def __aenter__(self):
        await self.acquire_async()
        return self

    async def __aexit__(self, *exc):
        await self.release_async()


def _id_list(ids):
    """Permit ids as C's (const char *const *, n)."""
    if isinstance(ids, (str, bytes)):
        raise InvalidArgument("permit ids must be a list of ids, not one id")
    ids = [encode(i, "permit id") for i in ids]
    return (c_char_p * len(ids))(*ids), len(ids)


class PermitSemaphore(_Single):
    """Redisson's RPermitExpirableSemaphore: each permit has an id (a str of
    32 hex characters) and a lease (None: renewed by the watchdog)."""

    _get, _free = lib.dlock_permit_semaphore_get, lib.dlock_permit_semaphore_free
    _what = "permit_semaphore"

    def __init__(self, client, name, lock_delay=None):
        super().__init__(client, name)
        if lock_delay is not None:
            call(client, lib.dlock_permit_semaphore_set_lock_delay, self._h.ptr,
                 ms(lock_delay, "lock_delay"))

    def try_set_permits(self, permits):
        return bool(self._q(lib.dlock_permit_semaphore_try_set_permits, c_int,
                            _int(permits, "permits")))

    def set_total(self, permits):
        call(self._client, lib.dlock_permit_semaphore_set_total, self._h.ptr,
             _int(permits, "permits"))

    def add_permits(self, delta):
        call(self._client, lib.dlock_permit_semaphore_add_permits, self._h.ptr,
             _int(delta, "delta"))

    def acquire(self, timeout=None, lease=None, *, blocking=True):
        """Takes a permit: its id, or None when the wait ran out."""
        wait, lease_v, pp = wait_ms(blocking, timeout), permit_lease_ms(lease), self._h.ptr
        buf = create_string_buffer(_ID)

        def direct(w, cancel):
            rc = lib.dlock_permit_semaphore_acquire_opts(pp, byref(opts(w, lease_v, cancel)),
                                                         buf, _ID)
            return rc, buf.value.decode() if rc == OK else None
        ok, pid = run_wait(self._client, wait, direct,
                           lambda pid: lib.dlock_permit_semaphore_release(pp, pid.encode()))
        return pid if ok else None

    def acquire_many(self, permits, timeout=None, lease=None, *, blocking=True):
        """Takes `permits` permits together, all or none, with one lease
        (Redisson's acquire(permits, lease)): their ids (a list), or None when
        the wait ran out. More than the semaphore's total: InvalidArgument."""
        wait, lease_v, pp = wait_ms(blocking, timeout), permit_lease_ms(lease), self._h.ptr
        n = _int(permits, "permits")
        if n < 1:
            raise InvalidArgument("permits must be >= 1, not %r" % (n,))
        bufs = (_lib.PermitId * n)()

        def direct(w, cancel):
            rc = lib.dlock_permit_semaphore_acquire_n_opts(pp, n, byref(opts(w, lease_v, cancel)),
                                                           bufs)
            return rc, [b.value.decode() for b in bufs] if rc == OK else None
        ok, ids = run_wait(self._client, wait, direct,
                           lambda ids: lib.dlock_permit_semaphore_release_list(pp, *_id_list(ids)))
        return ids if ok else None

    def release_many(self, permit_ids):
        """Gives the permits back together, all or none (Redisson's
        release(List)): NotOwnerError naming the first not held, and then
        none is released."""
        call(self._client, lib.dlock_permit_semaphore_release_list, self._h.ptr,
             *_id_list(permit_ids))

    def try_release_many(self, permit_ids):
        """release_many without the error (tryRelease(List)): True when all
        were given back, False when one was not held (none given back)."""
        return bool(self._q(lib.dlock_permit_semaphore_try_release_list, c_int64,
                            *_id_list(permit_ids)))

    def release(self, permit_id):
        """Gives permit `permit_id` back (NotOwnerError: unknown or expired)."""
        call(self._client, lib.dlock_permit_semaphore_release, self._h.ptr,
             encode(permit_id, "permit id"))

    def try_release(self, permit_id):
        return bool(self._q(lib.dlock_permit_semaphore_try_release, c_int,
                            encode(permit_id, "permit id")))

    def update_lease(self, permit_id, lease):
        """A new lease from now (None: renewed by the watchdog)."""
        call(self._client, lib.dlock_permit_semaphore_update_lease, self._h.ptr,
             encode(permit_id, "permit id"), lease_ms(lease))

    def lease_time(self, permit_id):
        """Seconds left on the permit's lease (math.inf: held without one)."""
        v = self._q(lib.dlock_permit_semaphore_lease_time, c_int64, encode(permit_id, "permit id"))
        return float("inf") if v == -1 else v / 1000.0

    def available(self):
        n, held = c_int64(), c_int64()
        call(self._client, lib.dlock_permit_semaphore_available, self._h.ptr, byref(n),
             byref(held))
        return n.value

    def acquired(self):
        """Permits held under a lease now."""
        n, held = c_int64(), c_int64()
        call(self._client, lib.dlock_permit_semaphore_available, self._h.ptr, byref(n),
             byref(held))
        return held.value

    def delete(self):
        return bool(self._q(lib.dlock_permit_semaphore_delete, c_int))

    def total(self):
        """Available plus held permits (getPermits)."""
        return self._q(lib.dlock_permit_semaphore_permits, c_int64)

    def force_release(self, permit_id):
        """Gives back a permit somebody else holds (an operator's call); True
        when it was held. Its lock-delay, if any, stays."""
        return bool(self._q(lib.dlock_permit_semaphore_force_release, c_int,
                            encode(permit_id, "permit id")))

    def expire(self, ttl):
        """Both keys expire in `ttl` seconds (None: never); True when it exists."""
        return bool(self._q(lib.dlock_permit_semaphore_expire, c_int, expire_ms(ttl)))

    @property
    def ttl(self):
        """Seconds the semaphore's key still lives: None when absent, math.inf without expiry."""
        return ttl_seconds(self._q(lib.dlock_permit_semaphore_ttl, c_int64))

    async def acquire_async(self, timeout=None, lease=None, *, blocking=True):
        wait, pp = wait_ms(blocking, timeout), self._h.ptr
        cancel = Cancel()
        o = opts(wait, permit_lease_ms(lease), cancel.ptr)

        def undo(pid):
            b = pid.encode()
            return lambda fn, k: lib.dlock_permit_semaphore_release_async(pp, b, fn, k), (self._h,)
        op = await self._async(lambda fn, k: lib.dlock_permit_semaphore_acquire_async(
            pp, byref(o), fn, k), (cancel, o),
            lambda res: lib.dlock_async_permit_id(res).decode(), undo, cancel)
        return answer(op, None)

    async def acquire_many_async(self, permits, timeout=None, lease=None, *, blocking=True):
        wait, pp, n = wait_ms(blocking, timeout), self._h.ptr, _int(permits, "permits")
        cancel = Cancel()
        o = opts(wait, permit_lease_ms(lease), cancel.ptr)

        def extract(res):
            return [lib.dlock_async_permit_ids(res, i).decode()
                    for i in range(lib.dlock_async_count(res))]

        def undo(ids):
            arr, k = _id_list(ids)
            return (lambda fn, key: lib.dlock_permit_semaphore_release_list_async(
                pp, arr, k, fn, key)), (self._h, arr)
        op = await self._async(lambda fn, k: lib.dlock_permit_semaphore_acquire_n_async(
            pp, n, byref(o), fn, k), (cancel, o), extract, undo, cancel)
        return answer(op, None)

    async def release_many_async(self, permit_ids):
        arr, n = _id_list(permit_ids)
        answer(await self._async(lambda fn, k: lib.dlock_permit_semaphore_release_list_async(
            self._h.ptr, arr, n, fn, k), (arr,)))

    async def release_async(self, permit_id):
        b = encode(permit_id, "permit id")
        answer(await self._async(lambda fn, k: lib.dlock_permit_semaphore_release_async(
            self._h.ptr, b, fn, k)))


class Latch(_Single):
    """Redisson's RCountDownLatch."""

    _get, _free, _what = lib.dlock_latch_get, lib.dlock_latch_free, "latch"

    def try_set_count(self, count):
        """Sets the count only at zero; True when set."""
        return bool(self._q(lib.dlock_latch_try_set_count, c_int, _int(count, "count")))

    def count_down(self):
        call(self._client, lib.dlock_latch_count_down, self._h.ptr)

    def count(self):
        return self._q(lib.dlock_latch_count, c_int64)

    def delete(self):
        return bool(self._q(lib.dlock_latch_delete, c_int))

    def wait(self, timeout=None):
        """Waits until the count is zero: True, or False when the wait ran out."""
        lp = self._h.ptr

        def direct(w, cancel):
            return lib.dlock_latch_await_opts(lp, _wait_opts(w, cancel)), None
        return run_wait(self._client, wait_ms(True, timeout), direct, None)[0]

    async def wait_async(self, timeout=None):
        cancel = Cancel()
        o = opts(wait_ms(True, timeout), 0, cancel.ptr)
        op = await self._async(lambda fn, k: lib.dlock_latch_await_async(self._h.ptr, byref(o),
                                                                         fn, k),
                               (cancel, o), None, None, cancel)
        return answer(op)

    async def count_down_async(self):
        answer(await self._async(lambda fn, k: lib.dlock_latch_count_down_async(self._h.ptr,
                                                                                 fn, k)))


class Election(_Single):
    """Leader election: campaign() until elected (a term, which fences writes
    like a token), resign(); observers read leader() and await_change().
    The handle campaigns as an owner id of its own, from any thread.
    with e: campaigns (waiting as long as it takes) and resigns at the end."""

    _get, _free, _what = lib.dlock_election_get, lib.dlock_election_free, "election"

    def __init__(self, client, name, lock_delay=None, max_hold=None, owner=None):
        if owner is None:
            super().__init__(client, name)
        else:   # campaigns as that owner id (a successor's, for handover)
            self._client, self._name = client, encode(name)
            p = c_void_p()
            call(client, lib.dlock_election_get_as, client._ptr, self._name, _owner(owner),
                 byref(p))
            self._h = Ptr(p.value, self._free, client)
        if lock_delay is not None:
            call(client, lib.dlock_election_set_lock_delay, self._h.ptr,
                 ms(lock_delay, "lock_delay"))
        if max_hold is not None:
            call(client, lib.dlock_election_set_max_hold, self._h.ptr, ms(max_hold, "max_hold"))

    def campaign(self, timeout=None, *, blocking=True):
        """Leads: the term, or None when the wait ran out."""
        ep, tok = self._h.ptr, c_uint64()

        def direct(w, cancel):
            rc = lib.dlock_election_campaign(ep, byref(opts(w, 0, cancel, pointer(tok))))
            return rc, tok.value
        ok, term = run_wait(self._client, wait_ms(blocking, timeout), direct,
                            lambda _v: lib.dlock_election_resign(ep))
        return term if ok else None

    def resign(self):
        call(self._client, lib.dlock_election_resign, self._h.ptr)

    def handover(self, successor):
        """Hands leadership to the election handle whose owner id is
        `successor` (made with owner=..., e.g. Client.new_owner_id()), so
        that no other campaign wins in between (dlock_election_handover).
        This handle's term ends; the successor calls adopt()."""
        call(self._client, lib.dlock_election_handover, self._h.ptr, _owner(successor))

    def adopt(self):
        """The successor's one call: leads in a new, higher term (returned)
        with the lock handed over to this handle's owner; NotOwnerError when
        nothing was handed over (or it expired)."""
        term = c_uint64()
        call(self._client, lib.dlock_election_adopt, self._h.ptr, byref(term))
        return term.value

    @property
    def term(self):
        """The term this handle leads in, 0 when it does not."""
        return lib.dlock_election_term(self._h.ptr)

    def leader(self):
        """Leader(term, who) now; term 0 (who "") when nobody leads."""
        term, who = c_uint64(), create_string_buffer(512)
        call(self._client, lib.dlock_election_leader, self._h.ptr, byref(term), who, 512)
        return Leader(term.value, who.value.decode("utf-8", "replace"))

    def await_change(self, known, timeout=None):
        """Waits until the leader's term differs from `known`: the new
        Leader (term 0: none), or None when the wait ran out."""
        ep, known = self._h.ptr, _int(known, "known")
        term, who = c_uint64(), create_string_buffer(512)

        def direct(w, cancel):
            rc = lib.dlock_election_await_change(ep, known, _wait_opts(w, cancel), byref(term),
                                                 who, 512)
            return rc, Leader(term.value, who.value.decode("utf-8", "replace"))
        ok, leader = run_wait(self._client, wait_ms(True, timeout), direct, None)
        return leader if ok else None

    def __enter__(self):
        self.campaign()
        return self

    def __exit__(self, *exc):
        self.resign()

    async def campaign_async(self, timeout=None, *, blocking=True):
        ep = self._h.ptr
        cancel = Cancel()
        o = opts(wait_ms(blocking, timeout), 0, cancel.ptr)

        def undo(_v):
            return lambda fn, k: lib.dlock_election_resign_async(ep, fn, k), (self._h,)
        op = await self._async(lambda fn, k: lib.dlock_election_campaign_async(ep, byref(o),
                                                                               fn, k),
                               (cancel, o), lib.dlock_async_token, undo, cancel)
        return answer(op, None)

    async def resign_async(self):
        answer(await self._async(lambda fn, k: lib.dlock_election_resign_async(self._h.ptr,
                                                                                fn, k)))

    async def await_change_async(self, known, timeout=None):
        known = _int(known, "known")
        cancel = Cancel()
        o = opts(wait_ms(True, timeout), 0, cancel.ptr)

        def extract(res):
            t = lib.dlock_async_text(res)
            return Leader(lib.dlock_async_token(res), t.decode("utf-8", "replace") if t else "")
        op = await self._async(lambda fn, k: lib.dlock_election_await_change_async(
            self._h.ptr, known, byref(o), fn, k), (cancel, o), extract, None, cancel)
        return answer(op, None)

    async def __aenter__(self):
        await self.campaign_async()
        return self

    async def __aexit__(self, *exc):
        await self.resign_async()


class RateConfig(collections.namedtuple("RateConfig", "rate interval per_client keep_alive")):
    """A rate limiter's configuration: `rate` permits per `interval` seconds,
    for every client together or (per_client) for each; keep_alive: seconds
    after the last change at which the keys expire (None: never)."""

    __slots__ = ()


def _rate_config(rate, interval, per_client, keep_alive):
    return _lib.RateConfig(_lib.RATE_PER_CLIENT if per_client else _lib.RATE_OVERALL,
                           _int(rate, "rate"), ms(interval, "interval"),
                           0 if keep_alive is None else ms(keep_alive, "keep_alive"))


class RateLimiter(_Counted):
    """Redisson's RRateLimiter: at most `rate` permits per `interval` seconds
    (a sliding window: a grant's permits come back `interval` after it was
    made), over every client, or for each client (per_client=True). Its
    keys are Redisson's, shared with Java clients. A waiter sleeps until the
    oldest grant frees its permits (no subscription, no polling). Calls on
    a limiter with no rate set raise NotFoundError (a LookupError)."""

    _get, _free = lib.dlock_rate_limiter_get, lib.dlock_rate_limiter_free
    _what = "rate_limiter"
    _acquire_opts = lib.dlock_rate_limiter_acquire_opts
    _release_c = lib.dlock_rate_limiter_release
    _acquire_async = lib.dlock_rate_limiter_acquire_async
    _release_async = lib.dlock_rate_limiter_release_async

    def try_set_rate(self, rate, interval, *, per_client=False, keep_alive=None):
        """Sets the rate when none is set (trySetRate); True when set."""
        cfg = _rate_config(rate, interval, per_client, keep_alive)
        return bool(self._q(lib.dlock_rate_limiter_try_set_rate, c_int, byref(cfg)))

    def set_rate(self, rate, interval, *, per_client=False, keep_alive=None, keep_state=False):
        """Sets the rate whatever was set (setRate). keep_state: the grants
        still in the window count against the new rate; else it starts afresh."""
        cfg = _rate_config(rate, interval, per_client, keep_alive)
        call(self._client, lib.dlock_rate_limiter_set_rate, self._h.ptr, byref(cfg),
             1 if keep_state else 0)

    def update_rate(self, rate, interval, *, per_client=False, keep_alive=None,
                    keep_state=False):
        """set_rate only when a rate is set (updateRate); True when it was."""
        cfg = _rate_config(rate, interval, per_client, keep_alive)
        return bool(self._q(lib.dlock_rate_limiter_update_rate, c_int, byref(cfg),
                            1 if keep_state else 0))

    def config(self):
        """The RateConfig (getConfig), or None when no rate is set."""
        cfg = _lib.RateConfig()
        k = self._client._enter()
        try:
            rc = lib.dlock_rate_limiter_config(self._h.ptr, byref(cfg))
            if rc == _lib.ENOTFOUND:
                return None
            if rc != OK:
                raise _lib.last_error(rc)
        finally:
            self._client._leave(k)
        return RateConfig(cfg.rate, cfg.interval_ms / 1000.0, cfg.type == _lib.RATE_PER_CLIENT,
                          cfg.keep_alive_ms / 1000.0 if cfg.keep_alive_ms else None)

    # acquire(permits (1..rate), timeout), release(permits): given back
    # before their grant ages out, at most to the rate (_Counted)

    def try_acquire(self, permits=1, timeout=0):
        """Redisson's tryAcquire(permits[, timeout]): one try by default."""
        return self.acquire(permits, timeout)

    def available(self):
        """The permits the window has left now (a limiter unused yet: the rate)."""
        return self._q(lib.dlock_rate_limiter_available, c_int64)

    def delete(self):
        """Deletes the limiter's keys; True when any existed."""
        return bool(self._q(lib.dlock_rate_limiter_delete, c_int))

    def expire(self, ttl):
        """Every key expires in `ttl` seconds (None: never again,
        clearExpire); True when any key changed."""
        return bool(self._q(lib.dlock_rate_limiter_expire, c_int, expire_ms(ttl)))

    async def try_set_rate_async(self, rate, interval, *, per_client=False, keep_alive=None):
        cfg = _rate_config(rate, interval, per_client, keep_alive)
        op = await self._async(lambda fn, k: lib.dlock_rate_limiter_try_set_rate_async(
            self._h.ptr, byref(cfg), fn, k), (cfg,), lib.dlock_async_flag)
        return bool(answer(op))

    async def set_rate_async(self, rate, interval, *, per_client=False, keep_alive=None,
                             keep_state=False):
        cfg = _rate_config(rate, interval, per_client, keep_alive)
        ks = 1 if keep_state else 0
        answer(await self._async(lambda fn, k: lib.dlock_rate_limiter_set_rate_async(
            self._h.ptr, byref(cfg), ks, fn, k), (cfg,)))

    async def available_async(self):
        return answer(await self._async(lambda fn, k: lib.dlock_rate_limiter_available_async(
            self._h.ptr, fn, k), (), lib.dlock_async_count))




class Barrier(_Single):
    """A double barrier (dlock's own; Curator's DistributedDoubleBarrier):
    `parties` parties enter() and all go on once the last has entered; they
    leave() and all go on once the last has left. One object is one party
    (one member id): threads sharing it share the party. A party whose
    process dies is dropped after the client's watchdog timeout, so nobody
    waits for ever on a dead one. with b: enters (waiting as long as it
    takes) and leaves (likewise) at the end."""

    _free, _what = lib.dlock_barrier_free, "barrier"

    def __init__(self, client, name, parties, member=None):
        self._client, self._name = client, encode(name)
        p = c_void_p()
        n = _int(parties, "parties")
        if member is None:
            call(client, lib.dlock_barrier_get, client._ptr, self._name, n, byref(p))
        else:
            call(client, lib.dlock_barrier_get_as, client._ptr, self._name, n, _owner(member),
                 byref(p))
        self._h = Ptr(p.value, self._free, client)

    @property
    def parties(self):
        return lib.dlock_barrier_parties(self._h.ptr)

    @property
    def member(self):
        """This party's member id."""
        return lib.dlock_barrier_member(self._h.ptr).decode()

    @property
    def phase(self):
        """"out", "entering", "in" or "leaving"."""
        return ("out", "entering", "in", "leaving")[lib.dlock_barrier_phase(self._h.ptr)]

    @property
    def round(self):
        """The id of the round this party entered last (0: none yet)."""
        return lib.dlock_barrier_round(self._h.ptr)

    def status(self):
        """(members, parties, open) now: the members whose lease has not run
        out, the N of the round in progress (0: none), whether it opened."""
        members, parties, opened = c_int64(), c_int64(), c_int()
        call(self._client, lib.dlock_barrier_status, self._h.ptr, byref(members),
             byref(parties), byref(opened))
        return members.value, parties.value, bool(opened.value)

    def _wait(self, fn, blocking, timeout):
        # One call, never a first try then a wait: an enter or leave is not
        # a try (a leave has gone once answered; an enter that ends
        # unanswered withdraws the party). A cancelled wait (Ctrl-C)
        # withdraws or has left, as C's do.
        hp, wait = self._h.ptr, wait_ms(blocking, timeout)
        if wait == 0:
            k = self._client._enter()
            try:
                rc = fn(hp, None)
            finally:
                self._client._leave(k)
            if rc not in (OK, _lib.ETIMEDOUT):
                raise _lib.last_error(rc)
            return rc == OK

        def direct(w, cancel):
            return fn(hp, _wait_opts(w, cancel)), None
        return run_wait(self._client, wait, direct, None, tried=True)[0]

    def enter(self, timeout=None, *, blocking=True):
        """Enters; True once the round opened with this party in it, False
        when the wait ran out (the party is then withdrawn)."""
        return self._wait(lib.dlock_barrier_enter, blocking, timeout)

    def leave(self, timeout=None, *, blocking=True):
        """Leaves (the party has gone once this returns, whatever it says);
        True once every member of the round has gone, False when the wait
        ran out with others still in."""
        return self._wait(lib.dlock_barrier_leave, blocking, timeout)

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.leave()

    async def _wait_async(self, fn, timeout):
        cancel = Cancel()
        o = opts(wait_ms(True, timeout), 0, cancel.ptr)
        op = await self._async(lambda f, k: fn(self._h.ptr, byref(o), f, k), (cancel, o), None,
                               None, cancel)
        return answer(op)

    async def enter_async(self, timeout=None):
        return await self._wait_async(lib.dlock_barrier_enter_async, timeout)

    async def leave_async(self, timeout=None):
        return await self._wait_async(lib.dlock_barrier_leave_async, timeout)

    async def __aenter__(self):
        await self.enter_async()
        return self

    async def __aexit__(self, *exc):
        await self.leave_async()
