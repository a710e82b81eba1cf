"""What a batch does to a mirror without a primary key: such a table is a multiset of whole
rows, as at the source, so a batch adds or removes copies of row values (NULLs match).
Landed by position (:func:`keyless_copies`: the copies to remove and to add), else by a
MERGE whose source Spark counts (:func:`.mirror_plan.multiset_source`)."""

from __future__ import annotations

import pyarrow as pa

from ..frames import BEFORE_PREFIX, TableRun
from .key_index import COPIES, ROW_HASH, row_hashes


def net_copies(run: TableRun, rows: pa.Table, row_schema: pa.Schema
               ) -> tuple[pa.Table, list[tuple[int, int, bytes]]]:
    """The images of keyless ``run``'s changes ``rows`` (its after images, then its
    before images: row i's is row n + i) and, per row value the batch changes, how many
    copies it adds (negative: removes), the image that holds it and its hash
    (:func:`.key_index.row_hashes` over ``row_schema``: the one rule by which rows are
    equal, in a batch as in the mirror's index): (count, image, hash), counts of zero left
    out."""
    cols = [f.name for f in run.fields]
    images = rows.select(cols)
    befores = rows.select([f"{BEFORE_PREFIX}{i}" for i in run.before_fields]) \
        .rename_columns(cols)
    both = pa.concat_tables([images, befores])  # row i's before image is row n + i
    n = rows.num_rows
    steps: list[tuple[int, int]] = []
    for i, op in enumerate(rows.column("_op").to_pylist()):
        if op == "update":
            steps.append((n + i, -1))
        if op == "delete":
            steps.append((i, -1))
        elif op in ("update", "insert", "snapshot"):
            steps.append((i, 1))
    at_rows = sorted({at for at, _ in steps})
    hashed = row_hashes(both.take(pa.array(at_rows, pa.int64())), row_schema) \
        .column(ROW_HASH).to_pylist() if at_rows else []
    hash_of = dict(zip(at_rows, hashed))
    net: dict[bytes, list[int]] = {}
    for at, step in steps:
        entry = net.setdefault(hash_of[at], [0, at])
        entry[0] += step
    return both, [(count, at, digest) for digest, (count, at) in net.items() if count != 0]


def keyless_copies(run: TableRun, rows: pa.Table, row_schema: pa.Schema
                   ) -> tuple[pa.Table | None, pa.Table | None]:
    """The changes ``rows`` of keyless ``run`` as (the rows to add, a row per copy; the
    row values to remove, as their hash (``ROW_HASH``, over ``row_schema``, the mirror's
    columns as it types them) and how many of their copies go (``COPIES``)), ``None``
    when empty. A DELETE of one of several equal rows removes one copy, as the server
    did."""
    both, changed = net_copies(run, rows, row_schema)
    added = sorted(at for count, at, _ in changed for _ in range(count))
    removed = [(digest, -count) for count, _, digest in changed if count < 0]
    return (both.take(pa.array(added, pa.int64())) if added else None,
            pa.table({ROW_HASH: pa.array([d for d, _ in removed], pa.binary(16)),
                      COPIES: pa.array([c for _, c in removed], pa.int64())})
            if removed else None)
