"""Small local servers the daemon tests put around harnessd.

``FakeDeepSeek`` is an OpenAI-compatible streaming endpoint, so the default
``deepseek`` provider (and upstream's quick-start) runs without a real key
or network. ``TlsProxy`` terminates TLS in front of a plain harnessd port,
since harnessd itself listens without TLS.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FakeDeepSeek:
    """Answers ``POST .../chat/completions`` with a streamed reply and
    records each request (headers and JSON body)."""

    def __init__(self, reply: str = "Hi! (from the fake DeepSeek endpoint)") -> None:
        self.reply = reply
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                words = outer.reply.split(" ")
                for i, word in enumerate(words):
                    text = word if i == 0 else " " + word
                    self._event({"choices": [{"index": 0, "delta": {"content": text}}]})
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 3, "completion_tokens": len(words), "total_tokens": 3 + len(words)}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _event(self, payload: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (needs the openssl tool)."""

    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


class TlsProxy:
    """Accepts TLS on an ephemeral port and relays the plaintext to
    ``127.0.0.1:target_port``; one thread per connection, one SSL object
    used by that thread only."""

    def __init__(self, cert: Path, key: Path, target_port: int) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(raw,), daemon=True).start()

    def _relay(self, raw: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        plain = socket.create_connection(("127.0.0.1", self.target_port))
        client_done = False
        try:
            while True:
                watched = [plain] if client_done else [tls, plain]
                readable = [tls] if not client_done and tls.pending() else select.select(watched, [], [])[0]
                if tls in readable:
                    data = tls.recv(65536)
                    if not data:
                        plain.shutdown(socket.SHUT_WR)
                        client_done = True
                        continue
                    plain.sendall(data)
                if plain in readable:
                    data = plain.recv(65536)
                    if not data:
                        break
                    tls.sendall(data)
        except (OSError, ssl.SSLError):
            pass
        finally:
            plain.close()
            tls.close()

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()
