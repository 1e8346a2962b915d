"""Values exchanged with the runtime: notifications and validated responses.

Upstream builds the response classes on pydantic. The SDK has no
dependencies, so :class:`BaseModel` here is a small stand-in with the parts
that code written against upstream touches: attribute access, keyword
construction, ``model_validate``/``model_dump``, unknown keys dropped, and a
``ValueError`` (:class:`~deepseek_harness.errors.ValidationError`) when a
value does not fit.
"""

from __future__ import annotations

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
    "PROMPT_STATUSES",
]

JsonScalar = Union[str, int, float, bool, None]
JsonValue = Union[JsonScalar, dict[str, "JsonValue"], list["JsonValue"]]
JsonObject = dict[str, JsonValue]

#: The statuses a ``session/prompt`` result may carry.
PROMPT_STATUSES = ("ok", "error", "aborted")


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
    default.
    """

    _fields: ClassVar[dict[str, tuple[Callable[[Any, str], Any], Any]]] = {}

    def __init__(self, **data: Any) -> None:
        for name, (check, default) in self._fields.items():
            where = f"{type(self).__name__}.{name}"
            if name in data:
                value = check(data[name], where)
            elif default is _MISSING:
                raise ValidationError(f"{where}: field required")
            else:
                value = default
            object.__setattr__(self, name, value)

    @classmethod
    def model_validate(cls, obj: Any) -> Any:
        """Build an instance from a JSON object (or return *obj* if it is one)."""

        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, Mapping):
            raise ValidationError(f"{cls.__name__}: expected a JSON object, got {_describe(obj)}")
        return cls(**{str(k): v for k, v in obj.items()})

    def model_dump(self) -> dict[str, Any]:
        """The fields as plain JSON values (nested models included)."""

        out: dict[str, Any] = {}
        for name in self._fields:
            value = getattr(self, name)
            out[name] = value.model_dump() if isinstance(value, BaseModel) else value
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.model_dump() == other.model_dump()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, like pydantic models

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 200:
        text = text[:200] + "..."
    return f"{type(value).__name__} {text}"


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValidationError(f"{where}: expected a string or null, got {_describe(value)}")


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
