"""The SQL that reads a table in chunks: keyset pagination on a primary or unique key.

A chunk is the next ``limit`` rows after the last key read, in key order. The condition
after a composite key ``(a, b)`` is written out as ``a > x OR (a = x AND b > y)``: both
MySQL and MariaDB use an index range for it (row-constructor comparisons are not ranged
by every version).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from changestream.model.record import record
from changestream.schema.catalog import quote


@record(frozen=True)
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

    def select(self, after: Sequence[Any] | None, upto: Sequence[Any] | None = None
               ) -> tuple[str, tuple[Any, ...]]:
        """The statement and its arguments for the chunk after the key ``after`` (``None``:
        the first chunk): the next ``limit`` rows, or, with ``upto``, every row up to and
        including that key (a range a boundary query found, read by one of several
        readers)."""
        columns = ", ".join(quote(c) for c in self.columns)
        sql, args = self._ranged(f"SELECT {columns}", after, upto)
        return (sql + (f" LIMIT {self.limit}" if upto is None else "")), args

    def boundary(self, after: Sequence[Any] | None) -> tuple[str, tuple[Any, ...]]:
        """The statement for the key of the ``limit``-th row after ``after``: the end of
        the chunk after it (no row: the rest is one chunk). It reads the key's index only."""
        keys = ", ".join(quote(k) for k in self.key)
        sql, args = self._ranged(f"SELECT {keys}", after, None)
        return f"{sql} LIMIT 1 OFFSET {self.limit - 1}", args

    def _ranged(self, select: str, after: Sequence[Any] | None,
                upto: Sequence[Any] | None) -> tuple[str, tuple[Any, ...]]:
        """``select`` from the table, its rows ``where`` holds for after ``after`` and up to
        ``upto`` (each ``None``: no bound), in key order."""
        sql = f"{select} FROM {quote(self.database)}.{quote(self.table)}"
        args: tuple[Any, ...] = ()
        conditions = []
        if self.where:
            # The statement is formatted with its arguments: a % of the condition stays one.
            conditions.append(f"({self.where.replace('%', '%%')})")
        for bound, values in ((after_condition, after), (upto_condition, upto)):
            if values is None:
                continue
            if len(values) != len(self.key):
                raise ValueError(f"a key of {len(self.key)} columns, got {len(values)} values")
            condition, more = bound(self.key, tuple(values))
            conditions.append(condition)
            args += more
        if conditions:
            sql += " WHERE " + " AND ".join(conditions)
        order = ", ".join(quote(k) for k in self.key)
        return f"{sql} ORDER BY {order}", args

    def key_of(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """The key values of a row read by :meth:`select` (in the order of ``columns``)."""
        return tuple(row[self.columns.index(k)] for k in self.key)


def after_condition(key: Sequence[str], values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """``key > values`` in key order, as ORs of equal prefixes and one greater column."""
    return _compare(key, values, ">", ">")


def upto_condition(key: Sequence[str], values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """``key <= values`` in key order, written as :func:`after_condition` is."""
    return _compare(key, values, "<", "<=")


def _compare(key: Sequence[str], values: Sequence[Any], op: str, last_op: str
             ) -> tuple[str, tuple[Any, ...]]:
    """ORs of equal prefixes and one column compared with ``op`` (the last: ``last_op``)."""
    terms = []
    args: list[Any] = []
    for i, column in enumerate(key):
        compare = last_op if i == len(key) - 1 else op
        parts = [f"{quote(k)} = %s" for k in key[:i]] + [f"{quote(column)} {compare} %s"]
        args.extend(values[:i])
        args.append(values[i])
        terms.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
    return " OR ".join(terms) if len(terms) == 1 else "(" + " OR ".join(terms) + ")", \
        tuple(args)
