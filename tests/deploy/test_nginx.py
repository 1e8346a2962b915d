"""deploy/nginx/harnessd.conf in front of a real harnessd: Debian's nginx,
started unprivileged from a throwaway prefix, terminates TLS with a
certificate from a throwaway CA (openssl CLI) and proxies to harnessd's
ws:// listener (the stack is tests/deploy/nginx_stack.py). Checked through
the proxy: /healthz, the web UI, a whole turn over wss:// (Origin allowed by
--allow-origin, the bearer token of --auth-token-file in the upgrade), the
WebSocket ordering guarantees, a foreign Origin refused, an upgrade without
the token (or with another) refused with 401 and one with ?access_token=
accepted, the Host nginx passes on served because of --allow-host and a
name nginx does not serve refused with 421, /metrics only from the allowed
address, the redirect from http, and an access log without the query string
(where the UI puts its token).

Needs nginx and openssl (scripts/install-deps.sh installs both); fails, never
skips, when they are missing."""

from __future__ import annotations

import http.client
import json
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from deploy_common import default, import_integration_helpers
from nginx_stack import CONF, HOST, OTHER_HOST, TIMEOUT, Stack, request, until_response

import_integration_helpers()
from harnessd_helpers import check_turn, chunk_bytes, final_text, text_deltas  # noqa: E402
from ws_client import OP_PONG, OP_TEXT, HandshakeRefused, WSClient  # noqa: E402

def conf_seconds(text: str, directive: str) -> list[int]:
    """Values of `directive Ns;` (s or m suffix, or none)."""
    out = []
    for value, unit in re.findall(rf"^\s*{directive}\s+(\d+)([sm]?)\s*;", text, re.M):
        out.append(int(value) * (60 if unit == "m" else 1))
    return out


@pytest.fixture(scope="module")
def stack():
    root = Path(tempfile.mkdtemp(prefix="harnessd-deploy-"))
    s = None
    try:
        s = Stack(root, token=secrets.token_hex(32))
        yield s
    finally:
        if s is not None:
            s.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_healthz_through_nginx_over_https(stack):
    status, headers, body = stack.https("/healthz")
    assert status == 200, (status, body, stack.diag())
    assert headers["content-type"].startswith("application/json"), headers
    assert json.loads(body)["status"] == "ok", body
    assert headers.get("cache-control") == "no-store", headers   # harnessd's header made it through
    assert "max-age=" in headers.get("strict-transport-security", ""), headers


def test_web_ui_through_nginx(stack):
    status, headers, body = stack.https("/")
    assert status == 200, (status, body[:300])
    assert headers["content-type"].startswith("text/html"), headers
    page = body.decode("utf-8")
    assert "<title>harnessd</title>" in page and "app.js" in page, page[:500]
    status, headers, body = stack.https("/app.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript"), (status, headers)
    assert b"WebSocket" in body, body[:300]
    # the Markdown library is larger than nginx's in-memory proxy buffers: it goes through proxy_temp_path
    status, headers, body = stack.https("/vendor/marked.esm.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript"), (status, headers)
    assert b"Marked" in body and len(body) > 40_000, len(body)


def test_turn_over_wss_through_nginx(stack):
    ws = stack.wss("/", origin=stack.origin)
    try:
        request(ws, 1, "initialize", {"clientInfo": {"name": "deploy-test", "version": "1"}, "protocolVersion": 1})
        before, resp = until_response(ws, 1)
        assert not before and "result" in resp, (before, resp)
        request(ws, 2, "session/prompt", {"sessionId": "via-nginx",
                                         "contentBlocks": [{"type": "text", "text": "@chunks 20 8"}]})
        before, resp = until_response(ws, 2)
        assert resp.get("result") == {"status": "ok", "reason": {"kind": "completed"}}, resp
        assert all(o.get("method") == "session.event" for o in before), before[:3]
        events = [o["params"]["event"] for o in before if o["params"]["sessionId"] == "via-nginx"]
        assert len(events) == len(before)
        check_turn(events, turn=0)   # turn/start .. turn/end, seq contiguous
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert text_deltas(events) == chunk_bytes(20, 8)
        assert final_text(events) == "".join(chunk_bytes(20, 8))
        # a ping through the proxy is answered (the keepalive both ends rely on)
        ws.ping(b"through-nginx")
        _, opcode, payload = ws.recv_frame(TIMEOUT)
        assert (opcode, payload) == (OP_PONG, b"through-nginx"), (opcode, payload)
    finally:
        ws.close()


def _read_until(ws: WSClient, done, timeout: float = 30.0) -> list[dict]:
    """Every message (parsed) up to and including the first for which done(messages) holds."""
    out: list[dict] = []
    deadline = time.monotonic() + timeout
    while not (out and done(out)):
        msg = ws.recv_message(max(0.01, deadline - time.monotonic()))
        assert msg.opcode == OP_TEXT, f"unexpected message {msg}"
        out.append(json.loads(msg.payload))
    return out


def _events(messages: list[dict], session: str) -> list[dict]:
    return [m["params"]["event"] for m in messages
            if m.get("method") == "session.event" and m["params"]["sessionId"] == session]


def _response_index(messages: list[dict], rid: int) -> int:
    return next(i for i, m in enumerate(messages) if m.get("id") == rid and "method" not in m)


def test_ws_ordering_through_nginx(stack):
    """Two turns interleaved on one connection, a follower subscribed mid-turn on
    another, and a cancel: the proxy keeps every ordering guarantee."""
    init = {"clientInfo": {"name": "deploy-test", "version": "1"}, "protocolVersion": 1}
    paced = "@chunks 60 8\n@delay 5"
    a = stack.wss("/", origin=stack.origin)
    b = stack.wss("/", origin=stack.origin)
    try:
        request(a, 1, "initialize", init)
        request(b, 1, "initialize", init)
        until_response(a, 1)
        until_response(b, 1)
        for rid, session in ((2, "order-1"), (3, "order-2")):
            request(a, rid, "session/prompt", {"sessionId": session, "contentBlocks": [{"type": "text", "text": paced}]})
        seen_a = _read_until(a, lambda ms: len(_events(ms, "order-1")) >= 5)
        request(b, 2, "session/subscribe", {"sessionId": "order-1", "afterSeq": -1})
        seen_b = _read_until(b, lambda ms: any(e["type"] == "turn/end" for e in _events(ms, "order-1")))
        seen_a += _read_until(a, lambda ms: sum(m.get("id") in (2, 3) and "method" not in m for m in ms) == 2)
        for rid, session in ((2, "order-1"), (3, "order-2")):
            events = _events(seen_a, session)
            check_turn(events, turn=0)
            assert [e["seq"] for e in events] == list(range(len(events))), session
            assert "".join(text_deltas(events)) == "".join(chunk_bytes(60, 8)), session
            # the answer follows its own turn's last event
            end = next(i for i, m in enumerate(seen_a) if m.get("method") == "session.event"
                       and m["params"]["sessionId"] == session and m["params"]["event"]["type"] == "turn/end")
            assert _response_index(seen_a, rid) > end, session
            assert seen_a[_response_index(seen_a, rid)]["result"]["status"] == "ok", session
        # the follower, subscribed mid-turn, saw the whole turn: replay, then live, no gap, no duplicate
        assert _events(seen_b, "order-1") == _events(seen_a, "order-1")
        # a cancel through the proxy aborts the running turn at once
        request(a, 4, "session/prompt", {"sessionId": "order-1",
                                        "contentBlocks": [{"type": "text", "text": "@chunks 2000 8\n@delay 5"}]})
        _read_until(a, lambda ms: len(_events(ms, "order-1")) >= 3)
        started = time.monotonic()
        request(a, 5, "session/cancel", {"sessionId": "order-1"})
        rest = _read_until(a, lambda ms: any(m.get("id") == 4 and "method" not in m for m in ms), timeout=10)
        assert time.monotonic() - started < 2.0
        assert rest[_response_index(rest, 4)]["result"]["status"] == "aborted", rest[-3:]
    finally:
        a.close()
        b.close()


def test_foreign_origin_refused_through_nginx(stack):
    with pytest.raises(HandshakeRefused) as refused:
        stack.wss("/", origin="https://evil.example").close()
    assert refused.value.status == 403, refused.value
    assert b"--allow-origin" in refused.value.body, refused.value.body
    # the https:// form of the proxy's own host is not same-origin for harnessd:
    # it is allowed only because it is listed (the comment in harnessd.conf)
    with pytest.raises(HandshakeRefused) as refused:
        stack.wss("/", origin="https://localhost").close()
    assert refused.value.status == 403, refused.value


def test_metrics_only_from_the_allowed_network(stack):
    status, headers, body = stack.https("/metrics")
    assert status == 200, (status, body[:300])
    assert b"harnessd_uptime_seconds" in body, body[:300]
    status, _, body = stack.https("/metrics", source=OTHER_HOST)
    assert status == 403, (status, body[:300])
    # the rest stays public for that client
    status, _, _ = stack.https("/healthz", source=OTHER_HOST)
    assert status == 200


def test_plain_http_redirects_to_https(stack):
    conn = http.client.HTTPConnection(HOST, stack.http_port, timeout=TIMEOUT)
    try:
        conn.request("GET", "/healthz", headers={"Host": "localhost"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 301, resp.status
        assert resp.getheader("Location") == "https://localhost/healthz", resp.getheaders()
    finally:
        conn.close()


def test_token_through_nginx(stack):
    """nginx passes the upgrade's Authorization header and query string to
    harnessd, which checks the token."""
    for token in (None, "not-the-token"):
        with pytest.raises(HandshakeRefused) as refused:
            stack.wss("/", origin=stack.origin, token=token).close()
        assert refused.value.status == 401, refused.value
    # the web UI's form: ?access_token= on the WebSocket URL
    ws = stack.wss(f"/?access_token={stack.token}", origin=stack.origin, token=None)
    try:
        request(ws, 1, "initialize", {"clientInfo": {"name": "deploy-test", "version": "1"}, "protocolVersion": 1})
        assert "result" in until_response(ws, 1)[1]
    finally:
        ws.close()


def test_host_check_through_nginx(stack):
    """nginx passes the client's Host on ($host): the name it serves is
    allowed by --allow-host; any other name that reaches it (DNS rebinding)
    gets 421 from harnessd, on every path."""
    status, _, body = stack.https("/healthz", host=f"localhost:{stack.https_port}")
    assert status == 200, (status, body)
    for path in ("/healthz", "/", "/metrics"):
        status, _, body = stack.https(path, host=f"rebound.example:{stack.https_port}")
        assert status == 421, (path, status, body[:200])
    assert re.search(r"^\s*proxy_set_header\s+Host\s+\$host\s*;", CONF.read_text(), re.M), \
        f"{CONF}: nginx should pass the client's Host on (proxy_set_header Host $host)"


def test_access_log_leaves_out_the_query_string(stack):
    ws = stack.wss(f"/?access_token={stack.token}", origin=stack.origin, token=None)
    ws.close()
    stack.https(f"/healthz?access_token={stack.token}")
    deadline = time.monotonic() + TIMEOUT
    log = ""
    while time.monotonic() < deadline:
        log = stack.access_log.read_text() if stack.access_log.exists() else ""
        if '"GET / HTTP/1.1" 101' in log and '"GET /healthz HTTP/1.1" 200' in log:
            break
        time.sleep(0.05)
    assert '"GET / HTTP/1.1" 101' in log and '"GET /healthz HTTP/1.1" 200' in log, log[-2000:]
    assert stack.token not in log, log[-2000:]


def test_proxy_timeouts_outlast_the_websocket_idle_timeout():
    """nginx must not cut a WebSocket that harnessd still keeps alive."""
    text = re.sub(r"#.*", "", CONF.read_text())
    idle_s = default("ws-idle-timeout-ms") / 1000
    for directive in ("proxy_read_timeout", "proxy_send_timeout", "send_timeout"):
        values = conf_seconds(text, directive)
        assert values, f"{CONF} sets no {directive}"
        # the first is the server-wide one; per-location ones (short, for /healthz) follow
        assert values[0] > idle_s, f"{directive} {values[0]}s <= --ws-idle-timeout-ms {idle_s}s"
