"""Values exchanged with the runtime: notifications and validated responses.

Upstream builds the response classes on pydantic. The SDK has no
dependencies, so :class:`BaseModel` here is a small stand-in with the parts
that code written against upstream touches: attribute access, keyword
construction, ``model_validate``/``model_dump``, unknown keys dropped, and a
``ValueError`` (:class:`~deepseek_harness.errors.ValidationError`) when a
value does not fit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Union

from .errors import ValidationError

__all__ = [
    "JsonScalar",
    "JsonValue",
    "JsonObject",
    "Notification",
    "BaseModel",
    "ServerInfo",
    "InitializeResponse",
    "SessionPromptResponse",
    "SessionInfo",
    "SessionListResponse",
    "SessionEventsResponse",
    "SessionSubscribeResponse",
    "SessionUnsubscribeResponse",
    "SessionDeleteResponse",
    "ToolInfo",
    "ToolsListResponse",
    "ApprovalRequest",
    "ApprovalDecision",
    "QuestionOption",
    "Question",
    "QuestionRequest",
    "QuestionAnswer",
    "DecisionResponse",
    "PROMPT_STATUSES",
    "ON_DISCONNECT_VALUES",
    "SANDBOX_VALUES",
    "APPROVAL_POLICY_VALUES",
    "APPROVAL_OUTCOMES",
]

JsonScalar = Union[str, int, float, bool, None]
JsonValue = Union[JsonScalar, dict[str, "JsonValue"], list["JsonValue"]]
JsonObject = dict[str, JsonValue]

#: The statuses a ``session/prompt`` result may carry.
PROMPT_STATUSES = ("ok", "error", "aborted")

#: The values of ``initialize``'s ``onDisconnect`` (harnessd): what happens
#: to a network connection's running turns when it drops.
ON_DISCONNECT_VALUES = ("cancel", "continue")

#: The values of ``initialize``'s ``sandbox`` (harnessd): what the agent's
#: tools may change (``"workspace-write"`` is the daemon's default;
#: ``"danger-full-access"`` only on stdio or with ``--allow-full-access``).
SANDBOX_VALUES = ("read-only", "workspace-write", "danger-full-access")

#: The values of ``initialize``'s ``approvalPolicy`` (harnessd): ``"never"``
#: runs every tool unasked; under ``"ask"`` a tool that may change something
#: waits for ``session/approve``. harnessd's default: ``"never"`` on stdio,
#: ``"ask"`` on network listeners.
APPROVAL_POLICY_VALUES = ("never", "ask")

#: The outcomes a client may send with ``session/approve``.
APPROVAL_OUTCOMES = ("allowed-once", "allowed-for-session", "rejected")


@dataclass(slots=True)
class Notification:
    """A notification from the runtime: its ``method`` and its ``params``
    object as ``payload`` (``{}`` when the frame had no object there)."""

    method: str
    payload: JsonObject


_MISSING = object()


class BaseModel:
    """Validated record with declared fields.

    A subclass lists its fields in ``_fields`` as ``name -> (check,
    default)``; ``check(value, where)`` returns the stored value or raises
    :class:`ValidationError`. A default of ``_MISSING`` makes the field
    required. Keys that are not fields are ignored, as pydantic does by
    default. ``_aliases`` maps a field to its key on the wire when the two
    differ (``last_seq`` <- ``lastSeq``): ``model_validate`` reads the wire
    key, keyword construction and ``model_dump`` use the field name
    (``model_dump(by_alias=True)`` the wire key), as pydantic's aliases do.
    """

    _fields: ClassVar[dict[str, tuple[Callable[[Any, str], Any], Any]]] = {}
    _aliases: ClassVar[dict[str, str]] = {}

    def __init__(self, **data: Any) -> None:
        for name, (check, default) in self._fields.items():
            where = f"{type(self).__name__}.{name}"
            if name in data:
                value = check(data[name], where)
            elif default is _MISSING:
                raise ValidationError(f"{where}: field required")
            else:
                value = list(default) if isinstance(default, list) else default  # no list shared between instances
            object.__setattr__(self, name, value)

    @classmethod
    def model_validate(cls, obj: Any) -> Any:
        """Build an instance from a JSON object (or return *obj* if it is one)."""

        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, Mapping):
            raise ValidationError(f"{cls.__name__}: expected a JSON object, got {_describe(obj)}")
        if not cls._aliases:
            return cls(**{str(k): v for k, v in obj.items()})
        data = {}
        for name in cls._fields:
            key = cls._aliases.get(name, name)
            if key in obj:
                data[name] = obj[key]
        return cls(**data)

    def model_dump(self, *, by_alias: bool = False) -> dict[str, Any]:
        """The fields as plain JSON values (nested models included), keyed
        by field name, or by wire key with *by_alias*."""

        out: dict[str, Any] = {}
        for name in self._fields:
            out[self._aliases.get(name, name) if by_alias else name] = _dump(getattr(self, name), by_alias)
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.model_dump() == other.model_dump()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, like pydantic models

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"


def _dump(value: Any, by_alias: bool) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=by_alias)
    if isinstance(value, list):
        return [_dump(item, by_alias) for item in value]
    return value


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 200:
        text = text[:200] + "..."
    return f"{type(value).__name__} {text}"


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValidationError(f"{where}: expected a string or null, got {_describe(value)}")


def _str(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    raise ValidationError(f"{where}: expected a string, got {_describe(value)}")


def _int(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValidationError(f"{where}: expected an integer, got {_describe(value)}")


def _seq(value: Any, where: str) -> int:
    # A session's last seq: -1 while it has no event.
    value = _int(value, where)
    if value < -1:
        raise ValidationError(f"{where}: expected -1 or more, got {value}")
    return value


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ValidationError(f"{where}: expected a boolean, got {_describe(value)}")


def _object(value: Any, where: str) -> JsonObject:
    if isinstance(value, Mapping):
        return dict(value)
    raise ValidationError(f"{where}: expected a JSON object, got {_describe(value)}")


def _objects(value: Any, where: str) -> list[JsonObject]:
    # Session events are kept as the plain objects the runtime sent.
    if not isinstance(value, list):
        raise ValidationError(f"{where}: expected an array, got {_describe(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise ValidationError(f"{where}[{index}]: expected a JSON object, got {_describe(item)}")
    return [item if isinstance(item, dict) else dict(item) for item in value]


def _models(model: type[BaseModel]) -> Callable[[Any, str], Any]:
    def check(value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise ValidationError(f"{where}: expected an array, got {_describe(value)}")
        out = []
        for index, item in enumerate(value):
            try:
                out.append(model.model_validate(item))
            except ValidationError as exc:
                raise ValidationError(f"{where}[{index}]: {exc}") from None
        return out

    return check


def _optional_model(model: type[BaseModel]) -> Callable[[Any, str], Any]:
    def check(value: Any, where: str) -> Any:
        if value is None:
            return None
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None

    return check


def _status(value: Any, where: str) -> str:
    if isinstance(value, str) and value in PROMPT_STATUSES:
        return value
    raise ValidationError(f"{where}: expected one of {', '.join(PROMPT_STATUSES)}, got {_describe(value)}")


def _turn_end_reason(value: Any, where: str) -> JsonObject:
    # The reason is merge-extensible: unknown kinds and keys are kept as sent.
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where}: expected a TurnEndReason object, got {_describe(value)}")
    kind = value.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValidationError(f"{where}.kind: expected a non-empty string, got {_describe(kind)}")
    return dict(value)


class ServerInfo(BaseModel):
    """``serverInfo`` of the ``initialize`` result."""

    _fields = {"name": (_optional_str, None), "version": (_optional_str, None)}
    name: str | None
    version: str | None


class InitializeResponse(BaseModel):
    """Result of ``initialize``; harnessd's other members are not kept."""

    _fields = {"serverInfo": (_optional_model(ServerInfo), None)}
    serverInfo: ServerInfo | None


class SessionPromptResponse(BaseModel):
    """Validated result of ``session/prompt``: how the turn ended.

    ``status`` is ``"ok"``, ``"error"`` or ``"aborted"``; ``reason`` is the
    turn's TurnEndReason object (``{"kind": "completed"}``,
    ``{"kind": "error", "message": ..., "code": ...}``, ...), kept verbatim.
    Anything else, the pre-RFC ``{"accepted": true}`` included, raises
    :class:`~deepseek_harness.errors.ValidationError`.
    """

    _fields = {"status": (_status, _MISSING), "reason": (_turn_end_reason, _MISSING)}
    status: str
    reason: JsonObject


# ---------------------------------------------------------------- harnessd's session store
#
# Results of harnessd's extensions session/list, session/events,
# session/subscribe, session/unsubscribe (docs/protocol.md §4.7-4.10) and
# session/delete (§4.13).
# Their fields are snake_case; the wire's camelCase keys are aliases.


class SessionInfo(BaseModel):
    """One session of ``session/list``.

    ``created_at`` and ``updated_at`` are epoch milliseconds (the log
    header's creation, the last logged event); ``last_seq`` is the last
    event's ``seq`` (``-1`` without events); ``turns`` counts turns started;
    ``running`` is true while a turn runs or waits to run on the daemon,
    a detached one included; ``parent_session_id`` is set for a subagent's
    session.
    """

    _fields = {
        "session_id": (_str, _MISSING),
        "created_at": (_int, _MISSING),
        "updated_at": (_int, _MISSING),
        "last_seq": (_seq, _MISSING),
        "turns": (_int, _MISSING),
        "running": (_bool, _MISSING),
        "parent_session_id": (_optional_str, None),
    }
    _aliases = {
        "session_id": "sessionId",
        "created_at": "createdAt",
        "updated_at": "updatedAt",
        "last_seq": "lastSeq",
        "parent_session_id": "parentSessionId",
    }
    session_id: str
    created_at: int
    updated_at: int
    last_seq: int
    turns: int
    running: bool
    parent_session_id: str | None


class SessionListResponse(BaseModel):
    """Result of ``session/list``: one page of sessions, most recently
    updated first; ``next_cursor`` fetches the next page (``None`` on the
    last one)."""

    _fields = {"sessions": (_models(SessionInfo), _MISSING), "next_cursor": (_optional_str, None)}
    _aliases = {"next_cursor": "nextCursor"}
    sessions: list[SessionInfo]
    next_cursor: str | None


class SessionEventsResponse(BaseModel):
    """Result of ``session/events``: a page of logged events, oldest first.

    ``events`` are the event objects (``{"type", "seq", "time", "data"}``),
    the ``event`` of their ``session.event`` notifications; ``last_seq`` is
    the session's last logged ``seq`` when the page was read (``-1`` when
    none); ``more`` is true when events after this page exist.
    """

    _fields = {
        "events": (_objects, _MISSING),
        "last_seq": (_seq, _MISSING),
        "more": (_bool, _MISSING),
    }
    _aliases = {"last_seq": "lastSeq"}
    events: list[JsonObject]
    last_seq: int
    more: bool


class SessionSubscribeResponse(BaseModel):
    """Result of ``session/subscribe``: the session's last logged ``seq``
    when the replay ended (``-1`` when none)."""

    _fields = {"last_seq": (_seq, _MISSING)}
    _aliases = {"last_seq": "lastSeq"}
    last_seq: int


class SessionUnsubscribeResponse(BaseModel):
    """Result of ``session/unsubscribe``: whether the connection was
    subscribed."""

    _fields = {"unsubscribed": (_bool, _MISSING)}
    unsubscribed: bool


class SessionDeleteResponse(BaseModel):
    """Result of ``session/delete``: the session and its log are gone."""

    _fields = {"deleted": (_bool, _MISSING)}
    deleted: bool


# ---------------------------------------------------------------- harnessd's tools


class ToolInfo(BaseModel):
    """One tool of ``tools/list``: what the model of this connection's
    sessions is offered.

    ``input_schema`` is the tool's JSON Schema (kept as sent); ``read_only``
    is true for tools that change nothing (they run in parallel within a
    step); ``source`` is ``"builtin"`` or ``"mcp:SERVER"``.
    """

    _fields = {
        "name": (_str, _MISSING),
        "description": (_str, ""),
        "input_schema": (_object, _MISSING),
        "read_only": (_bool, False),
        "source": (_str, "builtin"),
    }
    _aliases = {"input_schema": "inputSchema", "read_only": "readOnly"}
    name: str
    description: str
    input_schema: JsonObject
    read_only: bool
    source: str


class ToolsListResponse(BaseModel):
    """Result of ``tools/list``."""

    _fields = {"tools": (_models(ToolInfo), _MISSING)}
    tools: list[ToolInfo]


# ---------------------------------------------------------------- approvals and questions
#
# harnessd's approval/requested and question/requested events, read for a
# handler, and what the handler answers (docs/protocol.md §4.11-§4.12).


def _outcome(value: Any, where: str) -> str:
    if value not in APPROVAL_OUTCOMES:
        raise ValidationError(f"{where}: expected one of {', '.join(APPROVAL_OUTCOMES)}, got {_describe(value)}")
    return value


def _strs(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{where}: expected a list of strings, got {_describe(value)}")
    return list(value)


def _optional_int(value: Any, where: str) -> int | None:
    return None if value is None else _int(value, where)


def _any_object(value: Any, where: str) -> JsonObject:
    # The model's arguments as parsed; text that is not a JSON object is kept
    # under "_raw" so a handler still sees what the call would get.
    if isinstance(value, dict):
        return value
    raise ValidationError(f"{where}: expected an object, got {_describe(value)}")


class ApprovalRequest(BaseModel):
    """A tool call waiting for a decision (``approval/requested``).

    ``arguments`` is the call's arguments parsed from the event's JSON text
    (``{"_raw": TEXT}`` when the text is not a JSON object); ``reason`` says
    why the call needs a decision; ``session_id`` is the session whose turn
    waits (a subagent's own session for its calls).
    """

    _fields = {
        "session_id": (_str, _MISSING),
        "approval_id": (_str, _MISSING),
        "call_id": (_str, _MISSING),
        "tool_name": (_str, _MISSING),
        "arguments": (_any_object, _MISSING),
        "reason": (_str, ""),
        "turn": (_optional_int, None),
        "step": (_optional_int, None),
    }
    session_id: str
    approval_id: str
    call_id: str
    tool_name: str
    arguments: JsonObject
    reason: str
    turn: int | None
    step: int | None

    @classmethod
    def from_event(cls, session_id: str, data: Any) -> "ApprovalRequest":
        """From the ``data`` of an ``approval/requested`` event."""

        data = _object(data, "approval/requested data")
        text = data.get("arguments")
        arguments: Any = text
        if isinstance(text, str):
            try:
                arguments = json.loads(text)
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):
                arguments = {"_raw": text}
        return cls(session_id=session_id, approval_id=data.get("approvalId"), call_id=data.get("callId"),
                   tool_name=data.get("toolName"), arguments=arguments, reason=data.get("reason", ""),
                   turn=data.get("turn"), step=data.get("step"))


class ApprovalDecision(BaseModel):
    """What an approval handler decides: ``outcome`` is ``"allowed-once"``,
    ``"allowed-for-session"`` (this tool, until the session ends) or
    ``"rejected"``; ``message`` is told to the model with a rejection."""

    _fields = {"outcome": (_outcome, _MISSING), "message": (_optional_str, None)}
    outcome: str
    message: str | None

    @classmethod
    def allow_once(cls) -> "ApprovalDecision":
        return cls(outcome="allowed-once")

    @classmethod
    def allow_for_session(cls) -> "ApprovalDecision":
        return cls(outcome="allowed-for-session")

    @classmethod
    def reject(cls, message: str | None = None) -> "ApprovalDecision":
        return cls(outcome="rejected", message=message)


class QuestionOption(BaseModel):
    """One option of a question: the ``label`` an answer selects."""

    _fields = {"label": (_str, _MISSING), "description": (_optional_str, None)}
    label: str
    description: str | None


class Question(BaseModel):
    """One question of ``ask_user_question``; ``multi_select`` allows
    several labels in its answer."""

    _fields = {
        "id": (_str, _MISSING),
        "question": (_str, ""),
        "header": (_optional_str, None),
        "options": (_models(QuestionOption), []),
        "multi_select": (_bool, False),
    }
    id: str
    question: str
    header: str | None
    options: list[QuestionOption]
    multi_select: bool


class QuestionRequest(BaseModel):
    """The model's questions waiting for answers (``question/requested``)."""

    _fields = {
        "session_id": (_str, _MISSING),
        "question_id": (_str, _MISSING),
        "call_id": (_str, _MISSING),
        "questions": (_models(Question), _MISSING),
        "turn": (_optional_int, None),
        "step": (_optional_int, None),
    }
    session_id: str
    question_id: str
    call_id: str
    questions: list[Question]
    turn: int | None
    step: int | None

    @classmethod
    def from_event(cls, session_id: str, data: Any) -> "QuestionRequest":
        """From the ``data`` of a ``question/requested`` event."""

        data = _object(data, "question/requested data")
        return cls(session_id=session_id, question_id=data.get("questionId"), call_id=data.get("callId"),
                   questions=data.get("questions"), turn=data.get("turn"), step=data.get("step"))


class QuestionAnswer(BaseModel):
    """The answer to one question: the ``id`` of the question, the labels
    ``selected`` from its options, and ``custom`` free text."""

    _fields = {"id": (_str, _MISSING), "selected": (_strs, []), "custom": (_optional_str, None)}
    id: str
    selected: list[str]
    custom: str | None

    def to_wire(self) -> JsonObject:
        out: JsonObject = {"id": self.id, "selected": list(self.selected)}
        if self.custom is not None:
            out["custom"] = self.custom
        return out


class DecisionResponse(BaseModel):
    """Result of ``session/approve`` and ``session/answer``."""

    _fields = {"accepted": (_bool, _MISSING)}
    accepted: bool
