"""Native TLS: wss:// (WebSocket and HTTP) and tls:// (NDJSON) listeners with
--tls-cert/--tls-key, a throwaway CA made by the test with the openssl CLI,
certificate reload on SIGHUP, and refusals that leave the daemon fine."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from harnessd_helpers import (Conn, FrameReader, harnessd_bin, is_notification, make_ca, make_server_cert, result_of,
                              socket_io)
from ws_client import ws_conn

HOST = "127.0.0.1"


@pytest.fixture
def pki(tmp_path):
    d = tmp_path / "pki"
    d.mkdir()
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    make_server_cert(d, "ca", "server")
    make_server_cert(d, "ca", "renewed")
    return d


def client_context(pki: Path, ca: str = "ca") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / f"{ca}.pem"))
    return ctx


@pytest.fixture
def tls_daemon(spawn, pki, tmp_path):
    # The certificate files are copies the SIGHUP test may replace.
    (tmp_path / "cert.pem").write_bytes((pki / "server.pem").read_bytes())
    (tmp_path / "key.pem").write_bytes((pki / "server.key").read_bytes())
    d = spawn(args=["--listen", "wss://127.0.0.1:0", "--listen", "tls://127.0.0.1:0",
                    "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")])
    d.wss_port = int(next(u for u in d.listen if u.startswith("wss://")).rsplit(":", 1)[1])
    d.tls_port = int(next(u for u in d.listen if u.startswith("tls://")).rsplit(":", 1)[1])
    d.pki = pki
    d.cert_dir = tmp_path
    return d


def tls_conn(d, ctx: ssl.SSLContext, name: str = "tls") -> Conn:
    """An NDJSON connection over tls://, as a harnessd_helpers.Conn."""
    raw = socket.create_connection((HOST, d.tls_port), timeout=5)
    sock = ctx.wrap_socket(raw, server_hostname=HOST)
    sock.settimeout(0.5)
    read, write, close, stop = socket_io(sock, tls=True)
    reader = FrameReader(read, name)
    stop.append(reader)
    conn = Conn(name, reader, write, close, d.diag)
    d.conns.append(conn)
    conn.sock = sock
    return conn


def chunk_text(n: int, size: int) -> str:
    return "".join(chr(ord("a") + i % 26) * size for i in range(n))


def check_streamed_turn(c: Conn, session: str) -> None:
    resp, events = c.run_prompt(session, "@chunks 50 8")
    assert result_of(resp)["status"] == "ok"
    assert [e["seq"] for e in events] == list(range(len(events)))
    deltas = [e["data"]["chunk"]["text"] for e in events
              if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "text-delta"]
    assert "".join(deltas) == chunk_text(50, 8)


def test_ndjson_over_tls_streams_turns_and_cancels(tls_daemon):
    c = tls_conn(tls_daemon, client_context(tls_daemon.pki))
    c.initialize()
    check_streamed_turn(c, "t1")
    rid = c.prompt("t2", "@chunks 1000 8\n@delay 20")
    c.wait_frame(lambda o: is_notification(o, "session.event") and o["params"]["event"]["type"] == "assistant/chunk")
    assert result_of(c.response(c.request("session/cancel", {"sessionId": "t2"}))) == {"cancelled": True}
    assert result_of(c.response(rid))["status"] == "aborted"
    assert c.sock.version() in ("TLSv1.2", "TLSv1.3")


def test_websocket_over_wss_streams_turns_and_follows_sessions(tls_daemon):
    ctx = client_context(tls_daemon.pki)
    a = ws_conn(tls_daemon, tls_daemon.wss_port, tls=ctx)
    a.initialize()
    check_streamed_turn(a, "w1")
    b = ws_conn(tls_daemon, tls_daemon.wss_port, tls=ctx)
    b.initialize()
    rid = b.request("session/subscribe", {"sessionId": "w1", "afterSeq": -1})
    assert result_of(b.response(rid))["lastSeq"] == len(a.session_events("w1")) - 1
    assert b.session_events("w1") == a.session_events("w1")


def test_https_serves_healthz_and_negotiates_http11(tls_daemon):
    ctx = client_context(tls_daemon.pki)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    conn = http.client.HTTPSConnection(HOST, tls_daemon.wss_port, context=ctx, timeout=5)
    conn.request("GET", "/healthz")
    res = conn.getresponse()
    assert res.status == 200 and json.loads(res.read())["status"] == "ok"
    assert conn.sock.selected_alpn_protocol() == "http/1.1"
    # The browser's same-origin check knows the page came over https.
    from ws_client import WSClient
    ws = WSClient.connect(HOST, tls_daemon.wss_port, origin=f"https://{HOST}:{tls_daemon.wss_port}", tls=ctx)
    ws.sock.close()


def test_a_wrong_ca_is_refused_by_the_client(tls_daemon):
    ctx = client_context(tls_daemon.pki, "other-ca")
    for port in (tls_daemon.tls_port, tls_daemon.wss_port):
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5), server_hostname=HOST)
    check_streamed_turn(_initialized(tls_daemon), "after-wrong-ca")


def _initialized(d) -> Conn:
    c = tls_conn(d, client_context(d.pki))
    c.initialize()
    return c


def test_plain_text_on_a_tls_port_is_closed_and_the_daemon_is_fine(tls_daemon):
    for port, hello in ((tls_daemon.tls_port, b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'),
                        (tls_daemon.wss_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")):
        with socket.create_connection((HOST, port), timeout=5) as s:
            s.sendall(hello)
            s.settimeout(5)
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            assert b"jsonrpc" not in data and b"HTTP/1.1 200" not in data
    assert "TLS handshake failed" in tls_daemon.stderr()
    check_streamed_turn(_initialized(tls_daemon), "after-plain")


def peer_cert(port: int, ctx: ssl.SSLContext) -> bytes:
    with ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5), server_hostname=HOST) as s:
        return s.getpeercert(binary_form=True)


def test_sighup_reloads_the_certificate_without_dropping_connections(tls_daemon):
    ctx = client_context(tls_daemon.pki)
    before = peer_cert(tls_daemon.tls_port, ctx)
    open_conn = _initialized(tls_daemon)
    ws = ws_conn(tls_daemon, tls_daemon.wss_port, tls=ctx)
    ws.initialize()

    pki, certs = tls_daemon.pki, tls_daemon.cert_dir
    (certs / "cert.pem").write_bytes((pki / "renewed.pem").read_bytes())
    (certs / "key.pem").write_bytes((pki / "renewed.key").read_bytes())
    tls_daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "reloaded the TLS certificate" not in tls_daemon.stderr():
        assert time.monotonic() < deadline, tls_daemon.stderr()
        time.sleep(0.05)
    after = peer_cert(tls_daemon.tls_port, ctx)
    assert after != before and after == ssl.PEM_cert_to_DER_cert((pki / "renewed.pem").read_text())
    assert peer_cert(tls_daemon.wss_port, ctx) == after
    # Connections accepted before the reload go on.
    check_streamed_turn(open_conn, "kept-tls")
    check_streamed_turn(ws, "kept-wss")

    # A broken pair at SIGHUP: logged, and the last good one stays.
    (certs / "key.pem").write_text("not a key\n")
    tls_daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "TLS certificate not reloaded" not in tls_daemon.stderr():
        assert time.monotonic() < deadline, tls_daemon.stderr()
        time.sleep(0.05)
    assert peer_cert(tls_daemon.tls_port, ctx) == after
    assert tls_daemon.proc.poll() is None


@pytest.mark.parametrize("problem", ["missing", "garbage", "mismatch", "no-key"])
def test_a_bad_certificate_at_start_is_a_clear_error_with_exit_code_2(pki, tmp_path, problem):
    cert, key = pki / "server.pem", pki / "server.key"
    args = ["--listen", "wss://127.0.0.1:0", "--session-root", str(tmp_path / "s")]
    if problem == "missing":
        args += ["--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", str(key)]
        expected = "--tls-cert"
    elif problem == "garbage":
        (tmp_path / "bad.pem").write_text("garbage\n")
        args += ["--tls-cert", str(tmp_path / "bad.pem"), "--tls-key", str(key)]
        expected = "--tls-cert"
    elif problem == "mismatch":
        args += ["--tls-cert", str(cert), "--tls-key", str(pki / "renewed.key")]
        expected = "does not match"
    else:
        args += []
        expected = "need --tls-cert and --tls-key"
    proc = subprocess.run([harnessd_bin(), *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr, proc.stderr
