"""Which databases, tables and columns reach the sinks.

Patterns are shell-style (``*``, ``?``, ``[abc]``), matched case-sensitively:
``shop`` or ``shop.*`` is a whole database, ``shop.orders`` one table, ``*.tmp_*`` any
table named like that. A table is delivered when it matches some ``include`` pattern (or
``include`` is empty) and no ``exclude`` pattern, or when it was added while running
(``added``), and it is not paused (``paused``; see :mod:`changestream.model.table_changes`).
``exclude_columns`` patterns name columns as ``database.table.column``; those columns are
left out of ``before``, ``after`` and ``primary_key``. DDL follows the same rules through
the tables (or database) it changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import field
from fnmatch import translate

from changestream.decoding.ddl import DdlStatement
from changestream.model.record import record


def _compile(patterns: Sequence[str], parts: int) -> re.Pattern[str] | None:
    if not patterns:
        return None
    regexes = []
    for p in patterns:
        pieces = p.split(".")
        pieces += ["*"] * (parts - len(pieces))
        regexes.append(translate(".".join(pieces)))
    return re.compile("|".join(f"(?:{r})" for r in regexes))


@record
class ChangeFilter:
    """Include/exclude patterns for tables and columns (see the module docstring)."""

    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    exclude_columns: Sequence[str] = ()
    added: Sequence[str] = ()  # tables added while running: in, whatever the patterns say
    paused: Sequence[str] = ()  # tables paused while running: out
    _include: re.Pattern[str] | None = field(init=False, default=None)
    _exclude: re.Pattern[str] | None = field(init=False, default=None)
    _added: re.Pattern[str] | None = field(init=False, default=None)
    _paused: re.Pattern[str] | None = field(init=False, default=None)
    _columns: re.Pattern[str] | None = field(init=False, default=None)
    _table_cache: dict[tuple[str, str], bool] = field(init=False, default_factory=dict)
    _column_cache: dict[tuple[str, str, tuple[str, ...]], frozenset[str]] = field(
        init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._include = _compile(self.include, 2)
        self._exclude = _compile(self.exclude, 2)
        self._columns = _compile(self.exclude_columns, 3)
        self._added = _compile(self.added, 2)
        self._paused = _compile(self.paused, 2)

    @property
    def everything(self) -> bool:
        """True when nothing is filtered out (the router then skips the checks)."""
        return not (self.include or self.exclude or self.exclude_columns or self.paused)

    def with_tables(self, added: Sequence[str], paused: Sequence[str]) -> ChangeFilter:
        """This filter with the tables ``added`` and ``paused`` while running instead of
        its own."""
        return ChangeFilter(self.include, self.exclude, self.exclude_columns, tuple(added),
                            tuple(paused))

    def table(self, database: str, table: str) -> bool:
        """Whether changes of ``database.table`` are delivered."""
        key = (database, table)
        found = self._table_cache.get(key)
        if found is None:
            name = f"{database}.{table}"
            configured = ((self._include is None or bool(self._include.fullmatch(name)))
                          and not (self._exclude is not None
                                   and self._exclude.fullmatch(name)))
            added = self._added is not None and bool(self._added.fullmatch(name))
            paused = self._paused is not None and bool(self._paused.fullmatch(name))
            found = (configured or added) and not paused
            self._table_cache[key] = found
        return found

    def excluded_columns(self, database: str, table: str,
                         columns: tuple[str, ...]) -> frozenset[str]:
        """The names among ``columns`` to leave out."""
        if self._columns is None:
            return frozenset()
        key = (database, table, columns)
        found = self._column_cache.get(key)
        if found is None:
            pattern = self._columns
            found = frozenset(c for c in columns
                              if pattern.fullmatch(f"{database}.{table}.{c}"))
            self._column_cache[key] = found
        return found

    def ddl(self, statement: DdlStatement, default_db: str | None) -> bool:
        """Whether a DDL statement is delivered."""
        if statement.tables:
            return any(self.table(t.database or default_db or "", t.table)
                       for t in statement.tables)
        database = statement.database or default_db
        if database is None:
            return self._include is None
        return self.database(database)

    def database(self, database: str) -> bool:
        """Whether some table of ``database`` may be delivered."""
        if any(p.split(".")[0] == database or re.fullmatch(translate(p.split(".")[0]),
                                                           database) for p in self.added):
            return True
        # Excluded only by a pattern for the whole database (``shop``, ``shop.*``), not by
        # one for some of its tables (``shop.?`` would match the text ``shop.*``).
        for p in self.exclude:
            db, _, table = p.partition(".")
            if table in ("", "*") and re.fullmatch(translate(db), database):
                return False
        if self._include is None:
            return True
        return any(p.split(".")[0] in (database, "*") or re.fullmatch(translate(
            p.split(".")[0]), database) for p in self.include)
