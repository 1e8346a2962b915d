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
anything else is answered "echo: TEXT". The ``echo`` method answers with
the raw line it received. initialize fails for provider "fail" and returns
a malformed result for provider "bad-result".
"""

from __future__ import annotations

import json
import os
import sys
import time


def send_raw(data: bytes) -> None:
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


class FakeRuntime:
    def __init__(self) -> None:
        self.seq: dict[str, int] = {}
        self.turns: dict[str, int] = {}
        self.last_line = ""
        self.init_params: dict = {}

    # -- hooks -------------------------------------------------------------
    def before_response(self, request: dict) -> None:
        """Called right before the response to *request* is written."""

    def prompt_result(self, session_id: str, text: str) -> object:
        return {"status": "ok", "reason": {"kind": "completed"}}

    # -- helpers -----------------------------------------------------------
    def event(self, session_id: str, type_: str, data: dict) -> None:
        seq = self.seq.get(session_id, 0)
        self.seq[session_id] = seq + 1
        send(
            {
                "jsonrpc": "2.0",
                "method": "session.event",
                "params": {
                    "sessionId": session_id,
                    "event": {"type": type_, "seq": seq, "time": int(time.time() * 1000), "data": data},
                },
            }
        )

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
        self.simple_turn(session_id, content, answer, chunks)
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
                    "capabilities": {"providers": ["scripted"]},
                    "echoParams": params,
                },
            )
        elif method == "session/prompt":
            return self.prompt(request)
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

    def serve(self) -> int:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            self.last_line = line.decode("utf-8")
            request = json.loads(line)
            if not self.handle(request):
                break
        return 0


def main(runtime: FakeRuntime) -> None:
    sys.exit(runtime.serve())
