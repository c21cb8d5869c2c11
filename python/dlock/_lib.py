"""libdlock through ctypes: finding the library, the prototypes of the
public C API (include/dlock/dlock.h and include/dlock/async.h) this binding
calls, the structs it shares with C, and the status -> exception mapping.

Only the public headers are used, as for every binding (docs/DESIGN.md). The
library is found, in this order, at:
  1. $DLOCK_LIBRARY (a path to libdlock.so*);
  2. the build tree of the source checkout this package sits in
     (<checkout>/build/libdlock.so.0), so the tests run without installing;
  3. the dynamic loader: libdlock.so.<major> (the Debian package libdlock0,
     or make install with ldconfig), then libdlock.so.
ctypes releases the GIL around every foreign call, so a blocking dlock call
lets other Python threads run.
"""

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int64, c_size_t,
                    c_uint64, c_void_p)

from ._errors import error_class

# The C library this binding is written against: same major, this minor or later.
LIB_MAJOR = 0
LIB_MINOR = 2

OWNER_BUFSIZE = 64
PERMIT_ID_BUFSIZE = 33
HOST_MAX = 256
WAIT_FOREVER = -1
WATCHDOG = 0
NO_EXPIRY = -(1 << 63)   # DLOCK_NO_EXPIRY (INT64_MIN)
STATS_BUCKETS = 28
STATS_LOST_REASONS = 8

OK = 0
EINVAL = -1
ETIMEDOUT = -3
ENOTOWNER = -4
ECANCELED = -5
ECLOSED = -12
ENOTFOUND = -21
RATE_OVERALL = 0
RATE_PER_CLIENT = 1


class WaitOpts(Structure):
    """dlock_wait_opts."""
    _fields_ = [("wait_ms", c_int64), ("lease_ms", c_int64), ("cancel", c_void_p),
                ("token", POINTER(c_uint64)), ("reserved", c_int64 * 4)]


class Histogram(Structure):
    """dlock_histogram."""
    _fields_ = [("count", c_uint64), ("sum_us", c_uint64), ("bucket", c_uint64 * STATS_BUCKETS)]


class Stats(Structure):
    """dlock_stats (fields are only ever appended in C: pass sizeof)."""
    _fields_ = [("acquisitions", c_uint64), ("waits", c_uint64), ("wakeups", c_uint64),
                ("wakeups_taken", c_uint64), ("renewals", c_uint64),
                ("renewal_roundtrips", c_uint64), ("lost", c_uint64 * STATS_LOST_REASONS),
                ("reconnects", c_uint64), ("connects", c_uint64), ("roundtrips", c_uint64),
                ("acquire_wait", Histogram), ("handoff_gap", Histogram),
                ("roundtrip", Histogram), ("renewal_writes", c_uint64)]


PermitId = ctypes.c_char * PERMIT_ID_BUFSIZE     # one of an n-permit call's id buffers


class Backoff(Structure):
    """dlock_backoff."""
    _fields_ = [("initial_ms", c_int64), ("max_ms", c_int64), ("multiplier", c_int)]


class RateConfig(Structure):
    """dlock_rate_config (type: an enum, an int in C)."""
    _fields_ = [("type", c_int), ("rate", c_int64), ("interval_ms", c_int64),
                ("keep_alive_ms", c_int64)]


# dlock_lost_cause_fn: the cause of the loss an argument (not the thread-local)
LOST_FN = CFUNCTYPE(None, c_char_p, c_char_p, c_int, c_int, c_void_p)
LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
ASYNC_FN = CFUNCTYPE(None, c_void_p, c_void_p)

P, I, L, U, S, Z = c_void_p, c_int, c_int64, c_uint64, c_char_p, c_size_t
PP, PI, PL, PU = POINTER(c_void_p), POINTER(c_int), POINTER(c_int64), POINTER(c_uint64)
PO = POINTER(WaitOpts)
V = None

# name: (restype, argtypes). Every call the binding makes, and nothing else.
_PROTOS = {
    "dlock_strerror": (S, [I]),
    "dlock_errname": (S, [I]),
    "dlock_last_error": (S, []),
    "dlock_version": (S, []),
    "dlock_last_lost_cause": (I, []),
    "dlock_lost_cause_str": (S, [I]),
    "dlock_stripe_name": (I, [S, S, I, c_char_p, Z]),
    # config
    "dlock_config_new": (P, []),
    "dlock_config_free": (V, [P]),
    "dlock_config_set_url": (I, [P, S]),
    "dlock_config_set_password": (I, [P, S, S]),
    "dlock_config_set_sentinel_password": (I, [P, S, S]),
    "dlock_config_set_watchdog_timeout": (I, [P, L]),
    "dlock_config_set_command_timeout": (I, [P, L]),
    "dlock_config_set_connect_timeout": (I, [P, L]),
    "dlock_config_set_retry": (I, [P, I, L]),
    "dlock_config_set_pool_size": (I, [P, I]),
    "dlock_config_set_priority_after": (I, [P, L]),
    "dlock_config_set_fair_wait_timeout": (I, [P, L]),
    "dlock_config_set_client_name": (I, [P, S]),
    "dlock_config_set_max_hold": (I, [P, L]),
    "dlock_config_set_clock_jump": (I, [P, L]),
    "dlock_config_set_lock_delay": (I, [P, L]),
    "dlock_config_set_failover_quarantine": (I, [P, I, L]),
    "dlock_config_set_revocation": (I, [P, I]),
    "dlock_config_set_replica_ack": (I, [P, I, L, I]),
    "dlock_config_set_inspect_limit": (I, [P, Z]),
    "dlock_config_set_scan_interval": (I, [P, L]),
    "dlock_config_set_tls_ca": (I, [P, S, S]),
    "dlock_config_set_tls_cert": (I, [P, S, S]),
    "dlock_config_set_tls_server_name": (I, [P, S]),
    "dlock_config_set_tls_verify": (I, [P, I]),
    "dlock_config_add_address_map": (I, [P, S]),
    "dlock_config_set_lost_cause_callback": (I, [P, LOST_FN, P]),
    "dlock_config_set_log_callback": (I, [P, LOG_FN, P, I]),
    # client
    "dlock_client_open": (I, [PP, P]),
    "dlock_client_close": (V, [P]),
    "dlock_client_id": (S, [P]),
    "dlock_client_new_owner_id": (I, [P, c_char_p, Z]),
    "dlock_client_set_label": (I, [P, S]),
    "dlock_client_ping": (I, [P]),
    "dlock_client_eviction_policy": (I, [P, c_char_p, Z, PI]),
    "dlock_client_stats": (I, [P, POINTER(Stats), Z]),
    "dlock_client_async_pending": (Z, [P]),
    # cancel
    "dlock_cancel_new": (I, [PP]),
    "dlock_cancel_fire": (V, [P]),
    "dlock_cancel_free": (V, [P]),
    # locks (explicit-owner handles: the owner is the Python thread or task)
    "dlock_lock_get_as": (I, [P, S, S, PP]),
    "dlock_fair_lock_get_as": (I, [P, S, S, PP]),
    "dlock_fenced_lock_get_as": (I, [P, S, S, PP]),
    "dlock_read_lock_get_as": (I, [P, S, S, PP]),
    "dlock_write_lock_get_as": (I, [P, S, S, PP]),
    "dlock_spin_lock_get_as": (I, [P, S, S, PP]),
    "dlock_nonreentrant_lock_get_as": (I, [P, S, S, PP]),
    "dlock_nonreentrant_fair_lock_get_as": (I, [P, S, S, PP]),
    "dlock_lock_set_backoff": (I, [P, POINTER(Backoff)]),
    "dlock_lock_free": (V, [P]),
    "dlock_lock_set_max_hold": (I, [P, L]),
    "dlock_lock_set_lock_delay": (I, [P, L]),
    "dlock_lock_acquire_opts": (I, [P, PO]),
    "dlock_lock_try": (I, [P, L, L]),
    "dlock_lock_get_token": (I, [P, PU]),
    "dlock_lock_extend": (I, [P, L]),
    "dlock_lock_release": (I, [P]),
    "dlock_lock_transfer": (I, [P, S]),
    "dlock_lock_adopt": (I, [P, L, PL]),
    "dlock_lock_force_release": (I, [P, PI]),
    "dlock_lock_is_locked": (I, [P, PI]),
    "dlock_lock_is_held": (I, [P, PI]),
    "dlock_lock_is_held_by": (I, [P, S, PI]),
    "dlock_lock_hold_count": (I, [P, PL]),
    "dlock_lock_ttl": (I, [P, PL]),
    # inspection
    "dlock_lock_inspect": (I, [P, PP]),
    "dlock_client_inspect": (I, [P, S, PP]),
    "dlock_info_free": (V, [P]),
    "dlock_info_name": (S, [P]),
    "dlock_info_locked": (I, [P]),
    "dlock_info_holders": (Z, [P]),
    "dlock_info_holders_total": (Z, [P]),
    "dlock_info_owner": (S, [P, Z]),
    "dlock_info_hold_count": (L, [P, Z]),
    "dlock_info_holder_ttl": (L, [P, Z]),
    "dlock_info_holder_writes": (I, [P, Z]),
    "dlock_info_count": (L, [P]),
    "dlock_info_latch_waiters": (L, [P]),
    "dlock_info_ttl": (L, [P]),
    "dlock_info_token": (U, [P]),
    "dlock_info_waiters": (L, [P]),
    "dlock_info_kind": (I, [P]),
    "dlock_info_redis_type": (S, [P]),
    "dlock_info_mode": (S, [P]),
    "dlock_info_queued": (Z, [P]),
    "dlock_info_queued_owner": (S, [P, Z]),
    "dlock_info_queued_deadline": (L, [P, Z]),
    "dlock_info_next_turn": (S, [P]),
    "dlock_info_next_turn_ttl": (L, [P]),
    # multi-lock, RedLock
    "dlock_multilock_new": (I, [PP, Z, PP]),
    "dlock_redlock_new": (I, [PP, Z, PP]),
    "dlock_multilock_acquire_opts": (I, [P, PO]),
    "dlock_multilock_release": (I, [P]),
    "dlock_multilock_free": (V, [P]),
    # semaphore
    "dlock_semaphore_get": (I, [P, S, PP]),
    "dlock_semaphore_free": (V, [P]),
    "dlock_semaphore_try_set_permits": (I, [P, L, PI]),
    "dlock_semaphore_try_set_permits_ttl": (I, [P, L, L, PI]),
    "dlock_semaphore_release_if_exists": (I, [P, L, PI]),
    "dlock_semaphore_expire": (I, [P, L, PI]),
    "dlock_semaphore_set_permits": (I, [P, L]),
    "dlock_semaphore_add_permits": (I, [P, L]),
    "dlock_semaphore_acquire_opts": (I, [P, L, PO]),
    "dlock_semaphore_release": (I, [P, L]),
    "dlock_semaphore_available": (I, [P, PL]),
    "dlock_semaphore_drain": (I, [P, PL]),
    "dlock_semaphore_delete": (I, [P, PI]),
    "dlock_semaphore_ttl": (I, [P, PL]),
    # permit-expirable semaphore
    "dlock_permit_semaphore_get": (I, [P, S, PP]),
    "dlock_permit_semaphore_free": (V, [P]),
    "dlock_permit_semaphore_set_lock_delay": (I, [P, L]),
    "dlock_permit_semaphore_acquire_opts": (I, [P, PO, c_char_p, Z]),
    "dlock_permit_semaphore_release": (I, [P, S]),
    "dlock_permit_semaphore_acquire_n_opts": (I, [P, L, PO, POINTER(PermitId)]),
    "dlock_permit_semaphore_release_list": (I, [P, POINTER(c_char_p), Z]),
    "dlock_permit_semaphore_try_release_list": (I, [P, POINTER(c_char_p), Z, PL]),
    "dlock_permit_semaphore_try_release": (I, [P, S, PI]),
    "dlock_permit_semaphore_update_lease": (I, [P, S, L]),
    "dlock_permit_semaphore_lease_time": (I, [P, S, PL]),
    "dlock_permit_semaphore_available": (I, [P, PL, PL]),
    "dlock_permit_semaphore_try_set_permits": (I, [P, L, PI]),
    "dlock_permit_semaphore_set_total": (I, [P, L]),
    "dlock_permit_semaphore_add_permits": (I, [P, L]),
    "dlock_permit_semaphore_delete": (I, [P, PI]),
    "dlock_permit_semaphore_force_release": (I, [P, S, PI]),
    "dlock_permit_semaphore_permits": (I, [P, PL]),
    "dlock_permit_semaphore_expire": (I, [P, L, PI]),
    "dlock_permit_semaphore_ttl": (I, [P, PL]),
    # count-down latch
    "dlock_latch_get": (I, [P, S, PP]),
    "dlock_latch_free": (V, [P]),
    "dlock_latch_try_set_count": (I, [P, L, PI]),
    "dlock_latch_count_down": (I, [P]),
    "dlock_latch_count": (I, [P, PL]),
    "dlock_latch_await_opts": (I, [P, PO]),
    "dlock_latch_delete": (I, [P, PI]),
    # rate limiter
    "dlock_rate_limiter_get": (I, [P, S, PP]),
    "dlock_rate_limiter_free": (V, [P]),
    "dlock_rate_limiter_try_set_rate": (I, [P, POINTER(RateConfig), PI]),
    "dlock_rate_limiter_set_rate": (I, [P, POINTER(RateConfig), I]),
    "dlock_rate_limiter_update_rate": (I, [P, POINTER(RateConfig), I, PI]),
    "dlock_rate_limiter_config": (I, [P, POINTER(RateConfig)]),
    "dlock_rate_limiter_acquire_opts": (I, [P, L, PO]),
    "dlock_rate_limiter_available": (I, [P, PL]),
    "dlock_rate_limiter_release": (I, [P, L]),
    "dlock_rate_limiter_delete": (I, [P, PI]),
    "dlock_rate_limiter_expire": (I, [P, L, PI]),
    # election
    "dlock_election_get": (I, [P, S, PP]),
    "dlock_election_get_as": (I, [P, S, S, PP]),
    "dlock_election_handover": (I, [P, S]),
    "dlock_election_adopt": (I, [P, PU]),
    "dlock_election_free": (V, [P]),
    "dlock_election_set_max_hold": (I, [P, L]),
    "dlock_election_set_lock_delay": (I, [P, L]),
    "dlock_election_campaign": (I, [P, PO]),
    "dlock_election_resign": (I, [P]),
    "dlock_election_term": (U, [P]),
    "dlock_election_leader": (I, [P, PU, c_char_p, Z]),
    "dlock_election_await_change": (I, [P, U, PO, PU, c_char_p, Z]),
    # double barrier
    "dlock_barrier_get": (I, [P, S, L, PP]),
    "dlock_barrier_get_as": (I, [P, S, L, S, PP]),
    "dlock_barrier_free": (V, [P]),
    "dlock_barrier_member": (S, [P]),
    "dlock_barrier_parties": (L, [P]),
    "dlock_barrier_enter": (I, [P, PO]),
    "dlock_barrier_leave": (I, [P, PO]),
    "dlock_barrier_status": (I, [P, PL, PL, PI]),
    "dlock_barrier_phase": (I, [P]),
    "dlock_barrier_round": (U, [P]),
    # fenced writes
    "dlock_fence_set": (I, [P, U, S, c_char_p, Z, L]),
    "dlock_fence_del": (I, [P, U, S, PI]),
    "dlock_fence_incrby": (I, [P, U, S, L, PL]),
    "dlock_fence_guard": (I, [P, S, PU]),
    # asynchronous calls (async.h)
    "dlock_async_status": (I, [P]),
    "dlock_async_message": (S, [P]),
    "dlock_async_token": (U, [P]),
    "dlock_async_flag": (I, [P]),
    "dlock_async_count": (L, [P]),
    "dlock_async_permit_id": (S, [P]),
    "dlock_async_text": (S, [P]),
    "dlock_lock_acquire_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_lock_release_async": (I, [P, ASYNC_FN, P]),
    "dlock_lock_is_locked_async": (I, [P, ASYNC_FN, P]),
    "dlock_semaphore_acquire_async": (I, [P, L, PO, ASYNC_FN, P]),
    "dlock_semaphore_release_async": (I, [P, L, ASYNC_FN, P]),
    "dlock_permit_semaphore_acquire_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_permit_semaphore_release_async": (I, [P, S, ASYNC_FN, P]),
    "dlock_permit_semaphore_acquire_n_async": (I, [P, L, PO, ASYNC_FN, P]),
    "dlock_permit_semaphore_release_list_async": (I, [P, POINTER(c_char_p), Z, ASYNC_FN, P]),
    "dlock_async_permit_ids": (S, [P, Z]),
    "dlock_latch_await_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_latch_count_down_async": (I, [P, ASYNC_FN, P]),
    "dlock_multilock_acquire_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_multilock_release_async": (I, [P, ASYNC_FN, P]),
    "dlock_election_campaign_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_election_resign_async": (I, [P, ASYNC_FN, P]),
    "dlock_election_await_change_async": (I, [P, U, PO, ASYNC_FN, P]),
    "dlock_barrier_enter_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_barrier_leave_async": (I, [P, PO, ASYNC_FN, P]),
    "dlock_rate_limiter_acquire_async": (I, [P, L, PO, ASYNC_FN, P]),
    "dlock_rate_limiter_try_set_rate_async": (I, [P, POINTER(RateConfig), ASYNC_FN, P]),
    "dlock_rate_limiter_set_rate_async": (I, [P, POINTER(RateConfig), I, ASYNC_FN, P]),
    "dlock_rate_limiter_available_async": (I, [P, ASYNC_FN, P]),
    "dlock_rate_limiter_release_async": (I, [P, L, ASYNC_FN, P]),
}


def _candidates():
    env = os.environ.get("DLOCK_LIBRARY")
    if env:
        return [env]
    out = []
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.exists(os.path.join(root, "include", "dlock", "dlock.h")):
        built = os.path.join(root, "build", "libdlock.so.%d" % LIB_MAJOR)
        if os.path.exists(built):
            out.append(built)
    out += ["libdlock.so.%d" % LIB_MAJOR, "libdlock.so"]
    return out


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    else:
        raise ImportError(
            "dlock: cannot load libdlock (tried %s): install the library (the Debian "
            "package libdlock%d, or make install then ldconfig) or point DLOCK_LIBRARY "
            "at libdlock.so" % ("; ".join(tried), LIB_MAJOR))
    missing = []
    for name, (res, args) in _PROTOS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = res
        fn.argtypes = args
    version = lib.dlock_version().decode() if hasattr(lib, "dlock_version") else "?"
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        major, minor = -1, -1
    if missing or major != LIB_MAJOR or minor < LIB_MINOR:
        raise ImportError(
            "dlock: %s is libdlock %s, this binding needs %d.%d or a later %d.x%s" %
            (lib._name, version, LIB_MAJOR, LIB_MINOR, LIB_MAJOR,
             " (missing: %s)" % ", ".join(missing[:5]) if missing else ""))
    return lib, version


lib, LIB_VERSION = _load()
LIB_PATH = lib._name


def last_error(code):
    """The exception for status `code`, with the calling thread's detailed
    message (read at once: it is valid until this thread's next dlock call)."""
    msg = lib.dlock_last_error()
    msg = msg.decode("utf-8", "replace") if msg else ""
    return make_error(code, msg)


def make_error(code, msg):
    name = lib.dlock_errname(code).decode()
    if not msg:
        msg = lib.dlock_strerror(code).decode()
    return error_class(code)(msg, code, name)


def check(code):
    """Raises the exception of a failed call's status."""
    if code != OK:
        raise last_error(code)


def encode(name, what="name"):
    """A name for C: str (UTF-8) or bytes, no NUL (C would cut it there)."""
    if isinstance(name, str):
        name = name.encode("utf-8")
    elif not isinstance(name, (bytes, bytearray)):
        raise TypeError("%s must be str or bytes, not %s" % (what, type(name).__name__))
    if b"\0" in name:
        raise make_error(EINVAL, "%s contains a NUL byte" % what)
    return bytes(name)
