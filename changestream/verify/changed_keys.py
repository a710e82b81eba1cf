"""The keys of one table that the binlog changes from a position on, noted by a replica
connection of the verifier's own (a router into a sink that keeps nothing but keys)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from changestream.model.changes import Batch, Position, binlog_order
from changestream.model.errors import SourceError
from changestream.runtime.router import Router, RouterSettings
from changestream.snapshot.settings import SnapshotSettings
from changestream.transactions.filters import ChangeFilter

Order = tuple[Any, ...]
"""A binlog order (:func:`changestream.model.changes.binlog_order`)."""


class _KeyNotes:
    """A sink that notes, for each change of the followed table, its binlog order and the
    keys of its images, and how far the stream has been delivered."""

    def __init__(self, database: str, table: str, key: Sequence[str]):
        self.database, self.table, self.key = database, table, tuple(key)
        self.changes: list[tuple[Order, tuple[Any, ...]]] = []
        self.ddl: list[Order] = []
        self.read_to: Order | None = None
        self.lock = threading.Lock()

    def open(self) -> Position | None:
        return None

    def write(self, batch: Batch) -> None:
        notes, ddl = [], []
        for part in batch.parts:
            for change in getattr(part, "changes", ()):
                if change.database != self.database or change.table != self.table:
                    continue
                order = binlog_order(change.file, change.pos)
                if change.op == "ddl":
                    ddl.append(order)
                    continue
                for image in (change.before, change.after):
                    if image is not None:
                        notes.append((order, tuple(image.get(k) for k in self.key)))
        with self.lock:
            self.changes += notes
            self.ddl += ddl
            if batch.position is not None and batch.position.file:
                self.read_to = binlog_order(batch.position.file, batch.position.pos)

    def close(self) -> None:
        pass


class ChangedKeys:
    """Follows the binlog of ``settings``' source from ``start`` (file, offset) for table
    ``database.table`` (key columns ``key``): :meth:`between` gives the keys changed in a
    window once :meth:`wait_past` saw the stream past its end."""

    def __init__(self, settings: RouterSettings, database: str, table: str,
                 key: Sequence[str], start: tuple[str, int]):
        self.notes = _KeyNotes(database, table, key)
        self.start: Order = binlog_order(*start)
        follower = replace(
            settings, start=f"{start[0]}:{start[1]}", until=None, position_file=None,
            filter=ChangeFilter(include=[f"{database}.{table}"]),
            snapshot=SnapshotSettings("never"), decode_workers=0,
            # Its own replica connection: the server drops one of two with one id.
            server_id=(settings.server_id + 7919) % 0xFFFFFFFF or 1)
        self.router = Router(follower, self.notes)
        self.router.start()

    def wait_past(self, order: Order, timeout: float) -> None:
        """Until the stream was delivered past ``order``; a :class:`SourceError` after
        ``timeout`` seconds or when the follower fails."""
        deadline = time.monotonic() + timeout
        while True:
            if self.read_to() >= order:
                return
            if self.router.wait(0.05):
                raise SourceError("verify: the binlog follower stopped before "
                                  f"{_where(order)}")
            if time.monotonic() > deadline:
                raise SourceError(f"verify: the binlog follower did not reach "
                                  f"{_where(order)} within {timeout:.0f} s")

    def read_to(self) -> Order:
        """How far the stream has been delivered here (filtered transactions included)."""
        with self.notes.lock:
            noted = self.notes.read_to
        delivered = self.router.stats.delivery.delivered_position()
        orders = [o for o in (noted, binlog_order(delivered.file, delivered.pos)
                              if delivered is not None and delivered.file else None)
                  if o is not None]
        return max([self.start, *orders])  # what comes before the start is not wanted

    def between(self, low: Order, high: Order) -> tuple[set[tuple[Any, ...]], bool]:
        """The keys changed after ``low`` up to ``high``, and whether a DDL of the table
        came in between."""
        with self.notes.lock:
            keys = {k for order, k in self.notes.changes if low < order <= high}
            ddl = any(low < order <= high for order in self.notes.ddl)
        return keys, ddl

    def forget_before(self, order: Order) -> None:
        """Drop what was noted up to ``order`` (no window reaches back there any more)."""
        with self.notes.lock:
            self.notes.changes = [c for c in self.notes.changes if c[0] > order]
            self.notes.ddl = [d for d in self.notes.ddl if d > order]

    def stop(self) -> None:
        self.router.stop()


def _where(order: Order) -> str:
    """A binlog order as ``file:offset``."""
    base, number, pos = order
    return f"{base}.{number:06d}:{pos}"
