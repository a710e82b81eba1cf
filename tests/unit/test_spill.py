"""Spilling a big transaction's changes to disk and reading them back unchanged."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.changes import Change, TransactionInfo
from changestream.transactions.spill import SpillFile

ORDERS = TableSchema("shop", "orders", (Column(0, ft.LONG, name="id"),
                                        Column(1, ft.NEWDECIMAL, name="total")), (0,))
CUSTOMERS = TableSchema("shop", "customers", (Column(0, ft.LONG, name="id"),), (0,))

VALUES = {
    "id": 18446744073709551615,
    "total": Decimal("0.0000000000"),
    "created": dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    "ts": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    "day": dt.date(2024, 2, 29),
    "dur": -dt.timedelta(hours=30, microseconds=1),
    "blob": b"\x00\xff",
    "doc": {"a": [1, 2.5, None, {"b": "c"}]},
    "tags": ["red", "blue"],
    "none": None,
    "text": "grüße 😀",
}


def sample(i: int, schema: TableSchema | None = ORDERS) -> Change:
    return Change("update", "shop", "orders", {"id": i, **VALUES}, {"id": i + 1, **VALUES},
                  {"id": i}, f"UPDATE orders -- {i}", "mysql-bin.000009", 1000 + i, i % 3,
                  schema=schema)


def fields(c: Change) -> tuple[object, ...]:
    return (c.op, c.database, c.table, c.before, c.after, c.primary_key, c.sql, c.file, c.pos,
            c.row)


def test_changes_come_back_in_order_in_the_chunks_they_were_written_in(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    first = [sample(i) for i in range(3)]
    second = [sample(i) for i in range(3, 8)]
    spill.write(first)
    spill.write(second)
    assert spill.count == 8
    chunks = list(spill.read())
    assert [len(c) for c in chunks] == [3, 5]
    assert [fields(c) for chunk in chunks for c in chunk] == \
        [fields(c) for c in first + second]
    spill.close()


def test_values_keep_their_types(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    spill.write([sample(0)])
    (back,) = next(spill.read())
    for name, value in VALUES.items():
        assert back.before[name] == value
        assert type(back.before[name]) is type(value)
    assert back.before["ts"].tzinfo == dt.UTC
    assert str(back.before["total"]) == str(VALUES["total"])  # the scale is kept
    spill.close()


def test_changes_of_one_table_share_one_schema_object(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    spill.write([sample(0), sample(1, CUSTOMERS), sample(2)])
    spill.write([sample(3), sample(4, None)])
    back = [c for chunk in spill.read() for c in chunk]
    assert back[0].schema is ORDERS
    assert back[1].schema is CUSTOMERS
    assert back[2].schema is ORDERS and back[3].schema is ORDERS
    assert back[4].schema is None
    spill.close()


def test_transaction_seq_and_last_are_not_stored(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    c = sample(0)
    c.seq, c.last = 5, True
    c.transaction = TransactionInfo("x", None, None, None, 1, 1, "f", 4, 5)
    spill.write([c])
    (back,) = next(spill.read())
    assert back.transaction is None and back.seq == 0 and not back.last
    spill.close()


def test_reading_again_gives_the_same_changes(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    spill.write([sample(i) for i in range(4)])
    once = [fields(c) for chunk in spill.read() for c in chunk]
    twice = [fields(c) for chunk in spill.read() for c in chunk]
    assert once == twice and len(once) == 4
    spill.close()


def test_an_empty_spill_file_reads_as_nothing(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    assert list(spill.read()) == []
    assert spill.count == 0
    spill.close()


def test_the_file_leaves_no_name_behind_in_its_directory(tmp_path: Path) -> None:
    spill = SpillFile(str(tmp_path))
    spill.write([sample(i) for i in range(100)])
    assert os.listdir(tmp_path) == []  # unlinked at once: gone with the process
    assert sum(len(chunk) for chunk in spill.read()) == 100
    spill.close()
