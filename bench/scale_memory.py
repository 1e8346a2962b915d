#!/usr/bin/env python3
"""10,000 WebSocket sessions on the memory store, each prompting about every
10 s, with the descriptor limit at 20,000 (CTest scale_memory_10k).

Every session has at least two turns; harness-bench checks that each turn's
events continue the session's seqs (a session the daemon forgot would start
again at seq 0) and that every prompt is answered. Exit 0 only when every
turn passes, every prompt is served and the daemon stops cleanly."""
import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

FD_LIMIT = 20_000


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench", required=True, help="path to harness-bench")
    ap.add_argument("--harnessd", required=True, help="path to harnessd")
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=1_000, help="prompts/s over all sessions")
    ap.add_argument("--duration", type=float, default=20)
    args = ap.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < FD_LIMIT:
        print(f"scale_memory: the hard descriptor limit is {hard}; this check needs {FD_LIMIT}", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory(prefix="scale-memory-") as tmp:
        ready = os.path.join(tmp, "ready.json")
        # A file, not a pipe: 10,000 connections log more than a pipe holds.
        log = open(os.path.join(tmp, "harnessd.log"), "w+", encoding="utf-8")
        daemon = subprocess.Popen(
            [args.harnessd, "--listen", "ws://127.0.0.1:0", "--ready-file", ready, "--store", "memory"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=limit_descriptors)
        failed = False
        try:
            deadline = time.monotonic() + 15
            while not os.path.exists(ready):
                if daemon.poll() is not None or time.monotonic() > deadline:
                    print("scale_memory: harnessd did not become ready", file=sys.stderr)
                    return 1
                time.sleep(0.02)
            with open(ready, encoding="utf-8") as f:
                url = json.load(f)["listen"][0]
            report = os.path.join(tmp, "scale.json")
            cmd = [args.bench, "--connect", url, "--server-pid", str(daemon.pid), "-N", str(args.connections),
                   "-K", "100", "-S", "64", "--rate", str(args.rate), "--duration", str(args.duration),
                   "--warmup", "1", "--drain-timeout", "60", "--json", report, "--label", "scale_memory_10k"]
            print("scale_memory:", " ".join(cmd), flush=True)
            rc = subprocess.run(cmd, timeout=300, preexec_fn=limit_descriptors).returncode
            if rc != 0:
                print(f"scale_memory: harness-bench failed (exit {rc})", file=sys.stderr)
                failed = True
            else:
                with open(report, encoding="utf-8") as f:
                    print("scale_memory:", f.read()[:2000])
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
            if daemon.returncode != 0:
                log.seek(0)
                print(f"scale_memory: harnessd exited with {daemon.returncode}\n{log.read()[-2000:]}", file=sys.stderr)
                failed = True
            log.close()
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
