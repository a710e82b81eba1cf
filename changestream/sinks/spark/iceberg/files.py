"""Appends to Iceberg tables without a Spark job: the rows, already Arrow, are written as
Parquet data files by pyarrow on the driver and committed with Iceberg's Java API in the
session's JVM, one call per commit (:mod:`.commits`: an append, or a mirror's row delta,
carrying the position). A Spark append is a job and a conversion of every row from Arrow to
Spark's rows and back. The files carry Iceberg's field ids, and their column metrics are
read back from the footer by Iceberg as its own writers record them. It works where the
driver can write the table's files (``file:`` locations); otherwise, or for a table whose
columns it cannot map, :meth:`ArrowAppender.append` returns ``False`` and the caller appends
through Spark."""

from __future__ import annotations

import json
import os
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..session import jvm_of
from .commit_queue import StagedCommit
from .commits import check_location, driver_commits, encode_properties
from .parquet_encoding import ParquetEncoding

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def load_table(spark: SparkSession, name: str) -> Any:
    """Iceberg table ``name`` (``catalog.db.table``, quoted as in SQL) as the Java object
    Spark's catalog holds (commits made through it are what Spark reads next). The method
    is looked up once per JVM: every name in a Py4J path is a round trip (a class's method
    too), and a round trip waits for the interpreter lock while the router's threads are
    busy."""
    jvm = jvm_of(spark)
    load = _LOAD_TABLE.get(jvm)
    if load is None:
        load = _LOAD_TABLE[jvm] = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable
    return load(spark._jsparkSession, name)


_LOAD_TABLE: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def positioned_snapshot(table: Any, property_name: str, start: Any = None) -> Any:
    """The newest snapshot of Java table ``table`` whose summary has ``property_name``,
    walked back along its parents (commit times can tie within a millisecond) from
    ``start``, else from the current one (refreshed first: another process may have
    committed); ``None`` if none has."""
    snapshot = start
    if snapshot is None:
        table.refresh()
        snapshot = table.currentSnapshot()
    while snapshot is not None:
        if snapshot.summary().get(property_name) is not None:
            return snapshot
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None
    return None


def local_live_files(spark: SparkSession, name: str) -> tuple[Any, list[tuple[str, Path]]] | None:
    """Iceberg table ``name`` (its Java object, refreshed from the catalog) and the data
    files of its current snapshot (each location and local path); ``None`` when a file is
    not on a local file system or delete files apply to one (its rows are not the file's
    alone)."""
    table = load_table(spark, name)
    table.refresh()
    listed = driver_commits(spark, table).liveFiles(table)
    if listed is None:
        return None
    files = []
    for location in str(listed).splitlines():
        path = local_path(location)
        if path is None:
            return None
        files.append((location, path))
    return table, files


def live_rows(spark: SparkSession, name: str, columns: list[str]) -> list[dict[str, Any]] | None:
    """The rows (``columns`` of them) of Iceberg table ``name`` as its current snapshot
    holds them, read from its data files with Arrow: no Spark query (the first in a new
    JVM is slow to plan). ``None`` when that cannot be done here (see
    :func:`local_live_files`: the caller asks Spark)."""
    live = local_live_files(spark, name)
    if live is None:
        return None
    rows: list[dict[str, Any]] = []
    for _, path in live[1]:
        rows += pq.read_table(path, columns=columns).to_pylist()
    return rows


class _TableFacts:
    """What appending to one table needs from it (``facts``: the JSON
    ``DriverCommits.facts`` gives), kept while the table (a table dropped and made again
    has a new uuid), its schema, its partition spec and its format version (``ids``) and
    its Parquet properties stay the same."""

    def __init__(self, name: str, ids: tuple[str, int, int, int], parquet: int,
                 facts: dict[str, Any]):
        self.ids = ids
        self.parquet = parquet  # a hash of the Parquet properties
        self.snapshot_id = -1  # the table's current snapshot when last asked (-1: none)
        self.root = str(facts["location"]).rstrip("/")
        self.encoding = ParquetEncoding.of_table(name, facts.get("parquet_codec"),
                                                 facts.get("parquet_level"))
        # Where the driver writes the table's files (None: it does not; not a local file
        # system, or a codec Arrow does not write).
        self.base = local_path(self.root) if str(facts["io"]).endswith("HadoopFileIO") \
            and self.encoding is not None else None
        self.schema = json.loads(facts["schema"])
        # Where the table's metadata (and so an append's manifest) goes.
        self.metadata_root = str(facts["metadata_path"] or f"{self.root}/metadata").rstrip("/")
        self.partition: tuple[str, str] | None = None  # (partition field, source column)
        self.unsupported: str | None = None  # a partitioning this writer does not handle
        fields = facts["partition_fields"]
        self.partitioned = bool(fields)
        if self.partitioned:
            if len(fields) != 1 or fields[0]["transform"] != "day":
                self.unsupported = str(facts["spec"])
            else:
                self.partition = (str(fields[0]["name"]), str(fields[0]["source"]))

    @property
    def format_version(self) -> int:
        return self.ids[3]


class ArrowAppender:
    """Appends Arrow tables to the Iceberg tables of a Spark session (module docstring)."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self._facts: dict[str, _TableFacts] = {}

    def _table(self, name: str) -> Any:
        return load_table(self.spark, name)

    def _commits(self, table: Any) -> Any:
        return driver_commits(self.spark, table)

    def _facts_of(self, name: str, table: Any) -> _TableFacts:
        uuid_text, schema_id, spec_id, version, parquet, snapshot = \
            str(self._commits(table).ids(table)).split()
        ids = (uuid_text, int(schema_id), int(spec_id), int(version))
        facts = self._facts.get(name)
        if facts is None or facts.ids != ids or facts.parquet != int(parquet):
            facts = self._facts[name] = _TableFacts(
                name, ids, int(parquet), json.loads(self._commits(table).facts(table)))
        facts.snapshot_id = int(snapshot)
        return facts

    def facts(self, name: str, refresh: bool = False) -> _TableFacts:
        """What this writer knows of Iceberg table ``name`` (its schema, its current
        snapshot); with ``refresh``, as the catalog has it now (other writers' commits
        included: a catalog round trip)."""
        table = self._table(name)
        if refresh:
            table.refresh()
        return self._facts_of(name, table)

    def live_files(self, name: str) -> str:
        """Table ``name``'s current snapshot (refreshed from the catalog) and live files with
        the deletes that apply to each (``DriverCommits.liveFilesAndDeletes``'s text)."""
        table = self._table(name)
        table.refresh()
        return str(self._commits(table).liveFilesAndDeletes(table))

    def columns(self, name: str) -> list[str]:
        """The column names of table ``name``, in its order."""
        return [f["name"] for f in self.facts(name).schema["fields"]]

    def key_schema(self, name: str, keys: list[str]) -> pa.Schema:
        """The Arrow schema of columns ``keys`` of table ``name`` (with their field ids)."""
        return file_schema(self.facts(name).schema, keys)

    def mark(self, name: str, properties: dict[str, str]) -> None:
        """Commit a snapshot of Iceberg table ``name`` that adds no file and has
        ``properties`` in its summary (works on any storage: nothing is written but
        Iceberg's own metadata)."""
        table = self._table(name)
        self._commits(table).mark(table, encode_properties(properties))

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
        commit = self.prepare_row_delta(name, rows, deleted, properties)
        if commit is None:
            return False
        commit()
        return True

    def prepare_row_delta(self, name: str, rows: pa.Table | None, deleted: pa.Table | None,
                          properties: dict[str, str]) -> StagedCommit[None] | None:
        """:meth:`row_delta` made ready: its files' writing and its commit (neither touches
        this writer's state: other threads may make them), ``None`` when this writer
        cannot."""
        table = self._table(name)
        facts = self._facts_of(name, table)
        if facts.base is None:
            return None
        try:
            partitions = [] if rows is None or not rows.num_rows else \
                self._partitions(facts, _with_ids(rows, facts.schema))
            if deleted is not None and deleted.num_rows:
                if facts.partitioned:
                    raise Unsupported("equality deletes of a partitioned table")
                deleted = _with_ids(deleted, facts.schema)
        except Unsupported:
            return None
        commits = self._commits(table)

        def write() -> tuple[str, str | None, int, int, str | None, str | None]:
            delete_location, delete_size, delete_rows, equality_ids = None, 0, 0, None
            if deleted is not None and deleted.num_rows:
                delete_location, delete_size = self._write(facts, "data/", deleted)
                delete_rows = deleted.num_rows
                equality_ids = ",".join(str(int(f.metadata[FIELD_ID])) for f in deleted.schema)
            files = []
            for partition, piece in partitions:
                location, size = self._write(
                    facts, f"data/{partition}/" if partition else "data/", piece)
                files.append(f"{location}\t{size}\t{partition}")
            # An append's manifest is written by the commit itself (format 2; see
            # commits), named apart from the ones Iceberg writes.
            manifest = f"{facts.metadata_root}/driver-{uuid.uuid4()}-m0.avro" \
                if delete_location is None and files and facts.format_version == 2 else None
            return ("\n".join(files), delete_location, delete_size, delete_rows,
                    equality_ids, manifest)

        def commit(written: tuple[str, str | None, int, int, str | None, str | None]) -> None:
            commits.commitFiles(table, *written, encode_properties(properties))

        return StagedCommit(write, commit)

    def position_delta(self, name: str, rows: pa.Table | None, deleted: pa.Table,
                       base_snapshot: int, properties: dict[str, str]
                       ) -> tuple[str | None, int, int] | None:
        """In one commit of unpartitioned Iceberg table ``name`` (``properties`` in its
        summary): the rows ``deleted`` names (a position delete file's rows: data file and
        position, sorted) deleted and ``rows`` added as one data file; validated against
        the commits after ``base_snapshot`` (see ``DriverCommits.commitPositionDelta``).
        Returns (the new data file's location, ``None`` without rows; the new snapshot's
        id; its parent's, -1 for none), ``None`` (nothing written) when this writer
        cannot."""
        commit = self.prepare_position_delta(name, rows, deleted, base_snapshot, properties)
        return None if commit is None else commit()

    def prepare_position_delta(self, name: str, rows: pa.Table | None, deleted: pa.Table,
                               base_snapshot: int, properties: dict[str, str]
                               ) -> StagedCommit[tuple[str | None, int, int]] | None:
        """:meth:`position_delta` made ready: its files' writing and its commit, which
        returns what :meth:`position_delta` does (other threads may make them), ``None``
        when this writer cannot."""
        table = self._table(name)
        facts = self._facts_of(name, table)
        if facts.base is None or facts.partitioned:
            return None
        try:
            rows = None if rows is None or not rows.num_rows else _with_ids(rows, facts.schema)
        except Unsupported:
            return None
        commits = self._commits(table)

        def write() -> tuple[str | None, list[str], list[str], list[str]]:
            files, location = [], None
            if rows is not None:
                location, size = self._write(facts, "data/", rows)
                files.append(f"{location}\t{size}\t")
            # One delete file per data file it deletes from: Iceberg applies such a file to
            # that data file alone (a file naming several applies to every file whose name
            # falls between them, which a reader then opens: reads and compaction slowed
            # down with the number of batches).
            deletes, referenced = [], []
            for data_file, positions in split_by_data_file(deleted):
                path, size = self._write(facts, "data/", positions)
                deletes.append(f"{path}\t{size}\t{positions.num_rows}")
                referenced.append(data_file)
            return location, files, deletes, referenced

        def commit(written: tuple[str | None, list[str], list[str], list[str]]
                   ) -> tuple[str | None, int, int]:
            location, files, deletes, referenced = written
            made, parent = str(commits.commitPositionDelta(
                table, "\n".join(files), "\n".join(deletes), "\n".join(referenced),
                base_snapshot, encode_properties(properties))).split()
            return location, int(made), int(parent)

        return StagedCommit(write, commit)

    @staticmethod
    def _write(facts: _TableFacts, relative: str, rows: pa.Table) -> tuple[str, int]:
        """Write ``rows`` as a new Parquet file under the table's ``relative`` folder (as
        its properties ask, :mod:`.parquet_encoding`), fsynced; its location (as Iceberg
        spells its own) and size."""
        assert facts.base is not None and facts.encoding is not None
        file_name = f"{uuid.uuid4()}.parquet"
        folder = facts.base / relative
        path = folder / file_name
        folder.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            facts.encoding.write(rows, f)
            f.flush()
            os.fsync(f.fileno())
        return check_location(f"{facts.root}/{relative}{file_name}"), path.stat().st_size

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


def split_by_data_file(deleted: pa.Table) -> list[tuple[str, pa.Table]]:
    """The rows of a position delete table (``file_path``, ``pos``) split by the data file
    they name, each part sorted by position: (its location, its rows)."""
    if not deleted.num_rows:
        return []
    deleted = deleted.sort_by([("file_path", "ascending"), ("pos", "ascending")])
    out, start = [], 0
    for entry in pc.value_counts(deleted.column("file_path")).to_pylist():  # in order
        out.append((entry["values"], deleted.slice(start, entry["counts"])))
        start += entry["counts"]
    return out


def append_rows(spark: SparkSession, appender: ArrowAppender | None, name: str, rows: pa.Table,
                properties: dict[str, str]) -> None:
    """Append a few ``rows`` (changestream's own bookkeeping) to Iceberg table ``name`` in
    one commit with ``properties`` in its summary: written by the driver where ``appender``
    can (a Spark job is slow even for one row), else by Spark."""
    if appender is not None and appender.append(name, rows, properties):
        return
    writer = spark.createDataFrame(rows.to_pylist(), spark.table(name).schema).writeTo(name)
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()
