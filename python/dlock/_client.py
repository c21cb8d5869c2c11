"""dlock.Client: one dlock_client (one Redis deployment), its options, its
owners (one per thread, one per asyncio task), the lost-hold and log
callbacks, and closing (explicitly, at exit, or when collected)."""

import atexit
import collections
import enum
import logging
import os
import threading
import time
import weakref
from ctypes import byref, c_int, c_int64, c_uint64, c_void_p, create_string_buffer, sizeof

from . import _core, _lib
from ._core import Owner, call, check_fork, in_callback, ms, owner_context
from ._errors import InvalidArgument
from ._lib import encode, lib

__all__ = ["Client", "LostHold", "LostReason", "Leader", "stripe_name"]


class LostReason(enum.IntEnum):
    """Why a hold was reported lost (dlock_lost_reason)."""
    GONE = 1
    UNREACHABLE = 2
    PAUSED = 3
    REPLICAS = 4
    MAX_HOLD = 5


LostHold = collections.namedtuple("LostHold", "name owner reason cause")
LostHold.__doc__ = """A lost hold: the lock's (or semaphore's, or election's) name, the
owner id (a permit's id for a permit), the LostReason (an int for reasons this
binding does not know), and what ended it as far as Redis can tell ("evicted",
"expired", "deleted by another client", "flushed", "failover", "server clock
jumped", ...; "gone" when Redis could not say)."""

Leader = collections.namedtuple("Leader", "term who")

_clients = weakref.WeakValueDictionary()   # key -> Client, for the C callbacks' ud
_live = weakref.WeakSet()


def _decode(b):
    return b.decode("utf-8", "replace") if b else ""


def _on_lost(name, owner, reason, cause, key):
    c = _clients.get(key)
    if c is None:
        return
    try:
        reason = LostReason(reason)
    except ValueError:
        pass
    ev = LostHold(_decode(name), _decode(owner), reason,
                  _decode(lib.dlock_lost_cause_str(cause)))
    _core._cb_state.active = True
    try:
        for fn in list(c._lost_fns):
            try:
                fn(ev)
            except BaseException:    # never into C: logged, the next one still runs
                _core.log.exception("dlock: the on_lost callback %r raised", fn)
    finally:
        _core._cb_state.active = False


_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def _on_log(level, msg, _ud):
    try:
        _core.log.log(_LEVELS.get(level, logging.DEBUG), "%s", _decode(msg))
    except BaseException:
        pass


_LOST_CB = _lib.LOST_FN(_on_lost)
_LOG_CB = _lib.LOG_FN(_on_log)


def _c_level(level):
    if level >= logging.ERROR:
        return 0
    if level >= logging.WARNING:
        return 1
    return 2 if level >= logging.INFO else 3


def _quarantine(v):
    if v is None or v is False:
        return 0, 0
    if v == "auto":
        return 2, 0
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "auto":
        return 2, ms(v[1], "quarantine floor")
    return 1, ms(v, "quarantine", minimum=0.001)


def _replica_ack(v):
    replicas, timeout = v[0], v[1]
    policy = v[2] if len(v) > 2 else "release"
    if policy not in ("release", "keep"):
        raise InvalidArgument("replica_ack policy must be 'release' or 'keep', not %r" % (policy,))
    n = -1 if replicas == "all" else int(replicas)
    return n, ms(timeout, "replica_ack timeout"), 0 if policy == "release" else 1


def _pair(v, what):
    if isinstance(v, (str, bytes)):
        return None, encode(v, what)
    return (encode(v[0], what) if v[0] else None), encode(v[1], what)


def _priority(v):
    return (-1,) if v is False else (ms(v, "priority_after"),)


# Client option -> (C setter, converter to the setter's arguments after cfg).
_OPTIONS = {
    "watchdog": ("dlock_config_set_watchdog_timeout", lambda v: (ms(v, "watchdog"),)),
    "command_timeout": ("dlock_config_set_command_timeout",
                        lambda v: (ms(v, "command_timeout"),)),
    "connect_timeout": ("dlock_config_set_connect_timeout",
                        lambda v: (ms(v, "connect_timeout"),)),
    "retry": ("dlock_config_set_retry", lambda v: (int(v[0]), ms(v[1], "retry delay"))),
    "pool_size": ("dlock_config_set_pool_size", lambda v: (int(v),)),
    "priority_after": ("dlock_config_set_priority_after", _priority),
    "fair_wait_timeout": ("dlock_config_set_fair_wait_timeout",
                          lambda v: (ms(v, "fair_wait_timeout"),)),
    "client_name": ("dlock_config_set_client_name", lambda v: (encode(v, "client_name"),)),
    "max_hold": ("dlock_config_set_max_hold", lambda v: (ms(v, "max_hold"),)),
    "lock_delay": ("dlock_config_set_lock_delay", lambda v: (ms(v, "lock_delay"),)),
    "clock_jump": ("dlock_config_set_clock_jump",
                   lambda v: (-1 if v is False else ms(v, "clock_jump"),)),
    "quarantine": ("dlock_config_set_failover_quarantine", _quarantine),
    "revocation": ("dlock_config_set_revocation", lambda v: (1 if v else 0,)),
    "replica_ack": ("dlock_config_set_replica_ack", _replica_ack),
    "inspect_limit": ("dlock_config_set_inspect_limit", lambda v: (int(v),)),
    "scan_interval": ("dlock_config_set_scan_interval", lambda v: (ms(v, "scan_interval"),)),
    "tls_ca": ("dlock_config_set_tls_ca", lambda v: (encode(v, "tls_ca"), None)),
    "tls_ca_dir": ("dlock_config_set_tls_ca", lambda v: (None, encode(v, "tls_ca_dir"))),
    "tls_cert": ("dlock_config_set_tls_cert",
                 lambda v: (encode(v[0], "tls_cert"), encode(v[1], "tls_cert key"))),
    "tls_server_name": ("dlock_config_set_tls_server_name",
                        lambda v: (encode(v, "tls_server_name"),)),
    "tls_verify": ("dlock_config_set_tls_verify", lambda v: (1 if v else 0,)),
    "sentinel_password": ("dlock_config_set_sentinel_password",
                          lambda v: _pair(v, "sentinel_password")),
    "address_map": ("dlock_config_add_address_map", lambda v: (encode(v, "address_map"),)),
}


class Client:
    """An open connection to one Redis deployment (dlock_client).

    ``url``: redis://[user[:password]@]host[:port][/db], rediss://...,
    unix:///path, redis-sentinel://...#MASTER, redis-cluster://...,
    redis-replicated://... (include/dlock/dlock.h, dlock_config_set_url);
    default $DLOCK_URL, else redis://127.0.0.1:6379. Times are in seconds.
    Options (each the C setter of the same name; unset: the C default):
    password (and user), watchdog, command_timeout, connect_timeout,
    retry=(attempts, delay), pool_size, priority_after (False: off),
    fair_wait_timeout, client_name, max_hold, lock_delay, clock_jump (the
    server clock jump allowance; False: not checked), quarantine
    ("auto", ("auto", floor) or seconds), revocation, replica_ack=(replicas
    or "all", timeout[, "release"|"keep"]), inspect_limit, scan_interval,
    tls_ca, tls_ca_dir, tls_cert=(cert, key), tls_server_name, tls_verify,
    sentinel_password (or (user, password)), address_map; on_lost (a
    callable, as on_lost()); log_level: the most verbose level of the
    library's log lines passed to logging.getLogger("dlock") (WARNING by
    default, None for none).

    A client may be used from any number of threads and asyncio tasks.
    Locks are owned per thread, and per task inside asyncio (each thread and
    each task acts for an owner id of its own). Close it (``with``, close(),
    or it closes when collected and at interpreter exit): holds it still has
    are not released, they expire after their lease.
    """

    def __init__(self, url=None, *, password=None, user=None, on_lost=None,
                 log_level=logging.WARNING, **options):
        self._ptr = None
        self._closing = False
        self._gen = _core.fork_generation()
        self._pid = os.getpid()
        self._inflight = {}
        self._tls = threading.local()
        self._task_owners = weakref.WeakKeyDictionary()
        self._lost_fns = [on_lost] if on_lost is not None else []
        self._close_mu = threading.Lock()
        self._key = next(_core._seq)
        self._cmd_timeout = options.get("command_timeout") or 3.0   # the C default
        unknown = set(options) - set(_OPTIONS)
        if unknown:
            raise TypeError("Client() got unknown option(s): %s" % ", ".join(sorted(unknown)))
        cfg = lib.dlock_config_new()
        if not cfg:
            raise MemoryError("dlock_config_new")
        try:
            if url is None:
                url = os.environ.get("DLOCK_URL")
            if url is not None:
                _lib.check(lib.dlock_config_set_url(cfg, encode(url, "url")))
            if password is not None:
                _lib.check(lib.dlock_config_set_password(
                    cfg, encode(user, "user") if user else None, encode(password, "password")))
            for k, v in options.items():
                if v is None:
                    continue
                setter, conv = _OPTIONS[k]
                _lib.check(getattr(lib, setter)(cfg, *conv(v)))
            _lib.check(lib.dlock_config_set_lost_cause_callback(cfg, _LOST_CB, self._key))
            if log_level is not None:
                _lib.check(lib.dlock_config_set_log_callback(cfg, _LOG_CB, None,
                                                             _c_level(log_level)))
            _clients[self._key] = self
            p = c_void_p()
            _lib.check(lib.dlock_client_open(byref(p), cfg))
            self._ptr = p.value
        finally:
            lib.dlock_config_free(cfg)
        _live.add(self)

    # ------------------------------------------------------------ lifecycle

    def _enter(self, cancel=None):
        if self._gen != _core._fork[0]:
            check_fork(self._gen, self._pid)
        k = next(_core._seq)
        self._inflight[k] = cancel
        if self._closing:
            del self._inflight[k]
            raise _core.closed_error()
        return k

    def _leave(self, k):
        del self._inflight[k]

    def close(self):
        """Closes the client: waits that are in progress end (ClosedError),
        renewals stop, connections close. Holds are not released: they
        expire after their lease. Idempotent. Not from a dlock callback."""
        if in_callback():
            raise RuntimeError("dlock.Client.close() cannot be called from a dlock callback "
                               "(it runs on the client's io thread)")
        with self._close_mu:
            if self._ptr is None:
                self._closing = True
                return
            self._closing = True
            if self._gen != _core._fork[0]:
                self._ptr = None             # the parent's: not ours to close
                return
            for c in list(self._inflight.values()):
                if c is not None:
                    c.fire()
            while self._inflight:
                time.sleep(0.001)
            p, self._ptr = self._ptr, None
            lib.dlock_client_close(p)
        _core.forget_ops(self._key)
        _clients.pop(self._key, None)

    @property
    def closed(self):
        return self._closing

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_ptr", None) is None:
            return
        try:
            if in_callback():   # collected on the io thread: close from another
                threading.Thread(target=self.close, daemon=True).start()
            else:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<dlock.Client %s%s>" % (self.id if self._ptr else "",
                                         " closed" if self._closing else "")

    # --------------------------------------------------------------- owners

    def _new_owner(self):
        buf = create_string_buffer(_lib.OWNER_BUFSIZE)
        call(self, lib.dlock_client_new_owner_id, self._ptr, buf, _lib.OWNER_BUFSIZE)
        return Owner(self, buf.value)

    @property
    def id(self):
        """The client's uuid: the first part of its owner ids."""
        return _decode(lib.dlock_client_id(self._ptr)) if self._ptr else ""

    @property
    def owner_id(self):
        """The owner id the calling thread (or asyncio task) acts for."""
        return owner_context(self).id.decode()

    def new_owner_id(self):
        """A fresh owner id of this client (dlock_client_new_owner_id)."""
        return self._new_owner().id.decode()

    # ---------------------------------------------------------------- calls

    def on_lost(self, fn):
        """Calls fn(LostHold) when a hold of this client is lost (a renewal
        found it gone, Redis unreachable past the lease, ...). fn runs on the
        client's io thread: keep it short (renewals wait meanwhile); it may
        release or query, not wait, nor close the client. An exception it
        raises is logged (logger "dlock") and goes no further. Returns fn,
        so it can be used as a decorator."""
        if not callable(fn):
            raise TypeError("on_lost needs a callable")
        self._lost_fns.append(fn)
        return fn

    def remove_on_lost(self, fn):
        self._lost_fns.remove(fn)

    def ping(self):
        """One PING round trip."""
        call(self, lib.dlock_client_ping, self._ptr)

    def set_label(self, label):
        call(self, lib.dlock_client_set_label, self._ptr, encode(label, "label"))

    def eviction_policy(self):
        """(maxmemory-policy, risky): as read when the client opened."""
        buf = create_string_buffer(64)
        risky = c_int()
        call(self, lib.dlock_client_eviction_policy, self._ptr, buf, 64, byref(risky))
        return buf.value.decode(), bool(risky.value)

    def stats(self):
        """The client's counters since it opened (dlock_client_stats) as a dict;
        histograms as dicts of count, sum_us and buckets (bucket b: durations
        under 2**b microseconds, the last everything above)."""
        s = _lib.Stats()
        call(self, lib.dlock_client_stats, self._ptr, byref(s), sizeof(s))
        out = {}
        for name, _ in _lib.Stats._fields_:
            v = getattr(s, name)
            if isinstance(v, _lib.Histogram):
                v = {"count": v.count, "sum_us": v.sum_us, "buckets": list(v.bucket)}
            elif name == "lost":
                v = {r.name.lower(): v[r.value] for r in LostReason}
            out[name] = v
        return out

    # ------------------------------------------------------------- the types

    def lock(self, name, *, lease=None, lock_delay=None, max_hold=None, fenced=False):
        """Redisson's RLock `name`: reentrant per thread (per task in asyncio).
        lease: the default lease of its acquisitions (None: the watchdog);
        lock_delay, max_hold: dlock_lock_set_lock_delay / _set_max_hold for
        its holds; fenced: every acquisition takes a fencing token (.token)."""
        from ._locks import Lock
        return Lock(self, name, "lock", lease, lock_delay, max_hold, fenced)

    def fair_lock(self, name, *, lease=None, lock_delay=None, max_hold=None, fenced=False):
        """Redisson's RFairLock: waiters served in arrival order, across processes."""
        from ._locks import Lock
        return Lock(self, name, "fair", lease, lock_delay, max_hold, fenced)

    def fenced_lock(self, name, *, lease=None, lock_delay=None, max_hold=None):
        """Redisson's RFencedLock: every acquisition raises the fencing token (.token)."""
        from ._locks import Lock
        return Lock(self, name, "fenced", lease, lock_delay, max_hold)

    def spin_lock(self, name, *, backoff=None, lease=None, lock_delay=None, max_hold=None,
                  fenced=False):
        """Redisson's spin lock (getSpinLock): the lock's keys and holds, shared
        with RLock, but a waiter subscribes to nothing and tries again after
        each back-off step (backoff: a dlock.Backoff or (initial, maximum,
        multiplier), seconds; None: Redisson's 1 ms doubling to 128 ms)."""
        from ._locks import Lock
        return Lock(self, name, "spin", lease, lock_delay, max_hold, fenced, backoff)

    def non_reentrant_lock(self, name, *, lease=None, lock_delay=None, max_hold=None,
                           fenced=False):
        """Redisson's non-reentrant lock (getNonReentrantLock): the lock's keys,
        but the holder's second acquire raises ReentryError (nothing written)."""
        from ._locks import Lock
        return Lock(self, name, "nonreentrant", lease, lock_delay, max_hold, fenced)

    def non_reentrant_fair_lock(self, name, *, lease=None, lock_delay=None, max_hold=None,
                                fenced=False):
        """The fair lock's queue and order, non-reentrant (ReentryError)."""
        from ._locks import Lock
        return Lock(self, name, "nonreentrant_fair", lease, lock_delay, max_hold, fenced)

    def read_write_lock(self, name, *, lease=None, lock_delay=None, max_hold=None,
                        fenced=False):
        """Redisson's RReadWriteLock: .read and .write, each a lock."""
        from ._locks import ReadWriteLock
        return ReadWriteLock(self, name, lease, lock_delay, max_hold, fenced)

    def multi_lock(self, locks):
        """Redisson's RedissonMultiLock: every lock or none."""
        from ._locks import MultiLock
        return MultiLock(locks, red=False)

    def red_lock(self, locks):
        """Redisson's RedissonRedLock over >= 3 locks, each on its own client and server."""
        from ._locks import MultiLock
        return MultiLock(locks, red=True)

    def semaphore(self, name):
        """Redisson's RSemaphore."""
        from ._sync import Semaphore
        return Semaphore(self, name)

    def permit_semaphore(self, name, *, lock_delay=None):
        """Redisson's RPermitExpirableSemaphore: named, leased permits."""
        from ._sync import PermitSemaphore
        return PermitSemaphore(self, name, lock_delay)

    def latch(self, name):
        """Redisson's RCountDownLatch."""
        from ._sync import Latch
        return Latch(self, name)

    def rate_limiter(self, name):
        """Redisson's RRateLimiter: at most `rate` permits per interval."""
        from ._sync import RateLimiter
        return RateLimiter(self, name)

    def election(self, name, *, lock_delay=None, max_hold=None, owner=None):
        """Leader election on `name` (dlock's own, on a fenced lock); owner:
        the owner id it campaigns as (its own fresh one by default; a
        successor's for Election.handover)."""
        from ._sync import Election
        return Election(self, name, lock_delay, max_hold, owner)

    def barrier(self, name, parties, *, member=None):
        """A double barrier for `parties` parties; this object is one party
        (member: its member id, a fresh one by default)."""
        from ._sync import Barrier
        return Barrier(self, name, parties, member)

    def inspect(self, name):
        """A snapshot of whatever `name` holds (dlock.Info; dlock status): a
        lock of any kind, a semaphore's or latch's count, a permit
        semaphore's permits, a rate limiter, nothing, or other data."""
        from ._info import inspect
        return inspect(self, lib.dlock_client_inspect, self._ptr, encode(name))

    # -------------------------------------------------------- fenced writes

    def fence_set(self, token, key, value, px=None):
        """SET key value [PX] only if token is not below the key's guard
        (FencedError otherwise); px in seconds."""
        value = encode(value, "value")
        call(self, lib.dlock_fence_set, self._ptr, token, encode(key, "key"), value,
             len(value), 0 if px is None else ms(px, "px"))

    def fence_delete(self, token, key):
        """DEL key, fenced; True when it existed."""
        out = c_int()
        call(self, lib.dlock_fence_del, self._ptr, token, encode(key, "key"), byref(out))
        return bool(out.value)

    def fence_incrby(self, token, key, by=1):
        """INCRBY key by, fenced; the new value."""
        out = c_int64()
        call(self, lib.dlock_fence_incrby, self._ptr, token, encode(key, "key"), by, byref(out))
        return out.value

    def fence_guard(self, key):
        """The highest token key's guard has seen (0: none)."""
        out = c_uint64()
        call(self, lib.dlock_fence_guard, self._ptr, encode(key, "key"), byref(out))
        return out.value


def stripe_name(base, key, nstripes):
    """The lock name of `key`'s stripe: base:segment:S (dlock_stripe_name;
    Java's base + ":segment:" + (id % n) for integer keys)."""
    buf = create_string_buffer(4097 + 64)
    rc = lib.dlock_stripe_name(encode(base, "base"), encode(str(key), "key"), nstripes, buf,
                               len(buf))
    _lib.check(rc)
    return buf.value.decode("utf-8", "surrogateescape")


def _close_all():
    for c in list(_live):
        try:
            c.close()
        except Exception:
            pass


atexit.register(_close_all)
