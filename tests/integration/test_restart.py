"""Durable JSONL log across restarts and crash recovery (docs/protocol.md §7)."""

import json
import signal

from harnessd_helpers import check_contiguous, check_turn, final_text, read_log, result_of

OK = {"status": "ok", "reason": {"kind": "completed"}}


def run_turns(d, prompts):
    """Prompt each (session, text) on a fresh connection; return events per session."""
    c = d.connect()
    c.initialize()
    out = {}
    for sid, text in prompts:
        resp, events = c.run_prompt(sid, text)
        assert result_of(resp) == OK, resp
        out.setdefault(sid, []).extend(events)
    return out


def test_restart_continues_session(spawn, tmp_path):
    root = tmp_path / "sessions"
    d1 = spawn(session_root=root, args=["--store", "jsonl"])
    ev1 = run_turns(d1, [("R", "one"), ("R", "two")])["R"]
    assert [e["seq"] for e in ev1] == list(range(21))
    assert d1.terminate(5) == 0

    d2 = spawn(session_root=root, args=["--store", "jsonl"])
    ev2 = run_turns(d2, [("R", "three")])["R"]
    check_turn(ev2, turn=2)
    assert ev2[0]["seq"] == ev1[-1]["seq"] + 1 == 21
    assert final_text(ev2) == "echo: three"
    header, logged = read_log(d2.log_path("R"))
    assert header["id"] == "R"
    assert logged == ev1 + ev2
    check_contiguous(logged, first_seq=0)
    # exactly one header line
    assert sum(1 for line in d2.log_path("R").read_text().splitlines() if '"type":"session"' in line) == 1
    assert d2.terminate(5) == 0


def test_restart_after_sigkill(spawn, tmp_path):
    """kill -9 loses nothing a client has seen."""
    root = tmp_path / "sessions"
    d1 = spawn(session_root=root)
    ev1 = run_turns(d1, [("K9", "one")])["K9"]
    d1.signal(signal.SIGKILL)
    d1.wait_exit(5)
    _, logged = read_log(d1.log_path("K9"))
    assert logged == ev1
    d2 = spawn(session_root=root)
    ev2 = run_turns(d2, [("K9", "two")])["K9"]
    check_turn(ev2, turn=1)
    assert ev2[0]["seq"] == 11


def make_history(spawn, root, sessions):
    d = spawn(session_root=root)
    evs = run_turns(d, [(sid, "first") for sid in sessions])
    assert d.terminate(5) == 0
    return evs


def test_torn_last_line_dropped(spawn, tmp_path):
    root = tmp_path / "sessions"
    ev1 = make_history(spawn, root, ["torn"])["torn"]
    d_path = root / "torn.jsonl"
    with open(d_path, "ab") as f:
        f.write(b'{"type":"turn/start","seq":11,"time":17000000')  # no newline
    d2 = spawn(session_root=root)
    ev2 = run_turns(d2, [("torn", "second")])["torn"]
    check_turn(ev2, turn=1)
    assert ev2[0]["seq"] == 11
    header, logged = read_log(d_path)  # every line parses: the torn fragment is gone
    assert header["id"] == "torn"
    assert logged == ev1 + ev2


def test_log_ending_inside_turn_is_closed(spawn, tmp_path):
    root = tmp_path / "sessions"
    ev1 = make_history(spawn, root, ["open"])["open"]
    path = root / "open.jsonl"
    t = ev1[-1]["time"] + 1
    dangling = [
        {"type": "turn/start", "seq": 11, "time": t,
         "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}},
        {"type": "user/message", "seq": 12, "time": t,
         "data": {"content": [{"type": "text", "text": "lost"}], "source": {"kind": "user"}}},
        {"type": "step/start", "seq": 13, "time": t, "data": {"turn": 1, "step": 0}},
    ]
    with open(path, "ab") as f:
        for e in dangling:
            f.write(json.dumps(e, separators=(",", ":")).encode() + b"\n")
    d2 = spawn(session_root=root)
    ev2 = run_turns(d2, [("open", "next")])["open"]
    _, logged = read_log(path)
    n = len(ev1) + len(dangling)
    assert logged[:n] == ev1 + dangling
    closing = logged[n]
    assert closing["type"] == "turn/end" and closing["seq"] == 14
    assert closing["data"]["turn"] == 1
    assert closing["data"]["reason"] == {"kind": "interrupted"}
    check_turn(ev2, turn=2)
    assert ev2[0]["seq"] == 15
    assert logged[n + 1:] == ev2
    check_contiguous(logged, first_seq=0)
    starts = [e["data"]["turn"] for e in logged if e["type"] == "turn/start"]
    ends = [e["data"]["turn"] for e in logged if e["type"] == "turn/end"]
    assert starts == ends == [0, 1, 2]


# A first turn of `hi` logs 11 events (its request/header included); a later one 10.


def test_torn_line_inside_open_turn(spawn, tmp_path):
    """Both at once: an open turn whose last event was torn mid-write."""
    root = tmp_path / "sessions"
    ev1 = make_history(spawn, root, ["both"])["both"]
    path = root / "both.jsonl"
    t = ev1[-1]["time"] + 1
    start = {"type": "turn/start", "seq": 11, "time": t,
             "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}}
    with open(path, "ab") as f:
        f.write(json.dumps(start, separators=(",", ":")).encode() + b"\n")
        f.write(b'{"type":"user/message","seq":12,"time":')
    d2 = spawn(session_root=root)
    ev2 = run_turns(d2, [("both", "next")])["both"]
    _, logged = read_log(path)
    assert logged[:12] == ev1 + [start]
    assert logged[12]["type"] == "turn/end" and logged[12]["seq"] == 12
    assert logged[12]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert ev2[0]["seq"] == 13
    check_turn(ev2, turn=2)
    check_contiguous(logged, first_seq=0)


def test_recovered_session_untouched_until_used(spawn, tmp_path):
    """Sessions that are not prompted again keep their file; others still work."""
    root = tmp_path / "sessions"
    make_history(spawn, root, ["keep", "use"])
    before = (root / "keep.jsonl").read_bytes()
    d2 = spawn(session_root=root)
    ev = run_turns(d2, [("use", "again")])["use"]
    assert ev[0]["seq"] == 11
    assert (root / "keep.jsonl").read_bytes() == before
