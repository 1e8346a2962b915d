"""A small stand-in for harnessd, so client behaviour can be tested on cases
the real daemon never produces (malformed results, request frames, crashes).

``FakeRuntime`` speaks NDJSON on stdio and answers initialize,
session/prompt, session/cancel and shutdown in harnessd's directional form:
a turn's notifications, then ``{"status", "reason"}``. The scripts next to
this file subclass it to misbehave in one way each.

Prompt directives (the prompt's text):
  @hang              never answer
  @env NAME          answer with the value of environment variable NAME
  @cwd               answer with the process's working directory
  @stderr TEXT       write TEXT to stderr, then answer normally
  @slow N MS         N text chunks, MS milliseconds apart
  @huge N BYTES      N text chunks of BYTES bytes each
  @silent            a turn without any assistant message
  @subagent          a child session runs inside the turn
  @other             another session's events are interleaved
  @die               write two events, 450 stderr lines and a marker, exit 3
  @late              one more event of the session, 0.3 s after the response
  @finished          a pre-RFC session.finished notification before the response
  @initparams        answer with the params initialize received, as JSON
  @replayed          the session's logged events are re-sent before and after
                     the turn, as a session/subscribe replay would interleave
anything else is answered "echo: TEXT". The ``echo`` method answers with
the raw line it received. initialize fails for provider "fail" and returns
a malformed result for provider "bad-result".

Every event is also kept in memory, per session, so the fake answers
harnessd's session/list, session/events, session/subscribe and
session/unsubscribe as docs/protocol.md §4.7-4.10 specify (cursor paging,
the -32602 messages, ``unknown session: ID`` with ``data.sessionId``,
replay before the response). ``tools/list`` answers FAKE_TOOLS.
``fake/background`` stands in for a turn that
another connection runs: params ``{"sessionId", "chunks", "delayMs"}``; it
writes the session's ``turn/start``, answers ``{"turn": N}``, and streams
the rest of the turn from a thread, notified only while the session is
subscribed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_write_lock = threading.Lock()


def send_raw(data: bytes) -> None:
    with _write_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def send(frame: object) -> None:
    send_raw(json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")


def prompt_text(params: dict) -> str:
    return "".join(
        block.get("text", "")
        for block in params.get("contentBlocks", [])
        if isinstance(block, dict) and block.get("type") == "text"
    )


#: What the fake's tools/list offers: a read-only builtin and an MCP tool.
FAKE_TOOLS = [
    {"name": "read", "description": "Read a file.", "readOnly": True, "source": "builtin",
     "inputSchema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
    {"name": "mcp__everything__echo", "description": "Echo.", "readOnly": False, "source": "mcp:everything",
     "inputSchema": {"type": "object"}},
]


class FakeRuntime:
    def __init__(self) -> None:
        self.seq: dict[str, int] = {}
        self.turns: dict[str, int] = {}
        self.last_line = ""
        self.init_params: dict = {}
        # The session store: events, header facts, subscriptions.
        self.lock = threading.RLock()
        self.logs: dict[str, list[dict]] = {}
        self.created: dict[str, int] = {}
        self.updated: dict[str, int] = {}
        self.parents: dict[str, str] = {}
        self.running: set[str] = set()
        self.subscribed: set[str] = set()
        self.clock = 1_796_000_000_000

    # -- hooks -------------------------------------------------------------
    def before_response(self, request: dict) -> None:
        """Called right before the response to *request* is written."""

    def prompt_result(self, session_id: str, text: str) -> object:
        return {"status": "ok", "reason": {"kind": "completed"}}

    # -- helpers -----------------------------------------------------------
    def now(self) -> int:
        # Strictly increasing milliseconds, so list order is deterministic.
        with self.lock:
            self.clock = max(self.clock + 1, int(time.time() * 1000))
            return self.clock

    def event(self, session_id: str, type_: str, data: dict, notify: bool = True) -> None:
        """Log an event; notify it when this connection runs the turn
        (*notify*) or subscribes to the session."""

        with self.lock:
            seq = self.seq.get(session_id, 0)
            self.seq[session_id] = seq + 1
            stamp = self.now()
            event = {"type": type_, "seq": seq, "time": stamp, "data": data}
            if session_id not in self.logs:
                self.logs[session_id] = []
                self.created[session_id] = stamp
            self.logs[session_id].append(event)
            self.updated[session_id] = stamp
            if notify or session_id in self.subscribed:
                self.notify_event(session_id, event)

    def notify_event(self, session_id: str, event: dict) -> None:
        send({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": session_id, "event": event}})

    def error(self, request: dict, code: int, message: str, data: object = None) -> None:
        self.before_response(request)
        error: dict = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        send({"jsonrpc": "2.0", "id": request.get("id"), "error": error})

    def replay(self, session_id: str) -> None:
        with self.lock:
            for event in self.logs.get(session_id, []):
                self.notify_event(session_id, event)

    def notify(self, method: str, params: dict) -> None:
        send({"jsonrpc": "2.0", "method": method, "params": params})

    def respond(self, request: dict, result: object) -> None:
        self.before_response(request)
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def simple_turn(self, session_id: str, content: list, answer: str | None, chunks: list[str] = ()) -> None:
        turn = self.turns.get(session_id, 0)
        self.turns[session_id] = turn + 1
        self.event(session_id, "turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        self.event(session_id, "user/message", {"content": content, "source": {"kind": "user"}})
        self.event(session_id, "step/start", {"turn": turn, "step": 0})
        for index, text in enumerate(chunks):
            self.event(
                session_id,
                "assistant/chunk",
                {"turn": turn, "step": 0, "chunk": {"type": "text-delta", "index": index, "text": text}},
            )
        if answer is not None:
            self.event(
                session_id,
                "assistant/message",
                {"turn": turn, "step": 0, "content": [{"type": "text", "text": answer}],
                 "provenance": {"provider": "fake", "model": "fake"}},
            )
        self.event(session_id, "step/end", {"turn": turn, "step": 0})
        self.event(session_id, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    # -- behaviour ---------------------------------------------------------
    def prompt(self, request: dict) -> bool:
        params = request.get("params") or {}
        session_id = params["sessionId"]
        content = params["contentBlocks"]
        text = prompt_text(params)
        name, _, arg = text.partition(" ")
        if name == "@hang":
            return True
        if name == "@die":
            self.event(session_id, "turn/start", {"turn": 0})
            self.event(session_id, "user/message", {"content": content})
            for i in range(450):
                sys.stderr.write(f"filler line {i:04d}\n")
            sys.stderr.write("fatal: simulated crash in the middle of a turn (CRASH-MARKER)\n")
            sys.stderr.flush()
            sys.exit(3)
        if name == "@stderr":
            sys.stderr.write(arg + "\n")
            sys.stderr.flush()
        chunks: list[str] = []
        answer: str | None = f"echo: {text}"
        if name == "@env":
            answer = os.environ.get(arg.strip(), "<unset>")
        elif name == "@cwd":
            answer = os.getcwd()
        elif name == "@initparams":
            answer = json.dumps(self.init_params, sort_keys=True)
        elif name == "@silent":
            answer = None
        elif name in ("@slow", "@huge"):
            count, size = (int(x) for x in arg.split())
            for i in range(count):
                if name == "@slow":
                    time.sleep(size / 1000)
                    chunks.append(f"{i},")
                else:
                    chunks.append(chr(ord("a") + i % 26) * size)
            turn = self.turns.get(session_id, 0)
            self.turns[session_id] = turn + 1
            self.event(session_id, "turn/start", {"turn": turn})
            for index, chunk in enumerate(chunks):
                self.event(session_id, "assistant/chunk",
                           {"turn": turn, "step": 0, "chunk": {"type": "text-delta", "index": index, "text": chunk}})
                if name == "@slow" and index + 1 < len(chunks):
                    time.sleep(size / 1000)
            self.event(session_id, "assistant/message",
                       {"turn": turn, "step": 0, "content": [{"type": "text", "text": "".join(chunks)}]})
            self.event(session_id, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            self.respond(request, self.prompt_result(session_id, text))
            return True
        if name == "@subagent":
            child = f"{session_id}.sub-1"
            self.parents[child] = session_id
            self.notify("subagent.started", {"parentSessionId": session_id, "childSessionId": child})
            self.simple_turn(child, [{"type": "text", "text": "child task"}], "child answer")
            self.notify(
                "subagent.finished",
                {"provider": "fake", "agentId": child, "parentSessionId": session_id, "childSessionId": child,
                 "status": "ok", "stopReason": "completed", "lastAssistantMessage": "child answer"},
            )
            answer = "subagent said: child answer"
        if name == "@other":
            self.event("someone-else", "assistant/message", {"content": [{"type": "text", "text": "not yours"}]})
        if name == "@replayed":
            self.replay(session_id)
        self.simple_turn(session_id, content, answer, chunks)
        if name == "@replayed":
            self.replay(session_id)
        if name == "@finished":
            self.notify("session.finished", {"sessionId": session_id, "status": "ok"})
        if name == "@other":
            self.event("someone-else", "turn/end", {"reason": {"kind": "completed"}})
        self.respond(request, self.prompt_result(session_id, text))
        if name == "@late":
            time.sleep(0.3)  # well after the client has taken the response
            self.event(session_id, "custom/late", {})
        return True

    def handle(self, request: dict) -> bool:
        """Handle one request; return False to stop."""

        method = request.get("method")
        params = request.get("params") or {}
        if method == "initialize":
            self.init_params = params
            if params.get("onDisconnect") not in (None, "cancel", "continue"):
                send({"jsonrpc": "2.0", "id": request["id"],
                      "error": {"code": -32602, "message": 'params.onDisconnect must be "cancel" or "continue"'}})
                return True
            if params.get("provider") == "fail":
                send({"jsonrpc": "2.0", "id": request["id"],
                      "error": {"code": -32602, "message": 'no adapter registered for provider "fail"'}})
                return True
            if params.get("provider") == "bad-result":
                self.respond(request, {"serverInfo": "not an object"})
                return True
            self.respond(
                request,
                {
                    "serverInfo": {"name": "deepseek-harness-sdk-runtime", "version": "0.0.0", "implementation": "fake"},
                    "protocolVersion": 1,
                    "capabilities": {"providers": ["scripted"], "methods": [
                        "initialize", "session/prompt", "session/cancel", "shutdown",
                        "session/list", "session/events", "session/subscribe", "session/unsubscribe",
                        "tools/list"]},
                    "echoParams": params,
                },
            )
        elif method == "session/prompt":
            session_id = params.get("sessionId")
            with self.lock:
                self.running.add(session_id)
            try:
                return self.prompt(request)
            finally:
                with self.lock:
                    self.running.discard(session_id)
        elif method in STORE_METHODS:
            try:
                STORE_METHODS[method](self, request, params)
            except BadParams as bad:
                self.error(request, -32602, bad.message, bad.data)
        elif method == "tools/list":
            self.respond(request, {"tools": FAKE_TOOLS})
        elif method == "fake/background":
            self.background(request, params)
        elif method == "session/cancel":
            self.respond(request, {"cancelled": False})
        elif method == "shutdown":
            self.respond(request, {})
            return False
        elif method == "echo":
            self.respond(request, {"raw": self.last_line})
        else:
            self.before_response(request)
            send({"jsonrpc": "2.0", "id": request.get("id"),
                  "error": {"code": -32601, "message": f"method not found: {method}"}})
        return True

    # -- the session store (docs/protocol.md §4.7-4.10) ---------------------

    def session_list(self, request: dict, params: dict) -> None:
        limit = int_param(params, "limit", 100, 1, 1000, "must be within 1..1000")
        cursor = params.get("cursor")
        after = None
        if cursor is not None:
            if not isinstance(cursor, str):
                raise BadParams("params.cursor must be a string")
            stamp, _, last_id = cursor.partition(" ")
            if not stamp.isdigit() or not last_id:
                raise BadParams("params.cursor is not a cursor of session/list")
            after = (-int(stamp), last_id)
        with self.lock:
            rows = sorted(((-self.updated[sid], sid) for sid in self.logs))
            if after is not None:
                rows = [row for row in rows if row > after]
            page, rest = rows[:limit], rows[limit:]
            sessions = []
            for _, sid in page:
                entry = {"sessionId": sid, "createdAt": self.created[sid], "updatedAt": self.updated[sid],
                         "lastSeq": self.logs[sid][-1]["seq"] if self.logs[sid] else -1,
                         "turns": sum(1 for e in self.logs[sid] if e["type"] == "turn/start"),
                         "running": sid in self.running}
                if sid in self.parents:
                    entry["parentSessionId"] = self.parents[sid]
                sessions.append(entry)
        result: dict = {"sessions": sessions}
        if rest:
            result["nextCursor"] = f"{-page[-1][0]} {page[-1][1]}"
        self.respond(request, result)

    def known_session(self, params: dict) -> str:
        session_id = session_param(params)
        if session_id not in self.logs:
            raise BadParams(f"unknown session: {session_id}", {"sessionId": session_id})
        return session_id

    def session_events(self, request: dict, params: dict) -> None:
        session_id = session_param(params)
        after = int_param(params, "afterSeq", -1, -1, None, "must be -1 or more")
        limit = int_param(params, "limit", 200, 1, 1000, "must be within 1..1000")
        with self.lock:
            self.known_session(params)
            log = self.logs[session_id]
            later = [e for e in log if e["seq"] > after]
            page = later[:limit]
            result = {"events": page, "lastSeq": log[-1]["seq"] if log else -1, "more": len(later) > len(page)}
        self.respond(request, result)

    def session_subscribe(self, request: dict, params: dict) -> None:
        session_id = session_param(params)
        after = int_param(params, "afterSeq", None, -1, None, "must be -1 or more")
        with self.lock:
            self.known_session(params)
            if session_id in self.subscribed:
                raise BadParams(f"already subscribed: {session_id}")
            log = self.logs[session_id]
            if after is not None:
                for event in log:
                    if event["seq"] > after:
                        self.notify_event(session_id, event)
            self.subscribed.add(session_id)
            last = log[-1]["seq"] if log else -1
        self.respond(request, {"lastSeq": last})

    def session_unsubscribe(self, request: dict, params: dict) -> None:
        session_id = session_param(params)
        with self.lock:
            was = session_id in self.subscribed
            self.subscribed.discard(session_id)
            self.respond(request, {"unsubscribed": was})

    def background(self, request: dict, params: dict) -> None:
        session_id = params["sessionId"]
        count, delay = int(params.get("chunks", 3)), int(params.get("delayMs", 0))
        with self.lock:
            turn = self.turns.get(session_id, 0)
            self.turns[session_id] = turn + 1
            self.running.add(session_id)
            self.event(session_id, "turn/start", {"turn": turn}, notify=False)
        self.respond(request, {"turn": turn})

        def run() -> None:
            self.event(session_id, "user/message", {"content": [{"type": "text", "text": "elsewhere"}]}, notify=False)
            for i in range(count):
                time.sleep(delay / 1000)
                self.event(session_id, "assistant/chunk",
                           {"turn": turn, "step": 0, "chunk": {"type": "text-delta", "index": 0, "text": f"{i},"}},
                           notify=False)
            self.event(session_id, "assistant/message",
                       {"turn": turn, "step": 0, "content": [{"type": "text", "text": "done elsewhere"}]}, notify=False)
            with self.lock:
                self.running.discard(session_id)
                self.event(session_id, "turn/end", {"turn": turn, "reason": {"kind": "completed"}}, notify=False)

        threading.Thread(target=run, daemon=True).start()

    def serve(self) -> int:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            self.last_line = line.decode("utf-8")
            request = json.loads(line)
            if not self.handle(request):
                break
        return 0


class BadParams(Exception):
    def __init__(self, message: str, data: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


def session_param(params: dict) -> str:
    if "sessionId" not in params or params["sessionId"] is None:
        raise BadParams("params.sessionId is required")
    value = params["sessionId"]
    if not isinstance(value, str):
        raise BadParams("params.sessionId must be a string")
    if not value:
        raise BadParams("params.sessionId must not be empty")
    if len(value.encode("utf-8")) > 256:
        raise BadParams("params.sessionId must be at most 256 bytes")
    return value


def int_param(params: dict, name: str, default, low: int, high: int | None, range_message: str):
    value = params.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadParams(f"params.{name} must be an integer")
    if value < low or (high is not None and value > high):
        raise BadParams(f"params.{name} {range_message}")
    return value


STORE_METHODS = {
    "session/list": FakeRuntime.session_list,
    "session/events": FakeRuntime.session_events,
    "session/subscribe": FakeRuntime.session_subscribe,
    "session/unsubscribe": FakeRuntime.session_unsubscribe,
}


def main(runtime: FakeRuntime) -> None:
    sys.exit(runtime.serve())
