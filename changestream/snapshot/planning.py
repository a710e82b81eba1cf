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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql

from changestream.model.errors import ConfigError
from changestream.model.modes import SNAPSHOT_MODES, SnapshotMode
from changestream.schema.shadow import SYSTEM_DATABASES
from changestream.snapshot.progress import SnapshotProgress

#: A binlog order after every position: a table's rows are withheld from the stream until
#: its snapshot (a table without a key, read whole) says from where on they are new.
WITHHELD = ("\U0010ffff", 1 << 62, 1 << 62)


@dataclass(frozen=True, slots=True)
class SnapshotSettings:
    """``mode`` (see the module docstring; ``None``: unset), ``chunk_rows`` rows per chunk,
    ``tables`` the ``db.table`` patterns to snapshot (empty: every table in scope),
    ``refill``: read a table again after a DDL gave its rows values no row event carries
    (:mod:`changestream.schema.refill`), ``readers``: connections reading a table's chunks
    at once (:mod:`changestream.snapshot.parallel_reads`; 1: one chunk at a time)."""

    mode: SnapshotMode | None = None
    chunk_rows: int = 10_000
    tables: tuple[str, ...] = ()
    refill: bool = True
    readers: int = 1

    def __post_init__(self) -> None:
        if self.mode is not None and self.mode not in SNAPSHOT_MODES:
            raise ConfigError(f"snapshot.mode: {self.mode!r} is not one of "
                              f"{', '.join(SNAPSHOT_MODES)}")
        if self.chunk_rows < 1:
            raise ConfigError("snapshot.chunk_rows: must be positive")
        if self.readers < 1:
            raise ConfigError("snapshot.readers: must be positive")

    def resolved(self, server: bool, start_given: bool) -> SnapshotMode:
        """The mode in effect."""
        if not server:
            if self.mode not in (None, "never"):
                raise ConfigError("snapshot.mode: a snapshot reads a server; binlog files "
                                  "hold only what they hold (use snapshot.mode = never)")
            return "never"
        if self.mode is None:
            return "never" if start_given else "initial"
        if self.mode != "never" and start_given:
            raise ConfigError(f"snapshot.mode {self.mode}: a snapshot streams on from the "
                              "point it began; leave start.at unset (or use "
                              "snapshot.mode = never to read the binlog from a position)")
        return self.mode


def new_snapshot(connect: Callable[[], pymysql.Connection[Any]],
                 in_scope: Callable[[str, str], bool] | None,
                 patterns: tuple[str, ...]) -> SnapshotProgress:
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
