#!/usr/bin/env bash
# Batch-ingestion benchmark: Dolmen vs DuckDB on generated 10M-row NDJSON, CSV and Parquet.
# Builds the release binary, installs PyPI duckdb if needed, runs bench/ingest/bench.py.
# Extra arguments go to the harness (--rows N, --runs K, --formats csv,json,parquet, --sql to also
# time SQL-based ingestion of the same files).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import duckdb" 2>/dev/null || python3 -m pip install --quiet duckdb
cargo build --release -p dolmen
exec python3 bench/ingest/bench.py --dolmen target/release/dolmen "$@"
