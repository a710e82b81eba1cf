"""What a batch does to a mirror, planned from its Arrow rows: the row delta (last image per
key, the keys to delete first), the split of keys new to the batch from the rest, and the
tests that let a MERGE skip its window. Pure functions of a :class:`.frames.TableRun`'s
frame, without Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .frames import BEFORE_PREFIX, TableRun
from .iceberg_ddl import quote as _q


def mirror_delta(run: TableRun, rows: pa.Table, append_new_keys: bool = True
                 ) -> tuple[pa.Table | None, pa.Table | None]:
    """The changes ``rows`` of keyed ``run`` as one row delta of its mirror: (the last
    image of every key the batch leaves present, in binlog order: its columns are
    ``run.fields``; the key values to delete first: every key the batch changes, but
    those it INSERTs first when ``append_new_keys``, which cannot be in the mirror), each
    ``None`` when empty. An update that changes a key deletes the old one."""
    names = run.key_names
    ops = rows.column("_op").to_pylist()
    after = [rows.column(n).to_pylist() for n in names]
    before = [rows.column(f"{BEFORE_PREFIX}{i}").to_pylist()
              for i in run.schema.primary_key or ()]
    last: dict[tuple[Any, ...], int | None] = {}  # key -> its last image's row; None: gone
    first: dict[tuple[Any, ...], str] = {}  # key -> its first change's op
    for i, op in enumerate(ops):
        key = tuple(column[i] for column in after)
        if op == "update":
            old = tuple(column[i] for column in before)
            if old != key:
                first.setdefault(old, op)
                last[old] = None
        first.setdefault(key, op)
        last[key] = None if op == "delete" else i
    present = sorted(i for i in last.values() if i is not None)
    if len(present) == rows.num_rows:
        upserts: pa.Table | None = rows.select([f.name for f in run.fields])
    else:
        upserts = rows.take(pa.array(present, pa.int64())) \
            .select([f.name for f in run.fields]) if present else None
    gone = [key for key in last if not (append_new_keys and first[key] == "insert")]
    if not gone:
        return upserts, None
    types = [rows.schema.field(n).type for n in names]
    deleted = pa.table([pa.array([key[j] for key in gone], type=types[j])
                        for j in range(len(names))], names=names)
    return upserts, deleted


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
    updates = pc.equal(rows.column("_op"), "update")
    for i in run.schema.primary_key or ():
        same = pc.equal(rows.column(f"{BEFORE_PREFIX}{i}"), rows.column(run.fields[i].name))
        if pc.any(pc.and_(updates, pc.invert(pc.fill_null(same, False)))).as_py():
            return True
    return False


def one_change_per_key(run: TableRun, rows: pa.Table) -> bool:
    """Whether each primary key value of keyed ``run`` occurs once among ``rows`` (its
    frame's rows) and no update among them changes a key."""
    pk = run.schema.primary_key or ()
    names = [run.fields[i].name for i in pk]
    if not names:
        return False
    if len(names) == 1:
        distinct = pc.count_distinct(rows.column(names[0]), mode="all").as_py()
    else:
        distinct = rows.select(names).group_by(names).aggregate([]).num_rows
    return distinct == rows.num_rows and not moves_a_key(run, rows)


def hashable(value: Any) -> Any:
    """``value`` (a row value as Arrow gives it to Python) as something a dict can key."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value


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
               f"CAST(NULL AS {f.spark.simpleString()}) AS {cols[i]}"
               for i, f in enumerate(run.fields)]
    moved = " OR ".join(f"NOT ({befores[i]} <=> {cols[i]})" for i in pk)
    changes = (f"SELECT {', '.join(cols)}, {op}, _row * 2 + 1 AS _order FROM {view} "
               f"UNION ALL SELECT {', '.join(old_key)}, 'delete' AS _op, "
               f"_row * 2 AS _order FROM {view} WHERE _op = 'update' AND ({moved})")
    return (f"SELECT {', '.join(cols)}, _op FROM (SELECT *, row_number() OVER "
            f"(PARTITION BY {', '.join(keys)} ORDER BY _order DESC) AS _last "
            f"FROM ({changes})) WHERE _last = 1")
