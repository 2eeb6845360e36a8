#!/usr/bin/env bash
# Third-party clients against the real clawboo binaries:
#   - the official TypeScript SDK over stdio (StdioClientTransport, `clawboo-mcp-tasks`) and
#     over Streamable HTTP (StreamableHTTPClientTransport, `clawboo serve`);
#   - the Python `mcp` package, 1.x (streamablehttp_client) and 2.x (Client), likewise over
#     HTTP; 2.x also at protocol 2026-07-28, pinned and in its default mode, over stdio and
#     HTTP behind wire taps (python/protocol_2026.py, stdio-tap.mjs);
#   - the real agent CLIs, Claude Code's (`claude`) and Codex's (`codex`), from npm: the
#     snippets `clawboo attach` prints, run as printed in a temporary HOME/CODEX_HOME for
#     every server over stdio and HTTP, then `claude mcp list` (every server Connected) and
#     `codex mcp list` (every server listed), and the same after `clawboo attach --apply
#     --all` wrote the CLIs' config files (node/agent-clis.test.mjs);
#   - the same CLIs doing a task: `claude -p` (with and without its ToolSearch) and
#     `codex exec`, their model a scripted one on loopback (node/scripted-model.mjs), attached
#     to the Tasks server over stdio and HTTP, on SQLite and, when test.sh exports
#     CLAWBOO_TEST_POSTGRES_URL, on PostgreSQL too (node/agent-loops.test.mjs);
#   - the official conformance suite (@modelcontextprotocol/conformance, server mode, under
#     Node 22 from npm's `node@22`) against the conformance fixture, which serves the
#     suite's fixture tools over the same transport code, with an exact expected-failures
#     list (conformance-expected-failures.yml).
# Installs everything into gitignored folders beside this script. Prints
# `N passed, N failed` last and exits non-zero on any failure.
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TOOLS="$HERE/.tools"
MCP1="mcp==1.30.0"
MCP2="mcp==2.3.0"
CONFORMANCE="@modelcontextprotocol/conformance@0.1.16"

passed=0
failed=0
fixture_pid=""
cleanup() { [ -n "$fixture_pid" ] && kill "$fixture_pid" 2>/dev/null; }
trap cleanup EXIT

fail_setup() {
  echo "third-party setup failed: $*" >&2
  echo "$passed passed, $((failed + 1)) failed"
  exit 1
}

# --- build the binaries under test -------------------------------------------------------
# One command for both packages, with test.sh's features, so it reuses test.sh's build.
(cd "$ROOT" && cargo build -q -p clawboo -p clawboo-server --bins --example conformance_fixture \
  --features clawboo-embed/minilm) || fail_setup "cargo build"
export CLAWBOO_BIN_DIR="$ROOT/target/debug"
FIXTURE="$ROOT/target/debug/examples/conformance_fixture"

# --- install clients -------------------------------------------------------------------
command -v node >/dev/null || fail_setup "node is required"
if [ ! -d "$HERE/node_modules/@modelcontextprotocol/sdk" ] || [ ! -x "$HERE/node_modules/.bin/claude" ] \
  || [ ! -x "$HERE/node_modules/.bin/codex" ]; then
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) || fail_setup "npm ci"
fi
if [ ! -x "$TOOLS/node_modules/.bin/conformance" ] || [ ! -x "$TOOLS/node_modules/.bin/node" ]; then
  mkdir -p "$TOOLS"
  npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error "node@22" "$CONFORMANCE" \
    || fail_setup "npm install node@22 $CONFORMANCE"
fi
for spec in "1:$MCP1" "2:$MCP2"; do
  major="${spec%%:*}"
  pkg="${spec#*:}"
  venv="$HERE/.venv-mcp$major"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '${pkg#mcp==}')" 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q "$pkg" || fail_setup "pip install $pkg"
  fi
done

# --- TypeScript SDK over HTTP ----------------------------------------------------------
echo "== TypeScript SDK over stdio and Streamable HTTP; Claude Code and Codex CLIs"
ts_out="$(cd "$HERE" && node --test --test-reporter=tap node/ 2>&1)"
ts_rc=$?
echo "$ts_out" | grep -E '^(not )?ok |^# (pass|fail)' || true
ts_pass=$(echo "$ts_out" | sed -n 's/^# pass \([0-9]*\)$/\1/p' | tail -1)
ts_fail=$(echo "$ts_out" | sed -n 's/^# fail \([0-9]*\)$/\1/p' | tail -1)
passed=$((passed + ${ts_pass:-0}))
failed=$((failed + ${ts_fail:-0}))
if [ "$ts_rc" -ne 0 ] && [ "${ts_fail:-0}" -eq 0 ]; then
  echo "$ts_out"
  failed=$((failed + 1))
fi

# --- Python mcp 1.x and 2.x over HTTP; 2.x at protocol 2026-07-28 over stdio and HTTP ----
for run in 1:http_clients 2:http_clients 2:protocol_2026; do
  major="${run%%:*}"
  script="${run#*:}"
  echo "== Python mcp $major.x: $script.py"
  py_out="$("$HERE/.venv-mcp$major/bin/python" "$HERE/python/$script.py" 2>/dev/null)"
  py_rc=$?
  echo "$py_out"
  py_pass=$(echo "$py_out" | grep -c '^PASS ')
  py_fail=$(echo "$py_out" | grep -c '^FAIL ')
  passed=$((passed + py_pass))
  failed=$((failed + py_fail))
  if [ "$py_rc" -ne 0 ] && [ "$py_fail" -eq 0 ]; then
    failed=$((failed + 1))
  fi
done

# --- the official conformance suite (server mode) ----------------------------------------
echo "== $CONFORMANCE (server mode, $("$TOOLS/node_modules/.bin/node" --version)) against the conformance fixture"
# The fixture prints its URL once the socket is bound: read that line (no polling).
coproc FIXTURE_PROC { "$FIXTURE" --bind 127.0.0.1:0 2>/dev/null; }
fixture_pid=$FIXTURE_PROC_PID
url=""
if read -r line <&"${FIXTURE_PROC[0]}"; then
  url="${line#listening on }"
fi
if [ -z "$url" ]; then
  failed=$((failed + 1))
  echo "conformance fixture did not start"
else
  conf_out="$(PATH="$TOOLS/node_modules/.bin:$PATH" "$TOOLS/node_modules/.bin/node" \
    "$TOOLS/node_modules/.bin/conformance" server --url "$url" \
    --expected-failures "$HERE/conformance-expected-failures.yml" 2>&1)"
  conf_rc=$?
  echo "$conf_out" | sed -n '/=== SUMMARY ===/,$p'
  conf_pass=$(echo "$conf_out" | grep -c '^✓ ')
  passed=$((passed + conf_pass))
  if [ "$conf_rc" -ne 0 ]; then
    unexpected=$(echo "$conf_out" | grep -c '^✗ ')
    baseline=$(grep -cE '^  - ' "$HERE/conformance-expected-failures.yml")
    extra=$((unexpected - baseline))
    [ "$extra" -lt 1 ] && extra=1
    failed=$((failed + extra))
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
