"""Decoded binlog events: one small class per kind, all carrying their header and place."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from changestream.decoding import event_types as et
from changestream.decoding.table_schema import TableSchema
from changestream.model.gtid import mariadb_gtid
from changestream.model.record import record


@dataclass(slots=True, unsafe_hash=True)
class EventHeader:
    """The common header of an event and where it was read; read-only by convention (not
    ``frozen``: a frozen dataclass takes four times as long to build, once per event).

    ``offset`` is where the event starts in ``file``; for an event unpacked from a
    TRANSACTION_PAYLOAD it is the payload event's offset and ``payload_index`` says which
    inner event it is. ``log_pos`` is the server's end position: 0 for artificial events,
    and inside a transaction written by MariaDB 11.4+ (unless ``binlog_legacy_event_pos``).
    """

    timestamp: int
    type_code: int
    server_id: int
    size: int
    log_pos: int
    flags: int
    file: str | None
    offset: int
    payload_index: int | None = None

    @property
    def type_name(self) -> str:
        return et.event_type_name(self.type_code)

    @property
    def end(self) -> int:
        """The offset just after this event."""
        return self.offset + self.size if self.payload_index is None else self.offset

    @property
    def artificial(self) -> bool:
        """Sent by a server's dump thread but not in its binlog (e.g. the first ROTATE)."""
        return bool(self.flags & et.LOG_EVENT_ARTIFICIAL_F) or (
            self.log_pos == 0 and self.type_code in (et.ROTATE, et.HEARTBEAT, et.HEARTBEAT_V2)
        )


@record
class Event:
    """An event changestream keeps only the header of (INTVAR, STOP, ignorable unknowns ...)."""

    header: EventHeader

    @property
    def type_name(self) -> str:
        return self.header.type_name


@record
class FormatDescriptionEvent(Event):
    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: int | None

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()


@record
class RotateEvent(Event):
    position: int
    next_file: str


@record
class QueryEvent(Event):
    thread_id: int
    exec_time: int
    error_code: int
    database: str
    query: str
    charset: int | None = None
    compressed: bool = False
    statement: bytes = b""  # the query as logged (in the client's character set)
    status: bytes = b""  # the status variables (see decoding.query_status)
    # What a DDL changed, when a schema history is kept (a schema.SchemaChangeSet).
    schema_change: Any = None


@record
class XidEvent(Event):
    xid: int


@record(frozen=True)
class XaId:
    """An XA transaction id: format id, global transaction id and branch qualifier."""

    format_id: int
    gtrid: bytes
    bqual: bytes

    def __str__(self) -> str:
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"


@record
class XaPrepareEvent(Event):
    one_phase: bool
    xid: XaId


@record
class GtidEvent(Event):
    """MySQL's GTID, ANONYMOUS_GTID and GTID_TAGGED events with the whole body decoded.

    Timestamps are microseconds since the epoch (``None`` before MySQL 8.0.1).
    """

    anonymous: bool
    commit_flag: int
    sid: uuid.UUID
    gno: int
    tag: str | None = None
    last_committed: int | None = None
    sequence_number: int | None = None
    immediate_commit_ts: int | None = None
    original_commit_ts: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None

    @property
    def gtid(self) -> str | None:
        if self.anonymous:
            return None
        if self.tag:
            return f"{self.sid}:{self.tag}:{self.gno}"
        return f"{self.sid}:{self.gno}"


# MariaDB GTID event flags2.
FL_STANDALONE = 1
FL_GROUP_COMMIT_ID = 2
FL_TRANSACTIONAL = 4
FL_ALLOW_PARALLEL = 8
FL_WAITED = 16
FL_DDL = 32
FL_PREPARED_XA = 64
FL_COMPLETED_XA = 128


@record
class MariadbGtidEvent(Event):
    """MariaDB's GTID event: starts every event group (MariaDB writes no BEGIN)."""

    domain_id: int
    seq_no: int
    flags2: int
    commit_id: int | None = None
    xid: XaId | None = None
    flags_extra: int = 0

    @property
    def gtid(self) -> str:
        return mariadb_gtid(self.domain_id, self.header.server_id, self.seq_no)

    @property
    def standalone(self) -> bool:
        return bool(self.flags2 & FL_STANDALONE)

    @property
    def transactional(self) -> bool:
        return bool(self.flags2 & FL_TRANSACTIONAL)

    @property
    def ddl(self) -> bool:
        return bool(self.flags2 & FL_DDL)

    @property
    def xa_prepared(self) -> bool:
        return bool(self.flags2 & FL_PREPARED_XA)

    @property
    def xa_completed(self) -> bool:
        return bool(self.flags2 & FL_COMPLETED_XA)


@record
class MariadbGtidListEvent(Event):
    """The GTID state at the start of a MariaDB binlog: ``[(domain, server, seq_no)]``."""

    gtids: list[tuple[int, int, int]]

    @property
    def gtid_state(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.gtids)


@record
class PreviousGtidsEvent(Event):
    gtid_set: str


@record
class BinlogCheckpointEvent(Event):
    file_name: str


@record
class RowsQueryEvent(Event):
    """The statement behind the next rows events (MySQL ROWS_QUERY, MariaDB ANNOTATE_ROWS)."""

    query: str


@record
class IncidentEvent(Event):
    incident: int
    message: str


@record
class HeartbeatEvent(Event):
    log_file: str


@record
class TableMapEvent(Event):
    table_id: int
    flags: int
    schema: TableSchema


@record
class RowsEvent(Event):
    """Row changes of one table; ``rows`` holds value lists (insert/delete) or
    ``(before, after)`` pairs (update), full width, with ``ABSENT`` for columns not logged."""

    kind: str
    table_id: int
    flags: int
    schema: TableSchema
    present: tuple[int, ...]
    present_after: tuple[int, ...] | None
    rows: list[Any]
    partial: bool = False
    compressed: bool = False

    @property
    def statement_end(self) -> bool:
        return bool(self.flags & 1)


@record
class TransactionPayloadEvent(Event):
    """A zstd-compressed transaction (MySQL 8.0.20+) and its decoded inner events."""

    compression: str
    payload_size: int
    uncompressed_size: int
    events: list[Event] = field(default_factory=list)


@record
class UnknownEvent(Event):
    """An event type changestream does not know, skipped because the server flagged it
    ignorable."""

    raw: bytes = b""


@record
class UserVarEvent(Event):
    name: str
    is_null: bool
