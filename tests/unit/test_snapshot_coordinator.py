"""Where a snapshot's chunks meet the stream: each chunk at its own high watermark."""

from __future__ import annotations

import datetime as dt

from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator
from changestream.snapshot.progress import SnapshotProgress
from changestream.snapshot.reader import ReadChunk

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def _offer(file: str, pos: int) -> ChunkOffer:
    return ChunkOffer(None, ReadChunk([], None, False, (file, pos), NOW))


def test_a_chunk_goes_into_the_stream_once_the_stream_passed_its_own_high_watermark() -> None:
    c = SnapshotCoordinator(SnapshotProgress("x", ("d.t",)))
    first = _offer("bin.000002", 900)
    c.put(first)
    assert c.due(None, None) is None
    assert c.due("bin.000001", 10_000) is None  # an earlier file, whatever the offset
    assert c.due("bin.000002", 899) is None
    assert c.due("bin.000002", 900) is first
    assert c.due("bin.000002", 1_000) is None  # handed on once
    # The next chunk (another reader's, read later) waits for its own watermark, not for
    # the one before.
    second = _offer("bin.000003", 4)
    c.put(second)
    assert c.due("bin.000002", 5_000) is None
    assert c.due("bin.000003", 4) is second
