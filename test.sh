#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine: installs the third-party MCP clients
# (npm) it drives, then runs every Rust test (unit tests and integration tests through the
# real binaries) and the third-party client tests against the real binaries.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-test-deps.sh
cargo build --workspace --bins --locked
cargo test --workspace --locked
CLAWBOO_BIN_DIR="$PWD/target/debug" scripts/third-party-tests.sh
