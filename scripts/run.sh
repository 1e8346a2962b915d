#!/usr/bin/env bash
# Builds harnessd (Release) and runs it with the keyless scripted provider:
# web UI, /healthz and /metrics at http://127.0.0.1:7878/, NDJSON on
# tcp://127.0.0.1:7879. Extra arguments go to harnessd (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${HARNESSD_SKIP_DEPS:-0}" = 1 ] || bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
echo "open http://127.0.0.1:7878/ (Ctrl-C stops the daemon)" >&2
exec ./build/harnessd --listen ws://127.0.0.1:7878 --listen tcp://127.0.0.1:7879 "$@"
