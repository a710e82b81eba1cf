"""Decoders of the GTID event bodies: MySQL's GTID, ANONYMOUS_GTID and PREVIOUS_GTIDS, and
MariaDB's GTID and GTID_LIST (MySQL's GTID_TAGGED is in :mod:`.gtid_tagged`)."""

from __future__ import annotations

import struct
import uuid

from changestream.decoding import event_types as et
from changestream.decoding.events import (
    FL_COMPLETED_XA,
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    Event,
    EventHeader,
    GtidEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
    XaId,
)
from changestream.decoding.gtid_tagged import decode_previous_gtids
from changestream.decoding.packed import read_packed_int

__all__ = [
    "decode_gtid",
    "decode_mariadb_gtid",
    "decode_mariadb_gtid_list",
    "decode_previous_gtids_event",
]

_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_I64 = struct.Struct("<q").unpack_from


def decode_gtid(h: EventHeader, body: bytes) -> Event:
    """A GTID or ANONYMOUS_GTID event (with logical clock and commit timestamps if logged)."""
    commit_flag = body[0]
    sid = uuid.UUID(bytes=bytes(body[1:17]))
    gno = _I64(body, 17)[0]
    event = GtidEvent(h, h.type_code == et.ANONYMOUS_GTID, commit_flag, sid, gno)
    pos, end = 25, len(body)
    if pos < end and body[pos] == 2:  # logical clock timestamps (5.7+)
        event.last_committed = _I64(body, 26)[0]
        event.sequence_number = _I64(body, 34)[0]
        pos = 42
    if pos + 7 <= end:  # commit timestamps (8.0.1+)
        ts = int.from_bytes(body[pos:pos + 7], "little")
        pos += 7
        event.immediate_commit_ts = ts & ~(1 << 55)
        if ts & (1 << 55):
            event.original_commit_ts = int.from_bytes(body[pos:pos + 7], "little")
            pos += 7
        else:
            event.original_commit_ts = event.immediate_commit_ts
        if pos < end:
            event.transaction_length, pos = read_packed_int(body, pos)
        if pos + 4 <= end:
            v = _U32(body, pos)[0]
            pos += 4
            event.immediate_server_version = v & 0x7FFFFFFF
            if v & 0x80000000:
                event.original_server_version = _U32(body, pos)[0]
                pos += 4
            else:
                event.original_server_version = event.immediate_server_version
    return event


def decode_previous_gtids_event(h: EventHeader, body: bytes) -> Event:
    """A PREVIOUS_GTIDS event: the GTID set of the binlogs before this one."""
    return PreviousGtidsEvent(h, decode_previous_gtids(body))


def decode_mariadb_gtid(h: EventHeader, body: bytes) -> Event:
    """A MariaDB GTID event (with its commit id and XA transaction id if logged)."""
    seq_no = _U64(body, 0)[0]
    domain_id = _U32(body, 8)[0]
    flags2 = body[12]
    event = MariadbGtidEvent(h, domain_id, seq_no, flags2)
    pos = 13  # without a commit id, 6 zero bytes pad the fixed part to 19 bytes
    if flags2 & FL_GROUP_COMMIT_ID:
        event.commit_id = _U64(body, 13)[0]
        pos = 21
    if flags2 & (FL_PREPARED_XA | FL_COMPLETED_XA):
        format_id = struct.unpack_from("<i", body, pos)[0]
        gl, bl = body[pos + 4], body[pos + 5]
        data = bytes(body[pos + 6:pos + 6 + gl + bl])
        event.xid = XaId(format_id, data[:gl], data[gl:])
        pos += 6 + gl + bl
    if pos < len(body):
        event.flags_extra = body[pos]
    return event


def decode_mariadb_gtid_list(h: EventHeader, body: bytes) -> Event:
    """A MariaDB GTID_LIST event: ``(domain, server id, sequence number)`` per domain."""
    count = _U32(body, 0)[0] & 0x0FFFFFFF
    gtids = [
        (_U32(body, 4 + 16 * i)[0], _U32(body, 8 + 16 * i)[0], _U64(body, 12 + 16 * i)[0])
        for i in range(count)
    ]
    return MariadbGtidListEvent(h, gtids)
