"""Ordering positions while a snapshot runs: chunks go into the stream between
transactions, at one binlog offset, and a chunk read again after a restart can come at
another one."""

from __future__ import annotations

from changestream.model.changes import Position
from changestream.sinks.spark import positions


def _at(pos: int, chunks: int | None = None, sid: str = "s1") -> Position:
    snapshot = None if chunks is None else {"id": sid, "tables": ["d.t"], "chunks": chunks}
    return Position("binlog.000001", pos, snapshot=snapshot)


def test_chunks_at_one_offset_are_ordered_by_their_number() -> None:
    assert _at(100, 3).order < _at(100, 4).order < _at(101).order
    assert positions.is_after(_at(100, 4), _at(100, 3))
    assert not positions.is_after(_at(100), _at(100, 3))


def test_a_chunk_read_again_is_known_by_its_number_not_its_offset() -> None:
    committed = positions.merged(_at(500, 2), [_at(900)])  # chunk 2, then a transaction
    assert committed is not None and committed.pos == 900 and committed.snapshot["chunks"] == 2
    assert not positions.chunk_is_new(_at(650, 2), committed)  # landed before the crash
    assert positions.chunk_is_new(_at(650, 3), committed)  # the next one, though earlier
    assert positions.chunk_is_new(_at(10, 1, sid="s2"), None)
    assert not positions.chunk_is_new(_at(10, 1, sid="s2"), committed)  # another snapshot:
    # by binlog position
    after = positions.merged(committed, [_at(650, 3)])
    assert after is not None and (after.pos, after.snapshot["chunks"]) == (900, 3)
