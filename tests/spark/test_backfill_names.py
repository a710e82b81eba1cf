"""A backfill unit gets the schema history it needs: the tables as they stood at its start
and the DDL changes inside it, applied at their own positions."""

from __future__ import annotations

from changestream.model.changes import binlog_name
from changestream.schema.definition import TableDefinition
from changestream.schema.history import SchemaChangeSet
from changestream.sinks.backfill.names import RecordedHistory
from changestream.sinks.backfill.planning import BackfillUnit


def _table(name: str, sql: str) -> TableDefinition:
    return TableDefinition("db", name, (), (), sql)


def _change(file: str, pos: int, name: str, sql: str | None) -> SchemaChangeSet:
    return SchemaChangeSet(file, pos, sql or "DROP", tables={
        ("db", name): _table(name, sql) if sql else None})


CHANGES = [
    _change("bin.000001", 300, "a", "v1"),
    _change("bin.000001", 900, "a", "v2"),
    _change("bin.000002", 200, "b", "b1"),
    _change("bin.000002", 800, "a", None),
    _change("bin.000010", 100, "a", "v3"),  # numbers, not text, order the files
]


def test_a_unit_starts_from_the_state_before_it_and_holds_the_changes_inside() -> None:
    history = RecordedHistory("mysql", CHANGES)
    whole_first = history.for_unit(BackfillUnit(0, "/x/bin.000001", 4, None))
    assert whole_first.state.tables == {}
    assert [c.pos for c in whole_first.changes] == [300, 900]

    middle = history.for_unit(BackfillUnit(1, "/x/bin.000001", 500, 1000))
    assert middle.state.tables[("db", "a")].create_sql == "v1"
    assert [c.pos for c in middle.changes] == [900]

    gzipped = history.for_unit(BackfillUnit(2, "/x/bin.000002.gz", 4, None))
    assert {k: t.create_sql for k, t in gzipped.state.tables.items()} == {("db", "a"): "v2"}
    assert [(c.file, c.pos) for c in gzipped.changes] == [("bin.000002", 200),
                                                          ("bin.000002", 800)]

    last = history.for_unit(BackfillUnit(3, "/x/bin.000010", 4, None))
    assert {k: t.create_sql for k, t in last.state.tables.items()} == {("db", "b"): "b1"}
    assert [c.pos for c in last.changes] == [100]


def test_names_follow_the_changes_as_the_reader_passes_them() -> None:
    unit = RecordedHistory("mysql", CHANGES).for_unit(BackfillUnit(0, "/x/bin.000001"))
    names = unit.resolver()
    assert not names.advance("/x/bin.000001", 120)
    assert names.history.table("db", "a") is None
    assert names.advance("/x/bin.000001", 300)  # the event right after the DDL
    assert names.history.table("db", "a").create_sql == "v1"
    assert not names.advance("/x/bin.000001", 500)
    assert names.advance("/x/bin.000001", 950)
    assert names.history.table("db", "a").create_sql == "v2"
    assert unit.state.tables == {}  # the unit's own start state is left as it was


def test_binlog_names_drop_the_folder_and_gzip() -> None:
    assert binlog_name("/a/b/mysql-bin.000002.gz") == "mysql-bin.000002"
    assert binlog_name("mysql-bin.000002") == "mysql-bin.000002"
