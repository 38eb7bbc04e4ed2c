#!/usr/bin/env bash
# Streaming ingestion benchmark: throughput (rows/s, and per core of the dolmen process, beside
# the broker's own read rate) and produce-to-queryable latency at a steady rate. Starts the Kafka
# test broker (scripts/install-test-deps.sh), builds the release binary and the harness
# (crates/dolmen-stream/examples/stream_bench.rs), runs a fresh `dolmen server`.
# Usage: scripts/bench-stream.sh [ROWS] [RATE] [SECONDS]   (defaults 2000000 10000 30)
# The test broker (tansu's in-memory engine) needs one record per produce batch and takes about
# 1.5k events/s that way. For the 10k events/s latency run, start tansu built with its SQLite
# engine (TEST-SERVICES.md: `cargo install tansu --version 0.6.0 --locked --features
# dynostore,libsql`, `--storage-engine sqlite://tansu.db`), point DOLMEN_TEST_KAFKA_BROKERS at
# it and set DOLMEN_BENCH_BATCH_MS=5 so the producer batches records (linger 5 ms).
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${1:-2000000}"
RATE="${2:-10000}"
SECONDS_="${3:-30}"
bash scripts/install-test-deps.sh >/dev/null
BROKERS="${DOLMEN_TEST_KAFKA_BROKERS:-127.0.0.1:${DOLMEN_TEST_KAFKA_PORT:-9092}}"
cargo build --release -p dolmen --bin dolmen
cargo build --release -p dolmen-stream --example stream_bench
TARGET="${CARGO_TARGET_DIR:-target}"
DATA="$(mktemp -d)"
PORT=18888
"$TARGET/release/dolmen" server --port "$PORT" --data-dir "$DATA" >"$DATA/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/status/health" >/dev/null && break
  sleep 0.1
done
BENCH="$TARGET/release/examples/stream_bench"
BATCH=()
if [ -n "${DOLMEN_BENCH_BATCH_MS:-}" ]; then BATCH=(--batch-ms "$DOLMEN_BENCH_BATCH_MS"); fi
echo "## Throughput ($ROWS rows)"
"$BENCH" --url "http://127.0.0.1:$PORT" --brokers "$BROKERS" --pid "$PID" throughput "$ROWS"
echo
echo "## Latency ($RATE events/s for $SECONDS_ s): the broker alone, then through Dolmen"
"$BENCH" --url "http://127.0.0.1:$PORT" --brokers "$BROKERS" --pid "$PID" "${BATCH[@]}" \
  broker-latency "$RATE" "$SECONDS_"
"$BENCH" --url "http://127.0.0.1:$PORT" --brokers "$BROKERS" --pid "$PID" "${BATCH[@]}" \
  latency "$RATE" "$SECONDS_"
