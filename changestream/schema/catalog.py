"""Reading table definitions from a server's catalog (``information_schema`` and ``SHOW
CREATE TABLE``): the shadow server's, and the source's for snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from changestream.schema.definition import ColumnDefinition, TableDefinition, type_labels

Query = Callable[..., list[tuple[Any, ...]]]
"""``(sql, args=()) -> rows``."""


def quote(name: str) -> str:
    """A MySQL identifier, backquoted."""
    return "`" + name.replace("`", "``") + "`"


def collation_ids(query: Query) -> dict[str, tuple[int, str]]:
    """Every collation's id and character set, by name (MariaDB 10.10+'s uca1400 ids, 2048
    and up, included)."""
    try:
        rows = query("SELECT FULL_COLLATION_NAME, CHARACTER_SET_NAME, ID FROM "
                     "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
    except pymysql.MySQLError:
        rows = query("SELECT COLLATION_NAME, CHARACTER_SET_NAME, ID FROM "
                     "information_schema.COLLATIONS")
    return {str(name): (int(number), str(charset)) for name, charset, number in rows
            if number}


def read_definition(query: Query, collations: dict[str, int], database: str,
                    table: str) -> TableDefinition | None:
    """``database.table`` as the server has it now (``None``: no such table)."""
    rows = query(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLLATION_NAME, EXTRA "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "ORDER BY ORDINAL_POSITION", (database, table))
    if not rows:
        return None
    columns = []
    for name, data_type, column_type, collation, extra in rows:
        extra = str(extra or "").upper()
        generated = ("VIRTUAL" if "VIRTUAL" in extra else
                     "STORED" if "STORED" in extra or "PERSISTENT" in extra else "")
        column_type = str(column_type)
        if str(data_type).lower() in ("enum", "set") and "?" in column_type:
            column_type = exact_labels(query, database, table, str(name), column_type)
        columns.append(ColumnDefinition(
            str(name), str(data_type).lower(), column_type,
            collations.get(str(collation)) if collation else None, generated,
            "INVISIBLE" in extra))
    key = tuple(str(n) for (n,) in query(
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
        (database, table)))
    create = str(query(f"SHOW CREATE TABLE {quote(database)}.{quote(table)}")[0][1])
    return TableDefinition(database, table, tuple(columns), key, create)


def exact_labels(query: Query, database: str, table: str, column: str,
                 column_type: str) -> str:
    """``column_type`` of an ENUM or SET column with its labels as the table has them.

    ``information_schema`` (and ``SHOW CREATE TABLE``) print labels in utf8mb3 on MariaDB,
    a character outside the BMP as ``?``; the labels are read back as values instead: a
    temporary table with the column's exact type is given each label's number.
    """
    kind = column_type[:column_type.index("(")]
    count = len(type_labels(column_type))
    numbers = range(1, count + 1) if kind.lower() == "enum" else [1 << i for i in range(count)]
    scratch = f"{quote(database)}.{quote('_changestream_labels')}"
    try:
        query(f"CREATE TEMPORARY TABLE {scratch} SELECT {quote(column)} AS v FROM "
              f"{quote(database)}.{quote(table)} LIMIT 0")
        try:
            query(f"INSERT INTO {scratch} VALUES " + ", ".join(f"({n})" for n in numbers))
            labels = [str(v) for (v,) in query(f"SELECT v FROM {scratch} ORDER BY v + 0")]
        finally:
            query(f"DROP TEMPORARY TABLE {scratch}")
    except pymysql.MySQLError:
        return column_type  # as printed: the labels outside the BMP stay '?'
    if len(labels) != count:
        return column_type
    body = ",".join("'" + label.replace("'", "''") + "'" for label in labels)
    return f"{kind}({body}){column_type[column_type.rindex(')') + 1:]}"


def unique_key(query: Query, database: str, table: str) -> tuple[str, ...] | None:
    """The columns of the table's first unique key whose columns are all NOT NULL (which
    identifies rows as a primary key does), or ``None``."""
    rows = query(
        "SELECT s.INDEX_NAME, s.COLUMN_NAME, c.IS_NULLABLE FROM information_schema.STATISTICS s "
        "JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND "
        "c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME "
        "WHERE s.TABLE_SCHEMA = %s AND s.TABLE_NAME = %s AND s.NON_UNIQUE = 0 "
        "AND s.INDEX_NAME <> 'PRIMARY' ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX",
        (database, table))
    keys: dict[str, list[tuple[str, bool]]] = {}
    for index, column, nullable in rows:
        keys.setdefault(str(index), []).append((str(column), str(nullable) == "YES"))
    for columns in keys.values():
        if not any(nullable for _, nullable in columns):
            return tuple(name for name, _ in columns)
    return None
