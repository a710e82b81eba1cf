"""MySQL 8.4/9.x GTID formats with tags: GTID_TAGGED events (mysql::serialization) and the
tagged form of PREVIOUS_GTIDS."""

from __future__ import annotations

import struct
import uuid

from changestream.decoding.events import EventHeader, GtidEvent

_U64 = struct.Struct("<Q").unpack_from


def _read_varlen(data: bytes, pos: int) -> tuple[int, int]:
    """mysql::serialization variable-length unsigned integer: the count of trailing one bits
    of the first byte is the count of bytes that follow; the value is little-endian after the
    marker bits."""
    first = data[pos]
    extra = 0
    while extra < 8 and first >> extra & 1:
        extra += 1
    if extra == 8:
        return int.from_bytes(data[pos + 1:pos + 9], "little"), pos + 9
    raw = int.from_bytes(data[pos:pos + extra + 1], "little")
    return raw >> (extra + 1), pos + extra + 1


def _read_signed(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _read_varlen(data, pos)
    return (-(raw >> 1) - 1 if raw & 1 else raw >> 1), pos


def decode_gtid_tagged(h: EventHeader, body: bytes) -> GtidEvent:
    """Decode a GTID_TAGGED event body (a serialized message of numbered fields)."""
    pos = 0
    size, pos = _read_varlen(body, pos)
    _last_field, pos = _read_varlen(body, pos)
    end = min(size, len(body))
    values: dict[int, object] = {}
    expected = 0
    while pos < end:
        field_id, pos = _read_varlen(body, pos)
        if field_id < expected:
            raise ValueError(f"GTID_TAGGED field ids out of order at {field_id}")
        expected = field_id + 1
        if field_id == 1:  # uuid: 16 bytes, each a varlen unsigned
            raw = bytearray()
            for _ in range(16):
                b, pos = _read_varlen(body, pos)
                raw.append(b)
            values[1] = uuid.UUID(bytes=bytes(raw))
        elif field_id == 3:  # tag: length then characters
            n, pos = _read_varlen(body, pos)
            values[3] = bytes(body[pos:pos + n]).decode("ascii", "replace")
            pos += n
        elif field_id in (2, 4, 5):
            values[field_id], pos = _read_signed(body, pos)
        else:
            values[field_id], pos = _read_varlen(body, pos)
    event = GtidEvent(h, False, int(values.get(0, 0)), values.get(1, uuid.UUID(int=0)),
                      int(values.get(2, 0)), tag=str(values.get(3) or "") or None)
    event.last_committed = values.get(4)  # type: ignore[assignment]
    event.sequence_number = values.get(5)  # type: ignore[assignment]
    event.immediate_commit_ts = values.get(6)  # type: ignore[assignment]
    event.original_commit_ts = values.get(7, event.immediate_commit_ts)  # type: ignore[assignment]
    event.transaction_length = values.get(8)  # type: ignore[assignment]
    event.immediate_server_version = values.get(9)  # type: ignore[assignment]
    event.original_server_version = values.get(10, event.immediate_server_version)  # type: ignore[assignment]
    return event


def decode_previous_gtids(body: bytes) -> str:
    """The GTID set of a PREVIOUS_GTIDS event as text (``uuid:1-5:7,uuid2[:tag]:1-3``)."""
    head = _U64(body, 0)[0]
    tagged = head >> 56 == 1
    n_sids = head & 0x00FFFFFFFFFFFFFF
    pos = 8
    parts = []
    for _ in range(n_sids):
        sid = uuid.UUID(bytes=bytes(body[pos:pos + 16]))
        pos += 16
        tag = ""
        if tagged:
            n, pos = _read_varlen(body, pos)
            tag = bytes(body[pos:pos + n]).decode("ascii", "replace")
            pos += n
        n_intervals = _U64(body, pos)[0]
        pos += 8
        ranges = []
        for _ in range(n_intervals):
            start, stop = _U64(body, pos)[0], _U64(body, pos + 8)[0]
            pos += 16
            ranges.append(str(start) if stop == start + 1 else f"{start}-{stop - 1}")
        parts.append(":".join([str(sid), *([tag] if tag else []), *ranges]))
    return ",".join(parts)
