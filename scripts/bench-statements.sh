#!/usr/bin/env bash
# Async statements benchmark: a 1M-row SELECT through /v2/sql/statements (durableStorage, pages
# of 100,000 rows) against the same query on the synchronous /v2/sql endpoint.
# Builds the release binary, runs bench/statements/bench.py. Extra arguments go to the harness
# (--rows N, --runs K).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p dolmen
exec python3 bench/statements/bench.py --dolmen target/release/dolmen "$@"
