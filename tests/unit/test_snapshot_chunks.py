"""Chunked reads: keyset pagination SQL, and a chunk's rows against its window's changes."""

from __future__ import annotations

import pytest

from changestream.snapshot.chunks import ChunkQuery, after_condition
from changestream.snapshot.window import ChangedKeys


def test_first_and_next_chunk_of_a_single_column_key() -> None:
    q = ChunkQuery("shop", "orders", ("id", "qty"), ("id",), 1000)
    assert q.select(None) == (
        "SELECT `id`, `qty` FROM `shop`.`orders` ORDER BY `id` LIMIT 1000", ())
    assert q.select((41,)) == (
        "SELECT `id`, `qty` FROM `shop`.`orders` WHERE `id` > %s ORDER BY `id` LIMIT 1000",
        (41,))
    assert q.key_of((41, 3)) == (41,)


def test_composite_key_condition_is_ors_of_equal_prefixes() -> None:
    sql, args = after_condition(("a", "b", "c"), (1, "x", 2.5))
    assert sql == ("(`a` > %s OR (`a` = %s AND `b` > %s) OR "
                   "(`a` = %s AND `b` = %s AND `c` > %s))")
    assert args == (1, 1, "x", 1, "x", 2.5)
    q = ChunkQuery("d", "we`ird", ("b", "a", "v"), ("a", "b"), 10)
    assert q.select((1, "x"))[0] == (
        "SELECT `b`, `a`, `v` FROM `d`.`we``ird` WHERE (`a` > %s OR (`a` = %s AND `b` > %s)) "
        "ORDER BY `a`, `b` LIMIT 10")
    assert q.key_of(("x", 1, None)) == (1, "x")


def test_a_chunk_query_needs_a_key_among_its_columns() -> None:
    with pytest.raises(ValueError, match="needs a key"):
        ChunkQuery("d", "t", ("a",), (), 10)
    with pytest.raises(ValueError, match=r"key columns \['k'\]"):
        ChunkQuery("d", "t", ("a",), ("k",), 10)
    with pytest.raises(ValueError, match="2 columns, got 1"):
        ChunkQuery("d", "t", ("a", "b"), ("a", "b"), 10).select((1,))


def test_rows_whose_key_changed_in_the_window_are_dropped() -> None:
    window = ChangedKeys(("id",))
    window.note(None, {"id": 2, "v": "new"})            # inserted in the window
    window.note({"id": 3, "v": "a"}, {"id": 30, "v": "a"})  # key moved: both keys
    window.note({"id": 5, "v": "gone"}, None)           # deleted
    rows = [((i,), {"id": i}) for i in (1, 2, 3, 4, 30)]
    assert window.unchanged(rows) == [{"id": 1}, {"id": 4}]
