"""Column names when the server does not log them (binlog_row_metadata=MINIMAL): the router
keeps a schema history (seeded from the server, advanced by each DDL in binlog order, stored
with the position) and stops with a clear error rather than put values under the wrong
names; with the history turned off it reads information_schema as it is now."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.column_info import SchemaMismatchError
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

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
         position: Path | None = None, history: str = "on") -> None:
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[db]),
                          position_file=str(position) if position else None,
                          schema=HistorySettings(history, shadow_command(server))),
           JsonLinesSink(out)).run()


def _rows(out: Path) -> list[tuple[str, Any, Any]]:
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return [(r["op"], r["before"], r["after"]) for r in records if r["op"] != "ddl"]


def test_names_come_from_the_history_and_follow_ddl_in_order(
        minimal_metadata: Any, fresh_database: str, tmp_path: Path) -> None:
    server, db = minimal_metadata, fresh_database
    server.execute(f"CREATE TABLE `{db}`.t (id INT UNSIGNED PRIMARY KEY, name VARCHAR(10), "
                   "kind ENUM('a','b'))")
    start = server.binlog_position()
    server.execute([f"INSERT INTO `{db}`.t VALUES (4294967295, 'x', 'b')",
                    f"UPDATE `{db}`.t SET name = 'y'"])
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    _run(server, db, start, out, position)  # seeded; caught up before the ALTER below
    assert list(tmp_path.glob("position.json.schema-*.json")), "no stored history"
    server.execute([f"ALTER TABLE `{db}`.t ADD COLUMN extra INT",
                    f"INSERT INTO `{db}`.t VALUES (2, 'z', 'a', 7)"])
    _run(server, db, start, out, position)  # resumes with the stored history
    row = {"id": 4294967295, "name": "x", "kind": "b"}
    assert _rows(out) == [("insert", None, row),
                          ("update", row, {**row, "name": "y"}),
                          ("insert", None, {"id": 2, "name": "z", "kind": "a", "extra": 7})]


def test_rows_from_before_a_ddl_the_history_cannot_see_past_stop_with_an_error(
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
    assert "binlog_row_metadata=FULL" in message and "--start latest" in message


def test_without_the_history_rows_that_no_longer_fit_stop_with_an_error(
        minimal_metadata: Any, fresh_database: str, tmp_path: Path) -> None:
    server, db = minimal_metadata, fresh_database
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, name VARCHAR(10))")
    start = server.binlog_position()
    server.execute([f"INSERT INTO `{db}`.t VALUES (1, 'x')",
                    f"ALTER TABLE `{db}`.t DROP COLUMN name"])
    with pytest.raises(SchemaMismatchError) as error:
        _run(server, db, start, tmp_path / "out.jsonl", history="off")
    message = str(error.value)
    assert f"{db}.t" in message and start[0] in message and "information_schema" in message


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


def test_the_shadow_server_starts_at_the_first_ddl_only(
        minimal_metadata: Any, fresh_database: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Names for rows without DDL come from the history read off the server's catalog: no
    shadow server is started; the first DDL starts one with the history's tables on it."""
    server, db = minimal_metadata, fresh_database
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, name VARCHAR(10))")
    start = server.binlog_position()
    server.execute(f"INSERT INTO `{db}`.t VALUES (1, 'x')")
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    caplog.set_level(logging.INFO, logger="changestream")
    _run(server, db, start, out, position, history="auto")
    assert _rows(out) == [("insert", None, {"id": 1, "name": "x"})]
    assert "server started" not in caplog.text  # no private server of any kind
    caplog.clear()
    server.execute([f"INSERT INTO `{db}`.t VALUES (2, 'y')",
                    f"ALTER TABLE `{db}`.t RENAME COLUMN name TO label",
                    f"INSERT INTO `{db}`.t VALUES (3, 'z')"])
    _run(server, db, start, out, position, history="auto")  # the stored history, then a DDL
    assert _rows(out)[1:] == [("insert", None, {"id": 2, "name": "y"}),
                              ("insert", None, {"id": 3, "label": "z"})]
    assert "server started for a DDL, 1 tables created on it" in caplog.text
