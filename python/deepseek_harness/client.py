"""Low-level client: one runtime connection, requests, notifications.

The client is only a JSON-RPC client: it sends requests and consumes
responses and notifications. A reader thread parses every frame in arrival
order. A response resolves its waiting request; a notification goes to every
subscription whose filter accepts it, and only when none does to the global
queue that :meth:`HarnessClient.next_notification` pops. So a notification
is delivered once: what a subscription (or a running turn) received is never
buffered again. Since the runtime writes a turn's notifications before the
turn's response, a caller woken by the response has them all.

A frame with both ``id`` and ``method`` is a request from the runtime, which
the directional protocol does not allow: it is ignored and never resolves a
pending request, whatever its id.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import shutil
import ssl
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from ._transport import Channel, StdioChannel, open_network_channel
from .errors import (
    HarnessError,
    ResponseTypeError,
    TransportClosedError,
    ValidationError,
    error_from_response,
)
from .models import (
    APPROVAL_OUTCOMES,
    APPROVAL_POLICY_VALUES,
    ON_DISCONNECT_VALUES,
    SANDBOX_VALUES,
    ApprovalDecision,
    BaseModel,
    DecisionResponse,
    InitializeResponse,
    JsonObject,
    Notification,
    QuestionAnswer,
    SessionDeleteResponse,
    SessionEventsResponse,
    SessionInfo,
    SessionListResponse,
    SessionPromptResponse,
    SessionSubscribeResponse,
    SessionUnsubscribeResponse,
    ToolInfo,
    ToolsListResponse,
)

__all__ = [
    "HarnessConfig",
    "HarnessClient",
    "NotificationSubscription",
    "NotificationFilter",
    "SessionSubscription",
]

log = logging.getLogger("deepseek_harness")

#: Decides whether a subscription receives a notification.
NotificationFilter = Callable[[Notification], bool]

ModelT = TypeVar("ModelT", bound=BaseModel)

_NOT_RUNNING = "DeepSeek Harness runtime is not running"
_RUNTIME_CLOSED = "DeepSeek Harness runtime closed"
# How long an unresponsive runtime gets after stdin closes, and after SIGTERM.
_UNRESPONSIVE_GRACE_SECONDS = 0.2
_WRITE_FAILED = "Failed to write to DeepSeek Harness runtime"


@dataclass(slots=True)
class HarnessConfig:
    """How the low-level client launches (or reaches) the runtime.

    The runtime is ``launch_args_override`` verbatim when given; else
    ``runtime_bin --stdio`` (``bridge_bin`` is a legacy alias), else
    ``$HARNESSD_BIN --stdio``, else ``harnessd --stdio`` from ``PATH``.
    ``env`` is laid over a copy of ``os.environ``. Timeouts are seconds;
    ``None`` waits forever.

    Additions: ``address`` connects to a listening harnessd instead of
    launching one (``tcp://HOST:PORT``, ``tls://HOST:PORT``,
    ``ws://HOST:PORT/``, ``wss://HOST:PORT/``); ``auth_token`` is its
    ``--auth-token-file`` token. A ``tls://`` or ``wss://`` peer is verified
    (certificate chain, host name, TLS 1.2 or later) against the system's
    CA store, or against only the PEM CA certificates in ``ca_file``;
    ``ssl_context`` replaces that verification with a context of your own
    (used as given). ``ca_file`` and ``ssl_context`` exclude each other and
    are refused with a plain ``tcp://`` or ``ws://`` address.
    """

    runtime_bin: str | None = None
    bridge_bin: str | None = None
    launch_args_override: tuple[str, ...] | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    request_timeout_seconds: float | None = None
    shutdown_timeout_seconds: float | None = 1.0
    address: str | None = None
    auth_token: str | None = None
    connect_timeout_seconds: float | None = 10.0
    ssl_context: ssl.SSLContext | None = None
    ca_file: str | os.PathLike[str] | None = None


def resolve_launch_args(config: HarnessConfig) -> tuple[str, ...]:
    """The runtime's argv for *config* (see :class:`HarnessConfig`)."""

    if config.launch_args_override is not None:
        argv = tuple(os.fspath(arg) for arg in config.launch_args_override)
        if not argv:
            raise ValueError("HarnessConfig.launch_args_override must not be empty")
        return argv
    for binary in (config.runtime_bin, config.bridge_bin, os.environ.get("HARNESSD_BIN") or None):
        if binary is not None:
            return (_executable_path(os.fspath(binary)), "--stdio")
    found = shutil.which("harnessd")
    if found:
        return (found, "--stdio")
    raise FileNotFoundError(
        "Unable to locate harnessd, the DeepSeek Harness runtime. Set HarnessConfig.runtime_bin, "
        "the HARNESSD_BIN environment variable, or put harnessd on PATH."
    )


def _executable_path(binary: str) -> str:
    # A relative path means relative to this process, not to the runtime's cwd.
    if os.sep in binary or (os.altsep and os.altsep in binary):
        return os.path.abspath(os.path.expanduser(binary))
    return binary


def _session_filter(session_id: str) -> NotificationFilter:
    def belongs(notification: Notification) -> bool:
        payload = notification.payload
        return (
            payload.get("sessionId") == session_id
            or payload.get("parentSessionId") == session_id
            or payload.get("childSessionId") == session_id
        )

    return belongs


class NotificationSubscription:
    """Notifications accepted by a filter, queued until read.

    Created by :meth:`HarnessClient.subscribe_notifications` and
    :meth:`HarnessClient.subscribe_session_notifications`. The reader thread
    appends; any thread reads. When the runtime goes away, or the filter
    raises, the exception is queued after the notifications received before
    it and raised by every later read.
    """

    def __init__(self, client: "HarnessClient", notification_filter: NotificationFilter | None) -> None:
        self._client = client
        self._filter = notification_filter
        self._cond = threading.Condition(threading.Lock())
        self._items: collections.deque[Notification] = collections.deque()
        self._error: BaseException | None = None
        self._closed = False

    # -- reader side ---------------------------------------------------------

    def _put(self, notification: Notification) -> bool:
        with self._cond:
            if self._closed or self._error is not None:
                return False
            self._items.append(notification)
            self._cond.notify_all()
            return True

    def _fail(self, error: BaseException) -> None:
        with self._cond:
            if self._error is None:
                self._error = error
            self._cond.notify_all()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _wait(self, ready: Callable[[], bool], timeout: float | None) -> None:
        """Block until an item or error is queued, *ready()* holds, or *timeout* passes."""

        with self._cond:
            if not self._items and self._error is None and not ready():
                self._cond.wait(timeout)

    # -- public --------------------------------------------------------------

    def close(self) -> None:
        """Stop receiving. Notifications already queued stay readable."""

        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._client._remove_subscription(self)

    def next(self, timeout_seconds: float | None = None) -> Notification:
        """The oldest queued notification, waiting for one.

        ``timeout_seconds`` (addition) bounds the wait with a builtin
        ``TimeoutError``. Reading a closed, empty subscription raises
        :class:`HarnessError` instead of waiting forever.
        """

        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        with self._cond:
            while True:
                if self._items:
                    return self._items.popleft()
                if self._error is not None:
                    raise self._error
                if self._closed:
                    raise HarnessError("notification subscription is closed")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("no notification arrived in time")
                self._cond.wait(remaining)

    def drain(self, on_notification: Callable[[Notification], None]) -> None:
        """Call *on_notification* with each queued notification, in order,
        without waiting; then raise the queued exception, if any."""

        while True:
            with self._cond:
                if not self._items:
                    error = self._error
                    break
                notification = self._items.popleft()
            on_notification(notification)
        if error is not None:
            raise error

    def __enter__(self) -> "NotificationSubscription":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SessionSubscription(NotificationSubscription):
    """A harnessd ``session/subscribe`` subscription (addition): the
    ``session.event`` notifications of one session, as sent to this
    connection, from the replay after ``after_seq`` on.

    Created by :meth:`HarnessClient.session_subscribe`. It is a
    :class:`NotificationSubscription` that takes only ``session.event``s
    of ``session_id`` (not ``subagent.*``; a child session is subscribed to
    by its own id), so ``next()``, ``drain()`` and the timeout work as
    there; the global queue no longer sees these events. On top of that:

    - iterating yields the notifications until the subscription is closed
      and read empty; :meth:`events` yields the event objects and can stop
      at the end of a turn; :meth:`next_event` returns one;
    - events are read in ``seq`` order, each once, all with ``seq >
      after_seq`` (``> last_seq`` without ``after_seq``). On the wire, a
      turn this connection runs itself may send its live events before the
      replay; the subscription puts the replay first when the runtime's
      answer arrives (before :meth:`HarnessClient.session_subscribe`
      returns);
    - ``last_seq`` is the session's last ``seq`` when the replay ended (the
      response), ``seen_seq`` the ``seq`` to resume from after losing the
      connection: pass it as ``after_seq`` of a new subscription;
    - :meth:`close` (and leaving a ``with`` block) sends
      ``session/unsubscribe`` first; events that arrived before its answer
      stay readable.
    """

    def __init__(self, client: "HarnessClient", session_id: str, after_seq: int | None) -> None:
        super().__init__(client, self._accepts)
        self.session_id = session_id
        self.after_seq = after_seq
        #: The session's last ``seq`` when the subscription started (set
        #: once the runtime has answered ``session/subscribe``).
        self.last_seq: int | None = None
        #: Whether ``session/unsubscribe`` found the subscription (set by
        #: :meth:`close` and :meth:`HarnessClient.session_unsubscribe`).
        self.unsubscribed: bool | None = None
        self._accepted_seq = after_seq  # highest seq queued once live
        self._live = False  # the response arrived: events come in seq order
        self._seen_seq = after_seq
        self._active = False  # the runtime has it (between response and unsubscribe)
        self._closing = False

    # -- reader side ---------------------------------------------------------

    def _accepts(self, notification: Notification) -> bool:
        if notification.method != "session.event":
            return False
        payload = notification.payload
        if payload.get("sessionId") != self.session_id:
            return False
        return isinstance(payload.get("event"), dict)

    def _put(self, notification: Notification) -> bool:
        seq = _event_seq(notification)
        with self._cond:
            if self._closed or self._error is not None:
                return False
            if seq is not None and self._accepted_seq is not None and seq <= self._accepted_seq:
                return False  # before the start, or already queued
            if self._live and seq is not None:
                self._accepted_seq = seq
            self._items.append(notification)
            self._cond.notify_all()
            return True

    def _started(self, response: SessionSubscribeResponse) -> None:
        with self._cond:
            self.last_seq = response.last_seq
            self._active = True
            start = self.after_seq if self.after_seq is not None else response.last_seq
            # Before the answer, the replay and the live events of a turn
            # of this connection may have interleaved: seq order, once each.
            ordered: dict[int, Notification] = {}
            unordered: list[Notification] = []
            for notification in self._items:
                seq = _event_seq(notification)
                if seq is None:
                    unordered.append(notification)
                elif seq > start:
                    ordered.setdefault(seq, notification)
            self._items.clear()
            self._items.extend(unordered)
            self._items.extend(ordered[seq] for seq in sorted(ordered))
            self._accepted_seq = max([start, *ordered])
            self._live = True
            if self._seen_seq is None or self._seen_seq < start:
                self._seen_seq = start

    def _note(self, notification: Notification) -> Notification:
        seq = _event_seq(notification)
        if seq is not None:
            with self._cond:
                if self._seen_seq is None or seq > self._seen_seq:
                    self._seen_seq = seq
        return notification

    # -- public --------------------------------------------------------------

    @property
    def seen_seq(self) -> int | None:
        """The highest ``seq`` read so far, else where the subscription
        started (``after_seq``, or ``last_seq`` when it replayed nothing);
        ``None`` before that is known."""

        with self._cond:
            return self._seen_seq

    def next(self, timeout_seconds: float | None = None) -> Notification:
        return self._note(super().next(timeout_seconds))

    def drain(self, on_notification: Callable[[Notification], None]) -> None:
        super().drain(lambda notification: on_notification(self._note(notification)))

    def next_event(self, timeout_seconds: float | None = None) -> JsonObject:
        """The next event object (``{"type", "seq", "time", "data"}``)."""

        return self.next(timeout_seconds).payload["event"]  # type: ignore[return-value]

    def __iter__(self) -> Iterator[Notification]:
        """The notifications, waiting for each, until the subscription is
        closed and read empty. A runtime that went away raises
        :class:`TransportClosedError`."""

        while True:
            try:
                yield self.next()
            except TransportClosedError:
                raise
            except HarnessError:
                if self.closed:
                    return
                raise

    def events(self, *, timeout_seconds: float | None = None, until_turn_end: bool = False) -> Iterator[JsonObject]:
        """The event objects, as :meth:`__iter__` yields notifications.

        ``timeout_seconds`` bounds the wait for each event (``TimeoutError``).
        With ``until_turn_end``, the iteration ends after the next
        ``turn/end`` event: the outcome of a turn followed from elsewhere,
        e.g. a detached one.
        """

        while True:
            try:
                event = self.next_event(timeout_seconds)
            except TransportClosedError:
                raise
            except HarnessError:
                if self.closed:
                    return
                raise
            yield event
            if until_turn_end and event.get("type") == "turn/end":
                return

    @property
    def closed(self) -> bool:
        """True once :meth:`close` (or ``session_unsubscribe``) ended it."""

        with self._cond:
            return self._closed

    def close(self) -> None:
        """Send ``session/unsubscribe`` (failures are logged, not raised),
        then stop receiving. Idempotent; queued events stay readable."""

        with self._cond:
            if self._closing or self._closed:
                return
            self._closing = True
            active = self._active
        if active:
            try:
                self.unsubscribed = self._client._unsubscribe(self.session_id, None)
            except (HarnessError, TimeoutError) as exc:
                log.debug("session/unsubscribe of %r failed: %s", self.session_id, exc)
        self._local_close()

    def _local_close(self) -> None:
        with self._cond:
            self._active = False
        super().close()


def _event_seq(notification: Notification) -> int | None:
    event = notification.payload.get("event")
    seq = event.get("seq") if isinstance(event, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


class _Pending:
    """A request that was written and awaits its response."""

    __slots__ = ("id", "method", "link", "event", "result", "error", "_wakers")

    def __init__(self, request_id: str, method: str, link: "_Link | None") -> None:
        self.id = request_id
        self.method = method
        self.link = link
        self.event = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self._wakers: list[Callable[[], None]] = []

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        if self.event.is_set():
            return
        self.result = result
        self.error = error
        self.event.set()
        for wake in self._wakers:
            wake()

    def add_waker(self, wake: Callable[[], None]) -> None:
        self._wakers.append(wake)
        if self.event.is_set():
            wake()


class _Link:
    """One running runtime process or network connection."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.reader: threading.Thread | None = None
        self.closing = False
        self.error: TransportClosedError | None = None


class HarnessClient:
    """A JSON-RPC connection to the DeepSeek Harness runtime (harnessd).

    Nothing is launched by the constructor; :meth:`start` (or ``with``)
    launches ``harnessd --stdio`` as :class:`HarnessConfig` describes, or
    connects to ``config.address``. All methods are thread-safe; many
    requests may be in flight at once.
    """

    def __init__(self, config: HarnessConfig | None = None) -> None:
        self.config = config if config is not None else HarnessConfig()
        self._proc = None  # subprocess.Popen of the runtime while it runs
        self._link: _Link | None = None
        self._lifecycle = threading.RLock()
        self._state = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        # Ids given up on (timeouts, callback errors): late answers are expected.
        self._forgotten: collections.deque[str] = collections.deque(maxlen=256)
        self._subscriptions: list[NotificationSubscription] = []
        self._notifications: queue.Queue[Notification | BaseException] = queue.Queue()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Launch (or connect to) the runtime; does nothing while it runs."""

        with self._lifecycle:
            link = self._link
            if link is not None:
                if link.error is None and link.reader is not None and link.reader.is_alive():
                    return
                self._discard_link(link)
            config = self.config
            if config.address is not None:
                channel = open_network_channel(
                    config.address,
                    connect_timeout=config.connect_timeout_seconds,
                    ssl_context=config.ssl_context,
                    auth_token=config.auth_token,
                    ca_file=config.ca_file,
                )
            else:
                argv = resolve_launch_args(config)
                env = dict(os.environ)
                if config.env:
                    env.update({str(k): str(v) for k, v in config.env.items()})
                cwd = str(Path(config.cwd).resolve()) if config.cwd is not None else None
                channel = StdioChannel(argv, env=env, cwd=cwd)
            if not self._notifications.empty() and self._queue_failed():
                # The old queue ends with the previous runtime's error.
                self._notifications = queue.Queue()
            link = _Link(channel)
            link.reader = threading.Thread(
                target=self._read_loop, args=(link,), name="dsh-runtime-reader", daemon=True
            )
            self._link = link
            self._proc = channel.proc
            link.reader.start()

    def _queue_failed(self) -> bool:
        with self._notifications.mutex:
            return bool(self._notifications.queue) and isinstance(self._notifications.queue[-1], BaseException)

    def close(self) -> None:
        """Shut the runtime down and release it. Idempotent; safe before
        :meth:`start`; a later :meth:`start` launches a new runtime.

        Sends ``shutdown`` (bounded by ``shutdown_timeout_seconds``, failures
        ignored), closes the runtime's stdin, waits for it to exit, then
        terminates and finally kills it. Every pending request, every
        subscription and the global queue receive a
        :class:`TransportClosedError`.
        """

        self._close(polite=True)

    def _close(self, *, polite: bool) -> None:
        """``close()``; with ``polite=False`` (an unresponsive runtime) no
        shutdown request is sent and the runtime gets only a short grace
        before it is terminated, then killed."""

        with self._lifecycle:
            link = self._link
            if link is None:
                return
            timeout = self.config.shutdown_timeout_seconds
            if not polite:
                timeout = _UNRESPONSIVE_GRACE_SECONDS if timeout is None else min(timeout, _UNRESPONSIVE_GRACE_SECONDS)
            # From here on the end of the stream is expected: errors say
            # "closed", and other threads' new requests are refused.
            link.closing = True
            try:
                if link.error is None and polite:
                    try:
                        self._call("shutdown", None, timeout_seconds=timeout, internal=True)
                    except Exception as exc:
                        log.debug("shutdown request failed: %s", exc)
                try:
                    link.channel.finish(timeout)
                except Exception as exc:  # pragma: no cover - defensive
                    log.debug("finishing the runtime failed: %s", exc)
                if link.reader is not None and link.reader is not threading.current_thread():
                    link.reader.join(timeout=5)
            finally:
                self._discard_link(link)

    def _discard_link(self, link: _Link) -> None:
        self._fail_link(link, TransportClosedError(_RUNTIME_CLOSED))
        link.channel.release()
        if self._link is link:
            self._link = None
            self._proc = None

    def __enter__(self) -> "HarnessClient":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def initialize(
        self,
        *,
        cwd: str,
        provider: str,
        model: str,
        max_tokens: int | None = None,
        on_disconnect: str | None = None,
        sandbox: str | None = None,
        approval_policy: str | None = None,
    ) -> InitializeResponse:
        """Send ``initialize`` with *cwd* made absolute. On any failure the
        runtime is closed before the exception propagates.

        ``max_tokens`` (addition) becomes harnessd's ``maxTokens``.
        ``on_disconnect`` (addition) becomes ``onDisconnect``: ``"cancel"``
        (harnessd's default) or ``"continue"``, what happens to this
        connection's running turns when a network connection drops; with
        ``"continue"`` they run to their end, detached, and can be followed
        with :meth:`session_subscribe`. Another value is a ``ValueError``.
        ``sandbox`` (addition) becomes ``sandbox``: ``"read-only"``,
        ``"workspace-write"`` (harnessd's default) or ``"danger-full-access"``
        (refused off stdio unless the daemon allows it); what the agent's
        tools may change. Another value is a ``ValueError``.
        ``approval_policy`` (addition) becomes ``approvalPolicy``: ``"never"``
        or ``"ask"`` (tools that may change something wait for
        :meth:`session_approve`); absent, harnessd's default applies (never on
        stdio, ask on network listeners). Another value is a ``ValueError``.
        A configured ``auth_token`` is sent as ``authToken`` on NDJSON
        network connections, where harnessd expects it.
        """

        try:
            params: JsonObject = {"cwd": str(Path(cwd).resolve()), "provider": provider, "model": model}
            if max_tokens is not None:
                params["maxTokens"] = max_tokens
            if on_disconnect is not None:
                if on_disconnect not in ON_DISCONNECT_VALUES:
                    raise ValueError(f'on_disconnect must be "cancel" or "continue", not {on_disconnect!r}')
                params["onDisconnect"] = on_disconnect
            if sandbox is not None:
                if sandbox not in SANDBOX_VALUES:
                    raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_VALUES)}, not {sandbox!r}")
                params["sandbox"] = sandbox
            if approval_policy is not None:
                if approval_policy not in APPROVAL_POLICY_VALUES:
                    raise ValueError(f'approval_policy must be "never" or "ask", not {approval_policy!r}')
                params["approvalPolicy"] = approval_policy
            if self.config.auth_token is not None and self.config.address is not None:
                params["authToken"] = self.config.auth_token
            return self.request("initialize", params, response_model=InitializeResponse)
        except TimeoutError:
            # A runtime that never answered initialize will not answer
            # shutdown either: waiting for it would triple the caller's timeout.
            self._close(polite=False)
            raise
        except BaseException:
            self.close()
            raise

    def session_prompt(
        self,
        session_id: str,
        content_blocks: list[JsonObject],
        *,
        on_notification: Callable[[Notification], None] | None = None,
        notification_subscription: NotificationSubscription | None = None,
        timeout_seconds: float | None = None,
    ) -> SessionPromptResponse:
        """Run one turn; its response says how it ended.

        With *on_notification*, the session's notifications (those whose
        ``sessionId``, ``parentSessionId`` or ``childSessionId`` is
        *session_id*) are passed to it on this thread, in order, all before
        this returns. A malformed result raises
        :class:`~deepseek_harness.errors.ValidationError` (a ``ValueError``).
        ``timeout_seconds`` (addition) overrides the configured request
        timeout.
        """

        return self.request(
            "session/prompt",
            {"sessionId": session_id, "contentBlocks": content_blocks},
            response_model=SessionPromptResponse,
            timeout_seconds=timeout_seconds,
            on_notification=on_notification,
            notification_filter=_session_filter(session_id),
            notification_subscription=notification_subscription,
        )

    def session_cancel(self, session_id: str, *, timeout_seconds: float | None = None) -> bool:
        """Cancel the session's running turn (harnessd's ``session/cancel``,
        an addition). True when a turn was running; its prompt is then
        answered with status ``"aborted"``."""

        result = self._call("session/cancel", {"sessionId": session_id}, timeout_seconds=timeout_seconds)
        if not isinstance(result, dict) or not isinstance(result.get("cancelled"), bool):
            raise ValidationError(f"session/cancel result must be {{\"cancelled\": bool}}, got {result!r}")
        return result["cancelled"]

    def session_approve(
        self,
        session_id: str,
        approval_id: str,
        outcome: str | ApprovalDecision,
        *,
        message: str | None = None,
        timeout_seconds: float | None = None,
    ) -> bool:
        """Settle a waiting tool call (harnessd's ``session/approve``, an
        addition): *outcome* is ``"allowed-once"``, ``"allowed-for-session"``
        or ``"rejected"`` (or an :class:`~deepseek_harness.models.ApprovalDecision`,
        whose message is used unless *message* is given); *message* is told
        to the model with a rejection. True when accepted. An approval that
        no longer waits raises :class:`~deepseek_harness.errors.InvalidParamsError`
        whose ``data["reason"]`` is ``"not-pending"``."""

        if isinstance(outcome, ApprovalDecision):
            message = message if message is not None else outcome.message
            outcome = outcome.outcome
        if outcome not in APPROVAL_OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(APPROVAL_OUTCOMES)}, not {outcome!r}")
        params: JsonObject = {"sessionId": session_id, "approvalId": approval_id, "outcome": outcome}
        if message is not None:
            params["message"] = message
        return self.request("session/approve", params, response_model=DecisionResponse,
                            timeout_seconds=timeout_seconds).accepted

    def session_answer(
        self,
        session_id: str,
        question_id: str,
        answers: list[QuestionAnswer | JsonObject],
        *,
        timeout_seconds: float | None = None,
    ) -> bool:
        """Answer the model's questions (harnessd's ``session/answer``, an
        addition): one :class:`~deepseek_harness.models.QuestionAnswer` (or
        ``{"id", "selected", "custom"}`` object) per question; ``[]``
        declines. True when accepted; answers that do not fit the questions
        raise :class:`~deepseek_harness.errors.InvalidParamsError`."""

        wire = [QuestionAnswer.model_validate(a).to_wire() for a in answers]
        params: JsonObject = {"sessionId": session_id, "questionId": question_id, "answers": wire}
        return self.request("session/answer", params, response_model=DecisionResponse,
                            timeout_seconds=timeout_seconds).accepted

    def tools_list(self, *, timeout_seconds: float | None = None) -> list[ToolInfo]:
        """The tools the model of this connection's sessions is offered
        (harnessd's ``tools/list``, an addition; after :meth:`initialize`)."""

        response = self.request("tools/list", {}, response_model=ToolsListResponse, timeout_seconds=timeout_seconds)
        return response.tools

    # -- harnessd's session store (additions; docs/protocol.md §4.7-4.10) --------

    def session_list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout_seconds: float | None = None,
    ) -> SessionListResponse:
        """One page of the daemon's sessions, most recently updated first
        (harnessd's ``session/list``).

        ``limit`` is 1..1000 (the daemon's default: 100); ``cursor`` is the
        ``next_cursor`` of the previous page. Bad values raise
        :class:`~deepseek_harness.errors.InvalidParamsError`.
        """

        params: JsonObject = {}
        if limit is not None:
            params["limit"] = limit
        if cursor is not None:
            params["cursor"] = cursor
        return self.request("session/list", params, response_model=SessionListResponse,
                            timeout_seconds=timeout_seconds)

    def iter_sessions(
        self, *, limit: int | None = None, timeout_seconds: float | None = None
    ) -> Iterator[SessionInfo]:
        """Every session, page after page of ``session/list`` (``limit``
        per page). A session updated meanwhile moves to the first page, so
        it may come twice or be missed, as the daemon documents."""

        cursor: str | None = None
        while True:
            page = self.session_list(limit=limit, cursor=cursor, timeout_seconds=timeout_seconds)
            yield from page.sessions
            if page.next_cursor is None or not page.sessions:
                return
            cursor = page.next_cursor

    def session_events(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        timeout_seconds: float | None = None,
    ) -> SessionEventsResponse:
        """A page of the session's logged events with ``seq > after_seq``,
        oldest first (harnessd's ``session/events``).

        ``after_seq`` is -1 or more (the daemon's default: -1, from the
        start), ``limit`` 1..1000 (default 200). A session without a log
        raises :class:`~deepseek_harness.errors.InvalidParamsError` whose
        ``session_id`` is set.
        """

        params: JsonObject = {"sessionId": session_id}
        if after_seq is not None:
            params["afterSeq"] = after_seq
        if limit is not None:
            params["limit"] = limit
        return self.request("session/events", params, response_model=SessionEventsResponse,
                            timeout_seconds=timeout_seconds)

    def iter_session_events(
        self,
        session_id: str,
        *,
        after_seq: int = -1,
        limit: int | None = None,
        timeout_seconds: float | None = None,
    ) -> Iterator[JsonObject]:
        """Every logged event after ``after_seq``, page after page of
        ``session/events`` (``limit`` per page), up to the last one logged
        when the final page was read."""

        while True:
            page = self.session_events(session_id, after_seq=after_seq, limit=limit,
                                       timeout_seconds=timeout_seconds)
            yield from page.events
            if not page.more or not page.events:
                return
            seq = page.events[-1].get("seq")
            if not isinstance(seq, int) or isinstance(seq, bool) or seq <= after_seq:
                raise ValidationError(f"session/events page ends with an event without a later seq: {seq!r}")
            after_seq = seq

    def session_subscribe(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        timeout_seconds: float | None = None,
    ) -> SessionSubscription:
        """Follow a session from this connection (harnessd's
        ``session/subscribe``): its logged events with ``seq > after_seq``
        are replayed first (none when ``after_seq`` is None), then every
        event it logs, whoever runs the turn, until the subscription is
        closed. Returns a :class:`SessionSubscription` (iterable, a context
        manager that unsubscribes).

        Raises :class:`~deepseek_harness.errors.InvalidParamsError` for a
        session without a log (``session_id`` set), a second subscription
        of this connection to the session, or too many subscriptions.
        """

        subscription = SessionSubscription(self, session_id, after_seq)
        params: JsonObject = {"sessionId": session_id}
        if after_seq is not None:
            params["afterSeq"] = after_seq
        # Registered before the request is written: the replay precedes the response.
        with self._state:
            self._subscriptions.append(subscription)
        try:
            response = self.request("session/subscribe", params, response_model=SessionSubscribeResponse,
                                    timeout_seconds=timeout_seconds)
        except BaseException:
            subscription._local_close()
            raise
        subscription._started(response)
        return subscription

    def session_unsubscribe(self, session_id: str, *, timeout_seconds: float | None = None) -> bool:
        """Stop following a session (harnessd's ``session/unsubscribe``).
        True when this connection was subscribed to it. A
        :class:`SessionSubscription` of the session is closed too (its
        queued events stay readable)."""

        unsubscribed = self._unsubscribe(session_id, timeout_seconds)
        with self._state:
            mine = [s for s in self._subscriptions
                    if isinstance(s, SessionSubscription) and s.session_id == session_id and s._active]
        for subscription in mine:
            subscription.unsubscribed = unsubscribed
            subscription._local_close()
        return unsubscribed

    def session_delete(self, session_id: str, *, timeout_seconds: float | None = None) -> bool:
        """Remove an idle session and its log (harnessd's ``session/delete``,
        an addition); its id then starts a new session. True when deleted.
        A session whose turn runs raises
        :class:`~deepseek_harness.errors.SessionBusyError`; one without a log
        :class:`~deepseek_harness.errors.InvalidParamsError` whose
        ``session_id`` is set."""

        return self.request("session/delete", {"sessionId": session_id}, response_model=SessionDeleteResponse,
                            timeout_seconds=timeout_seconds).deleted

    def _unsubscribe(self, session_id: str, timeout_seconds: float | None) -> bool:
        return self.request("session/unsubscribe", {"sessionId": session_id},
                            response_model=SessionUnsubscribeResponse,
                            timeout_seconds=timeout_seconds).unsubscribed

    def request(
        self,
        method: str,
        params: JsonObject | None,
        *,
        response_model: type[ModelT],
        timeout_seconds: float | None = None,
        on_notification: Callable[[Notification], None] | None = None,
        notification_filter: NotificationFilter | None = None,
        notification_subscription: NotificationSubscription | None = None,
    ) -> ModelT:
        """Send a request and return its result validated by *response_model*.

        ``params=None`` sends no ``params``. Raises ``TimeoutError`` after
        ``timeout_seconds`` (default: the configured request timeout),
        :class:`JsonRpcError` for an error response, ``TypeError`` when the
        result is not an object, :class:`TransportClosedError` when the
        runtime goes away. With *on_notification*, notifications accepted by
        *notification_filter* (or queued in *notification_subscription*)
        are passed to it on this thread until the response has arrived,
        then once more.
        """

        result = self._call(
            method,
            params,
            timeout_seconds=timeout_seconds,
            on_notification=on_notification,
            notification_filter=notification_filter,
            notification_subscription=notification_subscription,
        )
        if not isinstance(result, dict):
            raise ResponseTypeError(f"{method} response must be a JSON object")
        return response_model.model_validate(result)

    # ------------------------------------------------------------------ notifications

    def next_notification(self, timeout_seconds: float | None = None) -> Notification:
        """Pop the oldest notification that no subscription took.

        Blocks until one arrives (``timeout_seconds``, an addition, bounds
        the wait with ``TimeoutError``). Raises the queued
        :class:`TransportClosedError` once the runtime has gone away.
        """

        try:
            item = self._notifications.get(timeout=timeout_seconds)
        except queue.Empty:
            raise TimeoutError("no notification arrived in time") from None
        if isinstance(item, BaseException):
            self._notifications.put(item)  # later calls raise it too
            raise item
        return item

    def subscribe_notifications(
        self, notification_filter: NotificationFilter | None = None
    ) -> NotificationSubscription:
        """Queue every notification *notification_filter* accepts (all of
        them when it is None) from now on, instead of the global queue."""

        subscription = NotificationSubscription(self, notification_filter)
        with self._state:
            self._subscriptions.append(subscription)
        return subscription

    def subscribe_session_notifications(self, session_id: str) -> NotificationSubscription:
        """Subscribe to the notifications whose ``sessionId``,
        ``parentSessionId`` or ``childSessionId`` is *session_id*."""

        return self.subscribe_notifications(_session_filter(session_id))

    def _remove_subscription(self, subscription: NotificationSubscription) -> None:
        with self._state:
            try:
                self._subscriptions.remove(subscription)
            except ValueError:
                pass

    # ------------------------------------------------------------------ internals

    def _call(
        self,
        method: str,
        params: JsonObject | None,
        *,
        timeout_seconds: float | None = None,
        on_notification: Callable[[Notification], None] | None = None,
        notification_filter: NotificationFilter | None = None,
        notification_subscription: NotificationSubscription | None = None,
        internal: bool = False,
    ) -> Any:
        """Send *method* and return the raw ``result``."""

        timeout = timeout_seconds if timeout_seconds is not None else self.config.request_timeout_seconds
        deadline = None if timeout is None else time.monotonic() + timeout
        subscription = notification_subscription
        temporary = None
        if on_notification is not None and subscription is None:
            # Opened before the request is written, so nothing can slip past.
            subscription = temporary = self.subscribe_notifications(notification_filter)
        try:
            pending = self._send(method, params, internal=internal)
            try:
                if on_notification is not None and subscription is not None:
                    self._wait_draining(pending, subscription, on_notification, deadline)
                elif not pending.event.wait(None if deadline is None else max(deadline - time.monotonic(), 0)):
                    raise TimeoutError(f"{method} timed out waiting for DeepSeek Harness runtime")
            except BaseException:
                self._forget(pending)
                raise
        finally:
            if temporary is not None:
                temporary.close()
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _wait_draining(
        self,
        pending: _Pending,
        subscription: NotificationSubscription,
        on_notification: Callable[[Notification], None],
        deadline: float | None,
    ) -> None:
        pending.add_waker(subscription._wake)
        while True:
            subscription.drain(on_notification)
            if pending.event.is_set():
                # Everything written before the response is queued by now.
                subscription.drain(on_notification)
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{pending.method} timed out waiting for DeepSeek Harness runtime")
            subscription._wait(pending.event.is_set, remaining)

    def _send(self, method: str, params: JsonObject | None, *, internal: bool = False) -> _Pending:
        link = self._link
        if link is None:
            raise TransportClosedError(_NOT_RUNNING)
        if link.closing and not internal:
            raise TransportClosedError(_RUNTIME_CLOSED)
        request_id = str(uuid.uuid4())
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        payload = json.dumps(frame, separators=(",", ":")).encode("ascii")
        pending = _Pending(request_id, method, link)
        with self._state:
            if link.error is not None:
                raise _copy_closed(link.error)
            self._pending[request_id] = pending
        try:
            with self._write_lock:
                link.channel.write_message(payload)
        except OSError as exc:
            with self._state:
                self._pending.pop(request_id, None)
            log.debug("writing %s failed: %s", method, exc)
            raise link.channel.closed_error(_WRITE_FAILED) from exc
        return pending

    def _forget(self, pending: _Pending) -> None:
        with self._state:
            if self._pending.get(pending.id) is pending:
                del self._pending[pending.id]
                self._forgotten.append(pending.id)

    def _read_loop(self, link: _Link) -> None:
        channel = link.channel
        try:
            while True:
                data = channel.read_message()
                if data is None:
                    break
                if not data or data.isspace():
                    continue
                try:
                    message = json.loads(data)
                except (ValueError, RecursionError):
                    # Runtimes may print warnings on stdout; they are not frames.
                    log.debug("ignoring non-JSON line from runtime: %r", bytes(data[:200]))
                    continue
                del data
                if not isinstance(message, dict):
                    log.debug("ignoring non-object frame from runtime")
                    continue
                try:
                    self._handle_message(message)
                except Exception:
                    log.exception("handling a frame from the runtime failed")
        except OSError as exc:
            log.debug("reading from the runtime failed: %s", exc)
        except Exception:  # pragma: no cover - defensive
            log.exception("reader thread failed")
        finally:
            reason = _RUNTIME_CLOSED if link.closing else channel.eof_reason
            try:
                error = channel.closed_error(reason)
            except Exception:  # pragma: no cover - defensive
                error = TransportClosedError(reason)
            self._fail_link(link, error)

    def _fail_link(self, link: _Link, error: TransportClosedError) -> None:
        with self._state:
            if link.error is not None:
                return
            link.error = error
            pending = [p for p in self._pending.values() if p.link is link]
            for p in pending:
                del self._pending[p.id]
            subscriptions, self._subscriptions = self._subscriptions, []
        for p in pending:
            p.settle(error=_copy_closed(error))
        for subscription in subscriptions:
            subscription._fail(_copy_closed(error))
        self._notifications.put(_copy_closed(error))

    def _handle_message(self, message: dict[str, Any]) -> None:
        """Route one parsed frame (called by the reader thread)."""

        has_id = "id" in message
        if "method" in message:
            if has_id:
                # A request from the runtime: the protocol has none, so it is
                # neither answered nor taken as a response.
                log.warning(
                    "ignoring request frame from runtime (method %r, id %r)",
                    message.get("method"),
                    message.get("id"),
                )
                return
            method = message["method"]
            if not isinstance(method, str):
                log.debug("ignoring notification with non-string method %r", method)
                return
            params = message.get("params")
            self._dispatch(Notification(method, params if isinstance(params, dict) else {}))
            return
        if has_id:
            self._resolve(message)
            return
        log.debug("ignoring frame with neither id nor method")

    def _dispatch(self, notification: Notification) -> None:
        with self._state:
            subscriptions = list(self._subscriptions)
        delivered = False
        for subscription in subscriptions:
            accept = subscription._filter
            if accept is not None:
                try:
                    if not accept(notification):
                        continue
                except Exception as exc:
                    self._remove_subscription(subscription)
                    subscription._fail(exc)
                    continue
            if subscription._put(notification):
                delivered = True
        if not delivered:
            self._notifications.put(notification)

    def _resolve(self, message: dict[str, Any]) -> None:
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            log.debug("ignoring response with id %r", request_id)
            return
        key = str(request_id)
        with self._state:
            pending = self._pending.pop(key, None)
            forgotten = pending is None and key in self._forgotten
        if pending is None:
            if not forgotten:
                log.debug("ignoring response with unknown id %r", request_id)
            return
        error = message.get("error")
        if error is not None:
            pending.settle(error=error_from_response(error))
        else:
            pending.settle(result=message.get("result"))


def _copy_closed(error: TransportClosedError) -> TransportClosedError:
    # One exception object per raise: tracebacks of different threads
    # would otherwise pile up on a shared instance.
    return TransportClosedError(str(error), exit_code=error.exit_code, stderr_tail=error.stderr_tail)
