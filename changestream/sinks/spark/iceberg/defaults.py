"""The values MySQL/MariaDB give existing rows when a column is added.

``ALTER TABLE t ADD COLUMN c ... DEFAULT x`` fills every existing row with ``x`` on the
server, and no row event says so: a mirror has to do the same. This reads the column's
definition from the DDL statement and returns a Spark SQL literal for it: the DEFAULT value,
the statement's commit time for ``DEFAULT CURRENT_TIMESTAMP``, the implicit default of a
``NOT NULL`` column without one (0, '', the first ENUM label, an empty SET), or ``None``
(NULL, also for expression defaults and zero dates, which are not known here).
"""

from __future__ import annotations

import datetime as dt
import re

from changestream.decoding.ddl import column_clauses

_DEFAULT = re.compile(r"\bDEFAULT\s+('(?:[^'\\]|\\.|'')*'|\([^)]*\)|[-+\w.:]+(?:\(\d*\))?)",
                      re.I)
_NUMERIC = re.compile(r"^(tiny|small|medium|big)?int|^integer|^decimal|^numeric|^float|"
                      r"^double|^real|^bit|^bool|^year", re.I)


def added_column_defaults(sql: str, commit_ts: dt.datetime | None) -> dict[str, str | None]:
    """``{column: Spark SQL literal or None}`` for each column ``sql`` adds."""
    return {column: _literal(definition, commit_ts)
            for column, definition in column_clauses(sql, ("ADD",))}


def _literal(definition: str, commit_ts: dt.datetime | None) -> str | None:
    default = _DEFAULT.search(definition)
    type_text = definition.split()[0] if definition else ""
    if default is not None:
        value = default.group(1)
        upper = value.upper()
        if upper == "NULL":
            return None
        if upper.startswith(("CURRENT_TIMESTAMP", "NOW(", "LOCALTIME", "NOW")):
            if commit_ts is None:
                return None
            stamp = commit_ts.astimezone(dt.UTC).replace(tzinfo=None).isoformat(" ")
            return f"TIMESTAMP '{stamp}'" if not type_text.upper().startswith("DATETIME") \
                else f"TIMESTAMP_NTZ '{stamp}'"
        if value.startswith("("):
            return None  # an expression: evaluated by the server, not known here
        if value.startswith("'"):
            text = value[1:-1].replace("''", "'").replace("\\'", "'")
            if _NUMERIC.match(type_text):
                return text if re.fullmatch(r"[-+]?\d+(\.\d+)?", text) else None
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if upper in ("TRUE", "FALSE"):  # BOOLEAN is TINYINT(1): a byte column in Spark
            return "1" if upper == "TRUE" else "0"
        if re.fullmatch(r"[-+]?\d+(\.\d+)?", value):
            return value
        return None
    if not re.search(r"\bNOT\s+NULL\b", definition, re.I):
        return None
    lowered = type_text.lower()
    if _NUMERIC.match(lowered):
        return "0"
    if lowered.startswith("enum"):
        first = re.search(r"'((?:[^']|'')*)'", definition)
        return "'" + first.group(1).replace("''", "'") + "'" if first else None
    if lowered.startswith("set"):
        return "array()"
    if re.match(r"(var)?char|(tiny|medium|long)?text", lowered):
        return "''"
    if re.match(r"(var)?binary|(tiny|medium|long)?blob", lowered):
        return "X''"
    return None  # dates and times: MySQL's zero dates have no Spark value
