"""Black-box tests of the `harness` CLI (src/main/harness_main.cpp): output,
exit codes (0 ok, 1 error, 2 aborted, 3 connection/usage), --json, chat.

The CLI comes from $HARNESS_CLI_BIN (default build/harness), the daemon from
$HARNESSD_BIN as in the rest of this suite.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harnessd_helpers import REPO_ROOT, harnessd_bin

TIMEOUT = 30


def cli_bin() -> str:
    path = os.environ.get("HARNESS_CLI_BIN") or str(REPO_ROOT / "build" / "harness")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        pytest.fail(f"harness CLI not found or not executable: {path!r} "
                    f"(build the `harness` target, or point HARNESS_CLI_BIN at it)", pytrace=False)
    return os.path.abspath(path)  # the CLI runs in a temporary directory


def spawn_args() -> list[str]:
    """Spawn the daemon under test, without session logs on disk."""
    return ["--spawn", "--harnessd", os.path.abspath(harnessd_bin()), "--daemon-arg=--store", "--daemon-arg=memory"]


def run_cli(args: list[str], cwd: Path, stdin: str | None = None, timeout: float = TIMEOUT):
    proc = subprocess.run([cli_bin(), *args], cwd=str(cwd), input=stdin, capture_output=True,
                          text=True, timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL)
    return proc


def describe(proc) -> str:
    return f"\n[exit {proc.returncode}]\n[stdout]\n{proc.stdout[-2000:]}\n[stderr]\n{proc.stderr[-2000:]}"


class LineReader:
    """Collects a pipe's lines on a thread so the test can wait with a timeout."""

    def __init__(self, stream):
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream) -> None:
        for line in iter(stream.readline, ""):
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pred, timeout: float = TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching line within {timeout}s; seen: {self.seen[-5:]}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"stream ended without a matching line; seen: {self.seen[-5:]}")
            self.seen.append(line)
            if pred(line):
                return line


# ---------------------------------------------------------------------------
# prompt


def test_prompt_spawn_hello(tmp_path):
    proc = run_cli(["prompt", *spawn_args(), "hello"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "echo: hello\n", describe(proc)
    assert proc.stderr.strip().endswith("[ok]"), describe(proc)


def test_prompt_spawn_finds_the_daemon_next_to_the_cli(tmp_path):
    sibling = Path(cli_bin()).resolve().parent / "harnessd"
    if not sibling.is_file():
        pytest.fail(f"no harnessd next to the CLI ({sibling}); build both targets", pytrace=False)
    proc = run_cli(["prompt", "--spawn", "--daemon-arg=--store", "--daemon-arg=memory", "hello"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "echo: hello\n", describe(proc)


def test_prompt_streams_chunks(tmp_path):
    proc = run_cli(["prompt", *spawn_args(), "@chunks 4 3"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "aaabbbcccddd\n", describe(proc)


def test_prompt_error_exits_1(tmp_path):
    proc = run_cli(["prompt", *spawn_args(), "@error boom"], tmp_path)
    assert proc.returncode == 1, describe(proc)
    assert "[error: boom]" in proc.stderr, describe(proc)
    assert proc.stdout == "", describe(proc)


def test_prompt_aborted_exits_2(spawn, tmp_path):
    daemon = spawn()
    sid = "cli-abort"
    cli = subprocess.Popen(
        [cli_bin(), "prompt", "--connect", f"tcp://127.0.0.1:{daemon.port}", "--session", sid,
         "@delay 2000\n@chunks 5 4"],
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        raw = daemon.connect()
        raw.initialize()
        deadline = time.monotonic() + 10
        cancelled = False
        while not cancelled and time.monotonic() < deadline:
            rid = raw.request("session/cancel", {"sessionId": sid})
            cancelled = raw.response(rid)["result"]["cancelled"]
            if not cancelled:
                time.sleep(0.02)
        assert cancelled, "the CLI's turn never started running"
        out, err = cli.communicate(timeout=TIMEOUT)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 2, f"exit {cli.returncode}\n{out}\n{err}"
    assert "[aborted: cancelled]" in err, err


def test_prompt_json_lines(tmp_path):
    proc = run_cli(["prompt", *spawn_args(), "--json", "--session", "J", "@chunks 3 4"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    assert len(lines) >= 2, describe(proc)
    objs = [json.loads(line) for line in lines]
    *notes, response = objs
    assert response.get("result") == {"status": "ok", "reason": {"kind": "completed"}}, response
    assert "id" in response and "method" not in response
    for n in notes:
        assert n["method"] == "session.event" and "id" not in n, n
        assert n["params"]["sessionId"] == "J", n
    seqs = [n["params"]["event"]["seq"] for n in notes]
    assert seqs == list(range(len(seqs))), seqs
    assert notes[-1]["params"]["event"]["type"] == "turn/end"


def test_prompt_over_websocket(spawn, tmp_path):
    daemon = spawn(args=["--listen", "ws://127.0.0.1:0"])
    ws = [u for u in daemon.listen if u.startswith("ws://")]
    assert ws, daemon.listen
    proc = run_cli(["prompt", "--connect", ws[0], "hello"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "echo: hello\n", describe(proc)


def test_prompt_busy_session_is_an_error(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    busy = raw.prompt("busy", "@delay 2000\n@chunks 5 4")
    raw.wait_frame(lambda o: o.get("method") == "session.event", what="first event")
    proc = run_cli(["prompt", "--connect", f"tcp://127.0.0.1:{daemon.port}", "--session", "busy", "hi"], tmp_path)
    assert proc.returncode == 1, describe(proc)
    assert "-32001" in proc.stderr and "active prompt" in proc.stderr, describe(proc)
    cid = raw.request("session/cancel", {"sessionId": "busy"})
    raw.response(cid)
    raw.response(busy)


def test_connection_and_usage_errors_exit_3(tmp_path):
    refused = run_cli(["prompt", "--connect", "tcp://127.0.0.1:1", "hi"], tmp_path)
    assert refused.returncode == 3, describe(refused)
    assert "cannot connect" in refused.stderr, describe(refused)
    bad_url = run_cli(["prompt", "--connect", "http://x:1", "hi"], tmp_path)
    assert bad_url.returncode == 3, describe(bad_url)
    missing = run_cli(["prompt", "--spawn", "--harnessd", str(tmp_path / "nope"), "hi"], tmp_path)
    assert missing.returncode == 3, describe(missing)
    usage = run_cli(["prompt"], tmp_path)
    assert usage.returncode == 3, describe(usage)
    both = run_cli(["prompt", "--spawn", "--connect", "tcp://127.0.0.1:1", "hi"], tmp_path)
    assert both.returncode == 3, describe(both)


def test_help_teaches_with_examples(tmp_path):
    proc = run_cli(["--help"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert "Examples:" in proc.stdout and "harness prompt" in proc.stdout and "harness chat" in proc.stdout
    sub = run_cli(["prompt", "--help"], tmp_path)
    assert sub.returncode == 0 and "--connect" in sub.stdout and "--json" in sub.stdout, describe(sub)


# ---------------------------------------------------------------------------
# chat


def test_chat_over_a_pipe_answers_each_line(tmp_path):
    proc = run_cli(["chat", *spawn_args()], tmp_path, stdin="hello\n\nworld\n")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "echo: hello\necho: world\n", describe(proc)


def test_chat_last_line_without_newline(tmp_path):
    proc = run_cli(["chat", *spawn_args()], tmp_path, stdin="one\ntwo")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "echo: one\necho: two\n", describe(proc)


def test_chat_ctrl_c_cancels_the_turn_then_continues(spawn, tmp_path):
    daemon = spawn()
    cli = subprocess.Popen(
        [cli_bin(), "chat", "--json", "--connect", f"tcp://127.0.0.1:{daemon.port}", "--session", "C"],
        cwd=str(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        bufsize=1)
    try:
        out = LineReader(cli.stdout)
        cli.stdin.write("@delay 5000\n")
        cli.stdin.flush()
        out.wait_for(lambda line: '"turn/start"' in line)
        cli.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        aborted = json.loads(out.wait_for(lambda line: '"result"' in line))
        assert time.monotonic() - t0 < 4, "Ctrl-C did not cancel the turn"
        assert aborted["result"] == {"status": "aborted", "reason": {"kind": "aborted", "reason": "cancelled"}}
        cli.stdin.write("hello\n")
        cli.stdin.flush()
        ok = json.loads(out.wait_for(lambda line: '"result"' in line))
        assert ok["result"]["status"] == "ok"
        cli.stdin.close()
        assert cli.wait(TIMEOUT) == 0
        err = cli.stderr.read()
        assert "[aborted: cancelled]" in err, err
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_chat_second_ctrl_c_quits(spawn, tmp_path):
    daemon = spawn()
    cli = subprocess.Popen(
        [cli_bin(), "chat", "--json", "--connect", f"tcp://127.0.0.1:{daemon.port}", "--session", "Q"],
        cwd=str(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        bufsize=1)
    try:
        # Idle: the first Ctrl-C only explains, the second quits.
        out = LineReader(cli.stdout)
        cli.stdin.write("hi\n")
        cli.stdin.flush()
        out.wait_for(lambda line: '"result"' in line)
        cli.send_signal(signal.SIGINT)
        time.sleep(0.2)
        assert cli.poll() is None, "one Ctrl-C at the prompt must not quit"
        cli.send_signal(signal.SIGINT)
        assert cli.wait(TIMEOUT) == 0
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
