"""The Iceberg landing's mirrors: each batch's last image per key as a row delta the driver
writes, else appended new keys and a ``MERGE INTO``; every commit carries the position.
A part of :class:`changestream.sinks.spark.iceberg.IcebergLanding` (a mixin)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changestream.model.changes import Position
from changestream.model.errors import SinkError

from .. import positions
from ..frames import TableRun, to_dataframe
from ..positions import PROPERTY
from .ddl import quote as _q
from .mirror_images import complete_images
from .mirror_keyless import keyless_copies, keyless_source
from .mirror_plan import (
    last_change_per_key,
    merge_on_keys,
    merge_on_values,
    mirror_delta,
    split_new_keys,
)
from .mirror_positions import KeyedRows, MirrorPositions, RowCopies

if TYPE_CHECKING:
    from changestream.sinks.spark.stages import StageClock

    from .files import ArrowAppender


class _Callable:
    """A ``java.util.concurrent.Callable`` implemented in Python (through Py4J)."""

    def __init__(self, function: Any):
        self.function = function

    def call(self) -> None:
        self.function()

    class Java:
        implements = ["java.util.concurrent.Callable"]


class MirrorLanding:
    """Landing a run into its mirror (a mixin: it uses the landing's tables and state)."""

    append_new_keys: bool
    arrow_appends: bool
    position_deletes: bool
    committed: dict[str, Position | None]
    insert_gaps: dict[str, set[str]]
    clock: StageClock
    _positions: MirrorPositions | None

    if TYPE_CHECKING:
        def mirror_name(self, run: TableRun) -> str: ...
        def _evolve(self, spark: Any, name: str, run: TableRun, changelog: bool) -> None: ...
        def _pending(self, spark: Any, name: str, run: TableRun
                     ) -> tuple[pa.Table | None, Position | None, list[int] | None]: ...
        def _dataframe(self, spark: Any, run: TableRun, rows: pa.Table) -> Any: ...
        def _append(self, spark: Any, name: str, run: TableRun, rows: pa.Table,
                    columns: list[str], last: Position) -> None: ...
        def _appender_for(self, spark: Any) -> ArrowAppender: ...

    def _with_properties(self, spark: Any, position: Position, action: Any) -> None:
        # Iceberg 1.10's Spark MERGE takes no write options: the position goes in through
        # CommitMetadata's thread-local, which the MERGE (run from this Py4J callback on
        # the same JVM thread) commits with.
        jvm = spark._jvm
        props = jvm.java.util.HashMap()
        props.put(PROPERTY, positions.encode(position))
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            props, _Callable(action), jvm.java.lang.Class.forName("java.lang.Exception"))

    def _mirror_positions(self, spark: Any) -> MirrorPositions:
        appender = self._appender_for(spark)
        if self._positions is None or self._positions.appender is not appender:
            self._positions = MirrorPositions(appender)
        return self._positions

    def _row_delta(self, spark: Any, name: str, run: TableRun, upserts: pa.Table | None,
                   deleted: pa.Table | None, last: Position) -> bool:
        """Commit keyed mirror ``name``'s batch written by the driver: position deletes
        (:mod:`.mirror_positions`) unless off or the mirror still has equality deletes,
        else equality deletes; ``False`` when the driver cannot write the table."""
        properties = {PROPERTY: positions.encode(last)}
        if self.position_deletes:
            done = self._mirror_positions(spark).land(
                name, KeyedRows(run.key_names, upserts, deleted), properties,
                expect_present=self.append_new_keys)
            if done is not None:
                return done
        return self._appender_for(spark).row_delta(name, upserts, deleted, properties)

    def land_mirror(self, spark: Any, run: TableRun) -> int:
        name = self.mirror_name(run)
        clock = self.clock
        with clock("evolve"):
            self._evolve(spark, name, run, changelog=False)
            rows, last, kept = self._pending(spark, name, run)
        if rows is None or last is None:
            return 0
        keys = run.key_names
        # Columns inserts lack too are excluded by the filter: nothing to fill.
        gaps = self.insert_gaps.setdefault(run.name, set())
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
                    rows = complete_images(spark, name, run, rows, absent)
        if keys and self.arrow_appends:
            with clock("mirror plan"):
                upserts, deleted = mirror_delta(run, rows, self.append_new_keys)
            if upserts is None and deleted is None:
                return rows.num_rows  # keys the batch inserted and deleted again
            with clock("mirror delta"):
                done = self._row_delta(spark, name, run, upserts, deleted, last)
            if done:
                self.committed[name] = last
                return rows.num_rows
        if not keys and self.arrow_appends and self.position_deletes:
            with clock("mirror plan"):
                added, removed = keyless_copies(run, rows)
            if added is None and removed is None:
                return rows.num_rows  # changes that cancel out
            with clock("mirror delta"):
                # the copies removed deleted by position; None or False: MERGE instead
                copied = self._mirror_positions(spark).land(
                    name, RowCopies(added, removed), {PROPERTY: positions.encode(last)},
                    expect_present=True)
            if copied:
                self.committed[name] = last
                return rows.num_rows
        if keys and self.append_new_keys:
            split = split_new_keys(run, rows)
            if split is not None:
                appended, merged = split
                self._land_split(spark, name, run, appended, merged, last)
                return rows.num_rows
        self._merge_rows(spark, name, run, rows, last)
        return rows.num_rows

    def _land_split(self, spark: Any, name: str, run: TableRun, appended: pa.Table | None,
                    merged: pa.Table | None, last: Position) -> None:
        """Land keys new to the batch by appending their last image, the rest by MERGE;
        only the last of the (up to two) commits carries ``last``: after a crash between
        them the MERGE is applied again (it sets each key to its last change: idempotent)
        and the append comes after it."""
        if merged is not None:
            self._merge_rows(spark, name, run, merged, None if appended is not None else last)
        if appended is not None:
            with self.clock("mirror append"):
                self._append(spark, name, run, appended, [f.name for f in run.fields], last)

    def _merge_rows(self, spark: Any, name: str, run: TableRun, rows: pa.Table,
                    last: Position | None) -> None:
        """MERGE the changes ``rows`` into mirror ``name``; the commit carries ``last``
        (``None``: no position)."""
        clock = self.clock
        keys = run.key_names
        view = f"changestream_src_{uuid.uuid4().hex}"
        try:
            if keys:
                with clock("arrow to spark"):
                    self._dataframe(spark, run, rows).createOrReplaceTempView(view)
                source = f"({last_change_per_key(run, view, rows)})"
                on, matched = merge_on_keys(run)
            else:
                from pyspark.sql import types as T

                with clock("mirror source"):
                    table = keyless_source(spark, name, run, rows)
                    if not table.num_rows:  # its changes cancel out, as a keyed no-op
                        return
                    to_dataframe(spark, table, run.fields, (("_op", T.StringType()),)) \
                        .createOrReplaceTempView(view)
                source = view
                on, matched = merge_on_values(run)
            with clock("mirror merge"):
                self._merge(spark, name, run, source, on, matched, last)
        finally:
            spark.catalog.dropTempView(view)

    def _merge(self, spark: Any, name: str, run: TableRun, source: str, on: str,
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
        self._with_properties(spark, last, lambda: spark.sql(sql))
        self.committed[name] = last
