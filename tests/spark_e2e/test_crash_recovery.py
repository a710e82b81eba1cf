"""kill -9 the router process (and its Spark) while it lands into Iceberg, at random
moments, then restart it until it has caught up: the mirrors equal the source tables and
the changelogs hold every committed change exactly once.

This file runs before test_end_to_end.py (alphabetical order) and asks for the test
Spark session only after its router processes are gone: one Spark at a time.
"""

from __future__ import annotations

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

CATALOG = "crash"
KILLS = 2


def _router(server: Any, db: str, start: tuple[str, int], warehouse: Path,
            log: Path) -> subprocess.Popen[bytes]:
    """The router CLI into Iceberg, in a process group of its own (Spark's JVM with it)."""
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
             "--sink", "spark:iceberg", "--sink-option", f"warehouse={warehouse}",
             "--sink-option", f"catalog={CATALOG}", "--sink-option", "master=local[2]",
             "--sink-option", "conf.spark.sql.shuffle.partitions=2",
             "--sink-option", "conf.spark.ui.enabled=false",
             "--position-file", str(warehouse.parent / "position.json"),
             "--start", f"{start[0]}:{start[1]}", "--until", "caught-up", "--include", db,
             "--batch-changes", "150", "--batch-seconds", "0.5"],
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_kill_9_while_landing_then_restart_lands_everything_exactly_once(
        mariadb: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    rng = random.Random(20261121)
    db = "e2e_crash"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    start = mariadb.binlog_position()
    kill_workload(mariadb, db, rng)
    warehouse, log = tmp_path / "warehouse", tmp_path / "router.log"

    kills, moments = 0, []
    for _attempt in range(KILLS + 5):
        began = time.monotonic()
        process = _router(mariadb, db, start, warehouse, log)
        if kills < KILLS:
            # Once it has landed one or two batches in this run, let it go on a random
            # moment (up to about a batch more), then kill it and its JVM at once.
            wanted = landed_batches(warehouse) + rng.randint(1, 2)
            deadline = time.monotonic() + 120
            while process.poll() is None and time.monotonic() < deadline and \
                    landed_batches(warehouse) < wanted:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 1.0))
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                kills += 1
                moments.append((round(time.monotonic() - began, 1), landed_batches(warehouse)))
                continue
        assert process.wait(600) == 0, log.read_text()[-3000:]
        break
    else:
        pytest.fail("the router did not finish")
    assert kills == KILLS, f"the router finished before it was killed {KILLS} times: {moments}"
    print(f"killed at (seconds into the run, batches landed so far): {moments}")

    spark = request.getfixturevalue("spark")  # only now: the routers' Sparks are gone
    for key, value in iceberg_conf(CATALOG, warehouse).items():
        spark.conf.set(key, value)
    assert_landed_exactly_once(mariadb, spark, db, start, CATALOG)
