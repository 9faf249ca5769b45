#!/bin/bash
# Starts or stops a Citus cluster on this machine for the bench's citus
# workload: a coordinator and two workers, each a PostgreSQL of its own on
# a loopback port (9800, 9801, 9802 unless RHEO_BENCH_CITUS_PORT names the
# first), data under ${TMPDIR:-/tmp}/rheo-bench-citus, with PostgreSQL's
# default durability settings and shared_buffers, as the single server the
# bench compares it with.
#
#   bash bench/citus-cluster.sh start   # prints the bench flags
#   bash bench/citus-cluster.sh stop
#
# Citus must be installed in the local PostgreSQL 15
# (bash ../shared/vendor/citus/build.sh).
set -euo pipefail
base=${RHEO_BENCH_CITUS_PORT:-9800}
dir=${TMPDIR:-/tmp}/rheo-bench-citus
bin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
[ -x /usr/lib/postgresql/15/bin/initdb ] && bin=/usr/lib/postgresql/15/bin
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
ports=("$base" "$((base + 1))" "$((base + 2))")

case ${1:-} in
start)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  for port in "${ports[@]}"; do
    data=$dir/n$port
    if [ ! -d "$data" ]; then
      as_pg "$bin/initdb -D $data -A trust -U postgres >/dev/null"
      cat >> "$data/postgresql.conf" <<CONF
shared_preload_libraries = 'citus'
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 300
CONF
    fi
    as_pg "$bin/pg_ctl -D $data status >/dev/null" || as_pg "$bin/pg_ctl -D $data -l $data.log -w start >/dev/null"
  done
  echo "--citus-url postgres://postgres@127.0.0.1:${ports[0]}/postgres --citus-workers 127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
  ;;
stop)
  for port in "${ports[@]}"; do
    [ -d "$dir/n$port" ] && as_pg "$bin/pg_ctl -D $dir/n$port -m fast stop >/dev/null" || true
  done
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start|stop" >&2
  exit 2
  ;;
esac
