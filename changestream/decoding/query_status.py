"""A QUERY event's status variables: the session state its statement ran under.

A DDL statement means different things under different sessions: the collation a bare
``utf8mb4`` gets, whether ``"x"`` is a string or a name (``ANSI_QUOTES``), what a TIMESTAMP
column defaults to. The server logs that state before the statement; the schema history
replays each DDL under it (see :mod:`changestream.schema.shadow`).
"""

from __future__ import annotations

import struct

from changestream.model.record import record

_U16 = struct.Struct("<H").unpack_from
_U64 = struct.Struct("<Q").unpack_from

# Status variable codes (MySQL's Query_event::Query_event_status_vars, MariaDB's additions).
Q_FLAGS2 = 0
Q_SQL_MODE = 1
Q_CHARSET = 4
Q_TIME_ZONE = 5
Q_CHARSET_DATABASE = 8
Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP = 16
Q_DEFAULT_COLLATION_FOR_UTF8MB4 = 18

# Bytes after the code; -1: a length byte then that many bytes; -2: two such strings
# (the invoker); -3: the updated databases' names; -4: a catalog (length, bytes, NUL).
_SIZES = {0: 4, 1: 8, 2: -4, 3: 4, 4: 6, 5: -1, 6: -1, 7: 2, 8: 2, 9: 8, 10: 4, 11: -2,
          12: -3, 13: 3, 14: 8, 15: 8, 16: 1, 17: 8, 18: 2, 19: 1, 20: 1, 128: 3, 129: 8,
          130: 1}

# sql_mode bits as the binlog stores them, by name; the combination modes (ANSI,
# TRADITIONAL, ...) are left out: the server logs their parts as bits of their own.
_SQL_MODES_COMMON = {0: "REAL_AS_FLOAT", 1: "PIPES_AS_CONCAT", 2: "ANSI_QUOTES",
                     3: "IGNORE_SPACE", 5: "ONLY_FULL_GROUP_BY", 6: "NO_UNSIGNED_SUBTRACTION",
                     7: "NO_DIR_IN_CREATE",
                     19: "NO_AUTO_VALUE_ON_ZERO", 20: "NO_BACKSLASH_ESCAPES",
                     21: "STRICT_TRANS_TABLES", 22: "STRICT_ALL_TABLES", 23: "NO_ZERO_IN_DATE",
                     24: "NO_ZERO_DATE", 25: "INVALID_DATES", 26: "ERROR_FOR_DIVISION_BY_ZERO",
                     29: "HIGH_NOT_PRECEDENCE", 30: "NO_ENGINE_SUBSTITUTION",
                     31: "PAD_CHAR_TO_FULL_LENGTH"}
_SQL_MODES = {
    "mysql": {**_SQL_MODES_COMMON, 32: "TIME_TRUNCATE_FRACTIONAL"},
    "mariadb": {**_SQL_MODES_COMMON, 4: "IGNORE_BAD_TABLE_OPTIONS",
                13: "NO_KEY_OPTIONS", 14: "NO_TABLE_OPTIONS", 15: "NO_FIELD_OPTIONS",
                28: "NO_AUTO_CREATE_USER", 32: "EMPTY_STRING_IS_NULL",
                33: "SIMULTANEOUS_ASSIGNMENT", 34: "TIME_ROUND_FRACTIONAL"},
}


@record(frozen=True)
class QueryStatus:
    """What a QUERY event says about its session; ``None`` where it said nothing."""

    sql_mode: int | None = None
    client_charset: int | None = None  # collation ids
    connection_collation: int | None = None
    server_collation: int | None = None
    database_collation: int | None = None
    time_zone: str | None = None
    explicit_defaults_for_timestamp: bool | None = None
    default_collation_for_utf8mb4: int | None = None  # MySQL 8.0+

    def sql_mode_names(self, flavor: str) -> list[str]:
        """The ``sql_mode`` as the names ``flavor`` ("mysql" or "mariadb") knows."""
        if self.sql_mode is None:
            return []
        return [name for bit, name in _SQL_MODES[flavor].items() if self.sql_mode >> bit & 1]


def parse_query_status(status: bytes) -> QueryStatus:
    """The status variables of a QUERY event (its status block); it stops at a code it does
    not know (servers write them in code order, the ones read here come first)."""
    found: dict[str, object] = {}
    pos, end = 0, len(status)
    while pos < end:
        code = status[pos]
        pos += 1
        if code == Q_SQL_MODE:
            found["sql_mode"] = _U64(status, pos)[0]
        elif code == Q_CHARSET:
            client, connection, server = struct.unpack_from("<HHH", status, pos)
            found.update(client_charset=client, connection_collation=connection,
                         server_collation=server)
        elif code == Q_TIME_ZONE:
            found["time_zone"] = bytes(status[pos + 1:pos + 1 + status[pos]]).decode()
        elif code == Q_CHARSET_DATABASE:
            found["database_collation"] = _U16(status, pos)[0] or None
        elif code == Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP:
            found["explicit_defaults_for_timestamp"] = bool(status[pos])
        elif code == Q_DEFAULT_COLLATION_FOR_UTF8MB4:
            found["default_collation_for_utf8mb4"] = _U16(status, pos)[0]
        size = _SIZES.get(code)
        if size is None:
            break
        pos += _variable_size(status, pos, size)
    return QueryStatus(**found)  # type: ignore[arg-type]


def query_charset(status: bytes) -> int | None:
    """Only the client character set (collation id): what every QUERY event is decoded
    with, read without the rest (BEGIN is a QUERY event too)."""
    pos, end = 0, len(status)
    while pos < end:
        code = status[pos]
        pos += 1
        if code == Q_CHARSET:
            return int.from_bytes(status[pos:pos + 2], "little")
        size = _SIZES.get(code)
        if size is None:
            return None
        pos += _variable_size(status, pos, size)
    return None


def _variable_size(status: bytes, pos: int, size: int) -> int:
    if size >= 0:
        return size
    if size == -1:
        return 1 + status[pos]
    if size == -2:
        first = 1 + status[pos]
        return first + 1 + status[pos + first]
    if size == -4:
        return 1 + status[pos] + 1
    count = status[pos]  # -3: updated databases
    p = pos + 1
    if count != 254:  # OVER_MAX_DBS_IN_EVENT_MTS: no names follow
        for _ in range(count):
            p = status.index(b"\0", p) + 1
    return p - pos
