#!/usr/bin/env python3
"""A stdio MCP server that misbehaves on request, for harnessd's MCP client
tests (test_mcp.py): invalid UTF-8, oversized and garbage lines, paginated
tools/list, list_changed, calls that never answer, exits.

  fake_mcp_server.py [--log FILE] [--down-file FILE] [--pages N] [--version V]

--log: every message received is appended as one JSON line (so a test can
see notifications/cancelled); --down-file: while that file exists the
server exits at once with status 3 (a server that cannot start);
--pages: tools/list is served one tool per page with nextCursor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

out_lock = threading.Lock()


def send_raw(data: bytes) -> None:
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def send(obj) -> None:
    send_raw(json.dumps(obj).encode() + b"\n")


def text_result(rid, text: str, is_error: bool = False) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}], "isError": is_error}})


TOOLS = [
    {"name": "echo", "description": "Echoes its text.", "annotations": {"readOnlyHint": True},
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "sleep", "description": "Never answers until cancelled.", "inputSchema": {"type": "object"}},
    {"name": "exit", "description": "Exits the server.", "inputSchema": {"type": "object"}},
    {"name": "bad_utf8", "description": "Answers with invalid UTF-8.", "inputSchema": {"type": "object"}},
    {"name": "huge", "description": "Answers with a line over 16 MiB.", "inputSchema": {"type": "object"}},
    {"name": "garbage", "description": "Sends garbage lines, then answers.", "inputSchema": {"type": "object"}},
    {"name": "grow", "description": "Adds a tool and says the list changed.", "inputSchema": {"type": "object"}},
    {"name": "fails", "description": "Answers isError.", "inputSchema": {"type": "object"}},
    {"name": "ping_me", "description": "Pings the client, then answers.", "inputSchema": {"type": "object"}},
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log")
    ap.add_argument("--down-file")
    ap.add_argument("--pages", type=int, default=0)
    ap.add_argument("--version", default="2025-06-18")
    args = ap.parse_args()
    if args.down_file and os.path.exists(args.down_file):
        print("fake: told to stay down", file=sys.stderr, flush=True)
        return 3
    print(f"fake: started pid {os.getpid()}", file=sys.stderr, flush=True)
    tools = list(TOOLS)
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps(msg) + "\n")
        method = msg.get("method")
        rid = msg.get("id")
        if method is None:
            continue  # an answer to our ping, or a notification
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": args.version, "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake", "version": "1"}}})
        elif method == "tools/list":
            if args.pages:
                index = int(msg.get("params", {}).get("cursor") or 0)
                page = {"tools": tools[index:index + 1]}
                if index + 1 < len(tools):
                    page["nextCursor"] = str(index + 1)
                send({"jsonrpc": "2.0", "id": rid, "result": page})
            else:
                send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            name = msg["params"]["name"]
            arguments = msg["params"].get("arguments", {})
            if name in ("echo", "grown"):
                text_result(rid, f"{name}: {arguments.get('text', '')}")
            elif name == "sleep":
                pass  # the answer never comes
            elif name == "exit":
                os._exit(0)
            elif name == "bad_utf8":
                # Raw bytes inside a JSON string: \xff and a cut sequence.
                send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() +
                         b',"result":{"content":[{"type":"text","text":"bad \xff here \xe2\x82"}]}}\n')
            elif name == "huge":
                send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() +
                         b',"result":{"content":[{"type":"text","text":"' + b"x" * (17 << 20) + b'"}]}}\n')
            elif name == "garbage":
                send_raw(b"this is not json\n\n[1,2\n\x00\x01\x02\n{\"jsonrpc\":\"2.0\",\"id\":\"nobody\",\"result\":{}}\n")
                send_raw(b'"just a string"\n{"jsonrpc":"2.0","id":999999,"result":{}}\n')
                text_result(rid, "after garbage")
            elif name == "grow":
                if not any(t["name"] == "grown" for t in tools):
                    tools.append({"name": "grown", "description": "Added at runtime.",
                                  "annotations": {"readOnlyHint": True}, "inputSchema": {"type": "object"}})
                text_result(rid, "grew")
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            elif name == "fails":
                text_result(rid, "it went wrong", is_error=True)
            elif name == "ping_me":
                send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
                send({"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage", "params": {}})
                time.sleep(0.2)
                text_result(rid, "pinged")
            else:
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {name}"}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
