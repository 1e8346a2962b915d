#!/usr/bin/env python3
"""The network half of the bench smoke test (CTest bench_smoke_network):
start harnessd on free TCP and WebSocket ports, run `harness-bench --smoke`
against each, stop the daemon. Exit 0 only when every run passes and the
daemon stops cleanly."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench", required=True, help="path to harness-bench")
    ap.add_argument("--harnessd", required=True, help="path to harnessd")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as tmp:
        ready = os.path.join(tmp, "ready.json")
        daemon = subprocess.Popen(
            [args.harnessd, "--listen", "tcp://127.0.0.1:0", "--listen", "ws://127.0.0.1:0",
             "--ready-file", ready, "--store", "memory"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        failed = False
        try:
            deadline = time.monotonic() + 15
            while not os.path.exists(ready):
                if daemon.poll() is not None or time.monotonic() > deadline:
                    print("smoke: harnessd did not become ready", file=sys.stderr)
                    return 1
                time.sleep(0.02)
            with open(ready, encoding="utf-8") as f:
                urls = json.load(f)["listen"]
            ws = next(u for u in urls if u.startswith("ws://"))
            metrics = "http://" + ws[len("ws://"):].rstrip("/") + "/metrics"
            for url in urls:
                cmd = [args.bench, "--smoke", "--connect", url, "--server-pid", str(daemon.pid),
                       "--metrics-url", metrics]
                print("smoke:", " ".join(cmd), flush=True)
                rc = subprocess.run(cmd, timeout=60).returncode
                if rc != 0:
                    print(f"smoke: {url} failed (exit {rc})", file=sys.stderr)
                    failed = True
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            try:
                _, err = daemon.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                _, err = daemon.communicate()
            if daemon.returncode != 0:
                print(f"smoke: harnessd exited with {daemon.returncode}\n{err[-2000:]}", file=sys.stderr)
                failed = True
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
