#!/usr/bin/env python3
"""Nested-column benchmark (issue 20): ``JSON_VALUE(nested, '$.a')`` filtering and grouping over a
``COMPLEX<json>`` column against the same values in a plain string column, in Dolmen over HTTP,
and DuckDB's JSON type and STRUCT over the same rows, in the same run.

Rows (JSON lines, generated): ``ts`` over one day, ``a`` = ``v<i % 1000>``, ``b`` = ``i % 7``,
``d`` = ``x<i % 13>``, and ``nested`` = ``{"a": <a>, "b": <b>, "c": {"d": <d>}}``. Dolmen loads
them with native batch ingestion (``a`` and ``d`` string dimensions, ``b`` a long, ``nested`` a
``json`` dimension, shredded into sub-columns at segment write, ADR 0026); DuckDB reads the same
file into a table with ``nested`` as JSON and one with ``nested`` as a STRUCT.

Queries:

* F (filter + group): the counts of three values of ``a``
* G (group): the ten most frequent values of ``a``
* S (typed): the sum of ``b`` (``RETURNING BIGINT``) per value of ``c.d``

Each query is warmed up (two runs in a row within 20%), then runs ``--runs`` times; the table
reports medians in ms. ``--text`` also loads the rows into a second server with shredding off
(``DOLMEN_SHRED_NESTED=false``: segments as before ADR 0026) and times the nested queries
there, which parse every document. Usage::

    python3 bench/nested/bench.py --dolmen target/release/dolmen [--rows N] [--runs K] [--text]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ingest"))
import bench as ingest  # noqa: E402  (bench/ingest/bench.py)
from importlib import util as _util  # noqa: E402

_spec = _util.spec_from_file_location(
    "query_bench", os.path.join(os.path.dirname(__file__), "..", "query", "bench.py"))

VALUES = "('v1', 'v2', 'v3')"
NESTED = {
    "F": f"SELECT JSON_VALUE(nested, '$.a') AS a, COUNT(*) AS c FROM nested_bench "
         f"WHERE JSON_VALUE(nested, '$.a') IN {VALUES} GROUP BY 1 ORDER BY 1",
    "G": "SELECT JSON_VALUE(nested, '$.a') AS a, COUNT(*) AS c FROM nested_bench "
         "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
    "S": "SELECT JSON_VALUE(nested, '$.c.d') AS d, "
         "SUM(JSON_VALUE(nested, '$.b' RETURNING BIGINT)) AS s FROM nested_bench GROUP BY 1 ORDER BY 1",
}
PLAIN = {
    "F": f"SELECT a, COUNT(*) AS c FROM nested_bench WHERE a IN {VALUES} GROUP BY 1 ORDER BY 1",
    "G": "SELECT a, COUNT(*) AS c FROM nested_bench GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
    "S": "SELECT d, SUM(b) AS s FROM nested_bench GROUP BY 1 ORDER BY 1",
}
DUCK = {
    "F json": f"SELECT nested->>'$.a' AS a, COUNT(*) FROM t_json WHERE nested->>'$.a' IN {VALUES} "
              f"GROUP BY 1 ORDER BY 1",
    "F struct": f"SELECT nested.a AS a, COUNT(*) FROM t_struct WHERE nested.a IN {VALUES} "
                f"GROUP BY 1 ORDER BY 1",
    "G json": "SELECT nested->>'$.a' AS a, COUNT(*) AS c FROM t_json GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
    "G struct": "SELECT nested.a AS a, COUNT(*) AS c FROM t_struct GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
    "S json": "SELECT nested->>'$.c.d' AS d, SUM((nested->>'$.b')::BIGINT) AS s FROM t_json "
              "GROUP BY 1 ORDER BY 1",
    "S struct": "SELECT nested.c.d AS d, SUM(nested.b) AS s FROM t_struct GROUP BY 1 ORDER BY 1",
}


def generate(path: str, rows: int) -> None:
    if os.path.exists(path):
        return
    start = 1_767_225_600_000  # 2026-01-01
    with open(path + ".tmp", "w") as f:
        for i in range(rows):
            a, b, d = f"v{i % 1000}", i % 7, f"x{i % 13}"
            f.write(json.dumps({"ts": start + (i * 86_400_000) // rows, "a": a, "b": b, "d": d,
                                "nested": {"a": a, "b": b, "c": {"d": d}}},
                               separators=(",", ":")))
            f.write("\n")
    os.rename(path + ".tmp", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data", default=os.path.join(os.getcwd(), "target", "bench-data"))
    ap.add_argument("--dolmen", required=True, help="path to a dolmen binary")
    ap.add_argument("--text", action="store_true",
                    help="also time the nested queries over unshredded segments")
    args = ap.parse_args()
    qb = _util.module_from_spec(_spec)
    _spec.loader.exec_module(qb)
    import duckdb

    data_dir = os.path.join(args.data, f"nested-v2-{args.rows}")
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, "rows.json")
    generate(path, args.rows)

    results = {}
    loads = {}

    def run_dolmen(mode: str, queries: dict) -> None:
        work = tempfile.mkdtemp(prefix="dolmen-nbench-")
        if mode == "text":
            os.environ["DOLMEN_SHRED_NESTED"] = "false"
        try:
            proc, base = ingest.start_dolmen(args.dolmen, work)
        finally:
            os.environ.pop("DOLMEN_SHRED_NESTED", None)
        try:
            load_s = ingest.dolmen_load(base, "nested_bench", spec(data_dir), args.rows)
            size = qb.dolmen_sql(base, "SELECT SUM(\"size\") FROM sys.segments "
                                       "WHERE datasource = 'nested_bench'")[0][0]
            loads[mode] = (load_s, size)
            print(f"Dolmen ({mode}) loaded {args.rows} rows in {load_s:.1f} s, "
                  f"{size / 1e6:.0f} MB of segments", file=sys.stderr)
            for name, sql in queries.items():
                results[name] = qb.timed(lambda: qb.dolmen_sql(base, sql), args.runs)
                print(f"{name}: {results[name]:.1f} ms", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait()
            shutil.rmtree(work, ignore_errors=True)

    run_dolmen("shredded", {**{f"{q} nested": s for q, s in NESTED.items()},
                            **{f"{q} plain": s for q, s in PLAIN.items()}})
    if args.text:
        run_dolmen("text", {f"{q} text": s for q, s in NESTED.items()})
    duck = duckdb.connect()
    duck.execute("SET enable_progress_bar = false")
    duck.execute(f"CREATE TABLE t_json AS SELECT a, nested::JSON AS nested FROM "
                 f"read_json('{path}', columns={{'ts': 'BIGINT', 'a': 'VARCHAR', 'nested': 'JSON'}})")
    duck.execute(f"CREATE TABLE t_struct AS SELECT a, nested FROM read_json('{path}', "
                 f"columns={{'ts': 'BIGINT', 'a': 'VARCHAR', "
                 f"'nested': 'STRUCT(a VARCHAR, b BIGINT, c STRUCT(d VARCHAR))'}})")
    for name, sql in DUCK.items():
        results["duckdb " + name] = qb.timed(lambda: duck.execute(sql).fetchall(), args.runs)
        print(f"duckdb {name}: {results['duckdb ' + name]:.1f} ms", file=sys.stderr)

    print(f"\n{args.rows} rows, median of {args.runs} hot runs, ms\n")
    text_col = " | Dolmen unshredded (text)" if args.text else ""
    print(f"| query | Dolmen nested (JSON_VALUE) | Dolmen plain column | ratio{text_col} | "
          f"DuckDB JSON | DuckDB STRUCT |")
    print("|---|---|---|---|" + ("---|" if args.text else "") + "---|---|")
    for q in NESTED:
        n, p = results[f"{q} nested"], results[f"{q} plain"]
        text = f" | {results[f'{q} text']:.1f}" if args.text else ""
        print(f"| {q} | {n:.1f} | {p:.1f} | {n / p:.2f}x{text} | "
              f"{results[f'duckdb {q} json']:.1f} | {results[f'duckdb {q} struct']:.1f} |")
    print()
    for mode, (load_s, size) in loads.items():
        print(f"Dolmen load ({mode}): {load_s:.1f} s, {size / 1e6:.0f} MB of segments")


def spec(data_dir: str) -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "nested_bench",
                "timestampSpec": {"column": "ts", "format": "millis"},
                "dimensionsSpec": {"dimensions": ["a", {"type": "long", "name": "b"}, "d",
                                                  {"type": "json", "name": "nested"}]},
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none",
                                    "rollup": False},
            },
            "ioConfig": {"type": "index_parallel",
                         "inputSource": {"type": "local", "baseDir": data_dir,
                                         "filter": "rows.json"},
                         "inputFormat": {"type": "json"}},
            "tuningConfig": {"type": "index_parallel",
                             "partitionsSpec": {"type": "dynamic",
                                                "maxRowsPerSegment": 5_000_000}},
        },
    }

if __name__ == "__main__":
    main()
