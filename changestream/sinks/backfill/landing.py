"""Landing staged backfill rows: the Iceberg landing, fed from Parquet files in staging.

A :class:`StagedRun` is a table's consecutive staged pieces of one shape. Its changelog
rows are appended in one commit, its mirror takes them in one ``MERGE`` (the last change
per key in binlog order, as the live landing picks it, or, without a key, the net count
of each row value); each commit carries the position after the run's last transaction, so
a restarted backfill skips what a table has (see :meth:`BackfillLanding.new_pieces`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from changestream.model.changes import Position
from changestream.model.errors import SinkError
from changestream.sinks.spark import positions
from changestream.sinks.spark.frames import BEFORE_PREFIX, TableRun
from changestream.sinks.spark.iceberg import IcebergLanding
from changestream.sinks.spark.iceberg.mirror_plan import (
    last_change_per_key,
    merge_on_keys,
    merge_on_values,
    multiset_source,
)
from changestream.sinks.spark.iceberg.names import quote as _q
from changestream.sinks.spark.types import METADATA, FieldMapping, spark_schema

from .decoding import StagedPiece

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(slots=True)
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

    def _staged_frame(self, spark: SparkSession, run: StagedRun, pieces: list[StagedPiece]) -> Any:
        from pyspark.sql import types as T

        before = tuple(FieldMapping(f"{BEFORE_PREFIX}{i}", run.fields[i].spark_type,
                                    run.fields[i].arrow, None) for i in run.before_fields)
        schema = spark_schema(METADATA + run.fields + before) \
            .add(T.StructField("_row", T.LongType(), True))
        # Dates and times were written as they are (proleptic Gregorian, as MySQL's).
        return spark.read.schema(schema).option("datetimeRebaseMode", "CORRECTED") \
            .option("int96RebaseMode", "CORRECTED").parquet(*(p.path for p in pieces))

    def land_changelog(self, spark: SparkSession, run: TableRun) -> int:
        assert isinstance(run, StagedRun)
        name = self.changelog_name(run)
        pieces, last = self.new_pieces(spark, name, run)
        if not pieces or last is None:
            return 0  # landed before: the table may have a later shape already
        with self.clock("evolve"):
            self.tables.evolve(spark, name, run, changelog=True)
        df = self._staged_frame(spark, run, pieces) \
            .select([_q(f.name) for f in METADATA + run.fields])
        with self.clock("changelog append"):
            self.tables.spark_append(spark, name, df, last)
        return sum(p.rows for p in pieces)

    def land_mirror(self, spark: SparkSession, run: TableRun) -> int:
        assert isinstance(run, StagedRun)
        name = self.mirror_name(run)
        pieces, last = self.new_pieces(spark, name, run)
        if not pieces or last is None:
            return 0
        with self.clock("evolve"):
            self.tables.evolve(spark, name, run, changelog=False)
        view = f"changestream_staged_{uuid.uuid4().hex}"
        self._staged_frame(spark, run, pieces).createOrReplaceTempView(view)
        try:
            if run.key_names:
                source = f"({last_change_per_key(run, view)})"
                on, matched = merge_on_keys(run)
            else:
                source = f"({multiset_source(run, view, name)})"
                on, matched = merge_on_values(run)
            with self.clock("mirror merge"):
                self.mirrors.merge(spark, name, run, source, on, matched, last)
        finally:
            spark.catalog.dropTempView(view)
        return sum(p.rows for p in pieces)
