"""What the router asks a source server besides the replication stream: a connection that
fails with a clear error, the binlog's head with the GTID set or state at it, the GTIDs
before a position, and which tables are transactional."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from changestream.decoding import event_types as et
from changestream.decoding.events import (
    GtidEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
)
from changestream.model.errors import SourceError
from changestream.model.gtid import (
    GtidProgress,
    MariadbGtidState,
    MysqlGtidSet,
    parse_gtid_progress,
)
from changestream.sources.binlog_head import binlog_status
from changestream.sources.live import LiveSource, StartPosition
from changestream.sources.tls import open_connection

Connect = Callable[[], "pymysql.Connection[Any]"]

# Engines whose changes are not part of transactions (a rollback does not undo them).
_NON_TRANSACTIONAL = frozenset({"myisam", "memory", "heap", "csv", "archive", "merge",
                                "mrg_myisam", "aria", "federated", "blackhole"})


def connect(connection: dict[str, Any]) -> pymysql.Connection[Any]:
    """A connection with the source's settings; a clear :class:`SourceError` when none."""
    try:
        return open_connection(connect_timeout=10, **connection)
    except pymysql.err.MySQLError as exc:
        raise SourceError(f"cannot connect to {connection.get('host')}:"
                          f"{connection.get('port')}: "
                          f"{exc.args[-1] if exc.args else exc}") from None


def latest(connect: Connect, connection: dict[str, Any],
           server_id: int) -> tuple[GtidProgress | None, StartPosition]:
    """The server's current binlog position and the GTID set/state at it."""
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
            row = binlog_status(cur)
            file, pos = str(row[0]), int(row[1])
            if mariadb:
                cur.execute("SELECT @@global.gtid_binlog_pos")
                gtids = str(cur.fetchone()[0] or "")
            else:
                gtids = str(row[4] if len(row) > 4 and row[4] else "")
    finally:
        conn.close()
    start = StartPosition("file", file=file, pos=pos)
    if not mariadb and gtids:
        # MySQL adds a GTID to Executed_Gtid_Set only after the transaction is in the
        # binlog: under load the set read with a position can miss one before it, and a
        # restart by GTID would read that transaction again. The set at the position,
        # from the binlog itself, has no such hole.
        return gtids_before(connection, server_id, file, pos), start
    return parse_gtid_progress(gtids, mariadb), start


def gtids_before(connection: dict[str, Any], server_id: int, file: str,
                 pos: int) -> GtidProgress | None:
    """The GTID set/state at ``file:pos``: the file's PREVIOUS_GTIDS (MySQL) or GTID_LIST
    (MariaDB) plus every GTID between its start and ``pos``. Only the GTID events are
    decoded. ``None`` when the server logs no GTIDs."""
    wanted = {et.FORMAT_DESCRIPTION, et.PREVIOUS_GTIDS, et.MARIADB_GTID_LIST, et.GTID,
              et.GTID_TAGGED, et.MARIADB_GTID}
    source = LiveSource(connection, StartPosition("file", file=file, pos=4),
                        server_id=server_id, blocking=False)
    progress: GtidProgress | None = None
    try:
        for raw in source.raw_events():
            assert raw is not None and source.decoder is not None
            if raw.offset >= pos and raw.data[4] != et.ROTATE:
                break
            if raw.data[4] not in wanted:
                continue
            event = source.decoder.decode(raw.data, raw.file, raw.offset)
            if isinstance(event, PreviousGtidsEvent):
                progress = MysqlGtidSet(event.gtid_set)
            elif isinstance(event, MariadbGtidListEvent):
                progress = MariadbGtidState(event.gtid_state)
            elif isinstance(event, GtidEvent | MariadbGtidEvent) and progress is not None \
                    and event.gtid is not None:
                progress.add(event.gtid)
    finally:
        source.stop()
    return progress


def engine_lookup(connect: Connect) -> Callable[[str, str], bool | None]:
    """Whether a table is transactional, by its engine (``None``: unknown), asked once per
    table."""
    cache: dict[tuple[str, str], bool | None] = {}

    def transactional(database: str, table: str) -> bool | None:
        key = (database, table)
        if key not in cache:
            conn = connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT ENGINE FROM information_schema.TABLES WHERE "
                                "TABLE_SCHEMA = %s AND TABLE_NAME = %s", key)
                    row = cur.fetchone()
            finally:
                conn.close()
            engine = str(row[0]).lower() if row and row[0] else None
            cache[key] = None if engine is None else engine not in _NON_TRANSACTIONAL
        return cache[key]

    return transactional
