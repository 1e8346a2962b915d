"""Exception hierarchy of the SDK.

Every exception the SDK raises on purpose derives from :class:`HarnessError`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HarnessError",
    "RuntimeNotFoundError",
    "TransportClosed",
    "HarnessTimeout",
    "RequestTimeout",
    "NotificationTimeout",
    "ProtocolError",
    "RpcError",
    "SessionBusyError",
    "SESSION_BUSY",
]

#: JSON-RPC error code of an overlapping ``session/prompt`` (PROTOCOL.md §10).
SESSION_BUSY = -32001


class HarnessError(Exception):
    """Base class of every error raised by the SDK."""


class RuntimeNotFoundError(HarnessError, FileNotFoundError):
    """The ``harnessd`` binary could not be located."""


class TransportClosed(HarnessError):
    """The connection to the runtime is closed (or was never opened).

    ``returncode`` is the runtime's exit status when it was a child process
    that has exited, and ``stderr_tail`` the last few KiB of its standard
    error (empty for network transports). Both are also part of the message.
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class HarnessTimeout(HarnessError, TimeoutError):
    """Base class of the SDK's timeouts; also a builtin :class:`TimeoutError`."""


class RequestTimeout(HarnessTimeout):
    """A request got no response within its timeout."""

    def __init__(self, message: str, *, method: str, timeout: float | None) -> None:
        super().__init__(message)
        self.method = method
        self.timeout = timeout


class NotificationTimeout(HarnessTimeout):
    """:meth:`HarnessClient.next_notification` waited in vain."""


class ProtocolError(HarnessError):
    """The runtime sent something that does not follow PROTOCOL.md."""


class RpcError(HarnessError):
    """The runtime answered a request with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None) -> None:
        text = f"{message} (code {code})"
        if method:
            text = f"{method}: {text}"
        super().__init__(text)
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class SessionBusyError(RpcError):
    """``-32001``: the session already has a prompt in flight."""

    @property
    def session_id(self) -> str | None:
        if isinstance(self.data, dict):
            value = self.data.get("sessionId")
            if isinstance(value, str):
                return value
        return None


def rpc_error_from_object(error: Any, *, method: str | None = None) -> HarnessError:
    """Build the exception for a response's ``error`` member.

    A malformed error object yields a :class:`ProtocolError`.
    """

    if not isinstance(error, dict):
        return ProtocolError(f"{method or 'response'}: error member is not an object: {error!r}")
    code = error.get("code")
    message = error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        return ProtocolError(f"{method or 'response'}: malformed error object: {error!r}")
    cls = SessionBusyError if code == SESSION_BUSY else RpcError
    return cls(code, message, error.get("data"), method=method)
