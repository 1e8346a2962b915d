#!/usr/bin/env python3
"""Scriptable mock of an OpenAI/DeepSeek-compatible chat completions server.

Python 3 standard library only.  Used by harnessd's tests in place of the real
DeepSeek API.  See tests/mock/README.md for the CLI and the script format.

    python3 tests/mock/openai_mock.py --port 0 --ready-file F \
        --script SCRIPT.json --record DIR [--require-key KEY]
"""

import argparse
import json
import os
import random
import select
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DEFAULT_TEXT = "Hello from openai_mock."
DEFAULT_CHUNK = 5
DEFAULT_HANG_MS = 300_000

KNOWN_KEYS = {
    "comment", "match", "times",
    "text", "chunk", "reasoning", "tool_calls", "arg_chunk", "finish", "model",
    "status", "body", "headers", "content_type",
    "close_after", "hang_after", "hang_ms", "drop",
    "delay_ms", "header_delay_ms", "keepalive",
    "split_bytes", "split_delay_ms", "seed", "framing",
    "usage", "usage_in_final", "usage_null", "usage_json", "usage_depth",
    "error_event", "done", "raw", "endless_line",
}

ENDLESS_PIECE = 64 * 1024

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    402: ("insufficient_balance", None),
    403: ("permission_error", None),
    404: ("not_found_error", None),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("service_unavailable", None),
}


class ScriptError(ValueError):
    pass


class RawJSON(str):
    """JSON text sent exactly as written, for values Python's json module
    cannot produce (1e400 parses as infinity and would be re-sent as Infinity)."""


def dumps(obj, ensure_ascii=False, separators=(",", ":")):
    """json.dumps (compact, UTF-8 raw by default) that splices RawJSON values in verbatim."""
    raws = []

    def swap(v):
        if isinstance(v, RawJSON):
            raws.append(str(v))
            return "\u0000raw%d\u0000" % (len(raws) - 1)
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(obj), ensure_ascii=ensure_ascii, separators=separators)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps("\u0000raw%d\u0000" % i), raw, 1)
    return text


def error_object(status, message=None):
    etype, code = ERROR_TYPES.get(status, ("api_error", None))
    return {"error": {"message": message or "mock error %d" % status,
                      "type": etype, "param": None, "code": code}}


def content_text(content):
    """Text of a message's content (a string or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
        return "".join(out)
    return ""


def last_user_text(body):
    msgs = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(msgs, list):
        return ""
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            return content_text(m.get("content"))
    return ""


def split_text(s, size):
    size = max(1, int(size))
    return [s[i:i + size] for i in range(0, len(s), size)]


def estimate_tokens(nchars):
    return max(1, (nchars + 3) // 4)


def validate_script(script):
    if isinstance(script, dict):
        script = [script]
    if not isinstance(script, list):
        raise ScriptError("script must be a JSON list of response objects")
    for i, e in enumerate(script):
        if not isinstance(e, dict):
            raise ScriptError("script entry %d is not an object" % i)
        unknown = set(e) - KNOWN_KEYS
        if unknown:
            sys.stderr.write("openai_mock: warning: entry %d has unknown keys %s\n"
                             % (i, sorted(unknown)))
        for tc in e.get("tool_calls") or []:
            if not isinstance(tc, dict) or "name" not in tc:
                raise ScriptError("entry %d: each tool call needs a name" % i)
        if "match" in e and not isinstance(e["match"], str):
            raise ScriptError("entry %d: match must be a string" % i)
    return script


class MockState:
    def __init__(self, script, record_dir=None, require_key=None,
                 default_text=DEFAULT_TEXT, verbose=False):
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.require_key = require_key
        self.default_text = default_text
        self.verbose = verbose
        self.records = []
        self.seq = 0
        self.record_path = None
        if record_dir:
            os.makedirs(record_dir, exist_ok=True)
            self.record_path = os.path.join(record_dir, "requests.jsonl")
        self.set_script(script)

    def set_script(self, script):
        script = validate_script(script)
        with self.lock:
            self.script = script
            self.ordered = [i for i, e in enumerate(script) if "match" not in e]
            self.cursor = 0
            self.match_uses = {}

    def reset(self):
        with self.lock:
            self.records = []
            self.cursor = 0
            self.match_uses = {}

    def select(self, user_text):
        """Return (script index or None, entry) for a chat request."""
        with self.lock:
            for i, e in enumerate(self.script):
                if "match" not in e or e["match"] not in user_text:
                    continue
                used = self.match_uses.get(i, 0)
                times = e.get("times")
                if times is not None and used >= times:
                    continue
                self.match_uses[i] = used + 1
                return i, e
            if not self.ordered:
                return None, {"text": self.default_text}
            i = self.ordered[min(self.cursor, len(self.ordered) - 1)]
            self.cursor += 1
            return i, self.script[i]

    def record(self, rec):
        with self.lock:
            rec["seq"] = self.seq
            self.seq += 1
            self.records.append(rec)
            if self.record_path:
                with open(self.record_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            return rec["seq"]

    def snapshot(self):
        with self.lock:
            return list(self.records)


class ClientGone(Exception):
    pass


class StreamWriter:
    """Writes a response body, either chunked (HTTP/1.1) or close-delimited,
    optionally cut into tiny flushed pieces."""

    def __init__(self, handler, chunked, split, rng, split_delay, stop):
        self.h = handler
        self.chunked = chunked
        self.split = split
        self.rng = rng
        self.split_delay = split_delay
        self.stop = stop

    def _send(self, data):
        try:
            if self.chunked:
                data = b"%x\r\n" % len(data) + data + b"\r\n"
            self.h.wfile.write(data)
            self.h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError,
                socket.timeout, OSError) as ex:
            raise ClientGone() from ex

    def write(self, data):
        if not data:
            return
        if not self.split:
            self._send(data)
            return
        pos = 0
        while pos < len(data):
            n = self.rng.randint(1, 7)
            self._send(data[pos:pos + n])
            pos += n
            if self.split_delay > 0:
                self.stop.wait(self.split_delay)

    def finish(self):
        if self.chunked:
            try:
                self.h.wfile.write(b"0\r\n\r\n")
                self.h.wfile.flush()
            except OSError as ex:
                raise ClientGone() from ex
        else:
            self.h.close_connection = True


def build_response(entry, req, seq):
    """Build the stream chunks for a script entry.

    Returns (events, done, completion) where events is the list of JSON objects
    to send as `data:` lines, done says whether to end with `data: [DONE]`, and
    completion is the equivalent non-streaming chat.completion object.
    """
    e = entry
    cid = "chatcmpl-mock-%d" % seq
    created = int(time.time())
    model = e.get("model") or (req.get("model") if isinstance(req, dict) else None) \
        or "mock-model"
    text = e.get("text") or ""
    reasoning = e.get("reasoning") or ""
    size = e.get("chunk", DEFAULT_CHUNK)

    tool_calls = []
    for n, tc in enumerate(e.get("tool_calls") or []):
        args = tc.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, separators=(",", ":"))
        tool_calls.append({"id": tc.get("id") or "call_mock_%d_%d" % (seq, n),
                           "name": tc["name"], "arguments": args})

    def chunk(delta, finish=None):
        return {"id": cid, "object": "chat.completion.chunk", "created": created,
                "model": model, "system_fingerprint": "fp_mock",
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    for piece in split_text(reasoning, size):
        # DeepSeek sends content: null while it streams reasoning.
        events.append(chunk({"content": None, "reasoning_content": piece}))
    for piece in split_text(text, size):
        events.append(chunk({"content": piece}))

    if "error_event" in e:
        err = e["error_event"]
        if isinstance(err, str):
            err = error_object(500, err)
        elif not isinstance(err, dict):
            err = error_object(500)
        events.append(err)
        return events, bool(e.get("done", False)), None

    for n, tc in enumerate(tool_calls):
        events.append(chunk({"tool_calls": [{
            "index": n, "id": tc["id"], "type": "function",
            "function": {"name": tc["name"], "arguments": ""}}]}))
        args = tc["arguments"]
        asize = e.get("arg_chunk") or max(1, -(-len(args) // 4))
        for piece in split_text(args, asize):
            events.append(chunk({"tool_calls": [{
                "index": n, "function": {"arguments": piece}}]}))

    finish = e["finish"] if "finish" in e else ("tool_calls" if tool_calls else "stop")
    final = chunk({}, finish)
    events.append(final)

    usage = None
    if e.get("usage", True) is not False:
        prompt_chars = 0
        if isinstance(req, dict):
            for m in req.get("messages") or []:
                if isinstance(m, dict):
                    prompt_chars += len(content_text(m.get("content")))
            if req.get("tools"):
                prompt_chars += len(json.dumps(req["tools"]))
        completion_chars = len(text) + len(reasoning) + sum(
            len(t["name"]) + len(t["arguments"]) for t in tool_calls)
        pt, ct = estimate_tokens(prompt_chars), estimate_tokens(completion_chars)
        usage = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
        if isinstance(e.get("usage"), dict):
            usage.update(e["usage"])
        if e.get("usage_depth"):
            nested = usage["prompt_tokens"]
            for _ in range(int(e["usage_depth"])):
                nested = [nested]
            usage["prompt_tokens"] = nested
        if isinstance(e.get("usage_json"), str):
            usage = RawJSON(e["usage_json"])
        if e.get("usage_in_final"):
            final["usage"] = usage
        else:
            events.append({"id": cid, "object": "chat.completion.chunk",
                           "created": created, "model": model,
                           "system_fingerprint": "fp_mock",
                           "choices": [], "usage": usage})
    if e.get("usage_null"):
        for ev in events:
            ev.setdefault("usage", None)

    message = {"role": "assistant",
               "content": text if (text or not tool_calls) else None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {"id": t["id"], "type": "function",
             "function": {"name": t["name"], "arguments": t["arguments"]}}
            for t in tool_calls]
    completion = {"id": cid, "object": "chat.completion", "created": created,
                  "model": model, "system_fingerprint": "fp_mock",
                  "choices": [{"index": 0, "message": message, "logprobs": None,
                               "finish_reason": finish}]}
    if usage is not None:
        completion["usage"] = usage
    return events, bool(e.get("done", True)), completion


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "openai-mock/1.0"

    def version_string(self):
        return self.server_version

    @property
    def state(self):
        return self.server.state

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, fmt, *args):
        if self.state.verbose:
            super().log_message(fmt, *args)

    # ---- request plumbing -------------------------------------------------

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ValueError("connection closed inside chunked body")
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ValueError("bad chunk size line %r" % line[:40])
                if size == 0:
                    while True:  # trailers, up to the blank line
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    return b"".join(parts)
                data = self.rfile.read(size)
                if len(data) != size:
                    raise ValueError("connection closed inside chunk")
                parts.append(data)
                self.rfile.readline(3)  # CRLF after the chunk data
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        n = int(length)
        data = self.rfile.read(n) if n > 0 else b""
        if len(data) != n:
            raise ValueError("connection closed inside body")
        return data

    def redacted_headers(self):
        out = {}
        for k, v in self.headers.items():
            if k.lower() == "authorization":
                v = v[:8] + "..."
            out[k] = v
        return out

    def send_bytes(self, status, payload, content_type, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (extra or {}).items():
            self.send_header(str(k), str(v))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True

    def send_json(self, status, obj, extra=None):
        self.send_bytes(status, dumps(obj, ensure_ascii=True, separators=None).encode(),
                        "application/json", extra)

    # ---- routes -----------------------------------------------------------

    def do_GET(self):
        try:
            self.read_body()
        except ValueError:
            self.close_connection = True
        path = urlsplit(self.path).path
        if path == "/__requests":
            self.send_json(200, self.state.snapshot())
        elif path == "/__health":
            self.send_json(200, {"ok": True})
        elif path.endswith("/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": "deepseek-chat", "object": "model", "owned_by": "mock"},
                {"id": "deepseek-reasoner", "object": "model", "owned_by": "mock"}]})
        else:
            self.send_json(404, error_object(404, "no route for GET " + path))

    def do_POST(self):
        path = urlsplit(self.path).path
        try:
            raw = self.read_body()
        except ValueError as ex:
            self.close_connection = True
            self.send_json(400, error_object(400, str(ex)))
            return
        if path == "/__reset":
            self.state.reset()
            self.send_json(200, {"ok": True})
            return
        if path == "/__script":
            try:
                self.state.set_script(json.loads(raw.decode("utf-8")))
            except (ValueError, ScriptError) as ex:
                self.send_json(400, error_object(400, "bad script: %s" % ex))
                return
            self.send_json(200, {"ok": True})
            return

        rec = {"method": self.command, "path": self.path,
               "headers": self.redacted_headers(), "body": None}
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
            rec["body"] = body
        except ValueError:
            body = None
            rec["raw_body"] = raw.decode("utf-8", "replace")
            rec["script_index"] = None
            self.state.record(rec)
            self.send_json(400, error_object(400, "request body is not valid JSON"))
            return

        if not path.endswith("/chat/completions"):
            rec["script_index"] = None
            self.state.record(rec)
            self.send_json(404, error_object(404, "no route for POST " + path))
            return

        key = self.state.require_key
        if key is not None and self.headers.get("Authorization") != "Bearer " + key:
            rec["script_index"] = None
            self.state.record(rec)
            self.send_json(401, error_object(
                401, "Authentication Fails, Your api key is invalid"))
            return

        if not isinstance(body, dict):
            rec["script_index"] = None
            self.state.record(rec)
            self.send_json(400, error_object(400, "body must be a JSON object"))
            return

        idx, entry = self.state.select(last_user_text(body))
        rec["script_index"] = idx
        seq = self.state.record(rec)
        try:
            self.respond(entry, body, seq)
        except ClientGone:
            self.close_connection = True

    # ---- chat completion responses ----------------------------------------

    def wait_ms(self, ms):
        if ms and ms > 0:
            self.state.stop.wait(ms / 1000.0)

    def hard_close(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def respond(self, e, req, seq):
        self.wait_ms(e.get("header_delay_ms"))
        if e.get("drop"):
            self.hard_close()
            return

        status = int(e.get("status", 200))
        if status != 200 or "body" in e:
            body = e.get("body")
            ctype = e.get("content_type")
            if body is None:
                payload = json.dumps(error_object(status)).encode()
                ctype = ctype or "application/json"
            elif isinstance(body, str):
                payload = body.encode("utf-8")
                if not ctype:
                    try:
                        json.loads(body)
                        ctype = "application/json"
                    except ValueError:
                        ctype = "text/plain; charset=utf-8"
            else:
                payload = json.dumps(body).encode()
                ctype = ctype or "application/json"
            self.send_bytes(status, payload, ctype, e.get("headers"))
            return

        events, done, completion = build_response(e, req, seq)
        if req.get("stream") is not True and "raw" not in e:
            if completion is None:
                self.send_json(500, events[-1])
            else:
                self.send_json(200, completion, e.get("headers"))
            return
        self.stream(e, events, done)

    def stream(self, e, events, done):
        chunked = e.get("framing", "chunked") != "close"
        self.send_response(200)
        self.send_header("Content-Type", e.get("content_type")
                         or "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.close_connection = True
            self.send_header("Connection", "close")
        for k, v in (e.get("headers") or {}).items():
            self.send_header(str(k), str(v))
        self.end_headers()

        w = StreamWriter(self, chunked, bool(e.get("split_bytes")),
                         random.Random(e.get("seed", 0)),
                         float(e.get("split_delay_ms", 1)) / 1000.0, self.state.stop)

        if "raw" in e:
            raw = e["raw"]
            for piece in ([raw] if isinstance(raw, str) else raw):
                w.write(piece.encode("utf-8"))
                self.wait_ms(e.get("delay_ms"))
            w.finish()
            return

        if e.get("endless_line") is not None:
            self.endless_line(w, events[0], int(e["endless_line"]), e.get("hang_ms", DEFAULT_HANG_MS))
            return

        keepalive = bool(e.get("keepalive"))
        close_after = e.get("close_after")
        hang_after = e.get("hang_after")
        if keepalive:
            w.write(b": keep-alive\n\n")
        for n, ev in enumerate(events):
            if close_after is not None and n >= close_after:
                self.hard_close()
                return
            if hang_after is not None and n >= hang_after:
                self.hang(e.get("hang_ms", DEFAULT_HANG_MS))
                self.hard_close()
                return
            if n > 0:
                self.wait_ms(e.get("delay_ms"))
                if keepalive:
                    w.write(b": keep-alive\n\n")
            if self.state.stop.is_set():
                self.hard_close()
                return
            w.write(b"data: " + dumps(ev).encode("utf-8") + b"\n\n")
        if close_after is not None or hang_after is not None:
            # Asked to cut the stream at or past its end: never send [DONE].
            if hang_after is not None:
                self.hang(e.get("hang_ms", DEFAULT_HANG_MS))
            self.hard_close()
            return
        if done:
            self.wait_ms(e.get("delay_ms"))
            w.write(b"data: [DONE]\n\n")
        w.finish()

    def endless_line(self, w, first, nbytes, hang_ms):
        """The role chunk, then a `data:` line of nbytes more that never ends:
        no newline, the connection held open until the client leaves."""
        w.write(b"data: " + dumps(first).encode("utf-8") + b"\n\n")
        w.write(b'data: {"choices":[{"index":0,"delta":{"content":"')
        piece = b"x" * ENDLESS_PIECE
        left = nbytes
        while left > 0 and not self.state.stop.is_set():
            n = min(left, len(piece))
            w.write(piece[:n])
            left -= n
        self.hang(hang_ms)
        self.hard_close()

    def hang(self, ms):
        """Keep the connection open, sending nothing, until the client closes
        it, the server stops, or ms milliseconds pass."""
        deadline = time.monotonic() + ms / 1000.0
        sock = self.connection
        while not self.state.stop.is_set() and time.monotonic() < deadline:
            try:
                r, _, _ = select.select([sock], [], [], 0.2)
                if r and not sock.recv(1, socket.MSG_PEEK):
                    return
                if r:
                    time.sleep(0.2)
            except OSError:
                return


class MockServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, state):
        self.state = state
        super().__init__(addr, Handler)

    def handle_error(self, request, client_address):
        if self.state.verbose:
            super().handle_error(request, client_address)


def write_ready(path, info):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Mock OpenAI-compatible chat completions server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--ready-file", help='write {"url": ...} here once listening')
    ap.add_argument("--script", help="JSON list of scripted responses")
    ap.add_argument("--record", metavar="DIR", help="append requests to DIR/requests.jsonl")
    ap.add_argument("--require-key", metavar="KEY",
                    help="answer 401 unless 'Authorization: Bearer KEY'")
    ap.add_argument("--default-text", default=DEFAULT_TEXT,
                    help="reply when the script has no ordered entries")
    ap.add_argument("--verbose", action="store_true", help="log requests to stderr")
    args = ap.parse_args(argv)

    script = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
    try:
        state = MockState(script, args.record, args.require_key,
                          args.default_text, args.verbose)
    except ScriptError as ex:
        sys.stderr.write("openai_mock: %s\n" % ex)
        return 2

    server = MockServer((args.host, args.port), state)
    host, port = server.server_address[:2]
    url = "http://%s:%d" % (host, port)
    info = {"url": url, "port": port, "pid": os.getpid()}
    if args.ready_file:
        write_ready(args.ready_file, info)
    else:
        print(json.dumps(info), flush=True)

    def on_signal(signum, frame):
        state.stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        state.stop.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
