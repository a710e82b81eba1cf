"""The ``iceberg`` landing: per source table a changelog table and a mirror table.

Source table ``db.t`` lands in ``<catalog>.db.t__changelog`` (every change, appended,
partitioned by day of commit) and ``<catalog>.db.t`` (the mirror: the table as it is at the
source), both created on first sight and evolved with the source's shape. Every commit
carries ``changestream.position`` in its snapshot summary, and a batch ends with a snapshot
of ``<catalog>._changestream.batches``, whose position ``open()`` returns: after a crash
each table skips what its own last commit holds (docs/sinks.md, "Landing modes")."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from changestream.decoding.ddl import renamed_columns
from changestream.model.changes import Change, Position
from changestream.model.errors import SinkError
from changestream.sinks.spark.iceberg.defaults import added_column_defaults
from changestream.sinks.spark.stages import StageClock

from .. import positions
from ..frames import TableRun, frame_dataframe
from ..positions import PROPERTY
from ..types import METADATA, METADATA_NAMES, FieldMapping, columns_json, spark_schema
from .columns import iceberg_type, retyped, widens_in_place
from .commits import create_table, driver_commits
from .ddl import (
    CHANGELOG_SUFFIX,
    CONTROL_NAMESPACE,
    CONTROL_TABLE_PROPERTIES,
    DDL_TABLE,
    MIRROR_TABLE_PROPERTIES,
    MirroredDdl,
)
from .ddl import quote as _q
from .files import ArrowAppender, load_table, positioned_snapshot
from .mirror_landing import MirrorLanding
from .mirror_positions import MirrorPositions


def control_tables(namespace: str = CONTROL_NAMESPACE) -> tuple[str, str]:
    """changestream's own tables in a catalog (``namespace.table``, quoted): a snapshot per
    batch with its position, and a row per DDL applied to the mirrors (made at the first)."""
    return f"{_q(namespace)}.`batches`", f"{_q(namespace)}.{_q(DDL_TABLE)}"


#: The batch id in the summary of a control table's snapshot.
BATCH_PROPERTY = "changestream.batch"

logger = logging.getLogger("changestream.sinks.spark")


class IcebergLanding(MirroredDdl, MirrorLanding):
    """The landing (see the module docstring); DDL the mirrors follow is
    :class:`changestream.sinks.spark.iceberg.ddl.MirroredDdl`'s, the mirrors'
    landing :class:`changestream.sinks.spark.iceberg.mirror_landing.MirrorLanding`'s."""

    def __init__(self, catalog: str = "changestream", append_new_keys: bool = True,
                 arrow_appends: bool = True, position_deletes: bool = True,
                 catalog_renames: bool = False, control_namespace: str = CONTROL_NAMESPACE):
        self.catalog = catalog
        self.control_namespace = control_namespace
        self.control_tables = control_tables(control_namespace)
        self.catalog_renames = catalog_renames
        self.append_new_keys = append_new_keys
        self.arrow_appends = arrow_appends
        self.position_deletes = position_deletes
        self._appender: ArrowAppender | None = None
        self._positions: MirrorPositions | None = None
        self.control = f"{_q(catalog)}.{self.control_tables[0]}"
        # One row per DDL applied to the mirrors: a batch landed again after a crash skips
        # everything up to the last one (the state of the tables is already past it).
        self.ddl_log = f"{_q(catalog)}.{self.control_tables[1]}"
        self.ddl_done: Position | None = None
        self.committed: dict[str, Position | None] = {}  # per Iceberg table
        self.existing: set[str] = set()  # Iceberg tables known to exist
        self.owned: set[str] = set()  # Iceberg tables checked to be changestream's
        self._in_ddl = False
        self.schemas: dict[str, dict[str, str]] = {}  # column -> type, per Iceberg table
        self.renames: dict[str, dict[str, str]] = {}  # source table -> {new: old} from DDL
        # source table -> {added column: Spark SQL literal its existing rows get}, from DDL
        self.defaults: dict[str, dict[str, str | None]] = {}
        self.position: Position | None = None
        self.clock = StageClock()
        self._shared: tuple[pa.Table, Any] | None = None  # rows -> their DataFrame
        self.insert_gaps: dict[str, set[str]] = {}  # source table -> columns inserts lack

    # -- names and state -------------------------------------------------------------

    @staticmethod
    def table_names(run: TableRun) -> tuple[str, str]:
        """``run``'s mirror and changelog as ``namespace.table``, quoted, in no catalog."""
        return (f"{_q(run.database)}.{_q(run.table)}",
                f"{_q(run.database)}.{_q(run.table + CHANGELOG_SUFFIX)}")

    def mirror_name(self, run: TableRun) -> str:
        return f"{_q(self.catalog)}.{self.table_names(run)[0]}"

    def changelog_name(self, run: TableRun) -> str:
        return f"{_q(self.catalog)}.{self.table_names(run)[1]}"

    def _exists(self, spark: Any, name: str) -> bool:
        if name in self.existing:
            return True
        found = bool(spark.catalog.tableExists(name))
        if found and not self._in_ddl:
            # a catalog lookup per table and batch was a tenth of a batch's time
            self.existing.add(name)
        return found

    def apply_ddl(self, spark: Any, change: Change, position: Position | None) -> None:
        self.existing.clear()  # the DDL may drop or rename tables: no cache meanwhile
        self._in_ddl = True
        try:
            super().apply_ddl(spark, change, position)
        finally:
            self._in_ddl = False

    def _stored_position(self, spark: Any, name: str) -> Position | None:
        """The position of the newest commit that has one, through Iceberg's Java API (a
        query of the metadata tables is a Spark job per table)."""
        snapshot = positioned_snapshot(load_table(spark, name), PROPERTY)
        return None if snapshot is None else \
            positions.decode(str(snapshot.summary().get(PROPERTY)))

    def open(self, spark: Any) -> Position | None:
        self.committed.clear()
        self.schemas.clear()
        self.existing.clear()
        if not self._exists(spark, self.control):
            create_table(spark, self.catalog, self.control_namespace, "batches",
                         columns_json((("batch", "bigint"), ("position", "string"),
                                       ("committed_at", "timestamp"))),
                         CONTROL_TABLE_PROPERTIES)
            self.position = None
        else:
            self.position = self._stored_position(spark, self.control)
        self.ddl_done = self._stored_position(spark, self.ddl_log) \
            if self._exists(spark, self.ddl_log) else None
        # The class that makes the driver's commits and tables is compiled now (once per
        # JVM), a start's cost, not the first batch's.
        driver_commits(spark, load_table(spark, self.control))
        return self.position

    def landed_to(self, spark: Any) -> Position | None:
        """The position of the last batch landed, as the catalog has it now."""
        return self._stored_position(spark, self.control)

    def _committed(self, spark: Any, name: str) -> Position | None:
        if name not in self.committed:
            self.committed[name] = self._stored_position(spark, name) \
                if self._exists(spark, name) else None
            logger.debug("spark sink: %s holds position %s", name, self.committed[name])
        return self.committed[name]

    # -- schema ----------------------------------------------------------------------

    def note_ddl(self, change: Change) -> None:
        """Remember column renames a DDL statement names, to tell them from drop + add, and
        the values it gives existing rows in the columns it adds."""
        if not change.sql or not change.database:
            return
        table = f"{change.database}.{change.table or ''}"
        renamed = renamed_columns(change.sql)
        if renamed:
            self.renames.setdefault(table, {}).update(renamed)
        commit_ts = change.transaction.commit_ts if change.transaction else None
        added = added_column_defaults(change.sql, commit_ts)
        if added:
            self.defaults.setdefault(table, {}).update(added)

    def _table_columns(self, spark: Any, name: str) -> dict[str, str]:
        if name not in self.schemas:
            fields = spark.table(name).schema.fields
            self.schemas[name] = {f.name: f.dataType.simpleString() for f in fields}
        return self.schemas[name]

    def _create(self, spark: Any, name: str, run: TableRun, fields: tuple[FieldMapping, ...],
                changelog: bool) -> None:
        """Create mirror or changelog ``name`` of ``run`` with ``fields`` (the changelog
        partitioned by day of ``_commit_ts``), as ``CREATE TABLE ... USING iceberg`` with
        the tables' properties would, through the catalog's own call (Spark's SQL parse
        and plan of it was half its time)."""
        create_table(spark, self.catalog, run.database,
                     run.table + (CHANGELOG_SUFFIX if changelog else ""),
                     spark_schema(fields).json(), MIRROR_TABLE_PROPERTIES,
                     "_commit_ts" if changelog else None)
        # What Spark would read back from the new table (a lookup of its schema cost a
        # catalog round trip per table in the next batch).
        self.schemas[name] = {f.name: iceberg_type(f.spark_type) for f in fields}
        self.committed[name] = None  # a new table holds nothing yet
        if not self._in_ddl:
            self.existing.add(name)  # no catalog lookup for it in the next batch

    def _evolve(self, spark: Any, name: str, run: TableRun, changelog: bool) -> None:
        """Make table ``name`` hold ``run``'s columns: renames (named by DDL in this run of
        the sink, else a vanished column at the same place with the same type), added
        columns, widened types; the mirror also drops columns the source dropped (the
        changelog keeps them, NULL from then on)."""
        fields = (METADATA if changelog else ()) + run.fields
        if not self._exists(spark, name):
            self._create(spark, name, run, fields, changelog)
            return
        self._check_owned(spark, name)
        have = self._table_columns(spark, name)
        want = {f.name: iceberg_type(f.spark_type) for f in fields}
        if {k: iceberg_type(v) for k, v in have.items()} == want:
            return
        hints = self.renames.get(run.name, {})
        order = [c for c in have if c not in METADATA_NAMES]
        wanted = [f.name for f in run.fields]
        statements = []
        for i, col in enumerate(wanted):
            if col in have:
                continue
            old = hints.get(col)
            if old is None and i < len(order) and order[i] not in want \
                    and iceberg_type(have[order[i]]) == want[col]:
                old = order[i]
            if old is not None and old in have and old not in want:
                statements.append(f"ALTER TABLE {name} RENAME COLUMN {_q(old)} TO {_q(col)}")
                have = {(col if k == old else k): v for k, v in have.items()}
            else:
                spark_type = next(f for f in run.fields if f.name == col).spark_type
                statements.append(f"ALTER TABLE {name} ADD COLUMN {_q(col)} {spark_type}")
                default = self.defaults.get(run.name, {}).get(col)
                if default is not None and not changelog:
                    # The server filled the rows it had with the column's default.
                    statements.append(f"UPDATE {name} SET {_q(col)} = {default}")
        for col, old_type in have.items():
            if col in want and iceberg_type(old_type) != want[col]:
                if widens_in_place(iceberg_type(old_type), want[col]):
                    statements.append(f"ALTER TABLE {name} ALTER COLUMN {_q(col)} "
                                      f"TYPE {want[col]}")
                else:  # e.g. BIGINT -> BIGINT UNSIGNED (long -> decimal(20,0))
                    statements += retyped(name, col, want[col],
                                          [c for c in have if c in want])
            elif col not in want and not changelog:
                statements.append(f"ALTER TABLE {name} DROP COLUMN {_q(col)}")
        for sql in statements:
            spark.sql(sql)
        self.schemas.pop(name, None)

    # -- landing ---------------------------------------------------------------------

    def _check_owned(self, spark: Any, name: str) -> None:
        """Refuse to land into (or alter) table ``name`` when changestream did not make it:
        it has neither changestream's table property nor a snapshot that carries a position
        (the tables made before the property have those), empty or not, whatever its
        schema."""
        if name in self.owned:
            return
        table = load_table(spark, name)
        if table.properties().get("changestream.table") is None \
                and positioned_snapshot(table, PROPERTY) is None:
            raise SinkError(f"spark sink (iceberg): table {name} exists and was not made by "
                            f"changestream (no changestream.table property, no {PROPERTY} in "
                            "its snapshots): drop or rename it, or land into another catalog")
        self.owned.add(name)

    def _pending(self, spark: Any, name: str, run: TableRun
                 ) -> tuple[pa.Table | None, Position | None, list[int] | None]:
        """The rows of ``run`` not yet in table ``name`` (``None``: none), the position the
        table has committed once they are, and which rows of the frame they are (``None``:
        all of them)."""
        committed = self._committed(spark, name)
        keep = [positions.chunk_is_new(span.position, committed) if span.snapshot
                else positions.is_after(span.position, committed) for span in run.spans]
        landed = [span.position for span, new in zip(run.spans, keep)
                  if new and span.position is not None]
        last = positions.merged(committed, landed) if landed else None
        if not any(keep):
            return None, last, None
        if all(keep):
            return run.frame, last, None
        mask: list[bool] = []
        for span, new in zip(run.spans, keep):
            mask += [new] * span.rows
        kept = [i for i, new in enumerate(mask) if new]
        return run.frame.filter(pa.array(mask, pa.bool_())), last, kept

    def _dataframe(self, spark: Any, run: TableRun, rows: pa.Table) -> Any:
        """``rows`` of ``run`` as a DataFrame (see :func:`frame_dataframe`), made once for
        the changelog and the mirror when both take the same rows."""
        if self._shared is not None and self._shared[0] is rows:
            return self._shared[1]
        df = frame_dataframe(spark, run, rows)
        self._shared = (rows, df)
        return df

    def _aligned(self, spark: Any, name: str, df: Any) -> Any:
        """``df`` with the table's columns, in its order (NULL for kept dropped ones)."""
        from pyspark.sql import functions as F

        have = self._table_columns(spark, name)
        present = set(df.columns)
        return df.select([F.col(c) if c in present else F.lit(None).cast(t).alias(c)
                          for c, t in have.items()])

    def land_runs(self, spark: Any, runs: list[TableRun]) -> dict[str, int]:
        """Land ``runs`` in order, each into its changelog, then its mirror; returns each
        source table's new changelog rows. (Landing two tables at once on two threads was
        tried: faster, but Spark-written tables then got a row twice now and then, a
        cause not found; see docs/internals.md.)"""
        rows: dict[str, int] = {}
        for run in runs:
            rows[run.name] = rows.get(run.name, 0) + self.land_changelog(spark, run)
            self.land_mirror(spark, run)
        return rows

    def land_changelog(self, spark: Any, run: TableRun) -> int:
        name = self.changelog_name(run)
        clock = self.clock
        with clock("evolve"):
            self._evolve(spark, name, run, changelog=True)
            rows, last, _ = self._pending(spark, name, run)
        if rows is None or last is None:
            return 0
        with clock("changelog append"):
            self._append(spark, name, run, rows, [f.name for f in METADATA + run.fields], last)
        return rows.num_rows

    def _append(self, spark: Any, name: str, run: TableRun, rows: pa.Table,
                columns: list[str], last: Position) -> None:
        """Append ``columns`` of ``rows`` (frame rows of ``run``) to table ``name``,
        committed with position ``last``: files written with pyarrow where the table
        allows (:mod:`.files`), else a Spark append."""
        if self.arrow_appends and self._appender_for(spark).append(
                name, rows.select(columns), {PROPERTY: positions.encode(last)}):
            self.committed[name] = last
            return
        self._spark_append(spark, name,
                           self._dataframe(spark, run, rows).select([_q(c) for c in columns]),
                           last)

    def _spark_append(self, spark: Any, name: str, df: Any, last: Position) -> None:
        """Append DataFrame ``df`` to table ``name`` with Spark, committed with ``last``."""
        self._aligned(spark, name, df).writeTo(name) \
            .option(f"snapshot-property.{PROPERTY}", positions.encode(last)).append()
        self.committed[name] = last

    def _appender_for(self, spark: Any) -> ArrowAppender:
        if self._appender is None or self._appender.spark is not spark:
            self._appender = ArrowAppender(spark)
        return self._appender

    def commit_batch(self, spark: Any, batch_id: int, position: Position) -> None:
        """Mark the batch done: a snapshot of the control table with ``position``."""
        with self.clock("batch commit"):
            self._shared = None
            # A snapshot without files: its summary is all a resume reads, and a data file
            # per batch cost a write, its metrics and a bigger commit.
            self._appender_for(spark).mark(self.control, {
                PROPERTY: positions.encode(position), BATCH_PROPERTY: str(batch_id)})
            self.position = position
