#!/usr/bin/env bash
# A/B of the light-session cell: two builds of harnessd, alternated, each
# under the same load. A second harness-bench runs HEAVY sessions of
# `@chunks 10 64` closed loop while one connection sends 50 prompts/s over
# LIGHT sessions; prints the light first-notification p50/p99 and the heavy
# run's notifications/s and CPU per 1k notifications. Server on core 0,
# clients on core 1, `--threads 1`, as in run.sh.
#
#   bench/light_ab.sh OLD_BUILD NEW_BUILD [STORE] [HEAVY] [ROUNDS] [LIGHT]
#   bench/light_ab.sh /tmp/base/build build memory 100 2 50
#
# A build dir must hold harnessd and harness-bench (cmake --preset ci builds
# both in build/). STORE: memory (default), jsonl, or postgres with PG_URL
# set (bench/pg_for_bench.py starts one).
set -euo pipefail
OLD=${1:?usage: light_ab.sh OLD_BUILD NEW_BUILD [STORE] [HEAVY] [ROUNDS] [LIGHT]}
NEW=${2:?usage: light_ab.sh OLD_BUILD NEW_BUILD [STORE] [HEAVY] [ROUNDS] [LIGHT]}
STORE=${3:-memory} HEAVY=${4:-100} ROUNDS=${5:-2} LIGHT=${6:-50}
# Seconds of light prompts per run: LIGHT_SECONDS=20 gives 1,000 samples.
LIGHT_SECONDS=${LIGHT_SECONDS:-4}
WORK=$(mktemp -d /tmp/light-ab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ulimit -n 65536 2>/dev/null || true

run() {
  local build=$1 label=$2 out=$WORK/$2
  rm -rf "$out" && mkdir -p "$out"
  local store=(--store memory)
  [[ $STORE == jsonl ]] && store=(--session-root "$out/sessions")
  [[ $STORE == postgres ]] && store=(--store postgres --postgres-url "${PG_URL:?STORE postgres needs PG_URL}")
  taskset -c 0 "$build/harnessd" --listen tcp://127.0.0.1:0 --ready-file "$out/ready" --threads 1 "${store[@]}" \
    2>"$out/harnessd.log" &
  local server=$!
  for _ in $(seq 100); do [[ -s $out/ready ]] && break; sleep 0.05; done
  local url
  url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["listen"][0])' "$out/ready")
  taskset -c 1 "$build/harness-bench" --connect "$url" --server-pid "$server" -N "$HEAVY" -K 10 -S 64 \
    --duration "$((LIGHT_SECONDS + 2))" --warmup 1 --drain-timeout 60 >"$out/heavy.txt" 2>&1 &
  local heavy=$!
  sleep 1.5
  taskset -c 1 "$build/harness-bench" --connect "$url" -N 1 -M "$LIGHT" -K 10 -S 64 --rate 50 --duration "$LIGHT_SECONDS" \
    --warmup 1 >"$out/light.txt" 2>&1 || true
  wait "$heavy" || true
  kill "$server" && wait "$server" 2>/dev/null || true
  python3 - "$out" "$label" <<'PY'
import re, sys
out, label = sys.argv[1], sys.argv[2]
light, heavy = open(out + "/light.txt").read(), open(out + "/heavy.txt").read()
first = re.search(r"first notif\.\s+(\S+)\s+(\S+)\s+(\S+)", light)
rate = re.search(r"prompts/s\s+(\d+) notifications/s", heavy)
cpu = re.search(r"\(([\d.]+) ms per 1k", heavy)
p50, p99 = (float(first.group(1)) / 1000, float(first.group(3)) / 1000) if first else (float("nan"),) * 2
print(f"{label}  light first notif. p50 {p50:7.2f} ms  p99 {p99:7.2f} ms | heavy "
      f"{rate.group(1) if rate else '?'} notif/s, {cpu.group(1) if cpu else '?'} ms CPU/1k notif.")
PY
}

echo "store $STORE, $HEAVY heavy sessions, 50 prompts/s over $LIGHT light sessions"
for _ in $(seq "$ROUNDS"); do
  run "$OLD" old
  run "$NEW" new
done
