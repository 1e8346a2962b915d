#!/usr/bin/env python3
"""The long-session cell: does a turn cost more on a session with a long
history? A session of about 10,000 logged events against one of 10, on the
same daemon (jsonl store, sync per turn, stdio), each then running the same
prompts. The scripted provider needs no request body, so what is measured is
the daemon's own per-turn work: the turn loop, the context estimate, the
log, the outbox.

    bench/long_session.py [--harnessd build/harnessd] [--turns 300]

Target (the context issue): the long session's turn within 1.2x of the short
one's (the daemon's work must not grow with the history; only a real model's
request does). Prints one JSON line."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Stdio:
    def __init__(self, harnessd: str, root: Path):
        self.proc = subprocess.Popen([harnessd, "--stdio", "--session-root", str(root), "--log-level", "warn",
                                      "--context-window", "100000000"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     bufsize=0)
        self.next_id = 0
        self.call("initialize", {})

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        rid = self.next_id
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                          "params": params}).encode() + b"\n")
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("harnessd exited")
            msg = json.loads(line)
            if msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def prompt(self, session: str, text: str) -> float:
        start = time.perf_counter()
        result = self.call("session/prompt", {"sessionId": session, "contentBlocks": [{"type": "text", "text": text}]})
        assert result["status"] == "ok", result
        return time.perf_counter() - start

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harnessd", default=str(ROOT / "build" / "harnessd"))
    ap.add_argument("--turns", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Stdio(args.harnessd, Path(tmp))
        d.prompt("short", "hello")
        # About 10 events a turn: 1000 turns make the long history.
        for i in range(1000):
            d.prompt("long", f"history turn {i}: some ordinary words of a prompt")
        events = d.call("session/list", {})["sessions"]
        long_seq = next(s["lastSeq"] for s in events if s["sessionId"] == "long")
        timings = {"short": [], "long": []}
        for i in range(args.turns):  # interleaved, so drift hits both alike
            for session in ("short", "long"):
                timings[session].append(d.prompt(session, "@chunks 10 64"))
        d.close()
    short, long = (statistics.median(timings[s]) * 1e3 for s in ("short", "long"))
    ratio = long / short
    print(json.dumps({"cell": "long-session", "long_session_events": long_seq + 1,
                      "turn_ms_p50_short": round(short, 3), "turn_ms_p50_long": round(long, 3),
                      "ratio": round(ratio, 3), "target": "<= 1.2", "met": ratio <= 1.2}))


if __name__ == "__main__":
    main()
