"""Decoders of the statement and transaction-end event bodies: QUERY (plain and MariaDB's
compressed), XID, XA_PREPARE, ROWS_QUERY, MariaDB's ANNOTATE_ROWS and USER_VAR."""

from __future__ import annotations

import struct

from changestream.decoding import event_types as et
from changestream.decoding.compression import mariadb_uncompress
from changestream.decoding.events import (
    Event,
    EventHeader,
    QueryEvent,
    RowsQueryEvent,
    UserVarEvent,
    XaId,
    XaPrepareEvent,
    XidEvent,
)
from changestream.decoding.query_status import query_charset

__all__ = [
    "decode_annotate_rows",
    "decode_query",
    "decode_rows_query",
    "decode_user_var",
    "decode_xa_prepare",
    "decode_xid",
]

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


def decode_query(h: EventHeader, body: bytes, post_header_length: int) -> Event:
    """A QUERY or MariaDB QUERY_COMPRESSED event; ``post_header_length`` is the one the
    FORMAT_DESCRIPTION gives QUERY events."""
    post = post_header_length
    thread_id, exec_time = _U32(body, 0)[0], _U32(body, 4)[0]
    db_len = body[8]
    error_code = _U16(body, 9)[0]
    status_len = _U16(body, 11)[0] if post >= 13 else 0
    status = body[post:post + status_len]
    pos = post + status_len
    database = bytes(body[pos:pos + db_len]).decode("utf-8", "replace")
    pos += db_len + 1
    raw = bytes(body[pos:])
    compressed = h.type_code == et.MARIADB_QUERY_COMPRESSED
    if compressed:
        raw = mariadb_uncompress(raw)
    charset = query_charset(status)
    return QueryEvent(h, thread_id, exec_time, error_code, database,
                      raw.decode("utf-8", "replace"), charset, compressed, raw,
                      bytes(status))


def decode_xid(h: EventHeader, body: bytes) -> Event:
    """An XID event: the commit of an InnoDB transaction."""
    return XidEvent(h, _U64(body, 0)[0])


def decode_xa_prepare(h: EventHeader, body: bytes) -> Event:
    """An XA_PREPARE event: the end of an XA transaction's first phase."""
    one_phase = bool(body[0])
    format_id = struct.unpack_from("<i", body, 1)[0]
    gl, bl = _U32(body, 5)[0], _U32(body, 9)[0]
    data = bytes(body[13:13 + gl + bl])
    return XaPrepareEvent(h, one_phase, XaId(format_id, data[:gl], data[gl:]))


def decode_rows_query(h: EventHeader, body: bytes) -> Event:
    """A ROWS_QUERY event: the statement behind the rows events after it (MySQL)."""
    return RowsQueryEvent(h, bytes(body[1:]).decode("utf-8", "replace"))


def decode_annotate_rows(h: EventHeader, body: bytes) -> Event:
    """An ANNOTATE_ROWS event: MariaDB's ROWS_QUERY."""
    return RowsQueryEvent(h, bytes(body).decode("utf-8", "replace"))


def decode_user_var(h: EventHeader, body: bytes) -> Event:
    """A USER_VAR event: the name of a user variable a statement used, and if it is NULL."""
    n = _U32(body, 0)[0]
    name = bytes(body[4:4 + n]).decode("utf-8", "replace")
    return UserVarEvent(h, name, bool(body[4 + n]))
