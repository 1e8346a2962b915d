#!/usr/bin/env bash
# Installs every Debian 12 package harnessd needs to build, test and run.
# --browser also installs Chromium and Node.js and the npm packages of the
# browser test, the JavaScript client (clients/js), the web UI's Markdown
# libraries (web/), the MCP reference servers of the MCP tests and the
# benchmark peers (from their package-lock.json files).
# Safe to run again; used by .ci/run and the README's commands.
set -euo pipefail
cd "$(dirname "$0")/.."
browser=0
[ "${1:-}" = "--browser" ] && browser=1

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
packages=(build-essential cmake ninja-build ccache pkg-config git ca-certificates
  libboost1.81-dev libboost-json1.81-dev libboost-regex1.81-dev
  libssl-dev doctest-dev libcli11-dev libspdlog-dev libfmt-dev libtomlplusplus-dev
  libpq-dev postgresql  # --store postgres: libpq, and the server its tests start
  python3 python3-pytest procps curl
  bubblewrap  # the bash tool's sandbox (bwrap)
  nginx openssl systemd python3-yaml  # tests/deploy: reverse proxy, throwaway CA, systemd-analyze, k8s YAML
  clang libclang-rt-14-dev)  # the libFuzzer harnesses (tests/fuzz)
if [ "$browser" = 1 ]; then
  packages+=(chromium)
  # Keep a Node.js that is already there (it may come with its own npm,
  # which Debian's npm package conflicts with).
  command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${packages[@]}"
if [ "$browser" = 1 ]; then
  (cd tests/browser && npm ci --no-audit --no-fund)
  (cd clients/js && npm ci --no-audit --no-fund)
  (cd web && npm ci --no-audit --no-fund)
  (cd tests/mcp && npm ci --no-audit --no-fund)
  (cd bench/peers/node-reference && npm ci --no-audit --no-fund)
fi
