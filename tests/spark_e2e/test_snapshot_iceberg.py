"""A snapshot into Iceberg: `changestream run --sink spark:iceberg` started on tables that
hold rows the binlog does not, killed with -9 (with its Spark) in the middle of the
snapshot while another session changes rows, restarted: the mirrors equal the source and
the changelogs hold each snapshot row and each change once.

Its router processes run before the test asks for the shared Spark session: one Spark at a
time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.sinks.spark.session import iceberg_conf
from tests.integration.test_snapshot import Churn, _load

from .compare import assert_mirror_equals_source

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CATALOG = "snap"


def _router(server: Any, db: str, warehouse: Path, log: Path,
            *extra: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
             "--sink", "spark:iceberg", "--sink-option", f"warehouse={warehouse}",
             "--sink-option", f"catalog={CATALOG}", "--sink-option", "master=local[2]",
             "--sink-option", "conf.spark.sql.shuffle.partitions=2",
             "--sink-option", "conf.spark.ui.enabled=false", "--include", db,
             "--batch-changes", "4000", "--batch-seconds", "0.5", *extra],
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1",
                 "CHANGESTREAM_SNAPSHOT_CHUNK_ROWS": "1000"})


def _batches(warehouse: Path) -> int:
    control = warehouse / "_changestream" / "batches" / "metadata"
    return max(0, sum(1 for _ in control.glob("*.metadata.json")) - 1) \
        if control.exists() else 0


def test_a_snapshot_killed_mid_way_lands_every_row_once(
        mariadb: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    db = "e2e_snapshot"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    _load(mariadb, db)
    for base in range(30_000, 70_000, 20_000):
        values = ", ".join(f"({i}, 'w{i}', 0.5)" for i in range(base, base + 20_000))
        mariadb.execute(f"INSERT INTO `{db}`.k1 VALUES {values}")
    # The keyless table read whole in pieces of one transaction (chunks of 1,000 rows),
    # its batches held by the sink until the last piece's.
    values = ", ".join(f"({i % 50}, 'm{i % 7}')" for i in range(5_000))
    mariadb.execute(f"INSERT INTO `{db}`.n VALUES {values}")
    warehouse, log = tmp_path / "warehouse", tmp_path / "router.log"
    with Churn(mariadb, db):
        process = _router(mariadb, db, warehouse, log)
        deadline = time.monotonic() + 180
        while process.poll() is None and _batches(warehouse) < 3 and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, log.read_text()[-3000:]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    landed_before_kill = _batches(warehouse)
    final = _router(mariadb, db, warehouse, log, "--until", "caught-up")
    assert final.wait(600) == 0, log.read_text()[-3000:]

    spark = request.getfixturevalue("spark")  # only now: the routers' Sparks are gone
    for key, value in iceberg_conf(CATALOG, warehouse).items():
        spark.conf.set(key, value)
    position = spark.sql(
        f"SELECT summary['changestream.position'] AS p FROM {CATALOG}._changestream.batches"
        ".snapshots ORDER BY committed_at DESC LIMIT 1").collect()[0]["p"]
    progress = orjson.loads(position)["snapshot"]
    assert progress["tables"] == [] and progress["chunks"] > landed_before_kill, progress
    assert_mirror_equals_source(mariadb, spark, db, "k1", f"{CATALOG}.{db}.k1", "id")
    assert_mirror_equals_source(mariadb, spark, db, "k2", f"{CATALOG}.{db}.k2", None)
    assert_mirror_equals_source(mariadb, spark, db, "u", f"{CATALOG}.{db}.u", None)
    assert_mirror_equals_source(mariadb, spark, db, "n", f"{CATALOG}.{db}.n", None)
    for table in ("k1", "k2", "u", "n"):
        twice = spark.sql(
            f"SELECT _transaction_id, _seq, count(*) AS n FROM {CATALOG}.{db}.{table}"
            "__changelog GROUP BY _transaction_id, _seq HAVING n > 1").collect()
        assert twice == [], f"{table}: changes landed twice: {twice[:5]}"
        ops = {r["_op"] for r in spark.sql(
            f"SELECT DISTINCT _op FROM {CATALOG}.{db}.{table}__changelog").collect()}
        assert "snapshot" in ops, (table, ops)
    ids = {r["i"] for r in spark.sql(
        f"SELECT DISTINCT split(_transaction_id, '-')[1] AS i FROM "
        f"{CATALOG}.{db}.k1__changelog WHERE _op = 'snapshot'").collect()}
    assert len(ids) == 1, f"one snapshot, resumed after the kill: {ids}"
