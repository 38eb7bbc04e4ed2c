#!/usr/bin/env bash
# Compaction benchmark: a compact task rewriting the generated 10M-row events table from HOUR
# segments of many small files into DAY segments (rows/s), and the query benchmark's queries
# before and after. Builds the release binary unless --dolmen is given, installs PyPI duckdb
# (the data generator) if needed, runs bench/compaction/bench.py. Extra arguments go to the
# harness (--rows N, --small R, --runs K).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import duckdb" 2>/dev/null || python3 -m pip install --quiet duckdb
if [[ " $* " == *" --dolmen "* ]]; then
    exec python3 bench/compaction/bench.py "$@"
fi
cargo build --release -p dolmen
exec python3 bench/compaction/bench.py --dolmen "${CARGO_TARGET_DIR:-target}/release/dolmen" "$@"
