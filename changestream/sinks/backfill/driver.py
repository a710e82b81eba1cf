"""``run_backfill``: archived binlog files into an Iceberg warehouse's changelog and mirror
tables, decoded in parallel (docs/sinks.md, "Backfilling archived binlogs").

The files are cut into units (:mod:`.planning`); processes of this machine (a local Spark
master) or a Spark job on the executors decode them into Arrow frames staged as files
(:mod:`.decode_jobs`, :mod:`.decoding`; units a killed run staged are not decoded again);
the driver lands them in binlog order as they appear (:mod:`.landing`: each table's
changelog and mirror about every million rows, by commits the driver writes, and before a
DDL the mirrors follow or a changed shape); the last position is committed as the
warehouse's, where ``changestream run`` goes on. A killed backfill run again with the same
files lands the same tables."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changestream.model.changes import Position
from changestream.model.errors import ChangestreamError, ConfigError, SinkError
from changestream.model.modes import HISTORY_MODES
from changestream.model.record import record
from changestream.sinks.spark import positions
from changestream.sinks.spark.iceberg.ddl import mirrored_ddl
from changestream.sinks.spark.session import proleptic_parquet
from changestream.sinks.spark.types import table_mappings
from changestream.transactions.filters import ChangeFilter

from .decode_jobs import DECODE_PLACES, decode_job, first_line
from .decoding import DdlItem, StagedPiece, UnitManifest, read_manifest
from .landing import BackfillLanding, StagedRun
from .names import UnitNames, files_flavor_and_names, record_history
from .planning import BackfillUnit, plan_digest, plan_units

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("changestream.backfill")

#: A table's changelog and mirror take its rows once this many have gathered (and before a
#: DDL, a change of shape, and at the end): an Iceberg commit each, and the rows in memory.
CHANGELOG_COMMIT_ROWS = 1_000_000

#: While the next unit is still being decoded, tables that have gathered this many rows
#: are landed rather than waiting for ``commit_rows``.
IDLE_COMMIT_ROWS = 100_000


@record(frozen=True)
class BackfillSettings:
    """How a backfill cuts and stages its work."""

    split_bytes: int = 256 << 20  # MySQL files bigger than this are cut into ranges
    chunk_changes: int = 50_000  # changes per staged piece (bounds a task's memory)
    staging: str | None = None  # default: <warehouse>/_changestream_backfill/<plan digest>
    keep_staging: bool = False
    change_filter: ChangeFilter | None = None  # the tables and columns landed
    commit_rows: int = CHANGELOG_COMMIT_ROWS  # a table's rows per commit
    # Column names for files that do not log them (binlog_row_metadata=MINIMAL): learnt
    # from the files' DDL ("auto": when the files' first TABLE_MAPs lack names).
    schema_history: str = "auto"
    shadow_server: str | None = None  # the shadow server's program (None: on the PATH)
    # Where units are decoded: "auto" (processes of this machine on a local master, else
    # the executors), "local" or "spark" (decode_jobs.py).
    decode_on: str = "auto"

    def __post_init__(self) -> None:
        if self.decode_on not in DECODE_PLACES:
            raise ConfigError(f"backfill: --decode-on {self.decode_on!r} is not one of "
                              f"{', '.join(DECODE_PLACES)}")
        if self.schema_history not in HISTORY_MODES:
            raise ConfigError(f"backfill: --schema-history {self.schema_history!r} is not "
                              f"one of {', '.join(HISTORY_MODES)}")


@record
class BackfillReport:
    """What a backfill did."""

    files: int = 0
    units: int = 0
    units_decoded: int = 0  # by this run (the rest were staged by an earlier one)
    transactions: int = 0
    rows: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # rows landed per source table
    position: Position | None = None
    decode_seconds: float = 0.0  # summed over the tasks
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"files": self.files, "units": self.units, "units_decoded": self.units_decoded,
                "transactions": self.transactions, "rows": self.rows, "tables": self.tables,
                "position": self.position.as_dict() if self.position else None,
                "decode_seconds": round(self.decode_seconds, 2),
                "seconds": round(self.seconds, 2)}


Progress = Callable[[UnitManifest, BackfillUnit], None]


def run_backfill(spark: SparkSession, catalog: str, warehouse: str, paths: list[str],
                 settings: BackfillSettings = BackfillSettings(),
                 progress: Progress | None = None) -> BackfillReport:
    """Backfill ``paths`` into Iceberg catalog ``catalog`` (warehouse folder
    ``warehouse``); see the module docstring."""
    started = time.perf_counter()
    units = plan_units(paths, settings.split_bytes)
    only = settings.change_filter
    scope = repr((only.include, only.exclude, only.exclude_columns)) if only else ""
    staging = settings.staging or str(Path(warehouse) / "_changestream_backfill" /
                                      plan_digest(units, scope))
    Path(staging).mkdir(parents=True, exist_ok=True)
    report = BackfillReport(files=len({u.path for u in units}), units=len(units))
    todo = [u for u in units if read_manifest(staging, u.index) is None]
    job = decode_job(spark, settings.decode_on, todo, staging, settings.chunk_changes,
                     settings.change_filter, _unit_names(todo, units, settings))
    report.units_decoded = len(job.units)
    job.start()  # its processes start (their imports) while the warehouse opens
    landing = BackfillLanding(catalog)
    walk = _Walk(spark, landing, settings.commit_rows)
    pending_xa: dict[str, str] = {}
    last: UnitManifest | None = None
    try:
        proleptic_parquet(spark)
        try:
            stored = landing.open(spark)
        except Exception as exc:
            raise SinkError(f"backfill: cannot open warehouse {warehouse}: {exc}") from exc
        for unit in units:
            if not job.ready(unit):
                walk.idle(IDLE_COMMIT_ROWS)
            manifest = job.wait_for(unit)
            _follow_xa(pending_xa, manifest, unit)
            try:
                walk.unit(manifest)
            except (ChangestreamError, KeyboardInterrupt):
                raise
            except Exception as exc:  # Spark's, through Py4J: a line, not a Java trace
                raise SinkError(f"backfill: landing {unit.describe()}: "
                                f"{first_line(exc)}") from exc
            report.transactions += manifest.transactions
            report.rows += manifest.rows
            report.decode_seconds += manifest.seconds
            if progress is not None:
                progress(manifest, unit)
            last = manifest
        try:
            walk.finish()
            landing.tables.commits.drain()  # every commit made before the position's
        except ChangestreamError:
            raise
        except Exception as exc:
            raise SinkError(f"backfill: landing the mirrors: {first_line(exc)}") from exc
    finally:
        job.stop()
        landing.close()  # nothing under way after a failure either
    assert last is not None and last.end is not None
    end = replace(last.end, pending_xa=pending_xa)
    if positions.is_after(end, stored):
        landing.commit_batch(spark, 0, end)
    report.position = end if positions.is_after(end, stored) else stored
    report.tables = walk.rows
    if not settings.keep_staging:
        shutil.rmtree(staging, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def _unit_names(todo: list[BackfillUnit], units: list[BackfillUnit],
                settings: BackfillSettings) -> dict[int, UnitNames]:
    """The schema history each unit to decode needs to name columns the files do not
    (none when they do, or with ``schema_history="off"``)."""
    if not todo or settings.schema_history == "off":
        return {}
    paths = list(dict.fromkeys(u.path for u in units))
    flavor, named = files_flavor_and_names(paths)
    if named and settings.schema_history == "auto":
        return {}
    began = time.perf_counter()
    recorded = record_history(paths, flavor, settings.shadow_server)
    logger.info("backfill: schema history from the files' DDL: %d changes in %.1f s",
                len(recorded.changes), time.perf_counter() - began)
    return {u.index: recorded.for_unit(u) for u in todo}


def _follow_xa(pending: dict[str, str], manifest: UnitManifest, unit: BackfillUnit) -> None:
    """XA transactions prepared in one unit and resolved in a later one: a rollback is
    fine (nothing was delivered), a commit is refused (its rows are in the other unit)."""
    for xid, verb, file, offset in manifest.unmatched_xa:
        where = pending.pop(xid, None)
        if where is not None and verb.upper() == "COMMIT":
            raise SinkError(f"backfill: XA transaction {xid} was prepared at {where} and "
                            f"committed at {file}:{offset}, in another unit ({unit.describe()});"
                            " a backfill decodes units apart and cannot join them: land these "
                            "files with changestream run --source file:// instead")
    pending.update(manifest.pending_xa)


class _Walk:
    """Lands the staged items of each unit in binlog order (see the module docstring)."""

    def __init__(self, spark: SparkSession, landing: BackfillLanding, commit_rows: int):
        self.spark = spark
        self.commit_rows = commit_rows
        self.landing = landing
        self.changelog: dict[tuple[str, str], StagedRun] = {}  # this unit's, per table
        self.mirror: dict[tuple[str, str], StagedRun] = {}  # across units, per table
        self.signatures: dict[tuple[str, str], tuple[object, ...]] = {}
        self.rows: dict[str, int] = {}

    def unit(self, manifest: UnitManifest) -> None:
        for item in manifest.items:
            if isinstance(item, DdlItem):
                self._ddl(item)
            else:
                self._piece(item)

    def finish(self) -> None:
        self._flush_changelogs()
        for key in list(self.mirror):
            self._flush_mirror(key)

    def idle(self, rows: int) -> None:
        """Land the tables that have gathered ``rows`` rows or more: the next unit is not
        decoded yet, and landing now overlaps the decoding (a commit a unit would cost
        more than it saves)."""
        for key in [k for k, run in self.changelog.items() if run.rows >= rows]:
            self._flush_changelog(key)
        for key in [k for k, run in self.mirror.items() if run.rows >= rows]:
            self._flush_mirror(key)

    def _piece(self, piece: StagedPiece) -> None:
        key = (piece.database, piece.table)
        if self.signatures.get(key) != piece.signature:
            self._flush_changelog(key)
            self._flush_mirror(key)
            self.signatures[key] = piece.signature
        for runs in (self.changelog, self.mirror):
            run = runs.get(key)
            if run is None:
                schema: Any = piece.schema
                run = runs[key] = StagedRun(piece.database, piece.table, schema,
                                            table_mappings(schema))
            run.pieces.append(piece)
        if self.changelog[key].rows >= self.commit_rows:
            self._flush_changelog(key)
        if self.mirror[key].rows >= self.commit_rows:
            self._flush_mirror(key)

    def _ddl(self, item: DdlItem) -> None:
        landing, change = self.landing, item.change
        landing.note_ddl(change)
        if not mirrored_ddl(change):
            return
        self._flush_changelogs()
        for key in list(self.mirror):
            self._flush_mirror(key)
        self.signatures.clear()  # a table renamed or dropped starts its runs again
        if landing.ddl_done is not None and not positions.is_after(item.position,
                                                                   landing.ddl_done):
            return
        landing.apply_ddl(self.spark, change, item.position)
        landing.record_ddl(self.spark, change, item.position)

    def _flush_changelogs(self) -> None:
        for key in list(self.changelog):
            self._flush_changelog(key)

    def _flush_changelog(self, key: tuple[str, str]) -> None:
        run = self.changelog.pop(key, None)
        if run is not None:
            landed = self.landing.land_changelog(self.spark, run)
            self.rows[run.name] = self.rows.get(run.name, 0) + landed

    def _flush_mirror(self, key: tuple[str, str]) -> None:
        run = self.mirror.pop(key, None)
        if run is not None:
            self.landing.land_mirror(self.spark, run)
