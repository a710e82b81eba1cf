"""The tables of one Iceberg catalog as the landing writes them: names, what each holds
(its committed position, its columns, whether changestream made it), their creation and
evolution with the source's shape, appends, and the writer that commits files from the
driver. Shared by the changelogs' landing (:mod:`.landing`), the mirrors'
(:mod:`.mirror_landing`) and the DDL they follow (:mod:`.ddl`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changestream.decoding.ddl import renamed_columns
from changestream.model.changes import Change, Position
from changestream.model.errors import SinkError

from .. import positions
from ..frames import TableRun, frame_dataframe
from ..positions import PROPERTY
from ..session import jvm_of
from ..types import METADATA, METADATA_NAMES, FieldMapping, spark_schema
from .columns import iceberg_type, retyped, widens_in_place
from .commit_queue import CommitQueue
from .commits import create_table
from .defaults import added_column_defaults
from .files import ArrowAppender, load_table, positioned_snapshot
from .names import CHANGELOG_SUFFIX, MIRROR_TABLE_PROPERTIES
from .names import quote as _q

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("changestream.sinks.spark")


class _Callable:
    """A ``java.util.concurrent.Callable`` implemented in Python (through Py4J)."""

    def __init__(self, function: Any):
        self.function = function

    def call(self) -> None:
        self.function()

    class Java:
        implements = ["java.util.concurrent.Callable"]


class IcebergTables:
    """The landing's tables in catalog ``catalog`` (see the module docstring);
    ``arrow_appends``: the driver writes the files where it can."""

    def __init__(self, catalog: str, arrow_appends: bool = True):
        self.catalog = catalog
        self.arrow_appends = arrow_appends
        self.committed: dict[str, Position | None] = {}  # per Iceberg table
        self.existing: set[str] = set()  # Iceberg tables known to exist
        self.owned: set[str] = set()  # Iceberg tables checked to be changestream's
        self.in_ddl = False  # while a DDL runs, tables may come and go: no cache
        self.schemas: dict[str, dict[str, str]] = {}  # column -> type, per Iceberg table
        self.renames: dict[str, dict[str, str]] = {}  # source table -> {new: old} from DDL
        # source table -> {added column: Spark SQL literal its existing rows get}, from DDL
        self.defaults: dict[str, dict[str, str | None]] = {}
        self.insert_gaps: dict[str, set[str]] = {}  # source table -> columns inserts lack
        self._appender: ArrowAppender | None = None
        # The driver's data commits, made while the landing goes on (.commit_queue); two
        # lanes: a table's changelog and its mirror are committed at once.
        self.commits = CommitQueue(lanes=2)
        self._shared: tuple[pa.Table, Any] | None = None  # rows -> their DataFrame

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

    def names(self, table: tuple[str, str]) -> tuple[str, str]:
        """Source table ``(database, table)``'s mirror and changelog, in the catalog."""
        database, name = table
        return (f"{_q(self.catalog)}.{_q(database)}.{_q(name)}",
                f"{_q(self.catalog)}.{_q(database)}.{_q(name + CHANGELOG_SUFFIX)}")

    def reset(self) -> None:
        """Forget what is known of the tables (a new start)."""
        self.committed.clear()
        self.schemas.clear()
        self.existing.clear()

    def forget(self, *names: str) -> None:
        """Forget what is known of tables ``names`` (dropped or renamed)."""
        for name in names:
            self.committed.pop(name, None)
            self.schemas.pop(name, None)

    def exists(self, spark: SparkSession, name: str) -> bool:
        if name in self.existing:
            return True
        found = bool(spark.catalog.tableExists(name))
        if found and not self.in_ddl:
            # a catalog lookup per table and batch was a tenth of a batch's time
            self.existing.add(name)
        return found

    def stored_position(self, spark: SparkSession, name: str) -> Position | None:
        """The position of the newest commit that has one, through Iceberg's Java API (a
        query of the metadata tables is a Spark job per table)."""
        snapshot = positioned_snapshot(load_table(spark, name), PROPERTY)
        return None if snapshot is None else \
            positions.decode(str(snapshot.summary().get(PROPERTY)))

    def committed_position(self, spark: SparkSession, name: str) -> Position | None:
        """The position table ``name`` holds (``None``: none, or no such table)."""
        if name not in self.committed:
            self.committed[name] = self.stored_position(spark, name) \
                if self.exists(spark, name) else None
            logger.debug("spark sink: %s holds position %s", name, self.committed[name])
        return self.committed[name]

    def prepare(self, spark: SparkSession, name: str, run: TableRun, changelog: bool
                ) -> tuple[pa.Table | None, Position | None, list[int] | None]:
        """Table ``name`` (a changelog or a mirror) made to hold ``run``'s columns
        (:meth:`evolve`), and ``run``'s rows it lacks, as :meth:`pending` gives them."""
        self.evolve(spark, name, run, changelog)
        return self.pending(spark, name, run)

    def pending(self, spark: SparkSession, name: str, run: TableRun
                ) -> tuple[pa.Table | None, Position | None, list[int] | None]:
        """The rows of ``run`` not yet in table ``name`` (``None``: none), the position the
        table has committed once they are, and which rows of the frame they are (``None``:
        all of them)."""
        committed = self.committed_position(spark, name)
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

    def moved(self, old: tuple[str, str], new: tuple[str, str]) -> None:
        """Source table ``old`` is now ``new``: its DDL hints go with it."""
        hint_maps: tuple[dict[str, Any], ...] = (self.renames, self.defaults)
        for hints in hint_maps:
            hint = hints.pop(f"{old[0]}.{old[1]}", None)
            if hint is not None:
                hints[f"{new[0]}.{new[1]}"] = hint

    def dropped(self, table: tuple[str, str]) -> None:
        """Source table ``table`` is gone: its DDL hints too."""
        self.renames.pop(f"{table[0]}.{table[1]}", None)
        self.defaults.pop(f"{table[0]}.{table[1]}", None)

    def table_columns(self, spark: SparkSession, name: str) -> dict[str, str]:
        if name not in self.schemas:
            fields = spark.table(name).schema.fields
            self.schemas[name] = {f.name: f.dataType.simpleString() for f in fields}
        return self.schemas[name]

    def create(self, spark: SparkSession, name: str, run: TableRun,
               fields: tuple[FieldMapping, ...], changelog: bool) -> None:
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
        if not self.in_ddl:
            self.existing.add(name)  # no catalog lookup for it in the next batch

    def evolve(self, spark: SparkSession, name: str, run: TableRun, changelog: bool) -> None:
        """Make table ``name`` hold ``run``'s columns: renames (named by DDL in this run of
        the sink, else a vanished column at the same place with the same type), added
        columns, widened types; the mirror also drops columns the source dropped (the
        changelog keeps them, NULL from then on)."""
        fields = (METADATA if changelog else ()) + run.fields
        if not self.exists(spark, name):
            self.create(spark, name, run, fields, changelog)
            return
        self.check_owned(spark, name)
        have = self.table_columns(spark, name)
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
        if statements:
            self.commits.drain()  # Spark's statements wait for the driver's commits
        for sql in statements:
            spark.sql(sql)
        self.schemas.pop(name, None)

    def check_owned(self, spark: SparkSession, name: str) -> None:
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

    # -- writing ---------------------------------------------------------------------

    def appender_for(self, spark: SparkSession) -> ArrowAppender:
        """The writer that commits files from the driver, for ``spark``'s JVM."""
        if self._appender is None or self._appender.spark is not spark:
            self._appender = ArrowAppender(spark)
        return self._appender

    def dataframe(self, spark: SparkSession, run: TableRun, rows: pa.Table) -> Any:
        """``rows`` of ``run`` as a DataFrame (see :func:`frame_dataframe`), made once for
        the changelog and the mirror when both take the same rows."""
        if self._shared is not None and self._shared[0] is rows:
            return self._shared[1]
        df = frame_dataframe(spark, run, rows)
        self._shared = (rows, df)
        return df

    def batch_done(self) -> None:
        """Let go of the batch's rows."""
        self._shared = None

    def aligned(self, spark: SparkSession, name: str, df: Any) -> Any:
        """``df`` with the table's columns, in its order (NULL for kept dropped ones)."""
        from pyspark.sql import functions as F

        have = self.table_columns(spark, name)
        present = set(df.columns)
        return df.select([F.col(c) if c in present else F.lit(None).cast(t).alias(c)
                          for c, t in have.items()])

    def append(self, spark: SparkSession, name: str, run: TableRun, rows: pa.Table,
               columns: list[str], last: Position) -> None:
        """Append ``columns`` of ``rows`` (frame rows of ``run``) to table ``name``,
        committed with position ``last``: files written with pyarrow where the table
        allows (:mod:`.files`), else a Spark append."""
        if self.arrow_appends:
            append = self.appender_for(spark).prepare_row_delta(
                name, rows.select(columns), None, {PROPERTY: positions.encode(last)})
            if append is not None:
                self.commits.submit(name, append)
                self.committed[name] = last
                return
        self.spark_append(spark, name,
                          self.dataframe(spark, run, rows).select([_q(c) for c in columns]),
                          last)

    def spark_append(self, spark: SparkSession, name: str, df: Any, last: Position) -> None:
        """Append DataFrame ``df`` to table ``name`` with Spark, committed with ``last``."""
        self.commits.drain()
        self.aligned(spark, name, df).writeTo(name) \
            .option(f"snapshot-property.{PROPERTY}", positions.encode(last)).append()
        self.committed[name] = last

    @staticmethod
    def with_properties(spark: SparkSession, position: Position, action: Any) -> None:
        """Run ``action`` (a Spark statement that commits) so that its commit carries
        ``position``."""
        # Iceberg 1.10's Spark MERGE takes no write options: the position goes in through
        # CommitMetadata's thread-local, which the MERGE (run from this Py4J callback on
        # the same JVM thread) commits with.
        jvm = jvm_of(spark)
        props = jvm.java.util.HashMap()
        props.put(PROPERTY, positions.encode(position))
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            props, _Callable(action), jvm.java.lang.Class.forName("java.lang.Exception"))
