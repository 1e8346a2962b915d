"""session/cancel and connection close mid-turn (docs/protocol.md §4 session/cancel)."""

import time

from harnessd_helpers import (check_contiguous, check_turn, final_text, read_log, result_of, text_deltas,
                              wait_for_log)

OK = {"status": "ok", "reason": {"kind": "completed"}}
CANCELLED = {"kind": "aborted", "reason": "cancelled"}
LONG = "@delay 200\n@chunks 50 4"  # ~10 s unless cancelled


def first_delta(conn, sid, start=0):
    return conn.wait_frame(
        lambda o: o.get("method") == "session.event" and o["params"]["sessionId"] == sid
        and o["params"]["event"]["type"] == "assistant/chunk"
        and o["params"]["event"]["data"]["chunk"]["type"] == "text-delta",
        timeout=5, start=start, what=f"first text-delta of {sid}")


def start_and_cancel(conn, sid):
    """Start a long turn on sid, cancel it once it streams; return its events."""
    t0 = time.monotonic()
    p = conn.prompt(sid, LONG)
    first_delta(conn, sid)
    cid = conn.request("session/cancel", {"sessionId": sid})
    cancel = conn.response(cid, timeout=5)
    assert cancel == {"jsonrpc": "2.0", "id": cid, "result": {"cancelled": True}}
    idx, resp = conn.response_index(p, timeout=5)
    assert time.monotonic() - t0 < 3, "cancel did not interrupt the @delay"
    assert result_of(resp) == {"status": "aborted", "reason": CANCELLED}
    return conn.session_events(sid, idx)


def test_cancel_running_turn(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    events = start_and_cancel(c, "C")
    check_turn(events, turn=0)
    assert events[-1]["data"]["reason"] == CANCELLED
    assert len(text_deltas(events)) < 50
    _, logged = read_log(tcp_daemon.log_path("C"))
    assert logged == events


def test_cancel_idle_and_unknown_session(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    cid = c.request("session/cancel", {"sessionId": "never-seen"})
    assert c.response(cid) == {"jsonrpc": "2.0", "id": cid, "result": {"cancelled": False}}
    assert not tcp_daemon.log_path("never-seen").exists(), "cancel must not create a session"
    resp, _ = c.run_prompt("idle", "hi")
    assert result_of(resp) == OK
    cid = c.request("session/cancel", {"sessionId": "idle"})
    assert c.response(cid) == {"jsonrpc": "2.0", "id": cid, "result": {"cancelled": False}}
    resp, events = c.run_prompt("idle", "again")
    assert result_of(resp) == OK
    check_turn(events, turn=1)


def test_session_reusable_after_cancel(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    events = start_and_cancel(c, "R")
    # the session is idle now
    cid = c.request("session/cancel", {"sessionId": "R"})
    assert result_of(c.response(cid)) == {"cancelled": False}
    # and takes a new prompt; seq continues after the aborted turn
    resp2, events2 = c.run_prompt("R", "after")
    assert result_of(resp2) == OK
    check_turn(events2, turn=1)
    check_contiguous(events + events2, first_seq=0)
    _, logged = read_log(tcp_daemon.log_path("R"))
    assert logged == events + events2


def test_prompt_after_cancel(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    events = start_and_cancel(c, "P")
    resp2, events2 = c.run_prompt("P", "after")
    assert result_of(resp2) == OK
    check_turn(events2, turn=1)
    assert events2[0]["seq"] == events[-1]["seq"] + 1


def test_cancel_from_another_connection(tcp_daemon):
    c1 = tcp_daemon.connect()
    c2 = tcp_daemon.connect()
    c1.initialize()
    c2.initialize()
    p = c1.prompt("C2", LONG)
    first_delta(c1, "C2")
    cid = c2.request("session/cancel", {"sessionId": "C2"})
    assert result_of(c2.response(cid, timeout=5)) == {"cancelled": True}
    assert result_of(c1.response(p, timeout=5)) == {"status": "aborted", "reason": CANCELLED}


def test_cancel_during_delay_before_first_chunk(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    p = c.prompt("C3", "@delay 5000\n@reply never")
    c.wait_frame(lambda o: o.get("method") == "session.event" and o["params"]["event"]["type"] == "step/start",
                 timeout=5, what="step/start")
    t0 = time.monotonic()
    cid = c.request("session/cancel", {"sessionId": "C3"})
    assert result_of(c.response(cid, timeout=5)) == {"cancelled": True}
    assert result_of(c.response(p, timeout=5)) == {"status": "aborted", "reason": CANCELLED}
    assert time.monotonic() - t0 < 2
    assert "never" not in "".join(text_deltas(c.session_events("C3")))


def test_connection_close_mid_turn(tcp_daemon):
    d = tcp_daemon
    c1 = d.connect()
    c1.initialize()
    c1.response(c1.prompt("K", "first"))
    p = c1.prompt("K", LONG)
    first_delta(c1, "K", start=0)
    c1.close()

    # the open turn is cancelled with reason "connection closed" and the log closes it
    path = d.log_path("K")
    wait_for_log(path, lambda evs: sum(e["type"] == "turn/end" for e in evs) == 2, timeout=5)
    header, logged = read_log(path)
    assert header["id"] == "K"
    check_contiguous(logged, first_seq=0)
    starts = [e for e in logged if e["type"] == "turn/start"]
    ends = [e for e in logged if e["type"] == "turn/end"]
    assert len(starts) == len(ends) == 2
    assert [e["data"]["turn"] for e in starts] == [e["data"]["turn"] for e in ends] == [0, 1]
    assert ends[0]["data"]["reason"] == {"kind": "completed"}
    assert ends[1]["data"]["reason"] == {"kind": "aborted", "reason": "connection closed"}
    check_turn(logged[logged.index(starts[1]):], turn=1)

    # daemon healthy: a new connection works and the session takes a new prompt
    assert d.proc.poll() is None
    # turn/end is in the log before it is synced; the session takes a new
    # prompt once the turn has settled (§4.2), which session/list shows (asked
    # on a connection of its own: c2's request ids must stay those of c1).
    watcher = d.connect()
    watcher.initialize()
    deadline = time.monotonic() + 10
    while True:
        listed = result_of(watcher.response(watcher.request("session/list", {})))["sessions"]
        if not any(s["sessionId"] == "K" and s["running"] for s in listed) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    c2 = d.connect()
    c2.initialize()
    resp, events = c2.run_prompt("K", "afterwards")
    assert result_of(resp) == OK
    check_turn(events, turn=2)
    assert events[0]["seq"] == logged[-1]["seq"] + 1
    assert final_text(events) == "echo: afterwards"
    _, logged2 = read_log(path)
    assert logged2 == logged + events
    # the prompt of the closed connection is not answered on another one
    assert not [f for f in c2.frames if f.obj.get("id") == p]


def test_connection_close_cancels_all_its_turns(tcp_daemon):
    d = tcp_daemon
    c1 = d.connect()
    c1.initialize()
    for sid in ("M1", "M2", "M3"):
        c1.prompt(sid, LONG)
    for sid in ("M1", "M2", "M3"):
        first_delta(c1, sid)
    c1.close()
    for sid in ("M1", "M2", "M3"):
        evs = wait_for_log(d.log_path(sid), lambda evs: any(e["type"] == "turn/end" for e in evs), timeout=5)
        assert evs[-1]["data"]["reason"] == {"kind": "aborted", "reason": "connection closed"}
    c2 = d.connect()
    c2.initialize()
    for sid in ("M1", "M2", "M3"):
        # turn/end is logged before the turn's sync completes; until then the
        # session is still busy and says so at once (-32001).
        deadline = time.monotonic() + 5
        while True:
            resp, events = c2.run_prompt(sid, "@reply ok")
            if "error" not in resp or resp["error"]["code"] != -32001 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert result_of(resp) == OK
        check_turn(events, turn=1)
