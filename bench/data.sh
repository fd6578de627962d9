#!/usr/bin/env bash
# Data path against raw PostgreSQL, in one run on one database: three kinds of work through hf
# (wrk, c=16) next to pgbench -M prepared -j2 -c16 sending the one statement a client would send
# for it, each printed as a ratio with both p99s, and the CPU time hf and the PostgreSQL backends
# serving it spent per request (load-independent, unlike the ratios):
#   - GET /data/crm/opportunity/{id}     vs  SELECT … FROM crm.opportunity WHERE id = :id (bound),
#                                            and the same with the id inlined
#   - POST /data/query (filter, sort, lookup path, 50 rows)
#                                        vs  the same JOIN … WHERE … ORDER BY … LIMIT 50
#   - POST /data/crm/opportunity         vs  INSERT … RETURNING
# Then it profiles the release binary under the GET load (`perf record -g`) and keeps the folded
# stacks and a flame graph under target/bench/ (inferno when installed, else bench/flamegraph.py;
# `target` is $CARGO_TARGET_DIR when set).
# Part of `cargo xtask bench http`; alone: `bash bench/data.sh` (BENCH_SECONDS, default 10, is the
# length of each run; HF_BIN names another build of hf, to compare two builds on one machine).
# Needs: wrk, curl, psql, pgbench, perf, python3, PostgreSQL on 127.0.0.1:5432 (HF_BENCH_PG),
# a release build of hf (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
HF=${HF_BIN:-$TARGET/release/hf}
[ -x "$HF" ] || cargo build --release -p hf
PG=${HF_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
PORT=${BENCH_PORT:-18481}
SECONDS_EACH=${BENCH_SECONDS:-10}
DB=hf_bench_data_$$
DATA=$(mktemp -d /tmp/hf-bench-data-XXXXXX); chmod 755 "$DATA"
OUT=$TARGET/bench
mkdir -p "$OUT"
PASSWORD=bench-password-123
BASE=http://127.0.0.1:$PORT
ADMIN=bench_admin_$$

psql -q "$PG/postgres" -c "CREATE DATABASE $DB"
cleanup() {
  [ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  psql -q "$PG/$DB" -c "REASSIGN OWNED BY \"$ADMIN\" TO CURRENT_USER; DROP OWNED BY \"$ADMIN\"" 2>/dev/null || true
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "DROP ROLE IF EXISTS \"$ADMIN\"" || true
  rm -rf "$DATA"
}
trap cleanup EXIT

HF_LISTEN=127.0.0.1:$PORT HF_DATA_DIR=$DATA HF_DATABASE_URL=$PG/$DB HF_ADMIN_NAME=$ADMIN \
  HF_ADMIN_PASSWORD=$PASSWORD HF_LOG=warn "$HF" serve --demo >"$DATA/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do curl -sf "$BASE/health" >/dev/null && break; sleep 0.05; done
curl -sf "$BASE/health" >/dev/null || { cat "$DATA/serve.log"; exit 1; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }
TOKEN=$(curl -sf -X POST "$BASE/auth/login" -H 'content-type: application/json' \
  -d "{\"username\":\"$ADMIN\",\"password\":\"$PASSWORD\"}" | json token)

# 200 accounts and 5,000 opportunities, a quarter of them open.
psql -q "$PG/$DB" <<'SQL'
INSERT INTO crm.account (name, industry)
  SELECT 'Account ' || n, 'Industry ' || (n % 7) FROM generate_series(1, 200) n;
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date)
  SELECT 'Deal ' || n, (SELECT id FROM crm.account ORDER BY name OFFSET n % 200 LIMIT 1),
         (n * 37 % 100000) + 0.5, n % 100, (ARRAY['open', 'won', 'lost', 'paused'])[n % 4 + 1],
         DATE '2024-01-01' + n % 365
  FROM generate_series(1, 5000) n;
ANALYZE;
SQL
OPPORTUNITY=$(psql -qtA "$PG/$DB" -c "SELECT id FROM crm.opportunity ORDER BY name LIMIT 1")
ACCOUNT=$(psql -qtA "$PG/$DB" -c "SELECT id FROM crm.account ORDER BY name LIMIT 1")

HOQS="SELECT name, amount, stage, account.name FROM crm.opportunity WHERE stage = 'open' AND amount >= 100 ORDER BY amount DESC LIMIT 50"
ROWS=$(curl -sf -X POST "$BASE/data/query" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d "{\"query\":\"$HOQS\"}" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["records"]))')
[ "$ROWS" = 50 ] || { echo "the HOQS query returned $ROWS records, not 50"; exit 1; }
BODY="{\"name\":\"Deal\",\"account\":\"$ACCOUNT\",\"amount\":\"1200.50\",\"probability\":40,\"stage\":\"open\",\"close_date\":\"2024-12-31\"}"

cat > "$DATA/query.lua" <<LUA
wrk.method = "POST"
wrk.body = [==[{"query":"$HOQS"}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
LUA
cat > "$DATA/create.lua" <<LUA
wrk.method = "POST"
wrk.body = [==[$BODY]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
LUA
# The statements a client would send itself, with the same values. A client reading a record
# binds its id (`:id`, given to pgbench with -D, becomes a parameter of the prepared statement),
# as hf does; the same read with the id written into the SQL is measured too, because
# PostgreSQL runs a statement without parameters noticeably cheaper (about 5 µs less of its CPU
# per read, 28 against 23 µs, when this was written).
cat > "$DATA/read.sql" <<SQL
SELECT id, name, account, amount, probability, stage, close_date, created_at, updated_at
  FROM crm.opportunity WHERE id = :id;
SQL
sed "s/:id/'$OPPORTUNITY'/" "$DATA/read.sql" >"$DATA/read_inlined.sql"
cat > "$DATA/query.sql" <<SQL
SELECT o.id, o.name, o.amount, o.stage, a.name AS account_name
  FROM crm.opportunity o LEFT JOIN crm.account a ON a.id = o.account
  WHERE o.stage = 'open' AND o.amount >= 100 ORDER BY o.amount DESC LIMIT 50;
SQL
cat > "$DATA/create.sql" <<SQL
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date)
  VALUES ('Deal', '$ACCOUNT', 1200.50, 40, 'open', '2024-12-31') RETURNING *;
SQL

# hf's CPU time so far (user + system), in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# The CPU time so far of every PostgreSQL backend connected to the bench database (hf's
# connections while wrk runs), one "<pid> <ticks>" line each.
pg_ticks() {
  local backend
  for backend in $(psql -qtA "$PG/postgres" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'"); do
    [ -r "/proc/$backend/stat" ] && echo "$backend $(awk '{print $14 + $15}' "/proc/$backend/stat")"
  done
  return 0
}
# wrk at c=16; prints "<req/s> <p99 ms> <hf CPU µs per request> <PostgreSQL CPU µs per
# request>". The CPU per request is hf's own and that of the backends serving it (from /proc),
# so it hardly depends on what else the machine runs, unlike req/s.
run_wrk() {
  local before after
  pg_ticks >"$DATA/pg_before.txt"
  before=$(cpu_ticks)
  wrk -t2 -c16 -d"${SECONDS_EACH}"s --latency "$@" >"$DATA/wrk.txt"
  after=$(cpu_ticks)
  pg_ticks >"$DATA/pg_after.txt"
  grep -q "Non-2xx" "$DATA/wrk.txt" && { echo "hf answered errors:" >&2; cat "$DATA/wrk.txt" >&2; exit 1; }
  python3 - "$DATA/wrk.txt" "$((after - before))" "$(getconf CLK_TCK)" "$DATA/pg_before.txt" "$DATA/pg_after.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
requests = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
value, unit = re.search(r"\s99%\s+([\d.]+)(us|ms|s)", text).groups()
p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
tick_us = 1e6 / int(sys.argv[3])
cpu_us = int(sys.argv[2]) * tick_us / max(requests, 1)
ticks = lambda name: dict(map(int, line.split()) for line in open(name) if line.strip())
before, after = ticks(sys.argv[4]), ticks(sys.argv[5])
pg_us = sum(t - before.get(p, 0) for p, t in after.items()) * tick_us / max(requests, 1)
print(f"{rps:.0f} {p99:.2f} {cpu_us:.0f} {pg_us:.0f}")
PY
}
# pgbench -M prepared -j2 -c16; prints "<tps> <p99 ms>" (p99 from the transaction log).
run_pgbench() {
  rm -f "$DATA"/pgbench_log.*
  (cd "$DATA" && pgbench -n -M prepared -c 16 -j 2 -T "$SECONDS_EACH" -l -D "id=$OPPORTUNITY" \
    -f "$1" "$PG/$DB" >"$DATA/pgbench.txt" 2>&1)
  python3 - "$DATA/pgbench.txt" "$DATA"/pgbench_log.* <<'PY'
import re, sys
tps = float(re.search(r"tps = ([\d.]+)", open(sys.argv[1]).read()).group(1))
latencies = sorted(int(line.split()[2]) for name in sys.argv[2:] for line in open(name))
p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000
print(f"{tps:.0f} {p99:.2f}")
PY
}
report() {  # name, hf "<rps> <p99> <cpu> <pg cpu>", pgbench "<tps> <p99>"
  python3 - "$@" <<'PY'
import sys
name, hf, pg = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
hf_rps, hf_p99, pg_tps, pg_p99 = float(hf[0]), float(hf[1]), float(pg[0]), float(pg[1])
print(f"{name:<34} hf {hf_rps:>8.0f} req/s p99 {hf_p99:7.2f} ms | pgbench {pg_tps:>8.0f} tps "
      f"p99 {pg_p99:7.2f} ms | ratio {hf_rps / pg_tps:.2f}, p99 {hf_p99 / pg_p99:.1f}x "
      f"| hf CPU {hf[2]} µs/request, PostgreSQL CPU {hf[3]} µs/request")
PY
}

echo "== hf (wrk -t2 -c16) against pgbench -M prepared -j2 -c16, ${SECONDS_EACH} s each, database $DB"
get_hf=$(run_wrk -H "Authorization: Bearer $TOKEN" "$BASE/data/crm/opportunity/$OPPORTUNITY")
get_pg=$(run_pgbench "$DATA/read.sql")
get_inlined_pg=$(run_pgbench "$DATA/read_inlined.sql")
query_hf=$(run_wrk -s "$DATA/query.lua" "$BASE/data/query")
query_pg=$(run_pgbench "$DATA/query.sql")
create_hf=$(run_wrk -s "$DATA/create.lua" "$BASE/data/crm/opportunity")
create_pg=$(run_pgbench "$DATA/create.sql")
report "GET a record by id" "$get_hf" "$get_pg"
report "  the same, pgbench with the id inlined" "$get_hf" "$get_inlined_pg"
report "HOQS filter+sort+lookup, 50 rows" "$query_hf" "$query_pg"
report "create a record" "$create_hf" "$create_pg"
echo "RSS after the runs: $(awk '/VmRSS/ {print $2}' "/proc/$pid/status") KiB"
echo "load average (1, 5, 15 min) after the runs: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

# BENCH_PROFILE=0 skips the profile (for quick before/after comparisons).
[ "${BENCH_PROFILE:-1}" = 0 ] && exit 0

# The profile: perf samples hf's stacks while wrk loads it with GETs. The release build has no
# frame pointers, so the stacks are unwound from DWARF (`-g` with `--call-graph dwarf`).
echo "== profile: perf record -g of hf under GET /data/crm/opportunity/{id}, c=16, ${SECONDS_EACH} s"
wrk -t2 -c16 -d"$((SECONDS_EACH + 2))"s -H "Authorization: Bearer $TOKEN" \
  "$BASE/data/crm/opportunity/$OPPORTUNITY" >/dev/null &
load=$!
sleep 1
perf record -e cpu-clock -F 199 --call-graph dwarf -p "$pid" -o "$DATA/perf.data" -- sleep "$SECONDS_EACH" 2>/dev/null
wait "$load"
# inferno renders it when installed (`cargo install inferno`), else bench/flamegraph.py.
if command -v inferno-collapse-perf >/dev/null && command -v inferno-flamegraph >/dev/null; then
  perf script -i "$DATA/perf.data" 2>/dev/null | inferno-collapse-perf >"$OUT/get-record.folded"
  inferno-flamegraph --title "hf: GET /data/crm/opportunity/{id}" "$OUT/get-record.folded" >"$OUT/get-record.svg"
else
  perf script -i "$DATA/perf.data" 2>/dev/null \
    | python3 bench/flamegraph.py "$OUT/get-record.folded" "$OUT/get-record.svg" "hf: GET /data/crm/opportunity/{id}"
fi
echo "flame graph: $OUT/get-record.svg (folded stacks: $OUT/get-record.folded)"
