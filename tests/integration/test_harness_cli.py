"""Black-box tests of the `harness` CLI (src/main/harness_main.cpp): output,
exit codes (0 ok, 1 error, 2 aborted, 3 connection/usage), --json, chat, and
the session readers: sessions, log (--follow) and attach.

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

from harnessd_helpers import REPO_ROOT, harnessd_bin, log_path, read_log

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


def test_prompt_prints_tool_calls_on_stderr(tmp_path):
    # The spawned daemon's workspace is its cwd: the CLI's, tmp_path.
    prompt = ('@tool write {"file_path":"notes/a.txt","content":"one\\ntwo\\n"}\n'
              '@tool read {"file_path":"missing.txt"}')
    proc = run_cli(["prompt", *spawn_args(), prompt], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert (tmp_path / "notes" / "a.txt").read_text() == "one\ntwo\n"
    # stdout keeps the assistant's answer alone.
    assert proc.stdout.startswith("write said: "), describe(proc)
    assert "read said: " in proc.stdout and "⚙" not in proc.stdout, describe(proc)
    assert proc.stderr.splitlines() == ["⚙ write notes/a.txt ✓", "⚙ read missing.txt ✗ NOT_FOUND", "[ok]"], describe(proc)

    proc = run_cli(["prompt", *spawn_args(), '@tool bash {"command":"echo hi; exit 3","description":"x"}'], tmp_path)
    assert proc.returncode == 0, describe(proc)
    # Without a working sandbox (no bubblewrap here) bash fails closed.
    assert proc.stderr.splitlines()[0] in ("⚙ bash: echo hi; exit 3 ✗ exit 3",
                                           "⚙ bash: echo hi; exit 3 ✗ SANDBOX_UNAVAILABLE"), describe(proc)

    proc = run_cli(["prompt", *spawn_args(), "--json", '@tool read {"file_path":"notes/a.txt"}'], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert "⚙" not in proc.stderr and "⚙" not in proc.stdout, describe(proc)
    assert any(json.loads(line).get("params", {}).get("event", {}).get("type") == "tool/result"
               for line in proc.stdout.splitlines()), describe(proc)


def test_prompt_verbose_shows_tool_results_folded(tmp_path):
    (tmp_path / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    proc = run_cli(["prompt", *spawn_args(), "-v", '@tool read {"file_path":"long.txt"}\n'
                    '@tool glob {"pattern":"*.txt"}'], tmp_path)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stderr.splitlines()
    # Two read-only calls run in parallel: both lines, then the results in call order.
    read_at = lines.index("⚙ read long.txt ✓")
    assert lines[read_at + 1] == "         1\tline 1", describe(proc)
    assert lines[read_at + 20] == "        20\tline 20", describe(proc)
    assert lines[read_at + 21].startswith("    … ") and "more lines" in lines[read_at + 21], describe(proc)
    glob_at = lines.index("⚙ glob *.txt ✓")
    assert lines[glob_at + 1] == "    long.txt", describe(proc)
    assert lines[-1] == "[ok]"
    assert "line 1" not in proc.stdout.split("read said:")[0], describe(proc)


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


# ---------------------------------------------------------------------------
# sessions, log, attach (session/list, session/events, session/subscribe)


def connect_args(daemon) -> list[str]:
    return ["--connect", f"tcp://127.0.0.1:{daemon.port}"]


def start_cli(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([cli_bin(), *args], cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def wait_running(raw, session_id: str, start: int = 0) -> None:
    """Until the first event of the turn just prompted arrives."""
    raw.wait_frame(lambda o: o.get("method") == "session.event" and o["params"]["sessionId"] == session_id,
                   start=start, what=f"first event of {session_id}")


def test_sessions_json_pages_through_every_session(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("alpha", "hello")
    raw.run_prompt("beta", "@chunks 3 4")
    raw.run_prompt("beta", "again")
    raw.run_prompt("kid", "@subagent hi")
    start = len(raw.frames)
    busy = raw.prompt("busy", "@delay 3000\n@reply late")
    wait_running(raw, "busy", start)
    try:
        proc = run_cli(["sessions", *connect_args(daemon), "--json"], tmp_path)
        assert proc.returncode == 0, describe(proc)
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        by_id = {r["sessionId"]: r for r in rows}
        assert len(by_id) == len(rows) == 5, rows
        assert by_id["alpha"]["lastSeq"] == 10 and by_id["alpha"]["turns"] == 1, by_id["alpha"]
        assert by_id["beta"]["turns"] == 2 and by_id["beta"]["running"] is False, by_id["beta"]
        children = [r for r in rows if r.get("parentSessionId") == "kid"]
        assert len(children) == 1 and children[0]["sessionId"].startswith("kid.sub-"), rows
        assert by_id["busy"]["running"] is True, by_id["busy"]
        updated = [r["updatedAt"] for r in rows]
        assert updated == sorted(updated, reverse=True), rows

        # One session per request: the cursor pages through the same list.
        paged = run_cli(["sessions", *connect_args(daemon), "--json", "--page-size", "1"], tmp_path)
        assert paged.returncode == 0, describe(paged)
        assert [json.loads(line)["sessionId"] for line in paged.stdout.splitlines()] == [r["sessionId"] for r in rows]
    finally:
        cid = raw.request("session/cancel", {"sessionId": "busy"})
        raw.response(cid)
        raw.response(busy)


def test_sessions_table(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("kid", "@subagent hi")
    time.sleep(0.01)  # a turn takes under a millisecond: solo must be updated strictly later
    raw.run_prompt("solo", "hello")
    proc = run_cli(["sessions", *connect_args(daemon)], tmp_path)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["ID", "CREATED", "UPDATED", "LASTSEQ", "TURNS", "RUNNING", "PARENT"], describe(proc)
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert len(rows) == 3, describe(proc)
    # ID, CREATED (date time), UPDATED (date time), LASTSEQ, TURNS, RUNNING, PARENT
    assert rows["solo"][5:] == ["10", "1", "no", "-"], describe(proc)
    assert rows["solo"][1].count("-") == 2 and rows["solo"][2].count(":") == 2, describe(proc)
    child = [r for sid, r in rows.items() if sid.startswith("kid.sub-")]
    assert len(child) == 1 and child[0][-1] == "kid", describe(proc)
    assert lines[1].split()[0] == "solo", "most recently updated first" + describe(proc)


def test_sessions_of_an_empty_daemon(spawn, tmp_path):
    daemon = spawn()
    proc = run_cli(["sessions", *connect_args(daemon)], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "" and "no sessions" in proc.stderr, describe(proc)
    as_json = run_cli(["sessions", *connect_args(daemon), "--json"], tmp_path)
    assert as_json.returncode == 0 and as_json.stdout == "", describe(as_json)


def test_log_prints_the_transcript(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("L", "hello")
    raw.run_prompt("L", "@chunks 3 4")
    raw.run_prompt("L", "@error boom")
    raw.run_prompt("L", "@subagent hi\nsecond line")
    proc = run_cli(["log", *connect_args(daemon), "L"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == (
        "> hello\n"
        "echo: hello\n"
        "[ok]\n"
        "> @chunks 3 4\n"
        "aaaabbbbcccc\n"
        "[ok]\n"
        "> @error boom\n"
        "[error: boom]\n"
        "> @subagent hi\n"
        "> second line\n"
        '[tool-call subagent {"description":"scripted subagent","prompt":"hi"}]\n'
        "[tool-result: echo: hi]\n"
        "subagent said: echo: hi\n"
        "[ok]\n"
    ), describe(proc)


def test_log_json_is_the_session_log(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("J", "hello")
    raw.run_prompt("J", "@chunks 1500 2")  # more than one page of session/events
    proc = run_cli(["log", *connect_args(daemon), "J", "--json"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    _, logged = read_log(log_path(daemon.session_root, "J"))
    assert events == logged
    assert [e["seq"] for e in events] == list(range(len(events))) and len(events) > 1000


def test_log_and_attach_of_an_unknown_session_exit_1(spawn, tmp_path):
    daemon = spawn()
    for command in (["log"], ["log", "--follow"], ["attach"]):
        proc = run_cli([*command, *connect_args(daemon), "no-such-session"], tmp_path)
        assert proc.returncode == 1, describe(proc)
        assert "unknown session: no-such-session" in proc.stderr and "-32602" in proc.stderr, describe(proc)
        assert proc.stdout == "", describe(proc)


def test_log_follow_prints_live_turns_until_interrupted(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("F", "hello")
    cli = start_cli(["log", *connect_args(daemon), "F", "--follow"], tmp_path)
    try:
        out = LineReader(cli.stdout)
        out.wait_for(lambda line: line == "[ok]\n")
        raw.run_prompt("F", "@chunks 2 3")
        out.wait_for(lambda line: line == "> @chunks 2 3\n")
        assert out.wait_for(lambda line: True) == "aaabbb\n"
        assert out.wait_for(lambda line: True) == "[ok]\n"
        time.sleep(0.2)
        assert cli.poll() is None, "--follow must keep running"
        cli.send_signal(signal.SIGINT)
        assert cli.wait(TIMEOUT) == 0
    finally:
        stop(cli)


def test_log_follow_exits_3_when_the_daemon_goes_away(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("L", "hello")
    cli = start_cli(["log", *connect_args(daemon), "L", "--follow"], tmp_path)
    try:
        out = LineReader(cli.stdout)
        out.wait_for(lambda line: line == "[ok]\n")
        daemon.proc.kill()
        daemon.proc.wait(TIMEOUT)
        assert cli.wait(TIMEOUT) == 3
        # "... while following L", or, when the subscribe was still in
        # flight (a slow build), the failed request's own message.
        assert "harness: connection lost" in cli.stderr.read()
    finally:
        stop(cli)


def test_log_follow_json_misses_no_event_and_repeats_none(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("G", "@chunks 50 2")
    cli = start_cli(["log", *connect_args(daemon), "G", "--follow", "--json"], tmp_path)
    try:
        out = LineReader(cli.stdout)
        # Turns run while the CLI reads the history and subscribes.
        for i in range(5):
            raw.run_prompt("G", f"@chunks {10 + i} 3")
        last = raw.session_events("G")[-1]["seq"]
        out.wait_for(lambda line: json.loads(line)["seq"] == last)
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(TIMEOUT) == 0
        seqs = [json.loads(line)["seq"] for line in out.seen]
        assert seqs == list(range(last + 1)), seqs
    finally:
        stop(cli)


def test_attach_follows_a_running_turn_of_another_connection(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("A", "hello")  # an earlier turn: attach starts at the last turn/start
    start = len(raw.frames)
    # About 5 s: still running when the CLI (slow under sanitizers) attaches.
    rid = raw.prompt("A", "@chunks 200 8\n@delay 25")
    wait_running(raw, "A", start)
    proc = run_cli(["attach", *connect_args(daemon), "A"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    text = "".join(chr(ord("a") + i % 26) * 8 for i in range(200))
    assert proc.stdout == f"> @chunks 200 8\n> @delay 25\n{text}\n", describe(proc)
    assert proc.stderr.strip().endswith("[ok]"), describe(proc)
    assert raw.response(rid)["result"]["status"] == "ok"


def test_attach_picks_up_a_detached_turn(spawn, tmp_path):
    daemon = spawn()
    prompt = start_cli(["prompt", *connect_args(daemon), "--session", "D", "--on-disconnect", "continue",
                        "@chunks 200 8\n@delay 25"], tmp_path)
    try:
        prompt.stdout.read(8)  # the turn streams
        prompt.kill()  # the connection drops; the turn runs on
        prompt.wait()
    finally:
        stop(prompt)
    proc = run_cli(["attach", *connect_args(daemon), "D", "--json"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["type"] == "turn/start" and events[0]["seq"] == 0, describe(proc)
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"] == {"kind": "completed"}
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert "[ok]" in proc.stderr, describe(proc)


def test_attach_exits_2_when_the_turn_is_cancelled(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    start = len(raw.frames)
    rid = raw.prompt("X", "@chunks 200 8\n@delay 25")
    wait_running(raw, "X", start)
    cli = start_cli(["attach", *connect_args(daemon), "X"], tmp_path)
    try:
        out = LineReader(cli.stdout)
        out.wait_for(lambda line: line == "> @delay 25\n")
        cid = raw.request("session/cancel", {"sessionId": "X"})
        assert raw.response(cid)["result"] == {"cancelled": True}
        assert cli.wait(TIMEOUT) == 2
        assert "[aborted: cancelled]" in cli.stderr.read()
    finally:
        stop(cli)
    assert raw.response(rid)["result"]["status"] == "aborted"


def test_attach_exits_1_for_an_error_turn(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    start = len(raw.frames)
    rid = raw.prompt("E", "@delay 1500\n@error boom")
    wait_running(raw, "E", start)
    proc = run_cli(["attach", *connect_args(daemon), "E"], tmp_path)
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout == "> @delay 1500\n> @error boom\n", describe(proc)
    assert proc.stderr.strip().endswith("[error: boom]"), describe(proc)
    raw.response(rid)


def test_attach_without_a_running_turn_reports_the_last_one(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("done", "hello")
    ok = run_cli(["attach", *connect_args(daemon), "done"], tmp_path)
    assert ok.returncode == 0, describe(ok)
    assert ok.stdout == "" and ok.stderr.strip().endswith("[ok]"), describe(ok)
    assert "no turn is running" in ok.stderr, describe(ok)
    raw.run_prompt("done", "@error boom")
    failed = run_cli(["attach", *connect_args(daemon), "done"], tmp_path)
    assert failed.returncode == 1, describe(failed)
    assert failed.stderr.strip().endswith("[error: boom]"), describe(failed)


def test_attach_ctrl_c_detaches_and_leaves_the_turn_running(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    start = len(raw.frames)
    # About 8 s: still running when Ctrl-C comes, even on a slow (sanitizer) build.
    rid = raw.prompt("K", "@chunks 400 8\n@delay 20")
    wait_running(raw, "K", start)
    cli = start_cli(["attach", *connect_args(daemon), "K"], tmp_path)
    try:
        LineReader(cli.stdout).wait_for(lambda line: line == "> @delay 20\n")
        cli.send_signal(signal.SIGINT)
        assert cli.wait(TIMEOUT) == 2
        assert "detached" in cli.stderr.read()
    finally:
        stop(cli)
    assert raw.response(rid, timeout=30)["result"]["status"] == "ok"


def test_sessions_and_log_read_a_stopped_daemons_logs(spawn, tmp_path):
    daemon = spawn()
    raw = daemon.connect()
    raw.initialize()
    raw.run_prompt("old", "hello")
    raw.close()
    daemon.terminate()
    offline = ["--spawn", "--harnessd", os.path.abspath(harnessd_bin()),
               f"--daemon-arg=--session-root={daemon.session_root}"]
    listed = run_cli(["sessions", *offline, "--json"], tmp_path)
    assert listed.returncode == 0, describe(listed)
    assert [json.loads(line)["sessionId"] for line in listed.stdout.splitlines()] == ["old"], describe(listed)
    log = run_cli(["log", *offline, "old"], tmp_path)
    assert log.returncode == 0, describe(log)
    assert log.stdout == "> hello\necho: hello\n[ok]\n", describe(log)


def test_reader_commands_teach_in_their_help(tmp_path):
    for command in ("sessions", "log", "attach"):
        proc = run_cli([command, "--help"], tmp_path)
        assert proc.returncode == 0, describe(proc)
        assert "Examples:" in proc.stdout and f"harness {command}" in proc.stdout, describe(proc)
        assert "--connect" in proc.stdout and "--json" in proc.stdout, describe(proc)
    assert "--follow" in run_cli(["log", "--help"], tmp_path).stdout
    assert "--on-disconnect" in run_cli(["prompt", "--help"], tmp_path).stdout


# approvals and questions (approvalPolicy ask: the default of network listeners)


def write_prompt(path: str, content: str = "hi\n") -> str:
    return "@tool write " + json.dumps({"file_path": path, "content": content})


def ask_prompt(questions) -> str:
    return "@tool ask_user_question " + json.dumps({"questions": questions})


def test_approve_all_and_none_over_tcp(spawn, tmp_path):
    ws = tmp_path / "ws"
    daemon = spawn(args=["--workspace-root", str(ws)])
    # Each session's workspace is WORKSPACE_ROOT/SESSION_ID (no cwd is sent).
    proc = run_cli(["prompt", *connect_args(daemon), "--session", "yes", "--approve", "all",
                    write_prompt("a.txt", "allowed\n")], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert (ws / "yes" / "a.txt").read_text() == "allowed\n"
    assert "harness: allowed write a.txt (--approve all)" in proc.stderr, describe(proc)
    assert "⚙ write a.txt ✓" in proc.stderr.splitlines(), describe(proc)

    proc = run_cli(["prompt", *connect_args(daemon), "--session", "no", "--approve", "none",
                    write_prompt("a.txt")], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert not (ws / "no" / "a.txt").exists()
    assert "harness: rejected write a.txt (--approve none)" in proc.stderr, describe(proc)
    assert "⚙ write a.txt ✗ REJECTED" in proc.stderr.splitlines(), describe(proc)
    # The model reads why.
    assert proc.stdout.startswith("write said: ") and "--approve none" in proc.stdout, describe(proc)


def test_without_a_terminal_approvals_fail_closed_and_questions_are_declined(spawn, tmp_path):
    ws = tmp_path / "ws"
    daemon = spawn(args=["--workspace-root", str(ws)])
    proc = run_cli(["prompt", *connect_args(daemon), "--session", "closed", write_prompt("a.txt")], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert not (ws / "closed" / "a.txt").exists()
    assert "harness: rejected write a.txt: no terminal to ask" in proc.stderr, describe(proc)
    assert "⚙ write a.txt ✗ REJECTED" in proc.stderr.splitlines(), describe(proc)

    questions = [{"id": "db", "question": "Which?", "options": [{"label": "A"}, {"label": "B"}]}]
    proc = run_cli(["prompt", *connect_args(daemon), "--session", "q", "--approve", "all",
                    ask_prompt(questions)], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert "declined a question" in proc.stderr, describe(proc)
    assert proc.stdout == "ask_user_question said: []\n", describe(proc)

    # A session's log shows the decisions the CLI sent.
    raw = daemon.connect()
    raw.initialize()
    logged = raw.response(raw.request("session/events", {"sessionId": "closed"}))["result"]["events"]
    resolved = [e["data"] for e in logged if e["type"] == "approval/resolved"]
    assert [(r["outcome"], r["source"]) for r in resolved] == [("rejected", "client")], logged


def test_approval_policy_option(spawn, tmp_path):
    ws = tmp_path / "ws"
    daemon = spawn(args=["--workspace-root", str(ws)])
    # never: the network daemon's default (ask) is overridden; nothing is asked.
    proc = run_cli(["prompt", *connect_args(daemon), "--session", "never", "--approval-policy", "never",
                    write_prompt("a.txt")], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert (ws / "never" / "a.txt").exists()
    assert "harness:" not in proc.stderr, describe(proc)

    # ask on a spawned stdio daemon (whose default is never): --approve none rejects.
    proc = run_cli(["prompt", *spawn_args(), "--approval-policy", "ask", "--approve", "none",
                    write_prompt("b.txt")], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert not (tmp_path / "b.txt").exists()
    assert "⚙ write b.txt ✗ REJECTED" in proc.stderr.splitlines(), describe(proc)

    proc = run_cli(["prompt", *spawn_args(), "--approval-policy", "sometimes", "hi"], tmp_path)
    assert proc.returncode == 3, describe(proc)


def test_a_terminal_is_asked(spawn, tmp_path):
    """stdin on a pseudo-terminal: the approval and the question are typed in."""
    import pty  # noqa: F401 (POSIX only, like the rest of the suite)

    ws = tmp_path / "ws"
    daemon = spawn(args=["--workspace-root", str(ws)])
    questions = [{"id": "db", "question": "Which database?", "header": "Storage",
                  "options": [{"label": "Postgres", "description": "a server"}, {"label": "SQLite"}]},
                 {"id": "name", "question": "Name?"}]
    prompt = write_prompt("a.txt", "typed\n") + "\n" + write_prompt("b.txt") + "\n" + ask_prompt(questions)
    master, slave = os.openpty()
    # A new session: no controlling terminal, so the CLI asks on stdin, the pty.
    proc = subprocess.Popen([cli_bin(), "prompt", *connect_args(daemon), "--session", "tty", prompt],
                            cwd=str(tmp_path), stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    os.close(slave)
    seen = b""

    def expect(text: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + TIMEOUT
        while text not in seen:
            assert time.monotonic() < deadline, f"no {text!r} on the terminal; seen {seen[-400:]!r}"
            try:
                seen += os.read(master, 4096)
            except OSError:
                raise AssertionError(f"terminal closed; seen {seen[-400:]!r}")
        seen = seen[seen.index(text) + len(text):]

    try:
        expect(b"Allow write a.txt? [y]es once / [a]lways for this session / [n]o: ")
        os.write(master, b"maybe\n")  # not an answer: asked again
        expect(b"[n]o: ")
        os.write(master, b"y\n")
        expect(b"Allow write b.txt?")
        expect(b"[n]o: ")
        os.write(master, b"n\n")
        expect(b"Message for the model (optional): ")
        os.write(master, b"not that one\n")
        expect(b"[Storage] Which database?")
        expect(b"2) SQLite")
        expect(b"(empty: skip): ")
        os.write(master, b"2\n")
        expect(b"Answer (empty: skip): ")
        os.write(master, b"my project\n")
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        stop(proc)
        os.close(master)
    assert proc.returncode == 0, f"[exit {proc.returncode}]\n{out}\n{err}"
    assert (ws / "tty" / "a.txt").read_text() == "typed\n"
    assert not (ws / "tty" / "b.txt").exists()
    assert "not that one" in out, out
    answers = json.loads(out.split("ask_user_question said: ", 1)[1].strip())
    assert answers == [{"id": "db", "selected": ["SQLite"]}, {"id": "name", "selected": [], "custom": "my project"}]


def test_approve_all_covers_a_subagents_calls(tmp_path):
    proc = run_cli(["prompt", *spawn_args(), "--approval-policy", "ask", "--approve", "all",
                    "@subagent " + write_prompt("sub.txt")], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert (tmp_path / "sub.txt").exists()
    assert "harness: allowed write sub.txt (--approve all)" in proc.stderr, describe(proc)
