"""Decode workers on servers that do not log column names (``binlog_row_metadata`` MINIMAL,
MySQL's default, or NO_LOG, MariaDB's): the router resolves each TABLE_MAP's schema in
binlog order and hands it to the workers with the segment, so the workers take those
transactions and write the records the router writes alone, across DDL that renames and
adds columns."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.model.errors import SourceError
from changestream.parallel.decode_workers import WorkerSettings, _Worker
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.segments import compare_arrow_paths, compare_worker_paths, worker_segments
from tests.servers import shadow_command

pytestmark = pytest.mark.integration


def _tables(server: Any, db: str) -> tuple[str, int]:
    server.execute([
        f"CREATE TABLE `{db}`.t (id INT UNSIGNED PRIMARY KEY, v VARCHAR(20), "
        "kind ENUM('a','b','c'), amount DECIMAL(10,2), at DATETIME(6), "
        "latin VARCHAR(10) CHARACTER SET latin1)",
        f"CREATE TABLE `{db}`.skipped (id INT PRIMARY KEY, v INT)"])
    return server.binlog_position()


def _workload(server: Any, db: str, metadata: str) -> None:
    server.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
    try:
        for n in range(40):
            server.execute([
                "BEGIN",
                *(f"INSERT INTO `{db}`.t VALUES ({4294967295 - n * 10 - i}, 'row {n} ✓', "
                  f"'{'abc'[i % 3]}', {n}.{i}5, '2024-01-02 03:04:05.{n:02d}{i}', 'ç{i}'"
                  f"{', DEFAULT' if n > 30 else ''})"
                  for i in range(5)),
                f"INSERT INTO `{db}`.skipped VALUES ({n}, {n})",
                "COMMIT"])
            if n == 15:  # same types, new name: the same TABLE_MAP bytes stand for it
                server.execute(f"ALTER TABLE `{db}`.t RENAME COLUMN v TO w")
            if n == 30:
                server.execute(f"ALTER TABLE `{db}`.t ADD COLUMN extra INT DEFAULT 7")
        server.execute(f"UPDATE `{db}`.t SET kind = 'c', amount = amount + 1 WHERE id % 3 = 0")
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")


def _records(path: Path) -> list[dict[str, Any]]:
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for record in records:
        del record["ts"]
    return records


@pytest.mark.parametrize("metadata", ["MINIMAL", "NO_LOG"])
def test_workers_take_tables_whose_names_the_router_resolves(
        server: Any, fresh_database: str, tmp_path: Path, metadata: str) -> None:
    if metadata == "NO_LOG" and server.flavor != "mariadb":
        pytest.skip("NO_LOG is MariaDB's")
    db = fresh_database
    start = _tables(server, db)

    def run(workers: int, folder: Path) -> Router:
        router = Router(RouterSettings(
            source=server.url, start=f"{start[0]}:{start[1]}", until="caught-up",
            filter=ChangeFilter(include=[f"{db}.t"]), decode_workers=workers,
            decode_workers_wait=True, position_file=str(folder / "position.json"),
            schema=HistorySettings("on", shadow_command(server))),
            JsonLinesSink(folder / "out.jsonl"))
        router.run()
        return router

    seed = tmp_path / "seed"
    seed.mkdir()
    server.execute(f"INSERT INTO `{db}`.t (id) VALUES (1)")
    run(0, seed)  # a position and the schema history (from the server) saved before the workload
    _workload(server, db, metadata)
    outputs = []
    for workers in (0, 2):
        folder = tmp_path / f"workers-{workers}"
        shutil.copytree(seed, folder)
        (folder / "out.jsonl").write_bytes(b"")
        router = run(workers, folder)
        out = folder / "out.jsonl"
        assert (router.stats.reading.worker_segments > 0) == (workers > 0)
        outputs.append(_records(out))
    assert outputs[0] == outputs[1]
    rows = [r for r in outputs[1] if r["op"] != "ddl"]
    assert {r["table"] for r in rows} == {"t"}
    inserts = [r["after"] for r in rows if r["op"] == "insert"]
    assert len(inserts) == 200
    assert "v" in inserts[0] and "w" in inserts[-1] and "v" not in inserts[-1]
    assert inserts[0]["id"] == 4294967295 and inserts[0]["latin"] == "ç0"
    assert inserts[-1]["extra"] == 7 and inserts[0]["kind"] == "a"
    assert all(r["after"]["kind"] == "c" for r in rows if r["op"] == "update")


def test_a_worker_refuses_a_table_map_whose_schema_did_not_come(
        mysql: Any, tmp_path: Path) -> None:
    """A segment without the router's schemas is an error, never rows under names
    ``@1``, ``@2``."""
    db = "worker_no_schema"
    mysql.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = _tables(mysql, db)
    _workload(mysql, db, "MINIMAL")
    files = mysql.binlog_files()
    files = files[[f.name for f in files].index(start[0]):]
    segments = [s for s in worker_segments(files, start[1]) if s.schemas]
    assert segments, "no segment carries schemas"
    settings = WorkerSettings(change_filter=ChangeFilter(include=[db]), include_sql=False,
                              record_format="changestream", verify_checksums=True,
                              max_buffered_changes=100_000, spill_dir=None)
    _Worker(settings).assemble(segments[0])  # with its schemas (here positional): decoded
    # The compiled walks (records, the Spark sink's Arrow frames) take the preset schemas
    # and write what the general path writes.
    assert compare_worker_paths(segments, ChangeFilter(include=[db])) in (len(segments), None)
    assert compare_arrow_paths(segments, ChangeFilter(include=[db])) in (len(segments), None)
    segments[0].schemas = None
    with pytest.raises(SourceError, match="did not come with the segment"):
        _Worker(settings).assemble(segments[0])
