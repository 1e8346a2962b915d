#!/usr/bin/env python3
"""How close the jsonl store is to what this disk permits on one core.

Runs one load cell three ways, each server pinned to core 0 with harness-bench
on core 1: harnessd on the memory store, harnessd on the jsonl store
(`--sync turn`, the default), then `log-floor` alone: the same appends
(bytes and lines per turn, as counted in the jsonl run's own logs) and the
same group syncs, with no sockets, JSON or turn loop. If persisting costs
the core F CPU-µs per turn and everything else costs M (the memory run's
CPU per turn on its saturated core), then jsonl can reach at most
M / (M + F) of the memory store's rate on that core: the ceiling.

    bench/log_floor.py [--build build-bench] [-N 100 -K 100 -S 64] [--transport tcp]
    bench/log_floor.py --shape SESSION_ROOT

--shape prints the bytes and lines a turn appended to the logs under
SESSION_ROOT ("27764 109.1"), for a log-floor run shaped like a cell that
bench/run.sh has just measured.

Prints one JSON line: both rates, the floor's CPU per turn, the ceiling, and
the jsonl rate as a share of the memory rate and of the ceiling."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pinned(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if shutil.which("taskset") and (os.cpu_count() or 1) >= 2 else []


class Server:
    def __init__(self, harnessd: str, work: Path, store_args: list[str]):
        ready = work / "ready.json"
        ready.unlink(missing_ok=True)
        self.proc = subprocess.Popen(pinned(0) + [harnessd, "--listen", "tcp://127.0.0.1:0", "--listen",
                                                  "ws://127.0.0.1:0", "--ready-file", str(ready), "--threads", "1",
                                                  "--log-level", "warn"] + store_args,
                                     stderr=open(work / "harnessd.log", "ab"))
        deadline = time.monotonic() + 10
        while not (ready.exists() and ready.stat().st_size > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"harnessd did not start (see {work / 'harnessd.log'})")
            time.sleep(0.05)
        self.urls = {url.split(":")[0]: url for url in json.loads(ready.read_text())["listen"]}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def load(bench: str, server: Server, args, out: Path) -> dict:
    subprocess.run(pinned(1) + [bench, "--connect", server.urls[args.transport], "--server-pid", str(server.proc.pid),
                                "-N", str(args.N), "-K", str(args.K), "-S", str(args.S), "--duration",
                                str(args.duration), "--warmup", str(args.warmup), "--json", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    if not result["pass"]:
        raise RuntimeError(f"the load cell failed: {out}")
    return result


def log_shape(root: Path) -> tuple[float, float]:
    """Bytes and lines appended per turn, from the logs themselves."""
    size = lines = turns = 0
    for log in root.rglob("*.jsonl"):
        data = log.read_bytes()
        size += len(data)
        lines += data.count(b"\n")
        turns += data.count(b'"type":"turn/end"')
    if turns == 0:
        raise RuntimeError(f"no turns in {root}")
    return size / turns, lines / turns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(ROOT / "build-bench"), help="where harnessd, harness-bench and log-floor are")
    ap.add_argument("-N", type=int, default=100)
    ap.add_argument("-K", type=int, default=100)
    ap.add_argument("-S", type=int, default=64)
    ap.add_argument("--transport", choices=["tcp", "ws"], default="tcp")
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--work", help="a directory on the disk under test (default: a temporary one under --build)")
    ap.add_argument("--shape", metavar="SESSION_ROOT", help="only print the bytes and lines per turn of these logs")
    args = ap.parse_args()
    if args.shape:
        turn_bytes, lines = log_shape(Path(args.shape))
        print(f"{round(turn_bytes)} {round(lines)}")
        return
    build = Path(args.build)
    harnessd, bench, floor = str(build / "harnessd"), str(build / "harness-bench"), str(build / "log-floor")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="log-floor-", dir=build))
    work.mkdir(parents=True, exist_ok=True)
    try:
        server = Server(harnessd, work, ["--store", "memory"])
        try:
            memory = load(bench, server, args, work / "memory.json")
        finally:
            server.stop()
        sessions = work / "sessions"
        server = Server(harnessd, work, ["--session-root", str(sessions)])
        try:
            jsonl = load(bench, server, args, work / "jsonl.json")
        finally:
            server.stop()
        turn_bytes, lines = log_shape(sessions)
        shutil.rmtree(sessions)
        floor_run = subprocess.run(pinned(0) + [floor, "--dir", str(work / "floor"), "--logs", str(args.N),
                                                "--turn-bytes", str(round(turn_bytes)), "--events", str(round(lines)),
                                                "--seconds", str(args.duration)],
                                   check=True, capture_output=True, text=True)
        floor_result = json.loads(floor_run.stdout)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    # CPU per turn of the memory run: its core is saturated (closed loop), so
    # it is the server's CPU seconds over the turns it answered in the window.
    memory_cpu_us = memory["server_cpu_seconds"] * 1e6 / memory["prompts"]
    floor_cpu_us = floor_result["cpu_us_per_turn"]
    ceiling_share = memory_cpu_us / (memory_cpu_us + floor_cpu_us)
    jsonl_share = jsonl["prompts_per_s"] / memory["prompts_per_s"]
    print(json.dumps({
        "cell": f"{args.transport} N={args.N} K={args.K} S={args.S}",
        "memory_notifications_per_s": memory["notifications_per_s"],
        "jsonl_notifications_per_s": jsonl["notifications_per_s"],
        "jsonl_share_of_memory": round(jsonl_share, 3),
        "log_bytes_per_turn": round(turn_bytes),
        "log_lines_per_turn": round(lines, 1),
        "memory_cpu_us_per_turn": round(memory_cpu_us, 2),
        "jsonl_cpu_us_per_turn": round(jsonl["server_cpu_seconds"] * 1e6 / jsonl["prompts"], 2),
        "floor_cpu_us_per_turn": round(floor_cpu_us, 2),
        "floor_turns_per_s_alone": floor_result["turns_per_s"],
        "ceiling_share_of_memory": round(ceiling_share, 3),
        "jsonl_share_of_ceiling": round(jsonl_share / ceiling_share, 3),
        "other_cpu_cores": max(memory["other_cpu_cores"], jsonl["other_cpu_cores"]),
    }))


if __name__ == "__main__":
    main()
