"""The mirror's MERGE source skips its window (a shuffle) only when every key changes once in
the batch and no update moves a key; otherwise the last change per key is picked in Spark.
Keys a batch INSERTs first are appended with their last image, the rest merged."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from changestream.model.changes import EncodedRun
from changestream.sinks.spark.frames import (
    TableRun,
    encode_runs,
    frame_dataframe,
    table_runs,
)
from changestream.sinks.spark.iceberg import mirror_keyless, mirror_plan
from changestream.sinks.spark.iceberg.key_index import COPIES, ROW_HASH, row_hashes
from changestream.sinks.spark.iceberg.mirror_plan import (
    keys_must_exist,
    last_change_per_key,
    mirror_delta,
    multiset_source,
    one_change_per_key,
    split_new_keys,
)
from changestream.sinks.spark.types import arrow_schema
from tests.spark.conftest import Binlog, simple_schema

T = simple_schema("orders")


def _row(i: int, qty: int = 1) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "qty": qty}


@pytest.mark.parametrize("changes, once", [
    ([("insert", None, _row(1)), ("insert", None, _row(2)),
      ("update", _row(3), _row(3, 9)), ("delete", _row(4), None)], True),
    ([("insert", None, _row(1)), ("update", _row(1), _row(1, 2))], False),
    ([("insert", None, _row(1)), ("delete", _row(1), None)], False),
    ([("update", _row(1), _row(2))], False),  # the key moved: the old one is deleted
    ([("insert", None, _row(1))], True),
])
def test_one_change_per_key(changes: list[tuple[str, Any, Any]], once: bool) -> None:
    log = Binlog()
    (run,) = table_runs([log.transaction([(op, T, before, after)])
                         for op, before, after in changes])
    assert one_change_per_key(run, run.frame) is once
    source = last_change_per_key(run, "v", run.frame)
    assert ("row_number()" in source) is not once


def test_a_composite_key_counts_whole_keys() -> None:
    schema = simple_schema("lines", ("id", "qty", "name"))
    schema = type(schema)(schema.database, schema.table, schema.columns, primary_key=(0, 1),
                          names_logged=True)
    log = Binlog()
    rows = [{"id": 1, "qty": 1, "name": "a"}, {"id": 1, "qty": 2, "name": "b"}]
    (run,) = table_runs([log.transaction([("insert", schema, None, r) for r in rows])])
    assert one_change_per_key(run, run.frame)
    (run,) = table_runs([log.transaction([("insert", schema, None, rows[0]),
                                          ("update", schema, rows[0],
                                           {**rows[0], "name": "c"})])])
    assert not one_change_per_key(run, run.frame)


def _split(changes: list[tuple[str, Any, Any]]) -> tuple[Any, Any] | None:
    log = Binlog()
    (run,) = table_runs([log.transaction([(op, T, before, after)])
                         for op, before, after in changes])
    split = split_new_keys(run, run.frame)
    if split is None:
        return None
    appended, merged = split
    return (None if appended is None else appended.select(["_op", "id", "qty"]).to_pylist(),
            None if merged is None else merged.select(["_op", "id", "qty"]).to_pylist())


def test_inserted_keys_are_appended_with_their_last_image() -> None:
    appended, merged = _split([
        ("insert", None, _row(1)), ("update", _row(1), _row(1, 5)),  # new, then changed
        ("insert", None, _row(2)), ("delete", _row(2), None),  # new and gone: nothing
        ("insert", None, _row(3)),
        ("update", _row(4), _row(4, 7)),  # an old key: merged, every change of it
        ("delete", _row(4), None), ("insert", None, _row(4, 8)),
    ])
    assert appended == [{"_op": "update", "id": 1, "qty": 5},
                        {"_op": "insert", "id": 3, "qty": 1}]
    assert merged == [{"_op": "update", "id": 4, "qty": 7}, {"_op": "delete", "id": 4, "qty": 1},
                      {"_op": "insert", "id": 4, "qty": 8}]


def test_a_batch_of_inserts_is_all_appended_and_a_moved_key_all_merged() -> None:
    log = Binlog()
    (run,) = table_runs([log.transaction([("insert", T, None, _row(i)) for i in range(3)])])
    assert split_new_keys(run, run.frame) == (run.frame, None)  # the same table
    assert _split([("delete", _row(1), None), ("update", _row(2), _row(2, 3))]) == \
        (None, [{"_op": "delete", "id": 1, "qty": 1}, {"_op": "update", "id": 2, "qty": 3}])
    assert _split([("insert", None, _row(1)), ("update", _row(1), _row(2))]) is None
    assert _split([("insert", None, _row(1)), ("delete", _row(1), None)]) == (None, None)


def _delta(changes: list[tuple[str, Any, Any]], append_new_keys: bool = True
           ) -> tuple[Any, Any]:
    log = Binlog()
    (run,) = table_runs([log.transaction([(op, T, before, after)])
                         for op, before, after in changes])
    upserts, deleted = mirror_delta(run, run.frame, append_new_keys)
    return (None if upserts is None else upserts.select(["id", "qty"]).to_pylist(),
            None if deleted is None else deleted.column("id").to_pylist())


def test_a_row_delta_holds_each_keys_last_image_and_deletes_what_may_be_there() -> None:
    changes = [
        ("insert", None, _row(1)), ("update", _row(1), _row(1, 5)),  # new: no delete
        ("insert", None, _row(2)), ("delete", _row(2), None),  # new and gone: nothing
        ("update", _row(4), _row(4, 7)), ("delete", _row(4), None),
        ("insert", None, _row(4, 8)),  # an old key: deleted, then its last image
        ("delete", _row(6), None),  # an old key gone
        ("update", _row(7), _row(9, 1)),  # a key moved: 7 deleted, 9 written
    ]
    upserts, deleted = _delta(changes)
    assert upserts == [{"id": 1, "qty": 5}, {"id": 4, "qty": 8}, {"id": 9, "qty": 1}]
    assert deleted == [4, 6, 7, 9]
    # Without append_new_keys, every key the batch touches is deleted first.
    assert _delta(changes, append_new_keys=False)[1] == [1, 2, 4, 6, 7, 9]
    assert _delta([("insert", None, _row(1)), ("delete", _row(1), None)]) == (None, None)


def _delta_by_rows(run: Any, rows: Any, append_new_keys: bool) -> tuple[Any, Any]:
    """The row delta computed row by row in Python (what mirror_delta computes in Arrow)."""
    names = run.key_names
    ops = rows.column("_op").to_pylist()
    after = [rows.column(n).to_pylist() for n in names]
    before = [rows.column(f"__before_{i}").to_pylist() for i in run.schema.primary_key]
    last: dict[Any, Any] = {}
    first: dict[Any, str] = {}
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
    gone = [list(key) for key in last if not (append_new_keys and first[key] == "insert")]
    return present, gone


def _random_run(seed: int) -> TableRun:
    """A run of random inserts, updates (a third of them moving the key) and deletes."""
    import random

    rng = random.Random(seed)
    log = Binlog()
    present: dict[int, dict[str, Any]] = {}
    transactions = []
    for _ in range(rng.randint(1, 40)):
        changes = []
        for _ in range(rng.randint(1, 6)):
            key = rng.randint(1, 15)
            if key not in present:
                row = _row(key, rng.randint(0, 9))
                changes.append(("insert", T, None, row))
                present[key] = row
            elif rng.random() < 0.3:
                changes.append(("delete", T, present.pop(key), None))
            else:
                new_key = rng.choice([key, key, rng.randint(1, 15)])
                if new_key != key and new_key in present:
                    new_key = key
                row = _row(new_key, rng.randint(0, 9))
                changes.append(("update", T, present.pop(key), row))
                present[new_key] = row
        transactions.append(log.transaction(changes))
    (run,) = table_runs(transactions)
    return run


@pytest.mark.parametrize("seed", range(30))
def test_the_row_delta_is_what_a_row_by_row_walk_gives(seed: int) -> None:
    run = _random_run(seed)
    rows = run.frame
    for append_new_keys in (True, False):
        upserts, deleted = mirror_delta(run, rows, append_new_keys)
        at, gone = _delta_by_rows(run, rows, append_new_keys)
        want = rows.take(at).select(["id", "name", "qty"]).to_pylist() if at else None
        assert (None if upserts is None else upserts.to_pylist()) == want
        assert (None if deleted is None else [list(r.values()) for r in deleted.to_pylist()]) \
            == (gone or None)


@pytest.mark.parametrize("seed", range(30))
def test_the_compiled_one_pass_delta_is_the_group_by_s(seed: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An integer key's delta comes from the compiled pass when it is built; the general
    path (Arrow's group-by) gives the same tables."""
    if mirror_plan._key_events() is None:
        pytest.skip("the compiled parts are not built (or CHANGESTREAM_PURE_PYTHON=1)")
    run = _random_run(seed)
    rows = run.frame
    for append_new_keys in (True, False):
        one_pass = mirror_plan._one_integer_key_delta(run, rows, append_new_keys)
        assert one_pass is not None
        with monkeypatch.context() as m:
            m.setattr(mirror_plan, "_one_integer_key_delta", lambda *_: None)
            general = mirror_delta(run, rows, append_new_keys)
        for made, want in zip(one_pass, general):
            assert (made is None) == (want is None)
            if made is not None:
                assert made.equals(want), (made.to_pylist(), want.to_pylist())


@pytest.mark.parametrize("keys", [[3, 1, 2], [5], [1, 2, 1]])
def test_a_batch_of_inserts_takes_the_walk_s_delta(keys: list[int]) -> None:
    """Inserts only (the delta made without a group-by when their keys are distinct; a key
    inserted twice takes the general path)."""
    log = Binlog()
    (run,) = table_runs([log.transaction([("insert", T, None, _row(k, i))])
                         for i, k in enumerate(keys)])
    _assert_the_walk_s_delta(run)


def _assert_the_walk_s_delta(run: TableRun) -> None:
    """``mirror_delta`` of ``run``'s frame, either way of ``append_new_keys``, is what the
    row-by-row walk gives."""
    rows = run.frame
    columns = [f.name for f in run.fields]
    for append_new_keys in (True, False):
        upserts, deleted = mirror_delta(run, rows, append_new_keys)
        at, gone = _delta_by_rows(run, rows, append_new_keys)
        assert upserts is not None
        assert upserts.to_pylist() == rows.take(at).select(columns).to_pylist()
        assert (None if deleted is None else [list(r.values()) for r in deleted.to_pylist()]) \
            == (gone or None)


@pytest.mark.parametrize("keys", [[3, 1, 2], [5], [1, 2, 1]])
def test_a_batch_of_snapshot_rows_takes_the_walk_s_delta(keys: list[int]) -> None:
    """A snapshot's rows: the delta made without a group-by when their keys are distinct
    (each key deleted first: the mirror may have it), else on the general path."""
    log = Binlog()
    (run,) = table_runs([log.transaction([("snapshot", T, None, _row(k, i))])
                         for i, k in enumerate(keys)])
    _assert_the_walk_s_delta(run)


def test_a_batch_of_inserts_of_a_composite_key_takes_the_walk_s_delta() -> None:
    schema = simple_schema("lines", ("id", "qty", "name"))
    schema = type(schema)(schema.database, schema.table, schema.columns, primary_key=(0, 1),
                          names_logged=True)
    for keys in ([(1, 1), (1, 2), (2, 1)], [(1, 1), (1, 2), (1, 1)]):  # the last: twice
        log = Binlog()
        (run,) = table_runs([log.transaction([
            ("insert", schema, None, {"id": i, "qty": q, "name": f"r{n}"})
            for n, (i, q) in enumerate(keys)])])
        _assert_the_walk_s_delta(run)


N = simple_schema("n", ("id", "name"), pk=False)
_DUP, _ONE = {"id": 0, "name": "dup"}, {"id": 1, "name": "one"}


def _keyless_run(transactions: list[list[tuple[str, Any, Any]]], arrow_workers: bool
                 ) -> TableRun:
    log = Binlog()
    parts = [log.transaction([(op, N, before, after) for op, before, after in changes])
             for changes in transactions]
    if arrow_workers:  # the frames decode workers hand over, as the sink gets them
        records = encode_runs(table_runs(parts, all_before=True))
        parts = [EncodedRun(records, sum(len(p.changes) for p in parts), len(parts), None,
                            parts[-1].position)]
    (run,) = table_runs(parts)
    return run


@pytest.mark.parametrize("arrow_workers", [False, True], ids=["parts", "arrow-workers"])
@pytest.mark.parametrize("transactions, expected", [
    # DELETE ... LIMIT 1 of a duplicate, then the same row inserted again: nothing to do.
    ([[("delete", _DUP, None)], [("insert", None, _DUP)]], []),
    ([[("insert", None, {"id": 7, "name": "x"}), ("delete", {"id": 7, "name": "x"}, None)]],
     []),
    ([[("update", _ONE, {"id": 1, "name": "uno"})],
      [("update", {"id": 1, "name": "uno"}, _ONE)]], []),
    ([[("delete", _DUP, None), ("insert", None, _DUP), ("delete", _ONE, None)]],
     [(1, "one", "delete")]),
    ([[("delete", _DUP, None)]], [(0, "dup", "delete"), (0, "dup", "upsert")]),
])
def test_keyless_changes_that_cancel_out_leave_an_empty_merge_source(
        spark: Any, transactions: list[list[tuple[str, Any, Any]]],
        expected: list[tuple[Any, ...]], arrow_workers: bool) -> None:
    # The mirror already holds rows: two equal ones and another.
    spark.createDataFrame([(0, "dup"), (0, "dup"), (1, "one")], "id BIGINT, name STRING") \
        .createOrReplaceTempView("held")
    run = _keyless_run(transactions, arrow_workers)
    frame_dataframe(spark, run, run.frame).createOrReplaceTempView("changes")
    source = spark.sql(multiset_source(run, "changes", "held")).collect()
    assert sorted((r["id"], r["name"], r["_op"]) for r in source) == sorted(expected)


@pytest.mark.parametrize("arrow_workers", [False, True], ids=["parts", "arrow-workers"])
@pytest.mark.parametrize("transactions, added, removed", [
    ([[("delete", _DUP, None)], [("insert", None, _DUP)]], [], []),
    ([[("delete", _DUP, None)], [("delete", _DUP, None)]], [], [(0, "dup", 2)]),
    ([[("insert", None, _DUP), ("insert", None, _DUP), ("delete", _ONE, None)]],
     [(0, "dup"), (0, "dup")], [(1, "one", 1)]),
    ([[("update", _ONE, {"id": 1, "name": "uno"}), ("insert", None, _ONE)]],
     [(1, "uno")], []),
])
def test_keyless_changes_are_copies_added_and_removed(
        transactions: list[list[tuple[str, Any, Any]]], added: list[tuple[Any, ...]],
        removed: list[tuple[Any, ...]], arrow_workers: bool) -> None:
    run = _keyless_run(transactions, arrow_workers)
    over = arrow_schema(run.fields)
    adds, removes = mirror_keyless.keyless_copies(run, run.frame, over)
    assert ([(r["id"], r["name"]) for r in adds.to_pylist()] if adds is not None else []) \
        == added
    expected = {row_hashes(pa.table({"id": pa.array([i], pa.int64()), "name": [name]}), over)
                .column(ROW_HASH)[0].as_py(): copies for i, name, copies in removed}
    assert ({r[ROW_HASH]: r[COPIES] for r in removes.to_pylist()}
            if removes is not None else {}) == expected




@pytest.mark.parametrize("arrow_workers", [False, True], ids=["parts", "arrow-workers"])
def test_keyless_rows_only_added_are_copies_without_hashing(
        arrow_workers: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that only adds rows to a keyless table (inserts, a snapshot's rows, equal
    rows among them) adds each as a copy, in batch order, and removes none: no row is
    hashed or counted (1,000,000 snapshot rows took 2.85 s to plan that way)."""
    def no_hashing(*_: Any) -> None:
        raise AssertionError("rows hashed")

    monkeypatch.setattr(mirror_keyless, "row_hashes", no_hashing)
    two = {"id": 2, "name": "two"}
    run = _keyless_run([[("insert", None, _DUP), ("insert", None, two)],
                        [("insert", None, _DUP)], [("insert", None, _ONE)]], arrow_workers)
    adds, removes = mirror_keyless.keyless_copies(run, run.frame, arrow_schema(run.fields))
    assert removes is None and adds is not None
    assert [(r["id"], r["name"]) for r in adds.to_pylist()] == \
        [(0, "dup"), (2, "two"), (0, "dup"), (1, "one")]
    assert adds.column_names == [f.name for f in run.fields]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("arrow_workers", [False, True], ids=["parts", "arrow-workers"])
def test_keyless_copies_are_the_batch_s_net_multiset_change(seed: int,
                                                             arrow_workers: bool) -> None:
    """Random batches of inserts, updates and deletes over few row values (repeats, NULLs,
    values that come and go again): the rows added and the copies removed are what
    replaying the batch on a multiset gives, value for value."""
    import random
    from collections import Counter

    rng = random.Random(seed)
    values = [{"id": i % 3 if i % 4 else None, "name": f"v{i % 5}" if i % 6 else None}
              for i in range(9)]
    transactions, net = [], Counter[tuple[Any, Any]]()
    for _ in range(rng.randint(1, 6)):
        changes = []
        for _ in range(rng.randint(1, 8)):
            op = rng.choice(["insert", "delete", "update", "update"])
            before, after = rng.choice(values), rng.choice(values)
            if op in ("delete", "update"):
                net[(before["id"], before["name"])] -= 1
            if op in ("insert", "update"):
                net[(after["id"], after["name"])] += 1
            changes.append((op, before if op != "insert" else None,
                            after if op != "delete" else None))
        transactions.append(changes)
    run = _keyless_run(transactions, arrow_workers)
    over = arrow_schema(run.fields)
    adds, removes = mirror_keyless.keyless_copies(run, run.frame, over)
    added = Counter((r["id"], r["name"]) for r in adds.to_pylist()) if adds is not None \
        else Counter()
    assert added == Counter({value: n for value, n in net.items() if n > 0})
    hash_of = {row_hashes(pa.table({"id": pa.array([i], pa.int64()),
                                    "name": pa.array([name], pa.string())}), over)
               .column(ROW_HASH)[0].as_py(): (i, name) for i, name in net}
    removed = {hash_of[r[ROW_HASH]]: r[COPIES] for r in removes.to_pylist()} \
        if removes is not None else {}
    assert removed == {value: -n for value, n in net.items() if n < 0}
    if adds is not None:  # in the order of the images that hold them
        assert adds.num_rows == sum(n for n in net.values() if n > 0)


def test_a_snapshot_s_keys_need_not_be_in_the_mirror() -> None:
    """A key the index lacks means an index behind the table only when the batch's deleted
    keys must exist: not for a snapshot's rows (upserts of keys the mirror may never have
    had), else each snapshot batch would read the mirror's key index again."""
    log = Binlog()
    (changes,) = table_runs([log.transaction([("update", T, _row(1), _row(1, 2))])])
    (snapshot,) = table_runs([log.transaction([("snapshot", T, None, _row(2))])])
    assert keys_must_exist(changes, append_new_keys=True)
    assert not keys_must_exist(changes, append_new_keys=False)
    assert not keys_must_exist(snapshot, append_new_keys=True)
