# The setup the HOQS benchmark scripts share; sourced, not run. Before sourcing, a script sets
# NAME (a short lower-case word naming its database, role and port offset) and may set PORT.
#
# It creates the database hf_<NAME>_<pid>, starts the release build of hf on it with the demo
# metadata (built if missing; HF_BIN names another build), logs in as a fresh administrator (TOKEN), and on exit
# stops hf and drops the database, the role and the work directory (WORK). It also gives the
# helpers the scripts time with: `query_body`, `post_query`, `run_wrk`, `run_pgbench`,
# `snapshot_sql`, `pgbench_defines`, `report` and `compare_with_pgbench`.
# Needs: PostgreSQL on 127.0.0.1:5432 (HF_BENCH_PG; user postgres, trust), curl, python3, and for
# the load runs wrk and pgbench.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps |
  sed -E 's/.*"target_directory":"([^"]+)".*/\1/')}
HF=${HF_BIN:-$TARGET/release/hf}
[ -x "$HF" ] || (cd "$ROOT" && cargo build --release -p hf)
PG=${HF_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18080}
SECONDS_EACH=${BENCH_SECONDS:-10}
DB=hf_${NAME}_$$
ADMIN=${NAME}_admin_$$
PASSWORD=${NAME}-password-$$
BASE=http://127.0.0.1:$PORT
WORK=$(mktemp -d)

cleanup() {
  [[ -n "${SERVER:-}" ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true
  psql -q "$PG/$DB" -c "REASSIGN OWNED BY \"$ADMIN\" TO CURRENT_USER; DROP OWNED BY \"$ADMIN\"" \
    >/dev/null 2>&1 || true
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null || true
  psql -q "$PG/postgres" -c "DROP ROLE IF EXISTS \"$ADMIN\"" >/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
psql -q "$PG/postgres" -c "CREATE DATABASE $DB" >/dev/null

HF_DATABASE_URL="$PG/$DB" HF_DATA_DIR="$WORK" HF_METADATA_PATH="$WORK/metadata" \
HF_LISTEN="127.0.0.1:$PORT" HF_ADMIN_NAME="$ADMIN" HF_ADMIN_PASSWORD="$PASSWORD" \
HF_LOG=warn "$HF" serve --demo >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 300); do curl -sf "$BASE/health" >/dev/null && break; sleep 0.2; done
curl -sf "$BASE/health" >/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
TOKEN=$(curl -sS -X POST "$BASE/auth/login" -H 'content-type: application/json' \
  -d "{\"username\":\"$ADMIN\",\"password\":\"$PASSWORD\"}" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')

# query_body QUERY [MEMBERS]: the JSON body of POST /data/query, MEMBERS being a JSON object of
# more members (`{"cursor": null}`).
query_body() {
  python3 -c 'import json, sys
body = {"query": sys.argv[1]}
body.update(json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
print(json.dumps(body))' "$@"
}

# post_query BODY: posts it, leaves the answer in $WORK/answer.json and prints the time taken in
# seconds.
post_query() {
  curl -sS -o "$WORK/answer.json" -w '%{time_total}\n' -X POST "$BASE/data/query" \
    -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$1"
}

# snapshot_sql FIXTURE: the SQL the compiler gives for fixtures/hoqs/ok/FIXTURE.hoqs, from its
# snapshot (line 5).
snapshot_sql() {
  sed -n '5p' "$ROOT/fixtures/hoqs/snapshots/ok@$1.hoqs.snap"
}

# pgbench_defines FIXTURE: the snapshot's parameters as pgbench `-D pN=value` arguments, one a
# line (the SQL's `$N` become `:pN`).
pgbench_defines() {
  grep -E '^\$[0-9]+ = ' "$ROOT/fixtures/hoqs/snapshots/ok@$1.hoqs.snap" |
    sed -E 's/^\$([0-9]+) = "(.*)"$/-D\np\1=\2/'
}

# run_wrk LUA_SCRIPT: POST /data/query at c=16 for SECONDS_EACH; prints "<req/s> <p99 ms>", and
# stops the script if hf answered anything but 2xx.
run_wrk() {
  wrk -t2 -c16 -d"${SECONDS_EACH}s" --latency -s "$1" "$BASE/data/query" >"$WORK/wrk.txt"
  if grep -q "Non-2xx" "$WORK/wrk.txt"; then
    echo "hf answered errors:" >&2; cat "$WORK/wrk.txt" >&2; exit 1
  fi
  python3 - "$WORK/wrk.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
value, unit = re.search(r"\s99%\s+([\d.]+)(us|ms|s)", text).groups()
print(f"{rps:.0f} {float(value) * {'us': 0.001, 'ms': 1.0, 's': 1000.0}[unit]:.2f}")
PY
}

# run_pgbench SQL_FILE [ARGS...]: pgbench -M prepared -j2 -c16 for SECONDS_EACH; prints
# "<tps> <p99 ms>" (p99 from the transaction log).
run_pgbench() {
  local file=$1
  shift
  rm -f "$WORK"/pgbench_log.*
  (cd "$WORK" && pgbench -n -M prepared -c 16 -j 2 -T "$SECONDS_EACH" -l "$@" -f "$file" \
    "$PG/$DB" >"$WORK/pgbench.txt" 2>&1) || { cat "$WORK/pgbench.txt" >&2; exit 1; }
  python3 - "$WORK/pgbench.txt" "$WORK"/pgbench_log.* <<'PY'
import re, sys
tps = float(re.search(r"tps = ([\d.]+)", open(sys.argv[1]).read()).group(1))
latencies = sorted(int(line.split()[2]) for name in sys.argv[2:] for line in open(name))
p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000
print(f"{tps:.0f} {p99:.2f}")
PY
}

# report NAME "<req/s> <p99>" "<tps> <p99>": one line with both figures and their ratio.
report() {
  python3 - "$@" <<'PY'
import sys
name, hf, pg = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
hf_rps, hf_p99, pg_tps, pg_p99 = float(hf[0]), float(hf[1]), float(pg[0]), float(pg[1])
print(f"{name:<40} hf {hf_rps:>7.0f} req/s p99 {hf_p99:7.2f} ms | pgbench {pg_tps:>7.0f} tps "
      f"p99 {pg_p99:7.2f} ms | ratio {hf_rps / pg_tps:.2f}")
PY
}

# compare_with_pgbench TITLE FIXTURE SQL BODY: POST /data/query with BODY through wrk against
# pgbench running SQL (the fixture's parameters given with -D), both as the bare statement and in
# the transaction the service wraps it in; prints both comparisons and the load average.
compare_with_pgbench() {
  local title=$1 fixture=$2 sql=$3 body=$4 statement hf alone wrapped
  cat >"$WORK/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
wrk.body = [==[$body]==]
LUA
  # The same statement for pgbench: `$n` become pgbench variables given with -D.
  local defines
  mapfile -t defines < <(pgbench_defines "$fixture")
  statement=$(sed -E 's/\$([0-9]+)/:p\1/g' <<<"$sql")
  echo "$statement;" >"$WORK/statement.sql"
  {
    echo "BEGIN READ ONLY;"
    echo "SELECT set_config('role', '$ADMIN', true), set_config('statement_timeout', '5000ms', true), set_config('TimeZone', 'UTC', true);"
    echo "$statement;"
    echo "COMMIT;"
  } >"$WORK/transaction.sql"
  echo "== $title: wrk -t2 -c16 against pgbench -M prepared -j2 -c16, ${SECONDS_EACH} s each"
  hf=$(run_wrk "$WORK/post.lua")
  alone=$(run_pgbench "$WORK/statement.sql" "${defines[@]}")
  wrapped=$(run_pgbench "$WORK/transaction.sql" "${defines[@]}")
  report "POST /data/query vs the statement" "$hf" "$alone"
  report "POST /data/query vs its transaction" "$hf" "$wrapped"
  echo "load average (1, 5, 15 min) after the runs: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
}
