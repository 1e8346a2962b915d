"""A tiny stand-in for harnessd used by the fake-runtime tests.

`FakeRuntime` answers initialize, session/prompt, session/cancel and
shutdown the way PROTOCOL.md describes, with hooks that the individual fake
scripts override to misbehave in one specific way.

Prompt directives understood by every fake:
  @hang        never answer this prompt
  @env NAME    answer with the value of environment variable NAME
  @stderr TEXT write TEXT to stderr, then answer normally
anything else is answered "echo: TEXT".
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

    # -- hooks -------------------------------------------------------------
    def before_response(self, request: dict) -> None:
        """Called right before the response to *request* is written."""

    def prompt_result(self, session_id: str, text: str) -> object:
        return {"status": "ok", "reason": {"kind": "completed"}}

    # -- behaviour ---------------------------------------------------------
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

    def respond(self, request: dict, result: object) -> None:
        self.before_response(request)
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def handle(self, request: dict) -> bool:
        """Handle one request; return False to stop."""

        method = request.get("method")
        params = request.get("params") or {}
        if method == "initialize":
            self.respond(
                request,
                {
                    "serverInfo": {"name": "deepseek-harness-sdk-runtime", "version": "0.0.0", "implementation": "fake"},
                    "protocolVersion": 1,
                    "capabilities": {"providers": ["scripted"], "methods": ["initialize", "session/prompt", "session/cancel", "shutdown"]},
                    "echoParams": params,
                },
            )
        elif method == "session/prompt":
            session_id = params["sessionId"]
            text = prompt_text(params)
            if text.startswith("@hang"):
                return True
            if text.startswith("@stderr "):
                sys.stderr.write(text[len("@stderr "):] + "\n")
                sys.stderr.flush()
            if text.startswith("@env "):
                answer = os.environ.get(text[len("@env "):].strip(), "<unset>")
            else:
                answer = f"echo: {text}"
            turn = self.turns.get(session_id, 0)
            self.turns[session_id] = turn + 1
            self.event(session_id, "turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
            self.event(session_id, "user/message", {"content": params["contentBlocks"], "source": {"kind": "user"}})
            self.event(session_id, "step/start", {"turn": turn, "step": 0})
            self.event(
                session_id,
                "assistant/message",
                {"turn": turn, "step": 0, "content": [{"type": "text", "text": answer}], "provenance": {"provider": "fake", "model": "fake"}},
            )
            self.event(session_id, "step/end", {"turn": turn, "step": 0})
            self.event(session_id, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            self.respond(request, self.prompt_result(session_id, text))
        elif method == "session/cancel":
            self.respond(request, {"cancelled": False})
        elif method == "shutdown":
            self.respond(request, {})
            return False
        else:
            self.before_response(request)
            send({"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": f"method not found: {method}"}})
        return True

    def serve(self) -> int:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            request = json.loads(line)
            if not self.handle(request):
                break
        return 0


def main(runtime: FakeRuntime) -> None:
    sys.exit(runtime.serve())
