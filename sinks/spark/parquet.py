"""The ``parquet`` landing: an append-only changelog per table, and a manifest of batches.

Layout under the base path::

    <db>/<table>/_commit_date=YYYY-MM-DD/b<batch>-<n>-part-....parquet   changelog files
    _changestream/manifest.jsonl                                       one line per batch
    _changestream/staging/                                             files being written

A batch is written to the staging folder first, its files are then moved into the table
folders under names that start with the batch number, and the batch counts as committed
once its manifest line (batch number, position, files, rows) is written and fsynced. On
open, files of a batch the manifest does not list (a crash in between) are deleted, and the
position of the last listed batch is returned: the router resumes there, so no batch is
written twice or lost. A transaction already in the manifest's position is skipped when it
comes again. The base path must be a file system the driver sees as local (local disk,
NFS); the executors must see it at the same path.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from changestream.changes import Position
from changestream.errors import SinkError

from . import positions
from .frames import TableRun, changelog_dataframe

_FILE = re.compile(r"^b(\d{10})-")


class ParquetLanding:
    def __init__(self, path: str | os.PathLike[str]):
        self.base = Path(path).expanduser().absolute()
        self.meta = self.base / "_changestream"
        self.manifest = self.meta / "manifest.jsonl"
        self.staging = self.meta / "staging"
        self.last_batch = 0
        self.position: Position | None = None

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
        for root, dirs, files in os.walk(self.base):
            if Path(root) == self.base and "_changestream" in dirs:
                dirs.remove("_changestream")
            for name in files:
                match = _FILE.match(name)
                if match and int(match.group(1)) > self.last_batch:
                    os.unlink(os.path.join(root, name))

    def land(self, runs: list[TableRun], position: Position, spark: Any) -> dict[str, int]:
        """Write ``runs`` as batch ``last_batch + 1`` and commit it with ``position``."""
        from pyspark.sql import functions as F

        batch = self.last_batch + 1
        stage = self.staging / f"b{batch:010d}"
        shutil.rmtree(stage, ignore_errors=True)
        moved: list[Path] = []
        rows: dict[str, int] = {}
        try:
            for n, run in enumerate(runs):
                df = changelog_dataframe(spark, run) \
                    .withColumn("_commit_date", F.to_date("_commit_ts"))
                out = stage / str(n)
                df.write.mode("overwrite").partitionBy("_commit_date").parquet(str(out))
                target = self.base / run.database / run.table
                for file in sorted(out.rglob("*.parquet")):
                    dest = target / file.parent.relative_to(out) / f"b{batch:010d}-{n}-{file.name}"
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(file, dest)
                    moved.append(dest)
                rows[run.name] = rows.get(run.name, 0) + len(run.changes)
            entry = {"batch": batch, "position": position.as_dict(),
                     "committed_at": dt.datetime.now(dt.UTC).isoformat(),
                     "rows": rows, "files": [str(p.relative_to(self.base)) for p in moved]}
            with open(self.manifest, "ab") as f:
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
