"""Two ``changestream run --standby`` landing one job into Iceberg (a local warehouse, one
position file): the writer and its Spark killed -9 while landing; the standby takes over,
starts its own Spark and lands the rest: the mirrors equal the source tables and the
changelogs hold every committed change exactly once.

The test Spark session is asked for only after the routers' Sparks are gone."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from changestream.sinks.spark.session import iceberg_conf

from .kill_workload import assert_landed_exactly_once, kill_workload, landed_batches

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.faults]

CATALOG = "standby"
LEASE = 3.0


def _router(server: Any, db: str, start: tuple[str, int], warehouse: Path,
            log: Path) -> subprocess.Popen[bytes]:
    """A standby router into Iceberg, in a process group of its own (its JVM with it)."""
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
             "--sink", "spark:iceberg", "--sink-option", f"warehouse={warehouse}",
             "--sink-option", f"catalog={CATALOG}", "--sink-option", "master=local[1]",
             "--sink-option", "conf.spark.sql.shuffle.partitions=1",
             "--sink-option", "conf.spark.ui.enabled=false",
             "--position-file", str(warehouse.parent / "position.json"),
             "--standby", "--lease-seconds", str(LEASE),
             "--start", f"{start[0]}:{start[1]}", "--until", "caught-up", "--include", db,
             "--batch-changes", "150", "--batch-seconds", "0.5"],
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _holder(lease: Path) -> tuple[int | None, int]:
    try:
        data = json.loads(lease.read_text())
    except (FileNotFoundError, ValueError):
        return None, 0
    return (None if data["released"] else int(data["owner"].split(":")[1]), data["epoch"])


def test_the_iceberg_writer_killed_9_the_standby_lands_the_rest_exactly_once(
        mariadb: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    db = "e2e_standby"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    start = mariadb.binlog_position()
    kill_workload(mariadb, db, random.Random(20261127))
    warehouse = tmp_path / "warehouse"
    lease = tmp_path / "position.json.lease"
    first = _router(mariadb, db, start, warehouse, tmp_path / "first.log")
    second = None
    try:
        deadline = time.monotonic() + 60
        while _holder(lease)[0] != first.pid:
            assert time.monotonic() < deadline, "the first router did not take the lease"
            time.sleep(0.05)
        second = _router(mariadb, db, start, warehouse, tmp_path / "second.log")
        deadline = time.monotonic() + 300
        while first.poll() is None and landed_batches(warehouse) < 2:
            assert time.monotonic() < deadline, "nothing landed"
            time.sleep(0.01)
        assert first.poll() is None, "the writer finished before it could be killed"
        killed = time.monotonic()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        landed_then = landed_batches(warehouse)
        while _holder(lease)[0] != second.pid:
            assert time.monotonic() < killed + LEASE + 5, "the standby did not take over"
            time.sleep(0.02)
        took = time.monotonic() - killed
        while landed_batches(warehouse) <= landed_then and second.poll() is None:
            time.sleep(0.05)
        landing = time.monotonic() - killed
        print(f"lease taken {took:.2f} s after kill -9 (after {landed_then} batches); "
              f"landing again {landing:.2f} s after it")
        assert took <= LEASE + 1.0
        code = second.wait(600)
        assert code == 0, (tmp_path / "second.log").read_text()[-3000:]
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    assert _holder(lease) == (None, 2)  # released at the clean stop

    spark = request.getfixturevalue("spark")  # only now: the routers' Sparks are gone
    for key, value in iceberg_conf(CATALOG, warehouse).items():
        spark.conf.set(key, value)
    assert_landed_exactly_once(mariadb, spark, db, start, CATALOG)
