"""MySQL 8.4/9.x GTID formats with tags: GTID_TAGGED events (mysql::serialization), the
tagged form of PREVIOUS_GTIDS, and GTID sets (tagged or not) encoded for COM_BINLOG_DUMP_GTID.

Checked against MySQL 9.7's own bytes and ``mysqlbinlog`` (tests/integration/test_gtid_tagged.py);
the serialization format is described at :func:`decode_gtid_tagged`."""

from __future__ import annotations

import re
import struct
import uuid

from changestream.decoding.events import EventHeader, GtidEvent

_U64 = struct.Struct("<Q").unpack_from

SERIALIZATION_VERSION = 1

# Field ids of Gtid_event (libs/mysql/binlog/event/control_events.h, define_fields()).
F_FLAGS = 0
F_UUID = 1
F_GNO = 2
F_TAG = 3
F_LAST_COMMITTED = 4
F_SEQUENCE_NUMBER = 5
F_IMMEDIATE_COMMIT_TS = 6
F_ORIGINAL_COMMIT_TS = 7
F_TRANSACTION_LENGTH = 8
F_IMMEDIATE_SERVER_VERSION = 9
F_ORIGINAL_SERVER_VERSION = 10
F_COMMIT_GROUP_TICKET = 11
_SIGNED_FIELDS = (F_GNO, F_LAST_COMMITTED, F_SEQUENCE_NUMBER)

#: The format byte of an encoded GTID set (first and last byte of its 8-byte count when tagged).
FORMAT_UNTAGGED = 0
FORMAT_TAGGED = 1


def _read_varlen(data: bytes, pos: int) -> tuple[int, int]:
    """mysql::serialization variable-length unsigned integer at ``pos``: (value, next pos)."""
    first = data[pos]
    extra = 0
    while extra < 8 and first >> extra & 1:
        extra += 1
    if pos + extra + 1 > len(data):
        raise ValueError(f"variable-length integer at {pos} runs past the end")
    if extra == 8:
        return int.from_bytes(data[pos + 1:pos + 9], "little"), pos + 9
    raw = int.from_bytes(data[pos:pos + extra + 1], "little")
    return raw >> (extra + 1), pos + extra + 1


def _read_signed(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _read_varlen(data, pos)
    return (-(raw >> 1) - 1 if raw & 1 else raw >> 1), pos


def _write_varlen(value: int) -> bytes:
    """The inverse of ``_read_varlen`` (for unsigned values below 2**64)."""
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"{value} does not fit a variable-length unsigned integer")
    nbytes = (value.bit_length() * 575 >> 12) + 1
    if nbytes == 9:
        return b"\xff" + value.to_bytes(8, "little")
    return ((value << nbytes) | ((1 << (nbytes - 1)) - 1)).to_bytes(nbytes, "little")


def decode_gtid_tagged(h: EventHeader, body: bytes) -> GtidEvent:
    """Decode a GTID_TAGGED event body (``body`` without header and checksum).

    A GTID_TAGGED body is one mysql::serialization message::

        <serialization_version=1> <message_size> <last_non_ignorable_field_id> { <field_id> <data> }

    every number a variable-length integer (the count of trailing one bits of the first
    byte is the count of bytes that follow; the value is little-endian above the marker
    bits; signed numbers are zigzag encoded). Fields are written in id order and may be left
    out (then they take their defaults); ids unknown to this decoder can only follow the
    known ones.
    """
    version, pos = _read_varlen(body, 0)
    if version != SERIALIZATION_VERSION:
        raise ValueError(f"GTID_TAGGED serialization version {version}, expected "
                         f"{SERIALIZATION_VERSION}")
    size, pos = _read_varlen(body, pos)
    if size > len(body):
        raise ValueError(f"GTID_TAGGED message says {size} bytes, the body has {len(body)}")
    last_non_ignorable, pos = _read_varlen(body, pos)
    if last_non_ignorable > F_COMMIT_GROUP_TICKET + 1:
        raise ValueError(f"GTID_TAGGED has a field this decoder does not know and must not "
                         f"ignore (last non-ignorable field id {last_non_ignorable})")
    values: dict[int, int | str | uuid.UUID] = {}
    expected = 0
    while pos < size:
        field_id, pos = _read_varlen(body, pos)
        if field_id < expected:
            raise ValueError(f"GTID_TAGGED field ids out of order at {field_id}")
        expected = field_id + 1
        if field_id > F_COMMIT_GROUP_TICKET:
            break  # newer, ignorable fields: only the message size tells where they end
        if field_id == F_UUID:  # an array of 16 bytes, each a variable-length integer
            raw = bytearray()
            for _ in range(16):
                b, pos = _read_varlen(body, pos)
                raw.append(b)
            values[F_UUID] = uuid.UUID(bytes=bytes(raw))
        elif field_id == F_TAG:  # a string: its length, then its characters
            n, pos = _read_varlen(body, pos)
            if pos + n > size:
                raise ValueError("GTID_TAGGED tag runs past the end of the message")
            values[F_TAG] = bytes(body[pos:pos + n]).decode("ascii")
            pos += n
        elif field_id in _SIGNED_FIELDS:
            values[field_id], pos = _read_signed(body, pos)
        else:
            values[field_id], pos = _read_varlen(body, pos)
    if pos > size:
        raise ValueError(f"GTID_TAGGED fields run past the message size {size}")

    def number(field: int) -> int | None:
        value = values.get(field)
        return value if isinstance(value, int) else None

    sid = values.get(F_UUID)
    tag = values.get(F_TAG)
    event = GtidEvent(h, False, number(F_FLAGS) or 0,
                      sid if isinstance(sid, uuid.UUID) else uuid.UUID(int=0),
                      number(F_GNO) or 0, tag=tag if isinstance(tag, str) and tag else None)
    event.last_committed = number(F_LAST_COMMITTED)
    event.sequence_number = number(F_SEQUENCE_NUMBER)
    event.immediate_commit_ts = number(F_IMMEDIATE_COMMIT_TS)
    original_ts = number(F_ORIGINAL_COMMIT_TS)
    event.original_commit_ts = event.immediate_commit_ts if original_ts is None else original_ts
    event.transaction_length = number(F_TRANSACTION_LENGTH)
    event.immediate_server_version = number(F_IMMEDIATE_SERVER_VERSION)
    original_version = number(F_ORIGINAL_SERVER_VERSION)
    event.original_server_version = (event.immediate_server_version if original_version is None
                                     else original_version)
    return event


# -- GTID sets ----------------------------------------------------------------------------------

#: {(uuid, tag): [(start, end_exclusive), ...]}; tag "" for untagged GTIDs.
GtidIntervals = dict[tuple[uuid.UUID, str], list[tuple[int, int]]]

_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}$")
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?$")


def format_gtid_set(sets: GtidIntervals) -> str:
    """MySQL's text for a GTID set: ``uuid:1-5:7:tag:1-3,uuid2:1`` (tags after a uuid's own
    intervals, as ``@@gtid_executed`` and ``mysqlbinlog`` print them)."""
    tags_by_uuid: dict[uuid.UUID, list[str]] = {}
    for sid, tag in sets:  # uuids in the order given; per uuid, untagged first, then tags
        tags_by_uuid.setdefault(sid, []).append(tag)
    by_uuid: dict[uuid.UUID, list[str]] = {}
    for sid, tags in tags_by_uuid.items():
        parts = by_uuid[sid] = []
        for tag in sorted(tags):
            ranges = [str(a) if b == a + 1 else f"{a}-{b - 1}" for a, b in sets[(sid, tag)]]
            parts.extend([tag, *ranges] if tag else ranges)
    return ",".join(":".join([str(sid), *parts]) for sid, parts in by_uuid.items())


def parse_gtid_set(text: str) -> GtidIntervals:
    """A GTID set's text (tags allowed, whitespace and newlines ignored) as intervals per
    uuid and tag, sorted and merged. Raises ``ValueError`` naming what is wrong."""
    out: GtidIntervals = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        items = [i.strip() for i in part.split(":")]
        try:
            sid = uuid.UUID(items[0])
        except ValueError:
            raise ValueError(f"GTID set {text!r}: {items[0]!r} is not a UUID") from None
        tag = ""
        for item in items[1:]:
            m = _INTERVAL.match(item)
            if m:
                start = int(m.group(1))
                stop = int(m.group(2) or start)
                if start < 1 or stop < start:
                    raise ValueError(f"GTID set {text!r}: bad interval {item!r}")
                out.setdefault((sid, tag), []).append((start, stop + 1))
            elif _TAG.match(item):
                tag = item.lower()  # MySQL keeps tags in lower case
            else:
                raise ValueError(f"GTID set {text!r}: {item!r} is neither an interval nor a "
                                 "tag")
    for key, intervals in out.items():
        merged: list[tuple[int, int]] = []
        for a, b in sorted(intervals):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
            else:
                merged.append((a, b))
        out[key] = merged
    return out


def encode_gtid_set(text: str) -> bytes:
    """A GTID set in the binary form of COM_BINLOG_DUMP_GTID and PREVIOUS_GTIDS: the
    untagged format when no GTID has a tag (what every server understands), else the
    tagged format of MySQL 8.3+."""
    sets = parse_gtid_set(text)
    tagged = any(tag for _, tag in sets)
    if tagged:
        out = bytearray(struct.pack("<Q", FORMAT_TAGGED << 56 | len(sets) << 8 | FORMAT_TAGGED))
    else:
        out = bytearray(struct.pack("<Q", len(sets)))
    for sid, tag in sorted(sets, key=lambda key: (key[0].bytes, key[1])):
        intervals = sets[(sid, tag)]
        out += sid.bytes
        if tagged:
            raw = tag.encode("ascii")
            out += _write_varlen(len(raw)) + raw
        out += struct.pack("<Q", len(intervals))
        for a, b in intervals:
            out += struct.pack("<QQ", a, b)
    return bytes(out)


def decode_gtid_set(body: bytes) -> tuple[GtidIntervals, int]:
    """A binary GTID set (either format) at the start of ``body``: the intervals and the
    number of bytes it took."""
    head = _U64(body, 0)[0]
    fmt = head >> 56
    if fmt == FORMAT_TAGGED:
        if head & 0xFF != FORMAT_TAGGED:
            raise ValueError(f"GTID set count 0x{head:016x}: tagged format not marked in both "
                             "its first and last byte")
        n_sids = head >> 8 & 0xFFFF_FFFF_FFFF
    elif fmt == FORMAT_UNTAGGED:
        n_sids = head
    else:
        raise ValueError(f"GTID set in unknown format {fmt}")
    pos = 8
    sets: GtidIntervals = {}
    for _ in range(n_sids):
        if pos + 16 > len(body):
            raise ValueError("GTID set runs past the end of the event")
        sid = uuid.UUID(bytes=bytes(body[pos:pos + 16]))
        pos += 16
        tag = ""
        if fmt == FORMAT_TAGGED:
            n, pos = _read_varlen(body, pos)
            tag = bytes(body[pos:pos + n]).decode("ascii")
            if tag and not _TAG.match(tag):
                raise ValueError(f"GTID set of {sid}: bad tag {tag!r}")
            pos += n
        n_intervals = _U64(body, pos)[0]
        pos += 8
        intervals = sets.setdefault((sid, tag), [])
        for _ in range(n_intervals):
            start, end = _U64(body, pos)[0], _U64(body, pos + 8)[0]
            if not 0 < start < end:  # [start, end): end is the first number not in it
                raise ValueError(f"GTID set of {sid}: empty interval [{start}, {end})")
            intervals.append((start, end))
            pos += 16
    return sets, pos


def decode_previous_gtids(body: bytes) -> str:
    """The GTID set of a PREVIOUS_GTIDS event as MySQL prints it
    (``uuid:1-5:7:tag:1-3,uuid2:1-3``)."""
    return format_gtid_set(decode_gtid_set(body)[0])
