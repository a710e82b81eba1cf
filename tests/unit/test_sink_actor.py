"""The Sink actor writes batches through a Writer actor of its own: the next batch fills
while one is written, batches and positions stay in order, a small batch goes once the
reader has caught up, and a failed write stops it with its error."""

from __future__ import annotations

import threading
import time
from typing import Any

import pykka
import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.actors.messages import CaughtUp, EndOfStream, Parts, PartsTaken, Tick
from changestream.actors.sink import SinkActor
from changestream.model.changes import (
    Batch,
    Change,
    EncodedRun,
    Position,
    TransactionInfo,
    TransactionPart,
)
from changestream.model.errors import SinkError
from changestream.observe.stats import RouterStats


def _part(n: int, changes: int = 10) -> TransactionPart:
    info = TransactionInfo(f"t{n}", None, n, None, 0, 1, "bin.000001", n * 100, n * 100 + 99)
    rows = [Change("insert", "db", "t", None, {"id": n * 1000 + i}, None, None,
                   "bin.000001", n * 100, i, seq=i, last=i == changes - 1, transaction=info)
            for i in range(changes)]
    return TransactionPart(info, rows)


class _Acks(pykka.ThreadingActor):
    """Counts the Sink actor's acknowledgements."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, PartsTaken):
            self.count += 1
        return self.count


class _HeldSink:
    """Holds its first write until released; records every batch."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.release = threading.Event()
        self.batches: list[tuple[int, int, Position | None]] = []
        self.fail_on = fail_on

    def open(self) -> None:
        return None

    def write(self, batch: Batch) -> None:
        if batch.id == 1:
            self.release.wait(10)
        if batch.id == self.fail_on:
            raise OSError("disk gone")
        self.batches.append((batch.id, batch.changes, batch.position))

    def close(self) -> None:
        pass


def _start(sink: _HeldSink, errors: list[BaseException], finished: threading.Event,
           max_changes: int = 100) -> pykka.ActorRef[Any]:
    settings = BatchSettings(max_changes=max_changes, max_seconds=60, retries=0)
    return SinkActor.start(sink, None, settings, RouterStats().delivery, errors.append, finished)


def _wait(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_next_batch_fills_while_one_is_written() -> None:
    sink, errors, finished = _HeldSink(), [], threading.Event()
    actor, acks = _start(sink, errors, finished), _Acks.start()
    try:
        n = 0

        def send(count: int) -> None:
            nonlocal n
            for _ in range(count):
                n += 1
                actor.tell(Parts([_part(n)], Position("bin.000001", n * 100 + 99), acks))

        send(1)  # 10 changes, a tenth of a full batch: the idle writer takes it (held)
        _wait(lambda: acks.ask(None) == 1)
        send(15)  # the next batch fills to 100 changes, then messages wait
        _wait(lambda: acks.ask(None) == 11)
        time.sleep(0.2)
        assert acks.ask(None) == 11, "messages were taken beyond a full batch"
        assert sink.batches == []
        sink.release.set()
        _wait(lambda: acks.ask(None) == 16)
        actor.tell(Tick())
        actor.tell(EndOfStream())
        assert finished.wait(10)
        assert [(b[0], b[1]) for b in sink.batches] == [(1, 10), (2, 100), (3, 50)]
        assert [b[2] for b in sink.batches] == [Position("bin.000001", k * 100 + 99)
                                                for k in (1, 11, 16)]
        assert errors == []
    finally:
        actor.stop()
        acks.stop()


def test_an_idle_writer_waits_for_a_tenth_of_a_batch() -> None:
    """Below a tenth of ``max_changes`` a batch waits (for more, the timer, or the reader
    to catch up); at a tenth an idle writer takes it, so writing overlaps reading."""
    sink, errors, finished = _HeldSink(), [], threading.Event()
    sink.release.set()
    actor, acks = _start(sink, errors, finished, max_changes=200), _Acks.start()
    try:
        actor.tell(Parts([_part(1)], Position("bin.000001", 199), acks))  # 10 of 200
        _wait(lambda: acks.ask(None) == 1)
        time.sleep(0.2)
        assert sink.batches == [], "a batch under a tenth went to the writer"
        actor.tell(Parts([_part(2)], Position("bin.000001", 299), acks))  # 20: a tenth
        _wait(lambda: len(sink.batches) == 1)
        assert sink.batches[0][:2] == (1, 20)
        assert errors == []
    finally:
        actor.stop()
        acks.stop()


def test_a_small_batch_goes_once_the_reader_says_it_caught_up_and_not_before() -> None:
    """The reader's CaughtUp comes down the pipeline after the parts read before it: the
    small batch then goes at once (no wait for the timer); parts taken after it wait
    again."""
    sink, errors, finished = _HeldSink(), [], threading.Event()
    sink.release.set()
    actor, acks = _start(sink, errors, finished, max_changes=1000), _Acks.start()
    try:
        actor.tell(Parts([_part(1)], Position("bin.000001", 199), acks))
        _wait(lambda: acks.ask(None) == 1)
        time.sleep(0.2)
        assert sink.batches == []
        actor.tell(CaughtUp())
        _wait(lambda: len(sink.batches) == 1)
        actor.tell(Parts([_part(2)], Position("bin.000001", 299), acks))
        _wait(lambda: acks.ask(None) == 2)
        time.sleep(0.2)
        assert len(sink.batches) == 1, "parts after CaughtUp went without another one"
        actor.tell(CaughtUp())
        _wait(lambda: len(sink.batches) == 2)
        assert [b[:2] for b in sink.batches] == [(1, 10), (2, 10)]
        assert errors == []
    finally:
        actor.stop()
        acks.stop()


def test_a_failed_write_stops_the_actor_with_its_error() -> None:
    sink, errors, finished = _HeldSink(fail_on=2), [], threading.Event()
    sink.release.set()
    actor = _start(sink, errors, finished, max_changes=10)
    for n in range(1, 4):
        actor.tell(Parts([_part(n)], Position("bin.000001", n * 100 + 99)))
    _wait(lambda: bool(errors))
    assert isinstance(errors[0], SinkError) and "batch 2" in str(errors[0]) \
        and "disk gone" in str(errors[0])
    assert [b[0] for b in sink.batches] == [1]
    assert not finished.is_set()
    with pytest.raises(pykka.ActorDeadError):
        _wait(lambda: not actor.is_alive(), 5)
        actor.tell(Tick())


def test_a_batch_cut_after_a_piece_of_a_table_read_whole_has_no_position() -> None:
    """A table without a key is snapshotted as one transaction in encoded pieces: a batch
    that holds a whole transaction and then a piece but the last is written without a
    position (the whole one's would make the sink's saved state hold a piece that a
    restart reads again), the last piece's batch with its position."""
    sink, errors, finished = _HeldSink(), [], threading.Event()
    actor = _start(sink, errors, finished, max_changes=10)
    try:
        end = Position("bin.000001", 400)
        pieces = [EncodedRun(b"x\n" * 10, 10, 0, None, None, False),
                  EncodedRun(b"x\n" * 10, 10, 0, None, None, False),
                  EncodedRun(b"x\n" * 4, 4, 1, None, end, True)]
        actor.tell(Parts([_part(0, 1)], Position("bin.000001", 99)))  # written, held
        actor.tell(Parts([_part(1, 5)], Position("bin.000001", 199)))  # batch 2 with...
        for piece in pieces:  # ...the first piece
            actor.tell(Parts([piece], piece.position))
        actor.tell(EndOfStream())
        sink.release.set()
        assert finished.wait(10)
        assert sink.batches[1][1:] == (15, None)
        assert sink.batches[-1][2] == end
        assert [b[2] for b in sink.batches[2:-1]] == [None] * (len(sink.batches) - 3)
        assert sum(b[1] for b in sink.batches) == 30
        assert errors == []
    finally:
        actor.stop()


def test_a_batch_cut_inside_a_big_transaction_has_no_position() -> None:
    """A message can end with the first parts of a big transaction after whole ones (and
    carry the whole ones' position): a batch cut there is written without a position, so
    no sink saves a state that holds part of a transaction a restart reads again."""
    sink, errors, finished = _HeldSink(), [], threading.Event()
    sink.release.set()
    actor = _start(sink, errors, finished, max_changes=10)
    try:
        big = _part(2, 8)
        head = TransactionPart(big.info, big.changes[:5], False, None)
        rest = TransactionPart(big.info, big.changes[5:], True, None)
        actor.tell(Parts([_part(1, 5), head], Position("bin.000001", 199)))  # 10: due
        actor.tell(Parts([rest], Position("bin.000001", 299)))
        actor.tell(EndOfStream())
        assert finished.wait(10)
        assert [b[1:] for b in sink.batches] == [(10, None), (3, Position("bin.000001", 299))]
        assert errors == []
    finally:
        actor.stop()
