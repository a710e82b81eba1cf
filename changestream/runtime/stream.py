"""Committed transactions as an iterator, blocking or async, for embedding programs.

    with changestream.TransactionStream(config) as transactions:
        for part in transactions:            # or: async for part in transactions
            handle(part.info, part.changes)

Each item is a :class:`~changestream.model.changes.TransactionPart`: a whole transaction, or
one part of a spilled one or of a snapshot's table without a key (``part.complete`` on its
last). It counts as delivered once the
loop asks for the next, so a program that crashes while handling one gets it again."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from types import TracebackType

from changestream.model.changes import Batch, Position, TransactionPart
from changestream.model.errors import SinkStoppedError
from changestream.runtime.config import Config
from changestream.runtime.router import Router, RouterSettings


class _Handoff:
    """The sink: hands parts to the consumer one at a time; a batch is durable once the
    consumer has come back for more after its last part."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._slot: TransactionPart | None = None  # handed over, not yet taken
        self._unacknowledged = False  # taken, and the consumer has not come back yet
        self._ended = False  # the router has ended
        self._closed = False  # the consumer closed the stream

    def open(self) -> Position | None:
        return None

    def write(self, batch: Batch) -> None:
        with self._changed:
            for part in batch.parts:
                self._wait_until_free()
                assert isinstance(part, TransactionPart)  # no encoded format asked for
                self._slot = part
                self._changed.notify_all()
            self._wait_until_free()

    def _wait_until_free(self) -> None:
        self._changed.wait_for(lambda: self._closed or (
            self._slot is None and not self._unacknowledged))
        if self._closed:
            raise SinkStoppedError("the transaction stream was closed")

    def close(self) -> None:
        pass

    def take(self) -> TransactionPart | None:
        """The next part, acknowledging the one taken before; ``None`` at the end."""
        with self._changed:
            if self._unacknowledged:
                self._unacknowledged = False
                self._changed.notify_all()
            self._changed.wait_for(lambda: self._slot is not None or self._ended or
                                   self._closed)
            part, self._slot = self._slot, None
            if part is not None:
                self._unacknowledged = True
                self._changed.notify_all()
            return part

    def end(self) -> None:
        """The router has ended: the consumer gets ``None`` once it took everything."""
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def stop(self) -> None:
        """The consumer closed the stream: a write waiting for it gives up."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class TransactionStream:
    """Runs a router whose sink is this iterator (see the module docstring)."""

    def __init__(self, config: Config | RouterSettings):
        self._sink = _Handoff()
        self.router = Router(config, self._sink)
        self._started = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.router.start()
        threading.Thread(target=self._signal_end, daemon=True,
                         name="changestream-stream-end").start()

    def _signal_end(self) -> None:
        self.router.join()
        self._sink.end()

    def _next(self) -> TransactionPart | None:
        """The next part (``None`` at the end), acknowledging the one handed out before."""
        self.start()
        part = self._sink.take()
        if part is None:
            self._raise_error()
        return part

    def _raise_error(self) -> None:
        error = self.router.error
        if error is not None and not isinstance(error, SinkStoppedError):
            raise error

    def __iter__(self) -> Iterator[TransactionPart]:
        while (part := self._next()) is not None:
            yield part

    async def __aiter__(self) -> AsyncIterator[TransactionPart]:
        while (part := await asyncio.to_thread(self._next)) is not None:
            yield part

    def close(self) -> None:
        """Stop the router: what was handed out but not acknowledged comes again next time."""
        self.router.stop()
        self._sink.stop()
        if self._started:
            self.router.join(30)

    def __enter__(self) -> TransactionStream:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
