"""A DDL statement becomes one change: its first table's database and name, and the
session's default database that its unqualified names are in."""

from __future__ import annotations

from changestream.decoding import event_types as et
from changestream.decoding.events import EventHeader, QueryEvent
from changestream.model.changes import ddl_database
from changestream.transactions.assembler import TransactionAssembler


def _query(text: str, database: str, offset: int) -> QueryEvent:
    header = EventHeader(0, et.QUERY, 1, 60, offset + 60, 0, "binlog.000001", offset)
    return QueryEvent(header, 1, 0, 0, database, text)


def test_ddl_change_keeps_the_session_database() -> None:
    assembler = TransactionAssembler()
    assembler.feed(_query("RENAME TABLE other.a TO b", "shop", 4))
    assembler.feed(_query("DROP TABLE t", "shop", 64))
    changes = [c for parts, _ in assembler.drain() for part in parts for c in part.changes]
    assert [(c.op, c.database, c.table, c.session_database) for c in changes] == [
        ("ddl", "other", "a", "shop"), ("ddl", "shop", "t", "shop")]
    assert [ddl_database(c) for c in changes] == ["shop", "shop"]
