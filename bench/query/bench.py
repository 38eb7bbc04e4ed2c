#!/usr/bin/env python3
"""Query benchmark: Dolmen over HTTP against DuckDB (native table and Parquet) and DataFusion
(Parquet), on the same generated 10M-row events table, in the same run.

The table is the ingestion benchmark's (``bench/ingest/bench.py``: ``__time`` over 30 days of
2026-01, ``channel`` card 50, ``page`` 200k, ``user`` 50k, ``countryName`` 200 with 70% nulls,
``isRobot``, ``added``, ``deleted``, ``delta``). Dolmen loads ``events.parquet`` through its own
native batch ingestion (DAY segments); DuckDB gets a native table (``CREATE TABLE AS``) and a
view over the Parquet file; DataFusion (PyPI ``datafusion``) registers the Parquet file.

Queries (Druid SQL for Dolmen, the same question in each peer's dialect):

* Q1 ``COUNT(*)``
* Q2 top channels by count with ``SUM(added)``
* Q3 hourly counts over one day (Q3x: the same without the time filter, for the 10% rule)
* Q4 top 10 pages by ``SUM(delta)`` for one country. The issue names ``'United States'``; the
  generated country names are ``country-N``, so the filter is ``countryName = 'country-7'``
  (0.15% of rows), which keeps the query's shape and selectivity meaningful.
* Q5 exact and approximate distinct users (two queries: Q5e, Q5a)
* Q6 every row whose ``page`` equals one value

Each query is warmed up (run until two runs in a row agree within 20%, see ``warm_up``), then
runs ``--runs`` times (default 5); the table reports medians in ms, timed at the client
(Dolmen: the HTTP round trip including JSON encoding, on a kept-alive connection).

``--generator skewed`` uses issue 25's table instead: Zipf-like values (``bench/ingest``'s
``GENERATORS``) and a Q4 country filter that keeps about 10% of the rows. ``--cold`` adds a
table of first runs: each query once right after the ingestion (in order), then each query
once right after a restart of Dolmen on the same data directory (DuckDB: the native table's
database file reopened), beside the hot medians. Usage::

    scripts/bench-query.sh [--rows N] [--runs K] [--generator uniform|skewed] [--cold]
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse

import duckdb

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ingest"))
import bench as ingest  # noqa: E402

DAY = "2026-01-15"
NEXT = "2026-01-16"
PAGE = "page-12345"
# Q4's country per generator: 0.15% of the rows on the uniform table, about 10% on the skewed
# one (issue 25).
COUNTRIES = {"uniform": "country-7", "skewed": "country-0"}
COUNTRY = COUNTRIES["uniform"]

# name -> (Dolmen SQL, DuckDB SQL, DataFusion SQL); None: same as the previous dialect.
def queries(country):
    return {
        "Q1": ("SELECT COUNT(*) AS c FROM events", None, None),
        "Q2": (
            "SELECT channel, COUNT(*) AS c, SUM(added) AS s FROM events "
            "GROUP BY channel ORDER BY c DESC LIMIT 10",
            None,
            None,
        ),
        "Q3": (
            f"SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c FROM events "
            f"WHERE __time >= TIMESTAMP '{DAY} 00:00:00' AND __time < TIMESTAMP '{NEXT} 00:00:00' "
            f"GROUP BY 1 ORDER BY 1",
            f"SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c FROM events "
            f"WHERE __time >= TIMESTAMP '{DAY} 00:00:00' AND __time < TIMESTAMP '{NEXT} 00:00:00' "
            f"GROUP BY 1 ORDER BY 1",
            None,
        ),
        "Q3x": (
            "SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c FROM events GROUP BY 1 ORDER BY 1",
            "SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c FROM events GROUP BY 1 ORDER BY 1",
            None,
        ),
        "Q4": (
            f"SELECT page, SUM(delta) AS d FROM events WHERE \"countryName\" = '{country}' "
            f"GROUP BY page ORDER BY d DESC LIMIT 10",
            None,
            None,
        ),
        "Q5e": ('SELECT COUNT(DISTINCT "user") AS u FROM events', None, None),
        "Q5a": (
            'SELECT APPROX_COUNT_DISTINCT("user") AS u FROM events',
            'SELECT approx_count_distinct("user") AS u FROM events',
            'SELECT approx_distinct("user") AS u FROM events',
        ),
        "Q6": (f"SELECT * FROM events WHERE page = '{PAGE}'", None, None),
    }


QUERIES = queries(COUNTRY)


def dialects(q):
    dolmen, duck, df = q
    duck = duck or dolmen
    df = df or duck
    return dolmen, duck, df


# One kept-alive HTTP connection per server, as a client library's connection pool keeps them:
# the timings are the server's answer, not the client's TCP handshake.
_CONNECTIONS = {}


def dolmen_sql(base, sql):
    body = {"query": sql, "resultFormat": "array"}
    if "COUNT(DISTINCT" in sql:
        body["context"] = {"useApproximateCountDistinct": False}
    conn = _CONNECTIONS.get(base)
    if conn is None:
        u = urllib.parse.urlsplit(base)
        conn = _CONNECTIONS[base] = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        conn.request("POST", "/druid/v2/sql", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
    except (http.client.HTTPException, OSError):
        conn.close()
        del _CONNECTIONS[base]
        raise
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:500]!r}")
    return json.loads(data)


def run_ms(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def warm_up(fn):
    """Runs `fn` until two runs in a row agree within 20% (at most 20 runs, 0.5 s apart).

    The table reports the steady state: hot runs. (Value indexes are built with the segments
    and loaded with them, ADR 0025, so a first query does not start work that later runs
    profit from; the cold table shows first runs.)
    """
    prev = run_ms(fn)
    for _ in range(20):
        time.sleep(0.5)
        t = run_ms(fn)
        if abs(t - prev) <= 0.2 * max(t, prev) + 1.0:
            return
        prev = t


def timed(fn, runs):
    warm_up(fn)
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def restart_dolmen(proc, binary, work):
    """Stops the server and starts it again on the same data directory (segments in its
    segment cache, as a restarted historical has them); returns the new process and URL."""
    proc.terminate()
    proc.wait()
    _CONNECTIONS.clear()
    return ingest.start_dolmen(binary, work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data", default=os.path.join(os.getcwd(), "target", "bench-data"))
    ap.add_argument("--dolmen", required=True, help="path to a release dolmen binary")
    ap.add_argument("--generator", choices=sorted(ingest.GENERATORS), default="uniform",
                    help="uniform (issue 4's table) or skewed (Zipf-like values, issue 25)")
    ap.add_argument("--cold", action="store_true",
                    help="also time each query's first run after the ingestion and after a "
                         "restart (Dolmen restarted, DuckDB's database reopened, per query)")
    args = ap.parse_args()
    import datafusion

    data_dir = ingest.data_path(args.data, args.rows, args.generator)
    ingest.generate(data_dir, args.rows, args.generator)
    parquet = os.path.join(data_dir, "events.parquet")
    country = COUNTRIES[args.generator]
    qs = queries(country)

    work = tempfile.mkdtemp(prefix="dolmen-qbench-")
    duck_db = os.path.join(work, "duck.duckdb")
    proc, base = ingest.start_dolmen(args.dolmen, work)
    cold = {}
    try:
        spec = ingest.spec("events", data_dir, "events.parquet", {"type": "parquet"})
        load_s = ingest.dolmen_load(base, "events", spec, args.rows)
        print(f"Dolmen loaded {args.rows} rows in {load_s:.1f} s", file=sys.stderr)
        if args.cold:
            # The first run of each query after the ingestion (in the table's order).
            for name, q in qs.items():
                cold[name] = {"d_ingest": run_ms(lambda: dolmen_sql(base, dialects(q)[0]))}

        duck_native = duckdb.connect(duck_db)
        duck_native.execute("SET enable_progress_bar = false")
        duck_native.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{parquet}')")
        if args.cold:
            for name, q in qs.items():
                cold[name]["n_ingest"] = run_ms(
                    lambda: duck_native.execute(dialects(q)[1]).fetchall())
        share = duck_native.execute(
            f"SELECT avg(CASE WHEN countryName = '{country}' THEN 1.0 ELSE 0 END) FROM events"
        ).fetchone()[0]
        print(f"Q4 filter {country} keeps {share * 100:.2f}% of the rows", file=sys.stderr)
        duck_parquet = duckdb.connect()
        duck_parquet.execute("SET enable_progress_bar = false")
        duck_parquet.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{parquet}')")
        df_ctx = datafusion.SessionContext()
        df_ctx.register_parquet("events", parquet)

        rows = []
        for name, q in qs.items():
            d_sql, duck_sql, df_sql = dialects(q)
            got = dolmen_sql(base, d_sql)
            want = duck_native.execute(duck_sql).fetchall()
            if name not in ("Q5a", "Q6") and len(got) != len(want):
                raise RuntimeError(f"{name}: Dolmen {len(got)} rows, DuckDB {len(want)}")
            d = timed(lambda: dolmen_sql(base, d_sql), args.runs)
            n = timed(lambda: duck_native.execute(duck_sql).fetchall(), args.runs)
            p = timed(lambda: duck_parquet.execute(duck_sql).fetchall(), args.runs)
            f = timed(lambda: df_ctx.sql(df_sql).collect(), args.runs)
            rows.append((name, d, n, p, f))
            print(f"{name}: dolmen {d:.1f} ms, duckdb {n:.1f} / {p:.1f} ms, datafusion {f:.1f} ms",
                  file=sys.stderr)

        if args.cold:
            duck_native.close()
            for name, q in qs.items():
                d_sql, duck_sql, _ = dialects(q)
                proc, base = restart_dolmen(proc, args.dolmen, work)
                cold[name]["d_restart"] = run_ms(lambda: dolmen_sql(base, d_sql))
                con = duckdb.connect(duck_db)
                con.execute("SET enable_progress_bar = false")
                cold[name]["n_restart"] = run_ms(lambda: con.execute(duck_sql).fetchall())
                con.close()
                print(f"{name} cold: dolmen {cold[name]['d_ingest']:.1f} / "
                      f"{cold[name]['d_restart']:.1f} ms", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.rows} rows ({args.generator} generator; Q4 keeps {share * 100:.1f}% of the "
          f"rows), {os.cpu_count()} cores, median of {args.runs} hot runs, ms\n")
    print("| query | Dolmen | DuckDB native | DuckDB Parquet | DataFusion Parquet | Dolmen / fastest peer |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, d, n, p, f in rows:
        print(f"| {name} | {d:.1f} | {n:.1f} | {p:.1f} | {f:.1f} | {d / min(n, p, f):.2f}x |")
    main_rows = [r for r in rows if r[0] != "Q3x"]
    sums = [sum(r[i] for r in main_rows) for i in range(1, 5)]
    print(f"| sum (Q1-Q6) | {sums[0]:.1f} | {sums[1]:.1f} | {sums[2]:.1f} | {sums[3]:.1f} | "
          f"{sums[0] / min(sums[1:]):.2f}x |")
    print(f"\nsum / DuckDB native: {sums[0] / sums[1]:.2f}x")
    q3 = next(r for r in rows if r[0] == "Q3")[1]
    q3x = next(r for r in rows if r[0] == "Q3x")[1]
    print(f"\nQ3 / Q3x (Dolmen, time filter vs none): {q3 / q3x:.2f}")
    if args.cold:
        print("\nCold: each query's first run after the ingestion, and after a restart (Dolmen "
              "restarted / DuckDB's database reopened before each query), ms\n")
        print("| query | Dolmen hot | after ingestion | after restart | worst cold / hot "
              "| DuckDB hot | DuckDB after load | DuckDB after reopen |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, d, n, _, _ in rows:
            c = cold[name]
            worst = max(c["d_ingest"], c["d_restart"]) / d
            print(f"| {name} | {d:.1f} | {c['d_ingest']:.1f} | {c['d_restart']:.1f} | "
                  f"{worst:.2f}x | {n:.1f} | {c['n_ingest']:.1f} | {c['n_restart']:.1f} |")


if __name__ == "__main__":
    main()
