"""What a snapshot reads, and whether the router needs one (``snapshot.mode``).

Modes: ``initial`` snapshots the tables in scope when the router starts with no saved
position, then streams from the point the snapshot began; ``when-needed`` also does when the
saved position's binlog file is no longer on the server (purged); ``initial-only`` snapshots
as ``initial`` does and stops when it is done; ``never`` does not. Unset, the mode is
``initial`` for a server source started without ``start.at``, and ``never`` otherwise (a
start position means the binlog from there is wanted).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable, Sequence
from typing import Any

import pymysql

from changestream.schema.shadow import SYSTEM_DATABASES
from changestream.snapshot.progress import SnapshotProgress

#: A binlog order after every position: a table's rows are withheld from the stream until
#: its snapshot (a table without a key, read whole) says from where on they are new.
WITHHELD = ("\U0010ffff", 1 << 62, 1 << 62)


def new_snapshot(connect: Callable[[], pymysql.Connection[Any]],
                 in_scope: Callable[[str, str], bool] | None,
                 patterns: Sequence[str]) -> SnapshotProgress:
    """A snapshot of every base table in scope (and matching ``patterns``, if any)."""
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM "
                        "information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
                        "ORDER BY TABLE_SCHEMA, TABLE_NAME")
            rows = [(str(d), str(t), int(n or 0)) for d, t, n in cur.fetchall()]
    finally:
        conn.close()
    tables, total = [], 0
    for database, table, estimate in rows:
        if database.lower() in SYSTEM_DATABASES:
            continue
        if in_scope is not None and not in_scope(database, table):
            continue
        name = f"{database}.{table}"
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        tables.append(name)
        total += estimate
    return SnapshotProgress(snapshot_id(), tuple(tables), total_rows=total)


def snapshot_id() -> str:
    """A new snapshot's id: the time it begins, to the microsecond (UTC)."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def file_purged(connect: Callable[[], pymysql.Connection[Any]], file: str) -> bool:
    """Whether the server no longer has binlog file ``file``."""
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            names = {str(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()
    return file.rsplit("/", 1)[-1] not in names


def keyless_tables(connect: Callable[[], pymysql.Connection[Any]],
                   names: tuple[str, ...]) -> set[tuple[str, str]]:
    """Which of ``names`` (``db.table``) have neither a primary key nor a unique key on NOT
    NULL columns: a snapshot reads them whole, and withholds their changes until then."""
    wanted = {tuple(n.split(".", 1)) for n in names}
    if not wanted:
        return set()
    databases = sorted({d for d, _ in wanted})
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME, "
                "MAX(c.IS_NULLABLE = 'YES') FROM information_schema.STATISTICS s "
                "JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND "
                "c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME "
                "WHERE s.NON_UNIQUE = 0 AND s.TABLE_SCHEMA IN "
                f"({', '.join(['%s'] * len(databases))}) "
                "GROUP BY s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME", databases)
            keyed = {(str(d), str(t)) for d, t, _, nullable in cur.fetchall()
                     if not int(nullable or 0)}
    finally:
        conn.close()
    return {(d, t) for d, t in wanted if (d, t) not in keyed}
