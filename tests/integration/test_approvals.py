"""A person in the loop over a directional protocol (docs/protocol.md §4.12,
§4.13): under the `ask` approval policy a tool call that may change
something waits for session/approve; ask_user_question waits for
session/answer. Every rule runs over TCP and over WebSocket, driven by the
scripted provider's `@tool` directive."""

from __future__ import annotations

import json
import os
import time

import pytest

from harnessd_helpers import INVALID_PARAMS, PG_MODE, error_of, is_notification, is_response, result_of
from test_websocket import init_params, ws_daemon
from ws_client import ws_conn

OK = {"status": "ok", "reason": {"kind": "completed"}}
SESSION_BUSY = -32001


def tool_line(name: str, args: dict) -> str:
    return f"@tool {name} {json.dumps(args)}"


def write_line(path: str, content: str = "hello\n") -> str:
    return tool_line("write", {"file_path": path, "content": content})


@pytest.fixture(params=["tcp", "ws"])
def transport(request):
    return request.param


class Setup:
    """A daemon with TCP and WebSocket listeners; conns open on the chosen one."""

    def __init__(self, spawn, transport: str, tmp_path, *args: str, session_root=None):
        self.transport = transport
        self.workspace_root = tmp_path / "workspaces"
        kw = {"session_root": session_root} if session_root else {}
        self.d = spawn(args=["--listen", "ws://127.0.0.1:0", "--workspace-root", str(self.workspace_root),
                             *args], **kw)
        ws = [u for u in self.d.listen if u.startswith("ws://")]
        self.ws_port = int(ws[0].rsplit(":", 1)[1])

    def conn(self, **init):
        c = ws_conn(self.d, self.ws_port) if self.transport == "ws" else self.d.connect()
        c.initialize(**init_params(cwd="proj", **init))
        return c


def events(conn, session_id, kind=None, start=0):
    return [e for e in conn.session_events(session_id, start=start) if kind is None or e["type"] == kind]


def wait_event(conn, session_id, kind, start=0, timeout=15.0, predicate=lambda e: True):
    _, frame = conn.wait_frame(
        lambda o: is_notification(o, "session.event") and o["params"]["sessionId"] == session_id
        and o["params"]["event"]["type"] == kind and predicate(o["params"]["event"]),
        timeout=timeout, start=start, what=kind)
    return frame["params"]["event"]


def assert_directional(conn):
    """The daemon never sends a request: no frame has both id and method."""
    for f in conn.frames:
        assert not ("id" in f.obj and "method" in f.obj), f"daemon sent a request: {f.obj}"


def assert_response_last(conn, session_id, rid):
    """The prompt's response follows every event of its turn, decision events included."""
    idx, _ = conn.response_index(rid)
    later = [f.obj for f in conn.frames[idx + 1:]
             if is_notification(f.obj, "session.event") and f.obj["params"]["sessionId"] == session_id]
    assert not later, f"events after the prompt's response: {later}"
    before = [e["type"] for e in conn.session_events(session_id, upto=idx)]
    assert before[-1] == "turn/end", before


def approve(conn, session_id, approval_id, outcome, message=None):
    params = {"sessionId": session_id, "approvalId": approval_id, "outcome": outcome}
    if message is not None:
        params["message"] = message
    return conn.response(conn.request("session/approve", params))


def test_allowed_once_runs_the_call_and_the_session_waits_meanwhile(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    rid = c.prompt("s1", write_line("a.txt"))
    req = wait_event(c, "s1", "approval/requested")
    data = req["data"]
    assert data["toolName"] == "write" and data["callId"] == "call_0" and data["turn"] == 0
    assert json.loads(data["arguments"]) == {"file_path": "a.txt", "content": "hello\n"}
    assert data["approvalId"] and data["reason"]
    target = s.workspace_root / "proj" / "a.txt"
    assert not target.exists(), "the call ran before it was approved"

    # While it waits: busy to overlapping prompts, and listed as waiting.
    other = s.conn()
    assert error_of(other.response(other.prompt("s1", "hi")))["code"] == SESSION_BUSY
    listed = result_of(other.response(other.request("session/list", {})))["sessions"]
    entry = next(x for x in listed if x["sessionId"] == "s1")
    assert entry["running"] is True and entry["waiting"] == "approval", entry

    assert result_of(approve(c, "s1", data["approvalId"], "allowed-once")) == {"accepted": True}
    resp = c.response(rid)
    assert result_of(resp) == OK, resp
    assert target.read_text() == "hello\n"
    resolved = events(c, "s1", "approval/resolved")
    assert [e["data"] for e in resolved] == [
        {"approvalId": data["approvalId"], "outcome": "allowed-once", "source": "client"}]
    result = events(c, "s1", "tool/result")[0]["data"]
    assert result["isError"] is False
    types = [e["type"] for e in events(c, "s1")]
    assert types.index("tool/call") < types.index("approval/requested") < types.index("approval/resolved") \
        < types.index("tool/result")
    assert_response_last(c, "s1", rid)
    listed = result_of(other.response(other.request("session/list", {})))["sessions"]
    assert "waiting" not in next(x for x in listed if x["sessionId"] == "s1")
    assert_directional(c)
    assert_directional(other)

    # allowed-once is once: the next write asks again.
    start = len(c.frames)
    rid = c.prompt("s1", write_line("b.txt"))
    req = wait_event(c, "s1", "approval/requested", start=start)
    approve(c, "s1", req["data"]["approvalId"], "allowed-once")
    assert result_of(c.response(rid)) == OK


def test_rejected_call_does_not_run_and_the_model_reads_why(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    rid = c.prompt("s1", write_line("a.txt"))
    req = wait_event(c, "s1", "approval/requested")
    approve(c, "s1", req["data"]["approvalId"], "rejected", "not in main, please")
    resp = c.response(rid)
    assert result_of(resp) == OK, resp
    assert not (s.workspace_root / "proj" / "a.txt").exists()
    result = events(c, "s1", "tool/result")[0]["data"]
    assert result["isError"] is True and result["error"]["code"] == "REJECTED"
    assert "not in main, please" in result["content"][0]["text"]
    assert events(c, "s1", "approval/resolved")[0]["data"]["outcome"] == "rejected"
    # The model saw the rejection as the tool's result.
    final = [e for e in events(c, "s1", "assistant/message")][-1]["data"]["content"][0]["text"]
    assert "not in main, please" in final


def test_allowed_for_session_survives_a_restart(spawn, transport, tmp_path):
    root = tmp_path / "sessions"
    s = Setup(spawn, transport, tmp_path, session_root=root)
    c = s.conn()
    rid = c.prompt("s1", write_line("a.txt"))
    req = wait_event(c, "s1", "approval/requested")
    approve(c, "s1", req["data"]["approvalId"], "allowed-for-session")
    assert result_of(c.response(rid)) == OK
    start = len(c.frames)
    rid = c.prompt("s1", write_line("b.txt") + "\n" + tool_line("edit", {
        "file_path": "a.txt", "old_string": "hello", "new_string": "bye"}))
    # write is allowed for the session; edit is another tool and asks.
    req = wait_event(c, "s1", "approval/requested", start=start)
    assert req["data"]["toolName"] == "edit"
    assert [e["data"]["toolName"] for e in events(c, "s1", "approval/requested", start=start)] == ["edit"]
    approve(c, "s1", req["data"]["approvalId"], "allowed-once")
    assert result_of(c.response(rid)) == OK
    assert (s.workspace_root / "proj" / "b.txt").exists()
    s.d.terminate()

    s2 = Setup(spawn, transport, tmp_path, session_root=root)
    c2 = s2.conn()
    resp, evs = c2.run_prompt("s1", write_line("c.txt"))
    assert result_of(resp) == OK, resp
    assert "approval/requested" not in [e["type"] for e in evs]
    assert (s2.workspace_root / "proj" / "c.txt").exists()
    # Another session is not covered.
    rid = c2.prompt("s2", write_line("d.txt"))
    wait_event(c2, "s2", "approval/requested")
    c2.request("session/cancel", {"sessionId": "s2"})
    c2.response(rid)


def test_timeout_rejects(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path, "--approval-timeout-ms", "300")
    c = s.conn()
    t0 = time.monotonic()
    resp, evs = c.run_prompt("s1", write_line("a.txt"))
    assert time.monotonic() - t0 < 10
    assert result_of(resp) == OK, resp
    resolved = [e["data"] for e in evs if e["type"] == "approval/resolved"]
    assert resolved[0]["outcome"] == "rejected" and resolved[0]["source"] == "timeout"
    result = [e["data"] for e in evs if e["type"] == "tool/result"][0]
    assert result["error"]["code"] == "REJECTED"
    assert not (s.workspace_root / "proj" / "a.txt").exists()
    # Too late: nothing waits any more.
    err = error_of(approve(c, "s1", resolved[0]["approvalId"], "allowed-once"))
    assert err["code"] == INVALID_PARAMS and err["data"]["reason"] == "not-pending", err


def test_cancel_while_waiting(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    rid = c.prompt("s1", write_line("a.txt"))
    req = wait_event(c, "s1", "approval/requested")
    t0 = time.monotonic()
    assert result_of(c.response(c.request("session/cancel", {"sessionId": "s1"}))) == {"cancelled": True}
    resp = c.response(rid)
    assert time.monotonic() - t0 < 5
    assert result_of(resp)["status"] == "aborted", resp
    resolved = events(c, "s1", "approval/resolved")[0]["data"]
    assert resolved == {"approvalId": req["data"]["approvalId"], "outcome": "cancelled", "source": "cancel"}
    assert not (s.workspace_root / "proj" / "a.txt").exists()
    assert_response_last(c, "s1", rid)


def test_not_pending_and_bad_outcomes(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    err = error_of(approve(c, "nosuch", "approval-0-0", "allowed-once"))
    assert err["code"] == INVALID_PARAMS and err["data"]["reason"] == "not-pending", err
    rid = c.prompt("s1", write_line("a.txt"))
    req = wait_event(c, "s1", "approval/requested")
    aid = req["data"]["approvalId"]
    for bad in ({"sessionId": "s1", "approvalId": aid, "outcome": "cancelled"},
                {"sessionId": "s1", "approvalId": aid, "outcome": "yes"},
                {"sessionId": "s1", "approvalId": aid},
                {"sessionId": "s1", "outcome": "rejected"},
                {"sessionId": "s1", "approvalId": aid, "outcome": "rejected", "message": 7}):
        err = error_of(c.response(c.request("session/approve", bad)))
        assert err["code"] == INVALID_PARAMS, (bad, err)
    # The wrong id, or an answer to an approval, is not pending.
    assert error_of(approve(c, "s1", aid + "x", "allowed-once"))["data"]["reason"] == "not-pending"
    err = error_of(c.response(c.request("session/answer", {"sessionId": "s1", "questionId": aid, "answers": []})))
    assert err["data"]["reason"] == "not-pending", err
    assert result_of(approve(c, "s1", aid, "allowed-once")) == {"accepted": True}
    assert result_of(c.response(rid)) == OK
    err = error_of(approve(c, "s1", aid, "allowed-once"))
    assert err["data"]["reason"] == "not-pending", err


def test_approve_from_a_subscriber_after_the_prompter_left(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    a = s.conn(onDisconnect="continue")
    a.prompt("s1", write_line("a.txt"))
    wait_event(a, "s1", "approval/requested")
    a.close()

    b = s.conn()
    sub = result_of(b.response(b.request("session/subscribe", {"sessionId": "s1", "afterSeq": -1})))
    req = wait_event(b, "s1", "approval/requested")
    assert sub["lastSeq"] >= req["seq"]
    approve(b, "s1", req["data"]["approvalId"], "allowed-once")
    end = wait_event(b, "s1", "turn/end")
    assert end["data"]["reason"]["kind"] == "completed", end
    assert (s.workspace_root / "proj" / "a.txt").read_text() == "hello\n"
    assert [e["data"]["outcome"] for e in events(b, "s1", "approval/resolved")] == ["allowed-once"]
    assert_directional(b)


def test_read_only_tools_and_never_policy_do_not_ask(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    (s.workspace_root / "proj").mkdir(parents=True, exist_ok=True)
    (s.workspace_root / "proj" / "r.txt").write_text("x\n")
    resp, evs = c.run_prompt("s1", tool_line("read", {"file_path": "r.txt"}) + "\n" +
                             tool_line("grep", {"pattern": "x"}) + "\n" + tool_line("todo_write", {"todos": []}))
    assert result_of(resp) == OK, resp
    assert not [e for e in evs if e["type"].startswith("approval/")]

    n = s.conn(approvalPolicy="never")
    resp, evs = n.run_prompt("s2", write_line("w.txt"))
    assert result_of(resp) == OK, resp
    assert not [e for e in evs if e["type"].startswith("approval/")]
    assert (s.workspace_root / "proj" / "w.txt").exists()
    err = error_of(n.response(n.request("initialize", {"approvalPolicy": "sometimes"})))
    assert err["code"] != 0


def test_bad_approval_policy_is_refused(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = ws_conn(s.d, s.ws_port) if transport == "ws" else s.d.connect()
    err = error_of(c.response(c.request("initialize", init_params(approvalPolicy="sometimes"))))
    assert err["code"] == INVALID_PARAMS and "approvalPolicy" in err["message"], err


def test_stdio_defaults_to_never_and_flag_sets_ask(spawn, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize(cwd=str(ws))
    resp, evs = c.run_prompt("s1", write_line("a.txt"))
    assert result_of(resp) == OK and (ws / "a.txt").exists()
    assert not [e for e in evs if e["type"].startswith("approval/")]

    d2 = spawn(stdio=True, args=["--approval-policy", "ask"], session_root=tmp_path / "s2")
    c2 = d2.stdio_conn()
    c2.initialize(cwd=str(ws))
    rid = c2.prompt("s1", write_line("b.txt"))
    req = wait_event(c2, "s1", "approval/requested")
    approve(c2, "s1", req["data"]["approvalId"], "rejected")
    assert result_of(c2.response(rid)) == OK
    assert not (ws / "b.txt").exists()


QUESTIONS = [
    {"id": "db", "question": "Which database?", "header": "Storage",
     "options": [{"label": "Postgres", "description": "shared"}, {"label": "SQLite"}]},
    {"id": "extras", "question": "What else?", "options": [{"label": "tests"}, {"label": "docs"}],
     "multi_select": True},
    {"id": "name", "question": "Project name?"},
]


def test_question_answered(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    rid = c.prompt("s1", tool_line("ask_user_question", {"questions": QUESTIONS}))
    req = wait_event(c, "s1", "question/requested")
    data = req["data"]
    assert data["questions"] == QUESTIONS and data["callId"] == "call_0" and data["questionId"]
    qid = data["questionId"]
    listed = result_of(c.response(c.request("session/list", {})))["sessions"]
    assert next(x for x in listed if x["sessionId"] == "s1")["waiting"] == "question"

    # Answers that do not fit the questions are refused, and it still waits.
    for answers in ([{"id": "db", "selected": ["MySQL"]}],
                    [{"id": "db", "selected": ["Postgres", "SQLite"]}],
                    [{"id": "nosuch", "selected": []}],
                    [{"id": "db", "selected": ["Postgres"]}, {"id": "db", "selected": ["SQLite"]}]):
        err = error_of(c.response(c.request("session/answer",
                                            {"sessionId": "s1", "questionId": qid, "answers": answers})))
        assert err["code"] == INVALID_PARAMS and err["data"].get("reason") != "not-pending", (answers, err)
    assert not [f for f in c.frames if is_response(f.obj, rid)]

    answers = [{"id": "db", "selected": ["Postgres"]},
               {"id": "extras", "selected": ["tests", "docs"]},
               {"id": "name", "selected": [], "custom": "harness ✓"}]
    got = c.response(c.request("session/answer", {"sessionId": "s1", "questionId": qid, "answers": answers}))
    assert result_of(got) == {"accepted": True}
    assert result_of(c.response(rid)) == OK
    assert events(c, "s1", "question/resolved")[0]["data"] == {"questionId": qid, "outcome": "answered"}
    result = events(c, "s1", "tool/result")[0]["data"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == answers
    assert_response_last(c, "s1", rid)
    err = error_of(c.response(c.request("session/answer", {"sessionId": "s1", "questionId": qid, "answers": []})))
    assert err["data"]["reason"] == "not-pending"
    assert_directional(c)


def test_question_timeout_and_cancel(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path, "--approval-timeout-ms", "300")
    c = s.conn()
    resp, evs = c.run_prompt("s1", tool_line("ask_user_question", {"questions": QUESTIONS[:1]}))
    assert result_of(resp) == OK
    assert [e["data"]["outcome"] for e in evs if e["type"] == "question/resolved"] == ["timeout"]
    assert [e["data"]["error"]["code"] for e in evs if e["type"] == "tool/result"] == ["NO_ANSWER"]

    s2 = Setup(spawn, transport, tmp_path, session_root=tmp_path / "other")
    c2 = s2.conn()
    rid = c2.prompt("s1", tool_line("ask_user_question", {"questions": QUESTIONS[:1]}))
    wait_event(c2, "s1", "question/requested")
    c2.request("session/cancel", {"sessionId": "s1"})
    assert result_of(c2.response(rid))["status"] == "aborted"
    assert events(c2, "s1", "question/resolved")[0]["data"]["outcome"] == "cancelled"


def test_malformed_questions_are_the_models_error(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    resp, evs = c.run_prompt("s1", tool_line("ask_user_question", {"questions": [
        {"id": "a", "question": "?"}, {"id": "a", "question": "again?"}]}))
    assert result_of(resp) == OK
    assert not [e for e in evs if e["type"] == "question/requested"]
    assert [e["data"]["error"]["code"] for e in evs if e["type"] == "tool/result"] == ["INVALID_ARGUMENTS"]


def test_decision_events_replay_from_the_log(spawn, transport, tmp_path):
    s = Setup(spawn, transport, tmp_path)
    c = s.conn()
    rid = c.prompt("s1", write_line("a.txt"))
    req = wait_event(c, "s1", "approval/requested")
    approve(c, "s1", req["data"]["approvalId"], "allowed-once")
    c.response(rid)
    live = [e for e in events(c, "s1") if e["type"].startswith("approval/")]
    page = result_of(c.response(c.request("session/events", {"sessionId": "s1"})))
    logged = [e for e in page["events"] if e["type"].startswith("approval/")]
    assert logged == live and len(logged) == 2
