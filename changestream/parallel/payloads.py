"""MySQL's compressed transactions for decode workers.

With ``binlog_transaction_compression`` MySQL writes a transaction as its GTID event and one
TRANSACTION_PAYLOAD event holding all its other events, zstd-compressed and without
checksums of their own. The segmenter hands such a transaction to a worker when the events
inside are those of a plain transaction (:func:`plain_payload_size`); the worker's fast path
takes a segment holding some once their events are laid out as if written one after the
other (:func:`unpacked_segment`): each inner event at its payload's offset, as the router's
decoder places them, and each transaction ending where its payload ends.
"""

from __future__ import annotations

import array
import struct
import zlib
from collections.abc import Callable

import zstandard

from changestream.decoding import event_types as et
from changestream.decoding.compression import inner_event_bounds, unpack_transaction_payload
from changestream.decoding.event_decoder import HEADER_SIZE
from changestream.decoding.events import EventHeader
from changestream.model.errors import BinlogError
from changestream.model.record import record
from changestream.transactions.plain import MYSQL_GTID_EVENTS

_U32 = struct.Struct("<I")
_GTIDS = frozenset({*MYSQL_GTID_EVENTS, et.MARIADB_GTID})

#: Whether an inner event (its bytes, no checksum) may be in a worker's transaction, and
#: what it is: ``"begin"``, ``"commit"``, ``"row"`` or ``None`` (not a worker's).
InnerKind = Callable[[bytes], str | None]


def _header(file: str, offset: int, size: int) -> EventHeader:
    return EventHeader(0, et.TRANSACTION_PAYLOAD, 0, size, 0, 0, file, offset)


def plain_payload_size(body: bytes, file: str, offset: int, zstd: zstandard.ZstdDecompressor,
                       kind_of: InnerKind) -> int | None:
    """The unpacked size of a TRANSACTION_PAYLOAD (``body``: without header and checksum)
    whose events are a plain transaction's: BEGIN, then TABLE_MAPs, rows events and
    annotations that ``kind_of`` accepts, then XID or COMMIT; ``None`` for any other (also
    a damaged one: the router's decoder then says what is wrong and where)."""
    header = _header(file, offset, len(body))
    try:
        _, _, data = unpack_transaction_payload(header, body, zstd)
        bounds = inner_event_bounds(header, data)
    except (BinlogError, zstandard.ZstdError, LookupError, ValueError):
        return None
    if len(bounds) < 2:
        return None
    last = len(bounds) - 1
    for index, (start, end) in enumerate(bounds):
        kind = kind_of(data[start:end])
        wanted = "begin" if index == 0 else "commit" if index == last else "row"
        if kind != wanted:
            return None
    return len(data)


@record
class UnpackedSegment:
    """A segment's events with each TRANSACTION_PAYLOAD replaced by the events in it (each
    given a checksum when the file's events have one), and, per transaction in order, where
    it ends when it came compressed (``None``: where its last event ends)."""

    data: bytes
    offsets: array.array[int]
    ends: list[int | None]


def unpacked_segment(data: bytes, offsets: array.array[int], zstd: zstandard.ZstdDecompressor,
                     file: str, crc: bool, verify: bool) -> UnpackedSegment | None:
    """``data`` (events read at ``offsets`` of ``file``) unpacked as the class says; ``None``
    when a payload's checksum or contents are wrong (the worker's general path then reports
    it)."""
    parts: list[bytes] = []
    unpacked: array.array[int] = array.array("q")
    ends: list[int | None] = []
    tail = 4 if crc else 0
    at = 0
    try:
        for offset in offsets:
            size = _U32.unpack_from(data, at + 9)[0]
            end = at + size
            code = data[at + 4]
            if code != et.TRANSACTION_PAYLOAD:
                if code in _GTIDS:
                    ends.append(None)
                parts.append(data[at:end])
                unpacked.append(offset)
                at = end
                continue
            body_end = end - tail
            if verify and tail and zlib.crc32(data[at:body_end]) != \
                    _U32.unpack_from(data, body_end)[0]:
                return None
            header = _header(file, offset, size)
            _, _, inner = unpack_transaction_payload(header, data[at + HEADER_SIZE:body_end],
                                                     zstd)
            for start, stop in inner_event_bounds(header, inner):
                event = inner[start:stop]
                if tail:
                    event = event[:9] + _U32.pack(stop - start + 4) + event[13:]
                    event += _U32.pack(zlib.crc32(event)) if verify else b"\0\0\0\0"
                parts.append(event)
                unpacked.append(offset)
            if not ends:
                return None
            ends[-1] = offset + size
            at = end
    except (BinlogError, zstandard.ZstdError, LookupError, ValueError, struct.error):
        return None
    return UnpackedSegment(b"".join(parts), unpacked, ends)
