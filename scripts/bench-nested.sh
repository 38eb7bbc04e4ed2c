#!/usr/bin/env bash
# Nested-column benchmark (issue 20): JSON_VALUE over a COMPLEX<json> column vs a plain column in
# Dolmen, and DuckDB's JSON and STRUCT over the same rows. Builds the release binary, installs
# PyPI duckdb if needed, runs bench/nested/bench.py. Extra arguments go to the harness
# (--rows N, --runs K, --text). CARGO_TARGET_DIR is honoured; PYTHON picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c "import duckdb" 2>/dev/null || "$PYTHON" -m pip install --quiet duckdb
cargo build --release -p dolmen
exec "$PYTHON" bench/nested/bench.py --dolmen "${CARGO_TARGET_DIR:-target}/release/dolmen" "$@"
