"""Small local servers the daemon tests put around harnessd.

``FakeDeepSeek`` is an OpenAI-compatible streaming endpoint, so the default
``deepseek`` provider (and upstream's quick-start) runs without a real key
or network. ``make_ca`` and ``make_server_cert`` make a throwaway PKI with
the openssl tool for harnessd's ``tls://`` and ``wss://`` listeners.
"""

from __future__ import annotations

import json
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


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> Path:
    """A self-signed CA: ``NAME.pem`` and ``NAME.key`` in *directory*."""

    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "2", "-subj", f"/CN=throwaway {name}", "-keyout", f"{name}.key", "-out", f"{name}.pem",
             cwd=directory)
    return directory / f"{name}.pem"


def make_server_cert(directory: Path, ca: str, name: str, san: str = "IP:127.0.0.1") -> tuple[Path, Path]:
    """A server certificate for *san* signed by the CA *ca*; (cert, key)."""

    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=harnessd",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
    (directory / f"{name}.ext").write_text(f"subjectAltName={san}\n", encoding="ascii")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=directory)
    return directory / f"{name}.pem", directory / f"{name}.key"
