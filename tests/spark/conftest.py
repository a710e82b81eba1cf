"""One Spark session (with the Iceberg runtime) for every Spark sink test, and batch builders.

The schema here has a column of every type the sink maps; changes are built as the
transaction assembler builds them (TransactionInfo, seq, last, position on complete parts).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.changes import Batch, Change, Position, TransactionInfo, TransactionPart

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

UTF8MB4 = 255
BINARY = 63




def col(index: int, name: str, type_code: int, **kw: Any) -> Column:
    return Column(index=index, type_code=type_code, name=name, **kw)


def all_types_schema(database: str = "shop", table: str = "items") -> TableSchema:
    cols = [
        ("id", ft.LONG, {"nullable": False}),
        ("tiny", ft.TINY, {"unsigned": False}),
        ("tiny_u", ft.TINY, {"unsigned": True}),
        ("small_u", ft.SHORT, {"unsigned": True}),
        ("medium", ft.INT24, {"unsigned": False}),
        ("int_u", ft.LONG, {"unsigned": True}),
        ("big", ft.LONGLONG, {"unsigned": False}),
        ("big_u", ft.LONGLONG, {"unsigned": True}),
        ("price", ft.NEWDECIMAL, {"precision": 10, "scale": 2}),
        ("huge", ft.NEWDECIMAL, {"precision": 65, "scale": 30}),
        ("f", ft.FLOAT, {}),
        ("d", ft.DOUBLE, {}),
        ("born", ft.DATE, {}),
        ("at", ft.DATETIME2, {"fsp": 6}),
        ("ts", ft.TIMESTAMP2, {"fsp": 3}),
        ("t", ft.TIME2, {"fsp": 6}),
        ("y", ft.YEAR, {}),
        ("name", ft.VARCHAR, {"collation": UTF8MB4, "max_length": 400}),
        ("code", ft.STRING, {"collation": UTF8MB4, "max_length": 40}),
        ("notes", ft.BLOB, {"collation": UTF8MB4, "length_bytes": 2}),
        ("raw", ft.BLOB, {"collation": BINARY, "length_bytes": 2}),
        ("bin", ft.STRING, {"collation": BINARY, "max_length": 4}),
        ("doc", ft.JSON, {"length_bytes": 4}),
        ("color", ft.ENUM, {"enum_values": ("red", "green")}),
        ("tags", ft.SET, {"set_values": ("a", "b", "c")}),
        ("flags", ft.BIT, {"bits": 64}),
        ("shape", ft.GEOMETRY, {"length_bytes": 4}),
        ("vec", ft.VECTOR, {"length_bytes": 4}),
    ]
    columns = tuple(col(i, n, t, **kw) for i, (n, t, kw) in enumerate(cols))
    return TableSchema(database, table, columns, primary_key=(0,), names_logged=True,
                       signedness_logged=True, charsets_logged=True)


def all_types_row(i: int) -> dict[str, Any]:
    """A row of every type, with values at the edges of their ranges."""
    return {
        "id": i, "tiny": -128, "tiny_u": 255, "small_u": 65535, "medium": -8388608,
        "int_u": 4294967295, "big": -9223372036854775808, "big_u": 18446744073709551615,
        "price": Decimal("12345678.90"), "huge": Decimal("12345678901234567890123456789012345."
                                                          "123456789012345678901234567890"),
        "f": 1.5, "d": 2.25, "born": dt.date(1999, 12, 31),
        "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
        "ts": dt.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=dt.UTC),
        "t": -dt.timedelta(hours=838, minutes=59, seconds=59), "y": 2155,
        "name": f"naïve ✓ {i}", "code": "AB", "notes": "long text", "raw": b"\x00\xff",
        "bin": b"ab\x00\x00", "doc": {"k": [1, 2.5, None, "x"], "n": {"d": Decimal("1.10")}},
        "color": "green", "tags": ["a", "c"], "flags": 0xFFFFFFFFFFFFFFFF,
        "shape": b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + b"\x00" * 16,
        "vec": [0.5, -1.25, 3.0],
    }


def simple_schema(table: str, names: tuple[str, ...] = ("id", "name", "qty"),
                  pk: bool = True) -> TableSchema:
    types = {"id": ft.LONG, "qty": ft.LONG, "amount": ft.NEWDECIMAL}
    columns = tuple(col(i, n, types.get(n, ft.VARCHAR),
                        **({"collation": UTF8MB4, "max_length": 100}
                           if n not in types else {"precision": 8, "scale": 2}
                           if n == "amount" else {}))
                    for i, n in enumerate(names))
    return TableSchema("shop", table, columns, primary_key=(0,) if pk else None,
                       names_logged=True)


class Binlog:
    """Makes transactions at growing binlog offsets, as the assembler would."""

    def __init__(self, file: str = "binlog.000001", start: int = 4, server_id: int = 1):
        self.file = file
        self.pos = start
        self.server_id = server_id
        self.gno = 0

    def transaction(self, changes: list[tuple[str, TableSchema | None, dict | None,
                                              dict | None]],
                    commit_ts: dt.datetime | None = None, sql: str | None = None
                    ) -> TransactionPart:
        self.gno += 1
        start = self.pos
        end = start + 100 + 50 * len(changes)
        self.pos = end
        gtid = f"3e11fa47-71ca-11e1-9e33-c80aa9429562:{self.gno}"
        info = TransactionInfo(id=gtid, gtid=gtid, xid=1000 + self.gno,
                               commit_ts=commit_ts or dt.datetime(2024, 5, 1, 10, 0,
                                                                  self.gno % 60, tzinfo=dt.UTC),
                               size=len(changes), server_id=self.server_id, file=self.file,
                               start=start, end=end)
        out = []
        for seq, (op, schema, before, after) in enumerate(changes):
            pk = None
            if schema is not None and schema.primary_key:
                image = after if after is not None else before
                pk = {schema.column_names[i]: image[schema.column_names[i]]
                      for i in schema.primary_key} if image else None
            out.append(Change(op=op, database=schema.database if schema else "shop",
                              table=schema.table if schema else None, before=before,
                              after=after, primary_key=pk, sql=sql if op == "ddl" else None,
                              file=self.file, pos=start + 50 * seq, row=0, seq=seq,
                              last=seq == len(changes) - 1, schema=schema, transaction=info))
        return TransactionPart(info, out, True,
                               Position(self.file, end, f"3e11fa47-71ca-11e1-9e33-"
                                                        f"c80aa9429562:1-{self.gno}", "mysql"))

    def ddl(self, sql: str, table: str) -> TransactionPart:
        part = self.transaction([("ddl", None, None, None)], sql=sql)
        part.changes[0].table = table
        return part


def batch(batch_id: int, parts: list[TransactionPart]) -> Batch:
    position = next((p.position for p in reversed(parts) if p.complete), None)
    return Batch(batch_id, parts, position)
