#!/usr/bin/env bash
# The MCP conformance suite's client scenarios (@modelcontextprotocol/
# conformance, pinned in package-lock.json) against harnessd's MCP client
# over streamable HTTP: conformance_client.py runs harnessd as the client
# under test. Needs `npm ci` here (scripts/install-deps.sh --browser).
#
# Scenarios run: initialize, tools_call and sse-retry (an answer stream the
# server ends early is resumed with a GET naming the last event, after the
# stream's retry time). Not run, because harnessd does not offer what they
# test: elicitation-* (harnessd declares no elicitation capability and
# answers elicitation/create with -32601) and auth/* (OAuth; harnessd sends
# the static headers of [mcp.NAME].headers).
#
# Usage: tests/mcp/conformance.sh [SCENARIO...]; HARNESSD_BIN names the daemon.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -f "$cli" ]; then
  echo "conformance.sh: run 'npm ci' in $here first (scripts/install-deps.sh --browser)" >&2
  exit 1
fi
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(initialize tools_call sse-retry)
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
failed=0
for scenario in "${scenarios[@]}"; do
  if node "$cli" client --command "/usr/bin/python3 $here/conformance_client.py" --scenario "$scenario" \
      --timeout 60000 -o "$out" > "$out/$scenario.log" 2>&1 \
      && grep -q "OVERALL: PASSED" "$out/$scenario.log"; then
    echo "conformance: $scenario passed"
  else
    echo "conformance: $scenario FAILED" >&2
    cat "$out/$scenario.log" >&2
    failed=1
  fi
done
exit "$failed"
