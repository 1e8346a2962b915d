"""Exceptions of the SDK.

The first three classes are upstream's hierarchy, with upstream's names and
attributes, so ``except`` clauses written for upstream's SDK keep working.
The rest are additions for harnessd's own error codes and for validation
(standing in for pydantic's ``ValidationError``, which is a ``ValueError``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HarnessError",
    "TransportClosedError",
    "CertificateVerifyError",
    "JsonRpcError",
    "InvalidParamsError",
    "SessionBusyError",
    "ServerOverloadedError",
    "ValidationError",
    "ResponseTypeError",
    "INVALID_PARAMS",
    "SESSION_BUSY",
    "SERVER_OVERLOADED",
]

#: JSON-RPC code of invalid params (JSON-RPC 2.0), e.g. an unknown session.
INVALID_PARAMS = -32602

#: JSON-RPC code of a prompt for a session that already runs one (harnessd).
SESSION_BUSY = -32001
#: JSON-RPC code of a prompt refused by admission control (harnessd).
SERVER_OVERLOADED = -32005


class HarnessError(Exception):
    """Base of the failures of the SDK and of the runtime it talks to."""


class TransportClosedError(HarnessError):
    """The runtime is gone: it exited, closed its output, refused a write,
    or was never started.

    The message is a reason line, then ``exit code: N`` once the process has
    exited, then ``stderr tail:`` and the last lines the runtime wrote to
    stderr. ``exit_code`` and ``stderr_tail`` carry the same facts
    (additions; ``None`` / ``""`` for network connections).
    """

    def __init__(self, message: str, *, exit_code: int | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class CertificateVerifyError(TransportClosedError):
    """A ``tls://`` or ``wss://`` peer's certificate was not trusted
    (addition): an unknown CA, an expired certificate, or a name that does
    not match the address. Raised by ``start()``; nothing was sent.

    ``verify_message`` is OpenSSL's reason (e.g. ``unable to get local
    issuer certificate``, ``IP address mismatch, certificate is not valid
    for '127.0.0.1'``).
    """

    def __init__(self, message: str, *, verify_message: str = "") -> None:
        super().__init__(message)
        self.verify_message = verify_message


class JsonRpcError(HarnessError):
    """The runtime answered a request with a JSON-RPC ``error`` object.

    ``code`` is ``None`` unless the error carried an integer code;
    ``str(exc)`` is the message.
    """

    def __init__(self, code: int | None, message: str, data: object | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class InvalidParamsError(JsonRpcError):
    """Code ``-32602`` (addition): the request's params were refused, e.g.
    a bad field, an unknown provider, or (``session/events``,
    ``session/subscribe``) a session with no log.

    ``session_id`` is ``data.sessionId`` when the runtime sent one: harnessd
    does for ``unknown session: ID``. ``data`` keeps the whole object.
    """

    @property
    def session_id(self) -> str | None:
        if isinstance(self.data, dict) and isinstance(self.data.get("sessionId"), str):
            return self.data["sessionId"]
        return None


class SessionBusyError(JsonRpcError):
    """Code ``-32001`` (addition): the session already runs a prompt."""

    @property
    def session_id(self) -> str | None:
        if isinstance(self.data, dict) and isinstance(self.data.get("sessionId"), str):
            return self.data["sessionId"]
        return None


class ServerOverloadedError(JsonRpcError):
    """Code ``-32005`` (addition): harnessd's admission queue is full."""

    @property
    def retry_after_ms(self) -> int | None:
        if isinstance(self.data, dict):
            value = self.data.get("retryAfterMs")
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None


class ValidationError(HarnessError, ValueError):
    """A response does not match its model (what pydantic's
    ``ValidationError`` is upstream; likewise a ``ValueError``)."""


class ResponseTypeError(ValidationError, TypeError):
    """A result that must be a JSON object is not one.

    Upstream's ``request()`` raises ``TypeError`` here; this is one, and a
    ``ValueError`` too, so a malformed ``session/prompt`` result is a
    ``ValueError`` whatever its shape.
    """


def error_from_response(error: Any) -> JsonRpcError:
    """The exception for a response's ``error`` member, however malformed."""

    if not isinstance(error, dict):
        return JsonRpcError(None, "JSON-RPC error", error)
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        code = None
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = "JSON-RPC error"
    cls = {
        INVALID_PARAMS: InvalidParamsError,
        SESSION_BUSY: SessionBusyError,
        SERVER_OVERLOADED: ServerOverloadedError,
    }.get(code, JsonRpcError)
    return cls(code, message, error.get("data"))
