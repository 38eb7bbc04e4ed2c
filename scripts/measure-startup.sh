#!/usr/bin/env bash
# Measures the time from `dolmen server` start to a healthy /status/health, and the idle
# resident memory after start-up and after loading the Wikipedia sample.
# Usage: scripts/measure-startup.sh [path/to/dolmen]   (default: target/release/dolmen)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/dolmen}
port=${PORT:-18999}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT

rss_mib() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

start=$(date +%s%N)
DOLMEN_LOG=warn "$bin" server --port "$port" --data-dir "$dir/var" >/dev/null 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$port/status/health" >/dev/null 2>&1; do sleep 0.002; done
end=$(date +%s%N)
echo "start to healthy: $(( (end - start) / 1000000 )) ms"
sleep 2
echo "idle RSS after start: $(rss_mib $pid) MiB"

spec=$(sed "s#\"baseDir\" : \"quickstart/tutorial/\"#\"baseDir\" : \"$PWD/examples/quickstart\"#" examples/quickstart/specs/wikipedia-index.json)
task=$(curl -sf -H 'Content-Type: application/json' -d "$spec" "http://127.0.0.1:$port/service/indexer/v1/task" | sed 's/.*"task":"\([^"]*\)".*/\1/')
until curl -sf "http://127.0.0.1:$port/service/indexer/v1/task/$task/status" | grep -q '"status":"SUCCESS"'; do sleep 0.05; done
curl -sf -H 'Content-Type: application/json' -d '{"query":"SELECT COUNT(*) AS c FROM wikipedia"}' "http://127.0.0.1:$port/service/v2/sql"; echo
grep -h "task succeeded" "$dir/var/task-logs/$task.log" | sed 's/^/task log: /'
sleep 2
echo "idle RSS after loading the sample and one query: $(rss_mib $pid) MiB"
