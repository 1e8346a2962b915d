#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, own build directory) and runs each
# for SECONDS (default 300) from a scratch copy of its seed corpus, so a run
# never grows the committed corpus. Exits non-zero if any harness fails.
#   tests/fuzz/run.sh [SECONDS]
# Env: FUZZ_BUILD_DIR (default build/fuzz), FUZZ_BUILD_JOBS (ninja -j,
# default: nproc), FUZZ_TARGETS (space-separated subset, default: all),
# FUZZ_SEED and FUZZ_RUNS: with both set, each harness runs exactly RUNS
# inputs from that seed (SECONDS is then only a cap), so a run is
# reproducible: what CI runs. Without them, a random seed for SECONDS:
# what a developer runs to find new bugs.
set -euo pipefail

seconds="${1:-300}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build/fuzz}"
jobs="${FUZZ_BUILD_JOBS:-$(nproc)}"

# target -> -max_len: a few KiB reaches every limit the harness sets (they
# scale the parsers' limits down) while keeping executions fast.
declare -A max_len=(
  [line_framer]=4096
  [codec]=4096
  [sse_parser]=8192
  [openai_stream]=8192
  [scripted]=1024
  [listen_url]=256
  [jsonl_store]=8192
  [utf8]=4096
)
targets=(${FUZZ_TARGETS:-line_framer codec sse_parser openai_stream scripted listen_url jsonl_store utf8})

start=$SECONDS
if [[ ! -f "$build/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DHARNESSD_FUZZ=ON \
    -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$build" -j "$jobs" $(printf 'fuzz_%s ' "${targets[@]}")
echo "fuzz: built in $((SECONDS - start)) s"

scratch="$(mktemp -d "${TMPDIR:-/tmp}/harnessd-fuzz-run.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# Crash inputs outlive the scratch directory: they are what a report needs.
artifacts="$build/artifacts"
mkdir -p "$artifacts"

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

limits=(-max_total_time="$seconds")
if [[ -n "${FUZZ_SEED:-}" && -n "${FUZZ_RUNS:-}" ]]; then
  limits+=(-seed="$FUZZ_SEED" -runs="$FUZZ_RUNS")
fi

failed=()
for t in "${targets[@]}"; do
  corpus="$scratch/$t"
  mkdir -p "$corpus" "$artifacts/$t"
  cp "$root/tests/fuzz/corpus/$t/"* "$corpus/"
  log="$scratch/$t.log"
  if "$build/fuzz/fuzz_$t" "$corpus" "${limits[@]}" -max_len="${max_len[$t]}" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t/" >"$log" 2>&1; then
    echo "fuzz_$t: ok, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs," \
         "corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "fuzz_$t: FAILED; last lines of its log:"
    tail -n 60 "$log"
    ls -1 "$artifacts/$t/" | sed "s|^|  input: $artifacts/$t/|"
    failed+=("$t")
  fi
done

echo "fuzz: total $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "fuzz: failing harnesses: ${failed[*]}"
  exit 1
fi
