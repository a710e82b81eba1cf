"""The landing's data commits, made on threads of their own while the landing goes on with
the next table, their Parquet files written beforehand on two more (pyarrow encodes
without the interpreter lock): a commit is Iceberg's work in the JVM (the files' footers
read, a manifest and the table's metadata written), which the driver's thread only waited
for, a third of a warm batch's writing. The commits run in lanes, one thread each: a
table's commits all go to one lane, in the order given, and two tables' commits (a source
table's changelog and its mirror) may be made at once in two lanes; most of a commit's time
is the JVM waiting on files and its worker pool, not a CPU.

What is owed to exactly once: a table's commits are made in the order they were given (one
lane, first in first out; each table's commit carries its own position, so the order
between tables does not matter); the landing waits for a table's commits before it looks
at that table again (:meth:`CommitQueue.wait_for`), and for all of them before the batch's
mark (:meth:`CommitQueue.drain`), which so comes after every commit of the batch or not
at all. Once a commit (or the writing of its files) fails, the ones not begun yet are not
made, in any lane (a later commit of the same table would land rows after a gap), and the
batch fails with the first error."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class StagedCommit(Generic[R]):
    """A commit made ready: ``write()`` writes its files (any thread may, beside others),
    ``commit(written)`` makes it with what ``write`` returned (in the order given);
    calling it does both."""

    __slots__ = ("commit", "write")

    def __init__(self, write: Callable[[], Any], commit: Callable[[Any], R]):
        self.write = write
        self.commit = commit

    def __call__(self) -> R:
        return self.commit(self.write())


class _Skipped(Exception):
    """A commit not made because one given before it failed."""


class _Pending:
    """A commit given: its table, its lane, its file writing's future and its commit's, and
    what to do with its result on the landing's thread."""

    __slots__ = ("future", "lane", "table", "then", "written")

    def __init__(self, table: str, lane: int, written: Future[Any], future: Future[Any],
                 then: Callable[[Any], None] | None):
        self.table = table
        self.lane = lane
        self.written = written
        self.future = future
        self.then = then


class CommitQueue:
    """Commits made on ``lanes`` threads (a table's in one, in order), their files written
    on ``writers`` threads beside them (see the module docstring); what depends on a
    commit's result runs on the caller's thread when the commit is waited for, in the
    order the commits were given."""

    def __init__(self, writers: int = 2, lanes: int = 1) -> None:
        self.writers = writers
        self.lanes = lanes
        self._files: ThreadPoolExecutor | None = None
        self._commits: list[ThreadPoolExecutor] = []
        self._pending: deque[_Pending] = deque()
        self._failed = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    def submit(self, table: str, staged: StagedCommit[Any],
               then: Callable[[Any], None] | None = None) -> None:
        """Write ``staged``'s files now and make its commit (of Iceberg table ``table``)
        after the ones given before; its result goes to ``then`` (on this thread) when it
        is waited for."""
        if self._files is None:
            self._files = ThreadPoolExecutor(self.writers,
                                             thread_name_prefix="changestream-files")
            self._commits = [ThreadPoolExecutor(
                1, thread_name_prefix="changestream-commits" + (f"-{n}" if n else ""))
                for n in range(self.lanes)]
        lane = self._lane_for(table)
        written = self._files.submit(self._guarded, staged.write)
        future = self._commits[lane].submit(self._guarded,
                                            lambda: self._commit(staged, written))
        self._pending.append(_Pending(table, lane, written, future, then))

    def _lane_for(self, table: str) -> int:
        """The lane of ``table``'s commit: the one its earlier commits are in while one is
        not made yet, else the lane with the fewest commits not made."""
        busy = [0] * self.lanes
        for pending in self._pending:
            if not pending.future.done():
                if pending.table == table:
                    return pending.lane
                busy[pending.lane] += 1
        return busy.index(min(busy))

    def _guarded(self, step: Callable[[], Any]) -> Any:
        if self._failed.is_set():
            raise _Skipped()
        try:
            return step()
        except _Skipped:
            raise
        except BaseException as exc:
            with self._lock:
                if self._error is None:
                    self._error = exc
            self._failed.set()
            raise

    def _commit(self, staged: StagedCommit[Any], written: Future[Any]) -> Any:
        files = written.result()
        if self._failed.is_set():  # something failed while the files were written
            raise _Skipped()
        return staged.commit(files)

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
        except BaseException as exc:
            first = self.discard()
            if isinstance(exc, _Skipped) and first is not None:
                raise first from None  # what failed (its files, or an earlier step)
            raise

    def discard(self) -> BaseException | None:
        """Wait until no commit (nor file) is under way, forgetting the ones given (a batch
        that failed: what was committed is read from the tables again); returns the first
        error of a file or commit, if one failed."""
        self._failed.set()  # what has not started yet is not made
        while self._pending:
            pending = self._pending.popleft()
            for future in (pending.written, pending.future):
                with contextlib.suppress(BaseException):  # the batch failed already
                    future.result()
        first, self._error = self._error, None
        self._failed.clear()
        return first

    def close(self) -> None:
        """Wait for what is under way and stop the threads."""
        self.discard()
        for pool in (self._files, *self._commits):
            if pool is not None:
                pool.shutdown(wait=True)
        self._files, self._commits = None, []
