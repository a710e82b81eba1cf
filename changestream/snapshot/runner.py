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
                 stopping: threading.Event, on_error: Callable[[BaseException], None]):
        self.make_reader = reader
        self.coordinator = coordinator
        self.stream_position = stream_position
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
        log.info("snapshot %s: %d tables to read%s", c.progress.id, len(c.progress.tables),
                 f", going on after {c.progress.rows} rows" if c.progress.rows else "")
        while not c.progress.finished and not self.stopping.is_set():
            name = c.progress.tables[0]
            database, _, table = name.partition(".")
            plan = reader.plan(database, table)
            if plan is None:
                log.warning("snapshot %s: table %s is gone; left out", c.progress.id, name)
                self._offer(plan, ReadChunk([], None, True, reader.head(), _now()))
                continue
            if plan.query is None:
                raise SourceError(
                    f"snapshot of {name}: the table has neither a primary key nor a unique "
                    "key on NOT NULL columns, which a chunked snapshot needs; leave it out of "
                    "the snapshot (snapshot.tables) or give it a key")
            c.track(database, table, plan.key)
            try:
                start = reader.head()  # the window begins here: changes after it are noted
                if not reader.mariadb:
                    self._wait_for_stream(start)
                after = c.progress.after
                began, rows = time.monotonic(), 0
                while not self.stopping.is_set():
                    chunk = reader.read(plan, after, start)
                    self._offer(plan, chunk)
                    rows += len(chunk.rows)
                    if chunk.done:
                        log.info("snapshot %s: %s read, %d rows in %.1fs", c.progress.id,
                                 name, rows, time.monotonic() - began)
                        break
                    after = chunk.last_key
            finally:
                c.untrack(database, table)
        if c.progress.finished:
            log.info("snapshot %s: done, %d rows in %d chunks", c.progress.id, c.progress.rows,
                     c.progress.chunks)

    def _offer(self, plan: TablePlan | None, chunk: ReadChunk) -> None:
        offer = ChunkOffer(plan, chunk)
        self.coordinator.put(offer)
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
