#!/usr/bin/env bash
# Installs the system packages and services Dolmen's tests need on a fresh Debian machine.
# Today the suite needs only the Rust toolchain (with rustfmt and clippy); later features add
# their services here (a Kafka-protocol broker, a Kinesis emulator, an S3-compatible server,
# PostgreSQL), each started on 127.0.0.1 only.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo is not installed; install the Rust toolchain (https://rustup.rs)" >&2
  exit 1
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$component"
  fi
done
