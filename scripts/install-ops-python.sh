#!/usr/bin/env bash
# The Python the operators'-view tests (crates/clawboo/tests/http_ops.rs) check clawboo's
# output with: the official Prometheus client's OpenMetrics parser (`prometheus-client`) and
# the official OpenTelemetry protobuf bindings (`opentelemetry-proto`), independent of the
# Rust crates that produce what they parse. pip-installs them once into the gitignored
# virtualenv .venv-ops/ at the repo root and prints that venv's python.
#
# Idempotent: when the venv has both at the pinned versions, nothing is installed.
#
# Usage: scripts/install-ops-python.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-ops"
packages=(prometheus-client==0.26.0 opentelemetry-proto==1.45.2)

installed() {
  "$venv/bin/python" - "${packages[@]}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
for spec in sys.argv[1:]:
    name, version = spec.split("==")
    if m.version(name) != version:
        sys.exit(1)
PY
}

if [ ! -x "$venv/bin/python" ] || ! installed; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "${packages[@]}" >&2
fi
echo "$venv/bin/python"
