"""Grouping a stream of events into transactions with their boundaries, for ``inspect`` and
``extract``: where each transaction starts and ends, its GTID, kind, status and row counts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field

from changestream.decoding import event_types as et
from changestream.decoding.boundary import BoundaryType, TransactionBoundaryParser, classify_query
from changestream.decoding.events import (
    Event,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RowsEvent,
    TransactionPayloadEvent,
    XaPrepareEvent,
)
from changestream.model.record import record


@record
class TransactionSummary:
    """One transaction (or standalone statement) as found in a binlog."""

    file: str | None
    start: int
    end: int
    gtid: str | None = None
    transaction_length: int | None = None
    events: int = 0
    kind: str = "dml"
    status: str = "incomplete"
    commit_ts: dt.datetime | None = None
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    xid: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "start": self.start,
            "end": self.end,
            "gtid": self.gtid,
            "transaction_length": self.transaction_length,
            "events": self.events,
            "kind": self.kind,
            "status": self.status,
            "commit_ts": self.commit_ts.isoformat(timespec="microseconds")
            if self.commit_ts else None,
            "tables": self.tables,
        }


def _count_rows(summary: TransactionSummary, event: Event) -> None:
    if isinstance(event, RowsEvent):
        counts = summary.tables.setdefault(event.schema.qualified_name,
                                           {"insert": 0, "update": 0, "delete": 0})
        counts[event.kind] += len(event.rows)
    elif isinstance(event, TransactionPayloadEvent):
        for inner in event.events:
            _count_rows(summary, inner)
            _note_end(summary, inner)


def _ts(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def _note_end(summary: TransactionSummary, event: Event) -> None:
    """Set kind and status from an event that can end a transaction."""
    if isinstance(event, XaPrepareEvent):
        if event.one_phase:
            summary.kind, summary.status = "xa-one-phase", "committed"
        else:
            summary.kind, summary.status = "xa-prepare", "prepared"
    elif event.header.type_code == et.XID:
        summary.status = "committed"
        summary.xid = getattr(event, "xid", None)
    elif isinstance(event, QueryEvent):
        q = event.query.lstrip().upper()
        if q.startswith("XA COMMIT"):
            summary.kind, summary.status = "xa-commit", "committed"
        elif q.startswith("XA ROLLBACK"):
            summary.kind, summary.status = "xa-rollback", "rolled-back"
        elif q.startswith("XA PREPARE"):
            summary.kind, summary.status = "xa-prepare", "prepared"
        elif q.startswith("COMMIT"):
            summary.status = "committed"
        elif q.startswith("ROLLBACK"):
            summary.status = "rolled-back"
        elif classify_query(event.query) is BoundaryType.STATEMENT:
            summary.kind, summary.status = "ddl", "committed"
    else:
        return
    if summary.commit_ts is None:
        summary.commit_ts = _ts(event.header.timestamp)


def scan_transactions(
    events: Iterable[Event], on_warning: Callable[[str], None] | None = None
) -> Iterator[TransactionSummary]:
    """Group ``events`` into transactions, in order. A transaction still open when the events
    run out is yielded with status ``incomplete``."""
    parser = TransactionBoundaryParser(on_warning)
    current: TransactionSummary | None = None
    for event in events:
        boundary = parser.feed(event)
        if boundary is BoundaryType.IGNORE:
            if current is not None and event.header.type_code not in (et.ROTATE, et.STOP,
                                                                      et.FORMAT_DESCRIPTION):
                current.events += 1
                current.end = event.header.end
            continue
        if boundary is BoundaryType.GTID or current is None:
            if current is not None:
                yield current  # cut short by a new GTID: the parser warned
            current = TransactionSummary(event.header.file, event.header.offset,
                                         event.header.end)
            if isinstance(event, GtidEvent):
                current.gtid = event.gtid
                current.transaction_length = event.transaction_length
                if event.immediate_commit_ts is not None:
                    current.commit_ts = dt.datetime.fromtimestamp(
                        event.immediate_commit_ts / 1e6, dt.UTC)
            elif isinstance(event, MariadbGtidEvent):
                current.gtid = event.gtid
        current.events += 1
        current.end = event.header.end
        _count_rows(current, event)
        if boundary in (BoundaryType.END_TRX, BoundaryType.END_XA_TRX, BoundaryType.STATEMENT,
                        BoundaryType.INCIDENT):
            _note_end(current, event)
        if boundary is BoundaryType.INCIDENT:
            current.kind, current.status = "incident", "committed"
        if not parser.inside_transaction and boundary is not BoundaryType.GTID:
            if boundary is BoundaryType.TRANSACTION_PAYLOAD and current.status == "incomplete":
                current.status = "committed"
            yield current
            current = None
    if current is not None:
        current.status = "incomplete"
        yield current
