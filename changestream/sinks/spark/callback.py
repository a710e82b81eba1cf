"""``spark:callback``: ``function(batch_id, dataframes_by_table, batch_info)`` for every
batch, like Structured Streaming's ``foreachBatch``; ``dataframes_by_table`` maps
``"db.table"`` to a list of DataFrames (more than one when the table's shape changed
within the batch). The batch is acknowledged when the function returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from changestream.model.changes import Batch, Position
from changestream.model.errors import SinkError

from .base import BatchInfo, LandedBatch, SparkSinkBase
from .frames import changelog_dataframe, table_runs


class CallbackSparkSink(SparkSinkBase):
    """Hands each batch's DataFrames to ``function`` (see the module docstring)."""

    mode = "callback"

    def __init__(self, function: Callable[..., Any] | None = None, **session: Any):
        if not callable(function):
            raise SinkError("spark sink: mode 'callback' needs function=CALLABLE")
        super().__init__(**session)
        self.function = function

    def open(self) -> Position | None:
        self._open_session({}, None)
        return None

    def write(self, batch: Batch) -> None:
        if self.spark is None:
            raise SinkError("spark sink: write before open")
        started = time.perf_counter()
        frames: dict[str, list[Any]] = {}
        rows: dict[str, int] = {}
        for run in table_runs(batch.parts):
            frames.setdefault(run.name, []).append(changelog_dataframe(self.spark, run))
            rows[run.name] = rows.get(run.name, 0) + run.rows
        ddl = [c.sql for c in batch.iter_changes() if c.op == "ddl" and c.sql]
        info = BatchInfo(batch.id, batch.position, sum(p.transactions for p in batch.parts),
                         batch.changes, rows, ddl)
        self.function(batch.id, frames, info)
        self.last = LandedBatch(batch.id, rows, time.perf_counter() - started)
