# Sourced by the benchmarks that run one release `hf serve --demo` on a database of their own on
# a shared PostgreSQL server (bench/data.sh, bench/soak.sh): creates the database, starts the
# service with an administrator of its own, waits until it answers, logs in, and on exit stops
# the service and drops the database, the administrator's role and the data directory.
# Expects HF (the binary), PG (the server's URL without a database) and PORT; `start_service
# <name>` sets DB, DATA, ADMIN, PASSWORD, BASE, pid and TOKEN, and defines `json <key>`.
start_service() {  # name (of the database and data directory: hf_bench_<name>_<pid>)
  DB=hf_bench_$1_$$
  DATA=$(mktemp -d "/tmp/hf-bench-$1-XXXXXX"); chmod 755 "$DATA"
  ADMIN=bench_admin_$$
  PASSWORD=bench-password-123
  BASE=http://127.0.0.1:$PORT
  psql -q "$PG/postgres" -c "CREATE DATABASE $DB"
  trap stop_service EXIT
  HF_LISTEN=127.0.0.1:$PORT HF_DATA_DIR=$DATA HF_DATABASE_URL=$PG/$DB HF_ADMIN_NAME=$ADMIN \
    HF_ADMIN_PASSWORD=$PASSWORD HF_LOG=warn "$HF" serve --demo >"$DATA/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "$BASE/health" >/dev/null && break; sleep 0.05; done
  curl -sf "$BASE/health" >/dev/null || { cat "$DATA/serve.log"; exit 1; }
  TOKEN=$(curl -sf -X POST "$BASE/auth/login" -H 'content-type: application/json' \
    -d "{\"username\":\"$ADMIN\",\"password\":\"$PASSWORD\"}" | json token)
}

stop_service() {
  [ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  psql -q "$PG/$DB" -c "REASSIGN OWNED BY \"$ADMIN\" TO CURRENT_USER; DROP OWNED BY \"$ADMIN\"" 2>/dev/null || true
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "DROP ROLE IF EXISTS \"$ADMIN\"" || true
  rm -rf "$DATA"
}

json() { python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }
