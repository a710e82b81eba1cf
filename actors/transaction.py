"""The Transaction actor: committed transactions out of batches of events."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pykka

from changestream.assembler import TransactionAssembler
from changestream.flow import Credits, StoppedError

from .messages import EndOfStream, EventBatch, Parts, ResetOpenTransaction

log = logging.getLogger("changestream")


class TransactionActor(pykka.ThreadingActor):
    """Feeds event batches to a :class:`~changestream.assembler.TransactionAssembler` and
    sends what it completes to the Sink actor, in messages of at most
    ``message_changes`` changes, waiting for a credit before each (backpressure)."""

    def __init__(self, assembler: TransactionAssembler, sink: pykka.ActorRef[Any],
                 credits_in: Credits, credits_out: Credits,
                 on_error: Callable[[BaseException], None], message_changes: int = 5_000):
        super().__init__()
        self.assembler = assembler
        self.sink = sink
        self.credits_in = credits_in
        self.credits_out = credits_out
        self.on_error = on_error
        self.message_changes = message_changes

    def on_receive(self, message: Any) -> None:
        try:
            if isinstance(message, EventBatch):
                try:
                    feed = self.assembler.feed
                    for event in message.events:
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

    def _forward(self) -> None:
        for parts, position in self.assembler.drain(self.message_changes):
            self.credits_out.take()
            self.sink.tell(Parts(parts, position))
