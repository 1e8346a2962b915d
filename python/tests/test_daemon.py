"""End to end against the real harnessd (scripted provider unless noted)."""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import threading
import time
import tracemalloc

import pytest

from conftest import read_log
from deepseek_harness import DeepSeekHarness, HarnessClient, HarnessConfig, InitializeResponse, Notification
from deepseek_harness.errors import JsonRpcError, SessionBusyError, TransportClosedError


def run_when_idle(session, text, attempts=400, **kwargs):
    """Run, retrying while a just-cancelled turn is still settling (up to 20 s:
    a sanitizer build settles slowly)."""

    for _ in range(attempts):
        try:
            return session.run(text, **kwargs)
        except SessionBusyError:
            time.sleep(0.05)
    raise AssertionError("session stayed busy")


# ----------------------------------------------------------------- turns


def test_daemon_turn(harness, session_root):
    assert harness.server_info.name == "deepseek-harness-sdk-runtime"
    seen: list[Notification] = []
    result = harness.run("hello", session_id="t1", on_notification=seen.append)
    assert (result.status, result.reason, result.final_response) == ("ok", {"kind": "completed"}, "echo: hello")
    assert result.session_root == str(session_root)
    assert seen == result.notifications
    assert [e["seq"] for e in result.events] == list(range(len(result.events)))
    assert result.events[0]["type"] == "turn/start" and result.events[-1]["type"] == "turn/end"
    # The log holds the same events, byte for byte as notified.
    assert read_log(session_root, "t1")[1:] == result.events
    again = harness.run([{"type": "text", "text": "héllo 世界 🚀"}], session_id="t1")
    assert again.final_response == "echo: héllo 世界 🚀"
    assert again.events[0]["seq"] == result.events[-1]["seq"] + 1


def test_daemon_turn_outcomes(harness):
    error = harness.run("@error boom")
    assert error.status == "error"
    assert error.reason == {"kind": "error", "message": "boom", "code": "SCRIPTED", "step": 0}
    assert error.final_response == ""
    limited = harness.run("@max-tokens")
    assert (limited.status, limited.reason) == ("error", {"kind": "max-tokens"})


def test_daemon_subagent_traffic(harness, session_root):
    result = harness.run("@subagent say hi", session_id="parent")
    assert result.status == "ok", result.reason
    assert result.final_response == "subagent said: echo: say hi"
    methods = [n.method for n in result.notifications]
    assert methods.count("subagent.started") == 1 and methods.count("subagent.finished") == 1
    assert {n.payload.get("sessionId", "parent") for n in result.notifications} == {"parent"}
    assert [e["seq"] for e in result.events] == list(range(len(result.events)))
    child = next(n.payload["childSessionId"] for n in result.notifications if n.method == "subagent.started")
    # The child's own events belong to no subscription of the parent's turn.
    queued = []
    while True:
        try:
            queued.append(harness.client.next_notification(timeout_seconds=0))
        except TimeoutError:
            break
    assert queued and {n.payload["sessionId"] for n in queued} == {child}
    assert read_log(session_root, child)[0]["parentSession"] == "parent"


def test_daemon_no_stale_replay(harness):
    for i in range(3):
        harness.run(f"@chunks 3 4\nround {i}", session_id="stale")
    assert harness.client._notifications.qsize() == 0
    with pytest.raises(TimeoutError):
        harness.client.next_notification(timeout_seconds=0.2)


def test_daemon_concurrent_sessions_stay_apart(harness):
    results = {}

    def worker(name):
        results[name] = harness.run("@delay 5\n@chunks 10 4", session_id=name)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for name, result in results.items():
        assert result.status == "ok" and len(result.final_response) == 40
        assert {n.payload["sessionId"] for n in result.notifications} == {name}


def test_daemon_overlap_is_session_busy(harness):
    session = harness.start_session("busy")
    started = threading.Event()
    outcome = {}

    def first():
        outcome["r"] = session.run("@delay 40\n@chunks 10 8", on_notification=lambda n: started.set())

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(10)
    with pytest.raises(SessionBusyError) as info:
        session.run("second")
    thread.join(30)
    assert isinstance(info.value, JsonRpcError) and info.value.code == -32001
    assert info.value.session_id == "busy"
    assert outcome["r"].status == "ok" and len(outcome["r"].final_response) == 80


def test_daemon_cancel_and_timeout(harness):
    session = harness.start_session("cancel")
    started = threading.Event()
    outcome = {}

    def run():
        outcome["r"] = session.run("@delay 100\n@chunks 50 4", on_notification=lambda n: started.set())

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    assert session.cancel() is True
    thread.join(30)
    assert (outcome["r"].status, outcome["r"].reason) == ("aborted", {"kind": "aborted", "reason": "cancelled"})
    assert session.cancel() is False
    # A timed-out run cancels its turn, so the session is free again soon.
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="session/prompt timed out"):
        session.run("@delay 5000\n@chunks 2 4", timeout_seconds=0.3)
    assert time.monotonic() - start < 3
    assert run_when_idle(session, "later").final_response == "echo: later"


def test_daemon_huge_turn_over_stdio(harnessd_bin, tmp_path):
    """128 MiB of frames over stdio; the SDK keeps up and keeps nothing."""

    # The turn is over the default --max-turn-bytes (64 MiB): raised for it.
    argv = (str(harnessd_bin), "--stdio", "--store", "memory", "--log-level", "warn", "--max-turn-bytes", str(256 << 20))
    with DeepSeekHarness(provider="scripted", launch_args_override=argv, cwd=str(tmp_path),
                         request_timeout_seconds=120) as harness:
        harness.run("warm up", session_id="huge")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            start = time.monotonic()
            result = harness.run("@chunks 64 1048576", session_id="huge")
            elapsed = time.monotonic() - start
            assert result.status == "ok" and len(result.final_response) == 64 << 20
            assert sum(1 for e in result.events if e["type"] == "assistant/chunk") >= 64
            del result
            gc.collect()
            left = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        # Reading a byte per system call took minutes and tripped the
        # daemon's write deadline; a buffered reader takes seconds.
        assert elapsed < 60, elapsed
        assert left < 2 << 20, left
        assert harness.client._notifications.qsize() == 0
        assert harness.run("still fine", session_id="huge").status == "ok"


# ----------------------------------------------------------------- environment


def test_daemon_honours_dsh_cwd_and_session_root(harnessd_bin, tmp_path):
    root = tmp_path / "env-root"
    config = HarnessConfig(runtime_bin=str(harnessd_bin), env={"DSH_CWD": "/srv/from-env", "DSH_SESSION_ROOT": str(root)},
                           request_timeout_seconds=30)
    with HarnessClient(config) as client:
        # No cwd on the wire: the daemon falls back to DSH_CWD.
        client.request("initialize", {"provider": "scripted"}, response_model=InitializeResponse)
        assert client.session_prompt("env", [{"type": "text", "text": "hi"}]).status == "ok"
    assert read_log(root, "env")[0]["cwd"] == "/srv/from-env"
    # The harness sends its absolute cwd both ways.
    work = tmp_path / "work"
    work.mkdir()
    with DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(work),
                         session_root=str(root)) as harness:
        harness.run("hi", session_id="harness-cwd")
    assert read_log(root, "harness-cwd")[0]["cwd"] == str(work.resolve())


def test_daemon_default_provider_needs_a_key(harnessd_bin, tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    harness = DeepSeekHarness(runtime_bin=str(harnessd_bin), cwd=str(tmp_path))
    with pytest.raises(JsonRpcError, match="no adapter registered") as info:
        harness.run("Say hi.")
    assert info.value.code == -32602
    assert harness.client._proc is None  # initialization failure closed the runtime


def test_daemon_deepseek_provider_gets_url_and_key(harnessd_bin, tmp_path, fake_deepseek, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with DeepSeekHarness(runtime_bin=str(harnessd_bin), cwd=str(tmp_path), session_root=str(tmp_path / "s"),
                         base_url=fake_deepseek.base_url, api_key="sk-test-key") as harness:
        result = harness.run("Say hi.")
    assert (result.status, result.final_response) == ("ok", fake_deepseek.reply)
    request = fake_deepseek.requests[0]
    assert request["path"] == "/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test-key"
    assert request["body"]["model"] == "deepseek-v4-flash"


def start_long_turn(harness):
    """Runs a 5-second turn in a thread; returns once it streams, with the
    thread and a dict that receives the turn's exception, if any."""
    started = threading.Event()
    outcome = {}

    def run():
        try:
            harness.run("@delay 100\n@chunks 50 4", on_notification=lambda n: started.set())
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    return thread, outcome


# ----------------------------------------------------------------- lifecycle


def test_daemon_killed_mid_turn(harness):
    thread, outcome = start_long_turn(harness)
    os.kill(harness.client._proc.pid, signal.SIGKILL)
    thread.join(10)
    err = outcome["error"]
    assert isinstance(err, TransportClosedError)
    text = str(err)
    assert text.startswith("DeepSeek Harness runtime stdout closed\nexit code: -9 (killed by SIGKILL)")
    assert "stderr tail:" in text and "stdio: connected" in text
    assert err.exit_code == -9


def test_daemon_close_reaps_and_restarts(harnessd_bin, tmp_path):
    harness = DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(tmp_path),
                              session_root=str(tmp_path / "s"), shutdown_timeout_seconds=5)
    assert harness.run("one").status == "ok"
    proc = harness.client._proc
    harness.close()
    harness.close()
    assert proc.returncode == 0 and harness.client._proc is None
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)
    assert harness.run("two").final_response == "echo: two"
    assert harness.client._proc.pid != proc.pid
    harness.close()


def test_daemon_close_lets_a_running_turn_settle(harnessd_bin, tmp_path):
    harness = DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(tmp_path),
                              session_root=str(tmp_path / "s"), shutdown_timeout_seconds=10)
    harness.start()
    started = threading.Event()
    outcome = {}

    def run():
        try:
            outcome["r"] = harness.run("@delay 20\n@chunks 10 2", on_notification=lambda n: started.set())
        except Exception as exc:
            outcome["r"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    harness.close()
    thread.join(10)
    assert not isinstance(outcome["r"], Exception), outcome["r"]
    assert outcome["r"].status == "ok" and len(outcome["r"].final_response) == 20


def test_daemon_error_responses(harnessd_bin, tmp_path):
    with HarnessClient(HarnessConfig(runtime_bin=str(harnessd_bin), env={"DSH_SESSION_ROOT": str(tmp_path)})) as client:
        with pytest.raises(JsonRpcError) as info:
            client.session_prompt("s", [{"type": "text", "text": "too early"}])
        assert info.value.code == -32002
        with pytest.raises(JsonRpcError) as info:
            client.initialize(cwd=str(tmp_path), provider="no-such-provider", model="m")
        assert info.value.code == -32602
        assert client._proc is None  # initialize closes the runtime on failure


# ----------------------------------------------------------------- network additions


def network_turns(harness: DeepSeekHarness) -> None:
    seen = []
    result = harness.run("hello over the network", session_id="net", on_notification=seen.append)
    assert (result.status, result.final_response) == ("ok", "echo: hello over the network")
    assert seen == result.notifications
    big = harness.run("@chunks 3 100000", session_id="net-big")  # frames past 64 KiB
    assert len(big.final_response) == 300000
    assert harness.client._notifications.qsize() == 0


@pytest.mark.parametrize("scheme", ["tcp", "ws"])
def test_daemon_network_connection(listening_daemon, tmp_path, scheme):
    daemon = listening_daemon()
    address = daemon.url(scheme) + ("/" if scheme == "ws" else "")
    with DeepSeekHarness(provider="scripted", address=address, cwd=str(tmp_path)) as harness:
        network_turns(harness)
        assert harness.client._proc is None
        session = harness.start_session("net-cancel")
        started = threading.Event()
        outcome = {}
        thread = threading.Thread(
            target=lambda: outcome.setdefault("r", session.run("@delay 100\n@chunks 50 4",
                                                               on_notification=lambda n: started.set())))
        thread.start()
        assert started.wait(10)
        assert session.cancel() is True
        thread.join(30)
        assert outcome["r"].status == "aborted"
    # Closing our connection does not stop the daemon; the session continues.
    with DeepSeekHarness(provider="scripted", address=address, cwd=str(tmp_path)) as again:
        assert again.run("second", session_id="net").events[0]["seq"] > 0


def test_daemon_network_auth_token(listening_daemon, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    daemon = listening_daemon("--auth-token-file", str(token_file))
    for scheme in ("tcp", "ws"):
        with DeepSeekHarness(provider="scripted", address=daemon.url(scheme), auth_token="s3cret",
                             cwd=str(tmp_path)) as harness:
            assert harness.run("with token").status == "ok"
    wrong = DeepSeekHarness(provider="scripted", address=daemon.url("tcp"), auth_token="wrong", cwd=str(tmp_path))
    with pytest.raises(JsonRpcError) as info:
        wrong.start()
    assert info.value.code == -32004
    with pytest.raises(TransportClosedError, match="401"):
        DeepSeekHarness(provider="scripted", address=daemon.url("ws"), cwd=str(tmp_path)).start()


def test_daemon_busy_across_connections(listening_daemon, tmp_path):
    daemon = listening_daemon()
    address = daemon.url("tcp")
    with DeepSeekHarness(provider="scripted", address=address) as one, \
            DeepSeekHarness(provider="scripted", address=address) as two:
        started = threading.Event()
        outcome = {}
        thread = threading.Thread(target=lambda: outcome.setdefault(
            "r", one.run("@delay 40\n@chunks 10 8", session_id="shared", on_notification=lambda n: started.set())))
        thread.start()
        assert started.wait(10)
        with pytest.raises(SessionBusyError):
            two.run("hi", session_id="shared")
        thread.join(30)
        assert outcome["r"].status == "ok"


def test_fake_unreachable_address():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(TransportClosedError, match="cannot connect"):
        DeepSeekHarness(provider="scripted", address=f"tcp://127.0.0.1:{port}").start()


def test_daemon_network_peer_dies_mid_turn(listening_daemon, tmp_path):
    daemon = listening_daemon()
    harness = DeepSeekHarness(provider="scripted", address=daemon.url("tcp"), cwd=str(tmp_path))
    thread, outcome = start_long_turn(harness)
    daemon.proc.kill()
    thread.join(10)
    err = outcome["error"]
    assert isinstance(err, TransportClosedError)
    assert str(err).startswith("DeepSeek Harness runtime connection closed\nconnection: tcp://127.0.0.1:")
    harness.close()


def test_daemon_principals_see_only_their_own_sessions(listening_daemon, tmp_path):
    import hashlib
    auth = tmp_path / "auth.toml"
    auth.write_text("".join(f'[principals.{name}]\ntoken = "sha256:{hashlib.sha256(token.encode()).hexdigest()}"\n'
                            for name, token in (("alice", "alice-t"), ("bob", "bob-t"))))
    daemon = listening_daemon("--auth-file", str(auth))
    for scheme, (name, token) in (("tcp", ("alice", "alice-t")), ("ws", ("bob", "bob-t"))):
        with DeepSeekHarness(provider="scripted", address=daemon.url(scheme), auth_token=token,
                             cwd=str(tmp_path)) as harness:
            assert harness.run(f"@reply {name}'s", session_id="same-id").status == "ok"
    for token, other in (("alice-t", "bob's"), ("bob-t", "alice's")):
        with DeepSeekHarness(provider="scripted", address=daemon.url("tcp"), auth_token=token,
                             cwd=str(tmp_path)) as harness:
            ids = [s.session_id for s in harness.list_sessions().sessions]
            assert ids == ["same-id"]
            events = harness.start_session("same-id").events().events
            assert other not in json.dumps(events)
