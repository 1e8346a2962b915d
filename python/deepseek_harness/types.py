"""Plain data types exchanged with the runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import ProtocolError

__all__ = [
    "ContentBlock",
    "PromptInput",
    "Notification",
    "SessionPromptResponse",
    "TurnResult",
    "PROMPT_STATUSES",
    "text_block",
    "content_blocks",
    "message_text",
    "session_log_filename",
]

ContentBlock = dict[str, Any]
#: What :meth:`Session.run` and :meth:`HarnessClient.session_prompt` accept:
#: a plain string (sent as one text block) or a sequence of content blocks.
PromptInput = str | Sequence[Mapping[str, Any]]

#: The values ``session/prompt`` may answer in ``status`` (PROTOCOL.md §4).
PROMPT_STATUSES = frozenset({"ok", "error", "aborted"})


def text_block(text: str) -> ContentBlock:
    """A ``{"type": "text", "text": TEXT}`` content block."""

    return {"type": "text", "text": text}


def content_blocks(content: PromptInput) -> list[ContentBlock]:
    """Normalise prompt input to a non-empty list of content blocks."""

    if isinstance(content, str):
        return [text_block(content)]
    if isinstance(content, (bytes, bytearray)):
        raise TypeError("prompt content must be str or a sequence of content blocks, not bytes")
    blocks: list[ContentBlock] = []
    for block in content:
        if not isinstance(block, Mapping):
            raise TypeError(f"content block must be a mapping, got {type(block).__name__}")
        blocks.append(dict(block))
    if not blocks:
        raise ValueError("prompt content must contain at least one content block")
    return blocks


def message_text(content: Iterable[Any]) -> str:
    """Concatenate the ``text`` of the text blocks in *content*."""

    parts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


def session_log_filename(session_id: str) -> str:
    """File name of a session's JSONL log under the session root.

    Every byte of the UTF-8 id outside ``[A-Za-z0-9._-]`` is written as
    ``%XX`` (uppercase hex), then ``.jsonl`` is appended.
    """

    out: list[str] = []
    for byte in session_id.encode("utf-8"):
        ch = chr(byte)
        if byte < 0x80 and (ch.isalnum() or ch in "._-"):
            out.append(ch)
        else:
            out.append(f"%{byte:02X}")
    return "".join(out) + ".jsonl"


@dataclass(frozen=True)
class Notification:
    """A notification frame from the runtime (``method`` plus ``params``)."""

    method: str
    params: dict[str, Any]

    @property
    def session_id(self) -> str | None:
        """``params.sessionId`` (``session.event``), else ``childSessionId``."""

        for key in ("sessionId", "childSessionId"):
            value = self.params.get(key)
            if isinstance(value, str):
                return value
        return None

    @property
    def event(self) -> dict[str, Any] | None:
        """The session event of a ``session.event`` notification, else None."""

        if self.method != "session.event":
            return None
        event = self.params.get("event")
        return event if isinstance(event, dict) else None

    def concerns(self, session_id: str) -> bool:
        """True when ``sessionId``, ``parentSessionId`` or ``childSessionId`` is *session_id*."""

        return any(
            self.params.get(key) == session_id
            for key in ("sessionId", "parentSessionId", "childSessionId")
        )


@dataclass(frozen=True)
class SessionPromptResponse:
    """The validated result of ``session/prompt``."""

    status: str
    reason: dict[str, Any]

    @property
    def kind(self) -> str:
        """``reason.kind``: completed, aborted, max-tokens, error, ..."""

        return self.reason["kind"]

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_result(cls, result: Any) -> "SessionPromptResponse":
        """Validate a raw ``session/prompt`` result; raise ProtocolError if malformed."""

        if not isinstance(result, dict):
            raise ProtocolError(f"session/prompt result is not an object: {result!r}")
        status = result.get("status")
        if not isinstance(status, str) or status not in PROMPT_STATUSES:
            raise ProtocolError(
                f"session/prompt result has invalid status {status!r} "
                f"(expected one of {sorted(PROMPT_STATUSES)})"
            )
        reason = result.get("reason")
        if not isinstance(reason, dict):
            raise ProtocolError(f"session/prompt result has invalid reason {reason!r} (expected an object)")
        kind = reason.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ProtocolError(f"session/prompt result reason has invalid kind {kind!r}")
        return cls(status=status, reason=dict(reason))


@dataclass
class TurnResult:
    """Everything one :meth:`Session.run` produced.

    ``events`` holds the session events of this session only, in ``seq``
    order; ``notifications`` every notification of the turn, including those
    of subagent (child) sessions. ``final_response`` is the text of the last
    ``assistant/message`` of this session, or None when the turn produced none.
    """

    session_id: str
    status: str
    reason: dict[str, Any]
    final_response: str | None
    events: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)
    session_root: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def kind(self) -> str:
        return self.reason["kind"]

    @property
    def log_path(self) -> Path | None:
        """Where the session's JSONL log is expected, when the root is known."""

        if self.session_root is None:
            return None
        return self.session_root / session_log_filename(self.session_id)
