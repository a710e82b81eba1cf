"""DDL that gives existing rows values no row event carries (AUTO_INCREMENT, STORED
generated columns, DEFAULT expressions, rounding type changes): the router reads the table
again, and the records rebuild the table as the server has it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import generate_latest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.snapshot.settings import SnapshotSettings
from changestream.transactions.filters import ChangeFilter
from tests.integration.test_snapshot import _records, rebuilt, source_rows
from tests.servers import shadow_command

pytestmark = pytest.mark.integration


def _router(server: Any, db: str, out: Path, position: Path, refill: bool = True,
            history: str = "on") -> Router:
    return Router(RouterSettings(source=server.url, until="caught-up",
                                 filter=ChangeFilter(include=[db]),
                                 position_file=str(position),
                                 schema=HistorySettings(history, shadow_command(server)),
                                 snapshot=SnapshotSettings(chunk_rows=7, refill=refill)),
                  JsonLinesSink(out))


def _ddl(flavor: str) -> list[str]:
    """One DDL of each kind, each followed by changes of rows old and new."""
    expression = "u VARCHAR(36) DEFAULT (UUID())" if flavor != "mysql" else \
        "e INT DEFAULT (a + 100)"  # MySQL refuses a nondeterministic one in a DDL
    return ["ALTER TABLE t ADD COLUMN z INT AUTO_INCREMENT UNIQUE",
            "ALTER TABLE t ADD COLUMN s INT AS (a * 3) STORED",
            f"ALTER TABLE t ADD COLUMN {expression}",
            "ALTER TABLE t MODIFY b DECIMAL(10,1), MODIFY c DATETIME"]


def _changes(server: Any, db: str, step: int) -> None:
    server.execute([f"UPDATE `{db}`.t SET a = a + 1 WHERE id % 9 = {step}",
                    f"INSERT INTO `{db}`.t (id, a, b, c) VALUES ({1000 + step}, {step}, "
                    f"{step}.555, '2024-01-0{step + 1} 10:00:00.654321')",
                    f"DELETE FROM `{db}`.t WHERE id = {40 + step}"])


def _load(server: Any, db: str) -> None:
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a INT, b DECIMAL(10,3), "
                   "c DATETIME(6))")
    values = ", ".join(f"({i}, {i * 2}, {i}.456, '2024-01-01 00:00:{i % 60:02d}.{i:06d}')"
                       for i in range(1, 61))
    server.execute(f"INSERT INTO `{db}`.t VALUES {values}")


def test_each_ddl_that_fills_rows_has_the_table_read_again(
        server: Any, fresh_database: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    db = fresh_database
    flavor = "mysql" if "mysql" in type(server).__name__.lower() else "mariadb"
    _load(server, db)
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    _router(server, db, out, position).run()  # the snapshot and the stream
    for step, ddl in enumerate(_ddl(flavor)):
        server.execute(f"ALTER TABLE `{db}`.{ddl.removeprefix('ALTER TABLE ')}")
        _changes(server, db, step)
    with caplog.at_level(logging.WARNING, logger="changestream"):
        first = _router(server, db, out, position)
        first.run()
    status = first.status()
    assert status["refills"] == 4 and status["refills_skipped"] == 0, status
    assert "changestream_refills_total 4.0" in \
        generate_latest(first.metrics_registry).decode()
    said = [r.getMessage() for r in caplog.records if "reading the table again" in
            r.getMessage()]
    assert len(said) == 4 and f"{db}.t" in said[0] and "AUTO_INCREMENT" in said[0], said
    # The refill a run that stops once caught up began is taken up by the next one.
    _router(server, db, out, position).run()
    assert orjson.loads(position.read_bytes())["snapshot"]["tables"] == []
    records = _records(out)
    assert rebuilt(records, "t", ("id",)) == source_rows(server, db, "t", ("id",))


def test_with_refill_off_or_without_a_key_a_warning_and_a_metric_say_so(
        mariadb: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server, db = mariadb, "refill_off"
    server.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    _load(server, db)
    server.execute([f"CREATE TABLE {db}.n (v INT)", f"INSERT INTO {db}.n VALUES (1), (1)"])
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    _router(server, db, out, position, refill=False).run()
    server.execute([f"ALTER TABLE {db}.t ADD COLUMN z INT AUTO_INCREMENT UNIQUE",
                    f"ALTER TABLE {db}.n ADD COLUMN s INT AS (v + 1) STORED"])
    with caplog.at_level(logging.WARNING, logger="changestream"):
        off = _router(server, db, out, position, refill=False)
        off.run()
    assert off.status()["refills_skipped"] == 2 and off.status()["refills"] == 0
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "snapshot.refill is off" in said and f"{db}.t" in said
    rows = rebuilt(_records(out), "t", ("id",))
    assert all(r.get("z") is None for r in rows.values())  # as the warning says
    assert all(r["z"] for r in source_rows(server, db, "t", ("id",)).values())
    # With refills on, a table without a key is still not read again while running.
    server.execute(f"ALTER TABLE {db}.n ADD COLUMN s2 INT AS (v + 2) STORED")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="changestream"):
        on = _router(server, db, out, position)
        on.run()
    assert on.status()["refills_skipped"] == 1 and on.status()["refills"] == 0
    assert "no primary key" in " ".join(r.getMessage() for r in caplog.records)


def test_without_a_schema_history_the_statement_tells_which_ddl_fill_rows(
        mariadb: Any, tmp_path: Path) -> None:
    server, db = mariadb, "refill_text"
    server.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    _load(server, db)
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    _router(server, db, out, position, history="off").run()
    for step, ddl in enumerate(_ddl("mariadb")[:3]):
        server.execute(f"ALTER TABLE {db}.{ddl.removeprefix('ALTER TABLE ')}")
        _changes(server, db, step)
    first = _router(server, db, out, position, history="off")
    first.run()
    assert first.status()["refills"] == 3 and first.status()["schema_history"] is None
    _router(server, db, out, position, history="off").run()
    assert rebuilt(_records(out), "t", ("id",)) == source_rows(server, db, "t", ("id",))
