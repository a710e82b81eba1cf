"""Which DDL gives a table's existing rows values no row event carries
(changestream.schema.refill), from definitions as MariaDB 10.11 and MySQL 9.7 print them."""

from __future__ import annotations

import pytest

from changestream.decoding.ddl import renamed_columns
from changestream.schema.definition import ColumnDefinition, TableDefinition
from changestream.schema.refill import column_lines, refill_reason, statement_refill_reason

BEFORE = """CREATE TABLE `t` (
  `a` int(11) NOT NULL,
  `b` decimal(10,3) DEFAULT NULL,
  `c` datetime(6) DEFAULT NULL,
  `f` double DEFAULT NULL,
  `g` int(11) GENERATED ALWAYS AS (`a` * 2) STORED,
  PRIMARY KEY (`a`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

COLUMNS = (ColumnDefinition("a", "int", "int(11)"),
           ColumnDefinition("b", "decimal", "decimal(10,3)"),
           ColumnDefinition("c", "datetime", "datetime(6)"),
           ColumnDefinition("f", "double", "double"),
           ColumnDefinition("g", "int", "int(11)", generated="STORED"))


def table(columns: tuple[ColumnDefinition, ...], create_sql: str) -> TableDefinition:
    return TableDefinition("d", "t", columns, ("a",), create_sql)


def added(line: str, column: ColumnDefinition) -> TableDefinition:
    """The table with one column added, its SHOW CREATE TABLE line ``line``."""
    sql = BEFORE.replace("  PRIMARY KEY", f"  `{column.name}` {line},\n  PRIMARY KEY")
    return table((*COLUMNS, column), sql)


def changed(name: str, line: str, column: ColumnDefinition) -> TableDefinition:
    lines = [f"  `{name}` {line}," if ln.startswith(f"  `{name}` ") else ln
             for ln in BEFORE.splitlines()]
    return table(tuple(column if c.name == name else c for c in COLUMNS), "\n".join(lines))


@pytest.mark.parametrize("line, column, statement, flavor, reason", [
    ("int(11) NOT NULL AUTO_INCREMENT", ColumnDefinition("z", "int", "int(11)"),
     "ALTER TABLE t ADD COLUMN z INT AUTO_INCREMENT UNIQUE", "mariadb",
     "column z added with AUTO_INCREMENT"),
    ("int NOT NULL AUTO_INCREMENT", ColumnDefinition("z", "int", "int"),
     "alter table t add z int auto_increment, add unique(z)", "mysql",
     "column z added with AUTO_INCREMENT"),
    ("int(11) GENERATED ALWAYS AS (`a` * 3) STORED",
     ColumnDefinition("s", "int", "int(11)", generated="STORED"),
     "ALTER TABLE t ADD s INT AS (a*3) STORED", "mariadb",
     "column s added with a STORED generated column"),
    ("int GENERATED ALWAYS AS ((`a` * 3)) VIRTUAL",
     ColumnDefinition("v", "int", "int", generated="VIRTUAL"),
     "ALTER TABLE t ADD v INT AS (a*3)", "mysql",
     "column v added with a VIRTUAL generated column"),
    ("varchar(36) DEFAULT uuid()", ColumnDefinition("u", "varchar", "varchar(36)"),
     "ALTER TABLE t ADD u VARCHAR(36) DEFAULT UUID()", "mariadb",
     "column u added with a DEFAULT expression"),
    ("int DEFAULT ((1 + 1))", ColumnDefinition("e", "int", "int"),
     "ALTER TABLE t ADD e INT DEFAULT (1+1)", "mysql",
     "column e added with a DEFAULT expression"),
    ("timestamp(3) NULL DEFAULT current_timestamp(3)",
     ColumnDefinition("ts", "timestamp", "timestamp(3)"),
     "ALTER TABLE t ADD ts TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3)", "mariadb",
     "column ts added with a DEFAULT of the current time with fractions"),
])
def test_added_columns_the_server_fills_per_row_call_for_a_refill(
        line: str, column: ColumnDefinition, statement: str, flavor: str,
        reason: str) -> None:
    assert refill_reason(table(COLUMNS, BEFORE), added(line, column), statement,
                         flavor) == reason


@pytest.mark.parametrize("line, column, flavor", [
    ("int(11) DEFAULT 7", ColumnDefinition("k", "int", "int(11)"), "mariadb"),
    ("int DEFAULT '7'", ColumnDefinition("k", "int", "int"), "mysql"),
    ("int(11) DEFAULT NULL", ColumnDefinition("n", "int", "int(11)"), "mariadb"),
    ("varchar(5) NOT NULL", ColumnDefinition("s", "varchar", "varchar(5)"), "mysql"),
    ("timestamp NOT NULL DEFAULT current_timestamp()",
     ColumnDefinition("ts", "timestamp", "timestamp"), "mariadb"),
    ("timestamp NULL DEFAULT CURRENT_TIMESTAMP",
     ColumnDefinition("ts", "timestamp", "timestamp"), "mysql"),
    ("varchar(10) DEFAULT 'uuid()'", ColumnDefinition("q", "varchar", "varchar(10)"),
     "mariadb"),
    # MariaDB does not log virtual columns: nothing a sink has is wrong
    ("int(11) GENERATED ALWAYS AS (`a` * 3) VIRTUAL",
     ColumnDefinition("v", "int", "int(11)", generated="VIRTUAL"), "mariadb"),
])
def test_added_columns_a_sink_fills_itself_do_not(line: str, column: ColumnDefinition,
                                                  flavor: str) -> None:
    assert refill_reason(table(COLUMNS, BEFORE), added(line, column),
                         f"ALTER TABLE t ADD {column.name} x", flavor) is None


def test_a_changed_stored_expression_and_rounding_type_changes_call_for_a_refill() -> None:
    before = table(COLUMNS, BEFORE)
    generated = changed("g", "int(11) GENERATED ALWAYS AS (`a` * 5) STORED",
                        ColumnDefinition("g", "int", "int(11)", generated="STORED"))
    assert refill_reason(before, generated, "ALTER TABLE t MODIFY g INT AS (a*5) STORED") \
        == "generated column g changed"
    scale = changed("b", "decimal(10,1) DEFAULT NULL",
                    ColumnDefinition("b", "decimal", "decimal(10,1)"))
    assert refill_reason(before, scale, "ALTER TABLE t MODIFY b DECIMAL(10,1)") == \
        "column b changed from decimal(10,3) to decimal(10,1)"
    fraction = changed("c", "datetime DEFAULT NULL",
                       ColumnDefinition("c", "datetime", "datetime"))
    assert refill_reason(before, fraction, "ALTER TABLE t MODIFY c DATETIME") == \
        "column c changed from datetime(6) to datetime"
    rounded = changed("f", "int(11) DEFAULT NULL", ColumnDefinition("f", "int", "int(11)"))
    assert refill_reason(before, rounded, "ALTER TABLE t MODIFY f INT") == \
        "column f changed from double to int(11)"


def test_changes_that_keep_values_do_not() -> None:
    before = table(COLUMNS, BEFORE)
    wider = changed("b", "decimal(12,4) DEFAULT NULL",
                    ColumnDefinition("b", "decimal", "decimal(12,4)"))
    assert refill_reason(before, wider, "ALTER TABLE t MODIFY b DECIMAL(12,4)") is None
    finer = changed("c", "datetime(6) NOT NULL",
                    ColumnDefinition("c", "datetime", "datetime(6)"))
    assert refill_reason(before, finer, "ALTER TABLE t MODIFY c DATETIME(6) NOT NULL") is None
    # a renamed AUTO_INCREMENT column had its values already
    auto_before = added("int(11) NOT NULL AUTO_INCREMENT",
                        ColumnDefinition("z", "int", "int(11)"))
    auto_after = table((*COLUMNS, ColumnDefinition("y", "int", "int(11)")),
                       auto_before.create_sql.replace("`z`", "`y`"))
    for statement in ("ALTER TABLE t RENAME COLUMN z TO y",
                      "ALTER TABLE t CHANGE COLUMN `z` `y` INT AUTO_INCREMENT"):
        assert refill_reason(auto_before, auto_after, statement) is None
    assert refill_reason(None, before, "CREATE TABLE t (...)") is None
    assert refill_reason(before, None, "DROP TABLE t") is None


def test_renames_and_column_lines_are_read_from_the_texts() -> None:
    assert renamed_columns("ALTER TABLE t RENAME COLUMN `a b` TO c, CHANGE d e INT") == \
        {"c": "a b", "e": "d"}
    assert column_lines(BEFORE)["g"] == "int(11) GENERATED ALWAYS AS (`a` * 2) STORED"
    assert "PRIMARY" not in column_lines(BEFORE)


@pytest.mark.parametrize("statement, flavor, reason", [
    ("ALTER TABLE t ADD COLUMN z INT AUTO_INCREMENT UNIQUE", "mariadb",
     "column z added with AUTO_INCREMENT"),
    ("ALTER TABLE t ADD s INT AS (a*3) PERSISTENT, ADD INDEX (s)", "mariadb",
     "column s added with a STORED generated column"),
    ("ALTER TABLE t ADD `v` INT GENERATED ALWAYS AS (a*3)", "mysql",
     "column v added with a VIRTUAL generated column"),
    ("ALTER TABLE t ADD u VARCHAR(36) DEFAULT (UUID()), ADD k INT DEFAULT 7", "mariadb",
     "column u added with a DEFAULT expression"),
    ("ALTER TABLE t MODIFY g INT AS (a*5) STORED", "mysql", "generated column g changed"),
    ("ALTER TABLE t CHANGE g h INT AS (a*5) STORED", "mariadb", "generated column h changed"),
    ("ALTER TABLE t ADD v INT AS (a*3) VIRTUAL", "mariadb", None),
    ("ALTER TABLE t ADD k INT NOT NULL DEFAULT 0, ADD UNIQUE KEY (k)", "mysql", None),
    ("ALTER TABLE t MODIFY b DECIMAL(10,1)", "mysql", None),  # needs the definitions
    ("ALTER TABLE t ADD ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP", "mysql", None),
])
def test_without_a_history_the_statement_says_it(statement: str, flavor: str,
                                                 reason: str | None) -> None:
    assert statement_refill_reason(statement, flavor) == reason


def test_a_refill_joins_the_snapshot_under_way_or_starts_one_counting_on() -> None:
    from changestream.snapshot.coordinator import SnapshotCoordinator
    from changestream.snapshot.progress import SnapshotProgress

    idle = SnapshotCoordinator(None)
    finished = SnapshotProgress("a", (), chunks=5, read_until=(("d.n", "bin.000001", 4),))
    progress, start = idle.extend("d.t", "b", finished)
    # Chunks count on from the last snapshot: positions at one offset stay ordered.
    assert (progress.id, progress.tables, progress.chunks, start) == ("b", ("d.t",), 5, True)
    assert progress.read_until == finished.read_until
    assert idle.extend("d.t", "c") == (progress, False)  # queued, not started yet
    assert idle.next_table() == "d.t"
    busy = SnapshotCoordinator(SnapshotProgress("a", ("d.t", "d.u"), after=(7,)))
    busy.running = True
    progress, start = busy.extend("d.t", "b")  # rows of d.t before key 7 are old: again
    assert (progress.id, progress.tables, start) == ("a", ("d.t", "d.u", "d.t"), False)
    busy.progress = SnapshotProgress("a", ())
    assert busy.next_table() is None and not busy.running
