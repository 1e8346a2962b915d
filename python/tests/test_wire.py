"""The golden wire files (tests/wire in the repository) as this SDK reads and
writes them: each request's params are what the SDK sends, each result
validates with the SDK's model (and, where the model keeps every field,
dumps back to the file), each error becomes its exception, and each
notification, event and chunk passes the SDK's routing and models. A file
this test does not know fails it: a new message shape cannot skip the SDK.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from deepseek_harness import HarnessClient
from deepseek_harness.api import final_response
from deepseek_harness.errors import (
    InvalidParamsError,
    JsonRpcError,
    ServerOverloadedError,
    SessionBusyError,
    error_from_response,
)
from deepseek_harness.models import (
    ApprovalRequest,
    BaseModel,
    DecisionResponse,
    InitializeResponse,
    QuestionAnswer,
    QuestionRequest,
    SessionDeleteResponse,
    SessionEventsResponse,
    SessionListResponse,
    SessionPromptResponse,
    SessionSubscribeResponse,
    SessionUnsubscribeResponse,
    ToolsListResponse,
)

WIRE = Path(__file__).resolve().parents[2] / "tests" / "wire"


def golden(name: str) -> Any:
    return json.loads((WIRE / name).read_text())


def wire_dump(model: BaseModel) -> Any:
    """The model as the wire writes it: wire keys, unset optional fields left out."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(model.model_dump(by_alias=True))


class Recorded:
    """A client whose requests are recorded and answered with a golden result."""

    def __init__(self, result: Any) -> None:
        self.client = HarnessClient()
        self.sent: list[tuple[str, Any]] = []
        self.result = result
        self.client._call = self._call  # type: ignore[method-assign]

    def _call(self, method: str, params: Any, **_: Any) -> Any:
        self.sent.append((method, params))
        return self.result


# ---------------------------------------------------------------- requests and results
#
# METHOD: (how the SDK sends it, given the params file; the model of its
# result, None when the SDK checks the result itself; whether the model
# keeps every field of the result).

Send = Callable[[HarnessClient, dict], Any]


def _initialize(client: HarnessClient, p: dict) -> Any:
    return client.initialize(cwd=p["cwd"], provider="scripted", model="scripted-1")


def _answer(client: HarnessClient, p: dict) -> Any:
    answers = [QuestionAnswer.model_validate(a) for a in p["answers"]]
    return client.session_answer(p["sessionId"], p["questionId"], answers)


METHODS: dict[str, tuple[Send, type[BaseModel] | None, bool]] = {
    "initialize": (_initialize, InitializeResponse, False),
    "session.prompt": (lambda c, p: c.session_prompt(p["sessionId"], p["contentBlocks"]), SessionPromptResponse, True),
    "session.cancel": (lambda c, p: c.session_cancel(p["sessionId"]), None, True),
    "shutdown": (lambda c, p: c.request("shutdown", None, response_model=BaseModel), BaseModel, True),
    "session.list": (lambda c, p: c.session_list(limit=p.get("limit"), cursor=p.get("cursor")),
                     SessionListResponse, True),
    "session.events": (lambda c, p: c.session_events(p["sessionId"], after_seq=p.get("afterSeq"),
                                                     limit=p.get("limit")), SessionEventsResponse, True),
    "session.subscribe": (lambda c, p: c.session_subscribe(p["sessionId"], after_seq=p.get("afterSeq")),
                          SessionSubscribeResponse, True),
    "session.unsubscribe": (lambda c, p: c.session_unsubscribe(p["sessionId"]), SessionUnsubscribeResponse, True),
    "tools.list": (lambda c, p: c.tools_list(), ToolsListResponse, True),
    "session.approve": (lambda c, p: c.session_approve(p["sessionId"], p["approvalId"], p["outcome"],
                                                       message=p.get("message")), DecisionResponse, True),
    "session.answer": (_answer, DecisionResponse, True),
    "session.delete": (lambda c, p: c.session_delete(p["sessionId"]), SessionDeleteResponse, True),
}


def check_params(method: str, name: str) -> None:
    send, _, _ = METHODS[method]
    params = golden(name)
    recorded = Recorded(golden(f"{method}.result.json"))
    send(recorded.client, params)
    assert len(recorded.sent) == 1
    sent_method, sent = recorded.sent[0]
    assert sent_method == method.replace(".", "/")
    if method == "initialize":
        # The SDK always sends provider and model, and cwd made absolute.
        expected = {"cwd": str(Path(params["cwd"]).resolve()), "provider": "scripted", "model": "scripted-1"}
        assert sent == expected
    elif method == "shutdown":
        assert (sent or {}) == params
    else:
        assert sent == params


def check_result(method: str, name: str) -> None:
    send, model, complete = METHODS[method]
    result = golden(name)
    if model is None:
        # The SDK checks this result itself: it must take it.
        recorded = Recorded(result)
        send(recorded.client, golden(f"{method}.params.json"))
        return
    read = model.model_validate(result)
    if complete and model is not BaseModel:
        assert wire_dump(read) == result


# ---------------------------------------------------------------- errors

ERRORS = {
    -32700: JsonRpcError, -32600: JsonRpcError, -32601: JsonRpcError, -32602: InvalidParamsError,
    -32603: JsonRpcError, -32001: SessionBusyError, -32002: JsonRpcError, -32003: JsonRpcError,
    -32004: JsonRpcError, -32005: ServerOverloadedError,
}


def check_error(name: str) -> None:
    frame = golden(name)
    assert frame["jsonrpc"] == "2.0" and "id" in frame
    error = frame["error"]
    assert error["code"] in ERRORS, f"an error code the SDK does not know: {error['code']}"
    exc = error_from_response(error)
    assert type(exc) is ERRORS[error["code"]]
    assert (exc.code, exc.message, exc.data) == (error["code"], error["message"], error.get("data"))
    if isinstance(exc, (InvalidParamsError, SessionBusyError)) and isinstance(error.get("data"), dict):
        assert exc.session_id == error["data"].get("sessionId")
    if isinstance(exc, ServerOverloadedError):
        assert exc.retry_after_ms == error["data"]["retryAfterMs"]


# ---------------------------------------------------------------- notifications, events, chunks

NOTIFICATIONS = {"session.event", "subagent.started", "subagent.finished"}

EVENT_TYPES = {
    "turn/start", "user/message", "step/start", "step/end", "assistant/chunk", "assistant/message", "tool/call",
    "tool/result", "turn/end", "compact/start", "compact/summary", "compact/end", "approval/requested",
    "approval/resolved", "question/requested", "question/resolved", "context/message", "request/header",
    "todo/write",
}

CHUNK_TYPES = {"block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end", "usage", "finish"}


def check_notification(name: str) -> None:
    method = name[len("notification."):-len(".json")]
    assert method in NOTIFICATIONS, f"a notification the SDK does not route: {method}"
    params = golden(name)
    client = HarnessClient()
    client._handle_message({"jsonrpc": "2.0", "method": method, "params": params})
    note = client.next_notification(timeout_seconds=1)
    assert (note.method, note.payload) == (method, params)
    if method == "session.event":
        check_event_value(params["event"], params["sessionId"])


def check_event_value(event: dict, session_id: str = "s") -> None:
    assert event["type"] in EVENT_TYPES, f"an event type the SDK does not know: {event['type']}"
    page = SessionEventsResponse.model_validate({"events": [event], "lastSeq": event["seq"], "more": False})
    assert page.events == [event]
    data = event["data"]
    if event["type"] == "approval/requested":
        request = ApprovalRequest.from_event(session_id, data)
        assert (request.approval_id, request.call_id, request.tool_name, request.reason) == (
            data["approvalId"], data["callId"], data["toolName"], data["reason"])
        assert request.arguments == json.loads(data["arguments"])
    elif event["type"] == "question/requested":
        request = QuestionRequest.from_event(session_id, data)
        assert [q.id for q in request.questions] == [q["id"] for q in data["questions"]]
    elif event["type"] == "assistant/message":
        text = "".join(b["text"] for b in data["content"] if b["type"] == "text")
        assert final_response([event]) == text
    elif event["type"] == "assistant/chunk":
        check_chunk_value(data["chunk"])


def check_event(name: str) -> None:
    event = golden(name)
    assert set(event) == {"type", "seq", "time", "data"}
    assert name.startswith("event." + event["type"].replace("/", ".") + ".")
    check_event_value(event)


def check_chunk_value(chunk: dict) -> None:
    assert chunk["type"] in CHUNK_TYPES, f"a chunk type the SDK does not know: {chunk['type']}"


def check_chunk(name: str) -> None:
    chunk = golden(name)
    assert name.startswith("chunk." + chunk["type"] + ".")
    check_chunk_value(chunk)
    event = {"type": "assistant/chunk", "seq": 3, "time": 1, "data": {"turn": 0, "step": 0, "chunk": chunk}}
    check_event_value(event)


# ---------------------------------------------------------------- one test per file


def checker(name: str) -> Callable[[], None] | None:
    if name.startswith("error."):
        return lambda: check_error(name)
    if name.startswith("notification."):
        return lambda: check_notification(name)
    if name.startswith("event."):
        return lambda: check_event(name)
    if name.startswith("chunk."):
        return lambda: check_chunk(name)
    for method in METHODS:
        if name == f"{method}.params.json":
            return lambda: check_params(method, name)
        if name == f"{method}.result.json" or (name.startswith(f"{method}.result.") and name.endswith(".json")):
            return lambda: check_result(method, name)
    return None


FILES = sorted(p.name for p in WIRE.glob("*.json"))


def test_the_wire_folder_is_there():
    assert FILES, f"no golden files in {WIRE}"


@pytest.mark.parametrize("name", FILES)
def test_golden_file(name):
    check = checker(name)
    assert check is not None, f"tests/wire/{name}: this SDK test does not know the file; add it to test_wire.py"
    check()
