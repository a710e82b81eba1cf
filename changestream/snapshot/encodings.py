"""How a snapshot chunk becomes a sink's encoded records without a change object per row: a
:class:`ChunkEncoding`, found from the sink's ``encoded_format`` (:func:`chunk_encoding`):
changestream's JSON lines are built in (:class:`JsonLinesChunks`); a sink's own encoding for
decode workers hands out its own
(:meth:`changestream.parallel.encodings.WorkerEncoding.chunk_encoding`; the Spark sink's
Arrow frames: :class:`changestream.sinks.spark.snapshot_frames.ArrowChunks`), so that the
core names no sink. A table the encoding does not take (its row reader is ``None``) is read
as the decoder's values and delivered as changes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson

from changestream.decoding.table_schema import TableSchema
from changestream.encoding.records import commit_time_text
from changestream.model.changes import HeldRecords, Position, TransactionInfo
from changestream.parallel.encodings import RECORD_FORMATS, load_encoding
from changestream.snapshot.result_set import ChunkRows
from changestream.snapshot.row_readers import encoded_reader
from changestream.snapshot.row_readers import native as _native

SNAPSHOT_OP = "snapshot"

#: ``(buffer, offset of a text-protocol row) -> (key in the decoder's values, row)``.
RowReader = Callable[[bytes, int], tuple[tuple[Any, ...], Any]]


class ChunkEncoding(Protocol):
    """A sink's encoded records of snapshot chunks, made from the server's text rows."""

    def row_reader(self, schema: TableSchema, key: Sequence[str],
                   excluded: frozenset[str]) -> RowReader | None:
        """How a result row of ``schema`` (every column, in order) is read: into its key
        (the columns ``key``) and what :meth:`records` takes; ``None`` when this encoding
        does not take the table (``excluded``: the columns the filter leaves out). Each
        reader thread asks for its own."""

    def records(self, database: str, table: str, schema: TableSchema,
                rows: ChunkRows, info: TransactionInfo,
                after: Position | None, first: int = 0) -> bytes | HeldRecords:
        """The records of a chunk's ``rows`` of table ``database.table`` (shaped
        ``schema``; each ``(key, row)`` as the row reader gave it, those to deliver, in
        order), delivered as transaction ``info`` (of ``info.size`` changes) at the
        stream's position (``info.file``, ``info.start``), numbered from ``first``;
        ``after``: the position after the chunk (its progress included). A table without
        a key comes in pieces of its one transaction: a piece but the last has ``first +
        len(rows) < info.size`` and no ``after``."""


class JsonLinesChunks:
    """changestream's JSON-lines records, written straight from the server's text
    (:func:`changestream.snapshot.row_readers.encoded_reader`)."""

    def row_reader(self, schema: TableSchema, key: Sequence[str],
                   excluded: frozenset[str]) -> RowReader | None:
        read: RowReader = encoded_reader(schema, key, excluded)
        return read

    def records(self, database: str, table: str, schema: TableSchema,
                rows: ChunkRows, info: TransactionInfo,
                after: Position | None, first: int = 0) -> bytes:
        return chunk_records(database, table, rows, info, keyed=True, first=first)


def chunk_encoding(encoded_format: str | None) -> ChunkEncoding | None:
    """The chunk encoding of a sink that takes records encoded as ``encoded_format`` (its
    capability; ``None``: it takes changes, as snapshot rows then come too)."""
    if encoded_format is None:
        return None
    if encoded_format in RECORD_FORMATS:
        return JsonLinesChunks() if encoded_format == "changestream" else None
    return load_encoding(encoded_format).chunk_encoding()


def chunk_records(database: str, table: str, rows: ChunkRows | list[Any],
                  info: TransactionInfo, keyed: bool = False, first: int = 0) -> bytes:
    """The records of a chunk's rows (each its ``after`` and ``primary_key`` JSON; with
    ``keyed``, each ``(key, (after, primary_key))``, as the compiled encoder's blocks
    give them too), in changestream's format, written as
    :mod:`changestream.encoding.records` writes them: numbered from ``first`` in
    transaction ``info`` of ``info.size`` changes."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
    head = orjson.dumps({"op": SNAPSHOT_OP, "database": database, "table": table,
                         "before": None})[:-1] + b',"after":'
    transaction = orjson.dumps({"id": info.id, "gtid": None, "xid": None})[:-1] + b',"seq":'
    size = f',"size":{info.size},"last":'.encode()
    position = orjson.dumps({"commit_ts": commit_time_text(info.commit_ts)})[1:-1] + \
        b'},"position":' + orjson.dumps({"file": info.file, "pos": info.start})[:-1] + \
        b',"row":'
    tail = b'},"ts":' + orjson.dumps(stamp) + b"}\n"
    compiled = _native()
    if compiled is not None:
        return compiled.chunk_lines(rows, head, transaction, size, position, tail, keyed,
                                    first, info.size - 1)
    if keyed:
        rows = [row for _, row in rows]
    last = info.size - 1
    lines: list[bytes] = []
    append = lines.append
    for seq, (after, pk) in enumerate(rows, first):
        n = str(seq).encode()
        append(b"".join((head, after, b',"primary_key":', pk, b',"sql":null,"transaction":',
                         transaction, n, size, b"true," if seq == last else b"false,",
                         position, n, tail)))
    return b"".join(lines)
