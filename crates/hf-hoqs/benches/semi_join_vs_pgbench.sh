#!/usr/bin/env bash
# A semi-join through `POST /data/query` at 16 connections (wrk), next to pgbench -M prepared
# -j2 -c16 running the SQL hf generates for it, in one run on one database of 10,000 accounts
# and 50,000 opportunities; prints both figures, their p99s and the ratio (the target: hf at
# least half of pgbench), and the load average.
#
# The query is fixtures/hoqs/ok/semi_join_benchmark.hoqs (accounts with a big won deal, 50 by
# name). pgbench runs the SQL and parameters of that fixture's snapshot, and the script first
# checks, through the explain route, that the service generates exactly that SQL. pgbench runs
# it twice: the statement alone, and in the transaction the service wraps it in (BEGIN READ
# ONLY, the role switch, the statement, COMMIT).
# Needs a release build (`cargo build --release -p hf`); see common.sh. Usage:
# semi_join_vs_pgbench.sh (BENCH_SECONDS, default 10, is the length of each run).
NAME=semijoin
PORT=${BENCH_PORT:-18082}
source "$(dirname "$0")/common.sh"

psql -q "$PG/$DB" >/dev/null <<'SQL'
INSERT INTO crm.account (name, industry)
  SELECT 'Account ' || lpad(n::text, 5, '0'), (ARRAY['Energy','Retail','Finance','Health','Media'])[1 + n % 5]
  FROM generate_series(1, 10000) n;
WITH a AS (SELECT id, row_number() OVER (ORDER BY name) - 1 AS k FROM crm.account)
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date)
  SELECT 'Deal ' || n, a.id, (n * 37 % 100000) + 0.5, n % 101,
         (ARRAY['open','won','lost','negotiation'])[1 + n % 4], DATE '2024-01-01' + (n % 365)
  FROM generate_series(1, 50000) n JOIN a ON a.k = (n * 7919) % 10000;
ANALYZE;
SQL

FIXTURE=semi_join_benchmark
QUERY=$(grep -v '^--' "$ROOT/fixtures/hoqs/ok/$FIXTURE.hoqs" | tr '\n' ' ')
BODY=$(query_body "$QUERY" '{"params": {"stage": "won"}}')
SQL=$(snapshot_sql "$FIXTURE")
post_query "$(query_body "$QUERY" '{"params": {"stage": "won"}, "explain": true}')" >/dev/null
SERVED=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["sql"])' "$WORK/answer.json")
[[ "$SERVED" == "$SQL" ]] || {
  echo "the service generates other SQL than the snapshot of $FIXTURE:" >&2
  echo "$SERVED" >&2
  exit 1
}
post_query "$BODY" >/dev/null
RECORDS=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["records"]))' "$WORK/answer.json")
[[ "$RECORDS" == 50 ]] || { echo "the query answered $RECORDS records, not 50" >&2; exit 1; }

compare_with_pgbench "semi-join, 50 of 10,000 accounts over 50,000 opportunities" "$FIXTURE" "$SQL" "$BODY"
