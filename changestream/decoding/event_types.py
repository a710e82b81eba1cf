"""Binlog event type codes (MySQL and MariaDB) and their names."""

from __future__ import annotations

START_V3 = 1
QUERY = 2
STOP = 3
ROTATE = 4
INTVAR = 5
LOAD = 6
SLAVE = 7
CREATE_FILE = 8
APPEND_BLOCK = 9
EXEC_LOAD = 10
DELETE_FILE = 11
NEW_LOAD = 12
RAND = 13
USER_VAR = 14
FORMAT_DESCRIPTION = 15
XID = 16
BEGIN_LOAD_QUERY = 17
EXECUTE_LOAD_QUERY = 18
TABLE_MAP = 19
PRE_GA_WRITE_ROWS = 20
PRE_GA_UPDATE_ROWS = 21
PRE_GA_DELETE_ROWS = 22
WRITE_ROWS_V1 = 23
UPDATE_ROWS_V1 = 24
DELETE_ROWS_V1 = 25
INCIDENT = 26
HEARTBEAT = 27
IGNORABLE = 28
ROWS_QUERY = 29
WRITE_ROWS = 30
UPDATE_ROWS = 31
DELETE_ROWS = 32
GTID = 33
ANONYMOUS_GTID = 34
PREVIOUS_GTIDS = 35
TRANSACTION_CONTEXT = 36
VIEW_CHANGE = 37
XA_PREPARE = 38
PARTIAL_UPDATE_ROWS = 39
TRANSACTION_PAYLOAD = 40
HEARTBEAT_V2 = 41
GTID_TAGGED = 42

MARIADB_ANNOTATE_ROWS = 160
MARIADB_BINLOG_CHECKPOINT = 161
MARIADB_GTID = 162
MARIADB_GTID_LIST = 163
MARIADB_START_ENCRYPTION = 164
MARIADB_QUERY_COMPRESSED = 165
MARIADB_WRITE_ROWS_COMPRESSED_V1 = 166
MARIADB_UPDATE_ROWS_COMPRESSED_V1 = 167
MARIADB_DELETE_ROWS_COMPRESSED_V1 = 168
MARIADB_WRITE_ROWS_COMPRESSED = 169
MARIADB_UPDATE_ROWS_COMPRESSED = 170
MARIADB_DELETE_ROWS_COMPRESSED = 171

# Header flags.
LOG_EVENT_ARTIFICIAL_F = 0x20
LOG_EVENT_IGNORABLE_F = 0x80

NAMES: dict[int, str] = {
    code: name
    for name, code in globals().items()
    if name.isupper() and isinstance(code, int) and not name.endswith("_F")
}

# The kind of rows event ("insert", "update", "delete") by type code, and whether the
# rows part of the body is zlib-compressed (MariaDB) and which rows-event version it is.
ROWS_KINDS: dict[int, tuple[str, int, bool]] = {
    PRE_GA_WRITE_ROWS: ("insert", 0, False),
    PRE_GA_UPDATE_ROWS: ("update", 0, False),
    PRE_GA_DELETE_ROWS: ("delete", 0, False),
    WRITE_ROWS_V1: ("insert", 1, False),
    UPDATE_ROWS_V1: ("update", 1, False),
    DELETE_ROWS_V1: ("delete", 1, False),
    WRITE_ROWS: ("insert", 2, False),
    UPDATE_ROWS: ("update", 2, False),
    DELETE_ROWS: ("delete", 2, False),
    PARTIAL_UPDATE_ROWS: ("update", 2, False),
    MARIADB_WRITE_ROWS_COMPRESSED_V1: ("insert", 1, True),
    MARIADB_UPDATE_ROWS_COMPRESSED_V1: ("update", 1, True),
    MARIADB_DELETE_ROWS_COMPRESSED_V1: ("delete", 1, True),
    MARIADB_WRITE_ROWS_COMPRESSED: ("insert", 2, True),
    MARIADB_UPDATE_ROWS_COMPRESSED: ("update", 2, True),
    MARIADB_DELETE_ROWS_COMPRESSED: ("delete", 2, True),
}


def event_type_name(code: int) -> str:
    """The name of an event type code, or ``UNKNOWN_<code>``."""
    return NAMES.get(code, f"UNKNOWN_{code}")
