#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the test suite (trust auth, loopback only, no fsync).
#
#   scripts/pg-test-cluster.sh start        prints postgres://postgres@127.0.0.1:PORT/postgres
#   scripts/pg-test-cluster.sh stop URL     stops the cluster at URL (or PORT), removes its folder
#   scripts/pg-test-cluster.sh bindir       prints the folder of initdb/pg_ctl; fails when none
#
# Uses Debian's binaries (/usr/lib/postgresql/<version>/bin, the newest) or those on PATH.
# PostgreSQL refuses to run as root: as root the cluster runs as `postgres` when that user
# exists, else as a system user `clawboo-pg` created here. Its folder is
# ${TMPDIR:-/tmp}/clawboo-pg-PORT (data, log, and the unix socket), on a free port.
set -euo pipefail
# The server user may not be able to enter the caller's folder; every path below is absolute.
cd /

die() {
  echo "pg-test-cluster: $*" >&2
  exit 1
}

bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
      echo "$dir"
      return 0
    fi
  done
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

# Who runs the server, and how to run a command as them.
cluster_user() {
  if [ "$(id -u)" -ne 0 ]; then
    id -un
  elif id postgres >/dev/null 2>&1; then
    echo postgres
  else
    if ! id clawboo-pg >/dev/null 2>&1; then
      useradd --system --no-create-home --shell /usr/sbin/nologin clawboo-pg \
        || die "cannot create the user clawboo-pg to run PostgreSQL as (it refuses root)"
    fi
    echo clawboo-pg
  fi
}

as_user() {
  local user="$1"
  shift
  if [ "$(id -un)" = "$user" ]; then
    "$@"
  else
    runuser -u "$user" -- "$@"
  fi
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

folder_for() {
  echo "${TMPDIR:-/tmp}/clawboo-pg-$1"
}

start() {
  local bin user port dir attempt
  bin="$(bindir)" || die "no PostgreSQL binaries (install Debian's postgresql package)"
  user="$(cluster_user)"
  for attempt in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    dir="$(folder_for "$port")"
    if port_in_use "$port" || [ -e "$dir" ]; then
      continue
    fi
    mkdir -m 700 "$dir" || continue
    chown "$user" "$dir"
    if ! as_user "$user" "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 \
      --no-sync >"$dir/initdb.log" 2>&1; then
      cat "$dir/initdb.log" >&2
      rm -rf "$dir"
      die "initdb failed"
    fi
    # Tests open a database each and a pool per process: more connections than the default.
    if as_user "$user" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off \
          -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
      start >/dev/null; then
      echo "postgres://postgres@127.0.0.1:$port/postgres"
      return 0
    fi
    # Most likely another process took the port in between: try another.
    tail -5 "$dir/server.log" >&2 || true
    rm -rf "$dir"
  done
  die "could not start a cluster (see the server log above)"
}

stop() {
  local target="${1:-}" port dir bin owner
  [ -n "$target" ] || die "usage: $0 stop URL|PORT"
  port="${target##*:}"
  port="${port%%/*}"
  case "$port" in
    '' | *[!0-9]*) die "no port in $target" ;;
  esac
  dir="$(folder_for "$port")"
  [ -f "$dir/data/PG_VERSION" ] || die "no test cluster at $dir"
  bin="$(bindir)" || die "no PostgreSQL binaries"
  owner="$(stat -c %U "$dir")"
  as_user "$owner" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  bindir) bindir ;;
  *) die "usage: $0 start | stop URL|PORT | bindir" ;;
esac
