#!/usr/bin/env bash
# Runs Dolmen's whole test suite: formatting, lints, unit and integration tests.
# Installs and starts what the tests need first (scripts/install-test-deps.sh: the Rust
# components, a local S3-compatible server, a Kafka-protocol broker and the pydruid client). Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
export DOLMEN_TEST_S3_ENDPOINT="${DOLMEN_TEST_S3_ENDPOINT:-http://127.0.0.1:${DOLMEN_TEST_S3_PORT:-9010}}"
export DOLMEN_TEST_KAFKA_BROKERS="${DOLMEN_TEST_KAFKA_BROKERS:-127.0.0.1:${DOLMEN_TEST_KAFKA_PORT:-9092}}"
export DOLMEN_TEST_PYTHON="${DOLMEN_TEST_PYTHON:-${DOLMEN_TEST_DEPS_DIR:-$HOME/.cache/dolmen-test-deps}/clients/bin/python}"

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "==> cargo test"
cargo test --workspace --locked --no-fail-fast
