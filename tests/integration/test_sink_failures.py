"""A failing sink: a batch that fails is retried; one that keeps failing stops the router with
a clear error, and the position does not move past it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.model.changes import Batch
from changestream.model.errors import SinkError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.callback import CallbackSink
from changestream.transactions.filters import ChangeFilter

pytestmark = pytest.mark.integration


def _settings(server: Any, db: str, start: tuple[str, int], position: Path) -> RouterSettings:
    return RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}", until="caught-up",
                          position_file=str(position), filter=ChangeFilter(include=[db]),
                          batch=BatchSettings(max_changes=2, retries=3, retry_backoff_seconds=0.01))


def test_a_failed_batch_is_retried_and_delivered_once(mariadb: Any, tmp_path: Path) -> None:
    db = "sink_retry"
    mariadb.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = mariadb.binlog_position()
    mariadb.execute([f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"] +
                    [f"INSERT INTO {db}.t VALUES ({i})" for i in range(1, 7)])
    attempts: list[int] = []
    delivered: list[int] = []

    def flaky(batch: Batch) -> None:
        attempts.append(batch.id)
        if attempts.count(batch.id) < 3:
            raise OSError("disk briefly unavailable")
        delivered.extend(c.after["id"] for c in batch.iter_changes() if c.op == "insert")

    router = Router(_settings(mariadb, db, start, tmp_path / "p.json"), CallbackSink(flaky))
    router.run()
    assert delivered == [1, 2, 3, 4, 5, 6]
    assert router.stats.delivery.batch_retries == 2 * router.stats.delivery.batches_delivered


def test_a_batch_that_keeps_failing_stops_the_router_without_moving_the_position(
        mariadb: Any, tmp_path: Path) -> None:
    db = "sink_broken"
    mariadb.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = mariadb.binlog_position()
    mariadb.execute([f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"] +
                    [f"INSERT INTO {db}.t VALUES ({i})" for i in range(1, 7)])
    position = tmp_path / "p.json"
    written: list[int] = []

    def breaks_on_third(batch: Batch) -> None:
        if batch.id == 3:
            raise OSError("warehouse is read-only")
        written.append(batch.id)

    router = Router(_settings(mariadb, db, start, position), CallbackSink(breaks_on_third))
    with pytest.raises(SinkError) as error:
        router.run()
    message = str(error.value)
    assert "batch 3" in message and "failed 4 times" in message
    assert "warehouse is read-only" in message and "not advanced" in message
    assert written == [1, 2]
    saved = orjson.loads(position.read_bytes())
    assert saved["batch_id"] == 2  # the position is the one after batch 2
    # The command line reports a sink that cannot work in one line with exit code 4.
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the sink wants a folder")
    result = subprocess.run([sys.executable, "-m", "changestream.cli", "run", "--source",
                             mariadb.url, "--start", f"{start[0]}:{start[1]}", "--until",
                             "caught-up", "--include", db, "--sink",
                             f"jsonl:{blocked / 'x.jsonl'}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 4, result.stderr
    assert result.stderr.startswith("changestream run: jsonl sink: cannot open")
    assert "Traceback" not in result.stderr
