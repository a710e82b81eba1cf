"""Opening the schema history when the router starts, one of three ways, in this order.

1. **Stored**: the resumed position names a stored state: loaded, the shadow rebuilt.
2. **Seeded**: the server's catalog copied onto the shadow between two reads of the binlog
   head, without a lock; tables a DDL touches between the start and the second read are
   left out (and learnt from their CREATE TABLE, if that stretch holds it).
3. **Later** (``schema.history = "auto"``, nothing stored): seeded as in 2 at the first
   TABLE_MAP without column names (no DDL comes between a transaction's start and it).
With ``"off"`` there is none. docs/schema-history.md, "How it is kept", has the details."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql

from changestream.decoding import event_types as et
from changestream.decoding.ddl import parse_ddl
from changestream.decoding.events import QueryEvent
from changestream.decoding.query_status import parse_query_status
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConfigError
from changestream.schema.definition import TableKey
from changestream.schema.history import SchemaHistory, SchemaState
from changestream.schema.history_settings import HistorySettings
from changestream.schema.shadow import (
    SYSTEM_DATABASES,
    ShadowError,
    ShadowServer,
    ShadowSettings,
    quote,
)
from changestream.schema.store import HistoryStorage
from changestream.schema.tracker import REPLAYED, SchemaTracker
from changestream.sources.binlog_head import binlog_head
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition

log = logging.getLogger("changestream")

_U16 = struct.Struct("<H").unpack_from

ShadowStart = Callable[[ShadowSettings], ShadowServer]
"""What starts a shadow server with given settings (:class:`ShadowServer` itself, or a
prestart's :meth:`~changestream.schema.shadow_prestart.ShadowPrestart.server`)."""

QueryScan = Callable[[StartPosition, tuple[str, int]], Iterator[QueryEvent]]
"""``(from, to) -> the QUERY events of the binlog between the two positions``."""


@dataclass(slots=True)
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
    shadow server (or hands over one started already). Raises :class:`ConfigError` when
    no shadow server can run."""
    from changestream.devserver import ServerNotAvailableError, ServerStartError

    scope = scope or (lambda database: True)
    conn = connect()
    try:
        flavor, lower_case = server_facts(conn)
    finally:
        conn.close()
    try:
        shadow = shadows(ShadowSettings(flavor, settings.shadow_server or None, lower_case,
                                        settings.shadow_dir or None))
    except (ServerNotAvailableError, ServerStartError) as exc:
        raise ConfigError(
            f"the schema history needs a {flavor} server program on this host for its shadow "
            f"server ({exc}); install one or set schema.shadow_server, or set "
            "binlog_row_metadata=FULL on the source") from None
    try:
        history = stored_history(flavor, shadow, saved, resume, store)
        if history is None:
            return SchemaTracker(_seeded(flavor, shadow, connect, scan, start, scope), shadow,
                                 scope)
        tracker = SchemaTracker(history, shadow, scope)
        if saved is not None and resume is not None and \
                binlog_order(saved.file, saved.pos) < binlog_order(resume.file, resume.pos):
            catch_up(tracker, scan(StartPosition("file", file=saved.file, pos=saved.pos),
                                    (resume.file, resume.pos)))
        return tracker
    except BaseException:
        shadow.close()
        raise


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


def stored_history(flavor: str, shadow: ShadowServer, saved: Position | None,
            resume: Position | None, store: HistoryStorage | None) -> SchemaHistory | None:
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
    began = time.monotonic()
    restore(shadow, state)
    log.info("schema history: %d tables at %s:%d restored in %.2fs", len(state.tables),
             saved.file, saved.pos, time.monotonic() - began)
    return SchemaHistory(flavor, state, origin="stored")


def restore(shadow: ShadowServer, state: SchemaState) -> None:
    """Create ``state``'s databases and tables on the (empty) shadow."""
    for create in state.databases.values():
        shadow.run(create)
    made = set(state.databases)
    for (database, _), definition in sorted(state.tables.items()):
        if database not in made:  # a history learnt from files may not know its CREATE
            shadow.run(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
            made.add(database)
        shadow.run(f"USE {quote(database)}")
        shadow.run(definition.create_sql)


def _seeded(flavor: str, shadow: ShadowServer, connect: Callable[[], pymysql.Connection[Any]],
            scan: QueryScan, start: StartPosition,
            scope: Callable[[str], bool]) -> SchemaHistory:
    began = time.monotonic()
    conn = connect()
    try:
        _copy_catalog(conn, shadow, scope)
        head = _head(conn)
    finally:
        conn.close()
    touched, touched_databases = _touched(scan, start, head)
    for key in sorted(touched):
        shadow.run(f"DROP TABLE IF EXISTS {quote(key[0])}.{quote(key[1])}")
    databases = shadow.databases()
    for name in touched_databases:
        shadow.run(f"DROP DATABASE IF EXISTS {quote(name)}")
        databases.pop(name, None)
    keys = [(db, table) for db in databases for table in shadow.tables(db)]
    tables = {k: d for k, d in shadow.read(keys).items() if d is not None}
    state = SchemaState(databases, tables)
    log.info("schema history: seeded with %d tables from the server in %.2fs (%d left out: a "
             "DDL between the start and the head changes them)", len(tables),
             time.monotonic() - began, len(touched))
    return SchemaHistory(flavor, state, origin="seed")


def _copy_catalog(conn: pymysql.Connection[Any], shadow: ShadowServer,
                  scope: Callable[[str], bool]) -> None:
    """Every database in ``scope`` and its base tables, created alike on the shadow."""
    with conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        names = [str(n) for (n,) in cur.fetchall()
                 if str(n).lower() not in SYSTEM_DATABASES and scope(str(n))]
        for name in names:
            cur.execute(f"SHOW CREATE DATABASE {quote(name)}")
            shadow.run(str(cur.fetchone()[1]))
            cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA "
                        "= %s AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')", (name,))
            tables = [str(t) for (t,) in cur.fetchall()]
            shadow.run(f"USE {quote(name)}")
            for table in tables:
                try:
                    cur.execute(f"SHOW CREATE TABLE {quote(name)}.{quote(table)}")
                except pymysql.MySQLError as exc:  # dropped meanwhile: the scan sees its DROP
                    log.debug("schema history seed: %s.%s: %s", name, table, exc)
                    continue
                try:
                    shadow.run(str(cur.fetchone()[1]))
                except ShadowError as exc:
                    log.warning("schema history: the shadow %s server cannot create %s.%s "
                                "(%s); the table stays unknown to the history", shadow.flavor,
                                name, table, exc)


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


def scan_queries(source: LiveSource | FileSource, head: tuple[str, int]) -> Iterator[QueryEvent]:
    """The QUERY events ``source`` (not blocking) reads before ``head``; no other event is
    decoded. The source is stopped at the end."""
    end = binlog_order(*head)
    try:
        for raw in source.raw_events():
            if raw is None:
                continue
            data = raw.data
            artificial = _U16(data, 17)[0] & et.LOG_EVENT_ARTIFICIAL_F
            if artificial or data[4] in (et.FORMAT_DESCRIPTION, et.ROTATE):
                continue
            if binlog_order(raw.file, raw.offset) >= end:
                return
            if data[4] in (et.QUERY, et.MARIADB_QUERY_COMPRESSED):
                assert source.decoder is not None
                event = source.decoder.decode(data, raw.file, raw.offset)
                if isinstance(event, QueryEvent):
                    yield event
    finally:
        source.stop()
