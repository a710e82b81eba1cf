"""A frame made elsewhere (a decode worker's, a snapshot chunk's) joining a table's run: a
snapshot's frame lacks only before images (NULL for its rows); any other missing column
is refused, never filled."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from changestream.decoding import field_types as ft  # noqa: E402
from changestream.decoding.table_schema import Column, TableSchema  # noqa: E402
from changestream.model.changes import Position  # noqa: E402
from changestream.model.errors import SinkError  # noqa: E402
from changestream.sinks.spark.frames import (  # noqa: E402
    BEFORE_PREFIX,
    Span,
    TableRun,
    frame_schema,
)
from changestream.sinks.spark.types import table_mappings  # noqa: E402

KEYLESS = TableSchema("shop", "log", (
    Column(0, ft.LONG, name="n"),
    Column(1, ft.VARCHAR, name="msg", collation=45, max_length=80),
))
AT = Position("mariadb-bin.000001", 400)


def _run() -> TableRun:
    return TableRun("shop", "log", KEYLESS, table_mappings(KEYLESS))


def _frame(run: TableRun, rows: int, leave_out: set[str]) -> pa.Table:
    schema = frame_schema(run)
    kept = [f for f in schema if f.name not in leave_out]
    return pa.Table.from_arrays([pa.nulls(rows, f.type) for f in kept],
                                schema=pa.schema(kept))


def test_a_snapshots_frame_without_before_images_gets_them_as_nulls() -> None:
    run = _run()
    befores = {f.name for f in frame_schema(run) if f.name.startswith(BEFORE_PREFIX)}
    assert len(befores) == 2  # a keyless run keeps every column's before image
    run.add_frame(_frame(run, 3, befores), [Span(AT, 3, snapshot=True)])
    frame = run.frame
    assert frame.schema == frame_schema(run)
    assert all(frame.column(name).null_count == 3 for name in befores)


def test_a_workers_frame_that_lacks_a_before_image_is_refused() -> None:
    run = _run()
    with pytest.raises(SinkError, match=f"lacks column '{BEFORE_PREFIX}1'"):
        run.add_frame(_frame(run, 2, {f"{BEFORE_PREFIX}1"}), [Span(AT, 2)])


def test_a_frame_that_lacks_a_row_column_is_refused_even_from_a_snapshot() -> None:
    run = _run()
    with pytest.raises(SinkError, match="lacks column 'msg'"):
        run.add_frame(_frame(run, 2, {"msg"}), [Span(AT, 2, snapshot=True)])
