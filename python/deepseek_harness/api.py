"""High-level API: a harness that owns one runtime, its sessions, and the
result of a turn.

``DeepSeekHarness`` starts the runtime lazily, on first use, and keeps it for
later turns. ``Session.run`` sends one prompt and returns when the prompt's
response arrives: that response says how the turn ended, and every
notification of the turn precedes it on the wire.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
import ssl
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Sequence, Union

from .client import HarnessClient, HarnessConfig, NotificationFilter, SessionSubscription, _session_filter
from .errors import HarnessError, InvalidParamsError
from .models import (
    ApprovalDecision,
    ApprovalRequest,
    JsonObject,
    Notification,
    QuestionAnswer,
    QuestionRequest,
    ServerInfo,
    SessionEventsResponse,
    SessionInfo,
    SessionListResponse,
    ToolInfo,
)

__all__ = [
    "ApprovalHandler",
    "QuestionHandler",
    "DeepSeekHarnessConfig",
    "DeepSeekHarness",
    "Session",
    "TurnResult",
    "normalize_input",
    "final_response",
]

log = logging.getLogger("deepseek_harness")

#: Decides a tool call that waits for approval (``approvalPolicy`` ``"ask"``):
#: returns an :class:`~deepseek_harness.models.ApprovalDecision`, an outcome
#: string (``"allowed-once"``, ``"allowed-for-session"``, ``"rejected"``),
#: ``True`` (allowed once) or ``False``/``None`` (rejected); may be async.
ApprovalHandler = Callable[[ApprovalRequest], Union[ApprovalDecision, str, bool, None, Awaitable[Any]]]

#: Answers the model's questions (``ask_user_question``): returns one
#: :class:`~deepseek_harness.models.QuestionAnswer` (or answer object) per
#: question, or ``[]``/``None`` to decline; may be async.
QuestionHandler = Callable[[QuestionRequest], Union[Sequence[Union[QuestionAnswer, JsonObject]], None, Awaitable[Any]]]

#: Told to the model when a call waits and nobody may decide it.
NO_HANDLER_MESSAGE = "rejected: the client has no approval handler"


@dataclass(slots=True)
class DeepSeekHarnessConfig:
    """Options of :class:`DeepSeekHarness`.

    ``cwd`` (default: this process's working directory) is the agent's
    working directory: sent with ``initialize`` and as ``DSH_CWD``.
    ``runtime_cwd`` (default: ``cwd``) is where the runtime process runs.
    ``session_root`` becomes ``DSH_SESSION_ROOT``, ``base_url`` and
    ``api_key`` ``DEEPSEEK_BASE_URL`` and ``DEEPSEEK_API_KEY``; ``cordis``
    sets ``DSH_CORDIS_CONFIG``, which harnessd does not use. The ``deepseek``
    provider needs an API key; ``provider="scripted"`` runs without one.

    Additions: ``max_tokens`` (harnessd's ``maxTokens``); ``address``,
    ``auth_token``, ``ssl_context``, ``ca_file`` to use a listening harnessd (see
    :class:`~deepseek_harness.client.HarnessConfig`); ``on_disconnect``
    (harnessd's ``onDisconnect``: ``"cancel"``, the daemon's default, or
    ``"continue"`` to let turns of a dropped network connection run on);
    ``sandbox`` (harnessd's ``initialize.sandbox``, with ``cwd`` the agent's
    other limit: ``"read-only"``, ``"workspace-write"``, the daemon's
    default, or ``"danger-full-access"``); ``approval_policy`` (harnessd's
    ``initialize.approvalPolicy``: ``"never"`` or ``"ask"``; absent, the
    daemon's default: never on stdio, ask on network listeners).
    """

    provider: str = "deepseek"
    model: str = "deepseek-v4-flash"
    cwd: str | None = None
    runtime_cwd: str | None = None
    session_root: str | None = None
    cordis: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    runtime_bin: str | None = None
    launch_args_override: tuple[str, ...] | None = None
    request_timeout_seconds: float | None = None
    shutdown_timeout_seconds: float | None = 1.0
    base_url: str | None = None
    api_key: str | None = None
    max_tokens: int | None = None
    address: str | None = None
    auth_token: str | None = None
    ssl_context: ssl.SSLContext | None = None
    on_disconnect: str | None = None
    ca_file: str | os.PathLike[str] | None = None
    sandbox: str | None = None
    approval_policy: str | None = None


@dataclass(slots=True)
class TurnResult:
    """What one turn produced.

    ``status`` (``"ok"``, ``"error"`` or ``"aborted"``) and ``reason`` (the
    TurnEndReason object) come from the prompt's response. ``events`` are
    this session's events of the turn, ``notifications`` the notifications
    of this session and of its direct subagents' start and finish, in
    arrival order. ``final_response`` is the text of the last
    ``assistant/message`` event, ``""`` when there is none.
    """

    session_id: str
    status: str
    final_response: str
    events: list[JsonObject]
    notifications: list[Notification]
    session_root: str | None = None
    reason: JsonObject = field(default_factory=dict)


def normalize_input(input: str | Sequence[JsonObject]) -> list[JsonObject]:
    """A string becomes one text block; a list of content blocks is kept."""

    if isinstance(input, str):
        return [{"type": "text", "text": input}]
    if isinstance(input, list):
        return input
    if isinstance(input, tuple):
        return list(input)
    raise TypeError(f"input must be a string or a list of content blocks, not {type(input).__name__}")


def final_response(events: Sequence[JsonObject]) -> str:
    """Text of the last ``assistant/message`` among *events*, or ``""``."""

    for event in reversed(events):
        if not isinstance(event, dict) or event.get("type") != "assistant/message":
            continue
        data = event.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            continue
        return "".join(
            str(block.get("text") or "")
            for block in data["content"]
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


class DeepSeekHarness:
    """One runtime and the sessions run on it.

    ``DeepSeekHarness(config)`` or ``DeepSeekHarness(**options)`` (both at
    once is a ``TypeError``). The runtime starts at the first :meth:`run`,
    :meth:`start_session` or ``with`` block, and stays until :meth:`close`;
    a closed harness starts again when used.
    """

    def __init__(self, config: DeepSeekHarnessConfig | None = None, **kwargs: Any) -> None:
        if config is not None and kwargs:
            raise TypeError("pass either a DeepSeekHarnessConfig or keyword options, not both")
        self.config = config if config is not None else DeepSeekHarnessConfig(**kwargs)
        config = self.config
        self._cwd = Path(config.cwd or Path.cwd()).resolve()
        self._runtime_cwd = Path(config.runtime_cwd).resolve() if config.runtime_cwd else self._cwd
        env = {str(k): str(v) for k, v in config.env.items()}
        if config.session_root is not None:
            env["DSH_SESSION_ROOT"] = os.fspath(config.session_root)
        if config.cordis is not None:
            env["DSH_CORDIS_CONFIG"] = os.fspath(config.cordis)
        env["DSH_CWD"] = str(self._cwd)
        if config.base_url is not None:
            env["DEEPSEEK_BASE_URL"] = config.base_url
        if config.api_key is not None:
            env["DEEPSEEK_API_KEY"] = config.api_key
        self._client = HarnessClient(
            HarnessConfig(
                runtime_bin=config.runtime_bin,
                launch_args_override=config.launch_args_override,
                cwd=str(self._runtime_cwd),
                env=env,
                request_timeout_seconds=config.request_timeout_seconds,
                shutdown_timeout_seconds=config.shutdown_timeout_seconds,
                address=config.address,
                auth_token=config.auth_token,
                ssl_context=config.ssl_context,
                ca_file=config.ca_file,
            )
        )
        self._lock = threading.RLock()
        self._started = False
        self._server_info: ServerInfo | None = None

    @property
    def client(self) -> HarnessClient:
        """The low-level client (available before the runtime starts)."""

        return self._client

    @property
    def server_info(self) -> ServerInfo | None:
        """``serverInfo`` from the last ``initialize`` (addition)."""

        return self._server_info

    def start(self) -> None:
        """Start the runtime and send ``initialize``, unless already done.

        If ``initialize`` fails, the runtime is closed and the error raised.
        """

        with self._lock:
            if self._started:
                return
            self._client.start()
            response = self._client.initialize(
                cwd=str(self._cwd),
                provider=self.config.provider,
                model=self.config.model,
                max_tokens=self.config.max_tokens,
                on_disconnect=self.config.on_disconnect,
                sandbox=self.config.sandbox,
                approval_policy=self.config.approval_policy,
            )
            self._server_info = response.serverInfo
            self._started = True

    def close(self) -> None:
        """Shut the runtime down (see :meth:`HarnessClient.close`)."""

        with self._lock:
            self._started = False
            self._client.close()

    def start_session(self, session_id: str | None = None) -> "Session":
        """A session handle (default id ``session-<hex>``). harnessd creates
        the session at its first prompt; an existing id continues it."""

        self.start()
        return Session(self, session_id if session_id is not None else f"session-{uuid.uuid4().hex}")

    def run(
        self,
        input: str | list[JsonObject],
        *,
        session_id: str | None = None,
        on_notification: Callable[[Notification], None] | None = None,
        approval_handler: ApprovalHandler | None = None,
        question_handler: QuestionHandler | None = None,
    ) -> TurnResult:
        """Run one turn on a (new, unless *session_id* is given) session.
        *approval_handler* and *question_handler* (additions) as in
        :meth:`Session.run`."""

        return self.start_session(session_id).run(
            input, on_notification=on_notification, approval_handler=approval_handler,
            question_handler=question_handler)

    def list_sessions(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> SessionListResponse:
        """One page of the runtime's sessions, most recently updated first
        (addition: harnessd's ``session/list``); pass ``next_cursor`` as
        ``cursor`` for the next page."""

        self.start()
        return self._client.session_list(limit=limit, cursor=cursor)

    def iter_sessions(self, *, limit: int | None = None) -> Iterator[SessionInfo]:
        """Every session of the runtime, over all pages of
        ``session/list`` (addition)."""

        self.start()
        return self._client.iter_sessions(limit=limit)

    def tools_list(self) -> list[ToolInfo]:
        """The tools the agent is offered (addition: harnessd's ``tools/list``)."""

        self.start()
        return self._client.tools_list()

    def __enter__(self) -> "DeepSeekHarness":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _own_event_seq(notification: Notification, session_id: str) -> int | None:
    if notification.method != "session.event" or notification.payload.get("sessionId") != session_id:
        return None
    event = notification.payload.get("event")
    seq = event.get("seq") if isinstance(event, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _drop_before_turn_start(session_id: str, notifications: list[Notification], events: list[JsonObject]) -> None:
    """Keep the turn's events from its ``turn/start`` on: events of earlier
    turns only come here as the replay of a concurrent session/subscribe."""

    starts = [i for i, event in enumerate(events) if event.get("type") == "turn/start"]
    if not starts or starts[-1] == 0:
        return
    first = events[starts[-1]].get("seq")
    if not isinstance(first, int):
        return
    del events[: starts[-1]]
    notifications[:] = [
        n for n in notifications
        if (seq := _own_event_seq(n, session_id)) is None or seq >= first
    ]


def _settled(value: Any) -> Any:
    """A handler's result, awaited when it is awaitable (an async handler).
    The turn's notifications are handled on the caller's thread, which may
    run an event loop of its own: the coroutine then runs on a fresh loop in
    a worker thread, since this thread is blocked until the turn ends."""

    if not inspect.isawaitable(value):
        return value

    async def wait() -> Any:
        return await value

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def _as_decision(value: Any) -> ApprovalDecision:
    if isinstance(value, ApprovalDecision):
        return value
    if isinstance(value, str):
        return ApprovalDecision(outcome=value)
    if value is True:
        return ApprovalDecision.allow_once()
    if value is False or value is None:
        return ApprovalDecision.reject()
    raise TypeError(f"an approval handler returns an ApprovalDecision, an outcome or a bool, not {value!r}")


def _decide(
    client: HarnessClient,
    notification: Notification,
    approval_handler: ApprovalHandler | None,
    question_handler: QuestionHandler | None,
) -> None:
    """Answers an approval/requested or question/requested event of the
    turn (its own session's, or a subagent's): the handler decides; without
    one the SDK rejects the call and declines the questions (fail closed)."""

    if notification.method != "session.event":
        return
    session_id = notification.payload.get("sessionId")
    event = notification.payload.get("event")
    if not isinstance(session_id, str) or not isinstance(event, dict):
        return
    kind = event.get("type")
    try:
        if kind == "approval/requested":
            request = ApprovalRequest.from_event(session_id, event.get("data"))
            if approval_handler is None:
                decision = ApprovalDecision.reject(NO_HANDLER_MESSAGE)
                log.info("rejecting %s call %s: no approval handler", request.tool_name, request.call_id)
            else:
                decision = _as_decision(_settled(approval_handler(request)))
            client.session_approve(session_id, request.approval_id, decision)
        elif kind == "question/requested":
            question = QuestionRequest.from_event(session_id, event.get("data"))
            answers = _settled(question_handler(question)) if question_handler is not None else None
            client.session_answer(session_id, question.question_id, list(answers or []))
    except InvalidParamsError as exc:
        # Settled meanwhile by another client, a timeout or a cancel.
        if isinstance(exc.data, dict) and exc.data.get("reason") == "not-pending":
            log.debug("decision for %s no longer pending", session_id)
            return
        raise


_DECISION_EVENTS = ("approval/requested", "question/requested")


def _turn_filter(session_id: str) -> NotificationFilter:
    """The session's notifications (as ``subscribe_session_notifications``
    takes them), plus the approval and question requests of the subagents
    its turns start, at any depth: a subagent's tool call waits for a
    decision in the subagent's own session. Runs on the reader thread, in
    arrival order, so a child is known before its first event."""

    own = _session_filter(session_id)
    family = {session_id}

    def accept(notification: Notification) -> bool:
        payload = notification.payload
        if notification.method == "subagent.started" and payload.get("parentSessionId") in family:
            child = payload.get("childSessionId")
            if isinstance(child, str):
                family.add(child)
        if own(notification):
            return True
        event = payload.get("event")
        return (notification.method == "session.event" and payload.get("sessionId") in family
                and isinstance(event, dict) and event.get("type") in _DECISION_EVENTS)

    return accept


class Session:
    """One conversation on a harness, by id.

    ``approval_handler`` and ``question_handler`` (additions) answer what
    this session's turns wait for, unless :meth:`run` is given its own; see
    :data:`ApprovalHandler` and :data:`QuestionHandler`. Without them, a
    tool call that waits for approval is rejected and questions are
    declined.
    """

    def __init__(
        self,
        harness: DeepSeekHarness,
        session_id: str,
        *,
        approval_handler: ApprovalHandler | None = None,
        question_handler: QuestionHandler | None = None,
    ) -> None:
        self.harness = harness
        self.id = session_id
        self.approval_handler = approval_handler
        self.question_handler = question_handler

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def run(
        self,
        input: str | list[JsonObject],
        *,
        on_notification: Callable[[Notification], None] | None = None,
        timeout_seconds: float | None = None,
        approval_handler: ApprovalHandler | None = None,
        question_handler: QuestionHandler | None = None,
    ) -> TurnResult:
        """Send one prompt and return the settled turn.

        *on_notification* gets each of the turn's notifications on this
        thread, in order, all before ``run`` returns. If it raises, or the
        response does not arrive within ``timeout_seconds`` (addition;
        default: the configured request timeout), the turn is cancelled
        (addition: harnessd's ``session/cancel``) and the exception raised.

        *approval_handler* and *question_handler* (additions; default: the
        session's) are called on this thread, after *on_notification*, for
        each ``approval/requested`` and ``question/requested`` event of the
        turn; their decision is sent with ``session/approve`` or
        ``session/answer``. Without a handler the SDK rejects the call (its
        message says why) or declines the questions (``answers: []``). A
        handler that raises cancels the turn, like *on_notification*.
        """

        blocks = normalize_input(input)
        self.harness.start()
        client = self.harness.client
        approvals = approval_handler if approval_handler is not None else self.approval_handler
        questions = question_handler if question_handler is not None else self.question_handler
        notifications: list[Notification] = []
        events: list[JsonObject] = []
        callback_failed = False
        last_seq: int | None = None

        def collect(notification: Notification) -> None:
            nonlocal callback_failed, last_seq
            if notification.method == "session.event" and notification.payload.get("sessionId") != self.id:
                # A subagent's approval or question (_turn_filter): answered,
                # not part of this turn's notifications.
                try:
                    _decide(client, notification, approvals, questions)
                except BaseException:
                    callback_failed = True
                    raise
                return
            seq = _own_event_seq(notification, self.id)
            if seq is not None:
                # A session/subscribe of this connection may replay events
                # of the session while the turn runs: the turn's own events
                # come in seq order, a replayed one is not above them.
                if last_seq is not None and seq <= last_seq:
                    return
                last_seq = seq
            notifications.append(notification)
            try:
                if on_notification is not None:
                    on_notification(notification)
                _decide(client, notification, approvals, questions)
            except BaseException:
                callback_failed = True
                raise
            if notification.method == "session.event":
                event = notification.payload.get("event")
                if isinstance(event, dict):
                    events.append(event)

        with client.subscribe_notifications(_turn_filter(self.id)) as subscription:
            try:
                response = client.session_prompt(
                    self.id,
                    blocks,
                    on_notification=collect,
                    notification_subscription=subscription,
                    timeout_seconds=timeout_seconds,
                )
            except TimeoutError:
                self._cancel_without_waiting()
                raise
            except BaseException:
                if callback_failed:
                    self._cancel_without_waiting()
                raise
        _drop_before_turn_start(self.id, notifications, events)
        return TurnResult(
            session_id=self.id,
            status=response.status,
            final_response=final_response(events),
            events=events,
            notifications=notifications,
            session_root=self.harness.config.session_root,
            reason=response.reason,
        )

    def cancel(self, *, timeout_seconds: float | None = None) -> bool:
        """Cancel this session's running turn (addition); True when one ran."""

        return self.harness.client.session_cancel(self.id, timeout_seconds=timeout_seconds)

    def events(self, *, after_seq: int | None = None, limit: int | None = None) -> SessionEventsResponse:
        """A page of this session's logged events after ``after_seq``
        (addition: harnessd's ``session/events``). A session that was never
        prompted raises :class:`~deepseek_harness.errors.InvalidParamsError`."""

        self.harness.start()
        return self.harness.client.session_events(self.id, after_seq=after_seq, limit=limit)

    def iter_events(self, *, after_seq: int = -1, limit: int | None = None) -> Iterator[JsonObject]:
        """All of this session's logged events after ``after_seq``, over
        every page (addition)."""

        self.harness.start()
        return self.harness.client.iter_session_events(self.id, after_seq=after_seq, limit=limit)

    def subscribe(self, *, after_seq: int | None = None) -> SessionSubscription:
        """Follow this session's events, whoever runs its turns (addition:
        harnessd's ``session/subscribe``; see
        :class:`~deepseek_harness.client.SessionSubscription`). Close it, or
        use it in a ``with`` block, to unsubscribe."""

        self.harness.start()
        return self.harness.client.session_subscribe(self.id, after_seq=after_seq)

    def unsubscribe(self) -> bool:
        """Stop following this session (addition); True when it was
        followed."""

        return self.harness.client.session_unsubscribe(self.id)

    def _cancel_without_waiting(self) -> None:
        # The caller is already on its way out with an exception; the turn
        # should not keep the session busy, but nobody waits for the answer.
        client = self.harness.client
        try:
            pending = client._send("session/cancel", {"sessionId": self.id})
            client._forget(pending)
        except HarnessError as exc:
            log.debug("cancelling %s failed: %s", self.id, exc)
