"""deploy/nginx/harnessd.conf in front of a real harnessd, for the deploy
tests and the browser test: Debian's nginx, started unprivileged from a
throwaway prefix, terminates TLS with a certificate from a throwaway CA
(openssl CLI) and proxies to harnessd's ws:// listener (default store).

    python3 tests/deploy/nginx_stack.py

runs the stack until its stdin closes and prints one JSON line first:
{"url": "https://localhost:PORT/", "origin": ..., "ca": PATH, "spki": BASE64},
where spki is the SHA-256 of the server key's SubjectPublicKeyInfo (what
Chromium's --ignore-certificate-errors-spki-list takes)."""

from __future__ import annotations

import base64
import hashlib
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
import sys
import tempfile
import time
from pathlib import Path

from deploy_common import DEPLOY, harnessd_bin, import_integration_helpers, make_certificates

import_integration_helpers()
from harnessd_helpers import _die_with_parent  # noqa: E402
from ws_client import OP_TEXT, WSClient  # noqa: E402

CONF = DEPLOY / "nginx" / "harnessd.conf"
PLACEHOLDERS = {"SERVER_NAME", "HTTPS_PORT", "HTTP_PORT", "TLS_CERT", "TLS_KEY", "UPSTREAM", "METRICS_ALLOW", "LOG_DIR"}
HOST = "127.0.0.1"
OTHER_HOST = "127.0.0.2"   # also loopback on Linux: a client outside the /metrics allow list
TIMEOUT = 10.0


def tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if path is None:
        raise AssertionError(f"{name} is not installed (scripts/install-deps.sh installs it)")
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



class Stack:
    """harnessd + nginx; everything under one temporary directory.

    token: harnessd requires this bearer token (--auth-token-file), and
    wss() sends it; None: no authentication (the browser test's page)."""

    SERVER_NAME = "localhost"

    def __init__(self, root: Path, token: str | None = None):
        self.root = root
        self.https_port = free_port()
        self.http_port = free_port()
        self.origin = f"https://{self.SERVER_NAME}:{self.https_port}"
        self.token = token
        self.procs: list[subprocess.Popen] = []

        # harnessd, plain ws:// on a free port, set up as deploy/README.md says
        # for nginx in front: the page origin behind the proxy is allowed, and
        # so is the name nginx passes on as Host ($host has no port, so even
        # "localhost" is only served when listed).
        (root / "sessions").mkdir()
        self.ready = root / "ready.json"
        self.harnessd_log = root / "harnessd.stderr"
        auth = []
        if token is not None:
            (root / "token").write_text(token + "\n")
            auth = ["--auth-token-file", str(root / "token")]
        self.harnessd = subprocess.Popen(
            [harnessd_bin(), "--listen", f"ws://{HOST}:0", "--ready-file", str(self.ready),
             "--session-root", str(root / "sessions"), "--threads", "2", "--allow-origin", self.origin,
             "--allow-host", self.SERVER_NAME, *auth],
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
            "SERVER_NAME": self.SERVER_NAME,
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
        stop_processes(self.procs)
        shutil.rmtree(self.prefix, ignore_errors=True)

    # -- clients ------------------------------------------------------------
    def tls_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def https(self, path: str, method: str = "GET", source: str = HOST,
              host: str | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection("localhost", self.https_port, context=self.tls_context(),
                                           timeout=TIMEOUT, source_address=(source, 0))
        # "localhost" names the certificate; the connection goes to 127.0.0.1
        conn.sock = self.tls_context().wrap_socket(
            socket.create_connection((HOST, self.https_port), TIMEOUT, source_address=(source, 0)),
            server_hostname="localhost")
        try:
            conn.request(method, path, headers={"Host": host} if host else {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def wss(self, path: str = "/", origin: str | None = None, token: str | None = "") -> WSClient:
        """A WebSocket through the proxy; "localhost" names the certificate.
        token: "" sends the stack's (if any) as a bearer token, None none."""
        token = self.token if token == "" else token
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return WSClient.connect("localhost", self.https_port, path, origin=origin, timeout=TIMEOUT,
                                tls=self.tls_context(), headers=headers)


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each (last started first), then wait; kill what does not exit."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def request(ws: WSClient, rid: int, method: str, params: dict) -> None:
    ws.send_text(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))


def until_response(ws: WSClient, rid: int, timeout: float = TIMEOUT) -> tuple[list[dict], dict]:
    """Messages before the response to rid, and the response."""
    before = []
    deadline = time.monotonic() + timeout
    while True:
        msg = ws.recv_message(max(0.01, deadline - time.monotonic()))
        assert msg.opcode == OP_TEXT, f"unexpected message {msg}"
        obj = json.loads(msg.payload)
        if obj.get("id") == rid and "method" not in obj:
            return before, obj
        before.append(obj)


def call(ws: WSClient, rid: int, method: str, params: dict) -> tuple[list[dict], dict]:
    """Send a request; the messages before its response, and the response."""
    request(ws, rid, method, params)
    return until_response(ws, rid)


def spki_sha256(cert: Path) -> str:
    """base64 SHA-256 of a certificate's SubjectPublicKeyInfo (DER)."""
    pem = subprocess.run(["openssl", "x509", "-in", str(cert), "-pubkey", "-noout"], check=True,
                         capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pem, check=True,
                         capture_output=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode("ascii")


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="harnessd-nginx-stack-"))
    stack = None
    try:
        stack = Stack(root)
        print(json.dumps({"url": f"https://localhost:{stack.https_port}/", "origin": stack.origin,
                          "ca": str(stack.ca), "spki": spki_sha256(stack.prefix / "certs" / "server.pem")}),
              flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or exits)
        return 0
    finally:
        if stack is not None:
            sys.stderr.write(stack.diag()[-2000:] + "\n")
            stack.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.exit(main())
