#!/usr/bin/env python3
"""Async statements benchmark: a 1M-row SELECT through the statements API against the same
query on the synchronous endpoint.

Starts a ``dolmen server`` (release binary) on a fresh data directory and, for ``--runs`` hot
runs each, times at the client:

* sync: ``POST /druid/v2/sql`` with ``resultFormat: arrayLines``, reading the whole body;
* async: ``POST /druid/v2/sql/statements`` (``executionMode: ASYNC``, ``selectDestination:
  durableStorage``, ``rowsPerPage`` 100,000), polling the status every 20 ms until SUCCESS, then
  ``GET .../results?resultFormat=arrayLines`` for every page in turn (``page=0..9``), reading
  each body.

The query produces ``--rows`` rows of six columns (ids, strings, longs, a double, a timestamp)
from ``generate_series``, so no ingestion is needed. Both paths must return the same number of
lines. Prints a Markdown table of the medians and the async/sync ratio (the issue's bar: at
most 2x). Usage::

    python3 bench/statements/bench.py --dolmen target/release/dolmen [--rows N] [--runs K]
"""
import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def request(method: str, url: str, body=None) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read()


def start_dolmen(binary: str, data_dir: str):
    proc = subprocess.Popen([binary, "server", "--port", "0", "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        m = re.search(r"Dolmen listening on (\S+)", line)
        if m:
            return proc, m.group(1).rstrip("/")
    raise RuntimeError("dolmen did not start")


def query(rows: int) -> str:
    return ("SELECT \"value\" AS id, 'user-' || CAST(\"value\" % 50000 AS VARCHAR) AS \"user\", "
            "'page-' || CAST(\"value\" % 200000 AS VARCHAR) AS page, \"value\" * 3 AS added, "
            "CAST(\"value\" AS DOUBLE) / 7 AS ratio, "
            "MILLIS_TO_TIMESTAMP(1767225600000 + \"value\" * 1000) AS t "
            f"FROM generate_series(1, {rows})")


def run_sync(base: str, sql: str) -> int:
    body = request("POST", f"{base}/druid/v2/sql", {"query": sql, "resultFormat": "arrayLines"})
    return body.count(b"\n") - 1  # a blank line ends the body


def run_async(base: str, sql: str) -> int:
    st = json.loads(request("POST", f"{base}/druid/v2/sql/statements", {
        "query": sql,
        "context": {"executionMode": "ASYNC", "selectDestination": "durableStorage",
                    "rowsPerPage": 100000}}))
    qid = st["queryId"]
    while st["state"] in ("ACCEPTED", "RUNNING"):
        time.sleep(0.02)
        st = json.loads(request("GET", f"{base}/druid/v2/sql/statements/{qid}"))
    if st["state"] != "SUCCESS":
        raise RuntimeError(f"statement {qid} ended {st['state']}: {st.get('errorDetails')}")
    lines = 0
    for page in st["result"]["pages"]:
        body = request("GET", f"{base}/druid/v2/sql/statements/{qid}/results"
                              f"?page={page['id']}&resultFormat=arrayLines")
        lines += body.count(b"\n") - 1
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dolmen", required=True, help="path to a release dolmen binary")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dolmen-bench-")
    proc, base = start_dolmen(args.dolmen, work)
    sql = query(args.rows)
    try:
        # Warm-up (first-use costs: function registration, page cache).
        assert run_sync(base, sql) == args.rows
        assert run_async(base, sql) == args.rows
        sync, asyn = [], []
        for run in range(args.runs):
            t = time.time()
            assert run_sync(base, sql) == args.rows
            sync.append(time.time() - t)
            t = time.time()
            assert run_async(base, sql) == args.rows
            asyn.append(time.time() - t)
            print(f"run {run}: sync {sync[-1]:.3f} s, async {asyn[-1]:.3f} s", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    s, a = statistics.median(sync), statistics.median(asyn)
    print(f"\n{args.rows} rows, median of {args.runs} hot runs\n")
    print("| path | seconds | rows/s |")
    print("|---|---:|---:|")
    print(f"| sync `/v2/sql` (arrayLines) | {s:.3f} | {args.rows / s:,.0f} |")
    print(f"| async statement to durableStorage + {args.rows // 100000} pages | {a:.3f} | "
          f"{args.rows / a:,.0f} |")
    print(f"\nasync / sync: {a / s:.2f}x (bar: at most 2x)")


if __name__ == "__main__":
    main()
