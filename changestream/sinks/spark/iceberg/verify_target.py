"""The Iceberg mirrors of an opened ``spark:iceberg`` sink as ``changestream verify`` reads
them (:class:`changestream.verify.verifier.MirrorTarget`): source rows made into the Arrow
values the sink lands, and the mirror's rows of the same keys read at one snapshot, with
the position that snapshot holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from changestream.decoding.table_schema import TableSchema
from changestream.model.changes import Position
from changestream.model.errors import SinkError

from .. import positions
from ..frames import TableRun, _columns, to_dataframe
from ..types import FieldMapping, table_mappings
from .files import load_table, positioned_snapshot

Key = tuple[Any, ...]
Row = dict[str, Any]


class IcebergMirrors:
    """What the verifier needs of ``sink`` (an opened Iceberg sink)."""

    def __init__(self, sink: Any):
        self.sink = sink

    @property
    def spark(self) -> Any:
        return self.sink.spark

    def landed_to(self) -> Position | None:
        return self.sink.landed_to()

    def _name(self, schema: TableSchema) -> str:
        run = TableRun(schema.database, schema.table, schema, ())
        name = self.sink.mirror_name(run)
        if not self.spark.catalog.tableExists(name):
            raise SinkError(f"verify: the sink has no mirror of {schema.qualified_name} "
                            f"({name})")
        return name

    def _state(self, name: str) -> tuple[int, Position | None]:
        """The mirror's current snapshot (its id) and the position it holds."""
        table = load_table(self.spark, name)
        table.refresh()
        snapshot = table.currentSnapshot()
        if snapshot is None:
            return -1, None
        held = positioned_snapshot(table, positions.PROPERTY, snapshot)
        return snapshot.snapshotId(), None if held is None else positions.decode(
            str(held.summary().get(positions.PROPERTY)))

    def _fields(self, name: str, schema: TableSchema) -> tuple[FieldMapping, ...]:
        """The source's columns the mirror has (the filter may leave some out)."""
        held = set(self.spark.table(name).columns)
        return tuple(f for f in table_mappings(schema) if f.name in held)

    def _read(self, sql: str) -> pa.Table:
        df = self.spark.sql(sql)
        batches = df._collect_as_arrow()
        if not batches:
            return pa.table({f.name: pa.array([], pa.null()) for f in df.schema.fields})
        return pa.Table.from_batches(batches)

    def mirror_rows(self, schema: TableSchema, key: tuple[str, ...], rows: list[Row]
                    ) -> tuple[dict[Key, Row], dict[Key, Row], Position | None]:
        name = self._name(schema)
        fields = self._fields(name, schema)
        names = [f.name for f in fields]
        source = pa.Table.from_arrays(_columns(fields, rows), names=names)
        by_name = {f.name: f for f in fields}
        if any(k not in by_name for k in key):
            raise SinkError(f"verify: the mirror {name} lacks key columns of "
                            f"{schema.qualified_name}")
        key_fields = tuple(by_name[k] for k in key)  # in the key's order
        by_landed_key: dict[Key, Key] = {}
        for image, landed in zip(rows, source.select(list(key)).to_pylist()):
            by_landed_key[tuple(landed[k] for k in key)] = tuple(image.get(k) for k in key)
        snapshot, position = self._state(name)
        mirror: dict[Key, Row] = {}
        if snapshot >= 0 and rows:
            self.spark.catalog.dropTempView("changestream_verify_keys")
            to_dataframe(self.spark, source.select(list(key)), key_fields) \
                .createOrReplaceTempView("changestream_verify_keys")
            on = " AND ".join(f"m.`{k}` <=> k.`{k}`" for k in key)
            columns = ", ".join(f"m.`{n}`" for n in names)
            held = self._read(f"SELECT {columns} FROM {name} VERSION AS OF {snapshot} m "
                              f"LEFT SEMI JOIN changestream_verify_keys k ON {on}")
            held = held.cast(source.schema) if held.num_rows else held
            for row in held.to_pylist():
                found = by_landed_key.get(tuple(row[k] for k in key))
                if found is not None:
                    mirror[found] = row
        landed = {by_landed_key[tuple(r[k] for k in key)]: r for r in source.to_pylist()}
        return landed, mirror, position

    def mirror_keys(self, schema: TableSchema, key: tuple[str, ...]
                    ) -> tuple[set[Key], Position | None]:
        name = self._name(schema)
        snapshot, position = self._state(name)
        if snapshot < 0:
            return set(), position
        columns = ", ".join(f"`{k}`" for k in key)
        held = self._read(f"SELECT {columns} FROM {name} VERSION AS OF {snapshot}")
        fields = _key_fields(schema, key)
        if held.num_rows:
            held = held.cast(pa.schema([pa.field(f.name, f.arrow) for f in fields]))
        return {tuple(r[k] for k in key) for r in held.to_pylist()}, position

    def landed_keys(self, schema: TableSchema, key: tuple[str, ...],
                    keys: Iterable[Key]) -> set[Key]:
        """Keys given in the decoder's values, as the mirror holds them."""
        fields = _key_fields(schema, key)
        rows = [dict(zip(key, k)) for k in keys]
        if not rows:
            return set()
        table = pa.Table.from_arrays(_columns(fields, rows), names=[f.name for f in fields])
        return {tuple(r[k] for k in key) for r in table.to_pylist()}


def _key_fields(schema: TableSchema, key: tuple[str, ...]) -> tuple[FieldMapping, ...]:
    """The mappings of the key columns ``key`` of ``schema``, in the key's order."""
    by_name = {f.name: f for f in table_mappings(schema)}
    return tuple(by_name[k] for k in key)
