"""Iceberg upkeep (sinks/spark/iceberg/maintenance.py): many small batches compacted, snapshots
expired without losing the position a restart needs, orphan files removed, and the sink
landing on exactly once afterwards; the ``changestream maintain`` command's errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from changestream.model.errors import SinkError
from changestream.sinks.spark import SparkSink
from changestream.sinks.spark.iceberg.maintenance import (
    MaintenanceError,
    MaintenanceSettings,
    maintain_catalog,
    maintain_table,
    owned_tables,
    parse_age,
)

from .conftest import Binlog, batch, simple_schema

pytestmark = pytest.mark.spark


BATCHES = 12  # one small data file and snapshot each


def _land(sink: SparkSink, log: Binlog, first_batch: int, batches: int) -> None:
    schema = simple_schema("items")
    for n in range(first_batch, first_batch + batches):
        part = log.transaction([
            ("insert", schema, None, {"id": n, "name": f"n{n}", "qty": n}),
            ("update", schema, {"id": n // 2, "name": "?", "qty": 0},
             {"id": n // 2, "name": f"u{n}", "qty": n}),
        ])
        sink.write(batch(n, [part]))


def _files(spark: Any, table: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {table}.files").collect()[0][0])


def test_maintenance_compacts_expires_and_keeps_the_position(
        spark: Any, tmp_path: Path) -> None:
    catalog = "maint"
    log = Binlog()
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    _land(sink, log, 1, BATCHES)
    position = sink.open()
    mirror = f"{catalog}.shop.items"
    before = sorted(tuple(r) for r in spark.table(mirror).collect())
    files_before = _files(spark, mirror)
    deletes = f"SELECT count(*) FROM {mirror}.files WHERE content > 0"  # delete files
    assert spark.sql(deletes).collect()[0][0] > 0  # the batches' updates
    # A file no snapshot references (as a killed write leaves), old enough to go.
    data = tmp_path / "shop" / "items" / "data"
    orphan = data / "00000-orphan-left-by-a-killed-write.parquet"
    orphan.write_bytes(b"PAR1 not really")
    os.utime(orphan, (time.time() - 2 * 86400, time.time() - 2 * 86400))

    names = owned_tables(spark, catalog)
    assert "`shop`.`items`" in names and "`shop`.`items__changelog`" in names
    assert any(n.startswith("`_changestream`.") for n in names)
    done = maintain_catalog(spark, catalog, MaintenanceSettings(
        expire_after=0, keep_snapshots=1, orphans_after=86400))
    items = next(u for u in done if u.table == "shop.items")
    assert items.files_before == files_before and items.files_after < files_before
    assert items.snapshots_after < items.snapshots_before
    assert items.orphans_removed >= 1 and not orphan.exists()
    assert sorted(tuple(r) for r in spark.table(mirror).collect()) == before
    # Compaction applied the deletes to the files and dropped them.
    assert spark.sql(deletes).collect()[0][0] == 0

    # A restart still finds the position (the newest snapshot carrying it was kept) ...
    sink.close()
    again = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    assert again.open() == position
    # ... so a replayed batch lands nothing twice, and new batches land.
    _land(again, Binlog(), 1, BATCHES)
    _land(again, log, BATCHES + 1, 5)
    changelog = spark.table(f"{catalog}.shop.items__changelog")
    assert changelog.count() == (BATCHES + 5) * 2
    assert changelog.select("_transaction_id", "_seq").distinct().count() == (BATCHES + 5) * 2
    ids = [r["id"] for r in spark.sql(f"SELECT id FROM {mirror} ORDER BY id").collect()]
    assert ids == list(range(0, BATCHES + 6))
    again.close()


def test_the_sink_maintains_its_tables_on_a_schedule(spark: Any, tmp_path: Path) -> None:
    """``maintain_every``: between two batches, once the time has passed, the sink compacts
    the tables it landed (the mirror's deletes applied and dropped); the mirror
    and the position are what they were, and landing goes on."""
    catalog = "sched"
    log = Binlog()
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog,
                     maintain_every="3600")
    sink.open()
    assert sink.upkeep is not None
    mirror = f"{catalog}.shop.items"
    deletes = f"SELECT count(*) FROM {mirror}.files WHERE content > 0"
    _land(sink, log, 1, 6)
    assert sink.upkeep.runs == 0 and spark.sql(deletes).collect()[0][0] > 0
    before = sorted(tuple(r) for r in spark.table(mirror).collect())
    files_before = _files(spark, mirror)
    sink.upkeep.due = 0.0  # as if an hour had passed
    _land(sink, log, 7, 1)
    assert sink.upkeep.runs == 1 and sink.last is not None
    assert "maintenance" in sink.last.stages
    assert spark.sql(deletes).collect()[0][0] == 0
    assert _files(spark, mirror) < files_before
    expected = [*before, (7, "n7", 7)]
    expected = [r if r[0] != 3 else (3, "u7", 7) for r in expected]
    assert sorted(tuple(r) for r in spark.table(mirror).collect()) == sorted(expected)
    changelog = f"{catalog}.shop.items__changelog"
    assert spark.table(changelog).count() == 14 and _files(spark, changelog) == 1
    position = sink.open()
    _land(sink, log, 8, 2)  # the next run is an hour away again
    assert sink.upkeep.runs == 1 and spark.sql(deletes).collect()[0][0] > 0
    sink.close()
    again = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    assert again.open() != position  # batches 8 and 9 moved it on
    again.close()


def test_a_table_keeps_the_metadata_files_of_its_last_versions_only(
        spark: Any, tmp_path: Path) -> None:
    """Every commit writes a metadata file listing every snapshot: the tables keep the last
    20 (kept all, a router's 1-second batches fill the disk), and maintenance gives the
    setting to tables made before it."""
    catalog = "meta"
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    _land(sink, Binlog(), 1, 25)
    for table in ("shop/items", "shop/items__changelog", "_changestream/batches"):
        versions = list((tmp_path / table / "metadata").glob("*.metadata.json"))
        assert 20 <= len(versions) <= 21, table
    mirror = f"{catalog}.shop.items"
    spark.sql(f"ALTER TABLE {mirror} UNSET TBLPROPERTIES "
              "('write.metadata.delete-after-commit.enabled')")
    maintain_table(spark, catalog, "`shop`.`items`", MaintenanceSettings(expire_after=0))
    properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {mirror}").collect()}
    assert properties["write.metadata.delete-after-commit.enabled"] == "true"
    sink.close()


def test_a_schedule_needs_an_age() -> None:
    with pytest.raises(SinkError, match="maintain_every"):
        SparkSink("iceberg", warehouse="/tmp/x", maintain_every="soon")
    assert SparkSink("iceberg", warehouse="/tmp/x").upkeep is None
    assert SparkSink("iceberg", warehouse="/tmp/x", maintain_every="10m").upkeep.every == 600


def test_a_namespace_named_as_its_catalog_is_maintained(spark: Any, tmp_path: Path) -> None:
    """Database ``shop`` in catalog ``shop``: the procedures get the catalog named too, or
    ``shop.items`` would be read as table ``items`` of catalog ``shop``'s default
    namespace."""
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog="shop")
    sink.open()
    _land(sink, Binlog(), 1, 3)
    done = maintain_catalog(spark, "shop", MaintenanceSettings(expire_after=0,
                                                               keep_snapshots=1))
    assert {u.table for u in done} >= {"shop.items", "shop.items__changelog"}
    assert [r["id"] for r in spark.sql("SELECT id FROM shop.shop.items ORDER BY id")
            .collect()] == [0, 1, 2, 3]
    sink.close()


def test_ages_and_the_command_refuse_bad_input_clearly() -> None:
    assert parse_age("90", "x") == 90 and parse_age("12h", "x") == 43200
    assert parse_age("2w", "x") == 14 * 86400
    with pytest.raises(ValueError, match="--expire-after: '3x' is not an age"):
        parse_age("3x", "--expire-after")
    with pytest.raises(ValueError, match="at least 24 hours old"):
        MaintenanceSettings(orphans_after=3600)
    assert MaintenanceSettings(orphans_after=3600, remove_orphans=False).orphans_after == 3600
    done = subprocess.run([sys.executable, "-m", "changestream.cli", "maintain", "--sink",
                           "jsonl:/tmp/x.jsonl"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "maintain looks after the tables of a spark:iceberg sink" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_table_that_cannot_be_maintained_does_not_stop_the_others(
        spark: Any, tmp_path: Path) -> None:
    """One table's manifest list is unreadable, another's current metadata file is not
    JSON: the error names each table (and the step that failed), and every other table is
    maintained before it is raised."""
    catalog = "broken"
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    _land(sink, Binlog(), 1, 4)
    sink.close()
    mirror = f"{catalog}.shop.items"
    manifest_list = spark.sql(f"SELECT manifest_list FROM {mirror}.snapshots "
                              "ORDER BY committed_at DESC LIMIT 1").collect()[0][0]
    Path(manifest_list.removeprefix("file:")).write_bytes(b"not an Avro file at all")
    spark.catalog.refreshTable(mirror)
    changelog_metadata = tmp_path / "shop" / "items__changelog" / "metadata"
    current = (changelog_metadata / "version-hint.text").read_text().strip()
    (changelog_metadata / f"v{current}.metadata.json").write_text("{not JSON")
    spark.catalog.refreshTable(f"{catalog}.shop.items__changelog")
    heard: dict[str, Any] = {}
    with pytest.raises(MaintenanceError) as failed:
        maintain_catalog(spark, catalog, MaintenanceSettings(
            expire_after=0, keep_snapshots=1, remove_orphans=False),
            lambda upkeep: heard.setdefault(upkeep.table, upkeep))
    message = str(failed.value)
    assert message.startswith(f"2 of {len(heard) + 2} tables were not maintained")
    assert f"{catalog}.shop.items: compaction failed: " in message
    assert "Not an Avro data file" in message
    assert f"{catalog}.shop.items__changelog: " in message
    assert "shop.items" not in heard and "shop.items__changelog" not in heard
    batches = heard["_changestream.batches"]
    assert batches.snapshots_after < batches.snapshots_before
