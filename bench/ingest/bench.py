#!/usr/bin/env python3
"""Batch-ingestion benchmark: Dolmen against DuckDB on the same generated files.

Generates a 10M-row, 9-column events table (``__time`` over 30 days; ``channel`` of
cardinality 50, ``page`` 200k, ``user`` 50k, ``countryName`` 200 with 70% nulls, ``isRobot``,
and the longs ``added``, ``deleted``, ``delta``) as NDJSON, CSV and Parquet with DuckDB (fixed
seed, cached between runs), then for each format:

* Dolmen: submits a native batch task (``index_parallel``, local input source) to a running
  ``dolmen server`` and times from the ``POST /task`` until ``SELECT COUNT(*)`` over SQL returns
  every row (submission to queryable);
* Dolmen SQL (``--sql``): the same load as SQL-based ingestion, ``REPLACE INTO ... OVERWRITE
  ALL SELECT ... FROM TABLE(EXTERN(...)) PARTITIONED BY DAY`` submitted to ``/v2/sql/task``,
  timed the same way;
* DuckDB: times ``CREATE TABLE AS SELECT * FROM read_<format>(...)`` into a fresh on-disk
  database, in the same run.

Prints a Markdown table of seconds and rows/s (median of ``--runs``). Usage::

    scripts/bench-ingest.sh [--rows N] [--runs K] [--formats csv,json,parquet]
        [--generator uniform|skewed] [--compare-indexes]

``--compare-indexes`` runs a second server with ``DOLMEN_SEGMENT_VALUE_INDEXES=false`` and loads
each file into both (alternating), reporting what building the value indexes costs (ADR 0025).

Needs: a release ``dolmen`` binary (built by the script) and PyPI ``duckdb``.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import duckdb

FORMATS = {
    "csv": ("events.csv", {"type": "csv", "findColumnsFromHeader": True}),
    "json": ("events.json", {"type": "json"}),
    "parquet": ("events.parquet", {"type": "parquet"}),
}
DUCK_READERS = {
    "csv": "read_csv('{path}')",
    "json": "read_json('{path}', format='newline_delimited')",
    "parquet": "read_parquet('{path}')",
}


# The columns of each generator, as DuckDB SQL expressions over `range(rows)`.
#
# uniform: every value equally likely (``channel`` 50, ``page`` 200k, ``user`` 50k,
#   ``countryName`` 200 with 70% nulls).
# skewed: Zipf-like values (issue 25: data Dolmen has not seen before): ``floor(n * r^k)`` for a
#   uniform ``r`` puts most rows on the first values (``channel`` k=3, ``page`` k=4, ``user``
#   k=3); ``countryName`` has 30% nulls and k=2.7, so that ``country-0`` holds about 10% of all
#   rows (0.7 * (1/200)^(1/2.7)); ``__time`` is busier in the day's middle hours.
GENERATORS = {
    "uniform": {
        "__time": "TIMESTAMP '2026-01-01' + to_milliseconds(CAST(floor(random()*30*86400000) AS BIGINT))",
        "channel": "'channel-' || CAST(floor(random()*50) AS BIGINT)",
        "page": "'page-' || CAST(floor(random()*200000) AS BIGINT)",
        "user": "'user-' || CAST(floor(random()*50000) AS BIGINT)",
        "countryName": "CASE WHEN random() < 0.7 THEN NULL "
                       "ELSE 'country-' || CAST(floor(random()*200) AS BIGINT) END",
    },
    "skewed": {
        "__time": "TIMESTAMP '2026-01-01' + to_milliseconds(CAST(floor(random()*30) AS BIGINT)*86400000 "
                  "+ CAST(floor((0.5 + (random() + random() + random() - 1.5) / 3) * 86400000) AS BIGINT))",
        "channel": "'channel-' || CAST(floor(50*pow(random(), 3)) AS BIGINT)",
        "page": "'page-' || CAST(floor(200000*pow(random(), 4)) AS BIGINT)",
        "user": "'user-' || CAST(floor(50000*pow(random(), 3)) AS BIGINT)",
        "countryName": "CASE WHEN random() < 0.3 THEN NULL "
                       "ELSE 'country-' || CAST(floor(200*pow(random(), 2.7)) AS BIGINT) END",
    },
}


def data_path(root: str, rows: int, generator: str = "uniform") -> str:
    """Where a generator's files for `rows` rows are cached."""
    return os.path.join(root, str(rows) if generator == "uniform" else f"{generator}-{rows}")


def generate(data_dir: str, rows: int, generator: str = "uniform") -> None:
    """Writes events.{csv,json,parquet} with `rows` rows of `generator` (see GENERATORS)
    unless they already exist."""
    marker = os.path.join(data_dir, f"rows-{rows}")
    if os.path.exists(marker):
        return
    os.makedirs(data_dir, exist_ok=True)
    for name, _ in FORMATS.values():
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            os.remove(path)
    t = time.time()
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute("SELECT setseed(0.42)")
    g = GENERATORS[generator]
    con.execute(f"""
        CREATE TABLE events AS SELECT
          {g["__time"]} AS __time,
          {g["channel"]} AS channel,
          {g["page"]} AS page,
          {g["user"]} AS "user",
          {g["countryName"]} AS countryName,
          random() < 0.1 AS isRobot,
          CAST(floor(random()*1000) AS BIGINT) AS added,
          CAST(floor(random()*500) AS BIGINT) AS deleted,
          CAST(floor(random()*1500) AS BIGINT) - 500 AS delta
        FROM range({rows})""")
    fmt = "TIMESTAMPFORMAT '%Y-%m-%dT%H:%M:%S.%gZ'"
    con.execute(f"COPY events TO '{data_dir}/events.csv' (HEADER, {fmt})")
    con.execute(f"COPY events TO '{data_dir}/events.json' (FORMAT JSON, {fmt})")
    con.execute(f"COPY events TO '{data_dir}/events.parquet' (FORMAT PARQUET)")
    open(marker, "w").close()
    print(f"generated {rows} {generator} rows in {time.time() - t:.1f} s", file=sys.stderr)


def spec(ds: str, data_dir: str, file_name: str, input_format: dict) -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "__time", "format": "auto"},
                "dimensionsSpec": {
                    "dimensions": ["channel", "page", "user", "countryName", "isRobot"]
                },
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "added", "fieldName": "added"},
                    {"type": "longSum", "name": "deleted", "fieldName": "deleted"},
                    {"type": "longSum", "name": "delta", "fieldName": "delta"},
                ],
                "granularitySpec": {
                    "segmentGranularity": "day",
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": data_dir, "filter": file_name},
                "inputFormat": input_format,
                "appendToExisting": False,
            },
            "tuningConfig": {"type": "index_parallel"},
        },
    }


SIGNATURE = [
    ("__time", "string"), ("channel", "string"), ("page", "string"), ("user", "string"),
    ("countryName", "string"), ("isRobot", "string"), ("added", "long"), ("deleted", "long"),
    ("delta", "long"),
]


def sql_ingest(ds: str, data_dir: str, file_name: str, fmt: str, input_format: dict) -> str:
    """The REPLACE statement loading one file, as the native spec does (no rollup, DAY)."""
    sig = [{"name": n, "type": ("long" if fmt == "parquet" and n == "__time" else t)}
           for n, t in SIGNATURE]
    time_expr = 'MILLIS_TO_TIMESTAMP("__time")' if fmt == "parquet" else 'TIME_PARSE("__time")'
    source = json.dumps({"type": "local", "files": [os.path.join(data_dir, file_name)]})
    return (f'REPLACE INTO "{ds}" OVERWRITE ALL\n'
            f'SELECT {time_expr} AS "__time", channel, page, "user", countryName, '
            f'CAST(isRobot AS VARCHAR) AS isRobot, 1 AS "count", added, deleted, delta\n'
            f"FROM TABLE(EXTERN('{source}', '{json.dumps(input_format)}', '{json.dumps(sig)}'))\n"
            f"PARTITIONED BY DAY")


def http(method: str, url: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read() or b"null")


def start_dolmen(binary: str, data_dir: str, env=None):
    proc = subprocess.Popen([binary, "server", "--port", "0", "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=None if env is None else {**os.environ, **env})
    for line in proc.stdout:
        m = re.search(r"Dolmen listening on (\S+)", line)
        if m:
            return proc, m.group(1).rstrip("/")
    raise RuntimeError("dolmen did not start")


def wait_queryable(base: str, task: str, ds: str, rows: int, t0: float) -> float:
    """Seconds from `t0` until `task` succeeded and `SELECT COUNT(*)` sees `rows` rows."""
    while True:
        st = http("GET", f"{base}/druid/indexer/v1/task/{task}/status")["status"]
        if st["status"] == "FAILED":
            raise RuntimeError(f"task {task} failed: {st.get('errorMsg')}")
        if st["status"] == "SUCCESS":
            break
        time.sleep(0.05)
    while True:
        got = http("POST", f"{base}/druid/v2/sql",
                   {"query": f'SELECT COUNT(*) AS c FROM "{ds}"'})[0]["c"]
        if got == rows:
            return time.time() - t0
        time.sleep(0.05)


def dolmen_load(base: str, ds: str, body: dict, rows: int) -> float:
    t0 = time.time()
    task = http("POST", f"{base}/druid/indexer/v1/task", body)["task"]
    return wait_queryable(base, task, ds, rows, t0)


def dolmen_sql_load(base: str, ds: str, sql: str, rows: int) -> float:
    t0 = time.time()
    task = http("POST", f"{base}/druid/v2/sql/task", {"query": sql})["taskId"]
    return wait_queryable(base, task, ds, rows, t0)


def duck_load(fmt: str, path: str, rows: int) -> float:
    db = tempfile.mktemp(suffix=".duckdb")
    con = duckdb.connect(db)
    con.execute("SET enable_progress_bar = false")
    t0 = time.time()
    con.execute(f"CREATE TABLE t AS SELECT * FROM {DUCK_READERS[fmt].format(path=path)}")
    dt = time.time() - t0
    n = con.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    con.close()
    os.remove(db)
    assert n == rows, (n, rows)
    return dt


def warm_page_cache(path: str) -> None:
    """Reads `path` once, so that the first timed load (Dolmen's, which goes first) does not
    pay for reading the file from disk while DuckDB's, right after, reads it from memory."""
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--formats", default="json,csv,parquet")
    ap.add_argument("--data", default=os.path.join(os.getcwd(), "target", "bench-data"))
    ap.add_argument("--dolmen", required=True, help="path to a release dolmen binary")
    ap.add_argument("--sql", action="store_true",
                    help="also time SQL-based ingestion (REPLACE ... EXTERN) of each file")
    ap.add_argument("--generator", choices=sorted(GENERATORS), default="uniform")
    ap.add_argument("--compare-indexes", action="store_true",
                    help="also time each native load on a second server that builds no value "
                         "indexes (DOLMEN_SEGMENT_VALUE_INDEXES=false), alternating, same run")
    args = ap.parse_args()
    data_dir = data_path(args.data, args.rows, args.generator)
    generate(data_dir, args.rows, args.generator)
    work = tempfile.mkdtemp(prefix="dolmen-bench-")
    proc, base = start_dolmen(args.dolmen, work)
    plain = None
    if args.compare_indexes:
        plain_work = tempfile.mkdtemp(prefix="dolmen-bench-noidx-")
        plain = start_dolmen(args.dolmen, plain_work, {"DOLMEN_SEGMENT_VALUE_INDEXES": "false"})
    n_times = {}
    results = []
    try:
        for fmt in args.formats.split(","):
            name, input_format = FORMATS[fmt]
            path = os.path.join(data_dir, name)
            d_times, s_times, q_times = [], [], []
            warm_page_cache(path)
            for run in range(args.runs):
                ds = f"bench_{fmt}_{run}"
                if plain is not None:
                    n_times.setdefault(fmt, []).append(dolmen_load(
                        plain[1], ds, spec(ds, data_dir, name, input_format), args.rows))
                d_times.append(dolmen_load(base, ds, spec(ds, data_dir, name, input_format), args.rows))
                if args.sql:
                    sds = f"bench_sql_{fmt}_{run}"
                    s_times.append(dolmen_sql_load(
                        base, sds, sql_ingest(sds, data_dir, name, fmt, input_format), args.rows))
                q_times.append(duck_load(fmt, path, args.rows))
                sql_part = f", dolmen SQL {s_times[-1]:.2f} s" if args.sql else ""
                print(f"{fmt} run {run}: dolmen {d_times[-1]:.2f} s{sql_part}, "
                      f"duckdb {q_times[-1]:.2f} s", file=sys.stderr)
            results.append((fmt, os.path.getsize(path), statistics.median(d_times),
                            statistics.median(s_times) if s_times else None,
                            statistics.median(q_times)))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
        if plain is not None:
            plain[0].terminate()
            plain[0].wait()
            shutil.rmtree(plain_work, ignore_errors=True)
    print(f"\n{args.rows} {args.generator} rows, {os.cpu_count()} cores, "
          f"median of {args.runs} run(s)\n")
    print("| format | input MB | Dolmen s | Dolmen rows/s | Dolmen SQL s | SQL/native rate "
          "| DuckDB s | DuckDB rows/s | Dolmen/DuckDB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for fmt, size, d, s, q in results:
        sql_cols = f"{s:.2f} | {d / s:.2f}x" if s else "- | -"
        print(f"| {fmt} | {size / 1e6:.0f} | {d:.2f} | {args.rows / d:,.0f} | {sql_cols} | "
              f"{q:.2f} | {args.rows / q:,.0f} | {q / d:.2f}x |")
    if n_times:
        print("\nValue indexes: the same native loads on a server that builds none\n")
        print("| format | with indexes s | without s | cost |")
        print("|---|---:|---:|---:|")
        for fmt, _, d, _, _ in results:
            n = statistics.median(n_times[fmt])
            print(f"| {fmt} | {d:.2f} | {n:.2f} | {(d / n - 1) * 100:+.1f}% |")


if __name__ == "__main__":
    main()
