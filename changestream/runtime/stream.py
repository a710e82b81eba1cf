"""Committed transactions as an iterator, blocking or async, for programs that embed the
router.

    with changestream.TransactionStream(config) as transactions:
        for part in transactions:            # or: async for part in transactions
            handle(part.info, part.changes)

Each item is a :class:`~changestream.model.changes.TransactionPart`: a whole committed
transaction, or, for a transaction big enough to be spilled to disk, one part of it
(``part.complete`` is true on its last part). A transaction counts as delivered (and the
position, if a position file is configured, moves past it) once the loop asks for the next
item, so a program that crashes while handling one gets it again after a restart.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any

from changestream.model.changes import Batch, Position, TransactionPart
from changestream.model.errors import SinkStoppedError
from changestream.runtime.config import Config
from changestream.runtime.router import Router, RouterSettings

_END = object()


class _QueueSink:
    """Hands parts to the consumer one at a time; a batch is durable once all are taken."""

    def __init__(self, stopping: threading.Event):
        self.items: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.stopping = stopping

    def open(self) -> Position | None:
        return None

    def write(self, batch: Batch) -> None:
        for part in batch.parts:
            while not self.stopping.is_set():
                try:
                    self.items.put(part, timeout=0.2)
                    break
                except queue.Full:
                    continue
        # Durable once the consumer has come back for more after the last part.
        while self.items.unfinished_tasks and not self.stopping.is_set():
            with self.items.all_tasks_done:
                self.items.all_tasks_done.wait(0.2)
        if self.stopping.is_set():
            raise SinkStoppedError("the transaction stream was closed")

    def close(self) -> None:
        pass


class TransactionStream:
    """Runs a router whose sink is this iterator (see the module docstring)."""

    def __init__(self, config: Config | RouterSettings):
        self._closing = threading.Event()
        self._sink = _QueueSink(self._closing)
        self.router = Router(config, self._sink)
        self._taken = False
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
        while not self._closing.is_set():
            try:
                self._sink.items.put(_END, timeout=0.2)
                return
            except queue.Full:
                continue

    def _next(self) -> TransactionPart | None:
        """The next part (``None`` at the end), acknowledging the one handed out before."""
        self.start()
        if self._taken:
            self._taken = False
            self._sink.items.task_done()
        while True:
            try:
                item = self._sink.items.get(timeout=0.2)
            except queue.Empty:
                if self._closing.is_set():
                    return None
                continue
            if item is _END:
                self._sink.items.task_done()
                self._raise_error()
                return None
            self._taken = True
            return item

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
        self._closing.set()
        if self._started:
            self.router.join(30)

    def __enter__(self) -> TransactionStream:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
