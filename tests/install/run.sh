#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds tests/install/consumer
# against it with find_package(harnessd), and runs one turn through it.
#   tests/install/run.sh BUILD_DIR HARNESSD_BINARY
set -euo pipefail

build="$1"
harnessd="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/harnessd-install.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
# Only the public API is installed.
test -f "$scratch/prefix/include/harnessd/client/blocking_client.hpp"
test ! -e "$scratch/prefix/include/harnessd/server"
test ! -e "$scratch/prefix/include/harnessd/harness"

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root/tests/install/consumer" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" "${launcher[@]}" >/dev/null
cmake --build "$scratch/build" >/dev/null

out="$("$scratch/build/consumer" "$harnessd")"
echo "consumer: $out"
[[ "$out" == "ok echo: hello from an installed client" ]]
