"""Sessions that outlive connections (docs/protocol.md §4.6-§4.10): session/list,
session/events, session/subscribe, session/unsubscribe and detached turns,
black-box over TCP and WebSocket."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from harnessd_helpers import (INVALID_PARAMS, PG_MODE, SESSION_BUSY, TLS_MODE, PgLog, check_contiguous, error_of,
                              is_notification, read_log, result_of, suite_tls_context, wait_for_log)
from ws_client import ws_conn

LONG_TURN = "@chunks 200 8\n@delay 5"  # about a second of streaming


def open_conn(d, transport: str):
    if transport == "tcp":
        return d.connect()
    return ws_conn(d, d.ws_port)


@pytest.fixture(params=["tcp", "ws"])
def transport(request):
    return request.param


@pytest.fixture
def daemon(spawn):
    d = spawn(args=["--listen", "ws://127.0.0.1:0"])
    ws = [u for u in d.listen if u.startswith("ws://")]
    d.ws_port = int(ws[0].rsplit(":", 1)[1])
    return d


def call(conn, method: str, params: dict | None = None, timeout: float = 10.0) -> dict:
    rid = conn.request(method, params if params is not None else {})
    return conn.response(rid, timeout)


def events_of(conn, session_id: str) -> list[dict]:
    return conn.session_events(session_id)


def log_events(d, session_id: str) -> list[dict]:
    return read_log(d.log_path(session_id))[1]


def raw_log_lines(d, session_id: str) -> list[bytes]:
    log = d.log_path(session_id)
    return (log if isinstance(log, PgLog) else Path(log)).read_bytes().split(b"\n")[1:-1]


def wait_turn_end(conn, session_id: str, timeout: float = 20.0) -> dict:
    _, frame = conn.wait_frame(
        lambda o: is_notification(o, "session.event") and o["params"]["sessionId"] == session_id
        and o["params"]["event"]["type"] == "turn/end", timeout, what=f"turn/end of {session_id}")
    return frame["params"]["event"]


def wait_events(conn, session_id: str, count: int, timeout: float = 10.0) -> None:
    conn.reader.wait(lambda: len(conn.session_events(session_id)) >= count, timeout)
    assert len(conn.session_events(session_id)) >= count, f"fewer than {count} events of {session_id}"


# ---------------------------------------------------------------------------
# session/list


def test_list_pages_every_session_once_with_lineage(daemon):
    c = daemon.connect()
    c.initialize()
    for sid in ("a", "b", "c"):
        resp, _ = c.run_prompt(sid, "hello")
        assert result_of(resp)["status"] == "ok"
    resp, _ = c.run_prompt("p", "@subagent do it")
    assert result_of(resp)["status"] == "ok"

    everything = result_of(call(c, "session/list"))
    by_id = {s["sessionId"]: s for s in everything["sessions"]}
    assert "nextCursor" not in everything
    children = [s for s in by_id.values() if s.get("parentSessionId") == "p"]
    assert len(children) == 1 and children[0]["sessionId"].startswith("p.sub-")
    assert set(by_id) == {"a", "b", "c", "p", children[0]["sessionId"]}
    for sid, s in by_id.items():
        header, events = read_log(daemon.log_path(sid))
        assert s["createdAt"] == header["createdAt"]
        assert s["lastSeq"] == events[-1]["seq"]
        assert s["updatedAt"] >= events[-1]["time"]
        assert s["turns"] == 1 and s["running"] is False
    assert "parentSessionId" not in by_id["a"]
    updated = [s["updatedAt"] for s in everything["sessions"]]
    assert updated == sorted(updated, reverse=True), "newest update first"

    # Pages of one: every session exactly once, in the same order.
    seen, cursor = [], None
    while True:
        params = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = result_of(call(c, "session/list", params))
        seen += [s["sessionId"] for s in page["sessions"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert seen == [s["sessionId"] for s in everything["sessions"]]

    assert error_of(call(c, "session/list", {"cursor": "nope"}))["code"] == INVALID_PARAMS
    assert error_of(call(c, "session/list", {"limit": 0}))["code"] == INVALID_PARAMS
    assert error_of(call(c, "session/list", {"limit": 1001}))["code"] == INVALID_PARAMS


@pytest.mark.skipif(PG_MODE, reason="about jsonl files on disk")
def test_list_reads_ten_thousand_logs_from_disk_without_loading_them(spawn, tmp_path):
    root = tmp_path / "sessions"
    root.mkdir()
    n = 10_000
    for i in range(n):
        sid = f"s{i:05d}"
        events = [
            {"type": "turn/start", "seq": 0, "time": 1_000_000 + i, "data": {"turn": 0}},
            {"type": "user/message", "seq": 1, "time": 1_000_000 + i, "data": {"content": []}},
            {"type": "turn/end", "seq": 2, "time": 2_000_000 + i, "data": {"turn": 0, "reason": {"kind": "completed"}}},
            {"type": "turn/start", "seq": 3, "time": 2_000_000 + i, "data": {"turn": 1}},
        ]
        header = {"type": "session", "version": 0, "id": sid, "createdAt": 1_000_000 + i, "delegationDepth": 0}
        lines = [json.dumps(header, separators=(",", ":"))] + [json.dumps(e, separators=(",", ":")) for e in events]
        (root / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")
    d = spawn(session_root=root, args=["--listen", "ws://127.0.0.1:0"])
    c = d.connect()
    c.initialize()
    started = time.monotonic()
    first = result_of(call(c, "session/list", {"limit": 1000}, timeout=60))
    first_page_s = time.monotonic() - started
    sessions, cursor = list(first["sessions"]), first.get("nextCursor")
    started = time.monotonic()
    while cursor:
        page = result_of(call(c, "session/list", {"limit": 1000, "cursor": cursor}))
        sessions += page["sessions"]
        cursor = page.get("nextCursor")
    later_pages_s = time.monotonic() - started
    print(f"\nsession/list over {n} logs: first page (reads the logs) {first_page_s * 1000:.0f} ms, "
          f"9 more pages {later_pages_s * 1000:.0f} ms")
    assert len(sessions) == n and len({s["sessionId"] for s in sessions}) == n
    assert sessions[0]["sessionId"] == f"s{n - 1:05d}", "newest first"
    s = next(s for s in sessions if s["sessionId"] == "s00042")
    assert s == {"sessionId": "s00042", "createdAt": 1_000_042, "updatedAt": 2_000_042, "lastSeq": 3,
                 "turns": 2, "running": False}
    # Listing loaded nothing: no session log is held open.
    metrics = _metrics(d)
    assert "harnessd_open_logs 0" in metrics


def _metrics(d) -> str:
    import http.client
    ws = [u for u in d.listen if u.startswith("ws://")]
    if not ws:
        return ""
    host, port = ws[0][len("ws://"):].rsplit(":", 1)
    if TLS_MODE:
        conn = http.client.HTTPSConnection(host, int(port), timeout=5, context=suite_tls_context())
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("GET", "/metrics")
    return conn.getresponse().read().decode()


# ---------------------------------------------------------------------------
# session/events


def test_events_pages_are_the_log_byte_for_byte(daemon):
    c = daemon.connect()
    c.initialize()
    resp, notified = c.run_prompt("h", "@chunks 10 4")
    assert result_of(resp)["status"] == "ok"
    lines = raw_log_lines(daemon, "h")
    last = len(lines) - 1
    assert [json.loads(x) for x in lines] == notified

    # The whole log, by pages of 5, is the log's bytes.
    got, after = [], -1
    while True:
        rid = c.request("session/events", {"sessionId": "h", "afterSeq": after, "limit": 5})
        idx, r = c.response_index(rid)
        page = result_of(r)
        raw = c.frames[idx].raw
        for line in lines[after + 1: after + 1 + len(page["events"])]:
            assert line in raw, "events are copied from the log as they are"
        got += page["events"]
        assert page["lastSeq"] == last
        after += len(page["events"])
        if not page["more"]:
            break
    assert got == [json.loads(x) for x in lines]

    exact = result_of(call(c, "session/events", {"sessionId": "h", "afterSeq": last - 3, "limit": 3}))
    assert [e["seq"] for e in exact["events"]] == [last - 2, last - 1, last] and exact["more"] is False
    one_short = result_of(call(c, "session/events", {"sessionId": "h", "afterSeq": last - 4, "limit": 3}))
    assert one_short["more"] is True
    for past in (last, last + 100):
        page = result_of(call(c, "session/events", {"sessionId": "h", "afterSeq": past}))
        assert page == {"events": [], "lastSeq": last, "more": False}
    default = result_of(call(c, "session/events", {"sessionId": "h"}))
    assert default["events"][0]["seq"] == 0 and len(default["events"]) == last + 1
    assert error_of(call(c, "session/events", {"sessionId": "h", "afterSeq": -2}))["code"] == INVALID_PARAMS


@pytest.mark.skipif(PG_MODE, reason="about jsonl files on disk")
def test_events_of_a_log_with_only_a_header(spawn, tmp_path):
    root = tmp_path / "sessions"
    root.mkdir()
    (root / "empty.jsonl").write_text('{"type":"session","version":0,"id":"empty","createdAt":5}\n')
    d = spawn(session_root=root)
    c = d.connect()
    c.initialize()
    assert result_of(call(c, "session/events", {"sessionId": "empty"})) == {"events": [], "lastSeq": -1,
                                                                            "more": False}
    listed = result_of(call(c, "session/list"))["sessions"]
    assert listed == [{"sessionId": "empty", "createdAt": 5, "updatedAt": 5, "lastSeq": -1, "turns": 0,
                       "running": False}]


def test_unknown_session_is_a_typed_error(daemon, transport):
    c = open_conn(daemon, transport)
    c.initialize()
    for method in ("session/events", "session/subscribe"):
        err = error_of(call(c, method, {"sessionId": "nobody"}))
        assert err["code"] == INVALID_PARAMS
        assert err["message"] == "unknown session: nobody"
        assert err["data"] == {"sessionId": "nobody"}
    # Asking about it created nothing.
    assert not daemon.log_path("nobody").exists()
    assert result_of(call(c, "session/list"))["sessions"] == []
    assert result_of(call(c, "session/unsubscribe", {"sessionId": "nobody"})) == {"unsubscribed": False}


# ---------------------------------------------------------------------------
# session/subscribe


def test_subscribe_during_a_running_turn_sees_every_event_once(daemon, transport):
    a = open_conn(daemon, transport)
    a.initialize()
    b = open_conn(daemon, transport)
    b.initialize()
    rid = a.prompt("live", LONG_TURN)
    wait_events(a, "live", 20)
    sub = b.request("session/subscribe", {"sessionId": "live", "afterSeq": -1})
    sub_idx, sub_resp = b.response_index(sub)
    last_seq = result_of(sub_resp)["lastSeq"]
    assert last_seq >= 19
    assert result_of(a.response(rid, 30))["status"] == "ok"
    end = wait_turn_end(b, "live")
    assert end["data"]["reason"] == {"kind": "completed"}

    seen = events_of(b, "live")
    assert seen == log_events(daemon, "live"), "the subscriber's events are the log, without gap or duplicate"
    check_contiguous(seen, 0)
    # Everything up to lastSeq came before the response.
    before = b.session_events("live", sub_idx)
    assert [e["seq"] for e in before[: last_seq + 1]] == list(range(last_seq + 1))
    # The prompting connection got its turn once, the same events.
    assert events_of(a, "live") == seen


def test_subscribe_without_after_seq_replays_nothing(daemon):
    a = daemon.connect()
    a.initialize()
    a.run_prompt("quiet", "hello")
    b = daemon.connect()
    b.initialize()
    start = len(b.frames)
    resp = call(b, "session/subscribe", {"sessionId": "quiet"})
    assert result_of(resp) == {"lastSeq": log_events(daemon, "quiet")[-1]["seq"]}
    assert not b.session_events("quiet", None, start)
    a.run_prompt("quiet", "again")
    wait_turn_end(b, "quiet")
    assert events_of(b, "quiet") == log_events(daemon, "quiet")[-len(events_of(b, "quiet")):]
    assert events_of(b, "quiet")[0]["type"] == "turn/start"
    assert error_of(call(b, "session/subscribe", {"sessionId": "quiet"}))["message"] == "already subscribed: quiet"


def test_subscribers_follow_prompts_from_a_third_connection(daemon, transport):
    subs = [open_conn(daemon, transport) for _ in range(2)]
    owner = open_conn(daemon, transport)
    owner.initialize()
    owner.run_prompt("shared", "hello")  # the session exists
    for s in subs:
        s.initialize()
        assert "result" in call(s, "session/subscribe", {"sessionId": "shared"})
    # The prompting connection subscribes too: it must not get its turn twice.
    assert "result" in call(owner, "session/subscribe", {"sessionId": "shared"})
    third = open_conn(daemon, transport)
    third.initialize()
    resp, events = third.run_prompt("shared", "@chunks 30 8")
    assert result_of(resp)["status"] == "ok"
    last = events[-1]["seq"]
    for s in subs + [owner]:  # the owner has its own earlier turn/end: wait for this turn's
        s.reader.wait(lambda s=s: any(e["seq"] == last for e in s.session_events("shared")), 10)
    assert events_of(subs[0], "shared") == events
    assert events_of(subs[1], "shared") == events
    owner_events = events_of(owner, "shared")
    assert owner_events[-len(events):] == events
    # And the owner's own next turn reaches it once.
    start = len(owner.frames)
    resp, own = owner.run_prompt("shared", "@chunks 5 8")
    seqs = [e["seq"] for e in owner.session_events("shared", None, start)]
    assert len(seqs) == len(set(seqs)), "no duplicates for the prompting connection"
    assert len(own) == len(seqs)


def test_unsubscribe_stops_the_events(daemon):
    a = daemon.connect()
    a.initialize()
    a.run_prompt("u", "hello")
    b = daemon.connect()
    b.initialize()
    call(b, "session/subscribe", {"sessionId": "u"})
    assert result_of(call(b, "session/unsubscribe", {"sessionId": "u"})) == {"unsubscribed": True}
    start = len(b.frames)
    a.run_prompt("u", "@chunks 10 8")
    time.sleep(0.3)
    assert not b.session_events("u", None, start)
    assert result_of(call(b, "session/unsubscribe", {"sessionId": "u"})) == {"unsubscribed": False}


def test_a_subscriber_that_does_not_read_is_cut_without_slowing_the_turn(spawn):
    d = spawn(args=["--subscriber-max-bytes", "65536"])
    a = d.connect()
    a.initialize()
    a.run_prompt("big", "hello")
    # A raw subscriber that never reads after subscribing.
    sock = socket.create_connection(("127.0.0.1", d.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if TLS_MODE:
        sock = suite_tls_context().wrap_socket(sock, server_hostname="127.0.0.1")
    sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
                 b'{"jsonrpc":"2.0","id":2,"method":"session/subscribe","params":{"sessionId":"big"}}\n')
    time.sleep(0.3)
    started = time.monotonic()
    resp, events = a.run_prompt("big", "@chunks 20000 200", timeout=60)  # about 6 MB of events
    took = time.monotonic() - started
    assert result_of(resp)["status"] == "ok"
    assert len(events) > 20000
    # The subscriber was cut: reading now finds the end of the stream.
    sock.settimeout(10)
    received = b""
    try:
        while chunk := sock.recv(1 << 20):
            received += chunk
    except ConnectionResetError:
        pass
    sock.close()
    assert len(received) < 6_000_000, "the non-reading subscriber did not get the whole turn"
    assert "more than 65536 bytes of subscribed events queued" in d.stderr()
    print(f"\nturn of 20000 chunks beside a stalled subscriber: {took:.2f} s")


# ---------------------------------------------------------------------------
# detached turns


def test_a_detached_turn_runs_on_and_a_new_connection_reattaches(daemon, transport):
    a = open_conn(daemon, transport)
    a.initialize(onDisconnect="continue")
    a.prompt("d", LONG_TURN)
    wait_events(a, "d", 30)
    seen = events_of(a, "d")
    a.close()

    b = open_conn(daemon, transport)
    b.initialize()
    listed = {s["sessionId"]: s for s in result_of(call(b, "session/list"))["sessions"]}
    assert listed["d"]["running"] is True
    busy = error_of(call(b, "session/prompt", {"sessionId": "d", "contentBlocks": [{"type": "text", "text": "x"}]}))
    assert busy["code"] == SESSION_BUSY
    last_seen = seen[-1]["seq"]
    call(b, "session/subscribe", {"sessionId": "d", "afterSeq": last_seen})
    end = wait_turn_end(b, "d", 30)
    assert end["data"]["reason"] == {"kind": "completed"}, "the turn ran to its end without its client"
    rest = events_of(b, "d")
    assert seen + rest == log_events(daemon, "d")
    check_contiguous(seen + rest, 0)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        listed = {s["sessionId"]: s for s in result_of(call(b, "session/list"))["sessions"]}
        if not listed["d"]["running"]:
            break
        time.sleep(0.05)
    assert listed["d"]["running"] is False


def test_without_continue_a_dropped_connection_still_cancels(daemon):
    a = daemon.connect()
    a.initialize()
    a.prompt("c", LONG_TURN)
    wait_events(a, "c", 10)
    a.close()
    events = wait_for_log(daemon.log_path("c"), lambda ev: bool(ev) and ev[-1]["type"] == "turn/end")
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": "connection closed"}


def test_cancel_reaches_a_detached_turn_from_any_connection(daemon, transport):
    a = open_conn(daemon, transport)
    a.initialize(onDisconnect="continue")
    a.prompt("k", "@chunks 100000 8\n@delay 5")
    wait_events(a, "k", 10)
    a.close()
    b = open_conn(daemon, transport)
    b.initialize()
    call(b, "session/subscribe", {"sessionId": "k"})
    started = time.monotonic()
    assert result_of(call(b, "session/cancel", {"sessionId": "k"})) == {"cancelled": True}
    end = wait_turn_end(b, "k", 5)
    assert time.monotonic() - started < 2, "cancel aborts at once"
    assert end["data"]["reason"] == {"kind": "aborted", "reason": "cancelled"}
    check_contiguous(log_events(daemon, "k"), 0)


def test_bad_on_disconnect_is_invalid_params(daemon):
    c = daemon.connect()
    rid = c.request("initialize", {"onDisconnect": "linger"})
    err = error_of(c.response(rid))
    assert err["code"] == INVALID_PARAMS
    assert err["message"] == 'params.onDisconnect must be "cancel" or "continue"'


def test_a_child_session_can_be_read_and_followed(daemon):
    a = daemon.connect()
    a.initialize()
    resp, _ = a.run_prompt("parent", "@subagent @chunks 3 4")
    assert result_of(resp)["status"] == "ok"
    child = next(s["sessionId"] for s in result_of(call(a, "session/list"))["sessions"]
                 if s.get("parentSessionId") == "parent")
    page = result_of(call(a, "session/events", {"sessionId": child}))
    assert page["events"] == log_events(daemon, child)
    assert page["events"] == a.session_events(child)
    b = daemon.connect()
    b.initialize()
    assert result_of(call(b, "session/subscribe", {"sessionId": child, "afterSeq": -1}))["lastSeq"] == page["lastSeq"]
    assert events_of(b, child) == page["events"]


def test_memory_sessions_are_not_evicted_for_the_open_log_cap(spawn):
    """--store memory holds no files: --max-open-logs must not end live sessions
    (their events live nowhere else); a second turn continues the first one's seqs."""
    d = spawn(args=["--store", "memory", "--max-open-logs", "16"])
    c = d.connect()
    c.initialize()
    sessions = [f"m{i}" for i in range(64)]
    last = {}
    for sid in sessions:
        resp, evs = c.run_prompt(sid, "@chunks 3 4")
        assert result_of(resp)["status"] == "ok", resp
        last[sid] = evs[-1]["seq"]
    for sid in sessions:
        resp, evs = c.run_prompt(sid, "again")
        assert result_of(resp)["status"] == "ok", resp
        assert evs[0]["type"] == "turn/start" and evs[0]["seq"] == last[sid] + 1, (sid, evs[0], last[sid])
        assert evs[0]["data"]["turn"] == 1, evs[0]
    listed = result_of(c.response(c.request("session/list", {"limit": 1000})))["sessions"]
    assert {s["sessionId"] for s in listed} >= set(sessions)
