"""The unit every source produces: the bytes of one event and where they were read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

BINLOG_MAGIC = b"\xfebin"


class RawEvent(NamedTuple):
    """One whole event (header, body, checksum) read at ``offset`` of ``file``."""

    file: str
    offset: int
    data: bytes


def one_by_one(batches: Iterator[list[RawEvent] | None]) -> Iterator[RawEvent | None]:
    """A source's lists of events (``None``: idle) as single events."""
    for batch in batches:
        if batch is None:
            yield None
        else:
            yield from batch
