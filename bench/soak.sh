#!/usr/bin/env bash
# Runs the harnessd soak test (bench/soak.py): sessions driven for minutes over
# TCP and WebSocket with cancels and dropped connections, then logs, memory and
# fds checked. `bench/soak.sh --seconds 60` is the CI length; `-- ARGS` go to harnessd.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Each connection and each loaded session's log is a descriptor on both sides.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec python3 "$ROOT/bench/soak.py" "$@"
