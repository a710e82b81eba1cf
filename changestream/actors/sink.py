"""The Sink actor: micro-batches of committed transactions, handed to the sink adapter, and
the position saved only after the adapter has made each batch durable."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pykka

from changestream.delivery.adapter import SinkAdapter
from changestream.delivery.position_store import PositionStore
from changestream.model.changes import EncodedRun, Position, TransactionPart
from changestream.observe.stats import DeliveryCounters

if TYPE_CHECKING:
    from changestream.schema.opener import HistoryOpener

from .batch_settings import BatchSettings
from .messages import CaughtUp, EndOfStream, Parts, PartsTaken, Tick
from .writer import WriteBatch, WriterActor, Written

log = logging.getLogger("changestream")


#: An idle writer takes a batch once it holds 1/IDLE_WRITER_SHARE of a full one.
IDLE_WRITER_SHARE = 10


class SinkActor(pykka.ThreadingActor):
    """Collects :class:`Parts` into batches and writes them through ``adapter``.

    A :class:`~.writer.WriterActor` of its own writes the batches, one at a time and in
    order, while the next fills. A batch goes to the free writer when it is full
    (``max_changes``, ``max_bytes``), holds a tenth of that (so writes overlap reading a
    backlog and the last batch is small), is ``max_seconds`` old, the reader has caught up
    (:class:`CaughtUp` came after its last parts), or the stream ends: batches grow as big as
    the sink's pace asks. A batch of a position alone (filtered transactions, a binlog
    rotation) waits until it is ``max_seconds`` old: the position file is written at most
    about once a ``max_seconds`` while nothing is delivered. A full batch waiting for the
    writer takes no more messages; they wait unacknowledged, which holds the reader back
    (:class:`PartsTaken`)."""

    def __init__(self, adapter: SinkAdapter, store: PositionStore | None,
                 settings: BatchSettings, counters: DeliveryCounters,
                 on_error: Callable[[BaseException], None], finished: threading.Event,
                 first_batch_id: int = 1, history: HistoryOpener | None = None,
                 fence: Callable[[], AbstractContextManager[Any]] | None = None):
        super().__init__()
        settings = settings.for_sink(adapter)  # the limits left to the sink (0) resolved
        self.settings = settings
        self.finished = finished
        self._writer_args = (adapter, store, settings, counters, on_error, first_batch_id,
                             history, fence)
        self._writer_ref: pykka.ActorRef[Any] | None = None
        self._caught_up = False  # CaughtUp came after the last parts taken
        self._parts: list[TransactionPart | EncodedRun] = []
        self._changes = 0
        self._bytes = 0
        self._since = 0.0
        self._position: Position | None = None
        # The last part taken is the first of a big transaction's parts (the rest come in
        # the next messages): a batch cut there has no resume point.
        self._inside = False
        self._held: deque[Parts] = deque()  # came while the batch was full and waiting
        self._writing = False
        self._ending = False
        self.on_error = on_error
        self._timer: threading.Timer | None = None  # tells this actor a Tick
        self._wake_at = 0.0  # when that timer fires (monotonic)

    def on_start(self) -> None:
        self._writer_ref = WriterActor.start(*self._writer_args)

    def on_stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._writer_ref is not None:
            # A batch being written is finished, not cut (the stop waits for it).
            with contextlib.suppress(pykka.ActorDeadError):
                self._writer_ref.stop()

    def on_failure(self, exception_type: type[BaseException] | None,
                   exception_value: BaseException | None,
                   traceback: TracebackType | None) -> None:
        if self._writer_ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                self._writer_ref.stop(block=False)
        if exception_value is not None:  # reported to the router, which stops everything
            self.on_error(exception_value)

    def on_receive(self, message: Any) -> None:
        if isinstance(message, Parts):
            if self._held or (self._writing and self._full):
                self._held.append(message)
                return
            self._add(message)
        elif isinstance(message, Written):
            self._writing = False
            if message.error is not None:
                raise message.error
        elif isinstance(message, EndOfStream):
            self._ending = True
        elif isinstance(message, CaughtUp):
            self._caught_up = True
        elif not isinstance(message, Tick):
            return
        self._hand_over()

    def _wake_in(self, at: float) -> None:
        """Have a :class:`Tick` told to this actor at monotonic time ``at`` (a timer, one at
        a time: one set for earlier stays)."""
        timer = self._timer
        if timer is not None and timer.is_alive() and self._wake_at <= at:
            return
        if timer is not None:
            timer.cancel()
        self._wake_at = at
        ref = self.actor_ref

        def tick() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Tick())

        self._timer = threading.Timer(max(at - time.monotonic(), 0.0) + 0.001, tick)
        self._timer.daemon = True
        self._timer.start()

    @property
    def _full(self) -> bool:
        s = self.settings
        return self._changes >= s.max_changes or self._bytes >= s.max_bytes

    @property
    def _worth_a_write(self) -> bool:
        """Big enough to hand to an idle writer: a tenth of a full batch."""
        s = self.settings
        return self._changes * IDLE_WRITER_SHARE >= s.max_changes or \
            self._bytes * IDLE_WRITER_SHARE >= s.max_bytes

    def _add(self, message: Parts) -> None:
        try:
            if not self._parts and self._position is None:
                self._since = time.monotonic()
            for part in message.parts:
                self._parts.append(part)
                self._changes += part.count
                self._bytes += part.approx_bytes
            if message.parts:
                self._caught_up = False
                last = message.parts[-1]
                self._inside = not last.complete  # a transaction goes on after it
            if message.position is not None:
                self._position = message.position
        finally:
            if message.reply_to is not None:
                with contextlib.suppress(pykka.ActorDeadError):  # it failed: we stop too
                    message.reply_to.tell(PartsTaken())

    def _hand_over(self) -> None:
        """Give the writer the batch if it is free and the batch is due; then take the
        messages that waited for room; at the end of the stream, say when all is written."""
        while not self._writing:
            pending = bool(self._parts) or self._position is not None
            old_enough = time.monotonic() - self._since >= self.settings.max_seconds
            # A position alone (transactions the filter left out, a new binlog file) is
            # saved once its batch is old enough, not for every transaction caught up with.
            due = self._ending or old_enough or (
                bool(self._parts) and (self._worth_a_write or self._caught_up))
            if not pending or not due:
                if self._ending and not pending and not self._held:
                    self.finished.set()
                elif pending:  # due once old enough, unless more comes first
                    self._wake_in(self._since + self.settings.max_seconds)
                return
            # A batch that ends inside a transaction is written without a position: the
            # one of its last whole transaction would make the sink's saved state hold
            # parts of the next one, which a restart from there reads again.
            assert self._writer_ref is not None
            self._writer_ref.tell(WriteBatch(self._parts, None if self._inside
                                             else self._position, self.actor_ref))
            self._writing = True
            self._parts, self._changes, self._bytes, self._position = [], 0, 0, None
            while self._held and not self._full:
                self._add(self._held.popleft())
