"""A table's chunks read by several connections at once, handed back in key order.

A boundary query on the runner's connection finds where each chunk ends (the key of the
``chunk_rows``-th row after the last boundary, from the key's index); the ranges go to a
pool of readers, each with its own connection, and come back in the order of their keys
(a reorder buffer as deep as the pool): the stream gets them one after the other as with
one reader, so a saved position's progress stays "the last key delivered". Each chunk is
read in its own consistent snapshot and ends its own window (its high watermark).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

log = logging.getLogger("changestream")

Reader = TypeVar("Reader")
Chunk = TypeVar("Chunk")
Key = tuple[Any, ...]


class ReaderPool(Generic[Reader]):
    """``size`` threads, each with a reader of its own (``make_reader()``, made on its first
    task, closed with ``close_reader`` when the pool closes); :meth:`submit` runs a task on
    the first free one."""

    def __init__(self, make_reader: Callable[[], Reader], close_reader: Callable[[Reader], None],
                 size: int, name: str = "changestream-snapshot-reader"):
        self.make_reader = make_reader
        self.close_reader = close_reader
        self.size = size
        self._tasks: queue.SimpleQueue[tuple[Callable[[Reader], Any], Future[Any]] | None] = \
            queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
                         for n in range(size)]
        for thread in self._threads:
            thread.start()

    def submit(self, task: Callable[[Reader], Chunk]) -> Future[Chunk]:
        future: Future[Chunk] = Future()
        self._tasks.put((task, future))
        return future

    def close(self, timeout: float = 30.0) -> None:
        """Ends the threads once the tasks given are done, and closes their readers."""
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join(timeout)

    def _work(self) -> None:
        reader: Reader | None = None
        try:
            while True:
                item = self._tasks.get()
                if item is None:
                    return
                task, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    if reader is None:
                        reader = self.make_reader()
                    future.set_result(task(reader))
                except BaseException as exc:  # the caller raises it from result()
                    future.set_exception(exc)
        finally:
            if reader is not None:
                with contextlib.suppress(Exception):
                    self.close_reader(reader)


class OrderedRanges(Generic[Reader, Chunk]):
    """The chunks of one table from key ``after`` on, read by ``pool`` and given back by
    :meth:`next` in key order, with the key each starts after.

    ``boundary(after)`` is the key that ends the chunk after ``after`` (``None``: the rest
    is the last chunk); ``read(reader, after, upto)`` reads a chunk (``upto`` ``None``: the
    last, open one); ``last_key(chunk)``/``done(chunk)`` say where a last chunk ended and
    whether the table is read (a last chunk that came back full goes on after its last
    key: rows added meanwhile). At most ``pool.size`` chunks are read ahead of the one
    :meth:`next` gave last."""

    def __init__(self, pool: ReaderPool[Reader], after: Key | None,
                 boundary: Callable[[Key | None], Key | None],
                 read: Callable[[Reader, Key | None, Key | None], Chunk],
                 last_key: Callable[[Chunk], Key | None], done: Callable[[Chunk], bool]):
        self.pool = pool
        self.boundary = boundary
        self.read = read
        self.last_key = last_key
        self.done = done
        self._after = after  # where the next range to hand out begins
        self._open = False  # the last (open) range is handed out
        self._finished = False  # the last range came back done: nothing more to hand out
        self._pending: deque[tuple[Key | None, Key | None, Future[Chunk]]] = deque()
        self._fill()

    def next(self) -> tuple[Chunk, Key | None]:
        """The next chunk in key order (waiting for its reader) and the key it starts after;
        the ranges after it are handed out before it is returned."""
        if not self._pending:
            raise RuntimeError("no chunk left to read")
        after, upto, future = self._pending.popleft()
        chunk = future.result()
        if upto is None:
            self._open = False
            if self.done(chunk):
                self._finished = True
            else:
                self._after = self.last_key(chunk)
        self._fill()
        return chunk, after

    def drain(self) -> None:
        """Waits for the chunks still read (their rows are dropped): before reading the
        table again after a DDL, or stopping."""
        while self._pending:
            _, _, future = self._pending.popleft()
            if not future.cancel():
                with contextlib.suppress(Exception):
                    future.result()

    def _read(self, reader: Reader, after: Key | None, upto: Key | None) -> Chunk:
        return self.read(reader, after, upto)

    def _fill(self) -> None:
        while len(self._pending) < self.pool.size and not (self._open or self._finished):
            after = self._after
            upto = self.boundary(after)
            self._pending.append((after, upto, self.pool.submit(
                functools.partial(self._read, after=after, upto=upto))))
            if upto is None:
                self._open = True
            else:
                self._after = upto
