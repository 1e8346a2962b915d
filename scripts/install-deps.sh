#!/usr/bin/env bash
# Installs every Debian 12 package harnessd needs to build, test and run.
# Used by .ci/run and by the README's set-up commands; safe to run twice.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake ninja-build ccache pkg-config git ca-certificates \
  libboost1.81-dev libboost-json1.81-dev \
  libssl-dev doctest-dev libcli11-dev libspdlog-dev libfmt-dev libtomlplusplus-dev \
  python3 python3-pytest python3-websockets \
  procps curl
if [ "${HARNESSD_BROWSER_DEPS:-0}" = "1" ]; then
  $SUDO apt-get install -y -q --no-install-recommends chromium nodejs npm
fi
