#!/usr/bin/env bash
# Security overhead benchmark: Q1 and Q2 of the query benchmark (on the Wikipedia sample) and
# GET /status, against a server with security off and one with basic authentication, the basic
# authorizer and TLS on, in the same run. Builds the release binary; needs python3 with
# `requests` and the openssl command line tool. Extra arguments go to the harness (--runs N).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import requests" 2>/dev/null || python3 -m pip install --quiet requests
cargo build --release -p dolmen
exec python3 bench/security/bench.py --dolmen target/release/dolmen "$@"
