"""Opening the schema history when the router starts, one of three ways, in this order.

1. **Stored**: the resumed position names a stored state: loaded.
2. **Seeded**: the server's catalog read between two reads of the binlog head, without a
   lock; tables a DDL touches between the start and the second read are left out (and
   learnt from their CREATE TABLE, if that stretch holds it).
3. **Later** (``schema.history = "auto"``, nothing stored): seeded as in 2 at the first
   TABLE_MAP without column names (no DDL comes between a transaction's start and it).
With ``"off"`` there is none. The shadow server starts at the first DDL the history
applies, with the history's tables then (:mod:`changestream.schema.deferred_shadow`).
docs/schema-history.md, "How it is kept", has the details."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql

from changestream.decoding import event_types as et
from changestream.decoding.ddl import parse_ddl
from changestream.decoding.event_decoder import CHECKSUM_CRC32
from changestream.decoding.events import QueryEvent
from changestream.decoding.query_kind import query_kind
from changestream.decoding.query_status import parse_query_status
from changestream.decoding.statements import BEGIN, COMMIT
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConfigError
from changestream.model.record import record
from changestream.schema.catalog import collation_ids, quote, read_definition
from changestream.schema.deferred_shadow import DeferredShadow, ShadowStart, restore
from changestream.schema.definition import TableDefinition, TableKey
from changestream.schema.history import SchemaHistory, SchemaState
from changestream.schema.history_settings import HistorySettings
from changestream.schema.shadow import (
    SYSTEM_DATABASES,
    ShadowServer,
    ShadowSettings,
    shadow_problem,
)
from changestream.schema.store import HistoryStorage
from changestream.schema.tracker import REPLAYED, SchemaTracker
from changestream.sources.binlog_head import binlog_head
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition

log = logging.getLogger("changestream")

_U16 = struct.Struct("<H").unpack_from

QueryScan = Callable[[StartPosition, tuple[str, int]], Iterator[QueryEvent]]
"""``(from, to) -> the QUERY events of the binlog between the two positions``."""


@record
class OpenedHistory:
    """What :func:`open_history` gives the router: a tracker, or none and whether to open
    one when the first rows without logged column names come (``lazy``)."""

    tracker: SchemaTracker | None
    lazy: bool = False
    flavor: str = ""  # the source's: "mysql" or "mariadb"


def open_history(settings: HistorySettings, connect: Callable[[], pymysql.Connection[Any]],
                 scan: QueryScan, start: StartPosition, resume: Position | None,
                 store: HistoryStorage | None,
                 scope: Callable[[str], bool] | None = None,
                 saved: Position | None = None,
                 shadows: ShadowStart = ShadowServer) -> OpenedHistory:
    """The schema history for a router reading a server from ``start`` (see the module
    docstring); ``resume`` is the position it resumes from, if any, and ``saved`` the
    position file's (which names the stored state). It keeps the tables of the databases
    ``scope`` says yes to (default: every database).

    ``auto`` opens it now only to restore a stored one; otherwise when the first TABLE_MAP
    without column names is read (:func:`open_history_at`): a source whose binlog always
    names its columns never starts a shadow server. Raises :class:`ConfigError` when the
    history must be opened now and cannot be."""
    conn = connect()
    try:
        flavor, _ = server_facts(conn)
    finally:
        conn.close()
    if settings.history == "off":
        return OpenedHistory(None, flavor=flavor)
    stored = saved is not None and saved.schema_history is not None and store is not None
    if settings.history == "auto" and not stored:
        return OpenedHistory(None, lazy=True, flavor=flavor)
    return OpenedHistory(open_history_at(settings, connect, scan, start, resume, store, scope,
                                         saved, shadows), flavor=flavor)


def open_history_at(settings: HistorySettings, connect: Callable[[], pymysql.Connection[Any]],
                    scan: QueryScan, start: StartPosition, resume: Position | None,
                    store: HistoryStorage | None,
                    scope: Callable[[str], bool] | None = None,
                    saved: Position | None = None,
                    shadows: ShadowStart = ShadowServer) -> SchemaTracker:
    """A schema history valid at ``start`` (where reading begins; ``resume`` as a
    position, if known). It is the state stored with ``saved`` when that is not after
    ``resume`` (brought forward by the DDL between them: a sink may have landed further
    than the position file says), else seeded from the server. ``shadows`` starts its
    shadow server when the first DDL comes (or hands over one started already). Raises
    :class:`ConfigError` when no shadow server can run here."""
    scope = scope or (lambda database: True)
    conn = connect()
    try:
        flavor, lower_case = server_facts(conn)
    finally:
        conn.close()
    command = settings.shadow_server or None
    problem = shadow_problem(flavor, command)
    if problem is not None:
        raise ConfigError(
            f"the schema history needs a {flavor} server program on this host for its shadow "
            f"server ({problem}); install one or set schema.shadow_server, or set "
            "binlog_row_metadata=FULL on the source")
    state = stored_state(flavor, saved, resume, store)
    history = SchemaHistory(flavor, state, origin="stored") if state is not None else \
        _seeded(flavor, connect, scan, start, scope)
    shadow = DeferredShadow(ShadowSettings(flavor, command, lower_case,
                                           settings.shadow_dir or None),
                            shadows, lambda: history.current)
    tracker = SchemaTracker(history, shadow, scope)
    try:
        if state is not None and saved is not None and resume is not None and \
                binlog_order(saved.file, saved.pos) < binlog_order(resume.file, resume.pos):
            catch_up(tracker, scan(StartPosition("file", file=saved.file, pos=saved.pos),
                                    (resume.file, resume.pos)))
    except BaseException:
        shadow.close()
        raise
    return tracker


def catch_up(tracker: SchemaTracker, events: Iterator[QueryEvent]) -> None:
    """Apply the DDL among ``events`` (between the stored state and the resume point)."""
    for event in events:
        ddl = parse_ddl(event.query, event.database)
        if ddl is not None:
            h = event.header
            tracker.apply(ddl, event.statement, event.database,
                          parse_query_status(event.status), h.file or "", h.offset, h.end)


def server_facts(conn: pymysql.Connection[Any]) -> tuple[str, int]:
    """Flavor and ``lower_case_table_names``."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@lower_case_table_names")
        version, lower_case = cur.fetchone()
    return ("mariadb" if "mariadb" in str(version).lower() else "mysql"), int(lower_case)


def stored_state(flavor: str, saved: Position | None, resume: Position | None,
                 store: HistoryStorage | None) -> SchemaState | None:
    """The history state stored with ``saved`` when reading resumes at or after it
    (``None``: none to use)."""
    if saved is None or saved.schema_history is None or store is None:
        return None
    if resume is None or binlog_order(saved.file, saved.pos) > binlog_order(resume.file,
                                                                            resume.pos):
        log.warning("schema history: the stored one is at %s, after where reading starts "
                    "(%s): seeding it again", saved, resume or "the configured start")
        return None
    stored_flavor, state = store.load(saved.schema_history)
    if stored_flavor != flavor:
        raise ConfigError(f"the stored schema history {store.describe(saved.schema_history)} "
                          f"is of a {stored_flavor} server, the source is {flavor}")
    log.info("schema history: %d tables at %s:%d loaded", len(state.tables), saved.file,
             saved.pos)
    return state


def stored_history(flavor: str, shadow: ShadowServer, saved: Position | None,
                   resume: Position | None, store: HistoryStorage | None
                   ) -> SchemaHistory | None:
    """The stored history (see :func:`stored_state`), its tables created on ``shadow``."""
    state = stored_state(flavor, saved, resume, store)
    if state is None:
        return None
    began = time.monotonic()
    restore(shadow, state)
    log.info("schema history: %d tables created on the shadow server in %.2fs",
             len(state.tables), time.monotonic() - began)
    return SchemaHistory(flavor, state, origin="stored")


def _seeded(flavor: str, connect: Callable[[], pymysql.Connection[Any]],
            scan: QueryScan, start: StartPosition,
            scope: Callable[[str], bool]) -> SchemaHistory:
    began = time.monotonic()
    conn = connect()
    try:
        databases, tables = _read_catalog(conn, scope)
        head = _head(conn)
    finally:
        conn.close()
    touched, touched_databases = _touched(scan, start, head)
    for key in touched:
        tables.pop(key, None)
    for name in touched_databases:
        databases.pop(name, None)
    tables = {k: d for k, d in tables.items() if k[0] in databases}
    state = SchemaState(databases, tables)
    log.info("schema history: seeded with %d tables from the server in %.2fs (%d left out: a "
             "DDL between the start and the head changes them)", len(tables),
             time.monotonic() - began, len(touched))
    return SchemaHistory(flavor, state, origin="seed")


def _read_catalog(conn: pymysql.Connection[Any], scope: Callable[[str], bool]
                  ) -> tuple[dict[str, str], dict[TableKey, TableDefinition]]:
    """Every database in ``scope`` (its CREATE DATABASE) and its base tables' definitions,
    as the server has them now."""

    def query(sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    with conn.cursor() as cur:
        cur.execute("SET NAMES utf8mb4")
    collations = {name: number for name, (number, _) in collation_ids(query).items()}
    databases: dict[str, str] = {}
    tables: dict[TableKey, TableDefinition] = {}
    for (name,) in query("SHOW DATABASES"):
        name = str(name)
        if name.lower() in SYSTEM_DATABASES or not scope(name):
            continue
        try:
            databases[name] = str(query(f"SHOW CREATE DATABASE {quote(name)}")[0][1])
        except (pymysql.MySQLError, IndexError):  # dropped meanwhile: the scan sees its DROP
            continue
        for (table,) in query(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                "AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')", (name,)):
            try:
                definition = read_definition(query, collations, name, str(table))
            except (pymysql.MySQLError, IndexError) as exc:  # dropped meanwhile
                log.debug("schema history seed: %s.%s: %s", name, table, exc)
                continue
            if definition is not None:
                tables[(name, str(table))] = definition
    return databases, tables


def _head(conn: pymysql.Connection[Any]) -> tuple[str, int]:
    with conn.cursor() as cur:
        return binlog_head(cur)


def _touched(scan: QueryScan, start: StartPosition,
             head: tuple[str, int]) -> tuple[set[TableKey], set[str]]:
    """Tables and databases a DDL between ``start`` and ``head`` changes."""
    tables: set[TableKey] = set()
    databases: set[str] = set()
    if start.kind == "file" and binlog_order(start.file or "", start.pos) >= \
            binlog_order(*head):
        return tables, databases
    for event in scan(start, head):
        ddl = parse_ddl(event.query, event.database)
        if ddl is None or ddl.kind not in REPLAYED:
            continue
        if ddl.kind.endswith("_database"):
            databases.add(ddl.database or event.database)
        tables.update((t.database or event.database, t.table) for t in ddl.tables)
    return tables, databases


def scan_server_id(server_id: int) -> int:
    """The replica server id the history's scans connect with: not the router's own (a
    server drops one of two replicas with the same id), next to it."""
    return server_id + 1 if server_id < 0xFFFFFFFF else server_id - 1


# The events scan_queries looks at: what a source may leave out for it.
SCANNED_TYPES = frozenset({et.QUERY, et.MARIADB_QUERY_COMPRESSED, et.FORMAT_DESCRIPTION})


def scan_queries(source: LiveSource | FileSource, head: tuple[str, int]) -> Iterator[QueryEvent]:
    """The QUERY events ``source`` (not blocking) reads before ``head``; no other event is
    decoded but each file's FORMAT_DESCRIPTION, nor the BEGIN and COMMIT around each
    transaction (told from their bytes: a backlog of small transactions holds one each).
    The source is stopped at the end."""
    end_file, end_pos = head
    end = binlog_order(*head)
    file: str | None = None
    before_end_file = True  # the current file comes before the head's
    try:
        for raw in source.raw_events():
            if raw is None:
                continue
            if raw.file != file:  # a file's order is worked out once
                file = raw.file
                if binlog_order(file, 0)[:2] > end[:2]:
                    return
                before_end_file = file != end_file
            if not before_end_file and raw.offset >= end_pos:
                return
            data = raw.data
            code = data[4]
            decoder = source.decoder
            assert decoder is not None
            if code == et.FORMAT_DESCRIPTION:
                # A file's checksum and post-header lengths (a file source learns them
                # nowhere else); once a file.
                decoder.decode(data, raw.file, raw.offset)
                continue
            if code != et.QUERY and code != et.MARIADB_QUERY_COMPRESSED:
                continue
            if _U16(data, 17)[0] & et.LOG_EVENT_ARTIFICIAL_F:
                continue
            if code == et.QUERY and query_kind(
                    data, decoder.post_header_length(et.QUERY),
                    len(data) - (4 if decoder.checksum_alg == CHECKSUM_CRC32 else 0)
            ) in (BEGIN, COMMIT):
                continue
            event = decoder.decode(data, raw.file, raw.offset)
            if isinstance(event, QueryEvent):
                yield event
    finally:
        source.stop()
