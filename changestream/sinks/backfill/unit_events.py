"""What a backfill reads of a unit (in a helper process or a Spark task): decoded events, and
the frames of the plain DML transactions a decode worker's compiled walk made, in binlog
order.

As in the router with decode workers, the :class:`~changestream.parallel.segments.Segmenter`
picks the plain DML transactions out of the raw events and hands them, in segments, to a
worker: here one in this process
(:class:`~changestream.parallel.inline_workers.InlineWorkers`: a unit's process is already
one of several decoding at once), which writes the Spark sink's Arrow frames straight from
their bytes (``IN_PROCESS_ARROW_FRAMES``: its compiled walk, or its general path for a
segment the walk refuses; the frames are handed over as they are, not encoded as for
another process). Everything else is decoded here, in binlog order, for the task's own
assembler: DDL, XA, transactions over 4 MB, tables named from the schema history inside MySQL's
compressed transactions. With ``CHANGESTREAM_PURE_PYTHON=1`` or without the compiled walk,
every event is decoded here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import Event
from changestream.decoding.table_schema import TableSchema
from changestream.native import compiled
from changestream.parallel.decode_workers import SegmentResult, SegmentTicket, WorkerSettings
from changestream.parallel.inline_workers import InlineWorkers
from changestream.parallel.segments import Segmenter
from changestream.sinks.spark.frames import Span
from changestream.sinks.spark.worker_encoding import IN_PROCESS_ARROW_FRAMES
from changestream.sources.files import read_raw_batches, read_raw_events
from changestream.sources.raw import RawEvent
from changestream.transactions.filters import ChangeFilter

from .names import NamesAtPosition
from .planning import BackfillUnit

Frames = list[tuple[TableSchema, list[Span], pa.Table]]
"""A worker run's frames (its records, with ``IN_PROCESS_ARROW_FRAMES``)."""

_WALK = "changestream.sinks.spark._arrow_walk"


class UnitSource:
    """The raw events of ``unit`` (after its file's FORMAT_DESCRIPTION: those from its
    start to its end), each after the schema history's changes made before it are applied
    (``names``; the decoder then forgets the table maps it resolved)."""

    def __init__(self, unit: BackfillUnit, decoder: EventDecoder,
                 names: NamesAtPosition | None):
        self.unit = unit
        self.decoder = decoder
        self.names = names

    def raw_stream(self) -> Iterator[RawEvent]:
        end, names = self.unit.end, self.names
        for raw in read_raw_events(Path(self.unit.path), self.unit.start):
            if raw is None:
                continue
            if end is not None and raw.offset >= end:
                return
            if names is not None and names.advance(raw.file, raw.offset):
                self.decoder.forget_table_maps()  # a DDL took effect: names may have changed
            yield raw

    def raw_batches(self) -> Iterator[list[RawEvent]]:
        """:meth:`raw_stream` in lists as read (the segmenter's compiled walk takes many
        events per call), where no schema history is followed: its changes must be applied
        event by event, so with ``names`` they come one at a time."""
        if self.names is not None:
            yield from ([raw] for raw in self.raw_stream())
            return
        end = self.unit.end
        for batch in read_raw_batches(Path(self.unit.path), self.unit.start):
            if batch and end is not None and batch[-1].offset >= end:
                kept = [raw for raw in batch if raw.offset < end]
                if kept:
                    yield kept
                return
            if batch:
                yield batch


def unit_events(unit: BackfillUnit, decoder: EventDecoder, names: NamesAtPosition | None,
                change_filter: ChangeFilter | None, spill_dir: str
                ) -> Iterator[Event | SegmentResult]:
    """The unit's events decoded here and, in their place, the runs of each segment of
    plain DML transactions the worker took (see the module docstring)."""
    source = UnitSource(unit, decoder, names)
    if compiled(_WALK) is None:
        decode = decoder.decode
        for raw in source.raw_stream():
            yield decode(raw.data, raw.file, raw.offset)
        return
    workers = InlineWorkers(WorkerSettings(change_filter, False, IN_PROCESS_ARROW_FRAMES,
                                           decoder.verify_checksums, 20_000, spill_dir))
    # Statement annotations are read by no one: frames have no statement column.
    for item in Segmenter(decoder, workers, annotations=False).events(source):
        if isinstance(item, SegmentTicket):
            yield workers.answer(item)
        elif item is not None:
            yield item


def transaction_rows(frames: Frames) -> list[tuple[int, int]]:
    """``(end offset, rows)`` of each transaction the frames hold rows of, in binlog order
    (a worker's frames are of one file)."""
    rows: dict[int, int] = {}
    for _, spans, _ in frames:
        for span in spans:
            assert span.position is not None, "a worker's rows without their transaction"
            rows[span.position.pos] = rows.get(span.position.pos, 0) + span.rows
    return sorted(rows.items())


def cut_frames(frames: Frames, end: int) -> tuple[Frames, Frames]:
    """``frames`` cut after the transaction that ends at offset ``end``: the rows of the
    transactions up to it, and those after it."""
    head: Frames = []
    tail: Frames = []
    for schema, spans, frame in frames:
        taken = rows = 0
        while taken < len(spans) and spans[taken].position.pos <= end:  # type: ignore[union-attr]
            rows += spans[taken].rows
            taken += 1
        if taken:
            head.append((schema, spans[:taken], frame.slice(0, rows)))
        if taken < len(spans):
            tail.append((schema, spans[taken:], frame.slice(rows)))
    return head, tail
