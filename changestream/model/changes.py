"""The change model: a change, the transaction it belongs to, and the batches sinks receive.

A *change* is one row inserted, updated or deleted, or one DDL statement. A *transaction*
is what the server committed as one unit. Big transactions reach the sink in several
*parts* (each with some of its changes, in order); only the last part is ``complete``.
A *batch* is what a sink adapter writes at once; the *position* after it is where the
router resumes once the adapter has made the batch durable.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

from changestream.model.record import record

if TYPE_CHECKING:
    from changestream.decoding.table_schema import TableSchema


def binlog_name(path: str) -> str:
    """A binlog file's own name, as the server and positions name it: no folder, no
    ``.gz`` of an archived copy (``/a/mysql-bin.000002.gz``: ``mysql-bin.000002``)."""
    return path[path.rfind("/") + 1:].removesuffix(".gz")


def binlog_order(file: str, pos: int) -> tuple[str, int, int]:
    """A sort key for a binlog position: base name, the file's number, offset (numbers
    outgrow their zero padding: ``.999999`` comes before ``.1000000``)."""
    base, _, number = file.rpartition(".")
    return (base, int(number), pos) if number.isdigit() else (file, 0, pos)


@record(frozen=True)
class Position:
    """A transaction boundary in the binlog: where the router resumes.

    ``file``/``pos``: the offset just after the last delivered transaction; ``gtid_set``: the
    MySQL GTID set or MariaDB GTID state including it (``None`` when unknown); ``pending_xa``:
    ``{xid: "file:pos"}`` of XA transactions prepared before this point and not yet ended, so
    a restart reads them again; ``schema_history``: the stored schema history state here
    (:mod:`changestream.schema.store`); ``snapshot``: a snapshot's progress up to here
    (:class:`changestream.snapshot.progress.SnapshotProgress` as a dict); ``sink``: what a
    sink that cuts its output back on a restart had made durable here (e.g. a file's length);
    ``tables``: the tables added and paused while running, up to here
    (:class:`changestream.model.table_changes.TableChanges` as a dict)."""

    file: str
    pos: int
    gtid_set: str | None = None
    flavor: str | None = None  # "mysql" or "mariadb"
    pending_xa: dict[str, str] = field(default_factory=dict)
    schema_history: str | None = None
    snapshot: dict[str, Any] | None = None
    sink: dict[str, Any] | None = None
    tables: dict[str, Any] | None = None  # TableChanges.as_dict(): added/paused while running

    def as_dict(self) -> dict[str, Any]:
        data = {"file": self.file, "pos": self.pos, "gtid_set": self.gtid_set,
                "flavor": self.flavor, "pending_xa": dict(self.pending_xa)}
        if self.schema_history is not None:
            data["schema_history"] = self.schema_history
        if self.snapshot is not None:
            data["snapshot"] = self.snapshot
        if self.sink is not None:
            data["sink"] = self.sink
        if self.tables:
            data["tables"] = self.tables
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Position:
        return cls(str(data["file"]), int(data["pos"]), data.get("gtid_set"),
                   data.get("flavor"), dict(data.get("pending_xa") or {}),
                   data.get("schema_history"), data.get("snapshot"), data.get("sink"),
                   data.get("tables"))

    def __str__(self) -> str:
        gtid = f" gtid {self.gtid_set}" if self.gtid_set else ""
        return f"{self.file}:{self.pos}{gtid}"

    @property
    def order(self) -> tuple[str, int, int, int]:
        """A sort key: the binlog position, then how many snapshot chunks were delivered
        (chunks go into the stream between transactions, at the same binlog position)."""
        chunks = int(self.snapshot.get("chunks") or 0) if self.snapshot else 0
        return (*binlog_order(self.file, self.pos), chunks)


@record
class TransactionInfo:
    """What every change of a transaction carries about it.

    ``id`` is the GTID where there is one, else ``server_id-file-offset`` of the
    transaction's first event (the same on every replay). ``commit_ts`` is the original
    commit time from MySQL 8's GTID event, else the time of the commit event.
    """

    id: str
    gtid: str | None
    xid: int | str | None
    commit_ts: dt.datetime | None
    size: int
    server_id: int
    file: str
    start: int
    end: int


@record
class Change:
    """One row change or DDL statement.

    ``before``/``after`` map column names to values (``None`` where not applicable).
    ``seq`` counts from 0 within the transaction; ``last`` marks its final change.
    ``schema`` is the table's shape when the change was logged (for DDL: after it, when a
    schema history knows it). A DDL's ``database`` is its first table's; ``session_database``
    the default database the statement ran in (what its unqualified names mean).
    """

    op: str  # insert, update, delete, ddl
    database: str | None
    table: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    primary_key: dict[str, Any] | None
    sql: str | None
    file: str
    pos: int
    row: int
    seq: int = 0
    last: bool = False
    schema: TableSchema | None = None
    transaction: TransactionInfo | None = None
    session_database: str | None = None


@record
class TransactionPart:
    """Some or all changes of one committed transaction, in order.

    ``complete`` is true on the last part of a transaction; ``position`` (set on complete
    parts) is where the transaction ends in the binlog: file and offset, for ordering and
    per-table bookkeeping (the GTID set to resume from is on :attr:`Batch.position`).
    """

    info: TransactionInfo
    changes: list[Change]
    complete: bool = True
    position: Position | None = None

    @property
    def count(self) -> int:
        """How many changes this part holds."""
        return len(self.changes)

    @property
    def transactions(self) -> int:
        """How many transactions this part completes (0 or 1)."""
        return 1 if self.complete else 0

    @property
    def last_commit_ts(self) -> dt.datetime | None:
        return self.info.commit_ts

    @property
    def approx_bytes(self) -> int:
        """About how many binlog bytes its changes took."""
        info = self.info
        return (info.end - info.start) * len(self.changes) // max(info.size, 1)


class HeldRecords(Protocol):
    """Records made in the router's own process and handed to the sink as the objects
    they are, not as bytes (a Spark sink's snapshot frames): what they hold in memory."""

    @property
    def nbytes(self) -> int: ...


@record
class EncodedRun:
    """Whole transactions, in order, whose change records a decode worker (or the
    snapshot's chunk encoding) has already encoded (see
    ``changestream.parallel.decode_workers``). Only sinks that declare an
    ``encoded_format`` receive these, and write ``records`` as they are."""

    # Bytes in the sink's format (a view of what a worker process sent), or records the
    # format's own sink reads as they are (HeldRecords).
    records: bytes | memoryview | HeldRecords
    count: int  # changes
    transactions: int
    last_commit_ts: dt.datetime | None
    # File and offset after the last transaction; None on a part of a transaction that
    # goes on in the next run (a piece of a snapshot's table read whole: ``complete`` false).
    position: Position | None
    complete: bool = True
    tables: dict[tuple[str, str, str], int] | None = None  # changes by database, table, op

    @property
    def approx_bytes(self) -> int:
        records = self.records
        return len(records) if isinstance(records, bytes) else records.nbytes


def transaction_parts(parts: Iterable[TransactionPart | EncodedRun]) -> list[TransactionPart]:
    """``parts`` as the TransactionParts they are: a sink without an ``encoded_format``
    never gets an :class:`EncodedRun`."""
    out = []
    for part in parts:
        if not isinstance(part, TransactionPart):
            raise TypeError("an EncodedRun reached a sink that takes no encoded records")
        out.append(part)
    return out


@record
class Batch:
    """What a sink adapter writes at once: parts of committed transactions in commit order.

    ``position`` is where to resume once this batch is durable (``None`` when the batch
    ends inside a big transaction, so there is no new resume point yet).
    """

    id: int
    parts: list[TransactionPart | EncodedRun]
    position: Position | None

    @property
    def changes(self) -> int:
        return sum(p.count for p in self.parts)

    def iter_changes(self) -> Any:
        """The changes of the batch's parts (encoded runs have none to give)."""
        for part in self.parts:
            if type(part) is TransactionPart:
                yield from part.changes


def ddl_database(change: Change) -> str | None:
    """The database a DDL change's unqualified table names are in."""
    return change.session_database if change.session_database is not None else change.database
