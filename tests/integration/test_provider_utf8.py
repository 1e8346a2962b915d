"""Bytes from a model endpoint that are not valid UTF-8 never reach a session log or a client.

A 502 whose body is not JSON is quoted in the turn's error message, cut at 300 bytes. Cut mid-character
(or not UTF-8 at all), it used to make the logged turn/end invalid UTF-8: session/events then failed
with "corrupt line" and, after a restart, every prompt to the session failed. The endpoint here is a
tiny in-test HTTP server, since the mock only sends text bodies.
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from harnessd_helpers import check_turn, final_text, read_log, result_of

KEY = "sk-utf8-test"
FFFD = "\ufffd"


class Endpoint:
    """An OpenAI-compatible endpoint answering each POST with the current (status, body, content type)."""

    def __init__(self):
        self.answer = (200, b"", "text/plain")
        self.requests = 0
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                endpoint.requests += 1
                status, body, ctype = endpoint.answer
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def fail(self, status: int, body: bytes) -> None:
        self.answer = (status, body, "text/html")

    def reply(self, text: str) -> None:
        events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.answer = (200, body.encode(), "text/event-stream")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    e = Endpoint()
    yield e
    e.stop()


def daemon(spawn, endpoint, root):
    return spawn(session_root=root, args=["--model-attempts", "1"],
                 env={"DEEPSEEK_API_KEY": KEY, "DEEPSEEK_BASE_URL": endpoint.url})


def all_events(c, sid: str) -> list[dict]:
    """The session's logged events through session/events, every page."""
    out, after = [], -1
    while True:
        resp = c.response(c.request("session/events", {"sessionId": sid, "afterSeq": after, "limit": 1000}))
        res = result_of(resp)
        out += res["events"]
        if not res["more"]:
            return out
        after = out[-1]["seq"]


# (body sent, text the turn's error message must end with)
BODIES = {
    "cut-inside-e-acute": (b"x" + "é".encode() * 200, ": x" + "é" * 149),
    "not-utf8": (b"\xff\xfe", ": " + FFFD * 2),
    "latin1-page": ("<h1>Passerelle défaillante</h1>".encode("latin-1"), ": <h1>Passerelle d" + FFFD + "faillante</h1>"),
    "truncated-emoji": (b"overloaded \xf0\x9f\x98", ": overloaded " + FFFD),
    "surrogate-and-overlong": (b"a\xed\xa0\x80b\xc0\xafc", ": a" + FFFD * 3 + "b" + FFFD * 2 + "c"),
}


@pytest.mark.parametrize("name", list(BODIES))
def test_error_body_stays_valid_utf8_through_log_events_and_restart(spawn, endpoint, tmp_path, name):
    body, tail = BODIES[name]
    root = tmp_path / "sessions"
    sid = f"u8-{name}"
    endpoint.fail(502, body)
    d1 = daemon(spawn, endpoint, root)
    c = d1.connect()
    c.initialize(provider="deepseek")
    resp, events = c.run_prompt(sid, "hello")
    reason = result_of(resp)["reason"]
    assert result_of(resp)["status"] == "error", resp
    assert reason["kind"] == "error" and reason["code"] == "SERVER", reason
    assert reason["message"].startswith("the model endpoint answered HTTP 502"), reason
    assert reason["message"].endswith(tail), reason
    check_turn(events)
    assert events[-1]["data"]["reason"] == reason
    # Every frame the client got decoded as UTF-8 JSON.
    assert all(f.error is None for f in c.frames), [f for f in c.frames if f.error]

    # The log is valid UTF-8 and session/events serves it.
    assert d1.log_path(sid).read_bytes().decode("utf-8")
    _, logged = read_log(d1.log_path(sid))
    assert logged == events
    assert all_events(c, sid) == events
    assert d1.terminate(5) == 0

    # After a restart the session loads and takes a prompt.
    endpoint.reply("fine again")
    d2 = daemon(spawn, endpoint, root)
    c2 = d2.connect()
    c2.initialize(provider="deepseek")
    resp2, events2 = c2.run_prompt(sid, "again")
    assert result_of(resp2) == {"status": "ok", "reason": {"kind": "completed"}}, resp2
    check_turn(events2, turn=1)
    assert final_text(events2) == "fine again"
    assert all_events(c2, sid) == events + events2
    assert d2.terminate(5) == 0
