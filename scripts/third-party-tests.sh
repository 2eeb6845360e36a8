#!/usr/bin/env bash
# Run the official MCP clients against the real clawboo binaries in $CLAWBOO_BIN_DIR.
set -euo pipefail
cd "$(dirname "$0")/../tests/third_party"
: "${CLAWBOO_BIN_DIR:?set CLAWBOO_BIN_DIR to the folder holding the built binaries}"
export CLAWBOO_BIN_DIR
node --test --test-reporter=spec node/
