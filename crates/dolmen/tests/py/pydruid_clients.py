"""Drives a running Dolmen server with the PyPI client `pydruid`: its DB-API
(`pydruid.db.connect`) and its SQLAlchemy dialect (`druid://`).

Run by the integration test `pydruid_clients` (crates/dolmen/tests/it/clients.rs) against a
server that has the 39,244-row Wikipedia sample loaded as `wikipedia`:

    python pydruid_clients.py <host> <port>

Exits non-zero (an assertion's traceback on stderr) when any client-visible behaviour differs
from what Druid gives these clients.
"""

import sys

import sqlalchemy as sa
from pydruid.db import connect
from pydruid.db.exceptions import ProgrammingError

host, port = sys.argv[1], int(sys.argv[2])
ROWS = 39244


def dbapi():
    """DB-API: rows, description, parameters, headers on and off, and error mapping."""
    conn = connect(host=host, port=port, path="/druid/v2/sql/", scheme="http")
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) AS c FROM wikipedia")
    assert cur.fetchall()[0].c == ROWS

    # pyformat parameters are inlined (escaped) by the client.
    cur.execute(
        'SELECT channel, COUNT(*) AS "count", SUM(added) AS added FROM wikipedia '
        "WHERE channel = %(ch)s GROUP BY channel",
        {"ch": "#en.wikipedia"},
    )
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    assert rows[0].channel == "#en.wikipedia"
    assert rows[0].count == 11549, rows
    assert [d[0] for d in cur.description] == ["channel", "count", "added"], cur.description

    # Top-N through a cursor iterated lazily, as pandas/Superset read it.
    cur.execute(
        "SELECT page, COUNT(*) AS c FROM wikipedia GROUP BY page ORDER BY c DESC, page LIMIT 5"
    )
    top = list(cur)
    assert len(top) == 5 and top[0].c >= top[-1].c, top

    # The header row (context-free `header: true`) gives column names even for empty results.
    hconn = connect(host=host, port=port, path="/druid/v2/sql/", header=True)
    hcur = hconn.cursor()
    hcur.execute("SELECT __time, channel FROM wikipedia WHERE 1 = 0")
    assert hcur.fetchall() == []
    hcur.execute("SELECT __time, channel, added FROM wikipedia ORDER BY __time LIMIT 2")
    first = hcur.fetchall()
    assert len(first) == 2, first
    # namedtuple renames `__time` (a leading underscore) to `_0`; read it by position.
    assert first[0][0].startswith("2015-09-12T00:"), first
    assert [d[0] for d in hcur.description] == ["__time", "channel", "added"]

    # Context keys travel with the connection.
    cconn = connect(host=host, port=port, context={"sqlTimeZone": "America/Los_Angeles"})
    ccur = cconn.cursor()
    ccur.execute("SELECT MIN(__time) AS t FROM wikipedia")
    t = ccur.fetchall()[0].t
    assert t == "2015-09-11T17:46:58.771-07:00", f"sqlTimeZone not applied: {t}"

    # A server error becomes ProgrammingError with Druid's "error (errorClass): message".
    try:
        cur.execute("SELECT nope FROM wikipedia")
        cur.fetchall()
    except ProgrammingError as e:
        text = str(e)
        assert "nope" in text, text
    else:
        raise AssertionError("bad column did not raise")
    try:
        cur.execute("SELEC 1")
        cur.fetchall()
    except ProgrammingError as e:
        assert "SQL parse failed" in str(e) or "line [1]" in str(e), str(e)
    else:
        raise AssertionError("parse error did not raise")


def sqlalchemy():
    """The `druid://` dialect: reflection through INFORMATION_SCHEMA, then Core queries."""
    engine = sa.create_engine(f"druid://{host}:{port}/druid/v2/sql/")
    insp = sa.inspect(engine)
    schemas = insp.get_schema_names()
    assert "druid" in schemas and "sys" in schemas, schemas
    assert "INFORMATION_SCHEMA" not in schemas
    tables = insp.get_table_names(schema="druid")
    assert tables == ["wikipedia"], tables
    assert insp.has_table("wikipedia")
    assert not insp.has_table("no_such_table")

    cols = {c["name"]: c for c in insp.get_columns("wikipedia", schema="druid")}
    assert isinstance(cols["__time"]["type"], sa.types.TIMESTAMP), cols["__time"]
    assert isinstance(cols["channel"]["type"], sa.types.String), cols["channel"]
    assert isinstance(cols["added"]["type"], sa.types.BigInteger), cols["added"]
    assert cols["__time"]["nullable"] is False
    assert cols["channel"]["nullable"] is True

    table = sa.Table("wikipedia", sa.MetaData(), autoload_with=engine)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == ROWS
        q = (
            sa.select(table.c.channel, sa.func.sum(table.c.added).label("added"))
            .where(table.c.channel.in_(["#en.wikipedia", "#de.wikipedia"]))
            .group_by(table.c.channel)
            .order_by(sa.desc("added"))
        )
        rows = conn.execute(q).fetchall()
        assert [r.channel for r in rows] == ["#en.wikipedia", "#de.wikipedia"], rows
        # text() with bound parameters, as Superset's SQL Lab sends them.
        n = conn.execute(
            sa.text("SELECT COUNT(*) FROM wikipedia WHERE countryName = :c"), {"c": "Italy"}
        ).scalar()
        assert n > 0, n


dbapi()
sqlalchemy()
print("pydruid clients: ok")
