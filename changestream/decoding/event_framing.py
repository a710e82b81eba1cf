"""The framing every binlog event shares: the 19-byte common header, the checksum
algorithms, and the post-header lengths assumed until a FORMAT_DESCRIPTION event says."""

from __future__ import annotations

import re
import struct

from changestream.decoding import event_types as et

__all__ = [
    "CHECKSUM_CRC32",
    "CHECKSUM_OFF",
    "DEFAULT_POST_HEADER",
    "HEADER",
    "HEADER_SIZE",
    "server_has_checksums",
]

HEADER = struct.Struct("<IBIIIH")
HEADER_SIZE = 19
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1

# Post-header lengths assumed until a FORMAT_DESCRIPTION event says otherwise (MySQL 5.0+).
DEFAULT_POST_HEADER = {et.QUERY: 13, et.ROTATE: 8, et.TABLE_MAP: 8, et.WRITE_ROWS_V1: 8,
                       et.UPDATE_ROWS_V1: 8, et.DELETE_ROWS_V1: 8, et.WRITE_ROWS: 10,
                       et.UPDATE_ROWS: 10, et.DELETE_ROWS: 10, et.PARTIAL_UPDATE_ROWS: 10}


def _version_tuple(version: str) -> tuple[int, int, int]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def server_has_checksums(version: str) -> bool:
    """Whether a server of this version writes the checksum algorithm into its FDE."""
    split = (5, 3, 0) if "mariadb" in version.lower() else (5, 6, 1)
    return _version_tuple(version) >= split
