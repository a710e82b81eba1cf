"""The ``[snapshot]`` section: the snapshot's settings (docs/snapshots.md), and the mode in
effect for a source and a start."""

from __future__ import annotations

from typing import Literal

from changestream.model.errors import ConfigError
from changestream.model.modes import SNAPSHOT_MODES, SnapshotMode
from changestream.model.record import record
from changestream.model.setting import check_section, positive, setting


def _snapshot_mode(value: str | None) -> str | None:
    return None if not value or value in SNAPSHOT_MODES else \
        f"{value!r} is not one of {', '.join(SNAPSHOT_MODES)} (or \"\": unset)"


@record
class SnapshotSettings:
    """The ``[snapshot]`` section: the mode (see :mod:`changestream.snapshot.planning`;
    ``""``: unset), rows per chunk, the tables, refills after a DDL
    (:mod:`changestream.schema.refill`) and the connections reading a table's chunks at
    once (:mod:`changestream.snapshot.parallel_reads`)."""

    mode: SnapshotMode | Literal[""] = setting("", check=_snapshot_mode, doc=(
        "Read the tables' existing rows, in key-ordered chunks, while the binlog "
        'streams (no lock). See docs/snapshots.md. "initial": when no position is '
        'saved; "when-needed": also when the saved position was purged from the '
        'server; "initial-only": snapshot, then stop; "never". "": initial when '
        "start.at is unset, never when a start position is given."))
    chunk_rows: int = setting(10_000, check=positive, doc=(
        "Rows per chunk (one SELECT each; a chunk's rows are held in memory until "
        "delivered). A table without a key is read in one SELECT and delivered in "
        "pieces of this many rows, as one transaction."))
    tables: list[str] = setting(factory=list, doc=(
        'Which tables (patterns like "shop.*"; empty: every table the filter takes).'))
    refill: bool = setting(True, doc=(
        "Read a table again (a snapshot of it, while the stream goes on) when a DDL "
        "gave its existing rows values no row event carries: ADD COLUMN ... "
        "AUTO_INCREMENT, a STORED generated column, a DEFAULT expression, a DECIMAL "
        "scale or fractional seconds narrowed. false: sinks keep what they had (NULL "
        "in such a new column); a warning and the metric "
        "changestream_refills_skipped_total say so. See docs/snapshots.md#refills."))
    readers: int = setting(1, check=positive, doc=(
        "Connections reading a table's chunks at once, each chunk in its own consistent "
        "snapshot, delivered in key order (one more connection finds where the chunks "
        "end). 1: one chunk at a time. Memory: up to readers + 2 chunks. See "
        "docs/snapshots.md#parallel-chunks."))

    def __post_init__(self) -> None:
        check_section(self, "snapshot.")  # made by a program: the configuration's checks

    def resolved(self, server: bool, start_given: bool) -> SnapshotMode:
        """The mode in effect."""
        if not server:
            if self.mode not in (None, "", "never"):
                raise ConfigError("snapshot.mode: a snapshot reads a server; binlog files "
                                  "hold only what they hold (use snapshot.mode = never)")
            return "never"
        if not self.mode:
            return "never" if start_given else "initial"
        if self.mode != "never" and start_given:
            raise ConfigError(f"snapshot.mode {self.mode}: a snapshot streams on from the "
                              "point it began; leave start.at unset (or use "
                              "snapshot.mode = never to read the binlog from a position)")
        return self.mode
