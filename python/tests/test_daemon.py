"""End-to-end tests against the real harnessd with the scripted provider."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from deepseek_harness import (
    DeepSeekHarness,
    HarnessClient,
    Notification,
    RequestTimeout,
    RpcError,
    SessionBusyError,
    TransportClosed,
    session_log_filename,
)


def read_log(root: Path, session_id: str) -> list[dict]:
    path = root / session_log_filename(session_id)
    assert path.is_file(), f"missing session log {path}"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_retrying_busy(session, text, attempts=50, **kwargs):
    """Run, retrying while a just-cancelled turn is still settling."""

    for _ in range(attempts):
        try:
            return session.run(text, **kwargs)
        except SessionBusyError:
            time.sleep(0.05)
    raise AssertionError("session stayed busy")


def test_initialize(harness):
    info = harness.server_info
    assert info["name"] == "deepseek-harness-sdk-runtime"
    assert harness.initialize_result["protocolVersion"] == 1
    assert "scripted" in harness.initialize_result["capabilities"]["providers"]


def test_turn_result(harness, session_root):
    session = harness.session()
    result = session.run("hello")
    assert result.status == "ok"
    assert result.reason == {"kind": "completed"}
    assert result.final_response == "echo: hello"
    assert result.session_id == session.id
    assert result.session_root == session_root.resolve()
    types = [e["type"] for e in result.events]
    assert types[0] == "turn/start" and types[-1] == "turn/end"
    assert "user/message" in types and "assistant/message" in types
    assert result.events[-1]["data"]["reason"] == {"kind": "completed"}

    # The durable log: header, then every event exactly as notified.
    assert result.log_path.is_file()
    lines = read_log(session_root, session.id)
    assert lines[0]["type"] == "session" and lines[0]["id"] == session.id
    assert lines[1:] == result.events


def test_unicode_round_trip(harness):
    text = "héllo 世界 🚀"
    assert harness.session().run(text).final_response == f"echo: {text}"


def test_content_blocks_input(harness):
    result = harness.session().run([{"type": "text", "text": "from blocks"}])
    assert result.final_response == "echo: from blocks"


def test_callback_order_and_contiguous_seq(harness):
    session = harness.session()
    seen: list[Notification] = []
    threads = set()

    def on_notification(n: Notification) -> None:
        seen.append(n)
        threads.add(threading.get_ident())

    result = session.run("@chunks 8 4", on_notification=on_notification)
    assert result.status == "ok"
    assert result.final_response is not None and len(result.final_response.encode()) == 32
    assert seen == result.notifications
    assert threads == {threading.get_ident()}
    seqs = [n.event["seq"] for n in seen if n.method == "session.event"]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert seqs[0] == 0
    assert seen[0].event["type"] == "turn/start"
    assert seen[-1].event["type"] == "turn/end"
    chunks = [n.event for n in seen if n.event["type"] == "assistant/chunk"]
    deltas = "".join(c["data"]["chunk"]["text"] for c in chunks if c["data"]["chunk"]["type"] == "text-delta")
    assert deltas == result.final_response

    # A second turn continues the sequence.
    again = session.run("next")
    assert again.events[0]["seq"] == seqs[-1] + 1
    assert again.events[0]["data"]["turn"] == seen[0].event["data"]["turn"] + 1


def test_notifications_precede_response_on_reader_thread(harness):
    """Every notification of a turn has been dispatched when the response resolves."""

    client = harness.client
    received: list[Notification] = []
    sub = client.subscribe_session_notifications("order-check", received.append)
    try:
        for i in range(5):
            before = len(received)
            response = client.session_prompt("order-check", f"@chunks 3 2\nround {i}")
            assert response.status == "ok"
            turn = [n.event["type"] for n in received[before:]]
            assert turn[0] == "turn/start" and turn[-1] == "turn/end", turn
    finally:
        sub.unsubscribe()


def test_other_sessions_notifications_ignored(harness):
    a, b = harness.session("session-a"), harness.session("session-b")
    results = {}

    def worker(session):
        results[session.id] = session.run("@delay 5\n@chunks 10 4")

    threads = [threading.Thread(target=worker, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for session in (a, b):
        result = results[session.id]
        assert result.status == "ok"
        assert result.notifications
        assert all(n.params.get("sessionId") == session.id for n in result.notifications)
        assert all(e["seq"] == i for i, e in enumerate(result.events))


def test_overlapping_run_on_one_session_is_busy(harness):
    session = harness.session()
    started = threading.Event()
    outcome: dict[str, object] = {}

    def first():
        try:
            outcome["first"] = session.run("@delay 50\n@chunks 10 8", on_notification=lambda n: started.set())
        except Exception as exc:  # pragma: no cover - reported by the asserts
            outcome["first"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(10), "first turn produced no notification"
    with pytest.raises(SessionBusyError) as info:
        session.run("@delay 50\n@chunks 10 8")
    thread.join(30)
    err = info.value
    assert err.code == -32001
    assert err.session_id == session.id
    assert session.id in err.message
    first_result = outcome["first"]
    assert not isinstance(first_result, Exception), first_result
    assert first_result.status == "ok"
    assert len(first_result.final_response) == 80
    # Idle again once settled.
    assert session.run("after").final_response == "echo: after"


def test_overlapping_runs_from_two_threads_exactly_one_busy(harness):
    session = harness.session()
    barrier = threading.Barrier(2)
    outcomes = []

    def worker():
        barrier.wait()
        try:
            outcomes.append(session.run("@delay 50\n@chunks 10 8"))
        except Exception as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    busy = [o for o in outcomes if isinstance(o, SessionBusyError)]
    ok = [o for o in outcomes if not isinstance(o, Exception) and o.status == "ok"]
    assert len(busy) == 1 and len(ok) == 1, outcomes


def test_concurrent_runs_on_two_sessions(harness):
    results = {}

    def worker(name):
        results[name] = harness.session(name).run("@delay 20\n@chunks 5 4")

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    elapsed = time.monotonic() - start
    assert set(results) == {"left", "right"}
    for result in results.values():
        assert result.status == "ok"
        assert len(result.final_response) == 20
    assert elapsed < 5


def test_error_turn(harness):
    result = harness.session().run("@error boom")
    assert result.status == "error"
    assert result.reason["kind"] == "error"
    assert "boom" in result.reason["message"]
    assert result.final_response is None
    assert result.events[-1]["type"] == "turn/end"


def test_max_tokens_turn(harness):
    result = harness.session().run("@max-tokens")
    assert result.status == "error"
    assert result.reason["kind"] == "max-tokens"


def test_cancel(harness):
    session = harness.session()
    started = threading.Event()
    outcome = {}

    def run():
        outcome["result"] = session.run("@delay 100\n@chunks 50 4", on_notification=lambda n: started.set())

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    assert session.cancel() is True
    thread.join(30)
    result = outcome["result"]
    assert result.status == "aborted"
    assert result.reason == {"kind": "aborted", "reason": "cancelled"}
    assert session.cancel() is False


def test_request_timeout(harness):
    session = harness.session()
    start = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        session.run("@delay 2000\n@chunks 2 4", timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert time.monotonic() - start < 2
    # The SDK cancelled the turn; the session becomes usable again quickly.
    assert run_retrying_busy(session, "later").final_response == "echo: later"


def test_client_request_timeout(harness):
    client = harness.client
    with pytest.raises(RequestTimeout):
        client.session_prompt("raw-timeout", "@delay 2000\n@chunks 2 4", timeout=0.2)
    assert client.session_cancel("raw-timeout") is True


def test_subagent_turn(harness, session_root):
    result = harness.session().run("@subagent say hi")
    if result.status == "error" and "subagent" in json.dumps(result.reason).lower():
        pytest.skip(f"daemon has no subagent tool yet: {result.reason}")
    assert result.status == "ok", result.reason
    assert result.final_response == "subagent said: echo: say hi"
    methods = [n.method for n in result.notifications]
    assert "subagent.started" in methods and "subagent.finished" in methods
    started = next(n for n in result.notifications if n.method == "subagent.started")
    child = started.params["childSessionId"]
    finished = next(n for n in result.notifications if n.method == "subagent.finished")
    assert finished.params["agentId"] == child and finished.params["status"] == "ok"
    child_events = [n for n in result.notifications if n.method == "session.event" and n.params["sessionId"] == child]
    assert child_events, "child session events must be part of the turn"
    assert [e["seq"] for e in result.events] == list(range(len(result.events)))
    header = read_log(session_root, child)[0]
    assert header["parentSession"] == result.session_id and header["delegationDepth"] == 1


def test_protocol_error_codes(harnessd_bin, session_root):
    client = HarnessClient([harnessd_bin, "--stdio"], env={"DSH_SESSION_ROOT": str(session_root)}, request_timeout=10)
    with client:
        with pytest.raises(RpcError) as info:
            client.session_prompt("s", "too early")
        assert info.value.code == -32002
        with pytest.raises(RpcError) as info:
            client.request("no/such/method")
        assert info.value.code == -32601
        with pytest.raises(RpcError) as info:
            client.initialize(provider="no-such-provider")
        assert info.value.code == -32602
        client.initialize(provider="scripted")
        with pytest.raises(RpcError) as info:
            client.initialize()
        assert info.value.code == -32600
        with pytest.raises(RpcError) as info:
            client.request("session/prompt", {"sessionId": "s", "contentBlocks": []})
        assert info.value.code == -32602
        assert client.session_prompt("s", "fine").status == "ok"


def test_close_is_idempotent_and_reaps(config):
    harness = DeepSeekHarness(config).start()
    assert harness.session().run("hi").ok
    proc = harness.client.transport.process
    harness.close()
    harness.close()
    assert proc.returncode == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)
    with pytest.raises(TransportClosed):
        harness.session().run("after close")


def test_close_lets_running_turn_settle(config):
    harness = DeepSeekHarness(config).start()
    session = harness.session()
    started = threading.Event()
    outcome = {}

    def run():
        try:
            outcome["r"] = session.run("@delay 20\n@chunks 10 2", on_notification=lambda n: started.set())
        except Exception as exc:
            outcome["r"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    harness.close()
    thread.join(10)
    result = outcome["r"]
    assert not isinstance(result, Exception), result
    assert result.status == "ok" and len(result.final_response) == 20


def test_killed_runtime_surfaces_error(config):
    with DeepSeekHarness(config) as harness:
        session = harness.session()
        started = threading.Event()
        outcome = {}

        def run():
            try:
                session.run("@delay 100\n@chunks 50 4", on_notification=lambda n: started.set())
            except Exception as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        assert started.wait(10)
        os.kill(harness.client.transport.process.pid, signal.SIGKILL)
        thread.join(10)
        err = outcome["error"]
        assert isinstance(err, TransportClosed)
        assert "SIGKILL" in str(err)


def test_tcp(tcp_daemon, session_root):
    with DeepSeekHarness(address=tcp_daemon, session_root=session_root, request_timeout=30) as harness:
        assert harness.server_info["name"] == "deepseek-harness-sdk-runtime"
        session = harness.session()
        seen = []
        result = session.run("hello over tcp", on_notification=seen.append)
        assert result.status == "ok"
        assert result.final_response == "echo: hello over tcp"
        assert seen == result.notifications and seen[-1].event["type"] == "turn/end"
        assert result.log_path.is_file()
        with pytest.raises(RequestTimeout):
            harness.session().run("@delay 2000\n@chunks 2 4", timeout=0.2)
    # The daemon keeps serving other connections after our shutdown.
    with DeepSeekHarness(address=tcp_daemon, session_root=session_root) as again:
        result = again.session(session.id).run("second connection")
        assert result.final_response == "echo: second connection"
        assert result.events[0]["seq"] > 0


def test_tcp_busy_across_connections(tcp_daemon):
    with DeepSeekHarness(address=tcp_daemon) as one, DeepSeekHarness(address=tcp_daemon) as two:
        started = threading.Event()
        outcome = {}

        def run():
            outcome["r"] = one.session("shared").run("@delay 50\n@chunks 10 8", on_notification=lambda n: started.set())

        thread = threading.Thread(target=run)
        thread.start()
        assert started.wait(10)
        with pytest.raises(SessionBusyError):
            two.session("shared").run("hi")
        thread.join(30)
        assert outcome["r"].status == "ok"
