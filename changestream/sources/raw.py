"""The unit every source produces: the bytes of one event and where they were read."""

from __future__ import annotations

from typing import NamedTuple

BINLOG_MAGIC = b"\xfebin"


class RawEvent(NamedTuple):
    """One whole event (header, body, checksum) read at ``offset`` of ``file``."""

    file: str
    offset: int
    data: bytes
