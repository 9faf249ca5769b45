#!/usr/bin/env bash
# run.sh DB WORKLOAD N: the instructions (valgrind --tool=callgrind) of N calls of WORKLOAD in
# a single-user backend on a copy of setup.sh's cluster, after three warm-up calls, minus the
# same session without the N calls, per call. All in one transaction rolled back. Prints
# "DB WORKLOAD per-call-instructions".
set -euo pipefail
CG=${CG_DIR:-/tmp/rheo-instructions}
db=$1; w=$2; n=$3
pg=/usr/lib/postgresql/15/bin
stmt() {
  case $1 in
    fetch100_1p) echo "SELECT rheo.ack_batch(array(SELECT lease_id FROM rheo.fetch('s1', 'g', 100)));" ;;
    fetch100_4p) echo "SELECT rheo.ack_batch(array(SELECT lease_id FROM rheo.fetch('s4', 'g', 100)));" ;;
    fetch1_4p)   echo "SELECT rheo.ack_batch(array(SELECT lease_id FROM rheo.fetch('s4', 'g', 1)));" ;;
    ack1)        echo "SELECT rheo.ack(lease_id) FROM rheo.fetch('s4', 'g', 1);" ;;
    append_4p)   echo "SELECT rheo.append('s4', '{\"type\": \"y\"}', 'k');" ;;
    batch100_4p) echo "SELECT count(*) FROM rheo.append_batch('s4', (SELECT jsonb_agg(jsonb_build_object('type', 'y', 'n', g)) FROM generate_series(1, 100) g));" ;;
  esac
}
one() { # $1 = count
  local f; f=$(mktemp $CG/in.XXXX)
  { echo "BEGIN;"; for i in 1 2 3; do stmt $w; done
    for ((i = 0; i < $1; i++)); do stmt $w; done; echo "ROLLBACK;"; } > $f
  local dir; dir=$(mktemp -d $CG/copy.XXXX); cp -a $CG/data/. $dir/; chown -R postgres $dir
  local out; out=$(mktemp $CG/cg.XXXX); chown postgres $out
  runuser -u postgres -- valgrind --tool=callgrind --callgrind-out-file=$out $pg/postgres --single -D $dir $db < $f >/dev/null 2>&1
  grep -m1 '^summary:\|^totals:' $out | awk '{print $2}'
  rm -rf $dir $out $f
}
base=$(one 0); full=$(one $n)
echo "$db $w $(( (full - base) / n ))"
