"""What a batch does to a mirror without a primary key: such a table is a multiset of whole
rows, as at the source, so a batch adds or removes copies of row values (NULLs match).
Landed by position (:func:`keyless_copies`: the copies to remove and to add), else by a
MERGE (:func:`keyless_source`: each changed value rewritten with as many copies as the
mirror had plus what the batch added)."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa

from ..frames import BEFORE_PREFIX, TableRun, to_dataframe
from .key_index import COPIES
from .mirror_plan import hashable
from .names import quote as _q


def net_copies(run: TableRun, rows: pa.Table) -> tuple[pa.Table, list[tuple[int, int]]]:
    """The images of keyless ``run``'s changes ``rows`` (its after images, then its
    before images: row i's is row n + i) and, per row value the batch changes, how many
    copies it adds (negative: removes) and the image that holds it: (count, image),
    counts of zero left out."""
    cols = [f.name for f in run.fields]
    images = rows.select(cols)
    befores = rows.select([f"{BEFORE_PREFIX}{i}" for i in run.before_fields]) \
        .rename_columns(cols)
    both = pa.concat_tables([images, befores])  # row i's before image is row n + i
    n = rows.num_rows
    keyed = list(zip(*(both.column(c).to_pylist() for c in cols)))
    net: dict[tuple[Any, ...], list[int]] = {}
    for i, op in enumerate(rows.column("_op").to_pylist()):
        steps = []
        if op == "update":
            steps.append((n + i, -1))
        if op == "delete":
            steps.append((i, -1))
        elif op in ("update", "insert", "snapshot"):
            steps.append((i, 1))
        for at, step in steps:
            key = tuple(hashable(v) for v in keyed[at])
            entry = net.setdefault(key, [0, at])
            entry[0] += step
    return both, [(count, at) for count, at in net.values() if count != 0]


def keyless_copies(run: TableRun, rows: pa.Table
                   ) -> tuple[pa.Table | None, pa.Table | None]:
    """The changes ``rows`` of keyless ``run`` as (the rows to add, a row per copy; the
    rows to remove, each with how many of its copies in column ``COPIES``), ``None``
    when empty. A DELETE of one of several equal rows removes one copy, as the server
    did."""
    both, changed = net_copies(run, rows)
    added = sorted(at for count, at in changed for _ in range(count))
    removed = [(at, -count) for count, at in changed if count < 0]
    return (both.take(pa.array(added, pa.int64())) if added else None,
            both.take(pa.array([at for at, _ in removed], pa.int64())).append_column(
                COPIES, pa.array([c for _, c in removed], pa.int64())) if removed else None)


def keyless_source(spark: Any, name: str, run: TableRun, rows: pa.Table) -> pa.Table:
    """The MERGE source of keyless ``run``'s changes ``rows``: each changed row value is
    deleted (every copy) and inserted again as many times as the mirror had it plus the
    net count the changes add."""
    both, changed = net_copies(run, rows)
    # Indices as int64 arrays: changes that cancel out (a DELETE ... LIMIT 1 of a duplicate
    # row, then the same row INSERTed) leave ``changed`` empty, and pyarrow types a bare []
    # as null, for which take has no kernel.
    copies = mirror_copies(spark, name, run,
                           both.take(pa.array([at for _, at in changed], pa.int64())))
    picks, ops = [], []
    for (count, at), have in zip(changed, copies):
        picks.append(at)
        ops.append("delete")
        for _ in range(max(have + count, 0)):
            picks.append(at)
            ops.append("upsert")
    return both.take(pa.array(picks, pa.int64())).append_column(
        "_op", pa.array(ops, pa.string()))


def mirror_copies(spark: Any, name: str, run: TableRun, images: pa.Table) -> list[int]:
    """How many rows of mirror ``name`` equal each of ``images``."""
    if not images.num_rows:
        return []
    from pyspark.sql import types as T

    source = images.append_column("_rid", pa.array(range(images.num_rows), pa.int64()))
    df = to_dataframe(spark, source, run.fields, (("_rid", T.LongType()),))
    view = f"changestream_rows_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    on = " AND ".join(f"t.{_q(f.name)} <=> s.{_q(f.name)}" for f in run.fields)
    try:
        counts = {r["_rid"]: r["n"] for r in spark.sql(
            f"SELECT s._rid, count(t._m) AS n FROM {view} s LEFT JOIN "
            f"(SELECT *, 1 AS _m FROM {name}) t ON {on} GROUP BY s._rid").collect()}
    finally:
        spark.catalog.dropTempView(view)
    return [int(counts.get(i, 0)) for i in range(images.num_rows)]
