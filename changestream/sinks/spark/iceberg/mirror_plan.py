"""What a batch does to a mirror, planned from its Arrow rows: the row delta (last image per
key, the keys to delete first), the split of keys new to the batch from the rest, and the
tests that let a MERGE skip its window. Pure functions of a :class:`.frames.TableRun`'s
frame, without Spark."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from changestream.native import compiled

from ..frames import BEFORE_PREFIX, TableRun, row_numbers
from .names import quote as _q


def mirror_delta(run: TableRun, rows: pa.Table, append_new_keys: bool = True
                 ) -> tuple[pa.Table | None, pa.Table | None]:
    """The changes ``rows`` of keyed ``run`` as one row delta of its mirror: (the last
    image of every key the batch leaves present, in binlog order: its columns are
    ``run.fields``; the key values to delete first: every key the batch changes, but
    those it INSERTs first when ``append_new_keys``, which cannot be in the mirror), each
    ``None`` when empty. An update that changes a key deletes the old one."""
    names = run.key_names
    n = rows.num_rows
    ops = rows.column("_op")
    after = [rows.column(name) for name in names]
    columns = [f.name for f in run.fields]
    only = pc.unique(ops).to_pylist() if n else []
    if len(only) == 1 and only[0] in ("insert", "snapshot") and \
            distinct_keys(rows, names) == n:
        # the common batch of inserts, or of a snapshot's rows, each of a key of its own:
        # no group-by; a snapshot's rows may replace rows the mirror has
        keys = pa.table(after, names=list(names))
        return rows.select(columns), None if append_new_keys and only[0] == "insert" \
            else keys
    one_pass = _one_integer_key_delta(run, rows, append_new_keys)
    if one_pass is not None:
        return one_pass
    before = [rows.column(f"{BEFORE_PREFIX}{i}") for i in run.schema.primary_key or ()]
    # Every row is an event of its key, ordered 2i+1; an update that moves a key is also an
    # event of its old key just before it (2i), which leaves that key gone. Per key, its
    # last event says what is left of it and its first one how the batch found it.
    rank = row_numbers(n)
    moved = key_moves(run, rows)
    events = pa.table([*after, pc.add(pc.multiply(rank, 2), 1)], names=[*names, "_event"])
    if pc.any(moved).as_py():
        old = pa.table([pc.filter(b, moved).cast(a.type) for b, a in zip(before, after)]
                       + [pc.multiply(pc.filter(rank, moved), 2)], names=[*names, "_event"])
        events = pa.concat_tables([events, old])
    keys = events.group_by(list(names), use_threads=False).aggregate(
        [("_event", "min"), ("_event", "max")]).sort_by("_event_min")
    last, first = keys.column("_event_max"), keys.column("_event_min")
    last_row = pc.shift_right(last, 1)  # the event's row
    # A key's last event leaves it present when it is its own row's event (odd) and that
    # row is no delete.
    present = pc.and_(pc.equal(pc.bit_wise_and(last, 1), 1),
                      pc.not_equal(pc.take(ops, last_row), "delete"))
    kept = pc.sort_indices(pc.filter(last_row, present))
    present_rows = pc.take(pc.filter(last_row, present), kept)
    if len(present_rows) == n:
        upserts: pa.Table | None = rows.select(columns)
    else:
        # the row images only: a take of the change metadata (its text columns) cost as
        # much again
        upserts = rows.select(columns).take(present_rows) if len(present_rows) else None
    if append_new_keys:  # keys the batch INSERTs first cannot be in the mirror yet
        first_op = pc.if_else(pc.equal(pc.bit_wise_and(first, 1), 1),
                              pc.take(ops, pc.shift_right(first, 1)), pa.scalar("update"))
        keys = keys.filter(pc.not_equal(first_op, "insert"))
    if not keys.num_rows:
        return upserts, None
    deleted = pa.table([keys.column(name).cast(rows.schema.field(name).type)
                        for name in names], names=list(names))
    return upserts, deleted


#: Key types whose every value an int64 holds (the compiled pass's key).
_INT64_KEYS = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
               pa.uint32())
#: Rows the compiled pass takes at most (its table indexes events with int32s).
_MOST_ROWS = 1 << 30
#: Op codes of the compiled pass, by position (any other op: 3, an upsert).
_OPS = pa.array(["insert", "update", "delete"])


def _one_integer_key_delta(run: TableRun, rows: pa.Table, append_new_keys: bool
                           ) -> tuple[pa.Table | None, pa.Table | None] | None:
    """:func:`mirror_delta` by the compiled one-pass walk
    (:mod:`changestream.sinks.spark._key_events`) for a key of one integer column; ``None``
    where it does not apply (not built, another key, a NULL key)."""
    native = _key_events()
    names = run.key_names
    primary_key = run.schema.primary_key or ()
    if native is None or len(names) != 1 or len(primary_key) != 1 or \
            rows.num_rows >= _MOST_ROWS:
        return None
    after = rows.column(names[0])
    if after.type not in _INT64_KEYS or after.null_count:
        return None
    before = rows.column(f"{BEFORE_PREFIX}{primary_key[0]}")
    if before.type not in _INT64_KEYS:
        return None
    moved = key_moves(run, rows)
    if before.null_count and pc.any(pc.and_(moved, pc.is_null(before))).as_py():
        return None  # an update from a NULL key: the general path
    codes = pc.fill_null(pc.index_in(rows.column("_op"), value_set=_OPS), 3)
    kept, deleted, present = native.key_events(
        _one(after.cast(pa.int64())), _one(pc.fill_null(before.cast(pa.int64()), 0)),
        _one(moved.cast(pa.uint8())), _one(codes.cast(pa.uint8())), append_new_keys)
    columns = [f.name for f in run.fields]
    upserts = None if not present else rows.select(columns) if present == rows.num_rows \
        else rows.select(columns).filter(kept)
    if not len(deleted):
        return upserts, None
    return upserts, pa.table([deleted.cast(rows.schema.field(names[0]).type)],
                             names=list(names))


def _one(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


@functools.cache
def _key_events() -> Any:
    return compiled("changestream.sinks.spark._key_events")


def keys_must_exist(run: TableRun, append_new_keys: bool) -> bool:
    """Whether every key a row delta of ``run`` deletes must be in the mirror already (so
    that one its key index lacks means the index is behind the table): with
    ``append_new_keys`` the keys a batch INSERTs first are not deleted, but a snapshot's
    rows are upserts whose keys the mirror may never have had."""
    return append_new_keys and not any(span.snapshot for span in run.spans)


def key_moves(run: TableRun, rows: pa.Table) -> Any:
    """Per row of ``rows`` (keyed ``run``'s changes), whether it is an update that changes
    its key (a NULL on one side only counts as a change)."""
    differs: Any = pa.scalar(False)
    for i in run.schema.primary_key or ():
        b, a = rows.column(f"{BEFORE_PREFIX}{i}"), rows.column(run.fields[i].name)
        differs = pc.or_(differs, pc.fill_null(pc.or_kleene(
            pc.not_equal(b, a), pc.xor(pc.is_null(b), pc.is_null(a))), False))
    return pc.and_(pc.equal(rows.column("_op"), "update"), differs)


def distinct_keys(rows: pa.Table, names: Sequence[str]) -> int:
    """How many distinct values columns ``names`` of ``rows`` hold together."""
    if len(names) == 1:
        return int(pc.count_distinct(rows.column(names[0]), mode="all").as_py())
    return rows.select(list(names)).group_by(list(names)).aggregate([]).num_rows


def split_new_keys(run: TableRun, rows: pa.Table
                   ) -> tuple[pa.Table | None, pa.Table | None] | None:
    """Split the changes ``rows`` of keyed ``run`` by key: a key whose first change in the
    batch is an INSERT was not at the source before it, so (the mirror being the source as
    of the batch's start) not in the mirror either, and its last image (unless deleted) can
    be appended without a MERGE. Returns (the rows to append, the changes of the other keys
    to MERGE), ``None`` for an empty part; ``None`` in all when an update moves a key (the
    old and new key are tied: all of it goes through the MERGE)."""
    if moves_a_key(run, rows):
        return None
    names = run.key_names
    columns = [rows.column(n).to_pylist() for n in names]
    keys: list[Any] = columns[0] if len(columns) == 1 else list(zip(*columns))
    ops = rows.column("_op").to_pylist()
    first: dict[Any, int] = {}
    final: dict[Any, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
        final[key] = i
    new = {key for key, i in first.items() if ops[i] == "insert"}
    if not new:
        return None, rows
    append_at = sorted(final[key] for key in new if ops[final[key]] != "delete")
    if len(append_at) == rows.num_rows:
        appended: pa.Table | None = rows  # the same object: its DataFrame is reused
    else:
        appended = rows.take(pa.array(append_at, pa.int64())) if append_at else None
    if len(new) == len(first):
        return appended, None
    keep = pa.array([key not in new for key in keys], pa.bool_())
    return appended, rows.filter(keep)


def moves_a_key(run: TableRun, rows: pa.Table) -> bool:
    """Whether an update among ``rows`` (keyed ``run``'s changes) changes its key."""
    return bool(pc.any(key_moves(run, rows)).as_py())


def one_change_per_key(run: TableRun, rows: pa.Table) -> bool:
    """Whether each primary key value of keyed ``run`` occurs once among ``rows`` (its
    frame's rows) and no update among them changes a key."""
    names = run.key_names
    if not names:
        return False
    return distinct_keys(rows, names) == rows.num_rows and not moves_a_key(run, rows)


def multiset_source(run: TableRun, view: str, mirror: str) -> str:
    """SQL for the changes in ``view`` (a frame's rows) of keyless ``run`` as MERGE rows
    into ``mirror``: every changed row value is deleted (all its copies) and inserted
    again as many times as the mirror had it plus the net count the changes add (a
    multiset, as the server keeps it; NULLs match). Spark counts, so no row passes
    through Python."""
    cols = [_q(f.name) for f in run.fields]
    befores = [f"{_q(BEFORE_PREFIX + str(i))} AS {cols[i]}" for i in run.before_fields]
    listed = ", ".join(cols)
    changes = (f"SELECT {listed}, 1 AS _d FROM {view} WHERE _op <> 'delete' "
               f"UNION ALL SELECT {', '.join(befores)}, -1 AS _d FROM {view} "
               f"WHERE _op = 'update' "
               f"UNION ALL SELECT {listed}, -1 AS _d FROM {view} WHERE _op = 'delete'")
    net = (f"SELECT {listed}, sum(_d) AS _n FROM ({changes}) GROUP BY {listed} "
           "HAVING sum(_d) <> 0")
    on = " AND ".join(f"n.{c} <=> t.{c}" for c in cols)
    counted = (f"SELECT {', '.join('n.' + c for c in cols)}, n._n, count(t._m) AS _h "
               f"FROM ({net}) n LEFT JOIN (SELECT *, 1 AS _m FROM {mirror}) t ON {on} "
               f"GROUP BY {', '.join('n.' + c for c in cols)}, n._n")
    return (f"SELECT {listed}, 'delete' AS _op FROM ({counted}) "
            f"UNION ALL SELECT {listed}, 'upsert' AS _op FROM ({counted}) "
            "LATERAL VIEW explode(sequence(1, greatest(_h + _n, 1))) copies AS _k "
            "WHERE _h + _n > 0")


def merge_on_keys(run: TableRun) -> tuple[str, str]:
    """The MERGE's ``ON`` and ``WHEN MATCHED`` clauses for keyed ``run``."""
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in run.key_names)
    sets = ", ".join(f"t.{_q(f.name)} = s.{_q(f.name)}" for f in run.fields)
    return on, (f"WHEN MATCHED AND s._op = 'delete' THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {sets} ")


def merge_on_values(run: TableRun) -> tuple[str, str]:
    """The MERGE's ``ON`` and ``WHEN MATCHED`` clauses for keyless ``run`` (rows are
    found by value)."""
    on = "s._op = 'delete' AND " + " AND ".join(f"t.{_q(f.name)} <=> s.{_q(f.name)}"
                                                for f in run.fields)
    return on, "WHEN MATCHED THEN DELETE "


def last_change_per_key(run: TableRun, view: str, rows: pa.Table | None = None) -> str:
    """SQL for the last change per primary key among the rows in ``view``, in binlog
    order: ``upsert`` with the row, or ``delete``; an update that changes the key
    deletes the old key first. Spark picks them (a window over the key), so no row
    passes through Python. When ``rows`` (the view's rows) show every key once and no
    key changed, each row is its key's last change: no window (a shuffle) is needed."""
    cols = [_q(f.name) for f in run.fields]
    op = "CASE WHEN _op = 'delete' THEN 'delete' ELSE 'upsert' END AS _op"
    if rows is not None and one_change_per_key(run, rows):
        return f"SELECT {', '.join(cols)}, {op} FROM {view}"
    pk = run.schema.primary_key or ()
    keys = [_q(run.fields[i].name) for i in pk]
    befores = {i: _q(f"{BEFORE_PREFIX}{i}") for i in pk}
    old_key = [f"{befores[i]} AS {cols[i]}" if i in befores else
               f"CAST(NULL AS {f.spark_type}) AS {cols[i]}"
               for i, f in enumerate(run.fields)]
    moved = " OR ".join(f"NOT ({befores[i]} <=> {cols[i]})" for i in pk)
    changes = (f"SELECT {', '.join(cols)}, {op}, _row * 2 + 1 AS _order FROM {view} "
               f"UNION ALL SELECT {', '.join(old_key)}, 'delete' AS _op, "
               f"_row * 2 AS _order FROM {view} WHERE _op = 'update' AND ({moved})")
    return (f"SELECT {', '.join(cols)}, _op FROM (SELECT *, row_number() OVER "
            f"(PARTITION BY {', '.join(keys)} ORDER BY _order DESC) AS _last "
            f"FROM ({changes})) WHERE _last = 1")
