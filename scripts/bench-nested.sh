#!/usr/bin/env bash
# Nested-column benchmark (issue 20): JSON_VALUE over a COMPLEX<json> column vs a plain column in
# Dolmen, and DuckDB's JSON and STRUCT over the same rows. Builds the release binary, installs
# PyPI duckdb if needed, runs bench/nested/bench.py. Extra arguments go to the harness
# (--rows N, --runs K).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import duckdb" 2>/dev/null || python3 -m pip install --quiet duckdb
cargo build --release -p dolmen
exec python3 bench/nested/bench.py --dolmen target/release/dolmen "$@"
