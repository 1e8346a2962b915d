"""session/delete (docs/protocol.md §4.13), black-box: the session and its log
go, session/list forgets it, a running turn refuses it, an unknown id is
refused like other methods refuse it, and the id starts afresh afterwards."""

from __future__ import annotations

import pytest

from harnessd_helpers import INVALID_PARAMS, SESSION_BUSY, error_of, is_notification, read_log, result_of

LONG_TURN = "@chunks 400 8\n@delay 5"  # a couple of seconds of streaming


def call(conn, method: str, params: dict | None = None, timeout: float = 10.0) -> dict:
    rid = conn.request(method, params if params is not None else {})
    return conn.response(rid, timeout)


def log_exists(d, session_id: str) -> bool:
    log = d.log_path(session_id)
    return log.exists()


def listed(conn) -> set[str]:
    ids: set[str] = set()
    cursor = None
    while True:
        params = {"limit": 1000}
        if cursor:
            params["cursor"] = cursor
        page = result_of(call(conn, "session/list", params))
        ids |= {s["sessionId"] for s in page["sessions"]}
        cursor = page.get("nextCursor")
        if not cursor:
            return ids


def final_text(events: list[dict]) -> str:
    messages = [e for e in events if e["type"] == "assistant/message"]
    return "".join(b["text"] for b in messages[-1]["data"]["content"] if b["type"] == "text")


@pytest.fixture(params=["durable", "memory"])
def daemon(request, spawn):
    """The default store (jsonl, or postgres under HARNESSD_TEST_STORE), and
    --store memory, which keeps no log."""
    if request.param == "memory":
        d = spawn(args=["--store", "memory"])
    else:
        d = spawn()
    d.durable = request.param == "durable"
    return d


def test_delete_removes_the_session_its_log_and_its_list_entry(daemon):
    c = daemon.connect()
    c.initialize()
    for sid in ("keep", "gone"):
        resp, _ = c.run_prompt(sid, "hello")
        assert result_of(resp)["status"] == "ok"
    assert {"keep", "gone"} <= listed(c)
    durable = daemon.durable
    if durable:
        assert log_exists(daemon, "gone")

    assert result_of(call(c, "session/delete", {"sessionId": "gone"})) == {"deleted": True}

    assert "gone" not in listed(c)
    assert "keep" in listed(c)
    if durable:
        assert not log_exists(daemon, "gone")
        assert log_exists(daemon, "keep")
        err = error_of(call(c, "session/events", {"sessionId": "gone"}))
        assert err["code"] == INVALID_PARAMS
        assert err["message"] == "unknown session: gone"
        # The other session is untouched.
        assert result_of(call(c, "session/events", {"sessionId": "keep"}))["lastSeq"] >= 0


def test_delete_of_an_unknown_session_is_refused_as_other_methods_refuse_it(daemon):
    c = daemon.connect()
    c.initialize()
    events = error_of(call(c, "session/events", {"sessionId": "nope"}))
    deleted = error_of(call(c, "session/delete", {"sessionId": "nope"}))
    assert deleted == {"code": INVALID_PARAMS, "message": "unknown session: nope", "data": {"sessionId": "nope"}}
    assert deleted == events
    # Deleting twice: the second one finds nothing.
    resp, _ = c.run_prompt("twice", "hello")
    assert result_of(resp)["status"] == "ok"
    assert result_of(call(c, "session/delete", {"sessionId": "twice"})) == {"deleted": True}
    assert error_of(call(c, "session/delete", {"sessionId": "twice"}))["message"] == "unknown session: twice"


def test_delete_params_are_checked(daemon):
    c = daemon.connect()
    c.initialize()
    assert error_of(call(c, "session/delete", {})) == {"code": INVALID_PARAMS,
                                                       "message": "params.sessionId is required"}
    assert error_of(call(c, "session/delete", {"sessionId": 5}))["message"] == "params.sessionId must be a string"


def test_delete_while_a_turn_runs_is_refused_busy(daemon):
    a = daemon.connect()
    a.initialize()
    b = daemon.connect()
    b.initialize()
    rid = a.prompt("busy", LONG_TURN)
    a.wait_frame(lambda o: is_notification(o, "session.event") and o["params"]["event"]["type"] == "assistant/chunk",
                 what="the turn's first chunk")

    err = error_of(call(b, "session/delete", {"sessionId": "busy"}))
    assert err == {"code": SESSION_BUSY, "message": "session already has an active prompt: busy",
                   "data": {"sessionId": "busy"}}
    # The refusal left the turn alone: it is cancelled and settles normally.
    assert result_of(call(b, "session/cancel", {"sessionId": "busy"})) == {"cancelled": True}
    assert result_of(a.response(rid, 20))["status"] == "aborted"
    assert result_of(call(b, "session/delete", {"sessionId": "busy"})) == {"deleted": True}
    assert "busy" not in listed(b)


def test_a_deleted_id_starts_a_fresh_session(daemon):
    c = daemon.connect()
    c.initialize()
    first, first_events = c.run_prompt("again", "@context")
    assert result_of(first)["status"] == "ok"
    second, _ = c.run_prompt("again", "second turn")
    assert result_of(second)["status"] == "ok"

    assert result_of(call(c, "session/delete", {"sessionId": "again"})) == {"deleted": True}

    resp, events = c.run_prompt("again", "@context")
    assert result_of(resp)["status"] == "ok"
    # A new session: seq and turn from 0, and the model sees no earlier turn.
    assert events[0]["seq"] == 0
    assert events[0]["type"] == "turn/start"
    assert events[0]["data"]["turn"] == 0
    assert final_text(events) == final_text(first_events)
    entry = [s for s in result_of(call(c, "session/list", {}))["sessions"] if s["sessionId"] == "again"]
    assert len(entry) == 1
    assert entry[0]["turns"] == 1
    assert entry[0]["lastSeq"] == events[-1]["seq"]
    if daemon.durable:
        _, logged = read_log(daemon.log_path("again"))
        assert [e["seq"] for e in logged] == [e["seq"] for e in events]
