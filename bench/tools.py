#!/usr/bin/env python3
"""The tools cell: does tool work delay other sessions' notifications, and
how fast is grep?

1. A light session runs `@chunks 10 64` prompts (harness-bench, one
   connection, open loop) with no other load: its first-notification p50/p99.
2. The same while 20 sessions, each on its own connection, `grep` a tree of
   20,000 files over and over (`@tool grep`), so the tool pool is always busy.
3. One `grep` over the tree, timed from the prompt to its answer, as files/s,
   against `grep -r` (and `rg` when installed) on the same tree.

    bench/tools.py [--harnessd build/harnessd] [--bench build/harness-bench] [--seconds 5]

Targets (the tools issue): the light p99 under tool load within 2x of the
unloaded one and at most 5 ms; grep within 2x of rg (or of grep -r).
Everything runs on loopback and stops by itself."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_tree(root: Path, files: int) -> None:
    """`files` small source-like files in nested directories; one in 1000 holds the needle."""
    for i in range(files):
        d = root / f"d{i % 50:02d}" / f"e{(i // 50) % 20:02d}"
        d.mkdir(parents=True, exist_ok=True)
        body = "".join(f"line {j} of file {i}: some ordinary text here\n" for j in range(40))
        if i % 1000 == 0:
            body += "the needle is here\n"
        (d / f"f{i}.txt").write_text(body)


def start_daemon(harnessd: str, workdir: Path, extra: list[str]) -> tuple[subprocess.Popen, int]:
    ready = workdir / "ready.json"
    proc = subprocess.Popen([harnessd, "--listen", "tcp://127.0.0.1:0", "--ready-file", str(ready),
                             "--store", "memory", "--workspace-root", str(workdir / "roots"), "--log-level", "warn",
                             *extra],
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if ready.exists():
            try:
                url = json.loads(ready.read_text())["listen"][0]
                return proc, int(url.rsplit(":", 1)[1])
            except (ValueError, KeyError, IndexError):
                pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("harnessd did not start")


class Client:
    """A blocking NDJSON client: one request at a time."""

    def __init__(self, port: int, cwd: str):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")
        self.next_id = 0
        self.call("initialize", {"cwd": cwd})

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        rid = self.next_id
        self.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("connection closed")
            frame = json.loads(line)
            if frame.get("id") == rid:
                return frame

    def close(self) -> None:
        self.sock.close()


GREP = '@tool grep {"pattern": "needle"}'


def grep_load(port: int, stop: threading.Event, count: list[int], index: int) -> None:
    client = Client(port, "tree")
    while not stop.is_set():
        resp = client.call("session/prompt", {"sessionId": f"grep-{index}",
                                              "contentBlocks": [{"type": "text", "text": GREP}]})
        assert resp.get("result", {}).get("status") == "ok", resp
        count[index] += 1
    client.close()


def light(bench: str, port: int, seconds: float, label: str) -> dict:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    subprocess.run([bench, "--connect", f"tcp://127.0.0.1:{port}", "-N", "1", "-K", "10", "-S", "64",
                    "--rate", "50", "--duration", str(seconds), "--warmup", "1", "--json", str(out),
                    "--label", label], check=True, stdout=subprocess.DEVNULL)
    data = json.loads(out.read_text())
    out.unlink()
    return data


def first_notification(data: dict) -> tuple[float, float]:
    cell = data["cells"][0] if "cells" in data else data
    lat = cell["latency_first_notification_us"]
    return lat["p50"] / 1000, lat["p99"] / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harnessd", default=str(ROOT / "build" / "harnessd"))
    ap.add_argument("--bench", default=str(ROOT / "build" / "harness-bench"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--daemon-arg", action="append", default=[], help="extra harnessd argument (repeatable)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="harnessd-tools-bench-") as tmp:
        work = Path(tmp)
        tree = work / "roots" / "tree"
        print(f"making {args.files} files ...", file=sys.stderr)
        make_tree(tree, args.files)
        proc, port = start_daemon(args.harnessd, work, args.daemon_arg)
        try:
            base50, base99 = first_notification(light(args.bench, port, args.seconds, "light, no load"))

            stop = threading.Event()
            count = [0] * args.sessions
            threads = [threading.Thread(target=grep_load, args=(port, stop, count, i)) for i in range(args.sessions)]
            for t in threads:
                t.start()
            time.sleep(1)
            before = sum(count)
            started = time.monotonic()
            load50, load99 = first_notification(light(args.bench, port, args.seconds, "light beside grep"))
            greps = (sum(count) - before) / (time.monotonic() - started)
            stop.set()
            for t in threads:
                t.join()

            client = Client(port, "tree")
            runs = []
            for i in range(3):
                t0 = time.monotonic()
                resp = client.call("session/prompt", {"sessionId": f"timed-{i}",
                                                      "contentBlocks": [{"type": "text", "text": GREP}]})
                runs.append(time.monotonic() - t0)
                assert resp.get("result", {}).get("status") == "ok", resp
            client.close()
        finally:
            proc.terminate()
            proc.wait(10)

        ours = args.files / min(runs)
        peers = {}
        for name, cmd in (("grep -r", ["grep", "-r", "-n", "needle", str(tree)]),
                          ("rg", ["rg", "-n", "--no-ignore", "needle", str(tree)])):
            if shutil.which(cmd[0]) is None:
                continue
            best = None
            for _ in range(3):
                t0 = time.monotonic()
                subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
                elapsed = time.monotonic() - t0
                best = elapsed if best is None else min(best, elapsed)
            peers[name] = args.files / best

    print(f"light session @chunks 10 64, first notification: no load p50 {base50:.2f} ms p99 {base99:.2f} ms; "
          f"beside {args.sessions} grep sessions ({greps:.1f} greps/s of {args.files} files) "
          f"p50 {load50:.2f} ms p99 {load99:.2f} ms (p99 ratio {load99 / base99:.2f}x)")
    line = f"grep over {args.files} files: harnessd {ours:,.0f} files/s (a whole prompt, best of 3)"
    for name, rate in peers.items():
        line += f"; {name} {rate:,.0f} files/s (harnessd/{name} = {ours / rate:.2f})"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
