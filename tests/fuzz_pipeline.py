"""What the router does with a source's raw events, in one process and without actors, for
the fuzz harness: the segmenter hands plain DML transactions to a decode worker writing
JSON-lines records (run here: its fast path, compiled or in Python, and its general
path), everything else is decoded here, goes past the
transaction boundary parser and ColumnInfo (DDL) into the transaction assembler, and every
change is written as the JSON-lines sink's records in both formats. The listener's and the
Transaction actor's routing, without their threads and messages."""

from __future__ import annotations

from collections.abc import Iterator

from changestream.decoding import event_types as et
from changestream.decoding.boundary import BoundaryType, TransactionBoundaryParser
from changestream.decoding.ddl import parse_ddl
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import QueryEvent
from changestream.encoding.records import record_lines
from changestream.parallel.decode_workers import (
    Segment,
    SegmentTicket,
    WorkerSettings,
    _Worker,
)
from changestream.parallel.segments import Segmenter
from changestream.runtime.listener import TRANSACTION_EVENTS
from changestream.schema.column_info import ColumnInfo
from changestream.sources.raw import RawEvent
from changestream.transactions.assembler import TransactionAssembler

STAMP = "2026-01-01T00:00:00.000000+00:00"


class _Pool:
    """Stands in for the decode worker processes: runs each segment in a worker here, as
    soon as it is handed over."""

    def __init__(self, verify_checksums: bool, spill_dir: str) -> None:
        self.worker = _Worker(WorkerSettings(None, True, "changestream", verify_checksums,
                                             50, spill_dir))
        self.records = 0
        self.ready = True  # started (the segmenter hands it every plain transaction)

    def submit(self, segment: Segment, end: tuple[str, int]) -> SegmentTicket:
        for run in self.worker.assemble(segment, STAMP):
            self.records += run.changes
        return SegmentTicket(0, len(segment.offsets), end)


class _RawEvents:
    def __init__(self, events: Iterator[RawEvent | None]) -> None:
        self.events = events

    def raw_stream(self) -> Iterator[RawEvent | None]:
        return self.events


def route(raw_events: Iterator[RawEvent | None], decoder: EventDecoder,
          spill_dir: str, *, workers: bool = True) -> int:
    """Read ``raw_events`` as the router would and write their records; how many records.
    ``decoder`` is the source's (its checksum setting and algorithm are the source's)."""
    column_info = ColumnInfo(None)
    decoder.schema_resolver = column_info.resolve
    parser = TransactionBoundaryParser(lambda warning: None)
    assembler = TransactionAssembler(max_buffered_changes=50, spill_dir=spill_dir)
    pool = _Pool(decoder.verify_checksums, spill_dir)
    events: Iterator[object]
    if workers:
        events = Segmenter(decoder, pool, segment_events=40).events(  # type: ignore[arg-type]
            _RawEvents(raw_events))
    else:
        events = (None if raw is None else decoder.decode(raw.data, raw.file, raw.offset)
                  for raw in raw_events)
    records = 0
    for event in events:
        if event is None or isinstance(event, SegmentTicket):
            continue
        h = event.header  # type: ignore[attr-defined]
        boundary = parser.feed(event)  # type: ignore[arg-type]
        if h.type_code == et.QUERY and boundary is BoundaryType.STATEMENT:
            assert isinstance(event, QueryEvent)
            ddl = parse_ddl(event.query, event.database)
            if ddl is not None:
                column_info.apply_ddl(ddl, event)
                decoder.forget_table_maps()
        if h.type_code in TRANSACTION_EVENTS:
            assembler.feed(event)  # type: ignore[arg-type]
            records += _write(assembler)
    return records + _write(assembler) + pool.records


def _write(assembler: TransactionAssembler) -> int:
    """The records of what the assembler finished, in both formats, as bytes."""
    written = 0
    for parts, _position in assembler.drain(max_changes=100):
        changes = [change for part in parts for change in part.changes]
        for fmt in ("changestream", "original"):
            written += sum(1 for _ in record_lines(changes, fmt, STAMP))
    return written
