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

__all__ = ["InnerEventDecoder", "decode_transaction_payload", "mariadb_uncompress",
           "uncompress_rows"]

_U32 = struct.Struct("<I").unpack_from

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


def decode_transaction_payload(h: EventHeader, body: bytes,
                               zstd: zstandard.ZstdDecompressor,
                               decode_inner: InnerEventDecoder) -> Event:
    """A TRANSACTION_PAYLOAD event: its fields, then the events packed in it, unpacked with
    ``zstd`` and each decoded by ``decode_inner``."""
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
    if compression == "zstd":
        data = zstd.decompressobj().decompress(payload)
    else:
        data = payload
    if size and len(data) != size:
        raise BinlogError(f"TRANSACTION_PAYLOAD unpacked to {len(data)} bytes, its header "
                          f"says {size}", h.file, h.offset)
    event = TransactionPayloadEvent(h, compression, fields.get(1, len(payload)), len(data))
    inner_pos, index = 0, 0
    while inner_pos < len(data):
        if inner_pos + HEADER_SIZE > len(data):
            raise TruncatedBinlogError("TRANSACTION_PAYLOAD ends inside an inner event "
                                       "header", h.file, h.offset)
        inner_size = _U32(data, inner_pos + 9)[0]
        if inner_size < HEADER_SIZE or inner_pos + inner_size > len(data):
            raise TruncatedBinlogError(
                f"TRANSACTION_PAYLOAD inner event {index} claims {inner_size} bytes, "
                f"{len(data) - inner_pos} left", h.file, h.offset)
        event.events.append(decode_inner(data[inner_pos:inner_pos + inner_size], h.file,
                                         h.offset, index))
        inner_pos += inner_size
        index += 1
    return event
