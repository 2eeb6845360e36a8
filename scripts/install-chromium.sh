#!/usr/bin/env bash
# Debian's Chromium for the web board's browser tests (playwright-core drives it; no browser
# download). Does nothing when it is already installed.
set -euo pipefail
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
echo "== installing Debian's chromium (the browser tests need it)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
