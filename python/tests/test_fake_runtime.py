"""Client and harness behaviour against small fake runtimes (no harnessd).

The fakes (tests/fakes) produce what the real daemon never does: malformed
prompt results, pre-RFC results, request frames reusing a pending id,
garbage on stdout, a death in the middle of a turn. Run just these with
``python3 -m pytest -q tests -k fake``.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

from conftest import fake_argv
from deepseek_harness import (
    DeepSeekHarness,
    HarnessClient,
    HarnessConfig,
    Notification,
    SessionPromptResponse,
)
from deepseek_harness.errors import JsonRpcError, TransportClosedError


def drain_global(client: HarnessClient) -> list[Notification]:
    out = []
    while True:
        try:
            out.append(client.next_notification(timeout_seconds=0))
        except TimeoutError:
            return out


class RawResult:
    """A response model for generic requests: keeps the result object."""

    def __init__(self, value: dict) -> None:
        self.value = value

    @classmethod
    def model_validate(cls, obj: dict) -> "RawResult":
        return cls(obj)


# ----------------------------------------------------------------- turns


def test_fake_run_returns_the_turn(fake_harness):
    harness = fake_harness(session_root="relative/sessions")
    seen: list[Notification] = []
    threads = set()

    def on_notification(n: Notification) -> None:
        seen.append(n)
        threads.add(threading.get_ident())

    with harness:
        result = harness.run("hello", session_id="main", on_notification=on_notification)
    assert (result.session_id, result.status, result.reason) == ("main", "ok", {"kind": "completed"})
    assert result.final_response == "echo: hello"
    assert result.session_root == "relative/sessions"  # as given
    assert [e["type"] for e in result.events] == [
        "turn/start", "user/message", "step/start", "assistant/message", "step/end", "turn/end",
    ]
    assert seen == result.notifications
    assert all(n.method == "session.event" and n.payload["sessionId"] == "main" for n in seen)
    assert [n.payload["event"] for n in seen] == result.events
    assert threads == {threading.get_ident()}


def test_fake_start_session_and_lazy_start(fake_harness):
    harness = fake_harness()
    assert harness.client._proc is None
    session = harness.start_session()
    assert session.id.startswith("session-") and len(session.id) == len("session-") + 32
    assert session.harness is harness and harness.client._proc is not None
    assert session.run("one").final_response == "echo: one"
    assert session.run([{"type": "text", "text": "two"}]).final_response == "echo: two"
    # run() without a with block starts lazily too; close() then start again.
    pid = harness.client._proc.pid
    harness.close()
    assert harness.client._proc is None
    assert harness.run("again").final_response == "echo: again"
    assert harness.client._proc.pid != pid


def test_fake_status_and_reason_come_from_the_response(fake_harness):
    with fake_harness("malformed_result.py") as harness:
        for status, reason in [
            ("aborted", {"kind": "aborted", "reason": "cancelled"}),
            ("error", {"kind": "error", "message": "boom", "code": "X"}),
            ("error", {"kind": "future-kind", "extra": {"nested": [1]}}),
        ]:
            result = harness.run(json.dumps({"status": status, "reason": reason}))
            assert (result.status, result.reason) == (status, reason)


def test_fake_session_finished_is_not_waited_for(fake_harness):
    with fake_harness() as harness:
        # No session.finished at all: the response ends the turn.
        assert harness.run("plain").status == "ok"
        # One that still arrives is an ordinary notification of the turn.
        result = harness.run("@finished", session_id="s")
        assert result.notifications[-1] == Notification("session.finished", {"sessionId": "s", "status": "ok"})
        assert result.events[-1]["type"] == "turn/end"


def test_fake_final_response_is_empty_without_assistant_message(fake_harness):
    with fake_harness() as harness:
        result = harness.run("@silent")
    assert result.status == "ok" and result.final_response == ""


def test_fake_turn_holds_only_its_own_session(fake_harness):
    with fake_harness() as harness:
        result = harness.run("@other", session_id="mine")
        assert {n.payload["sessionId"] for n in result.notifications} == {"mine"}
        # Another session's traffic is nobody's subscription: the global queue has it.
        assert [n.payload["sessionId"] for n in drain_global(harness.client)] == ["someone-else", "someone-else"]


def test_fake_child_session_traffic(fake_harness):
    with fake_harness() as harness:
        result = harness.run("@subagent", session_id="p")
        methods = [n.method for n in result.notifications]
        # The parent's notifications: the subagent's start and finish, its own events.
        assert methods[:2] == ["subagent.started", "subagent.finished"]
        assert set(methods[2:]) == {"session.event"}
        assert all(n.payload.get("sessionId", "p") == "p" for n in result.notifications)
        assert all(e.get("data", {}).get("content", [{}])[0].get("text") != "child answer"
                   for e in result.events if e["type"] == "assistant/message")
        assert result.final_response == "subagent said: child answer"
        # The child's own session.events match no subscription of the parent.
        child = drain_global(harness.client)
        assert child and {n.payload["sessionId"] for n in child} == {"p.sub-1"}


# ----------------------------------------------------------------- no stale replay


def test_fake_no_stale_replay_after_runs(fake_harness):
    with fake_harness() as harness:
        for i in range(3):
            result = harness.run(f"turn {i}", session_id="s")
            assert result.events[0]["seq"] == 6 * i
        client = harness.client
        assert client._notifications.qsize() == 0
        with pytest.raises(TimeoutError):
            client.next_notification(timeout_seconds=0.1)
        assert client._subscriptions == []  # run() closed its subscription


def test_fake_low_level_notifications_are_delivered_once(fake_client):
    client = fake_client()
    # Without a callback the notifications go to the global queue, once each.
    client.session_prompt("s", [{"type": "text", "text": "one"}])
    first = drain_global(client)
    assert [n.payload["event"]["seq"] for n in first] == list(range(6))
    client.session_prompt("s", [{"type": "text", "text": "two"}])
    assert [n.payload["event"]["seq"] for n in drain_global(client)] == list(range(6, 12))
    # With a callback they are the callback's, and not queued again.
    seen = []
    client.session_prompt("s", [{"type": "text", "text": "three"}], on_notification=seen.append)
    assert [n.payload["event"]["seq"] for n in seen] == list(range(12, 18))
    assert client._notifications.qsize() == 0
    # A subscription's notifications are not queued globally either.
    with client.subscribe_session_notifications("s") as sub:
        client.session_prompt("s", [{"type": "text", "text": "four"}])
        assert client._notifications.qsize() == 0
        got = []
        sub.drain(got.append)
        assert len(got) == 6


def test_fake_notification_after_the_response_is_queued_not_replayed(fake_harness):
    with fake_harness() as harness:
        result = harness.run("@late", session_id="s")
        assert all(n.payload["event"]["type"] != "custom/late" for n in result.notifications)
        late = harness.client.next_notification(timeout_seconds=5)
        assert late.payload["event"]["type"] == "custom/late"
        assert harness.run("next", session_id="s").events[0]["type"] == "turn/start"
        assert harness.client._notifications.qsize() == 0


def test_fake_memory_returns_to_baseline_after_a_huge_turn(fake_harness):
    with fake_harness() as harness:
        harness.run("warm up")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = harness.run("@huge 16 1048576")
            assert len(result.final_response) == 16 << 20
            assert tracemalloc.get_traced_memory()[0] - before > 32 << 20  # chunks + message
            del result
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        # What is left is bounded by the reader's block buffer, not by the turn.
        assert after - before < 2 << 20, after - before
        assert harness.client._notifications.qsize() == 0


# ----------------------------------------------------------------- malformed results

MALFORMED = [
    {"accepted": True},
    {"status": "maybe", "reason": {"kind": "completed"}},
    {"status": "ok"},
    {"reason": {"kind": "completed"}},
    {"status": "ok", "reason": "completed"},
    {"status": "error", "reason": {"message": "no kind"}},
    [1, 2],
    "ok",
    None,
]


def test_fake_malformed_prompt_results_are_value_errors(fake_client, fake_harness):
    client = fake_client("malformed_result.py")
    harness = fake_harness("malformed_result.py")
    good = json.dumps({"status": "ok", "reason": {"kind": "completed"}})
    for bad in MALFORMED:
        blocks = [{"type": "text", "text": json.dumps(bad)}]
        with pytest.raises(ValueError):
            client.session_prompt("s", blocks)
        with pytest.raises(ValueError):
            harness.run(json.dumps(bad), session_id="h")
        if not isinstance(bad, dict):
            with pytest.raises(TypeError, match="session/prompt response must be a JSON object"):
                client.request("session/prompt", {"sessionId": "s", "contentBlocks": blocks},
                               response_model=SessionPromptResponse)
        # The connection stays usable.
        assert client.session_prompt("s", [{"type": "text", "text": good}]).status == "ok"
        assert harness.run(good, session_id="h").status == "ok"


def test_fake_pre_rfc_runtime_is_rejected(fake_harness):
    with fake_harness("pre_rfc.py") as harness:
        with pytest.raises(ValueError, match="status"):
            harness.run("hello")


# ----------------------------------------------------------------- frames the client must skip


def test_fake_request_frames_with_colliding_ids_are_ignored(fake_client, caplog):
    client = fake_client("unexpected_request.py")  # initialize survived one already
    response = client.session_prompt("s", [{"type": "text", "text": "hi"}])
    assert response.status == "ok"
    assert {n.method for n in drain_global(client)} == {"session.event"}
    assert "ignoring request frame" in caplog.text
    # Only request frames arrive for this one: they must not end the wait.
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="session/prompt timed out waiting for DeepSeek Harness runtime"):
        client.session_prompt("s", [{"type": "text", "text": "@trap"}], timeout_seconds=0.5)
    assert time.monotonic() - start >= 0.45
    assert client.session_prompt("s", [{"type": "text", "text": "after"}]).status == "ok"


def test_fake_noise_on_stdout_is_skipped(fake_client):
    client = fake_client("noisy.py")
    for i in range(3):
        assert client.session_prompt(f"s{i}", [{"type": "text", "text": "x"}]).status == "ok"
    notes = drain_global(client)
    assert {n.method for n in notes} == {"session.event", "noise/list-params", "noise/ping"}
    assert all(n.payload == {} for n in notes if n.method == "noise/list-params")


# ----------------------------------------------------------------- requests


def test_fake_wire_format(fake_client):
    client = fake_client()
    raw = client.request("echo", {"text": "héllo"}, response_model=RawResult).value["raw"]
    assert raw.endswith("\n") and raw.count("\n") == 1 and raw.isascii()
    frame = json.loads(raw)
    assert raw.rstrip("\n") == json.dumps(frame, separators=(",", ":"))
    assert frame["jsonrpc"] == "2.0" and frame["method"] == "echo" and frame["params"] == {"text": "héllo"}
    assert isinstance(frame["id"], str) and uuid.UUID(frame["id"]).version == 4
    raw = client.request("echo", None, response_model=RawResult).value["raw"]
    assert "params" not in json.loads(raw)


def test_fake_fifty_threads_never_interleave_frames(fake_client):
    client = fake_client()
    errors = []
    payload = "x" * 100_000

    def worker(i: int) -> None:
        try:
            for j in range(4):
                raw = client.request("echo", {"i": i, "j": j, "pad": payload}, response_model=RawResult).value["raw"]
                assert json.loads(raw)["params"]["i"] == i
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors


def test_fake_error_response(fake_client):
    client = fake_client()
    with pytest.raises(JsonRpcError) as info:
        client.request("no/such", {}, response_model=RawResult)
    assert info.value.code == -32601 and str(info.value) == "method not found: no/such"
    assert client.session_cancel("s") is False


def test_fake_request_timeout(fake_client):
    client = fake_client(request_timeout_seconds=0.3)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        client.session_prompt("s", [{"type": "text", "text": "@hang"}])
    assert str(info.value) == "session/prompt timed out waiting for DeepSeek Harness runtime"
    assert time.monotonic() - start < 3
    assert client._pending == {}
    assert client.session_prompt("t", [{"type": "text", "text": "fine"}], timeout_seconds=10).status == "ok"


def test_fake_request_with_notification_filter_and_subscription(fake_client):
    client = fake_client()
    seen = []
    response = client.request(
        "session/prompt",
        {"sessionId": "a", "contentBlocks": [{"type": "text", "text": "@other"}]},
        response_model=SessionPromptResponse,
        on_notification=seen.append,
        notification_filter=lambda n: n.payload.get("sessionId") == "someone-else",
    )
    assert response.status == "ok" and len(seen) == 2
    assert {n.payload["sessionId"] for n in drain_global(client)} == {"a"}
    # A caller's own unfiltered subscription gets every notification.
    everything = []
    with client.subscribe_notifications() as sub:
        client.session_prompt("a", [{"type": "text", "text": "@other"}], on_notification=everything.append,
                              notification_subscription=sub)
    assert {n.payload["sessionId"] for n in everything} == {"a", "someone-else"}


def test_fake_callback_runs_while_a_slow_turn_streams(fake_harness):
    with fake_harness() as harness:
        arrivals = []
        start = time.monotonic()
        result = harness.run("@slow 5 150", on_notification=lambda n: arrivals.append(time.monotonic()))
        end = time.monotonic()
    chunks = [e for e in result.events if e["type"] == "assistant/chunk"]
    assert len(chunks) == 5
    # The first notification is handed over while the turn is still running.
    assert arrivals[0] - start < (end - start) - 0.4
    assert arrivals == sorted(arrivals)


def test_fake_callback_exception_propagates(fake_harness):
    with fake_harness() as harness:
        def explode(_n):
            raise KeyError("callback broke")

        with pytest.raises(KeyError, match="callback broke"):
            harness.run("hi", session_id="s", on_notification=explode)
        assert harness.client._subscriptions == []
        assert harness.run("after", session_id="s").final_response == "echo: after"


# ----------------------------------------------------------------- launch and environment


def test_fake_environment_and_absolute_paths(fake_harness, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "rt").mkdir()
    monkeypatch.setenv("INHERITED_VAR", "inherited")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://inherited.invalid")
    harness = fake_harness(
        cwd="work",
        runtime_cwd="rt",
        session_root="sessions",
        cordis="cordis.yml",
        api_key="sk-test",
        env={"EXTRA_VAR": "extra", "DSH_CWD": "overridden"},
    )
    with harness:
        answer = lambda text: harness.run(text).final_response  # noqa: E731
        work = str((tmp_path / "work").resolve())
        assert answer("@cwd") == str((tmp_path / "rt").resolve())
        assert json.loads(answer("@initparams")) == {"cwd": work, "model": "deepseek-v4-flash", "provider": "deepseek"}
        assert answer("@env DSH_CWD") == work
        assert answer("@env DSH_SESSION_ROOT") == "sessions"
        assert answer("@env DSH_CORDIS_CONFIG") == "cordis.yml"
        assert answer("@env DEEPSEEK_API_KEY") == "sk-test"
        assert answer("@env DEEPSEEK_BASE_URL") == "http://inherited.invalid"
        assert answer("@env EXTRA_VAR") == "extra"
        assert answer("@env INHERITED_VAR") == "inherited"


def test_fake_cwd_defaults_to_the_process_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with DeepSeekHarness(launch_args_override=fake_argv("echo_runtime.py"), max_tokens=7) as harness:
        params = json.loads(harness.run("@initparams").final_response)
        assert params == {"cwd": str(tmp_path.resolve()), "model": "deepseek-v4-flash", "provider": "deepseek",
                          "maxTokens": 7}
        assert harness.run("@env DSH_CWD").final_response == str(tmp_path.resolve())


def test_fake_runtime_bin_is_launched_with_stdio(fake_bin, tmp_path, monkeypatch):
    wrapper = fake_bin("echo_runtime.py")
    with DeepSeekHarness(runtime_bin=str(wrapper), cwd=str(tmp_path)) as harness:
        assert harness.server_info.name == "deepseek-harness-sdk-runtime"
        assert harness.run("via runtime_bin").final_response == "echo: via runtime_bin"
    monkeypatch.setenv("HARNESSD_BIN", str(wrapper))
    with DeepSeekHarness(cwd=str(tmp_path)) as harness:
        assert harness.run("via env").final_response == "echo: via env"
    monkeypatch.delenv("HARNESSD_BIN")
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    with HarnessClient() as client:
        init = client.initialize(cwd=str(tmp_path), provider="scripted", model="m")
        assert init.serverInfo.name == "deepseek-harness-sdk-runtime"


def test_fake_initialize_failure_closes_the_runtime(tmp_path):
    for provider, error in (("fail", JsonRpcError), ("bad-result", ValueError)):
        client = HarnessClient(HarnessConfig(launch_args_override=fake_argv("echo_runtime.py")))
        client.start()
        proc = client._proc
        with pytest.raises(error):
            client.initialize(cwd=str(tmp_path), provider=provider, model="m")
        assert client._proc is None
        assert proc.poll() is not None  # reaped
    harness = DeepSeekHarness(launch_args_override=fake_argv("echo_runtime.py"), provider="fail")
    with pytest.raises(JsonRpcError, match="no adapter registered"):
        harness.start()
    assert harness.client._proc is None


# ----------------------------------------------------------------- the runtime goes away


def test_fake_runtime_dies_mid_turn(fake_harness):
    harness = fake_harness()
    harness.start()
    proc = harness.client._proc
    watcher = harness.client.subscribe_notifications(lambda n: False)
    seen = []
    with pytest.raises(TransportClosedError) as info:
        harness.run("@die", on_notification=seen.append)
    err = info.value
    text = str(err)
    assert text.startswith("DeepSeek Harness runtime stdout closed\nexit code: 3\nstderr tail:\n")
    assert "CRASH-MARKER" in text and "filler line 0449" in text
    assert "filler line 0050" not in text  # only the last 400 lines
    assert err.exit_code == 3 and "CRASH-MARKER" in err.stderr_tail
    assert [n.payload["event"]["type"] for n in seen] == ["turn/start", "user/message"]
    assert proc.poll() == 3
    # Everything that waits learns why, at once.
    start = time.monotonic()
    with pytest.raises(TransportClosedError, match="CRASH-MARKER"):
        harness.run("again")
    with pytest.raises(TransportClosedError, match="CRASH-MARKER"):
        harness.client.next_notification()
    with pytest.raises(TransportClosedError, match="CRASH-MARKER"):
        harness.client.next_notification()
    with pytest.raises(TransportClosedError, match="CRASH-MARKER"):
        watcher.next()
    assert time.monotonic() - start < 1
    # A closed harness starts a fresh runtime.
    harness.close()
    assert harness.run("fresh").final_response == "echo: fresh"
    assert harness.client._notifications.qsize() == 0


def test_fake_close_fails_waiters_and_reaps(fake_client):
    client = fake_client()
    proc = client._proc
    sub = client.subscribe_session_notifications("h")
    outcome = []

    def hang():
        try:
            client.session_prompt("h", [{"type": "text", "text": "@hang"}])
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    time.sleep(0.2)
    client.close()
    client.close()
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], TransportClosedError)
    assert str(outcome[0]).startswith("DeepSeek Harness runtime closed")
    assert client._proc is None and client._pending == {}
    assert proc.returncode == 0  # it answered shutdown and exited by itself
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)
    with pytest.raises(TransportClosedError):
        sub.next()
    with pytest.raises(TransportClosedError):
        client.next_notification()
    with pytest.raises(TransportClosedError, match="not running"):
        client.session_prompt("h", [{"type": "text", "text": "x"}])
    assert not any(t.name.startswith("dsh-runtime") and t.is_alive() for t in threading.enumerate())


def test_fake_close_kills_a_runtime_that_will_not_exit(fake_client):
    client = fake_client("stubborn.py", shutdown_timeout_seconds=0.3)
    proc = client._proc
    start = time.monotonic()
    client.close()
    assert time.monotonic() - start < 5
    assert proc.returncode == -9
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)


def test_fake_initialize_timeout_is_the_callers_timeout(tmp_path):
    # The runtime never answers, ignores stdin EOF and SIGTERM: the caller's
    # 0.1 s bound holds, plus a short grace to stop the runtime; the polite
    # shutdown request (and its own timeout) is skipped.
    client = HarnessClient(HarnessConfig(launch_args_override=fake_argv("mute.py"), request_timeout_seconds=0.1))
    client.start()
    proc = client._proc
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        client.initialize(cwd=str(tmp_path), provider="scripted", model="fake")
    elapsed = time.monotonic() - start
    assert elapsed < 1.0, elapsed
    assert proc.returncode == -9 and client._proc is None


def test_fake_stderr_is_collected_and_logged(fake_client, caplog):
    caplog.set_level(logging.DEBUG, logger="deepseek_harness.runtime")
    client = fake_client()
    client.session_prompt("s", [{"type": "text", "text": "@stderr hello from stderr"}])
    deadline = time.monotonic() + 5
    while "hello from stderr" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "hello from stderr" in caplog.text


def test_fake_missing_runtime_bin_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        HarnessClient(HarnessConfig(runtime_bin=str(tmp_path / "nope" / "harnessd"))).start()
