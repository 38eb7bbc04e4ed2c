"""pydruid with credentials over TLS against a secured Dolmen server: the DB-API
(`pydruid.db.connect(scheme="https", user=..., password=..., ssl_verify_cert=<CA file>)`) and
the SQLAlchemy dialect (`druid+https://user:pass@host:port/druid/v2/sql/?ssl_verify_cert=...`).

Run by the integration test `security::tls_listeners_and_pydruid_with_credentials`:

    python pydruid_tls.py <host> <tls port> <ca.pem> <user> <password>

The server holds the datasource `tls_ds` with 3 rows.
"""

import sys

import sqlalchemy as sa
from pydruid.db import connect

host, port, ca, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

conn = connect(
    host=host,
    port=port,
    path="/druid/v2/sql/",
    scheme="https",
    user=user,
    password=password,
    ssl_verify_cert=ca,
)
cur = conn.cursor()
cur.execute("SELECT COUNT(*) AS c FROM tls_ds")
assert cur.fetchall()[0].c == 3

# Wrong credentials are refused.
bad = connect(
    host=host,
    port=port,
    path="/druid/v2/sql/",
    scheme="https",
    user=user,
    password=password + "x",
    ssl_verify_cert=ca,
)
try:
    bad.cursor().execute("SELECT 1")
    raise AssertionError("a wrong password must be refused")
except Exception as e:  # pydruid raises its own errors for HTTP failures
    assert "401" in str(e) or "Unauthorized" in str(e) or "authentication" in str(e).lower(), e

engine = sa.create_engine(
    f"druid+https://{user}:{password}@{host}:{port}/druid/v2/sql/?ssl_verify_cert={ca}"
)
with engine.connect() as c:
    rows = c.execute(sa.text("SELECT COUNT(*) AS c FROM tls_ds")).fetchall()
    assert rows[0][0] == 3, rows
    assert "tls_ds" in sa.inspect(engine).get_table_names()

print("pydruid tls: ok")
