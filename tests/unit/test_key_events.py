"""The compiled one-pass row delta of a mirror keyed by one integer column: each key's last
event kept (unless a delete), the keys to delete first in the order of their first events."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from changestream.native import compiled  # noqa: E402

native = compiled("changestream.sinks.spark._key_events")
pytestmark = pytest.mark.skipif(native is None, reason="the compiled parts are not built "
                                "(or CHANGESTREAM_PURE_PYTHON=1)")

INS, U, D, S = 0, 1, 2, 3  # insert, update, delete, a snapshot's row


def delta(changes: list[tuple[int, int, int | None]], append_new_keys: bool = True
          ) -> tuple[list[int], list[int], int]:
    """(op, key, key before) a row -> (rows kept, keys deleted, how many kept)."""
    ops = pa.array([op for op, _, _ in changes], pa.uint8())
    after = pa.array([key for _, key, _ in changes], pa.int64())
    before = pa.array([old if old is not None else 0 for _, _, old in changes], pa.int64())
    moved = pa.array([int(old is not None and old != key) for _, key, old in changes],
                     pa.uint8())
    kept, deleted, present = native.key_events(after, before, moved, ops, append_new_keys)
    rows = [i for i, keep in enumerate(kept.to_pylist()) if keep]
    assert len(rows) == present
    return rows, deleted.to_pylist(), present


def test_each_key_keeps_its_last_image_and_the_keys_it_may_have_are_deleted() -> None:
    changes = [
        (INS, 1, None), (U, 1, 1),  # new, then updated: its last image, no delete
        (INS, 2, None), (D, 2, None),  # new and gone: nothing
        (U, 4, 4), (D, 4, None), (INS, 4, None),  # an old key: deleted, then its last image
        (D, 6, None),  # an old key gone
        (U, 9, 7),  # a key moved: 7 deleted, 9 written
    ]
    assert delta(changes) == ([1, 6, 8], [4, 6, 7, 9], 3)
    # Without append_new_keys, every key the batch touches is deleted first.
    assert delta(changes, append_new_keys=False)[1] == [1, 2, 4, 6, 7, 9]


def test_a_moved_key_s_old_key_is_gone_unless_a_later_row_brings_it_back() -> None:
    # a move is its old key's event just before its new key's
    assert delta([(U, 2, 1), (INS, 1, None)]) == ([0, 1], [1, 2], 2)
    assert delta([(U, 2, 1), (U, 3, 2)]) == ([1], [1, 2, 3], 1)


def test_a_snapshot_s_rows_are_upserts_whose_keys_are_deleted_first() -> None:
    assert delta([(S, 5, None), (S, 6, None), (S, 5, None)]) == ([1, 2], [5, 6], 2)


def test_keys_far_apart_and_colliding_in_the_table_are_told_apart() -> None:
    keys = [0, -1, 2**62, -(2**63), 2**63 - 1] + [i * 1024 for i in range(1, 200)]
    rows, deleted, present = delta([(U, k, k) for k in keys] + [(D, k, None) for k in keys[:3]])
    assert rows == list(range(3, len(keys)))
    assert deleted == keys and present == len(keys) - 3


def test_an_empty_batch_and_bad_input() -> None:
    assert delta([]) == ([], [], 0)
    one = pa.array([1], pa.int64())
    code = pa.array([0], pa.uint8())
    with pytest.raises(TypeError, match="int64"):
        native.key_events(pa.array([1], pa.int32()), one, code, code, True)
    with pytest.raises(TypeError, match="int64"):
        native.key_events(pa.array([None], pa.int64()), one, code, code, True)
    with pytest.raises(ValueError, match="one length"):
        native.key_events(pa.array([1, 2], pa.int64()), one, code, code, True)
    # an array sliced out of a longer one is read where it lies
    long = pa.array([7, 8, 9], pa.int64())
    kept, deleted, _ = native.key_events(long.slice(1, 2), long.slice(1, 2),
                                               pa.array([0, 0], pa.uint8()),
                                               pa.array([1, 1], pa.uint8()), True)
    assert kept.to_pylist() == [True, True] and deleted.to_pylist() == [8, 9]
