"""A daemon that runs for months: dead clients, slow readers, admission,
descriptor limits, handshake and idle timeouts, sync modes under kill -9."""

import json
import os
import resource
import socket
import time

import pytest

from harnessd_helpers import (check_contiguous, error_of, make_request, prompt_params, read_log, result_of,
                              wait_for_log)

OK = {"status": "ok", "reason": {"kind": "completed"}}


def raw_connect(d, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", d.port))
    return s


def send(s, obj):
    s.sendall((json.dumps(obj) + "\n").encode())


def test_dead_client_turn_ends_at_once_and_the_session_answers_busy_meanwhile(tcp_daemon):
    d = tcp_daemon
    s = raw_connect(d, rcvbuf=65536)
    send(s, make_request("initialize", {}, 1))
    send(s, make_request("session/prompt", prompt_params("D", "@chunks 200000 1024"), 2))
    got = 0
    while got < 1 << 20:  # a slow reader: the turn is well under way
        got += len(s.recv(65536))
    c2 = d.connect()
    c2.initialize()
    s.close()
    closed_at = time.monotonic()
    # The session is busy until its turn ends, and says so at once.
    rid = c2.prompt("D", "hi")
    busy = c2.response(rid, timeout=2)
    assert time.monotonic() - closed_at < 0.5
    if "error" in busy:
        assert error_of(busy)["code"] == -32001
    events = wait_for_log(d.log_path("D"), lambda evs: any(e["type"] == "turn/end" for e in evs), timeout=5)
    ended_at = time.monotonic()
    end = next(e for e in events if e["type"] == "turn/end")
    assert end["data"]["reason"] == {"kind": "aborted", "reason": "connection closed"}
    assert ended_at - closed_at < 1.0
    # The turn stopped near where the client left, not 200 MB later.
    assert d.log_path("D").stat().st_size < 32 << 20


def test_slow_steady_reader_gets_its_whole_turn(spawn):
    # One batch takes far longer than the write timeout to drain, but every
    # read makes progress: the client must not be cut off.
    d = spawn(args=["--write-timeout-ms", "400"])
    s = raw_connect(d, rcvbuf=16384)
    send(s, make_request("initialize", {}, 1))
    send(s, make_request("session/prompt", prompt_params("S", "@chunks 8 262144"), 2))
    buf = b""
    deadline = time.monotonic() + 60
    while b'"id":2' not in buf.split(b"\n")[-2] if buf.count(b"\n") >= 2 else True:
        assert time.monotonic() < deadline, "the turn did not finish"
        chunk = s.recv(32768)
        assert chunk, "the daemon closed a slow but steady reader"
        buf += chunk
        time.sleep(0.02)  # about 1.5 MB/s: 2 MB takes well over 400 ms
    frames = [json.loads(line) for line in buf.split(b"\n") if line]
    response = next(f for f in frames if f.get("id") == 2)
    assert response["result"] == OK
    deltas = [f for f in frames if f.get("method") == "session.event"
              and f["params"]["event"]["data"].get("chunk", {}).get("type") == "text-delta"]
    assert len(deltas) == 8
    s.close()


def test_admission_queues_refuses_over_the_limit_and_cancels_queued_prompts(spawn):
    d = spawn(args=["--max-running-turns", "1", "--max-queued-turns", "1"])
    a, b, c = d.connect(), d.connect(), d.connect()
    for conn in (a, b, c):
        conn.initialize()
    ra = a.prompt("A", "@delay 400\nfirst")
    a.wait_frame(lambda f: f.get("method") == "session.event")
    rb = b.prompt("B", "second")
    time.sleep(0.1)
    rc = c.prompt("C", "third")
    over = error_of(c.response(rc, timeout=2))
    assert over["code"] == -32005
    assert over["message"] == "server overloaded"
    assert over["data"]["retryAfterMs"] >= 100
    # A queued prompt answers aborted at once when cancelled, with no events.
    rcancel = c.request("session/cancel", {"sessionId": "B"})
    assert result_of(c.response(rcancel)) == {"cancelled": True}
    assert result_of(b.response(rb, timeout=1)) == {"status": "aborted",
                                                   "reason": {"kind": "aborted", "reason": "cancelled"}}
    assert not b.session_events("B")
    assert result_of(a.response(ra)) == OK
    # The slot is free again.
    resp, _ = c.run_prompt("C", "again")
    assert result_of(resp) == OK


def test_a_small_descriptor_limit_serves_many_sessions_and_keeps_accepting(spawn):
    # Running turns hold their logs open: admission bounds them, eviction the rest.
    d = spawn(args=["--max-open-logs", "8", "--session-idle-ms", "50", "--max-running-turns", "8"])
    resource.prlimit(d.proc.pid, resource.RLIMIT_NOFILE, (48, 48))
    conns = [d.connect() for _ in range(4)]
    for conn in conns:
        conn.initialize()
    for wave in range(6):
        ids = []
        for i, conn in enumerate(conns):
            for j in range(10):
                sid = f"w{wave}-{i}-{j}"
                ids.append((conn, conn.prompt(sid, "hi")))
        for conn, rid in ids:
            assert result_of(conn.response(rid)) == OK
    fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
    assert fds < 48
    late = d.connect()
    late.initialize()
    resp, events = late.run_prompt("w0-0-0", "back")
    assert result_of(resp) == OK
    assert events[0]["data"]["turn"] == 1  # evicted, then loaded again with its history


def test_handshake_timeout_closes_a_silent_connection(spawn):
    d = spawn(args=["--handshake-timeout-ms", "200"])
    silent = raw_connect(d)
    silent.settimeout(3)
    started = time.monotonic()
    assert silent.recv(100) == b""  # closed by the daemon
    assert 0.15 < time.monotonic() - started < 2.5
    ok = d.connect()
    ok.initialize()
    time.sleep(0.4)
    resp, _ = ok.run_prompt("H", "hi")  # an initialized one stays
    assert result_of(resp) == OK


def test_idle_timeout_closes_an_idle_connection_but_not_a_running_prompt(spawn):
    d = spawn(args=["--idle-timeout-ms", "300"])
    busy = d.connect()
    busy.initialize()
    resp, _ = busy.run_prompt("I", "@delay 200\n@chunks 3 1")  # 600 ms of turn: not idle
    assert result_of(resp) == OK
    assert busy.wait_eof(3)


@pytest.mark.parametrize("mode", ["turn", "batch", "none"])
def test_kill9_loses_no_event_a_client_saw_in_any_sync_mode(spawn, tmp_path, mode):
    root = tmp_path / f"s-{mode}"
    d = spawn(args=["--sync", mode], session_root=root)
    conns = [d.connect() for _ in range(3)]
    for conn in conns:
        conn.initialize()
    answered = {}
    for round_ in range(5):
        rids = [(conn, f"K{i}", conn.prompt(f"K{i}", "@chunks 20 16")) for i, conn in enumerate(conns)]
        for conn, sid, rid in rids:
            assert result_of(conn.response(rid)) == OK
            answered[sid] = round_
    running = [conn.prompt(f"K{i}", "@delay 50\n@chunks 100 16") for i, conn in enumerate(conns)]
    conns[0].wait_frame(lambda f: f.get("method") == "session.event"
                        and f["params"]["event"]["data"].get("chunk", {}).get("type") == "text-delta")
    d.kill()
    for i, conn in enumerate(conns):
        sid = f"K{i}"
        seen = conn.session_events(sid)
        # The kill may cut the append in flight: its torn line is no event a
        # client saw, and the next open truncates it (checked below).
        _, logged = read_log(root / f"{sid}.jsonl", torn_tail_ok=True)
        check_contiguous(logged, 0)
        # Every event a client saw is in the log, byte for byte the same.
        assert logged[:len(seen)] == seen
        # Every answered prompt's turn is complete in the log.
        ends = [e for e in logged if e["type"] == "turn/end"]
        assert len(ends) >= answered[sid] + 1
    # The restarted daemon closes the interrupted turns and goes on.
    d2 = spawn(args=["--sync", mode], session_root=root)
    c = d2.connect()
    c.initialize()
    for i in range(len(conns)):
        sid = f"K{i}"
        resp, _ = c.run_prompt(sid, "after")
        assert result_of(resp) == OK
        _, logged = read_log(root / f"{sid}.jsonl")
        check_contiguous(logged, 0)
        assert [e for e in logged if e["type"] == "turn/end"][-2]["data"]["reason"]["kind"] in ("interrupted", "completed", "aborted")
    del running
