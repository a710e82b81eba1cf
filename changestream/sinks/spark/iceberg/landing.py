"""The ``iceberg`` landing: per source table a changelog table and a mirror table.

Source table ``db.t`` lands in ``<catalog>.db.t__changelog`` (every change, appended,
partitioned by day of commit) and ``<catalog>.db.t`` (the mirror: the table as it is at the
source), both created on first sight and evolved with the source's shape. Every commit
carries ``changestream.position`` in its snapshot summary, and a batch ends with a snapshot
of ``<catalog>._changestream.batches``, whose position ``open()`` returns: after a crash
each table skips what its own last commit holds (docs/sinks.md, "Landing modes").

The landing is three parts over one :class:`.tables.IcebergTables`: the changelogs (here),
the mirrors (:class:`.mirror_landing.MirrorLanding`) and the DDL they follow
(:class:`.ddl.MirroredDdl`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from changestream.model.changes import Change, Position
from changestream.sinks.spark.stages import StageClock

from .. import positions
from ..frames import TableRun
from ..positions import PROPERTY
from ..types import METADATA, columns_json
from .commits import create_table, driver_commits
from .ddl import MirroredDdl
from .files import load_table
from .mirror_landing import MirrorLanding
from .names import CONTROL_NAMESPACE, CONTROL_TABLE_PROPERTIES, DDL_TABLE
from .names import quote as _q
from .tables import IcebergTables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def control_tables(namespace: str = CONTROL_NAMESPACE) -> tuple[str, str]:
    """changestream's own tables in a catalog (``namespace.table``, quoted): a snapshot per
    batch with its position, and a row per DDL applied to the mirrors (made at the first)."""
    return f"{_q(namespace)}.`batches`", f"{_q(namespace)}.{_q(DDL_TABLE)}"


#: The batch id in the summary of a control table's snapshot.
BATCH_PROPERTY = "changestream.batch"


class IcebergLanding:
    """The landing (see the module docstring); the options as the sink's
    (docs/sinks.md)."""

    def __init__(self, catalog: str = "changestream", append_new_keys: bool = True,
                 arrow_appends: bool = True, position_deletes: bool = True,
                 catalog_renames: bool = False, control_namespace: str = CONTROL_NAMESPACE):
        self.catalog = catalog
        self.control_namespace = control_namespace
        self.control_tables = control_tables(control_namespace)
        self.control = f"{_q(catalog)}.{self.control_tables[0]}"
        self.clock = StageClock()
        self.tables = IcebergTables(catalog, arrow_appends)
        self.mirrors = MirrorLanding(self.tables, self.clock, append_new_keys, arrow_appends,
                                     position_deletes)
        self.ddl = MirroredDdl(self.tables, control_namespace, catalog_renames)
        self.position: Position | None = None

    # -- names and state -------------------------------------------------------------

    @staticmethod
    def table_names(run: TableRun) -> tuple[str, str]:
        """``run``'s mirror and changelog as ``namespace.table``, quoted, in no catalog."""
        return IcebergTables.table_names(run)

    def mirror_name(self, run: TableRun) -> str:
        return self.tables.mirror_name(run)

    def changelog_name(self, run: TableRun) -> str:
        return self.tables.changelog_name(run)

    @property
    def ddl_done(self) -> Position | None:
        """Where the DDL applied to the mirrors so far ends."""
        return self.ddl.ddl_done

    def open(self, spark: SparkSession) -> Position | None:
        tables = self.tables
        tables.reset()
        if not tables.exists(spark, self.control):
            create_table(spark, self.catalog, self.control_namespace, "batches",
                         columns_json((("batch", "bigint"), ("position", "string"),
                                       ("committed_at", "timestamp"))),
                         CONTROL_TABLE_PROPERTIES)
            self.position = None
        else:
            self.position = tables.stored_position(spark, self.control)
        self.ddl.open(spark)
        # The class that makes the driver's commits and tables is compiled now (once per
        # JVM), a start's cost, not the first batch's.
        driver_commits(spark, load_table(spark, self.control))
        return self.position

    def landed_to(self, spark: SparkSession) -> Position | None:
        """The position of the last batch landed, as the catalog has it now."""
        return self.tables.stored_position(spark, self.control)

    # -- DDL -------------------------------------------------------------------------

    def note_ddl(self, change: Change) -> None:
        """Remember what a DDL statement says of renamed and added columns."""
        self.tables.note_ddl(change)

    def apply_ddl(self, spark: SparkSession, change: Change, position: Position | None) -> None:
        """Apply DDL ``change`` to the mirrors and changelogs (:class:`.ddl.MirroredDdl`)."""
        self.tables.commits.drain()
        self.ddl.apply_ddl(spark, change, position)

    def record_ddl(self, spark: SparkSession, change: Change, position: Position) -> None:
        """Note that everything up to ``position`` (a DDL just applied) is landed."""
        self.tables.commits.drain()
        self.ddl.record_ddl(spark, change, position)

    # -- landing ---------------------------------------------------------------------

    def land_runs(self, spark: SparkSession, runs: list[TableRun]) -> dict[str, int]:
        """Land ``runs`` in order, each into its changelog, then its mirror; returns each
        source table's new changelog rows. The driver's commits are made on their own
        thread meanwhile (:mod:`.commit_queue`); Spark's jobs are not: landing two tables
        at once on two threads was tried, and Spark-written tables then got a row twice
        now and then, a cause not found (docs/internals.md)."""
        rows: dict[str, int] = {}
        for run in runs:
            rows[run.name] = rows.get(run.name, 0) + self.land_changelog(spark, run)
            self.land_mirror(spark, run)
        return rows

    def land_changelog(self, spark: SparkSession, run: TableRun) -> int:
        """Append ``run``'s changes its changelog does not hold; the rows appended."""
        tables = self.tables
        name = tables.changelog_name(run)
        clock = self.clock
        tables.commits.wait_for(name)
        with clock("evolve"):
            rows, last, _ = tables.prepare(spark, name, run, changelog=True)
        if rows is None or last is None:
            return 0
        with clock("changelog append"):
            tables.append(spark, name, run, rows, [f.name for f in METADATA + run.fields],
                          last)
        return rows.num_rows

    def land_mirror(self, spark: SparkSession, run: TableRun) -> int:
        """Land ``run`` into its mirror; the rows taken."""
        return self.mirrors.land(spark, run)

    def close(self) -> None:
        """Stop the commits' thread (what is under way is waited for)."""
        self.tables.commits.close()

    def forget_landed(self) -> None:
        """Forget the tables' committed positions and the mirrors' key indexes (a batch
        failed, perhaps after a commit whose reply was lost): read again when next used,
        once no commit is under way."""
        self.tables.commits.discard()
        self.tables.reset()
        self.mirrors.forget_indexes()

    def commit_batch(self, spark: SparkSession, batch_id: int, position: Position) -> None:
        """Mark the batch done, once its commits are made: a snapshot of the control table
        with ``position``."""
        with self.clock("commits"):
            self.tables.commits.drain()
        with self.clock("batch commit"):
            self.tables.batch_done()
            # A snapshot without files: its summary is all a resume reads, and a data file
            # per batch cost a write, its metrics and a bigger commit.
            self.tables.appender_for(spark).mark(self.control, {
                PROPERTY: positions.encode(position), BATCH_PROPERTY: str(batch_id)})
            self.position = position
