"""deploy/nginx/harnessd.conf in front of a real harnessd: Debian's nginx,
started unprivileged from a throwaway prefix, terminates TLS with a
certificate from a throwaway CA (openssl CLI) and proxies to harnessd's
ws:// listener. Checked through the proxy: /healthz, the web UI, a whole
turn over wss:// (Origin allowed by --allow-origin), a foreign Origin
refused, /metrics only from the allowed address, the redirect from http,
and an access log without the query string (where the UI puts its token).

Needs nginx and openssl (scripts/install-deps.sh installs both); fails, never
skips, when they are missing."""

from __future__ import annotations

import base64
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from deploy_common import DEPLOY, default, harnessd_bin, import_integration_helpers, make_certificates

import_integration_helpers()
from harnessd_helpers import _die_with_parent, check_turn, chunk_bytes, final_text, text_deltas  # noqa: E402
from ws_client import OP_PONG, OP_TEXT, HandshakeRefused, WSClient, WSClosed, accept_key, parse_http_head  # noqa: E402

CONF = DEPLOY / "nginx" / "harnessd.conf"
PLACEHOLDERS = {"SERVER_NAME", "HTTPS_PORT", "HTTP_PORT", "TLS_CERT", "TLS_KEY", "UPSTREAM", "METRICS_ALLOW", "LOG_DIR"}
HOST = "127.0.0.1"
OTHER_HOST = "127.0.0.2"   # also loopback on Linux: a client outside the /metrics allow list
TIMEOUT = 10.0


def tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if path is None:
        pytest.fail(f"{name} is not installed (scripts/install-deps.sh installs it)", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def render(values: dict[str, str]) -> str:
    text = CONF.read_text()
    found = set(re.findall(r"@([A-Z_]+)@", text))
    assert found == PLACEHOLDERS, f"placeholders of {CONF}: {sorted(found)}, expected {sorted(PLACEHOLDERS)}"
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    return text


def conf_seconds(text: str, directive: str) -> list[int]:
    """Values of `directive Ns;` (s or m suffix, or none)."""
    out = []
    for value, unit in re.findall(rf"^\s*{directive}\s+(\d+)([sm]?)\s*;", text, re.M):
        out.append(int(value) * (60 if unit == "m" else 1))
    return out


class Stack:
    """harnessd + nginx; everything under one temporary directory."""

    def __init__(self, root: Path):
        self.root = root
        self.https_port = free_port()
        self.http_port = free_port()
        self.origin = f"https://localhost:{self.https_port}"
        self.procs: list[subprocess.Popen] = []

        # harnessd, plain ws:// on a free port; the page origin behind the proxy is allowed
        (root / "sessions").mkdir()
        self.ready = root / "ready.json"
        self.harnessd_log = root / "harnessd.stderr"
        self.harnessd = subprocess.Popen(
            [harnessd_bin(), "--listen", f"ws://{HOST}:0", "--ready-file", str(self.ready),
             "--session-root", str(root / "sessions"), "--threads", "2", "--allow-origin", self.origin],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(self.harnessd_log, "wb"),
            cwd=root, preexec_fn=_die_with_parent)
        self.procs.append(self.harnessd)
        self.upstream = self._wait_ready()

        # nginx, from its own prefix, as an unprivileged user
        self.prefix = Path(tempfile.mkdtemp(prefix="harnessd-nginx-"))
        os.chmod(self.prefix, 0o755)
        for sub in ("conf", "logs", "tmp", "certs"):
            (self.prefix / sub).mkdir()
        make_certificates(self.prefix / "certs")
        self.ca = self.prefix / "certs" / "ca.pem"
        site = render({
            "SERVER_NAME": "localhost",
            "HTTPS_PORT": f"{HOST}:{self.https_port}",
            "HTTP_PORT": f"{HOST}:{self.http_port}",
            "TLS_CERT": str(self.prefix / "certs" / "server.pem"),
            "TLS_KEY": str(self.prefix / "certs" / "server.key"),
            "UPSTREAM": self.upstream,
            "METRICS_ALLOW": HOST,
            "LOG_DIR": str(self.prefix / "logs"),
        })
        assert "@" not in re.sub(r"#.*", "", site), "a placeholder was left unreplaced"
        (self.prefix / "conf" / "harnessd.conf").write_text(site)
        tmp = self.prefix / "tmp"
        (self.prefix / "conf" / "nginx.conf").write_text(f"""
worker_processes 1;
error_log {self.prefix}/logs/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {self.prefix}/conf/harnessd.conf;
}}
""")
        self.error_log = self.prefix / "logs" / "error.log"
        self.access_log = self.prefix / "logs" / "harnessd.access.log"
        preexec = _die_with_parent
        if os.geteuid() == 0:
            # Root (CI): run nginx as nobody, owning its prefix, so no privilege is involved.
            nobody = pwd.getpwnam("nobody")
            for path in [self.prefix, *self.prefix.rglob("*")]:
                os.chown(path, nobody.pw_uid, nobody.pw_gid)

            def preexec() -> None:
                _die_with_parent()
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
        self.nginx_cmd = [tool("nginx"), "-p", str(self.prefix), "-e", str(self.error_log),
                          "-c", str(self.prefix / "conf" / "nginx.conf"),
                          "-g", f"daemon off; pid {self.prefix}/nginx.pid;"]
        check = subprocess.run([*self.nginx_cmd, "-t"], capture_output=True, text=True, timeout=30, preexec_fn=preexec)
        assert check.returncode == 0, f"nginx -t refused the rendered configuration:\n{check.stderr}"
        self.nginx = subprocess.Popen(self.nginx_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.STDOUT, preexec_fn=preexec)
        self.procs.append(self.nginx)
        self._wait_port(self.https_port, self.nginx, "nginx")

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.harnessd.poll() is not None:
                raise AssertionError(f"harnessd exited {self.harnessd.returncode}:\n{self.diag()}")
            try:
                urls = json.loads(self.ready.read_text())["listen"]
                return next(u for u in urls if u.startswith("ws://"))[len("ws://"):]
            except (OSError, ValueError, KeyError, StopIteration):
                time.sleep(0.02)
        raise AssertionError(f"harnessd wrote no ready file within {TIMEOUT}s:\n{self.diag()}")

    def _wait_port(self, port: int, proc: subprocess.Popen, name: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}:\n{self.diag()}")
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"{name} is not listening on {port} after {TIMEOUT}s:\n{self.diag()}")

    def diag(self) -> str:
        parts = []
        for name, path in (("harnessd stderr", self.harnessd_log),
                           ("nginx error log", getattr(self, "error_log", None))):
            if path is not None and path.exists():
                parts.append(f"--- {name} ---\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(self.prefix, ignore_errors=True)

    # -- clients ------------------------------------------------------------
    def tls_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def https(self, path: str, method: str = "GET", source: str = HOST) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection("localhost", self.https_port, context=self.tls_context(),
                                           timeout=TIMEOUT, source_address=(source, 0))
        # "localhost" names the certificate; the connection goes to 127.0.0.1
        conn.sock = self.tls_context().wrap_socket(
            socket.create_connection((HOST, self.https_port), TIMEOUT, source_address=(source, 0)),
            server_hostname="localhost")
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def wss(self, path: str = "/", origin: str | None = None) -> "TLSWebSocket":
        return TLSWebSocket.connect(self, path, origin=origin)


class TLSWebSocket(WSClient):
    """ws_client.WSClient over a TLS socket. Its reads wait in select(), which
    cannot see bytes OpenSSL has already decrypted, so this client reads with
    the socket's own timeout instead."""

    @classmethod
    def connect(cls, stack: Stack, path: str = "/", *, origin: str | None = None) -> "TLSWebSocket":
        raw = socket.create_connection((HOST, stack.https_port), timeout=TIMEOUT)
        sock = stack.tls_context().wrap_socket(raw, server_hostname="localhost")
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        lines = [f"GET {path} HTTP/1.1", f"Host: localhost:{stack.https_port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if origin is not None:
            lines.append(f"Origin: {origin}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
        buf = b""
        deadline = time.monotonic() + TIMEOUT
        while b"\r\n\r\n" not in buf:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise AssertionError(f"connection closed during the upgrade: {buf[:300]!r}\n{stack.diag()}")
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        status, reason, headers = parse_http_head(head)
        if status != 101:
            length = int(headers.get("content-length", "0"))
            while len(rest) < length:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                rest += chunk
            sock.close()
            raise HandshakeRefused(status, reason, headers, rest[:length])
        assert headers.get("upgrade", "").lower() == "websocket", headers
        assert headers.get("sec-websocket-accept") == accept_key(key), headers
        return cls(sock, rest)

    def recv_frame(self, timeout: float = 5.0):
        deadline = time.monotonic() + timeout
        while True:
            frame = self._parse_frame()
            if frame is not None:
                return frame
            if self.eof:
                raise WSClosed("EOF")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out reading from the server")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except (socket.timeout, TimeoutError):
                raise TimeoutError("timed out reading from the server") from None
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            else:
                self._buf += chunk

    def send_raw(self, data: bytes) -> None:
        self.sock.settimeout(TIMEOUT)
        self.sock.sendall(data)

    def request(self, rid: int, method: str, params: dict) -> None:
        self.send_text(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))

    def until_response(self, rid: int) -> tuple[list[dict], dict]:
        """Messages before the response to rid, and the response."""
        before = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = self.recv_message(max(0.01, deadline - time.monotonic()))
            assert msg.opcode == OP_TEXT, f"unexpected message {msg}"
            obj = json.loads(msg.payload)
            if obj.get("id") == rid and "method" not in obj:
                return before, obj
            before.append(obj)


@pytest.fixture(scope="module")
def stack():
    root = Path(tempfile.mkdtemp(prefix="harnessd-deploy-"))
    s = None
    try:
        s = Stack(root)
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
    # the script is larger than nginx's in-memory proxy buffers: it goes through proxy_temp_path
    status, headers, body = stack.https("/app.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript"), (status, headers)
    assert b"WebSocket" in body and len(body) > 10_000, len(body)


def test_turn_over_wss_through_nginx(stack):
    ws = stack.wss("/", origin=stack.origin)
    try:
        ws.request(1, "initialize", {"clientInfo": {"name": "deploy-test", "version": "1"}, "protocolVersion": 1})
        before, resp = ws.until_response(1)
        assert not before and "result" in resp, (before, resp)
        ws.request(2, "session/prompt", {"sessionId": "via-nginx",
                                         "contentBlocks": [{"type": "text", "text": "@chunks 20 8"}]})
        before, resp = ws.until_response(2)
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


def test_access_log_leaves_out_the_query_string(stack):
    ws = stack.wss("/?access_token=s3cret-token", origin=stack.origin)
    ws.close()
    stack.https("/healthz?access_token=s3cret-token")
    deadline = time.monotonic() + TIMEOUT
    log = ""
    while time.monotonic() < deadline:
        log = stack.access_log.read_text() if stack.access_log.exists() else ""
        if '"GET / HTTP/1.1" 101' in log and '"GET /healthz HTTP/1.1" 200' in log:
            break
        time.sleep(0.05)
    assert '"GET / HTTP/1.1" 101' in log and '"GET /healthz HTTP/1.1" 200' in log, log[-2000:]
    assert "s3cret-token" not in log, log[-2000:]


def test_proxy_timeouts_outlast_the_websocket_idle_timeout():
    """nginx must not cut a WebSocket that harnessd still keeps alive."""
    text = re.sub(r"#.*", "", CONF.read_text())
    idle_s = default("ws-idle-timeout-ms") / 1000
    for directive in ("proxy_read_timeout", "proxy_send_timeout", "send_timeout"):
        values = conf_seconds(text, directive)
        assert values, f"{CONF} sets no {directive}"
        # the first is the server-wide one; per-location ones (short, for /healthz) follow
        assert values[0] > idle_s, f"{directive} {values[0]}s <= --ws-idle-timeout-ms {idle_s}s"
