#!/usr/bin/env python3
"""How fast the SDK reads a runtime's stdout, next to a plain buffered reader.

The SDK once read its pipe one byte per system call and fell hundreds of
times behind the daemon. This measures one large turn (``@chunks 64
1048576`` by default: 128 MiB of frames) two ways, alternating rounds:

* ``plain``: ``subprocess.Popen`` with default buffering, ``for line in
  proc.stdout`` until the prompt's response; no JSON parsing.
* ``sdk``: ``DeepSeekHarness.run`` of the same prompt, which parses and
  collects every frame.

``--unbuffered`` adds one round of ``readline()`` on an unbuffered pipe,
the way the SDK used to read.

Two sources: ``daemon`` (harnessd with the scripted provider, the
end-to-end figure) and ``replay`` (the same bytes recorded once and written
back by a tiny runtime, so the daemon's own speed does not cap the figure:
the readers' ceiling). Last, it reports what an SDK turn leaves in memory
once its result is dropped.

Usage: python/bench/stdio_rate.py [--bin PATH] [--prompt TEXT] [--rounds N]
       [--source daemon|replay|both] [--store jsonl|memory] [--unbuffered]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "python"))

from deepseek_harness import DeepSeekHarness  # noqa: E402

MIB = 1 << 20
RECORDED_ID = "rate-record-000"

# Runtime for the replay source: answers initialize, then for each prompt
# writes the recorded notification bytes and a response with the prompt's id.
REPLAY_RUNTIME = r"""
import json, os, sys
recording = sys.argv[1]
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        result = {"serverInfo": {"name": "replay"}}
    elif method == "session/prompt":
        out.flush()
        with open(recording, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = 0
            while offset < size:
                offset += os.sendfile(out.fileno(), f.fileno(), offset, size - offset)
        result = {"status": "ok", "reason": {"kind": "completed"}}
    else:
        result = {}
    response = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
    out.write(json.dumps(response, separators=(",", ":")).encode() + b"\n")
    out.flush()
    if method == "shutdown":
        break
"""


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / MIB


def plain_round(argv: list[str], prompt: str, session_id: str, record: Path | None = None,
                buffered: bool = True) -> tuple[int, float]:
    """Bytes read until the prompt's response, and the seconds it took.

    ``buffered=False`` reads lines from the raw pipe, one byte per system
    call: how the SDK read before."""

    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            bufsize=-1 if buffered else 0)
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"provider":"scripted"}}\n')
        proc.stdin.flush()
        proc.stdout.readline()
        request = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "contentBlocks": [{"type": "text", "text": prompt}]},
        }
        sink = open(record, "wb") if record else None
        start = time.perf_counter()
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        total = 0
        for line in iter(proc.stdout.readline, b""):
            total += len(line)
            if line.startswith(b'{"jsonrpc":"2.0","id":2,'):
                break
            if sink:
                sink.write(line)
        elapsed = time.perf_counter() - start
        if sink:
            sink.close()
        return total, elapsed
    finally:
        proc.stdin.close()
        proc.wait()


def sdk_round(argv: list[str], prompt: str, session_id: str) -> float:
    """Seconds of one SDK turn."""

    with DeepSeekHarness(provider="scripted", launch_args_override=tuple(argv), request_timeout_seconds=600) as harness:
        start = time.perf_counter()
        result = harness.run(prompt, session_id=session_id)
        elapsed = time.perf_counter() - start
        assert result.status == "ok", result.reason
    return elapsed


def memory_round(argv: list[str], prompt: str, session_id: str, turns: int = 2) -> str:
    """What SDK turns leave behind once their results are dropped, while the
    harness stays open: Python objects still allocated (tracemalloc), the
    global queue, and resident memory after returning free heap to the OS,
    each against a baseline taken after a small warm-up turn."""

    libc = ctypes.CDLL(None)
    with DeepSeekHarness(provider="scripted", launch_args_override=tuple(argv), request_timeout_seconds=600) as harness:
        harness.run("warm up", session_id=session_id)
        gc.collect()
        libc.malloc_trim(0)
        rss_before = rss_mib()
        tracemalloc.start()
        traced_before = tracemalloc.get_traced_memory()[0]
        traced, rss = [], []
        for _ in range(turns):
            result = harness.run(prompt, session_id=session_id)
            held = sum(len(e.get("data", {}).get("chunk", {}).get("text", "")) for e in result.events) / MIB
            del result
            gc.collect()
            traced.append((tracemalloc.get_traced_memory()[0] - traced_before) / MIB)
            libc.malloc_trim(0)
            rss.append(rss_mib() - rss_before)
        peak = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
        queued = harness.client._notifications.qsize()
    return (f"each result held {held:.0f} MiB of chunk text (peak traced {peak:.0f} MiB); after dropping it: "
            f"traced Python memory {', '.join(f'{x:+.2f}' for x in traced)} MiB (the reader's block buffer), "
            f"global queue {queued} items, RSS after malloc_trim {', '.join(f'{x:+.1f}' for x in rss)} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.environ.get("HARNESSD_BIN") or str(REPO_ROOT / "build" / "harnessd"))
    parser.add_argument("--prompt", default="@chunks 64 1048576")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--source", choices=("daemon", "replay", "both"), default="both")
    parser.add_argument("--store", choices=("jsonl", "memory"), default="jsonl")
    parser.add_argument("--unbuffered", action="store_true",
                        help="also time one round of the raw-pipe reader (slow: use a small --prompt)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="stdio-rate-") as tmp:
        daemon = [args.bin, "--stdio", "--store", args.store, "--session-root", str(Path(tmp) / "sessions"),
                  "--log-level", "warn", "--max-turn-bytes", str(1 << 30)]  # a 128 MiB turn is the point
        recording = Path(tmp) / "turn.ndjson"
        size, _ = plain_round(daemon, args.prompt, RECORDED_ID, record=recording)
        replay_script = Path(tmp) / "replay.py"
        replay_script.write_text(REPLAY_RUNTIME)
        sources = {"daemon": daemon, "replay": [sys.executable, str(replay_script), str(recording)]}
        chosen = ["daemon", "replay"] if args.source == "both" else [args.source]
        print(f"turn: {args.prompt!r}, {size / MIB:.1f} MiB of frames; {args.rounds} rounds each; "
              f"harnessd store {args.store}")
        for name in chosen:
            argv = sources[name]
            plain: list[float] = []
            sdk: list[float] = []
            for i in range(args.rounds):
                # Same id length in both, so the byte counts match.
                nbytes, seconds = plain_round(argv, args.prompt, f"rate-plain-{i:04d}")
                plain.append(nbytes / MIB / seconds)
                # The replayed frames name the recorded session; the SDK's
                # run must use it too, or its subscription sees nothing.
                sdk_id = RECORDED_ID if name == "replay" else f"rate-sdk---{i:04d}"
                sdk.append(nbytes / MIB / sdk_round(argv, args.prompt, sdk_id))
            if args.unbuffered:
                nbytes, seconds = plain_round(argv, args.prompt, "rate-unbuf-0000", buffered=False)
                print(f"{name:7s} unbuffered raw-pipe readline {nbytes / MIB / seconds:8.2f} MiB/s")
            p, s = statistics.median(plain), statistics.median(sdk)
            print(f"{name:7s} plain buffered reader {p:8.1f} MiB/s   SDK {s:8.1f} MiB/s   "
                  f"SDK/plain {100 * s / p:5.1f}%   (median of {args.rounds}; "
                  f"runs plain {', '.join(f'{x:.1f}' for x in plain)}; sdk {', '.join(f'{x:.1f}' for x in sdk)})")
            if name == chosen[-1]:
                sdk_id = RECORDED_ID if name == "replay" else "rate-memory-000"
                print(f"{'':7s} memory: {memory_round(argv, args.prompt, sdk_id)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
