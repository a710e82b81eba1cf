"""The transaction boundary parser follows MySQL's state machine, and MariaDB's groups."""

from __future__ import annotations

import uuid

from changestream.decoding import event_types as et
from changestream.decoding.boundary import (
    BoundaryType,
    ParserState,
    TransactionBoundaryParser,
    classify,
)
from changestream.decoding.events import (
    Event,
    EventHeader,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
)

_offset = [4]


def _header(type_code: int, size: int = 50, flags: int = 0) -> EventHeader:
    h = EventHeader(0, type_code, 1, size, _offset[0] + size, flags, "f", _offset[0])
    _offset[0] += size
    return h


def gtid(length: int | None = None) -> GtidEvent:
    e = GtidEvent(_header(et.GTID), False, 1, uuid.uuid4(), 1)
    e.transaction_length = length
    return e


def query(text: str) -> QueryEvent:
    return QueryEvent(_header(et.QUERY), 1, 0, 0, "db", text)


def xid() -> XidEvent:
    return XidEvent(_header(et.XID), 7)


def rows() -> Event:
    return Event(_header(et.WRITE_ROWS))


def test_begin_rows_xid_is_one_transaction() -> None:
    p = TransactionBoundaryParser(on_warning=lambda m: None)
    states = []
    for event in (gtid(), query("BEGIN"), Event(_header(et.TABLE_MAP)), rows(), xid()):
        p.feed(event)
        states.append(p.state)
    assert states == [ParserState.GTID, ParserState.DML, ParserState.DML, ParserState.DML,
                      ParserState.NONE]


def test_ddl_after_gtid_ends_the_transaction() -> None:
    p = TransactionBoundaryParser(on_warning=lambda m: None)
    p.feed(gtid())
    assert p.feed(query("CREATE TABLE t (a INT)")) is BoundaryType.STATEMENT
    assert p.state is ParserState.NONE


def test_gtid_in_the_middle_of_dml_warns_and_resets() -> None:
    warnings: list[str] = []
    p = TransactionBoundaryParser(on_warning=warnings.append)
    p.feed(gtid())
    p.feed(query("BEGIN"))
    p.feed(gtid())
    assert p.state is ParserState.GTID
    assert warnings and "unable to change boundary parser from DML to GTID" in warnings[0]
    assert "GTID" in warnings[0] and "f at offset" in warnings[0]


def test_xid_outside_a_transaction_warns() -> None:
    warnings: list[str] = []
    p = TransactionBoundaryParser(on_warning=warnings.append)
    p.feed(xid())
    assert p.state is ParserState.NONE
    assert "from NONE to NONE on XID" in warnings[0]


def test_rollback_to_savepoint_is_a_statement_but_rollback_ends() -> None:
    assert classify(query("ROLLBACK TO SAVEPOINT a")) is BoundaryType.STATEMENT
    assert classify(query("ROLLBACK")) is BoundaryType.END_TRX
    assert classify(query("XA ROLLBACK X'01',X'',1")) is BoundaryType.END_XA_TRX
    assert classify(query("XA START X'01',X'',1")) is BoundaryType.BEGIN_TRX


def test_intvar_then_statement_is_ddl_then_none() -> None:
    p = TransactionBoundaryParser(on_warning=lambda m: None)
    p.feed(Event(_header(et.INTVAR)))
    assert p.state is ParserState.DDL
    p.feed(query("INSERT INTO t VALUES (LAST_INSERT_ID())"))
    assert p.state is ParserState.NONE


def test_unknown_ignorable_event_is_ignored_and_unknown_other_is_error() -> None:
    p = TransactionBoundaryParser(on_warning=lambda m: None)
    assert p.feed(Event(_header(100, flags=et.LOG_EVENT_IGNORABLE_F))) is BoundaryType.IGNORE
    assert p.feed(Event(_header(100))) is BoundaryType.ERROR


def test_mariadb_gtid_is_also_the_begin_unless_standalone() -> None:
    p = TransactionBoundaryParser(on_warning=lambda m: None)
    p.feed(MariadbGtidEvent(_header(et.MARIADB_GTID), 0, 5, 12))
    assert p.state is ParserState.DML
    p.feed(rows())
    p.feed(xid())
    assert p.state is ParserState.NONE
    p.feed(MariadbGtidEvent(_header(et.MARIADB_GTID), 0, 6, 41))
    assert p.state is ParserState.GTID
    p.feed(query("ALTER TABLE t ADD c INT"))
    assert p.state is ParserState.NONE


def test_events_must_add_up_to_transaction_length() -> None:
    warnings: list[str] = []
    p = TransactionBoundaryParser(on_warning=warnings.append)
    start = _offset[0]
    p.feed(gtid(length=200))
    p.feed(query("BEGIN"))
    p.feed(xid())
    assert p.expected_end is None
    assert warnings == [
        f"transaction at {start} ends at {start + 150} but its GTID event's "
        f"transaction_length says 200 bytes (f at offset {start + 100})"]
    warnings.clear()
    p.feed(gtid(length=150))
    p.feed(query("BEGIN"))
    p.feed(xid())
    assert warnings == []
