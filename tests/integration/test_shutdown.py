"""shutdown, stdin EOF, stdin from files, SIGTERM (docs/protocol.md §4 shutdown)."""

import json
import signal
import subprocess
import time

from harnessd_helpers import (SHUTTING_DOWN, check_turn, chunk_bytes, encode, error_of, final_text, harnessd_bin,
                              is_response, make_request, prompt_params, read_log, result_of, text_deltas)

OK = {"status": "ok", "reason": {"kind": "completed"}}


def test_shutdown_waits_for_running_turns_stdio(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize()
    p1 = c.prompt("A", "@delay 100\n@chunks 4 2")
    p2 = c.prompt("B", "@delay 150\n@chunks 3 1")
    c.wait_frame(lambda o: o.get("method") == "session.event", what="a first event")
    sd = c.request("shutdown")
    i_sd, r_sd = c.response_index(sd, timeout=10)
    assert r_sd == {"jsonrpc": "2.0", "id": sd, "result": {}}
    i1, r1 = c.response_index(p1)
    i2, r2 = c.response_index(p2)
    assert result_of(r1) == OK and result_of(r2) == OK
    assert i1 < i_sd and i2 < i_sd, "shutdown answered before the running turns' responses"
    assert text_deltas(c.session_events("A")) == chunk_bytes(4, 2)
    assert text_deltas(c.session_events("B")) == chunk_bytes(3, 1)
    assert d.wait_exit(5) == 0
    assert c.wait_eof(2)
    # the shutdown answer is the last frame
    assert i_sd == len(c.frames) - 1
    # the logs are complete
    for sid in ("A", "B"):
        _, logged = read_log(d.log_path(sid))
        check_turn(logged, turn=0)


def test_second_shutdown_and_requests_after_shutdown(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize()
    p = c.prompt("A", "@delay 200\n@reply done")
    c.wait_frame(lambda o: o.get("method") == "session.event", what="a first event")
    c.send_raw(encode(make_request("shutdown", ..., "sd1")) + encode(make_request("shutdown", ..., "sd2"))
               + encode(make_request("session/prompt", prompt_params("B", "x"), "late")))
    assert result_of(c.response("sd1")) == {}
    assert result_of(c.response("sd2")) == {}
    late = c.response("late")
    assert error_of(late)["code"] == SHUTTING_DOWN and error_of(late)["message"] == "shutting down"
    assert result_of(c.response(p)) == OK
    assert final_text(c.session_events("A")) == "done"
    assert not c.session_events("B")
    assert d.wait_exit(5) == 0


def test_shutdown_idle_stdio_exits_zero(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}\n')
    assert c.next_frame() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert d.wait_exit(5) == 0


def test_shutdown_over_tcp_closes_only_that_connection(tcp_daemon):
    d = tcp_daemon
    c1 = d.connect()
    c2 = d.connect()
    c1.initialize()
    c2.initialize()
    p2 = c2.prompt("other", "@delay 200\n@chunks 3 1")
    p1 = c1.prompt("mine", "@delay 100\n@chunks 2 1")
    c1.wait_frame(lambda o: o.get("method") == "session.event", what="a first event")
    sd = c1.request("shutdown")
    i_sd, r_sd = c1.response_index(sd)
    assert result_of(r_sd) == {}
    i1, r1 = c1.response_index(p1)
    assert result_of(r1) == OK and i1 < i_sd
    assert c1.wait_eof(5), "the daemon keeps a shut-down TCP connection open"
    # the other connection and the daemon are unaffected
    assert result_of(c2.response(p2)) == OK
    assert d.proc.poll() is None
    resp, _ = c2.run_prompt("other", "again")
    assert result_of(resp) == OK
    c3 = d.connect()
    c3.initialize()


def test_stdin_eof_with_running_turn(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize()
    p = c.prompt("E", "@delay 100\n@chunks 3 5")
    c.wait_frame(lambda o: o.get("method") == "session.event", what="a first event")
    d.close_stdin()
    resp = c.response(p, timeout=10)
    assert result_of(resp) == OK, "stdin EOF acts as shutdown: running turns settle"
    assert text_deltas(c.session_events("E")) == chunk_bytes(3, 5)
    assert d.wait_exit(5) == 0
    assert c.wait_eof(2)
    # no response for the implicit shutdown
    assert [f.obj["id"] for f in c.frames if is_response(f.obj)] == [1001, p]
    _, logged = read_log(d.log_path("E"))
    check_turn(logged, turn=0)


def test_stdin_dev_null(tmp_path):
    with open("/dev/null", "rb") as devnull:
        proc = subprocess.run([harnessd_bin(), "--stdio", "--session-root", str(tmp_path / "s")],
                              stdin=devnull, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout == b""


def test_stdin_regular_file(tmp_path):
    lines = [
        make_request("initialize", {}, 1),
        make_request("session/prompt", prompt_params("F", "hello"), 2),
        make_request("session/prompt", prompt_params("G", "@chunks 5 3"), 3),
        make_request("session/cancel", {"sessionId": "F"}, 4),
    ]
    req_file = tmp_path / "requests.ndjson"
    req_file.write_bytes(b"".join(encode(o) for o in lines))
    with open(req_file, "rb") as stdin:
        proc = subprocess.run([harnessd_bin(), "--stdio", "--session-root", str(tmp_path / "s")],
                              stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=15)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout.endswith(b"\n")
    frames = [json.loads(line) for line in proc.stdout.split(b"\n")[:-1]]
    responses = {o["id"]: o for o in frames if is_response(o)}
    assert sorted(responses) == [1, 2, 3, 4]
    assert responses[1]["result"]["serverInfo"]["name"] == "deepseek-harness-sdk-runtime"
    assert responses[3]["result"] == OK
    # The cancel reaches F's turn at once, wherever it is; F either finished
    # first or ends aborted, and its answer says which.
    assert responses[4]["result"] in ({"cancelled": False}, {"cancelled": True})
    cancelled = responses[4]["result"]["cancelled"]
    assert responses[2]["result"] == ({"status": "aborted", "reason": {"kind": "aborted", "reason": "cancelled"}}
                                      if cancelled else OK)
    f_events = [o["params"]["event"] for o in frames
                if o.get("method") == "session.event" and o["params"]["sessionId"] == "F"]
    g_events = [o["params"]["event"] for o in frames
                if o.get("method") == "session.event" and o["params"]["sessionId"] == "G"]
    if not cancelled:
        assert final_text(f_events) == "echo: hello"
    assert f_events[-1]["type"] == "turn/end"
    assert text_deltas(g_events) == chunk_bytes(5, 3)
    # stdout carries frames only; logs go to stderr
    assert all(isinstance(o, dict) and o.get("jsonrpc") == "2.0" for o in frames)


def test_sigterm_idle_exits_zero(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    assert tcp_daemon.terminate(5) == 0
    assert c.wait_eof(2)


def test_sigterm_during_running_turn(spawn):
    # No drain: running turns are cancelled at once (the drain is
    # test_operations.py's).
    d = spawn(args=["--drain-timeout-ms", "0"])
    c = d.connect()
    c.initialize()
    p = c.prompt("T", "@delay 2000\n@chunks 3 1")
    c.wait_frame(lambda o: o.get("method") == "session.event" and o["params"]["event"]["type"] == "step/start",
                 what="step/start")
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    resp = c.response(p, timeout=5)
    assert result_of(resp) == {"status": "aborted", "reason": {"kind": "aborted", "reason": "shutdown"}}
    rc = d.wait_exit(5)
    assert rc == 0
    assert time.monotonic() - t0 < 4
    events = c.session_events("T")
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": "shutdown"}
    _, logged = read_log(d.log_path("T"))
    assert logged == events


def test_sigint_stdio_exits_zero(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize()
    d.signal(signal.SIGINT)
    assert d.wait_exit(5) == 0


def test_shutdown_answer_comes_last(spawn):
    """Requests read before shutdown are answered before it ("... flushes, then answers")."""
    # stdio
    d = spawn(stdio=True, args=["--store", "memory"])
    c = d.stdio_conn()
    c.send_raw(encode(make_request("initialize", {}, 1))
               + encode(make_request("session/prompt", prompt_params("s", "hi"), 2))
               + encode(make_request("session/cancel", {"sessionId": "s"}, 3))
               + encode(make_request("session/cancel", {"sessionId": "unknown"}, 4))
               + encode(make_request("shutdown", ..., 5)))
    assert d.wait_exit(5) == 0
    assert c.wait_eof(2)
    ids = [f.obj["id"] for f in c.frames if is_response(f.obj)]
    assert sorted(ids) == [1, 2, 3, 4, 5], f"each request answered exactly once: {ids}"
    assert ids[-1] == 5, f"stdio: shutdown answered before earlier requests: response order {ids}"

    # TCP: the daemon closes the connection after the shutdown answer
    d = spawn(args=["--store", "memory"])
    for i in range(8):
        c = d.connect()
        c.send_raw(encode(make_request("initialize", {}, 1))
                   + encode(make_request("session/prompt", prompt_params(f"t{i}", "hi"), 2))
                   + encode(make_request("session/cancel", {"sessionId": f"t{i}"}, 3))
                   + encode(make_request("shutdown", ..., 4)))
        assert c.wait_eof(5)
        ids = [f.obj["id"] for f in c.frames if is_response(f.obj)]
        assert sorted(ids) == [1, 2, 3, 4], f"each request answered exactly once: {ids}"
        assert ids[-1] == 4, f"tcp (attempt {i}): shutdown answered before earlier requests: response order {ids}"
