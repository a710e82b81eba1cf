"""Keeps a schema history current: each DDL of the binlog, in order, replayed on the shadow
server, and what it changed read back into the history."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from changestream.decoding.ddl import DdlStatement, TableName
from changestream.decoding.query_status import QueryStatus
from changestream.model.errors import SourceError
from changestream.schema.deferred_shadow import DeferredShadow
from changestream.schema.definition import TableDefinition, TableKey
from changestream.schema.history import SchemaChangeSet, SchemaHistory
from changestream.schema.refill import refill_reason
from changestream.schema.shadow import (
    SYSTEM_DATABASES,
    UNKNOWN_OBJECT_ERRORS,
    ShadowError,
    ShadowServer,
    quote,
)

log = logging.getLogger("changestream")

#: DDL kinds that change what tables exist or their columns, so the shadow replays them.
REPLAYED = frozenset({"create_table", "alter_table", "rename_table", "drop_table",
                      "create_database", "drop_database", "alter_database", "create_index",
                      "drop_index"})

# MySQL 8.0.21+ logs CREATE TABLE ... SELECT as the table's definition followed by
# START TRANSACTION (the rows follow in the same transaction); only an applier may run it.
_ATOMIC_CTAS = re.compile(rb"\s+START\s+TRANSACTION\s*$", re.IGNORECASE)


class SchemaHistoryError(SourceError):
    """A DDL the history cannot apply: the router stops rather than guess.

    The message names the statement and where it is; see ``changestream schema --help``
    for the ways on (skip the statement, re-seed the history from the server)."""


class SchemaTracker:
    """Applies DDL statements to ``history`` through ``shadow``."""

    def __init__(self, history: SchemaHistory, shadow: ShadowServer | DeferredShadow,
                 scope: Callable[[str], bool] | None = None, lenient: bool = False):
        self.history = history
        self.shadow = shadow
        # With no server to re-seed from (binlog files), a DDL the shadow refuses makes its
        # tables unknown (their rows then get positional names) instead of stopping.
        self.lenient = lenient
        self.scope = scope or (lambda database: True)  # the databases whose tables it keeps
        #: ``file:pos`` of statements to leave out (``changestream schema skip``).
        self.skip: set[str] = set()

    def apply(self, ddl: DdlStatement, statement: bytes, database: str, status: QueryStatus,
              file: str, pos: int, end: int) -> SchemaChangeSet | None:
        """Apply the DDL logged at ``file``:``pos`` (ending at ``end``); what it changed, or
        ``None`` when it changes no table the history keeps."""
        if ddl.kind not in REPLAYED:
            return None
        databases = _databases(ddl, database)
        keys = _keys(ddl, database)
        named = databases or {k[0] for k in keys}
        if not any(self.scope(d) for d in named - SYSTEM_DATABASES):
            return None
        if f"{file}:{pos}" in self.skip:
            log.warning("schema history: skipping the DDL at %s:%d as told: %s", file, pos,
                        _short(statement))
            return None
        if ddl.kind == "create_table" and self.shadow.flavor == "mysql":
            statement = _ATOMIC_CTAS.sub(b"", statement)
        change = SchemaChangeSet(file, end, _short(statement))
        if self.lenient and not databases:
            # Files begin after their databases were created: the shadow makes them (with
            # the server's default charset; a row's logged charsets still win).
            wanted = {k[0] for k in keys} | ({database} if database else set())
            for name in sorted(wanted - self.shadow.database_names() - SYSTEM_DATABASES):
                self.shadow.run(f"CREATE DATABASE IF NOT EXISTS {quote(name)}")
        try:
            self.shadow.replay(statement, database, status)
        except ShadowError as exc:
            if exc.code not in UNKNOWN_OBJECT_ERRORS and not self.lenient:
                raise SchemaHistoryError(
                    f"the schema history cannot apply the DDL at {file}:{pos} "
                    f"({_short(statement)}): the shadow {self.shadow.flavor} server says: "
                    f"{exc} (error {exc.code}). Fix it with `changestream schema skip "
                    f"{file}:{pos}` or, once the router is at the head of the binlog, "
                    "`changestream schema reseed`") from None
            # It names a table or database the history never knew (older than the history):
            # what it touches is unknown from here on.
            log.warning("schema history: the DDL at %s:%d %s (%s); %s unknown from here on",
                        file, pos, "names a table the history does not know"
                        if exc.code in UNKNOWN_OBJECT_ERRORS else "cannot be applied",
                        exc, ", ".join(f"{d}.{t}" for d, t in keys) or "its tables are")
            for db, table in keys:
                self.shadow.run(f"DROP TABLE IF EXISTS {quote(db)}.{quote(table)}")
                change.tables[(db, table)] = None
            self.history.record(change)
            return change
        for name in databases:
            created = self.shadow.databases().get(name)
            change.databases[name] = created
            known = {k for k in self.history.current.tables if k[0] == name}
            keys |= known | {(name, t) for t in self.shadow.tables(name)}
        definitions: dict[TableKey, TableDefinition | None] = self.shadow.read(sorted(keys))
        text = statement.decode("utf-8", "replace")
        for key, definition in definitions.items():
            before = self.history.table(*key)
            if definition != before:
                change.tables[key] = definition
                reason = refill_reason(before, definition, text, self.shadow.flavor)
                if reason is not None:
                    change.refills[key] = reason
        self.history.record(change)
        return change


def _qualified(name: TableName, database: str) -> TableKey:
    return (name.database or database, name.table)


def _keys(ddl: DdlStatement, database: str) -> set[TableKey]:
    return {_qualified(t, database) for t in ddl.tables}


def _databases(ddl: DdlStatement, database: str) -> set[str]:
    if ddl.kind in ("create_database", "drop_database", "alter_database"):
        return {ddl.database or database}
    return set()


def _short(statement: bytes, limit: int = 200) -> str:
    text = " ".join(statement.decode("utf-8", "replace").split())
    return text if len(text) <= limit else text[:limit] + "..."
