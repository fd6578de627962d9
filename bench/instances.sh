#!/usr/bin/env bash
# Several hf serve processes on one PostgreSQL database, each with its own empty data directory,
# as a load balancer would run them. Measures: metadata writes per second on one branch at c=8
# through 3 instances against through 1 (every acknowledged write checked present), on a working
# branch and on the live branch (with its DDL); the time from a write's answer through instance A
# until instance B serves it (p50/p99 over 200 writes, both kinds of branch); the cold start of an
# instance with an empty data directory on a repository of 500 objects, and live writes again once
# those 500 tables are in the schema.
# Run with `cargo xtask bench instances`.
# Needs: curl, psql, python3, a PostgreSQL server (BENCH_DATABASE_URL, default the local one),
# a release build of hf (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
HF=${HF_BIN:-${CARGO_TARGET_DIR:-target}/release/hf}
[ -x "$HF" ] || cargo build --release -p hf
SERVER=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=hf_bench_instances_$$
DB_URL=${SERVER%/*}/$DB
ADMIN=bench_admin_$$
PASSWORD=bench-password-123
PORT=${BENCH_PORT:-18190}
SECONDS_PER_RUN=${BENCH_SECONDS:-10}   # per throughput run
WORK=$(mktemp -d /tmp/hf-bench-instances-XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done
  psql -q "$SERVER" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  psql -q "$SERVER" -c "DROP ROLE IF EXISTS $ADMIN" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
psql -q "$SERVER" -c "CREATE DATABASE $DB" >/dev/null

# start NAME PORT [--demo]: an instance with an empty data directory; prints its pid.
start() {
  local name=$1 port=$2; shift 2
  mkdir -p "$WORK/$name"
  HF_DATABASE_URL=$DB_URL HF_DATA_DIR=$WORK/$name HF_LISTEN=127.0.0.1:$port \
    HF_ADMIN_NAME=$ADMIN HF_ADMIN_PASSWORD=$PASSWORD HF_LOG=warn \
    "$HF" serve "$@" >"$WORK/$name.log" 2>&1 &
  echo $!
}
wait_up() {
  for _ in $(seq 1 3000); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.01; done
  echo "the instance on port $1 did not start"; cat "$WORK"/*.log; exit 1
}
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
post() { curl -sf -o /dev/null -X POST "$1" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$2"; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
A=http://127.0.0.1:$PORT; B=http://127.0.0.1:$((PORT + 1)); C=http://127.0.0.1:$((PORT + 2))
PIDS+=("$(start a "$PORT" --demo)"); wait_up "$PORT"
PIDS+=("$(start b $((PORT + 1)) --demo)"); PIDS+=("$(start c $((PORT + 2)) --demo)")
wait_up $((PORT + 1)); wait_up $((PORT + 2))
TOKEN=$(curl -sf -X POST "$A/auth/login" -H 'content-type: application/json' \
  -d "{\"username\":\"$ADMIN\",\"password\":\"$PASSWORD\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

echo "== metadata writes, c=8, ${SECONDS_PER_RUN} s each"
# Live writes add a column each: spread them over 8 objects per run so no table nears 1600.
for n in 0 1 2 3 4 5 6 7; do
  for run in l1 l3; do post "$A/metadata@main/crm/objects/${run}_$n" '{"label":"L"}'; done
done
writes() { python3 bench/instances.py writes --token "$TOKEN" --seconds "$SECONDS_PER_RUN" --concurrency 8 "$@"; }
W1=$(writes --root metadata@bench1 --objects account --prefix w1 "$A")
W3=$(writes --root metadata@bench3 --objects account --prefix w3 "$A" "$B" "$C")
L1=$(writes --root metadata@main --objects l1_0,l1_1,l1_2,l1_3,l1_4,l1_5,l1_6,l1_7 --prefix l1 "$A")
L3=$(writes --root metadata@main --objects l3_0,l3_1,l3_2,l3_3,l3_4,l3_5,l3_6,l3_7 --prefix l3 "$A" "$B" "$C")
for line in "$W1" "$W3" "$L1" "$L3"; do echo "$line"; done

echo "== propagation: a write's answer through A until B serves it, 200 writes each"
post "$A/metadata@main/crm/objects/prop" '{"label":"P"}'
PW=$(python3 bench/instances.py propagation --token "$TOKEN" --root metadata@prop --object account --prefix pw "$A" "$B")
PL=$(python3 bench/instances.py propagation --token "$TOKEN" --root metadata@main --object prop --prefix pl "$A" "$B")
echo "$PW"; echo "$PL"

echo "== cold start on a repository of 500 objects"
# 500 objects on a working branch made from the live head, then applied: the live branch has them.
post "$A/metadata@seed/big" '{"label":"Big"}'
for n in $(seq 1 500); do post "$A/metadata@seed/big/objects/o$n" '{"label":"O"}'; done
t0=$(date +%s%N); post "$A/apply" '{"branch":"seed"}'; echo "apply of 500 tables: $(ms_since "$t0") ms"
COLD=()
for round in $(seq 1 "${BENCH_COLD_ROUNDS:-3}"); do
  port=$((PORT + 3))
  t0=$(date +%s%N); pid=$(start "cold$round" $port); PIDS+=("$pid"); wait_up $port; up=$(ms_since "$t0")
  count=$(curl -s "http://127.0.0.1:$port/metadata/big/objects" -H "Authorization: Bearer $TOKEN" \
    | python3 -c 'import json,sys; answer = json.load(sys.stdin); print(len(answer) if isinstance(answer, list) else answer)')
  served=$(ms_since "$t0")
  [ "$count" = 500 ] || { echo "the cold instance serves $count objects, not 500"; exit 1; }
  kill -TERM "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  echo "round $round: listening after $up ms, served the 500 objects after $served ms"
  COLD+=("$up/$served")
done

echo "== live metadata writes with the 500 tables in the schema, c=8, ${SECONDS_PER_RUN} s"
for n in 0 1 2 3 4 5 6 7; do post "$A/metadata@main/crm/objects/lb_$n" '{"label":"L"}'; done
LB=$(writes --root metadata@main --objects lb_0,lb_1,lb_2,lb_3,lb_4,lb_5,lb_6,lb_7 --prefix lb "$A" "$B" "$C")
echo "$LB"

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
echo
echo "| measure | 1 instance | 3 instances |"
echo "|---|---|---|"
echo "| metadata writes/s, working branch, c=8 | $(field "$W1" writes_per_s) | $(field "$W3" writes_per_s) |"
echo "| metadata writes/s, live branch (DDL), c=8 | $(field "$L1" writes_per_s) | $(field "$L3" writes_per_s) |"
echo "| the same with 500 more tables in the schema | | $(field "$LB" writes_per_s) |"
echo "| acknowledged writes lost | $(( $(field "$W1" lost) + $(field "$L1" lost) )) | $(( $(field "$W3" lost) + $(field "$L3" lost) + $(field "$LB" lost) )) |"
echo
echo "| propagation A → B (200 writes) | p50 ms | p99 ms | max ms |"
echo "|---|---|---|---|"
echo "| working branch | $(field "$PW" p50_ms) | $(field "$PW" p99_ms) | $(field "$PW" max_ms) |"
echo "| live branch | $(field "$PL" p50_ms) | $(field "$PL" p99_ms) | $(field "$PL" max_ms) |"
echo
echo "cold start, empty data dir, 500 objects (listening / serving them, ms): ${COLD[*]}"
