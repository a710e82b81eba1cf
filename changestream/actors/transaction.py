"""The Transaction actor: committed transactions out of batches of events."""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import pykka

from changestream.delivery.flow import CreditLine, Credits
from changestream.model.changes import EncodedRun, Position, binlog_order
from changestream.parallel.decode_workers import DecodeWorkers, SegmentTicket
from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator
from changestream.snapshot.progress import SnapshotProgress
from changestream.transactions.assembler import TransactionAssembler

from .messages import (
    CaughtUp,
    EndOfStream,
    EventBatch,
    Parts,
    PartsTaken,
    ResetOpenTransaction,
    SegmentDone,
    TablesSwitch,
)

log = logging.getLogger("changestream")

# What the actor sends the Sink actor, in order: Parts (each takes a credit) or the end.
Outgoing = Iterator[Parts | EndOfStream | CaughtUp]


class TransactionActor(pykka.ThreadingActor):
    """Feeds event batches to a :class:`~changestream.transactions.assembler.TransactionAssembler`
    and sends what it completes to the Sink actor, in messages of at most ``message_changes``.

    It never blocks: it sends while ``credits_out`` has room, and goes on when the Sink
    actor acknowledges a message (:class:`PartsTaken`); a batch may hold tickets of
    segments handed to decode ``workers``, whose answers come as messages
    (:class:`SegmentDone`) and are sent on in the tickets' places. Until then the batches
    behind wait in its inbox, and their credits (``credits_in``) are given back to the
    listener only once a batch is handled: that is what holds the listener back. A failure
    reaches the router through :meth:`on_failure` (``on_error``)."""

    def __init__(self, assembler: TransactionAssembler, sink: pykka.ActorRef[Any],
                 credits_in: Credits, credits_out: CreditLine,
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
        self._inbox: deque[EventBatch | ResetOpenTransaction | EndOfStream | CaughtUp] = \
            deque()
        self._batch: EventBatch | None = None  # the batch being handled
        self._at = 0  # its next item
        self._drained = False  # what came before the item at ``_at`` is on its way out
        self._outgoing: Outgoing | None = None  # messages still to send, in order
        self._answers: defaultdict[int, deque[Any]] = defaultdict(deque)  # per worker

    def on_start(self) -> None:
        if self.workers is not None:
            ref = self.actor_ref
            self.workers.answer_to(lambda worker, answer: ref.tell(SegmentDone(worker,
                                                                               answer)))

    def on_failure(self, exception_type: type[BaseException] | None,
                   exception_value: BaseException | None,
                   traceback: TracebackType | None) -> None:
        if exception_value is not None:  # reported to the router, which stops everything
            self.on_error(exception_value)

    def on_receive(self, message: Any) -> None:
        if isinstance(message, PartsTaken):
            self.credits_out.acknowledged()
        elif isinstance(message, SegmentDone):
            self._answers[message.worker].append(message.answer)
        else:
            self._inbox.append(message)
        self._work()

    # -- the work, as far as credits and answers allow --------------------------------------

    def _work(self) -> None:
        while self._send():
            if self._batch is not None:
                if not self._step():
                    return  # a decode worker's answer is not there yet
                continue
            if not self._inbox:
                return
            message = self._inbox.popleft()
            if isinstance(message, EventBatch):
                self._batch, self._at, self._drained = message, 0, False
            elif isinstance(message, ResetOpenTransaction):
                self.assembler.reset_open_transaction()
            elif isinstance(message, CaughtUp):
                self._outgoing = iter((message,))  # after all that came before it
            else:
                self._outgoing = self._end(message)

    def _send(self) -> bool:
        """Send what is waiting while there is room; whether all of it went."""
        outgoing = self._outgoing
        while outgoing is not None:
            if not self.credits_out.has_room:
                return False
            message = next(outgoing, None)
            if message is None:
                self._outgoing = outgoing = None
            elif isinstance(message, Parts):
                message.reply_to = self.actor_ref
                self.credits_out.sent()
                self.sink.tell(message)
            else:
                self.sink.tell(message)
        return True

    def _step(self) -> bool:
        """Handle the current batch's next items; ``False`` while waiting for an answer.
        Anything to send is left in ``_outgoing`` (``_work`` sends it before going on)."""
        batch = self._batch
        assert batch is not None
        events = batch.events
        feed = self.assembler.feed
        while self._at < len(events):
            event = events[self._at]
            if isinstance(event, SegmentTicket | ChunkOffer | TablesSwitch):
                if not self._drained:  # what came before it goes first
                    self._drained = True
                    self._outgoing = self._drain()
                    return True
                if isinstance(event, SegmentTicket):
                    answers = self._answers[event.worker]
                    if not answers:
                        return False
                    self._outgoing = self._segment(answers.popleft())
                elif isinstance(event, ChunkOffer):
                    self._outgoing = self._chunk(event)
                else:
                    self._outgoing = self._switch(event)
                self._at += 1
                self._drained = False
                return True
            feed(event)
            self._at += 1
        if not self._drained:
            self._drained = True
            self._outgoing = self._drain()
            return True
        self._batch = None
        self.credits_in.give_back()
        return True

    # -- what goes out --------------------------------------------------------------------

    def _drain(self) -> Outgoing:
        """The transactions the assembler completed (a spilled one read as it is sent)."""
        snapshot = self.snapshot
        for parts, position in self.assembler.drain(self.message_changes):
            if snapshot is not None and snapshot.tracked:
                snapshot.note(parts)
            yield Parts(parts, position)
            if position is not None:
                self._passed(position)

    def _segment(self, answer: Any) -> Outgoing:
        """The transactions a decode worker assembled and encoded, each run of them with
        the position after its last one."""
        if isinstance(answer, BaseException):
            raise answer
        assembler = self.assembler
        for run in answer:
            assembler.note_delivered(run.gtids, run.file, run.end)
            position = assembler.position()
            parts = [EncodedRun(run.records, run.changes, run.transactions, run.last_commit_ts,
                                Position(position.file, position.pos), tables=run.tables)
                     ] if run.changes else []
            yield Parts(parts, position)
            self._passed(position)

    def _switch(self, switch: TablesSwitch) -> Outgoing:
        """Tables added or paused here: the filter from here on, and a position that keeps
        the change (and the snapshot starting here), so a restart from it goes on with it."""
        assembler = self.assembler
        assembler.set_filter(switch.change_filter)
        assembler.resume.tables = switch.changes if any(switch.changes.values()) else None
        if switch.snapshot is not None:
            assembler.resume.snapshot = switch.snapshot
        log.info("tables from here on: %s", switch.changes)
        yield Parts([], assembler.position())

    def _end(self, message: EndOfStream) -> Outgoing:
        yield from self._drain()
        if self.assembler.inside_transaction:
            log.info("the stream ended inside a transaction; it is delivered once its end "
                     "is read (after a restart)")
        yield message

    def _passed(self, position: Position) -> None:
        if self.snapshot is not None and self.snapshot.kept_until:
            self.snapshot.passed(binlog_order(position.file, position.pos))

    def _chunk(self, offer: ChunkOffer) -> Outgoing:
        """A snapshot chunk, at this point of the stream (everything up to the end of its
        window is assembled and sent): its rows, and the position carrying the snapshot's
        progress after it. The snapshot runner waits for ``offer.delivered``."""
        assert self.snapshot is not None
        assembler = self.assembler

        def position_after(progress: SnapshotProgress) -> Position:
            # Also when finished: its chunk count orders positions at one binlog offset
            # (see Position.order).
            assembler.resume.snapshot = progress.as_dict()
            return assembler.position()

        try:
            if offer.read_until is not None and offer.plan is not None:
                assembler.read_until[(offer.plan.database, offer.plan.table)] = \
                    binlog_order(*offer.read_until)
            delivered = self.snapshot.deliver(offer, assembler.position(), position_after)
            if delivered is None:
                offer.rejected = True
            else:
                parts, position = delivered
                yield Parts(parts, position)
        finally:
            offer.delivered.set()
