"""The SQL that reads a table in chunks: keyset pagination on a primary or unique key.

A chunk is the next ``limit`` rows after the last key read, in key order. The condition
after a composite key ``(a, b)`` is written out as ``a > x OR (a = x AND b > y)``: both
MySQL and MariaDB use an index range for it (row-constructor comparisons are not ranged
by every version).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from changestream.schema.catalog import quote


@dataclass(frozen=True, slots=True)
class ChunkQuery:
    """How to read ``database.table`` in chunks of ``limit`` rows ordered by ``key``, only
    the rows ``where`` holds for (an SQL condition; ``None``: all)."""

    database: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    limit: int
    where: str | None = None

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError(f"{self.database}.{self.table}: a chunked read needs a key")
        if self.limit < 1:
            raise ValueError("chunk size must be positive")
        missing = [k for k in self.key if k not in self.columns]
        if missing:
            raise ValueError(f"{self.database}.{self.table}: key columns {missing} are not "
                             "among the columns read")

    def select(self, after: Sequence[Any] | None) -> tuple[str, tuple[Any, ...]]:
        """The statement and its arguments for the chunk after the key ``after`` (``None``:
        the first chunk)."""
        columns = ", ".join(quote(c) for c in self.columns)
        sql = f"SELECT {columns} FROM {quote(self.database)}.{quote(self.table)}"
        args: tuple[Any, ...] = ()
        conditions = []
        if self.where:
            # The statement is formatted with its arguments: a % of the condition stays one.
            conditions.append(f"({self.where.replace('%', '%%')})")
        if after is not None:
            if len(after) != len(self.key):
                raise ValueError(f"a key of {len(self.key)} columns, got {len(after)} values")
            condition, args = after_condition(self.key, tuple(after))
            conditions.append(condition)
        if conditions:
            sql += " WHERE " + " AND ".join(conditions)
        order = ", ".join(quote(k) for k in self.key)
        return f"{sql} ORDER BY {order} LIMIT {self.limit}", args

    def key_of(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """The key values of a row read by :meth:`select` (in the order of ``columns``)."""
        return tuple(row[self.columns.index(k)] for k in self.key)


def after_condition(key: Sequence[str], values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """``key > values`` in key order, as ORs of equal prefixes and one greater column."""
    terms = []
    args: list[Any] = []
    for i, column in enumerate(key):
        parts = [f"{quote(k)} = %s" for k in key[:i]] + [f"{quote(column)} > %s"]
        args.extend(values[:i])
        args.append(values[i])
        terms.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
    return " OR ".join(terms) if len(terms) == 1 else "(" + " OR ".join(terms) + ")", \
        tuple(args)
