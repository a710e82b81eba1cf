"""What the two Spark sinks that store the position with their data share: they return it
from ``open`` (the router resumes there: exactly once), skip what a replayed batch already
landed, and hold the parts of a transaction that is not complete yet (a batch without a
position: the Sink actor gives none to a batch that ends inside a transaction) until the
batch that completes it."""

from __future__ import annotations

import logging
import time
from typing import Any

from changestream.model.changes import Batch
from changestream.model.errors import SinkError

from . import positions
from .base import LandedBatch, SparkSinkBase
from .frames import Part, TableRun, table_runs, transaction_positions
from .options import short

logger = logging.getLogger("changestream.sinks.spark")


class DurableSparkSink(SparkSinkBase):
    """A Spark sink whose landing (``_landing``: its ``position`` and ``clock``) commits
    each batch's position with its rows; subclasses land a batch in :meth:`_land`."""

    def __init__(self, **session: Any):
        super().__init__(**session)
        self._landing: Any = None
        self._held: list[Part] = []

    def _land(self, parts: list[Part], runs: list[TableRun], batch: Batch) -> dict[str, int]:
        """Land the new ``parts`` (as ``runs``) of ``batch``; rows per source table."""
        raise NotImplementedError

    def _landed(self, runs: list[TableRun]) -> None:
        """After a batch landed (upkeep: nothing here)."""

    def _forget_landed(self) -> None:
        """After a batch failed: forget what is known of what the tables hold, so that the
        retry reads it again (nothing here)."""

    def write(self, batch: Batch) -> None:
        if self.spark is None:
            raise SinkError("spark sink: write before open")
        started = time.perf_counter()
        parts = self._held + list(batch.parts)
        if batch.position is None:
            self._held = parts  # the router has no resume point yet: nothing to commit
            self.last = LandedBatch(batch.id, {}, time.perf_counter() - started, True)
            return
        ends = transaction_positions(parts)
        if ends and ends[-1] is None:
            # Landed, those last parts would carry no position and a later batch would
            # take them for landed: Batch's contract gives such a batch no position.
            raise SinkError(f"spark sink ({self.mode}): batch {batch.id} ends inside a "
                            f"transaction but has position {batch.position}")
        committed = self._landing.position
        parts = positions.new_parts(parts, committed, ends)
        if not parts or not positions.is_after(batch.position, committed):
            self._held = []
            self.last = LandedBatch(batch.id, {}, time.perf_counter() - started, True)
            return
        grouped = time.perf_counter()
        runs = table_runs(parts)
        grouped = time.perf_counter() - grouped
        try:
            rows = self._land(parts, runs, batch)
        except Exception as exc:
            # A commit may have been made whose reply was lost (a network error, a commit
            # state the catalog could not tell): a retry reads what the tables hold again.
            self._forget_landed()
            if isinstance(exc, SinkError):
                raise
            raise SinkError(f"spark sink ({self.mode}): batch {batch.id} at "
                            f"{batch.position}: {short(exc)}") from exc
        self._held = []
        self._landed(runs)
        stages = {"group": grouped, **self._landing.clock.take()}
        self.last = LandedBatch(batch.id, rows, time.perf_counter() - started, stages=stages)
        logger.debug("spark sink: batch %d landed in %.2fs: %s (%s)", batch.id,
                     self.last.seconds, rows,
                     ", ".join(f"{k} {v:.2f}s" for k, v in stages.items()))

    def close(self) -> None:
        self._held = []
        super().close()

