"""The snapshot runner: a thread that reads the tables of a snapshot chunk by chunk and
offers each chunk to the stream (see :mod:`changestream.snapshot.coordinator`)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pymysql

from changestream.model.changes import binlog_order
from changestream.model.errors import SourceError
from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator, WholePiece
from changestream.snapshot.parallel_reads import OrderedRanges, ReaderPool
from changestream.snapshot.reader import ChunkReader, ReadChunk, TablePlan, WholeRead
from changestream.snapshot.result_set import ChunkRows

log = logging.getLogger("changestream")

# Chunks of a table offered to the stream and not yet delivered, at most: the one being
# delivered and the next (read meanwhile), as with one reader.
_OFFERED = 2


class SnapshotRunner:
    """Runs the snapshot the coordinator's progress describes, from where it stands.

    ``reader`` makes the chunk reader (its own connection); ``stream_position`` says what
    the router's stream has read to (file, offset), for MySQL's first chunk of a table;
    ``stopping`` ends it early; ``on_error`` gets what made it fail; ``readers``: how many
    connections read a table's chunks at once (more than one: besides the runner's own,
    which plans the tables and finds the chunks' boundaries)."""

    def __init__(self, reader: Callable[[], ChunkReader], coordinator: SnapshotCoordinator,
                 stream_position: Callable[[], tuple[str, int] | None],
                 stopping: threading.Event, on_error: Callable[[BaseException], None],
                 hold_stream: Callable[[], tuple[str, int] | None] | None = None,
                 release_stream: Callable[[], None] | None = None, readers: int = 1):
        self.make_reader = reader
        self.readers = readers
        self._pool: ReaderPool[ChunkReader] | None = None
        self.coordinator = coordinator
        self.stream_position = stream_position
        # Tables without a key are read whole while the stream holds at a boundary.
        self.hold_stream = hold_stream
        self.release_stream = release_stream
        self.stopping = stopping
        self.on_error = on_error
        self.finished = threading.Event()
        self._reading: str | None = None  # the table being read (for errors)
        self._thread = threading.Thread(target=self._run, name="changestream-snapshot",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            reader = self.make_reader()
            try:
                self._snapshot(reader)
            finally:
                if self._pool is not None:
                    self._pool.close()
                reader.close()
        except pymysql.MySQLError as exc:  # the server went away, or refused a read
            if not self.stopping.is_set():
                self.on_error(SourceError(
                    f"snapshot of {self._reading or 'its tables'}: reading from the server "
                    f"failed: {exc.args[-1] if exc.args else exc}"))
        except Exception as exc:
            if not self.stopping.is_set():
                self.on_error(exc)
        finally:
            self.finished.set()
            self.coordinator.wake()

    def _snapshot(self, reader: ChunkReader) -> None:
        c = self.coordinator
        assert c.progress is not None
        log.info("snapshot %s: %d tables to read%s", c.progress.id, len(c.progress.tables),
                 f", going on after {c.progress.rows} rows" if c.progress.rows else "")
        self._delivered(self._put(None, ReadChunk([], None, False, reader.head(), _now()),
                                  start=True))
        while not self.stopping.is_set():
            name = c.next_table()
            if name is None:
                break
            database, _, table = name.partition(".")
            self._reading = name
            plan = reader.plan(database, table, c.progress.where.get(name))
            if plan is None:
                log.warning("snapshot %s: table %s is gone; left out", c.progress.id, name)
                self._offer(plan, ReadChunk([], None, True, reader.head(), _now()))
                continue
            if plan.query is None:
                self._read_whole(reader, plan)
                continue
            c.track(database, table, plan.key)
            try:
                if self.readers > 1:
                    self._read_table_parallel(reader, plan)
                else:
                    self._read_table(reader, plan)
            finally:
                c.untrack(database, table)
        if c.progress.finished:
            log.info("snapshot %s: done, %d rows in %d chunks", c.progress.id, c.progress.rows,
                     c.progress.chunks)

    def _read_table(self, reader: ChunkReader, plan: TablePlan) -> None:
        """The chunks of a table with a key, each read while the one before is delivered.
        A chunk the stream turns back (a DDL of the table came after its plan) is read
        again, with the table as it is now, and the one read after it too."""
        c = self.coordinator
        assert c.progress is not None
        start = self._window_start(reader)
        began, rows = time.monotonic(), 0
        after = c.progress.after
        pending: tuple[ChunkOffer, tuple[Any, ...] | None] | None = None  # and its start
        while not self.stopping.is_set():
            chunk = None
            if pending is None or not pending[0].chunk.done:
                chunk = reader.read(plan, after, start)
            if pending is not None:
                offer, offer_after = pending
                pending = None
                delivered = self._delivered(offer)
                if delivered is None:
                    return  # stopping
                if not delivered:
                    log.info("snapshot %s: %s changed (a DDL) after its chunk was read; "
                             "reading it again", c.progress.id, plan.name)
                    replanned = self._replan(reader, plan)
                    if replanned is None:
                        return  # dropped, or lost its key: the stream has the DDL
                    if replanned.key != plan.key:
                        start = self._window_start(reader)
                    plan, after = replanned, offer_after
                    continue
                rows += len(offer.chunk.rows)
                if offer.chunk.done:
                    log.info("snapshot %s: %s read, %d rows in %.1fs", c.progress.id,
                             plan.name, rows, time.monotonic() - began)
                    return
            assert chunk is not None
            pending = (self._put(plan, chunk), after)
            after = chunk.last_key
        if pending is not None:
            self._delivered(pending[0])  # its window is the tracked table's

    def _replan(self, reader: ChunkReader, plan: TablePlan) -> TablePlan | None:
        """``plan``'s table planned again after a DDL turned its chunk back (``None``:
        dropped, or without a key now); the keys noted follow a changed key."""
        c = self.coordinator
        assert c.progress is not None
        replanned = reader.plan(plan.database, plan.table, c.progress.where.get(plan.name))
        if replanned is None or replanned.query is None:
            return None
        if replanned.key != plan.key:  # the keys noted are of another key
            c.track(plan.database, plan.table, replanned.key)
        return replanned

    def _read_table_parallel(self, reader: ChunkReader, plan: TablePlan) -> None:
        """The chunks of a table with a key, read by the pool's connections at once and
        offered in key order (:mod:`changestream.snapshot.parallel_reads`), the next one
        offered while the one before is delivered; a chunk the stream turns back is read
        again as in :meth:`_read_table`, and the ones after it (turned back too)."""
        c = self.coordinator
        assert c.progress is not None
        if self._pool is None:
            self._pool = ReaderPool(self.make_reader, ChunkReader.close, self.readers)
        start = self._window_start(reader)
        began, rows = time.monotonic(), 0
        ranges = self._ranges(reader, plan, c.progress.after, start)
        offered: deque[tuple[ChunkOffer, tuple[Any, ...] | None]] = deque()  # and its start
        read_all = False
        try:
            while not self.stopping.is_set():
                if not read_all and len(offered) < _OFFERED:
                    chunk, chunk_after = ranges.next()
                    offered.append((self._put(plan, chunk), chunk_after))
                    read_all = chunk.done
                    continue
                offer, offer_after = offered.popleft()
                delivered = self._delivered(offer)
                if delivered is None:
                    return  # stopping
                if not delivered:
                    log.info("snapshot %s: %s changed (a DDL) after its chunk was read; "
                             "reading it again", c.progress.id, plan.name)
                    for later, _ in offered:  # the same plan: turned back too
                        if self._delivered(later) is None:
                            return
                    offered.clear()
                    ranges.drain()
                    replanned = self._replan(reader, plan)
                    if replanned is None:
                        return  # dropped, or lost its key: the stream has the DDL
                    if replanned.key != plan.key:
                        start = self._window_start(reader)
                    plan, read_all = replanned, False
                    ranges = self._ranges(reader, plan, offer_after, start)
                    continue
                rows += len(offer.chunk.rows)
                if offer.chunk.done:
                    log.info("snapshot %s: %s read by %d readers, %d rows in %.1fs",
                             c.progress.id, plan.name, self.readers, rows,
                             time.monotonic() - began)
                    return
        finally:
            ranges.drain()

    def _ranges(self, reader: ChunkReader, plan: TablePlan, after: tuple[Any, ...] | None,
                start: tuple[str, int]) -> OrderedRanges[ChunkReader, ReadChunk]:
        """``plan``'s chunks after key ``after``, read by the pool in windows that begin
        at ``start``."""
        assert self._pool is not None
        return OrderedRanges(
            self._pool, after, lambda lo: reader.boundary(plan, lo),
            lambda chunk_reader, lo, hi: chunk_reader.read(plan, lo, start, hi),
            lambda chunk: chunk.last_key, lambda chunk: chunk.done)

    def _window_start(self, reader: ChunkReader) -> tuple[str, int]:
        """Where the table's window begins (its changes after it are noted from now on):
        the binlog head, which MySQL's stream must have passed before a chunk is read."""
        start = reader.head()
        if not reader.mariadb:
            self._wait_for_stream(start)
        return start

    def _read_whole(self, reader: ChunkReader, plan: TablePlan) -> None:
        """A table without a key, as one transaction delivered where the stream holds:
        MariaDB reads it in a consistent snapshot and says at which binlog position, and
        the stream leaves out the table's rows of transactions before it; MySQL reads it
        under ``LOCK TABLES ... READ`` once the stream has read past every change made
        before the lock. Its changes were withheld from the stream until now (see the
        router). The rows go in pieces of ``chunk_rows``, each read while the one before
        is delivered; only the last piece completes the transaction, so a restart before
        it reads the table again and the sink drops what it holds of the pieces."""
        if self.hold_stream is None or self.release_stream is None:
            raise SourceError(f"snapshot of {plan.name}: a table without a key needs the "
                              "stream held while it is read")
        began = time.monotonic()
        locked = not reader.mariadb
        rows: int | None = 0
        if locked:
            reader.lock(plan)
        try:
            if locked:
                self._wait_for_stream(reader.head())
            at = self.hold_stream()
            if at is None:
                raise SourceError(f"snapshot of {plan.name}: the stream did not reach a "
                                  "transaction boundary to hold at within a minute")
            try:
                whole = reader.read_whole(plan, reader.chunk_rows)
                rows = self._offer_pieces(plan, whole, at)
            finally:
                self.release_stream()
            if rows is None:
                return  # stopping
            # Decoded here (where rows before that position are left out) until the
            # stream is past it: a decode worker would not leave them out.
            self._wait_for_stream(whole.at or at)
        finally:
            if locked:
                reader.unlock()
            self.coordinator.untrack(plan.database, plan.table)
        progress = self.coordinator.progress
        assert progress is not None
        log.info("snapshot %s: %s read whole (no key), %d rows in %.1fs", progress.id,
                 plan.name, rows, time.monotonic() - began)

    def _offer_pieces(self, plan: TablePlan, whole: WholeRead, at: tuple[str, int]
                      ) -> int | None:
        """Offers the pieces of ``whole`` (read at stream position ``at``), each piece but
        the last once the next is read (the last one ends the transaction), at most
        :data:`_OFFERED` waiting; how many rows went (``None``: the router stops)."""
        offered: deque[ChunkOffer] = deque()
        held: ChunkRows | None = None
        first = 0

        def offer(rows: ChunkRows, last: bool) -> bool:
            nonlocal first
            if first + len(rows) > whole.rows or (last and first + len(rows) < whole.rows):
                raise SourceError(
                    f"snapshot of {plan.name}: {whole.rows} rows were counted in the read's "
                    f"snapshot but {first + len(rows) if last else 'more'} were read "
                    "(the table changed during its read?)")
            chunk = ReadChunk(rows, None, last, at, whole.read_at)
            offered.append(self._put(plan, chunk, whole.at or at if last else None,
                                     piece=WholePiece(first, whole.rows, last)))
            first += len(rows)
            while len(offered) > (0 if last else _OFFERED - 1):
                if self._delivered(offered.popleft()) is None:
                    return False
            return True

        for rows in whole.pieces:
            if not rows:
                continue  # the last piece may be empty: the one before ends the transaction
            if held is not None and not offer(held, False):
                return None
            held = rows
        if not offer(held or [], True):
            return None
        return first

    def _offer(self, plan: TablePlan | None, chunk: ReadChunk,
               read_until: tuple[str, int] | None = None) -> None:
        self._delivered(self._put(plan, chunk, read_until))

    def _put(self, plan: TablePlan | None, chunk: ReadChunk,
             read_until: tuple[str, int] | None = None, start: bool = False,
             piece: WholePiece | None = None) -> ChunkOffer:
        offer = ChunkOffer(plan, chunk, read_until=read_until, start=start, piece=piece)
        self.coordinator.put(offer)
        return offer

    def _delivered(self, offer: ChunkOffer) -> bool | None:
        """Waits until the stream took ``offer``: whether it delivered it (``False``: turned
        back), ``None`` when the router stops first."""
        # The router's stop sets ``stopping``, then abandons the offer it finds (this one,
        # or, if it came first, none: then ``stopping`` is seen here).
        if self.stopping.is_set() and not offer.delivered.is_set():
            return None
        offer.delivered.wait()
        return None if offer.abandoned else not offer.rejected

    def _wait_for_stream(self, start: tuple[str, int]) -> None:
        """Until the router's stream has read to ``start``: what the binlog holds before it
        is committed in the server's tables by then (MySQL writes the binlog first)."""
        target = binlog_order(*start)
        while not self.stopping.is_set():
            at = self.stream_position()
            if at is not None and at[0] and binlog_order(*at) >= target:
                return
            time.sleep(0.01)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
