#!/usr/bin/env bash
# Install what the test suite drives besides Rust: the official MCP clients from npm.
# Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { echo "node is required (Node.js 20+)" >&2; exit 1; }
(cd tests/third_party && npm ci --no-audit --no-fund --loglevel=error)
