"""Whole row images for a keyed mirror from updates the server logged without every column.

A mirror is written a key's last image whole, so an update image that leaves columns out
(MariaDB 11.8 leaves unchanged generated columns out of updates even with
``binlog_row_image=FULL``; MINIMAL and NOBLOB images leave out more) would put NULL where
the source has values. :func:`complete_images` fills each left-out value from the key's
image earlier in the batch, else from the mirror's row as it is (one Spark read of the keys
concerned, an update that moved a key reading its old key), so the landing goes on with
whole images.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changestream.model.errors import SinkError

from ..frames import BEFORE_PREFIX, TableRun, to_dataframe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Key = tuple[Any, ...]


def complete_images(spark: SparkSession, name: str, run: TableRun, rows: pa.Table,
                    absent: list[frozenset[str] | None]) -> pa.Table:
    """``rows`` (of keyed ``run``) with the values ``absent`` names (per row, ``None``:
    none) filled in; see the module docstring."""
    pk = run.schema.primary_key or ()
    keys = [run.fields[i].name for i in pk]
    befores = [f"{BEFORE_PREFIX}{i}" for i in pk]
    images = rows.to_pylist()
    # key -> (the row holding its latest image, the columns still unknown in it, the mirror
    # key whose row has them)
    latest: dict[Key, tuple[dict[str, Any], set[str], Key]] = {}
    waiting: list[tuple[dict[str, Any], set[str], Key]] = []  # rows filled from the mirror
    for row, missing in zip(images, absent):
        key = tuple(row[k] for k in keys)
        if row["_op"] == "delete":
            latest.pop(key, None)
            continue
        if row["_op"] != "update":
            latest[key] = (row, set(), key)
            continue
        old = tuple(row[b] for b in befores)
        base = latest.pop(old, None)
        unknown = set(missing or ())
        origin = old
        if base is not None:
            earlier, still, origin = base
            for column in unknown:
                row[column] = earlier[column]
            unknown &= still  # what the earlier image waits for, this one waits for too
        if unknown:
            waiting.append((row, unknown, origin))
        latest[key] = (row, unknown, origin)
    if waiting:
        held = _mirror_rows(spark, name, run, keys, {origin for _, _, origin in waiting})
        for row, unknown, origin in waiting:
            source = held.get(origin)
            for column in unknown:
                row[column] = None if source is None else source[column]
    return pa.Table.from_pylist(images, schema=rows.schema)


def _mirror_rows(spark: SparkSession, name: str, run: TableRun, keys: list[str],
                 wanted: set[Key]) -> dict[Key, dict[str, Any]]:
    """The mirror's rows of the ``wanted`` keys, by key."""
    from pyspark.sql import functions as F

    fields = tuple(f for f in run.fields if f.name in keys)
    table = pa.Table.from_pylist([dict(zip(keys, key)) for key in wanted],
                                 schema=pa.schema([pa.field(f.name, f.arrow) for f in fields]))
    wanted_df = to_dataframe(spark, table, fields)
    try:
        found = spark.table(name).join(F.broadcast(wanted_df), on=keys, how="inner").collect()
    except Exception as exc:  # Py4J and analysis errors alike
        raise SinkError(f"spark sink: reading the rows of {name} that updates left columns "
                        f"out of: {exc}") from None
    return {tuple(r[k] for k in keys): r.asDict() for r in found}
