"""``changestream backfill``: archived binlog files of a real server (several files, one
gzip'd; on MySQL big files cut into ranges decoded apart) land into Iceberg changelog and
mirror tables on Spark; the mirrors equal the source, the changelogs hold every change
once; a backfill stopped half-way and run again gives the same tables; then the live router
on the same warehouse goes on from the next transaction, no gap and no overlap."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from changestream.delivery.plugins import make_sink
from changestream.model.errors import SinkError, SourceError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.backfill import BackfillSettings, plan_units, run_backfill
from changestream.sinks.spark.session import iceberg_conf
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command
from tests.workloads import archive_binlogs

from .compare import assert_mirror_equals_source
from .kill_workload import committed_changes, kill_workload
from .test_end_to_end import check_changelog, committed_counts, reference

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLES = {"items": "id", "nokey": None, "gone": "id"}


def _workload(server: Any, db: str) -> None:
    """Keyed and keyless tables, multi-row inserts, updates (one changing the key), deletes
    (one of two equal keyless rows), ADD COLUMN with a default, TRUNCATE, a rollback; the
    binary log rotated between the steps."""
    t, k, g = f"`{db}`.items", f"`{db}`.nokey", f"`{db}`.gone"
    steps: list[list[str]] = [[
        f"CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), "
        "made DATETIME(6), raw VARBINARY(8))",
        f"CREATE TABLE {k} (a INT, b VARCHAR(20))",
        f"CREATE TABLE {g} (id INT PRIMARY KEY, v INT)"]]
    for first in range(1, 301, 50):
        values = ", ".join(f"({i}, 'n{i}', {i}.25, '2024-01-{1 + i % 28:02d} 10:00:0{i % 10}"
                           f".{i:06d}', X'{i % 256:02x}00')" for i in range(first, first + 50))
        steps.append(["BEGIN", f"INSERT INTO {t} VALUES {values}", "COMMIT"])
    steps.append(["FLUSH BINARY LOGS"])
    steps.append([f"UPDATE {t} SET price = price * 2, name = CONCAT(name, '!') "
                  "WHERE id % 3 = 0",
                  "BEGIN", f"UPDATE {t} SET id = id + 1000 WHERE id = 7",
                  f"DELETE FROM {t} WHERE id % 5 = 0", "COMMIT",
                  "BEGIN", f"DELETE FROM {t} WHERE id < 100", "ROLLBACK"])
    steps.append([f"INSERT INTO {k} VALUES (1, 'one'), (1, 'one'), (2, NULL), (3, 'three')",
                  f"INSERT INTO {g} VALUES (1, 1), (2, 2), (3, 3)",
                  f"DELETE FROM {k} WHERE a = 1 LIMIT 1", f"UPDATE {k} SET b = 'two' "
                  "WHERE a = 2", "FLUSH BINARY LOGS"])
    steps.append([f"ALTER TABLE {t} ADD COLUMN note VARCHAR(20) DEFAULT 'n/a'",
                  f"INSERT INTO {t} (id, name, note) VALUES (2001, 'late', 'new')",
                  f"UPDATE {t} SET note = 'changed' WHERE id = 11",
                  f"TRUNCATE TABLE {g}", f"INSERT INTO {g} VALUES (9, 9)",
                  # the same column types under another name: a MINIMAL table map of the
                  # same bytes as before, named anew from here
                  f"ALTER TABLE {t} RENAME COLUMN note TO remark",
                  f"UPDATE {t} SET remark = 'renamed' WHERE id = 12",
                  f"INSERT INTO {k} VALUES (4, 'four'), (4, 'four')"])
    for group in steps:
        server.execute(["SET time_zone = '+00:00'", *group])


def _check_tables(server: Any, spark: Any, db: str, catalog: str, start: tuple[str, int],
                  tmp_path: Path) -> None:
    records = reference(server, db, start, tmp_path)
    counts = committed_counts(server, db, start)
    for table, key in TABLES.items():
        assert_mirror_equals_source(server, spark, db, table, f"{catalog}.{db}.{table}", key)
        rows = [r.asDict() for r in spark.table(f"{catalog}.{db}.{table}__changelog")
                .where("_op NOT IN ('truncate', 'drop')").collect()]
        check_changelog(table, rows, records, counts)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("server, metadata, kind", [
    ("mariadb", "FULL", "hadoop"), ("mysql", "FULL", "hive"),
    # MySQL's default: no column names in the files; the backfill learns them from the
    # files' own DDL (the ADD COLUMN lands in the middle of a unit: the names change there),
    # and the schema history is kept in the catalog
    ("mysql", "MINIMAL", "jdbc")], indirect=["server"])
def test_backfill_lands_archived_files_then_run_goes_on_live(
        server: Any, metadata: str, kind: str, fresh_database: str, spark: Any,
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """On each tested catalog: a Hadoop one, a JDBC one on the private PostgreSQL, a Hive
    Metastore on it."""
    db = fresh_database
    server.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
    try:
        server.execute("FLUSH BINARY LOGS")
        start = server.binlog_position()
        _workload(server, db)
        archive = archive_binlogs(server, start[0], tmp_path / "archive")
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
    assert len(archive) >= 3
    catalog = f"backfill_{server.flavor}_{metadata.lower()}"
    warehouse = tmp_path / "warehouse"
    options: Any = catalog
    if kind == "jdbc":
        postgres = request.getfixturevalue("postgres")
        options = {"name": catalog, "type": "jdbc", "uri": postgres.jdbc_uri,
                   "jdbc.user": postgres.user, "jdbc.password": postgres.password}
    elif kind == "hive":
        options = {"name": catalog, "type": "hive",
                   "uri": request.getfixturevalue("hive_metastore").uri}
    # MySQL's files are cut into ranges (GTID events carry transaction_length).
    split = 4096 if server.flavor == "mysql" else 0
    units = plan_units([str(tmp_path / "archive")], split)
    if server.flavor == "mysql":
        assert len(units) > len(archive), "the big MySQL files should be cut into ranges"
    sink = make_sink("spark:iceberg", spark=spark, catalog=options, warehouse=warehouse)
    sink.open()  # the catalog set up in the session, as `changestream backfill` does
    # Units are decoded by helper processes on a local master; the MariaDB case decodes
    # them on Spark's executors, as a cluster would.
    settings = BackfillSettings(split_bytes=split, change_filter=ChangeFilter([db]),
                                shadow_server=shadow_command(server),
                                decode_on="spark" if server.flavor == "mariadb" else "auto")
    if metadata == "MINIMAL":
        with pytest.raises(SourceError, match=r"do not log column names.*--schema-history on"):
            run_backfill(spark, catalog, str(warehouse), [str(tmp_path / "archive")],
                         replace(settings, schema_history="off"))

    # Stopped after two units (their changelog rows in, no mirror yet), then run again.
    seen = []

    def stop_after_two(manifest: Any, unit: Any) -> None:
        seen.append(unit.index)
        if len(seen) == 2:
            raise _Stop

    with pytest.raises(_Stop):
        run_backfill(spark, catalog, str(warehouse), [str(tmp_path / "archive")], settings,
                     stop_after_two)
    report = run_backfill(spark, catalog, str(warehouse), [str(tmp_path / "archive")],
                          settings)
    # Units the first run staged are not decoded again.
    assert report.units == len(units) and report.units_decoded < len(units)
    assert report.rows > 300 and report.tables
    _check_tables(server, spark, db, catalog, start, tmp_path)

    # The live router on the same warehouse goes on from the next transaction.
    server.execute([f"INSERT INTO `{db}`.items (id, name) VALUES (5000, 'live')",
                    f"UPDATE `{db}`.items SET name = 'live too' WHERE id = 11",
                    f"INSERT INTO `{db}`.nokey VALUES (4, 'four')"])
    live = make_sink("spark:iceberg", spark=spark, catalog=options, warehouse=warehouse)
    assert live.open() == report.position
    Router(RouterSettings(source=server.url, until="caught-up", filter=ChangeFilter([db])),
           live).run()
    _check_tables(server, spark, db, catalog, start, tmp_path)
    changelog = spark.table(f"{catalog}.{db}.items__changelog")
    assert changelog.where("id = 5000").count() == 1


def _backfill_process(folder: Path, warehouse: Path, db: str, catalog: str,
                      log: Path) -> subprocess.Popen[bytes]:
    """The backfill CLI, in a process group of its own (Spark's JVM with it)."""
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "changestream.cli", "backfill", "--sink", "spark:iceberg",
             "--sink-option", f"warehouse={warehouse}", "--sink-option", f"catalog={catalog}",
             "--sink-option", "master=local[2]",
             "--sink-option", "conf.spark.sql.shuffle.partitions=2",
             "--include", db, "--commit-rows", "300", str(folder)],
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _commits(warehouse: Path, db: str) -> int:
    """Commits to the keyed table's changelog (each writes a metadata file)."""
    folder = warehouse / db / "t__changelog" / "metadata"
    return sum(1 for _ in folder.glob("*.metadata.json")) if folder.exists() else 0


@pytest.mark.faults
def test_a_backfill_killed_again_and_again_lands_every_change_once(
        mariadb: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    rng = random.Random(20261125)
    db, catalog = "e2e_backfill_kill", "backfill_kill"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`",
                     "FLUSH BINARY LOGS"])
    start = mariadb.binlog_position()
    kill_workload(mariadb, db, rng)  # 300 transactions, ADD COLUMN halfway
    mariadb.execute(["FLUSH BINARY LOGS", f"UPDATE `{db}`.t SET v = 'later' WHERE id % 4 = 0",
                     f"DELETE FROM `{db}`.k WHERE n = 5", "FLUSH BINARY LOGS",
                     f"INSERT INTO `{db}`.k VALUES (999, 1, 'last')"])
    folder = tmp_path / "archive"
    archive_binlogs(mariadb, start[0], folder)
    warehouse, log = tmp_path / "warehouse", tmp_path / "backfill.log"

    kills, moments = 0, []
    for _attempt in range(8):
        began = time.monotonic()
        process = _backfill_process(folder, warehouse, db, catalog, log)
        if kills < 2:
            # Once this run has committed one or two more changelog commits, a random
            # moment later: kill it and its JVM at once.
            wanted = _commits(warehouse, db) + rng.randint(1, 2)
            deadline = time.monotonic() + 180
            while process.poll() is None and time.monotonic() < deadline and \
                    _commits(warehouse, db) < wanted:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 1.5))
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                kills += 1
                moments.append((round(time.monotonic() - began, 1), _commits(warehouse, db)))
                continue
        assert process.wait(600) == 0, log.read_text()[-3000:]
        break
    else:
        pytest.fail("the backfill did not finish")
    assert kills == 2, f"the backfill finished before it was killed twice: {moments}"
    assert "Traceback" not in log.read_text()
    print(f"killed at (seconds into the run, changelog commits so far): {moments}")

    spark = request.getfixturevalue("spark")
    for key, value in iceberg_conf(catalog, warehouse).items():
        spark.conf.set(key, value)
    assert_mirror_equals_source(mariadb, spark, db, "t", f"{catalog}.{db}.t", "id")
    assert_mirror_equals_source(mariadb, spark, db, "k", f"{catalog}.{db}.k", None)
    expected = committed_changes(mariadb, db, start)
    for table in ("t", "k"):
        rows = spark.sql(f"SELECT _transaction_id AS id, _seq AS seq FROM "
                         f"{catalog}.{db}.{table}__changelog").collect()
        assert len({(r["id"], r["seq"]) for r in rows}) == len(rows), f"{table}: doubled"
        assert Counter(r["id"] for r in rows) == Counter(
            {tid: c[table] for tid, c in expected.items() if c[table]}), table


def test_backfill_refuses_bad_input_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "mysql-bin.000001"
    bad.write_bytes(b"\xfebin" + b"\x00" * 10)
    cases = [
        (["--sink", "jsonl:/tmp/x.jsonl", str(bad)], 2, "backfill lands into a spark:iceberg"),
        (["--sink", "spark:iceberg", "--sink-option", f"warehouse={tmp_path}", "--split-size",
          "lots", str(bad)], 2, "--split-size: 'lots' is not a size"),
    ]
    for args, code, message in cases:
        done = subprocess.run([sys.executable, "-m", "changestream.cli", "backfill", *args],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == code, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr


def test_an_xa_transaction_across_units_is_refused() -> None:
    from changestream.sinks.backfill.decoding import UnitManifest
    from changestream.sinks.backfill.driver import _follow_xa
    from changestream.sinks.backfill.planning import BackfillUnit

    pending: dict[str, str] = {}
    _follow_xa(pending, UnitManifest(0, pending_xa={"'x1'": "bin.000001:400"}),
               BackfillUnit(0, "bin.000001"))
    _follow_xa(pending, UnitManifest(1, unmatched_xa=[("'x2'", "ROLLBACK", "bin.000002", 9)]),
               BackfillUnit(1, "bin.000002"))
    with pytest.raises(SinkError, match=r"XA transaction 'x1' was prepared at bin\.000001:400"):
        _follow_xa(pending, UnitManifest(2, unmatched_xa=[("'x1'", "COMMIT", "bin.000003",
                                                           77)]), BackfillUnit(2, "bin.000003"))
    assert Counter(pending) == Counter()
