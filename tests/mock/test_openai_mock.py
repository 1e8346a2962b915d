"""Self-test of tests/mock/openai_mock.py: runs it as a subprocess and talks to
it with http.client.  Run: python3 -m pytest -q tests/mock"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

MOCK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_mock.py")

SCRIPT = [
    {"match": "TOOLS", "tool_calls": [
        {"id": "call_1", "name": "subagent",
         "arguments": "{\"description\":\"d\",\"prompt\":\"p\"}"}]},
    {"match": "REASON", "reasoning": "think hard", "text": "answer", "chunk": 4},
    {"match": "ERR429", "status": 429, "body": "{\"error\":{\"message\":\"slow down\"}}",
     "headers": {"Retry-After": "1"}},
    {"match": "ERR500", "status": 500},
    {"match": "CUT", "text": "abcdefghij", "chunk": 2, "close_after": 3},
    {"match": "LENGTH", "finish": "length", "text": "partial"},
    {"match": "FILTER", "finish": "content_filter"},
    {"match": "SPLIT", "text": "h\u00e9llo w\u00f6rld \u2603", "chunk": 3, "split_bytes": True},
    {"match": "SLOW", "text": "abcd", "chunk": 1, "delay_ms": 60, "keepalive": True},
    {"match": "NOUSAGE", "text": "x", "usage": False},
    {"match": "ONCE", "times": 1, "text": "first time only"},
    {"match": "HANG", "text": "abc", "chunk": 1, "hang_after": 2, "hang_ms": 30000},
    {"text": "hello world", "chunk": 3},
    {"text": "second"},
]


def start_mock(tmp_path, script, *extra):
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script))
    ready = tmp_path / "ready.json"
    rec = tmp_path / "rec"
    proc = subprocess.Popen(
        [sys.executable, MOCK, "--port", "0", "--ready-file", str(ready),
         "--script", str(script_file), "--record", str(rec), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while not ready.exists():
        if proc.poll() is not None:
            raise RuntimeError("mock exited: %s" % proc.stderr.read().decode())
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("mock did not become ready")
        time.sleep(0.02)
    info = json.loads(ready.read_text())
    assert info["url"].startswith("http://127.0.0.1:")
    port = int(info["url"].rsplit(":", 1)[1])
    return proc, port, rec


def stop_mock(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("mock did not stop on SIGTERM")
    assert rc == 0, proc.stderr.read().decode()


@pytest.fixture
def mock(tmp_path):
    proc, port, rec = start_mock(tmp_path, SCRIPT)
    yield port, rec
    stop_mock(proc)


def chat_body(user, **kw):
    body = {"model": "deepseek-chat",
            "messages": [{"role": "system", "content": "sys"},
                         {"role": "user", "content": user}],
            "stream": True, "stream_options": {"include_usage": True}}
    body.update(kw)
    return body


def post(conn, path, body, key="sk-test-1234567890", headers=None, chunked=False):
    h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    data = json.dumps(body).encode()
    if chunked:
        pieces = [data[i:i + 7] for i in range(0, len(data), 7)]
        conn.request("POST", path, body=iter(pieces), headers=h, encode_chunked=True)
    else:
        conn.request("POST", path, body=data, headers=h)
    return conn.getresponse()


def parse_sse(raw):
    """Returns (events, comments): events are parsed JSON or the string '[DONE]'."""
    text = raw.decode("utf-8")
    assert text == "" or text.endswith("\n\n"), repr(text[-40:])
    events, comments = [], []
    for block in text.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line)
            elif line.startswith("data: "):
                payload = line[len("data: "):]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
            else:
                assert line == "", repr(line)
    return events, comments


def chat(port, user, **kw):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        resp = post(conn, "/chat/completions", chat_body(user), **kw)
        return resp, resp.read()
    finally:
        conn.close()


def deltas(events, field):
    return [e["choices"][0]["delta"].get(field) for e in events
            if isinstance(e, dict) and e.get("choices")
            and e["choices"][0]["delta"].get(field) is not None]


def test_text_stream(mock):
    port, _ = mock
    resp, raw = chat(port, "just talk")
    assert resp.status == 200
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    events, _ = parse_sse(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    for c in chunks:
        assert c["object"] == "chat.completion.chunk"
        assert c["model"] == "deepseek-chat"
        assert c["id"] == chunks[0]["id"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert deltas(chunks, "content") == ["", "hel", "lo ", "wor", "ld"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
    usage = chunks[-1]
    assert usage["choices"] == []
    u = usage["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0


def test_ordered_then_repeat_last(mock):
    port, _ = mock
    got = []
    for _ in range(4):
        _, raw = chat(port, "plain")
        got.append("".join(deltas(parse_sse(raw)[0], "content")))
    assert got == ["hello world", "second", "second", "second"]


def test_reasoning_stream(mock):
    port, _ = mock
    _, raw = chat(port, "please REASON")
    events, _ = parse_sse(raw)
    assert deltas(events, "reasoning_content") == ["thin", "k ha", "rd"]
    assert "".join(deltas(events, "content")) == "answer"


def test_tool_call_stream(mock):
    port, _ = mock
    resp, raw = chat(port, "use TOOLS now")
    events, _ = parse_sse(raw)
    assert events[-1] == "[DONE]"
    calls = [tc for e in events if isinstance(e, dict) and e.get("choices")
             for tc in e["choices"][0]["delta"].get("tool_calls") or []]
    assert len(calls) >= 3  # header plus several argument pieces
    assert calls[0]["id"] == "call_1" and calls[0]["type"] == "function"
    assert calls[0]["function"]["name"] == "subagent"
    assert all(c["index"] == 0 for c in calls)
    pieces = [c["function"].get("arguments", "") for c in calls]
    assert len([p for p in pieces if p]) > 1
    assert json.loads("".join(pieces)) == {"description": "d", "prompt": "p"}
    finishes = [e["choices"][0]["finish_reason"] for e in events
                if isinstance(e, dict) and e.get("choices")]
    assert finishes[-1] == "tool_calls"


def test_finish_reasons(mock):
    port, _ = mock
    events, _ = parse_sse(chat(port, "LENGTH")[1])
    assert "".join(deltas(events, "content")) == "partial"
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    events, _ = parse_sse(chat(port, "FILTER")[1])
    assert events[-3]["choices"][0]["finish_reason"] == "content_filter"
    events, _ = parse_sse(chat(port, "NOUSAGE")[1])
    assert events[-1] == "[DONE]"
    assert not any("usage" in e for e in events if isinstance(e, dict))
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


def test_http_errors(mock):
    port, _ = mock
    resp, raw = chat(port, "ERR429")
    assert resp.status == 429
    assert resp.getheader("Retry-After") == "1"
    assert json.loads(raw) == {"error": {"message": "slow down"}}
    resp, raw = chat(port, "ERR500")
    assert resp.status == 500
    assert json.loads(raw)["error"]["type"] == "server_error"


def test_close_after(mock):
    port, _ = mock
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    resp = post(conn, "/chat/completions", chat_body("CUT it"))
    assert resp.status == 200
    with pytest.raises(http.client.IncompleteRead) as ei:
        resp.read()
    events, _ = parse_sse(ei.value.partial)
    assert len(events) == 3 and "[DONE]" not in events
    assert deltas(events, "content") == ["", "ab", "cd"]
    conn.close()


def test_split_bytes(mock):
    port, _ = mock
    resp, raw = chat(port, "SPLIT")
    events, _ = parse_sse(raw)
    assert "".join(deltas(events, "content")) == "h\u00e9llo w\u00f6rld \u2603"
    assert events[-1] == "[DONE]"
    # Also read it off the raw socket: the body must arrive as many tiny
    # HTTP chunks, each at most 7 bytes.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = json.dumps(chat_body("SPLIT")).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    sizes = []
    while True:
        line, _, rest = rest.partition(b"\r\n")
        n = int(line, 16)
        sizes.append(n)
        rest = rest[n + 2:]
        if n == 0:
            break
    assert len(sizes) > 50 and max(sizes) <= 7


def test_slow_keepalive(mock):
    port, _ = mock
    t0 = time.monotonic()
    _, raw = chat(port, "SLOW")
    elapsed = time.monotonic() - t0
    events, comments = parse_sse(raw)
    assert "".join(deltas(events, "content")) == "abcd"
    assert ": keep-alive" in comments and len(comments) >= 5
    assert elapsed >= 0.3  # at least 5 gaps of 60 ms


def test_hang_after_client_can_time_out(mock):
    port, _ = mock
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
    resp = post(conn, "/chat/completions", chat_body("HANG"))
    assert resp.status == 200
    with pytest.raises(socket.timeout):
        resp.read()
    conn.close()


def test_match_times(mock):
    port, _ = mock
    first = "".join(deltas(parse_sse(chat(port, "ONCE")[1])[0], "content"))
    second = "".join(deltas(parse_sse(chat(port, "ONCE")[1])[0], "content"))
    assert first == "first time only"
    assert second == "hello world"  # falls through to the ordered list


def test_keepalive_connection_and_chunked_request(mock):
    port, _ = mock
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    resp = post(conn, "/v1/chat/completions", chat_body("one"))
    assert resp.status == 200
    resp.read()
    sock = conn.sock
    assert sock is not None
    resp = post(conn, "/v1/chat/completions", chat_body("two"), chunked=True)
    assert resp.status == 200
    events, _ = parse_sse(resp.read())
    assert conn.sock is sock  # same TCP connection reused
    assert "".join(deltas(events, "content")) == "second"
    conn.request("GET", "/__requests")
    recs = json.loads(conn.getresponse().read())
    assert conn.sock is sock
    assert recs[1]["body"]["messages"][-1]["content"] == "two"
    assert recs[1]["headers"].get("Transfer-Encoding") == "chunked"
    conn.close()


def test_non_streaming_request(mock):
    port, _ = mock
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    resp = post(conn, "/chat/completions", chat_body("TOOLS", stream=False))
    obj = json.loads(resp.read())
    assert obj["object"] == "chat.completion"
    msg = obj["choices"][0]["message"]
    assert msg["tool_calls"][0]["function"]["name"] == "subagent"
    assert obj["choices"][0]["finish_reason"] == "tool_calls"
    conn.close()


def test_recording_and_reset(mock):
    port, rec = mock
    chat(port, "just talk")
    chat(port, "ERR500", key="sk-abcdefghijklmnop")
    lines = (rec / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 2
    r0, r1 = (json.loads(l) for l in lines)
    assert r0["method"] == "POST" and r0["path"] == "/chat/completions"
    assert r0["body"]["stream"] is True
    assert r0["body"]["stream_options"] == {"include_usage": True}
    assert r0["body"]["messages"][-1] == {"role": "user", "content": "just talk"}
    assert r1["headers"]["Authorization"] == "Bearer s..."
    assert "abcdefghijklmnop" not in lines[1]
    assert r0["script_index"] == 12 and r1["script_index"] == 3

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/__requests")
    listed = json.loads(conn.getresponse().read())
    assert [r["body"] for r in listed] == [r0["body"], r1["body"]]
    conn.request("POST", "/__reset", body=b"")
    assert conn.getresponse().read() and True
    conn.request("GET", "/__requests")
    assert json.loads(conn.getresponse().read()) == []
    conn.close()
    # The log file is append-only; reset rewinds the ordered script too.
    assert len((rec / "requests.jsonl").read_text().splitlines()) == 2
    _, raw = chat(port, "again")
    assert "".join(deltas(parse_sse(raw)[0], "content")) == "hello world"


def test_require_key(tmp_path):
    proc, port, rec = start_mock(tmp_path, [{"text": "ok"}], "--require-key", "sk-right")
    try:
        resp, raw = chat(port, "hi", key=None)
        assert resp.status == 401
        assert json.loads(raw)["error"]["code"] == "invalid_api_key"
        resp, raw = chat(port, "hi", key="sk-wrong")
        assert resp.status == 401
        resp, raw = chat(port, "hi", key="sk-right")
        assert resp.status == 200
        assert "".join(deltas(parse_sse(raw)[0], "content")) == "ok"
        recs = [json.loads(l) for l in (rec / "requests.jsonl").read_text().splitlines()]
        assert len(recs) == 3
        assert "Authorization" not in recs[0]["headers"]
        assert recs[2]["headers"]["Authorization"] == "Bearer s..."
    finally:
        stop_mock(proc)


def test_sigterm_during_stream(tmp_path):
    proc, port, _ = start_mock(tmp_path, [{"text": "abc", "chunk": 1, "hang_after": 1}])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    resp = post(conn, "/chat/completions", chat_body("x"))
    assert resp.status == 200
    t0 = time.monotonic()
    stop_mock(proc)  # asserts exit code 0
    assert time.monotonic() - t0 < 5
    conn.close()
