#!/usr/bin/env bash
# Data path against raw PostgreSQL, in one run on one database: three kinds of work through hf
# (wrk, c=16) next to pgbench -M prepared -j2 -c16 sending the one statement a client would send
# for it:
#   - GET /data/crm/opportunity/{id}     vs  SELECT … FROM crm.opportunity WHERE id = :id (bound),
#                                            and the same with the id inlined
#   - POST /data/query (filter, sort, lookup path, 50 rows)
#                                        vs  the same JOIN … WHERE … ORDER BY … LIMIT 50
#   - POST /data/crm/opportunity         vs  INSERT … RETURNING
#     (and the same create with an Idempotency-Key against without, hf alone)
# Each kind runs BENCH_ROUNDS rounds (default 3) of hf and pgbench, alternating which goes first,
# and prints the medians of the rounds' throughput and p99 ratios (the machine is shared, and
# its speed drifts from one run to the next: single pairs of runs gave ratios up to 0.16 apart), and
# the CPU time per request of every process on each side (hf, its backends and wrk; pgbench and
# its backends), which hardly depends on what else the machine runs.
# Then it profiles the release binary under the GET load (`perf record -g`) and keeps the folded
# stacks and a flame graph under target/bench/ (inferno when installed, else bench/flamegraph.py;
# `target` is $CARGO_TARGET_DIR when set).
# Part of `cargo xtask bench http`; alone: `bash bench/data.sh` (BENCH_SECONDS, default 10, is the
# length of each run, BENCH_ROUNDS their number; HF_BIN names another build of hf, to compare
# two builds on one machine).
# Needs: wrk, curl, psql, pgbench, perf, python3, GNU time (/usr/bin/time), pgrep, PostgreSQL on
# 127.0.0.1:5432 (HF_BENCH_PG), a release build of hf (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
HF=${HF_BIN:-$TARGET/release/hf}
[ -x "$HF" ] || cargo build --release -p hf
PG=${HF_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
PORT=${BENCH_PORT:-18481}
SECONDS_EACH=${BENCH_SECONDS:-10}
[ "$SECONDS_EACH" -ge 5 ] || { echo "BENCH_SECONDS must be at least 5" >&2; exit 2; }
OUT=$TARGET/bench
mkdir -p "$OUT"
# shellcheck source=bench/service.sh
source bench/service.sh
start_service data

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
# connections while wrk runs, pgbench's while pgbench runs), one "<pid> <ticks>" line each.
# The backends are found by their process titles ("postgres: [<cluster>: ]<user> <database> …") and
# read in the shell itself: a psql or a process per backend would take long on a loaded machine.
pg_ticks() {
  local backend fields
  for backend in $(pgrep -f "^postgres: (.+: )?[^ ]+ $DB " || true); do
    read -r -a fields <"/proc/$backend/stat" 2>/dev/null && echo "$backend $((fields[13] + fields[14]))"
  done
  return 0
}
# The PostgreSQL backends' CPU µs per request between two pg_ticks files (a backend that ended
# in between is not counted, one that started counts from its start).
pg_us_per() {  # before, after, requests
  python3 - "$@" "$(getconf CLK_TCK)" <<'PY'
import sys
ticks = lambda name: dict(map(int, line.split()) for line in open(name) if line.strip())
before, after = ticks(sys.argv[1]), ticks(sys.argv[2])
used = sum(t - before.get(p, 0) for p, t in after.items())
print(f"{used * 1e6 / int(sys.argv[4]) / max(int(sys.argv[3]), 1):.1f}")
PY
}
# The user + system CPU seconds of a command run under `/usr/bin/time -f '%U %S' -o <file>`.
client_seconds() { awk 'END {print $1 + $2}' "$1"; }
# wrk at c=16; prints "<req/s> <p99 ms> <hf CPU µs> <PostgreSQL CPU µs> <wrk CPU µs>", the CPU
# times per request: hf's own (from /proc), that of the backends serving it and wrk's, so the
# whole budget of a request is known, whatever else the machine runs (unlike req/s).
run_wrk() {
  local before after requests
  pg_ticks >"$DATA/pg_before.txt"
  before=$(cpu_ticks)
  /usr/bin/time -f '%U %S' -o "$DATA/client_time.txt" \
    wrk -t2 -c16 -d"${SECONDS_EACH}"s --latency "$@" >"$DATA/wrk.txt"
  after=$(cpu_ticks)
  pg_ticks >"$DATA/pg_after.txt"
  grep -q "Non-2xx" "$DATA/wrk.txt" && { echo "hf answered errors:" >&2; cat "$DATA/wrk.txt" >&2; exit 1; }
  requests=$(grep -oE '[0-9]+ requests in' "$DATA/wrk.txt" | cut -d' ' -f1)
  python3 - "$DATA/wrk.txt" "$((after - before))" "$(getconf CLK_TCK)" \
    "$(pg_us_per "$DATA/pg_before.txt" "$DATA/pg_after.txt" "$requests")" \
    "$(client_seconds "$DATA/client_time.txt")" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
requests = max(int(re.search(r"(\d+) requests in", text).group(1)), 1)
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
value, unit = re.search(r"\s99%\s+([\d.]+)(us|ms|s)", text).groups()
p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
hf_us = int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / requests
wrk_us = float(sys.argv[5]) * 1e6 / requests
print(f"{rps:.0f} {p99:.2f} {hf_us:.1f} {sys.argv[4]} {wrk_us:.1f}")
PY
}
# pgbench -M prepared -j2 -c16; prints "<tps> <p99 ms> <PostgreSQL CPU µs> <pgbench CPU µs>"
# (p99 from the transaction log, CPU per transaction as for wrk).
run_pgbench() {
  rm -f "$DATA"/pgbench_log.*
  # The backends are sampled while pgbench runs (they end with it), from its second second to
  # two seconds before its end.
  (sleep 1; pg_ticks >"$DATA/pgb_before.txt"; sleep "$((SECONDS_EACH - 3))"; pg_ticks >"$DATA/pgb_after.txt") &
  local sampler=$!
  (cd "$DATA" && /usr/bin/time -f '%U %S' -o "$DATA/client_time.txt" \
    pgbench -n -M prepared -c 16 -j 2 -T "$SECONDS_EACH" -l -D "id=$OPPORTUNITY" \
    -f "$1" "$PG/$DB" >"$DATA/pgbench.txt" 2>&1)
  wait "$sampler"
  python3 - "$DATA/pgbench.txt" "$DATA/pgb_before.txt" "$DATA/pgb_after.txt" \
    "$(getconf CLK_TCK)" "$SECONDS_EACH" "$(client_seconds "$DATA/client_time.txt")" "$DATA"/pgbench_log.* <<'PY'
import re, sys
text = open(sys.argv[1]).read()
tps = float(re.search(r"tps = ([\d.]+)", text).group(1))
transactions = max(int(re.search(r"number of transactions actually processed: (\d+)", text).group(1)), 1)
latencies = sorted(int(line.split()[2]) for name in sys.argv[7:] for line in open(name))
p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000
ticks = lambda name: dict(map(int, line.split()) for line in open(name) if line.strip())
before, after = ticks(sys.argv[2]), ticks(sys.argv[3])
# The backends' CPU over the sampled window (about its length: a sample's own delay is alike at
# both ends), per transaction at the run's rate.
used_us = sum(t - before.get(p, 0) for p, t in after.items() if p in before) * 1e6 / int(sys.argv[4])
pg_us = used_us / max(tps * (int(sys.argv[5]) - 3), 1)
client_us = float(sys.argv[6]) * 1e6 / transactions
print(f"{tps:.0f} {p99:.2f} {pg_us:.1f} {client_us:.1f}")
PY
}
# Runs ROUNDS rounds of hf against pgbench for one kind of work, alternating which goes first
# so that a drift of the machine's speed (it is shared) weighs on both alike; prints one
# "<hf figures>|<pgbench figures>" line per round.
compare() {  # pgbench script, wrk arguments…
  local sql=$1 round hf pg
  shift
  for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
      hf=$(run_wrk "$@"); pg=$(run_pgbench "$sql")
    else
      pg=$(run_pgbench "$sql"); hf=$(run_wrk "$@")
    fi
    echo "$hf|$pg"
  done
}
# Prints one kind's figures: the median over the rounds of hf/pgbench throughput and p99
# (each round's ratio in brackets) and the CPU µs per request of every process involved.
report() {  # name, rounds (from `compare`)
  python3 - "$@" <<'PY'
import statistics, sys
name, rounds = sys.argv[1], [line.split("|") for line in sys.argv[2].splitlines()]
hf = [[float(x) for x in a.split()] for a, _ in rounds]
pg = [[float(x) for x in b.split()] for _, b in rounds]
ratios = [h[0] / p[0] for h, p in zip(hf, pg)]
tails = [h[1] / p[1] for h, p in zip(hf, pg)]
med = lambda values: statistics.median(values)
column = lambda rows, i: med([row[i] for row in rows])
print(f"{name}: ratio {med(ratios):.2f} [{' '.join(f'{r:.2f}' for r in ratios)}], "
      f"p99 {med(tails):.1f}x [{' '.join(f'{t:.1f}' for t in tails)}]")
print(f"    hf {column(hf, 0):.0f} req/s, p99 {column(hf, 1):.2f} ms | pgbench {column(pg, 0):.0f} tps, "
      f"p99 {column(pg, 1):.2f} ms (medians of {len(rounds)} rounds)")
hf_cpu = [column(hf, i) for i in (2, 3, 4)]
pg_cpu = [column(pg, i) for i in (2, 3)]
print(f"    CPU µs per request: hf {hf_cpu[0]:.0f} + PostgreSQL {hf_cpu[1]:.0f} + wrk {hf_cpu[2]:.0f} "
      f"= {sum(hf_cpu):.0f} | PostgreSQL {pg_cpu[0]:.0f} + pgbench {pg_cpu[1]:.0f} = {sum(pg_cpu):.0f}")
PY
}

ROUNDS=${BENCH_ROUNDS:-3}
echo "== hf (wrk -t2 -c16) against pgbench -M prepared -j2 -c16, $ROUNDS rounds of ${SECONDS_EACH} s each, database $DB"
get=$(compare "$DATA/read.sql" -H "Authorization: Bearer $TOKEN" "$BASE/data/crm/opportunity/$OPPORTUNITY")
report "GET a record by id" "$get"
inlined=$(run_pgbench "$DATA/read_inlined.sql")
echo "    pgbench with the id inlined (one run): $(cut -d' ' -f1 <<<"$inlined") tps, p99 $(cut -d' ' -f2 <<<"$inlined") ms, PostgreSQL CPU $(cut -d' ' -f3 <<<"$inlined") µs per transaction"
query=$(compare "$DATA/query.sql" -s "$DATA/query.lua" "$BASE/data/query")
report "HOQS filter+sort+lookup, 50 rows" "$query"
create=$(compare "$DATA/create.sql" -s "$DATA/create.lua" "$BASE/data/crm/opportunity")
report "create a record" "$create"
# The same create with an Idempotency-Key (a new key for every request, as a client sends), next
# to it without, alternating which goes first: what keeping the key costs.
keyed_create() {  # round
  cat > "$DATA/create_keyed.lua" <<LUA
wrk.method = "POST"
wrk.body = [==[$BODY]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local counter = 0
request = function()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = string.format("bench-$1-%d-%d", tid, counter)
  return wrk.format()
end
LUA
  run_wrk -s "$DATA/create_keyed.lua" "$BASE/data/crm/opportunity"
}
keyed=""
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    k=$(keyed_create "$round"); p=$(run_wrk -s "$DATA/create.lua" "$BASE/data/crm/opportunity")
  else
    p=$(run_wrk -s "$DATA/create.lua" "$BASE/data/crm/opportunity"); k=$(keyed_create "$round")
  fi
  keyed+="$k|$p"$'\n'
done
python3 - "$keyed" <<'PY'
import statistics, sys
rounds = [line.split("|") for line in sys.argv[1].splitlines() if line]
keyed = [[float(x) for x in a.split()] for a, _ in rounds]
plain = [[float(x) for x in b.split()] for _, b in rounds]
ratios = [k[0] / p[0] for k, p in zip(keyed, plain)]
med = statistics.median
cpu = lambda rows: med([row[2] + row[3] for row in rows])
print(f"create with Idempotency-Key against without: ratio {med(ratios):.2f} "
      f"[{' '.join(f'{r:.2f}' for r in ratios)}], {med([k[0] for k in keyed]):.0f} against "
      f"{med([p[0] for p in plain]):.0f} req/s; hf + PostgreSQL CPU µs per create "
      f"{cpu(keyed):.0f} against {cpu(plain):.0f} (medians of {len(rounds)} rounds)")
PY
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
