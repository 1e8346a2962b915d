#!/usr/bin/env bash
# What following a session costs the turn that feeds it: one session's turns
# with no subscriber and with N (default 1000) connections subscribed to it,
# in the default store (jsonl, --sync turn). The server is pinned to core 0
# with one I/O thread; harness-bench and its subscribers to core 1. The turn
# duration is read from the session log (turn/start to turn/end times), so
# it is the daemon's figure, not the client's.
#
#   bench/subscribers.sh [BUILD_DIR]        default build/ (harnessd, harness-bench)
#   SUBSCRIBERS=200 DURATION=4 bench/subscribers.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
SUBSCRIBERS=${SUBSCRIBERS:-1000}
DURATION=${DURATION:-6}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
ulimit -n "$(ulimit -Hn)"

turn_ms() {  # median turn duration (ms) and turn count of every log under $1
  python3 - "$1" <<'PY'
import glob, json, statistics, sys
durations = []
for path in glob.glob(sys.argv[1] + "/*.jsonl"):
    start = None
    for line in open(path).read().splitlines()[1:]:
        event = json.loads(line)
        if event["type"] == "turn/start":
            start = event["time"]
        elif event["type"] == "turn/end" and start is not None:
            durations.append(event["time"] - start)
print(f"{statistics.median(durations):.1f} {len(durations)}" if durations else "- 0")
PY
}

cell() {  # name chunks delay_ms subscribers
  local name=$1 chunks=$2 delay=$3 subs=$4 root=$OUT/$1
  taskset -c 0 "$BUILD/harnessd" --threads 1 --listen tcp://127.0.0.1:0 --ready-file "$OUT/ready.json" \
    --session-root "$root" 2>"$OUT/$name.log" &
  local pid=$!
  for _ in $(seq 100); do [[ -s $OUT/ready.json ]] && break; sleep 0.05; done
  local url
  url=$(python3 -c "import json,sys; print([u for u in json.load(open(sys.argv[1]))['listen'] if u.startswith('tcp')][0])" "$OUT/ready.json")
  local report
  report=$(taskset -c 1 "$BUILD/harness-bench" --connect "$url" -N 1 -M 1 -K "$chunks" -S 64 --delay-ms "$delay" \
    --duration "$DURATION" --warmup 2 --subscribers "$subs" --server-pid "$pid" || true)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$OUT/ready.json"
  read -r median turns < <(turn_ms "$root")
  local delivered cut
  delivered=$(sed -n 's/.*; \([0-9]*\) notifications\/s delivered.*/\1/p' <<<"$report")
  cut=$(sed -n 's/.* subscribed, \([0-9]*\) cut off.*/\1/p' <<<"$report")
  local cpu
  cpu=$(sed -n 's/^server *CPU \([0-9.]*\) s.*/\1/p' <<<"$report")
  printf '| %-34s | %11s | %6s | %8s | %14s | %4s |\n' "$name" "$median" "$turns" "${cpu:--}" "${delivered:-0}" "${cut:-0}"
}

echo "| turn (one session), subscribers | median turn ms | turns | server CPU s | to subscribers/s | cut |"
echo "|---|---:|---:|---:|---:|---:|"
cell "@chunks 200 64 @delay 1, none" 200 1 0
cell "@chunks 200 64 @delay 1, $SUBSCRIBERS" 200 1 "$SUBSCRIBERS"
cell "@chunks 1000 64, none" 1000 0 0
cell "@chunks 1000 64, $SUBSCRIBERS" 1000 0 "$SUBSCRIBERS"
