"""The schema history: every table's definition as it stood at each binlog position.

The history is read in binlog order by the reader, which records what each DDL changed
(:meth:`SchemaHistory.record`) and asks for a table's definition when it meets its rows
(:meth:`SchemaHistory.table`). Delivery runs behind reading, so the state saved with a
delivered position is the one *at that position*: :meth:`SchemaHistory.state_at` folds the
changes up to it into the base state. Positions are transaction boundaries and a DDL is a
transaction of its own, so "up to" is exact.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import field
from typing import Any

import orjson

from changestream.model.changes import binlog_order
from changestream.model.record import record
from changestream.schema.definition import TableDefinition, TableKey

HISTORY_FORMAT = 1


@record
class SchemaState:
    """Databases (their CREATE DATABASE text) and tables, at one position."""

    databases: dict[str, str] = field(default_factory=dict)
    tables: dict[TableKey, TableDefinition] = field(default_factory=dict)

    def copy(self) -> SchemaState:
        return SchemaState(dict(self.databases), dict(self.tables))

    def apply(self, change: SchemaChangeSet) -> None:
        for name, create in change.databases.items():
            if create is None:
                self.databases.pop(name, None)
            else:
                self.databases[name] = create
        for key, definition in change.tables.items():
            if definition is None:
                self.tables.pop(key, None)
            else:
                self.tables[key] = definition

    def as_dict(self) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {}
        for (database, table), definition in sorted(self.tables.items()):
            tables.setdefault(database, {})[table] = definition.as_dict()
        return {"databases": dict(sorted(self.databases.items())), "tables": tables}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SchemaState:
        tables = {(db, name): TableDefinition.from_dict(db, name, definition)
                  for db, by_name in (data.get("tables") or {}).items()
                  for name, definition in by_name.items()}
        return cls(dict(data.get("databases") or {}), tables)


@record
class SchemaChangeSet:
    """What one DDL statement changed: new definitions, ``None`` for what it removed."""

    file: str
    pos: int  # the position after the statement
    statement: str
    databases: dict[str, str | None] = field(default_factory=dict)
    tables: dict[TableKey, TableDefinition | None] = field(default_factory=dict)
    #: Tables whose existing rows it gave values no row event carries, and why
    #: (:func:`changestream.schema.refill.refill_reason`).
    refills: dict[TableKey, str] = field(default_factory=dict)


class SchemaHistory:
    """Table definitions over binlog positions, for one source.

    ``state`` is the state where reading starts (the seed, or what was stored with the
    position restarted from). A table it does not hold is unknown: its rows can be read
    only with the names their TABLE_MAP carries.
    Thread-safe: the reader records and reads, delivery asks for states at positions.
    """

    def __init__(self, flavor: str, state: SchemaState, origin: str = "seed"):
        self.flavor = flavor
        self.origin = origin  # where the base came from: "seed", "binlog", "stored"
        self._base = state
        self._stored: tuple[str, bytes] | None = None
        self._current = state.copy()
        self._pending: list[SchemaChangeSet] = []
        self._lock = threading.Lock()
        self.ddl_applied = 0

    # -- the reader's side -------------------------------------------------------------

    def table(self, database: str, table: str) -> TableDefinition | None:
        """The table's definition at the reader's position (``None``: not known)."""
        return self._current.tables.get((database, table))

    @property
    def current(self) -> SchemaState:
        """The state at the reader's position (do not change it)."""
        return self._current

    def record(self, change: SchemaChangeSet) -> None:
        """A DDL's effect, in binlog order."""
        with self._lock:
            self._current.apply(change)
            self._pending.append(change)
            self.ddl_applied += 1

    # -- the delivery side ---------------------------------------------------------------

    def stored_at(self, file: str, pos: int) -> tuple[str, bytes]:
        """The digest and stored form of the state at ``file``:``pos``. Changes up to there
        are folded into the base, so they are not looked at again; the form is computed
        only when that changed anything (DDL is rare, positions are saved per batch)."""
        at = binlog_order(file, pos)
        with self._lock:
            done = 0
            for change in self._pending:
                if binlog_order(change.file, change.pos) > at:
                    break
                self._base.apply(change)
                done += 1
            if done:
                del self._pending[:done]
            if done or self._stored is None:
                data = encode_state(self.flavor, self._base)
                self._stored = (hashlib.sha256(data).hexdigest()[:20], data)
            return self._stored

    @property
    def pending(self) -> int:
        """DDL read but not yet delivered."""
        return len(self._pending)


def encode_state(flavor: str, state: SchemaState) -> bytes:
    """The stored form: one JSON document, keys sorted (so equal states have equal bytes)."""
    return orjson.dumps({"format": HISTORY_FORMAT, "flavor": flavor, **state.as_dict()},
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
