"""The ``parquet`` landing: an append-only changelog per table, and a manifest of batches.

Layout under the base path::

    <db>/<table>/_commit_date=YYYY-MM-DD/b<batch>-<n>-part-....parquet   changelog files
    <db>/<table>/_commit_date=YYYY-MM-DD/b<batch>-marks-part-....parquet DDL marks
    _changestream/manifest.jsonl                                       one line per batch
    _changestream/staging/                                             files being written

A batch is written to the staging folder first, its files are then moved into the table
folders under names that start with the batch number, and the batch counts as committed
once its manifest line (batch number, position, files, rows, marks) is written and fsynced. On
open, files of a batch the manifest does not list (a crash in between) are deleted, and the
position of the last listed batch is returned: the router resumes there, so no batch is
written twice or lost. A transaction already in the manifest's position is skipped when it
comes again. The base path must be a file system the driver sees as local (local disk,
NFS); the executors must see it at the same path.

DDL that changes which tables exist or what they hold leaves a mark in the changelogs of
the tables the landing has (:meth:`ParquetLanding.ddl_marks`): a row with ``_op``
``truncate`` (TRUNCATE TABLE), ``drop`` (DROP TABLE, and DROP DATABASE for every table folder
under the database) or ``rename`` (RENAME TABLE, ALTER TABLE ... RENAME, in the old name's
folder; the changelog goes on under the new name, whose rows carry it). A mark holds the
change metadata of the DDL (its coordinates order it among the rows) and no data columns;
the marks of a batch are written in one Spark job, into files named and listed like the
batch's row files, so they are committed, or removed on open, with them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from changestream.decoding.ddl import TableName, parse_ddl, strip_comments
from changestream.model.changes import Change, Position, TransactionPart, ddl_database
from changestream.model.errors import SinkError

from . import positions
from .frames import TableRun, changelog_dataframe, metadata_arrays, to_dataframe
from .stages import StageClock
from .types import METADATA, arrow_schema

_FILE = re.compile(r"^b(\d{10})-")
# A temporary table's DROP (MariaDB logs it, often as ``DROP /*!40005 TEMPORARY */ TABLE``)
# leaves a permanent table of the same name alone.
_TEMPORARY = re.compile(r"^\s*DROP\s+TEMPORARY\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
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

    def ddl_marks(self, parts: Iterable[TransactionPart]) -> list[Mark]:
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

    def _stage(self, df: Any, out: Path, batch: int, tag: str, folders: dict[str, Path],
               moved: list[Path]) -> None:
        """Write ``df`` under ``out`` partitioned by ``_commit_date``, and move its files into
        the table folder ``folders[""]``; or, for marks, first by ``_k`` (the number of
        their table), each ``_k=N`` folder's files into ``folders["_k=N"]``."""
        from pyspark.sql import functions as F

        partitions = ["_commit_date"] if "" in folders else ["_k", "_commit_date"]
        df.withColumn("_commit_date", F.to_date("_commit_ts")) \
            .write.mode("overwrite").partitionBy(*partitions).parquet(str(out))
        for file in sorted(out.rglob("*.parquet")):
            relative = file.parent.relative_to(out)
            if "" in folders:
                target = folders[""]
            else:
                target = folders[relative.parts[0]]
                relative = relative.relative_to(relative.parts[0])
            dest = target / relative / f"b{batch:010d}-{tag}-{file.name}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(file, dest)
            moved.append(dest)

    def _marks_dataframe(self, spark: Any, marks: list[Mark]) -> tuple[Any, dict[str, Path]]:
        """The mark rows (change metadata only) with ``_k``, the number of their table."""
        import pyarrow as pa
        from pyspark.sql import types as T

        tables = list(dict.fromkeys((m.database, m.table) for m in marks))
        number = {table: k for k, table in enumerate(tables)}
        arrays = metadata_arrays([m.change for m in marks], [m.op for m in marks])
        arrays.append(pa.array([number[(m.database, m.table)] for m in marks], pa.int32()))
        schema = arrow_schema(METADATA).append(pa.field("_k", pa.int32()))
        df = to_dataframe(spark, pa.Table.from_arrays(arrays, schema=schema), METADATA,
                          (("_k", T.IntegerType()),)).coalesce(1)  # a file per table and day
        return df, {f"_k={k}": self.base / d / t for (d, t), k in number.items()}

    def land(self, runs: list[TableRun], position: Position, spark: Any,
             parts: Iterable[TransactionPart] = ()) -> dict[str, int]:
        """Write ``runs`` (and the marks the DDL in ``parts`` leaves) as batch
        ``last_batch + 1`` and commit it with ``position``."""
        batch = self.last_batch + 1
        stage = self.staging / f"b{batch:010d}"
        shutil.rmtree(stage, ignore_errors=True)
        moved: list[Path] = []
        rows: dict[str, int] = {}
        try:
            marks = self.ddl_marks(parts)  # before this batch's files make folders
            for n, run in enumerate(runs):
                with self.clock("changelog arrow"):
                    df = changelog_dataframe(spark, run)
                with self.clock("changelog write"):
                    self._stage(df, stage / str(n), batch, str(n),
                                {"": self.base / run.database / run.table}, moved)
                rows[run.name] = rows.get(run.name, 0) + run.rows
            entry = {"batch": batch, "position": position.as_dict(),
                     "committed_at": dt.datetime.now(dt.UTC).isoformat(), "rows": rows}
            if marks:
                df, folders = self._marks_dataframe(spark, marks)
                self._stage(df, stage / "marks", batch, "marks", folders, moved)
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
