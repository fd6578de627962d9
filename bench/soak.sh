#!/usr/bin/env bash
# Memory under sustained load: `bench/soak.sh [minutes]` loads a release `hf serve --demo` with
# record reads and creates (`GET` and `POST /data/crm/opportunity`, 3 : 1, wrk at c=16) for that
# long (default 10) and reports its RSS idle and every minute, then throughput and p99. (The
# data path against raw PostgreSQL is bench/data.sh.)
# Needs: wrk, curl, psql, python3, PostgreSQL on 127.0.0.1:5432 (HF_BENCH_PG), a release build of
# hf (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
HF=${HF_BIN:-target/release/hf}
[ -x "$HF" ] || cargo build --release -p hf
PG=${HF_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
PORT=${BENCH_PORT:-18480}
MINUTES=${1:-10}
[[ "$MINUTES" =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/soak.sh [minutes]" >&2; exit 2; }
# shellcheck source=bench/service.sh
source bench/service.sh
start_service soak
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
post() { curl -sf -X POST "$BASE$1" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$2"; }
ACCOUNT=$(post /data/crm/account '{"name":"Acme","industry":"Tools"}' | json id)
BODY="{\"name\":\"Deal\",\"account\":\"$ACCOUNT\",\"amount\":\"1200.50\",\"probability\":40,\"stage\":\"open\",\"close_date\":\"2024-12-31\"}"
OPPORTUNITY=$(post /data/crm/opportunity "$BODY" | json id)

cat > "$DATA/mixed.lua" <<LUA
local n = 0
request = function()
  n = n + 1
  local headers = {["Authorization"] = "Bearer $TOKEN", ["Content-Type"] = "application/json"}
  if n % 4 == 0 then
    return wrk.format("POST", "/data/crm/opportunity", headers, '$BODY')
  end
  return wrk.format("GET", "/data/crm/opportunity/$OPPORTUNITY", headers)
end
LUA

echo "== soak: GET and POST (3:1) at c=16 for $MINUTES minutes; RSS idle $(rss) KiB"
wrk -t2 -c16 -d"$((MINUTES * 60))"s --latency -s "$DATA/mixed.lua" "$BASE" >"$DATA/soak.txt" &
load=$!
# RSS every minute, the last sample 5 s before the load ends.
for minute in $(seq 1 "$MINUTES"); do
  if [ "$minute" = "$MINUTES" ]; then sleep 55; else sleep 60; fi
  last=$(rss); [ "$minute" = 1 ] && first=$last
  echo "RSS after $minute minute(s): $last KiB"
done
wait "$load"; grep -E "Requests/sec|99%|Non-2xx" "$DATA/soak.txt" || true
python3 -c "print(f'growth: {($last - $first) * 100 / $first:+.1f}%')"
