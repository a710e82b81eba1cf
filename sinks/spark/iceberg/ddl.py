"""DDL that the Iceberg mirrors follow: TRUNCATE empties a mirror, DROP drops it, RENAME
(of a table, or of columns) moves it, and a DDL's resulting shape (from the schema history)
creates or evolves it; each marked in the table's changelog. Each step is skipped when a
commit at or after the DDL's position shows it done, so a batch landed again after a crash
does not repeat it. A part of :class:`changestream.sinks.spark.iceberg.IcebergLanding`."""

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
from .files import ArrowAppender, append_rows

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


CHANGELOG_SUFFIX = "__changelog"
#: The properties of every table changestream makes: format 2, and a commit removes the
#: metadata files of all but the last 20 versions (a table's metadata file lists every
#: snapshot, and a router commits once a batch: kept, they would fill the disk).
METADATA_RETENTION = {"write.metadata.delete-after-commit.enabled": "true",
                      "write.metadata.previous-versions-max": "20"}
#: The namespace of changestream's own tables in a catalog, and its table of the DDL
#: applied to the mirrors.
CONTROL_NAMESPACE = "_changestream"
DDL_TABLE = "ddl"
CONTROL_TABLE_PROPERTIES = {"format-version": "2", **METADATA_RETENTION}
#: The properties of every mirror and changelog table: those, ``changestream.table`` (which
#: tells a table changestream made from one it would refuse to take over), row-level changes as
#: delete files (merge-on-read), and no shuffle before a write (distribution mode ``none``;
#: ``fanout`` lets a task write several day partitions unsorted). A batch is small and
#: mostly one day, so a shuffle buys little; the more files it would save are what
#: ``changestream maintain`` compacts.
MIRROR_TABLE_PROPERTIES = {
    **CONTROL_TABLE_PROPERTIES, "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read", "write.merge.mode": "merge-on-read",
    "write.distribution-mode": "none", "write.merge.distribution-mode": "none",
    "write.update.distribution-mode": "none", "write.delete.distribution-mode": "none",
    "write.spark.fanout.enabled": "true", "changestream.table": "true"}


def sql_properties(properties: dict[str, str]) -> str:
    """``properties`` as the inside of ``TBLPROPERTIES (...)``."""
    return ", ".join(f"'{key}'='{value}'" for key, value in properties.items())


TABLE_PROPERTIES = sql_properties(MIRROR_TABLE_PROPERTIES)


def quote(name: str) -> str:
    """``name`` as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


_q = quote


class MirroredDdl:
    """The DDL part of the Iceberg landing (a mixin: it uses the landing's tables and
    state)."""

    catalog: str
    control_namespace: str
    ddl_log: str
    ddl_done: Position | None
    committed: dict[str, Position | None]
    schemas: dict[str, dict[str, str]]
    renames: dict[str, dict[str, str]]
    defaults: dict[str, dict[str, str | None]]
    arrow_appends: bool
    catalog_renames: bool  # the catalog renames tables (all but a Hadoop catalog)

    if TYPE_CHECKING:
        def mirror_name(self, run: TableRun) -> str: ...
        def changelog_name(self, run: TableRun) -> str: ...
        def _exists(self, spark: Any, name: str) -> bool: ...
        def _committed(self, spark: Any, name: str) -> Position | None: ...
        def _table_columns(self, spark: Any, name: str) -> dict[str, str]: ...
        def _evolve(self, spark: Any, name: str, run: TableRun, changelog: bool) -> None: ...
        def _with_properties(self, spark: Any, position: Position, action: Any) -> None: ...
        def _appender_for(self, spark: Any) -> ArrowAppender: ...

    def apply_ddl(self, spark: Any, change: Change, position: Position | None) -> None:
        """Apply a TRUNCATE, RENAME or DROP (logged in ``change``, its transaction ending at
        ``position``) to the mirrors and changelogs. Each step is skipped when a commit at
        or after ``position`` shows it done, so a batch landed again after a crash does not
        repeat it."""
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

    def _reshape(self, spark: Any, schema: TableSchema) -> None:
        """Create or evolve a table's mirror and changelog to ``schema`` (a DDL's result):
        a CREATE TABLE starts an empty mirror, an ADD COLUMN fills existing rows with the
        column's default, before any row of the new shape comes."""
        fields = table_mappings(schema)
        run = TableRun(schema.database, schema.table, schema, fields)
        self._evolve(spark, self.changelog_name(run), run, changelog=True)
        self._evolve(spark, self.mirror_name(run), run, changelog=False)

    def record_ddl(self, spark: Any, change: Change, position: Position) -> None:
        """Note that everything up to ``position`` (a DDL just applied) is landed."""
        if not self._exists(spark, self.ddl_log):
            create_table(spark, self.catalog, self.control_namespace, DDL_TABLE,
                         columns_json((("position", "string"), ("statement", "string"))),
                         CONTROL_TABLE_PROPERTIES)
        encoded = positions.encode(position)
        append_rows(spark, self._appender_for(spark) if self.arrow_appends else None,
                    self.ddl_log, pa.table({"position": pa.array([encoded], pa.string()),
                                            "statement": pa.array([change.sql], pa.string())}),
                    {PROPERTY: encoded})
        self.ddl_done = position

    def _names(self, table: tuple[str, str]) -> tuple[str, str]:
        database, name = table
        mirror = f"{_q(self.catalog)}.{_q(database)}.{_q(name)}"
        changelog = f"{_q(self.catalog)}.{_q(database)}.{_q(name + CHANGELOG_SUFFIX)}"
        return mirror, changelog

    def _forget(self, *names: str) -> None:
        for name in names:
            self.committed.pop(name, None)
            self.schemas.pop(name, None)

    def _mirrored_tables(self, spark: Any, database: str) -> list[str]:
        namespace = f"{_q(self.catalog)}.{_q(database)}"
        try:
            rows = spark.sql(f"SHOW TABLES IN {namespace}").collect()
        except Exception:  # no such namespace: nothing was landed for that database
            return []
        names = {r["tableName"] for r in rows}
        tables = {n.removesuffix(CHANGELOG_SUFFIX) for n in names}
        return sorted(tables)

    def _mark(self, spark: Any, changelog: str, op: str, change: Change,
              position: Position | None) -> None:
        """One changelog row saying what happened to the table (``_op`` truncate/drop)."""
        if position is None or not self._exists(spark, changelog) or \
                not positions.is_after(position, self._committed(spark, changelog)):
            return
        t = change.transaction
        from pyspark.sql import functions as F

        have = self._table_columns(spark, changelog)
        values = {"_op": op, "_transaction_id": t.id if t else None,
                  "_gtid": t.gtid if t else None,
                  "_xid": None if t is None or t.xid is None else str(t.xid),
                  "_seq": change.seq, "_binlog_file": change.file, "_binlog_pos": change.pos}
        row = spark.range(1).select(
            [F.lit(values.get(c)).cast(ty).alias(c) if c != "_commit_ts" else
             F.lit(t.commit_ts if t else None).cast(ty).alias(c) for c, ty in have.items()])
        row.writeTo(changelog).option(f"snapshot-property.{PROPERTY}",
                                      positions.encode(position)).append()
        self.committed[changelog] = position

    def _truncate(self, spark: Any, table: tuple[str, str], change: Change,
                  position: Position | None) -> None:
        mirror, changelog = self._names(table)
        if position is not None and self._exists(spark, mirror) and \
                positions.is_after(position, self._committed(spark, mirror)):
            self._with_properties(spark, position,
                                  lambda: spark.sql(f"DELETE FROM {mirror}"))
            self.committed[mirror] = position
        self._mark(spark, changelog, "truncate", change, position)

    def _drop(self, spark: Any, table: tuple[str, str], change: Change,
              position: Position | None) -> None:
        mirror, changelog = self._names(table)
        self._mark(spark, changelog, "drop", change, position)
        if self._exists(spark, mirror):
            spark.sql(f"DROP TABLE {mirror} PURGE")
        self._forget(mirror)
        self.renames.pop(f"{table[0]}.{table[1]}", None)
        self.defaults.pop(f"{table[0]}.{table[1]}", None)

    def _rename(self, spark: Any, old: tuple[str, str], new: tuple[str, str],
                position: Position | None) -> None:
        """Rename the mirror and the changelog: in the catalog where it can (one atomic
        step each, the tables' history kept; a step done before a crash leaves no source
        to rename again), else (a Hadoop catalog) copied under the new name (one atomic
        commit each, carrying ``position``) and the old ones dropped."""
        for source, target in zip(self._names(old), self._names(new)):
            if not self._exists(spark, source):
                continue
            if self.catalog_renames:
                if self._exists(spark, target):  # a table the source dropped long ago
                    spark.sql(f"DROP TABLE {target} PURGE")
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS "
                          f"{_q(self.catalog)}.{_q(new[0])}")
                # the new name is in the source's catalog: named without it
                spark.sql(f"ALTER TABLE {source} RENAME TO "
                          f"{target.removeprefix(_q(self.catalog) + '.')}")
                self._forget(source, target)
                continue
            done = self._exists(spark, target) and position is not None and \
                not positions.is_after(position, self._committed(spark, target))
            if not done:
                if self._exists(spark, target):  # what a crash left of an earlier try
                    spark.sql(f"DROP TABLE {target} PURGE")
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS "
                          f"{_q(self.catalog)}.{_q(new[0])}")
                props = f"TBLPROPERTIES ({TABLE_PROPERTIES})"
                partition = " PARTITIONED BY (days(_commit_ts))" \
                    if source.endswith(_q(old[1] + CHANGELOG_SUFFIX)) else ""
                sql = (f"CREATE TABLE {target} USING iceberg{partition} {props} "
                       f"AS SELECT * FROM {source}")
                if position is not None:
                    self._with_properties(spark, position, lambda sql=sql: spark.sql(sql))
                else:
                    spark.sql(sql)
            spark.sql(f"DROP TABLE {source} PURGE")
            self._forget(source, target)
            if position is not None:
                self.committed[target] = position
        hint_maps: tuple[dict[str, Any], ...] = (self.renames, self.defaults)
        for hints in hint_maps:
            moved = hints.pop(f"{old[0]}.{old[1]}", None)
            if moved is not None:
                hints[f"{new[0]}.{new[1]}"] = moved
