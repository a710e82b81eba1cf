"""Compressed events: MariaDB's zlib-compressed fields (QUERY_COMPRESSED events and the rows
part of compressed rows events) and MySQL's zstd-compressed TRANSACTION_PAYLOAD events."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import zstandard

from changestream.decoding.event_framing import HEADER_SIZE
from changestream.decoding.events import Event, EventHeader, TransactionPayloadEvent
from changestream.decoding.packed import read_packed_int
from changestream.model.errors import BinlogError, TruncatedBinlogError, UnsupportedBinlogError
from changestream.native import compiled

__all__ = ["InnerEventDecoder", "decode_transaction_payload", "inner_event_bounds",
           "mariadb_uncompress", "uncompress_rows", "unpack_transaction_payload"]

_U32 = struct.Struct("<I").unpack_from

# Small payloads are unpacked without letting the interpreter lock go (see
# changestream/native/zstd_frames.pyx, whose one context serves every thread, as the lock
# is held).
_FRAMES = compiled("changestream.native.zstd_frames")
_HELD_LOCK_BYTES = 1 << 20

# Decodes one event inside a TRANSACTION_PAYLOAD: ``(data, file, offset, payload_index)``.
InnerEventDecoder = Callable[[bytes, str | None, int, int | None], Event]


def mariadb_uncompress(data: bytes) -> bytes:
    """Unpack a MariaDB compressed field: a header byte ``0x80 | algorithm << 4 | n``, ``n``
    big-endian bytes of the unpacked length, then zlib data."""
    head = data[0]
    if head & 0xE0 != 0x80:
        raise ValueError(f"bad MariaDB compression header byte 0x{head:02x}")
    if head & 0x70:
        raise ValueError(f"unknown MariaDB compression algorithm {(head >> 4) & 7}")
    n = head & 0x07
    size = int.from_bytes(data[1:1 + n], "big")
    out = zlib.decompress(data[1 + n:])
    if len(out) != size:
        raise ValueError(f"compressed field unpacked to {len(out)} bytes, header says {size}")
    return out


def uncompress_rows(body: bytes, pos: int, kind: str) -> bytes:
    """A MariaDB compressed rows body with its rows part (after the bitmaps) unpacked."""
    ncols, p = read_packed_int(body, pos)
    p += ((ncols + 7) >> 3) * (2 if kind == "update" else 1)
    return bytes(body[:p]) + mariadb_uncompress(body[p:])


def unpack_transaction_payload(h: EventHeader, body: bytes,
                               zstd: zstandard.ZstdDecompressor) -> tuple[str, int, bytes]:
    """A TRANSACTION_PAYLOAD event's body unpacked: its compression (``zstd`` or ``none``),
    its packed size, and the bytes of the events packed in it (``h`` names the event in
    errors)."""
    pos, end = 0, len(body)
    fields: dict[int, int] = {}
    while pos < end:
        kind, pos = read_packed_int(body, pos)
        if kind == 0:
            break
        length, pos = read_packed_int(body, pos)
        fields[kind], _ = read_packed_int(body, pos)
        pos += length
    compression = {0: "zstd", 255: "none"}.get(fields.get(2, 0))
    if compression is None:
        raise UnsupportedBinlogError(
            f"TRANSACTION_PAYLOAD compressed with unknown algorithm {fields.get(2)}",
            h.file, h.offset)
    payload = bytes(body[pos:])
    size = fields.get(3, 0)
    if compression == "zstd" and _FRAMES is not None and 0 < size <= _HELD_LOCK_BYTES:
        data = _FRAMES.decompress(payload, size)
    elif compression == "zstd":
        data = zstd.decompressobj().decompress(payload)
    else:
        data = payload
    if size and len(data) != size:
        raise BinlogError(f"TRANSACTION_PAYLOAD unpacked to {len(data)} bytes, its header "
                          f"says {size}", h.file, h.offset)
    return compression, fields.get(1, len(payload)), data


def inner_event_bounds(h: EventHeader, data: bytes) -> list[tuple[int, int]]:
    """Where each event packed in a TRANSACTION_PAYLOAD (``data``, unpacked) begins and
    ends."""
    bounds: list[tuple[int, int]] = []
    inner_pos = 0
    while inner_pos < len(data):
        if inner_pos + HEADER_SIZE > len(data):
            raise TruncatedBinlogError("TRANSACTION_PAYLOAD ends inside an inner event "
                                       "header", h.file, h.offset)
        inner_size = _U32(data, inner_pos + 9)[0]
        if inner_size < HEADER_SIZE or inner_pos + inner_size > len(data):
            raise TruncatedBinlogError(
                f"TRANSACTION_PAYLOAD inner event {len(bounds)} claims {inner_size} bytes, "
                f"{len(data) - inner_pos} left", h.file, h.offset)
        bounds.append((inner_pos, inner_pos + inner_size))
        inner_pos += inner_size
    return bounds


def decode_transaction_payload(h: EventHeader, body: bytes,
                               zstd: zstandard.ZstdDecompressor,
                               decode_inner: InnerEventDecoder) -> Event:
    """A TRANSACTION_PAYLOAD event: its fields, then the events packed in it, unpacked with
    ``zstd`` and each decoded by ``decode_inner``."""
    compression, packed_size, data = unpack_transaction_payload(h, body, zstd)
    event = TransactionPayloadEvent(h, compression, packed_size, len(data))
    for index, (start, end) in enumerate(inner_event_bounds(h, data)):
        event.events.append(decode_inner(data[start:end], h.file, h.offset, index))
    return event
