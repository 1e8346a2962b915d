#!/usr/bin/env python3
"""The MCP client under test for @modelcontextprotocol/conformance's client
scenarios: `conformance client --command "python3 conformance_client.py"
--scenario NAME` runs this with the scenario server's URL as the last
argument.

It starts harnessd on stdio with that URL as the streamable-HTTP server
`[mcp.conformance]`, waits until the server's tools are offered, then has the
scripted model call each of them once (arguments made from the tool's input
schema), and exits 0 when every call returned a result that is not an
error. The scenario server judges the client from what it received.
Environment: HARNESSD_BIN (default build/harnessd under the repository).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PREFIX = "mcp__conformance__"


def sample(schema: dict) -> object:
    """A value that fits a JSON Schema well enough for the scenario tools."""

    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind in ("number", "integer"):
        return 2
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(sub) for name, sub in props.items() if name in schema.get("required", props.keys())}
    return "conformance"


class Daemon:
    def __init__(self, url: str, workdir: Path) -> None:
        config = workdir / "harnessd.toml"
        config.write_text(f'[mcp.conformance]\nurl = {json.dumps(url)}\n')
        binary = os.environ.get("HARNESSD_BIN", str(REPO / "build" / "harnessd"))
        self.proc = subprocess.Popen(
            [binary, "--stdio", "--config", str(config), "--session-root", str(workdir / "sessions")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.next_id = 1

    def call(self, method: str, params: dict, on_event=None) -> dict:
        rid = self.next_id
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            frame = json.loads(line)
            if frame.get("id") == rid:
                if "error" in frame:
                    raise RuntimeError(f"{method}: {frame['error']}")
                return frame["result"]
            if on_event is not None and frame.get("method") == "session.event":
                on_event(frame["params"]["event"])
        raise RuntimeError(f"harnessd closed its output during {method}")

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(30)


def main() -> int:
    url = sys.argv[-1]
    with tempfile.TemporaryDirectory(prefix="harnessd-conformance-") as tmp:
        workdir = Path(tmp)
        daemon = Daemon(url, workdir)
        try:
            daemon.call("initialize", {"cwd": str(workdir), "provider": "scripted", "model": "scripted-1"})
            deadline = time.monotonic() + 20
            tools: list[dict] = []
            while time.monotonic() < deadline:
                tools = [t for t in daemon.call("tools/list", {})["tools"] if t["name"].startswith(PREFIX)]
                if tools:
                    break
                time.sleep(0.1)
            print(f"offered MCP tools: {[t['name'] for t in tools]}", file=sys.stderr)
            failures = 0
            for tool in tools:
                args = sample(tool.get("inputSchema", {"type": "object"}))
                results: list[dict] = []
                outcome = daemon.call(
                    "session/prompt",
                    {"sessionId": "conformance",
                     "contentBlocks": [{"type": "text", "text": f"@tool {tool['name']} {json.dumps(args)}"}]},
                    on_event=lambda ev: results.append(ev["data"]) if ev["type"] == "tool/result" else None)
                text = " ".join(b.get("text", "") for r in results for b in r.get("content", []))
                print(f"{tool['name']}({json.dumps(args)}): {outcome['status']}: {text[:200]}", file=sys.stderr)
                if outcome["status"] != "ok" or not results or any(r["isError"] for r in results):
                    failures += 1
        finally:
            rc = daemon.close()
        return 1 if failures or rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
