"""One prompt in flight per session; sessions run in parallel; pipelining."""

import time

from harnessd_helpers import (SESSION_BUSY, check_contiguous, check_turn, chunk_bytes, encode, error_of,
                              is_response, make_request, prompt_params, result_of, text_deltas)

OK = {"status": "ok", "reason": {"kind": "completed"}}
SLOW = "@delay 300\n@chunks 3 4"  # ~900 ms


def check_busy(resp, sid):
    err = error_of(resp)
    assert err["code"] == SESSION_BUSY, resp
    assert err["message"] == f"session already has an active prompt: {sid}", resp
    assert err.get("data") == {"sessionId": sid}, resp


def test_overlap_and_parallel_sessions(tcp_daemon):
    c1 = tcp_daemon.connect()
    c2 = tcp_daemon.connect()
    c1.initialize()
    c2.initialize()

    p_s = c1.prompt("S", SLOW)
    sent_again = time.monotonic()
    p_s_again = c1.prompt("S", "@reply should not run")
    p_t = c1.prompt("T", SLOW)
    p_u = c2.prompt("U", SLOW)

    # the overlapping prompt fails at once, while S is still running. Timed
    # from its send to its arrival at the reader thread: on a loaded machine,
    # most of the time before it went to this process's own sends (TLS in
    # Python), which made the test fail with the daemon refusing in 2 ms.
    i_busy, busy = c1.response_index(p_s_again, timeout=5)
    check_busy(busy, "S")
    refused_after = c1.frames[i_busy].at - sent_again
    assert refused_after < 0.6, f"the overlapping prompt was refused after {refused_after:.2f}s, not at once"

    # overlap across connections: S is busy for connection 2 as well
    p_s_c2 = c2.prompt("S", "@reply nope")
    check_busy(c2.response(p_s_c2, timeout=5), "S")

    results = {}
    for name, conn, rid in (("S", c1, p_s), ("T", c1, p_t), ("U", c2, p_u)):
        results[name] = conn.response_index(rid, timeout=10)
    for name, (_, resp) in results.items():
        assert result_of(resp) == OK, (name, resp)
    # the three ~0.9 s turns ran in parallel: each started (by the daemon's
    # clock) before any of them ended
    spans = {}
    for name, conn in (("S", c1), ("T", c1), ("U", c2)):
        events = conn.session_events(name, results[name][0])
        spans[name] = [e["time"] for e in events if e["type"] in ("turn/start", "turn/end")]
    assert all(len(span) == 2 for span in spans.values()), spans
    assert max(span[0] for span in spans.values()) < min(span[1] for span in spans.values()), \
        f"sessions did not run in parallel: {spans}"

    # the busy answers came before S settled
    i_s_done = results["S"][0]
    assert i_busy < i_s_done
    s_events = c1.session_events("S", i_s_done)
    assert s_events[-1]["type"] == "turn/end"
    assert not c2.session_events("S"), "connection 2 must not see S's events: it did not start that turn"
    check_turn(s_events, turn=0)
    assert text_deltas(s_events) == chunk_bytes(3, 4)
    # the refused prompt left no trace in S
    assert all("should not run" not in str(e) and "nope" not in str(e) for e in s_events)
    check_turn(c1.session_events("T"), turn=0)
    check_turn(c2.session_events("U"), turn=0)

    # S is reusable once settled, from either connection
    resp, events = c2.run_prompt("S", "again")
    assert result_of(resp) == OK
    check_turn(events, turn=1)
    assert events[0]["seq"] == s_events[-1]["seq"] + 1
    resp, events = c1.run_prompt("S", "third")
    assert result_of(resp) == OK
    check_turn(events, turn=2)


def test_overlap_across_connections_first(tcp_daemon):
    c1 = tcp_daemon.connect()
    c2 = tcp_daemon.connect()
    c1.initialize()
    c2.initialize()
    p1 = c1.prompt("X", "@delay 200\n@chunks 2 1")
    c1.wait_frame(lambda o: o.get("method") == "session.event", what="turn start")
    p2 = c2.prompt("X", "hello")
    check_busy(c2.response(p2, timeout=5), "X")
    assert result_of(c1.response(p1)) == OK
    resp, events = c2.run_prompt("X", "hello")
    assert result_of(resp) == OK
    check_turn(events, turn=1)


def test_pipelined_prompts_on_distinct_sessions(spawn):
    d = spawn(args=["--store", "memory"])
    c = d.connect()
    n = 1000
    payload = [encode(make_request("initialize", {}, "init"))]
    for i in range(n):
        payload.append(encode(make_request("session/prompt", prompt_params(f"pipe-{i}", f"@reply r{i}"), i)))
    t0 = time.monotonic()
    c.send_raw(b"".join(payload))
    for i in range(n):
        c.response(i, timeout=30)
    elapsed = time.monotonic() - t0
    frames = [f.obj for f in c.frames]
    responses = [o for o in frames if is_response(o)]
    ids = [o["id"] for o in responses]
    assert ids.count("init") == 1
    nums = sorted(i for i in ids if isinstance(i, int))
    assert nums == list(range(n)), "each request answered exactly once"
    assert all(o["result"] == OK for o in responses if o["id"] != "init"), [o for o in responses if "error" in o][:3]
    # per session: a full turn, notified before its response
    per_session = {}
    last_event_at = {}
    for idx, o in enumerate(frames):
        if o.get("method") == "session.event":
            sid = o["params"]["sessionId"]
            per_session.setdefault(sid, []).append(o["params"]["event"])
            last_event_at[sid] = idx
    resp_at = {o["id"]: idx for idx, o in enumerate(frames) if is_response(o)}
    assert len(per_session) == n
    for i in range(n):
        evs = per_session[f"pipe-{i}"]
        check_turn(evs, turn=0)
        check_contiguous(evs, first_seq=0)
        assert evs[-1]["type"] == "turn/end"
        assert "".join(text_deltas(evs)) == f"r{i}"
        assert last_event_at[f"pipe-{i}"] < resp_at[i]
    assert elapsed < 30
    c.assert_no_new_frames(0.05)


def test_pipelined_cancels(tcp_daemon):
    c = tcp_daemon.connect()
    n = 1000
    payload = [encode(make_request("initialize", {}, "init"))]
    payload += [encode(make_request("session/cancel", {"sessionId": f"c{i % 10}"}, f"k{i}")) for i in range(n)]
    c.send_raw(b"".join(payload))
    # Responses come in any order (§4.5): a store shared by several nodes
    # asks the database about a session that runs nowhere here.
    for i in range(n):
        c.response(f"k{i}", timeout=20)
    c.assert_no_new_frames(0.05)
    responses = [f.obj for f in c.frames]
    assert len(responses) == n + 1
    assert responses[0]["id"] == "init" and "result" in responses[0]
    # each answered exactly once
    assert sorted(o["id"] for o in responses[1:]) == sorted(f"k{i}" for i in range(n))
    assert all(o["result"] == {"cancelled": False} for o in responses[1:])
