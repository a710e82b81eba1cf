"""Iceberg commits made on the driver (sinks/spark/iceberg/files.py): the column metrics
recorded for a file, day partitions, and the file-less snapshot a batch ends with."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from changestream.sinks.spark.iceberg.commits import driver_commits
from changestream.sinks.spark.iceberg.files import ArrowAppender, append_rows, load_table
from changestream.sinks.spark.session import iceberg_conf

_names = itertools.count(1)


def _catalog(spark: Any, warehouse: Path) -> str:
    name = f"files{next(_names)}"
    for key, value in iceberg_conf(name, warehouse).items():
        spark.conf.set(key, value)
    return name


def _log_table(spark: Any, warehouse: Path, table: str, partitioning: str = "") -> str:
    """A new format-2 table of ``_rows``'s columns (``partitioning``: its clause)."""
    name = f"{_catalog(spark, warehouse)}.db.{table}"
    spark.sql(f"CREATE TABLE {name} (id INT, name STRING, amount DOUBLE, at TIMESTAMP) "
              f"USING iceberg {partitioning} TBLPROPERTIES ('format-version'='2')")
    return name


def _rows(days: list[int]) -> pa.Table:
    at = [dt.datetime(2024, 3, 1 + d, 12, tzinfo=dt.UTC) for d in days]
    return pa.table({"id": pa.array(range(len(days)), pa.int32()),
                     "name": pa.array([None if i % 3 == 0 else f"n{i}" for i in range(len(days))]),
                     "amount": pa.array([i * 1.5 for i in range(len(days))], pa.float64()),
                     "at": pa.array(at, pa.timestamp("us", tz="UTC"))})


def test_metrics_are_iceberg_s_own_and_one_day_lands_in_one_file(spark: Any,
                                                                  tmp_path: Path) -> None:
    name = _log_table(spark, tmp_path, "log", "PARTITIONED BY (days(at))")
    appender = ArrowAppender(spark)
    assert appender.append(name, _rows([0] * 50), {"p": "1"})
    assert appender.append(name, _rows([0, 1, 1, 2, 0]), {"p": "2"})

    files = spark.sql(f"SELECT file_path, partition.at_day AS day, record_count "
                      f"FROM {name}.files ORDER BY day, record_count").collect()
    assert [(str(f["day"]), f["record_count"]) for f in files] == [
        ("2024-03-01", 2), ("2024-03-01", 50), ("2024-03-02", 2), ("2024-03-03", 1)]
    assert spark.table(name).count() == 55

    table = load_table(spark, name)
    jvm = spark._jvm
    config = jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    bounded = []
    for f in files:
        ours = driver_commits(spark, table).metrics(f["file_path"], config)
        theirs = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
            table.io().newInputFile(f["file_path"]), config)
        assert ours.recordCount() == theirs.recordCount() == f["record_count"]
        for part in ("columnSizes", "valueCounts", "nullValueCounts", "lowerBounds",
                     "upperBounds"):
            assert getattr(ours, part)().equals(getattr(theirs, part)()), part
        bounded.append(ours.lowerBounds().size())
    assert max(bounded) == 4  # every column's bounds (a file of NULL names has none)
    nulls = spark.sql(f"SELECT null_value_counts FROM {name}.files WHERE record_count = 50"
                      ).collect()[0][0]
    assert nulls[2] == 17  # ids 0, 3, ..., 48 have no name


def test_a_batch_mark_is_a_snapshot_without_files(spark: Any, tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    name = f"{catalog}.db.marks"
    spark.sql(f"CREATE TABLE {name} (batch BIGINT) USING iceberg")
    appender = ArrowAppender(spark)
    appender.mark(name, {"changestream.position": "p1", "changestream.batch": "7"})
    appender.mark(name, {"changestream.position": "p2", "changestream.batch": "8"})
    marks = spark.sql(f"SELECT summary['changestream.position'] p, summary['added-data-files'] "
                      f"f FROM {name}.snapshots ORDER BY committed_at").collect()
    assert [(m["p"], m["f"]) for m in marks] == [("p1", None), ("p2", None)]
    assert spark.table(name).count() == 0


def test_a_table_made_again_under_its_name_is_not_taken_for_the_old_one(
        spark: Any, tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    name = f"{catalog}.db.again"
    spark.sql(f"CREATE TABLE {name} (id INT, name STRING) USING iceberg")
    appender = ArrowAppender(spark)
    assert appender.append(name, pa.table({"id": pa.array([1], pa.int32()), "name": ["a"]}), {})
    spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE TABLE {name} (name STRING, id INT) USING iceberg")  # ids swapped
    assert appender.append(name, pa.table({"id": pa.array([2], pa.int32()), "name": ["b"]}), {})
    assert [tuple(r) for r in spark.table(name).collect()] == [("b", 2)]
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN name TO label")
    assert appender.append(name, pa.table({"id": pa.array([3], pa.int32()),
                                           "label": ["c"]}), {})
    assert sorted(tuple(r) for r in spark.table(name).collect()) == [("b", 2), ("c", 3)]


def test_bookkeeping_rows_are_appended_by_spark_where_the_driver_cannot(
        spark: Any, tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    name = f"{catalog}.db.states"
    spark.sql(f"CREATE TABLE {name} (digest STRING, at TIMESTAMP) USING iceberg")
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    rows = pa.table({"digest": ["d1"], "at": pa.array([at], pa.timestamp("us", tz="UTC"))})
    append_rows(spark, None, name, rows, {"changestream.position": "p1"})  # Spark's job
    append_rows(spark, ArrowAppender(spark), name, rows.set_column(
        0, "digest", pa.array(["d2"])), {"changestream.position": "p2"})  # the driver's
    got = spark.sql(f"SELECT digest, at FROM {name} ORDER BY digest").collect()
    assert [(r["digest"], r["at"].replace(tzinfo=dt.UTC)) for r in got] == [("d1", at),
                                                                             ("d2", at)]
    marks = spark.sql(f"SELECT summary['changestream.position'] p FROM {name}.snapshots "
                      "ORDER BY committed_at").collect()
    assert [m["p"] for m in marks] == ["p1", "p2"]
    files = spark.sql(f"SELECT file_path FROM {name}.files").collect()
    writers = {pq.ParquetFile(f["file_path"].removeprefix("file:")).metadata.created_by
               .split(" ")[0] for f in files}
    assert writers == {"parquet-mr", "parquet-cpp-arrow"}  # Spark's file and the driver's


def test_an_append_commits_the_manifest_the_driver_wrote(spark: Any, tmp_path: Path) -> None:
    """Format 2: the append's files go into a manifest written here (in the table's
    metadata folder, named ``driver-<uuid>-m0.avro``), taken as it is, its files
    inheriting the commit's snapshot id; format 1: Iceberg writes the manifest itself.
    Either way the rows read back, and many appends are merged into few manifests."""
    catalog = _catalog(spark, tmp_path)
    for table, version in (("v2", 2), ("v1", 1)):
        name = f"{catalog}.db.{table}"
        spark.sql(f"CREATE TABLE {name} (id INT, name STRING, amount DOUBLE, at TIMESTAMP) "
                  f"USING iceberg TBLPROPERTIES ('format-version'='{version}')")
        appender = ArrowAppender(spark)
        assert appender.append(name, _rows([0] * 7), {"p": "1"})
        assert appender.append(name, _rows([1] * 5), {"p": "2"})
        snapshots = spark.sql(f"SELECT snapshot_id, summary['p'] p FROM {name}.snapshots "
                              "ORDER BY committed_at").collect()
        assert [s["p"] for s in snapshots] == ["1", "2"]
        manifests = spark.sql(f"SELECT path, added_snapshot_id, added_data_files_count "
                              f"FROM {name}.manifests").collect()
        assert sorted((m["added_snapshot_id"], m["added_data_files_count"]) for m in manifests
                      ) == sorted((s["snapshot_id"], 1) for s in snapshots)
        entries = spark.sql(f"SELECT snapshot_id, data_file.record_count n FROM {name}.entries"
                            ).collect()
        assert sorted((e["snapshot_id"], e["n"]) for e in entries) == sorted(
            zip((s["snapshot_id"] for s in snapshots), (7, 5)))
        ours = [m["path"] for m in manifests if Path(m["path"]).name.startswith("driver-")]
        assert len(ours) == (2 if version == 2 else 0)
        metadata = (tmp_path / "db" / table / "metadata").as_posix()
        assert all(m["path"].removeprefix("file:").startswith(metadata) for m in manifests)
        assert spark.table(name).count() == 12
        for n in range(3, 110):  # past commit.manifest.min-count-to-merge (100)
            assert appender.append(name, _rows([2]), {"p": str(n)})
        assert spark.table(name).count() == 119
        assert spark.sql(f"SELECT count(*) FROM {name}.manifests").collect()[0][0] < 100


def test_an_iceberg_runtime_the_commit_class_does_not_fit_is_named(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's commit class compiled against an Iceberg that lacks an API it calls:
    a SinkError that says so and names the compiler's complaint, not a Java trace."""
    import weakref

    from changestream.model.errors import SinkError
    from changestream.sinks.spark.iceberg import commits as iceberg_commits

    catalog = _catalog(spark, tmp_path)
    name = f"{catalog}.db.t"
    spark.sql(f"CREATE TABLE {name} (id INT) USING iceberg")
    monkeypatch.setattr(iceberg_commits, "_COMPILED", weakref.WeakKeyDictionary())
    monkeypatch.setattr(iceberg_commits, "SOURCE", iceberg_commits.SOURCE.replace(
        "TableUtil.formatVersion(table)", "TableUtil.formatVersionOf(table)"))
    with pytest.raises(SinkError, match=r"does not compile against the Iceberg runtime .*"
                                        r"formatVersionOf.*built for Iceberg 1\.10"):
        ArrowAppender(spark).append(name, pa.table({"id": pa.array([1], pa.int32())}), {})


def _codecs(spark: Any, name: str) -> set[str]:
    """The codecs of the columns of table ``name``'s data files, read from their footers."""
    found = set()
    for row in spark.sql(f"SELECT file_path FROM {name}.files").collect():
        meta = pq.ParquetFile(row["file_path"].removeprefix("file:")).metadata
        found |= {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
    return found


def test_the_driver_writes_with_the_table_s_parquet_compression_properties(
        spark: Any, tmp_path: Path) -> None:
    """Iceberg's ``write.parquet.compression-codec`` and ``-level`` hold for the driver's
    files as for Spark's, changed while the appender runs too; a codec Arrow does not
    write (``lzo``) leaves the table to Spark's writer (the append says it did not)."""
    name = _log_table(spark, tmp_path, "codecs")
    appender = ArrowAppender(spark)
    assert appender.append(name, _rows([0] * 20), {"p": "1"})
    assert _codecs(spark, name) == {"ZSTD"}  # Iceberg's default
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES "
              "('write.parquet.compression-codec'='snappy')")
    load_table(spark, name).refresh()
    assert appender.append(name, _rows([0] * 20), {"p": "2"})
    assert _codecs(spark, name) == {"ZSTD", "SNAPPY"}
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('write.parquet.compression-codec'="
              "'gzip', 'write.parquet.compression-level'='9')")
    load_table(spark, name).refresh()
    assert appender.append(name, _rows([0] * 20), {"p": "3"})
    assert _codecs(spark, name) == {"ZSTD", "SNAPPY", "GZIP"}
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES "
              "('write.parquet.compression-codec'='lzo')")
    load_table(spark, name).refresh()
    assert not appender.append(name, _rows([0] * 20), {"p": "4"})
    assert spark.table(name).count() == 60
