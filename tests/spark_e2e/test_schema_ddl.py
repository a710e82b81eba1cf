"""The randomized DDL workload (tests/schema_workload.py) through the Router into Iceberg,
with the server logging MINIMAL row metadata (names from the schema history) or FULL: read
in chunks, the router stopping and restarting behind the DDL that ran meanwhile. Every
mirror equals its source table under its final name, as a multiset for keyless tables,
and no mirror is left for a table that no longer exists."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.transactions.filters import ChangeFilter
from tests.integration.test_schema_history import _chunks, _cli
from tests.schema_workload import DDL_KINDS, SchemaWorkload
from tests.servers import shadow_command

from .compare import assert_mirror_equals_source

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# Two cases keep the suite's time in bounds: MySQL with a position file, and MariaDB with
# only the warehouse. FULL metadata and the MariaDB/file case are held by
# tests/integration/test_schema_history.py and the other Spark tests.
@pytest.fixture(params=[("mysql", "MINIMAL", "file"), ("mariadb", "MINIMAL", "warehouse")],
                ids=lambda p: "-".join(p))
def source(request: pytest.FixtureRequest) -> tuple[Any, str, str]:
    """A server, the row metadata it logs during the test (FULL: the names are in the
    binlog; the mirrors still follow each DDL with the history the sink asks for) and where
    the position and the history are kept: a position file, or only the warehouse."""
    name, metadata, kept = request.param
    return request.getfixturevalue(name), metadata, kept


def _key(server: Any, db: str, table: str) -> str | None:
    rows = server.execute(
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = "
        f"'{db}' AND TABLE_NAME = '{table}' AND INDEX_NAME = 'PRIMARY'")
    return str(rows[0][0]) if len(rows) == 1 else None


def _print_changelog(spark: Any, changelog: str) -> None:
    """Every change the changelog of a mirror that differs holds, in binlog order (shown
    with the failure: which transactions, ops and positions its rows came from)."""
    if not spark.catalog.tableExists(changelog):
        return
    rows = spark.sql(f"SELECT * FROM {changelog}").collect()
    print(f"{changelog}: {len(rows)} changes")
    for row in sorted((r.asDict() for r in rows),
                      key=lambda r: (r["_binlog_file"] or "", r["_binlog_pos"] or 0,
                                     r["_seq"] or 0)):
        print({k: v for k, v in row.items() if k not in ("_commit_ts", "_commit_ts_day")})


def test_mirrors_follow_every_ddl_of_the_workload(source: tuple[Any, str, str], spark: Any,
                                                  tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    server, metadata, kept = source
    # Shown with a failure: each run's start and stop, each batch landed and the position
    # each table held when the sink first looked.
    caplog.set_level(logging.INFO, logger="changestream")
    caplog.set_level(logging.DEBUG, logger="changestream.sinks.spark")
    prefix = "s_"
    # A session keeps a catalog's folder: one catalog per case.
    catalog = f"ddl_{server.flavor}_{metadata.lower()}_{kept}"
    origins = []
    server.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
    try:
        start = server.binlog_position()
        workload = SchemaWorkload(server.execute, prefix, 7, server.flavor)
        position = tmp_path / "position.json"
        sink = make_sink("spark:iceberg", warehouse=str(tmp_path / "warehouse"), spark=spark,
                         catalog=catalog)
        for chunk in _chunks(workload):
            chunk()
            router = Router(RouterSettings(
                source=server.url, start=f"{start[0]}:{start[1]}", until="caught-up",
                filter=ChangeFilter([f"{prefix}a", f"{prefix}b"]),
                position_file=str(position) if kept == "file" else None,
                batch=BatchSettings(max_changes=200),
                schema=HistorySettings("auto", shadow_command(server))), sink)
            router.run()
            origins.append((router.status()["schema_history"] or {}).get("origin"))
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
    assert workload.kinds_run == set(DDL_KINDS), set(DDL_KINDS) - workload.kinds_run
    # Every restart continued the history stored with the position (file or warehouse).
    assert origins[0] == "seed" and set(origins[1:]) == {"stored"}, origins
    if kept == "warehouse":
        assert not position.exists()
        states = spark.sql(f"SELECT digest FROM {catalog}._changestream.schema_states") \
            .collect()
        committed = spark.sql(
            f"SELECT summary['changestream.position'] AS p FROM "
            f"{catalog}._changestream.batches.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0]["p"]
        assert [r["digest"] for r in states] == [json.loads(committed)["schema_history"]]
        sink_options = ["--sink", "spark:iceberg", "--sink-option",
                        f"warehouse={tmp_path / 'warehouse'}", "--sink-option",
                        f"catalog={catalog}"]
        shown = _cli("schema", "show", *sink_options, "--format", "json")
        assert shown.returncode == 0, shown.stderr
        tables = orjson.loads(shown.stdout)["tables"]
        known = {(db, t) for db in tables for t in tables[db]}
        assert set(workload.tables()) <= known
        reseeded = _cli("schema", "reseed", *sink_options, "--source", server.url,
                        "--include", f"{prefix}a", "--include", f"{prefix}b",
                        "--shadow-server", shadow_command(server) or "")
        assert reseeded.returncode == 0, reseeded.stderr
        shown_again = _cli("schema", "show", *sink_options, "--format", "json")
        assert orjson.loads(shown_again.stdout)["tables"] == tables

    compared = 0
    for db, table in workload.tables():
        mirror = f"{catalog}.{db}.{table}"
        rows = server.execute(f"SELECT COUNT(*) FROM `{db}`.`{table}`")[0][0]
        if not spark.catalog.tableExists(mirror):
            assert rows == 0, f"{db}.{table} has {rows} rows and no mirror"
            continue
        try:
            assert_mirror_equals_source(server, spark, db, table, mirror,
                                        _key(server, db, table))
        except AssertionError:
            _print_changelog(spark, f"{mirror}__changelog")
            raise
        compared += 1
    assert compared >= 4
    source_tables = set(workload.tables())
    for db in (f"{prefix}a", f"{prefix}b"):
        landed = {r["tableName"] for r in spark.sql(
            f"SHOW TABLES IN {catalog}.{db}").collect()} if spark.catalog.databaseExists(
            f"{catalog}.{db}") else set()
        mirrors = {(db, t) for t in landed if not t.endswith("__changelog")}
        assert mirrors <= source_tables, f"mirrors of dropped tables: {mirrors - source_tables}"
