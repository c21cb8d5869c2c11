"""Snapshots of a name (dlock_lock_inspect, dlock_client_inspect) as Python
values: who holds it and for how long, a fair lock's queue, the waiters."""

import collections
from ctypes import byref, c_void_p

from ._core import call, ttl_seconds
from ._lib import lib

# dlock_kind, by value
KINDS = ("none", "lock", "rwlock", "count", "permits", "other", "rate")

Holder = collections.namedtuple("Holder", "owner count ttl writes")
Holder.__doc__ = """A holder: its owner id (a permit's id for a permit
semaphore), its hold count, the seconds left on a permit's lease (math.inf:
none; None for other kinds), and whether it holds a read-write lock's write
lock."""

Queued = collections.namedtuple("Queued", "owner deadline")
Queued.__doc__ = """A fair lock's waiter, in queue order: its owner id and
the seconds until its deadline (0: passed; None: it has none)."""


class Info(collections.namedtuple(
        "Info", "name kind locked holders holders_total count waiters latch_waiters ttl "
                "token redis_type mode queued next_turn next_turn_ttl")):
    """A snapshot of one name, read atomically (dlock_info): kind one of
    "none" (free), "lock" (a reentrant, fair, spin or non-reentrant lock's
    hash), "rwlock", "count" (a semaphore's or a latch's count), "permits",
    "other" (redis_type says what: a rate limiter's hash is "other" today,
    the C library's inspection does not tell it apart yet), "rate";
    holders a list of Holder; waiters (None: not counted);
    ttl in seconds (None: no key, math.inf: no expiry); token the last
    fencing token (0: none); queued a fair lock's queue (Queued); next_turn
    the owner id with the reserved next turn, or None."""

    __slots__ = ()


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else None


def _opt(v):
    return None if v == -1 else v


def _snapshot(p):
    n = lib.dlock_info_holders(p)
    holders = []
    for i in range(n):
        t = lib.dlock_info_holder_ttl(p, i)
        holders.append(Holder(_s(lib.dlock_info_owner(p, i)), lib.dlock_info_hold_count(p, i),
                              None if t == -2 else ttl_seconds(t),
                              bool(lib.dlock_info_holder_writes(p, i))))
    queued = []
    for i in range(lib.dlock_info_queued(p)):
        d = lib.dlock_info_queued_deadline(p, i)
        queued.append(Queued(_s(lib.dlock_info_queued_owner(p, i)),
                             None if d == -1 else d / 1000.0))
    kind = lib.dlock_info_kind(p)
    nt_ttl = lib.dlock_info_next_turn_ttl(p)
    return Info(_s(lib.dlock_info_name(p)), KINDS[kind] if 0 <= kind < len(KINDS) else str(kind),
                bool(lib.dlock_info_locked(p)), holders, lib.dlock_info_holders_total(p),
                lib.dlock_info_count(p), _opt(lib.dlock_info_waiters(p)),
                _opt(lib.dlock_info_latch_waiters(p)), ttl_seconds(lib.dlock_info_ttl(p)),
                lib.dlock_info_token(p), _s(lib.dlock_info_redis_type(p)),
                _s(lib.dlock_info_mode(p)), queued, _s(lib.dlock_info_next_turn(p)),
                None if nt_ttl == -2 else ttl_seconds(nt_ttl))


def inspect(client, fn, *args):
    """fn(*args, &info) -> the Info, the C snapshot freed."""
    p = c_void_p()
    call(client, fn, *args, byref(p))
    try:
        return _snapshot(p.value)
    finally:
        lib.dlock_info_free(p.value)
