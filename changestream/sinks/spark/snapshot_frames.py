"""The Spark sink's snapshot chunks as Arrow frames, made from the server's text rows
without a change object or a Python value per row (the chunk encoding its worker encoding
hands out: :class:`changestream.snapshot.encodings.ChunkEncoding`).

A result's rows are kept as where they are, their keys' text beside (a block of
``KeyedRows``', read without the interpreter lock; the keys made when the chunk's window
needs them); a chunk's rows to deliver are read into Arrow column buffers
(:class:`ChunkColumns`) and become the frame the general path makes of their ``snapshot``
changes once a run takes it (their before images, all NULL, are left to
``TableRun.add_frame``), handed to the sink as it is (a :class:`.frames.WorkerFrames`:
the sink is in the same process; an IPC write and its reading took about 1 ms a chunk of
10,000 rows, the write's copies with the interpreter lock held). Without
the compiled module
(``CHANGESTREAM_PURE_PYTHON=1`` does as if), for a table with columns the filter leaves
out or named like the change metadata, snapshot rows are changes as before; a chunk whose
values the compiled readers refuse is made on the general path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.changes import Change, Position, TransactionInfo
from changestream.native import compiled
from changestream.snapshot import values
from changestream.snapshot.encodings import SNAPSHOT_OP, RowReader
from changestream.snapshot.result_set import ChunkRows
from changestream.snapshot.row_readers import values_reader

from .frames import (
    Span,
    TableRun,
    WorkerFrames,
    clashing_names,
    frame_schema_of,
    row_numbers,
)
from .types import METADATA, FieldMapping, table_mappings

# Column kinds (the compiled module numbers them alike).
INT, UINT128, FLOAT32, FLOAT64, DECIMAL, DATE, DATETIME, UTF8, BYTES, PYTHON = range(10)

_INT_WIDTHS = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 4, pa.int64(): 8}
_META_TYPES = {f.name: f.arrow for f in METADATA}


def native() -> Any:
    """The compiled module, when it was built and not turned off."""
    return compiled("changestream.sinks.spark._snapshot_frames")


def column_kind(column: Column, field: FieldMapping) -> tuple[int, int]:
    """How ``column``'s text becomes its Arrow value of ``field``: ``(kind, width)``,
    width in bytes (0: text and bytes, -1: Python values)."""
    convert = values.converter(column)
    arrow = field.arrow
    if convert is int and arrow in _INT_WIDTHS:
        return INT, _INT_WIDTHS[arrow]
    if convert is int and arrow == pa.decimal128(20, 0):
        return UINT128, 16
    if convert is float and arrow == pa.float64():
        return FLOAT64, 8
    if convert is float and arrow == pa.float32():
        return FLOAT32, 4
    t = column.type_code
    if t == ft.NEWDECIMAL and pa.types.is_decimal128(arrow):
        return DECIMAL, 16
    if t in (ft.DATE, ft.NEWDATE) and arrow == pa.date32():
        return DATE, 4
    if (t in (ft.DATETIME, ft.DATETIME2) and arrow == pa.timestamp("us")) or \
            (t in (ft.TIMESTAMP, ft.TIMESTAMP2) and arrow == pa.timestamp("us", tz="UTC")):
        return DATETIME, 8
    if convert is values.utf8 and arrow == pa.string() and t != ft.NULL and \
            values.text_converter(column) is values.as_read:
        return UTF8, 0
    if convert is values.as_read and arrow == pa.binary() and t not in (ft.BIT, ft.VECTOR):
        return BYTES, 0
    return PYTHON, 0 if arrow in (pa.string(), pa.binary()) else -1


class ArrowChunks:
    """The Spark sink's snapshot chunks (see the module docstring)."""

    def __init__(self) -> None:
        # By the schema object's id, holding the object (an id is unique while it lives).
        self._plans: dict[int, tuple[TableSchema, _FramePlan]] = {}

    def row_reader(self, schema: TableSchema, key: Sequence[str],
                   excluded: frozenset[str]) -> RowReader | None:
        module = native()
        if module is None or excluded or not schema.columns or \
                clashing_names(table_mappings(schema)):
            return None
        names = schema.column_names
        key_columns = tuple(names.index(k) for k in key)
        read: RowReader = module.KeyedRows(
            len(names), key_columns,
            tuple(values.converter(schema.columns[j]) for j in key_columns))
        return read

    def records(self, database: str, table: str, schema: TableSchema,
                rows: ChunkRows, info: TransactionInfo,
                after: Position | None, first: int = 0) -> WorkerFrames:
        known = self._plans.get(id(schema))
        if known is None or known[0] is not schema:
            if len(self._plans) > 64:
                self._plans.clear()
            known = self._plans[id(schema)] = (schema, _FramePlan(schema))
        plan = known[1]
        try:
            frame = plan.frame(rows, info, first)
        except Exception:  # a value the compiled readers refuse (NotPlain, Arrow's errors)
            frame = general_frame(schema, rows, info, after, first)  # it says what is wrong
        return WorkerFrames([(schema, [Span(after, len(rows), True)], frame)])


class _FramePlan:
    """How a chunk of one table becomes its frame: the sink's fields, the compiled
    columns' plan, the frame's schema."""

    def __init__(self, schema: TableSchema):
        self.fields = table_mappings(schema)
        kinds = [column_kind(c, f) for c, f in zip(schema.columns, self.fields)]
        self.columns = native().ChunkColumns(
            bytes(kind for kind, _ in kinds), tuple(f.arrow for f in self.fields),
            tuple(width for _, width in kinds), tuple(c.scale or 0 for c in schema.columns),
            tuple(values.converter(c) for c in schema.columns),
            tuple(f.convert for f in self.fields))
        self.schema = frame_schema_of(self.fields, ())  # no before images: NULL

    def frame(self, rows: ChunkRows, info: TransactionInfo,
              first: int = 0) -> pa.Table:
        """The frame of a chunk's ``rows`` (each ``(key, (buffer, offset))``) delivered as
        transaction ``info``, numbered from ``first``: the change metadata and the values
        read by the compiled module; no before image (a run adds its NULL columns:
        ``TableRun.add_frame``)."""
        n = len(rows)
        metadata = {
            "_op": pa.repeat(pa.scalar(SNAPSHOT_OP, pa.string()), n),
            "_transaction_id": pa.repeat(pa.scalar(info.id, pa.string()), n),
            "_gtid": pa.nulls(n, pa.string()),
            "_xid": pa.nulls(n, pa.string()),
            "_commit_ts": pa.repeat(pa.scalar(info.commit_ts, _META_TYPES["_commit_ts"]), n),
            "_seq": row_numbers(n, first),
            "_binlog_file": pa.repeat(pa.scalar(info.file, pa.string()), n),
            "_binlog_pos": pa.repeat(pa.scalar(info.start, pa.int64()), n),
        }
        arrays = [metadata[f.name] for f in METADATA] + self.columns.arrays(rows)
        return pa.Table.from_arrays(arrays, schema=self.schema)


def chunk_frame(schema: TableSchema, rows: ChunkRows,
                info: TransactionInfo) -> pa.Table:
    """The frame of a chunk's ``rows`` of ``schema`` (see :meth:`_FramePlan.frame`)."""
    return _FramePlan(schema).frame(rows, info)


def general_frame(schema: TableSchema, rows: ChunkRows,
                  info: TransactionInfo, after: Position | None, first: int = 0) -> pa.Table:
    """The same frame made on the general path: the rows as the decoder's values, a
    ``snapshot`` change each (as the snapshot's coordinator makes them), one run."""
    read, convert = values_reader(len(schema.columns)), values.row_converter(schema)
    pk = [schema.column_names[i] for i in schema.primary_key or ()]
    run = TableRun(schema.database, schema.table, schema, table_mappings(schema),
                   all_before=True)
    last = info.size - 1
    for seq, (_, (buf, at)) in enumerate(rows, first):
        row = convert(read(buf, at))
        run.add(Change(SNAPSHOT_OP, schema.database, schema.table, None, row,
                       {k: row[k] for k in pk} if pk else None, None, info.file, info.start,
                       seq, seq, seq == last, schema, info), after)
    return run.frame
