"""What a batch does to a mirror without a primary key: such a table is a multiset of whole
rows, as at the source, so a batch adds or removes copies of row values (NULLs match).
Landed by position (:func:`keyless_copies`: the copies to remove and to add), else by a
MERGE whose source Spark counts (:func:`.mirror_plan.multiset_source`). Planned with
Arrow's kernels: a Python object per change held the interpreter lock the router's
threads need."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..frames import BEFORE_PREFIX, TableRun, row_numbers
from .key_index import COPIES, ROW_HASH, row_hashes

_AT, _STEP, _ORDER = "_cs_at", "_cs_step", "_cs_order"


def net_copies(run: TableRun, rows: pa.Table, row_schema: pa.Schema
               ) -> tuple[pa.Table, pa.Table]:
    """The images of keyless ``run``'s changes ``rows`` (its after images, then its
    before images: row i's is row n + i) and, per row value the batch changes, how many
    copies it adds (``COPIES``, negative: removes), the image that first holds it (``_AT``)
    and its hash (``ROW_HASH``: :func:`.key_index.row_hashes` over ``row_schema``, the one
    rule by which rows are equal, in a batch as in the mirror's index), in the order the
    batch first changes each value; counts of zero left out."""
    cols = [f.name for f in run.fields]
    images = rows.select(cols)
    befores = rows.select([f"{BEFORE_PREFIX}{i}" for i in run.before_fields]) \
        .rename_columns(cols)
    both = pa.concat_tables([images, befores])  # row i's before image is row n + i
    n = rows.num_rows
    ops = rows.column("_op").combine_chunks()
    updated = pc.equal(ops, "update")
    removes = pc.or_(updated, pc.equal(ops, "delete"))
    adds = pc.is_in(ops, pa.array(["update", "insert", "snapshot"]))
    number = row_numbers(n)
    # Each change's steps in batch order (2i: an update's or a delete's old row goes;
    # 2i + 1: an insert's or an update's new row comes), with the image each names.
    steps = pa.table({
        _AT: pa.concat_arrays([
            pc.if_else(updated, pc.add(number, n), number).filter(removes),
            number.filter(adds)]),
        _STEP: pa.concat_arrays([_repeat(-1, removes), _repeat(1, adds)]),
        _ORDER: pa.concat_arrays([pc.multiply(number, 2).filter(removes),
                                  pc.add(pc.multiply(number, 2), 1).filter(adds)])})
    if not steps.num_rows:
        return both, _NONE
    steps = steps.append_column(
        ROW_HASH, row_hashes(both.take(steps.column(_AT)), row_schema).column(ROW_HASH))
    net = steps.group_by(ROW_HASH, use_threads=False).aggregate(
        [(_STEP, "sum"), (_ORDER, "min")])
    net = net.filter(pc.not_equal(net.column(f"{_STEP}_sum"), 0)) \
        .sort_by(f"{_ORDER}_min")
    # The first step's image: 2i + 1 is row i's after image, 2i its old row (n + i for an
    # update, whose before image that is; i for a delete, whose row image it is).
    first = net.column(f"{_ORDER}_min")
    row = pc.divide(first, 2)  # integer division of non-negative int64
    old = pc.equal(pc.bit_wise_and(first, 1), 0)
    at = pc.if_else(pc.and_(old, pc.take(updated, row)), pc.add(row, n), row)
    return both, pa.table({COPIES: net.column(f"{_STEP}_sum"), _AT: at,
                           ROW_HASH: net.column(ROW_HASH)})


def _repeat(step: int, mask: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``step`` once for each true value of ``mask``."""
    return pa.repeat(pa.scalar(step, pa.int64()), pc.sum(mask).as_py() or 0)


_REMOVING = pa.array(["update", "delete"])
_ADDING = pa.array(["insert", "snapshot"])

_NONE = pa.table({COPIES: pa.array([], pa.int64()), _AT: pa.array([], pa.int64()),
                  ROW_HASH: pa.array([], pa.binary(16))})


def keyless_copies(run: TableRun, rows: pa.Table, row_schema: pa.Schema
                   ) -> tuple[pa.Table | None, pa.Table | None]:
    """The changes ``rows`` of keyless ``run`` as (the rows to add, a row per copy; the
    row values to remove, as their hash (``ROW_HASH``, over ``row_schema``, the mirror's
    columns as it types them) and how many of their copies go (``COPIES``)), ``None``
    when empty. A DELETE of one of several equal rows removes one copy, as the server
    did."""
    ops = rows.column("_op")
    if not pc.any(pc.is_in(ops, _REMOVING)).as_py():
        # Rows added only (inserts, a snapshot's rows): each one a copy added, in batch
        # order, and nothing to remove: no row value to hash and count.
        added = rows.select([f.name for f in run.fields]).filter(pc.is_in(ops, _ADDING))
        return (added if added.num_rows else None), None
    both, changed = net_copies(run, rows, row_schema)
    counts = changed.column(COPIES)
    gained = changed.filter(pc.greater(counts, 0))
    if gained.num_rows and pc.max(gained.column(COPIES)).as_py() > 1:
        # a value added more than once: its image taken once per copy
        at = pa.array([a for a, c in zip(gained.column(_AT).to_pylist(),
                                         gained.column(COPIES).to_pylist()) for _ in range(c)],
                      pa.int64())
    else:
        at = gained.column(_AT)
    lost = changed.filter(pc.less(counts, 0))
    added = both.take(pc.take(at, pc.sort_indices(at))) if len(at) else None
    removed = pa.table({ROW_HASH: lost.column(ROW_HASH),
                        COPIES: pc.negate(lost.column(COPIES))}) if lost.num_rows else None
    return added, removed
