"""A table the filter includes may stay quiet while others are busy or while the server
writes nothing at all: the saved position still follows the stream (transactions the filter
leaves out, a new binlog file, the heartbeat statement), so a restart after the binlogs
holding the quiet table's last change were purged resumes there, without a snapshot, and
the position file is written at most about once a batch interval while nothing is
delivered. On MariaDB 10.11 and MySQL 9.7, live, with and without decode workers."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.position_store import PositionStore
from changestream.runtime.heartbeat import HeartbeatSettings
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.snapshot.settings import SnapshotSettings
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

pytestmark = [pytest.mark.integration,
              pytest.mark.parametrize("server", ["mariadb", "mysql"], indirect=True)]

BATCH_SECONDS = 0.3


def _databases(server: Any, name: str) -> tuple[str, str]:
    busy, quiet = f"{name[:56]}_busy", f"{name[:56]}_quiet"
    server.execute([f"DROP DATABASE IF EXISTS `{busy}`", f"DROP DATABASE IF EXISTS `{quiet}`",
                    f"CREATE DATABASE `{busy}`", f"CREATE DATABASE `{quiet}`",
                    f"CREATE TABLE `{busy}`.t (id INT PRIMARY KEY)",
                    f"CREATE TABLE `{quiet}`.t (id INT PRIMARY KEY)"])
    return busy, quiet


def _settings(server: Any, start: tuple[str, int] | None, position_file: Path, quiet: str,
              workers: int, snapshot: str | None = None) -> RouterSettings:
    return RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}" if start else "",
                          position_file=str(position_file), heartbeat_seconds=1.0,
                          filter=ChangeFilter(include=[quiet]), decode_workers=workers,
                          decode_workers_wait=True,
                          batch=BatchSettings(max_seconds=BATCH_SECONDS),
                          schema=HistorySettings("auto", shadow_command(server)),
                          snapshot=SnapshotSettings(snapshot))


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _quiet_ids(out: Path, quiet: str) -> list[tuple[str, int]]:
    if not out.exists():
        return []
    return [(r["op"], (r["after"] or r["before"])["id"])
            for r in map(orjson.loads, out.read_bytes().splitlines())
            if r["database"] == quiet and r["op"] != "ddl"]


def _saved(position_file: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(position_file.read_text()))
    except (FileNotFoundError, ValueError):
        return {}


def _binlogs(server: Any) -> list[str]:
    return [row[0] for row in server.execute("SHOW BINARY LOGS")]


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])
def test_a_quiet_table_resumes_without_a_snapshot_after_its_binlogs_are_purged(
        server: Any, fresh_database: str, tmp_path: Path, workers: int) -> None:
    busy, quiet = _databases(server, fresh_database)
    start = server.binlog_position()
    server.execute(f"INSERT INTO `{quiet}`.t VALUES (1)")
    out, position_file = tmp_path / "out.jsonl", tmp_path / "position.json"
    first = Router(_settings(server, start, position_file, quiet, workers), JsonLinesSink(out))
    first.start()
    _wait_for(lambda: _quiet_ids(out, quiet) == [("insert", 1)], "the quiet table's row")
    # The busy table's transactions fill binlogs; the last new binlog has nothing at all.
    next_id = 0
    for _ in range(3):
        for _ in range(40):
            next_id += 1
            server.execute(f"INSERT INTO `{busy}`.t VALUES ({next_id})")
        server.execute("FLUSH BINARY LOGS")
    head = server.binlog_position()
    with contextlib.suppress(AssertionError):  # the assertions below say what is wrong
        _wait_for(lambda: _saved(position_file).get("file") == head[0],
                  f"the saved position to reach {head[0]}", timeout=10.0)
    first.stop()
    assert first.wait(60)
    server.execute(f"PURGE BINARY LOGS TO '{head[0]}'")
    saved, binlogs = _saved(position_file), _binlogs(server)

    # ``when-needed`` would snapshot the quiet table again had its position been purged.
    second = Router(_settings(server, None, position_file, quiet, workers, "when-needed"),
                    JsonLinesSink(out))
    second.start()
    server.execute(f"INSERT INTO `{quiet}`.t VALUES (2)")
    _wait_for(lambda: ("insert", 2) in _quiet_ids(out, quiet) or second.join(0),
              "the quiet table's next row")
    second.stop()
    assert second.wait(60)
    assert _quiet_ids(out, quiet) == [("insert", 1), ("insert", 2)]
    assert saved["file"] in binlogs, (saved, binlogs)


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])
def test_filtered_transactions_move_the_saved_position_at_most_once_a_batch_interval(
        server: Any, fresh_database: str, tmp_path: Path, workers: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    busy, quiet = _databases(server, fresh_database)
    saves: list[float] = []
    save = PositionStore.save

    def counted(store: PositionStore, *args: Any, **kwargs: Any) -> None:
        saves.append(time.monotonic())
        save(store, *args, **kwargs)

    monkeypatch.setattr(PositionStore, "save", counted)
    position_file = tmp_path / "position.json"
    router = Router(_settings(server, server.binlog_position(), position_file, quiet,
                              workers), JsonLinesSink(tmp_path / "out.jsonl"))
    router.start()
    try:
        _wait_for(lambda: router.status()["connected"] and
                  router.status()["seconds_behind"] == 0, "the router to catch up")
        time.sleep(2 * BATCH_SECONDS)
        began, before = time.monotonic(), len(saves)
        for i in range(150):  # one transaction each, read as they come (caught up)
            server.execute(f"INSERT INTO `{busy}`.t VALUES ({i})")
        took = time.monotonic() - began
        head = server.binlog_position()
        _wait_for(lambda: (_saved(position_file).get("file"),
                           _saved(position_file).get("pos")) == head,
                  f"the saved position to reach {head}", timeout=10.0)
        written = len(saves) - before
        assert 1 <= written <= took / BATCH_SECONDS + 3, (written, took)
    finally:
        router.stop()
        assert router.wait(60)


def test_the_heartbeat_statement_moves_the_position_of_a_server_that_writes_nothing(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    busy, quiet = _databases(server, fresh_database)
    server.execute(f"CREATE TABLE `{busy}`.heartbeat (id INT PRIMARY KEY, ts DATETIME(6))")
    statement = (f"INSERT INTO `{busy}`.heartbeat (id, ts) VALUES (1, NOW(6)) "
                 "ON DUPLICATE KEY UPDATE ts = NOW(6)")
    start = server.binlog_position()
    server.execute(f"INSERT INTO `{quiet}`.t VALUES (1)")
    out, position_file = tmp_path / "out.jsonl", tmp_path / "position.json"
    settings = replace(_settings(server, start, position_file, quiet, 0),
                       heartbeat=HeartbeatSettings(statement, 0.2))
    router = Router(settings, JsonLinesSink(out))
    router.start()
    try:
        _wait_for(lambda: _quiet_ids(out, quiet) == [("insert", 1)], "the quiet table's row")
        _wait_for(lambda: "pos" in _saved(position_file), "a saved position")
        first = _saved(position_file)
        # Nothing else writes: only the heartbeat statement's transactions move it on.
        _wait_for(lambda: _saved(position_file)["pos"] > first["pos"] or
                  _saved(position_file)["file"] != first["file"],
                  "the saved position to move", timeout=10.0)
        assert server.execute(f"SELECT COUNT(*) FROM `{busy}`.heartbeat")[0][0] == 1
    finally:
        router.stop()
        assert router.wait(60)
    assert _quiet_ids(out, quiet) == [("insert", 1)]


def test_a_failing_heartbeat_statement_is_a_warning_and_the_router_goes_on(
        server: Any, fresh_database: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    _, quiet = _databases(server, fresh_database)
    statement = f"INSERT INTO `{quiet}`.no_such_table VALUES (1)"
    out = tmp_path / "out.jsonl"
    settings = replace(_settings(server, server.binlog_position(),
                                 tmp_path / "position.json", quiet, 0),
                       heartbeat=HeartbeatSettings(statement, 0.1))
    router = Router(settings, JsonLinesSink(out))
    with caplog.at_level("WARNING", logger="changestream"):
        router.start()
        try:
            _wait_for(lambda: any("heartbeat statement" in r.getMessage()
                                  for r in caplog.records), "the warning")
            server.execute(f"INSERT INTO `{quiet}`.t VALUES (1)")
            _wait_for(lambda: _quiet_ids(out, quiet) == [("insert", 1)] or
                      router.join(0), "the quiet table's row")
            time.sleep(0.5)  # several more failures
        finally:
            router.stop()
            assert router.wait(60)
    warnings = [r.getMessage() for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert statement in warnings[0] and "no_such_table" in warnings[0].split(": ", 1)[1]
    assert _quiet_ids(out, quiet) == [("insert", 1)]
