"""Appends to Iceberg tables without a Spark job: the rows, already Arrow, are written as
Parquet data files by pyarrow on the driver and committed with Iceberg's own Java API in
the session's JVM (``AppendFiles``, one commit per append, carrying the position).

A Spark append of a ~75,000-row batch costs a job, a conversion of every row from Arrow to
Spark's rows and back to Parquet; pyarrow writes the same file in a few hundredths of a
second. The files carry Iceberg's field ids, so columns are found by id as in any Iceberg
file, and their column metrics (what scans and MERGEs prune with) are read back from the
footer by Iceberg (``ParquetUtil.fileMetrics``) as its own writers record them.

It works where the driver can write the table's files itself: a warehouse on a local or
mounted file system (``file:`` locations). For other storage, an unpartitioned or a
day-partitioned table whose columns it cannot map, :meth:`ArrowAppender.append` returns
``False`` and the caller appends through Spark.
"""

from __future__ import annotations

import json
import os
import uuid
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .types import PARQUET_DICTIONARY_PAGE_BYTES

FIELD_ID = b"PARQUET:field_id"
_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "date": pa.date32(), "string": pa.string(),
    "binary": pa.binary(), "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp": pa.timestamp("us"),
}


class Unsupported(Exception):
    """The table has something this writer does not map (the caller uses Spark)."""


def arrow_type(iceberg: Any) -> pa.DataType:
    """The Arrow type (with field ids inside lists) Iceberg type ``iceberg`` (its JSON form,
    as ``SchemaParser.toJson`` gives it) is written as."""
    if isinstance(iceberg, str):
        if iceberg in _PRIMITIVES:
            return _PRIMITIVES[iceberg]
        if iceberg.startswith("decimal("):
            precision, scale = (int(p) for p in iceberg[8:-1].split(","))
            return pa.decimal128(precision, scale)
        raise Unsupported(iceberg)
    if iceberg.get("type") == "list":
        element = pa.field("element", arrow_type(iceberg["element"]),
                           not iceberg.get("element-required", False),
                           metadata={FIELD_ID: str(iceberg["element-id"]).encode()})
        return pa.list_(element)
    raise Unsupported(str(iceberg.get("type")))


def file_schema(table_schema: dict[str, Any], columns: list[str]) -> pa.Schema:
    """The Arrow schema of a data file holding ``columns`` of the Iceberg table whose schema
    (JSON) is ``table_schema``: the table's types, each field with its id."""
    by_name = {f["name"]: f for f in table_schema["fields"]}
    fields = []
    for name in columns:
        if name not in by_name:
            raise Unsupported(f"column {name} is not in the table")
        field = by_name[name]
        fields.append(pa.field(name, arrow_type(field["type"]), not field["required"],
                               metadata={FIELD_ID: str(field["id"]).encode()}))
    return pa.schema(fields)


def _with_ids(rows: pa.Table, table_schema: dict[str, Any]) -> pa.Table:
    """``rows`` cast to the table's types, each field carrying its Iceberg id (a cast keeps
    the types but not the fields' metadata, so the schema is set again after it)."""
    schema = file_schema(table_schema, rows.column_names)
    return pa.Table.from_arrays(rows.cast(schema).columns, schema=schema)


def local_path(location: str) -> Path | None:
    """The local path of a table location, ``None`` when it is not on a file system the
    driver writes to directly."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path)
    return None


def load_table(spark: Any, name: str) -> Any:
    """Iceberg table ``name`` (``catalog.db.table``, quoted as in SQL) as the Java object
    Spark's catalog holds (commits made through it are what Spark reads next)."""
    return java_of(spark).spark3_util.loadIcebergTable(spark._jsparkSession, name)


def positioned_snapshot(table: Any, property_name: str) -> Any:
    """The newest snapshot of Java table ``table`` (refreshed first: another process may
    have committed) whose summary has ``property_name``, walked back from the current one
    along its parents (commit times can tie within a millisecond); ``None`` if none has."""
    table.refresh()
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        if snapshot.summary().get(property_name) is not None:
            return snapshot
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None
    return None


class _Java:
    """The Java classes an append calls, each looked up once: every name in a Py4J path
    (``jvm.org.apache.iceberg.DataFiles``) is a round trip to the JVM, and a round trip
    waits for the GIL when the router's threads are busy (several ms each)."""

    def __init__(self, spark: Any):
        jvm = spark._jvm
        iceberg = jvm.org.apache.iceberg
        parquet = iceberg.shaded.org.apache.parquet
        self.spark3_util = iceberg.spark.Spark3Util
        self.schema_parser = iceberg.SchemaParser
        self.metrics_config = iceberg.MetricsConfig
        self.data_files = iceberg.DataFiles
        self.file_metadata = iceberg.FileMetadata
        self.parquet_format = iceberg.FileFormat.PARQUET
        self.parquet_util = iceberg.parquet.ParquetUtil
        self.input_file = parquet.hadoop.util.HadoopInputFile
        self.file_reader = parquet.hadoop.ParquetFileReader
        self.path = jvm.org.apache.hadoop.fs.Path
        self.no_field_metrics = jvm.java.util.stream.Stream
        self.int = jvm.int
        self.table_util = iceberg.TableUtil
        self.manifest_files = iceberg.ManifestFiles
        # Iceberg runs a commit's steps (writing the manifest list, filtering and merging
        # manifests) as tasks of its worker pool and polls them every 10 ms: most of a
        # small commit was that wait. Run on this executor, they run in the calling thread.
        self.direct = iceberg.relocated.com.google.common.util.concurrent.MoreExecutors \
            .newDirectExecutorService()
        self.hadoop = spark._jsc.hadoopConfiguration()
        # Parquet's default read options parse Hadoop's XML defaults again for every file
        # (10-20 ms); these are made once from the session's settings.
        self.read_options = parquet.HadoopReadOptions.builder(self.hadoop).build()


_JAVA: weakref.WeakKeyDictionary[Any, _Java] = weakref.WeakKeyDictionary()


def java_of(spark: Any) -> _Java:
    """The Java classes of ``spark``'s JVM that this module calls (looked up once)."""
    java = _JAVA.get(spark._jvm)
    if java is None:
        java = _JAVA[spark._jvm] = _Java(spark)
    return java


class _TableFacts:
    """What appending to one table needs from it, kept while the table (a table dropped and
    made again has a new uuid), its schema and its partition spec stay the same (``ids``)."""

    def __init__(self, ids: tuple[str, int, int, int], table: Any, java: _Java):
        self.ids = ids
        self.format_version = ids[3]
        self.root = str(table.location()).rstrip("/")
        self.base = local_path(self.root) if str(
            table.io().getClass().getName()).endswith("HadoopFileIO") else None
        self.schema = json.loads(java.schema_parser.toJson(table.schema()))
        self.spec = table.spec()
        # Where the table's metadata (and so an append's manifest) goes.
        self.metadata_root = str(table.properties().get("write.metadata.path")
                                 or f"{self.root}/metadata").rstrip("/")
        self.partition: tuple[str, str] | None = None  # (partition field, source column)
        self.unsupported: str | None = None  # a partitioning this writer does not handle
        self.partitioned = bool(self.spec.isPartitioned())
        if self.partitioned:
            fields = list(self.spec.fields())
            if len(fields) != 1 or str(fields[0].transform()) != "day":
                self.unsupported = str(self.spec)
            else:
                self.partition = (str(fields[0].name()),
                                  str(table.schema().findColumnName(fields[0].sourceId())))


class ArrowAppender:
    """Appends Arrow tables to the Iceberg tables of a Spark session (module docstring)."""

    def __init__(self, spark: Any):
        self.spark = spark
        self.jvm = spark._jvm
        self._facts: dict[str, _TableFacts] = {}

    @property
    def java(self) -> _Java:
        return java_of(self.spark)

    def _table(self, name: str) -> Any:
        return load_table(self.spark, name)

    def _facts_of(self, name: str, table: Any) -> _TableFacts:
        ids = (str(table.uuid()), int(table.schema().schemaId()), int(table.spec().specId()),
               int(self.java.table_util.formatVersion(table)))
        facts = self._facts.get(name)
        if facts is None or facts.ids != ids:
            facts = self._facts[name] = _TableFacts(ids, table, self.java)
        return facts

    def mark(self, name: str, properties: dict[str, str]) -> None:
        """Commit a snapshot of Iceberg table ``name`` that adds no file and has
        ``properties`` in its summary (works on any storage: nothing is written but
        Iceberg's own metadata)."""
        update = self._table(name).newAppend().scanManifestsWith(self.java.direct)
        for key, value in properties.items():
            update.set(key, value)
        update.commit()

    def append(self, name: str, rows: pa.Table, properties: dict[str, str]) -> bool:
        """Append ``rows`` to Iceberg table ``name`` in one commit whose snapshot summary
        has ``properties``; ``False`` (nothing written) when this writer cannot."""
        return self.row_delta(name, rows, None, properties)

    def row_delta(self, name: str, rows: pa.Table | None, deleted: pa.Table | None,
                  properties: dict[str, str]) -> bool:
        """In one commit of Iceberg table ``name`` (with ``properties`` in its summary): the
        rows whose key columns equal a row of ``deleted`` (an equality delete: it applies
        to the rows committed before, not to this commit's) are deleted and ``rows`` added.
        ``False`` (nothing written) when this writer cannot."""
        table = self._table(name)
        facts = self._facts_of(name, table)
        base, root = facts.base, facts.root
        if base is None:
            return False
        try:
            partitions = [] if rows is None or not rows.num_rows else \
                self._partitions(facts, _with_ids(rows, facts.schema))
            if deleted is not None and deleted.num_rows:
                if facts.partitioned:
                    raise Unsupported("equality deletes of a partitioned table")
                deleted = _with_ids(deleted, facts.schema)
        except Unsupported:
            return False
        java = self.java
        spec = facts.spec
        metrics_config = java.metrics_config.forTable(table)
        if deleted is not None and deleted.num_rows:
            update = table.newRowDelta().scanManifestsWith(java.direct)
            location, size = self._write(base, root, "data/", deleted)
            ids = [int(f.metadata[FIELD_ID]) for f in deleted.schema]
            field_ids = self.spark.sparkContext._gateway.new_array(java.int, len(ids))
            for i, field_id in enumerate(ids):
                field_ids[i] = field_id
            update.addDeletes(java.file_metadata.deleteFileBuilder(spec)
                              .ofEqualityDeletes(field_ids).withPath(location)
                              .withFormat(java.parquet_format)
                              .withFileSizeInBytes(size).withRecordCount(deleted.num_rows)
                              .withMetrics(self._metrics(location, metrics_config))
                              .build())
            add = update.addRows
            manifest = None
        else:
            update = table.newAppend().scanManifestsWith(java.direct)
            add = update.appendFile
            manifest = self._manifest(table, facts) if partitions else None
            if manifest is not None:
                add = manifest.add
        for partition, piece in partitions:
            location, size = self._write(
                base, root, f"data/{partition}/" if partition else "data/", piece)
            builder = java.data_files.builder(spec).withPath(location) \
                .withFormat(java.parquet_format).withFileSizeInBytes(size) \
                .withMetrics(self._metrics(location, metrics_config))
            if partition:
                builder = builder.withPartitionPath(partition)
            add(builder.build())
        if manifest is not None:
            manifest.close()
            update.appendManifest(manifest.toManifestFile())
        for key, value in properties.items():
            update.set(key, value)
        update.commit()
        return True

    def _manifest(self, table: Any, facts: _TableFacts) -> Any:
        """A manifest writer for the files of an append (``None``: let the append write
        its own). Iceberg writes an append's manifest as a task of its worker pool, which
        it polls every 10 ms; written here, the manifest is taken as it is (format 2: its
        files inherit the commit's snapshot id)."""
        if facts.format_version != 2:
            return None
        location = f"{facts.metadata_root}/driver-{uuid.uuid4()}-m0.avro"
        return self.java.manifest_files.write(2, facts.spec, table.io().newOutputFile(location),
                                              None)

    @staticmethod
    def _write(base: Path, root: str, relative: str, rows: pa.Table) -> tuple[str, int]:
        """Write ``rows`` as a new Parquet file under the table's ``relative`` folder,
        fsynced; its location (as Iceberg spells its own) and size."""
        file_name = f"{uuid.uuid4()}.parquet"
        folder = base / relative
        path = folder / file_name
        folder.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pq.write_table(rows, f, compression="zstd", store_decimal_as_integer=True,
                           dictionary_pagesize_limit=PARQUET_DICTIONARY_PAGE_BYTES)
            f.flush()
            os.fsync(f.fileno())
        return f"{root}/{relative}{file_name}", path.stat().st_size

    def _metrics(self, location: str, config: Any) -> Any:
        """A file's column metrics, read back from its footer by Iceberg (as
        ``ParquetUtil.fileMetrics`` does, with the read options made once)."""
        java = self.java
        reader = java.file_reader.open(
            java.input_file.fromPath(java.path(location), java.hadoop), java.read_options)
        try:
            footer = reader.getFooter()
        finally:
            reader.close()
        return java.parquet_util.footerMetrics(footer, java.no_field_metrics.empty(), config)

    @staticmethod
    def _partitions(facts: _TableFacts, rows: pa.Table) -> list[tuple[str, pa.Table]]:
        """``rows`` split by the table's partition (``""``: unpartitioned); the only
        partitioning handled is one ``day`` transform of a timestamp column."""
        if facts.unsupported is not None:
            raise Unsupported(facts.unsupported)
        if facts.partition is None:
            return [("", rows)]
        partition, source = facts.partition
        if source not in rows.column_names:
            raise Unsupported(f"partition source {source} not written")
        days = pc.cast(rows.column(source), pa.date32())
        unique = pc.unique(days).to_pylist()

        def path(day: Any) -> str:
            return f"{partition}={'null' if day is None else day.isoformat()}"

        if len(unique) == 1:  # the usual batch: one day, and no copy of its rows
            return [(path(unique[0]), rows)]
        return [(path(day), rows.filter(pc.is_null(days) if day is None
                                        else pc.equal(days, day))) for day in unique]


def append_rows(spark: Any, appender: ArrowAppender | None, name: str, rows: pa.Table,
                properties: dict[str, str]) -> None:
    """Append a few ``rows`` (changestream's own bookkeeping) to Iceberg table ``name`` in
    one commit with ``properties`` in its summary: written by the driver where ``appender``
    can (a Spark job cost 1-2 s for one row), else by Spark."""
    if appender is not None and appender.append(name, rows, properties):
        return
    writer = spark.createDataFrame(rows.to_pylist(), spark.table(name).schema).writeTo(name)
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()
