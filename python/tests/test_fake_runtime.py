"""Client behaviour against small fake runtimes (no harnessd needed).

Run just these with ``python3 -m pytest -q tests -k fake``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import threading
import time

import pytest

from conftest import fake_command
from deepseek_harness import (
    DeepSeekHarness,
    HarnessClient,
    HarnessConfig,
    HarnessError,
    NotificationTimeout,
    ProtocolError,
    RequestTimeout,
    RpcError,
    RuntimeNotFoundError,
    SessionBusyError,
    SessionPromptResponse,
    TransportClosed,
    content_blocks,
    find_runtime_bin,
    session_log_filename,
)
from deepseek_harness.transport import parse_address


@pytest.fixture
def fake_client():
    clients: list[HarnessClient] = []

    def make(name: str, **kwargs) -> HarnessClient:
        kwargs.setdefault("request_timeout", 10.0)
        kwargs.setdefault("shutdown_timeout", 3.0)
        client = HarnessClient(fake_command(name), **kwargs)
        clients.append(client)
        return client.start()

    yield make
    for client in clients:
        client.close()


def drain(client: HarnessClient) -> list:
    out = []
    while True:
        try:
            out.append(client.next_notification(timeout=0))
        except NotificationTimeout:
            return out


# --------------------------------------------------------------- pure helpers

def test_fake_session_log_filename_encoding():
    assert session_log_filename("abc-DEF_1.2") == "abc-DEF_1.2.jsonl"
    assert session_log_filename("a b/c") == "a%20b%2Fc.jsonl"
    assert session_log_filename("é:") == "%C3%A9%3A.jsonl"
    assert session_log_filename("%") == "%25.jsonl"


def test_fake_content_blocks():
    assert content_blocks("hi") == [{"type": "text", "text": "hi"}]
    assert content_blocks([{"type": "text", "text": "x"}]) == [{"type": "text", "text": "x"}]
    with pytest.raises(ValueError):
        content_blocks([])
    with pytest.raises(TypeError):
        content_blocks([42])


@pytest.mark.parametrize(
    "result",
    [
        {"status": "maybe", "reason": {"kind": "completed"}},
        {"status": "OK", "reason": {"kind": "completed"}},
        {"reason": {"kind": "completed"}},
        {"status": "ok"},
        {"status": "ok", "reason": "completed"},
        {"status": "ok", "reason": {}},
        {"status": "ok", "reason": {"kind": 1}},
        {"status": "ok", "reason": {"kind": ""}},
        ["ok"],
        None,
    ],
)
def test_fake_prompt_response_validation(result):
    with pytest.raises(ProtocolError):
        SessionPromptResponse.from_result(result)


def test_fake_prompt_response_valid():
    r = SessionPromptResponse.from_result({"status": "aborted", "reason": {"kind": "aborted", "reason": "cancelled"}})
    assert (r.status, r.kind, r.ok) == ("aborted", "aborted", False)


def test_fake_parse_address():
    assert parse_address("127.0.0.1:7879") == ("127.0.0.1", 7879)
    assert parse_address("tcp://localhost:1") == ("localhost", 1)
    assert parse_address("[::1]:80") == ("::1", 80)
    for bad in ("nohost", "host:", "host:0", "ws://h:1", ":80"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_fake_find_runtime_bin(monkeypatch, fake_bin):
    wrapper = fake_bin("echo_runtime.py")
    monkeypatch.setenv("HARNESSD_BIN", str(wrapper))
    assert find_runtime_bin() == str(wrapper.resolve())
    monkeypatch.delenv("HARNESSD_BIN")
    monkeypatch.setenv("PATH", str(wrapper.parent))
    with pytest.raises(RuntimeNotFoundError):
        find_runtime_bin()
    wrapper.rename(wrapper.parent / "harnessd")
    assert find_runtime_bin() == str(wrapper.parent / "harnessd")
    with pytest.raises(RuntimeNotFoundError):
        find_runtime_bin("/nonexistent/harnessd")


def test_fake_missing_binary_is_clear_error(tmp_path):
    with pytest.raises(RuntimeNotFoundError, match="not found"):
        DeepSeekHarness(runtime_bin=tmp_path / "missing" / "harnessd").start()


# --------------------------------------------------------------- client basics

def test_fake_requests_need_a_started_client():
    client = HarnessClient(fake_command("echo_runtime.py"))
    with pytest.raises(TransportClosed, match="not started"):
        client.request("initialize", {})
    client.close()
    client.close()
    with pytest.raises(TransportClosed):
        client.start()


def test_fake_initialize_and_prompt(fake_client):
    client = fake_client("echo_runtime.py")
    result = client.initialize(provider="scripted", max_tokens=5, client_info={"name": "t", "version": "1"})
    assert client.server_info["name"] == "deepseek-harness-sdk-runtime"
    assert result["echoParams"] == {"provider": "scripted", "maxTokens": 5, "clientInfo": {"name": "t", "version": "1"}}
    response = client.session_prompt("s1", "hello")
    assert response == SessionPromptResponse("ok", {"kind": "completed"})
    notes = drain(client)
    assert [n.event["type"] for n in notes] == [
        "turn/start", "user/message", "step/start", "assistant/message", "step/end", "turn/end",
    ]
    assert all(n.session_id == "s1" for n in notes)
    with pytest.raises(RpcError) as info:
        client.request("no/such")
    assert info.value.code == -32601 and not isinstance(info.value, SessionBusyError)
    assert client.session_cancel("s1") is False


def test_fake_unexpected_request_frames_are_ignored(fake_client, caplog):
    caplog.set_level(logging.WARNING, logger="deepseek_harness")
    client = fake_client("unexpected_request.py")
    result = client.initialize()
    assert result["serverInfo"]["name"] == "deepseek-harness-sdk-runtime"
    response = client.session_prompt("s", "hi")
    assert response.status == "ok" and response.kind == "completed"
    methods = {n.method for n in drain(client)}
    assert methods == {"session.event"}
    assert "unexpected request" in caplog.text


@pytest.mark.parametrize(
    "bad",
    [
        {"status": "maybe", "reason": {"kind": "completed"}},
        {"status": "ok", "reason": "completed"},
        {"status": "ok"},
        {"status": "error", "reason": {"message": "no kind"}},
        [1, 2],
        "ok",
    ],
)
def test_fake_malformed_prompt_result_raises_protocol_error(fake_client, bad):
    client = fake_client("malformed_result.py")
    client.initialize()
    with pytest.raises(ProtocolError):
        client.session_prompt("s", json.dumps(bad))
    # The connection stays usable.
    ok = client.session_prompt("s", json.dumps({"status": "ok", "reason": {"kind": "completed"}}))
    assert ok.ok


def test_fake_malformed_result_through_session_run(fake_bin, tmp_path):
    with DeepSeekHarness(runtime_bin=fake_bin("malformed_result.py"), session_root=tmp_path) as harness:
        with pytest.raises(ProtocolError, match="maybe"):
            harness.session().run(json.dumps({"status": "maybe", "reason": {"kind": "completed"}}))


def test_fake_malformed_lines_and_unknown_ids_are_ignored(fake_client, caplog):
    caplog.set_level(logging.WARNING, logger="deepseek_harness")
    client = fake_client("noisy.py")
    assert client.initialize()["serverInfo"]["name"] == "deepseek-harness-sdk-runtime"
    for i in range(3):
        assert client.session_prompt(f"s{i}", "x").status == "ok"
    notes = drain(client)
    # Bad-params notifications are dropped; a well-formed unknown one is kept.
    assert {n.method for n in notes} == {"session.event", "noise/ping"}
    assert "malformed line" in caplog.text
    assert "unknown id" in caplog.text


def test_fake_request_timeout(fake_client):
    client = fake_client("echo_runtime.py")
    client.initialize()
    start = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        client.session_prompt("s", "@hang", timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert time.monotonic() - start < 3
    assert client.session_prompt("s", "again").ok


def test_fake_timeout_default_from_client(fake_client):
    client = fake_client("echo_runtime.py", request_timeout=0.2)
    client.initialize()
    with pytest.raises(RequestTimeout):
        client.session_prompt("s", "@hang")


def test_fake_next_notification_timeout(fake_client):
    client = fake_client("echo_runtime.py")
    with pytest.raises(NotificationTimeout):
        client.next_notification(timeout=0.05)


def test_fake_subscriptions(fake_client):
    client = fake_client("echo_runtime.py")
    client.initialize()
    mine, everything = [], []
    sub = client.subscribe_session_notifications("A", mine.append)
    all_sub = client.subscribe_notifications(everything.append)
    client.session_prompt("A", "one")
    client.session_prompt("B", "two")
    assert mine and all(n.params["sessionId"] == "A" for n in mine)
    assert {n.params["sessionId"] for n in everything} == {"A", "B"}
    count = len(mine)
    sub.unsubscribe()
    sub()  # idempotent
    client.session_prompt("A", "three")
    assert len(mine) == count
    all_sub.unsubscribe()


def test_fake_callback_cannot_wait_for_response(fake_client):
    client = fake_client("echo_runtime.py")
    client.initialize()
    errors = []

    def callback(_n):
        try:
            client.request("session/cancel", {"sessionId": "x"}, timeout=1)
        except HarnessError as exc:
            errors.append(exc)

    client.subscribe_notifications(callback)
    client.session_prompt("s", "hi")
    assert errors and "reader thread" in str(errors[0])


def test_fake_concurrent_requests(fake_client):
    client = fake_client("echo_runtime.py")
    client.initialize()
    results, errors = [], []

    def worker(i):
        try:
            for j in range(20):
                results.append(client.session_prompt(f"s{i}", f"{i}-{j}").status)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert results == ["ok"] * 80


# --------------------------------------------------------------- crash / close

def test_fake_crash_surfaces_stderr_tail(fake_client):
    client = fake_client("crash.py")
    client.initialize()
    with pytest.raises(TransportClosed) as info:
        client.session_prompt("s", "boom")
    err = info.value
    assert err.returncode == 3
    assert "exited with code 3" in str(err)
    assert "CRASH-MARKER" in str(err)
    assert "CRASH-MARKER" in err.stderr_tail
    assert len(err.stderr_tail.encode()) <= 4096
    assert "filler line 0000" not in str(err)
    # Later requests fail at once with the same explanation.
    start = time.monotonic()
    with pytest.raises(TransportClosed, match="CRASH-MARKER"):
        client.request("initialize")
    with pytest.raises(TransportClosed, match="CRASH-MARKER"):
        client.next_notification(timeout=5)
    assert time.monotonic() - start < 1
    client.close()
    assert client.transport.process.returncode == 3


def test_fake_crash_through_harness(fake_bin, tmp_path):
    with DeepSeekHarness(runtime_bin=fake_bin("crash.py"), session_root=tmp_path) as harness:
        with pytest.raises(TransportClosed, match="CRASH-MARKER"):
            harness.session().run("hello")


def test_fake_close_is_idempotent_and_fails_pending(fake_client):
    client = fake_client("echo_runtime.py")
    client.initialize()
    outcome = []

    def hang():
        try:
            client.session_prompt("s", "@hang", timeout=30)
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    time.sleep(0.2)
    client.close()
    client.close()
    thread.join(10)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], TransportClosed)
    assert "client closed" in str(outcome[0])
    proc = client.transport.process
    assert proc.returncode == 0  # answered shutdown and exited by itself
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)
    with pytest.raises(TransportClosed, match="client closed"):
        client.request("initialize")


def test_fake_close_kills_a_runtime_that_will_not_exit(fake_client):
    client = fake_client("stubborn.py", shutdown_timeout=0.5)
    client.initialize()
    start = time.monotonic()
    client.close()
    assert time.monotonic() - start < 5
    assert client.transport.process.returncode == -9
    with pytest.raises(ChildProcessError):
        os.waitpid(client.transport.process.pid, os.WNOHANG)


# --------------------------------------------------------------- harness layer

def test_fake_harness_run(fake_bin, tmp_path):
    root = tmp_path / "root"
    workdir = tmp_path / "work"
    workdir.mkdir()
    config = HarnessConfig(
        runtime_bin=fake_bin("echo_runtime.py"),
        session_root=root,
        cwd=workdir,
        deepseek_base_url="http://127.0.0.1:9/v1",
        deepseek_api_key="sk-test",
        env={"EXTRA_VAR": "extra"},
        request_timeout=10,
    )
    with DeepSeekHarness(config) as harness:
        init_params = harness.initialize_result["echoParams"]
        assert init_params["provider"] == "scripted"
        assert init_params["cwd"] == str(workdir.resolve())
        assert init_params["protocolVersion"] == 1
        session = harness.session()
        seen = []
        result = session.run("hello", on_notification=seen.append)
        assert result.status == "ok" and result.reason == {"kind": "completed"}
        assert result.final_response == "echo: hello"
        assert result.session_id == session.id
        assert result.notifications == seen
        assert [e["seq"] for e in result.events] == list(range(6))
        assert result.session_root == root.resolve()
        assert result.log_path == root.resolve() / session_log_filename(session.id)
        last = result
        for name, expected in [
            ("DSH_SESSION_ROOT", str(root.resolve())),
            ("DSH_CWD", str(workdir.resolve())),
            ("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/v1"),
            ("DEEPSEEK_API_KEY", "sk-test"),
            ("EXTRA_VAR", "extra"),
        ]:
            last = session.run(f"@env {name}")
            assert last.final_response == expected
        second = session.run("again")
        assert second.events[0]["seq"] == last.events[-1]["seq"] + 1
    assert harness.client.closed


def test_fake_harness_env_only_when_set(fake_bin, monkeypatch):
    monkeypatch.delenv("DSH_CWD", raising=False)
    with DeepSeekHarness(runtime_bin=fake_bin("echo_runtime.py")) as harness:
        assert harness.session().run("@env DSH_CWD").final_response == "<unset>"


def test_fake_callback_exception_propagates(fake_bin):
    with DeepSeekHarness(runtime_bin=fake_bin("echo_runtime.py")) as harness:
        session = harness.session()

        def explode(_n):
            raise ValueError("callback broke")

        with pytest.raises(ValueError, match="callback broke"):
            session.run("hi", on_notification=explode)
        assert session.run("after").final_response == "echo: after"


def test_fake_session_run_timeout(fake_bin):
    with DeepSeekHarness(runtime_bin=fake_bin("echo_runtime.py")) as harness:
        session = harness.session("t")
        with pytest.raises(RequestTimeout):
            session.run("@hang", timeout=0.2)
        assert session.run("next").ok


def test_fake_stderr_is_collected(fake_client):
    client = fake_client("echo_runtime.py")
    client.initialize()
    client.session_prompt("s", "@stderr hello from stderr")
    deadline = time.monotonic() + 5
    while "hello from stderr" not in client.transport.stderr_tail() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "hello from stderr" in client.transport.stderr_tail()


# --------------------------------------------------------------- TCP transport

class _FakeTcpHandler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            if not line.strip():
                continue
            request = json.loads(line)
            method = request["method"]
            if method == "initialize":
                result = {"serverInfo": {"name": "deepseek-harness-sdk-runtime"}}
            elif method == "session/prompt":
                sid = request["params"]["sessionId"]
                text = request["params"]["contentBlocks"][0]["text"]
                event = {"type": "assistant/message", "seq": 0, "time": 0,
                         "data": {"turn": 0, "step": 0, "content": [{"type": "text", "text": f"tcp: {text}"}]}}
                self.wfile.write((json.dumps({"jsonrpc": "2.0", "method": "session.event",
                                              "params": {"sessionId": sid, "event": event}}) + "\n").encode())
                result = {"status": "ok", "reason": {"kind": "completed"}}
            else:
                result = {}
            self.wfile.write((json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n").encode())
            self.wfile.flush()
            if method == "shutdown":
                return


def test_fake_tcp_transport():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _FakeTcpHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address
        with DeepSeekHarness(address=f"{host}:{port}") as harness:
            result = harness.session().run("over tcp")
            assert result.final_response == "tcp: over tcp"
            assert result.session_root is None
        assert harness.client.closed
    finally:
        server.shutdown()
        server.server_close()


def test_fake_tcp_connect_refused():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(TransportClosed, match="cannot connect"):
        HarnessClient(address=f"127.0.0.1:{port}").start()
