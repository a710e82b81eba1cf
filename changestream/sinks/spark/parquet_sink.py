"""``spark:parquet``: an append-only changelog per table in ``path`` (:mod:`.parquet`),
with the position committed in its manifest."""

from __future__ import annotations

import os
from typing import Any

from changestream.model.changes import Batch, Position
from changestream.model.errors import SinkError

from .durable import DurableSparkSink
from .frames import Part, TableRun


class ParquetSparkSink(DurableSparkSink):
    """Lands each batch as Parquet changelog files under ``path``."""

    mode = "parquet"

    def __init__(self, path: str | os.PathLike[str] | None = None, **session: Any):
        if not path:
            raise SinkError("spark sink: mode 'parquet' needs path=FOLDER")
        super().__init__(**session)
        self.path = path

    def open(self) -> Position | None:
        from .parquet import ParquetLanding

        self._open_session({}, None)
        self._held = []
        self._landing = ParquetLanding(self.path)
        position: Position | None = self._landing.open()
        return position

    def _land(self, parts: list[Part], runs: list[TableRun], batch: Batch) -> dict[str, int]:
        assert batch.position is not None
        rows: dict[str, int] = self._landing.land(runs, batch.position, self.spark, parts)
        return rows
