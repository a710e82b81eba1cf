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
    assert c.due(None, None) == []
    assert c.due("bin.000001", 10_000) == []  # an earlier file, whatever the offset
    assert c.due("bin.000002", 899) == []
    assert c.due("bin.000002", 900) == [first]
    assert c.due("bin.000002", 1_000) == []  # handed on once
    # The next chunk (another reader's, read later) waits for its own watermark, not for
    # the one before.
    second = _offer("bin.000003", 4)
    c.put(second)
    assert c.due("bin.000002", 5_000) == []
    assert c.due("bin.000003", 4) == [second]


def test_chunks_offered_one_after_the_other_are_handed_on_in_that_order() -> None:
    """The next chunk is offered while the one before is delivered: each goes in at its
    own watermark, none before the one offered before it (key order)."""
    c = SnapshotCoordinator(SnapshotProgress("x", ("d.t",)))
    first, second, third = (_offer("bin.000002", 900), _offer("bin.000002", 500),
                            _offer("bin.000002", 2_000))
    for offer in (first, second, third):
        c.put(offer)
    assert c.waiting
    assert c.due("bin.000002", 600) == []  # the second's watermark, not the first's
    assert c.due("bin.000002", 1_000) == [first, second]
    assert c.due("bin.000002", 1_999) == []
    assert c.due("bin.000002", 2_000) == [third]
    assert not c.waiting
    c.abandon()  # the router stops: what was not delivered is let go
    assert all(o.abandoned and o.delivered.is_set() for o in (first, second, third))
