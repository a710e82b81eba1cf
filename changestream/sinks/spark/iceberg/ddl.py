"""DDL that the Iceberg mirrors follow: TRUNCATE empties a mirror, DROP drops it, RENAME
(of a table, or of columns) moves it, and a DDL's resulting shape (from the schema history)
creates or evolves it; each marked in the table's changelog. Each step is skipped when a
commit at or after the DDL's position shows it done, so a batch landed again after a crash
does not repeat it. The landing (:class:`changestream.sinks.spark.iceberg.IcebergLanding`)
holds one :class:`MirroredDdl` over its tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changestream.decoding.ddl import parse_ddl
from changestream.decoding.table_schema import TableSchema
from changestream.model.changes import Change, Position, ddl_database

from .. import positions
from ..frames import TableRun
from ..positions import PROPERTY
from ..types import columns_json, table_mappings
from .commits import create_table
from .files import append_rows
from .names import (
    CHANGELOG_SUFFIX,
    CONTROL_NAMESPACE,
    CONTROL_TABLE_PROPERTIES,
    DDL_TABLE,
    TABLE_PROPERTIES,
)
from .names import quote as _q

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .tables import IcebergTables

#: DDL kinds that change which rows a table holds, what it is called or whether it exists:
#: the landing applies them to the mirrors (and marks the changelogs) in binlog order.
MIRRORED_DDL = frozenset({"truncate_table", "rename_table", "drop_table", "drop_database",
                          "alter_table"})


def mirrored_ddl(change: Change) -> bool:
    """Whether a DDL change is one the mirrors follow (see :data:`MIRRORED_DDL`), or one
    that carries the table's new shape (from the schema history)."""
    if change.schema is not None:
        return True
    ddl = parse_ddl(change.sql or "", ddl_database(change))
    return ddl is not None and ddl.kind in MIRRORED_DDL and (
        ddl.kind != "alter_table" or bool(ddl.renames))


class MirroredDdl:
    """The DDL the mirrors and changelogs of ``tables`` follow (see the module
    docstring), each DDL applied noted in the control namespace's DDL table, whose last
    position is ``ddl_done``; ``catalog_renames``: the catalog renames tables (all but a
    Hadoop catalog)."""

    def __init__(self, tables: IcebergTables, control_namespace: str = CONTROL_NAMESPACE,
                 catalog_renames: bool = False):
        self.tables = tables
        self.control_namespace = control_namespace
        self.catalog_renames = catalog_renames
        # One row per DDL applied to the mirrors: a batch landed again after a crash skips
        # everything up to the last one (the state of the tables is already past it).
        self.ddl_log = f"{_q(tables.catalog)}.{_q(control_namespace)}.{_q(DDL_TABLE)}"
        self.ddl_done: Position | None = None

    def open(self, spark: SparkSession) -> None:
        """Read where the DDL applied so far ends."""
        tables = self.tables
        self.ddl_done = tables.stored_position(spark, self.ddl_log) \
            if tables.exists(spark, self.ddl_log) else None

    def apply_ddl(self, spark: SparkSession, change: Change, position: Position | None) -> None:
        """Apply a TRUNCATE, RENAME or DROP (logged in ``change``, its transaction ending at
        ``position``) to the mirrors and changelogs. Each step is skipped when a commit at
        or after ``position`` shows it done, so a batch landed again after a crash does not
        repeat it."""
        tables = self.tables
        tables.existing.clear()  # the DDL may drop or rename tables: no cache meanwhile
        tables.in_ddl = True
        try:
            self._apply(spark, change, position)
        finally:
            tables.in_ddl = False

    def _apply(self, spark: SparkSession, change: Change, position: Position | None) -> None:
        ddl = parse_ddl(change.sql or "", ddl_database(change))
        database = ddl_database(change) or ""
        if ddl is not None and ddl.kind == "alter_table" and ddl.renames:
            for old, new in ddl.renames:
                self._rename(spark, (old.database or database, old.table),
                             (new.database or database, new.table), position)
        if change.schema is not None:  # the table's shape after the DDL: mirror follows
            self._reshape(spark, change.schema)
        if ddl is None or ddl.kind not in MIRRORED_DDL or ddl.kind == "alter_table":
            return

        def key(name: Any) -> tuple[str, str]:
            return (name.database or database, name.table)

        if ddl.kind == "truncate_table":
            for name in ddl.tables:
                self._truncate(spark, key(name), change, position)
        elif ddl.kind == "drop_table":
            for name in ddl.tables:
                self._drop(spark, key(name), change, position)
        elif ddl.kind == "drop_database":
            for table in self._mirrored_tables(spark, ddl.database or database):
                self._drop(spark, (ddl.database or database, table), change, position)
        else:  # RENAME TABLE a TO b, ...
            for old, new in ddl.renames:
                self._rename(spark, key(old), key(new), position)

    def _reshape(self, spark: SparkSession, schema: TableSchema) -> None:
        """Create or evolve a table's mirror and changelog to ``schema`` (a DDL's result):
        a CREATE TABLE starts an empty mirror, an ADD COLUMN fills existing rows with the
        column's default, before any row of the new shape comes."""
        fields = table_mappings(schema)
        run = TableRun(schema.database, schema.table, schema, fields)
        tables = self.tables
        tables.evolve(spark, tables.changelog_name(run), run, changelog=True)
        tables.evolve(spark, tables.mirror_name(run), run, changelog=False)

    def record_ddl(self, spark: SparkSession, change: Change, position: Position) -> None:
        """Note that everything up to ``position`` (a DDL just applied) is landed."""
        tables = self.tables
        if not tables.exists(spark, self.ddl_log):
            create_table(spark, tables.catalog, self.control_namespace, DDL_TABLE,
                         columns_json((("position", "string"), ("statement", "string"))),
                         CONTROL_TABLE_PROPERTIES)
        encoded = positions.encode(position)
        append_rows(spark, tables.appender_for(spark) if tables.arrow_appends else None,
                    self.ddl_log, pa.table({"position": pa.array([encoded], pa.string()),
                                            "statement": pa.array([change.sql], pa.string())}),
                    {PROPERTY: encoded})
        self.ddl_done = position

    def _mirrored_tables(self, spark: SparkSession, database: str) -> list[str]:
        namespace = f"{_q(self.tables.catalog)}.{_q(database)}"
        try:
            rows = spark.sql(f"SHOW TABLES IN {namespace}").collect()
        except Exception:  # no such namespace: nothing was landed for that database
            return []
        names = {r["tableName"] for r in rows}
        tables = {n.removesuffix(CHANGELOG_SUFFIX) for n in names}
        return sorted(tables)

    def _mark(self, spark: SparkSession, changelog: str, op: str, change: Change,
              position: Position | None) -> None:
        """One changelog row saying what happened to the table (``_op`` truncate/drop)."""
        tables = self.tables
        if position is None or not tables.exists(spark, changelog) or \
                not positions.is_after(position, tables.committed_position(spark, changelog)):
            return
        t = change.transaction
        from pyspark.sql import functions as F

        have = tables.table_columns(spark, changelog)
        values = {"_op": op, "_transaction_id": t.id if t else None,
                  "_gtid": t.gtid if t else None,
                  "_xid": None if t is None or t.xid is None else str(t.xid),
                  "_seq": change.seq, "_binlog_file": change.file, "_binlog_pos": change.pos}
        row = spark.range(1).select(
            [F.lit(values.get(c)).cast(ty).alias(c) if c != "_commit_ts" else
             F.lit(t.commit_ts if t else None).cast(ty).alias(c) for c, ty in have.items()])
        row.writeTo(changelog).option(f"snapshot-property.{PROPERTY}",
                                      positions.encode(position)).append()
        tables.committed[changelog] = position

    def _truncate(self, spark: SparkSession, table: tuple[str, str], change: Change,
                  position: Position | None) -> None:
        tables = self.tables
        mirror, changelog = tables.names(table)
        if position is not None and tables.exists(spark, mirror) and \
                positions.is_after(position, tables.committed_position(spark, mirror)):
            tables.with_properties(spark, position,
                                   lambda: spark.sql(f"DELETE FROM {mirror}"))
            tables.committed[mirror] = position
        self._mark(spark, changelog, "truncate", change, position)

    def _drop(self, spark: SparkSession, table: tuple[str, str], change: Change,
              position: Position | None) -> None:
        tables = self.tables
        mirror, changelog = tables.names(table)
        self._mark(spark, changelog, "drop", change, position)
        if tables.exists(spark, mirror):
            spark.sql(f"DROP TABLE {mirror} PURGE")
        tables.forget(mirror)
        tables.dropped(table)

    def _rename(self, spark: SparkSession, old: tuple[str, str], new: tuple[str, str],
                position: Position | None) -> None:
        """Rename the mirror and the changelog: in the catalog where it can (one atomic
        step each, the tables' history kept; a step done before a crash leaves no source
        to rename again), else (a Hadoop catalog) copied under the new name (one atomic
        commit each, carrying ``position``) and the old ones dropped."""
        tables = self.tables
        for source, target in zip(tables.names(old), tables.names(new)):
            if not tables.exists(spark, source):
                continue
            if self.catalog_renames:
                if tables.exists(spark, target):  # a table the source dropped long ago
                    spark.sql(f"DROP TABLE {target} PURGE")
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS "
                          f"{_q(tables.catalog)}.{_q(new[0])}")
                # the new name is in the source's catalog: named without it
                spark.sql(f"ALTER TABLE {source} RENAME TO "
                          f"{target.removeprefix(_q(tables.catalog) + '.')}")
                tables.forget(source, target)
                continue
            done = tables.exists(spark, target) and position is not None and \
                not positions.is_after(position, tables.committed_position(spark, target))
            if not done:
                if tables.exists(spark, target):  # what a crash left of an earlier try
                    spark.sql(f"DROP TABLE {target} PURGE")
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS "
                          f"{_q(tables.catalog)}.{_q(new[0])}")
                props = f"TBLPROPERTIES ({TABLE_PROPERTIES})"
                partition = " PARTITIONED BY (days(_commit_ts))" \
                    if source.endswith(_q(old[1] + CHANGELOG_SUFFIX)) else ""
                sql = (f"CREATE TABLE {target} USING iceberg{partition} {props} "
                       f"AS SELECT * FROM {source}")
                if position is not None:
                    tables.with_properties(spark, position, lambda sql=sql: spark.sql(sql))
                else:
                    spark.sql(sql)
            spark.sql(f"DROP TABLE {source} PURGE")
            tables.forget(source, target)
            if position is not None:
                tables.committed[target] = position
        tables.moved(old, new)
