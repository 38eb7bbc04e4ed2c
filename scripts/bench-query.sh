#!/usr/bin/env bash
# Query benchmark: Dolmen (over HTTP) vs DuckDB (native and Parquet) and DataFusion (Parquet) on
# the generated 10M-row events table. Builds the release binary, installs PyPI duckdb and
# datafusion if needed, runs bench/query/bench.py. Extra arguments go to the harness
# (--rows N, --runs K).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import duckdb" 2>/dev/null || python3 -m pip install --quiet duckdb
python3 -c "import datafusion" 2>/dev/null || python3 -m pip install --quiet datafusion
cargo build --release -p dolmen
exec python3 bench/query/bench.py --dolmen target/release/dolmen "$@"
