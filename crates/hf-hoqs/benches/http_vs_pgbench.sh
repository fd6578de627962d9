#!/usr/bin/env bash
# `POST /data/query` throughput and p99 at 16 connections (wrk), next to pgbench -M prepared
# -j2 -c16 running the same SQL directly, in one run on one database of 200 accounts and 10,000
# opportunities; prints both figures, their p99s, the ratio and the load average.
#
# The query is fixtures/hoqs/ok/five_paths_three_conditions.hoqs (filtered, sorted, joined, 50
# rows); its SQL and parameters are read from that fixture's snapshot, so both sides run exactly
# the statement the compiler produces. pgbench runs it alone and in the transaction the service
# wraps it in (BEGIN READ ONLY, the role switch, the statement, COMMIT).
# Needs a release build (`cargo build --release -p hf`); see common.sh. Usage:
# http_vs_pgbench.sh (BENCH_SECONDS, default 10, is the length of each run).
NAME=bench
PORT=${BENCH_PORT:-18080}
source "$(dirname "$0")/common.sh"

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

FIXTURE=five_paths_three_conditions
QUERY=$(grep -v '^--' "$ROOT/fixtures/hoqs/ok/$FIXTURE.hoqs" | tr '\n' ' ')
BODY=$(query_body "$QUERY" '{"params": {"stage": "open"}}')
post_query "$BODY" >/dev/null
RECORDS=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["records"]))' "$WORK/answer.json")
echo "records per query: $RECORDS (of $(psql -qtA "$PG/$DB" -c 'SELECT count(*) FROM crm.opportunity') opportunities)"

compare_with_pgbench "five paths, three conditions, 50 rows" "$FIXTURE" "$(snapshot_sql "$FIXTURE")" "$BODY"
