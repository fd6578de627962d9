#!/usr/bin/env bash
# `POST /data/query` throughput and p99 at 16 connections, next to pgbench running the same SQL
# directly (issue 6). Needs a release build (`cargo build --release -p hf`), PostgreSQL on
# 127.0.0.1:5432 (user postgres, trust), wrk and pgbench. Creates and drops its own database.
#
# The query is fixtures/hoqs/ok/five_paths_three_conditions.hoqs (filtered, sorted, joined, 50
# rows); its SQL and parameters are read from that fixture's snapshot, so both sides run exactly
# the statement the compiler produces. Usage: http_vs_pgbench.sh [seconds]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
SECONDS_TO_RUN=${1:-10}
DB=hf_bench_$$
WORK=$(mktemp -d)
PORT=18080
PG=postgres://postgres@127.0.0.1:5432
cleanup() {
  [[ -n "${SERVER:-}" ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
  psql -qtA "$PG/postgres" -c "SELECT rolname FROM pg_roles WHERE rolname LIKE 'bench_admin_$$%'" |
    while read -r role; do psql -q "$PG/postgres" -c "DROP ROLE \"$role\"" >/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
psql -q "$PG/postgres" -c "CREATE DATABASE $DB" >/dev/null

HF_DATABASE_URL="$PG/$DB" HF_DATA_DIR="$WORK" HF_METADATA_PATH="$WORK/metadata" \
HF_LISTEN="127.0.0.1:$PORT" HF_ADMIN_NAME="bench_admin_$$" HF_ADMIN_PASSWORD="bench-password-$$" \
HF_LOG=warn "$ROOT/target/release/hf" serve --demo >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done

psql -q "$PG/$DB" >/dev/null <<'SQL'
INSERT INTO crm.account (name, industry)
  SELECT 'Account ' || n, (ARRAY['Energy','Retail','Finance','Health','Media'])[1 + n % 5]
  FROM generate_series(1, 200) n;
WITH a AS (SELECT id, row_number() OVER (ORDER BY name) - 1 AS k FROM crm.account)
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date)
  SELECT 'Deal ' || n, a.id, (n * 37 % 100000) / 3.0, n % 101,
         (ARRAY['open','won','lost','negotiation'])[1 + n % 4], DATE '2024-01-01' + (n % 365)
  FROM generate_series(1, 10000) n JOIN a ON a.k = n % 200;
ANALYZE;
SQL

TOKEN=$(curl -sS -X POST "http://127.0.0.1:$PORT/auth/login" -H 'content-type: application/json' \
  -d "{\"username\":\"bench_admin_$$\",\"password\":\"bench-password-$$\"}" |
  sed -E 's/.*"token":"([^"]+)".*/\1/')
FIXTURE="$ROOT/fixtures/hoqs/ok/five_paths_three_conditions.hoqs"
QUERY=$(grep -v '^--' "$FIXTURE" | tr '\n' ' ')
BODY=$(printf '{"query": "%s", "params": {"stage": "open"}}' "$QUERY")
RECORDS=$(curl -sS -X POST "http://127.0.0.1:$PORT/data/query" -H "authorization: Bearer $TOKEN" \
  -H 'content-type: application/json' -d "$BODY" | grep -o '"name"' | wc -l)
echo "records per query: $RECORDS (of $(psql -qtA "$PG/$DB" -c 'SELECT count(*) FROM crm.opportunity') opportunities)"

cat >"$WORK/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
wrk.body = [[$BODY]]
LUA
echo "== POST /data/query, wrk -t2 -c16 -d${SECONDS_TO_RUN}s"
wrk -t2 -c16 -d"${SECONDS_TO_RUN}s" --latency -s "$WORK/post.lua" "http://127.0.0.1:$PORT/data/query" |
  grep -E 'Requests/sec|99%|50%|Non-2xx'

# The same statement for pgbench: `$n` become pgbench variables given with -D.
SNAPSHOT="$ROOT/fixtures/hoqs/snapshots/ok@five_paths_three_conditions.hoqs.snap"
SQL=$(sed -n '5p' "$SNAPSHOT" | sed -E 's/\$([0-9]+)/:p\1/g')
DEFINES=()
while read -r line; do
  n=$(sed -E 's/^\$([0-9]+) = .*/\1/' <<<"$line")
  value=$(sed -E 's/^\$[0-9]+ = "(.*)"$/\1/' <<<"$line")
  DEFINES+=(-D "p$n=$value")
done < <(grep -E '^\$[0-9]+ = ' "$SNAPSHOT")
echo "$SQL;" >"$WORK/query.sql"
echo "== pgbench -M prepared -c 16 -j 2 -T $SECONDS_TO_RUN (the statement alone, as the login role)"
pgbench -n -M prepared -c 16 -j 2 -T "$SECONDS_TO_RUN" -r "${DEFINES[@]}" -f "$WORK/query.sql" "$PG/$DB" |
  grep -E '^tps|latency average'
{
  echo "BEGIN READ ONLY;"
  echo "SELECT set_config('role', 'bench_admin_$$', true), set_config('statement_timeout', '5000ms', true), set_config('TimeZone', 'UTC', true);"
  echo "$SQL;"
  echo "COMMIT;"
} >"$WORK/transaction.sql"
echo "== pgbench, the service's whole transaction (BEGIN, role switch, statement, COMMIT)"
pgbench -n -M prepared -c 16 -j 2 -T "$SECONDS_TO_RUN" "${DEFINES[@]}" -f "$WORK/transaction.sql" "$PG/$DB" |
  grep -E '^tps|latency average'
