"""Small binlogs made byte by byte, for tests that need one odd event and nothing else (the
fuzz harness's findings, kept as regression tests)."""

from __future__ import annotations

import struct
import zlib

from changestream.decoding.event_framing import DEFAULT_POST_HEADER, HEADER, server_has_checksums
from changestream.sources.raw import BINLOG_MAGIC

FORMAT_DESCRIPTION = 15


def event(type_code: int, body: bytes, *, log_pos: int = 0, checksum: bool = False,
          flags: int = 0) -> bytes:
    """One event: the common header, ``body`` and (with ``checksum``) its CRC32."""
    size = HEADER.size + len(body) + (4 if checksum else 0)
    data = HEADER.pack(0, type_code, 1, size, log_pos, flags) + body
    return data + struct.pack("<I", zlib.crc32(data)) if checksum else data


def format_description(version: str = "8.0.40", *, checksum: bool = False) -> bytes:
    """A FORMAT_DESCRIPTION event of a server of ``version`` (binlog v4); ``checksum``: its
    events carry CRC32s (a version that writes the algorithm byte is needed for that)."""
    post = bytes(DEFAULT_POST_HEADER.get(code, 0) for code in range(1, 41))
    body = struct.pack("<H", 4) + version.encode().ljust(50, b"\0") + struct.pack("<I", 0) \
        + bytes([HEADER.size]) + post
    if server_has_checksums(version):
        body += bytes([1 if checksum else 0])
    return event(FORMAT_DESCRIPTION, body, checksum=checksum)


def binlog(*events: bytes) -> bytes:
    """A binlog file's bytes: the magic number, then ``events`` with their end positions."""
    out = bytearray(BINLOG_MAGIC)
    for data in events:
        end = len(out) + len(data)
        patched = bytearray(data)
        struct.pack_into("<I", patched, 13, end)
        if len(data) > HEADER.size + 4 and _has_crc(data):
            struct.pack_into("<I", patched, len(data) - 4, zlib.crc32(patched[:-4]))
        out += patched
    return bytes(out)


def _has_crc(data: bytes) -> bool:
    return struct.unpack_from("<I", data, len(data) - 4)[0] == zlib.crc32(data[:-4])
