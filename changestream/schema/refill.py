"""DDL that gives a table's existing rows values no row event carries.

An added AUTO_INCREMENT or STORED generated column, a DEFAULT that is an expression
(``uuid()``, ``current_timestamp(3)``), a narrowed DECIMAL scale or fractional seconds: the
server changes the rows it holds without logging it, so every sink would keep what it had.
:func:`refill_reason` tells such a DDL from the table's definitions before and after it;
the router then reads the table again (docs/snapshots.md, "Refills", has the list).
Constant defaults and type changes that keep values are left to the sinks."""

from __future__ import annotations

import re

from changestream.decoding.ddl import column_clauses, renamed_columns
from changestream.schema.definition import ColumnDefinition, TableDefinition

_LINE = re.compile(r"^\s*`((?:[^`]|``)+)`\s+(.*?),?\s*$")
_DEFAULT = re.compile(r"\bDEFAULT\s+(\(|[a-z_][\w]*\s*\(\s*(\d*)\s*\)|CURRENT_TIMESTAMP\b|"
                      r"NOW\b|LOCALTIME\w*\b)", re.I)
_GENERATED = re.compile(r"\b(?:GENERATED\s+ALWAYS\s+)?AS\s*\(", re.I)
_STORED = re.compile(r"\b(?:STORED|PERSISTENT)\b", re.I)
_NOW = re.compile(r"^(CURRENT_TIMESTAMP|NOW|LOCALTIME\w*)\b", re.I)
_PRECISION = re.compile(r"\((\d+)(?:,(\d+))?\)")
_TEMPORAL = frozenset({"datetime", "timestamp", "time"})
_APPROXIMATE = frozenset({"float", "double", "real"})
_EXACT = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal",
                    "numeric"})


def column_lines(create_sql: str) -> dict[str, str]:
    """Each column's definition (the text after its name) in a ``SHOW CREATE TABLE``."""
    lines = {}
    for line in create_sql.splitlines()[1:]:
        m = _LINE.match(line)
        if m:
            lines[m.group(1).replace("``", "`")] = m.group(2)
    return lines


def _scale(column: ColumnDefinition) -> int:
    """A DECIMAL's scale or a temporal type's fractional digits (0 when not given)."""
    m = _PRECISION.search(column.column_type)
    if m is None:
        return 0
    if column.data_type in _TEMPORAL:
        return int(m.group(1))
    return int(m.group(2) or 0)


def _generated(definition: str) -> str:
    """"STORED", "VIRTUAL" or "" for a column definition as a DDL statement writes it."""
    if not _GENERATED.search(definition):
        return ""
    return "STORED" if _STORED.search(definition) else "VIRTUAL"


def _filled_by_server(line: str, generated: str, logs_virtual: bool) -> str | None:
    """What gives a column added with definition ``line`` (``generated``: "STORED",
    "VIRTUAL" or "") values the row events lack."""
    upper = line.upper()
    if "AUTO_INCREMENT" in upper:
        return "AUTO_INCREMENT"
    if generated == "STORED" or (generated == "VIRTUAL" and logs_virtual):
        return f"a {generated} generated column"
    m = _DEFAULT.search(line)
    if m is None:
        return None
    value = m.group(1)
    if _NOW.match(value):
        # The statement's time: the binlog has it to the second, not its fractions.
        digits = m.group(2)
        return "a DEFAULT of the current time with fractions" if digits and int(digits) \
            else None
    return "a DEFAULT expression"


def _rounded(before: ColumnDefinition, after: ColumnDefinition) -> bool:
    """Whether changing a column from ``before`` to ``after`` rounds its stored values."""
    old, new = before.data_type, after.data_type
    if old in _APPROXIMATE and new in _EXACT:
        return True
    if old == new and (old in _TEMPORAL or old in ("decimal", "numeric")):
        return _scale(after) < _scale(before)
    return False


def refill_reason(before: TableDefinition | None, after: TableDefinition | None,
                  statement: str, flavor: str = "mariadb") -> str | None:
    """Why the DDL ``statement`` that took a table from ``before`` to ``after`` gave its
    existing rows values that no row event carries (``None``: it did not, or the table is
    new or gone). ``flavor`` is the server's: MySQL logs virtual generated columns."""
    if before is None or after is None:
        return None
    renames = renamed_columns(statement)
    old_columns = {c.name: c for c in before.columns}
    old_lines, new_lines = column_lines(before.create_sql), column_lines(after.create_sql)
    reasons = []
    for column in after.columns:
        old_name = renames.get(column.name, column.name)
        old = old_columns.get(old_name)
        line = new_lines.get(column.name, "")
        if old is None:
            why = _filled_by_server(line, column.generated, flavor == "mysql")
            if why is not None:
                reasons.append(f"column {column.name} added with {why}")
        elif column.generated and (column.generated != "VIRTUAL" or flavor == "mysql") \
                and line != old_lines.get(old_name, ""):
            reasons.append(f"generated column {column.name} changed")
        elif _rounded(old, column):
            reasons.append(f"column {column.name} changed from {old.column_type} to "
                           f"{column.column_type}")
    return "; ".join(reasons) or None


def statement_refill_reason(statement: str, flavor: str) -> str | None:
    """:func:`refill_reason` from an ALTER TABLE's text alone, when no schema history is
    kept: added columns the server fills per row and redefined generated columns (a type
    change that rounds is seen only with the definitions before it, in a history)."""
    reasons = []
    logs_virtual = flavor == "mysql"
    for name, definition in column_clauses(statement, ("ADD",)):
        why = _filled_by_server(definition, _generated(definition), logs_virtual)
        if why is not None:
            reasons.append(f"column {name} added with {why}")
    for name, definition in column_clauses(statement, ("MODIFY", "CHANGE")):
        generated = _generated(definition)
        if generated == "STORED" or (generated == "VIRTUAL" and logs_virtual):
            reasons.append(f"generated column {name} changed")
    return "; ".join(reasons) or None
