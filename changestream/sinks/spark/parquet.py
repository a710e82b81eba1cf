"""The ``parquet`` landing: an append-only changelog per table, and a manifest of batches::

    <db>/<table>/_commit_date=YYYY-MM-DD/b<batch>-<n>-part-....parquet   changelog files
    <db>/<table>/_commit_date=YYYY-MM-DD/b<batch>-marks-part-....parquet DDL marks
    _changestream/manifest.jsonl                                       one line per batch
    _changestream/staging/                                             files being written

A batch counts once its files and its manifest line are fsynced; ``open()`` removes files
the manifest does not list and returns the last position (docs/sinks.md, "Landing modes"
and "DDL in the parquet changelog")."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from changestream.decoding.ddl import TableName, parse_ddl, strip_comments
from changestream.model.changes import (
    Change,
    EncodedRun,
    Position,
    TransactionPart,
    ddl_database,
)
from changestream.model.errors import SinkError
from changestream.model.record import record

from . import positions
from .frames import TableRun, metadata_arrays
from .stages import StageClock
from .types import (
    METADATA,
    PARQUET_DICTIONARY_PAGE_BYTES,
    FieldMapping,
    arrow_schema,
    spark_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_FILE = re.compile(r"^b(\d{10})-")
#: Where Spark's Parquet writer keeps the Spark schema of a file, and reads it back from.
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
#: The Spark version a file was written for: Spark 3+ reads the dates and times of a file
#: that names 3.0 or later as proleptic Gregorian (what Arrow writes), with no
#: ``datetimeRebaseMode`` setting needed by the reader.
SPARK_VERSION_KEY = b"org.apache.spark.version"
#: Hive's folder for rows whose partition value is NULL (what Spark writes them to).
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# A temporary table's DROP (MariaDB logs it, often as ``DROP /*!40005 TEMPORARY */ TABLE``)
# leaves a permanent table of the same name alone.
_TEMPORARY = re.compile(r"^\s*DROP\s+TEMPORARY\b", re.IGNORECASE)


@record(frozen=True)
class Mark:
    """A changelog row saying what a DDL did to a table: ``op`` is ``truncate``, ``drop``
    or ``rename``; ``change`` is the DDL (its metadata is the row's)."""

    database: str
    table: str
    op: str
    change: Change

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


class ParquetLanding:
    def __init__(self, path: str | os.PathLike[str]):
        self.base = Path(path).expanduser().absolute()
        self.meta = self.base / "_changestream"
        self.manifest = self.meta / "manifest.jsonl"
        self.staging = self.meta / "staging"
        self.last_batch = 0
        self.position: Position | None = None
        self.clock = StageClock()

    def open(self) -> Position | None:
        try:
            self.meta.mkdir(parents=True, exist_ok=True)
            entries = self._read_manifest()
            if entries:
                self.last_batch = int(entries[-1]["batch"])
                self.position = positions.decode(json.dumps(entries[-1]["position"]))
            self._remove_uncommitted()
        except OSError as exc:
            raise SinkError(f"spark sink (parquet): cannot open {self.base}: {exc}") from None
        return self.position

    def _read_manifest(self) -> list[dict[str, Any]]:
        if not self.manifest.exists():
            return []
        entries = []
        data = self.manifest.read_bytes()
        good = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # a torn last line: its batch was never acknowledged
            entries.append(json.loads(line))
            good += len(line)
        if good != len(data):
            with open(self.manifest, "r+b") as f:
                f.truncate(good)
        return entries

    def _remove_uncommitted(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        emptied: set[Path] = set()
        for root, dirs, files in os.walk(self.base):
            if Path(root) == self.base and "_changestream" in dirs:
                dirs.remove("_changestream")
            for name in files:
                match = _FILE.match(name)
                if match and int(match.group(1)) > self.last_batch:
                    os.unlink(os.path.join(root, name))
                    emptied.add(Path(root))
        # Folders only the removed files made (a table first seen in that batch) go too.
        for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
            while folder != self.base and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent

    def _tables(self, database: str) -> list[str]:
        """The table folders the landing has under ``database``."""
        folder = self.base / database
        if not database or not folder.is_dir() or folder == self.meta:
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_dir())

    def ddl_marks(self, parts: Iterable[TransactionPart | EncodedRun]) -> list[Mark]:
        """The marks the DDL in ``parts`` leaves, in binlog order: TRUNCATE TABLE gives
        ``truncate``; DROP TABLE ``drop`` for each table it names, DROP DATABASE for every
        table the landing has in it; RENAME TABLE and ALTER TABLE ... RENAME ``rename`` on
        the old name. Only tables the landing has get one: a folder, or rows earlier in
        ``parts`` (a rename passes that on to the new name)."""
        seen: set[tuple[str, str]] = set()
        marks: list[Mark] = []

        def has(table: tuple[str, str]) -> bool:
            return table in seen or (self.base / table[0] / table[1]).is_dir()

        for part in parts:
            if isinstance(part, EncodedRun):  # a decode worker's rows: tables it has
                seen.update((database, table) for database, table, _ in part.tables or ())
                continue
            for change in part.changes:
                if change.op != "ddl":
                    if change.schema is not None:
                        seen.add((change.schema.database, change.schema.table))
                    continue
                ddl = parse_ddl(change.sql or "", ddl_database(change))
                if ddl is None:
                    continue
                default = ddl_database(change) or ""
                targets: list[tuple[tuple[str, str], str]] = []
                if ddl.kind == "truncate_table":
                    targets = [(_key(t, default), "truncate") for t in ddl.tables]
                elif ddl.kind == "drop_table" and \
                        not _TEMPORARY.match(strip_comments(change.sql or "")):
                    targets = [(_key(t, default), "drop") for t in ddl.tables]
                elif ddl.kind == "drop_database":
                    database = ddl.database or default
                    tables = {t for d, t in seen if d == database} | set(self._tables(database))
                    targets = [((database, t), "drop") for t in sorted(tables)]
                for table, op in targets:
                    if has(table):
                        marks.append(Mark(table[0], table[1], op, change))
                for old, new in ddl.renames:  # in order: RENAME TABLE a TO b, b TO c
                    if has(_key(old, default)):
                        marks.append(Mark(*_key(old, default), "rename", change))
                        seen.add(_key(new, default))
        return marks

    def _write_days(self, table: pa.Table, fields: tuple[FieldMapping, ...], stage: Path,
                    target: Path, name: str, moved: list[Path]) -> None:
        """Write ``table`` (whose columns are ``fields``) as one Parquet file per UTC day of
        ``_commit_ts`` into ``stage``, fsync each, then move it to
        ``target/_commit_date=DAY/name``."""
        # Written by the driver with Arrow, not by a Spark job: the batch is already an
        # Arrow table here, and a Spark write of it is a job and a conversion of Arrow to
        # rows and back. The files are what Spark's own writer makes (its schema and version
        # in the footer, snappy, Hive-style folders, dates proleptic Gregorian), so readers
        # ask for no rebase mode.
        from pyspark import __version__ as spark_version

        metadata = {SPARK_SCHEMA_KEY: spark_schema(fields).json().encode(),
                    SPARK_VERSION_KEY: spark_version.encode()}
        table = table.replace_schema_metadata(metadata)
        days = pc.cast(table.column("_commit_ts"), pa.date32())
        unique = pc.unique(days).to_pylist()
        for day in unique:
            rows = table if len(unique) == 1 else \
                table.filter(pc.is_null(days) if day is None else pc.equal(days, day))
            folder = f"_commit_date={NULL_PARTITION if day is None else day.isoformat()}"
            staged = stage / folder / name
            staged.parent.mkdir(parents=True, exist_ok=True)
            with open(staged, "wb") as f:
                pq.write_table(rows, f, compression="snappy",
                               dictionary_pagesize_limit=PARQUET_DICTIONARY_PAGE_BYTES)
                f.flush()
                os.fsync(f.fileno())
            dest = target / folder / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, dest)
            moved.append(dest)

    def _marks_table(self, marks: list[Mark]) -> pa.Table:
        """The mark rows: change metadata only."""
        arrays = metadata_arrays([m.change for m in marks], [m.op for m in marks])
        return pa.Table.from_arrays(arrays, schema=arrow_schema(METADATA))

    def land(self, runs: list[TableRun], position: Position, spark: SparkSession | None = None,
             parts: Iterable[TransactionPart | EncodedRun] = ()) -> dict[str, int]:
        """Write ``runs`` (and the marks the DDL in ``parts`` leaves) as batch
        ``last_batch + 1`` and commit it with ``position`` (``spark`` is not needed: the
        files are written with Arrow)."""
        batch = self.last_batch + 1
        stage = self.staging / f"b{batch:010d}"
        shutil.rmtree(stage, ignore_errors=True)
        moved: list[Path] = []
        rows: dict[str, int] = {}
        try:
            marks = self.ddl_marks(parts)  # before this batch's files make folders
            for n, run in enumerate(runs):
                with self.clock("changelog arrow"):
                    table = run.changelog()
                with self.clock("changelog write"):
                    self._write_days(table, METADATA + run.fields, stage / str(n),
                                     self.base / run.database / run.table,
                                     f"b{batch:010d}-{n}-part-00000.snappy.parquet", moved)
                rows[run.name] = rows.get(run.name, 0) + run.rows
            entry = {"batch": batch, "position": position.as_dict(),
                     "committed_at": dt.datetime.now(dt.UTC).isoformat(), "rows": rows}
            if marks:
                by_table: dict[tuple[str, str], list[Mark]] = {}
                for m in marks:
                    by_table.setdefault((m.database, m.table), []).append(m)
                for k, ((database, table_name), group) in enumerate(by_table.items()):
                    self._write_days(self._marks_table(group), METADATA, stage / f"marks{k}",
                                     self.base / database / table_name,
                                     f"b{batch:010d}-marks-{k}.snappy.parquet", moved)
                counted: dict[str, int] = {}
                for m in marks:
                    counted[m.name] = counted.get(m.name, 0) + 1
                entry["marks"] = counted
            entry["files"] = [str(p.relative_to(self.base)) for p in moved]
            with self.clock("batch commit"), open(self.manifest, "ab") as f:
                f.write(json.dumps(entry, separators=(",", ":")).encode() + b"\n")
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            for path in moved:
                path.unlink(missing_ok=True)
            raise
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        self.last_batch = batch
        self.position = position
        return rows


def _key(name: TableName, default: str) -> tuple[str, str]:
    return (name.database or default, name.table)
