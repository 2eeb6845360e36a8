#!/usr/bin/env bash
# Every benchmark in docs/BENCHMARKS.md in one run: builds the binaries, installs the peer
# (@modelcontextprotocol/server-everything, pinned in crates/clawboo-bench/peer), runs each
# measure and writes everything to target/bench-results.txt (under $CARGO_TARGET_DIR when
# set) as well as stdout.
#
#   scripts/bench.sh                 # the full set on the `release` profile (the first run
#                                    # also seeds 100k tasks and 100k facts, kept in
#                                    # target/bench-data; timings in docs/BENCHMARKS.md)
#   DIST=1 scripts/bench.sh          # the same on the `dist` profile, what packaged binaries
#                                    # are built with (whole-program optimised: a much longer
#                                    # fresh build; binaries in target/dist)
#   QUICK=1 scripts/bench.sh         # a tenth of the calls: checks that everything runs
#   SOAK_MINUTES=30 scripts/bench.sh # a longer soak at the end (default 2)
#   ONLY_PG=1 scripts/bench.sh       # only the section "PostgreSQL beside SQLite"
#   ONLY_MEMORY=1 scripts/bench.sh   # only the section "memory search at scale"
#   SKIP_MEMORY=1 scripts/bench.sh   # everything but memory at scale: no 100k-fact corpus
#                                    # (the 100k searches, fact-memory, the last section)
#
# The last section runs each PostgreSQL measure right after the same measure on SQLite. It
# uses the server PG_URL names (a postgres:// URL: every measure creates a fresh database
# there and drops it; 100k-fact corpora are kept as clawboo_bench_kept_*), else a throwaway
# cluster from scripts/pg-test-cluster.sh (fsync and synchronous_commit off: commits wait
# for no disk, as SQLite's WAL with synchronous=NORMAL waits for none), else it is skipped.
# PG=0 skips it. Give a password in PGPASSWORD or ~/.pgpass, not in PG_URL: every command
# is printed with its flags.
#
# "memory search at scale" runs memory search at 10k and 100k facts in every mode on
# SQLite, on PostgreSQL without pgvector (PG_URL's server with CLAWBOO_PGVECTOR=off) and on
# PostgreSQL with pgvector (PGVECTOR_URL, else a throwaway PostgreSQL 18 + pgvector cluster
# from `scripts/pg-test-cluster.sh start --pgvector`), then recall@10 of each vector path
# against the exact scan, the same at 100k on a corpus of facts that cluster by subtopic
# (`--corpus topics`), and memory_save's rate with the HNSW index and without it.
#
# Exits non-zero if any measure failed (a failed call, a lost claim, RSS growth in the soak).
set -uo pipefail
cd "$(dirname "$0")/.."

scale() { if [ "${QUICK:-0}" = 1 ]; then echo $(( ($1 + 9) / 10 )); else echo "$1"; fi; }
SOAK_MINUTES="${SOAK_MINUTES:-2}"
[ "${QUICK:-0}" = 1 ] && SOAK_MINUTES="${SOAK_MINUTES_QUICK:-0.5}"

# Cargo puts a profile's binaries in <target dir>/<profile> (target/release for `release`).
PROFILE=release
[ "${DIST:-0}" = 1 ] && PROFILE=dist
TARGET="${CARGO_TARGET_DIR:-target}"
cargo build --profile "$PROFILE" --locked --workspace --bins || exit 1
if [ "${ONLY_PG:-0}" != 1 ] && [ ! -d crates/clawboo-bench/peer/node_modules/@modelcontextprotocol/server-everything ]; then
  (cd crates/clawboo-bench/peer && npm ci --no-audit --no-fund --loglevel=error) || exit 1
fi

PG_URL="${PG_URL:-}"
PGVECTOR_URL="${PGVECTOR_URL:-}"
OWN_CLUSTERS=()
stop_own_clusters() {
  local url
  for url in "${OWN_CLUSTERS[@]}"; do scripts/pg-test-cluster.sh stop "$url"; done
}
trap stop_own_clusters EXIT
if [ "${PG:-1}" != 0 ] && [ -z "$PG_URL" ] && scripts/pg-test-cluster.sh bindir >/dev/null 2>&1; then
  PG_URL="$(scripts/pg-test-cluster.sh start)" || exit 1
  OWN_CLUSTERS+=("$PG_URL")
fi
if [ "${PG:-1}" != 0 ] && [ "${SKIP_MEMORY:-0}" != 1 ] && [ -z "$PGVECTOR_URL" ] \
  && scripts/pg-test-cluster.sh bindir --pgvector >/dev/null 2>&1; then
  PGVECTOR_URL="$(scripts/pg-test-cluster.sh start --pgvector)" || exit 1
  OWN_CLUSTERS+=("$PGVECTOR_URL")
fi
[ "${PG:-1}" = 0 ] && PG_URL= && PGVECTOR_URL=

B="$TARGET/$PROFILE/clawboo-bench"
OUT="$TARGET/bench-results.txt"
{
  failed=0
  run() {
    echo "\$ ${CLAWBOO_MAX_WAITS:+CLAWBOO_MAX_WAITS=$CLAWBOO_MAX_WAITS }${CLAWBOO_PGVECTOR:+CLAWBOO_PGVECTOR=$CLAWBOO_PGVECTOR }clawboo-bench $*"
    "$B" "$@" || { echo "FAILED: clawboo-bench $*"; failed=$((failed + 1)); }
  }
  echo "# $(date -u '+%F %T UTC'), $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg), profile $PROFILE"
  if [ "${ONLY_PG:-0}" != 1 ] && [ "${ONLY_MEMORY:-0}" != 1 ]; then
    echo "## physical limits"
    run sqlite-commit --transactions "$(scale 50000)"
    run echo --calls "$(scale 20000)" --windows 1,8 --sessions 1,8

    echo "## cold start and idle RSS"
    for s in tasks memory teamchat tools echo; do run cold-start --server "$s" --runs 30; done
    run cold-start --server peer --runs 10

    echo "## tasks over stdio"
    run stdio --tool get-task --tasks 1000 --calls "$(scale 20000)"
    run stdio --tool get-task --tasks 100000 --calls "$(scale 20000)"
    run stdio --tool claim-task --calls "$(scale 20000)"
    run stdio --tool claim-task --calls "$(scale 20000)" --claim-order created
    run stdio --tool create-subtask --calls "$(scale 20000)"
    # Window 8 leaves the one-threaded server waiting on the client between group commits;
    # window 32 saturates it (docs/BENCHMARKS.md, "Windows and group commit").
    run stdio --tool claim-task --calls "$(scale 20000)" --window 32
    run stdio --tool create-subtask --calls "$(scale 20000)" --window 32
    run stdio --tool list-tasks --tasks 1000 --calls "$(scale 300)" --warmup 10
    run stdio --tool list-tasks --tasks 100000 --calls "$(scale 20)" --warmup 1

    echo "## memory over stdio"
    run stdio --tool memory-save --calls "$(scale 5000)"
    run stdio --tool memory-save --calls "$(scale 5000)" --window 32
    # --settle: the text index fills on a thread of its own after the first search; the
    # first 100k line measures searches while it fills (they rank in SQLite meanwhile).
    for m in fts vector hybrid; do
      run stdio --tool memory-search --mode "$m" --facts 10000 --window 8 --calls "$(scale 3000)" --settle 1
    done
    if [ "${SKIP_MEMORY:-0}" != 1 ]; then
      run stdio --tool memory-search --mode fts --facts 100000 --window 1 --calls "$(scale 300)" --warmup 1
      for m in fts vector hybrid; do
        run stdio --tool memory-search --mode "$m" --facts 100000 --window 1 --calls "$(scale 300)" --warmup 5 --settle 5
      done
    fi

    echo "## team chat over stdio"
    run stdio --tool team-chat-post --calls "$(scale 20000)"
    run stdio --tool team-chat-subscribe --calls "$(scale 20000)"

    echo "## Streamable HTTP (clawboo serve)"
    for n in 1 8 64; do run http --tool get-task --sessions "$n" --calls "$(scale 20000)"; done
    run http --tool claim-task --sessions 8 --calls "$(scale 20000)"
    run http --tool create-subtask --sessions 8 --calls "$(scale 20000)"
    run http --tool memory-save --sessions 8 --calls "$(scale 5000)"
    run http --tool memory-search --mode fts --facts 10000 --sessions 8 --calls "$(scale 3000)" --settle 1
    run http --tool team-chat-post --sessions 8 --calls "$(scale 20000)"
    run http --tool team-chat-subscribe --sessions 64 --calls "$(scale 20000)"

    echo "## contention"
    run contention --tasks "$(scale 2000)" --stdio 4 --sessions 4

    echo "## flood: one agent's 600 long-polls against everyone else's calls"
    run flood --waits 600 --samples "$(scale 300)"
    # The default limit holds 16 of them and refuses the rest; raised, all 600 are held.
    CLAWBOO_MAX_WAITS=1000 run flood --waits 600 --samples "$(scale 300)"

    echo "## soak"
    run soak --minutes "$SOAK_MINUTES" --rate 200
  fi

  if [ -n "$PG_URL" ] && [ "${ONLY_MEMORY:-0}" != 1 ]; then
    # The same measure on SQLite, then on a fresh PostgreSQL database of the same server.
    both() { run "$@"; run --pg "$PG_URL" "$@"; }
    echo "## PostgreSQL beside SQLite ($(psql "$PG_URL" -Atc 'SHOW server_version' 2>/dev/null || echo 'server version unknown'))"
    run sqlite-commit --transactions "$(scale 50000)"
    run --pg "$PG_URL" pg-commit --transactions "$(scale 50000)" --connections 1,8,32
    run --pg "$PG_URL" pg-read --reads "$(scale 40000)"
    both stdio --tool get-task --tasks 1000 --calls "$(scale 20000)"
    both stdio --tool claim-task --calls "$(scale 20000)"
    both stdio --tool claim-task --calls "$(scale 20000)" --window 32
    both http --tool get-task --sessions 8 --calls "$(scale 20000)"
    both http --tool claim-task --sessions 8 --calls "$(scale 20000)"
    both stdio --tool memory-save --calls "$(scale 5000)"
    both stdio --tool memory-search --mode fts --facts 10000 --window 8 --calls "$(scale 3000)" --settle 1
    both stdio --tool memory-search --mode hybrid --facts 10000 --window 8 --calls "$(scale 3000)" --settle 1
    both contention --tasks "$(scale 2000)" --stdio 4 --sessions 4
    both flood --waits 600 --samples "$(scale 300)"
    CLAWBOO_MAX_WAITS=1000 both flood --waits 600 --samples "$(scale 300)"
    [ "${SKIP_MEMORY:-0}" != 1 ] && both fact-memory --facts "$(scale 10000),$(scale 100000)"
    run --pg "$PG_URL" soak --minutes "$SOAK_MINUTES" --rate 200
    run --pg "$PG_URL" transfer --facts "$(scale 100000)" --tasks "$(scale 100000)"
  else
    echo "## PostgreSQL beside SQLite: skipped (no PG_URL and no PostgreSQL binaries, or PG=0)"
  fi

  if [ "${SKIP_MEMORY:-0}" = 1 ]; then
    echo "## memory search at scale: skipped (SKIP_MEMORY=1)"
  elif [ -n "$PG_URL" ] && [ -n "$PGVECTOR_URL" ] && [ "${ONLY_PG:-0}" != 1 ]; then
    # Each mode and size on the three paths back to back; the 100k corpora are seeded on
    # first use and kept (their seeding times are printed).
    exact() { CLAWBOO_PGVECTOR=off run "$@"; }
    echo "## memory search at scale: SQLite, PostgreSQL without pgvector, PostgreSQL with pgvector"
    for n in 10000 100000; do
      for m in fts vector hybrid; do
        run stdio --tool memory-search --mode "$m" --facts "$n" --window 1 --calls "$(scale 300)" --warmup 5 --settle 5
        exact --pg "$PG_URL" stdio --tool memory-search --mode "$m" --facts "$n" --window 1 --calls "$(scale 300)" --warmup 5 --settle 5
        run --pg "$PGVECTOR_URL" stdio --tool memory-search --mode "$m" --facts "$n" --window 1 --calls "$(scale 300)" --warmup 5 --settle 5
      done
      run memory-recall --facts "$n" --queries "$(scale 200)"
      run --pg "$PGVECTOR_URL" memory-recall --facts "$n" --queries "$(scale 200)"
    done
    # 100k facts that cluster by subtopic (`--corpus topics`), SQLite against pgvector.
    for m in fts vector hybrid; do
      run --corpus topics stdio --tool memory-search --mode "$m" --facts 100000 --window 1 --calls "$(scale 300)" --warmup 5 --settle 5
      run --corpus topics --pg "$PGVECTOR_URL" stdio --tool memory-search --mode "$m" --facts 100000 --window 1 --calls "$(scale 300)" --warmup 5 --settle 5
    done
    run --corpus topics --pg "$PGVECTOR_URL" memory-recall --facts 100000 --queries "$(scale 200)"
    run stdio --tool memory-save --calls "$(scale 5000)"
    exact --pg "$PGVECTOR_URL" stdio --tool memory-save --calls "$(scale 5000)"
    run --pg "$PGVECTOR_URL" stdio --tool memory-save --calls "$(scale 5000)"
  else
    echo "## memory search at scale: skipped (needs PG_URL and PGVECTOR_URL, or both kinds of throwaway cluster)"
  fi

  echo "# $failed failed"
  exit "$failed"
} 2>&1 | tee "$OUT"
