#!/usr/bin/env python3
"""Array filter benchmark (issue 20, ADR 0029): ``ARRAY_CONTAINS``/``MV_CONTAINS`` of a rare
element over an ``ARRAY<STRING>`` and a multi-value string column, with the element indexes
built with the segments, against the same load on a second server started with
``DOLMEN_SEGMENT_VALUE_INDEXES=false`` (segments without index sidecars: every row is read).

Rows (JSON lines, generated): ``ts`` over ``--days`` days, ``tags`` two to four of 200 common
tags, and in one row of 100,000 the rare tag ``needle``. Dolmen loads them twice with native
batch ingestion (``tags`` as an ``auto`` dimension cast to ``ARRAY<STRING>``, and as a plain
string dimension, which a JSON array makes multi-value), one segment a day.

Queries: R (rare element, array), M (rare element, multi-value: ``MV_CONTAINS`` and Druid's
``tags = 'needle'``), C (a common tag, in about 1.5% of the rows). Each query is warmed up, then
runs ``--runs`` times; the table reports medians in ms, and the load times. Usage::

    python3 bench/arrays/bench.py --dolmen target/release/dolmen [--rows N] [--runs K]
"""
import argparse
import json
import os
import shutil
import statistics
import tempfile
import sys
import time

# The HTTP helper and server start-up of the ingestion benchmark.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ingest"))
from bench import dolmen_load, http, start_dolmen  # noqa: E402

QUERIES = {
    "R": "SELECT COUNT(*) AS c FROM arr_bench WHERE ARRAY_CONTAINS(tags, 'needle')",
    "M": "SELECT COUNT(*) AS c FROM mv_bench WHERE MV_CONTAINS(tags, 'needle')",
    "M=": "SELECT COUNT(*) AS c FROM mv_bench WHERE tags = 'needle'",
    "C": "SELECT COUNT(*) AS c FROM arr_bench WHERE ARRAY_OVERLAP(tags, ARRAY['t7', 'zz'])",
}


def generate(path: str, rows: int, days: int) -> None:
    if os.path.exists(path):
        return
    start = 1_767_225_600_000  # 2026-01-01
    span = days * 86_400_000
    with open(path + ".tmp", "w") as f:
        for i in range(rows):
            n = 2 + i % 3
            tags = [f"t{(i * 7 + k * 31) % 200}" for k in range(n)]
            if i % 100_000 == 54_321:
                tags[1] = "needle"
            f.write(json.dumps({"ts": start + (i * span) // rows, "tags": tags},
                               separators=(",", ":")))
            f.write("\n")
    os.rename(path + ".tmp", path)


def spec(ds: str, data_dir: str, array: bool) -> dict:
    dim = ({"type": "auto", "name": "tags", "castToType": "ARRAY<STRING>"} if array
           else {"type": "string", "name": "tags"})
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": [dim]},
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none",
                                    "rollup": False},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": data_dir, "filter": "arrays.json"},
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": {"type": "index_parallel", "maxRowsPerSegment": 5_000_000},
        },
    }


def median_ms(base: str, sql: str, runs: int) -> tuple:
    for _ in range(2):
        answer = http("POST", f"{base}/druid/v2/sql", {"query": sql})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        http("POST", f"{base}/druid/v2/sql", {"query": sql})
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), answer[0]["c"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dolmen", required=True)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--days", type=int, default=4)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "dolmen-bench-arrays"))
    args = p.parse_args()
    data_dir = os.path.join(args.data, str(args.rows))
    os.makedirs(data_dir, exist_ok=True)
    generate(os.path.join(data_dir, "arrays.json"), args.rows, args.days)
    results = {}
    for mode, env in [("indexes", None), ("no indexes", {"DOLMEN_SEGMENT_VALUE_INDEXES": "false"})]:
        work = tempfile.mkdtemp(prefix="dolmen-bench-arrays-")
        proc, base = start_dolmen(args.dolmen, work, env)
        try:
            loads = [dolmen_load(base, ds, spec(ds, data_dir, array), args.rows)
                     for ds, array in [("arr_bench", True), ("mv_bench", False)]]
            results[mode] = ({q: median_ms(base, sql, args.runs) for q, sql in QUERIES.items()},
                             loads)
        finally:
            proc.terminate()
            proc.wait()
            shutil.rmtree(work, ignore_errors=True)
    on, off = results["indexes"], results["no indexes"]
    print(f"{args.rows} rows, {args.days} day segments, median of {args.runs} hot runs (ms)")
    print("| query | rows matched | with element indexes | without | ratio |")
    print("|---|---:|---:|---:|---:|")
    for q in QUERIES:
        (a, n), (b, m) = on[0][q], off[0][q]
        assert n == m, f"{q}: {n} rows with indexes, {m} without"
        print(f"| {q} | {n} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    print(f"load (s): array {on[1][0]:.2f} vs {off[1][0]:.2f}, "
          f"multi-value {on[1][1]:.2f} vs {off[1][1]:.2f}")


if __name__ == "__main__":
    main()
