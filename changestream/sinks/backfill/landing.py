"""Landing staged backfill rows: the Iceberg landing, fed from the staged pieces.

A :class:`StagedRun` is a table's consecutive staged pieces of one shape. They are read
back on the driver and landed as a live batch would be
(:class:`~changestream.sinks.spark.iceberg.IcebergLanding`): the changelog rows appended in
one commit the driver writes, the mirror by one row delta (the last change per key in
binlog order, or, without a key, the copies added and removed), Spark's ``MERGE`` only
where the driver cannot write the table. Each commit carries the position after the run's
last transaction, so a restarted backfill skips what a table has (see
:meth:`BackfillLanding.new_pieces`).
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from changestream.model.changes import Position
from changestream.model.errors import SinkError
from changestream.model.record import record
from changestream.sinks.spark import positions
from changestream.sinks.spark.frames import Span, TableRun
from changestream.sinks.spark.iceberg import IcebergLanding

from .decoding import StagedPiece, read_piece

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@record
class StagedRun(TableRun):
    """Staged pieces of one table and shape, in binlog order."""

    pieces: list[StagedPiece] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pieces)


class BackfillLanding(IcebergLanding):
    """The Iceberg landing of staged runs (see the module docstring)."""

    def new_pieces(self, spark: SparkSession, name: str, run: StagedRun
                   ) -> tuple[list[StagedPiece], Position | None]:
        """The pieces of ``run`` table ``name`` does not hold yet, and the position it holds
        once they are in."""
        committed = self.tables.committed_position(spark, name)
        new = [p for p in run.pieces if positions.is_after(p.last, committed)]
        if new and committed is not None and not positions.is_after(new[0].first, committed):
            raise SinkError(f"backfill: table {name} was committed up to {committed}, in the "
                            f"middle of staged rows ({new[0].first} to {new[0].last}); "
                            "remove the staging folder and run the backfill again")
        return new, positions.merged(committed, [new[-1].last]) if new else None

    @staticmethod
    def read_pieces(run: StagedRun, pieces: list[StagedPiece]) -> TableRun:
        """``pieces`` of ``run`` read back as one run, a span per piece (a piece lands
        whole or not at all: :meth:`new_pieces`)."""
        read = TableRun(run.database, run.table, run.schema, run.fields)
        for piece in pieces:
            read.add_frame(read_piece(piece.path), [Span(piece.last, piece.rows)])
        return read

    def land_changelog(self, spark: SparkSession, run: TableRun) -> int:
        assert isinstance(run, StagedRun)
        pieces, last = self.new_pieces(spark, self.changelog_name(run), run)
        if not pieces or last is None:
            return 0  # landed before: the table may have a later shape already
        return super().land_changelog(spark, self.read_pieces(run, pieces))

    def land_mirror(self, spark: SparkSession, run: TableRun) -> int:
        assert isinstance(run, StagedRun)
        pieces, last = self.new_pieces(spark, self.mirror_name(run), run)
        if not pieces or last is None:
            return 0
        return super().land_mirror(spark, self.read_pieces(run, pieces))
