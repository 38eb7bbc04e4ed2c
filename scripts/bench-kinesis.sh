#!/usr/bin/env bash
# Kinesis (`shardstream`) ingestion benchmark: throughput (rows/s, and per core of the dolmen
# process, beside the service's own read rate) and put-to-queryable latency at a steady rate
# beside the service's own put-to-read latency (the floor). Starts kinesalite
# (scripts/install-test-deps.sh), builds the binary and the harness
# (crates/dolmen-stream/examples/kinesis_bench.rs), runs a fresh `dolmen server`.
# Usage: scripts/bench-kinesis.sh [ROWS] [RATE] [SECONDS]   (defaults 200000 1000 30; ROWS=0: latency only)
# DOLMEN_BENCH_PROFILE=debug uses a debug build (default release).
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${1:-200000}"
RATE="${2:-1000}"
SECONDS_="${3:-30}"
bash scripts/install-test-deps.sh >/dev/null
ENDPOINT="${DOLMEN_TEST_KINESIS_ENDPOINT:-http://127.0.0.1:4567}"
PROFILE="${DOLMEN_BENCH_PROFILE:-release}"
FLAG=(--release)
if [ "$PROFILE" = debug ]; then FLAG=(); fi
cargo build "${FLAG[@]}" -p dolmen --bin dolmen
cargo build "${FLAG[@]}" -p dolmen-stream --example kinesis_bench
TARGET="${CARGO_TARGET_DIR:-target}"
DATA="$(mktemp -d)"
PORT=18889
printf 'service.kinesis.accessKey=bench\nservice.kinesis.secretKey=bench\n' >"$DATA/runtime.properties"
"$TARGET/$PROFILE/dolmen" server --port "$PORT" --data-dir "$DATA/data" \
  --config "$DATA/runtime.properties" >"$DATA/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/status/health" >/dev/null && break
  sleep 0.1
done
BENCH="$TARGET/$PROFILE/examples/kinesis_bench"
ARGS=(--url "http://127.0.0.1:$PORT" --endpoint "$ENDPOINT" --pid "$PID")
# ROWS=0 skips the throughput run (its terminated supervisor publishes while the latency run goes).
if [ "$ROWS" != 0 ]; then
  echo "## Throughput ($ROWS rows, $PROFILE build)"
  "$BENCH" "${ARGS[@]}" throughput "$ROWS"
  echo
fi
echo "## Latency ($RATE records/s for $SECONDS_ s): the service alone, then through Dolmen"
"$BENCH" "${ARGS[@]}" service-latency "$RATE" "$SECONDS_"
"$BENCH" "${ARGS[@]}" latency "$RATE" "$SECONDS_"
