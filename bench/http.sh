#!/usr/bin/env bash
# Load benchmarks of the HTTP service on loopback (wrk): /health, an authenticated metadata read,
# metadata writes on one branch; plus cold start and memory. Run with `cargo xtask bench http`.
# Needs: wrk, curl, python3, a release build of hf (built here), PostgreSQL binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
HF=${HF_BIN:-${CARGO_TARGET_DIR:-target}/release/hf}
[ -x "$HF" ] || cargo build --release -p hf
PORT=${BENCH_PORT:-18090}
DATA=$(mktemp -d /tmp/hf-bench-XXXXXX); chmod 755 "$DATA"
PASSWORD=bench-password-123
BASE=http://127.0.0.1:$PORT
start() { HF_LISTEN=127.0.0.1:$PORT HF_DATA_DIR=$DATA HF_ADMIN_PASSWORD=$PASSWORD HF_LOG=warn "$HF" serve --demo >"$DATA/serve.log" 2>&1 & echo $!; }
wait_up() { for _ in $(seq 1 600); do curl -sf "$BASE/health" >/dev/null && return 0; sleep 0.01; done; echo "service did not start"; cat "$DATA/serve.log"; exit 1; }
stop() { kill -TERM "$1"; while kill -0 "$1" 2>/dev/null; do sleep 0.05; done; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

pid=$(start); wait_up; stop "$pid"   # first start initialises the cluster
t0=$(date +%s%N); pid=$(start); wait_up; t1=$(date +%s%N)
echo "cold start (cluster initialised): $(( (t1 - t0) / 1000000 )) ms"
sleep 1; echo "RSS idle: $(rss "$pid") KiB"

TOKEN=$(curl -sf -X POST "$BASE/auth/login" -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

echo "== GET /health, c=32, 10 s"
wrk -t2 -c32 -d10s --latency "$BASE/health" | grep -E "Requests/sec|99%|Latency "
echo "RSS under load (right after): $(rss "$pid") KiB"
echo "== GET /auth/me, c=32, 10 s"
wrk -t2 -c32 -d10s --latency -H "Authorization: Bearer $TOKEN" "$BASE/auth/me" | grep -E "Requests/sec|99%|Latency "
cat > "$DATA/login.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"username":"admin","password":"$PASSWORD"}'
LUA
for c in 1 4; do
  echo "== POST /auth/login (argon2id m=19 MiB t=2), c=$c, 10 s"
  wrk -t1 -c$c -d10s --latency -s "$DATA/login.lua" "$BASE/auth/login" | grep -E "Requests/sec|50%|99%|Non-2xx"
done
echo "== GET /metadata/crm/objects/account, c=32, 10 s"
wrk -t2 -c32 -d10s --latency -H "Authorization: Bearer $TOKEN" "$BASE/metadata/crm/objects/account" | grep -E "Requests/sec|99%|Latency "
echo "== POST metadata field writes on one branch (bench), c=8, 10 s"
cat > "$DATA/write.lua" <<LUA
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local counter = 0
request = function()
  counter = counter + 1
  local key = string.format("f_%d_%d", tid, counter)
  return wrk.format("POST", "/metadata@bench/crm/objects/account/fields/" .. key,
    {["Content-Type"] = "application/json", ["Authorization"] = "Bearer $TOKEN"},
    '{"fieldKind":"scalar","label":"F","fieldType":"integer"}')
end
LUA
wrk -t2 -c8 -d10s --latency -s "$DATA/write.lua" "$BASE" | grep -E "Requests/sec|99%|Latency |Non-2xx"
echo "RSS after load: $(rss "$pid") KiB"
echo "== PUT metadata field updates on one branch (constant size), c=8, 3 x 10 s"
curl -sf -o /dev/null -X POST "$BASE/metadata@bench/crm/objects/account/fields/updated" \
  -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d '{"fieldKind":"scalar","label":"Updated","fieldType":"integer"}'
cat > "$DATA/update.lua" <<LUA
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("PUT", "/metadata@bench/crm/objects/account/fields/updated",
    {["Content-Type"] = "application/json", ["Authorization"] = "Bearer $TOKEN"},
    string.format('{"fieldKind":"scalar","label":"F %d %d","fieldType":"integer"}', tid, counter))
end
LUA
for round in 1 2 3; do
  wrk -t2 -c8 -d10s -s "$DATA/update.lua" "$BASE" | grep -E "Requests/sec|Non-2xx"
  echo "RSS after round $round: $(rss "$pid") KiB"
done
stop "$pid"
rm -rf "$DATA"
