"""Ordering positions, and storing them as text, for the sinks that keep their own.

Positions are compared by binlog coordinates: the file's sequence number, then the offset.
That holds for one source server's binlog (which is what a position names); after a switch to
another server whose file names differ, start the sink on an empty target.
"""

from __future__ import annotations

import json
import re

from changestream.changes import Position, TransactionPart

_SEQ = re.compile(r"^(.*?)(\d+)$")


def position_key(position: Position) -> tuple[int, str, int, int]:
    """File sequence number, file name stem, offset, snapshot chunks delivered (see
    :attr:`Position.order`)."""
    chunks = position.order[3]
    match = _SEQ.match(position.file)
    if match:
        return int(match.group(2)), match.group(1), position.pos, chunks
    return -1, position.file, position.pos, chunks


def is_after(position: Position | None, committed: Position | None) -> bool:
    """Whether a transaction ending at ``position`` is not yet in data committed up to
    ``committed`` (unknown positions count as new)."""
    if committed is None or position is None:
        return True
    return position_key(position) > position_key(committed)


def encode(position: Position) -> str:
    return json.dumps(position.as_dict(), sort_keys=True, separators=(",", ":"))


def decode(text: str | None) -> Position | None:
    return Position.from_dict(json.loads(text)) if text else None


def new_parts(parts: list[TransactionPart], committed: Position | None,
              ends: list[Position | None]) -> list[TransactionPart]:
    """The parts of transactions that end after ``committed``."""
    return [p for p, end in zip(parts, ends) if is_after(end, committed)]
