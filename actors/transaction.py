"""The Transaction actor: committed transactions out of batches of events."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pykka

from changestream.delivery.flow import Credits, StoppedError
from changestream.model.changes import EncodedRun, Position, binlog_order
from changestream.parallel.decode_workers import DecodeWorkers, SegmentTicket
from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator
from changestream.snapshot.progress import SnapshotProgress
from changestream.transactions.assembler import TransactionAssembler

from .messages import EndOfStream, EventBatch, Parts, ResetOpenTransaction

log = logging.getLogger("changestream")


class TransactionActor(pykka.ThreadingActor):
    """Feeds event batches to a
    :class:`~changestream.transactions.assembler.TransactionAssembler` and sends what it
    completes to the Sink actor, in messages of at most ``message_changes`` changes,
    waiting for a credit before each (backpressure). A batch may hold tickets of segments
    handed to decode ``workers``: their results are sent on in their place."""

    def __init__(self, assembler: TransactionAssembler, sink: pykka.ActorRef[Any],
                 credits_in: Credits, credits_out: Credits,
                 on_error: Callable[[BaseException], None], message_changes: int = 5_000,
                 workers: DecodeWorkers | None = None,
                 snapshot: SnapshotCoordinator | None = None):
        super().__init__()
        self.assembler = assembler
        self.sink = sink
        self.credits_in = credits_in
        self.credits_out = credits_out
        self.on_error = on_error
        self.message_changes = message_changes
        self.workers = workers
        self.snapshot = snapshot  # notes keys of tracked tables, delivers chunks in order

    def on_receive(self, message: Any) -> None:
        try:
            if isinstance(message, EventBatch):
                try:
                    feed = self.assembler.feed
                    for event in message.events:
                        if isinstance(event, SegmentTicket):
                            self._forward()  # what came before it goes first
                            self._forward_segment(event)
                        elif isinstance(event, ChunkOffer):
                            self._forward()
                            self._deliver_chunk(event)
                        else:
                            feed(event)
                    self._forward()
                finally:
                    self.credits_in.give_back()
            elif isinstance(message, ResetOpenTransaction):
                self.assembler.reset_open_transaction()
            elif isinstance(message, EndOfStream):
                self._forward()
                if self.assembler.inside_transaction:
                    log.info("the stream ended inside a transaction; it is delivered once its "
                             "end is read (after a restart)")
                self.sink.tell(message)
        except StoppedError:
            pass
        except Exception as exc:  # reported to the router, which stops everything
            self.on_error(exc)

    def _forward_segment(self, ticket: SegmentTicket) -> None:
        """The transactions a decode worker assembled and encoded, each run of them with
        the position after its last one."""
        assert self.workers is not None
        assembler = self.assembler
        for run in self.workers.result(ticket):
            assembler.note_delivered(run.gtids, run.file, run.end)
            position = assembler.position()
            parts = [EncodedRun(run.records, run.changes, run.transactions, run.last_commit_ts,
                                Position(position.file, position.pos), tables=run.tables)
                     ] if run.changes else []
            self.credits_out.take()
            self.sink.tell(Parts(parts, position))
            self._passed(position)

    def _forward(self) -> None:
        snapshot = self.snapshot
        for parts, position in self.assembler.drain(self.message_changes):
            if snapshot is not None and snapshot.tracked:
                snapshot.note(parts)
            self.credits_out.take()
            self.sink.tell(Parts(parts, position))
            if position is not None:
                self._passed(position)

    def _passed(self, position: Position) -> None:
        if self.snapshot is not None and self.snapshot.kept_until:
            self.snapshot.passed(binlog_order(position.file, position.pos))

    def _deliver_chunk(self, offer: ChunkOffer) -> None:
        """A snapshot chunk, at this point of the stream (everything up to the end of its
        window is assembled and forwarded): its rows, and the position carrying the
        snapshot's progress after it."""
        assert self.snapshot is not None
        assembler = self.assembler

        def position_after(progress: SnapshotProgress) -> Position:
            # Also when finished: its chunk count orders positions at one binlog offset
            # (see Position.order).
            assembler.resume.snapshot = progress.as_dict()
            return assembler.position()

        if offer.read_until is not None and offer.plan is not None:
            assembler.read_until[(offer.plan.database, offer.plan.table)] = \
                binlog_order(*offer.read_until)
        delivered = self.snapshot.deliver(offer, assembler.position(), position_after)
        if delivered is None:
            offer.rejected = True
        else:
            parts, position = delivered
            self.credits_out.take()
            self.sink.tell(Parts(parts, position))
        offer.delivered.set()
