"""The WebSocket + HTTP listener (docs/protocol.md §2, plus the HTTP endpoints and
the listener flags: --allow-origin, --auth-token-file, --max-frame-bytes,
--ws-idle-timeout-ms), tested black-box through ws_client.WSClient."""

from __future__ import annotations

import http.client
import json
import math
import re
import signal
import subprocess
import time

import pytest

from harnessd_helpers import (INVALID_REQUEST, METHODS, SERVER_NAME, SESSION_BUSY, TLS_MODE, UNAUTHORIZED, _die_with_parent,
                              check_turn, chunk_bytes, encode, error_of, final_text, harnessd_bin, is_notification,
                              is_response, make_request, prompt_params, result_of, suite_tls_context, text_deltas,
                              tls_args)
from ws_client import (CLOSE_NORMAL, CLOSE_TOO_BIG, CLOSE_UNSUPPORTED_DATA, OP_BINARY, OP_CLOSE, OP_TEXT,
                       HandshakeRefused, WSClient, WSClosed, accept_key, ws_conn)

OK = {"status": "ok", "reason": {"kind": "completed"}}
ABORTED = {"status": "aborted", "reason": {"kind": "aborted", "reason": "cancelled"}}
HOST = "127.0.0.1"
# The page origin that is same-origin with the listener, and the other scheme.
PAGE_SCHEME, OTHER_SCHEME = ("https", "http") if TLS_MODE else ("http", "https")


# ---------------------------------------------------------------------------
# helpers


def ws_daemon(spawn, *args: str):
    """A daemon with a ws:// listener (the fixture's tcp:// listener stays too)."""
    d = spawn(args=["--listen", "ws://127.0.0.1:0", *args])
    ws = [u for u in d.listen if u.startswith("ws://")]
    assert len(ws) == 1, f"ready file lists no ws:// listener: {d.listen}"
    host, port = ws[0][len("ws://"):].rsplit(":", 1)
    assert host == HOST and int(port) > 0, ws
    d.ws_port = int(port)
    return d


def connect_raw(d, path: str = "/", **kw) -> WSClient:
    return WSClient.connect(HOST, d.ws_port, path, **kw)


def refused(d, path: str = "/", **kw) -> HandshakeRefused:
    """Attempt an upgrade that must be refused; the refusal."""
    try:
        ws = connect_raw(d, path, **kw)
    except HandshakeRefused as exc:
        return exc
    ws.close()
    raise AssertionError(f"upgrade {path!r} {kw} was accepted (101), expected a refusal")


def http_request(port: int, path: str, method: str = "GET", headers: dict | None = None,
                 body: bytes | None = None, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    if TLS_MODE:
        conn = http.client.HTTPSConnection(HOST, port, timeout=timeout, context=suite_tls_context())
    else:
        conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def healthz(d) -> dict:
    status, headers, body = http_request(d.ws_port, "/healthz")
    assert status == 200, (status, body)
    assert headers.get("content-type", "").startswith("application/json"), headers
    return json.loads(body)


def metrics(d) -> "Metrics":
    status, headers, body = http_request(d.ws_port, "/metrics")
    assert status == 200, (status, body[:300])
    assert headers.get("content-type", "").startswith("text/plain"), headers
    return parse_prometheus(body.decode("utf-8"))


def init_params(**kw) -> dict:
    return {"clientInfo": {"name": "ws-test", "version": "1"}, "protocolVersion": 1, **kw}


# -- a tiny Prometheus text-format (0.0.4) parser ----------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})?[ \t]+(\S+)(?:[ \t]+(-?\d+))?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class Metrics:
    def __init__(self):
        self.types: dict[str, str] = {}
        self.samples: dict[tuple[str, frozenset], float] = {}

    def get(self, name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        assert key in self.samples, f"no sample {name}{labels}; have: " + ", ".join(
            sorted(f"{n}{dict(ls)}" for n, ls in self.samples if n == name)) or "none"
        return self.samples[key]

    def family(self, name: str) -> dict[frozenset, float]:
        return {ls: v for (n, ls), v in self.samples.items() if n == name}


def _unescape(v: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}.get(m.group(1), "\\" + m.group(1)), v)


def parse_prometheus(text: str) -> Metrics:
    """Every non-comment line is `name{labels} value [timestamp]` with a float value, and
    every sample belongs to a family declared by a preceding # TYPE line."""
    m = Metrics()
    assert text.endswith("\n"), "exposition does not end with a newline"
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] == "TYPE":
                assert len(parts) == 4 and re.fullmatch(_NAME, parts[2]) and parts[3] in _TYPES, \
                    f"line {n}: bad TYPE line {line!r}"
                assert parts[2] not in m.types, f"line {n}: second TYPE for {parts[2]}"
                m.types[parts[2]] = parts[3]
            elif len(parts) >= 2 and parts[1] == "HELP":
                assert len(parts) >= 3 and re.fullmatch(_NAME, parts[2]), f"line {n}: bad HELP line {line!r}"
            continue
        mt = _SAMPLE.match(line)
        assert mt, f"line {n}: not a `name{{labels}} value` sample: {line!r}"
        name, label_text, value_text = mt.group(1), mt.group(2), mt.group(3)
        try:
            value = float(value_text)
        except ValueError:
            raise AssertionError(f"line {n}: value is not a float: {line!r}") from None
        labels: dict[str, str] = {}
        if label_text:
            pos = 0
            while pos < len(label_text):
                lm = _LABEL.match(label_text, pos)
                assert lm and lm.end() > pos, f"line {n}: bad labels {label_text!r}"
                assert lm.group(1) not in labels, f"line {n}: repeated label {lm.group(1)}"
                labels[lm.group(1)] = _unescape(lm.group(2))
                pos = lm.end()
        family = name
        if name not in m.types:
            for suffix in ("_bucket", "_sum", "_count"):
                base = name[: -len(suffix)]
                if name.endswith(suffix) and m.types.get(base) in ("histogram", "summary"):
                    family = base
                    break
        assert family in m.types, f"line {n}: sample {name} has no preceding # TYPE"
        if m.types[family] == "histogram" and name == family:
            raise AssertionError(f"line {n}: bare sample of histogram {family}")
        key = (name, frozenset(labels.items()))
        assert key not in m.samples, f"line {n}: duplicate sample {line!r}"
        m.samples[key] = value
    for fam, typ in m.types.items():
        if typ == "histogram":
            buckets = sorted(((float(dict(ls)["le"]), v) for ls, v in m.family(fam + "_bucket").items()),
                             key=lambda t: t[0])
            assert buckets and math.isinf(buckets[-1][0]), f"{fam}: no +Inf bucket"
            vals = [v for _, v in buckets]
            assert vals == sorted(vals), f"{fam}: buckets not cumulative: {buckets}"
            assert m.get(fam + "_count") == buckets[-1][1], f"{fam}: _count != +Inf bucket"
            m.get(fam + "_sum")
        if typ == "counter":
            for v in m.family(fam).values():
                assert v >= 0, f"counter {fam} is negative"
    return m


# ---------------------------------------------------------------------------
# ready file, handshake, turns


def test_ready_file_lists_ws_listener(tmp_path):
    """`--listen ws://127.0.0.1:0 --ready-file F` alone: F is {"listen":["ws://127.0.0.1:PORT"]}."""
    ready = tmp_path / "ready.json"
    with open(tmp_path / "stderr", "wb") as err:
        cmd = [harnessd_bin(), "--session-root", str(tmp_path / "s"), "--threads", "2",
               "--listen", "ws://127.0.0.1:0", "--ready-file", str(ready)]
        proc = subprocess.Popen(tls_args(cmd) if TLS_MODE else cmd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                cwd=str(tmp_path), preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 10
        data = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                data = json.loads(ready.read_text())
                break
            except (OSError, ValueError):
                time.sleep(0.01)
        assert data is not None, f"no ready file; rc={proc.poll()} stderr={(tmp_path / 'stderr').read_text()}"
        assert set(data) == {"listen"} and len(data["listen"]) == 1, data
        m = re.fullmatch(r"wss?://127\.0\.0\.1:(\d+)", data["listen"][0])
        assert data["listen"][0].startswith("wss://" if TLS_MODE else "ws://"), data
        assert m and 0 < int(m.group(1)) < 65536, data
        status, _, body = http_request(int(m.group(1)), "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_handshake_and_initialize(spawn):
    d = ws_daemon(spawn)
    c = ws_conn(d, d.ws_port)
    resp = c.ws.response
    assert resp.status == 101
    assert resp.headers["upgrade"].lower() == "websocket"
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"it","version":"1"}}}')
    r = c.next_frame()
    assert r["id"] == 1 and r["jsonrpc"] == "2.0"
    res = result_of(r)
    assert res["serverInfo"]["name"] == SERVER_NAME and res["serverInfo"]["implementation"] == "harnessd"
    assert res["protocolVersion"] == 1
    assert sorted(res["capabilities"]["methods"]) == sorted(METHODS)
    # a second initialize on the same connection
    c.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"initialize"}')
    r2 = c.next_frame()
    assert r2["id"] == 2 and error_of(r2)["code"] == INVALID_REQUEST
    # the connection still serves
    resp, events = c.run_prompt("hs", "hello")
    assert result_of(resp) == OK
    assert final_text(events) == "echo: hello"
    c.assert_no_new_frames(0.05)
    assert not c.ws.binary and not c.ws.multi_frame
    # the accept-key helper matches RFC 6455 §1.3's worked example
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_turn_notifications_precede_response(spawn):
    d = ws_daemon(spawn)
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params())
    start = len(c.frames)
    rid = c.prompt("order", "@chunks 20 8")
    idx, resp = c.response_index(rid)
    assert result_of(resp) == OK
    events = c.session_events("order", idx, start)
    check_turn(events, turn=0)
    assert events[0]["seq"] == 0
    assert text_deltas(events) == chunk_bytes(20, 8)
    assert final_text(events) == "".join(chunk_bytes(20, 8))
    # nothing of the turn arrives after its response
    time.sleep(0.2)
    late = [f.obj for f in c.frames[idx + 1:]]
    assert not late, f"frames after the prompt response: {late[:3]}"
    # one JSON-RPC message per text frame, no binary frames
    assert not c.ws.multi_frame, c.ws.multi_frame[:2]
    assert not c.ws.binary
    for msg in c.ws.messages:
        assert msg.opcode == OP_TEXT and isinstance(json.loads(msg.payload), dict), msg
    # a second turn continues the seq
    resp2, events2 = c.run_prompt("order", "@reply again")
    assert result_of(resp2) == OK
    check_turn(events2, turn=1)
    assert events2[0]["seq"] == events[-1]["seq"] + 1


def test_large_and_fragmented_messages(spawn):
    """64-bit lengths both ways, and a request split over frames with a ping in between."""
    d = ws_daemon(spawn)
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params())
    big = "x" * 70_000
    resp, events = c.run_prompt("big", "@reply " + big)  # > 65535 bytes: 64-bit length, both directions
    assert result_of(resp) == OK
    assert final_text(events) == big
    assert any(len(m.payload) > 65535 for m in c.ws.messages), "no server message needed a 64-bit length"

    mid = "y" * 300  # 16-bit length
    req = json.dumps(make_request("session/prompt", prompt_params("frag", "@reply " + mid), "f1")).encode()
    pieces = [req[:10], req[10:40], req[40:]]
    n_pongs = len(c.ws.pongs)
    c.ws.send_fragmented(OP_TEXT, pieces, between=lambda i: c.ws.ping(b"p%d" % i))
    r = c.response("f1")
    assert result_of(r) == OK
    assert final_text(c.session_events("frag")) == mid
    deadline = time.monotonic() + 2
    while len(c.ws.pongs) < n_pongs + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert c.ws.pongs[n_pongs:] == [b"p0", b"p1"], "pings inside a fragmented message not answered with pongs"


def test_overlap_from_two_connections(spawn):
    d = ws_daemon(spawn)
    a = ws_conn(d, d.ws_port)
    b = ws_conn(d, d.ws_port)
    a.initialize(**init_params())
    b.initialize(**init_params())
    pa = a.prompt("shared", "@delay 100\n@chunks 8 1")
    a.wait_frame(lambda o: is_notification(o, "session.event"), what="a first event")
    pb = b.prompt("shared", "@reply second")
    rb = b.response(pb, timeout=2)
    err = error_of(rb)
    assert err["code"] == SESSION_BUSY, rb
    assert err["message"] == "session already has an active prompt: shared", rb
    assert err.get("data") == {"sessionId": "shared"}, rb
    # the running turn is unaffected and only its starter saw its events
    assert result_of(a.response(pa)) == OK
    assert text_deltas(a.session_events("shared")) == chunk_bytes(8, 1)
    assert not b.session_events("shared")
    # once settled, the session takes a prompt from the other connection
    resp, events = b.run_prompt("shared", "@reply second")
    assert result_of(resp) == OK and final_text(events) == "second"
    check_turn(events, turn=1)


def test_cancel_aborts_turn(spawn):
    d = ws_daemon(spawn)
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params())
    p = c.prompt("cx", "@delay 100\n@chunks 50 1")
    c.wait_frame(lambda o: is_notification(o, "session.event"), what="a first event")
    cid = c.request("session/cancel", {"sessionId": "cx"})
    assert result_of(c.response(cid)) == {"cancelled": True}
    t0 = time.monotonic()
    resp = c.response(p, timeout=3)
    assert result_of(resp) == ABORTED, resp
    assert time.monotonic() - t0 < 2
    events = c.session_events("cx")
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": "cancelled"}
    cid2 = c.request("session/cancel", {"sessionId": "cx"})
    assert result_of(c.response(cid2)) == {"cancelled": False}


# ---------------------------------------------------------------------------
# frame-level refusals


def test_binary_frame_closes_1003(spawn):
    d = ws_daemon(spawn)
    ws = connect_raw(d)
    ws.send_text(json.dumps(make_request("initialize", init_params(), 1)))
    msg = ws.recv_message()
    assert msg.opcode == OP_TEXT and is_response(json.loads(msg.payload), 1)
    ws.send_binary(encode(make_request("session/prompt", prompt_params("b", "hi"), 2)))
    code = ws.wait_close(5)
    assert code == CLOSE_UNSUPPORTED_DATA, f"binary frame: close code {code}, expected 1003"
    assert ws.wait_eof(5), "server did not close TCP after the close handshake"
    assert not any(is_response(json.loads(m.payload), 2) for m in ws.messages if m.opcode == OP_TEXT)
    ws.close()
    # the daemon is fine
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params())


def test_oversized_message_closes_1009(spawn):
    d = ws_daemon(spawn, "--max-frame-bytes", "4096")
    # one 10 KB frame (16-bit length)
    ws = connect_raw(d)
    ws.send_text(json.dumps(make_request("initialize", init_params(), 1)))
    assert is_response(json.loads(ws.recv_message().payload), 1)
    req = json.dumps(make_request("session/prompt", prompt_params("big", "z" * 10_000), 2))
    assert len(req) > 10_000
    ws.send_text(req)
    code = ws.wait_close(5)
    assert code == CLOSE_TOO_BIG, f"10 KB message with --max-frame-bytes 4096: close code {code}, expected 1009"
    assert ws.wait_eof(5)
    ws.close()

    # the same size split into small fragments: the message is still too big
    ws2 = connect_raw(d)
    try:
        ws2.send_fragmented(OP_TEXT, [req[i:i + 1000].encode() for i in range(0, len(req), 1000)])
    except OSError:
        pass  # the server may close as soon as the message crosses the limit
    code2 = ws2.wait_close(5)
    assert code2 == CLOSE_TOO_BIG, f"fragmented 10 KB message: close code {code2}, expected 1009"
    ws2.close()

    # the daemon keeps serving new connections, and a message under the limit passes
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params())
    resp, events = c.run_prompt("small", "@reply " + "s" * 2000)
    assert result_of(resp) == OK and final_text(events) == "s" * 2000
    assert healthz(d)["status"] == "ok"


# ---------------------------------------------------------------------------
# origin and auth


def test_origin_checks(spawn):
    d = ws_daemon(spawn)
    r = refused(d, origin="http://evil.example")
    assert r.status == 403, r
    assert r.body.strip(), "403 without a text body"
    assert r.headers.get("content-type", "").startswith("text/"), r.headers
    r.body.decode("utf-8")
    # same origin (http://HOST, https://HOST over wss; HOST = the Host header) and no Origin are allowed
    same = connect_raw(d, origin=f"{PAGE_SCHEME}://{HOST}:{d.ws_port}")
    same.close()
    none = connect_raw(d)
    none.close()


@pytest.mark.parametrize("origin", ["{other}://{host}:{port}", "{page}://{host}:1", "{page}://{host}",
                                    "{page}://localhost:{port}"])
def test_origin_same_host_other_origin_refused(spawn, origin):
    """Only Origin == http://HOST (https://HOST over wss; HOST = the Host header, port included)
    is same-origin."""
    d = ws_daemon(spawn)
    o = origin.format(page=PAGE_SCHEME, other=OTHER_SCHEME, host=HOST, port=d.ws_port)
    r = refused(d, origin=o)
    assert r.status == 403, r


def test_allow_origin(spawn):
    d = ws_daemon(spawn, "--allow-origin", "https://app.example", "--allow-origin", "http://tool.example:8080")
    for origin in ("https://app.example", "http://tool.example:8080"):
        c = ws_conn(d, d.ws_port, origin=origin)
        c.initialize(**init_params())
    assert refused(d, origin="https://other.example").status == 403
    assert refused(d, origin="https://app.example.evil").status == 403


def test_ws_auth_token(spawn, tmp_path):
    token = "s3cret-ws-token"
    tf = tmp_path / "token"
    tf.write_text(token + "\n")
    d = ws_daemon(spawn, "--auth-token-file", str(tf))
    missing = refused(d)
    assert missing.status == 401, missing
    assert b"missing" in missing.body.lower(), f"401 body does not say missing: {missing.body!r}"
    wrong = refused(d, headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401, wrong
    assert b"wrong" in wrong.body.lower(), f"401 body does not say wrong: {wrong.body!r}"
    wrong_q = refused(d, "/?access_token=nope")
    assert wrong_q.status == 401 and b"wrong" in wrong_q.body.lower(), wrong_q
    # right token via header, then via query parameter: 101 and a working connection
    c1 = ws_conn(d, d.ws_port, headers={"Authorization": f"Bearer {token}"})
    assert c1.ws.response.status == 101
    c1.initialize(**init_params())
    c2 = ws_conn(d, d.ws_port, f"/?access_token={token}")
    assert c2.ws.response.status == 101
    c2.initialize(**init_params())
    resp, events = c2.run_prompt("auth", "@reply in")
    assert result_of(resp) == OK and final_text(events) == "in"


def test_tcp_auth_token(spawn, tmp_path):
    token = "tcp-token-42"
    tf = tmp_path / "token"
    tf.write_text(token)
    d = ws_daemon(spawn, "--auth-token-file", str(tf))
    # initialize without authToken
    c1 = d.connect()
    c1.send(make_request("initialize", init_params(), 1))
    r1 = c1.next_frame()
    assert r1["id"] == 1 and error_of(r1)["code"] == UNAUTHORIZED and error_of(r1)["message"] == "unauthorized", r1
    assert c1.wait_eof(3), "TCP connection not closed after the unauthorized first request"
    # a first request that is not initialize
    c2 = d.connect()
    c2.send(make_request("session/prompt", prompt_params("t", "x"), 2))
    r2 = c2.next_frame()
    assert r2["id"] == 2 and error_of(r2)["code"] == UNAUTHORIZED, r2
    assert c2.wait_eof(3), "TCP connection not closed after an unauthorized first request"
    # wrong token
    c3 = d.connect()
    c3.send(make_request("initialize", init_params(authToken="nope"), 3))
    assert error_of(c3.next_frame())["code"] == UNAUTHORIZED
    assert c3.wait_eof(3)
    # the right token
    c4 = d.connect()
    c4.initialize(**init_params(authToken=token))
    resp, events = c4.run_prompt("t", "@reply ok")
    assert result_of(resp) == OK and final_text(events) == "ok"


# ---------------------------------------------------------------------------
# HTTP endpoints


def test_healthz(spawn):
    d = ws_daemon(spawn)
    h0 = healthz(d)
    assert {"status", "version", "uptimeSeconds", "connections", "sessions", "runningTurns"} <= set(h0), h0
    assert h0["status"] == "ok"
    assert isinstance(h0["version"], str) and h0["version"]
    assert isinstance(h0["uptimeSeconds"], (int, float)) and h0["uptimeSeconds"] >= 0
    for k in ("connections", "sessions", "runningTurns"):
        assert type(h0[k]) is int and h0[k] >= 0, h0
    assert h0["connections"] == 0 and h0["sessions"] == 0 and h0["runningTurns"] == 0, h0

    c = ws_conn(d, d.ws_port)
    info = c.initialize(**init_params())
    assert h0["version"] == info["serverInfo"]["version"]
    p = c.prompt("h", "@delay 100\n@chunks 6 1")
    c.wait_frame(lambda o: is_notification(o, "session.event"), what="a first event")
    h1 = healthz(d)
    assert h1["connections"] == 1 and h1["sessions"] == 1 and h1["runningTurns"] == 1, h1
    assert h1["uptimeSeconds"] >= h0["uptimeSeconds"]
    assert result_of(c.response(p)) == OK
    deadline = time.monotonic() + 2
    while (h2 := healthz(d))["runningTurns"] != 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h2["runningTurns"] == 0 and h2["sessions"] == 1, h2


def test_metrics_format_and_counters(spawn):
    d = ws_daemon(spawn)
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params())
    m0 = metrics(d)
    for name, typ in [("harnessd_requests_total", "counter"), ("harnessd_notifications_total", "counter"),
                      ("harnessd_frames_written_total", "counter"), ("harnessd_writes_total", "counter"),
                      ("harnessd_turns_total", "counter"), ("harnessd_turns_active", "gauge"),
                      ("harnessd_turn_duration_seconds", "histogram"), ("harnessd_connections", "gauge"),
                      ("harnessd_overlap_rejections_total", "counter"), ("harnessd_bytes_sent_total", "counter")]:
        assert m0.types.get(name) == typ, f"{name}: TYPE {m0.types.get(name)!r}, expected {typ}"
    assert m0.get("harnessd_connections", transport="ws") == 1

    resp, events = c.run_prompt("m", "@chunks 5 3")
    assert result_of(resp) == OK
    n_notes = len([f for f in c.frames if is_notification(f.obj)])
    assert n_notes >= len(events) > 0

    # A write is counted when it completes, which can be after the client
    # has read the bytes: wait for the counters rather than race them.
    def moved(m1: Metrics) -> bool:
        return (m1.get("harnessd_turns_active") == 0 and m1.get("harnessd_turn_duration_seconds_count") >= 1
                and m1.get("harnessd_frames_written_total") - m0.get("harnessd_frames_written_total")
                >= len(events) + 1)

    deadline = time.monotonic() + 2
    while not moved(m1 := metrics(d)) and time.monotonic() < deadline:
        time.sleep(0.02)

    def delta(name, **labels):
        return m1.get(name, **labels) - m0.get(name, **labels)

    assert delta("harnessd_requests_total", method="session/prompt", code="0") == 1
    assert delta("harnessd_turns_total") == 1
    assert delta("harnessd_turn_duration_seconds_count") == 1
    assert m1.get("harnessd_turns_active") == 0
    assert delta("harnessd_frames_written_total") >= len(events) + 1
    assert delta("harnessd_writes_total") >= 1
    assert delta("harnessd_bytes_sent_total") > 0
    assert m1.get("harnessd_overlap_rejections_total") == 0
    assert m1.get("harnessd_requests_total", method="initialize", code="0") == 1
    assert delta("harnessd_notifications_total") >= len(events), (
        f"harnessd_notifications_total moved by {delta('harnessd_notifications_total')} over a turn "
        f"that wrote {n_notes} notifications ({len(events)} session.event for the session)")


def test_http_404_405_and_web_ui(spawn):
    d = ws_daemon(spawn)
    for path in ("/nope", "/healthz/x", "/metricsx"):
        status, _, body = http_request(d.ws_port, path)
        assert status == 404, f"GET {path}: {status} {body[:200]!r}"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/healthz", "/metrics", "/"):
            status, _, body = http_request(d.ws_port, path, method=method, body=b"{}")
            assert status == 405, f"{method} {path}: {status} {body[:200]!r}"
    status, headers, body = http_request(d.ws_port, "/")
    assert status == 200
    assert headers.get("content-type", "").startswith("text/html"), headers
    assert b"<script" in body.lower(), body[:300]
    # still serving
    assert healthz(d)["status"] == "ok"


# ---------------------------------------------------------------------------
# lifecycle: SIGTERM and idle pings


@pytest.mark.parametrize("client_closes", [True, False], ids=["client-closes-socket", "client-keeps-socket"])
def test_sigterm_sends_close_1000(spawn, client_closes):
    """SIGTERM with an open, idle WebSocket: close frame 1000, the client echoes it, the server
    closes TCP, and the daemon exits 0 promptly -- whether or not the client then closes its
    own socket. (--shutdown-grace-ms 3000 only bounds the test: an idle connection needs no grace.)"""
    d = ws_daemon(spawn, "--shutdown-grace-ms", "3000")
    ws = connect_raw(d)
    ws.send_text(json.dumps(make_request("initialize", init_params(), 1)))
    assert is_response(json.loads(ws.recv_message().payload), 1)
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    code = ws.wait_close(5)  # echoes the close frame
    assert code == CLOSE_NORMAL, f"SIGTERM: close code {code}, expected 1000 (None = TCP closed without a close frame)"
    assert ws.wait_eof(5), "TCP not closed after the close handshake"
    if client_closes:
        ws.close()
    rc = d.wait_exit(6)
    took = time.monotonic() - t0
    assert rc == 0, f"exit status {rc} after SIGTERM (negative = killed by that signal){d.diag()}"
    assert took < 2.0, (f"daemon took {took:.1f}s to exit after SIGTERM although its only WebSocket "
                        f"had completed the close handshake and the server had closed TCP{d.diag()}")
    ws.close()


def test_idle_ping_and_timeout(spawn):
    d = ws_daemon(spawn, "--ws-idle-timeout-ms", "600")
    mute = connect_raw(d, auto_pong=False)
    live = connect_raw(d, auto_pong=True)
    t0 = time.monotonic()
    mute_closed_at = None
    mute_code = None
    deadline = t0 + 3.0
    while time.monotonic() < deadline:
        if mute_closed_at is None:
            try:
                msg = mute.recv_message(0.05)
                if msg.opcode == OP_CLOSE:
                    mute_code = msg.close_code
                    mute.wait_eof(1)
                    mute_closed_at = time.monotonic()
            except TimeoutError:
                pass
            except WSClosed:
                mute_closed_at = time.monotonic()
        try:
            live.recv_message(0.05)
        except TimeoutError:
            pass
        except WSClosed:
            break
        if mute_closed_at is not None and time.monotonic() - t0 > 2.0:
            break
    assert mute.pings, "the server never pinged an idle client (--ws-idle-timeout-ms 600)"
    assert mute_closed_at is not None, "a client that never answers pings was not disconnected within 3 s"
    assert mute_closed_at - t0 < 2.0, f"silent client disconnected only after {mute_closed_at - t0:.2f}s"
    assert mute_closed_at - t0 >= 0.4, f"silent client disconnected too early ({mute_closed_at - t0:.2f}s)"
    assert mute_code is None or mute_code >= 1000, mute_code
    # the client answering pings is still there and still served
    assert live.pings, "the server never pinged the live client"
    assert live.close_code is None and not live.eof, f"a client answering pings was disconnected ({live.close_code})"
    assert time.monotonic() - t0 >= 1.5
    live.send_text(json.dumps(make_request("initialize", init_params(), 7)))
    msg = live.recv_message(3)
    assert msg.opcode == OP_TEXT and is_response(json.loads(msg.payload), 7)
    assert not any(m.opcode == OP_BINARY for m in live.messages)
    mute.close()
    live.close()
