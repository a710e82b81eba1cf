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
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from changestream.cli.scan import scan_transactions
from changestream.sinks.spark.session import iceberg_conf
from changestream.sources.files import FileSource

from .compare import assert_mirror_equals_source

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.faults]

CATALOG = "crash"
KILLS = 2


def _workload(server: Any, db: str, rng: random.Random) -> None:
    """300 transactions (about 3,000 changes) on a keyed and a keyless table: inserts of 1
    to 20 rows, updates, deletes, rollbacks, and an ADD COLUMN halfway."""
    t, k = f"`{db}`.t", f"`{db}`.k"
    statements = [
        "SET time_zone = '+00:00'",
        f"CREATE TABLE {t} (id INT PRIMARY KEY, tx INT, v VARCHAR(40), amount DECIMAL(10,2),"
        " at DATETIME(6), d DATE, ts TIMESTAMP(3) NULL)",
        f"CREATE TABLE {k} (tx INT, n INT, note VARCHAR(20))",
    ]
    next_id = 1
    for tx in range(300):
        if tx == 150:
            statements.append(f"ALTER TABLE {t} ADD COLUMN extra INT")
        statements.append("BEGIN")
        size = rng.choice((1, 2, 5, 10, 20))
        rows = [f"({i}, {tx}, 'row {i}', {i * 1.25:.2f}, '2024-05-{1 + i % 28:02d} "
                f"10:00:{i % 60:02d}.{i:06d}', '{1000 + i}-01-01', "
                f"FROM_UNIXTIME({1_700_000_000 + i}.5))" for i in range(next_id, next_id + size)]
        next_id += size
        statements.append(f"INSERT INTO {t} (id, tx, v, amount, at, d, ts) VALUES "
                          + ",".join(rows))
        statements.append(f"INSERT INTO {k} VALUES ({tx}, {size}, 'tx {tx}'), "
                          f"({tx}, {size}, 'tx {tx}')")
        if tx % 7 == 3:
            statements.append(f"UPDATE {t} SET v = 'updated', amount = amount + 1 "
                              f"WHERE tx = {tx}")
        if tx % 11 == 5:
            statements.append(f"DELETE FROM {t} WHERE tx = {tx - 1}")
            statements.append(f"DELETE FROM {k} WHERE tx = {tx - 1}")
        if tx % 13 == 6:
            statements.append(f"UPDATE {k} SET note = 'changed' WHERE tx = {tx - 2}")
        if tx > 150 and tx % 5 == 0:
            statements.append(f"UPDATE {t} SET extra = tx WHERE tx = {tx}")
        statements.append("ROLLBACK" if tx % 50 == 25 else "COMMIT")
    server.execute(statements)


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


def _batches(warehouse: Path) -> int:
    """Batches the sink has committed: commits to its control table after the one that
    created it (each Iceberg commit writes a new metadata file)."""
    control = warehouse / "_changestream" / "batches" / "metadata"
    return max(0, sum(1 for _ in control.glob("*.metadata.json")) - 1) \
        if control.exists() else 0


def _committed(server: Any, db: str, start: tuple[str, int]) -> dict[str, Counter]:
    """Rows changed per committed transaction and table of ``db``, from the binlog files."""
    out: dict[str, Counter] = {}
    for t in scan_transactions(FileSource(server.binlog_files(), start_file=start[0],
                                          start_pos=start[1])):
        for name, c in t.tables.items():
            if t.status == "committed" and name.startswith(f"{db}.") and sum(c.values()):
                out.setdefault(t.gtid, Counter())[name.split(".", 1)[1]] += sum(c.values())
    return out


def test_kill_9_while_landing_then_restart_lands_everything_exactly_once(
        mariadb: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    rng = random.Random(20261121)
    db = "e2e_crash"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    start = mariadb.binlog_position()
    _workload(mariadb, db, rng)
    warehouse, log = tmp_path / "warehouse", tmp_path / "router.log"

    kills, moments = 0, []
    for _attempt in range(KILLS + 5):
        began = time.monotonic()
        process = _router(mariadb, db, start, warehouse, log)
        if kills < KILLS:
            # Once it has landed one or two batches in this run, let it go on a random
            # moment (up to about a batch more), then kill it and its JVM at once.
            wanted = _batches(warehouse) + rng.randint(1, 2)
            deadline = time.monotonic() + 120
            while process.poll() is None and time.monotonic() < deadline and \
                    _batches(warehouse) < wanted:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 1.0))
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                kills += 1
                moments.append((round(time.monotonic() - began, 1), _batches(warehouse)))
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
    assert_mirror_equals_source(mariadb, spark, db, "t", f"{CATALOG}.{db}.t", "id")
    assert_mirror_equals_source(mariadb, spark, db, "k", f"{CATALOG}.{db}.k", None)

    expected = _committed(mariadb, db, start)
    seqs: dict[str, list[int]] = defaultdict(list)
    for table in ("t", "k"):
        rows = spark.sql(f"SELECT _transaction_id AS id, _seq AS seq FROM "
                         f"{CATALOG}.{db}.{table}__changelog").collect()
        landed = Counter(r["id"] for r in rows)
        assert landed == Counter({tid: c[table] for tid, c in expected.items()
                                  if c[table]}), f"{table}: changes per transaction differ"
        for r in rows:
            seqs[r["id"]].append(r["seq"])
    for tid, landed_seqs in seqs.items():  # every change once: seq 0..size-1 over both tables
        assert sorted(landed_seqs) == list(range(sum(expected[tid].values()))), tid
