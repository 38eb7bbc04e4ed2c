#!/usr/bin/env bash
# Runs Dolmen's whole test suite: formatting, lints, the dependency ban and license check, unit
# and integration tests. Installs and starts what the tests need first
# (scripts/install-test-deps.sh: the Rust components, cargo-deny, a local S3-compatible server, a
# Kafka-protocol broker, a Kinesis-API emulator and the Python
# clients). Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
export DOLMEN_TEST_S3_ENDPOINT="${DOLMEN_TEST_S3_ENDPOINT:-http://127.0.0.1:${DOLMEN_TEST_S3_PORT:-9010}}"
export DOLMEN_TEST_KAFKA_BROKERS="${DOLMEN_TEST_KAFKA_BROKERS:-127.0.0.1:${DOLMEN_TEST_KAFKA_PORT:-9092}}"
export DOLMEN_TEST_KINESIS_ENDPOINT="${DOLMEN_TEST_KINESIS_ENDPOINT:-http://127.0.0.1:${DOLMEN_TEST_KINESIS_PORT:-4567}}"
DEPS_DIR="${DOLMEN_TEST_DEPS_DIR:-$HOME/.cache/dolmen-test-deps}"
export DOLMEN_TEST_PYTHON="${DOLMEN_TEST_PYTHON:-$DEPS_DIR/clients/bin/python}"
export DOLMEN_TEST_TANSU="${DOLMEN_TEST_TANSU:-$DEPS_DIR/tansu-broker}"

echo "==> cargo deny check bans licenses sources"
# No cmake, OpenSSL or system-library builds (deny.toml, ADR 0016); licenses; crates.io only.
"$DEPS_DIR/cargo-deny/bin/cargo-deny" --log-level error check bans licenses sources

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "==> cargo test"
cargo test --workspace --locked --no-fail-fast
