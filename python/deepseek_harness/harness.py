"""High-level API: configuration, the harness and its sessions."""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import __version__
from .client import DEFAULT, HarnessClient
from .errors import HarnessError, RequestTimeout, RuntimeNotFoundError
from .types import (
    Notification,
    PromptInput,
    SessionPromptResponse,
    TurnResult,
    content_blocks,
    message_text,
    session_log_filename,
)

__all__ = ["HarnessConfig", "DeepSeekHarness", "Session", "client_from_config", "find_runtime_bin"]

log = logging.getLogger("deepseek_harness")

_SESSION_KEYS = ("sessionId", "parentSessionId", "childSessionId")


def find_runtime_bin(runtime_bin: str | os.PathLike[str] | None = None) -> str:
    """Locate harnessd: *runtime_bin*, else ``$HARNESSD_BIN``, else ``harnessd`` on PATH."""

    candidates: list[tuple[str, str]] = []
    if runtime_bin is not None:
        candidates.append(("runtime_bin", os.fspath(runtime_bin)))
    elif os.environ.get("HARNESSD_BIN"):
        candidates.append(("HARNESSD_BIN", os.environ["HARNESSD_BIN"]))
    else:
        candidates.append(("PATH", "harnessd"))
    source, name = candidates[0]
    path = Path(name).expanduser()
    if os.sep in name or (os.altsep and os.altsep in name):
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.resolve())
        raise RuntimeNotFoundError(f"harnessd binary from {source} not found or not executable: {path}")
    found = shutil.which(name)
    if found:
        return found
    if path.is_file() and os.access(path, os.X_OK):
        return str(path.resolve())
    if source == "PATH":
        raise RuntimeNotFoundError(
            "harnessd binary not found: set HarnessConfig.runtime_bin or $HARNESSD_BIN, "
            "or put harnessd on PATH"
        )
    raise RuntimeNotFoundError(f"harnessd binary from {source} not found on PATH: {name!r}")


@dataclass
class HarnessConfig:
    """How to reach the runtime and what to initialize it with.

    With *address* (``host:port``) the harness connects to a running
    ``harnessd --listen tcp://...``; otherwise it spawns ``runtime_bin
    --stdio`` (found via *runtime_bin*, ``$HARNESSD_BIN`` or PATH). The
    session root, cwd and DeepSeek settings are handed to a spawned runtime
    as ``DSH_SESSION_ROOT``, ``DSH_CWD``, ``DEEPSEEK_BASE_URL`` and
    ``DEEPSEEK_API_KEY`` (only those that are set); *env* adds more
    variables. *cwd*, *provider*, *model* and *max_tokens* are sent with
    ``initialize``. Timeouts are in seconds; ``request_timeout=None`` waits
    forever.
    """

    runtime_bin: str | os.PathLike[str] | None = None
    address: str | None = None
    session_root: str | os.PathLike[str] | None = None
    cwd: str | os.PathLike[str] | None = None
    provider: str | None = "scripted"
    model: str | None = None
    max_tokens: int | None = None
    deepseek_base_url: str | None = None
    deepseek_api_key: str | None = field(default=None, repr=False)
    request_timeout: float | None = 600.0
    shutdown_timeout: float = 5.0
    extra_args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def runtime_command(self) -> list[str]:
        """``[harnessd, "--stdio", *extra_args]``."""

        return [find_runtime_bin(self.runtime_bin), "--stdio", *map(str, self.extra_args)]

    def runtime_env(self) -> dict[str, str]:
        """Variables set for a spawned runtime on top of ``os.environ``."""

        env = {str(k): str(v) for k, v in self.env.items()}
        if self.session_root is not None:
            env["DSH_SESSION_ROOT"] = str(Path(self.session_root).expanduser().resolve())
        if self.cwd is not None:
            env["DSH_CWD"] = str(Path(self.cwd).expanduser().resolve())
        if self.deepseek_base_url is not None:
            env["DEEPSEEK_BASE_URL"] = self.deepseek_base_url
        if self.deepseek_api_key is not None:
            env["DEEPSEEK_API_KEY"] = self.deepseek_api_key
        return env

    def initialize_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "protocolVersion": 1,
            "clientInfo": {"name": "deepseek-harness-python", "version": __version__},
        }
        if self.cwd is not None:
            params["cwd"] = str(Path(self.cwd).expanduser().resolve())
        if self.provider is not None:
            params["provider"] = self.provider
        if self.model is not None:
            params["model"] = self.model
        if self.max_tokens is not None:
            params["maxTokens"] = self.max_tokens
        return params

    def resolved_session_root(self) -> Path | None:
        """Where session logs go, when it can be known from here.

        For a spawned runtime: *session_root*, else ``DSH_SESSION_ROOT`` of
        its environment, else the protocol default ``./.sessions``. For a
        TCP daemon only an explicit *session_root* is reported.
        """

        if self.session_root is not None:
            return Path(self.session_root).expanduser().resolve()
        if self.address is not None:
            return None
        root = self.env.get("DSH_SESSION_ROOT") or os.environ.get("DSH_SESSION_ROOT") or ".sessions"
        return Path(root).expanduser().resolve()


def client_from_config(config: HarnessConfig) -> HarnessClient:
    """A (not yet started) :class:`HarnessClient` for *config*."""

    common = dict(request_timeout=config.request_timeout, shutdown_timeout=config.shutdown_timeout)
    if config.address is not None:
        return HarnessClient(address=config.address, **common)
    return HarnessClient(config.runtime_command(), env=config.runtime_env(), **common)


class DeepSeekHarness:
    """A started and initialized runtime connection; use as a context manager.

    ``DeepSeekHarness(config)`` or ``DeepSeekHarness(**fields)`` or both
    (keyword fields override the config).
    """

    def __init__(self, config: HarnessConfig | None = None, **overrides: Any) -> None:
        config = config or HarnessConfig()
        if overrides:
            config = dataclasses.replace(config, **overrides)
        self.config = config
        self._client: HarnessClient | None = None
        self.initialize_result: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> HarnessClient:
        if self._client is None:
            raise HarnessError("harness not started (use it as a context manager or call start())")
        return self._client

    @property
    def server_info(self) -> dict[str, Any] | None:
        return self.initialize_result.get("serverInfo") if self.initialize_result else None

    @property
    def session_root(self) -> Path | None:
        return self.config.resolved_session_root()

    def start(self) -> "DeepSeekHarness":
        """Start the client and send ``initialize``. Idempotent."""

        with self._lock:
            if self._client is not None:
                return self
            client = client_from_config(self.config)
            client.start()
            try:
                self.initialize_result = client.initialize(**self.config.initialize_params())
            except BaseException:
                client.close()
                raise
            self._client = client
        return self

    def close(self) -> None:
        """Send ``shutdown``, close the connection and reap the runtime. Idempotent."""

        client = self._client
        if client is not None:
            client.close()

    def session(self, id: str | None = None) -> "Session":
        """A session handle; a fresh uuid4 id when *id* is None. The runtime
        creates the session at its first prompt and continues an existing one."""

        if id is None:
            id = str(uuid.uuid4())
        if not isinstance(id, str) or not id:
            raise ValueError("session id must be a non-empty string")
        return Session(self, id)

    def __enter__(self) -> "DeepSeekHarness":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


_DONE = object()


class Session:
    """One conversation, identified by its id."""

    def __init__(self, harness: DeepSeekHarness, session_id: str) -> None:
        self.harness = harness
        self.id = session_id

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    @property
    def log_path(self) -> Path | None:
        root = self.harness.session_root
        return None if root is None else root / session_log_filename(self.id)

    def cancel(self, timeout: float | None | Any = DEFAULT) -> bool:
        """Cancel this session's running turn; True when one was running."""

        return self.harness.client.session_cancel(self.id, timeout=timeout)

    def run(
        self,
        input: PromptInput,
        on_notification: Callable[[Notification], Any] | None = None,
        *,
        timeout: float | None | Any = DEFAULT,
    ) -> TurnResult:
        """Send one prompt, wait for the turn to settle and return its result.

        *on_notification* is called on the calling thread with every
        notification of the turn (this session's and its subagents'), in
        order, all before ``run`` returns. If it raises, the turn is
        cancelled, and the exception is re-raised once the turn settled.

        Raises :class:`SessionBusyError` when the session already runs a
        prompt, :class:`RpcError` for other error responses,
        :class:`ProtocolError` for a malformed result and
        :class:`RequestTimeout` after *timeout* seconds (the turn is then
        cancelled on a best-effort basis).
        """

        client = self.harness.client
        if timeout is DEFAULT:
            timeout = client.request_timeout
        params = {"sessionId": self.id, "contentBlocks": content_blocks(input)}
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        tracked = {self.id}

        def collect(notification: Notification) -> None:
            # Runs on the reader thread, in frame order.
            params = notification.params
            if notification.method == "subagent.started" and params.get("parentSessionId") in tracked:
                child = params.get("childSessionId")
                if isinstance(child, str):
                    tracked.add(child)
            for key in _SESSION_KEYS:
                value = params.get(key)
                if isinstance(value, str) and value in tracked:
                    inbox.put(notification)
                    return

        notifications: list[Notification] = []
        callback_error: BaseException | None = None
        subscription = client.subscribe_notifications(collect)
        try:
            pending = client.request_async("session/prompt", params)
            pending.add_done_callback(lambda _p: inbox.put(_DONE))
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                while True:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise queue.Empty
                    item = inbox.get(timeout=remaining)
                    if item is _DONE:
                        break
                    notifications.append(item)
                    if on_notification is not None and callback_error is None:
                        try:
                            on_notification(item)
                        except BaseException as exc:  # includes KeyboardInterrupt
                            callback_error = exc
                            self._cancel_quietly(client)
            except queue.Empty:
                pending.abandon()
                self._cancel_quietly(client)
                if callback_error is not None:
                    raise callback_error
                raise RequestTimeout(
                    f"session/prompt ({self.id}): no response within {timeout:g}s; the turn was cancelled",
                    method="session/prompt",
                    timeout=timeout,
                ) from None
            except BaseException:
                pending.abandon()
                self._cancel_quietly(client)
                raise
            if callback_error is not None:
                raise callback_error
            response = SessionPromptResponse.from_result(pending.result(0))
        finally:
            subscription.unsubscribe()
        return self._turn_result(response, notifications)

    def _cancel_quietly(self, client: HarnessClient) -> None:
        try:
            client.request(
                "session/cancel",
                {"sessionId": self.id},
                timeout=min(5.0, client.shutdown_timeout or 5.0),
            )
        except HarnessError as exc:
            log.debug("cancelling %s failed: %s", self.id, exc)

    def _turn_result(self, response: SessionPromptResponse, notifications: list[Notification]) -> TurnResult:
        events: list[dict[str, Any]] = []
        for notification in notifications:
            event = notification.event
            if event is not None and notification.params.get("sessionId") == self.id:
                events.append(event)
        final: str | None = None
        for event in reversed(events):
            if event.get("type") == "assistant/message":
                data = event.get("data")
                content = data.get("content") if isinstance(data, dict) else None
                final = message_text(content if isinstance(content, list) else [])
                break
        return TurnResult(
            session_id=self.id,
            status=response.status,
            reason=response.reason,
            final_response=final,
            events=events,
            notifications=notifications,
            session_root=self.harness.session_root,
        )
