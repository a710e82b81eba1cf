"""MySQL length-encoded ("packed") integers, as read by ``net_field_length()``.

Used by binlog rows events (column counts, value options) and by the JSON partial-update
diff format (path and value lengths); the encoding is in :func:`read_packed_int`."""

from __future__ import annotations

import struct

__all__ = ["read_packed_int"]

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


def read_packed_int(buf: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    """Read one packed integer at ``buf[offset]``.

    Encoding (little-endian):

    ===========  ===============================================
    first byte   value
    ===========  ===============================================
    ``< 0xFB``   the byte itself (0..250); 1 byte in total
    ``0xFC``     the next 2 bytes; 3 bytes in total
    ``0xFD``     the next 3 bytes; 4 bytes in total
    ``0xFE``     the next 8 bytes; 9 bytes in total
    ``0xFB``     SQL NULL marker (never valid where a length is expected)
    ``0xFF``     undefined (error packet marker in the client protocol)
    ===========  ===============================================

    Returns ``(value, next_offset)`` where ``next_offset`` is the offset just
    past the encoded integer (``offset`` + 1, 3, 4 or 9).

    Raises ``ValueError`` if the buffer is truncated or the first byte is the
    NULL marker 0xFB or the undefined 0xFF.
    """
    try:
        first = buf[offset]
    except IndexError:
        raise ValueError(f"packed integer: no data at offset {offset}") from None
    if first < 0xFB:
        return first, offset + 1
    if first == 0xFC:
        end = offset + 3
        if end > len(buf):
            raise ValueError(f"packed integer: truncated 2-byte value at offset {offset}")
        return _U16(buf, offset + 1)[0], end
    if first == 0xFD:
        end = offset + 4
        if end > len(buf):
            raise ValueError(f"packed integer: truncated 3-byte value at offset {offset}")
        return (_U32(buf, offset)[0] >> 8), end
    if first == 0xFE:
        end = offset + 9
        if end > len(buf):
            raise ValueError(f"packed integer: truncated 8-byte value at offset {offset}")
        return _U64(buf, offset + 1)[0], end
    if first == 0xFB:
        raise ValueError(f"packed integer: NULL marker 0xFB at offset {offset}")
    raise ValueError(f"packed integer: invalid first byte 0xFF at offset {offset}")
