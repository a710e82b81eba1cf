"""Table definitions as the schema history keeps them, and how a rows event uses one.

A definition is what a server's catalog says about a table: its columns in order (name,
type with signedness, collation, ENUM/SET labels, generated and invisible), its primary
key, and the ``SHOW CREATE TABLE`` text that recreates it on the shadow server.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.record import record

TableKey = tuple[str, str]
"""``(database, table)``."""

#: MariaDB's types that are logged as BINARY and given as text (see Column.text_type).
ADDRESS_TYPES = frozenset({"uuid", "inet6", "inet4"})


def type_labels(column_type: str) -> tuple[str, ...]:
    """The labels of an ENUM or SET column type (``enum('a','b''c')``), in order."""
    inside = column_type[column_type.index("(") + 1:column_type.rindex(")")]
    return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", inside))


@record(frozen=True)
class ColumnDefinition:
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str  # lower case: "int", "varchar", "enum", "uuid", "inet6", ...
    column_type: str  # e.g. "int(10) unsigned", "enum('a','b')"
    collation_id: int | None = None
    generated: str = ""  # "", "VIRTUAL" or "STORED"
    invisible: bool = False

    @property
    def unsigned(self) -> bool:
        return " unsigned" in self.column_type.lower()

    def labels(self) -> tuple[str, ...]:
        """An ENUM's or SET's labels, in order."""
        return type_labels(self.column_type)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "data_type": self.data_type,
                                "column_type": self.column_type}
        if self.collation_id is not None:
            data["collation_id"] = self.collation_id
        if self.generated:
            data["generated"] = self.generated
        if self.invisible:
            data["invisible"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ColumnDefinition:
        return cls(str(data["name"]), str(data["data_type"]), str(data["column_type"]),
                   data.get("collation_id"), str(data.get("generated") or ""),
                   bool(data.get("invisible")))


@record(frozen=True)
class TableDefinition:
    """A table at one point of the binlog."""

    database: str
    table: str
    columns: tuple[ColumnDefinition, ...]
    primary_key: tuple[str, ...]  # column names, in key order; () without one
    create_sql: str  # SHOW CREATE TABLE, as the shadow server printed it

    @property
    def key(self) -> TableKey:
        return (self.database, self.table)

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    def as_dict(self) -> dict[str, Any]:
        return {"columns": [c.as_dict() for c in self.columns],
                "primary_key": list(self.primary_key), "create_sql": self.create_sql}

    @classmethod
    def from_dict(cls, database: str, table: str, data: dict[str, Any]) -> TableDefinition:
        return cls(database, table,
                   tuple(ColumnDefinition.from_dict(c) for c in data["columns"]),
                   tuple(data.get("primary_key") or ()), str(data["create_sql"]))

    def logged_columns(self, count: int) -> tuple[ColumnDefinition, ...] | None:
        """The columns a row image of ``count`` columns holds, in order: every column, or
        every column but the virtual generated ones (a server that does not log them);
        ``None`` when neither has ``count`` columns."""
        if len(self.columns) == count:
            return self.columns
        stored = tuple(c for c in self.columns if c.generated != "VIRTUAL")
        return stored if len(stored) == count else None


#: The row image types each catalog type (DATA_TYPE) can be logged as.
LOGGED_AS: dict[str, frozenset[int]] = {
    "tinyint": frozenset({ft.TINY}), "smallint": frozenset({ft.SHORT}),
    "mediumint": frozenset({ft.INT24}), "int": frozenset({ft.LONG}),
    "integer": frozenset({ft.LONG}), "bigint": frozenset({ft.LONGLONG}),
    "float": frozenset({ft.FLOAT}), "double": frozenset({ft.DOUBLE}),
    "real": frozenset({ft.DOUBLE}), "decimal": frozenset({ft.NEWDECIMAL, ft.DECIMAL}),
    "numeric": frozenset({ft.NEWDECIMAL, ft.DECIMAL}),
    "date": frozenset({ft.DATE, ft.NEWDATE}), "time": frozenset({ft.TIME, ft.TIME2}),
    "datetime": frozenset({ft.DATETIME, ft.DATETIME2}),
    "timestamp": frozenset({ft.TIMESTAMP, ft.TIMESTAMP2}), "year": frozenset({ft.YEAR}),
    "char": frozenset({ft.STRING}), "binary": frozenset({ft.STRING}),
    "varchar": frozenset({ft.VARCHAR, ft.VAR_STRING}),
    "varbinary": frozenset({ft.VARCHAR, ft.VAR_STRING}),
    "enum": frozenset({ft.ENUM, ft.STRING}), "set": frozenset({ft.SET, ft.STRING}),
    "bit": frozenset({ft.BIT}), "json": frozenset({ft.JSON, ft.BLOB}),
    "vector": frozenset({ft.VECTOR, ft.VARCHAR}), "uuid": frozenset({ft.STRING}),
    "inet6": frozenset({ft.STRING}), "inet4": frozenset({ft.STRING}),
}
for _blob in ("tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext",
              "longtext"):
    LOGGED_AS[_blob] = ft.BLOB_TYPES
for _geo in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection"):
    LOGGED_AS[_geo] = frozenset({ft.GEOMETRY})


def type_mismatch(schema: TableSchema, columns: tuple[ColumnDefinition, ...]) -> str | None:
    """The first logged column whose type cannot be its definition's, described; ``None``
    when every one fits."""
    for logged, defined in zip(schema.columns, columns):
        allowed = LOGGED_AS.get(defined.data_type)
        if allowed is not None and logged.type_code not in allowed:
            return (f"column {logged.index + 1} is logged as {logged.type_name}, the "
                    f"history has {defined.name} {defined.column_type}")
    return None


def apply_definition(schema: TableSchema, columns: tuple[ColumnDefinition, ...],
                     primary_key: tuple[str, ...], source: str) -> TableSchema:
    """A TABLE_MAP's ``schema`` named and typed by ``columns`` (one per logged column):
    names, signedness, collations and labels the binlog did not carry, and the primary key."""
    named = []
    for column, defined in zip(schema.columns, columns):
        changes: dict[str, Any] = {"name": defined.name}
        if column.type_code in ft.NUMERIC_TYPES:
            changes["unsigned"] = defined.unsigned
        if column.collation is None and defined.collation_id is not None:
            changes["collation"] = defined.collation_id
        if defined.data_type == "enum" and column.enum_values is None:
            changes["enum_values"] = defined.labels()
        if defined.data_type == "set" and column.set_values is None:
            changes["set_values"] = defined.labels()
        if defined.data_type in ADDRESS_TYPES and column.type_code == ft.STRING:
            changes["text_type"] = defined.data_type
        named.append(_with(column, changes))
    positions = {c.name: i for i, c in enumerate(columns)}
    key = tuple(positions[n] for n in primary_key if n in positions) or None
    return schema.with_columns(tuple(named), primary_key=key, source=source)


def _with(column: Column, changes: dict[str, Any]) -> Column:
    return replace(column, **changes)


_TYPE_CODES = {
    "tinyint": ft.TINY, "smallint": ft.SHORT, "mediumint": ft.INT24, "int": ft.LONG,
    "integer": ft.LONG, "bigint": ft.LONGLONG, "float": ft.FLOAT, "double": ft.DOUBLE,
    "real": ft.DOUBLE, "decimal": ft.NEWDECIMAL, "numeric": ft.NEWDECIMAL, "date": ft.DATE,
    "datetime": ft.DATETIME2, "timestamp": ft.TIMESTAMP2, "time": ft.TIME2, "year": ft.YEAR,
    "char": ft.STRING, "binary": ft.STRING, "varchar": ft.VARCHAR, "varbinary": ft.VARCHAR,
    "enum": ft.ENUM, "set": ft.SET, "bit": ft.BIT, "json": ft.JSON, "vector": ft.VECTOR,
    "uuid": ft.STRING, "inet6": ft.STRING, "inet4": ft.STRING,
    "tinyblob": ft.BLOB, "blob": ft.BLOB, "mediumblob": ft.BLOB, "longblob": ft.BLOB,
    "tinytext": ft.BLOB, "text": ft.BLOB, "mediumtext": ft.BLOB, "longtext": ft.BLOB,
}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_NUMBERS = re.compile(r"\((\d+)(?:,(\d+))?\)")


def definition_schema(definition: TableDefinition) -> TableSchema:
    """A table's definition as a :class:`TableSchema` (what a TABLE_MAP of a row image of
    every column would say): for sinks that shape their tables before rows come."""
    columns = []
    for i, c in enumerate(definition.columns):
        type_code = _TYPE_CODES.get(c.data_type, ft.GEOMETRY if "geo" in c.data_type or
                                    c.data_type in ("point", "linestring", "polygon",
                                                    "multipoint", "multilinestring",
                                                    "multipolygon") else ft.VARCHAR)
        numbers = _NUMBERS.search(c.column_type)
        first = int(numbers.group(1)) if numbers else 0
        second = int(numbers.group(2)) if numbers and numbers.group(2) else 0
        fields: dict[str, Any] = {"name": c.name, "unsigned": c.unsigned,
                                  "collation": 63 if c.data_type in _BINARY else c.collation_id,
                                  "visible": not c.invisible}
        if type_code == ft.NEWDECIMAL:
            fields.update(precision=first, scale=second)
        elif type_code in (ft.DATETIME2, ft.TIMESTAMP2, ft.TIME2):
            fields["fsp"] = first
        elif c.data_type in ("enum", "set"):
            fields["enum_values" if c.data_type == "enum" else "set_values"] = c.labels()
        elif c.data_type in ADDRESS_TYPES:
            fields.update(text_type=c.data_type, max_length=4 if c.data_type == "inet4" else 16)
        elif type_code in (ft.STRING, ft.VARCHAR):
            fields["max_length"] = first
        columns.append(Column(i, type_code, **fields))
    positions = {c.name: i for i, c in enumerate(definition.columns)}
    key = tuple(positions[n] for n in definition.primary_key if n in positions) or None
    return TableSchema(definition.database, definition.table, tuple(columns),
                       primary_key=key, names_logged=True, signedness_logged=True,
                       charsets_logged=True, source="schema_history")


def definition_after(change_set: Any, database: str | None,
                     table: str | None) -> TableSchema | None:
    """The shape ``database.table`` has after a DDL (a ``SchemaChangeSet``), when the schema
    history knows it; ``None`` otherwise (no history, another table, or dropped)."""
    if change_set is None or database is None or table is None:
        return None
    definition = change_set.tables.get((database, table))
    return definition_schema(definition) if definition is not None else None
