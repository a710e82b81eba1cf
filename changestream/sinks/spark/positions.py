"""Ordering positions, and storing them as text, for the sinks that keep their own.

Positions are compared by binlog coordinates (:func:`changestream.model.changes.binlog_order`: the
file's sequence number, then the offset), then by the snapshot chunks delivered there.
That holds for one source server's binlog (which is what a position names); after a switch to
another server whose file names differ, start the sink on an empty target.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TypeVar

from changestream.model.changes import Position

P = TypeVar("P")

#: The snapshot-summary (and write) property each commit carries its position in.
PROPERTY = "changestream.position"


def position_key(position: Position) -> tuple[str, int, int, int]:
    """The order of positions: :attr:`Position.order` (binlog position, then snapshot
    chunks delivered there)."""
    return position.order


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


def new_parts(parts: list[P], committed: Position | None,
              ends: list[Position | None]) -> list[P]:
    """The parts of transactions that end after ``committed``."""
    return [p for p, end in zip(parts, ends) if is_after(end, committed)]


def chunk_is_new(position: Position | None, committed: Position | None) -> bool:
    """Whether a snapshot chunk delivered at ``position`` (its ``snapshot`` progress counts
    the chunk) is not yet in data committed up to ``committed``. A chunk read again after a
    restart can come at another binlog position: its number in the snapshot decides."""
    if committed is None or position is None or not position.snapshot:
        return True
    done = committed.snapshot
    if not done or done.get("id") != position.snapshot.get("id"):
        return is_after(position, committed)
    return int(position.snapshot.get("chunks") or 0) > int(done.get("chunks") or 0)


def merged(committed: Position | None, landed: list[Position]) -> Position | None:
    """What a table has committed after ``landed`` (positions in stream order) on top of
    ``committed``: the furthest binlog position, and the snapshot progress with the most
    chunks (a chunk read again after a restart may come before the furthest position)."""
    candidates = ([committed] if committed is not None else []) + landed
    if not candidates:
        return None
    furthest = max(candidates, key=lambda p: position_key(p)[:3])
    with_snapshot = [p for p in candidates if p.snapshot]
    if not with_snapshot:
        return furthest
    newest = max(with_snapshot, key=lambda p: int((p.snapshot or {}).get("chunks") or 0))
    return replace(furthest, snapshot=newest.snapshot)
