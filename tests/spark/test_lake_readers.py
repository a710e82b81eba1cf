"""Mirrors other engines read: the batches' deletes are position deletes, and pyiceberg and
DuckDB (``SELECT *`` and ``count(*)``) read every mirror equal to Spark and to the source."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from changestream.sinks.spark import SparkSink
from changestream.sinks.spark.iceberg.maintenance import MaintenanceSettings, maintain_catalog

from ..lake_readers import (
    delete_file_kinds,
    delete_files,
    duckdb_count,
    duckdb_rows,
    pyiceberg_rows,
)
from .conftest import Binlog, batch, simple_schema

pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

ITEMS = simple_schema("items")
BAG = simple_schema("bag", pk=False)


def row(i: int, name: str = "", qty: int | None = None) -> dict[str, Any]:
    return {"id": i, "name": name or f"n{i}", "qty": i if qty is None else qty}


def workload(log: Binlog) -> tuple[list[Any], dict[int, dict[str, Any]], Counter[tuple]]:
    """Batches of inserts, updates, deletes, key moves and keyless duplicates, and what
    the source holds after them (items by key, bag as a multiset)."""
    items = {i: row(i) for i in range(10)}
    bag: Counter[tuple] = Counter()
    batches = [[log.transaction([("insert", ITEMS, None, r) for r in items.values()]
                                + [("insert", BAG, None, row(0, "dup", 0))] * 3
                                + [("insert", BAG, None, row(1, "one", 1))])]]
    bag[(0, "dup", 0)] += 3
    bag[(1, "one", 1)] += 1

    def update(i: int, new: dict[str, Any]) -> tuple:
        old = items.pop(i)
        items[new["id"]] = new
        return ("update", ITEMS, old, new)

    def delete(i: int) -> tuple:
        return ("delete", ITEMS, items.pop(i), None)

    def insert(new: dict[str, Any]) -> tuple:
        items[new["id"]] = new
        return ("insert", ITEMS, None, new)

    batches.append([log.transaction([update(1, row(1, "changed")), delete(2),
                                     update(3, row(30, "moved")), insert(row(11))]),
                    log.transaction([("delete", BAG, row(0, "dup", 0), None),
                                     ("insert", BAG, None, row(0, "dup", 0)),
                                     ("delete", BAG, row(0, "dup", 0), None)])])
    bag[(0, "dup", 0)] -= 1
    batches.append([log.transaction([insert(row(2, "back")), update(1, row(1, "again")),
                                     delete(11), update(30, row(3, "home"))])])
    batches.append([log.transaction([update(i, row(i, f"v{i}", i * 10)) for i in (4, 5, 6)]
                                    + [delete(7)]),
                    log.transaction([("update", BAG, row(1, "one", 1), row(1, "uno", 1))])])
    bag[(1, "one", 1)] -= 1
    bag[(1, "uno", 1)] += 1
    return batches, items, bag


def as_tuples(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((r["id"], r["name"], r["qty"]) for r in rows)


def readers_agree(spark: Any, catalog: str, warehouse: Path, table: str,
                  expected: list[tuple]) -> None:
    folder = warehouse / "shop" / table
    spark_rows = [r.asDict() for r in spark.table(f"{catalog}.shop.{table}").collect()]
    assert as_tuples(spark_rows) == expected, "spark"
    assert as_tuples(pyiceberg_rows(folder)) == expected, "pyiceberg"
    assert as_tuples(duckdb_rows(folder)) == expected, "duckdb"
    assert duckdb_count(folder) == len(expected), "duckdb count(*)"


@pytest.mark.parametrize("writer", ["arrow", "spark"])
def test_every_engine_reads_mirrors_after_updates_deletes_and_key_moves(
        spark: Any, tmp_path: Path, writer: str) -> None:
    catalog = f"lake_{writer}"
    options = {} if writer == "arrow" else {"arrow_appends": "false"}
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog, **options)
    sink.open()
    batches, items, bag = workload(Binlog())
    for n, parts in enumerate(batches, 1):
        sink.write(batch(n, parts))
    sink.close()
    assert delete_file_kinds(tmp_path / "shop" / "items") == {"position"}
    # written by the driver (pyarrow) or by Spark's MERGE (parquet-mr)
    want = "parquet-cpp-arrow" if writer == "arrow" else "parquet-mr"
    assert {pq.ParquetFile(path.removeprefix("file:")).metadata.created_by.split(" ")[0]
            for _, path in delete_files(tmp_path / "shop" / "items")} == {want}
    assert delete_file_kinds(tmp_path / "shop" / "bag") == {"position"}
    # the keyless mirror's removed copies too: by position, from the driver or the MERGE
    assert {pq.ParquetFile(path.removeprefix("file:")).metadata.created_by.split(" ")[0]
            for _, path in delete_files(tmp_path / "shop" / "bag")} == {want}
    readers_agree(spark, catalog, tmp_path, "items",
                  sorted((r["id"], r["name"], r["qty"]) for r in items.values()))
    readers_agree(spark, catalog, tmp_path, "bag", sorted(bag.elements()))
    changelog = tmp_path / "shop" / "items__changelog"
    assert duckdb_count(changelog) == len(pyiceberg_rows(changelog)) == \
        spark.table(f"{catalog}.shop.items__changelog").count()


def test_a_mirror_with_equality_deletes_keeps_working_and_maintain_converts_it(
        spark: Any, tmp_path: Path) -> None:
    catalog = "lake_legacy"
    log = Binlog()
    batches, items, _ = workload(log)
    old = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog,
                    mirror_deletes="equality")
    old.open()
    for n, parts in enumerate(batches[:2], 1):
        old.write(batch(n, parts))
    old.close()
    folder = tmp_path / "shop" / "items"
    assert delete_file_kinds(folder) == {"equality"}
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(batch(3, batches[2]))  # still equality deletes: the mirror has them
    assert "equality" in delete_file_kinds(folder)
    maintain_catalog(spark, catalog, MaintenanceSettings(remove_orphans=False))
    assert delete_file_kinds(folder) == set()
    sink.write(batch(4, batches[3]))
    sink.close()
    assert delete_file_kinds(folder) == {"position"}
    readers_agree(spark, catalog, tmp_path, "items",
                  sorted((r["id"], r["name"], r["qty"]) for r in items.values()))


@pytest.mark.parametrize("through", ["its catalog", "another catalog"])
def test_a_mirror_compacted_behind_the_router_lands_right(
        spark: Any, tmp_path: Path, through: str) -> None:
    """Compaction by another writer between two batches moves every row to new files, so
    the router's key index is stale: the table, refreshed before the index is used, shows
    it, and the index is read again. Through another catalog (another process, as it were)
    the commit check is tested too: a row delta that deletes from the files the compaction
    removed, planned on the snapshot before it, is refused by Iceberg."""
    from changestream.sinks.spark.iceberg.files import ArrowAppender

    catalog = f"lake_behind_{through.split()[0]}"
    log = Binlog()
    batches, items, _ = workload(log)
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    for n, parts in enumerate(batches[:3], 1):
        sink.write(batch(n, parts))
    name = f"`{catalog}`.`shop`.`items`"
    index = sink._landing.mirrors._positions.indexes[name]
    stale_snapshot = index.snapshot_id
    stale, missing = index.locate(pa.table({"id": pa.array([0, 1], pa.int64())}))
    assert stale.num_rows == 2 and missing == 0
    compactor = catalog
    if through == "another catalog":
        compactor = f"{catalog}_other"
        spark.conf.set(f"spark.sql.catalog.{compactor}", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"spark.sql.catalog.{compactor}.type", "hadoop")
        spark.conf.set(f"spark.sql.catalog.{compactor}.warehouse", str(tmp_path))
    spark.sql(f"CALL {compactor}.system.rewrite_data_files(table => '{compactor}.shop.items', "
              "options => map('rewrite-all', 'true'))").collect()
    if through == "another catalog":
        with pytest.raises(Exception, match="ValidationException"):
            ArrowAppender(spark).position_delta(name, None, stale, stale_snapshot, {})
    sink.write(batch(4, batches[3]))
    sink.close()
    readers_agree(spark, catalog, tmp_path, "items",
                  sorted((r["id"], r["name"], r["qty"]) for r in items.values()))


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_jdbc_catalog_holds_tables_pyiceberg_finds_by_name(
        spark: Any, tmp_path: Path, database: str, request: Any, monkeypatch: Any) -> None:
    """catalog.type=jdbc on a SQLite file or a private PostgreSQL server (the password from
    the environment): the tables are in its rows, a restart finds the position there, and
    a user's pyiceberg SqlCatalog on the same database finds and reads them (as DuckDB does
    from the metadata file the catalog names)."""
    from pyiceberg.catalog.sql import SqlCatalog

    name = f"lake_{database}"
    warehouse = tmp_path / "warehouse"
    if database == "sqlite":
        options = {"uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}"}
        user_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        server = request.getfixturevalue("postgres")
        monkeypatch.setenv("LAKE_PASSWORD", server.password)
        options = {"uri": server.jdbc_uri, "jdbc.user": server.user,
                   "jdbc.password": "env:LAKE_PASSWORD"}
        user_uri = server.sqlalchemy_uri
    catalog_options = {"name": name, "type": "jdbc", **options}
    sink = SparkSink("iceberg", warehouse=warehouse, spark=spark, catalog=catalog_options)
    assert sink.open() is None
    batches, items, bag = workload(Binlog())
    for n, parts in enumerate(batches, 1):
        sink.write(batch(n, parts))
    position = batch(len(batches), batches[-1]).position
    sink.close()
    again = SparkSink("iceberg", warehouse=warehouse, spark=spark, catalog=catalog_options)
    assert again.open() == position
    again.close()

    catalog = SqlCatalog(name, uri=user_uri, warehouse=str(warehouse))
    assert {"items", "items__changelog", "bag", "bag__changelog"} <= {
        table for _, table in catalog.list_tables("shop")}
    for table, expected in (("items", sorted((r["id"], r["name"], r["qty"])
                                             for r in items.values())),
                            ("bag", sorted(bag.elements()))):
        found = catalog.load_table(f"shop.{table}")
        assert as_tuples(found.scan().to_arrow().to_pylist()) == expected, table
        assert as_tuples(duckdb_rows(found.metadata_location)) == expected, table
        assert duckdb_count(found.metadata_location) == len(expected), table
        spark_rows = [r.asDict() for r in spark.table(f"{name}.shop.{table}").collect()]
        assert as_tuples(spark_rows) == expected, table


@pytest.mark.parametrize("fault", ["no server", "no folder", "wrong password"])
def test_a_catalog_that_cannot_be_opened_is_one_line_naming_the_option(
        spark: Any, tmp_path: Path, fault: str, request: Any) -> None:
    from changestream.model.errors import SinkError

    options: dict[str, str] = {"name": f"lake_bad_{fault.split()[1]}", "type": "jdbc"}
    if fault == "no server":
        options["uri"], want = "jdbc:postgresql://127.0.0.1:1/lake", "catalog.uri"
    elif fault == "no folder":
        options["uri"], want = "jdbc:sqlite:/nonexistent/folder/catalog.db", "catalog.uri"
    else:
        server = request.getfixturevalue("postgres")
        options.update({"uri": server.jdbc_uri, "jdbc.user": server.user,
                        "jdbc.password": "not-the-password"})
        want = "catalog.jdbc.user and catalog.jdbc.password"
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=options)
    with pytest.raises(SinkError) as caught:
        sink.open()
    message = str(caught.value)
    assert "\n" not in message and f"catalog {options['name']} (jdbc:" in message
    assert message.endswith(f"(check {want})")
    assert "not-the-password" not in message
    assert not list(tmp_path.iterdir())  # nothing landed


def test_catalog_options_are_checked_before_anything_starts(monkeypatch: Any) -> None:
    from changestream.model.errors import SinkError
    from changestream.sinks.spark.iceberg.catalog import catalog_settings

    with pytest.raises(SinkError, match="needs warehouse=FOLDER"):
        catalog_settings({"type": "jdbc", "uri": "jdbc:sqlite:/tmp/x.db"}, None)
    with pytest.raises(SinkError, match="variable LAKE_NOT_SET is not set"):
        catalog_settings({"type": "jdbc", "uri": "jdbc:sqlite:/tmp/x.db",
                          "jdbc.password": "env:LAKE_NOT_SET"}, "/tmp/w")
    with pytest.raises(SinkError, match="no driver known for 'oracle'"):
        catalog_settings({"type": "jdbc", "uri": "jdbc:oracle:thin:@h:1521/x"}, "/tmp/w")
    with pytest.raises(SinkError, match=r"catalog\.name='a b'"):
        catalog_settings({"name": "a b"}, "/tmp/w")
    monkeypatch.setenv("LAKE_PASSWORD", "s3cret")
    settings = catalog_settings({"name": "lake", "type": "jdbc", "uri": "jdbc:sqlite:/tmp/x.db",
                                 "jdbc": {"user": "u", "password": "env:LAKE_PASSWORD"}},
                                "/tmp/w")
    assert settings.spark_conf() == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "jdbc",
        "spark.sql.catalog.lake.uri": "jdbc:sqlite:/tmp/x.db",
        "spark.sql.catalog.lake.jdbc.user": "u", "spark.sql.catalog.lake.jdbc.password": "s3cret",
        "spark.sql.catalog.lake.warehouse": "/tmp/w"}
    assert "s3cret" not in settings.describe()
    assert catalog_settings("plain", "/tmp/w").spark_conf()["spark.sql.catalog.plain.type"] == \
        "hadoop"


@pytest.mark.parametrize("theirs", ["same-columns-with-rows", "another-schema-empty"])
def test_a_table_changestream_did_not_make_is_refused_by_name(
        spark: Any, tmp_path: Path, theirs: str) -> None:
    """Whether it holds rows or not, whatever its columns: refused by name, left as it
    was (not altered to the source's columns, nothing landed into it)."""
    from changestream.model.errors import SinkError

    catalog = f"lake_foreign_{theirs.replace('-', '_')}"
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    if theirs == "same-columns-with-rows":
        spark.sql(f"CREATE TABLE {catalog}.shop.items (id BIGINT, name STRING, qty BIGINT) "
                  "USING iceberg")
        spark.sql(f"INSERT INTO {catalog}.shop.items VALUES (1, 'theirs', 1)")
    else:
        spark.sql(f"CREATE TABLE {catalog}.shop.items (code STRING, price DOUBLE) "
                  "USING iceberg")
    schema = spark.table(f"{catalog}.shop.items").schema.simpleString()
    batches, _, _ = workload(Binlog())
    with pytest.raises(SinkError, match=rf"table `{catalog}`.`shop`.`items` exists and was "
                                        r"not made by changestream"):
        sink.write(batch(1, batches[0]))
    assert spark.table(f"{catalog}.shop.items").schema.simpleString() == schema
    assert [tuple(r) for r in spark.table(f"{catalog}.shop.items").collect()] == (
        [(1, "theirs", 1)] if theirs == "same-columns-with-rows" else [])
    sink.close()
