"""The Iceberg landing's mirrors: each batch's last image per key (a keyless table's copies
added and removed) as a row delta the driver writes, else appended new keys and a
``MERGE INTO``; every commit carries the position. The landing
(:class:`changestream.sinks.spark.iceberg.IcebergLanding`) holds one :class:`MirrorLanding`
over its tables."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pyarrow as pa

from changestream.model.changes import Position
from changestream.model.errors import SinkError

from .. import positions
from ..frames import TableRun
from ..positions import PROPERTY
from .files import Unsupported
from .mirror_images import complete_images
from .mirror_keyless import keyless_copies
from .mirror_plan import (
    keys_must_exist,
    last_change_per_key,
    merge_on_keys,
    merge_on_values,
    mirror_delta,
    multiset_source,
    split_new_keys,
)
from .mirror_positions import KeyedRows, MirrorPositions, RowCopies, row_schema
from .names import quote as _q

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from changestream.sinks.spark.stages import StageClock

    from .tables import IcebergTables


class MirrorLanding:
    """Lands runs into the mirrors of ``tables`` (see the module docstring), timing its
    stages on ``clock``; the options as the sink's (docs/sinks.md)."""

    def __init__(self, tables: IcebergTables, clock: StageClock, append_new_keys: bool = True,
                 arrow_appends: bool = True, position_deletes: bool = True):
        self.tables = tables
        self.clock = clock
        self.append_new_keys = append_new_keys
        self.arrow_appends = arrow_appends
        self.position_deletes = position_deletes
        self._positions: MirrorPositions | None = None

    def forget_indexes(self) -> None:
        """Drop the mirrors' key indexes: each is read again from its table when needed."""
        self._positions = None

    def _mirror_positions(self, spark: SparkSession) -> MirrorPositions:
        appender = self.tables.appender_for(spark)
        if self._positions is None or self._positions.appender is not appender:
            self._positions = MirrorPositions(appender)
        return self._positions

    def _row_delta(self, spark: SparkSession, name: str, run: TableRun, upserts: pa.Table | None,
                   deleted: pa.Table | None, last: Position) -> bool:
        """Commit keyed mirror ``name``'s batch written by the driver: position deletes
        (:mod:`.mirror_positions`) unless off or the mirror still has equality deletes,
        else equality deletes; ``False`` when the driver cannot write the table."""
        properties = {PROPERTY: positions.encode(last)}
        if self.position_deletes:
            done = self._mirror_positions(spark).land(
                name, KeyedRows(run.key_names, upserts, deleted), properties,
                self.tables.commits, expect_present=keys_must_exist(run, self.append_new_keys))
            if done is not None:
                return done
        return self.tables.appender_for(spark).row_delta(name, upserts, deleted, properties)

    def land(self, spark: SparkSession, run: TableRun) -> int:
        """Land ``run`` into its mirror (what it holds already skipped); the rows taken."""
        tables = self.tables
        name = tables.mirror_name(run)
        clock = self.clock
        tables.commits.wait_for(name)
        with clock("evolve"):
            rows, last, kept = tables.prepare(spark, name, run, changelog=False)
        if rows is None or last is None:
            return 0
        keys = run.key_names
        # Columns inserts lack too are excluded by the filter: nothing to fill.
        gaps = tables.insert_gaps.setdefault(run.name, set())
        gaps |= run.insert_gaps
        if run.absent:
            absent = [a - gaps or None if a else None for a in (
                run.absent.get(i) for i in (range(run.rows) if kept is None else kept))]
            if any(absent):
                if not keys:
                    raise SinkError(
                        f"spark sink: updates of {run.name} (no primary key) were logged "
                        "without every column (MariaDB leaves unchanged generated columns "
                        "out, binlog_row_image MINIMAL or NOBLOB more): a mirror of a table "
                        "without a key cannot tell which rows they change")
                with clock("mirror images"):
                    tables.commits.drain()  # a Spark query waits for the driver's commits
                    rows = complete_images(spark, name, run, rows, absent)
        if keys and self.arrow_appends:
            with clock("mirror plan"):
                upserts, deleted = mirror_delta(run, rows, self.append_new_keys)
            if upserts is None and deleted is None:
                return rows.num_rows  # keys the batch inserted and deleted again
            with clock("mirror delta"):
                done = self._row_delta(spark, name, run, upserts, deleted, last)
            if done:
                tables.committed[name] = last
                return rows.num_rows
        if not keys and self.arrow_appends and self.position_deletes \
                and self._land_copies(spark, name, run, rows, last):
            return rows.num_rows
        if keys and self.append_new_keys:
            split = split_new_keys(run, rows)
            if split is not None:
                appended, merged = split
                self._land_split(spark, name, run, appended, merged, last)
                return rows.num_rows
        self.merge_rows(spark, name, run, rows, last)
        return rows.num_rows

    def _land_copies(self, spark: SparkSession, name: str, run: TableRun, rows: pa.Table,
                     last: Position) -> bool:
        """Land keyless ``run``'s changes ``rows`` as copies added and removed by position;
        ``False`` when the driver cannot (the caller MERGEs)."""
        mirror = self._mirror_positions(spark)
        with self.clock("mirror plan"):
            try:
                hashed_over = row_schema(mirror.appender.facts(name).schema)
            except Unsupported:  # a column type the driver does not write
                return False
            added, removed = keyless_copies(run, rows, hashed_over)
        if added is None and removed is None:
            return True  # changes that cancel out
        with self.clock("mirror delta"):
            copied = mirror.land(name, RowCopies(added, removed, hashed_over),
                                 {PROPERTY: positions.encode(last)}, self.tables.commits,
                                 expect_present=True)
        if copied:
            self.tables.committed[name] = last
        return bool(copied)

    def _land_split(self, spark: SparkSession, name: str, run: TableRun, appended: pa.Table | None,
                    merged: pa.Table | None, last: Position) -> None:
        """Land keys new to the batch by appending their last image, the rest by MERGE;
        only the last of the (up to two) commits carries ``last``: after a crash between
        them the MERGE is applied again (it sets each key to its last change: idempotent)
        and the append comes after it."""
        if merged is not None:
            self.merge_rows(spark, name, run, merged, None if appended is not None else last)
        if appended is not None:
            with self.clock("mirror append"):
                self.tables.append(spark, name, run, appended, [f.name for f in run.fields],
                                   last)

    def merge_rows(self, spark: SparkSession, name: str, run: TableRun, rows: pa.Table,
                    last: Position | None) -> None:
        """MERGE the changes ``rows`` into mirror ``name``; the commit carries ``last``
        (``None``: no position)."""
        clock = self.clock
        keys = run.key_names
        self.tables.commits.drain()  # a Spark MERGE waits for the driver's commits
        view = f"changestream_src_{uuid.uuid4().hex}"
        try:
            with clock("arrow to spark"):
                self.tables.dataframe(spark, run, rows).createOrReplaceTempView(view)
            if keys:
                source = f"({last_change_per_key(run, view, rows)})"
                on, matched = merge_on_keys(run)
            else:
                source = f"({multiset_source(run, view, name)})"
                on, matched = merge_on_values(run)
            with clock("mirror merge"):
                self.merge(spark, name, run, source, on, matched, last)
        finally:
            spark.catalog.dropTempView(view)

    def merge(self, spark: SparkSession, name: str, run: TableRun, source: str, on: str,
               matched: str, last: Position | None) -> None:
        """MERGE ``source`` (rows with ``_op`` ``upsert`` or ``delete``) into mirror
        ``name``, committed with position ``last`` (``None``: none)."""
        cols = [f.name for f in run.fields]
        sql = (f"MERGE INTO {name} t USING {source} s ON {on} {matched}"
               f"WHEN NOT MATCHED AND s._op = 'upsert' THEN INSERT "
               f"({', '.join(_q(c) for c in cols)}) "
               f"VALUES ({', '.join('s.' + _q(c) for c in cols)})")
        if last is None:
            spark.sql(sql)
            return
        self.tables.with_properties(spark, last, lambda: spark.sql(sql))
        self.tables.committed[name] = last
