"""Reading a source table (``SELECT *`` on MariaDB) and its landed copy (Spark) into one
comparable form, value by value.

Both sides are normalized by the column's type at the source (``information_schema``),
to the value the source holds:

- integers of every size, YEAR, BOOLEAN: ``int`` (Spark's ``decimal(20,0)`` of a BIGINT
  UNSIGNED included);
- DECIMAL: ``Decimal`` with its scale (Spark gives ``Decimal``, or the exact text beyond 38
  digits);
- FLOAT: the workload writes only multiples of 1/8, which FLOAT holds exactly and the
  server prints exactly, so the float32 Spark holds equals the text the server sends;
  DOUBLE: ``float`` (the server prints the shortest text that reads back as the same
  double);
- DATETIME: naive ``datetime`` (Spark's ``timestamp_ntz``); TIMESTAMP: the UTC instant
  (the source is read with ``time_zone = '+00:00'``, Spark with the process in UTC);
- TIME: ``timedelta`` (Spark holds the text ``[-]HH:MM:SS.ffffff``);
- DATE: ``date``; CHAR/VARCHAR/TEXT/ENUM/JSON (MariaDB's JSON is text): ``str``;
- BINARY/VARBINARY/BLOB/GEOMETRY: ``bytes`` (BINARY(n) padded by the server on both sides);
- SET: the tuple of labels (the server gives ``'x,z'``, Spark ``['x', 'z']``);
- BIT: ``int`` (the server gives big-endian bytes);
- UUID: the text form; INET6: the address (the sink lands their text, the schema history
  knowing their type; stored bytes are read with :func:`_uuid_from_stored`).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
import uuid
from collections import Counter
from decimal import Decimal
from typing import Any

INTEGERS = {"tinyint", "smallint", "mediumint", "int", "bigint", "year", "boolean"}
TEXTS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "json"}
BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "point",
         "geometry"}
_TIME = re.compile(r"^(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")


def source_columns(server: Any, db: str, table: str) -> dict[str, str]:
    """Column name -> DATA_TYPE, in table order."""
    rows = server.execute(
        "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION")
    return {str(name): str(kind).lower() for name, kind in rows}


def source_rows(server: Any, db: str, table: str) -> list[dict[str, Any]]:
    """Every column of the source table (invisible ones too, which ``SELECT *`` leaves
    out), as dicts (TIMESTAMP read in UTC)."""
    names = ", ".join(f"`{c}`" for c in source_columns(server, db, table))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {names} FROM `{db}`.`{table}`")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def _uuid_from_stored(data: bytes) -> str:
    """The text of a MariaDB UUID from its stored 16 bytes (what the binlog has, and the
    sink lands). MariaDB stores an RFC 4122 UUID (variant 1, versions 1 to 5) with its
    groups in reverse order, ``nnnnnnnnnnnn-vsss-Vhhh-mmmm-llllllll``, so that time-based
    UUIDs sort by time; other UUIDs as they are written."""
    h = data.hex()
    unswapped = h[24:32] + h[20:24] + h[16:20] + h[12:16] + h[0:12]
    u = uuid.UUID(unswapped)
    if u.variant == uuid.RFC_4122 and 1 <= (u.version or 0) <= 5:
        return str(u)
    return str(uuid.UUID(h))


def _time(value: Any) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    m = _TIME.match(str(value))
    assert m, f"not a TIME text: {value!r}"
    sign, h, mi, s, frac = m.groups()
    delta = dt.timedelta(hours=int(h), minutes=int(mi), seconds=int(s),
                         microseconds=int((frac or "0").ljust(6, "0")))
    return -delta if sign else delta


def _from_json(kind: str, value: Any) -> Any:
    """A value of a JSON change record (the router's own format) as Spark would give it."""
    if kind == "decimal" or kind in INTEGERS or kind in TEXTS or kind in ("float", "double",
                                                                         "set", "bit"):
        return value
    if kind in ("datetime", "timestamp"):
        return dt.datetime.fromisoformat(value).replace(tzinfo=None)
    if kind == "date":
        return dt.date.fromisoformat(value)
    if kind in BYTES:
        return base64.b64decode(value)
    return value


def normalize(kind: str, value: Any, side: str) -> Any:
    """``value`` of a column of source type ``kind``, as read from ``side`` (``source``,
    ``spark``, or ``json``: a change record), in the form both sides are compared in (see
    the module docstring)."""
    if value is None:
        return None
    if side == "json":
        value, side = _from_json(kind, value), "spark"
    if kind in INTEGERS:
        return int(value)
    if kind == "decimal":
        return Decimal(str(value))
    if kind in ("float", "double"):
        return float(value)
    if kind == "timestamp":
        if side == "spark":  # a naive local (= UTC, see conftest) time
            return value.replace(tzinfo=dt.UTC)
        return value.replace(tzinfo=dt.UTC)
    if kind in ("datetime", "date"):
        return value
    if kind == "time":
        return _time(value)
    if kind in TEXTS:
        return value.decode() if isinstance(value, bytes | bytearray) else str(value)
    if kind in BYTES:
        return bytes(value)
    if kind == "set":
        if isinstance(value, str):
            return tuple(v for v in value.split(",") if v)
        if isinstance(value, set):
            return tuple(sorted(value))
        return tuple(value)
    if kind == "bit":
        return int.from_bytes(value, "big") if isinstance(value, bytes | bytearray) \
            else int(value)
    if kind == "uuid":
        return str(uuid.UUID(str(value))) if isinstance(value, str) \
            else _uuid_from_stored(bytes(value))
    if kind == "inet6":
        if isinstance(value, str):
            return ipaddress.IPv6Address(value)
        return ipaddress.IPv6Address(bytes(value))
    raise AssertionError(f"no normalization for source type {kind!r}")


def normalized(kinds: dict[str, str], rows: list[dict[str, Any]], side: str
               ) -> list[dict[str, Any]]:
    return [{name: normalize(kind, row.get(name), side) for name, kind in kinds.items()}
            for row in rows]


def _sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((v is None, repr(v)) for v in row.values())


def assert_same_rows(table: str, source: list[dict[str, Any]],
                     landed: list[dict[str, Any]], key: str | None) -> None:
    """Row by row and value by value (rows matched by ``key``, or as a multiset of whole
    rows when the table has none)."""
    if key is not None:
        src = {r[key]: r for r in source}
        got = {r[key]: r for r in landed}
        assert len(got) == len(landed), f"{table}: the copy has duplicate keys"
        assert sorted(got) == sorted(src), (
            f"{table}: keys differ: missing {sorted(set(src) - set(got))}, "
            f"extra {sorted(set(got) - set(src))}")
        for k, want in src.items():
            have = got[k]
            for column, value in want.items():
                assert have[column] == value, (
                    f"{table} {key}={k} column {column}: {have[column]!r} != {value!r}")
    else:
        src = Counter(tuple(r.items()) for r in source)
        got = Counter(tuple(r.items()) for r in landed)
        assert got == src, (f"{table}: rows differ: missing {list((src - got).elements())}, "
                            f"extra {list((got - src).elements())}")


def assert_mirror_equals_source(server: Any, spark: Any, db: str, table: str,
                                mirror: str, key: str | None) -> int:
    """The Iceberg mirror ``mirror`` holds exactly ``SELECT *`` of ``db.table``: the same
    columns and the same rows, value by value. Returns the row count."""
    kinds = source_columns(server, db, table)
    spark.sql(f"REFRESH TABLE {mirror}")
    df = spark.table(mirror)
    assert set(df.columns) == set(kinds), (
        f"{table}: mirror columns {df.columns} != source columns {list(kinds)}")
    landed = normalized(kinds, [r.asDict() for r in df.collect()], "spark")
    source = normalized(kinds, source_rows(server, db, table), "source")
    assert_same_rows(table, source, landed, key)
    return len(source)
