"""dlock's status codes as Python exceptions.

Every failure of a dlock call raises a subclass of :class:`Error` carrying the
C status (``code``, a negative int; ``errname``, e.g. ``"DLOCK_ENOTOWNER"``)
and dlock's detailed message (``str(e)``). Where a built-in exception means
the same thing the class derives from it too, so code written for the
standard library catches it: releasing a lock the caller does not hold is a
``RuntimeError`` (as ``threading.Lock.release`` raises), a bad argument a
``ValueError``, Redis out of reach a ``ConnectionError``.
"""

import builtins

__all__ = [
    "Error", "InvalidArgument", "OutOfMemory", "Timeout", "NotOwnerError", "Cancelled",
    "ConnectionError", "CommandTimeout", "RedisError", "WrongTypeError", "ProtocolError",
    "AuthError", "ClosedError", "NameTooLong", "SystemCallError", "OutcomeUnknown",
    "DeadlockError", "TLSError", "ReplicasError", "FencedError", "ReentryError",
    "NotFoundError", "ForkError",
]


class Error(Exception):
    """A dlock call failed. ``code``: the C status (negative int, None for
    errors the binding itself raises); ``errname``: its symbolic name."""

    code = None
    errname = None

    def __init__(self, message, code=None, errname=None):
        # One argument only: several built-ins below are OSError subclasses,
        # which read two arguments as (errno, strerror).
        super().__init__(message)
        if code is not None:
            self.code = code
        if errname is not None:
            self.errname = errname

    @property
    def message(self):
        return self.args[0] if self.args else ""


class InvalidArgument(Error, ValueError):
    """DLOCK_EINVAL: an argument is invalid (the message names it)."""


class OutOfMemory(Error, MemoryError):
    """DLOCK_ENOMEM."""


class Timeout(Error, builtins.TimeoutError):
    """DLOCK_ETIMEDOUT where a call has no False to answer it with."""


class NotOwnerError(Error, RuntimeError):
    """DLOCK_ENOTOWNER: the caller does not hold the lock (or the permit):
    never held, released already, expired, lost."""


class Cancelled(Error):
    """DLOCK_ECANCELED: the wait was cancelled."""


class ConnectionError(Error, builtins.ConnectionError):  # noqa: A001 (dlock.ConnectionError)
    """DLOCK_ECONN: Redis could not be reached, or the connection dropped."""


class CommandTimeout(Error, builtins.TimeoutError):
    """DLOCK_ECMDTIMEOUT: Redis did not answer within the command timeout."""


class RedisError(Error):
    """DLOCK_EREDIS: Redis answered with an error (its text in the message)."""


class WrongTypeError(Error, TypeError):
    """DLOCK_EWRONGTYPE: the key exists and holds another type (never modified)."""


class ProtocolError(Error):
    """DLOCK_EPROTO: Redis answered something a script cannot have returned."""


class AuthError(Error, PermissionError):
    """DLOCK_EAUTH: authentication, an ACL or database selection was refused."""


class ClosedError(Error):
    """DLOCK_ECLOSED: the client is closing or closed."""


class NameTooLong(InvalidArgument):
    """DLOCK_ENAMETOOLONG: a name or owner id is longer than its maximum."""


class SystemCallError(Error, OSError):
    """DLOCK_ESYS: an operating-system call failed."""


class OutcomeUnknown(Error):
    """DLOCK_EUNKNOWN: the request was sent and no answer came; it may have
    run (see the C guide: an acquisition of unknown outcome)."""


class DeadlockError(Error, RuntimeError):
    """DLOCK_EDEADLK: the request can never be granted to this caller (it
    holds the read lock of the write lock it asks for)."""


class TLSError(Error):
    """DLOCK_ETLS: the TLS handshake or a certificate failed."""


class ReplicasError(Error):
    """DLOCK_EREPLICAS: fewer replicas acknowledged than the config asks for."""


class FencedError(Error):
    """DLOCK_EFENCED: a fenced write was refused: a newer token wrote."""


class ReentryError(Error, RuntimeError):
    """DLOCK_EREENTRY: the caller already holds this non-reentrant lock
    (Redisson's IllegalMonitorStateException); nothing was written."""


class NotFoundError(Error, LookupError):
    """DLOCK_ENOTFOUND: the object is not set up (a rate limiter with no
    rate: Redisson's "RateLimiter is not initialized"); nothing was written."""


class ForkError(Error, RuntimeError):
    """A client opened before fork() was used in the child process."""


_BY_CODE = {
    -1: InvalidArgument, -2: OutOfMemory, -3: Timeout, -4: NotOwnerError, -5: Cancelled,
    -6: ConnectionError, -7: CommandTimeout, -8: RedisError, -9: WrongTypeError,
    -10: ProtocolError, -11: AuthError, -12: ClosedError, -13: NameTooLong,
    -14: SystemCallError, -15: OutcomeUnknown, -16: DeadlockError, -17: TLSError,
    -18: ReplicasError, -19: FencedError, -20: ReentryError, -21: NotFoundError,
}


def error_class(code):
    """The exception class of a dlock status (Error for codes this binding
    does not know)."""
    return _BY_CODE.get(code, Error)
