"""The binlog's head as a server reports it: the one place that query is written."""

from __future__ import annotations

from typing import Any

import pymysql

from changestream.model.errors import SourceError


def binlog_status(cur: Any) -> tuple[Any, ...]:
    """The server's binlog status row (file, position, ..., MySQL's Executed_Gtid_Set)."""
    try:
        cur.execute("SHOW BINARY LOG STATUS")  # MySQL 8.2 and later
    except pymysql.err.MySQLError:
        cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    if row is None:
        raise SourceError("the server reports no binlog position: is log_bin on?")
    return tuple(row)


def binlog_head(cur: Any) -> tuple[str, int]:
    """The binlog's end now: file and offset."""
    row = binlog_status(cur)
    file = row[0].decode() if isinstance(row[0], bytes | bytearray) else str(row[0])
    return file, int(row[1])
