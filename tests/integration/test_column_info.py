"""Column names when the server does not log them (binlog_row_metadata=MINIMAL): the router
reads information_schema, follows DDL in binlog order, and stops with a clear error rather
than put values under the wrong names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.column_info import SchemaMismatchError
from changestream.filters import ChangeFilter
from changestream.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink

pytestmark = pytest.mark.integration


@pytest.fixture
def minimal_metadata(server: Any) -> Iterator[Any]:
    """The server logs no column names while the test runs."""
    server.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        yield server
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")


def _run(server: Any, db: str, start: tuple[str, int], out: Path,
         position: Path | None = None) -> None:
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[db]),
                          position_file=str(position) if position else None),
           JsonLinesSink(out)).run()


def _rows(out: Path) -> list[tuple[str, Any, Any]]:
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return [(r["op"], r["before"], r["after"]) for r in records if r["op"] != "ddl"]


def test_names_come_from_information_schema_and_follow_ddl_in_order(
        minimal_metadata: Any, fresh_database: str, tmp_path: Path) -> None:
    server, db = minimal_metadata, fresh_database
    server.execute(f"CREATE TABLE `{db}`.t (id INT UNSIGNED PRIMARY KEY, name VARCHAR(10), "
                   "kind ENUM('a','b'))")
    start = server.binlog_position()
    server.execute([f"INSERT INTO `{db}`.t VALUES (4294967295, 'x', 'b')",
                    f"UPDATE `{db}`.t SET name = 'y'"])
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    _run(server, db, start, out, position)  # caught up before the ALTER below
    server.execute([f"ALTER TABLE `{db}`.t ADD COLUMN extra INT",
                    f"INSERT INTO `{db}`.t VALUES (2, 'z', 'a', 7)"])
    _run(server, db, start, out, position)  # resumes: the ALTER, then the new row
    row = {"id": 4294967295, "name": "x", "kind": "b"}
    assert _rows(out) == [("insert", None, row),
                          ("update", row, {**row, "name": "y"}),
                          ("insert", None, {"id": 2, "name": "z", "kind": "a", "extra": 7})]


def test_rows_that_no_longer_fit_stop_with_an_error_naming_table_and_position(
        minimal_metadata: Any, fresh_database: str, tmp_path: Path) -> None:
    server, db = minimal_metadata, fresh_database
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, name VARCHAR(10))")
    start = server.binlog_position()
    server.execute([f"INSERT INTO `{db}`.t VALUES (1, 'x')",
                    f"ALTER TABLE `{db}`.t DROP COLUMN name"])
    with pytest.raises(SchemaMismatchError) as error:
        _run(server, db, start, tmp_path / "out.jsonl")
    message = str(error.value)
    assert f"{db}.t" in message and start[0] in message and "offset" in message
    assert "binlog_row_metadata=FULL" in message


def test_ddl_read_in_order_updates_the_names(minimal_metadata: Any, fresh_database: str,
                                            tmp_path: Path) -> None:
    server, db = minimal_metadata, fresh_database
    start = server.binlog_position()
    # Created and changed after the start: each TABLE_MAP is resolved when the router
    # reaches it, and the CREATE/ALTER before it drop the cached columns.
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a INT)",
                    f"INSERT INTO `{db}`.t VALUES (1, 10)"])
    out = tmp_path / "out.jsonl"
    _run(server, db, start, out)
    assert _rows(out) == [("insert", None, {"id": 1, "a": 10})]
