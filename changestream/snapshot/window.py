"""A chunk's window: the keys of a table that the binlog changed between two positions.

The chunk's rows were read somewhere inside its window; a row whose key the binlog changed
in the window may be older or newer than the change, so it is dropped and the change (which
the stream delivers in order) stands. The rows left are the table as it was at every point
of the window, and are delivered at its end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from changestream.snapshot.result_set import ChunkRows


class ChangedKeys:
    """Keys (tuples of ``key`` column values) that rows events changed in the window."""

    def __init__(self, key: Sequence[str]):
        self.key = tuple(key)
        self.keys: set[tuple[Any, ...]] = set()
        # Where (binlog order) the last DDL of the table the stream assembled began.
        self.last_ddl: tuple[Any, ...] | None = None

    def note(self, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> None:
        """A row change: both its images' keys are changed (an update may move a row)."""
        for image in (before, after):
            if image is not None:
                self.keys.add(tuple(image.get(k) for k in self.key))

    def unchanged(self, rows: Iterable[tuple[tuple[Any, ...], Any]]) -> list[Any]:
        """The rows (given as ``(key, row)``) whose key no change in the window touched."""
        keys = self.keys
        return [row for key, row in rows if key not in keys]

    def kept(self, rows: ChunkRows) -> ChunkRows:
        """As :meth:`unchanged`, the rows kept as ``(key, row)``: a list, or a compiled row
        reader's block (which leaves the rows out itself)."""
        keys = self.keys
        without = getattr(rows, "without", None)
        if without is not None:
            kept: ChunkRows = without(keys)
            return kept
        return [pair for pair in rows if pair[0] not in keys]
