"""Security overhead benchmark: the query benchmark's Q1 and Q2 (on the Wikipedia sample) and a
request that does no work (`GET /status`), against two servers started side by side in the same
run: security off, and security on (basic authentication, the basic authorizer) with both the
plaintext and the TLS listener. Keep-alive clients (one `requests.Session` each), requests
interleaved so both servers see the same machine load.

    python3 bench/security/bench.py --dolmen target/release/dolmen [--runs 300]

Prints, per query and path, the median and p90 latency in microseconds and the median added by
security (plaintext: authentication + authorization; TLS: the same plus TLS record processing).
The TLS handshake happens once per keep-alive connection and is not in these numbers.
"""

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "quickstart"

QUERIES = {
    "Q1": "SELECT COUNT(*) AS c FROM wikipedia",
    "Q2": "SELECT channel, COUNT(*) AS c, SUM(added) AS s FROM wikipedia "
    "GROUP BY channel ORDER BY c DESC LIMIT 10",
}

SECURE = """
service.auth.authenticatorChain=["basic"]
service.auth.authenticator.basic.type=basic
service.auth.authenticator.basic.initialAdminPassword=bench-admin
service.auth.authenticator.basic.authorizerName=authz
service.auth.authorizers=["authz"]
service.auth.authorizer.authz.type=basic
service.enableTlsPort=true
service.tlsPort=0
service.server.https.keyStoreType=pem
service.server.https.keyStorePath={pem}
"""


def self_signed(dir_):
    """A throw-away self-signed certificate for 127.0.0.1 (the openssl command line tool)."""
    pem = dir_ / "server.pem"
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=dir_)

    # A CA and a leaf it signs (OpenSSL refuses a self-signed leaf as its own anchor).
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench CA",
        "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "key.pem", "-out", "leaf.csr")
    (dir_ / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", "ext.cnf", "-out", "cert.pem")
    pem.write_text((dir_ / "cert.pem").read_text() + (dir_ / "key.pem").read_text())
    return pem, dir_ / "ca.pem"


def start(binary, data, config):
    args = [binary, "server", "--port", "0", "--data-dir", str(data), "--query-threads", "2"]
    if config:
        args += ["--config", str(config)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, env={**os.environ, "DOLMEN_LOG": "warn"}, text=True)
    line = p.stdout.readline().strip()
    assert line.startswith("Dolmen listening on "), line
    rest = line[len("Dolmen listening on "):]
    if " (TLS: " in rest:
        plain, tls = rest.split(" (TLS: ")
        return p, plain, tls.rstrip(")")
    return p, rest, None


def ingest(session, url):
    spec = json.loads((EXAMPLES / "specs" / "wikipedia-index.json").read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(EXAMPLES)
    task = session.post(f"{url}/druid/indexer/v1/task", json=spec).json()["task"]
    while True:
        st = session.get(f"{url}/druid/indexer/v1/task/{task}/status").json()["status"]["status"]
        if st != "RUNNING":
            assert st == "SUCCESS", st
            return
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dolmen", required=True)
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        pem, cert = self_signed(d)
        cfg = d / "secure.properties"
        cfg.write_text(SECURE.format(pem=pem))
        off, off_url, _ = start(a.dolmen, d / "off", None)
        on, on_url, tls_url = start(a.dolmen, d / "on", cfg)
        try:
            s_off = requests.Session()
            s_on = requests.Session()
            s_on.auth = ("admin", "bench-admin")
            s_tls = requests.Session()
            s_tls.auth = ("admin", "bench-admin")
            s_tls.verify = str(cert)
            ingest(s_off, off_url)
            ingest(s_on, on_url)
            targets = [("off", s_off, off_url), ("on", s_on, on_url), ("on+TLS", s_tls, tls_url)]
            work = [(name, "POST", "/druid/v2/sql", {"query": q}) for name, q in QUERIES.items()]
            work.append(("GET /status", "GET", "/status", None))
            print(f"# security overhead, {a.runs} runs each, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {a.dolmen}")
            print("| request | security | median µs | p90 µs | added (median) µs |")
            print("|---|---|---|---|---|")
            for name, method, path, body in work:
                times = {t[0]: [] for t in targets}
                for i in range(a.runs + 20):
                    for tname, sess, url in targets:
                        t0 = time.perf_counter()
                        r = sess.request(method, url + path, json=body, verify=sess.verify)
                        dt = (time.perf_counter() - t0) * 1e6
                        assert r.status_code == 200, (tname, r.status_code, r.text)
                        if i >= 20:
                            times[tname].append(dt)
                base = statistics.median(times["off"])
                for tname, _, _ in targets:
                    ts = sorted(times[tname])
                    med = statistics.median(ts)
                    p90 = ts[int(len(ts) * 0.9)]
                    added = "" if tname == "off" else f"{med - base:+.0f}"
                    print(f"| {name} | {tname} | {med:.0f} | {p90:.0f} | {added} |")
        finally:
            for p in (off, on):
                p.terminate()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
