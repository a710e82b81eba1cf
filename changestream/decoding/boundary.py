"""The transaction boundary parser: MySQL's Transaction_boundary_parser state machine, with
MariaDB's BEGIN-less event groups fed through the same interface.

Every event is classified (``classify``) and moves the parser between the states NONE, GTID,
DDL, DML and ERROR with MySQL's rules. An invalid transition produces a warning
"unable to change boundary parser from X to Y" naming the event and its place, and the
parser resets to the state the event implies.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from changestream.decoding import event_types as et
from changestream.decoding.events import (
    Event,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
)
from changestream.decoding.statements import (
    BEGIN,
    COMMIT,
    ROLLBACK,
    XA_PREPARE,
    XA_RESOLVE,
    XA_START,
    statement_kind,
    xa_resolution,
)

log = logging.getLogger("changestream")


class BoundaryType(enum.Enum):
    """What an event means for transaction boundaries."""

    # Members are singletons: identity hashing (in C) instead of Enum's hash of the name,
    # which showed in profiles of the per-event transition lookups.
    __hash__ = object.__hash__

    GTID = "GTID"
    BEGIN_TRX = "BEGIN_TRX"
    END_TRX = "END_TRX"
    END_XA_TRX = "END_XA_TRX"
    STATEMENT = "STATEMENT"
    PRE_STATEMENT = "PRE_STATEMENT"
    IGNORE = "IGNORE"
    TRANSACTION_PAYLOAD = "TRANSACTION_PAYLOAD"
    INCIDENT = "INCIDENT"
    ERROR = "ERROR"


class ParserState(enum.Enum):
    """Where the parser is: outside a transaction, after its GTID, in DDL or in DML."""

    __hash__ = object.__hash__

    NONE = "NONE"
    GTID = "GTID"
    DDL = "DDL"
    DML = "DML"
    ERROR = "ERROR"


_STATEMENT_TYPES = frozenset({
    et.EXECUTE_LOAD_QUERY, et.TABLE_MAP, et.APPEND_BLOCK, et.BEGIN_LOAD_QUERY, et.ROWS_QUERY,
    et.WRITE_ROWS, et.UPDATE_ROWS, et.DELETE_ROWS, et.VIEW_CHANGE, et.PARTIAL_UPDATE_ROWS,
    et.WRITE_ROWS_V1, et.UPDATE_ROWS_V1, et.DELETE_ROWS_V1, et.PRE_GA_WRITE_ROWS,
    et.PRE_GA_UPDATE_ROWS, et.PRE_GA_DELETE_ROWS, et.MARIADB_ANNOTATE_ROWS,
    et.MARIADB_WRITE_ROWS_COMPRESSED_V1, et.MARIADB_UPDATE_ROWS_COMPRESSED_V1,
    et.MARIADB_DELETE_ROWS_COMPRESSED_V1, et.MARIADB_WRITE_ROWS_COMPRESSED,
    et.MARIADB_UPDATE_ROWS_COMPRESSED, et.MARIADB_DELETE_ROWS_COMPRESSED,
})
_IGNORE_TYPES = frozenset({
    et.ROTATE, et.FORMAT_DESCRIPTION, et.HEARTBEAT, et.HEARTBEAT_V2, et.PREVIOUS_GTIDS,
    et.STOP, et.SLAVE, et.DELETE_FILE, et.TRANSACTION_CONTEXT, et.MARIADB_GTID_LIST,
    et.MARIADB_BINLOG_CHECKPOINT,
})
_KNOWN_TYPES = _STATEMENT_TYPES | _IGNORE_TYPES | {
    et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED, et.MARIADB_GTID, et.QUERY,
    et.MARIADB_QUERY_COMPRESSED, et.XID, et.XA_PREPARE, et.INTVAR, et.RAND, et.USER_VAR,
    et.INCIDENT, et.TRANSACTION_PAYLOAD,
}


# What each statement kind (changestream.decoding.statements, the one classifier) is to the
# parser; XA COMMIT/ROLLBACK are told apart below, the rest are statements.
_QUERY_BOUNDARIES = {
    BEGIN: BoundaryType.BEGIN_TRX, XA_START: BoundaryType.BEGIN_TRX,
    COMMIT: BoundaryType.END_TRX, ROLLBACK: BoundaryType.END_TRX,
    # MariaDB logs XA PREPARE as a statement that ends the prepared group, and the later
    # XA COMMIT as a group of its own (MySQL logs an XA_PREPARE event instead).
    XA_PREPARE: BoundaryType.END_TRX,
}


def classify_query(query: str) -> BoundaryType:
    """The boundary type of a QUERY event's statement."""
    if not query:
        return BoundaryType.ERROR
    kind = statement_kind(query)
    if kind == XA_RESOLVE:
        resolution = xa_resolution(query)
        return BoundaryType.END_XA_TRX if resolution is not None and \
            resolution[0] == "ROLLBACK" else BoundaryType.STATEMENT
    return _QUERY_BOUNDARIES.get(kind, BoundaryType.STATEMENT)


def classify(event: Event) -> BoundaryType:
    """The boundary type of an event, by MySQL's rules (and MariaDB's where they differ)."""
    code = event.header.type_code
    if code in _STATEMENT_TYPES:
        return BoundaryType.STATEMENT
    if isinstance(event, QueryEvent):
        return classify_query(event.query)
    if code in (et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED, et.MARIADB_GTID):
        return BoundaryType.GTID
    if code in (et.XID, et.XA_PREPARE):
        return BoundaryType.END_TRX
    if code in (et.INTVAR, et.RAND, et.USER_VAR):
        return BoundaryType.PRE_STATEMENT
    if code == et.INCIDENT:
        return BoundaryType.INCIDENT
    if code == et.TRANSACTION_PAYLOAD:
        return BoundaryType.TRANSACTION_PAYLOAD
    if code in _IGNORE_TYPES:
        return BoundaryType.IGNORE
    if event.header.flags & et.LOG_EVENT_IGNORABLE_F:
        return BoundaryType.IGNORE
    return BoundaryType.ERROR


_S = ParserState
_B = BoundaryType

# (state, boundary type) -> (new state, valid). Missing pairs are handled in _transition.
_TRANSITIONS: dict[tuple[ParserState, BoundaryType], tuple[ParserState, bool]] = {
    (_S.NONE, _B.GTID): (_S.GTID, True),
    (_S.GTID, _B.GTID): (_S.GTID, False),
    (_S.DDL, _B.GTID): (_S.GTID, False),
    (_S.DML, _B.GTID): (_S.GTID, False),
    (_S.ERROR, _B.GTID): (_S.GTID, False),
    (_S.NONE, _B.BEGIN_TRX): (_S.DML, True),
    (_S.GTID, _B.BEGIN_TRX): (_S.DML, True),
    (_S.DDL, _B.BEGIN_TRX): (_S.DML, False),
    (_S.DML, _B.BEGIN_TRX): (_S.DML, False),
    (_S.ERROR, _B.BEGIN_TRX): (_S.DML, False),
    (_S.DML, _B.END_TRX): (_S.NONE, True),
    (_S.NONE, _B.END_TRX): (_S.NONE, False),
    (_S.GTID, _B.END_TRX): (_S.NONE, False),
    (_S.DDL, _B.END_TRX): (_S.NONE, False),
    (_S.ERROR, _B.END_TRX): (_S.NONE, False),
    (_S.DML, _B.END_XA_TRX): (_S.NONE, True),
    (_S.GTID, _B.END_XA_TRX): (_S.NONE, True),
    (_S.NONE, _B.END_XA_TRX): (_S.NONE, False),
    (_S.DDL, _B.END_XA_TRX): (_S.NONE, False),
    (_S.ERROR, _B.END_XA_TRX): (_S.NONE, False),
    (_S.NONE, _B.STATEMENT): (_S.NONE, True),
    (_S.GTID, _B.STATEMENT): (_S.NONE, True),
    (_S.DDL, _B.STATEMENT): (_S.NONE, True),
    (_S.DML, _B.STATEMENT): (_S.DML, True),
    (_S.ERROR, _B.STATEMENT): (_S.ERROR, False),
    (_S.GTID, _B.TRANSACTION_PAYLOAD): (_S.NONE, True),
    (_S.NONE, _B.TRANSACTION_PAYLOAD): (_S.NONE, False),
    (_S.DML, _B.TRANSACTION_PAYLOAD): (_S.NONE, False),
    (_S.DDL, _B.TRANSACTION_PAYLOAD): (_S.NONE, False),
    (_S.ERROR, _B.TRANSACTION_PAYLOAD): (_S.NONE, False),
    (_S.NONE, _B.PRE_STATEMENT): (_S.DDL, True),
    (_S.GTID, _B.PRE_STATEMENT): (_S.DDL, True),
    (_S.DDL, _B.PRE_STATEMENT): (_S.DDL, True),
    (_S.DML, _B.PRE_STATEMENT): (_S.DML, True),
    (_S.ERROR, _B.PRE_STATEMENT): (_S.ERROR, False),
}


def _where(event: Event) -> str:
    h = event.header
    return f"{h.file or '<stream>'} at offset {h.offset}"


class TransactionBoundaryParser:
    """Feeds on events and knows whether the stream is inside a transaction.

    ``on_warning`` receives each warning (default: the ``changestream`` logger).
    With a GTID event that carries ``transaction_length``, ``expected_end`` is where the
    transaction ends, and the parser checks that its events add up to it.
    """

    def __init__(self, on_warning: Callable[[str], None] | None = None):
        self.state = ParserState.NONE
        self.expected_end: int | None = None
        self._gtid_offset: int | None = None
        self.on_warning = on_warning or log.warning

    @property
    def inside_transaction(self) -> bool:
        return self.state not in (ParserState.NONE, ParserState.ERROR)

    def reset(self) -> None:
        self.state = ParserState.NONE
        self.expected_end = None

    def feed(self, event: Event) -> BoundaryType:
        """Classify ``event``, move the state and return the event's boundary type."""
        boundary = classify(event)
        if boundary is BoundaryType.IGNORE:
            return boundary
        if boundary is BoundaryType.ERROR:
            self.on_warning(
                f"unable to change boundary parser from {self.state.value} on "
                f"{event.type_name}: event type {event.header.type_code} is neither known nor "
                f"ignorable ({_where(event)})")
            self.state = ParserState.NONE
            return boundary
        if boundary is BoundaryType.INCIDENT:
            self.state = ParserState.NONE
            return boundary
        new_state, valid = _TRANSITIONS[(self.state, boundary)]
        if not valid:
            self.on_warning(
                f"unable to change boundary parser from {self.state.value} to "
                f"{new_state.value} on {event.type_name} ({boundary.value}) "
                f"({_where(event)})")
        if boundary is BoundaryType.GTID:
            self._begin_gtid(event)
            if isinstance(event, MariadbGtidEvent) and not event.standalone:
                new_state = ParserState.DML  # MariaDB's GTID event is also the BEGIN
        self.state = new_state
        if new_state is ParserState.NONE and self.expected_end is not None:
            self._check_length(event)
        return boundary

    def _begin_gtid(self, event: Event) -> None:
        self.expected_end = None
        self._gtid_offset = event.header.offset
        if isinstance(event, GtidEvent) and event.transaction_length:
            self.expected_end = event.header.offset + event.transaction_length

    def _check_length(self, event: Event) -> None:
        end = event.header.end if event.header.payload_index is None else None
        if end is not None and end != self.expected_end:
            assert self._gtid_offset is not None and self.expected_end is not None
            self.on_warning(
                f"transaction at {self._gtid_offset} ends at {end} but its GTID event's "
                f"transaction_length says {self.expected_end - self._gtid_offset} bytes "
                f"({_where(event)})")
        self.expected_end = None
