"""The JSON-RPC client: one connection to a harnessd runtime.

The client only ever sends requests. A reader thread parses every frame the
runtime sends and either resolves the waiting request (responses) or hands
the frame to subscribers and to the notification buffer (notifications), in
the order the frames arrived. Since the runtime writes all notifications of
a turn before the turn's response, a caller woken by a response has already
seen every notification that preceded it.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from .errors import (
    HarnessError,
    NotificationTimeout,
    ProtocolError,
    RequestTimeout,
    TransportClosed,
    rpc_error_from_object,
)
from .transport import StdioTransport, TcpTransport, Transport
from .types import Notification, PromptInput, SessionPromptResponse, content_blocks

__all__ = ["HarnessClient", "PendingRequest", "Subscription", "NotificationCallback", "DEFAULT"]

log = logging.getLogger("deepseek_harness.client")

NotificationCallback = Callable[[Notification], Any]


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: Sentinel meaning "use the client's configured request timeout".
DEFAULT: Any = _Default()

_PARAM_ALIASES = {
    "max_tokens": "maxTokens",
    "client_info": "clientInfo",
    "protocol_version": "protocolVersion",
    "auth_token": "authToken",
}


def _copy_closed(err: TransportClosed) -> TransportClosed:
    return TransportClosed(str(err), returncode=err.returncode, stderr_tail=err.stderr_tail)


class PendingRequest:
    """A request that was sent and awaits its response."""

    def __init__(self, client: "HarnessClient", request_id: int, method: str) -> None:
        self.id = request_id
        self.method = method
        self._client = client
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[["PendingRequest"], Any]] = []

    def _settle(self, result: Any = None, error: BaseException | None = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._result = result
            self._error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("done-callback of %s request %d failed", self.method, self.id)

    def done(self) -> bool:
        return self._event.is_set()

    def add_done_callback(self, callback: Callable[["PendingRequest"], Any]) -> None:
        """Call *callback(self)* once settled (at once if already settled)."""

        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def abandon(self) -> None:
        """Stop waiting: a late response to this request will be ignored."""

        self._client._forget(self)

    def result(self, timeout: float | None | Any = DEFAULT) -> Any:
        """The response's ``result``; raises its error.

        Raises :class:`RequestTimeout` (and abandons the request) when no
        response arrives within *timeout* seconds (``DEFAULT``: the client's
        ``request_timeout``; ``None``: wait forever).
        """

        if timeout is DEFAULT:
            timeout = self._client.request_timeout
        if not self._event.is_set():
            self._client._check_not_reader_thread(self.method)
            if not self._event.wait(timeout):
                self.abandon()
                if not self._event.is_set():
                    raise RequestTimeout(
                        f"{self.method}: no response within {timeout:g}s",
                        method=self.method,
                        timeout=timeout,
                    )
        if self._error is not None:
            if isinstance(self._error, TransportClosed):
                raise _copy_closed(self._error)
            raise self._error
        return self._result


class Subscription:
    """Handle returned by the subscribe methods; call or ``unsubscribe()`` it."""

    def __init__(self, client: "HarnessClient", key: int) -> None:
        self._client = client
        self._key = key

    def unsubscribe(self) -> None:
        self._client._unsubscribe(self._key)

    __call__ = unsubscribe

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.unsubscribe()


class HarnessClient:
    """A JSON-RPC 2.0 client connection to harnessd.

    Give exactly one of *command* (spawn the runtime and speak NDJSON over
    its stdio, e.g. ``["harnessd", "--stdio"]``), *address* (``host:port``
    of ``harnessd --listen tcp://...``) or a ready *transport*. *env* is
    overlaid on ``os.environ`` for a spawned runtime.

    Notification callbacks run on the reader thread, in arrival order; they
    must be quick and must not wait for a response (that raises
    :class:`HarnessError` rather than deadlocking).
    """

    def __init__(
        self,
        command: Sequence[str | os.PathLike[str]] | None = None,
        *,
        address: str | None = None,
        transport: Transport | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        request_timeout: float | None = 600.0,
        shutdown_timeout: float = 5.0,
        connect_timeout: float = 10.0,
        notification_buffer: int = 10_000,
    ) -> None:
        given = sum(x is not None for x in (command, address, transport))
        if given != 1:
            raise ValueError("give exactly one of command, address or transport")
        if isinstance(command, (str, bytes)):
            raise TypeError("command must be a sequence of arguments, not a string")
        if transport is None:
            if command is not None:
                full_env = dict(os.environ)
                if env:
                    full_env.update(env)
                transport = StdioTransport([os.fspath(c) for c in command], env=full_env, cwd=cwd)
            else:
                assert address is not None
                transport = TcpTransport(address, connect_timeout=connect_timeout)
        self.transport = transport
        self.request_timeout = request_timeout
        self.shutdown_timeout = shutdown_timeout
        self.server_info: dict[str, Any] | None = None
        self.initialize_result: dict[str, Any] | None = None

        self._lock = threading.Lock()
        self._notify_cond = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        self._lifecycle_lock = threading.RLock()
        self._ids = itertools.count(1)
        self._pending: dict[int, PendingRequest] = {}
        # Ids of requests given up on (timeouts): their late responses are expected.
        self._abandoned: collections.deque[int] = collections.deque(maxlen=256)
        self._subscribers: dict[int, NotificationCallback] = {}
        self._sub_keys = itertools.count(1)
        self._buffer: collections.deque[Notification] = collections.deque(maxlen=max(notification_buffer, 1))
        self._started = False
        self._closing = False
        self._close_reason: str | None = None
        self._closed_error: TransportClosed | None = None
        self._reader: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "HarnessClient":
        """Spawn or connect and start the reader thread. Idempotent."""

        with self._lifecycle_lock:
            if self._closing:
                raise TransportClosed("client closed")
            if self._started:
                return self
            self.transport.open()
            self._started = True
            self._reader = threading.Thread(target=self._read_loop, name="harnessd-reader", daemon=True)
            self._reader.start()
        return self

    def close(self, *, graceful: bool = True) -> None:
        """Shut the runtime down and release everything. Idempotent.

        With *graceful*, a ``shutdown`` request is sent first (bounded by
        ``shutdown_timeout``), so running turns settle and are answered.
        Then the runtime's stdin is closed (or the socket shut), the process
        is waited for and killed if it does not exit within
        ``shutdown_timeout``. Requests still pending fail with
        :class:`TransportClosed`.
        """

        with self._lifecycle_lock:
            if self._closing:
                return
            self._closing = True
            self._close_reason = "client closed"
            if not self._started:
                with self._lock:
                    self._closed_error = TransportClosed("client closed")
                return
            reader = self._reader
            assert reader is not None
            if graceful and reader.is_alive() and self._closed_error is None:
                try:
                    self._send("shutdown", None, internal=True).result(self.shutdown_timeout)
                except HarnessError as exc:
                    log.debug("shutdown request failed: %s", exc)
            self.transport.terminate(self.shutdown_timeout)
            if reader is not threading.current_thread():
                reader.join(timeout=max(self.shutdown_timeout, 1.0) + 5.0)
                if reader.is_alive():
                    log.warning("reader thread did not stop")
            self.transport.release()
            self._fail_all(TransportClosed("client closed"))

    @property
    def closed(self) -> bool:
        return self._closing or self._closed_error is not None

    def __enter__(self) -> "HarnessClient":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def request_async(self, method: str, params: Any = None) -> PendingRequest:
        """Send a request and return at once; see :meth:`PendingRequest.result`."""

        return self._send(method, params, internal=False)

    def request(self, method: str, params: Any = None, timeout: float | None | Any = DEFAULT) -> Any:
        """Send a request and wait for its result.

        Raises :class:`RpcError` for an error response, :class:`RequestTimeout`
        after *timeout* seconds (default: ``request_timeout``; None: forever),
        :class:`TransportClosed` when the connection ends first.
        """

        return self._send(method, params, internal=False).result(timeout)

    def initialize(self, timeout: float | None | Any = DEFAULT, **params: Any) -> dict[str, Any]:
        """Send ``initialize``. Keyword names are the wire names (``clientInfo``);
        ``max_tokens``, ``client_info``, ``protocol_version`` and
        ``auth_token`` are accepted as aliases. None values are left out."""

        wire = {_PARAM_ALIASES.get(k, k): v for k, v in params.items() if v is not None}
        result = self.request("initialize", wire, timeout=timeout)
        if not isinstance(result, dict):
            raise ProtocolError(f"initialize result is not an object: {result!r}")
        server_info = result.get("serverInfo")
        if not isinstance(server_info, dict):
            raise ProtocolError(f"initialize result has no serverInfo object: {result!r}")
        self.initialize_result = result
        self.server_info = server_info
        return result

    def session_prompt(
        self,
        session_id: str,
        content: PromptInput,
        timeout: float | None | Any = DEFAULT,
    ) -> SessionPromptResponse:
        """Run one turn and return its validated result.

        *content* is a string (one text block) or a list of content blocks.
        A result that does not match PROTOCOL.md raises :class:`ProtocolError`.
        """

        params = {"sessionId": session_id, "contentBlocks": content_blocks(content)}
        return SessionPromptResponse.from_result(self.request("session/prompt", params, timeout=timeout))

    def session_cancel(self, session_id: str, timeout: float | None | Any = DEFAULT) -> bool:
        """Cancel the running turn of a session; True when one was running."""

        result = self.request("session/cancel", {"sessionId": session_id}, timeout=timeout)
        if not isinstance(result, dict) or not isinstance(result.get("cancelled"), bool):
            raise ProtocolError(f"session/cancel result is malformed: {result!r}")
        return result["cancelled"]

    def shutdown(self, timeout: float | None | Any = DEFAULT) -> None:
        """Send ``shutdown`` without closing the client (see :meth:`close`)."""

        self.request("shutdown", None, timeout=timeout)

    # ------------------------------------------------------------------ notifications

    def subscribe_notifications(self, callback: NotificationCallback) -> Subscription:
        """Call *callback(notification)* for every notification from now on."""

        with self._lock:
            key = next(self._sub_keys)
            self._subscribers[key] = callback
        return Subscription(self, key)

    def subscribe_session_notifications(self, session_id: str, callback: NotificationCallback) -> Subscription:
        """Like :meth:`subscribe_notifications`, for notifications whose
        ``sessionId``, ``parentSessionId`` or ``childSessionId`` is *session_id*."""

        def matching(notification: Notification) -> None:
            if notification.concerns(session_id):
                callback(notification)

        return self.subscribe_notifications(matching)

    def next_notification(self, timeout: float | None = None) -> Notification:
        """Pop the oldest buffered notification, waiting up to *timeout* seconds.

        Raises :class:`NotificationTimeout` when none arrives in time and
        :class:`TransportClosed` once the connection is closed and the
        buffer is empty. The buffer keeps the newest ``notification_buffer``
        notifications.
        """

        deadline = None if timeout is None else time.monotonic() + timeout
        with self._notify_cond:
            while not self._buffer:
                if self._closed_error is not None:
                    raise _copy_closed(self._closed_error)
                if not self._started:
                    raise TransportClosed("client not started")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise NotificationTimeout(f"no notification within {timeout:g}s")
                self._notify_cond.wait(remaining)
            return self._buffer.popleft()

    # ------------------------------------------------------------------ internals

    def _unsubscribe(self, key: int) -> None:
        with self._lock:
            self._subscribers.pop(key, None)

    def _forget(self, pending: PendingRequest) -> None:
        with self._lock:
            if self._pending.get(pending.id) is pending:
                del self._pending[pending.id]
                self._abandoned.append(pending.id)

    def _check_not_reader_thread(self, method: str) -> None:
        if self._reader is not None and threading.current_thread() is self._reader:
            raise HarnessError(
                f"cannot wait for the response to {method} from a notification callback "
                "(it runs on the reader thread that delivers responses)"
            )

    def _send(self, method: str, params: Any, *, internal: bool) -> PendingRequest:
        if not isinstance(method, str) or not method:
            raise ValueError("method must be a non-empty string")
        with self._lock:
            if self._closed_error is not None:
                raise _copy_closed(self._closed_error)
            if not self._started:
                raise TransportClosed("client not started (call start() first)")
            if self._closing and not internal:
                raise TransportClosed("client closed")
            request_id = next(self._ids)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        data = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        pending = PendingRequest(self, request_id, method)
        with self._lock:
            if self._closed_error is not None:
                raise _copy_closed(self._closed_error)
            self._pending[request_id] = pending
        try:
            with self._write_lock:
                self.transport.write(data)
        except OSError as exc:
            self._forget(pending)
            log.debug("write of %s failed: %s", method, exc)
            # The reader thread sees the end of the stream and records why
            # (exit status, stderr tail); prefer its explanation.
            reader = self._reader
            if reader is not None and reader is not threading.current_thread():
                reader.join(timeout=5)
            with self._lock:
                err = self._closed_error
            if err is not None:
                raise _copy_closed(err) from exc
            raise TransportClosed(f"cannot write to {self.transport.describe()}: {exc}") from exc
        return pending

    def _read_loop(self) -> None:
        try:
            while True:
                try:
                    line = self.transport.readline()
                except (OSError, ValueError) as exc:
                    log.debug("read failed: %s", exc)
                    break
                if not line:
                    break
                try:
                    self._handle_line(line)
                except Exception:
                    log.exception("failed to handle a frame from the runtime")
        finally:
            self._finish_reader()

    def _finish_reader(self) -> None:
        reason = self._close_reason
        if reason is not None:
            err = TransportClosed(reason)
        else:
            try:
                err = self.transport.closed_error()
            except Exception as exc:  # pragma: no cover - defensive
                err = TransportClosed(f"connection closed ({exc})")
        log.debug("transport closed: %s", err)
        self._fail_all(err)

    def _fail_all(self, err: TransportClosed) -> None:
        with self._notify_cond:
            if self._closed_error is None:
                self._closed_error = err
            pending = list(self._pending.values())
            self._pending.clear()
            self._notify_cond.notify_all()
        for request in pending:
            request._settle(error=_copy_closed(err))

    def _handle_line(self, line: bytes) -> None:
        text = line.strip()
        if not text:
            return
        try:
            frame = json.loads(text)
        except (ValueError, RecursionError) as exc:
            log.warning("ignoring malformed line from runtime (%s): %r", exc, text[:200])
            return
        if not isinstance(frame, dict):
            log.warning("ignoring non-object frame from runtime: %r", text[:200])
            return
        has_id = "id" in frame
        has_method = "method" in frame
        if has_id and has_method:
            log.warning(
                "ignoring unexpected request from runtime (method %r, id %r)",
                frame.get("method"),
                frame.get("id"),
            )
        elif has_method:
            self._handle_notification(frame)
        elif has_id:
            self._handle_response(frame)
        else:
            log.warning("ignoring frame with neither id nor method: %r", text[:200])

    def _handle_notification(self, frame: dict[str, Any]) -> None:
        method = frame["method"]
        params = frame.get("params", {})
        if not isinstance(method, str) or not isinstance(params, dict):
            log.warning("ignoring malformed notification: %r", frame)
            return
        notification = Notification(method, params)
        with self._notify_cond:
            callbacks = list(self._subscribers.values())
            self._buffer.append(notification)
            self._notify_cond.notify_all()
        for callback in callbacks:
            try:
                callback(notification)
            except Exception:
                log.exception("notification callback failed for %s", method)

    def _handle_response(self, frame: dict[str, Any]) -> None:
        request_id = frame["id"]
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            if request_id is None and "error" in frame:
                log.warning("runtime reported an error for an unidentified request: %r", frame["error"])
            else:
                log.warning("ignoring response with foreign id %r", request_id)
            return
        with self._lock:
            pending = self._pending.pop(request_id, None)
            late = pending is None and request_id in self._abandoned
        if pending is None:
            if late:
                log.debug("ignoring late response to abandoned request %d", request_id)
            else:
                log.warning("ignoring response with unknown id %r", request_id)
            return
        has_result = "result" in frame
        has_error = "error" in frame
        if has_error and not has_result:
            pending._settle(error=rpc_error_from_object(frame["error"], method=pending.method))
        elif has_result and not has_error:
            pending._settle(result=frame["result"])
        else:
            pending._settle(
                error=ProtocolError(f"{pending.method}: response must have exactly one of result and error: {frame!r}")
            )
