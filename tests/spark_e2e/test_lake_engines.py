"""Every engine reads every table equal, on each tested catalog.

A seeded random workload (inserts, updates, deletes and key moves on a keyed and a
composite-key table, a table whose only key is a UNIQUE one with NULLs in it, a keyless
table of duplicate rows; rows there before the router starts, taken by its snapshot; ADD
COLUMN, TRUNCATE and RENAME TABLE between phases) is landed live by the router, in batches
of a few dozen changes, into Iceberg tables in a Hadoop catalog, in a JDBC catalog kept
in a private PostgreSQL and in a Hive catalog (a private Hive Metastore, tests/metastore.py,
on that PostgreSQL). After each phase every mirror and changelog is read with Spark,
pyiceberg (its SqlCatalog and HiveCatalog for those two) and DuckDB (``SELECT *`` and
``count(*)``): each mirror equals the server's table, and each changelog is the same rows in
every engine. On the JDBC and Hive catalogs ``changestream maintain`` (another process)
compacts and expires the same tables while the router lands round after round, and the
router lands on the compacted tables after it. Batches of 25
changes cut the workload's bigger transactions in parts, so batches end inside them.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.transactions.filters import ChangeFilter
from tests.lake_readers import duckdb_count, duckdb_rows, metadata_file, pyiceberg_rows
from tests.servers import shadow_command

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SEED = int(os.environ.get("CHANGESTREAM_LAKE_SEED", "7"))
TABLES = {
    "items": "id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(8,2), t DATETIME(6)",
    "pairs": "a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)",
    "uniq": "id INT NULL, code VARCHAR(10) NULL, v INT, UNIQUE KEY (id, code)",
    "bag": "v INT, w VARCHAR(10)",
}


class Workload:
    """Random transactions on the tables of ``db`` (``bag`` renamed as it goes)."""

    def __init__(self, server: Any, db: str, seed: int):
        self.server, self.db, self.rng = server, db, random.Random(seed)
        self.bag = "bag"
        self.next_id = 1000

    def keys(self, sql: str) -> list[tuple[Any, ...]]:
        return self.server.execute(sql)

    def statement(self) -> str:
        rng, db = self.rng, f"`{self.db}`"
        self.next_id += 1
        n = self.next_id
        table = rng.choice(["items", "items", "pairs", "uniq", "bag"])
        op = rng.choices(["insert", "update", "delete", "move"], [4, 3, 2, 1])[0]
        if table == "items":
            ids = [r[0] for r in self.keys(f"SELECT id FROM {db}.items")]
            if op == "insert" or not ids:
                return (f"INSERT INTO {db}.items (id, v, n, t) VALUES ({n}, 'v{n}', "
                        f"{rng.randint(-9999, 9999) / 100}, '2024-0{rng.randint(1, 9)}-1"
                        f"{rng.randint(0, 9)} 10:00:0{rng.randint(0, 9)}.{n:06d}')")
            pick = rng.choice(ids)
            if op == "update":
                return f"UPDATE {db}.items SET v = 'u{n}', n = n + 1 WHERE id = {pick}"
            if op == "move":
                return f"UPDATE {db}.items SET id = {n} WHERE id = {pick}"
            return f"DELETE FROM {db}.items WHERE id = {pick}"
        if table == "pairs":
            keys = self.keys(f"SELECT a, b FROM {db}.pairs")
            if op == "insert" or not keys:
                return f"INSERT INTO {db}.pairs VALUES ({n % 7}, 'b{n}', {n})"
            a, b = rng.choice(keys)
            where = f"WHERE a = {a} AND b = '{b}'"
            if op == "update":
                return f"UPDATE {db}.pairs SET v = v + 1 {where}"
            if op == "move":
                return f"UPDATE {db}.pairs SET b = 'm{n}' {where}"
            return f"DELETE FROM {db}.pairs {where}"
        if table == "uniq":
            if op == "insert":
                ident = "NULL" if rng.random() < 0.3 else str(n % 50)
                code = "NULL" if rng.random() < 0.3 else f"'c{n % 3}'"
                return f"INSERT IGNORE INTO {db}.uniq VALUES ({ident}, {code}, {n})"
            if op in ("update", "move"):
                return f"UPDATE {db}.uniq SET v = v + 1 WHERE id IS NULL OR id % 3 = {n % 3}"
            return f"DELETE FROM {db}.uniq WHERE code IS NULL LIMIT 1"
        bag = f"{db}.`{self.bag}`"
        if op == "insert":
            return f"INSERT INTO {bag} VALUES ({n % 4}, 'dup'), ({n % 4}, 'dup')"
        if op in ("update", "move"):
            return f"UPDATE {bag} SET w = 'upd' WHERE v = {n % 4} LIMIT 1"
        return f"DELETE FROM {bag} WHERE v = {n % 4} LIMIT 1"

    def run(self, transactions: int) -> None:
        for _ in range(transactions):
            statements = ["BEGIN"] + [self.statement() for _ in range(self.rng.randint(1, 4))]
            self.server.execute([*statements, "COMMIT"])


def source_rows(server: Any, db: str, table: str) -> tuple[list[str], Counter[tuple]]:
    names = [r[0] for r in server.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
        f"'{db}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION")]
    rows = server.execute(f"SELECT {', '.join(f'`{n}`' for n in names)} FROM `{db}`.`{table}`")
    return names, Counter(tuple(r) for r in rows)


def picked(rows: list[dict[str, Any]], names: list[str]) -> Counter[tuple]:
    return Counter(tuple(r[n] for n in names) for r in rows)


class Lake:
    """Where a catalog's tables are and how each engine finds them."""

    def __init__(self, kind: str, tmp_path: Path, postgres: Any = None,
                 monkeypatch: Any = None, metastore: Any = None):
        self.kind, self.warehouse = kind, tmp_path / "warehouse"
        self.name = f"lake_{kind.replace('-', '_')}"
        self.options: Any = self.name
        self.env: dict[str, str] = {}
        # sink options besides the catalog's: a metastore is shared with the backfill test
        # (Hive 2.3 has no catalogs), so this job keeps its own control tables
        self.sink_options: dict[str, str] = {}
        if kind == "jdbc-postgresql":
            self.env = {"LAKE_PASSWORD": postgres.password}
            monkeypatch.setenv("LAKE_PASSWORD", postgres.password)
            self.options = {"name": self.name, "type": "jdbc", "uri": postgres.jdbc_uri,
                            "jdbc.user": postgres.user, "jdbc.password": "env:LAKE_PASSWORD"}
            self.sql_uri = postgres.sqlalchemy_uri
        elif kind == "hive":
            self.options = {"name": self.name, "type": "hive", "uri": metastore.uri}
            self.sink_options = {"control_namespace": "_changestream_lake"}

    def metadata(self, db: str, table: str) -> str:
        if self.kind == "hadoop":
            return str(metadata_file(self.warehouse / db / table))
        if self.kind == "hive":
            from pyiceberg.catalog.hive import HiveCatalog

            catalog: Any = HiveCatalog(self.name, uri=self.options["uri"])
        else:
            from pyiceberg.catalog.sql import SqlCatalog

            catalog = SqlCatalog(self.name, uri=self.sql_uri, warehouse=str(self.warehouse))
        return str(catalog.load_table(f"{db}.{table}").metadata_location)

    def sink_arguments(self) -> list[str]:
        extra = [a for k, v in self.sink_options.items() for a in ("--sink-option", f"{k}={v}")]
        if isinstance(self.options, str):
            return ["--sink-option", f"catalog={self.options}", *extra]
        return [a for k, v in self.options.items()
                for a in ("--sink-option", f"catalog.{k}={v}")] + extra


def check_every_engine(server: Any, spark: Any, lake: Lake, db: str,
                       tables: list[str]) -> None:
    for table in tables:
        names, expected = source_rows(server, db, table)
        location = lake.metadata(db, table)
        spark.sql(f"REFRESH TABLE {lake.name}.`{db}`.`{table}`")
        mirror = [r.asDict() for r in spark.table(f"{lake.name}.`{db}`.`{table}`").collect()]
        got = picked(mirror, names)
        assert got == expected, f"spark: {table} extra {got - expected} missing {expected - got}"
        assert picked(pyiceberg_rows(location), names) == expected, f"pyiceberg: {table}"
        assert picked(duckdb_rows(location), names) == expected, f"duckdb: {table}"
        assert duckdb_count(location) == sum(expected.values()), f"duckdb count: {table}"
        changelog = lake.metadata(db, f"{table}__changelog")
        columns = ["_op", "_transaction_id", "_seq", *names]
        # As the mirror: Spark's cached table could be behind the catalog's, where the
        # other readers look (a CI run once saw changes twice through pyiceberg only).
        spark.sql(f"REFRESH TABLE {lake.name}.`{db}`.`{table}__changelog`")
        spark_log = [r.asDict() for r in
                     spark.table(f"{lake.name}.`{db}`.`{table}__changelog`").collect()]
        want = picked(spark_log, columns)
        changes = [(r["_transaction_id"], r["_seq"]) for r in spark_log
                   if r["_op"] in ("insert", "update", "delete")]
        assert len(set(changes)) == len(changes), f"a change landed twice: {table}"
        assert picked(pyiceberg_rows(changelog), columns) == want, f"pyiceberg: {table} log"
        assert picked(duckdb_rows(changelog), columns) == want, f"duckdb: {table} log"
        assert duckdb_count(changelog) == len(spark_log), f"duckdb count: {table} log"


@pytest.mark.parametrize(("kind", "flavor"), [("hadoop", "mariadb"),
                                              ("jdbc-postgresql", "mysql"),
                                              ("hive", "mariadb11")])
def test_every_engine_reads_every_table_equal_on_each_catalog(
        spark: Any, tmp_path: Path, kind: str, flavor: str,
        request: pytest.FixtureRequest, monkeypatch: Any) -> None:
    pytest.importorskip("pyiceberg")
    pytest.importorskip("duckdb")
    server, db = request.getfixturevalue(flavor), f"lake_{kind.replace('-', '_')}"
    server.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    lake = Lake(kind, tmp_path, request.getfixturevalue("postgres")
                if kind == "jdbc-postgresql" else None, monkeypatch,
                request.getfixturevalue("hive_metastore") if kind == "hive" else None)
    work = Workload(server, db, SEED)
    server.execute([f"CREATE TABLE `{db}`.`{t}` ({columns})" for t, columns in TABLES.items()])
    work.run(30)  # rows the snapshot takes
    # The other catalogs run the same phases with fewer transactions and are read by every
    # engine after the first landing and at the end (the suite's time is bounded): what
    # differs between catalogs is where tables and commits live, not the landing.
    full = kind == "hadoop"

    def land() -> None:
        sink = make_sink("spark:iceberg", spark=spark, catalog=lake.options,
                         warehouse=lake.warehouse, **lake.sink_options)
        Router(RouterSettings(source=server.url, until="caught-up",
                              filter=ChangeFilter(include=[db]),
                              batch=BatchSettings(max_changes=25),
                              schema=HistorySettings("auto", shadow_command(server))),
               sink).run()

    tables = list(TABLES)
    land()
    check_every_engine(server, spark, lake, db, tables)
    work.run(40 if full else 20)
    land()
    if full:
        check_every_engine(server, spark, lake, db, tables)

    server.execute(f"ALTER TABLE `{db}`.items ADD COLUMN extra INT DEFAULT 5")
    work.run(30 if full else 15)
    server.execute(f"TRUNCATE TABLE `{db}`.pairs")
    work.run(30 if full else 15)
    land()
    if full:
        check_every_engine(server, spark, lake, db, tables)

    server.execute(f"RENAME TABLE `{db}`.bag TO `{db}`.bag2")
    work.bag = "bag2"
    tables = ["items", "pairs", "uniq", "bag2"]
    if kind == "hadoop":
        work.run(40)
        land()
    else:
        # maintain (another process) on the JDBC catalog while the router lands, round
        # after round (CHANGESTREAM_LAKE_CONCURRENT_MAINTAIN=0: between two of its runs)
        concurrent = os.environ.get("CHANGESTREAM_LAKE_CONCURRENT_MAINTAIN") != "0"
        work.run(10)
        if not concurrent:
            land()
        # Its output goes to files: a pipe read only at its end filled up once with the
        # retried compactions' errors, and maintain then waited on it for ever.
        out_path, err_path = tmp_path / "maintain.out", tmp_path / "maintain.err"
        with out_path.open("w") as out_file, err_path.open("w") as err_file:
            maintain = subprocess.Popen(
                [sys.executable, "-m", "changestream.cli", "maintain", "--sink",
                 "spark:iceberg", "--sink-option", f"warehouse={lake.warehouse}",
                 *lake.sink_arguments(), "--sink-option", "master=local[1]", "--sink-option",
                 "conf.spark.ui.enabled=false", "--expire-after", "0s", "--keep-snapshots",
                 "2", "--no-orphans"],
                stdout=out_file, stderr=err_file, text=True, env={**os.environ, **lake.env})
            while concurrent and maintain.poll() is None:
                work.run(10)
                land()
                # A pause between the rounds: a router that deletes from a mirror's files
                # without one leaves a compaction of them no moment to commit in (Iceberg
                # refuses it, maintain tries 8 times and gives up: docs/sinks.md).
                time.sleep(2)
            maintain.wait(timeout=600)
        out, err = out_path.read_text(), err_path.read_text()
        assert maintain.returncode == 0, "\n".join(
            line for line in err.splitlines() if not line.startswith(("\tat ", "\t..."))
        )[-3000:]
        assert f"{db}.items" in out, out
        work.run(15)
        land()
    check_every_engine(server, spark, lake, db, tables)
    assert not spark.catalog.tableExists(f"{lake.name}.`{db}`.bag")
