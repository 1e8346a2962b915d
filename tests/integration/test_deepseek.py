"""Black-box tests of harnessd's `deepseek` provider against the in-repo OpenAI-compatible mock
(tests/mock/openai_mock.py, see tests/mock/README.md).

The daemon registers the provider when DEEPSEEK_API_KEY is set and talks to DEEPSEEK_BASE_URL;
clients select it with initialize {"provider": "deepseek"}. Every test starts its own mock and
daemon, every wait is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harnessd_helpers import (INVALID_PARAMS, REPO_ROOT, check_turn, error_of, final_text, is_notification,
                              is_response, read_log, result_of, text_deltas)

MOCK_SCRIPT = REPO_ROOT / "tests" / "mock" / "openai_mock.py"
KEY = "sk-dsh-test-Q7xK2mP9vL4wZ8nR"
OK = {"status": "ok", "reason": {"kind": "completed"}}
CANCELLED = {"kind": "aborted", "reason": "cancelled"}
FAST_RETRY = ["--model-retry-delay-ms", "50"]


# ---------------------------------------------------------------------------
# the mock


class Mock:
    """One openai_mock.py process: start, inspect recorded requests, replace the script, stop."""

    def __init__(self, workdir: Path, script: list, require_key: str | None = None, timeout: float = 10.0):
        self.dir = workdir
        self.dir.mkdir(parents=True)
        script_path = self.dir / "script.json"
        script_path.write_text(json.dumps(script))
        ready = self.dir / "ready.json"
        cmd = [sys.executable, str(MOCK_SCRIPT), "--port", "0", "--ready-file", str(ready),
               "--script", str(script_path), "--record", str(self.dir / "record")]
        if require_key is not None:
            cmd += ["--require-key", require_key]
        self.log = open(self.dir / "mock.log", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"openai_mock exited with {self.proc.returncode}: {self.output()}")
            try:
                info = json.loads(ready.read_text())
                self.url = info["url"]
                break
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"openai_mock not ready within {timeout}s: {self.output()}")
            time.sleep(0.02)

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "mock.log").read_text(errors="replace")[-2000:]

    def _call(self, path: str, data: bytes | None = None):
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def requests(self) -> list[dict]:
        """Recorded chat completion requests since the last reset, oldest first."""
        return [r for r in self._call("/__requests") if r["path"].endswith("/chat/completions")]

    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests()]

    def set_script(self, script: list) -> None:
        self._call("/__script", json.dumps(script).encode())

    def reset(self) -> None:
        self._call("/__reset", b"")

    def wait_requests(self, n: int, timeout: float = 5.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            reqs = self.requests()
            if len(reqs) >= n or time.monotonic() > deadline:
                return reqs
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


@pytest.fixture
def mock(tmp_path):
    """Factory: mock(script, require_key=None) -> a running Mock; all are stopped at teardown."""
    mocks: list[Mock] = []

    def make(script: list, require_key: str | None = None) -> Mock:
        m = Mock(tmp_path / f"mock{len(mocks)}", script, require_key)
        mocks.append(m)
        return m

    yield make
    for m in mocks:
        m.stop()


def ds_daemon(spawn, m: Mock, *, key: str | None = KEY, args=(), **kw):
    """A TCP harnessd whose deepseek provider points at mock m."""
    env = {"DEEPSEEK_API_KEY": key, "DEEPSEEK_BASE_URL": m.url}
    return spawn(args=[*FAST_RETRY, *args], env=env, **kw)


def ds_conn(d, **init):
    c = d.connect()
    c.initialize(provider="deepseek", **init)
    return c


# ---------------------------------------------------------------------------
# event helpers


def chunks(events: list[dict], step: int | None = None) -> list[dict]:
    return [e["data"]["chunk"] for e in events
            if e["type"] == "assistant/chunk" and (step is None or e["data"]["step"] == step)]


def of_type(events: list[dict], t: str) -> list[dict]:
    return [e for e in events if e["type"] == t]


def history(body: dict) -> list[tuple]:
    """Messages of a request body reduced to (role, content) / tool fields, for comparison."""
    out = []
    for m in body["messages"]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = [(tc["id"], tc["type"], tc["function"]["name"], json.loads(tc["function"]["arguments"]))
                     for tc in m["tool_calls"]]
            out.append(("assistant", m.get("content") or None, calls))
        elif m["role"] == "tool":
            out.append(("tool", m["tool_call_id"], m["content"]))
        else:
            out.append((m["role"], m["content"]))
    return out


def subset(small: dict, big: dict) -> bool:
    return all(k in big and big[k] == v for k, v in small.items())


def check_usage_chunk(c: dict, expected: dict | None = None) -> None:
    assert c["type"] == "usage", c
    u = c["usage"]
    for k in ("inputTokens", "outputTokens", "totalTokens"):
        assert isinstance(u.get(k), int), f"usage chunk lacks {k}: {c}"
    if expected:
        assert subset(expected, u), f"usage {u}, expected at least {expected}"


def check_request_shape(body: dict, model: str = "deepseek-chat") -> None:
    assert body["model"] == model, body
    assert body["stream"] is True, body
    assert body["stream_options"] == {"include_usage": True}, body
    msgs = body["messages"]
    assert msgs and msgs[0]["role"] == "system" and isinstance(msgs[0]["content"], str) and msgs[0]["content"], msgs
    assert [m["role"] for m in msgs].count("system") == 1, msgs
    tools = body["tools"]
    sub = [t for t in tools if t.get("type") == "function" and t["function"]["name"] == "subagent"]
    assert len(sub) == 1, f"no subagent function tool: {tools}"
    params = sub[0]["function"]["parameters"]
    assert params["type"] == "object", params
    assert {"description", "prompt"} <= set(params["properties"]), params
    assert set(params.get("required", [])) == {"description", "prompt"}, params


def assert_error_turn(resp: dict, events: list[dict], code: str) -> dict:
    res = result_of(resp)
    assert res["status"] == "error", f"expected status error with code {code}, got {res}"
    reason = res["reason"]
    assert reason.get("kind") == "error" and reason.get("code") == code, \
        f"expected reason {{kind: error, code: {code}}}, got {reason}"
    assert isinstance(reason.get("message"), str) and reason["message"], reason
    check_turn(events)
    assert events[-1]["data"]["reason"] == reason, (events[-1], reason)
    return reason


# ---------------------------------------------------------------------------
# streaming


def test_text_turn(spawn, mock):
    text = "Hello, deepseek world!"
    m = mock([{"text": text, "chunk": 4,
               "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    resp, events = c.run_prompt("T", "say hello")
    assert result_of(resp) == OK
    check_turn(events, turn=0)
    assert final_text(events) == text

    types = [e["type"] for e in events]
    n = len(chunks(events))
    assert types == ["turn/start", "user/message", "request/header", "step/start"] + ["assistant/chunk"] * n + \
        ["assistant/message", "step/end", "turn/end"], types
    cs = chunks(events)
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    assert cs[0] == {"type": "block-start", "index": 0, "blockType": "text"}, cs
    assert cs[1:1 + len(pieces)] == [{"type": "text-delta", "index": 0, "text": p} for p in pieces], cs
    assert cs[1 + len(pieces)] == {"type": "block-end", "index": 0}, cs
    usage = {"inputTokens": 11, "outputTokens": 7, "totalTokens": 18}
    check_usage_chunk(cs[2 + len(pieces)], usage)
    assert cs[3 + len(pieces):] == [{"type": "finish", "reason": "stop"}], cs

    msg = of_type(events, "assistant/message")
    assert len(msg) == 1
    md = msg[0]["data"]
    assert md["content"] == [{"type": "text", "text": text}], md
    assert md["provenance"] == {"provider": "deepseek", "model": "deepseek-chat"}, md
    assert subset(usage, md.get("usage") or {}), md
    assert events[-1]["data"]["reason"] == {"kind": "completed"}

    reqs = m.requests()
    assert len(reqs) == 1, reqs
    body = reqs[0]["body"]
    check_request_shape(body)
    assert history(body)[1:] == [("user", "say hello")]
    assert reqs[0]["headers"].get("Authorization", "").startswith("Bearer "), reqs[0]["headers"]
    _, logged = read_log(d.log_path("T"))
    assert logged == events


def test_reasoning_then_text(spawn, mock):
    m = mock([{"reasoning": "Let me think step by step.", "text": "The answer is 42.", "chunk": 6}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    resp, events = c.run_prompt("R", "what is the answer?")
    assert result_of(resp) == OK
    check_turn(events, turn=0)
    cs = chunks(events)
    kinds = [x["type"] for x in cs]
    assert cs[0] == {"type": "block-start", "index": 0, "blockType": "reasoning"}, cs
    r_end = kinds.index("block-start", 1)
    assert set(kinds[1:r_end]) == {"reasoning-delta"}, kinds
    assert all(x["index"] == 0 for x in cs[1:r_end]), cs
    assert "".join(x["text"] for x in cs[1:r_end]) == "Let me think step by step."
    assert cs[r_end] == {"type": "block-start", "index": 1, "blockType": "text"}, cs
    t_end = kinds.index("block-end")
    assert set(kinds[r_end + 1:t_end]) == {"text-delta"}, kinds
    assert all(x["index"] == 1 for x in cs[r_end + 1:t_end]), cs
    assert "".join(text_deltas(events)) == "The answer is 42."
    assert sorted(x["index"] for x in cs[t_end:t_end + 2] if x["type"] == "block-end") == [0, 1], cs
    check_usage_chunk(cs[t_end + 2])
    assert cs[t_end + 3:] == [{"type": "finish", "reason": "stop"}], cs
    md = of_type(events, "assistant/message")[0]["data"]
    assert md["content"] == [{"type": "reasoning", "text": "Let me think step by step."},
                             {"type": "text", "text": "The answer is 42."}], md
    assert final_text(events) == "The answer is 42."


UTF8_TEXT = "héllo wörld — ünïcödé ✓ 日本語テキスト 🎉🚀 done"
UTF8_REASONING = "ρ reasoning 思考 🤔 ok"


def test_split_bytes_stream_decodes_exactly(spawn, mock):
    """The body arrives in 1-7 byte HTTP chunks that cut SSE lines and UTF-8 characters."""
    entries = [{"match": f"seed{s}", "reasoning": UTF8_REASONING, "text": UTF8_TEXT, "chunk": 3,
                "split_bytes": True, "seed": s, "split_delay_ms": dl}
               for s, dl in ((1, 1), (2, 0), (3, 0))]
    m = mock(entries)
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    for s in (1, 2, 3):
        resp, events = c.run_prompt(f"split{s}", f"seed{s}")
        assert result_of(resp) == OK, f"seed {s}: {resp}"
        check_turn(events, turn=0)
        pieces = [UTF8_TEXT[i:i + 3] for i in range(0, len(UTF8_TEXT), 3)]
        assert text_deltas(events) == pieces, f"seed {s}"
        rdeltas = [x["text"] for x in chunks(events) if x["type"] == "reasoning-delta"]
        assert "".join(rdeltas) == UTF8_REASONING, f"seed {s}"
        assert final_text(events) == UTF8_TEXT
        assert of_type(events, "assistant/message")[0]["data"]["content"][0] == \
            {"type": "reasoning", "text": UTF8_REASONING}


def test_keepalive_comments_ignored(spawn, mock):
    m = mock([{"match": "ka", "text": "kept alive text", "chunk": 3, "keepalive": True, "delay_ms": 10},
              {"match": "both", "text": UTF8_TEXT, "chunk": 5, "keepalive": True, "split_bytes": True,
               "split_delay_ms": 0, "seed": 7}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    resp, events = c.run_prompt("K", "ka")
    assert result_of(resp) == OK
    assert text_deltas(events) == ["kep", "t a", "liv", "e t", "ext"]
    assert final_text(events) == "kept alive text"
    assert [x["type"] for x in chunks(events)].count("text-delta") == 5
    resp, events = c.run_prompt("K2", "both")
    assert result_of(resp) == OK
    assert "".join(text_deltas(events)) == UTF8_TEXT
    assert final_text(events) == UTF8_TEXT


def test_deltas_stream_incrementally(spawn, mock):
    """A slow stream whose gaps (150 ms) stay far below --model-idle-timeout-ms (800 ms) must
    complete, and its deltas must reach the client as they arrive, not all at the end."""
    text = "abcdefghijklmnopqrst"  # 10 pieces of 2, ~1.8 s in total
    m = mock([{"text": text, "chunk": 2, "delay_ms": 150}])
    d = ds_daemon(spawn, m, args=["--model-idle-timeout-ms", "800", "--model-attempts", "1"])
    c = ds_conn(d)
    start = len(c.frames)
    rid = c.prompt("slow", "go slowly")
    idx, resp = c.response_index(rid, timeout=8)
    frames = c.frames
    deltas = [f for f in frames[start:idx]
              if is_notification(f.obj, "session.event") and f.obj["params"]["event"]["type"] == "assistant/chunk"
              and f.obj["params"]["event"]["data"]["chunk"]["type"] == "text-delta"]
    assert result_of(resp) == OK, \
        f"a stream with 150 ms gaps (idle timeout 800 ms, ~1.8 s in total) should complete; got {resp}"
    spread = frames[idx].at - deltas[0].at
    assert spread > 0.9, (f"the first text-delta reached the client only {spread:.3f}s before the response: "
                          "deltas are not forwarded as the model streams them")


def test_step_start_reaches_the_client_before_the_model_answers(spawn, mock):
    """While the model has not answered (here 700 ms before its response headers), the client
    already holds turn/start and step/start: a UI shows that the turn is running."""
    m = mock([{"text": "late answer", "header_delay_ms": 700}])
    d = ds_daemon(spawn, m, args=["--model-attempts", "1"])
    c = ds_conn(d)
    start = len(c.frames)
    rid = c.prompt("late", "answer late")
    idx, resp = c.response_index(rid, timeout=8)
    assert result_of(resp) == OK, resp
    frames = c.frames[start:idx]

    def first(kind):
        return next(f for f in frames if is_notification(f.obj, "session.event")
                    and f.obj["params"]["event"]["type"] == kind)
    step_start, chunk = first("step/start"), first("assistant/chunk")
    assert chunk.at - step_start.at > 0.4, (
        f"step/start reached the client {chunk.at - step_start.at:.3f}s before the model's first chunk; "
        "it was held back while the model was silent")


# ---------------------------------------------------------------------------
# tool calls and subagents

DELEGATE_ARGS = {"description": "count", "prompt": "child: count to three"}
TOOL_SCRIPT = [
    {"match": "please delegate", "times": 1,
     "tool_calls": [{"id": "call_sub_1", "name": "subagent", "arguments": DELEGATE_ARGS}]},
    {"match": "child: count", "text": "one two three"},
    {"match": "please delegate", "text": "the child counted"},
]


def test_subagent_tool_call_turn(spawn, mock):
    m = mock(TOOL_SCRIPT)
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    start = len(c.frames)
    rid = c.prompt("P", "please delegate")
    i_resp, resp = c.response_index(rid, timeout=10)
    assert result_of(resp) == OK, resp
    frames = [f.obj for f in c.frames]

    started = [i for i in range(start, i_resp) if is_notification(frames[i], "subagent.started")]
    finished = [i for i in range(start, i_resp) if is_notification(frames[i], "subagent.finished")]
    assert len(started) == 1 and len(finished) == 1, frames[start:i_resp]
    child = frames[started[0]]["params"]["childSessionId"]
    assert frames[started[0]]["params"] == {"parentSessionId": "P", "childSessionId": child}
    assert isinstance(child, str) and child and child != "P"
    fin = frames[finished[0]]["params"]
    assert subset({"provider": "deepseek", "agentId": child, "parentSessionId": "P", "childSessionId": child,
                   "status": "ok", "lastAssistantMessage": "one two three"}, fin), fin
    assert isinstance(fin.get("stopReason"), str), fin

    def ev_index(sid, pred):
        return [i for i in range(start, len(frames))
                if is_notification(frames[i], "session.event") and frames[i]["params"]["sessionId"] == sid
                and pred(frames[i]["params"]["event"])]

    child_idx = ev_index(child, lambda e: True)
    assert child_idx, "no events of the child session were notified"
    parent_end = ev_index("P", lambda e: e["type"] == "turn/end")
    parent_call = ev_index("P", lambda e: e["type"] == "tool/call")
    parent_result = ev_index("P", lambda e: e["type"] == "tool/result")
    assert len(parent_end) == 1 and len(parent_call) == 1 and len(parent_result) == 1
    assert parent_call[0] < started[0] < min(child_idx) <= max(child_idx) < finished[0] \
        < parent_result[0] < parent_end[0] < i_resp, \
        dict(call=parent_call, started=started, child=(min(child_idx), max(child_idx)), finished=finished,
             result=parent_result, end=parent_end, response=i_resp)

    # parent turn: step 0 tool call, tool/call + tool/result, step 1 answer
    events = c.session_events("P", i_resp, start)
    check_turn(events, turn=0)
    cs0 = chunks(events, step=0)
    assert cs0[0] == {"type": "block-start", "index": 0, "blockType": "tool-call"}, cs0
    deltas = [x for x in cs0 if x["type"] == "tool-call-delta"]
    assert deltas and all(x["index"] == 0 for x in deltas), cs0
    assert deltas[0].get("id") == "call_sub_1" and deltas[0].get("name") == "subagent", deltas[0]
    args_text = "".join(x.get("argumentsDelta", "") for x in deltas)
    assert json.loads(args_text) == DELEGATE_ARGS
    kinds0 = [x["type"] for x in cs0]
    assert kinds0[-3:] == ["block-end", "usage", "finish"], kinds0
    assert cs0[-3] == {"type": "block-end", "index": 0}
    assert cs0[-1] == {"type": "finish", "reason": "tool-calls"}, cs0
    msg0 = [e for e in of_type(events, "assistant/message") if e["data"]["step"] == 0][0]["data"]
    assert [b["type"] for b in msg0["content"]] == ["tool-call"], msg0
    tc = msg0["content"][0]
    assert tc["id"] == "call_sub_1" and tc["name"] == "subagent" and json.loads(tc["arguments"]) == DELEGATE_ARGS
    assert isinstance(msg0.get("usage"), dict), msg0
    call = of_type(events, "tool/call")[0]["data"]
    assert call["callId"] == "call_sub_1" and call["name"] == "subagent", call
    assert json.loads(call["arguments"]) == DELEGATE_ARGS
    result = of_type(events, "tool/result")[0]["data"]
    assert result["callId"] == "call_sub_1" and result["isError"] is False, result
    assert result["content"] == [{"type": "text", "text": "one two three"}], result
    assert chunks(events, step=1)[-1] == {"type": "finish", "reason": "stop"}
    assert final_text(events) == "the child counted"

    # child session
    cev = c.session_events(child, i_resp, start)
    check_turn(cev, turn=0)
    assert cev[1]["data"]["content"] == [{"type": "text", "text": "child: count to three"}], cev[1]
    assert final_text(cev) == "one two three"
    header, logged = read_log(d.log_path(child))
    assert header.get("parentSession") == "P" and header.get("delegationDepth") == 1, header
    assert logged == cev

    # what the model saw: parent step 0, child, parent step 1
    bodies = m.bodies()
    assert len(bodies) == 3, [history(b) for b in bodies]
    parent = [b for b in bodies if history(b)[1] == ("user", "please delegate")]
    kid = [b for b in bodies if history(b)[1] == ("user", "child: count to three")]
    assert len(parent) == 2 and len(kid) == 1, [history(b) for b in bodies]
    for b in bodies:
        check_request_shape(b)
    assert history(kid[0])[1:] == [("user", "child: count to three")]
    second = parent[1]
    assert history(second)[1:] == [
        ("user", "please delegate"),
        ("assistant", None, [("call_sub_1", "function", "subagent", DELEGATE_ARGS)]),
        ("tool", "call_sub_1", "one two three"),
    ], history(second)
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_sub_1", "content": "one two three"}


# ---------------------------------------------------------------------------
# errors

ERROR_ARGS = ["--model-attempts", "3", "--model-idle-timeout-ms", "500", "--model-first-byte-timeout-ms", "700"]

# id, script entry, expected code, expected number of requests the mock sees (None: not checked), min seconds
ERROR_CASES = [
    ("http-401", {"status": 401}, "AUTH", 1, 0),
    ("http-403", {"status": 403}, "AUTH", 1, 0),
    ("http-429", {"status": 429}, "RATE_LIMIT", 3, 0.14),
    ("http-500", {"status": 500}, "SERVER", 3, 0.14),
    ("http-503", {"status": 503, "body": "upstream overloaded"}, "SERVER", 3, 0.14),
    ("stream-closed", {"text": "partial answer that is cut", "chunk": 4, "close_after": 3}, "STREAM_CLOSED", None, 0),
    ("idle-timeout", {"text": "abcdefgh", "chunk": 2, "hang_after": 3, "hang_ms": 20000}, "TIMEOUT", None, 0.45),
    ("first-byte-timeout", {"header_delay_ms": 5000}, "TIMEOUT", None, 0.65),
    ("content-filter", {"text": "filtered", "finish": "content_filter"}, "FINISH_CONTENT_FILTER", 1, 0),
    ("insufficient-resource", {"finish": "insufficient_system_resource"},
     "FINISH_INSUFFICIENT_SYSTEM_RESOURCE", 1, 0),
]


@pytest.mark.parametrize("entry,code,nreq,min_s", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_error_turn_then_healthy(spawn, mock, entry, code, nreq, min_s):
    m = mock([entry])
    d = ds_daemon(spawn, m, args=ERROR_ARGS)
    c = ds_conn(d)
    t0 = time.monotonic()
    resp, events = c.run_prompt("E", "trigger the failure", timeout=8)
    elapsed = time.monotonic() - t0
    assert_error_turn(resp, events, code)
    assert elapsed >= min_s, f"turn ended after {elapsed:.3f}s, expected at least {min_s}s (backoff/timeout)"
    if nreq is not None:
        reqs = m.requests()
        assert len(reqs) == nreq, f"the mock saw {len(reqs)} requests, expected {nreq}"
    if code.startswith("FINISH_"):
        finish = [x for x in chunks(events) if x["type"] == "finish"]
        assert finish and finish[-1]["reason"] == "error", chunks(events)

    # the daemon stays healthy: the same session and a fresh one both work
    m.set_script([{"text": "recovered"}])
    resp, events = c.run_prompt("E", "try again")
    assert result_of(resp) == OK, resp
    check_turn(events, turn=1)
    assert final_text(events) == "recovered"
    assert m.bodies()[-1]["messages"][-1]["role"] == "user"
    assert "try again" in m.bodies()[-1]["messages"][-1]["content"]
    c2 = ds_conn(d)
    resp, events = c2.run_prompt("E2", "fresh")
    assert result_of(resp) == OK, resp
    assert d.proc.poll() is None


@pytest.mark.parametrize("status,attempts", [(429, 2), (503, 4)])
def test_retry_count_follows_model_attempts(spawn, mock, status, attempts):
    m = mock([{"status": status}])
    d = ds_daemon(spawn, m, args=["--model-attempts", str(attempts)])
    c = ds_conn(d)
    resp, events = c.run_prompt("A", "retry me", timeout=8)
    assert_error_turn(resp, events, "RATE_LIMIT" if status == 429 else "SERVER")
    assert len(m.requests()) == attempts


def test_retry_then_success(spawn, mock):
    m = mock([{"match": "flaky", "times": 2, "status": 429}, {"text": "third time lucky", "chunk": 5}])
    d = ds_daemon(spawn, m, args=["--model-attempts", "3"])
    c = ds_conn(d)
    t0 = time.monotonic()
    resp, events = c.run_prompt("F", "flaky", timeout=8)
    assert result_of(resp) == OK, resp
    assert time.monotonic() - t0 >= 0.14, "no backoff between attempts (50 ms, then 100 ms)"
    check_turn(events, turn=0)
    assert "".join(text_deltas(events)) == "third time lucky"  # streamed once, not per attempt
    assert len(of_type(events, "step/start")) == 1
    reqs = m.requests()
    assert len(reqs) == 3 and all(r["body"] == reqs[0]["body"] for r in reqs)


def test_finish_length_is_max_tokens(spawn, mock):
    m = mock([{"match": "long", "times": 1, "text": "partial", "finish": "length"}, {"text": "short"}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    resp, events = c.run_prompt("L", "write something long")
    assert result_of(resp) == {"status": "error", "reason": {"kind": "max-tokens"}}
    check_turn(events, turn=0)
    assert events[-1]["data"]["reason"] == {"kind": "max-tokens"}
    assert "".join(text_deltas(events)) == "partial"
    assert chunks(events)[-1] == {"type": "finish", "reason": "length"}
    assert final_text(events) == "partial"
    resp, events = c.run_prompt("L", "now short")
    assert result_of(resp) == OK
    assert final_text(events) == "short"


def test_cancel_mid_stream(spawn, mock):
    text = "".join(chr(ord("a") + i % 26) for i in range(80))  # 40 pieces x 150 ms = 6 s
    m = mock([{"text": text, "chunk": 2, "delay_ms": 150}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    start = len(c.frames)
    rid = c.prompt("C", "stream slowly")
    assert len(m.wait_requests(1, timeout=5)) == 1, "the daemon never called the model"
    time.sleep(0.6)  # a few pieces are out
    t_cancel = time.monotonic()
    cid = c.request("session/cancel", {"sessionId": "C"})
    assert c.response(cid, timeout=3) == {"jsonrpc": "2.0", "id": cid, "result": {"cancelled": True}}
    idx, resp = c.response_index(rid, timeout=3)
    assert time.monotonic() - t_cancel < 1.5, "the cancelled turn did not settle promptly"
    assert result_of(resp) == {"status": "aborted", "reason": CANCELLED}
    events = c.session_events("C", idx, start)
    check_turn(events, turn=0)
    assert events[-1]["data"]["reason"] == CANCELLED
    got = "".join(text_deltas(events))
    assert text.startswith(got) and len(got) < len(text), got
    # healthy afterwards
    m.set_script([{"text": "after cancel"}])
    resp, events = c.run_prompt("C", "again")
    assert result_of(resp) == OK
    check_turn(events, turn=1)
    assert final_text(events) == "after cancel"


# ---------------------------------------------------------------------------
# history, restart, initialize parameters


def test_history_second_prompt(spawn, mock):
    m = mock([{"match": "first question", "times": 1, "reasoning": "hmm", "text": "first answer"},
              {"text": "second answer"}])
    d = ds_daemon(spawn, m, args=["--system-prompt", "You are harness test bot."])
    c = ds_conn(d)
    resp, _ = c.run_prompt("H", "first question")
    assert result_of(resp) == OK
    resp, events = c.run_prompt("H", "second question")
    assert result_of(resp) == OK
    check_turn(events, turn=1)
    assert events[0]["seq"] > 0
    bodies = m.bodies()
    assert len(bodies) == 2
    system = bodies[0]["messages"][0]
    assert system["role"] == "system" and "\n\nYou are harness test bot.\n\n# Tools\n\n## " in system["content"], system
    assert history(bodies[0])[1:] == [("user", "first question")]
    assert history(bodies[1])[1:] == [("user", "first question"), ("assistant", "first answer"),
                                      ("user", "second question")], history(bodies[1])
    check_request_shape(bodies[1])


def test_history_rebuilt_after_restart(spawn, mock, tmp_path):
    root = tmp_path / "sessions"
    script = [{"match": "first question", "times": 1, "text": "first answer"}, *TOOL_SCRIPT,
              {"text": "later answer"}]
    m = mock(script)
    d1 = ds_daemon(spawn, m, session_root=root, args=["--store", "jsonl"])
    c1 = ds_conn(d1)
    resp, ev1 = c1.run_prompt("H", "first question")
    assert result_of(resp) == OK
    resp, _ = c1.run_prompt("TC", "please delegate")
    assert result_of(resp) == OK
    assert d1.terminate(5) == 0

    m.reset()
    d2 = ds_daemon(spawn, m, session_root=root, args=["--store", "jsonl"])
    c2 = ds_conn(d2)
    resp, ev2 = c2.run_prompt("H", "second question")
    assert result_of(resp) == OK
    check_turn(ev2, turn=1)
    assert ev2[0]["seq"] == ev1[-1]["seq"] + 1
    resp, _ = c2.run_prompt("TC", "follow up")
    assert result_of(resp) == OK
    bodies = m.bodies()
    assert len(bodies) == 2, [history(b) for b in bodies]
    assert history(bodies[0])[1:] == [("user", "first question"), ("assistant", "first answer"),
                                      ("user", "second question")], history(bodies[0])
    assert history(bodies[1])[1:] == [
        ("user", "please delegate"),
        ("assistant", None, [("call_sub_1", "function", "subagent", DELEGATE_ARGS)]),
        ("tool", "call_sub_1", "one two three"),
        ("assistant", "the child counted"),
        ("user", "follow up"),
    ], history(bodies[1])
    for b in bodies:
        check_request_shape(b)


def test_model_and_max_tokens_from_initialize(spawn, mock):
    m = mock([{"text": "ok"}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d, model="deepseek-reasoner", maxTokens=321)
    resp, events = c.run_prompt("M", "hi")
    assert result_of(resp) == OK
    assert of_type(events, "assistant/message")[0]["data"]["provenance"] == \
        {"provider": "deepseek", "model": "deepseek-reasoner"}
    body = m.bodies()[-1]
    check_request_shape(body, model="deepseek-reasoner")
    assert body.get("max_tokens") == 321, body

    c2 = ds_conn(d)  # defaults
    resp, events = c2.run_prompt("M2", "hi")
    assert result_of(resp) == OK
    body = m.bodies()[-1]
    check_request_shape(body, model="deepseek-chat")
    assert of_type(events, "assistant/message")[0]["data"]["provenance"]["model"] == "deepseek-chat"


def test_model_settings_and_reasoning_passback(spawn, mock, tmp_path):
    """initialize's model settings reach the body as DeepSeek names them; a
    tool-calling step's reasoning goes back as reasoning_content, other
    steps' reasoning does not; usage counts cache reads apart."""
    args = json.dumps({"pattern": "x"})
    m = mock([{"match": "look", "times": 1, "reasoning": "I should grep first.",
               "tool_calls": [{"id": "call_g", "name": "grep", "arguments": args}],
               "usage": {"prompt_tokens": 100, "prompt_cache_hit_tokens": 60}},
              {"match": "look", "reasoning": "found nothing", "text": "nothing there"},
              {"text": "second"}])
    d = ds_daemon(spawn, m, args=["--workspace-root", str(tmp_path / "ws")])
    c = ds_conn(d, thinking="enabled", reasoningEffort="high", temperature=0.25, stop=["END", "STOP"], maxSteps=5)
    resp, events = c.run_prompt("S", "look for x")
    assert result_of(resp) == OK, resp
    resp, _ = c.run_prompt("S", "and then?")
    assert result_of(resp) == OK, resp
    bodies = m.bodies()
    assert len(bodies) == 3
    for b in bodies:
        assert b["thinking"] == {"type": "enabled"} and b["reasoning_effort"] == "high", b
        assert b["temperature"] == 0.25 and b["stop"] == ["END", "STOP"], b
    calls = [msg for msg in bodies[1]["messages"] if msg.get("tool_calls")]
    assert calls and calls[0]["reasoning_content"] == "I should grep first.", calls
    plain = [msg for msg in bodies[2]["messages"] if msg["role"] == "assistant" and not msg.get("tool_calls")]
    assert plain and all("reasoning_content" not in msg for msg in plain), plain
    usage = of_type(events, "assistant/message")[0]["data"]["usage"]
    assert usage["inputTokens"] == 40 and usage["cacheReadTokens"] == 60, usage

    # Unset settings are not sent: the endpoint's defaults apply.
    c2 = ds_conn(d)
    assert result_of(c2.run_prompt("T", "hi")[0]) == OK
    body = m.bodies()[-1]
    for key in ("thinking", "reasoning_effort", "temperature", "stop"):
        assert key not in body, body

    for bad in ({"thinking": "on"}, {"reasoningEffort": "low"}, {"temperature": 3}, {"temperature": "hot"},
                {"stop": [""]}, {"stop": ["a"] * 17}, {"maxSteps": 0}, {"maxSteps": 1001}):
        c3 = d.connect()
        err = error_of(c3.response(c3.request("initialize", {"provider": "deepseek", **bad})))
        assert err["code"] == INVALID_PARAMS and next(iter(bad)) in err["message"], (bad, err)


def test_max_steps_from_initialize_and_the_failing_step(spawn, mock, tmp_path):
    args = json.dumps({"pattern": "x"})
    m = mock([{"tool_calls": [{"id": "call_g", "name": "grep", "arguments": args}]}])
    d = ds_daemon(spawn, m, args=["--workspace-root", str(tmp_path / "ws")])
    c = ds_conn(d, maxSteps=2)
    resp, _ = c.run_prompt("S", "loop")
    reason = result_of(resp)["reason"]
    assert reason["code"] == "MAX_STEPS" and "2 model steps" in reason["message"], reason


def test_initialize_without_api_key(spawn, mock):
    m = mock([{"text": "never"}])
    d = ds_daemon(spawn, m, key=None)
    c = d.connect()
    rid = c.request("initialize", {"provider": "deepseek"})
    err = error_of(c.response(rid))
    assert err["code"] == INVALID_PARAMS, err
    assert "DEEPSEEK_API_KEY" in err["message"], err
    # the daemon stays usable with the default provider
    c2 = d.connect()
    c2.initialize()
    resp, _ = c2.run_prompt("S", "hello")
    assert result_of(resp) == OK
    assert m.requests() == []


def test_authorization_and_key_secrecy(spawn, mock, tmp_path):
    m = mock([{"match": "rate", "times": 2, "status": 429}, {"text": "authorized"}], require_key=KEY)
    d = ds_daemon(spawn, m, args=["--log-level", "trace", "--model-attempts", "3"])
    c = ds_conn(d)
    resp, events = c.run_prompt("K", "hello")
    assert result_of(resp) == OK, f"the mock (requiring 'Bearer {KEY}') rejected the daemon: {resp}"
    assert final_text(events) == "authorized"
    resp, _ = c.run_prompt("K2", "rate limited once or twice")
    assert result_of(resp) == OK, resp
    reqs = m.requests()
    assert len(reqs) == 4
    assert all(r["headers"].get("Authorization") == "Bearer s..." for r in reqs), [r["headers"] for r in reqs]

    wrong = "sk-dsh-wrong-Z3vB8nM1qW6e"
    d2 = ds_daemon(spawn, m, key=wrong, args=["--log-level", "trace"], session_root=tmp_path / "sessions2")
    c2 = ds_conn(d2)
    resp, events = c2.run_prompt("W", "hello")
    assert_error_turn(resp, events, "AUTH")

    for dd in (d, d2):
        dd.terminate(5)
        err = dd.stderr_path.read_bytes()
        for secret in (KEY, wrong):
            assert secret.encode() not in err, f"API key found in harnessd stderr:\n{err.decode(errors='replace')}"
    for p in [*(tmp_path / "sessions").rglob("*"), *(tmp_path / "sessions2").rglob("*")]:
        if p.is_file():
            data = p.read_bytes()
            assert KEY.encode() not in data and wrong.encode() not in data, f"API key in {p}"


# ---------------------------------------------------------------------------
# hostile endpoint: input limits


def strict_json(raw: bytes):
    """json.loads that refuses Infinity/NaN, which Python accepts but JSON does not."""
    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")
    return json.loads(raw.decode("utf-8"), parse_constant=refuse)


def assert_strict_frames(c) -> None:
    for f in c.frames:
        strict_json(f.raw)


def assert_strict_log(path: Path) -> None:
    for n, line in enumerate(path.read_bytes().split(b"\n")[:-1]):
        try:
            strict_json(line)
        except ValueError as exc:
            raise AssertionError(f"{path}: line {n} is not strict JSON ({exc}): {line[:300]!r}")


SANITIZED = bool(os.environ.get("HARNESSD_SANITIZE"))


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def restart_and_prompt(spawn, m: Mock, d, root: Path, session: str, turn: int) -> None:
    """The session log written so far loads in a fresh daemon, which can continue it."""
    assert d.terminate(5) == 0
    m.set_script([{"text": "after restart"}])
    d2 = ds_daemon(spawn, m, session_root=root, args=["--store", "jsonl"])
    c2 = ds_conn(d2)
    resp, events = c2.run_prompt(session, "are you there?")
    assert result_of(resp) == OK, f"the restarted daemon could not continue {session}: {resp}{d2.diag()}"
    check_turn(events, turn=turn)
    assert final_text(events) == "after restart"
    assert_strict_frames(c2)


def test_endless_sse_line_is_stream_too_large(spawn, mock):
    """A `data:` line of 48 MiB that never ends: the call stops at the 1 MiB line limit
    instead of buffering it, and the connection stays usable."""
    m = mock([{"match": "endless", "times": 1, "text": "never", "endless_line": 48 << 20, "hang_ms": 20000},
              {"text": "still here"}])
    d = ds_daemon(spawn, m, args=["--model-idle-timeout-ms", "5000", "--model-attempts", "3"])
    c = ds_conn(d)
    resp, _ = c.run_prompt("warm", "warm up")
    assert result_of(resp) == OK
    before = peak_rss_kib(d.proc.pid)
    t0 = time.monotonic()
    resp, events = c.run_prompt("big", "endless line please", timeout=15)
    elapsed = time.monotonic() - t0
    reason = assert_error_turn(resp, events, "STREAM_TOO_LARGE")
    assert "1048576" in reason["message"], reason
    assert elapsed < 4, f"the oversized line was noticed only after {elapsed:.2f}s"
    assert len(m.requests()) == 2, "a STREAM_TOO_LARGE call must not be retried"
    grown = peak_rss_kib(d.proc.pid) - before
    # A sanitizer's shadow memory and quarantine say nothing of the daemon's bound.
    if not SANITIZED:
        assert grown < 24 * 1024, f"peak RSS grew by {grown} KiB while the endpoint sent a 48 MiB line"

    resp, events = c.run_prompt("big", "again")
    assert result_of(resp) == OK, resp
    assert final_text(events) == "still here"
    assert_strict_frames(c)


def test_event_of_many_lines_is_stream_too_large(spawn, mock):
    """5000 `data:` lines of 1 KiB without the blank line that ends an event: over the
    4 MiB event limit although every line is short."""
    line = "data: " + "y" * 1024 + "\n"
    m = mock([{"match": "many", "times": 1, "raw": [line * 100] * 50}, {"text": "fine"}])
    d = ds_daemon(spawn, m, args=["--model-attempts", "3"])
    c = ds_conn(d)
    resp, events = c.run_prompt("ev", "many lines", timeout=15)
    reason = assert_error_turn(resp, events, "STREAM_TOO_LARGE")
    assert "4194304" in reason["message"], reason
    assert len(m.requests()) == 1
    resp, events = c.run_prompt("ev", "now fine")
    assert result_of(resp) == OK, resp
    assert final_text(events) == "fine"


def test_huge_error_body_is_read_only_in_part(spawn, mock):
    """A 400 answer with a 16 MiB body: the turn fails at once with a short message."""
    m = mock([{"match": "big error", "times": 1, "status": 400, "body": "E" * (16 << 20)}, {"text": "fine"}])
    d = ds_daemon(spawn, m)
    c = ds_conn(d)
    resp, _ = c.run_prompt("warm", "warm up")
    assert result_of(resp) == OK
    before = peak_rss_kib(d.proc.pid)
    resp, events = c.run_prompt("E", "big error please", timeout=15)
    reason = assert_error_turn(resp, events, "HTTP_400")
    assert len(reason["message"]) < 1024, len(reason["message"])
    grown = peak_rss_kib(d.proc.pid) - before
    if not SANITIZED:
        assert grown < 8 * 1024, f"peak RSS grew by {grown} KiB for a 16 MiB error body"
    assert_strict_frames(c)


HUGE_USAGE = '{"prompt_tokens":1e400,"completion_tokens":3,"total_tokens":-1e400,' \
             '"completion_tokens_details":{"reasoning_tokens":1E+999}}'


@pytest.mark.parametrize("in_final", [False, True], ids=["usage-chunk", "usage-in-final"])
def test_huge_usage_number_never_written_as_infinity(spawn, mock, tmp_path, in_final):
    root = tmp_path / "sessions"
    m = mock([{"text": "counted", "usage_json": HUGE_USAGE, "usage_in_final": in_final}])
    d = ds_daemon(spawn, m, session_root=root, args=["--store", "jsonl"])
    c = ds_conn(d)
    resp, events = c.run_prompt("U", "count tokens")
    assert result_of(resp) == OK, resp
    check_turn(events, turn=0)
    usage = [x for x in chunks(events) if x["type"] == "usage"]
    assert usage == [{"type": "usage", "usage": {"outputTokens": 3}}], usage
    md = of_type(events, "assistant/message")[0]["data"]
    assert "inputTokens" not in (md.get("usage") or {}), md
    assert_strict_frames(c)
    assert_strict_log(d.log_path("U"))
    _, logged = read_log(d.log_path("U"))
    assert logged == events
    restart_and_prompt(spawn, m, d, root, "U", turn=1)


# Arrays around prompt_tokens. The chunk and its usage object are 2 levels, so 30 arrays
# reach the input limit (32) and 31 exceed it.
@pytest.mark.parametrize("depth,code", [(29, None), (30, None), (31, "BAD_STREAM"), (200, "BAD_STREAM")])
def test_deeply_nested_usage(spawn, mock, tmp_path, depth, code):
    root = tmp_path / "sessions"
    m = mock([{"text": "nested", "usage_depth": depth}])
    d = ds_daemon(spawn, m, session_root=root, args=["--store", "jsonl"])
    c = ds_conn(d)
    resp, events = c.run_prompt("N", "nested usage")
    if code is None:
        assert result_of(resp) == OK, resp
        check_turn(events, turn=0)
        usage = [x["usage"] for x in chunks(events) if x["type"] == "usage"]
        assert usage and all("inputTokens" not in u for u in usage), usage
        assert all(isinstance(u.get("outputTokens"), int) for u in usage), usage
        assert final_text(events) == "nested"
    else:
        reason = assert_error_turn(resp, events, code)
        assert "nested deeper than 32" in reason["message"], reason
    assert max(len(f.raw) for f in c.frames) < 4096
    assert_strict_log(d.log_path("N"))
    restart_and_prompt(spawn, m, d, root, "N", turn=1)
