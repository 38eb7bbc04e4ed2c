#!/usr/bin/env bash
# Runs Dolmen's whole test suite: formatting, lints, unit and integration tests.
# Installs what the tests need first (scripts/install-test-deps.sh; nothing beyond the Rust
# toolchain is needed yet). Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "==> cargo test"
cargo test --workspace --locked --no-fail-fast
