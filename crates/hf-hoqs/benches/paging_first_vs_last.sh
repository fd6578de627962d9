#!/usr/bin/env bash
# Keyset paging: the time of `POST /data/query` for the first page and for the last page of
# 100,000 opportunities read 100 at a time (ORDER BY name). Needs a release build
# (`cargo build --release -p hf`, found through `cargo metadata`), PostgreSQL on 127.0.0.1:5432
# (user postgres, trust) and curl. Creates and drops its own database.
# Usage: paging_first_vs_last.sh [repetitions]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
REPEAT=${1:-30}
TARGET=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | sed -E 's/.*"target_directory":"([^"]+)".*/\1/')
DB=hf_paging_$$
WORK=$(mktemp -d)
PORT=18081
PG=postgres://postgres@127.0.0.1:5432
cleanup() {
  [[ -n "${SERVER:-}" ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
  psql -qtA "$PG/postgres" -c "SELECT rolname FROM pg_roles WHERE rolname LIKE 'paging_admin_$$%'" |
    while read -r role; do psql -q "$PG/postgres" -c "DROP ROLE \"$role\"" >/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
psql -q "$PG/postgres" -c "CREATE DATABASE $DB" >/dev/null

HF_DATABASE_URL="$PG/$DB" HF_DATA_DIR="$WORK" HF_METADATA_PATH="$WORK/metadata" \
HF_LISTEN="127.0.0.1:$PORT" HF_ADMIN_NAME="paging_admin_$$" HF_ADMIN_PASSWORD="paging-password-$$" \
HF_LOG=warn "$TARGET/release/hf" serve --demo >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done

psql -q "$PG/$DB" >/dev/null <<'SQL'
INSERT INTO crm.account (name) VALUES ('Bench account');
INSERT INTO crm.opportunity (name, account, amount)
  SELECT 'Deal ' || lpad(n::text, 6, '0'), (SELECT id FROM crm.account), n % 1000
  FROM generate_series(1, 100000) n;
CREATE INDEX opportunity_name_id ON crm.opportunity (name, id);
ANALYZE;
SQL

TOKEN=$(curl -sS -X POST "http://127.0.0.1:$PORT/auth/login" -H 'content-type: application/json' \
  -d "{\"username\":\"paging_admin_$$\",\"password\":\"paging-password-$$\"}" |
  sed -E 's/.*"token":"([^"]+)".*/\1/')
QUERY='SELECT name, amount FROM crm.opportunity ORDER BY name LIMIT 100'
post() {
  curl -sS -o "$WORK/answer.json" -w '%{time_total}\n' -X POST "http://127.0.0.1:$PORT/data/query" \
    -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$1"
}
# Walk every page to find the last page's cursor.
CURSOR=null
PAGES=0
LAST=null
while :; do
  post "{\"query\": \"$QUERY\", \"cursor\": $CURSOR}" >/dev/null
  PAGES=$((PAGES + 1))
  NEXT=$(sed -E 's/.*"nextCursor":(null|"[^"]*").*/\1/' "$WORK/answer.json")
  [[ "$NEXT" == null ]] && break
  LAST=$NEXT
  CURSOR=$NEXT
done
echo "pages: $PAGES"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] * 1000 " ms"}'; }
FIRST_BODY="{\"query\": \"$QUERY\", \"cursor\": null}"
LAST_BODY="{\"query\": \"$QUERY\", \"cursor\": $LAST}"
for _ in $(seq 5); do post "$FIRST_BODY" >/dev/null; post "$LAST_BODY" >/dev/null; done
echo "first page, median of $REPEAT: $(for _ in $(seq "$REPEAT"); do post "$FIRST_BODY"; done | median)"
echo "last page,  median of $REPEAT: $(for _ in $(seq "$REPEAT"); do post "$LAST_BODY"; done | median)"
OFFSET_BODY="{\"query\": \"$QUERY OFFSET 99900\"}"
echo "OFFSET 99900 (no cursor), median of $REPEAT: $(for _ in $(seq "$REPEAT"); do post "$OFFSET_BODY"; done | median)"
