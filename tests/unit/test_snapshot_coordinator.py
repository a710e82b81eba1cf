"""Where a snapshot's chunks meet the stream: each chunk at its own high watermark."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.errors import SourceError
from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator, WholePiece
from changestream.snapshot.progress import SnapshotProgress
from changestream.snapshot.reader import ReadChunk, TablePlan, WholeRead

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


def _runner(c: SnapshotCoordinator) -> Any:
    from changestream.snapshot.runner import SnapshotRunner

    return SnapshotRunner(lambda: None, c, lambda: None, threading.Event(),  # type: ignore
                          lambda exc: None)


def _whole(counted: int, pieces: list[list[Any]]) -> WholeRead:
    return WholeRead(counted, ("bin.000002", 900), NOW, iter(pieces))


def _plan() -> TablePlan:
    schema = TableSchema("d", "t", (Column(0, ft.LONG, name="g"),), names_logged=True)
    return TablePlan("d", "t", schema, None, 0, frozenset(), None, lambda b, a: ((), b),
                     lambda *v: v)


def test_a_table_read_whole_goes_as_pieces_of_one_transaction_the_last_one_ending_it() -> None:
    """Each piece is offered once the next is read (an empty last piece leaves the one
    before to end it); the offers say where each piece stands, and how many rows went."""
    c = SnapshotCoordinator(SnapshotProgress("x", ("d.t",)))
    runner = _runner(c)
    rows = [((), (b"r%d" % i, b"null")) for i in range(7)]
    seen: list[ChunkOffer] = []

    done = threading.Event()

    def stream() -> None:  # the listener and Transaction actor, as far as offers go
        while not done.is_set():  # every offer delivered: a runner that offers more ends
            for offer in c.due("bin.000002", 900):
                seen.append(offer)
                offer.delivered.set()
            time.sleep(0.001)

    taker = threading.Thread(target=stream, daemon=True)
    taker.start()
    try:
        sent = runner._offer_pieces(_plan(), _whole(7, [rows[:3], rows[3:6], rows[6:], []]),
                                    ("bin.000002", 900))
    finally:
        done.set()
        taker.join(5)
    assert sent == 7
    assert [(o.piece, len(o.chunk.rows), o.chunk.done) for o in seen] == [
        (WholePiece(0, 7, False), 3, False), (WholePiece(3, 7, False), 3, False),
        (WholePiece(6, 7, True), 1, True)]
    # Only the last piece says where the table was read (the stream leaves out its rows
    # before that).
    assert [o.read_until for o in seen] == [None, None, ("bin.000002", 900)]


@pytest.mark.parametrize(("counted", "pieces", "said"), [
    (5, [[((), b"a")] * 6, [((), b"b")]], "5 rows were counted in the read's snapshot "
                                           "but more were read"),
    (5, [[((), b"a")] * 4, [((), b"b")] * 4], "5 rows were counted in the read's snapshot "
                                               "but 8 were read"),
    (10, [[((), b"a")] * 3, []], "10 rows were counted in the read's snapshot but 3 were "
                                 "read"),
], ids=["more-before-the-last", "more", "fewer"])
def test_a_table_read_whole_that_is_not_as_counted_is_an_error_naming_it(
        counted: int, pieces: list[list[Any]], said: str) -> None:
    runner = _runner(SnapshotCoordinator(SnapshotProgress("x", ("d.t",))))
    with pytest.raises(SourceError) as caught:
        runner._offer_pieces(_plan(), _whole(counted, pieces), ("bin.000002", 900))
    assert str(caught.value).startswith(f"snapshot of d.t: {said}")
