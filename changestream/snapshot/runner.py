"""The snapshot runner: a thread that reads the tables of a snapshot chunk by chunk and
offers each chunk to the stream (see :mod:`changestream.snapshot.coordinator`)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from changestream.changes import binlog_order
from changestream.errors import SourceError
from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator
from changestream.snapshot.reader import ChunkReader, ReadChunk, TablePlan

log = logging.getLogger("changestream")


class SnapshotRunner:
    """Runs the snapshot the coordinator's progress describes, from where it stands.

    ``reader`` makes the chunk reader (its own connection); ``stream_position`` says what
    the router's stream has read to (file, offset), for MySQL's first chunk of a table;
    ``stopping`` ends it early; ``on_error`` gets what made it fail."""

    def __init__(self, reader: Callable[[], ChunkReader], coordinator: SnapshotCoordinator,
                 stream_position: Callable[[], tuple[str, int] | None],
                 stopping: threading.Event, on_error: Callable[[BaseException], None],
                 hold_stream: Callable[[], tuple[str, int] | None] | None = None,
                 release_stream: Callable[[], None] | None = None):
        self.make_reader = reader
        self.coordinator = coordinator
        self.stream_position = stream_position
        # Tables without a key are read whole while the stream holds at a boundary.
        self.hold_stream = hold_stream
        self.release_stream = release_stream
        self.stopping = stopping
        self.on_error = on_error
        self.finished = threading.Event()
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
                reader.close()
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
        while not c.progress.finished and not self.stopping.is_set():
            name = c.progress.tables[0]
            database, _, table = name.partition(".")
            plan = reader.plan(database, table)
            if plan is None:
                log.warning("snapshot %s: table %s is gone; left out", c.progress.id, name)
                self._offer(plan, ReadChunk([], None, True, reader.head(), _now()))
                continue
            if plan.query is None:
                self._read_whole(reader, plan)
                continue
            c.track(database, table, plan.key)
            offered: ChunkOffer | None = None
            try:
                start = reader.head()  # the window begins here: changes after it are noted
                if not reader.mariadb:
                    self._wait_for_stream(start)
                after = c.progress.after
                began, rows = time.monotonic(), 0
                while not self.stopping.is_set():
                    # The next chunk is read while the one before is delivered.
                    chunk = reader.read(plan, after, start)
                    if reader.changed(plan):
                        # A DDL changed the table while the chunk was read: its rows may
                        # not have the shape the plan says; read it again as it is now.
                        log.info("snapshot %s: %s changed while read; reading the chunk "
                                 "again", c.progress.id, name)
                        replanned = reader.plan(database, table)
                        if replanned is None or replanned.query is None:
                            break  # dropped, or lost its key: the stream has the DDL
                        plan = replanned
                        continue
                    if offered is not None:
                        self._delivered(offered)
                    offered = self._put(plan, chunk)
                    rows += len(chunk.rows)
                    if chunk.done:
                        log.info("snapshot %s: %s read, %d rows in %.1fs", c.progress.id,
                                 name, rows, time.monotonic() - began)
                        break
                    after = chunk.last_key
            finally:
                if offered is not None:
                    self._delivered(offered)  # its window is the tracked table's
                c.untrack(database, table)
        if c.progress.finished:
            log.info("snapshot %s: done, %d rows in %d chunks", c.progress.id, c.progress.rows,
                     c.progress.chunks)

    def _read_whole(self, reader: ChunkReader, plan: TablePlan) -> None:
        """A table without a key, in one read delivered where the stream holds: MariaDB
        reads it in a consistent snapshot and says at which binlog position, and the
        stream leaves out the table's rows of transactions before it; MySQL reads it under
        ``LOCK TABLES ... READ`` once the stream has read past every change made before
        the lock. Its changes were withheld from the stream until now (see the router)."""
        if self.hold_stream is None or self.release_stream is None:
            raise SourceError(f"snapshot of {plan.name}: a table without a key needs the "
                              "stream held while it is read")
        began = time.monotonic()
        locked = not reader.mariadb
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
                chunk, snapshot_at = reader.read_whole(plan)
                chunk.high = at
                self._offer(plan, chunk, snapshot_at or at)
            finally:
                self.release_stream()
            # Decoded here (where rows before that position are left out) until the
            # stream is past it: a decode worker would not leave them out.
            self._wait_for_stream(snapshot_at or at)
        finally:
            if locked:
                reader.unlock()
            self.coordinator.untrack(plan.database, plan.table)
        log.info("snapshot %s: %s read whole (no key), %d rows in %.1fs", self.coordinator
                 .progress.id, plan.name, len(chunk.rows), time.monotonic() - began)

    def _offer(self, plan: TablePlan | None, chunk: ReadChunk,
               read_until: tuple[str, int] | None = None) -> None:
        self._delivered(self._put(plan, chunk, read_until))

    def _put(self, plan: TablePlan | None, chunk: ReadChunk,
             read_until: tuple[str, int] | None = None, start: bool = False) -> ChunkOffer:
        offer = ChunkOffer(plan, chunk, read_until, start)
        self.coordinator.put(offer)
        return offer

    def _delivered(self, offer: ChunkOffer) -> None:
        """Until ``offer`` is delivered (or the router stops)."""
        while not offer.delivered.wait(0.1):
            if self.stopping.is_set():
                return

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
