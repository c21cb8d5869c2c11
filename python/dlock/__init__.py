"""dlock: Redisson's distributed locks for Python, on libdlock.

    import dlock
    with dlock.Client("redis://127.0.0.1:6379", watchdog=30.0) as c:
        with c.lock("orders"):          # waits; renewed by the watchdog; released on exit
            ...
        l = c.lock("orders")
        if l.acquire(timeout=0.5, lease=10):    # threading's signature, seconds
            try: ...
            finally: l.release()

The same locks as Redisson's (Java) and the dlock C library's, in Redis's
layout: a Python process, a Java service and a `dlock run` job take turns.
Types: lock, fair_lock, fenced_lock, spin_lock, non_reentrant_lock,
non_reentrant_fair_lock, read_write_lock (.read, .write), semaphore,
permit_semaphore, latch, rate_limiter, multi_lock, red_lock, election. Owners
are per thread, and per task in asyncio (``async with c.lock(n)``,
``await l.acquire_async(timeout=...)``). Times are seconds. Failures raise
dlock.Error subclasses (NotOwnerError is also a RuntimeError, InvalidArgument
a ValueError, ConnectionError the built-in ConnectionError, ...).
docs/python.md has the whole story.
"""

from ._errors import *  # noqa: F401,F403
from ._errors import __all__ as _errors_all
from ._client import Client, Leader, LostHold, LostReason, stripe_name
from ._locks import Backoff, Lock, MultiLock, ReadWriteLock
from ._sync import Barrier, Election, Latch, PermitSemaphore, RateConfig, RateLimiter, Semaphore
from ._info import Holder, Info, Queued
from ._core import NO_EXPIRY
from ._lib import LIB_PATH as library_path, LIB_VERSION as library_version

__version__ = "0.2.0"

__all__ = ["Client", "Lock", "Backoff", "ReadWriteLock", "MultiLock", "Semaphore",
           "PermitSemaphore", "Latch", "RateLimiter", "RateConfig", "Election", "Barrier", "Leader",
           "LostHold", "LostReason", "Info", "Holder", "Queued", "stripe_name", "NO_EXPIRY", "library_path",
           "library_version"] + list(_errors_all)
