#!/usr/bin/env bash
# Keyset paging: the time of `POST /data/query` for the first page and for the last page of
# 100,000 opportunities read 100 at a time (ORDER BY name), and of OFFSET 99900 for comparison.
# Needs a release build (`cargo build --release -p hf`); see common.sh.
# Usage: paging_first_vs_last.sh [repetitions]
REPEAT=${1:-30}
NAME=paging
PORT=${BENCH_PORT:-18081}
source "$(dirname "$0")/common.sh"

psql -q "$PG/$DB" >/dev/null <<'SQL'
INSERT INTO crm.account (name) VALUES ('Bench account');
INSERT INTO crm.opportunity (name, account, amount)
  SELECT 'Deal ' || lpad(n::text, 6, '0'), (SELECT id FROM crm.account), n % 1000
  FROM generate_series(1, 100000) n;
CREATE INDEX opportunity_name_id ON crm.opportunity (name, id);
ANALYZE;
SQL

QUERY='SELECT name, amount FROM crm.opportunity ORDER BY name LIMIT 100'
next_cursor() {
  python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["nextCursor"]))' "$WORK/answer.json"
}
# Walk every page to find the last page's cursor.
CURSOR=null
PAGES=0
LAST=null
while :; do
  post_query "$(query_body "$QUERY" "{\"cursor\": $CURSOR}")" >/dev/null
  PAGES=$((PAGES + 1))
  NEXT=$(next_cursor)
  [[ "$NEXT" == null ]] && break
  LAST=$NEXT
  CURSOR=$NEXT
done
echo "pages: $PAGES"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] * 1000 " ms"}'; }
FIRST_BODY=$(query_body "$QUERY" '{"cursor": null}')
LAST_BODY=$(query_body "$QUERY" "{\"cursor\": $LAST}")
OFFSET_BODY=$(query_body "$QUERY OFFSET 99900")
for _ in $(seq 5); do post_query "$FIRST_BODY" >/dev/null; post_query "$LAST_BODY" >/dev/null; done
echo "first page, median of $REPEAT: $(for _ in $(seq "$REPEAT"); do post_query "$FIRST_BODY"; done | median)"
echo "last page,  median of $REPEAT: $(for _ in $(seq "$REPEAT"); do post_query "$LAST_BODY"; done | median)"
echo "OFFSET 99900 (no cursor), median of $REPEAT: $(for _ in $(seq "$REPEAT"); do post_query "$OFFSET_BODY"; done | median)"
echo "load average (1, 5, 15 min) after the runs: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
