#!/usr/bin/env bash
# Runs Dolmen's whole test suite: formatting, lints, unit and integration tests.
# Installs and starts what the tests need first (scripts/install-test-deps.sh: the Rust
# components and a local S3-compatible server). Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
export DOLMEN_TEST_S3_ENDPOINT="${DOLMEN_TEST_S3_ENDPOINT:-http://127.0.0.1:${DOLMEN_TEST_S3_PORT:-9010}}"

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "==> cargo test"
cargo test --workspace --locked --no-fail-fast
