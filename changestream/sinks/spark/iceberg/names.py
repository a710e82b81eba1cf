"""The names and properties of the tables changestream makes in a catalog."""

from __future__ import annotations

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

