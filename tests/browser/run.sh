#!/usr/bin/env bash
# The web board's browser tests: headless Debian Chromium driven by playwright-core, against
# the real `clawboo serve`, with real MCP agents (the TypeScript SDK over stdio) on the same
# database. Installs Chromium (Debian's package) when it is missing and the npm packages into
# a gitignored node_modules. Screenshots land in test-output/browser/.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
"$ROOT/scripts/install-chromium.sh"

(cd "$ROOT" && cargo build -q -p clawboo --bins --features clawboo-embed/minilm)
export CLAWBOO_BIN_DIR="$ROOT/target/debug"

if [ ! -d "$HERE/node_modules/playwright-core" ] || [ ! -d "$HERE/node_modules/@modelcontextprotocol/sdk" ]; then
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
fi

echo "== web board in headless Chromium"
cd "$HERE"
node --test --test-concurrency=1 --test-reporter=spec board.test.mjs
