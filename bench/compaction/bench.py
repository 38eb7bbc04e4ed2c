#!/usr/bin/env python3
"""Compaction benchmark: throughput of a `compact` task and query times before and after.

The table is the generated events table of the ingestion and query benchmarks
(``bench/ingest/bench.py``: 10M rows over 30 days of 2026-01 by default). Dolmen loads
``events.parquet`` with HOUR segments cut every ``--small`` rows (default 2000: about 5000 small
segment files, the shape streaming or appends leave behind), runs the query benchmark's queries
(``bench/query/bench.py``, Dolmen's dialect; warmed up, then the median of ``--runs`` runs),
compacts the whole month into DAY segments with one ``compact`` task (dynamic partitioning,
5M rows per segment), and runs the queries again. Reported: the task's wall time and rows/s
(from submission to SUCCESS, the new segments already queryable), segment counts, and the
query medians in ms before and after. Usage::

    scripts/bench-compaction.sh [--rows N] [--small R] [--runs K] [--dolmen PATH]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ingest"))
import bench as ingest  # noqa: E402  (bench/ingest/bench.py)

import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "query_bench", os.path.join(os.path.dirname(__file__), "..", "query", "bench.py"))
query = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(query)

INTERVAL = "2026-01-01/2026-02-01"


def segment_count(base: str) -> int:
    rows = ingest.http("POST", f"{base}/druid/v2/sql", {
        "query": "SELECT COUNT(*) AS c FROM sys.segments "
                 "WHERE datasource = 'events' AND is_overshadowed = 0"})
    return rows[0]["c"]


def query_medians(base: str, runs: int) -> dict:
    out = {}
    for name, q in query.QUERIES.items():
        sql = query.dialects(q)[0]
        fn = lambda sql=sql: query.dolmen_sql(base, sql)  # noqa: E731
        query.warm_up(fn)
        out[name] = statistics.median(query.run_ms(fn) for _ in range(runs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--small", type=int, default=2000, help="rows per segment before compaction")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data", default=os.path.join(os.getcwd(), "target", "bench-data"))
    ap.add_argument("--dolmen", required=True, help="path to a dolmen binary (release for real numbers)")
    args = ap.parse_args()

    ingest.generate(args.data, args.rows)
    work = tempfile.mkdtemp(prefix="dolmen-bench-compaction-")
    proc, base = ingest.start_dolmen(args.dolmen, work)
    try:
        body = ingest.spec("events", args.data, "events.parquet", {"type": "parquet"})
        body["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
        body["spec"]["tuningConfig"]["partitionsSpec"] = {
            "type": "dynamic", "maxRowsPerSegment": args.small}
        load_s = ingest.dolmen_load(base, "events", body, args.rows)
        before_segments = segment_count(base)
        print(f"loaded {args.rows} rows into {before_segments} HOUR segments in {load_s:.1f} s",
              file=sys.stderr)
        before = query_medians(base, args.runs)

        compact = {
            "type": "compact", "dataSource": "events",
            "ioConfig": {"type": "compact",
                         "inputSpec": {"type": "interval", "interval": INTERVAL}},
            "granularitySpec": {"segmentGranularity": "DAY"},
            "tuningConfig": {"type": "index_parallel",
                             "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000}},
        }
        compact_s = ingest.dolmen_load(base, "events", compact, args.rows)
        after_segments = segment_count(base)
        after = query_medians(base, args.runs)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)

    print(f"| rows | segments before (HOUR) | segments after (DAY) | compact task s | rows/s |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {args.rows} | {before_segments} | {after_segments} | {compact_s:.1f} "
          f"| {args.rows / compact_s:,.0f} |")
    print()
    print("| query | before ms | after ms |")
    print("|---|---:|---:|")
    for name in before:
        print(f"| {name} | {before[name]:.1f} | {after[name]:.1f} |")


if __name__ == "__main__":
    main()
