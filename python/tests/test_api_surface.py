"""The public API is upstream's, with exactly the RFC's changes.

These tests pin names, modules, constructor fields and defaults, signatures,
the error hierarchy, the models' validation, runtime discovery, and the
routing of frames, without launching anything.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import threading

import pytest

import deepseek_harness
from deepseek_harness import (
    DeepSeekHarness,
    DeepSeekHarnessConfig,
    HarnessClient,
    HarnessConfig,
    InitializeResponse,
    Notification,
    ServerInfo,
    Session,
    SessionPromptResponse,
    TurnResult,
)
from deepseek_harness.api import final_response, normalize_input
from deepseek_harness.models import (
    SessionEventsResponse,
    SessionInfo,
    SessionListResponse,
    SessionSubscribeResponse,
    SessionUnsubscribeResponse,
)
from deepseek_harness.client import NotificationSubscription, SessionSubscription, resolve_launch_args
from deepseek_harness.errors import (
    CertificateVerifyError,
    HarnessError,
    InvalidParamsError,
    JsonRpcError,
    ResponseTypeError,
    ServerOverloadedError,
    SessionBusyError,
    TransportClosedError,
    ValidationError,
    error_from_response,
)


def field_defaults(cls) -> list[tuple[str, object]]:
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out.append((f.name, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            out.append((f.name, f.default_factory()))
        else:
            out.append((f.name, dataclasses.MISSING))
    return out


# ----------------------------------------------------------------- modules and names


def test_modules_are_importable():
    for name in ("api", "client", "models", "errors"):
        importlib.import_module(f"deepseek_harness.{name}")


def test_package_exports_upstream_names_with_rfc_changes():
    assert deepseek_harness.__all__ == [
        "DeepSeekHarness",
        "DeepSeekHarnessConfig",
        "HarnessClient",
        "HarnessConfig",
        "InitializeResponse",
        "JsonObject",
        "Notification",
        "ServerInfo",
        "Session",
        "SessionPromptResponse",
        "TurnResult",
    ]
    for name in deepseek_harness.__all__:
        assert hasattr(deepseek_harness, name)
    # Errors are reached through deepseek_harness.errors, as upstream.
    assert not hasattr(deepseek_harness, "JsonRpcError")


def test_incoming_request_and_server_request_methods_are_gone():
    models = importlib.import_module("deepseek_harness.models")
    assert not hasattr(deepseek_harness, "IncomingRequest")
    assert not hasattr(models, "IncomingRequest")
    for name in ("notify", "next_request", "respond", "respond_error"):
        assert not hasattr(HarnessClient, name), name


# ----------------------------------------------------------------- configuration


def test_harness_config_fields_and_defaults():
    fields = field_defaults(HarnessConfig)
    assert fields[:7] == [
        ("runtime_bin", None),
        ("bridge_bin", None),
        ("launch_args_override", None),
        ("cwd", None),
        ("env", None),
        ("request_timeout_seconds", None),
        ("shutdown_timeout_seconds", 1.0),
    ]
    # Additions come after upstream's fields, all optional.
    assert [name for name, _ in fields[7:]] == ["address", "auth_token", "connect_timeout_seconds", "ssl_context",
                                              "ca_file"]
    names = {name for name, _ in fields}
    assert "client_name" not in names and "client_version" not in names
    assert not hasattr(HarnessConfig(), "__dict__")  # slots


def test_deepseek_harness_config_fields_and_defaults():
    fields = field_defaults(DeepSeekHarnessConfig)
    assert fields[:13] == [
        ("provider", "deepseek"),
        ("model", "deepseek-v4-flash"),
        ("cwd", None),
        ("runtime_cwd", None),
        ("session_root", None),
        ("cordis", None),
        ("env", {}),
        ("runtime_bin", None),
        ("launch_args_override", None),
        ("request_timeout_seconds", None),
        ("shutdown_timeout_seconds", 1.0),
        ("base_url", None),
        ("api_key", None),
    ]
    assert [name for name, _ in fields[13:]] == ["max_tokens", "address", "auth_token", "ssl_context", "on_disconnect",
                                               "ca_file", "sandbox", "approval_policy"]
    assert dict(fields)["approval_policy"] is None
    assert dict(fields)["on_disconnect"] is None
    assert dict(fields)["sandbox"] is None
    names = {name for name, _ in fields}
    assert "system_prompt" not in names and "bridge_bin" not in names
    assert DeepSeekHarnessConfig().env is not DeepSeekHarnessConfig().env


def test_turn_result_and_notification_shapes():
    assert [f.name for f in dataclasses.fields(Notification)] == ["method", "payload"]
    n = Notification("session.event", {"sessionId": "s"})
    n.method = "changed"  # mutable, like upstream's
    assert not hasattr(n, "__dict__")
    assert [f.name for f in dataclasses.fields(TurnResult)] == [
        "session_id", "status", "final_response", "events", "notifications", "session_root", "reason",
    ]
    # Upstream's positional construction still works; reason is the RFC's addition.
    result = TurnResult("s", "ok", "hi", [], [])
    assert result.session_root is None and result.reason == {}


def test_signatures_match_upstream():
    sig = inspect.signature(HarnessClient.initialize)
    for name in ("cwd", "provider", "model"):
        p = sig.parameters[name]
        assert p.kind is p.KEYWORD_ONLY and p.default is p.empty
    assert "session_root" not in sig.parameters and "system_prompt" not in sig.parameters

    sig = inspect.signature(HarnessClient.session_prompt)
    assert list(sig.parameters)[:3] == ["self", "session_id", "content_blocks"]
    assert sig.parameters["on_notification"].default is None
    assert sig.parameters["notification_subscription"].default is None
    assert "profile" not in sig.parameters

    sig = inspect.signature(HarnessClient.request)
    assert list(sig.parameters)[:3] == ["self", "method", "params"]
    assert sig.parameters["response_model"].default is inspect.Parameter.empty
    for name in ("timeout_seconds", "on_notification", "notification_filter", "notification_subscription"):
        assert sig.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert sig.parameters[name].default is None

    sig = inspect.signature(DeepSeekHarness.run)
    # Upstream's parameters, then the handlers of approvals and questions (additions).
    assert list(sig.parameters) == ["self", "input", "session_id", "on_notification", "approval_handler",
                                    "question_handler"]
    for name in ("approval_handler", "question_handler"):
        assert sig.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY and sig.parameters[name].default is None
        assert inspect.signature(Session.run).parameters[name].default is None
    sig = inspect.signature(Session.run)
    assert list(sig.parameters)[:3] == ["self", "input", "on_notification"]
    assert "profile" not in sig.parameters
    assert list(inspect.signature(DeepSeekHarness.start_session).parameters) == ["self", "session_id"]
    assert list(inspect.signature(HarnessClient.subscribe_notifications).parameters) == ["self", "notification_filter"]


def test_harness_config_and_kwargs_together_is_type_error():
    with pytest.raises(TypeError):
        DeepSeekHarness(DeepSeekHarnessConfig(), provider="scripted")
    with pytest.raises(TypeError):
        DeepSeekHarness(no_such_option=1)


def test_harness_builds_client_without_starting(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    harness = DeepSeekHarness(
        cwd="work",
        session_root="sessions",
        cordis="cordis.yml",
        base_url="http://127.0.0.1:9",
        api_key="sk-x",
        env={"EXTRA": "1"},
        runtime_bin="/nonexistent/harnessd",
        request_timeout_seconds=3,
        shutdown_timeout_seconds=0.5,
    )
    client = harness.client
    assert isinstance(client, HarnessClient) and client._proc is None
    config = client.config
    assert config.cwd == str(tmp_path.resolve() / "work")
    assert config.env == {
        "EXTRA": "1",
        "DSH_SESSION_ROOT": "sessions",
        "DSH_CORDIS_CONFIG": "cordis.yml",
        "DSH_CWD": str(tmp_path.resolve() / "work"),
        "DEEPSEEK_BASE_URL": "http://127.0.0.1:9",
        "DEEPSEEK_API_KEY": "sk-x",
    }
    assert (config.runtime_bin, config.request_timeout_seconds, config.shutdown_timeout_seconds) == (
        "/nonexistent/harnessd", 3, 0.5)
    harness.close()  # never started: nothing to do


def test_bare_client_is_valid_and_close_is_a_no_op():
    client = HarnessClient()
    assert client.config == HarnessConfig()
    client.close()
    client.close()
    with pytest.raises(TransportClosedError, match="not running"):
        client.request("initialize", {}, response_model=InitializeResponse)


# ----------------------------------------------------------------- errors


def test_error_hierarchy():
    assert issubclass(TransportClosedError, HarnessError)
    assert issubclass(CertificateVerifyError, TransportClosedError)
    assert issubclass(JsonRpcError, HarnessError)
    assert issubclass(SessionBusyError, JsonRpcError) and issubclass(ServerOverloadedError, JsonRpcError)
    assert issubclass(InvalidParamsError, JsonRpcError)
    assert issubclass(ValidationError, ValueError)
    assert issubclass(ResponseTypeError, TypeError) and issubclass(ResponseTypeError, ValueError)
    err = JsonRpcError(-32601, "method not found: x", {"a": 1})
    assert (err.code, err.message, err.data, str(err)) == (-32601, "method not found: x", {"a": 1}, "method not found: x")
    assert JsonRpcError(None, "m").data is None


@pytest.mark.parametrize(
    "error, cls, code, message",
    [
        ({"code": -32602, "message": "bad"}, InvalidParamsError, -32602, "bad"),
        ({"code": -32602, "message": "unknown session: x", "data": {"sessionId": "x"}},
         InvalidParamsError, -32602, "unknown session: x"),
        ({"code": "x", "message": "bad"}, JsonRpcError, None, "bad"),
        ({"code": True, "message": "bad"}, JsonRpcError, None, "bad"),
        ({"code": -1}, JsonRpcError, -1, "JSON-RPC error"),
        ("oops", JsonRpcError, None, "JSON-RPC error"),
        ({"code": -32001, "message": "session already has an active prompt: s", "data": {"sessionId": "s"}},
         SessionBusyError, -32001, "session already has an active prompt: s"),
        ({"code": -32005, "message": "server overloaded", "data": {"retryAfterMs": 120}},
         ServerOverloadedError, -32005, "server overloaded"),
    ],
)
def test_error_from_response(error, cls, code, message):
    err = error_from_response(error)
    assert type(err) is cls and err.code == code and err.message == message
    if cls is SessionBusyError:
        assert err.session_id == "s"
    if cls is InvalidParamsError:
        assert isinstance(err, JsonRpcError)
        assert err.session_id == ("x" if err.data else None)
        assert err.data == ({"sessionId": "x"} if err.data else None)
    if cls is ServerOverloadedError:
        assert err.retry_after_ms == 120


# ----------------------------------------------------------------- models


def test_initialize_response_model():
    init = InitializeResponse.model_validate(
        {"serverInfo": {"name": "deepseek-harness-sdk-runtime", "version": "0.1.0", "implementation": "harnessd"},
         "protocolVersion": 1, "capabilities": {}}
    )
    assert init.serverInfo.name == "deepseek-harness-sdk-runtime" and init.serverInfo.version == "0.1.0"
    assert not hasattr(init, "protocolVersion") and not hasattr(init.serverInfo, "implementation")
    assert InitializeResponse.model_validate({}).serverInfo is None
    assert InitializeResponse(serverInfo={"name": "x"}).serverInfo == ServerInfo(name="x")
    assert init.model_dump() == {"serverInfo": {"name": "deepseek-harness-sdk-runtime", "version": "0.1.0"}}
    for bad in ({"serverInfo": "x"}, {"serverInfo": {"name": 5}}, [], "x"):
        with pytest.raises(ValueError):
            InitializeResponse.model_validate(bad)


@pytest.mark.parametrize(
    "result",
    [
        {"accepted": True},
        {"status": "maybe", "reason": {"kind": "completed"}},
        {"status": "OK", "reason": {"kind": "completed"}},
        {"status": 1, "reason": {"kind": "completed"}},
        {"reason": {"kind": "completed"}},
        {"status": "ok"},
        {"status": "ok", "reason": None},
        {"status": "ok", "reason": "completed"},
        {"status": "ok", "reason": ["completed"]},
        {"status": "ok", "reason": {}},
        {"status": "ok", "reason": {"kind": 1}},
        {"status": "ok", "reason": {"kind": ""}},
        ["ok"],
        "ok",
        None,
    ],
)
def test_session_prompt_response_rejects_malformed(result):
    with pytest.raises(ValueError):
        SessionPromptResponse.model_validate(result)


def test_session_prompt_response_keeps_reason_verbatim():
    reason = {"kind": "future-kind", "detail": {"x": [1]}, "message": "m"}
    response = SessionPromptResponse.model_validate({"status": "error", "reason": reason, "extra": 1})
    assert response.status == "error" and response.reason == reason
    assert SessionPromptResponse(status="aborted", reason={"kind": "aborted", "reason": "cancelled"}).status == "aborted"


def test_final_response_and_normalize_input():
    assert normalize_input("hi") == [{"type": "text", "text": "hi"}]
    blocks = [{"type": "text", "text": "a"}]
    assert normalize_input(blocks) is blocks
    with pytest.raises(TypeError):
        normalize_input(42)
    message = lambda *texts: {  # noqa: E731
        "type": "assistant/message",
        "data": {"content": [{"type": "text", "text": t} for t in texts]},
    }
    assert final_response([]) == ""
    assert final_response([{"type": "turn/end"}]) == ""
    assert final_response([message("a", "b"), {"type": "turn/end"}]) == "ab"
    assert final_response([message("old"), message("new")]) == "new"
    odd = {"type": "assistant/message", "data": {"content": [{"type": "text", "text": None},
                                                             {"type": "reasoning", "text": "r"},
                                                             {"type": "text", "text": 5}]}}
    assert final_response([odd]) == "5"
    malformed = {"type": "assistant/message", "data": {"content": "not a list"}}
    assert final_response([message("kept"), malformed]) == "kept"


# ----------------------------------------------------------------- runtime discovery


def test_launch_args_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESSD_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert resolve_launch_args(HarnessConfig(launch_args_override=("x", "--stdio", "--store", "memory"),
                                             runtime_bin="/ignored")) == ("x", "--stdio", "--store", "memory")
    assert resolve_launch_args(HarnessConfig(runtime_bin="/opt/harnessd")) == ("/opt/harnessd", "--stdio")
    assert resolve_launch_args(HarnessConfig(bridge_bin="/opt/bridge")) == ("/opt/bridge", "--stdio")
    monkeypatch.chdir(tmp_path)
    assert resolve_launch_args(HarnessConfig(runtime_bin="bin/harnessd")) == (str(tmp_path / "bin/harnessd"), "--stdio")
    monkeypatch.setenv("HARNESSD_BIN", "/from/env/harnessd")
    assert resolve_launch_args(HarnessConfig()) == ("/from/env/harnessd", "--stdio")
    monkeypatch.delenv("HARNESSD_BIN")
    with pytest.raises(FileNotFoundError, match=r"HarnessConfig\.runtime_bin"):
        resolve_launch_args(HarnessConfig())
    on_path = tmp_path / "path"
    on_path.mkdir()
    exe = on_path / "harnessd"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    assert resolve_launch_args(HarnessConfig()) == (str(exe), "--stdio")


def test_start_without_runtime_is_file_not_found(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESSD_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"HarnessConfig\.runtime_bin"):
        HarnessClient().start()
    with pytest.raises(FileNotFoundError):
        DeepSeekHarness(runtime_bin=str(tmp_path / "missing")).run("hi")


# ----------------------------------------------------------------- frame routing


def test_notifications_go_to_matching_subscriptions_else_global_queue():
    client = HarnessClient()
    mine = client.subscribe_session_notifications("A")
    everything = client.subscribe_notifications()
    frames = [
        {"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": "A", "event": {"seq": 0}}},
        {"jsonrpc": "2.0", "method": "subagent.started", "params": {"parentSessionId": "A", "childSessionId": "A.1"}},
        {"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": "A.1", "event": {"seq": 0}}},
        {"jsonrpc": "2.0", "method": "custom", "params": [1]},
    ]
    for frame in frames:
        client._handle_message(frame)
    got = []
    mine.drain(got.append)
    assert [n.method for n in got] == ["session.event", "subagent.started"]
    assert [everything.next().method for _ in range(4)] == ["session.event", "subagent.started",
                                                            "session.event", "custom"]
    assert client._notifications.qsize() == 0  # every one was delivered to a subscription
    everything.close()
    client._handle_message(frames[2])
    client._handle_message(frames[3])
    assert client._notifications.qsize() == 2
    child = client.next_notification()
    assert child == Notification("session.event", {"sessionId": "A.1", "event": {"seq": 0}})
    assert client.next_notification().payload == {}  # non-object params
    with pytest.raises(TimeoutError):
        client.next_notification(timeout_seconds=0.01)


def test_subscription_close_keeps_queued_items():
    client = HarnessClient()
    with client.subscribe_notifications() as sub:
        client._handle_message({"method": "a"})
    client._handle_message({"method": "b"})
    assert sub.next().method == "a"
    with pytest.raises(HarnessError, match="closed"):
        sub.next()
    assert client.next_notification().method == "b"


def test_raising_filter_removes_only_its_subscription():
    client = HarnessClient()

    def broken(_n):
        raise RuntimeError("filter broke")

    bad = client.subscribe_notifications(broken)
    good = client.subscribe_notifications(lambda n: n.method == "x")
    client._handle_message({"method": "x"})
    client._handle_message({"method": "x"})
    with pytest.raises(RuntimeError, match="filter broke"):
        bad.next()
    seen = []
    with pytest.raises(RuntimeError):
        bad.drain(seen.append)
    assert [good.next().method, good.next().method] == ["x", "x"]
    assert bad not in client._subscriptions and good in client._subscriptions


def test_request_frame_with_colliding_id_never_resolves_the_pending_request():
    from deepseek_harness.client import _Pending

    client = HarnessClient()
    pending = _Pending("7", "session/prompt", None)
    client._pending["7"] = pending
    client._handle_message({"jsonrpc": "2.0", "id": "7", "method": "client/confirm", "params": {}})
    client._handle_message({"jsonrpc": "2.0", "id": 7, "method": "x", "result": {"status": "ok"}})
    client._handle_message({"jsonrpc": "2.0", "id": "7", "method": "x", "error": {"code": 1, "message": "no"}})
    assert not pending.event.is_set()
    assert client._notifications.qsize() == 0  # not surfaced as notifications either
    client._handle_message({"jsonrpc": "2.0", "id": 7, "result": {"ok": True}})  # matched by str(id)
    assert pending.event.is_set() and pending.result == {"ok": True}


def test_subscription_next_timeout_and_wake():
    client = HarnessClient()
    sub = client.subscribe_notifications()
    with pytest.raises(TimeoutError):
        sub.next(timeout_seconds=0.01)
    timer = threading.Timer(0.05, client._handle_message, args=({"method": "late"},))
    timer.start()
    assert sub.next(timeout_seconds=5).method == "late"
    timer.join()


def test_notification_subscription_is_exported_from_client():
    client = HarnessClient()
    assert isinstance(client.subscribe_notifications(), NotificationSubscription)


# ----------------------------------------------------------------- session store additions

LISTED = {
    "sessions": [
        {"sessionId": "s.sub-1-5ad3a5a34e8c28a9", "createdAt": 1796294220111, "updatedAt": 1796294220112,
         "lastSeq": 9, "turns": 1, "running": False, "parentSessionId": "s"},
        {"sessionId": "s", "createdAt": 1796294220110, "updatedAt": 1796294220112, "lastSeq": 21, "turns": 1,
         "running": True, "future": 1},
    ],
    "nextCursor": "1796294220112 s",
}


def test_session_list_models():
    page = SessionListResponse.model_validate(LISTED)
    assert page.next_cursor == "1796294220112 s"
    child, parent = page.sessions
    assert isinstance(child, SessionInfo)
    assert (child.session_id, child.created_at, child.updated_at, child.last_seq, child.turns, child.running,
            child.parent_session_id) == ("s.sub-1-5ad3a5a34e8c28a9", 1796294220111, 1796294220112, 9, 1, False, "s")
    assert parent.parent_session_id is None and parent.running is True and not hasattr(parent, "future")
    # Field names in Python, wire keys with by_alias; the wire form round-trips.
    assert parent.model_dump()["last_seq"] == 21
    dumped = page.model_dump(by_alias=True)
    assert dumped["nextCursor"] == "1796294220112 s" and dumped["sessions"][0]["parentSessionId"] == "s"
    assert SessionListResponse.model_validate(dumped) == page
    assert SessionListResponse.model_validate({"sessions": []}).next_cursor is None
    assert SessionInfo(session_id="a", created_at=1, updated_at=2, last_seq=-1, turns=0, running=False).last_seq == -1
    for bad in (
        {},
        {"sessions": {}},
        {"sessions": [{"sessionId": "a"}]},
        {"sessions": [dict(LISTED["sessions"][1], lastSeq=-2)]},
        {"sessions": [dict(LISTED["sessions"][1], running="no")]},
        {"sessions": [dict(LISTED["sessions"][1], turns=True)]},
        {"sessions": [], "nextCursor": 5},
        [],
    ):
        with pytest.raises(ValueError):
            SessionListResponse.model_validate(bad)


def test_session_events_subscribe_unsubscribe_models():
    events = [{"type": "step/end", "seq": 8, "time": 1, "data": {"turn": 0, "step": 0}}]
    page = SessionEventsResponse.model_validate({"events": events, "lastSeq": 9, "more": True})
    assert (page.events, page.last_seq, page.more) == (events, 9, True)
    assert SessionEventsResponse.model_validate({"events": [], "lastSeq": -1, "more": False}).last_seq == -1
    for bad in ({"events": [1], "lastSeq": 9, "more": True}, {"events": [], "lastSeq": "9", "more": False},
                {"events": [], "lastSeq": 9}, {"lastSeq": 9, "more": False}):
        with pytest.raises(ValueError):
            SessionEventsResponse.model_validate(bad)
    assert SessionSubscribeResponse.model_validate({"lastSeq": 9}).last_seq == 9
    assert SessionUnsubscribeResponse.model_validate({"unsubscribed": False}).unsubscribed is False
    for model, bad in ((SessionSubscribeResponse, {}), (SessionSubscribeResponse, {"lastSeq": None}),
                       (SessionUnsubscribeResponse, {"unsubscribed": 1})):
        with pytest.raises(ValueError):
            model.model_validate(bad)


def test_session_store_signatures():
    sig = inspect.signature(HarnessClient.initialize)
    assert sig.parameters["on_disconnect"].default is None
    assert sig.parameters["on_disconnect"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(inspect.signature(HarnessClient.session_list).parameters) == [
        "self", "limit", "cursor", "timeout_seconds"]
    assert list(inspect.signature(HarnessClient.session_events).parameters) == [
        "self", "session_id", "after_seq", "limit", "timeout_seconds"]
    assert list(inspect.signature(HarnessClient.session_subscribe).parameters) == [
        "self", "session_id", "after_seq", "timeout_seconds"]
    assert list(inspect.signature(HarnessClient.session_unsubscribe).parameters) == [
        "self", "session_id", "timeout_seconds"]
    for method in (Session.events, Session.iter_events, Session.subscribe):
        assert "after_seq" in inspect.signature(method).parameters
    assert issubclass(SessionSubscription, NotificationSubscription)


def feed_event(client, session_id, seq, method="session.event"):
    client._handle_message({"jsonrpc": "2.0", "method": method,
                            "params": {"sessionId": session_id, "event": {"type": "x", "seq": seq}}})


def test_session_subscription_routing_without_a_runtime():
    client = HarnessClient()
    sub = SessionSubscription(client, "A", after_seq=3)
    client._subscriptions.append(sub)
    # Before the answer: a turn of this connection's own (7, 8) ahead of
    # the replay (4..6), a repeat, and events up to after_seq (not taken).
    for seq in (2, 7, 8, 3, 4, 5, 5, 6):
        feed_event(client, "A", seq)
    feed_event(client, "B", 7)
    client._handle_message({"method": "subagent.started", "params": {"parentSessionId": "A", "childSessionId": "A.1"}})
    client._handle_message({"method": "session.event", "params": {"sessionId": "A", "event": "not an object"}})
    assert sub.seen_seq == 3
    sub._started(SessionSubscribeResponse(last_seq=6))
    assert (sub.last_seq, sub.seen_seq) == (6, 3)
    # Once live, a seq already queued is not taken again.
    for seq in (8, 9, 9, 10):
        feed_event(client, "A", seq)
    assert [sub.next_event()["seq"], sub.next(timeout_seconds=1).payload["event"]["seq"]] == [4, 5]
    assert sub.seen_seq == 5
    seen = []
    sub.drain(seen.append)
    assert [n.payload["event"]["seq"] for n in seen] == [6, 7, 8, 9, 10] and sub.seen_seq == 10
    left = []
    while True:
        try:
            left.append(client.next_notification(timeout_seconds=0))
        except TimeoutError:
            break
    assert [(n.payload.get("sessionId"), n.payload["event"]["seq"] if isinstance(n.payload.get("event"), dict)
             else None) for n in left] == [("A", 2), ("A", 3), ("B", 7), (None, None), ("A", None), ("A", 8),
                                           ("A", 9)]
    with pytest.raises(TimeoutError):
        sub.next_event(timeout_seconds=0.01)
    feed_event(client, "A", 11)
    sub.close()  # the runtime is not running: the unsubscribe fails quietly
    assert sub.closed and sub.unsubscribed is None
    assert [n.payload["event"]["seq"] for n in sub] == [11]
    assert list(sub.events()) == []


def test_session_subscription_seen_seq_starts_at_last_seq_without_replay():
    client = HarnessClient()
    sub = SessionSubscription(client, "A", after_seq=None)
    assert sub.seen_seq is None
    client._subscriptions.append(sub)
    feed_event(client, "A", 9)  # of a turn of this connection, before the start
    sub._started(SessionSubscribeResponse(last_seq=9))
    assert (sub.last_seq, sub.seen_seq) == (9, 9)
    feed_event(client, "A", 10)
    events = sub.events(until_turn_end=True)
    assert next(events)["seq"] == 10 and sub.seen_seq == 10
    client._handle_message({"method": "session.event",
                            "params": {"sessionId": "A", "event": {"type": "turn/end", "seq": 11}}})
    feed_event(client, "A", 12)
    assert [e["seq"] for e in events] == [11]
    assert sub.next_event()["seq"] == 12


def test_on_disconnect_is_checked_before_sending():
    client = HarnessClient()
    with pytest.raises(ValueError, match="on_disconnect"):
        client.initialize(cwd=".", provider="scripted", model="m", on_disconnect="later")
