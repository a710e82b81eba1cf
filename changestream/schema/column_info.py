"""ColumnInfo: the shape of every table as it was when each rows event was written.

Names come from the TABLE_MAP itself when the server logs full row metadata
(``binlog_row_metadata=FULL``), else from the schema history (:mod:`changestream.schema`) at
the event's position: a table it does not know there, or whose definition does not fit the
logged columns, stops decoding with :class:`SchemaMismatchError` rather than emit values
under names they were not written under. Without a history (``schema.history = "off"``)
they come from ``information_schema`` as it is now (cached per table, dropped by each DDL
on it); without either, columns are named ``@1``, ``@2`` ... with a warning per table."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.ddl import DdlStatement
from changestream.decoding.events import EventHeader, QueryEvent
from changestream.decoding.query_status import parse_query_status
from changestream.decoding.table_schema import Column, TableSchema, may_hold_address
from changestream.model.errors import ConfigError, SourceError
from changestream.model.record import record
from changestream.schema.definition import (
    ADDRESS_TYPES,
    LOGGED_AS,
    apply_definition,
    type_labels,
    type_mismatch,
)
from changestream.schema.history import SchemaHistory
from changestream.schema.tracker import SchemaTracker

log = logging.getLogger("changestream")


class SchemaMismatchError(SourceError):
    """A logged row does not fit the table's known columns, even after reading them again."""


@record(frozen=True)
class CatalogColumn:
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str
    column_type: str
    key: str
    collation_id: int | None


CatalogLookup = Callable[[str, str], list[CatalogColumn]]
"""``(database, table) -> columns in order``; an empty list when the table does not exist."""

def fits(schema: TableSchema, catalog: list[CatalogColumn]) -> bool:
    """Whether the logged columns can be the catalog's columns (count and types)."""
    if len(catalog) != len(schema.columns):
        return False
    for column, entry in zip(schema.columns, catalog):
        allowed = LOGGED_AS.get(entry.data_type.lower())
        if allowed is not None and column.type_code not in allowed:
            return False
    return True


def _enrich(schema: TableSchema, catalog: list[CatalogColumn]) -> TableSchema:
    columns = []
    for column, entry in zip(schema.columns, catalog):
        changes: dict[str, object] = {"name": entry.name}
        if column.unsigned is None and column.type_code in ft.NUMERIC_TYPES:
            changes["unsigned"] = "unsigned" in entry.column_type.lower()
        if column.collation is None and entry.collation_id is not None:
            changes["collation"] = entry.collation_id
        data_type = entry.data_type.lower()
        if data_type == "enum" and column.enum_values is None:
            changes["enum_values"] = type_labels(entry.column_type)
        if data_type == "set" and column.set_values is None:
            changes["set_values"] = type_labels(entry.column_type)
        columns.append(_replace(column, changes))
    primary_key = schema.primary_key
    if primary_key is None:
        primary_key = tuple(i for i, e in enumerate(catalog) if e.key == "PRI") or None
    return schema.with_columns(tuple(columns), primary_key=primary_key,
                               source="information_schema")


def _replace(column: Column, changes: dict[str, Any]) -> Column:
    return replace(column, **changes)


# DDL statements kept, while no history is open, to bring one opened later up to date.
MAX_EARLY_DDL = 10_000


class ColumnInfo:
    """Tables' columns over time; see the module docstring for where they come from.

    ``tracker`` keeps a schema history (``None``: none is kept); ``lookup`` reads
    ``information_schema`` (used only without a history; ``None``: no server to ask).
    """

    def __init__(self, lookup: CatalogLookup | None = None,
                 tracker: SchemaTracker | None = None,
                 open_tracker: Callable[[EventHeader, bool], SchemaTracker] | None = None,
                 mariadb: bool = False, positional_fallback: bool = False):
        self.lookup = lookup
        self.tracker = tracker
        # No server behind the binlog (files): a table the history cannot name is given
        # positional names (@1, @2, ...) with a warning, as without a history.
        self.positional_fallback = positional_fallback
        self.mariadb = mariadb  # the source is MariaDB (its UUID/INET types need the history)
        # Opens a history when the first TABLE_MAP without names comes: valid where reading
        # began (then the DDL read since is applied to it) or, when that DDL was too much to
        # keep (``False``), at the TABLE_MAP itself.
        self.open_tracker = open_tracker
        self._early_ddl: list[tuple[DdlStatement, QueryEvent]] | None = (
            [] if open_tracker is not None else None)
        self._catalog: dict[tuple[str, str], list[CatalogColumn]] = {}
        self._warned: set[tuple[str, str]] = set()

    @property
    def history(self) -> SchemaHistory | None:
        return self.tracker.history if self.tracker is not None else None

    def resolve(self, schema: TableSchema, header: EventHeader | None) -> TableSchema:
        """The full schema for a TABLE_MAP's ``schema`` read at ``header``."""
        if header is None:
            raise ValueError("ColumnInfo resolves a TABLE_MAP at the place it was read")
        if schema.names_logged:
            if self.mariadb and may_hold_address(schema):
                return self._address_types(schema, header)
            return schema
        if self.tracker is None and self.open_tracker is not None:
            self._open_history(schema, header, self.open_tracker)
        if self.tracker is not None:
            return self._from_history(schema, header, self.tracker.history)
        return self._from_catalog(schema, header)

    def _address_types(self, schema: TableSchema, header: EventHeader) -> TableSchema:
        """``schema`` with MariaDB's UUID/INET6/INET4 columns (logged as BINARY) marked, as
        the history has them at ``header``; as logged when no history can be kept."""
        if self.tracker is None and self.open_tracker is not None:
            try:
                self._open_history(schema, header, self.open_tracker)
            except SchemaMismatchError as exc:
                log.warning("UUID/INET6/INET4 values of %s are given as bytes: %s",
                            schema.qualified_name, exc)
        definition = self.history.table(schema.database, schema.table) if self.history \
            else None
        if definition is None:
            return schema
        kinds = {c.name: c.data_type for c in definition.columns
                 if c.data_type in ADDRESS_TYPES}
        if not kinds:
            return schema
        columns = tuple(replace(c, text_type=kinds[c.name]) if c.name in kinds
                        and c.type_code == ft.STRING else c for c in schema.columns)
        return schema.with_columns(columns)

    def _open_history(self, schema: TableSchema, header: EventHeader,
                      open_tracker: Callable[[EventHeader, bool], SchemaTracker]) -> None:
        early, self._early_ddl, self.open_tracker = self._early_ddl, None, None
        try:
            tracker = open_tracker(header, early is not None)
        except ConfigError as exc:
            if self.positional_fallback:
                log.warning("no schema history for binlog files: %s", exc)
                return
            raise SchemaMismatchError(
                f"rows of {schema.qualified_name} at {header.file} offset {header.offset} "
                f"carry no column names (binlog_row_metadata is not FULL), and {exc}") from None
        for ddl, event in early or ():
            self._apply(tracker, ddl, event)
        self.tracker = tracker

    def _from_history(self, schema: TableSchema, header: EventHeader,
                      history: SchemaHistory) -> TableSchema:
        definition = history.table(schema.database, schema.table)
        where = f"rows of {schema.qualified_name} at {header.file} offset {header.offset}"
        if definition is None and self.positional_fallback:
            return self._from_catalog(schema, header)
        if definition is None:
            raise SchemaMismatchError(
                f"{where} carry no column names (binlog_row_metadata is not FULL) and the "
                "schema history does not know the table at this position (it was created or "
                "changed before the history begins). Start from a position after its last "
                "change (e.g. --start latest, which seeds the history from the server), or "
                "set binlog_row_metadata=FULL on the server")
        columns = definition.logged_columns(len(schema.columns))
        mismatch = (f"logged {len(schema.columns)} columns, the history has "
                    f"{len(definition.columns)}") if columns is None else \
            type_mismatch(schema, columns)
        if columns is None or mismatch is not None:
            raise SchemaMismatchError(
                f"{where} do not fit the table's definition in the schema history: "
                f"{mismatch}. A DDL was missed or applied wrongly; `changestream schema show` "
                "prints the history")
        return apply_definition(schema, columns, definition.primary_key, "schema_history")

    def _from_catalog(self, schema: TableSchema, header: EventHeader) -> TableSchema:
        key = (schema.database, schema.table)
        if self.lookup is None:
            if key not in self._warned:
                self._warned.add(key)
                log.warning("column names of %s are not in the binlog (binlog_row_metadata is "
                            "not FULL), there is no server to ask%s: its columns are named @1, "
                            "@2, ... (%s at offset %d)", schema.qualified_name,
                            " and the files hold no CREATE TABLE of it before"
                            if self.tracker is not None else "", header.file, header.offset)
            return schema
        catalog = self._catalog.get(key)
        if catalog is None or not fits(schema, catalog):
            catalog = self.lookup(*key)
            self._catalog[key] = catalog
        if not fits(schema, catalog):
            logged = ", ".join(c.type_name for c in schema.columns)
            known = ", ".join(f"{c.name} {c.column_type}" for c in catalog) or "no such table"
            raise SchemaMismatchError(
                f"rows of {schema.qualified_name} at {header.file} offset {header.offset} do not "
                f"fit its columns in information_schema: logged {len(schema.columns)} columns "
                f"({logged}), the server has {len(catalog)} ({known}). The table changed after "
                "this event was written; set binlog_row_metadata=FULL on the server so the "
                "binlog carries the columns itself")
        return _enrich(schema, catalog)

    def apply_ddl(self, ddl: DdlStatement, event: QueryEvent) -> None:
        """Bring the history (or the catalog cache) past ``ddl``, logged in ``event``."""
        if self.tracker is not None:
            self._apply(self.tracker, ddl, event)
            return
        if self._early_ddl is not None:
            if len(self._early_ddl) < MAX_EARLY_DDL:
                self._early_ddl.append((ddl, event))
            else:
                self._early_ddl = None
        self.forget(ddl)

    @staticmethod
    def _apply(tracker: SchemaTracker, ddl: DdlStatement, event: QueryEvent) -> None:
        h = event.header
        event.schema_change = tracker.apply(ddl, event.statement, event.database,
                                            parse_query_status(event.status),
                                            h.file or "", h.offset, h.end)

    def forget(self, ddl: DdlStatement) -> None:
        """Forget what ``ddl`` may have changed, so the next TABLE_MAP reads it again."""
        if ddl.kind in ("drop_database", "create_database") and ddl.database:
            for key in [k for k in self._catalog if k[0] == ddl.database]:
                del self._catalog[key]
        for table in ddl.tables:
            key = (table.database or "", table.table)
            self._catalog.pop(key, None)
        if ddl.kind == "other":
            self._catalog.clear()


def information_schema_lookup(connect: Callable[[], Any]) -> CatalogLookup:
    """A lookup that reads ``information_schema`` through a connection from ``connect``
    (a PyMySQL connection factory), connecting again when the connection went away."""
    state: dict[str, Any] = {}

    def query(sql: str, args: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
        for attempt in (1, 2):
            if "conn" not in state:
                state["conn"] = connect()
            try:
                with state["conn"].cursor() as cur:
                    cur.execute(sql, args)
                    return list(cur.fetchall())
            except Exception:
                state.pop("conn", None)
                if attempt == 2:
                    raise
        return []

    def lookup(database: str, table: str) -> list[CatalogColumn]:
        if "collations" not in state:
            state["collations"] = {name: int(i) for name, i in query(
                "SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS") if i}
        ids: dict[str, int] = state["collations"]
        rows = query("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLUMN_KEY, COLLATION_NAME "
                     "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                     "TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (database, table))
        return [CatalogColumn(str(n), str(d), str(t), str(k or ""), ids.get(c) if c else None)
                for n, d, t, k, c in rows]

    return lookup
