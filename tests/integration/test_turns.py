"""Turn event streams (docs/protocol.md §4 session/prompt, §5, §6, §8, §9)."""

import json

import pytest

from harnessd_helpers import (PG_MODE, check_contiguous, check_event, check_turn, chunk_bytes, final_text, is_notification,
                              is_response, read_log, result_of, text_deltas)

OK = {"status": "ok", "reason": {"kind": "completed"}}


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_turn_event_stream(spawn, transport):
    if transport == "stdio":
        d = spawn(stdio=True)
        c = d.stdio_conn()
    else:
        d = spawn()
        c = d.connect()
    c.initialize()
    start = len(c.frames)
    c.send_raw(b'{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"ev",'
               b'"contentBlocks":[{"type":"text","text":"hello"}]}}\n')
    idx, resp = c.response_index("p1")
    assert resp == {"jsonrpc": "2.0", "id": "p1", "result": OK}
    before = [f.obj for f in c.frames[start:idx]]
    # every frame before the response is a session.event notification of this session
    assert before and all(is_notification(o, "session.event") for o in before), before
    assert all(set(o) == {"jsonrpc", "method", "params"} and o["jsonrpc"] == "2.0" for o in before)
    assert all(set(o["params"]) == {"sessionId", "event"} and o["params"]["sessionId"] == "ev" for o in before)
    events = [o["params"]["event"] for o in before]
    check_turn(events, turn=0)
    check_contiguous(events, first_seq=0)
    types = [e["type"] for e in events]
    n_chunks = types.count("assistant/chunk")
    assert types == ["turn/start", "user/message", "request/header", "step/start"] + ["assistant/chunk"] * n_chunks + \
        ["assistant/message", "step/end", "turn/end"], types
    chunks = [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]
    assert chunks[0] == {"type": "block-start", "index": 0, "blockType": "text"}
    assert {"type": "block-end", "index": 0} in chunks
    assert chunks[-1]["type"] == "finish"
    assert all(ch["type"] in ("text-delta", "block-end", "usage") for ch in chunks[1:-1]), chunks
    assert events[1]["data"] == {"content": [{"type": "text", "text": "hello"}], "source": {"kind": "user"}}
    assert events[2]["type"] == "request/header" and events[2]["data"]["provider"] == "scripted"
    assert events[3]["data"] == {"turn": 0, "step": 0}
    assert events[-1]["data"] == {"turn": 0, "reason": {"kind": "completed"}}
    assert "".join(text_deltas(events)) == "echo: hello"
    assert final_text(events) == "echo: hello"
    msg = [e for e in events if e["type"] == "assistant/message"][0]
    assert msg["data"]["content"] == [{"type": "text", "text": "echo: hello"}]
    assert msg["data"]["provenance"]["provider"] == "scripted"
    times = [e["time"] for e in events]
    assert times == sorted(times)

    # second turn on the same session: seq continues, turn increments
    resp2, events2 = c.run_prompt("ev", "again")
    assert result_of(resp2) == OK
    check_turn(events2, turn=1)
    check_contiguous(events2, first_seq=11)  # the first turn's 11 events, its request/header included
    assert final_text(events2) == "echo: again"
    c.assert_no_new_frames(0.05)

    # the durable log holds exactly the notified events
    header, logged = read_log(d.log_path("ev"))
    assert header["id"] == "ev" and header["delegationDepth"] == 0 and "parentSession" not in header
    assert isinstance(header["createdAt"], int)
    assert logged == events + events2


def test_chunks_directive(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    resp, events = c.run_prompt("chunks", "@chunks 20 8")
    assert result_of(resp) == OK
    check_turn(events, turn=0)
    deltas = text_deltas(events)
    assert deltas == chunk_bytes(20, 8)
    assert deltas[0] == "aaaaaaaa" and deltas[19] == "tttttttt"
    assert final_text(events) == "".join(deltas)
    # all deltas belong to one text block, bracketed by block-start/block-end, then finish
    chunks = [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]
    assert chunks[0]["type"] == "block-start" and chunks[0]["blockType"] == "text"
    assert [ch["type"] for ch in chunks[1:21]] == ["text-delta"] * 20
    assert all(ch["index"] == chunks[0]["index"] for ch in chunks[1:22])
    assert chunks[21]["type"] == "block-end"
    assert chunks[-1]["type"] == "finish"


def test_chunks_wrap_alphabet(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    resp, events = c.run_prompt("wrap", "@chunks 30 1")
    assert result_of(resp) == OK
    assert "".join(text_deltas(events)) == "abcdefghijklmnopqrstuvwxyzabcd"


def test_reply_directive_and_unicode_raw_output(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    text = "héllo wörld € 𝄞 日本"
    resp, events = c.run_prompt("uni", "@reply " + text)
    assert result_of(resp) == OK
    assert final_text(events) == text
    # non-ASCII is written raw, not \\u-escaped
    raw = b"\n".join(f.raw for f in c.frames)
    assert text.encode("utf-8") in raw
    assert b"\\u" not in raw


def test_echo_multiline_and_special_characters(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    text = 'line1\nline2 "quoted" \\ back\ttab'
    resp, events = c.run_prompt("multi", text)
    assert result_of(resp) == OK
    assert final_text(events) == "echo: " + text
    # a frame never contains a raw newline
    assert all(b"\n" not in f.raw and b"\r" not in f.raw for f in c.frames)


def test_error_directive(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    resp, events = c.run_prompt("err", "@error boom")
    res = result_of(resp)
    assert res["status"] == "error"
    assert res["reason"]["kind"] == "error" and res["reason"]["message"] == "boom"
    assert set(res["reason"]) <= {"kind", "message", "code", "step"}
    assert res["reason"]["step"] == 0  # the model step that failed
    check_turn(events, turn=0)
    assert events[-1]["data"]["reason"] == res["reason"]
    # the session still works afterwards
    resp2, events2 = c.run_prompt("err", "fine")
    assert result_of(resp2) == OK
    check_contiguous(events + events2, first_seq=0)
    assert events2[0]["data"]["turn"] == 1


def test_max_tokens_directive(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    resp, events = c.run_prompt("mt", "@max-tokens")
    assert result_of(resp) == {"status": "error", "reason": {"kind": "max-tokens"}}
    check_turn(events, turn=0)
    assert events[-1]["data"]["reason"] == {"kind": "max-tokens"}
    assert "".join(text_deltas(events)) == "partial"


def test_max_tokens_as_success(spawn):
    d = spawn(args=["--max-tokens-as-success"])
    c = d.connect()
    c.initialize()
    resp, events = c.run_prompt("mt", "@max-tokens")
    assert result_of(resp) == {"status": "ok", "reason": {"kind": "max-tokens"}}
    assert events[-1]["data"]["reason"] == {"kind": "max-tokens"}


def test_longest_session_id(tcp_daemon):
    """A session id of exactly 256 bytes (multibyte) is valid and its log is written."""
    c = tcp_daemon.connect()
    c.initialize()
    sid = "é" * 128
    assert len(sid.encode()) == 256
    resp, events = c.run_prompt(sid, "x")
    assert result_of(resp) == OK, resp
    check_turn(events, turn=0)
    resp, events = c.run_prompt(sid, "y")
    assert result_of(resp) == OK, resp
    assert events[0]["seq"] == 11


@pytest.mark.skipif(PG_MODE, reason="about jsonl files on disk")
def test_session_id_file_name_encoding(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    cases = [(".hidden/ü x", "%2Ehidden%2F%C3%BC%20x"), ("a.b-c_D9", "a.b-c_D9"), ("../../etc", "%2E.%2F..%2Fetc")]
    for sid, expected in cases:
        resp, events = c.run_prompt(sid, "x")
        assert result_of(resp) == OK
        path = tcp_daemon.session_root / (expected + ".jsonl")
        assert path.is_file(), f"log of {sid!r} not at {path.name}; found {sorted(p.name for p in tcp_daemon.session_root.iterdir())}"
        header, logged = read_log(path)
        assert header["id"] == sid
        assert logged == events
    # nothing was written outside the session root
    assert all(p.parent == tcp_daemon.session_root for p in tcp_daemon.session_root.rglob("*"))


def test_initialize_cwd_recorded_in_header(spawn, tmp_path):
    """A network client's cwd is taken inside the workspace root (by default
    `workspaces` beside the session root); stdio's is the client's own path."""
    d = spawn()
    c = d.connect()
    c.initialize(cwd="work dir")
    resp, _ = c.run_prompt("cwd", "x")
    assert result_of(resp) == OK
    header, _ = read_log(d.log_path("cwd"))
    assert header["cwd"] == str((tmp_path / "workspaces" / "work dir").resolve())
    assert (tmp_path / "workspaces" / "work dir").is_dir()

    work = tmp_path / "work dir"
    work.mkdir()
    s = spawn(stdio=True, session_root=tmp_path / "stdio-sessions")
    sc = s.stdio_conn()
    sc.initialize(cwd=str(work))
    resp, _ = sc.run_prompt("cwd", "x")
    assert result_of(resp) == OK
    header, _ = read_log(s.log_path("cwd"))
    assert header["cwd"] == str(work)


def test_subagent(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    start = len(c.frames)
    rid = c.prompt("parent", "@subagent @reply hi")
    idx, resp = c.response_index(rid)
    assert result_of(resp) == OK
    frames = [f.obj for f in c.frames[start:idx]]
    assert all(is_notification(o) for o in frames)

    started = [i for i, o in enumerate(frames) if o["method"] == "subagent.started"]
    finished = [i for i, o in enumerate(frames) if o["method"] == "subagent.finished"]
    assert len(started) == 1 and len(finished) == 1, [o["method"] for o in frames]
    s, f = started[0], finished[0]
    sp = frames[s]["params"]
    assert sp["parentSessionId"] == "parent"
    child = sp["childSessionId"]
    assert isinstance(child, str) and child and child != "parent"

    child_events = [o["params"]["event"] for o in frames
                    if o["method"] == "session.event" and o["params"]["sessionId"] == child]
    parent_events = [o["params"]["event"] for o in frames
                     if o["method"] == "session.event" and o["params"]["sessionId"] == "parent"]
    assert {o["params"]["sessionId"] for o in frames if o["method"] == "session.event"} == {"parent", child}
    # child events are bracketed by started/finished
    child_idx = [i for i, o in enumerate(frames)
                 if o["method"] == "session.event" and o["params"]["sessionId"] == child]
    assert s < min(child_idx) and max(child_idx) < f
    check_turn(child_events, turn=0)
    check_contiguous(child_events, first_seq=0)
    assert child_events[1]["data"]["content"] == [{"type": "text", "text": "@reply hi"}]
    assert final_text(child_events) == "hi"

    fp = frames[f]["params"]
    assert fp["status"] == "ok"
    assert fp["lastAssistantMessage"] == "hi"
    assert fp["agentId"] == fp["childSessionId"] == child
    assert fp["parentSessionId"] == "parent"
    assert fp["provider"] == "scripted"
    assert isinstance(fp["stopReason"], str)

    # the parent's turn: tool call, tool result carrying the child's text, final answer
    check_turn(parent_events, turn=0)
    check_contiguous(parent_events, first_seq=0)
    calls = [e for e in parent_events if e["type"] == "tool/call"]
    results = [e for e in parent_events if e["type"] == "tool/result"]
    assert len(calls) == 1 and calls[0]["data"]["name"] == "subagent"
    args = json.loads(calls[0]["data"]["arguments"])
    assert args["prompt"] == "@reply hi" and isinstance(args["description"], str)
    assert len(results) == 1 and results[0]["data"]["callId"] == calls[0]["data"]["callId"]
    assert results[0]["data"]["isError"] is False
    assert results[0]["data"]["content"] == [{"type": "text", "text": "hi"}]
    assert final_text(parent_events) == "subagent said: hi"
    # subagent.finished precedes the parent's turn/end, which is the last frame before the response
    parent_end = max(i for i, o in enumerate(frames)
                     if o["method"] == "session.event" and o["params"]["event"]["type"] == "turn/end"
                     and o["params"]["sessionId"] == "parent")
    assert f < parent_end == len(frames) - 1

    # the child log: header with parentSession and delegationDepth 1, events as notified
    header, logged = read_log(tcp_daemon.log_path(child))
    assert header["id"] == child
    assert header["parentSession"] == "parent"
    assert header["delegationDepth"] == 1
    assert logged == child_events
    pheader, plogged = read_log(tcp_daemon.log_path("parent"))
    assert pheader["delegationDepth"] == 0 and "parentSession" not in pheader
    assert plogged == parent_events


def test_nested_subagent_depth(tcp_daemon):
    c = tcp_daemon.connect()
    c.initialize()
    resp, events = c.run_prompt("nest", "@subagent @subagent @reply deep")
    assert result_of(resp) == OK
    assert final_text(events) == "subagent said: subagent said: deep"
    starts = [f.obj["params"] for f in c.frames if is_notification(f.obj, "subagent.started")]
    assert len(starts) == 2
    assert starts[0]["parentSessionId"] == "nest"
    assert starts[1]["parentSessionId"] == starts[0]["childSessionId"]
    h1, _ = read_log(tcp_daemon.log_path(starts[0]["childSessionId"]))
    h2, _ = read_log(tcp_daemon.log_path(starts[1]["childSessionId"]))
    assert (h1["delegationDepth"], h1["parentSession"]) == (1, "nest")
    assert (h2["delegationDepth"], h2["parentSession"]) == (2, starts[0]["childSessionId"])
    for f in c.frames:
        if is_notification(f.obj, "session.event"):
            check_event(f.obj["params"]["event"])
        assert not is_response(f.obj) or f.obj["id"] in (1001, 1002)
