#!/usr/bin/env bash
# setup.sh BEFORE_MIGRATE AFTER_MIGRATE: a scratch PostgreSQL cluster in $CG_DIR (default
# /tmp/rheo-instructions) with two databases, "before" and "after", installed by the two
# rheo-migrate binaries given, each with streams s1 (1 partition) and s4 (4 partitions) of
# 2,200 events and a group g. run.sh then counts instructions in them (BENCHMARKS.md).
set -euo pipefail
before_migrate=$1; after_migrate=$2
CG=${CG_DIR:-/tmp/rheo-instructions}; D=$CG/data; PORT=${CG_PORT:-9850}
mkdir -p $CG; chmod 777 $CG; touch $CG/data.log; chown postgres $CG/data.log
pg=/usr/lib/postgresql/15/bin
rm -rf $D; mkdir -p $D; chown postgres $D
runuser -u postgres -- $pg/initdb -D $D -A trust -U postgres >/dev/null
printf "port=$PORT\nlisten_addresses='127.0.0.1'\nunix_socket_directories='$CG'\nfsync=off\n" >> $D/postgresql.conf
runuser -u postgres -- $pg/pg_ctl -D $D -l $CG/data.log start -w >/dev/null
for db in before after; do
  psql -h 127.0.0.1 -p $PORT -U postgres -qc "CREATE DATABASE $db"
done
"$before_migrate" up --database-url "postgres://postgres@127.0.0.1:$PORT/before" >/dev/null
"$after_migrate" up --database-url "postgres://postgres@127.0.0.1:$PORT/after" >/dev/null
for db in before after; do
psql -h 127.0.0.1 -p $PORT -U postgres -d $db -q <<'SQL'
SELECT rheo.create_stream('s1', 1);
SELECT rheo.create_stream('s4', 4);
SELECT count(*) FROM rheo.append_batch('s1', (SELECT jsonb_agg(jsonb_build_object('type', 'x', 'n', g)) FROM generate_series(1, 2200) g));
SELECT count(*) FROM rheo.append_batch('s4', (SELECT jsonb_agg(jsonb_build_object('type', 'x', 'n', g)) FROM generate_series(1, 2200) g));
SELECT rheo.create_group('s1', 'g');
SELECT rheo.create_group('s4', 'g');
VACUUM ANALYZE;
SQL
done
runuser -u postgres -- $pg/pg_ctl -D $D stop -w >/dev/null
echo setup done
