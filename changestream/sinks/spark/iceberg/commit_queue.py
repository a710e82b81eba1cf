"""The landing's data commits, made on a thread of their own in the order given while the
landing goes on with the next table: a commit is Iceberg's work in the JVM (the files'
footers read, a manifest and the table's metadata written), which the driver's thread only
waited for, a third of a warm batch's writing.

What is owed to exactly once: a table's commits are made in the order they were given
(one thread, first in first out); the landing waits for a table's commits before it looks
at that table again (:meth:`CommitQueue.wait_for`), and for all of them before the batch's
mark (:meth:`CommitQueue.drain`), which so comes after every commit of the batch or not
at all. Once a commit fails, the ones given after it are not made (a later commit of the
same table would land rows after a gap), and the batch fails with the first error."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class _Skipped(Exception):
    """A commit not made because one given before it failed."""


class _Pending:
    """A commit given: its table, its future, and what to do with its result on the
    landing's thread."""

    __slots__ = ("future", "table", "then")

    def __init__(self, table: str, future: Future[Any], then: Callable[[Any], None] | None):
        self.table = table
        self.future = future
        self.then = then


class CommitQueue:
    """Commits made in order on one thread (see the module docstring). Each is a call that
    does one table's commit (and may write its files first); what depends on its result
    runs on the caller's thread when the commit is waited for."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._pending: deque[_Pending] = deque()
        self._failed = threading.Event()

    def submit(self, table: str, commit: Callable[[], Any],
               then: Callable[[Any], None] | None = None) -> None:
        """Make ``commit`` (of Iceberg table ``table``) after the ones given before; its
        result goes to ``then`` (on this thread) when it is waited for."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="changestream-commits")
        self._pending.append(_Pending(table, self._executor.submit(self._make, commit), then))

    def _make(self, commit: Callable[[], Any]) -> Any:
        if self._failed.is_set():
            raise _Skipped()
        try:
            return commit()
        except BaseException:
            self._failed.set()
            raise

    def pending(self, table: str) -> bool:
        """Whether a commit of ``table`` is given and not waited for."""
        return any(p.table == table for p in self._pending)

    def wait_for(self, table: str) -> None:
        """Wait for the commits of ``table`` (and those given before them), each result
        given to its ``then``; the first error is raised once no commit is under way."""
        while self.pending(table):
            self._next()

    def drain(self) -> None:
        """Wait for every commit given (see :meth:`wait_for`)."""
        while self._pending:
            self._next()

    def _next(self) -> None:
        pending = self._pending.popleft()
        try:
            result = pending.future.result()
            if pending.then is not None:
                pending.then(result)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Wait until no commit is under way, forgetting the ones given and their errors
        (a batch that failed: what was committed is read from the tables again)."""
        self._failed.set()  # what has not started yet is not made
        while self._pending:
            pending = self._pending.popleft()
            with contextlib.suppress(BaseException):  # the batch failed already
                pending.future.result()
        self._failed.clear()

    def close(self) -> None:
        """Wait for what is under way and stop the thread."""
        self.discard()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
