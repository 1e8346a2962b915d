#!/usr/bin/env bash
# Builds tests/coroutine_probe/probe.cpp with g++ and clang++-16 at several
# flag sets, runs every pattern in its own process and prints a table
# compiler x flags x pattern -> PASS / FAIL / CRASH / SKIP.
#
#   tests/coroutine_probe/run.sh [WORKDIR]
#
# WORKDIR (default: a fresh mktemp -d) receives the binaries and one log per
# run; nothing is written inside the repository. Compiles run one at a time.
# Environment: CXX_GCC (default g++), CXX_CLANG (default clang++-16),
# CONFIGS (space-separated subset of the config names below).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/probe.cpp"
work="${1:-$(mktemp -d "${TMPDIR:-/tmp}/coroutine_probe.XXXXXX")}"
mkdir -p "$work/logs"

gcc_cxx="${CXX_GCC:-g++}"
clang_cxx="${CXX_CLANG:-clang++-16}"

common="-std=c++20 -g -fno-omit-frame-pointer -pthread -DBOOST_ASIO_NO_DEPRECATED"
# Asio caches freed coroutine frames for reuse; switched off under ASan so a
# frame used after it was freed is reported instead of silently recycled.
san="-fsanitize=address,undefined -DBOOST_ASIO_DISABLE_AWAITABLE_FRAME_RECYCLING"

declare -A cfg_cxx cfg_flags
configs_all="gcc-O1-asan gcc-O2-asan gcc-O2 clang-O1-asan clang-O2-asan clang-O2"
cfg_cxx[gcc-O1-asan]=$gcc_cxx;     cfg_flags[gcc-O1-asan]="-O1 $san"
cfg_cxx[gcc-O2-asan]=$gcc_cxx;     cfg_flags[gcc-O2-asan]="-O2 $san"
cfg_cxx[gcc-O2]=$gcc_cxx;          cfg_flags[gcc-O2]="-O2"
cfg_cxx[clang-O1-asan]=$clang_cxx; cfg_flags[clang-O1-asan]="-O1 $san"
cfg_cxx[clang-O2-asan]=$clang_cxx; cfg_flags[clang-O2-asan]="-O2 $san"
cfg_cxx[clang-O2]=$clang_cxx;      cfg_flags[clang-O2]="-O2"
configs="${CONFIGS:-$configs_all}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

echo "work dir: $work"
"$gcc_cxx" --version | head -1
"$clang_cxx" --version | head -1

# Build (sequentially: the machine is shared).
declare -A built
for c in $configs; do
  bin="$work/probe-$c"
  start=$(date +%s)
  # shellcheck disable=SC2086
  if "${cfg_cxx[$c]}" $common ${cfg_flags[$c]} "$src" -o "$bin" >"$work/logs/build-$c.log" 2>&1; then
    built[$c]=1
    echo "built $c in $(( $(date +%s) - start ))s"
  else
    built[$c]=0
    echo "BUILD FAILED $c (see $work/logs/build-$c.log)"
  fi
done

# What GCC says about the braced-list shapes that are compiled out for it.
echo
echo "g++ with -DPROBE_INITLIST_IN_AWAIT=1 (syntax check only):"
"$gcc_cxx" $common -DPROBE_INITLIST_IN_AWAIT=1 -fsyntax-only "$src" 2>&1 \
  | grep -E 'error' | sed 's/^/  /' | head -5
echo "clang++ with -DPROBE_INITLIST_IN_AWAIT=1 (syntax check only):"
if "$clang_cxx" $common -DPROBE_INITLIST_IN_AWAIT=1 -fsyntax-only "$src" >/dev/null 2>&1; then
  echo "  compiles"
else
  echo "  errors"
fi

# Pattern list from the first binary that built.
patterns=""
declare -A rule
for c in $configs; do
  if [ "${built[$c]}" = 1 ]; then
    while read -r name r; do
      patterns="$patterns $name"
      rule[$name]=$r
    done < <("$work/probe-$c" --list)
    break
  fi
done
[ -n "$patterns" ] || { echo "nothing built"; exit 2; }

# classify LOGBASE PATTERN RC -> one cell
classify() {
  local out="$1.out" err="$1.err" name="$2" rc="$3" kind
  if grep -q "ERROR: AddressSanitizer" "$err"; then
    kind="$(grep -m1 -o 'ERROR: AddressSanitizer: [a-z-]*' "$err" | awk '{print $3}')"
    case "$kind" in
      heap-use-after-free) kind=heap-uaf ;;
      stack-use-after-scope) kind=stack-uas ;;
      stack-use-after-return) kind=stack-uar ;;
      attempting) kind=dfree ;;
      heap-buffer-overflow) kind=heap-ovf ;;
      stack-buffer-overflow) kind=stack-ovf ;;
      stack-buffer-underflow) kind=stack-unf ;;
    esac
    echo "CRASH:$kind"; return
  fi
  if grep -q "runtime error:" "$err"; then echo "CRASH:ubsan"; return; fi
  if grep -q "ERROR: LeakSanitizer" "$err"; then echo "LEAK"; return; fi
  if grep -q "double free\|free(): invalid\|corrupted" "$err"; then echo "CRASH:libc"; return; fi
  if [ "$rc" = 124 ]; then echo "HANG"; return; fi
  if grep -q "^RESULT $name PASS" "$out" && [ "$rc" = 0 ]; then echo "PASS"; return; fi
  if grep -q "^RESULT $name SKIP" "$out" && [ "$rc" = 0 ]; then echo "SKIP"; return; fi
  if grep -q "^RESULT $name FAIL" "$out"; then echo "FAIL"; return; fi
  if [ "$rc" -gt 128 ]; then echo "CRASH:sig$((rc - 128))"; return; fi
  echo "ERR:rc$rc"
}

declare -A cell
for p in $patterns; do
  for c in $configs; do
    if [ "${built[$c]}" != 1 ]; then cell[$p,$c]="NOBUILD"; continue; fi
    base="$work/logs/$c.$p"
    # The subshell (not exec'd: it has a second command) keeps the shell's
    # "Aborted" job notices out of the output.
    (timeout 120 "$work/probe-$c" "$p" >"$base.out" 2>"$base.err"; exit $?) 2>/dev/null
    cell[$p,$c]="$(classify "$base" "$p" "$?")"
  done
done

echo
printf '%-26s %-5s' "pattern" "rule"
for c in $configs; do printf ' %-14s' "$c"; done
echo
bad=0
for p in $patterns; do
  printf '%-26s %-5s' "$p" "${rule[$p]}"
  for c in $configs; do
    v="${cell[$p,$c]}"
    printf ' %-14s' "$v"
    case "$p:$v" in
      ctl_*) ;;
      *:PASS | *:SKIP) ;;
      *) bad=1 ;;
    esac
  done
  echo
done
echo
echo "CRASH:<kind>: ASan report (heap-uaf = heap-use-after-free, dfree = double free,"
echo "stack-uas/uar = use after scope/return); CRASH:libc: glibc heap check aborted."
echo "SKIP: shape does not compile with that compiler. ctl_*: undefined behaviour"
echo "in standard C++ on purpose (expected to fail everywhere). rule 'none': a shape"
echo "none of the README rules forbids. Logs: $work/logs"
# First failure detail per non-PASS cell of the rule patterns.
for p in $patterns; do
  for c in $configs; do
    v="${cell[$p,$c]}"
    case "$v" in PASS | SKIP | NOBUILD) continue ;; esac
    detail="$(grep -m1 "^RESULT $p FAIL" "$work/logs/$c.$p.out" 2>/dev/null | cut -c1-150)"
    [ -n "$detail" ] && echo "  $c: $detail"
  done
done
exit $bad
