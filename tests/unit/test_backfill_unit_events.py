"""A decode worker's frames cut between two transactions, as a backfill task cuts them
where a staged piece ends: every table's rows up to that transaction on one side, the rest
on the other, the spans with them."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from changestream.decoding import field_types as ft  # noqa: E402
from changestream.decoding.table_schema import Column, TableSchema  # noqa: E402
from changestream.model.changes import Position  # noqa: E402
from changestream.sinks.backfill.unit_events import cut_frames, transaction_rows  # noqa: E402
from changestream.sinks.spark.frames import Span  # noqa: E402

A = TableSchema("db", "a", (Column(0, ft.LONG, name="n"),))
B = TableSchema("db", "b", (Column(0, ft.LONG, name="n"),))
FILE = "binlog.000007"


def _frames() -> list[tuple[TableSchema, list[Span], pa.Table]]:
    # Transactions ending at 100 (a: 2 rows, b: 1), 200 (a: 1) and 300 (b: 2).
    first, second, third = Position(FILE, 100), Position(FILE, 200), Position(FILE, 300)
    return [(A, [Span(first, 2), Span(second, 1)], pa.table({"n": [1, 2, 3]})),
            (B, [Span(first, 1), Span(third, 2)], pa.table({"n": [10, 11, 12]}))]


def test_the_transactions_come_in_binlog_order_with_their_rows_across_tables() -> None:
    assert transaction_rows(_frames()) == [(100, 3), (200, 1), (300, 2)]


def test_a_cut_after_a_transaction_keeps_each_table_s_rows_up_to_it() -> None:
    head, tail = cut_frames(_frames(), 200)
    assert [(s.table, [x.position.pos for x in spans], f["n"].to_pylist())
            for s, spans, f in head] == [("a", [100, 200], [1, 2, 3]), ("b", [100], [10])]
    assert [(s.table, [x.position.pos for x in spans], f["n"].to_pylist())
            for s, spans, f in tail] == [("b", [300], [11, 12])]


def test_a_cut_after_the_last_transaction_leaves_nothing_after_it() -> None:
    head, tail = cut_frames(_frames(), 300)
    assert tail == []
    assert sum(f.num_rows for _, _, f in head) == 6
